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
#include "tpu/perf.h"

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
    "  --bias B.npy --relu  epilogue (K not split)\n"
    "  --out Y.npy          write the gathered Y (float32)\n"
    "  --load host|backdoor operands in and Y out through the host ports (default) or the\n"
    "                       backdoor (no simulated time)\n"
    "  --seed S --engine systemc|cpp --waves-chips LIST --json FILE --quiet\n";

namespace {

Opts parse_shard(const std::vector<std::string>& args) {
  const std::vector<std::string> valued = {
      "--config", "--mesh", "--m", "--k", "--n", "--x-spec", "--w-spec", "--y-spec", "--a",
      "--w", "--bias", "--out", "--load", "--seed", "--engine", "--waves-chips", "--json"};
  Opts opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--relu" || a == "--quiet") {
      opt[a] = "1";
      continue;
    }
    if (std::find(valued.begin(), valued.end(), a) == valued.end())
      throw std::invalid_argument("unknown option '" + a + "'\n" + kShardUsage);
    if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
    opt[a] = args[++i];
  }
  for (const char* k : {"--out", "--json"}) {
    if (!opt.count(k)) continue;
    const std::filesystem::path dir = std::filesystem::path(opt.at(k)).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      throw std::invalid_argument(std::string(k) + " " + opt.at(k) + ": directory '" +
                                  dir.string() + "' does not exist");
  }
  return opt;
}

Json range_json(const Range& r) { return Json::array().push_back(r.lo).push_back(r.hi); }

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
    std::normal_distribution<float> nd(0.0f, 1.0f);
    x.resize(M * K);
    w.resize(K * N);
    for (auto& v : x) v = f32_to_bf16(nd(rng));
    for (auto& v : w) v = f32_to_bf16(nd(rng));
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

  ShardedRun run;
  std::vector<std::vector<uint32_t>> got, want;
  MachineInfo mi;
  ShardF64Check f64;
  std::size_t mism = 0, replica_mism = 0, compared = 0;
  std::vector<uint32_t> y_full;
  std::vector<ShardBlock> blocks;
  uint64_t hbm_used = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("shard " + std::to_string(M) + "x" + std::to_string(K) + "x" +
                          std::to_string(N) + " on " + topo.name(),
                      opt.count("--quiet") > 0);
    with_pod(opt, cfg.params, [&](HostPort& h) {
      mi = h.info();
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      ShardedMatmul sm(h, plan, so);
      hbm_used = sm.hbm_bytes_per_chip();
      run.load_cycles = sm.load(x, w);
      const uint64_t load_cycles = run.load_cycles;
      run = sm.run();
      run.load_cycles = load_cycles;
      got = sm.read_y(&run);
      h.progress = nullptr;
      want = sm.golden(x, w);
      mism = sm.mismatches(want, got);
      compared = sm.real_elements();
      f64 = shard_f64_check(sm, x, w, so.bias, so.relu, got);
      y_full = sm.assemble(got, &replica_mism);
      for (int c = 0; c < mi.num_chips(); ++c) blocks.push_back(sm.y_block(c));
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opt.count("--out")) {
    std::vector<float> y(y_full.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = f32_from_bits(y_full[i]);
    write_npy_f32(opt.at("--out"), y, {M, N});
  }
  const bool pass = mism == 0 && replica_mism == 0 && f64.outside == 0;

  const int P = mi.num_chips();
  const uint64_t macs = matmul_useful_macs(M, K, N);
  const uint64_t peak = peak_macs_per_cycle(mi.shape.rows, mi.shape.cols);
  const uint64_t cycles = run.prog.run.cycles;
  const uint64_t ideal = (macs + static_cast<uint64_t>(P) * peak - 1) / (static_cast<uint64_t>(P) * peak);

  Report rep("sharded matmul " + std::to_string(M) + "x" + std::to_string(K) + "x" +
             std::to_string(N) + " on " + topo.name() + " (" + std::to_string(P) + " chips " +
             cfg.params.variant + "), mesh " + mesh.text() + ": X " + plan.x.text() + ", W " +
             plan.w.text() + ", Y " + plan.y.text());
  rep.field("command", "shard");
  add_pod(rep, cfg, mi, opt);
  ReportGroup& sg = rep.group("sharding");
  sg.field("mesh", mesh.text());
  sg.field("x_spec", plan.x.text()).field("w_spec", plan.w.text()).field("y_spec", plan.y.text());
  sg.metric("m", M, "", "").metric("k", K, "", "").metric("n", N, "", "");
  sg.field("padded", Json::array().push_back(plan.mp).push_back(plan.kp).push_back(plan.np));
  sg.metric("padding_waste",
            1.0 - static_cast<double>(macs) /
                      (static_cast<double>(plan.mp) * static_cast<double>(plan.kp) *
                       static_cast<double>(plan.np)),
            "fraction", "MACs of the padded shape that are padding");
  sg.metric("chip_macs", plan.chip_macs(), "", "MACs the chips do, padding and replicas included");
  sg.field("plan", plan.describe());
  sg.metric("hbm_bytes_per_chip", hbm_used, "bytes", "shards, gathers and products");
  rep.set_cycles(cycles, ideal);
  rep.set_mfu(cycles ? mfu(macs, P, peak, cycles) : 0.0);
  rep.metric("useful_macs", macs, "", "M x K x N");
  Json colls = Json::array();
  for (const ShardPhase& ph : run.phases) {
    if (!ph.collective) continue;
    colls.push_back(Json::object()
                        .set("name", ph.name)
                        .set("kind", collective_name(ph.kind))
                        .set("axis", ph.axis)
                        .set("bytes", ph.bytes));
  }
  rep.field("collectives", colls);
  rep.metric("commands", run.commands, "", "commands of the SPMD program, all chips");
  rep.metric("host_load_cycles", run.load_cycles, "cycles",
             "X, W (and bias) shards into every chip's HBM at once (0: backdoor)");
  rep.metric("host_store_cycles", run.store_cycles, "cycles",
             "Y's blocks out of every chip at once (0: backdoor)");
  rep.field("chips", chip_table(run.prog));
  Json yb = Json::array();
  for (int c = 0; c < P; ++c) {
    const ShardBlock& b = blocks[static_cast<std::size_t>(c)];
    yb.push_back(Json::object()
                     .set("chip", c)
                     .set("rows", range_json(b.rows))
                     .set("cols", range_json(b.cols)));
  }
  rep.field("y_blocks", yb);
  add_links(rep, run.prog.link_flits, uint64_t{mi.shape.cols} * 4, topo);
  ReportGroup& fg = rep.group("f64_check");
  fg.metric("checked", f64.checked, "", "elements checked against the f64 product");
  fg.metric("outside_bound", f64.outside, "", "elements outside (K + p + 2) u sum|x w|", true);
  fg.metric("worst_error_over_bound", f64.worst, "", "largest |error| / bound");
  rep.metric("replica_mismatches", replica_mism, "", "elements whose replicas differ", true);
  rep.set_golden(pass, compared, mism);
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  if (opt.count("--json")) rep.write(opt.at("--json"));
  std::fputs(rep.summary().c_str(), stdout);
  return pass ? 0 : 1;
}

}  // namespace tpu
