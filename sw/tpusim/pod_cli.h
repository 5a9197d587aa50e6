// What the pod commands of tpusim share (pod_cmd.cc, shard_cmd.cc, train_cmd.cc): their options
// and what they make of them for the jobs (sw/jobs: the engine, the reports' common parts).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chip_config.h"
#include "cli.h"
#include "cli_util.h"
#include "engine.h"
#include "report.h"

namespace tpu {

// The options every command that runs the pod takes (add_pod_options).
struct PodOptions {
  const CLI::App* cmd = nullptr;  // the command (add_pod_config), to ask what was given
  std::string config;             // --config; empty: configs/pod_2x2.yaml
  std::string engine = "systemc";
  unsigned threads = 1;           // add_pod_options sets the default: the machine's cores
  std::string waves_chips;        // "0,3"
  std::vector<std::string> faults;
  uint64_t watchdog = 0;          // when given
  std::string json, trace, trace_cycles;
  bool quiet = false;
  bool check = false;             // --check: stop before the first simulated cycle (CheckPort)

  bool given(const char* flag) const { return cmd->count(flag) > 0; }
  // --config, or the default configs/pod_2x2.yaml.
  std::string config_path() const;
};

// Declares --config on cmd, first of a pod command's options (its help lists them in order).
void add_pod_config(CLI::App* cmd, PodOptions& o);
// Declares on cmd the options every pod command takes after its own: --engine, --watchdog and
// the repeatable --fault; unless `bare` (tpusim hang) also --threads, --waves-chips, --json,
// --trace and --quiet. --trace-cycles is the commands' own (add_trace_cycles): train has
// --trace-steps.
void add_pod_options(CLI::App* cmd, PodOptions& o, bool bare = false);
// --trace-cycles A:B (pod cycles; needs --trace).
void add_trace_cycles(CLI::App* cmd, PodOptions& o);
// The engine the options ask for (sw/jobs/engine.h): --engine, --threads, --waves-chips,
// --fault, --watchdog (when given), --trace, --trace-cycles and --check.
EngineOptions engine_options(const PodOptions& o);
// A progress line's callback showing the pod's cycles (the jobs count them from the run's
// start); no total, so no estimate of what is left.
std::function<void(uint64_t)> show_cycles(ProgressLine& line);
// The end of a pod command: the JSON report (--json), the summary on stdout; exit 0 on `pass`,
// else 1 (a golden mismatch).
int finish_pod_report(const Report& rep, const PodOptions& o, bool pass);

}  // namespace tpu
