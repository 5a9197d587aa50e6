#include "pod_cmd.h"

#include "pod_cli.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "collective_job.h"
#include "pod_job.h"
#include "pod_mpi.h"

namespace tpu {

std::string PodOptions::config_path() const {
  return config.empty() ? source_file("configs/pod_2x2.yaml") : config;
}

namespace {

// --threads' default: the machine's cores, shared by the MPI ranks on this machine.
unsigned default_threads() {
  return std::max(1u, std::thread::hardware_concurrency() /
                          static_cast<unsigned>(mpi_world().local_size));
}

}  // namespace

void add_pod_config(CLI::App* cmd, PodOptions& o) {
  o.cmd = cmd;
  cmd->add_option("--config", o.config, "pod configuration (default configs/pod_2x2.yaml)")
      ->type_name("FILE")
      ->check(cli::input_path());
}

void add_pod_options(CLI::App* cmd, PodOptions& o, bool bare) {
  o.threads = default_threads();
  cmd->add_option("--engine", o.engine,
                  "SystemC pod with TLM host sockets, or plain C++ stepping")
      ->type_name("systemc|cpp")
      ->check(CLI::IsMember({"systemc", "cpp"}))
      ->capture_default_str();
  if (!bare) {
    cmd->add_option("--threads", o.threads,
                    "threads stepping the chips, either engine (default: the cores;\n"
                    "the same bits and cycles for any N)")
        ->type_name("N")
        ->check(cli::uint_in(1, 256));
    cmd->add_option("--waves-chips", o.waves_chips,
                    "FST waves of these chips, e.g. 0,3 (waves/pod_chipN.fst)")
        ->type_name("LIST")
        ->check(cli::list_of(cli::uint_in(0, 4095)));
    cmd->add_option("--json", o.json, "write the JSON report")
        ->type_name("FILE")
        ->check(cli::output_path());
    cmd->add_option("--trace", o.trace,
                    "write the timeline (Chrome trace-event JSON: ui.perfetto.dev)")
        ->type_name("FILE")
        ->check(cli::output_path());
    cmd->add_flag("--quiet", o.quiet, "no progress line");
    cmd->add_flag("--check", o.check,
                  "check the line, the config, the inputs and the plan (capacities),\n"
                  "then stop before the first simulated cycle: exit 0, no files written");
  }
  cli::repeatable(cmd->add_option("--fault", o.faults,
                                  "fault injection, repeatable: seed=S,\n"
                                  "hbm_single_bit_rate=P, hbm_double_bit_rate=P (per 64-bit word\n"
                                  "read), hbm_flip_at=ADDR[:BITS][@CHIP] (docs/hbm.md);\n"
                                  "link_bit_error_rate=P (per bit), link_burst_rate=P,\n"
                                  "link_drop_rate=P (per word), link_down=CHIP:PORT@CYCLE (PORT:\n"
                                  "+X -X +Y -Y +Z -Z; docs/ici.md \"Link faults\")"))
      ->type_name("KEY=VALUE");
  cmd->add_flag("--twist", o.twist,
                "twist the pod's torus (docs/topology.md): k x k x 2k, k x 2k x 2k\n"
                "or k x 2k pods only (as pod.twist: true)");
  cmd->add_option("--watchdog", o.watchdog,
                  "stop as hung (exit 3) after this many cycles without progress\n"
                  "(default: the config's watchdog_cycles, 1000000; 0: off)")
      ->type_name("CYCLES")
      ->check(in_range(kWatchdogRange));
}

void add_trace_cycles(CLI::App* cmd, PodOptions& o) {
  cmd->add_option("--trace-cycles", o.trace_cycles,
                  "only the events that overlap pod cycles [A, B)")
      ->option_text("A:B")
      ->check(cli::span())
      ->needs("--trace");
}

EngineOptions engine_options(const PodOptions& o) {
  EngineOptions e;
  e.engine = o.engine;
  e.threads = o.threads;
  if (!o.waves_chips.empty())
    for (const std::string& c : cli::split_list(o.waves_chips)) e.wave_chips.push_back(std::stoi(c));
  e.faults = o.faults;
  if (o.given("--watchdog")) e.watchdog = o.watchdog;
  e.trace = o.trace;
  if (!o.trace_cycles.empty()) e.trace_cycles = cli::split_span(o.trace_cycles);
  e.check = o.check;
  e.twist = o.twist;
  return e;
}

std::function<void(uint64_t)> show_cycles(ProgressLine& line) {
  return [&line](uint64_t cyc) { line.update(cyc); };
}

namespace {
thread_local ReportSink* t_sink = nullptr;  // ScopedReportSink
}  // namespace

ScopedReportSink::ScopedReportSink(ReportSink& sink) : prev_(t_sink) { t_sink = &sink; }
ScopedReportSink::~ScopedReportSink() { t_sink = prev_; }

int finish_pod_report(const Report& rep, const PodOptions& o, bool pass) {
  if (t_sink) {
    t_sink->filled = true;
    t_sink->json = rep.json();
    t_sink->summary = rep.summary();
    return pass ? 0 : 1;
  }
  if (!o.json.empty()) rep.write(o.json);
  std::fputs(rep.summary().c_str(), stdout);
  return pass ? 0 : 1;
}

Collective parse_kind(const std::string& k) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast})
    if (k == collective_name(c)) return c;
  throw std::invalid_argument("--kind " + k + ": not a collective");
}

