// Link faults on a pod (docs/ici.md "Link layer"): the SystemC pod and the plain C++ pod, with
// the same `faults` (bit errors, bursts, drops), corrupt and drop the same words: the same
// results (bit-exact to the golden), the same cycles and the same link counters on every link.
#include <gtest/gtest.h>

#include <random>

#include "pod.h"
#include "pod_driver.h"
#include "pod_sc.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

TEST(PodLinkFaultsSystemC, SameWordsCyclesAndLinkCountersAsPlainCpp) {
  PodParams p;
  p.topo = Topology::torus({2, 2});
  p.variant = "4x4";
  p.link_latency = 2;
  p.faults.seed = 23;
  p.faults.link_bit_error_rate = 5e-5;
  p.faults.link_burst_rate = 1e-3;
  p.faults.link_drop_rate = 2e-3;
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
  std::vector<LinkStat> sc_links, cpp_links;
  uint64_t sc_start = 0;
  pod.run([&](HostPort& h) {
    sc_start = h.cycle();
    while (cpp.core().cycle() < sc_start) cpp.core().step();
    sc_run = PodDriver(h).run(s, in, PodCollectiveOptions{});
    sc_links = h.link_stats();
  });
  ASSERT_EQ(cpp.core().cycle(), sc_start);
  cpp_run = PodDriver(cpp).run(s, in, PodCollectiveOptions{});
  cpp_links = cpp.link_stats();
  EXPECT_EQ(sc_run.out, golden_collective(sc_run.rounds, in));
  EXPECT_EQ(sc_run.out, cpp_run.out);
  EXPECT_EQ(sc_run.collective_cycles, cpp_run.collective_cycles);
  EXPECT_EQ(sc_run.load_cycles, cpp_run.load_cycles);
  ASSERT_EQ(sc_links.size(), cpp_links.size());
  uint64_t crc = 0, replays = 0;
  for (std::size_t i = 0; i < sc_links.size(); ++i) {
    const LinkStat &a = sc_links[i], &b = cpp_links[i];
    EXPECT_EQ(a.chip, b.chip);
    EXPECT_EQ(a.dir, b.dir);
    EXPECT_EQ(a.flits, b.flits) << "link " << i;
    EXPECT_EQ(a.crc_errors, b.crc_errors) << "link " << i;
    EXPECT_EQ(a.replays, b.replays) << "link " << i;
    EXPECT_EQ(a.replayed_flits, b.replayed_flits) << "link " << i;
    EXPECT_EQ(a.link_down, 0u);
    crc += a.crc_errors;
    replays += a.replays;
  }
  EXPECT_GT(crc, 0u);
  EXPECT_GT(replays, 0u);
}

}  // namespace
}  // namespace tpu

// libsystemc's main() calls sc_main.
int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
