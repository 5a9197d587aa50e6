// Twisted tori (docs/topology.md): which pod shapes can be twisted and how, the neighbours of a
// chip on a plain or twisted torus, shortest-path distances by breadth-first search, and the
// ideal throughput of uniform (all-to-all) traffic with its load spread evenly over every
// shortest path. The golden side of the ICI router's twisted route (tpu_ici_pkg::ici_route_twist):
// tests compare every route's hop count with these distances; the benches print the bound beside
// the measured throughput. A twisted wrap link shifts other coordinates by half their ring:
// k x k x 2k twists the wraps of X and Y by k along Z, k x 2k x 2k the wrap of X by (k, k) along
// Y and Z (a diagonal), and the 2D analogue k x 2k the wrap of X by k along Y.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tpu/topology.h"

namespace tpu {

// Bits of the RTL's ici_topo_t.twist: X's wrap link shifts y (kTwistXY), z (kTwistXZ); Y's wrap
// link shifts z (kTwistYZ); each by half that dimension's ring.
constexpr unsigned kTwistXY = 1u << 0;
constexpr unsigned kTwistXZ = 1u << 1;
constexpr unsigned kTwistYZ = 1u << 2;

// The rule, as error messages state it.
extern const char* const kTwistRule;

// The twist bits of a shape {kx, ky, kz} (kz = 1 for 2D), or throws std::invalid_argument naming
// the shape and kTwistRule when it cannot be twisted.
unsigned twist_bits(const std::array<int, 3>& k);
// The same for a pod's topology, which must also wrap in every dimension of more than one chip.
unsigned twist_bits(const Topology& topo);

// A torus (every dimension a ring where k > 1; `twist` bits as above, 0 = plain).
struct TorusShape {
  std::array<int, 3> k{1, 1, 1};
  unsigned twist = 0;
  int nodes() const { return k[0] * k[1] * k[2]; }
  std::array<int, 3> coord(int n) const { return {n % k[0], (n / k[0]) % k[1], n / (k[0] * k[1])}; }
  int node(const std::array<int, 3>& c) const { return c[0] + k[0] * (c[1] + k[1] * c[2]); }
  std::string name() const;  // "4x4x8 twisted torus"
};

// The neighbour of `c` in direction `dir` (0..5 = +X -X +Y -Y +Z -Z), wrap links twisted as the
// shape says; {-1, -1, -1} in a dimension of one node.
std::array<int, 3> torus_neighbour(const TorusShape& s, const std::array<int, 3>& c, int dir);

// Hops from `src` to every node (breadth-first search over torus_neighbour).
std::vector<int> torus_distances(const TorusShape& s, int src);

// Uniform traffic (every node sends to every other node at the same rate) spread evenly over all
// shortest paths of each pair: the ideal a minimal routing can reach.
struct TorusBound {
  double avg_hops = 0;       // mean shortest distance over ordered pairs
  int diameter = 0;          // the largest distance
  double max_link_load = 0;  // flits per cycle on the busiest directed link per flit/node/cycle
  double bound = 0;          // 1 / max_link_load: saturation throughput, flits/node/cycle
  double balanced = 0;       // links per node / avg_hops: the bound if every link were equal
  int bisection_links = 0;   // links (each way) across the fewest-link halving plane cut
};
TorusBound torus_uniform_bound(const TorusShape& s);

}  // namespace tpu
