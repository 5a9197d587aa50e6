// `tpusim shard`: one matmul sharded over a named mesh of the pod (docs/sharding.md).
#include "shard_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <tuple>

#include "cli_util.h"
#include "npy.h"
#include "pod_cli.h"
#include "shard_plan.h"
#include "sharded_matmul.h"
#include "trace.h"

namespace tpu {

namespace {

// The options of `tpusim shard`.
struct ShardArgs {
  PodOptions pod;
  std::string mesh, x_spec, w_spec, y_spec, a, w, bias, out, load = "host";
  std::size_t m = 512, k = 512, n = 512;
  uint64_t seed = 1;
  bool relu = false;
};

int run_shard(const ShardArgs& a) {
  const PodOptions& opt = a.pod;
  const std::string config = opt.config_path();
  const PodConfig cfg = load_pod_config(config);
  const Topology& topo = cfg.params.topo;
  if (a.mesh.empty() && cfg.mesh.empty())
    throw std::invalid_argument("no mesh: give --mesh (e.g. data=2,model=2) or a mesh: section "
                                "in " + config);
  const Mesh mesh = parse_mesh(!a.mesh.empty() ? a.mesh : cfg.mesh);
  try {
    check_mesh(topo, mesh);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(!a.mesh.empty() ? "--mesh: " : "") + e.what());
  }

  // Operands: from files, or random.
  std::size_t M = a.m, K = a.k, N = a.n;
  std::vector<bf16_t> x, w;
  if (!a.a.empty()) {  // --a and --w come together (CLI)
    std::size_t kr = 0, kw = 0;
    x = load_bf16_matrix(a.a, &M, &kr);
    w = load_bf16_matrix(a.w, &kw, &N);
    K = kr;
    if (M == 0 || K == 0 || N == 0)
      throw std::invalid_argument(a.a + ", " + a.w +
                                  ": X and W need at least one row and column each");
    if (kw != kr)
      throw std::invalid_argument(a.a + " is " + std::to_string(M) + "x" +
                                  std::to_string(kr) + " and " + a.w + " is " +
                                  std::to_string(kw) + "x" + std::to_string(N) +
                                  ": X's columns must equal W's rows");
  }
  // Random operands are made once the plan and every chip's HBM layout are known to fit (inside
  // the job, after ShardedMatmul's capacity check): a shape far too large for the pod is the HBM
  // message, not gigabytes of host memory first.
  auto make_random = [&] {
    if (!a.a.empty()) return;
    std::mt19937_64 rng(a.seed);
    x = random_bf16(rng, M * K);
    w = random_bf16(rng, K * N);
  };
  ShardedMatmulOptions so;
  if (!a.bias.empty()) {
    const NpyArray arr = read_npy(a.bias);
    if (arr.dtype != "<f4") throw std::invalid_argument(a.bias + ": the bias must be float32");
    so.bias = arr.as_f32();
    if (so.bias.size() != N)
      throw std::invalid_argument(a.bias + ": the bias must hold N = " +
                                  std::to_string(N) + " values (it holds " +
                                  std::to_string(so.bias.size()) + ")");
  }
  so.relu = a.relu;
  so.backdoor = a.load == "backdoor";

  const std::string a0 = mesh.axes[0].name;
  const std::string a1 = mesh.axes.size() > 1 ? mesh.axes[1].name : "-";
  const PSpec xs = parse_pspec(!a.x_spec.empty() ? a.x_spec : a0 + ",-", "--x-spec");
  const PSpec ws = parse_pspec(!a.w_spec.empty() ? a.w_spec : "-," + a1, "--w-spec");
  PSpec ys;
  if (!a.y_spec.empty()) ys = parse_pspec(a.y_spec, "--y-spec");
  const ShardPlan plan =
      plan_sharding(topo, mesh, M, K, N, xs, ws, !a.y_spec.empty() ? &ys : nullptr);

