// The network IciNet builds out of one verilated router model per node, wired in C++, against
// what it must be, independently of the RTL:
// - IciRoutes: every packet alone, from every source to every destination, takes the route of
//   the routing rules of docs/ici.md (dimension order, the shorter way, ties by destination
//   parity, dateline VC classes, the VC within a class and the local input VC by destination
//   hash, ejection on VC 0): exactly the routers,
//   ports and VCs of that route count its flits, nothing else counts any, and its head arrives
//   after hops * (1 + L) + 2 cycles; on rings, tori and meshes of 1 to 3 dimensions.
// - IciIsolation: two networks stepped alternately in one thread (each has its own simulation
//   context) give every packet's cycles, node and payload, and every statistic, of each one run
//   alone, under saturated traffic with and without ejection back-pressure.
// - IciLarge: 4x4x4 and 8x8 tori, heavy random traffic all delivered in order, and the zero-load
//   head latency from two sources to every node.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <random>
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
                  : id == 1 ? ici_ring(5)
                  : id == 2 ? ici_2d(4, 4)
                  : id == 3 ? ici_3d(2, 2, 2)
                  : id == 4 ? ici_3d(2, 3, 4)
                  : id == 5 ? ici_2d(3, 3, /*wrap=*/false)
                            : ici_3d(3, 2, 2, /*wrap=*/false);
  t.link_latency = lat;
  return t;
}

// One hop of a route: the router, its output port and the VC on it.
struct Hop {
  unsigned node;
  IciPort port;
  unsigned vc;
};

// The route of a packet from `src` to `dst` by the rules of docs/ici.md ("Routing, VCs and
// datelines"), written from the text, not from the RTL.
std::vector<Hop> reference_route(const IciTopology& t, unsigned src, unsigned dst) {
  const auto to = t.coord(dst);
  const unsigned half = kIciNumVc / 2;
  const unsigned hash = to[0] + to[1] + to[2];
  std::vector<Hop> route;
  auto at = t.coord(src);
  while (at != to) {
    unsigned d = 0;
    while (at[d] == to[d]) ++d;  // dimension order: X, then Y, then Z
    const unsigned k = t.k[d];
    bool plus;
    unsigned cls;
    if (t.wrap[d]) {
      // the shorter way; a tie (k/2 either way) goes + to an even coordinate, - to an odd one
      const unsigned ahead = (to[d] + k - at[d]) % k;  // hops going +
      plus = 2 * ahead < k || (2 * ahead == k && to[d] % 2 == 0);
      // class 0 while the wrap link (k-1 -> 0 going +, 0 -> k-1 going -) is still ahead
      cls = (plus ? to[d] < at[d] : to[d] > at[d]) ? 0 : 1;
    } else {
      plus = to[d] > at[d];
      cls = (to[0] ^ to[1] ^ to[2]) & 1;  // a line: the parity of the destination
    }
    route.push_back(
        {t.node(at), static_cast<IciPort>(1 + 2 * d + (plus ? 0 : 1)), cls * half + hash % half});
    at[d] = plus ? (at[d] + 1) % k : (at[d] + k - 1) % k;
  }
  return route;
}

IciPort opposite(IciPort p) {
  return static_cast<IciPort>(((static_cast<unsigned>(p) - 1) ^ 1) + 1);
}

// Flits in and out per (node, port, VC): the statistics IciRoutes checks.
struct Counts {
  explicit Counts(unsigned nodes) : in(nodes * kIciPorts * kIciNumVc), out(in.size()) {}
  static size_t at(unsigned node, IciPort p, unsigned vc) {
    return (node * kIciPorts + static_cast<unsigned>(p)) * kIciNumVc + vc;
  }
  std::vector<uint32_t> in, out;
};

Counts read_counts(IciNet& net) {
  Counts c(net.nodes());
  for (unsigned n = 0; n < net.nodes(); ++n)
    for (unsigned p = 0; p < kIciPorts; ++p)
      for (unsigned vc = 0; vc < kIciNumVc; ++vc) {
        c.in[Counts::at(n, IciPort(p), vc)] = net.stat(n, IciPort(p), vc, IciStat::kFlitsIn);
        c.out[Counts::at(n, IciPort(p), vc)] = net.stat(n, IciPort(p), vc, IciStat::kFlitsOut);
      }
  return c;
}

