// tpu performance model (model/include/tpu/perf.h): matmul ideal cycles, roofline and MFU, the
// nccl-tests bus-bandwidth factors and collective bounds, the links a topology gives a chip and an
// all-reduce algorithm keeps busy, all against values worked out by hand here; what collective
// plans cost on the links against those bounds; and the errors on invalid input.
#include "tpu/perf.h"

#include <gtest/gtest.h>

#include "expect_invalid.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {
namespace {


// ---- Matmul ----

TEST(PerfMatmul, PartialTilesOnA4x4Array) {
  // K = 9 -> 3 row tiles, N = 5 -> 2 column tiles: 6 tiles, 10 activation beats each.
  EXPECT_EQ(matmul_tiles(9, 5, 4, 4), 6u);
  EXPECT_EQ(matmul_ideal_cycles(10, 9, 5, 4, 4), 60u);
  EXPECT_EQ(matmul_useful_macs(10, 9, 5), 450u);
  EXPECT_EQ(peak_macs_per_cycle(4, 4), 16u);
  // 450 useful MACs in 60 cycles of a 16-MAC array: padding wastes 1 - 450/960.
  EXPECT_DOUBLE_EQ(mfu(450, 1, 16, 60), 0.46875);
}

TEST(PerfMatmul, ExactTilesReachFullUtilization) {
  EXPECT_EQ(matmul_ideal_cycles(8, 128, 128, 128, 128), 8u);
  EXPECT_DOUBLE_EQ(mfu(matmul_useful_macs(8, 128, 128), 1, peak_macs_per_cycle(128, 128), 8), 1.0);
}

TEST(PerfMatmul, RectangularArray) {
  // 2 x 8 array: K = 5 -> 3 row tiles, N = 8 -> 1 column tile.
  EXPECT_EQ(matmul_ideal_cycles(7, 5, 8, 2, 8), 21u);
  EXPECT_EQ(peak_macs_per_cycle(2, 8), 16u);
}

TEST(PerfMatmul, MfuAcrossChips) {
  // 900 MACs on 2 chips of 16 MACs/cycle over 100 cycles: 900 / 3200.
  EXPECT_DOUBLE_EQ(mfu(900, 2, 16, 100), 0.28125);
}

TEST(PerfMatmul, RooflineTakesTheLargerBound) {
  // M=10, K=9, N=5: A 10*9*2 + W 9*5*2 + C 10*5*4 = 180 + 90 + 200 = 470 bytes.
  const MatmulBound fast = matmul_bound(10, 9, 5, 4, 4, 470, 8);
  EXPECT_EQ(fast.tiles, 6u);
  EXPECT_EQ(fast.compute_cycles, 60u);
  EXPECT_EQ(fast.useful_macs, 450u);
  EXPECT_EQ(fast.peak_macs_per_cycle, 16u);
  EXPECT_DOUBLE_EQ(fast.hbm_bytes, 470);
  EXPECT_DOUBLE_EQ(fast.hbm_cycles, 58.75);
  EXPECT_DOUBLE_EQ(fast.roofline_cycles, 60);
  EXPECT_FALSE(fast.hbm_bound);

  const MatmulBound slow = matmul_bound(10, 9, 5, 4, 4, 470, 4);
  EXPECT_DOUBLE_EQ(slow.hbm_cycles, 117.5);
  EXPECT_DOUBLE_EQ(slow.roofline_cycles, 117.5);
  EXPECT_TRUE(slow.hbm_bound);
  EXPECT_DOUBLE_EQ(hbm_cycles(0, 4), 0);
}

// ---- Collectives ----

struct FactorCase {
  Collective c;
  int chips;
  double factor;
};

class PerfBusbwFactor : public testing::TestWithParam<FactorCase> {};

TEST_P(PerfBusbwFactor, MatchesNcclTests) {
  const FactorCase& f = GetParam();
  EXPECT_DOUBLE_EQ(busbw_factor(f.c, f.chips), f.factor);
  // busbw = algbw * factor, algbw = S / t: 1024 bytes in 256 cycles is 4 B/cycle.
  EXPECT_DOUBLE_EQ(algbw(1024, 256), 4.0);
  EXPECT_DOUBLE_EQ(busbw(f.c, f.chips, 1024, 256), 4.0 * f.factor);
}

INSTANTIATE_TEST_SUITE_P(Factors, PerfBusbwFactor,
                         testing::Values(FactorCase{Collective::kAllReduce, 8, 1.75},  // 2 * 7 / 8
                                         FactorCase{Collective::kAllReduce, 2, 1.0},
                                         FactorCase{Collective::kAllReduce, 1, 0.0},
                                         FactorCase{Collective::kReduceScatter, 8, 0.875},  // 7 / 8
                                         FactorCase{Collective::kAllGather, 8, 0.875},
                                         FactorCase{Collective::kAllGather, 4, 0.75},
                                         FactorCase{Collective::kAllToAll, 8, 0.875},
                                         FactorCase{Collective::kAllToAll, 1, 0.0},
                                         FactorCase{Collective::kBroadcast, 8, 1.0},
                                         FactorCase{Collective::kBroadcast, 1, 1.0}),
                         [](const testing::TestParamInfo<FactorCase>& pinfo) {
                           return std::string(collective_name(pinfo.param.c)) + "_p" +
                                  std::to_string(pinfo.param.chips);
                         });

TEST(PerfCollective, IciBound) {
  // All-reduce of 8192 bytes on 8 chips, 2 links of 4 B/cycle: 1.75 * 8192 / 8.
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kAllReduce, 8, 8192, 2, 4), 1792);
  // All-gather of a 8192-byte gathered buffer: 0.875 * 8192 / 8.
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kAllGather, 8, 8192, 2, 4), 896);
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kReduceScatter, 8, 8192, 1, 4), 1792);
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kAllToAll, 4, 4096, 4, 2), 384);
  // Broadcast: the root sends S once over its links.
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kBroadcast, 8, 8192, 2, 4), 1024);
  // One chip: nothing moves, and it has no links.
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kBroadcast, 1, 8192, 0, 4), 0);
  EXPECT_DOUBLE_EQ(collective_ici_cycles(Collective::kAllReduce, 1, 8192, 0, 4), 0);
}

