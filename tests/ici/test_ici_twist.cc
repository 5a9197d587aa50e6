// Twisted tori on the router network (docs/topology.md): the RTL's twisted route against the
// golden model's breadth-first distances, and deadlock freedom under all-to-all and saturated
// uniform traffic.
// - IciTwist.HeadLatencyIsShortestPath: every packet's zero-load head latency is
//   H * (1 + L) + 2 with H the shortest distance on the twisted torus (tpu::torus_distances,
//   a breadth-first search over the twisted wiring, not the route function), from several
//   sources to every node.
// - IciTwist.AllToAllDrains / UniformSaturatedDrains: every node sends to every other node
//   (or uniform traffic offered at 1 flit/node/cycle) and everything arrives once, in order,
//   intact, with the network empty and every credit home; IciTwistSoak.* the same, longer, on
//   4x8x8 (label soak).
// - IciTwistTwoPorts.*: routers with two local ports (IciTopology::local_ports = 2, as the chip's):
//   all-to-all and saturated uniform traffic drain, and a node then takes more than one flit a
//   cycle (what one local port cannot).
// - IciTwistRefused: a twist on a shape that cannot be twisted names the shape and the rule.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ici_net.h"
#include "ici_test_util.h"
#include "ici_traffic.h"
#include "tpu/twisted_torus.h"

namespace tpu {
namespace {

IciTopology twisted(unsigned kx, unsigned ky, unsigned kz) {
  IciTopology t = kz > 1 ? ici_3d(kx, ky, kz) : ici_2d(kx, ky);
  t.twist = true;
  return t;
}

TorusShape shape_of(const IciTopology& t) {
  return {{static_cast<int>(t.k[0]), static_cast<int>(t.k[1]), static_cast<int>(t.k[2])},
          t.twist_bits()};
}

uint64_t head_latency_alone(IciNet& net, unsigned s, unsigned d) {
  uint64_t head = 0;
  net.on_deliver([&](const IciPacket& p) { head = p.head_out - p.injected; });
  IciPacket p;
  p.src = s;
  p.dst = d;
  p.payload.assign(2, uint64_t{s} * 4096 + d);
  net.send(p);
  EXPECT_TRUE(net.drain(1000)) << s << "->" << d << " not delivered";
  net.on_deliver(nullptr);
  return head;
}

class IciTwist : public ::testing::TestWithParam<int> {};

IciTopology twist_by_id(int id) {
  return id == 0   ? twisted(2, 2, 4)
         : id == 1 ? twisted(2, 4, 4)
         : id == 2 ? twisted(4, 8, 1)
                   : twisted(4, 4, 8);
}

TEST_P(IciTwist, HeadLatencyIsShortestPath) {
  IciTopology t = twist_by_id(GetParam());
  t.link_latency = 2;
  IciNet net(t);
  const TorusShape s = shape_of(t);
  const unsigned n = t.nodes();
  const std::vector<unsigned> sources =
      n <= 32 ? std::vector<unsigned>{0, 1, n / 2, n - 1} : std::vector<unsigned>{0, n / 2 + 5};
  const std::vector<unsigned> all = [&] {
    std::vector<unsigned> v;
    for (unsigned i = 0; i < n; ++i) v.push_back(i);
    return v;
  }();
  int plain_longer = 0;  // pairs the twist brings closer than the plain torus would
  for (unsigned src : n <= 32 ? all : sources) {
    const std::vector<int> dist = torus_distances(s, static_cast<int>(src));
    TorusShape plain = s;
    plain.twist = 0;
    const std::vector<int> pdist = torus_distances(plain, static_cast<int>(src));
    for (unsigned d = 0; d < n; ++d) {
      const auto hops = static_cast<uint64_t>(dist[d]);
      EXPECT_EQ(head_latency_alone(net, src, d), hops * 3 + 2)
          << src << "->" << d << ": " << hops << " hops (shortest)";
      plain_longer += pdist[d] > dist[d];
    }
  }
  EXPECT_GT(plain_longer, 0) << "the twist shortened no route: the wiring is not twisted";
  EXPECT_EQ(net.assert_failures(), 0u);
}

TEST_P(IciTwist, AllToAllDrains) {
  IciNet net(twist_by_id(GetParam()));
  IciScoreboard sb(net);
  const unsigned n = net.nodes();
  for (unsigned r = 0; r < 2; ++r)
    for (unsigned s = 0; s < n; ++s)
      for (unsigned i = 1; i < n; ++i) sb.send(s, (s + i) % n, 4);
  ASSERT_TRUE(net.drain(400000, 2000)) << "all-to-all did not drain: deadlock?";
  EXPECT_EQ(sb.checked(), 2ull * n * (n - 1));
  expect_clean(net, sb);
}

TEST_P(IciTwist, UniformSaturatedDrains) {
  IciNet net(twist_by_id(GetParam()));
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.length = IciLength::kMixed;
  cfg.rate = 1.0;
  const IciRunStats st = ici_run(net, sb, cfg, 200, 1500, 40000);
  ASSERT_TRUE(st.completed) << st.error;
  EXPECT_GT(st.accepted, 0.3);
  expect_clean(net, sb);
}

INSTANTIATE_TEST_SUITE_P(Twisted, IciTwist, ::testing::Values(0, 1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return ici_test_name(twist_by_id(i.param));
                         });

TEST(IciTwistRefused, NamesTheShapeAndTheRule) {
  for (const IciTopology& bad : {twisted(4, 4, 4), twisted(8, 4, 4), twisted(4, 4, 1)}) {
    try {
      IciNet net(bad);
      ADD_FAILURE() << bad.name() << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::to_string(bad.k[0]) + "x" + std::to_string(bad.k[1])),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("k x k x 2k"), std::string::npos) << m;
    }
  }
  IciTopology mesh = twisted(4, 4, 8);
  mesh.wrap = {false, false, false};
  EXPECT_THROW(IciNet net(mesh), std::invalid_argument);
}

