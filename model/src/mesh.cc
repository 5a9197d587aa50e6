#include "tpu/mesh.h"

#include <cctype>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

}  // namespace

int Mesh::num_chips() const {
  int p = 1;
  for (const MeshAxis& a : axes) p *= a.size;
  return p;
}

int Mesh::axis_size(const std::string& name) const {
  for (const MeshAxis& a : axes) {
    if (a.name == name) return a.size;
  }
  bad("mesh axis '" + name + "': not in the mesh '" + text() + "'");
}

std::string Mesh::text() const {
  std::string s;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    s += (i ? "," : "") + axes[i].name + "=" + std::to_string(axes[i].size);
  }
  return s;
}

namespace {

// Every axis's dims (mesh_axis_dims's rules); a size-1 axis with no dimension of one chip at its
// place gets none and `unit[i]` set (its groups are single chips). `where` prefixes messages.
std::vector<std::vector<int>> all_axis_dims(const Topology& topo, const Mesh& mesh,
                                            const std::string& where, std::vector<bool>* unit) {
  for (const MeshAxis& a : mesh.axes) {
    if (a.size < 1) bad(where + "axis '" + a.name + "' has size " + std::to_string(a.size));
  }
  if (mesh.num_chips() != topo.num_chips()) {
    bad(where + "the axes multiply to " + std::to_string(mesh.num_chips()) +
        " chips; the pod has " + std::to_string(topo.num_chips()));
  }
  // Axes take dimensions in order; see the header for where dimensions of one chip go.
  int cursor = 0;
  std::vector<std::vector<int>> result(mesh.axes.size());
  unit->assign(mesh.axes.size(), false);
  std::size_t last = mesh.axes.size();  // the last axis that takes dimensions
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
    const MeshAxis& a = mesh.axes[i];
    const bool at_end = i + 1 == mesh.axes.size();
    std::vector<int>& dims = result[i];
    int product = 1;
    if (a.size == 1) {
      while (cursor < topo.rank() && topo.extent(cursor) == 1 && (dims.empty() || at_end)) {
        dims.push_back(cursor++);
      }
      (*unit)[i] = dims.empty();  // a group of one chip: the axis splits nothing
    } else {
      while (cursor < topo.rank() && product < a.size) {
        product *= topo.extent(cursor);
        dims.push_back(cursor++);
      }
      if (product != a.size) {
        bad(where + "axis '" + a.name + "' of size " + std::to_string(a.size) +
            " does not line up with whole torus dimensions: dims " + dims_text(dims) + " have " +
            std::to_string(product) + " chips");
      }
    }
    if (!dims.empty()) last = i;
  }
  if (last < mesh.axes.size()) {
    while (cursor < topo.rank()) result[last].push_back(cursor++);  // dims of one chip are left
  }
  return result;
}

}  // namespace

std::vector<int> mesh_axis_dims(const Topology& topo, const Mesh& mesh, const std::string& axis) {
  topo.validate();
  const std::string where = "mesh '" + mesh.text() + "' on " + topo.name() + ": ";
  std::size_t want = mesh.axes.size();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
    if (mesh.axes[i].name == axis) want = i;
  }
  if (want == mesh.axes.size()) {
    std::string names;
    for (const MeshAxis& a : mesh.axes) names += (names.empty() ? "'" : ", '") + a.name + "'";
    bad(where + "axis '" + axis + "' is not in the mesh; its axes are " +
        (names.empty() ? std::string("none") : names));
  }
  std::vector<bool> unit;
  const std::vector<std::vector<int>> dims = all_axis_dims(topo, mesh, where, &unit);
  if (unit[want]) {
    bad(where + "axis '" + axis + "' has size 1: each of its groups is one chip, which " +
        "group_dims cannot express; a collective over it moves nothing (mesh_unit_axis)");
  }
  return dims[want];
}

bool mesh_unit_axis(const Topology& topo, const Mesh& mesh, const std::string& axis) {
  bool found = false;
  for (const MeshAxis& a : mesh.axes) found = found || a.name == axis;
  if (!found) (void)mesh_axis_dims(topo, mesh, axis);  // throws, naming the mesh's axes
  std::vector<bool> unit;
  const std::vector<std::vector<int>> dims =
      all_axis_dims(topo, mesh, "mesh '" + mesh.text() + "' on " + topo.name() + ": ", &unit);
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
    if (mesh.axes[i].name == axis) return unit[i];
  }
  return false;
}

void check_mesh(const Topology& topo, const Mesh& mesh) {
  topo.validate();
  std::vector<bool> unit;
  (void)all_axis_dims(topo, mesh, "mesh '" + mesh.text() + "' on " + topo.name() + ": ", &unit);
}

Mesh mesh_without_unit_axes(const Mesh& mesh) {
  Mesh m;
  for (const MeshAxis& a : mesh.axes) {
    if (a.size > 1) m.axes.push_back(a);
  }
  return m;
}

}  // namespace tpu