// A bf16 reduction sends f32 partials: the plan's bytes over the same plan's at the dtype's size.
TEST(PerfCollective, PartialsFactorIsWhatThePlanSends) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast})
    for (DType d : {DType::kF32, DType::kBf16}) {
      CollectiveSpec s;
      s.collective = c;
      s.dtype = d;
      s.n = 4 * 96;
      const CollectivePlan plan = make_plan(Topology::torus({4}), s);
      uint64_t sent = 0, at_dtype = 0;
      for (const Step& st : plan.steps)
        for (const Transfer& t : st.transfers) {
          sent += plan.transfer_bytes(t);
          at_dtype += t.count * (d == DType::kBf16 ? 2u : 4u);
        }
      EXPECT_DOUBLE_EQ(partials_factor(c, d),
                       static_cast<double>(sent) / static_cast<double>(at_dtype))
          << collective_name(c) << " " << dtype_name(d);
    }
}

TEST(PerfCollective, HbmBytesAreInputPlusOutput) {
  EXPECT_DOUBLE_EQ(collective_hbm_bytes(Collective::kAllReduce, 4, 1024), 2048);
  EXPECT_DOUBLE_EQ(collective_hbm_bytes(Collective::kReduceScatter, 4, 1024), 1280);
  EXPECT_DOUBLE_EQ(collective_hbm_bytes(Collective::kAllGather, 4, 1024), 1280);
  EXPECT_DOUBLE_EQ(collective_hbm_bytes(Collective::kAllToAll, 4, 1024), 2048);
  EXPECT_DOUBLE_EQ(collective_hbm_bytes(Collective::kBroadcast, 4, 1024), 1024);
}

TEST(PerfCollective, IdealIsTheLargerOfIciAndHbm) {
  const CollectiveBound links = collective_bound(Collective::kAllReduce, 8, 8192, 2, 4, 16384, 16);
  EXPECT_DOUBLE_EQ(links.factor, 1.75);
  EXPECT_DOUBLE_EQ(links.ici_cycles, 1792);
  EXPECT_DOUBLE_EQ(links.hbm_bytes, 16384);
  EXPECT_DOUBLE_EQ(links.hbm_cycles, 1024);
  EXPECT_DOUBLE_EQ(links.ideal_cycles, 1792);
  EXPECT_FALSE(links.hbm_bound);

  const CollectiveBound hbm = collective_bound(Collective::kAllReduce, 8, 8192, 2, 4, 16384, 8);
  EXPECT_DOUBLE_EQ(hbm.hbm_cycles, 2048);
  EXPECT_DOUBLE_EQ(hbm.ideal_cycles, 2048);
  EXPECT_TRUE(hbm.hbm_bound);
}

