// bench_shard: one matmul sharded over the pod's mesh, per layout, against the ideal of the same
// work on the same pod (MFU = M K N / (chips x R x C x cycles)), as a JSON array on stdout (one
// report per case, sw/common/report.h). 16x16 chips, 16-byte ICI links of 2 cycles' latency,
// bf16 in, f32 out, operands in through the backdoor, Y checked bit for bit (docs/sharding.md).
//   bench_shard [--only CASE[,CASE...]] [--list]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pod.h"
#include "report.h"
#include "sharded_matmul.h"
#include "tpu/bf16.h"
#include "tpu/perf.h"

using namespace tpu;

namespace {

struct Case {
  const char* name;
  const char* what;
  std::vector<int> shape;
  const char* mesh;
  std::size_t m, k, n;
  const char* x;
  const char* w;
  const char* y;  // "" the default
  double target;  // MFU the issue asks for
};

const std::vector<Case>& cases() {
  static const std::vector<Case> v = {
      {"dp2x2", "2x2, 512^3, data parallel (target 0.90)", {2, 2}, "data=4", 512, 512, 512,
       "data,-", "-,-", "", 0.90},
      {"tpcols2x2", "2x2, 512^3, tensor parallel by columns (target 0.90)", {2, 2}, "model=4",
       512, 512, 512, "-,-", "-,model", "", 0.90},
      {"tprows2x2", "2x2, 512^3, tensor parallel by rows, reduce-scatter (target 0.75)", {2, 2},
       "model=4", 512, 512, 512, "-,model", "model,-", "model,-", 0.75},
      {"fsdp2x2", "2x2, 512^3, fully sharded: W gathered (target 0.80)", {2, 2}, "data=4", 512,
       512, 512, "data,-", "data,-", "", 0.80},
      {"twod4x4", "4x4, 1024x1024x512, 2D data x model (target 0.80)", {4, 4},
       "data=4,model=4", 1024, 1024, 512, "data,-", "-,model", "", 0.80},
  };
  return v;
}

Report run_case(const Case& c) {
  PodParams pp;
  pp.topo = Topology::torus(c.shape);
  pp.variant = "16x16";
  pp.link_latency = 2;
  pp.link_width = 16;
  CppPodHost host(pp);
  const PSpec ys = *c.y ? parse_pspec(c.y, "--y-spec") : PSpec{};
  const ShardPlan plan = plan_sharding(pp.topo, parse_mesh(c.mesh), c.m, c.k, c.n,
                                       parse_pspec(c.x, "--x-spec"), parse_pspec(c.w, "--w-spec"),
                                       *c.y ? &ys : nullptr);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<bf16_t> x(c.m * c.k), w(c.k * c.n);
  for (auto& v : x) v = f32_to_bf16(nd(rng));
  for (auto& v : w) v = f32_to_bf16(nd(rng));
  ShardedMatmulOptions so;
  so.backdoor = true;
  ShardedMatmul sm(host, plan, so);
  sm.load(x, w);
  TraceOptions to;
  to.enabled = true;  // each phase's cycles come from the timeline
  host.set_trace(to);
  const auto t0 = std::chrono::steady_clock::now();
  ShardedRun run = sm.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  set_phase_cycles(&run, host.take_trace());
  const ShardCheck chk = check_sharded(sm, x, w, sm.read_y(&run));
  Report rep(std::string("bench_shard ") + c.name + ": " + c.what);
  rep.field("case", c.name);
  fill_shard_report(rep, sm, run, chk, host.info());
  const double got = run.prog.run.cycles
                         ? mfu(matmul_useful_macs(c.m, c.k, c.n), pp.topo.num_chips(),
                               peak_macs_per_cycle(16, 16), run.prog.run.cycles)
                         : 0.0;
  rep.metric("target_mfu", c.target, "fraction", "what issue 11 asks for", true);
  rep.metric("meets_target", got >= c.target, "", "mfu >= target_mfu", true);
  rep.metric("pod_cycles_per_second", wall > 0 ? static_cast<double>(run.prog.run.cycles) / wall : 0.0,
             "cycles/s", "simulation speed of the program (plain C++ stepping)");
  return rep;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string x;
      while (std::getline(ss, x, ',')) only.push_back(x);
    } else if (a == "--list") {
      for (const Case& c : cases()) std::printf("%-10s %s\n", c.name, c.what);
      return 0;
    } else {
      std::fprintf(stderr, "usage: bench_shard [--only CASE[,CASE...]] [--list]\n");
      return 2;
    }
  }
  for (const std::string& o : only) {
    bool known = false;
    for (const Case& c : cases()) known = known || o == c.name;
    if (!known) {
      std::fprintf(stderr, "bench_shard: --only %s: not a case (bench_shard --list)\n", o.c_str());
      return 2;
    }
  }
  bool first = true;
  std::printf("[\n");
  for (const Case& c : cases()) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    const Report r = run_case(c);
    std::fputs(r.summary().c_str(), stderr);
    std::printf("%s%s", first ? "" : ",\n", r.json().dump(2).c_str());
    std::fflush(stdout);
    first = false;
  }
  std::printf("\n]\n");
  return 0;
}
