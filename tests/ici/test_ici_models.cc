// The two network models (IciModelKind) are the same network: the grid (one verilated model of
// the whole network) and the node model (one verilated router model per node, wired in C++) run
// the same traffic cycle for cycle: every packet injected and delivered in the same cycles at the
// same node with the same payload, every router statistic equal, with and without ejection
// back-pressure. And the node model runs what the 16-router grid cannot: a 4x4x4 and an 8x8
// torus, every packet delivered, head latency exactly the zero-load model, assertions live.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "ici_net.h"
#include "ici_test_util.h"
#include "ici_traffic.h"

namespace tpu {
namespace {

IciTopology topo_by_id(int id, unsigned lat) {
  IciTopology t = id == 0   ? ici_ring(4)
                  : id == 1 ? ici_2d(4, 4)
                  : id == 2 ? ici_3d(2, 2, 2)
                            : ici_2d(3, 3, /*wrap=*/false);
  t.link_latency = lat;
  return t;
}

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

// Everything a run shows from outside: per delivered packet (in delivery order) its endpoints,
// number, cycles, ejecting node and a payload hash; then every statistic of every router.
struct Observed {
  std::vector<std::array<uint64_t, 8>> packets;
  std::vector<uint32_t> stats;
  bool drained = false;
  uint64_t asserts = 0;
};

Observed run(const IciTopology& t, IciModelKind model, bool backpressure) {
  IciNet net(t, "", model);
  EXPECT_EQ(net.model(), model);
  Observed ob;
  net.on_deliver([&](const IciPacket& p) {
    uint64_t h = 0;
    for (uint64_t w : p.payload) h = mix(h ^ w);
    ob.packets.push_back(
        {p.src, p.dst, p.addr, p.injected, p.head_out, p.delivered, p.eject_node, h});
  });
  if (backpressure)
    net.set_eject_ready([](unsigned n, uint64_t c) { return mix(c * 64 + n) % 4 != 0; });
  std::mt19937_64 rng(5);
  uint32_t seq = 0;
  for (int c = 0; c < 1500; ++c) {
    for (unsigned s = 0; s < net.nodes(); ++s) {
      if (rng() % 4 != 0) continue;  // 1/4 packets per node per cycle: 0.6 flits, saturated
      IciPacket p;
      p.src = s;
      p.dst = static_cast<unsigned>(rng() % net.nodes());
      p.addr = seq++;
      const unsigned flits = (rng() & 1) ? 4 : 1;
      for (unsigned i = 1; i < flits; ++i) p.payload.push_back(mix(p.addr * 8 + i));
      net.send(p);
    }
    net.tick();
  }
  ob.drained = net.drain(100000);
  for (unsigned n = 0; n < net.nodes(); ++n)
    for (unsigned p = 0; p < kIciPorts; ++p)
      for (unsigned vc = 0; vc < kIciNumVc; ++vc)
        for (unsigned s = 0; s < 4; ++s)
          ob.stats.push_back(net.stat(n, IciPort(p), vc, IciStat(s)));
  ob.asserts = net.assert_failures();
  EXPECT_TRUE(net.credits_home());
  return ob;
}

using SameParam = std::tuple<int /*topo*/, unsigned /*link latency*/, bool /*backpressure*/>;
class IciModels : public ::testing::TestWithParam<SameParam> {};

TEST_P(IciModels, GridAndNodeModelRunCycleForCycleTheSame) {
  const auto [id, lat, bp] = GetParam();
  const IciTopology t = topo_by_id(id, lat);
  const Observed grid = run(t, IciModelKind::kGrid, bp);
  const Observed nodes = run(t, IciModelKind::kNodes, bp);
  ASSERT_TRUE(grid.drained);
  ASSERT_TRUE(nodes.drained);
  EXPECT_EQ(grid.asserts, 0u);
  EXPECT_EQ(nodes.asserts, 0u);
  ASSERT_GT(grid.packets.size(), 1000u);
  ASSERT_EQ(grid.packets.size(), nodes.packets.size());
  for (size_t i = 0; i < grid.packets.size(); ++i)
    ASSERT_EQ(grid.packets[i], nodes.packets[i]) << "delivery " << i << " differs";
  EXPECT_EQ(grid.stats, nodes.stats);
}

INSTANTIATE_TEST_SUITE_P(Topologies, IciModels,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1u, 3u), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<SameParam>& i) {
                           return ici_test_name(topo_by_id(std::get<0>(i.param), 1)) + "_lat" +
                                  std::to_string(std::get<1>(i.param)) +
                                  (std::get<2>(i.param) ? "_backpressure" : "");
                         });

TEST(IciModels, AutoPicksTheGridWhenTheTopologyFits) {
  EXPECT_EQ(IciNet(ici_2d(4, 4)).model(), IciModelKind::kGrid);
  if (kIciNodes < 64) {
    EXPECT_EQ(IciNet(ici_2d(8, 8)).model(), IciModelKind::kNodes);
    EXPECT_THROW(IciNet(ici_2d(8, 8), "", IciModelKind::kGrid), std::invalid_argument);
  }
}

TEST(IciModels, NodeModelSpuriousCreditTripsCreditConservation) {
  IciNet net(ici_2d(4, 4), "", IciModelKind::kNodes);
  net.tick(5);
  EXPECT_EQ(net.assert_failures(), 0u);
  net.spurious_credit(5, /*dir +X*/ 0, 1);  // the counter is already at the buffer depth
  net.tick();
  EXPECT_GT(net.assert_failures(), 0u);
}

// 64-node tori on the node model: heavy random traffic, all delivered in order, and single packets
// from a corner and from the middle to every node at exactly the zero-load latency.
class IciLarge : public ::testing::TestWithParam<int> {};

IciTopology large_by_id(int id) { return id == 0 ? ici_3d(4, 4, 4) : ici_2d(8, 8); }

TEST_P(IciLarge, HeavyTrafficNoLossInOrder) {
  IciNet net(large_by_id(GetParam()));
  EXPECT_EQ(net.model(), kIciNodes >= 64 ? IciModelKind::kGrid : IciModelKind::kNodes);
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.length = IciLength::kMixed;
  cfg.rate = 0.9;
  const IciRunStats st = ici_run(net, sb, cfg, 0, 1500, 20000);
  ASSERT_TRUE(st.completed) << st.error;
  EXPECT_GT(sb.checked(), 10000u);
  expect_clean(net, sb);
}

TEST_P(IciLarge, HeadLatencyIsOneRouterCyclePlusLinkPerHop) {
  const IciTopology t = large_by_id(GetParam());
  IciNet net(t);
  uint64_t measured = 0;
  net.on_deliver([&](const IciPacket& p) { measured = p.head_out - p.injected; });
  for (unsigned s : {0u, t.nodes() / 2 + 3}) {
    for (unsigned d = 0; d < t.nodes(); ++d) {
      unsigned hops = 0;
      const auto a = t.coord(s), b = t.coord(d);
      for (unsigned k = 0; k < 3; ++k) {
        const unsigned fwd = (b[k] + t.k[k] - a[k]) % t.k[k];
        hops += std::min(fwd, t.k[k] - fwd);
      }
      IciPacket p;
      p.src = s;
      p.dst = d;
      p.payload = {1, 2, 3};
      net.send(p);
      ASSERT_TRUE(net.drain(1000));
      EXPECT_EQ(measured, hops * 2 + 2) << s << "->" << d << " hops " << hops;
    }
  }
  EXPECT_EQ(net.assert_failures(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Tori, IciLarge, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return ici_test_name(large_by_id(i.param));
                         });

}  // namespace
}  // namespace tpu
