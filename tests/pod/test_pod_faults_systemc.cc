// HBM fault injection on a pod: the SystemC pod and the plain C++ pod, with the same `faults`,
// flip the same bits: the same results (bit-exact to the golden: every flip is a corrected
// single-bit one), the same cycles and the same ECC counters on every chip.
#include <gtest/gtest.h>

#include <random>

#include "pod.h"
#include "pod_driver.h"
#include "pod_sc.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

TEST(PodFaultsSystemC, SameFlipsBitsAndCountersAsPlainCpp) {
  PodParams p;
  p.topo = Topology::torus({2, 2});
  p.variant = "4x4";
  p.faults.seed = 17;
  p.faults.hbm_single_bit_rate = 3e-3;
  p.faults.hbm_flip_at.push_back(HbmFlip{1, 4096, 0, 0, 1});
  ScPod pod("pod", p);
  CppPodHost cpp(p);

  CollectiveSpec s;
  s.collective = Collective::kAllReduce;
  s.algorithm = "torus";
  s.n = 4096;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(4);
  for (auto& v : in)
    for (std::size_t i = 0; i < s.n; ++i) v.push_back(f32_bits(nd(rng)));
  PodCollectiveRun sc_run, cpp_run;
  std::vector<ChipCounters> sc_cnt(4), cpp_cnt(4);
  uint64_t sc_start = 0;
  pod.run([&](HostPort& h) {
    sc_start = h.cycle();
    while (cpp.core().cycle() < sc_start) cpp.core().step();
    sc_run = PodDriver(h).run(s, in, PodCollectiveOptions{});
    for (int c = 0; c < 4; ++c) sc_cnt[static_cast<std::size_t>(c)] = h.counters(c);
  });
  ASSERT_EQ(cpp.core().cycle(), sc_start);
  cpp_run = PodDriver(cpp).run(s, in, PodCollectiveOptions{});
  for (int c = 0; c < 4; ++c) cpp_cnt[static_cast<std::size_t>(c)] = cpp.counters(c);
  EXPECT_EQ(sc_run.out, golden_collective(sc_run.rounds, in));
  EXPECT_EQ(sc_run.out, cpp_run.out);
  EXPECT_EQ(sc_run.collective_cycles, cpp_run.collective_cycles);
  EXPECT_EQ(sc_run.load_cycles, cpp_run.load_cycles);
  uint64_t total = 0;
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(sc_cnt[c][kStatEccCorrected], cpp_cnt[c][kStatEccCorrected]) << "chip " << c;
    EXPECT_EQ(sc_cnt[c][kStatEccUncorr], 0u) << "chip " << c;
    total += sc_cnt[c][kStatEccCorrected];
  }
  EXPECT_GT(total, 0u);
}

}  // namespace
}  // namespace tpu

// libsystemc's main() calls sc_main.
int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