// Sends one packet of `flits` flits from s to d into the idle network and drains it; returns its
// head's latency, ejection - injection (0 when it was not delivered: a failure is added).
uint64_t head_latency_alone(IciNet& net, unsigned s, unsigned d, unsigned flits) {
  uint64_t head = 0;
  net.on_deliver([&](const IciPacket& p) { head = p.head_out - p.injected; });
  IciPacket p;
  p.src = s;
  p.dst = d;
  p.payload.assign(flits - 1, uint64_t{s} * 64 + d);
  net.send(p);
  EXPECT_TRUE(net.drain(1000)) << s << "->" << d << " not delivered";
  net.on_deliver(nullptr);
  return head;
}

using RouteParam = std::tuple<int /*topo*/, unsigned /*link latency*/>;
class IciRoutes : public ::testing::TestWithParam<RouteParam> {};

TEST_P(IciRoutes, EveryPacketTakesTheReferenceRoute) {
  const auto [id, lat] = GetParam();
  const IciTopology t = topo_by_id(id, lat);
  IciNet net(t);
  const unsigned flits = 3;
  Counts want(t.nodes());
  unsigned wrong = 0;
  for (unsigned s = 0; s < t.nodes(); ++s) {
    for (unsigned d = 0; d < t.nodes(); ++d) {
      const std::vector<Hop> route = reference_route(t, s, d);
      EXPECT_EQ(head_latency_alone(net, s, d, flits), route.size() * (1 + lat) + 2)
          << s << "->" << d << ": " << route.size() << " hops";
      const auto to = t.coord(d);  // the local input VC: the destination hash too
      want.in[Counts::at(s, IciPort::kLocal, (to[0] + to[1] + to[2]) % kIciNumVc)] += flits;
      for (const Hop& h : route) {
        want.out[Counts::at(h.node, h.port, h.vc)] += flits;
        auto c = t.coord(h.node);
        const unsigned dim = (static_cast<unsigned>(h.port) - 1) / 2;
        const bool plus = (static_cast<unsigned>(h.port) - 1) % 2 == 0;
        c[dim] = plus ? (c[dim] + 1) % t.k[dim] : (c[dim] + t.k[dim] - 1) % t.k[dim];
        want.in[Counts::at(t.node(c), opposite(h.port), h.vc)] += flits;
      }
      want.out[Counts::at(d, IciPort::kLocal, 0)] += flits;  // every packet ejects on VC 0
      const Counts got = read_counts(net);
      for (unsigned n = 0; n < t.nodes() && wrong < 5; ++n)
        for (unsigned q = 0; q < kIciPorts; ++q)
          for (unsigned vc = 0; vc < kIciNumVc; ++vc) {
            const size_t i = Counts::at(n, IciPort(q), vc);
            if (got.in[i] == want.in[i] && got.out[i] == want.out[i]) continue;
            ADD_FAILURE() << "after " << s << "->" << d << ": node " << n << " port "
                          << ici_port_name(IciPort(q)) << " vc " << vc << ": flits in " << got.in[i]
                          << " out " << got.out[i] << ", the reference route says " << want.in[i]
                          << " and " << want.out[i];
            ++wrong;
          }
      ASSERT_EQ(wrong, 0u);
    }
  }
  EXPECT_EQ(net.assert_failures(), 0u);
  EXPECT_TRUE(net.credits_home());
}

INSTANTIATE_TEST_SUITE_P(Topologies, IciRoutes,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3, 4, 5, 6),
                                            ::testing::Values(1u, 2u, 3u)),
                         [](const ::testing::TestParamInfo<RouteParam>& i) {
                           return ici_test_name(topo_by_id(std::get<0>(i.param), 1)) + "_lat" +
                                  std::to_string(std::get<1>(i.param));
                         });

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

// A saturated random run (1/4 packet per node per cycle, 1 or 4 flits) for some cycles, then a
// drain, one cycle per step(), so that two runs can take turns in one thread.
class TrafficRun {
 public:
  TrafficRun(const IciTopology& t, bool backpressure) : net_(t), rng_(5) {
    net_.on_deliver([this](const IciPacket& p) {
      uint64_t h = 0;
      for (uint64_t w : p.payload) h = mix(h ^ w);
      ob_.packets.push_back(
          {p.src, p.dst, p.addr, p.injected, p.head_out, p.delivered, p.eject_node, h});
    });
    if (backpressure)
      net_.set_eject_ready([](unsigned n, uint64_t c) { return mix(c * 64 + n) % 4 != 0; });
  }

