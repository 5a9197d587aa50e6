// The command line every bench shares: `--list`, `--only CASE[,CASE...]`, and the output: one
// report per case (sw/common/report.h) as a JSON array on stdout, each summary on stderr.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "report.h"

namespace tpu {

struct BenchCase {
  const char* name;
  const char* what;                 // one line for --list
  std::function<Report()> run;
  bool by_default = true;           // run without --only
};

// Runs the cases `argv` selects; returns the exit code (2: a bad option or case name).
inline int bench_main(const char* tool, int argc, char** argv,
                      const std::vector<BenchCase>& cases) {
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string x;
      while (std::getline(ss, x, ',')) only.push_back(x);
    } else if (a == "--list") {
      for (const BenchCase& c : cases) std::printf("%-10s %s\n", c.name, c.what);
      return 0;
    } else {
      std::fprintf(stderr, "usage: %s [--only CASE[,CASE...]] [--list]\n", tool);
      return 2;
    }
  }
  for (const std::string& o : only) {
    if (std::none_of(cases.begin(), cases.end(), [&](const BenchCase& c) { return o == c.name; })) {
      std::fprintf(stderr, "%s: --only %s: not a case (%s --list)\n", tool, o.c_str(), tool);
      return 2;
    }
  }
  bool first = true;
  std::printf("[\n");
  for (const BenchCase& c : cases) {
    if (only.empty() ? !c.by_default : std::find(only.begin(), only.end(), c.name) == only.end())
      continue;
    const Report r = c.run();
    std::fputs(r.summary().c_str(), stderr);
    std::printf("%s%s", first ? "" : ",\n", r.json().dump(2).c_str());
    std::fflush(stdout);
    first = false;
  }
  std::printf("\n]\n");
  return 0;
}

}  // namespace tpu