// ---- Links per chip ----

struct LinksCase {
  std::string name;
  Topology topo;
  int links;
};

class PerfLinks : public testing::TestWithParam<LinksCase> {};

TEST_P(PerfLinks, AsTheTopologyGivesThem) {
  const LinksCase& c = GetParam();
  EXPECT_EQ(topology_links_per_chip(c.topo), c.links);
  // The bound's L is what the best-connected chip has.
  int most = 0;
  int total = 0;
  for (int id = 0; id < c.topo.num_chips(); ++id) {
    most = std::max(most, chip_links(c.topo, id));
    total += chip_links(c.topo, id);
  }
  EXPECT_EQ(most, c.links);
  // topology_links lists each link once per direction, so once from each chip it leaves.
  EXPECT_EQ(topology_links(c.topo).size(), static_cast<size_t>(total));
}

Topology mixed_4x1x2() {  // x a ring of 4, y a single chip, z a line of 2
  Topology t;
  t.size = {4, 1, 2};
  t.wrap = {true, true, false};
  return t;
}

INSTANTIATE_TEST_SUITE_P(Topologies, PerfLinks,
                         testing::Values(LinksCase{"ring2", Topology::torus({2}), 2},
                                         LinksCase{"ring8", Topology::torus({8}), 2},
                                         LinksCase{"torus2x2", Topology::torus({2, 2}), 4},
                                         LinksCase{"torus4x4x4", Topology::torus({4, 4, 4}), 6},
                                         LinksCase{"mesh3x3", Topology::mesh({3, 3}), 4},
                                         LinksCase{"line2", Topology::mesh({2}), 1},
                                         LinksCase{"line8", Topology::mesh({8}), 2},
                                         LinksCase{"single", Topology::torus({1}), 0},
                                         LinksCase{"mixed4x1x2", mixed_4x1x2(), 3}),
                         [](const testing::TestParamInfo<LinksCase>& pinfo) {
                           return pinfo.param.name;
                         });

TEST(PerfLinksPerChip, MeshEdgesHaveFewer) {
  const Topology m = Topology::mesh({3, 3});
  EXPECT_EQ(chip_links(m, 0), 2);  // corner
  EXPECT_EQ(chip_links(m, 1), 3);  // edge
  EXPECT_EQ(chip_links(m, 4), 4);  // centre
  const Topology line = Topology::mesh({8});
  EXPECT_EQ(chip_links(line, 0), 1);
  EXPECT_EQ(chip_links(line, 3), 2);
  EXPECT_EQ(chip_links(line, 7), 1);
  const Topology t = Topology::torus({4, 4});
  for (int id = 0; id < 16; ++id) EXPECT_EQ(chip_links(t, id), 4) << id;
}

// ---- What a collective plan costs on the links ----

double plan_time(const Topology& t, const std::string& algo, size_t n) {
  CollectiveSpec spec;
  spec.n = n;
  spec.algorithm = algo;
  return plan_cost(make_plan(t, spec)).link_cycles(1.0);
}

