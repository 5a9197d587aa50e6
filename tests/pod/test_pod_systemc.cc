// The SystemC pod (chips as sc_modules, host ports as TLM-2.0 sockets) runs the same RTL as the
// plain C++ stepping: the same collective gives the same bits and the same cycle counts.
#include <gtest/gtest.h>

#include <random>

#include "pod_driver.h"
#include "pod_sc.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

std::vector<std::vector<uint32_t>> inputs(const CollectivePlan& plan, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i)
      in[c].push_back(f32_bits(nd(rng)));
  return in;
}

// One elaboration per process (SystemC cannot elaborate twice), so one test holds every case.
TEST(PodSystemC, SameBitsAndCyclesAsPlainCpp) {
  PodParams p;
  p.topo = Topology::torus({2, 2});
  p.variant = "4x4";
  p.link_latency = 3;
  ScPod pod("pod", p);
  CppPodHost cpp(p);

  for (const char* algo : {"ring", "torus"}) {
    CollectiveSpec s;
    s.n = 901;
    s.algorithm = algo;
    const CollectivePlan plan = make_plan(p.topo, s);
    const auto in = inputs(plan, 3);
    PodCollectiveRun sc_run, cpp_run;
    // Start both at the same cycle: between jobs the SystemC clock runs a cycle while the host
    // thread waits for the next job, and some arbitration depends on the cycle number.
    uint64_t sc_start_cycle = 0;
    pod.run([&](PodHost& h) {
      sc_start_cycle = h.core().cycle();
      while (cpp.core().cycle() < sc_start_cycle) cpp.core().step();
      sc_run = PodDriver(h).run(s, in);
    });
    ASSERT_EQ(cpp.core().cycle(), sc_start_cycle);
    cpp_run = PodDriver(cpp).run(s, in);
    EXPECT_EQ(sc_run.out, execute_plan_f32(plan, in)) << algo;
    EXPECT_EQ(sc_run.out, cpp_run.out) << algo;
    EXPECT_EQ(sc_run.collective_cycles, cpp_run.collective_cycles) << algo;
    EXPECT_EQ(sc_run.load_cycles, cpp_run.load_cycles) << algo;
    uint64_t a = 0, b = 0;
    for (const auto& l : sc_run.link_flits) a += l.flits;
    for (const auto& l : cpp_run.link_flits) b += l.flits;
    EXPECT_EQ(a, b) << algo;
    EXPECT_GT(a, 0u) << algo;
  }

  // The host socket: status and counters by TLM reads, clear errors for bad accesses.
  pod.run([&](PodHost& h) {
    ScPod& sp = static_cast<ScPod&>(h);
    const TlmStatus st = sp.status(1);
    EXPECT_EQ(st.err, 0u);
    EXPECT_NE(st.flags & 4u, 0u);  // router empty
    EXPECT_THROW(sp.write(0, 32, nullptr, 64), std::invalid_argument);  // misaligned
    uint8_t buf[64] = {};
    EXPECT_THROW(sp.read(0, p.topo.num_chips() * 0 + (1ull << 40), buf, 64), std::invalid_argument);
  });

  // A chip error stops the job with the chip named.
  try {
    pod.run([&](PodHost& h) {
      h.push(2, {ChipCmd::make(static_cast<ChipOp>(12), 0, 0, 0, 0, 0, 0)});
      h.run_until_idle(100000);
    });
    FAIL() << "no error";
  } catch (const PodError& e) {
    EXPECT_NE(std::string(e.what()).find("chip 2 (0,1,0)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("illegal_opcode"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu

// libsystemc's main() calls sc_main.
int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