namespace {

// The options of `tpusim allreduce` and `tpusim collective`.
struct CollectiveArgs {
  PodOptions pod;
  std::string kind = "all_reduce";
  uint64_t bytes = 65536;
  std::string dtype = "f32", algo, op = "sum", mesh, axis, load = "host";
  unsigned root = 0, block_rows = 0;
  uint64_t rounds = 0, seed = 1;
};

// The command `name` with the options of a collective (`kind`: collective's --kind).
CLI::App* collective_options(CLI::App& tool, const char* name, const char* what,
                             CollectiveArgs& a, bool kind) {
  CLI::App* cmd = tool.add_subcommand(name, what);
  if (kind) add_collective_kind(cmd, a.kind);
  add_pod_config(cmd, a.pod);
  cmd->add_option("--bytes", a.bytes,
                  "bytes per chip (all_gather: of the output); any size that fits HBM:\n"
                  "buffers stream through VMEM in rounds")
      ->type_name("N")
      ->check(cli::uint_in(1, uint64_t{1} << 30))
      ->capture_default_str();
  add_collective_flags(cmd, a, kind);
  cmd->add_option("--rounds", a.rounds, "rounds through VMEM; 0: as few as fit")
      ->type_name("R")
      ->check(cli::uint_in(0, 1u << 20))
      ->capture_default_str();
  cmd->add_option("--block-rows", a.block_rows,
                  "rows per pipelined block of a transfer; 0: automatic")
      ->type_name("B")
      ->check(cli::uint_in(0, 4096))
      ->capture_default_str();
  cmd->add_option("--load", a.load,
                  "inputs in / outputs out through the host ports, all chips at once,\n"
                  "or the backdoor (no simulated time)")
      ->type_name("host|backdoor")
      ->check(CLI::IsMember({"host", "backdoor"}))
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "seed of the random inputs")
      ->type_name("S")
      ->check(in_range(kSeedRange))
      ->capture_default_str();
  add_pod_options(cmd, a.pod);
  add_trace_cycles(cmd, a.pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return cmd;
}

int run_collective(const CollectiveArgs& a) {
  const PodOptions& opt = a.pod;
  CollectiveJobOptions o;
  o.kind = parse_kind(a.kind);
  o.dtype = a.dtype == "bf16" ? DType::kBf16 : DType::kF32;
  o.op = a.op == "max" ? ReduceOp::kMax : ReduceOp::kSum;
  o.bytes = a.bytes;
  o.algorithm = a.algo;
  o.mesh = a.mesh;
  o.axis = a.axis;
  o.root = static_cast<int>(a.root);
  o.block_rows = a.block_rows;
  o.rounds = a.rounds;
  o.backdoor = a.load == "backdoor";
  o.seed = a.seed;
  const PodConfig cfg = load_pod_config(opt.config_path());
  const std::string where = std::string(collective_name(o.kind)) + " on " + cfg.params.topo.name();
  CollectiveJob job(cfg, o);
  const EngineOptions eng = engine_options(opt);
  {
    ProgressLine line(where, opt.quiet);
    job.run(eng, show_cycles(line));
  }
  return finish_pod_report(job.report(eng), opt, job.pass());
}

// The options of `tpusim pod`.
struct PodJobArgs {
  PodOptions pod;
  std::size_t m = 64, k = 64, n = 64;
  uint64_t seed = 1;
  std::string algo;
};

int run_pod_job(const PodJobArgs& a) {
  const PodOptions& opt = a.pod;
  PodJobOptions o;
  o.m = a.m;
  o.k = a.k;
  o.n = a.n;
  o.seed = a.seed;
  o.algorithm = a.algo;
  const PodConfig cfg = load_pod_config(opt.config_path());
  PodJob job(cfg, o);
  const EngineOptions eng = engine_options(opt);
  {
    ProgressLine line("pod job on " + cfg.params.topo.name(), opt.quiet);
    job.run(eng, show_cycles(line));
  }
  return finish_pod_report(job.report(eng), opt, job.pass());
}

}  // namespace

