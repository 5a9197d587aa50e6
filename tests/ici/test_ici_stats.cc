// The routers' statistics agree with the traffic: local flits in/out equal the harness's
// injected/ejected counts, every flit sent on a link is counted in by the neighbour on the same
// VC, stall cycles appear under load and not at zero load, and the cycles lost to the allocator
// are a part of the stall cycles. The links of both directions of a ring carry the same load
// under uniform traffic (ties at distance k/2 split both ways).
#include <gtest/gtest.h>

#include "ici_net.h"
#include "ici_test_util.h"
#include "ici_traffic.h"

namespace tpu {
namespace {

uint64_t sum_stat(IciNet& net, unsigned node, IciPort p, IciStat s) {
  uint64_t v = 0;
  for (unsigned vc = 0; vc < kIciNumVc; ++vc) v += net.stat(node, p, vc, s);
  return v;
}

TEST(IciStats, CountersMatchTrafficAndNeighbours) {
  const IciTopology t = ici_2d(4, 4);
  IciNet net(t);
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.rate = 0.8;
  cfg.length = IciLength::kMixed;
  const IciRunStats st = ici_run(net, sb, cfg, 0, 2000, 10000);
  ASSERT_TRUE(st.completed) << st.error;
  expect_clean(net, sb);
  uint64_t in = 0, out = 0, stalls = 0, lost = 0;
  for (unsigned n = 0; n < t.nodes(); ++n) {
    in += sum_stat(net, n, IciPort::kLocal, IciStat::kFlitsIn);
    out += sum_stat(net, n, IciPort::kLocal, IciStat::kFlitsOut);
    const auto c = t.coord(n);
    for (unsigned d = 0; d < 4; ++d) {
      const IciPort p = static_cast<IciPort>(1 + d);
      const IciPort opp = static_cast<IciPort>(1 + (d ^ 1));
      auto nc = c;
      const unsigned dim = d / 2;
      nc[dim] = (d % 2 == 0) ? (c[dim] + 1) % t.k[dim] : (c[dim] + t.k[dim] - 1) % t.k[dim];
      const unsigned m = t.node(nc);
      for (unsigned vc = 0; vc < kIciNumVc; ++vc) {
        EXPECT_EQ(net.stat(n, p, vc, IciStat::kFlitsOut), net.stat(m, opp, vc, IciStat::kFlitsIn))
            << "link " << n << " " << ici_port_name(p) << " -> " << m << " vc " << vc;
      }
      stalls += sum_stat(net, n, p, IciStat::kStall);
    }
    for (unsigned p = 0; p < kIciPorts; ++p) {
      for (unsigned vc = 0; vc < kIciNumVc; ++vc) {
        const uint32_t l = net.stat(n, static_cast<IciPort>(p), vc, IciStat::kLost);
        EXPECT_LE(l, net.stat(n, static_cast<IciPort>(p), vc, IciStat::kStall))
            << "node " << n << " port " << p << " vc " << vc;
        lost += l;
      }
    }
  }
  EXPECT_EQ(in, net.flits_injected());
  EXPECT_EQ(out, net.flits_ejected());
  EXPECT_EQ(in, out);
  EXPECT_GT(stalls, 0u) << "no stall at 0.8 flits/node/cycle is implausible";
  EXPECT_GT(lost, 0u) << "no allocation conflict at 0.8 flits/node/cycle is implausible";
  // Both VC classes carry traffic on a torus (crossing and non-crossing packets).
  for (unsigned vc = 0; vc < kIciNumVc; ++vc) {
    uint64_t v = 0;
    for (unsigned n = 0; n < t.nodes(); ++n) v += net.stat(n, IciPort::kXp, vc, IciStat::kFlitsOut);
    EXPECT_GT(v, 0u) << "VC " << vc << " unused on +X links";
  }
}

// Uniform traffic on a 4x4 torus: with ties at distance 2 sent by destination parity, each + link
// and each - link carries 8/15 hop per injected packet; sending every tie + would load the +
// links three times as much as the - links (12/15 against 4/15).
TEST(IciStats, BothDirectionsOfARingCarryTheSameLoad) {
  const IciTopology t = ici_2d(4, 4);
  IciNet net(t);
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.rate = 0.5;
  const IciRunStats st = ici_run(net, sb, cfg, 0, 4000, 10000);
  ASSERT_TRUE(st.completed) << st.error;
  expect_clean(net, sb);
  for (unsigned dim = 0; dim < 2; ++dim) {
    uint64_t plus = 0, minus = 0;
    for (unsigned n = 0; n < t.nodes(); ++n) {
      plus += sum_stat(net, n, static_cast<IciPort>(1 + 2 * dim), IciStat::kFlitsOut);
      minus += sum_stat(net, n, static_cast<IciPort>(2 + 2 * dim), IciStat::kFlitsOut);
    }
    ASSERT_GT(plus + minus, 0u);
    const double ratio = double(plus) / double(minus);
    EXPECT_GT(ratio, 0.9) << "dimension " << dim << ": + " << plus << " - " << minus;
    EXPECT_LT(ratio, 1.1) << "dimension " << dim << ": + " << plus << " - " << minus;
  }
}

// A packet at distance k/2 goes + to an even coordinate and - to an odd one, in every dimension.
TEST(IciStats, TieGoesByDestinationParity) {
  const IciTopology t = ici_2d(4, 4);
  IciNet net(t);
  IciScoreboard sb(net);
  struct Case {
    unsigned src, dst;
    IciPort first;
  };
  // (x, y) = node % 4, node / 4
  const Case cases[] = {{0, 2, IciPort::kXp}, {1, 3, IciPort::kXm}, {3, 1, IciPort::kXm},
                        {2, 0, IciPort::kXp}, {0, 8, IciPort::kYp}, {4, 12, IciPort::kYm}};
  for (const Case& c : cases) {
    const uint64_t before = sum_stat(net, c.src, c.first, IciStat::kFlitsOut);
    sb.send(c.src, c.dst, 1);
    ASSERT_TRUE(net.drain(1000));
    EXPECT_EQ(sum_stat(net, c.src, c.first, IciStat::kFlitsOut), before + 1)
        << c.src << "->" << c.dst << " did not leave on " << ici_port_name(c.first);
  }
  expect_clean(net, sb);
}

TEST(IciStats, NoStallsAtZeroLoad) {
  IciNet net(ici_2d(4, 4));
  IciScoreboard sb(net);
  for (unsigned d = 0; d < 16; ++d) {
    sb.send(0, d, 4);
    ASSERT_TRUE(net.drain(1000));
  }
  expect_clean(net, sb);
  for (unsigned n = 0; n < 16; ++n)
    for (unsigned p = 1; p < kIciPorts; ++p)
      EXPECT_EQ(sum_stat(net, n, static_cast<IciPort>(p), IciStat::kStall), 0u) << n << " " << p;
}

}  // namespace
}  // namespace tpu
