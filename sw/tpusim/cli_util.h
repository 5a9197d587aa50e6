// Helpers the tpusim commands share (options: sw/common/cli.h): the shipped configuration files,
// the matmul shape and file options; the progress line of long runs is sw/common/progress.h.
#pragma once

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
#include "progress.h"  // ProgressLine, for every command
#include "source_file.h"
#include "tpu/limits.h"

namespace tpu {

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

// --config and --variant of a command on one chip: its configuration file and an override of
// the file's chip.variant.
inline void add_chip_config(CLI::App* cmd, std::string& config, std::string& variant) {
  cmd->add_option("--config", config, "chip configuration (default configs/default.yaml)")
      ->type_name("FILE")
      ->check(cli::input_path());
  cmd->add_option("--variant", variant, "override chip.variant (e.g. 4x4)")->type_name("RxC");
}

// --json, --quiet and --check of a job on one chip (run_chip_job); `inputs` names what --check
// checks beside the line and the config ("the inputs", "the operands").
inline void add_chip_job_flags(CLI::App* cmd, std::string& json, bool& quiet, bool& check,
                               const std::string& inputs) {
  cmd->add_option("--json", json, "write the JSON report")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_flag("--quiet", quiet, "no progress line");
  cmd->add_flag("--check", check,
                "check the line, the config, " + inputs +
                    " and the plan, then stop\n"
                    "before the first simulated cycle: exit 0, no files written");
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

// A job on one chip (MatmulJob, VpuJob) as a command runs it: under a progress line, then its
// summary and golden check on stdout (flushed, so they stay if a file cannot be written), its
// output files, and the JSON report at `json` ("" for none). Returns whether the check passed.
template <class Job>
bool run_chip_job(Job& job, bool quiet, const std::string& json) {
  {
    ProgressLine line(job.label(), quiet);
    job.set_progress([&line](const RunProgress& p) { line.update(p); });
    job.run();
    job.set_progress(nullptr);
  }
  const auto rep = job.take_report();
  std::fputs(rep.summary().c_str(), stdout);
  job.print_check();
  std::fflush(stdout);
  job.write_outputs();  // a failed write is an error naming the path (exit 2)
  if (!json.empty()) rep.write(json);
  return job.pass();
}

}  // namespace tpu