  const std::string title = "sharded matmul " + std::to_string(M) + "x" + std::to_string(K) +
                            "x" + std::to_string(N) + " on " + topo.name() + " (" +
                            std::to_string(topo.num_chips()) + " chips " + cfg.params.variant +
                            "), mesh " + mesh.text() + ": X " + plan.x.text() + ", W " +
                            plan.w.text() + ", Y " + plan.y.text();
  Report rep(title);
  rep.field("command", "shard");
  ShardCheck chk;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("shard " + std::to_string(M) + "x" + std::to_string(K) + "x" +
                          std::to_string(N) + " on " + topo.name(),
                      opt.quiet);
    // The timeline is always recorded (each phase's cycles come from it); --trace writes it.
    TraceOptions topt = trace_options(opt);
    topt.enabled = true;
    PodOptions pod_opt = opt;
    pod_opt.trace.clear();
    pod_opt.trace_cycles.clear();
    with_pod(pod_opt, cfg.params, cfg.chip.clock_ghz, [&](HostPort& h) {
      const MachineInfo& mi = h.info();
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      ShardedMatmul sm(h, plan, so);
      make_random();
      h.set_trace(topt);
      const uint64_t load_cycles = sm.load(x, w);
      ShardedRun run = sm.run();
      run.load_cycles = load_cycles;
      const auto got = sm.read_y(&run);
      h.progress = nullptr;
      const std::vector<TraceEvent> events = h.take_trace();
      set_phase_cycles(&run, events);
      if (!opt.trace.empty()) {
        write_trace(opt.trace, events, mi, cfg.chip.clock_ghz);
        rep.field("trace", opt.trace);
      }
      chk = check_sharded(sm, x, w, got);
      add_pod(rep, cfg, mi, opt);
      fill_shard_report(rep, sm, run, chk, mi);
      rep.field("chips", chip_table(run.prog));
      add_links(rep, run.prog.link_flits, uint64_t{mi.shape.cols} * 4, topo);
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.out.empty()) {
    std::vector<float> y(chk.y.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = f32_from_bits(chk.y[i]);
    write_npy_f32(a.out, y, {M, N});
  }
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  if (!opt.json.empty()) rep.write(opt.json);
  std::fputs(rep.summary().c_str(), stdout);
  return chk.pass() ? 0 : 1;
}

}  // namespace

std::function<int()> shard_command(CLI::App& tool) {
  auto a = std::make_shared<ShardArgs>();
  CLI::App* cmd =
      tool.add_subcommand("shard", "one matmul Y = X @ W sharded over a named mesh of the pod");
  add_pod_config(cmd, a->pod);
  cmd->add_option("--mesh", a->mesh,
                  "named mesh axes over the torus dimensions, x first, e.g.\n"
                  "data=2,model=2 (default: the config's mesh: section)")
      ->type_name("AXES");
  std::vector<CLI::Option*> random =
      add_matmul_shape(cmd, a->m, a->k, a->n, a->seed, 1u << 16,
                       {"rows of X", "the contraction", "columns of W"},
                       "seed of the random operands");
  cmd->add_option("--x-spec", a->x_spec,
                  "X's partition spec (rows,columns: a mesh axis or '-'; default\n"
                  "first-axis,-)")
      ->type_name("S");
  cmd->add_option("--w-spec", a->w_spec, "W's (default -,second-axis, or -,- with one axis)")
      ->type_name("S");
  cmd->add_option("--y-spec", a->y_spec, "Y's (default: what the product gives)")
      ->type_name("S");
  add_matmul_files(cmd, a->a, a->w, "X from a file: uint16 (bf16 bits) or float32 (rounded)",
                   "X.npy", random);
  cmd->add_option("--bias", a->bias, "add a bias row (N float32 values); K split: after the\n"
                                     "reduction")
      ->type_name("B.npy")
      ->check(cli::input_path());
  cmd->add_flag("--relu", a->relu, "ReLU after the bias");
  cmd->add_option("--out", a->out, "write the gathered Y (float32)")
      ->type_name("Y.npy")
      ->check(cli::output_path());
  cmd->add_option("--load", a->load,
                  "operands in and Y out through the host ports, or the backdoor\n"
                  "(no simulated time)")
      ->type_name("host|backdoor")
      ->check(CLI::IsMember({"host", "backdoor"}))
      ->capture_default_str();
  add_pod_options(cmd, a->pod);
  add_trace_cycles(cmd, a->pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_shard(*a); };
}

}  // namespace tpu