std::function<int()> allreduce_command(CLI::App& tool) {
  auto a = std::make_shared<CollectiveArgs>();
  collective_options(tool, "allreduce",
                     "an all-reduce on a pod, golden-checked (HBM in and out, any size, mesh "
                     "axes)",
                     *a, false);
  return [a] { return run_collective(*a); };
}

std::function<int()> collective_command(CLI::App& tool) {
  auto a = std::make_shared<CollectiveArgs>();
  collective_options(tool, "collective", "any collective on a pod (--kind), golden-checked", *a,
                     true);
  return [a] { return run_collective(*a); };
}

std::function<int()> pod_command(CLI::App& tool) {
  auto a = std::make_shared<PodJobArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "pod", "the pod job: a matmul on every chip at once, then an all-reduce of the results\n"
             "(a sum, in HBM), golden-checked");
  add_pod_config(cmd, a->pod);
  add_matmul_shape(cmd, a->m, a->k, a->n, a->seed, 4096,
                   {"rows of A on every chip", "the contraction", "columns of W"},
                   "seed of the random inputs");
  cmd->add_option("--algo", a->algo,
                  "the all-reduce's algorithm: ring|biring|torus|direct (default torus,\n"
                  "or biring on one dimension)")
      ->type_name("A")
      ->check(CLI::IsMember({"ring", "biring", "torus", "direct"}));
  add_pod_options(cmd, a->pod);
  add_trace_cycles(cmd, a->pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_pod_job(*a); };
}

// tpusim hang: a deliberate deadlock, to test the watchdog and exit code 3 (docs/errors.md):
// chip 1 of the pod waits on ICI counter 5 for a row that no chip sends. Not in the help.
std::function<int()> hang_command(CLI::App& tool) {
  auto o = std::make_shared<PodOptions>();
  CLI::App* cmd = tool.add_subcommand("hang", "a deliberate deadlock, to test the watchdog");
  cmd->group("");  // hidden
  add_pod_config(cmd, *o);
  add_pod_options(cmd, *o, true);
  return [o] {
    const PodConfig cfg = load_pod_config(o->config_path());
    if (cfg.params.topo.num_chips() < 2)
      throw std::invalid_argument("hang: the pod needs two chips or more");
    with_engine(engine_options(*o), cfg.params, cfg.chip.clock_ghz, [](HostPort& h) {
      h.push(1, {cmd_ici_wait(5, 1)});
      h.run_until_idle();
    });
    std::puts("tpusim hang: the run ended (the watchdog is off?)");
    return 0;
  };
}

}  // namespace tpu
