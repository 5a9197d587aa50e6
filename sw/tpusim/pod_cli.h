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
  bool twist = false;             // --twist: a twisted torus (docs/topology.md)

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
// else 1 (a golden mismatch). With a ReportSink on the thread, the report goes there instead.
int finish_pod_report(const Report& rep, const PodOptions& o, bool pass);

// Where finish_pod_report on this thread puts the report while a ScopedReportSink lives: tpusim
// slices runs a command line per slice on threads of their own and prints their reports after.
struct ReportSink {
  bool filled = false;
  Json json;
  std::string summary;
};
class ScopedReportSink {
 public:
  explicit ScopedReportSink(ReportSink& sink);
  ~ScopedReportSink();
  ScopedReportSink(const ScopedReportSink&) = delete;
  ScopedReportSink& operator=(const ScopedReportSink&) = delete;

 private:
  ReportSink* prev_;
};

// --kind of a collective command (required).
inline void add_collective_kind(CLI::App* cmd, std::string& kind) {
  cmd->add_option("--kind", kind, "the collective")
      ->type_name("K")
      ->check(
          CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast"}))
      ->required();
}

// The options of a collective that `tpusim allreduce`, `collective` and `sweep` share, defined
// once: --dtype, --algo, --op, --root (with `kind`: the broadcast's), --mesh and --axis (each
// needing the other). A has the members of those names.
template <class A>
void add_collective_flags(CLI::App* cmd, A& a, bool kind) {
  cmd->add_option("--dtype", a.dtype, "element type (bf16 accumulates in f32)")
      ->type_name("f32|bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--algo", a.algo,
                  "ring|biring|torus|direct (default torus, or biring on one dimension,\n"
                  "for all_reduce; direct for all_to_all; ring for the others; torus:\n"
                  "all_reduce only; direct: all_reduce and all_to_all)")
      ->type_name("A")
      ->check(CLI::IsMember({"ring", "biring", "torus", "direct"}));
  cmd->add_option("--op", a.op, "reduction")
      ->type_name("sum|max")
      ->check(CLI::IsMember({"sum", "max"}))
      ->capture_default_str();
  if (kind)
    cmd->add_option("--root", a.root, "broadcast root: rank within its group")
        ->type_name("R")
        ->check(cli::uint_in(0, 4095))
        ->capture_default_str();
  CLI::Option* mesh =
      cmd->add_option("--mesh", a.mesh,
                      "named mesh axes over the torus dimensions, x first, e.g. x=4,y=4 or\n"
                      "data=16,model=4 (default: one axis 'all' of every chip)")
          ->type_name("AXES");
  CLI::Option* axis =
      cmd->add_option("--axis", a.axis,
                      "the collective runs over this axis, in every group at once")
          ->type_name("NAME");
  mesh->needs(axis);  // the axis names one of the mesh's axes
  axis->needs(mesh);
}

}  // namespace tpu
