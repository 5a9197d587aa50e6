// Every source to every destination (itself included), all at once, on a 4-ring, a 4x4 torus, a
// 2x2x2 torus and a 3x3 mesh: delivered exactly once, at the right node, payload intact. (One
// packet at a time, its route and zero-load latency: IciRoutes.*, test_ici_network.cc.)
#include <gtest/gtest.h>

#include <stdexcept>
#include <tuple>

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

using AllParam = std::tuple<int /*topo*/, unsigned /*flits*/, unsigned /*link latency*/>;
class IciAllToAll : public ::testing::TestWithParam<AllParam> {};

// All pairs queued at once: each source sends to every destination, 2 packets per pair.
TEST_P(IciAllToAll, EveryPairDeliveredExactlyOnceInOrder) {
  const auto [id, flits, lat] = GetParam();
  IciNet net(topo_by_id(id, lat));
  IciScoreboard sb(net);
  const unsigned n = net.nodes();
  for (unsigned rep = 0; rep < 2; ++rep)
    for (unsigned s = 0; s < n; ++s)
      for (unsigned d = 0; d < n; ++d) sb.send(s, (d + s) % n, flits);
  ASSERT_TRUE(net.drain(200000)) << net.in_flight() << " packets stuck";
  for (unsigned s = 0; s < n; ++s)
    for (unsigned d = 0; d < n; ++d) EXPECT_EQ(sb.delivered(s, d), 2u) << s << "->" << d;
  EXPECT_EQ(sb.checked(), 2u * n * n);
  expect_clean(net, sb);
}

INSTANTIATE_TEST_SUITE_P(
    Topologies, IciAllToAll,
    ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(1u, 4u),
                       ::testing::Values(1u, 3u)),
    [](const ::testing::TestParamInfo<AllParam>& i) {
      return ici_test_name(topo_by_id(std::get<0>(i.param), 1)) + "_" +
             std::to_string(std::get<1>(i.param)) + "flit_lat" +
             std::to_string(std::get<2>(i.param));
    });

// 16 nodes per dimension (4-bit coordinates, tb/common/ici_fields.h and tpu_ici_pkg): every
// pair of a 16-ring, and on a 16x2x2 torus every node to the corners, delivered exactly once;
// zero-load latency over the longest ring path (8 hops each way).
TEST(IciTopology, SixteenPerDimension) {
  {
    IciNet net(ici_ring(16));
    IciScoreboard sb(net);
    for (unsigned s = 0; s < 16; ++s)
      for (unsigned d = 0; d < 16; ++d) sb.send(s, d, 2);
    ASSERT_TRUE(net.drain(200000)) << net.in_flight() << " packets stuck";
    EXPECT_EQ(sb.checked(), 256u);
    expect_clean(net, sb);
  }
  {
    IciNet net(ici_3d(16, 2, 2));
    IciScoreboard sb(net);
    const unsigned n = net.nodes(), far = n - 1;  // (15, 1, 1)
    for (unsigned s = 0; s < n; ++s) {
      sb.send(s, far, 3);
      sb.send(far, s, 1);
    }
    ASSERT_TRUE(net.drain(200000)) << net.in_flight() << " packets stuck";
    EXPECT_EQ(sb.checked(), 2u * n);
    EXPECT_EQ(sb.delivered(0, far), 1u);
    expect_clean(net, sb);
  }
  {
    IciNet net(ici_ring(16));
    uint64_t measured = 0;
    net.on_deliver([&](const IciPacket& p) { measured = p.head_out - p.injected; });
    for (unsigned d : {8u, 15u}) {
      IciPacket p;
      p.src = 0;
      p.dst = d;
      net.send(p);
      ASSERT_TRUE(net.drain(1000));
      EXPECT_EQ(measured, (d == 8 ? 8u : 1u) * 2 + 2) << "0->" << d;
    }
  }
}

TEST(IciTopology, RejectsAShapeLargerThanTheBuild) {
  IciTopology t = ici_ring(kIciMaxK + 1);
  EXPECT_THROW(t.validate(), std::invalid_argument);
  t = ici_ring(4);
  t.link_latency = kIciMaxLat + 1;
  EXPECT_THROW(t.validate(), std::invalid_argument);
  t = ici_3d(kIciMaxK, kIciMaxK, kIciMaxK);  // the largest shape is valid
  EXPECT_NO_THROW(t.validate());
}

}  // namespace
}  // namespace tpu
