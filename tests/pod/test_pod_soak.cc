// Soak: collectives on a 4x4x4 torus of 64 chips, all-to-all with every chip sending to every
// other at once (the links saturate; 16x16 chips: the ring all-to-all lands about 2000 blocks
// per chip, more than a 4x4 chip's VMEM holds) and a ring all-reduce (4x4 chips), and the direct
// all-to-all on a 4x4x8 (plain and twisted); bit-exact against the plan executor. Label `soak`
// (minutes).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "pod.h"
#include "pod_driver.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

PodParams pod444(const std::string& variant) {
  PodParams p;
  p.topo = Topology::torus({4, 4, 4});
  p.variant = variant;
  p.link_latency = 2;
  p.link_width = variant == "16x16" ? 16 : 4;  // a row in 4 cycles
  return p;
}

// Bit errors, bursts and dropped words on every link (docs/reliability.md "The fault model").
void link_faults(PodParams& p, uint64_t seed, double ber, double burst, double drop) {
  p.faults.seed = seed;
  p.faults.link_bit_error_rate = ber;
  p.faults.link_burst_rate = burst;
  p.faults.link_drop_rate = drop;
}

std::vector<std::vector<uint32_t>> random_inputs(const CollectivePlan& plan, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i)
      in[c].push_back(static_cast<uint32_t>(rng()));  // any bits: NaN payloads, Inf, subnormals
  return in;
}

// Normal f32 values, n per chip.
std::vector<std::vector<uint32_t>> normal_inputs(std::size_t chips, std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<uint32_t>> in(chips);
  for (auto& v : in)
    for (std::size_t i = 0; i < n; ++i) v.push_back(f32_bits(nd(rng)));
  return in;
}

// A torus all-reduce of n f32 per chip (normal_inputs of `seed`), loaded by the backdoor.
struct AllReduceRun {
  std::vector<std::vector<uint32_t>> in;
  PodCollectiveRun run;
};
AllReduceRun backdoor_allreduce(const PodParams& p, std::size_t n, uint64_t seed) {
  CppPodHost host(p);
  PodDriver drv(host);
  CollectiveSpec s;
  s.algorithm = "torus";
  s.n = n;
  AllReduceRun a;
  a.in = normal_inputs(static_cast<std::size_t>(host.num_chips()), n, seed);
  PodCollectiveOptions o;
  o.backdoor = true;
  a.run = drv.run(s, a.in, o);
  return a;
}

TEST(PodSoak, AllToAllAtSaturationOn4x4x4) {
  CppPodHost host(pod444("16x16"));
  PodDriver drv(host);
  for (uint64_t round = 0; round < 2; ++round) {
    CollectiveSpec s;
    s.collective = Collective::kAllToAll;
    s.n = 64 * (16 + 16 * round);
    CollectiveSpec sg = s;
    sg.granule = drv.granule(s.dtype);
    const CollectivePlan plan = make_plan(host.info().topo, sg);
    const auto in = random_inputs(plan, round + 1);
    const PodCollectiveRun r = drv.run(s, in);
    ASSERT_EQ(r.out, golden_collective(r.rounds, in)) << "round " << round;
    uint64_t busiest = 0;
    for (const auto& l : r.prog.link_flits) busiest = std::max(busiest, l.flits);
    // Every link carried traffic and the busiest one was busy most of the collective.
    EXPECT_GT(busiest * host.info().link_gap, r.collective_cycles / 2) << "round " << round;
  }
}

