// `tpusim sweep`: the sweeps of sw/jobs/sweep_job.h on the command line.
#include "sweep_cmd.h"

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli_util.h"
#include "pod_cli.h"
#include "sweep_job.h"

namespace tpu {

namespace {

// The options of `tpusim sweep allreduce` and `tpusim sweep collective`.
struct CollectiveSweepArgs {
  PodOptions pod;
  std::string kind = "all_reduce";
  std::string bytes = "1K:64K:x2";
  std::string dtype = "f32", algo, op = "sum", mesh, axis, load = "host";
  unsigned root = 0;
  uint64_t seed = 1;
};

// The options of `tpusim sweep matmul`.
struct MatmulSweepArgs {
  const CLI::App* cmd = nullptr;
  std::string config, variant, shapes, sizes = "16:128:x2", dist = "narrow", json;
  uint64_t seed = 1, watchdog = 0;
  bool quiet = false, check = false;
};

Collective collective_of(const std::string& k) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast})
    if (k == collective_name(c)) return c;
  throw std::invalid_argument("--kind " + k + ": not a collective");
}

// --json, --quiet and --threads of a sweep (a sweep writes no waves and no timeline: one run
// per row would overwrite them).
void add_collective_sweep_options(CLI::App* cmd, CollectiveSweepArgs& a, bool kind) {
  if (kind) add_collective_kind(cmd, a.kind);
  add_pod_config(cmd, a.pod);
  cmd->add_option("--bytes", a.bytes,
                  "the sizes per chip (all_gather: of the output), START:STOP:xFACTOR,\n"
                  "START:STOP:+STEP or one size; units K, M, G = 2^10, 2^20, 2^30")
      ->type_name("RANGE")
      ->capture_default_str();
  add_collective_flags(cmd, a, kind);
  cmd->add_option("--load", a.load,
                  "inputs in / outputs out through the host ports, or the backdoor\n"
                  "(no simulated time; the collective's cycles are the same)")
      ->type_name("host|backdoor")
      ->check(CLI::IsMember({"host", "backdoor"}))
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "seed of the random inputs (every row the same seed)")
      ->type_name("S")
      ->check(in_range(kSeedRange))
      ->capture_default_str();
  add_pod_options(cmd, a.pod, true);  // --engine, --fault, --watchdog
  cmd->add_option("--threads", a.pod.threads,
                  "threads stepping the chips (default: the cores; the same bits and cycles)")
      ->type_name("N")
      ->check(cli::uint_in(1, 256));
  cmd->add_option("--json", a.pod.json, "write the JSON report (every row: \"rows\")")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_flag("--quiet", a.pod.quiet, "no progress line");
  cmd->add_flag("--check", a.pod.check,
                "check the line, the config and every size's plan (capacities),\n"
                "then stop before the first simulated cycle: exit 0, no files written");
  cmd->footer(
      "exit codes: 0 every row passes, 1 golden mismatch, 2 bad input or output, 3 hang "
      "or chip error");
}

int run_collective_sweep(const CollectiveSweepArgs& a, const std::string& command) {
  CollectiveJobOptions o;
  o.kind = collective_of(a.kind);
  o.dtype = a.dtype == "bf16" ? DType::kBf16 : DType::kF32;
  o.op = a.op == "max" ? ReduceOp::kMax : ReduceOp::kSum;
  o.algorithm = a.algo;
  o.mesh = a.mesh;
  o.axis = a.axis;
  o.root = static_cast<int>(a.root);
  o.backdoor = a.load == "backdoor";
  o.seed = a.seed;
  const std::vector<uint64_t> sizes = parse_size_range(a.bytes, "--bytes");
  const PodConfig cfg = load_pod_config(a.pod.config_path());
  CollectiveSweep sweep(cfg, o, sizes, command);
  const EngineOptions eng = engine_options(a.pod);
  {
    ProgressLine line("sweep " + a.kind + " on " + cfg.params.topo.name(), a.pod.quiet);
    sweep.run(eng, [&](const RunProgress& p) { line.update(p); });
  }
  std::fputs(sweep.table().c_str(), stdout);
  std::fflush(stdout);
  if (!a.pod.json.empty()) sweep.report(eng).write(a.pod.json);
  return sweep.pass() ? 0 : 1;
}