TEST(PerfPlanCost, RingBiringAndTorusMeetTheBandwidthBound) {
  // n divisible by every chunking, so each plan's busiest links carry exactly the bound.
  struct Case {
    Topology topo;
    std::string algo;
    size_t n;
  };
  for (const Case& c : {Case{Topology::torus({8}), "ring", 800},
                        Case{Topology::torus({8}), "biring", 800},
                        Case{Topology::torus({4, 4}), "ring", 640},
                        Case{Topology::torus({4, 4}), "biring", 640},
                        Case{Topology::torus({4, 4}), "torus", 640},
                        Case{Topology::torus({2, 2, 2}), "torus", 480},
                        Case{Topology::torus({4, 4, 4}), "torus", 3 * 2 * 64 * 5}}) {
    SCOPED_TRACE(c.topo.name() + " " + c.algo);
    const int p = c.topo.num_chips();
    const double bytes = 4.0 * static_cast<double>(c.n);
    const double bound = collective_ici_cycles(Collective::kAllReduce, p, bytes,
                                               allreduce_links_per_chip(c.topo, c.algo), 1);
    EXPECT_DOUBLE_EQ(plan_time(c.topo, c.algo, c.n), bound);
  }
  // Ring: every link carries 2 (p - 1) / p * N bytes, in 2 (p - 1) steps.
  CollectiveSpec spec;
  spec.n = 800;
  const PlanCost ring = plan_cost(make_plan(Topology::torus({8}), spec));
  EXPECT_EQ(ring.steps, 14u);
  EXPECT_EQ(ring.max_link_bytes, 2u * 7u * 800u * 4u / 8u);
  EXPECT_EQ(ring.link_bytes.size(), 8u);  // the + direction of the 8 links
  // On a 4x4 torus the torus algorithm beats biring, which beats ring, by the link count.
  const Topology t44 = Topology::torus({4, 4});
  EXPECT_DOUBLE_EQ(plan_time(t44, "ring", 640), 2 * plan_time(t44, "biring", 640));
  EXPECT_DOUBLE_EQ(plan_time(t44, "biring", 640), 2 * plan_time(t44, "torus", 640));
  // A folded line uses each direction of each link twice per step of a bidirectional ring.
  spec.algorithm = "biring";
  spec.n = 60;
  const PlanCost line = plan_cost(make_plan(Topology::mesh({6}), spec));
  EXPECT_EQ(line.link_bytes.size(), 10u);
  EXPECT_EQ(line.max_link_bytes, 2 * (2u * 5u * 30u * 4u / 6u));
}

TEST(PerfPlanCost, Bf16AllReduceSendsF32PartialsAndGathersBf16) {
  // Ring of 4, 400 bf16: each step moves one chunk of 100 on every + link; the reduce-scatter's
  // 3 steps carry f32 partials (400 bytes), the all-gather's 3 the rounded bf16 (200 bytes).
  CollectiveSpec spec;
  spec.dtype = DType::kBf16;
  spec.n = 400;
  const CollectivePlan plan = make_plan(Topology::torus({4}), spec);
  EXPECT_EQ(plan.element_bytes, 4u);
  const PlanCost c = plan_cost(plan);
  EXPECT_EQ(c.step_max_link_bytes, (std::vector<uint64_t>{400, 400, 400, 200, 200, 200}));
  for (const Step& st : plan.steps)
    for (const Transfer& t : st.transfers)
      EXPECT_EQ(plan.transfer_bytes(t), t.count * (t.kind == TransferKind::kCopy ? 2u : 4u));
  // A bf16 all-gather and an f32 all-reduce: one size for every transfer.
  spec.collective = Collective::kAllGather;
  EXPECT_EQ(plan_cost(make_plan(Topology::torus({4}), spec)).max_link_bytes, 3u * 100u * 2u);
  spec.collective = Collective::kAllReduce;
  spec.dtype = DType::kF32;
  EXPECT_EQ(plan_cost(make_plan(Topology::torus({4}), spec)).max_link_bytes, 6u * 100u * 4u);
}

TEST(PerfPlanCost, AllToAllAndLinkList) {
  CollectiveSpec spec;
  spec.collective = Collective::kAllToAll;
  spec.n = 8 * 3;
  const PlanCost c = plan_cost(make_plan(Topology::torus({8}), spec));
  EXPECT_EQ(c.steps, 7u);
  EXPECT_EQ(c.max_link_bytes, 8u * 7u / 2u * 3u * 4u);  // p (p - 1) / 2 blocks per link
  EXPECT_EQ(topology_links(Topology::torus({4, 4})).size(), 64u);
  EXPECT_EQ(topology_links(Topology::mesh({3, 3})).size(), 24u);
  EXPECT_EQ(topology_links(Topology::torus({2})).size(), 4u);  // two links each way
}