// The direct all-to-all on 128 chips (4x4x8 of 4x4 chips), plain and twisted, in more rounds
// than regions: every chip waits for the tokens of all 127 receivers a round on its shared token
// counters (a counter per pair would need more than the chip's 64) and counts every sender's
// rows on one counter per round. Bit-exact, each round's blocks landing in place.
TEST(PodSoak, DirectAllToAllOn4x4x8InRounds) {
  for (bool twist : {false, true}) {
    SCOPED_TRACE(twist ? "twisted" : "plain");
    PodParams p = pod444("4x4");
    p.topo = Topology::torus({4, 4, 8});
    p.twist = twist;
    CppPodHost host(p);
    PodDriver drv(host);
    CollectiveSpec s;
    s.collective = Collective::kAllToAll;
    s.algorithm = "direct";
    s.n = 128 * 4 * drv.granule(s.dtype);  // 4 granules per block
    CollectiveSpec sg = s;
    sg.granule = drv.granule(s.dtype);
    const auto in = random_inputs(make_plan(host.info().topo, sg), twist ? 2 : 1);
    PodCollectiveOptions o;
    o.rounds = 4;
    const PodCollectiveRun r = drv.run(s, in, o);
    ASSERT_EQ(r.rounds.size(), 4u);
    EXPECT_EQ(r.out, golden_collective(r.rounds, in));
  }
}

// The ring all-reduce over all 64 chips (the torus plan's 384 pieces, each padded to a 64-byte
// row group, do not fit the 4x4 chip's 64 KiB of VMEM; docs/pod.md).
TEST(PodSoak, RingAllReduceOn4x4x4) {
  CppPodHost host(pod444("4x4"));
  PodDriver drv(host);
  CollectiveSpec s;
  s.algorithm = "ring";
  s.n = 4000;
  const auto in = normal_inputs(static_cast<std::size_t>(host.num_chips()), s.n, 5);
  const PodCollectiveRun r = drv.run(s, in);
  EXPECT_EQ(r.out, golden_collective(r.rounds, in));
}

// A 4 MiB all-reduce per chip on a 4x4 torus of 16x16 chips: dozens of rounds through VMEM,
// regions lent back by tokens, bit-exact against the golden of the rounds and within the f64
// bound of the exact sum.
TEST(PodSoak, FourMiBAllReduceInRoundsOn4x4) {
  PodParams p;
  p.topo = Topology::torus({4, 4});
  p.variant = "16x16";
  p.link_latency = 2;
  p.link_width = 16;
  const std::size_t n = (4u << 20) / 4;
  const AllReduceRun a = backdoor_allreduce(p, n, 11);
  const auto& in = a.in;
  const PodCollectiveRun& r = a.run;
  EXPECT_GT(r.rounds.size(), 20u);
  ASSERT_EQ(r.out, golden_collective(r.rounds, in));
  for (std::size_t i = 0; i < n; i += 97) {
    double sum = 0, abs = 0;
    for (const auto& v : in) {
      sum += f32_from_bits(v[i]);
      abs += std::fabs(f32_from_bits(v[i]));
    }
    ASSERT_LE(std::fabs(f32_from_bits(r.out[5][i]) - sum), 15 * 0x1p-24 * abs) << i;
  }
}

// The all-reduce of a 4x4x4 torus of 16x16 chips in rounds (384 KiB per chip, six rounds):
// bit-exact, and never hung. The VPU once let a younger reduction run ahead of an older one all
// but its last row; the send forwarding that reduction's rows then held its packet's path while
// the last row waited for the older reduction, whose rows needed that path on another chip: the
// pod deadlocked at cycle ~2700 (the watchdog, set low here, names it at once).
TEST(PodSoak, AllReduceInRoundsOn4x4x4Of16x16Chips) {
  PodParams p = pod444("16x16");
  p.watchdog_cycles = 5000;
  const AllReduceRun a = backdoor_allreduce(p, (384u << 10) / 4, 13);
  EXPECT_GT(a.run.rounds.size(), 4u);
  EXPECT_EQ(a.run.out, golden_collective(a.run.rounds, a.in));
}

