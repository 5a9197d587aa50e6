#include "tpu/topology.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

bool in_dims(const std::vector<int>& dims, int d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

}  // namespace

Topology Topology::torus(std::vector<int> s) {
  Topology t;
  t.wrap.assign(s.size(), true);
  t.size = std::move(s);
  return t;
}

Topology Topology::mesh(std::vector<int> s) {
  Topology t;
  t.wrap.assign(s.size(), false);
  t.size = std::move(s);
  return t;
}

void Topology::validate() const {
  if (size.empty()) bad("topology.size: empty; a pod has 1 to 3 dimensions");
  if (size.size() > static_cast<std::size_t>(kPodMaxDims)) {
    bad("topology.size: " + std::to_string(size.size()) +
        " dimensions; a pod has 1 to 3 dimensions");
  }
  if (wrap.size() != size.size()) {
    bad("topology.wrap: " + std::to_string(wrap.size()) + " entries for " +
        std::to_string(size.size()) + " dimensions; one per dimension");
  }
  for (std::size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 1 || size[d] > kPodMaxPerDim) {
      bad("topology.size[" + std::to_string(d) + "]: " + std::to_string(size[d]) +
          " chips; each dimension has 1 to " + std::to_string(kPodMaxPerDim) + " chips");
    }
  }
}

int Topology::num_chips() const {
  int p = 1;
  for (int s : size) p *= s;
  return p;
}

std::vector<int> Topology::active_dims() const {
  std::vector<int> d;
  for (int i = 0; i < rank(); ++i) {
    if (size[static_cast<std::size_t>(i)] > 1) d.push_back(i);
  }
  return d;
}

PodCoord Topology::coord(int id) const {
  PodCoord c{0, 0, 0};
  for (int d = 0; d < rank(); ++d) {
    c[static_cast<std::size_t>(d)] = id % extent(d);
    id /= extent(d);
  }
  return c;
}

int Topology::id(const PodCoord& c) const {
  int id = 0;
  for (int d = rank() - 1; d >= 0; --d) id = id * extent(d) + c[static_cast<std::size_t>(d)];
  return id;
}

std::string Topology::name() const {
  bool all_wrap = true, no_wrap = true;
  for (bool w : wrap) {
    all_wrap = all_wrap && w;
    no_wrap = no_wrap && !w;
  }
  std::string s, kinds;
  for (std::size_t d = 0; d < size.size(); ++d) {
    if (d > 0) s += "x";
    s += std::to_string(size[d]);
    kinds += (d > 0 ? "," : "") + std::string(wrap[d] ? "ring" : "line");
  }
  if (all_wrap) return (size.size() == 1 ? "ring" : "torus") + s;
  if (no_wrap) return (size.size() == 1 ? "line" : "mesh") + s;
  return "mixed" + s + ":" + kinds;
}

int route_dst(const Topology& t, int src, const Route& r) {
  if (r.dim < 0 || r.dim >= t.rank() || (r.dir != 1 && r.dir != -1) || r.hops < 1) return -1;
  PodCoord c = t.coord(src);
  const int k = t.extent(r.dim);
  int& x = c[static_cast<std::size_t>(r.dim)];
  for (int h = 0; h < r.hops; ++h) {
    x += r.dir;
    if (t.wraps(r.dim)) {
      x = (x + k) % k;
    } else if (x < 0 || x >= k) {
      return -1;
    }
  }
  return t.id(c);
}

std::string dims_text(const std::vector<int>& dims) {
  std::string s = "{";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "}";
}

// ---------------------------------------------------------------------------------------------
// Groups

void validate_group_dims(const Topology& topo, const std::vector<int>& dims,
                         const std::string& field) {
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]: " + std::to_string(dims[i]);
    if (dims[i] < 0 || dims[i] >= topo.rank()) {
      bad(at + " is not a dimension of " + topo.name() + "; each entry is 0 .. " +
          std::to_string(topo.rank() - 1) + " (0 = x, 1 = y, 2 = z)");
    }
    if (i > 0 && dims[i] == dims[i - 1]) {
      bad(at + " appears twice in " + dims_text(dims) + "; no duplicates");
    }
    if (i > 0 && dims[i] < dims[i - 1]) {
      bad(at + " after " + std::to_string(dims[i - 1]) + " in " + dims_text(dims) +
          "; the dimensions must be strictly increasing");
    }
  }
}

Topology group_topology(const Topology& topo, const std::vector<int>& dims) {
  topo.validate();
  if (dims.empty()) return topo;
  validate_group_dims(topo, dims);
  Topology sub;
  for (int d : dims) {
    sub.size.push_back(topo.size[static_cast<std::size_t>(d)]);
    sub.wrap.push_back(topo.wrap[static_cast<std::size_t>(d)]);
  }
  return sub;
}

int group_size(const Topology& topo, const std::vector<int>& dims) {
  return group_topology(topo, dims).num_chips();
}

int group_rank(const Topology& topo, const std::vector<int>& dims, int chip) {
  if (dims.empty()) return chip;
  const PodCoord c = topo.coord(chip);
  int rank = 0;
  for (std::size_t k = dims.size(); k-- > 0;) {
    const int d = dims[k];
    rank = rank * topo.extent(d) + c[static_cast<std::size_t>(d)];
  }
  return rank;
}

int group_index(const Topology& topo, const std::vector<int>& dims, int chip) {
  if (dims.empty()) return 0;
  const PodCoord c = topo.coord(chip);
  int index = 0;
  for (int d = topo.rank() - 1; d >= 0; --d) {
    if (!in_dims(dims, d)) index = index * topo.extent(d) + c[static_cast<std::size_t>(d)];
  }
  return index;
}

}  // namespace tpu
