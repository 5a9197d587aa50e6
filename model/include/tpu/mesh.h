// A logical mesh over the pod (docs/collectives.md, "Mesh axes and rounds"): named axes with
// sizes, the text form "data=16,model=4" (parsed by sw/config/mesh_text.h), and which torus dimensions each axis
// spans, so that a collective over an axis runs in the groups of those dimensions.
#pragma once

#include <string>
#include <vector>

#include "tpu/topology.h"

namespace tpu {

// A logical mesh over the pod: named axes with sizes, in torus-dimension order (x first).
struct MeshAxis {
  std::string name;
  int size = 1;
};
struct Mesh {
  std::vector<MeshAxis> axes;
  int num_chips() const;                         // the product of the sizes
  int axis_size(const std::string& name) const;  // throws when the axis is not in the mesh
  std::string text() const;                      // "data=16,model=4"
};
// The torus dimensions an axis spans, strictly increasing, to use as CollectiveSpec::group_dims.
// Axes take consecutive dimensions in order, each the dims whose extents multiply to its size.
// Dimensions of one chip: an axis of size > 1 takes those before and between its dims, a size-1
// axis takes the ones at its place (at most one, unless it is the last axis), and the last axis
// that takes any takes all that are left. A size-1 axis with no dimension of one chip at its place
// takes none (a "unit" axis: each of its groups is one chip) and changes nothing for the other
// axes, so "data=4,model=1" gives data what "data=4" does. Throws std::invalid_argument for: an
// axis not in the mesh (the message lists the mesh's axes); a mesh whose product is not the pod's
// chip count; an axis whose size does not line up with whole torus dimensions (names the axis and
// the dims); asking for a unit axis (group_dims cannot express groups of one chip; ask
// mesh_unit_axis first: a collective over it moves nothing).
std::vector<int> mesh_axis_dims(const Topology& topo, const Mesh& mesh, const std::string& axis);
// Whether `axis` is a unit axis of the mesh on topo (size 1, no dimension: groups of one chip).
bool mesh_unit_axis(const Topology& topo, const Mesh& mesh, const std::string& axis);
// Checks the mesh against the pod (mesh_axis_dims's rules for every axis, unit axes allowed).
void check_mesh(const Topology& topo, const Mesh& mesh);
// The mesh without its axes of size 1 (a split over one chip is no split): the same mesh.
Mesh mesh_without_unit_axes(const Mesh& mesh);

}  // namespace tpu