// Every collective on a 4x4 torus and a 4x4x4 torus of 4x4 chips (all-to-all on the 4x4 only)
// with link bit errors on every link (1e-5 per bit, and bursts and drops): bit-exact, every
// link's credits conserved, the link layer resending (docs/ici.md "Link layer").
TEST(PodSoak, EveryCollectiveUnderLinkFaults) {
  for (const Topology& topo : {Topology::torus({4, 4}), Topology::torus({4, 4, 4})}) {
    PodParams p = pod444("4x4");
    p.topo = topo;
    link_faults(p, 31, 1e-5, 1e-4, 1e-4);
    CppPodHost host(p);
    PodDriver drv(host);
    uint64_t seed = 1;
    for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter,
                         Collective::kAllGather, Collective::kAllToAll, Collective::kBroadcast}) {
      // A 4x4 chip's VMEM holds neither the torus all-reduce's pieces nor the all-to-all's
      // blocks of 64 chips: the ring here, and the all-to-all on 16x16 chips below.
      const bool big = topo.num_chips() == 64;
      if (big && c == Collective::kAllToAll) continue;
      CollectiveSpec s;
      s.collective = c;
      s.algorithm = c == Collective::kAllReduce && !big ? "torus" : "ring";
      s.n = c == Collective::kAllToAll ? 1024 : 2048;
      CollectiveSpec sg = s;
      sg.granule = drv.granule(s.dtype);
      const CollectivePlan plan = make_plan(host.info().topo, sg);
      const auto in = random_inputs(plan, seed++);
      PodCollectiveOptions o;
      o.backdoor = true;
      const PodCollectiveRun r = drv.run(s, in, o);
      EXPECT_EQ(r.out, golden_collective(r.rounds, in))
          << collective_name(c) << " on " << topo.name();
      EXPECT_EQ(host.core().uncredited_flits(), 0u) << collective_name(c);
    }
    uint64_t crc = 0, replays = 0, down = 0;
    for (const LinkStat& l : host.link_stats()) {
      crc += l.crc_errors;
      replays += l.replays;
      down += l.link_down;
    }
    EXPECT_GT(crc, 0u) << topo.name();
    EXPECT_GT(replays, 0u) << topo.name();
    EXPECT_EQ(down, 0u) << topo.name();
  }
}

// The all-to-all on a 4x4x4 torus of 16x16 chips, every chip sending to every other at once,
// with bit errors (1e-6 per bit), bursts and dropped words on every link, against the same run
// without faults: bit-exact; no deadlock (the watchdog would throw); credits conserved; and the
// link layer sent every flit of the fault-free run once as new, and no more (its replays
// apart), on every link: nothing lost, nothing delivered twice.
TEST(PodSoak, AllToAllOn4x4x4UnderLinkFaults) {
  CollectiveSpec s;
  s.collective = Collective::kAllToAll;
  s.n = 64 * 16;
  std::vector<LinkStat> clean;
  for (const bool faults : {false, true}) {
    PodParams p = pod444("16x16");
    if (faults) link_faults(p, 5, 1e-6, 1e-5, 1e-5);
    CppPodHost host(p);
    PodDriver drv(host);
    CollectiveSpec sg = s;
    sg.granule = drv.granule(s.dtype);
    const auto in = random_inputs(make_plan(host.info().topo, sg), 9);
    const PodCollectiveRun r = drv.run(s, in);
    ASSERT_EQ(r.out, golden_collective(r.rounds, in)) << "faults " << faults;
    EXPECT_EQ(host.core().uncredited_flits(), 0u) << "faults " << faults;
    const std::vector<LinkStat> links = host.link_stats();
    if (!faults) {
      clean = links;
      continue;
    }
    ASSERT_EQ(links.size(), clean.size());
    uint64_t crc = 0, replays = 0;
    for (std::size_t i = 0; i < links.size(); ++i) {
      const LinkStat& l = links[i];
      EXPECT_EQ(clean[i].replayed_flits, 0u);
      EXPECT_EQ(l.flits - l.replayed_flits, clean[i].flits)
          << "chip " << l.chip << " direction " << l.dir;
      EXPECT_EQ(l.link_down, 0u) << "chip " << l.chip << " direction " << l.dir;
      crc += l.crc_errors;
      replays += l.replays;
    }
    EXPECT_GT(crc, 0u);
    EXPECT_GT(replays, 0u);
  }
}

}  // namespace
}  // namespace tpu
