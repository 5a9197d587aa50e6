// How a pod's chips are wired (docs/topology.md): per chip its router's coordinate, shape, wrap
// and twist bits and its neighbour on each of its six ports. A plain or twisted torus wires
// every chip of one Topology; a pod of cubes joined through optical circuit switches (OCS, TPU
// v4) wires each slice of whole cubes as a torus (or mesh) of its own, its cube-face links
// through the switch, and leaves no link between two slices. Pure: the pod (tb/pod) builds its
// links from this table; the config loader checks slices with it; tests check isolation on it.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tpu/topology.h"

namespace tpu {

// One chip's router and ports: its coordinate `me` in the torus or mesh it belongs to (a slice,
// or the whole pod), that torus's extents `k`, wrap flags and twist bits (ici_topo_t), and per
// direction (0..5 = +X -X +Y -Y +Z -Z) the pod chip its link reaches (-1: no link).
struct ChipWire {
  std::array<int, 3> me{0, 0, 0};
  std::array<int, 3> k{1, 1, 1};
  std::array<bool, 3> wrap{false, false, false};
  unsigned twist = 0;
  std::array<int, 6> peer{-1, -1, -1, -1, -1, -1};
};

// Every chip of `topo` wired as its torus / mesh, twisted when `twist` (twist_bits(topo), which
// throws naming the rule). Chip ids are topo's.
std::vector<ChipWire> torus_wiring(const Topology& topo, bool twist);

// A slice: whole cubes wired into a torus (or mesh) through the switches.
struct OcsSlice {
  std::string name;
  std::array<int, 3> shape{0, 0, 0};           // chips per dimension, x first: whole cubes
  std::vector<int> cubes;                      // its cubes, x fastest over its grid of cubes
  std::array<bool, 3> wrap{true, true, true};  // per dimension: a ring through the switch
  bool twist = false;                          // a twisted torus (docs/topology.md)
};

// A pod of `cubes` cubes of `cube` chips each (4x4x4 on TPU v4), joined by optical circuit
// switches into `slices`. Pod chip ids: cube c's chip at (x, y, z) of the cube is
// c * cube_chips() + x + cx * (y + cy * z), so the pod is the cubes side by side along z
// (floor()). Cubes in no slice are spares: each is wired as the mesh of its own (electrical)
// links.
struct OcsPod {
  std::array<int, 3> cube{2, 2, 2};
  int cubes = 0;
  std::vector<OcsSlice> slices;

  bool any() const { return cubes > 0; }
  int cube_chips() const { return cube[0] * cube[1] * cube[2]; }
  int num_chips() const { return cubes * cube_chips(); }
  // The pod as one topology, for chip names and ids: cube x cube y x (cube z x cubes), a mesh.
  Topology floor() const;
  // The slice holding cube c (-1: a spare).
  int slice_of_cube(int c) const;
  int cube_of_chip(int chip) const { return chip / cube_chips(); }
  // The cubes in no slice, increasing.
  std::vector<int> spares() const;
  // Throws std::invalid_argument naming the slice, the value and the rule: the cube's and the
  // pod's sizes; each slice whole cubes (its shape a multiple of the cube, as many cubes listed
  // as it holds), its cubes in the pod, named once, in no other slice; at most 16 chips per
  // dimension; a twist on a twistable shape whose shift is whole cubes; names unique.
  void validate() const;
};

// The rules as errors state them.
extern const char* const kOcsSliceRule;  // a slice is whole cubes

// Slice s as a topology (trailing dimensions of one chip dropped).
Topology slice_topology(const OcsPod& pod, int s);
// Slice s's chips: for each chip id of slice_topology, the pod chip it is.
std::vector<int> slice_chips(const OcsPod& pod, int s);
// Every pod chip's router and links: each slice as torus_wiring of its topology on its chips,
// each spare cube as a mesh of its own. No link joins two slices (or a slice and a spare).
std::vector<ChipWire> ocs_wiring(const OcsPod& pod);

// A cube face: 0..5 = +X -X +Y -Y +Z -Z.
struct OcsFace {
  int cube = 0;
  int face = 0;
};
// One circuit of the switches: face a's links to face b's (`links` chip links each way), for
// `slice`. A cube's face joined to its own opposite face is a wrap of a one-cube dimension.
struct OcsCircuit {
  OcsFace a, b;
  int links = 0;
  std::string slice;
};
// The switches' map: every circuit the slices need, each once (from its + face or lower cube),
// in slice, cube and face order. Throws std::invalid_argument when a face would be joined to two
// faces ("connects face ... twice").
std::vector<OcsCircuit> ocs_map(const OcsPod& pod);
// "cube 1 +X".
std::string ocs_face_name(const OcsFace& f);

// What re-forming took: slice `slice` lost cube `from` and got spare cube `to`, same position.
struct OcsRemap {
  int slice = 0;
  int from = 0, to = 0;
};
// Replaces each failed cube of a slice with the lowest-numbered spare cube that has not failed,
// in place, and says what moved; std::invalid_argument (naming the slice, what failed and the
// spares) when there are not enough spares.
std::vector<OcsRemap> ocs_replace(OcsPod& pod, const std::vector<int>& failed);

}  // namespace tpu
