// Helpers the tpusim commands share (options: sw/common/cli.h): the shipped configuration files,
// the matmul shape and file options, and a progress line for long runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "json.h"
#include "output.h"
#include "tpu/limits.h"

namespace tpu {

// A file of the source tree (e.g. "configs/default.yaml"): relative to the working directory
// when it is there, else in the tree tpusim was built from.
inline std::string source_file(const std::string& rel) {
  if (FILE* f = std::fopen(rel.c_str(), "r")) {
    std::fclose(f);
    return rel;
  }
  return std::string(TPU_SOURCE_DIR) + "/" + rel;
}

// A shared range (model/include/tpu/limits.h) as an option's check.
inline CLI::Validator in_range(const UintRange& r) { return cli::uint_in(r.lo, r.hi); }

// The shape and seed of a matmul with random operands, as every command declares them: --m,
// --k and --n (each 1..max; `what`: their help, in that order), then --seed (kSeedRange).
// Returns the four options (for the rules between them and other options).
inline std::vector<CLI::Option*> add_matmul_shape(CLI::App* cmd, std::size_t& m, std::size_t& k,
                                                  std::size_t& n, uint64_t& seed, uint64_t max,
                                                  const std::vector<const char*>& what,
                                                  const char* seed_what) {
  std::vector<CLI::Option*> v;
  std::size_t* dims[3] = {&m, &k, &n};
  const char* flags[3] = {"--m", "--k", "--n"};
  const char* names[3] = {"M", "K", "N"};
  for (std::size_t i = 0; i < 3; ++i)
    v.push_back(cmd->add_option(flags[i], *dims[i], what.at(i))
                    ->type_name(names[i])
                    ->check(cli::uint_in(1, max))
                    ->capture_default_str());
  v.push_back(cmd->add_option("--seed", seed, seed_what)
                  ->type_name("S")
                  ->check(in_range(kSeedRange))
                  ->capture_default_str());
  return v;
}

// --a and --w: the operands from .npy files instead (`a_help`: --a's help, `a_type` its file
// name), each needing the other and excluding the `random` options (add_matmul_shape's).
inline void add_matmul_files(CLI::App* cmd, std::string& a, std::string& w, const char* a_help,
                             const char* a_type, const std::vector<CLI::Option*>& random) {
  CLI::Option* fa = cmd->add_option("--a", a, a_help)->type_name(a_type)->check(cli::input_path());
  CLI::Option* fw = cmd->add_option("--w", w, "W from a file (with --a)")
                        ->type_name("W.npy")
                        ->check(cli::input_path());
  fa->needs(fw);
  fw->needs(fa);
  for (CLI::Option* r : random) {
    fa->excludes(r);
    fw->excludes(r);
  }
}

// A progress line on stderr, at most every two seconds, for runs long enough to need one; the
// line is closed when the object goes.
class ProgressLine {
 public:
  ProgressLine(std::string label, bool quiet) : label_(std::move(label)), quiet_(quiet) {}
  ~ProgressLine() {
    if (printed_) std::fprintf(stderr, "\n");
  }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // "done/total what (P%)".
  void operator()(uint64_t done, uint64_t total, const char* what) {
    char text[160];
    std::snprintf(text, sizeof text, "%llu/%llu %s (%.0f%%)", static_cast<unsigned long long>(done),
                  static_cast<unsigned long long>(total), what,
                  total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0);
    show(text);
  }
  void show(const std::string& text) {
    const auto now = std::chrono::steady_clock::now();
    if (quiet_ || now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    printed_ = true;
    std::fprintf(stderr, "\r[tpusim] %s: %s, %.1f s", label_.c_str(), text.c_str(),
                 std::chrono::duration<double>(now - t0_).count());
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool quiet_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = t0_;
};

}  // namespace tpu
