#include "pod_cmd.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "chip_config.h"
#include "chip_driver.h"
#include "cli_util.h"
#include "json.h"
#include "pod_driver.h"
#include "pod_sc.h"
#include "tpu/bf16.h"

namespace tpu {

const char* kPodUsage =
    "usage: tpusim allreduce [options]      all-reduce on a pod, golden-checked\n"
    "       tpusim collective --kind K [options]\n"
    "                                       K: all_reduce|reduce_scatter|all_gather|all_to_all|"
    "broadcast\n"
    "  --config FILE        pod configuration (default configs/pod_2x2.yaml)\n"
    "  --bytes N            bytes per chip (default 65536; all_gather: of the output)\n"
    "  --dtype f32|bf16     element type (default f32; bf16 accumulates in f32)\n"
    "  --algo A             ring|biring|torus (default torus; all_reduce only)\n"
    "  --op sum|max         reduction (default sum)\n"
    "  --root R             broadcast root chip (default 0)\n"
    "  --block-rows B       rows per pipelined block of a transfer (default 0: automatic)\n"
    "  --seed S             seed of the random inputs (default 1)\n"
    "  --engine systemc|cpp SystemC pod with TLM host sockets (default) or plain C++ stepping\n"
    "  --waves-chips LIST   FST waves of these chips, e.g. 0,3 (waves/pod_chipN.fst)\n"
    "  --json FILE          write the JSON report\n"
    "  --quiet              no progress line\n"
    "usage: tpusim pod [options]            the pod job: a matmul on every chip, then an\n"
    "                                       all-reduce (sum) of the results, golden-checked\n"
    "  --config FILE --engine E --waves-chips LIST --json FILE --seed S --algo A --quiet\n"
    "  --m M --k K --n N    matmul shape on every chip (default 64 64 64)\n";

namespace {

using Opts = std::map<std::string, std::string>;

Opts parse(const std::vector<std::string>& args, const std::vector<std::string>& valued,
           const std::vector<std::string>& flags) {
  Opts opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool flag = false, val = false;
    for (const auto& f : flags) flag = flag || f == a;
    for (const auto& v : valued) val = val || v == a;
    if (flag) {
      opt[a] = "1";
    } else if (val) {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
      opt[a] = args[++i];
    } else {
      throw std::invalid_argument("unknown option '" + a + "'\n" + kPodUsage);
    }
  }
  return opt;
}

std::vector<int> parse_chips(const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    out.push_back(static_cast<int>(parse_uint("--waves-chips", item, 0, 511)));
  return out;
}

// Runs job on the pod the options ask for: the SystemC pod (TLM host sockets) or plain C++.
void with_pod(const Opts& opt, PodParams params, const std::function<void(PodHost&)>& job) {
  if (opt.count("--waves-chips")) params.wave_chips = parse_chips(opt.at("--waves-chips"));
  const std::string engine = opt.count("--engine") ? opt.at("--engine") : "systemc";
  if (engine == "cpp") {
    CppPodHost host(params);
    job(host);
  } else if (engine == "systemc") {
    static std::unique_ptr<ScPod> pod;  // one elaboration per process
    pod = std::make_unique<ScPod>("pod", params);
    pod->run(job);
  } else {
    throw std::invalid_argument("--engine " + engine + ": must be 'systemc' or 'cpp'");
  }
}

Collective parse_kind(const std::string& k) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast})
    if (k == collective_name(c)) return c;
  throw std::invalid_argument("--kind " + k +
                              ": must be all_reduce, reduce_scatter, all_gather, all_to_all or "
                              "broadcast");
}

const char* kDirNames[6] = {"+x", "-x", "+y", "-y", "+z", "-z"};

