// Cubes, slices and the optical switches' map (tpu/ocs.h): each slice's wiring is the torus of
// its shape (distances by breadth-first search over the pod's links equal those of the torus),
// no link leaves a slice, every link has its way back, the map joins each face once, and the
// rules name what they refuse.
#include "tpu/ocs.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>
#include <string>
#include <vector>

#include "expect_invalid.h"
#include "tpu/twisted_torus.h"

namespace tpu {
namespace {

OcsPod pod_of(std::array<int, 3> cube, int cubes, std::vector<OcsSlice> slices) {
  OcsPod o;
  o.cube = cube;
  o.cubes = cubes;
  o.slices = std::move(slices);
  return o;
}

// Hops from `src` to every pod chip over the wiring's links (-1: unreachable).
std::vector<int> bfs(const std::vector<ChipWire>& w, int src) {
  std::vector<int> d(w.size(), -1);
  std::deque<int> q{src};
  d[static_cast<std::size_t>(src)] = 0;
  while (!q.empty()) {
    const int u = q.front();
    q.pop_front();
    for (int v : w[static_cast<std::size_t>(u)].peer)
      if (v >= 0 && d[static_cast<std::size_t>(v)] < 0) {
        d[static_cast<std::size_t>(v)] = d[static_cast<std::size_t>(u)] + 1;
        q.push_back(v);
      }
  }
  return d;
}

// Every slice: reachable chips are exactly its own, at the torus's distances; every link p -> q
// on dir has q -> p on the opposite dir.
void check_slices(const OcsPod& pod) {
  pod.validate();
  const std::vector<ChipWire> w = ocs_wiring(pod);
  for (std::size_t p = 0; p < w.size(); ++p)
    for (int dir = 0; dir < 6; ++dir) {
      const int q = w[p].peer[static_cast<std::size_t>(dir)];
      if (q < 0) continue;
      EXPECT_EQ(w[static_cast<std::size_t>(q)].peer[static_cast<std::size_t>(dir ^ 1)],
                static_cast<int>(p))
          << "chip " << p << " dir " << dir;
    }
  for (std::size_t s = 0; s < pod.slices.size(); ++s) {
    const std::vector<int> chips = slice_chips(pod, static_cast<int>(s));
    const Topology topo = slice_topology(pod, static_cast<int>(s));
    ASSERT_EQ(static_cast<int>(chips.size()), topo.num_chips());
    const std::set<int> mine(chips.begin(), chips.end());
    ASSERT_EQ(mine.size(), chips.size());
    TorusShape ts;
    for (int d = 0; d < 3; ++d) ts.k[static_cast<std::size_t>(d)] = topo.extent(d);
    ts.twist = pod.slices[s].twist ? twist_bits(topo) : 0u;
    const bool torus = pod.slices[s].wrap == std::array<bool, 3>{true, true, true};
    for (int src : {0, topo.num_chips() - 1}) {
      const std::vector<int> d = bfs(w, chips[static_cast<std::size_t>(src)]);
      const std::vector<int> want = torus_distances(ts, src);
      for (std::size_t p = 0; p < w.size(); ++p) {
        if (!mine.count(static_cast<int>(p))) {
          EXPECT_EQ(d[p], -1) << "slice " << pod.slices[s].name << " reaches chip " << p;
        }
      }
      for (std::size_t i = 0; i < chips.size(); ++i) {
        EXPECT_GE(d[static_cast<std::size_t>(chips[i])], 0);
        if (torus) {
          EXPECT_EQ(d[static_cast<std::size_t>(chips[i])], want[i])
              << pod.slices[s].name << " from " << src << " to " << i;
        }
      }
    }
  }
}

TEST(Ocs, SlicesAreTheirToriAndNothingLeavesThem) {
  check_slices(
      pod_of({2, 2, 2}, 4, {{"a", {2, 2, 4}, {0, 2}}, {"b", {2, 2, 2}, {1}}}));  // cube 3 spare
  check_slices(pod_of({2, 2, 2}, 8, {{"big", {4, 4, 4}, {7, 6, 5, 4, 3, 2, 1, 0}}}));
  check_slices(pod_of({4, 4, 4}, 2, {{"v4", {4, 4, 8}, {1, 0}, {true, true, true}, true}}));
  check_slices(pod_of({2, 2, 2}, 2,
                      {
                          {"tw", {2, 2, 4}, {0, 1}, {true, true, true}, true},
                      }));
  check_slices(pod_of({2, 2, 2}, 3, {{"mesh", {2, 2, 4}, {0, 2}, {false, false, false}}}));
}

TEST(Ocs, SliceChipsFollowTheCubeGrid) {
  const OcsPod o = pod_of({2, 2, 2}, 3, {{"a", {2, 2, 4}, {2, 0}}});
  const std::vector<int> c = slice_chips(o, 0);
  // Slice chip (x, y, z): z < 2 in cube 2, z >= 2 in cube 0.
  EXPECT_EQ(c[0], 16);
  EXPECT_EQ(c[7], 23);
  EXPECT_EQ(c[8], 0);
  EXPECT_EQ(c[15], 7);
  EXPECT_EQ(slice_topology(o, 0).name(), "torus2x2x4");
  EXPECT_EQ(o.floor().name(), "mesh2x2x6");
  EXPECT_EQ(o.spares(), (std::vector<int>{1}));
}

// Two cubes in z, a torus: Z joins cube 0 to 1 and 1 back to 0, X and Y wrap each cube onto
// itself; every face once, 4 chip links each. A mesh joins only the faces between the cubes.
TEST(Ocs, TheMapJoinsEachFaceOnce) {
  const OcsPod torus = pod_of({2, 2, 2}, 2, {{"a", {2, 2, 4}, {0, 1}}});
  const std::vector<OcsCircuit> m = ocs_map(torus);
  ASSERT_EQ(m.size(), 6u);
  std::set<std::pair<int, int>> faces;
  for (const OcsCircuit& c : m) {
    EXPECT_EQ(c.links, 4);
    EXPECT_EQ(c.slice, "a");
    EXPECT_TRUE(faces.insert({c.a.cube, c.a.face}).second);
    EXPECT_TRUE(faces.insert({c.b.cube, c.b.face}).second);
    EXPECT_EQ(c.a.face ^ 1, c.b.face);
  }
  EXPECT_EQ(faces.size(), 12u);  // all six faces of both cubes
  EXPECT_EQ(ocs_face_name(m[0].a), "cube 0 +X");
  const OcsPod mesh = pod_of({2, 2, 2}, 2, {{"a", {2, 2, 4}, {0, 1}, {false, false, false}}});
  const std::vector<OcsCircuit> mm = ocs_map(mesh);
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(ocs_face_name(mm[0].a), "cube 0 +Z");
  EXPECT_EQ(ocs_face_name(mm[0].b), "cube 1 -Z");
}

// A twisted 4x4x8 of two v4 cubes: X's and Y's wrap faces of cube 0 go to cube 1 (the shift of
// 4 along z is one cube).
TEST(Ocs, ATwistedSliceJoinsWrapFacesToTheOtherCube) {
  const OcsPod o = pod_of({4, 4, 4}, 2, {{"v4", {4, 4, 8}, {0, 1}, {true, true, true}, true}});
  int crossed = 0;
  for (const OcsCircuit& c : ocs_map(o))
    if (c.a.face < 4) {
      EXPECT_NE(c.a.cube, c.b.cube) << ocs_face_name(c.a);
      ++crossed;
    }
  EXPECT_EQ(crossed, 4);  // +X and +Y of both cubes
}

TEST(Ocs, BadSlicesNameTheRule) {
  auto refuse = [](const OcsPod& o, const std::string& what) {
    expect_invalid([&] { o.validate(); }, {what});
  };
  refuse(pod_of({2, 2, 2}, 3, {{"a", {2, 2, 3}, {0}}}), "is not whole 2x2x2 cubes");
  refuse(pod_of({2, 2, 2}, 3, {{"a", {2, 2, 4}, {0}}}), "holds 2 cubes of 2x2x2 but 1 are listed");
  refuse(pod_of({2, 2, 2}, 3, {{"a", {2, 2, 4}, {0, 0}}}), "cube 0 is listed twice");
  refuse(pod_of({2, 2, 2}, 3, {{"a", {2, 2, 4}, {0, 3}}}), "cube 3 is not in the pod (cubes 0..2)");
  refuse(pod_of({2, 2, 2}, 3, {{"a", {2, 2, 4}, {0, 1}}, {"b", {2, 2, 2}, {1}}}),
         "slices 'a' and 'b' share cube 1");
  refuse(pod_of({2, 2, 2}, 3, {{"a", {2, 2, 2}, {0}}, {"a", {2, 2, 2}, {1}}}),
         "slice 'a' is named twice");
  refuse(pod_of({2, 2, 2}, 9, {}), "from 1 to 8");
  refuse(pod_of({2, 2, 2}, 2, {{"t", {2, 2, 2}, {0}, {true, true, true}, true}}), kTwistRule);
  refuse(pod_of({2, 2, 2}, 2, {{"t", {2, 2, 4}, {0, 1}, {true, false, true}, true}}),
         "a twisted slice wraps every dimension");
}

TEST(Ocs, ReplaceTakesTheLowestSpareAndSaysWhenNoneIsLeft) {
  OcsPod o = pod_of({2, 2, 2}, 5, {{"a", {2, 2, 4}, {0, 1}}, {"b", {2, 2, 2}, {2}}});
  const std::vector<OcsRemap> m = ocs_replace(o, {1, 3});  // 3 is a spare that failed
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].slice, 0);
  EXPECT_EQ(m[0].from, 1);
  EXPECT_EQ(m[0].to, 4);
  EXPECT_EQ(o.slices[0].cubes, (std::vector<int>{0, 4}));
  o.validate();
  expect_invalid(
      [&] {
        ocs_replace(o, {1, 2, 3});
      },  // the spares 1 and 3 failed too
      {"slice 'b': cube 2 failed and no spare cube is left (the pod has none)"});
}

// The plain torus's wiring: the six neighbours of the torus, the routers' coordinates.
TEST(Ocs, TorusWiringIsTheTorus) {
  const Topology t = Topology::torus({4, 2, 3});
  const std::vector<ChipWire> w = torus_wiring(t, false);
  for (int i = 0; i < t.num_chips(); ++i) {
    const PodCoord c = t.coord(i);
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(w[static_cast<std::size_t>(i)].me[static_cast<std::size_t>(d)], c[d]);
      PodCoord up = c;
      up[d] = (c[d] + 1) % t.extent(d);
      EXPECT_EQ(w[static_cast<std::size_t>(i)].peer[static_cast<std::size_t>(2 * d)], t.id(up));
    }
  }
  EXPECT_EQ(torus_wiring(Topology::mesh({3}), false)[2].peer[0], -1);
}

}  // namespace
}  // namespace tpu
