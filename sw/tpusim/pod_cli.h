// What the pod commands of tpusim share (pod_cmd.cc, shard_cmd.cc): options, the engine, the
// pod and link sections of a report.
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

// The options of a pod command (parse_cli, sw/common/cli.h, plus --watchdog N and the repeatable
// --fault KEY=VALUE): `valued` take a value, `flags` none. An unknown option (the message
// ends with `usage`), a missing value or an option given twice is std::invalid_argument, --help
// is HelpRequested; each
// of `out_paths` that is given must name a file in a directory that exists (checked before any
// simulation, so a long run does not end in a failed write).
Opts parse_options(const std::vector<std::string>& args, const std::vector<std::string>& valued,
                   const std::vector<std::string>& flags, const char* usage,
                   const std::vector<std::string>& out_paths = {"--json", "--trace"});
// --threads N (1..256; default: the machine's cores, shared by the MPI ranks on it): threads
// stepping the chips.
unsigned pod_threads(const Opts& opt);
// "0,3" -> {0, 3} (--waves-chips).
std::vector<int> parse_chips(const std::string& v);
// --trace FILE and --trace-cycles FROM:TO: the timeline's options.
TraceOptions trace_options(const Opts& opt);
// Runs job on the pod the options ask for: --engine systemc (default; TLM host sockets) or cpp;
// --waves-chips; with --trace, the timeline of the whole job written at its end (clock_ghz:
// the pod's clock, for the timestamps).
void with_pod(const Opts& opt, PodParams params, double clock_ghz,
              const std::function<void(HostPort&)>& job);
// The chips of chip c's group over the torus dimensions `dims` (empty: the pod).
std::vector<int> group_of(const Topology& t, const std::vector<int>& dims, int c);
// Per-link bytes and the busiest link (group "ici").
ReportGroup& add_links(Report& rep, const std::vector<LinkStat>& flits, uint64_t row_bytes,
                       const Topology& topo);
// tool, config, engine and the pod's shape and links (group "pod").
void add_pod(Report& rep, const PodConfig& cfg, const MachineInfo& mi, const Opts& opt);
// Per chip: cycles and the unit counters of a program run.
Json chip_table(const PodProgramRun& pr);

}  // namespace tpu