TEST(PerfLinksPerChip, AllReduceAlgorithmsKeepTheirLinksBusy) {
  const Topology t = Topology::torus({4, 4, 4});
  EXPECT_EQ(allreduce_links_per_chip(t, "ring"), 1);
  EXPECT_EQ(allreduce_links_per_chip(t, "biring"), 2);
  EXPECT_EQ(allreduce_links_per_chip(Topology::torus({4, 1, 2}), "torus"), 4);
  // Within groups: the group's active dimensions.
  EXPECT_EQ(allreduce_links_per_chip(t, {0, 1}, "torus"), 4);
  EXPECT_EQ(allreduce_links_per_chip(t, {}, "torus"), 6);
  EXPECT_EQ(allreduce_links_per_chip(t, {2}, "biring"), 2);
  EXPECT_EQ(allreduce_links_per_chip(t, {0, 2}, "direct"), 4);
  EXPECT_EQ(allreduce_links_per_chip(t, {}, "direct"), 6);
}

// ---- Errors ----

TEST(PerfErrors, InvalidInputNamesTheParameterAndTheRule) {
  expect_invalid([] { matmul_ideal_cycles(10, 9, 5, 0, 4); }, {"rows", ">= 1"});
  expect_invalid([] { matmul_ideal_cycles(10, 9, 5, 4, 0); }, {"cols", ">= 1"});
  expect_invalid([] { matmul_ideal_cycles(0, 9, 5, 4, 4); }, {"m", ">= 1"});
  expect_invalid([] { matmul_tiles(0, 5, 4, 4); }, {"k", ">= 1"});
  expect_invalid([] { matmul_useful_macs(1, 1, 0); }, {"n", ">= 1"});
  expect_invalid([] { peak_macs_per_cycle(0, 4); }, {"rows", ">= 1"});
  expect_invalid([] { matmul_useful_macs(std::numeric_limits<uint64_t>::max() / 2, 4, 1); },
                 {"m * k * n", "overflows"});
  expect_invalid([] { hbm_cycles(100, 0); }, {"hbm_bytes_per_cycle", "> 0"});
  expect_invalid([] { hbm_cycles(-1, 4); }, {"bytes", ">= 0"});
  expect_invalid([] { matmul_bound(10, 9, 5, 4, 4, 470, -2); }, {"hbm_bytes_per_cycle", "> 0"});
  expect_invalid([] { mfu(450, 0, 16, 60); }, {"chips", ">= 1"});
  expect_invalid([] { mfu(450, 1, 0, 60); }, {"peak_macs_per_cycle", ">= 1"});
  expect_invalid([] { mfu(450, 1, 16, 0); }, {"cycles", ">= 1"});
  expect_invalid([] { busbw_factor(Collective::kAllReduce, 0); }, {"chips", ">= 1"});
  expect_invalid([] { algbw(1024, 0); }, {"cycles", "> 0"});
  expect_invalid([] { busbw(Collective::kAllGather, 4, -8, 10); }, {"bytes", ">= 0"});
  expect_invalid([] { collective_ici_cycles(Collective::kAllReduce, 8, 8192, 0, 4); },
                 {"links", ">= 1 when chips > 1"});
  expect_invalid([] { collective_ici_cycles(Collective::kAllReduce, 1, 8192, -1, 4); },
                 {"links", ">= 0"});
  expect_invalid([] { collective_ici_cycles(Collective::kAllReduce, 8, 8192, 2, 0); },
                 {"link_bytes_per_cycle", "> 0"});
  expect_invalid([] { collective_ici_cycles(Collective::kAllReduce, 0, 8192, 2, 4); },
                 {"chips", ">= 1"});
  expect_invalid([] { collective_hbm_bytes(Collective::kAllReduce, 0, 8192); }, {"chips"});
  expect_invalid([] { collective_bound(Collective::kAllReduce, 8, 8192, 2, 4, 100, 0); },
                 {"hbm_bytes_per_cycle", "> 0"});
  expect_invalid([] { busbw_factor(static_cast<Collective>(99), 4); }, {"collective"});
  expect_invalid([] { chip_links(Topology::mesh({3, 3}), 9); }, {"chip", "[0, 9)"});
  expect_invalid([] { topology_links_per_chip(Topology::torus({})); }, {"topology.size"});
  expect_invalid([] { allreduce_links_per_chip(Topology::torus({4}), "star"); }, {"algorithm"});
  expect_invalid(
      [] { plan_cost(make_plan(Topology::torus({4}), CollectiveSpec{})).link_cycles(0); },
      {"link_bytes_per_cycle", "> 0"});
  expect_invalid(
      [] {
        topology_links_per_chip(Topology::torus({4, 17}));
      },
      {"topology.size[1]", "1 to 16 chips"});
}

}  // namespace
}  // namespace tpu