TEST(IciTwistTwoPorts, AllToAllAndSaturationDrain) {
  for (bool tw : {false, true}) {
    IciTopology t = ici_3d(2, 4, 4);
    t.twist = tw;
    t.local_ports = 2;
    {
      IciNet net(t);
      IciScoreboard sb(net);
      const unsigned n = net.nodes();
      for (unsigned s = 0; s < n; ++s)
        for (unsigned i = 1; i < n; ++i) sb.send(s, (s + i) % n, 4);
      ASSERT_TRUE(net.drain(200000, 2000)) << t.name() << ": all-to-all did not drain";
      EXPECT_EQ(sb.checked(), 1ull * n * (n - 1));
      expect_clean(net, sb);
    }
    IciNet net(t);
    IciScoreboard sb(net);
    IciTrafficConfig cfg;
    cfg.length = IciLength::kFour;
    cfg.rate = 2.0;
    const IciRunStats st = ici_run(net, sb, cfg, 300, 1500, 40000);
    ASSERT_TRUE(st.completed) << st.error;
    EXPECT_GT(st.accepted, 1.0) << t.name() << ": two local ports should take over 1 flit/cycle";
    expect_clean(net, sb);
  }
}

// The soak (label soak): the 256-node 4x8x8 under repeated all-to-all and long saturation.
TEST(IciTwistSoak, AllToAll4x8x8) {
  IciNet net(twisted(4, 8, 8));
  IciScoreboard sb(net);
  const unsigned n = net.nodes();
  for (unsigned r = 0; r < 3; ++r)
    for (unsigned s = 0; s < n; ++s)
      for (unsigned i = 1; i < n; ++i) sb.send(s, (s + i * 7) % n, 4);  // 7: coprime to n
  ASSERT_TRUE(net.drain(2000000, 4000)) << "all-to-all did not drain: deadlock?";
  expect_clean(net, sb);
}

TEST(IciTwistSoak, UniformSaturated4x8x8) {
  IciNet net(twisted(4, 8, 8));
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.length = IciLength::kMixed;
  cfg.rate = 1.0;
  const IciRunStats st = ici_run(net, sb, cfg, 500, 20000, 200000);
  ASSERT_TRUE(st.completed) << st.error;
  expect_clean(net, sb);
}

}  // namespace
}  // namespace tpu
