#include "tpu/twisted_torus.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace tpu {

const char* const kTwistRule =
    "a twist needs a k x k x 2k or k x 2k x 2k torus (or the 2D k x 2k), k >= 1, the short "
    "dimensions first, every dimension a ring";

unsigned twist_bits(const std::array<int, 3>& k) {
  const int a = k[0];
  if (a >= 1 && k[1] == a && k[2] == 2 * a) return kTwistXZ | kTwistYZ;
  if (a >= 1 && k[1] == 2 * a && k[2] == 2 * a) return kTwistXY | kTwistXZ;
  if (a >= 1 && k[1] == 2 * a && k[2] == 1) return kTwistXY;
  throw std::invalid_argument("twist on a " + std::to_string(k[0]) + "x" + std::to_string(k[1]) +
                              "x" + std::to_string(k[2]) + " pod: " + kTwistRule);
}

unsigned twist_bits(const Topology& topo) {
  for (int d = 0; d < topo.rank(); ++d)
    if (topo.extent(d) > 1 && !topo.wraps(d))
      throw std::invalid_argument("twist on " + topo.name() + " (dimension " + "xyz"[d] +
                                  " a line): " + kTwistRule);
  return twist_bits({topo.extent(0), topo.extent(1), topo.extent(2)});
}

std::string TorusShape::name() const {
  std::string s = std::to_string(k[0]);
  for (int d = 1; d < 3; ++d)
    if (k[d] > 1 || (d == 1 && k[2] > 1)) s += "x" + std::to_string(k[d]);
  return s + (twist ? " twisted torus" : " torus");
}

std::array<int, 3> torus_neighbour(const TorusShape& s, const std::array<int, 3>& c, int dir) {
  const int d = dir / 2;
  const int k = s.k[d];
  if (k < 2) return {-1, -1, -1};
  std::array<int, 3> n = c;
  n[d] += dir % 2 == 0 ? 1 : -1;
  if (n[d] >= 0 && n[d] < k) return n;
  n[d] = (n[d] + k) % k;
  // A wrap link: shift the dimensions it twists into by half their ring (+ and - alike).
  auto shift = [&](int e) { n[e] = (n[e] + s.k[e] / 2) % s.k[e]; };
  if (d == 0 && (s.twist & kTwistXY)) shift(1);
  if (d == 0 && (s.twist & kTwistXZ)) shift(2);
  if (d == 1 && (s.twist & kTwistYZ)) shift(2);
  return n;
}

std::vector<int> torus_distances(const TorusShape& s, int src) {
  std::vector<int> dist(static_cast<std::size_t>(s.nodes()), -1);
  std::deque<int> q{src};
  dist[static_cast<std::size_t>(src)] = 0;
  while (!q.empty()) {
    const int u = q.front();
    q.pop_front();
    for (int dir = 0; dir < 6; ++dir) {
      const auto nb = torus_neighbour(s, s.coord(u), dir);
      if (nb[0] < 0) continue;
      const int v = s.node(nb);
      if (dist[static_cast<std::size_t>(v)] >= 0) continue;
      dist[static_cast<std::size_t>(v)] = dist[static_cast<std::size_t>(u)] + 1;
      q.push_back(v);
    }
  }
  return dist;
}

namespace {

// Links (each way) crossing the plane that halves dimension d (cuts between k/2 - 1 | k/2 and at
// the wrap), for an even k.
int halving_cut(const TorusShape& s, int d) {
  const int half = s.k[d] / 2;
  int links = 0;
  for (int u = 0; u < s.nodes(); ++u) {
    const auto c = s.coord(u);
    for (int dir = 0; dir < 6; dir += 2) {  // + directions: each link once
      const auto nb = torus_neighbour(s, c, dir);
      if (nb[0] >= 0 && (c[d] < half) != (nb[d] < half)) ++links;
    }
  }
  return links;
}

}  // namespace

TorusBound torus_uniform_bound(const TorusShape& s) {
  const int n = s.nodes();
  const std::size_t nn = static_cast<std::size_t>(n);
  std::vector<std::array<int, 6>> nb(nn);
  for (int u = 0; u < n; ++u)
    for (int dir = 0; dir < 6; ++dir) {
      const auto c = torus_neighbour(s, s.coord(u), dir);
      nb[static_cast<std::size_t>(u)][static_cast<std::size_t>(dir)] = c[0] < 0 ? -1 : s.node(c);
    }
  std::vector<double> load(nn * 6, 0.0);
  TorusBound b;
  double hops = 0;
  int links_per_node = 0;
  for (int dir = 0; dir < 6; ++dir) links_per_node += nb[0][static_cast<std::size_t>(dir)] >= 0;
  std::vector<double> paths(nn), down(nn);
  for (int src = 0; src < n; ++src) {
    const std::vector<int> dist = torus_distances(s, src);
    std::vector<int> order(nn);
    for (int i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](int a, int c) {
      return dist[static_cast<std::size_t>(a)] < dist[static_cast<std::size_t>(c)];
    });
    std::fill(paths.begin(), paths.end(), 0.0);
    paths[static_cast<std::size_t>(src)] = 1;
    for (int u : order)
      for (int v : nb[static_cast<std::size_t>(u)])
        if (v >= 0 && dist[static_cast<std::size_t>(v)] == dist[static_cast<std::size_t>(u)] + 1)
          paths[static_cast<std::size_t>(v)] += paths[static_cast<std::size_t>(u)];
    // down[u]: the flow through u towards all farther destinations, each destination one unit
    // split over its shortest paths (Brandes' dependency accumulation), farthest first.
    std::fill(down.begin(), down.end(), 1.0);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int v = *it;
      if (v == src) continue;
      hops += dist[static_cast<std::size_t>(v)];
      b.diameter = std::max(b.diameter, dist[static_cast<std::size_t>(v)]);
      for (int dir = 0; dir < 6; ++dir) {
        // the predecessors u of v: u's link dir ^ 1 ... found from v's neighbours
        const int u = nb[static_cast<std::size_t>(v)][static_cast<std::size_t>(dir)];
        if (u < 0 || dist[static_cast<std::size_t>(u)] + 1 != dist[static_cast<std::size_t>(v)])
          continue;
        const double f = down[static_cast<std::size_t>(v)] * paths[static_cast<std::size_t>(u)] /
                         paths[static_cast<std::size_t>(v)];
        load[static_cast<std::size_t>(u) * 6 + static_cast<std::size_t>(dir ^ 1)] += f;
        down[static_cast<std::size_t>(u)] += f;
      }
    }
  }
  const double pairs = double(n) * double(n - 1);
  b.avg_hops = hops / pairs;
  // Each node sends r flits/cycle spread over n - 1 destinations: a pair carries r / (n - 1).
  b.max_link_load = *std::max_element(load.begin(), load.end()) / double(n - 1);
  b.bound = 1.0 / b.max_link_load;
  b.balanced = double(links_per_node) / b.avg_hops;
  b.bisection_links = 0;
  for (int d = 0; d < 3; ++d) {
    if (s.k[d] < 2 || s.k[d] % 2) continue;
    const int cut = halving_cut(s, d);
    if (b.bisection_links == 0 || cut < b.bisection_links) b.bisection_links = cut;
  }
  return b;
}

}  // namespace tpu
