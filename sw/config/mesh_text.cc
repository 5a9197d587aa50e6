#include "mesh_text.h"

#include <cctype>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

Mesh parse_mesh(const std::string& text) {
  const std::string where = "mesh '" + text + "': ";
  if (trim(text).empty()) bad(where + "empty; expected name=size,... (e.g. 'data=16,model=4')");
  Mesh mesh;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      bad(where + "item '" + trim(item) + "' is not name=size");
    }
    MeshAxis axis;
    axis.name = trim(item.substr(0, eq));
    const std::string size = trim(item.substr(eq + 1));
    if (axis.name.empty()) bad(where + "item '" + trim(item) + "' has an empty name");
    for (char ch : axis.name) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) {
        bad(where + "name '" + axis.name + "': only letters, digits and '_'");
      }
    }
    for (const MeshAxis& a : mesh.axes) {
      if (a.name == axis.name) bad(where + "duplicate name '" + axis.name + "'; names are unique");
    }
    const std::size_t digits0 = (!size.empty() && size[0] == '-') ? 1 : 0;
    bool integer = size.size() > digits0 && size.size() - digits0 <= 9;
    for (std::size_t i = digits0; integer && i < size.size(); ++i) {
      integer = std::isdigit(static_cast<unsigned char>(size[i])) != 0;
    }
    if (!integer) {
      bad(where + "size '" + size + "' of '" + axis.name +
          "' is not an integer (decimal digits, at most 9)");
    }
    axis.size = std::stoi(size);
    if (axis.size < 1) {
      bad(where + "size " + std::to_string(axis.size) + " of '" + axis.name +
          "'; each axis has size >= 1");
    }
    mesh.axes.push_back(axis);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return mesh;
}

Mesh parse_train_mesh(const std::string& text, const Topology& topo,
                      const std::vector<std::string>& axes) {
  try {
    const Mesh mesh = parse_mesh(text);
    for (const MeshAxis& ax : mesh.axes) {
      bool known = false;
      std::string list;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        known = known || ax.name == axes[i];
        list += (i == 0 ? "'" : i + 1 == axes.size() ? " and '" : ", '") + axes[i] + "'";
      }
      if (!known) bad("axis '" + ax.name + "': the axes are " + list);
    }
    const int P = topo.num_chips();
    if (mesh.num_chips() != P)
      bad("the axes multiply to " + std::to_string(mesh.num_chips()) + " chips, the pod " +
          topo.name() + " has " + std::to_string(P));
    check_mesh(topo, mesh);
    return mesh;
  } catch (const std::invalid_argument& e) {
    bad("--mesh " + text + ": " + e.what());
  }
}

}  // namespace tpu
