// The SystemC pod on several threads (PodParams::threads > 1: one process steps every chip at
// the rising edge on PodCore's workers) gives the same bits and cycles as the plain C++ pod on
// one thread, and a chip error raised on a worker's slab still stops the job naming the chip.
// Its own process: SystemC elaborates once.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "pod.h"
#include "pod_driver.h"
#include "pod_sc.h"
#include "sc_chip_error.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

TEST(PodSystemCThreads, SameBitsAndCyclesAsOneCppThread) {
  PodParams p;
  p.topo = Topology::torus({2, 2, 2});
  p.variant = "4x4";
  p.link_latency = 2;
  PodParams one = p;
  p.threads = 3;  // slabs of 3, 3 and 2 chips
  ScPod pod("pod", p);
  ASSERT_EQ(pod.core().threads(), 3u);
  CppPodHost cpp(one);
  ASSERT_EQ(cpp.core().threads(), 1u);

  for (Collective k : {Collective::kAllReduce, Collective::kAllGather}) {
    for (DType d : {DType::kF32, DType::kBf16}) {
      CollectiveSpec s;
      s.collective = k;
      s.dtype = d;
      s.algorithm = k == Collective::kAllReduce ? "torus" : "ring";
      s.n = 1200;
      CollectiveSpec sg = s;
      sg.granule = PodDriver(cpp).granule(d);
      const CollectivePlan plan = make_plan(p.topo, sg);
      std::mt19937_64 rng(7);
      std::normal_distribution<float> nd(0.0f, 4.0f);
      std::vector<std::vector<uint32_t>> in(plan.chips.size());
      for (std::size_t c = 0; c < in.size(); ++c)
        for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i)
          in[c].push_back(d == DType::kBf16 ? f32_to_bf16(nd(rng)) : f32_bits(nd(rng)));
      PodCollectiveOptions o;
      o.rounds = 2;
      PodCollectiveRun sc_run, cpp_run;
      uint64_t start = 0;
      pod.run([&](HostPort& h) {
        start = h.cycle();
        while (cpp.core().cycle() < start) cpp.core().step();
        sc_run = PodDriver(h).run(s, in, o);
      });
      ASSERT_EQ(cpp.core().cycle(), start);
      cpp_run = PodDriver(cpp).run(s, in, o);
      const std::string what = std::string(collective_name(k)) + " " + dtype_name(d);
      EXPECT_EQ(sc_run.out, golden_collective(sc_run.rounds, in)) << what;
      EXPECT_EQ(sc_run.out, cpp_run.out) << what;
      EXPECT_EQ(sc_run.collective_cycles, cpp_run.collective_cycles) << what;
      EXPECT_EQ(sc_run.load_cycles, cpp_run.load_cycles) << what;
      EXPECT_EQ(sc_run.store_cycles, cpp_run.store_cycles) << what;
      EXPECT_EQ(sc_run.prog.run.chip_cycles, cpp_run.prog.run.chip_cycles) << what;
      EXPECT_GT(sc_run.collective_cycles, 0u) << what;
    }
  }

  // Chip 7 is on the last worker's slab: its error stops the job, named.
  expect_chip_error_stops_the_job(pod, 7, 0);
}

}  // namespace
}  // namespace tpu

// libsystemc's main() calls sc_main.
int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
