// The SystemC pod (chips as sc_modules, host ports as TLM-2.0 sockets) runs the same RTL as the
// plain C++ stepping: the same collective gives the same bits and the same cycle counts.
#include <gtest/gtest.h>

#include <random>

#include "mesh_text.h"
#include "pod.h"
#include "pod_driver.h"
#include "pod_sc.h"
#include "sc_chip_error.h"
#include "sharded_matmul.h"
#include "train_step.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

std::vector<std::vector<uint32_t>> inputs(const CollectivePlan& plan, uint64_t seed, DType d) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i) {
      const float v = nd(rng);
      in[c].push_back(d == DType::kBf16 ? f32_to_bf16(v) : f32_bits(v));
    }
  return in;
}

// One elaboration per process (SystemC cannot elaborate twice), so one test holds every case:
// every collective, f32 and bf16, in one round and in several, through the TLM host sockets
// (inputs in and outputs out through every chip's host port at once).
TEST(PodSystemC, SameBitsAndCyclesAsPlainCpp) {
  PodParams p;
  p.topo = Topology::torus({2, 2});
  p.variant = "4x4";
  p.link_latency = 3;
  ScPod pod("pod", p);
  CppPodHost cpp(p);

  for (Collective k : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast}) {
    for (DType d : {DType::kF32, DType::kBf16}) {
      for (std::size_t rounds : {1u, 3u}) {
        CollectiveSpec s;
        s.collective = k;
        s.dtype = d;
        s.algorithm = k == Collective::kAllReduce ? "torus" : "ring";
        s.n = k == Collective::kAllToAll ? 4 * 32 * 3 : 901;
        s.root = 2;
        CollectiveSpec sg = s;
        sg.granule = PodDriver(cpp).granule(d);
        const auto in = inputs(make_plan(p.topo, sg), 3, d);
        PodCollectiveOptions o;
        o.rounds = rounds;
        PodCollectiveRun sc_run, cpp_run;
        // Start both at the same cycle: between jobs the SystemC clock runs a cycle while the
        // host thread waits for the next job, and some arbitration depends on the cycle number.
        uint64_t sc_start_cycle = 0;
        pod.run([&](HostPort& h) {
          sc_start_cycle = h.cycle();
          while (cpp.core().cycle() < sc_start_cycle) cpp.core().step();
          sc_run = PodDriver(h).run(s, in, o);
        });
        ASSERT_EQ(cpp.core().cycle(), sc_start_cycle);
        cpp_run = PodDriver(cpp).run(s, in, o);
        const std::string what = std::string(collective_name(k)) + " " + dtype_name(d) +
                                 " rounds " + std::to_string(rounds);
        EXPECT_EQ(sc_run.out, golden_collective(sc_run.rounds, in)) << what;
        EXPECT_EQ(sc_run.out, cpp_run.out) << what;
        EXPECT_EQ(sc_run.collective_cycles, cpp_run.collective_cycles) << what;
        EXPECT_EQ(sc_run.load_cycles, cpp_run.load_cycles) << what;
        EXPECT_EQ(sc_run.store_cycles, cpp_run.store_cycles) << what;
        EXPECT_EQ(sc_run.prog.run.chip_cycles, cpp_run.prog.run.chip_cycles) << what;
        uint64_t a = 0, b = 0;
        for (const auto& l : sc_run.prog.link_flits) a += l.flits;
        for (const auto& l : cpp_run.prog.link_flits) b += l.flits;
        EXPECT_EQ(a, b) << what;
        EXPECT_GT(a, 0u) << what;
      }
    }
  }

  // A sharded matmul (K split, the reduce-scatter pipelined under the matmul; and a gathered W):
  // the same Y and the same cycles on both engines, Y equal to its golden.
  for (const char* w_spec : {"model,-", "-,model"}) {
    const ShardPlan plan = plan_sharding(p.topo, parse_mesh("model=4"), 128, 64, 48,
                                         parse_pspec("-,model", "x"), parse_pspec(w_spec, "w"));
    std::mt19937_64 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<bf16_t> x(128 * 64), w(64 * 48);
    for (auto& v : x) v = f32_to_bf16(nd(rng));
    for (auto& v : w) v = f32_to_bf16(nd(rng));
    std::vector<std::vector<uint32_t>> sc_y, cpp_y, want;
    ShardedRun sc_run, cpp_run;
    uint64_t sc_start_cycle = 0, sc_load = 0, sc_run_at = 0;
    pod.run([&](HostPort& h) {
      sc_start_cycle = h.cycle();
      while (cpp.core().cycle() < sc_start_cycle) cpp.core().step();
      ShardedMatmul sm(h, plan);
      sc_load = sm.load(x, w);
      sc_run_at = h.cycle();
      sc_run = sm.run();
      sc_y = sm.read_y(&sc_run);
      want = sm.golden(x, w);
    });
    ASSERT_EQ(cpp.core().cycle(), sc_start_cycle);
    ShardedMatmul sm(cpp, plan);
    EXPECT_EQ(sm.load(x, w), sc_load) << w_spec;
    EXPECT_EQ(cpp.cycle(), sc_run_at) << w_spec;
    cpp_run = sm.run();
    cpp_y = sm.read_y(&cpp_run);
    EXPECT_EQ(sc_y, want) << w_spec;
    EXPECT_EQ(sc_y, cpp_y) << w_spec;
    EXPECT_EQ(sc_run.prog.run.cycles, cpp_run.prog.run.cycles) << w_spec;
    EXPECT_EQ(sc_run.prog.run.chip_cycles, cpp_run.prog.run.chip_cycles) << w_spec;
    EXPECT_EQ(sc_run.store_cycles, cpp_run.store_cycles) << w_spec;
  }

  // A training step (forward, backward with transposes, all-reduce pieces, SGD): the same
  // parameters, loss and cycles on both engines, equal to the golden.
  {
    MlpSpec spec;
    spec.widths = {32, 64, 32};
    spec.batch = 8;
    spec.lr = 0.5f;
    std::vector<MlpParams> sc_params;
    double sc_loss = 0;
    uint64_t sc_start_cycle = 0, sc_cycles = 0;
    pod.run([&](HostPort& h) {
      sc_start_cycle = h.cycle();
      while (cpp.core().cycle() < sc_start_cycle) cpp.core().step();
      DataParallelTrainer tr(h, spec);
      const MlpParams init = init_mlp_params(tr.spec(), 4);
      tr.load_params(init);
      tr.load_data(make_mlp_data(tr.spec(), 4));
      const TrainStepRun run = tr.step();
      sc_cycles = run.prog.run.cycles;
      sc_loss = run.loss;
      for (int c = 0; c < 4; ++c) sc_params.push_back(tr.read_params(c));
      MlpGolden g(tr.spec(), init);
      g.step(make_mlp_data(tr.spec(), 4), tr.golden_all_reduce());
      const TrainCheck chk = check_params(sc_params, g);
      EXPECT_EQ(chk.mismatches, 0u);
      EXPECT_EQ(chk.replica_mismatches, 0u);
    });
    ASSERT_EQ(cpp.core().cycle(), sc_start_cycle);
    DataParallelTrainer tr(cpp, spec);
    tr.load_params(init_mlp_params(tr.spec(), 4));
    tr.load_data(make_mlp_data(tr.spec(), 4));
    const TrainStepRun run = tr.step();
    EXPECT_EQ(run.prog.run.cycles, sc_cycles);
    EXPECT_EQ(run.loss, sc_loss);
    for (int c = 0; c < 4; ++c) {
      const MlpParams p = tr.read_params(c);
      for (std::size_t l = 0; l < p.size(); ++l) {
        EXPECT_EQ(p[l].w, sc_params[static_cast<std::size_t>(c)][l].w) << "chip " << c;
        EXPECT_EQ(p[l].b, sc_params[static_cast<std::size_t>(c)][l].b) << "chip " << c;
      }
    }
  }

  // The host socket: status, counters and link statistics by TLM reads, the backdoor by debug
  // transport, clear errors for bad accesses.
  pod.run([&](HostPort& h) {
    const ChipStatus st = h.status(1);
    EXPECT_EQ(st.err, 0u);
    EXPECT_TRUE(st.router_empty);
    EXPECT_GT(h.counters(1)[kStatCycles], 0u);
    EXPECT_EQ(h.link_stats().size(), 16u);  // 2x2 torus: 4 chips x 4 directions
    std::vector<uint8_t> w(128), r(128);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 3);
    const uint64_t t = h.cycle();
    h.backdoor_write(2, 1 << 20, w.data(), w.size());
    h.backdoor_read(2, 1 << 20, r.data(), r.size());
    EXPECT_EQ(h.cycle(), t);
    EXPECT_EQ(r, w);
    h.read(2, 1 << 20, r.data(), r.size());
    EXPECT_EQ(r, w);
    EXPECT_THROW(h.write(0, 32, w.data(), 64), std::invalid_argument);  // misaligned
    uint8_t buf[64] = {};
    EXPECT_THROW(h.read(0, 1ull << 40, buf, 64), std::invalid_argument);
  });

  // A chip error stops the job with the chip named, its code and its command.
  expect_chip_error_stops_the_job(pod, 2, 1, "chip 2 (0,1,0)");
}

}  // namespace
}  // namespace tpu

// libsystemc's main() calls sc_main.
int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
