// `tpusim shard`: one matmul sharded over a named mesh of the pod (docs/sharding.md).
#include "shard_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "cli_util.h"
#include "npy.h"
#include "pod_cli.h"
#include "shard_plan.h"
#include "sharded_matmul.h"
#include "trace.h"

namespace tpu {

const char* kShardUsage =
    "usage: tpusim shard [options]          one matmul Y = X @ W sharded over a named mesh\n"
    "  --config FILE        pod configuration (default configs/pod_2x2.yaml)\n"
    "  --mesh AXES          named mesh axes over the torus dimensions, x first, e.g.\n"
    "                       data=2,model=2 (default: the config's mesh: section)\n"
    "  --m M --k K --n N    the product's shape (default 512 512 512)\n"
    "  --x-spec S --w-spec S --y-spec S\n"
    "                       partition specs (rows,columns: a mesh axis or '-'); defaults:\n"
    "                       X first-axis,-  W -,second-axis (or -,-)  Y what the product gives\n"
    "  --a X.npy --w W.npy  operands from files: uint16 (bf16 bits) or float32 (rounded)\n"
    "  --bias B.npy --relu  epilogue (K split: after the reduction)\n"
    "  --out Y.npy          write the gathered Y (float32)\n"
    "  --load host|backdoor operands in and Y out through the host ports (default) or the\n"
    "                       backdoor (no simulated time)\n"
    "  --trace FILE         the timeline (Chrome trace-event JSON: ui.perfetto.dev); each\n"
    "                       command labelled with its phase\n"
    "  --trace-cycles A:B   only the events that overlap pod cycles [A, B)\n"
    "  --seed S --engine systemc|cpp --threads N --waves-chips LIST --json FILE --quiet\n"
    "  --watchdog CYCLES    cycles without progress before the run stops as hung (exit 3)\n";

namespace {

Opts parse_shard(const std::vector<std::string>& args) {
  return parse_options(args,
                       {"--config", "--mesh", "--m", "--k", "--n", "--x-spec", "--w-spec",
                        "--y-spec", "--a", "--w", "--bias", "--out", "--load", "--seed",
                        "--engine", "--threads", "--waves-chips", "--json", "--trace", "--trace-cycles"},
                       {"--relu", "--quiet"}, kShardUsage, {"--out", "--json", "--trace"});
}

}  // namespace

int cmd_shard(const std::vector<std::string>& args) {
  const Opts opt = parse_shard(args);
  const std::string config = get(opt, "--config", source_file("configs/pod_2x2.yaml"));
  const PodConfig cfg = load_pod_config(config);
  const Topology& topo = cfg.params.topo;
  if (!opt.count("--mesh") && cfg.mesh.empty())
    throw std::invalid_argument("no mesh: give --mesh (e.g. data=2,model=2) or a mesh: section "
                                "in " + config);
  const Mesh mesh = parse_mesh(get(opt, "--mesh", cfg.mesh));
  for (const MeshAxis& a : mesh.axes) {
    try {
      (void)mesh_axis_dims(topo, mesh, a.name);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--mesh: ") + e.what());
    }
  }

  // Operands: from files, or random.
  std::size_t M = 512, K = 512, N = 512;
  std::vector<bf16_t> x, w;
  const bool files = opt.count("--a") || opt.count("--w");
  if (files) {
    if (!opt.count("--a") || !opt.count("--w"))
      throw std::invalid_argument("--a and --w must be given together");
    for (const char* k : {"--m", "--k", "--n", "--seed"})
      if (opt.count(k)) throw std::invalid_argument(std::string(k) + " cannot be combined with --a/--w");
    std::size_t kr = 0, kw = 0;
    x = load_bf16_matrix(opt.at("--a"), &M, &kr);
    w = load_bf16_matrix(opt.at("--w"), &kw, &N);
    K = kr;
    if (M == 0 || K == 0 || N == 0)
      throw std::invalid_argument(opt.at("--a") + ", " + opt.at("--w") +
                                  ": X and W need at least one row and column each");
    if (kw != kr)
      throw std::invalid_argument(opt.at("--a") + " is " + std::to_string(M) + "x" +
                                  std::to_string(kr) + " and " + opt.at("--w") + " is " +
                                  std::to_string(kw) + "x" + std::to_string(N) +
                                  ": X's columns must equal W's rows");
  } else {
    M = parse_uint("--m", get(opt, "--m", "512"), 1, 1u << 16);
    K = parse_uint("--k", get(opt, "--k", "512"), 1, 1u << 16);
    N = parse_uint("--n", get(opt, "--n", "512"), 1, 1u << 16);
    const uint64_t seed = parse_uint("--seed", get(opt, "--seed", "1"), 0, ~0ull);
    std::mt19937_64 rng(seed);
    x = random_bf16(rng, M * K);
    w = random_bf16(rng, K * N);
  }
  ShardedMatmulOptions so;
  if (opt.count("--bias")) {
    const NpyArray arr = read_npy(opt.at("--bias"));
    if (arr.dtype != "<f4") throw std::invalid_argument(opt.at("--bias") + ": the bias must be float32");
    so.bias = arr.as_f32();
    if (so.bias.size() != N)
      throw std::invalid_argument(opt.at("--bias") + ": the bias must hold N = " +
                                  std::to_string(N) + " values (it holds " +
                                  std::to_string(so.bias.size()) + ")");
  }
  so.relu = opt.count("--relu") > 0;
  const std::string load = get(opt, "--load", "host");
  if (load != "host" && load != "backdoor")
    throw std::invalid_argument("--load " + load + ": must be 'host' or 'backdoor'");
  so.backdoor = load == "backdoor";

  const std::string a0 = mesh.axes[0].name;
  const std::string a1 = mesh.axes.size() > 1 ? mesh.axes[1].name : "-";
  const PSpec xs = parse_pspec(get(opt, "--x-spec", a0 + ",-"), "--x-spec");
  const PSpec ws = parse_pspec(get(opt, "--w-spec", "-," + a1), "--w-spec");
  PSpec ys;
  if (opt.count("--y-spec")) ys = parse_pspec(opt.at("--y-spec"), "--y-spec");
  const ShardPlan plan =
      plan_sharding(topo, mesh, M, K, N, xs, ws, opt.count("--y-spec") ? &ys : nullptr);

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
                      opt.count("--quiet") > 0);
    // The timeline is always recorded (each phase's cycles come from it); --trace writes it.
    TraceOptions topt = trace_options(opt);
    topt.enabled = true;
    Opts pod_opt = opt;
    pod_opt.erase("--trace");
    pod_opt.erase("--trace-cycles");
    with_pod(pod_opt, cfg.params, cfg.chip.clock_ghz, [&](HostPort& h) {
      const MachineInfo& mi = h.info();
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      ShardedMatmul sm(h, plan, so);
      h.set_trace(topt);
      const uint64_t load_cycles = sm.load(x, w);
      ShardedRun run = sm.run();
      run.load_cycles = load_cycles;
      const auto got = sm.read_y(&run);
      h.progress = nullptr;
      const std::vector<TraceEvent> events = h.take_trace();
      set_phase_cycles(&run, events);
      if (opt.count("--trace")) {
        write_trace(opt.at("--trace"), events, mi, cfg.chip.clock_ghz);
        rep.field("trace", opt.at("--trace"));
      }
      chk = check_sharded(sm, x, w, got);
      add_pod(rep, cfg, mi, opt);
      fill_shard_report(rep, sm, run, chk, mi);
      rep.field("chips", chip_table(run.prog));
      add_links(rep, run.prog.link_flits, uint64_t{mi.shape.cols} * 4, topo);
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opt.count("--out")) {
    std::vector<float> y(chk.y.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = f32_from_bits(chk.y[i]);
    write_npy_f32(opt.at("--out"), y, {M, N});
  }
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  if (opt.count("--json")) rep.write(opt.at("--json"));
  std::fputs(rep.summary().c_str(), stdout);
  return chk.pass() ? 0 : 1;
}

}  // namespace tpu