// The ICI part of a report: bytes per directed link, the busiest link.
Json ici_json(const PodCollectiveRun& r, const Topology& topo, uint64_t* max_bytes,
              uint64_t* total) {
  Json links = Json::array();
  *max_bytes = 0;
  *total = 0;
  for (const LinkStat& l : r.link_flits) {
    const uint64_t b = l.flits * r.row_bytes;
    *max_bytes = std::max(*max_bytes, b);
    *total += b;
    const PodCoord c = topo.coord(l.chip);
    links.push_back(Json::object()
                        .set("chip", l.chip)
                        .set("coord", Json::array().push_back(c[0]).push_back(c[1]).push_back(c[2]))
                        .set("dir", kDirNames[l.dir])
                        .set("flits", l.flits)
                        .set("bytes", b));
  }
  return links;
}

int run_collective(const Opts& opt, Collective kind) {
  auto get = [&](const char* k, const char* d) { return opt.count(k) ? opt.at(k) : std::string(d); };
  const std::string config = get("--config", source_file("configs/pod_2x2.yaml").c_str());
  const PodConfig cfg = load_pod_config(config);
  CollectiveSpec spec;
  spec.collective = kind;
  const std::string dtype = get("--dtype", "f32");
  if (dtype != "f32" && dtype != "bf16")
    throw std::invalid_argument("--dtype " + dtype + ": must be 'f32' or 'bf16'");
  spec.dtype = dtype == "bf16" ? DType::kBf16 : DType::kF32;
  const std::string op = get("--op", "sum");
  if (op != "sum" && op != "max") throw std::invalid_argument("--op " + op + ": must be 'sum' or 'max'");
  spec.op = op == "max" ? ReduceOp::kMax : ReduceOp::kSum;
  const std::size_t esz = spec.dtype == DType::kBf16 ? 2 : 4;
  const uint64_t bytes = parse_uint("--bytes", get("--bytes", "65536"), esz, 1ull << 30);
  if (bytes % esz != 0)
    throw std::invalid_argument("--bytes " + std::to_string(bytes) + ": must be a multiple of " +
                                std::to_string(esz) + " (the " + dtype + " element size)");
  spec.n = bytes / esz;
  spec.algorithm = kind == Collective::kAllReduce ? get("--algo", "torus") : "ring";
  spec.root = static_cast<int>(parse_uint("--root", get("--root", "0"), 0, 511));
  const int P = cfg.params.topo.num_chips();
  if (kind == Collective::kAllToAll && spec.n % static_cast<std::size_t>(P) != 0)
    throw std::invalid_argument("--bytes: an all_to_all buffer must hold a multiple of " +
                                std::to_string(P) + " elements (one block per chip)");
  const CollectivePlan plan = make_plan(cfg.params.topo, spec);  // checks algo, root
  PodCollectiveOptions po;
  po.block_rows = static_cast<unsigned>(parse_uint("--block-rows", get("--block-rows", "0"), 0, 4096));

  std::mt19937_64 rng(parse_uint("--seed", get("--seed", "1"), 0, ~0ull));
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(static_cast<std::size_t>(P));
  for (int c = 0; c < P; ++c)
    for (std::size_t i = 0; i < plan.input_len(c); ++i) {
      const float v = nd(rng);
      in[c].push_back(spec.dtype == DType::kBf16 ? f32_to_bf16(v) : f32_bits(v));
    }

  PodCollectiveRun r;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line(std::string(collective_name(kind)) + " on " + cfg.params.topo.name(),
                  opt.count("--quiet") > 0);
    with_pod(opt, cfg.params, [&](PodHost& h) {
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      r = PodDriver(h).run(spec, in, po);
      h.progress = nullptr;
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Golden: the same plan on the host.
  std::vector<std::vector<uint32_t>> want;
  if (spec.dtype == DType::kF32) {
    want = execute_plan_f32(plan, in);
  } else {
    std::vector<std::vector<bf16_t>> b(in.size());
    for (std::size_t c = 0; c < in.size(); ++c)
      for (uint32_t v : in[c]) b[c].push_back(static_cast<bf16_t>(v));
    for (const auto& o : execute_plan_bf16(plan, b)) want.emplace_back(o.begin(), o.end());
  }
  std::size_t mismatches = 0, outputs = 0;
  for (int c = 0; c < P; ++c) {
    outputs += want[c].size();
    for (std::size_t i = 0; i < want[c].size(); ++i)
      mismatches += (i >= r.out[c].size() || r.out[c][i] != want[c][i]) ? 1 : 0;
  }
  const bool pass = mismatches == 0;

  // Bounds. Every element crosses a link as an f32 lane (bf16 partials too).
  const double row_bytes = r.link_bytes_per_cycle;  // a link's bytes per cycle
  const double wire_bytes = static_cast<double>(spec.n) * 4.0;
  double bound = 0;
  int links_per_chip = 0;
  std::string bound_kind;
  if (kind == Collective::kAllReduce) {
    links_per_chip = allreduce_links_per_chip(cfg.params.topo, spec.algorithm);
    bound = allreduce_bound_s(P, links_per_chip, wire_bytes, row_bytes);
    bound_kind = "2(p-1)/p N / (links B): every link the algorithm can use busy";
  } else {
    const PlanCost pcost = plan_cost(plan);
    bound = static_cast<double>(pcost.max_link_bytes) * 4.0 /
            static_cast<double>(plan.element_bytes) / row_bytes;
    bound_kind = "busiest link's bytes of the plan at one row per cycle";
  }
  const uint64_t cyc = r.collective_cycles;
  const double frac = cyc ? bound / static_cast<double>(cyc) : 0.0;
  const double algbw = cyc ? wire_bytes / static_cast<double>(cyc) : 0.0;
  const double busbw = kind == Collective::kAllReduce ? algbw * 2.0 * (P - 1) / P : algbw;
  uint64_t max_link = 0, total_link = 0;
  Json links = ici_json(r, cfg.params.topo, &max_link, &total_link);
  const uint64_t pod_cycles = r.load_cycles + r.collective_cycles + r.store_cycles;

  Json rep = Json::object();
  rep.set("tool", "tpusim").set("command", collective_name(kind)).set("config", cfg.source);
  rep.set("engine", get("--engine", "systemc"));
  rep["pod"] = Json::object()
                   .set("topology", cfg.params.topo.name())
                   .set("chips", P)
                   .set("variant", cfg.params.variant)
                   .set("link_latency", cfg.params.link_latency)
                   .set("link_bytes_per_cycle", r.link_bytes_per_cycle);
  rep.set("algorithm", spec.algorithm).set("dtype", dtype).set("op", op);
  rep.set("elements", spec.n).set("bytes_per_chip", bytes).set("wire_bytes_per_chip", wire_bytes);
  rep["cycles"] = Json::object()
                      .set("collective", cyc)
                      .set("load", r.load_cycles)
                      .set("store", r.store_cycles);
  rep.set("ideal_cycles", bound).set("bound", bound_kind).set("links_per_chip", links_per_chip);
  rep.set("fraction_of_bound", frac);
  rep.set("algbw_bytes_per_cycle", algbw).set("busbw_bytes_per_cycle", busbw);
  rep.set("commands", r.commands).set("vmem_rows_used", r.vmem_rows_used);
  rep["hbm"] = Json::object().set("bytes_in_per_chip", wire_bytes).set("bytes_out_per_chip", wire_bytes);
  rep["ici"] = Json::object()
                   .set("total_bytes", total_link)
                   .set("max_link_bytes", max_link)
                   .set("links", links);
  Json per_chip = Json::array();
  for (int c = 0; c < P; ++c) {
    const ChipCounters& d = r.chip_delta[c];
    per_chip.push_back(Json::object()
                           .set("chip", c)
                           .set("vpu_busy_cycles", d[kStatVpuBusy])
                           .set("ici_send_busy_cycles", d[kStatIciBusy])
                           .set("ici_wait_cycles", d[kStatIciWait])
                           .set("flits_sent", d[kStatIciTxFlits])
                           .set("flits_received", d[kStatIciRxFlits]));
  }
  rep.set("chips", per_chip);
  rep["golden"] = Json::object()
                      .set("verdict", pass ? "pass" : "fail")
                      .set("outputs", outputs)
                      .set("mismatches", mismatches);
  rep.set("wall_seconds", wall)
      .set("sim_cycles_per_second", wall > 0 ? static_cast<double>(pod_cycles) / wall : 0.0);
  if (opt.count("--json")) write_json_report(opt.at("--json"), rep);

  std::printf("%s (%s) of %llu bytes %s per chip on %s (%d chips %s, link latency %u)\n",
              collective_name(kind), spec.algorithm.c_str(), static_cast<unsigned long long>(bytes),
              dtype.c_str(), cfg.params.topo.name().c_str(), P, cfg.params.variant.c_str(),
              cfg.params.link_latency);
  std::printf("  cycles %llu, bound %.0f: %.3f of the bound; bus bandwidth %.1f B/cycle/chip\n",
              static_cast<unsigned long long>(cyc), bound, frac, busbw);
  std::printf("  ICI: busiest link %llu bytes, all links %llu bytes; load %llu + store %llu cycles\n",
              static_cast<unsigned long long>(max_link), static_cast<unsigned long long>(total_link),
              static_cast<unsigned long long>(r.load_cycles),
              static_cast<unsigned long long>(r.store_cycles));
  std::printf("  golden check: %s (%zu of %zu outputs differ)\n", pass ? "PASS" : "FAIL",
              mismatches, outputs);
  return pass ? 0 : 1;
}

}  // namespace

int cmd_allreduce(const std::vector<std::string>& args) {
  const Opts opt = parse(args,
                         {"--config", "--bytes", "--dtype", "--algo", "--op", "--block-rows",
                          "--seed", "--engine", "--waves-chips", "--json"},
                         {"--quiet"});
  return run_collective(opt, Collective::kAllReduce);
}

int cmd_collective(const std::vector<std::string>& args) {
  const Opts opt = parse(args,
                         {"--kind", "--config", "--bytes", "--dtype", "--algo", "--op", "--root",
                          "--block-rows", "--seed", "--engine", "--waves-chips", "--json"},
                         {"--quiet"});
  if (!opt.count("--kind")) throw std::invalid_argument("collective: --kind is required\n" + std::string(kPodUsage));
  return run_collective(opt, parse_kind(opt.at("--kind")));
}

int cmd_pod(const std::vector<std::string>& args) {
  const Opts opt = parse(args,
                         {"--config", "--m", "--k", "--n", "--seed", "--algo", "--engine",
                          "--waves-chips", "--json"},
                         {"--quiet"});
  auto get = [&](const char* k, const char* d) { return opt.count(k) ? opt.at(k) : std::string(d); };
  const std::string config = get("--config", source_file("configs/pod_2x2.yaml").c_str());
  const PodConfig cfg = load_pod_config(config);
  const std::size_t M = parse_uint("--m", get("--m", "64"), 1, 4096);
  const std::size_t K = parse_uint("--k", get("--k", "64"), 1, 4096);
  const std::size_t N = parse_uint("--n", get("--n", "64"), 1, 4096);
  const uint64_t seed = parse_uint("--seed", get("--seed", "1"), 0, ~0ull);
  const int P = cfg.params.topo.num_chips();
  CollectiveSpec spec;
  spec.n = M * N;
  spec.algorithm = get("--algo", "torus");
  const CollectivePlan plan = make_plan(cfg.params.topo, spec);

  std::vector<MatmulRun> mm(static_cast<std::size_t>(P));
  std::vector<std::vector<uint32_t>> want_c(static_cast<std::size_t>(P));
  PodCollectiveRun ar;
  std::size_t mm_bad = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("pod job on " + cfg.params.topo.name(), opt.count("--quiet") > 0);
    with_pod(opt, cfg.params, [&](PodHost& h) {
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      uint64_t top = 0;
      for (int c = 0; c < P; ++c) {
        std::mt19937_64 rng(seed * 1000 + static_cast<uint64_t>(c));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<bf16_t> a(M * K), w(K * N);
        for (auto& v : a) v = f32_to_bf16(nd(rng));
        for (auto& v : w) v = f32_to_bf16(nd(rng));
        ChipDriver drv(h, c);
        mm[c] = drv.matmul(a, w, M, K, N);
        top = std::max(top, drv.allocated());
        want_c[c] = golden_chip_matmul(a, w, M, K, N, MatmulOptions{});
        if (mm[c].c_bits != want_c[c]) ++mm_bad;
      }
      PodCollectiveOptions po;
      po.hbm_base = (top + 63) / 64 * 64;
      std::vector<std::vector<uint32_t>> in(static_cast<std::size_t>(P));
      for (int c = 0; c < P; ++c) in[c] = mm[c].c_bits;
      ar = PodDriver(h).run(spec, in, po);
      h.progress = nullptr;
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto want = execute_plan_f32(plan, want_c);
  std::size_t ar_bad = 0;
  for (int c = 0; c < P; ++c)
    for (std::size_t i = 0; i < want[c].size(); ++i)
      ar_bad += (i >= ar.out[c].size() || ar.out[c][i] != want[c][i]) ? 1 : 0;
  const bool pass = mm_bad == 0 && ar_bad == 0;

  uint64_t mm_cycles = 0, mm_ideal = 0;
  Json chips = Json::array();
  for (int c = 0; c < P; ++c) {
    mm_cycles += mm[c].prog.cycles;
    mm_ideal += mm[c].compute_cycles;
    chips.push_back(Json::object()
                        .set("chip", c)
                        .set("matmul_cycles", mm[c].prog.cycles)
                        .set("matmul_ideal_cycles", mm[c].compute_cycles)
                        .set("hbm_bytes", mm[c].hbm_bytes));
  }
  const double row_bytes = ar.link_bytes_per_cycle;
  const double bound = allreduce_bound_s(P, allreduce_links_per_chip(cfg.params.topo, spec.algorithm),
                                         static_cast<double>(spec.n) * 4.0, row_bytes);
  uint64_t max_link = 0, total_link = 0;
  Json links = ici_json(ar, cfg.params.topo, &max_link, &total_link);
  Json rep = Json::object();
  rep.set("tool", "tpusim").set("command", "pod").set("config", cfg.source);
  rep.set("engine", get("--engine", "systemc"));
  rep["pod"] = Json::object()
                   .set("topology", cfg.params.topo.name())
                   .set("chips", P)
                   .set("variant", cfg.params.variant)
                   .set("link_latency", cfg.params.link_latency);
  rep["matmul"] = Json::object()
                      .set("m", M).set("k", K).set("n", N)
                      .set("chips", chips)
                      .set("cycles_sum", mm_cycles)
                      .set("ideal_cycles_sum", mm_ideal)
                      .set("mismatching_chips", mm_bad);
  rep["all_reduce"] = Json::object()
                          .set("algorithm", spec.algorithm)
                          .set("elements", spec.n)
                          .set("cycles", ar.collective_cycles)
                          .set("ideal_cycles", bound)
                          .set("fraction_of_bound", ar.collective_cycles ? bound / static_cast<double>(ar.collective_cycles) : 0.0)
                          .set("mismatches", ar_bad);
  rep["ici"] = Json::object().set("total_bytes", total_link).set("max_link_bytes", max_link).set("links", links);
  rep["golden"] = Json::object().set("verdict", pass ? "pass" : "fail");
  rep.set("wall_seconds", wall);
  if (opt.count("--json")) write_json_report(opt.at("--json"), rep);

  std::printf("pod job on %s (%d chips %s): matmul %zux%zux%zu on every chip, then all-reduce "
              "(%s) of the %zu results\n",
              cfg.params.topo.name().c_str(), P, cfg.params.variant.c_str(), M, K, N,
              spec.algorithm.c_str(), spec.n);
  std::printf("  matmuls: %llu cycles in all (ideal %llu); %zu chips differ from the golden\n",
              static_cast<unsigned long long>(mm_cycles), static_cast<unsigned long long>(mm_ideal),
              mm_bad);
  std::printf("  all-reduce: %llu cycles, bound %.0f (%.3f); busiest link %llu bytes\n",
              static_cast<unsigned long long>(ar.collective_cycles), bound,
              ar.collective_cycles ? bound / static_cast<double>(ar.collective_cycles) : 0.0,
              static_cast<unsigned long long>(max_link));
  std::printf("  golden check: %s (matmuls and all-reduce, bit for bit)\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace tpu