int run_matmul_sweep(const MatmulSweepArgs& a) {
  const bool shapes = a.cmd->count("--shapes") > 0;
  std::vector<MatmulShape> list;
  if (shapes) {
    list = parse_shapes(a.shapes, "--shapes");
  } else {
    for (uint64_t s : parse_size_range(a.sizes, "--sizes")) {
      if (s > (1u << 16))
        throw std::invalid_argument("--sizes " + a.sizes + ": the cube " + std::to_string(s) +
                                    " is above 65536, the largest M, K or N tpusim matmul takes");
      list.push_back({s, s, s});
    }
  }
  const std::string path =
      a.cmd->count("--config") ? a.config : source_file("configs/default.yaml");
  MatmulJobOptions o;
  if (a.cmd->count("--variant")) o.variant = a.variant;
  o.seed = a.seed;
  o.dist = a.dist;
  if (a.cmd->count("--watchdog")) o.watchdog = a.watchdog;
  o.check = a.check;
  MatmulSweep sweep(load_chip_config(path), path, o, list);
  {
    ProgressLine line("sweep matmul", a.quiet);
    sweep.run([&](const RunProgress& p) { line.update(p); });
  }
  std::fputs(sweep.table().c_str(), stdout);
  std::fflush(stdout);
  if (!a.json.empty()) sweep.report().write(a.json);
  return sweep.pass() ? 0 : 1;
}

void add_matmul_sweep_options(CLI::App* cmd, MatmulSweepArgs& a) {
  a.cmd = cmd;
  add_chip_config(cmd, a.config, a.variant);
  CLI::Option* shapes =
      cmd->add_option("--shapes", a.shapes, "the shapes, e.g. 128x128x128,256x64x512")
          ->type_name("MxKxN,...");
  cmd->add_option("--sizes", a.sizes,
                  "cubes N x N x N for N in START:STOP:xFACTOR or START:STOP:+STEP\n"
                  "(or one N)")
      ->type_name("RANGE")
      ->capture_default_str()
      ->excludes(shapes);
  cmd->add_option("--seed", a.seed, "seed of the random inputs (every shape the same seed)")
      ->type_name("S")
      ->check(in_range(kSeedRange))
      ->capture_default_str();
  cmd->add_option("--dist", a.dist, "value distribution of the random inputs")
      ->type_name("narrow|wide")
      ->check(CLI::IsMember({"narrow", "wide"}))
      ->capture_default_str();
  cmd->add_option("--watchdog", a.watchdog,
                  "stop as hung (exit 3) after this many cycles without progress\n"
                  "(default: the config's chip.watchdog_cycles)")
      ->type_name("CYCLES")
      ->check(in_range(kWatchdogRange));
  cmd->add_option("--json", a.json, "write the JSON report (every row: \"rows\")")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_flag("--quiet", a.quiet, "no progress line");
  cmd->add_flag("--check", a.check,
                "check the line, the config and every shape's plan (capacities),\n"
                "then stop before the first simulated cycle: exit 0, no files written");
  cmd->footer(
      "exit codes: 0 every row passes, 1 golden mismatch, 2 bad input or output, 3 hang "
      "or chip error");
}

}  // namespace

std::function<int()> sweep_command(CLI::App& tool) {
  CLI::App* cmd = tool.add_subcommand(
      "sweep",
      "a collective over sizes or a matmul over shapes, every row golden-checked; a table\n"
      "in the nccl-tests form (tpusim sweep allreduce|collective|matmul --help)");
  cmd->require_subcommand(1);
  auto ar = std::make_shared<CollectiveSweepArgs>();
  auto co = std::make_shared<CollectiveSweepArgs>();
  auto mm = std::make_shared<MatmulSweepArgs>();
  CLI::App* s_ar = cmd->add_subcommand("allreduce", "an all-reduce at each size of --bytes");
  add_collective_sweep_options(s_ar, *ar, false);
  CLI::App* s_co =
      cmd->add_subcommand("collective", "any collective (--kind) at each size of --bytes");
  add_collective_sweep_options(s_co, *co, true);
  CLI::App* s_mm = cmd->add_subcommand(
      "matmul", "a matmul of random bf16 operands at each shape (--shapes or --sizes)");
  add_matmul_sweep_options(s_mm, *mm);
  return [=] {
    if (s_ar->parsed()) return run_collective_sweep(*ar, "allreduce");
    if (s_co->parsed()) return run_collective_sweep(*co, "collective");
    return run_matmul_sweep(*mm);
  };
}

}  // namespace tpu
