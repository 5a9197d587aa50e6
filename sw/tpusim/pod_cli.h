// What the pod commands of tpusim share (pod_cmd.cc, shard_cmd.cc, train_cmd.cc): options, the
// engine, the pod and link sections of a report.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chip_config.h"
#include "cli.h"
#include "host_port.h"
#include "json.h"
#include "pod.h"
#include "pod_driver.h"
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
// --trace FILE and --trace-cycles FROM:TO: the timeline's options.
TraceOptions trace_options(const PodOptions& o);
// Runs job on the pod the options ask for: --engine systemc (default; TLM host sockets) or cpp;
// --waves-chips; with --trace, the timeline of the whole job written at its end (clock_ghz:
// the pod's clock, for the timestamps).
void with_pod(const PodOptions& opt, PodParams params, double clock_ghz,
              const std::function<void(HostPort&)>& job);
// The chips of chip c's group over the torus dimensions `dims` (empty: the pod).
std::vector<int> group_of(const Topology& t, const std::vector<int>& dims, int c);
// Per-link bytes and the busiest link (group "ici").
ReportGroup& add_links(Report& rep, const std::vector<LinkStat>& flits, uint64_t row_bytes,
                       const Topology& topo);
// tool, config, engine and the pod's shape and links (group "pod").
void add_pod(Report& rep, const PodConfig& cfg, const MachineInfo& mi, const PodOptions& opt);
// Per chip: cycles and the unit counters of a program run.
Json chip_table(const PodProgramRun& pr);

}  // namespace tpu
