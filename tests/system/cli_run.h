// What the command-line tests share: run a command line or the tpusim binary (TPUSIM, a compile
// definition) with arguments, and read a file whole.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace tpu {

struct CliRun {
  int code = -1;     // exit status (-1: killed by a signal or not run)
  std::string out;   // stdout and stderr together
};

// Runs a shell command line; its stdout and stderr together, and its exit status.
inline CliRun run_command(const std::string& line) {
  const std::string cmd = line + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#ifdef TPUSIM
// tpusim under a launcher (e.g. "mpirun -np 2"; "" for none).
inline CliRun tpusim_with(const std::string& launcher, const std::string& args) {
  return run_command((launcher.empty() ? "" : launcher + " ") + std::string(TPUSIM) + " " + args);
}
inline CliRun tpusim(const std::string& args) { return tpusim_with("", args); }
#endif

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tpu
