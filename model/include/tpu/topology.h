// The shape of a pod (docs/collectives.md): its dimensions, rings and lines, chip coordinates, the
// routes a transfer takes over its links, and the groups of chips that some of its dimensions make
// up (a replica group / mesh axis); what plans, the mesh and the cost model build on.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace tpu {

constexpr int kPodMaxDims = 3;     // x, y, z
constexpr int kPodMaxPerDim = 16;  // chips per dimension (4-bit coordinates in the ICI header)

using PodCoord = std::array<int, kPodMaxDims>;  // {x, y, z}; unused dimensions are 0

// The shape of a pod: 1 to 3 dimensions of 1..16 chips (up to 4096, a TPU v4 pod); per dimension
// a ring (wrap-around link, torus) or a line (no wrap link, mesh). Chips are numbered x fastest.
struct Topology {
  std::vector<int> size;   // chips per dimension, x first
  std::vector<bool> wrap;  // per dimension: true = ring (torus), false = line (mesh)

  static Topology torus(std::vector<int> size);  // every dimension wraps
  static Topology mesh(std::vector<int> size);   // no dimension wraps

  // Throws std::invalid_argument naming the field and the rule.
  void validate() const;
  int rank() const { return static_cast<int>(size.size()); }
  int extent(int dim) const { return dim < rank() ? size[dim] : 1; }  // 1 past the rank
  bool wraps(int dim) const { return dim < rank() && wrap[dim]; }
  int num_chips() const;
  std::vector<int> active_dims() const;  // the dimensions with more than one chip
  PodCoord coord(int id) const;
  int id(const PodCoord& c) const;
  std::string name() const;  // "ring8", "torus4x4", "mesh3x3", "mixed4x1x2:ring,ring,line"
};

// How a transfer travels: `hops` physical links in dimension `dim` (0 = x), all in direction
// `dir` (+1 / -1); the chips in between only forward. hops is 1, or 2 for the folded ring of a
// line dimension, except in "direct" all-reduce, where it is the distance along `dim` (up to
// k / 2 on a ring of k, k - 1 on a line; docs).
struct Route {
  int dim = 0;
  int dir = +1;
  int hops = 1;
};

// The chip a route from `src` reaches, or -1 when it leaves a line dimension.
int route_dst(const Topology& topo, int src, const Route& r);

// ---------------------------------------------------------------------------------------------
// Groups (docs/collectives.md, "Mesh axes and rounds").

// Throws std::invalid_argument unless every entry is a dimension of `topo` (0 .. rank-1) and the
// entries are strictly increasing (no duplicates). `field` names the caller's parameter.
void validate_group_dims(const Topology& topo, const std::vector<int>& dims,
                         const std::string& field = "group_dims");
// The topology of one group: the sizes and wrap flags of `dims`, in increasing dim order; empty
// dims: the pod itself.
Topology group_topology(const Topology& topo, const std::vector<int>& dims);
// The chips in one group (the product of the dims' extents; empty dims: the whole pod).
int group_size(const Topology& topo, const std::vector<int>& dims);
// Chip `chip`'s rank in its group (its id in group_topology), and which group it is in (the
// rank of its coordinates in the other dimensions, the first fastest; 0 .. groups-1).
int group_rank(const Topology& topo, const std::vector<int>& dims, int chip);
int group_index(const Topology& topo, const std::vector<int>& dims, int chip);
// A list of dimensions as messages write it: "{0,2}".
std::string dims_text(const std::vector<int>& dims);

}  // namespace tpu
