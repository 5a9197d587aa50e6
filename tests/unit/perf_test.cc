// tpu performance model (model/include/tpu/perf.h): matmul ideal cycles, roofline and MFU, the
// nccl-tests bus-bandwidth factors and collective bounds, the links a topology gives a chip, all
// against values worked out by hand here, and the errors on invalid input.
#include "tpu/perf.h"

#include <gtest/gtest.h>

#include "expect_invalid.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
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
  for (int id = 0; id < c.topo.num_chips(); ++id) most = std::max(most, chip_links(c.topo, id));
  EXPECT_EQ(most, c.links);
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
  expect_invalid(
      [] {
        topology_links_per_chip(Topology::torus({4, 17}));
      },
      {"topology.size[1]", "1 to 16 chips"});
}

}  // namespace
}  // namespace tpu
