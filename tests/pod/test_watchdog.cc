// The watchdog (docs/errors.md): a run in which nothing makes progress stops within
// watchdog_cycles (plus the check interval) with a diagnosis of what is stuck; real work, however
// long a single command takes, is progress; max_cycles stays the outer bound.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chip_driver.h"
#include "lone_chip.h"
#include "pod.h"
#include "pod_driver.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

PodParams params(Topology topo, uint64_t watchdog) {
  PodParams p;
  p.topo = std::move(topo);
  p.variant = "4x4";
  p.link_latency = 2;
  p.watchdog_cycles = watchdog;
  return p;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Chip 1 waits on an ICI counter that no chip sends to: a wait nobody answers.
TEST(Watchdog, AWaitNobodyAnswersStopsWithinTheBound) {
  constexpr uint64_t kW = 4000, kCheck = kW / 16;  // the check interval (pod.cc watch())
  CppPodHost host(params(Topology::torus({2, 2}), kW));
  const uint64_t start = host.cycle();
  host.push(1, {cmd_nop(), cmd_ici_wait(5, 1), cmd_nop()});
  try {
    host.run_until_idle();
    FAIL() << "no error";
  } catch (const HangError& e) {
    const uint64_t took = host.cycle() - start;
    EXPECT_GE(took, kW);
    EXPECT_LE(took, kW + 2 * kCheck + 16);
    const std::string m = e.what();
    EXPECT_TRUE(has(m, "watchdog: no progress for ")) << m;
    EXPECT_TRUE(has(m, "chip 1 (1,0,0): busy")) << m;
    EXPECT_TRUE(has(m, "queue head: command 1: ici_wait counter=5 value=1")) << m;
    EXPECT_TRUE(has(m, "ICI counter 5 is short of 1 rows")) << m;
    EXPECT_TRUE(has(m, "ICI_WAIT blocking the queue")) << m;
    EXPECT_TRUE(has(m, "idle: chips 0, 2, 3")) << m;
  }
}

// With the watchdog off, max_cycles is still the bound: a PodError that lists every chip.
TEST(Watchdog, OffLeavesMaxCyclesAsTheBound) {
  CppPodHost host(params(Topology::torus({2}), 0));
  host.push(0, {cmd_ici_wait(0, 1)});
  try {
    host.run_until_idle(3000);
    FAIL() << "no error";
  } catch (const HangError& e) {
    FAIL() << "the watchdog is off: " << e.what();
  } catch (const PodError& e) {
    EXPECT_TRUE(has(e.what(), "did not become idle in 3000 cycles")) << e.what();
    EXPECT_TRUE(has(e.what(), "chip 0 (0,0,0): busy")) << e.what();
  }
}

// Long work with a tight watchdog: HBM latency, DMA streams and collectives are progress.
// Credits are conserved: once the pod is idle every flit's credit has come back.
TEST(Watchdog, RealWorkIsProgressAndCreditsAreConserved) {
  CppPodHost host(params(Topology::torus({2, 2}), 300));
  PodDriver drv(host);
  CollectiveSpec s;
  s.algorithm = "torus";
  s.n = 20'001;
  std::mt19937 rng(5);
  std::vector<std::vector<uint32_t>> in(4, std::vector<uint32_t>(s.n));
  for (auto& v : in)
    for (auto& x : v) x = f32_bits(static_cast<float>(rng() % 1000) / 8.0f);
  const PodCollectiveRun r = drv.run(s, in);
  EXPECT_EQ(r.out, golden_collective(r.rounds, in));
  EXPECT_EQ(host.core().uncredited_flits(), 0u);
  uint64_t flits = 0;
  for (const auto& l : host.core().link_stats()) flits += l.flits;
  EXPECT_GT(flits, 0u);
}

// A chip alone (the single-chip host that tpusim matmul uses): a matmul passes under a tight
// watchdog, and a wait nobody answers is a HangError from the driver, not a ChipError of code 0.
TEST(Watchdog, SingleChipDriver) {
  LoneChip drv("4x4");
  drv.port().set_watchdog(300);
  std::mt19937 rng(2);
  std::vector<bf16_t> a(40 * 24), w(24 * 12);
  for (auto& x : a) x = f32_to_bf16(static_cast<float>(rng() % 17) - 8.0f);
  for (auto& x : w) x = f32_to_bf16(static_cast<float>(rng() % 17) - 8.0f);
  const MatmulRun r = drv.matmul(a, w, 40, 24, 12);
  EXPECT_EQ(r.c_bits.size(), 40u * 12u);
  drv.port().set_watchdog(2000);
  try {
    drv.run({cmd_ici_wait(7, 3)});
    FAIL() << "no error";
  } catch (const HangError& e) {
    EXPECT_TRUE(has(e.what(), "ici_wait counter=7 value=3")) << e.what();
  }
}

}  // namespace
}  // namespace tpu