  // One cycle: traffic for the first `cycles`, then draining; false once drained (or stuck).
  bool step(uint64_t cycles) {
    if (net_.cycle() >= cycles) {
      if (net_.in_flight() == 0 && net_.idle()) return false;
      if (net_.cycle() - net_.last_progress() > 2000) return false;
      net_.tick();
      return true;
    }
    for (unsigned s = 0; s < net_.nodes(); ++s) {
      if (rng_() % 4 != 0) continue;
      IciPacket p;
      p.src = s;
      p.dst = static_cast<unsigned>(rng_() % net_.nodes());
      p.addr = seq_++;
      const unsigned flits = (rng_() & 1) ? 4 : 1;
      for (unsigned i = 1; i < flits; ++i) p.payload.push_back(mix(p.addr * 8 + i));
      net_.send(p);
    }
    net_.tick();
    return true;
  }

  Observed finish() {
    ob_.drained = net_.in_flight() == 0 && net_.idle();
    for (unsigned n = 0; n < net_.nodes(); ++n)
      for (unsigned p = 0; p < kIciPorts; ++p)
        for (unsigned vc = 0; vc < kIciNumVc; ++vc)
          for (unsigned s = 0; s < 4; ++s)
            ob_.stats.push_back(net_.stat(n, IciPort(p), vc, IciStat(s)));
    ob_.asserts = net_.assert_failures();
    EXPECT_TRUE(net_.credits_home());
    return ob_;
  }

 private:
  IciNet net_;
  std::mt19937_64 rng_;
  uint32_t seq_ = 0;
  Observed ob_;
};

void expect_same(const Observed& alone, const Observed& shared, const std::string& what) {
  ASSERT_TRUE(alone.drained) << what;
  ASSERT_TRUE(shared.drained) << what;
  EXPECT_EQ(alone.asserts, 0u) << what;
  EXPECT_EQ(shared.asserts, 0u) << what;
  ASSERT_GT(alone.packets.size(), 500u) << what;
  ASSERT_EQ(alone.packets.size(), shared.packets.size()) << what;
  for (size_t i = 0; i < alone.packets.size(); ++i)
    ASSERT_EQ(alone.packets[i], shared.packets[i]) << what << ": delivery " << i << " differs";
  EXPECT_EQ(alone.stats, shared.stats) << what;
}

class IciIsolation : public ::testing::TestWithParam<bool> {};

TEST_P(IciIsolation, TwoNetworksSteppedInTurnRunAsEachAlone) {
  const bool bp = GetParam();
  IciTopology a = ici_2d(4, 4), b = ici_3d(2, 2, 2);
  b.link_latency = 3;
  const uint64_t cycles = 1000;
  Observed a_alone, b_alone, a_shared, b_shared;
  {
    TrafficRun r(a, bp);
    while (r.step(cycles)) {
    }
    a_alone = r.finish();
  }
  {
    TrafficRun r(b, bp);
    while (r.step(cycles)) {
    }
    b_alone = r.finish();
  }
  {
    TrafficRun ra(a, bp), rb(b, bp);
    for (bool more = true; more;) {
      const bool a_more = ra.step(cycles);
      const bool b_more = rb.step(cycles);
      more = a_more || b_more;
    }
    a_shared = ra.finish();
    b_shared = rb.finish();
  }
  expect_same(a_alone, a_shared, a.name());
  expect_same(b_alone, b_shared, b.name());
}

INSTANTIATE_TEST_SUITE_P(Backpressure, IciIsolation, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "backpressure" : "free";
                         });

// 64-node tori: heavy random traffic, all delivered in order, and single packets from a corner
// and from the middle to every node at exactly the zero-load latency over the reference route.
class IciLarge : public ::testing::TestWithParam<int> {};

IciTopology large_by_id(int id) { return id == 0 ? ici_3d(4, 4, 4) : ici_2d(8, 8); }

TEST_P(IciLarge, HeavyTrafficNoLossInOrder) {
  IciNet net(large_by_id(GetParam()));
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
  for (unsigned s : {0u, t.nodes() / 2 + 3}) {
    for (unsigned d = 0; d < t.nodes(); ++d) {
      const size_t hops = reference_route(t, s, d).size();
      EXPECT_EQ(head_latency_alone(net, s, d, 4), hops * 2 + 2)
          << s << "->" << d << ": " << hops << " hops";
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
