#include "tpu/ocs.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "tpu/twisted_torus.h"

namespace tpu {

const char* const kOcsSliceRule =
    "a slice is whole cubes: its shape a multiple of the cube in every dimension, listing as many "
    "cubes as it holds";

namespace {

const char* const kDirNames[6] = {"+X", "-X", "+Y", "-Y", "+Z", "-Z"};

std::string shape_text(const std::array<int, 3>& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

// The cubes of slice s along each dimension.
std::array<int, 3> grid_of(const OcsPod& pod, const OcsSlice& s) {
  std::array<int, 3> g{};
  for (int d = 0; d < 3; ++d) g[d] = pod.cube[d] > 0 ? s.shape[d] / pod.cube[d] : 0;
  return g;
}

void validate_slice(const OcsPod& pod, const OcsSlice& s) {
  const std::string who = "slice '" + s.name + "'";
  if (s.name.empty()) bad("a slice needs a name");
  int holds = 1;
  for (int d = 0; d < 3; ++d) {
    if (s.shape[d] < 1 || s.shape[d] % pod.cube[d] != 0)
      bad(who + ": shape " + shape_text(s.shape) + " is not whole " + shape_text(pod.cube) +
          " cubes (" + kOcsSliceRule + ")");
    if (s.shape[d] > kPodMaxPerDim)
      bad(who + ": shape " + shape_text(s.shape) + " has more than " +
          std::to_string(kPodMaxPerDim) + " chips in a dimension (4-bit ICI coordinates)");
    holds *= s.shape[d] / pod.cube[d];
  }
  if (static_cast<int>(s.cubes.size()) != holds)
    bad(who + ": shape " + shape_text(s.shape) + " holds " + std::to_string(holds) + " cubes of " +
        shape_text(pod.cube) + " but " + std::to_string(s.cubes.size()) + " are listed (" +
        kOcsSliceRule + ")");
  std::set<int> seen;
  for (int c : s.cubes) {
    if (c < 0 || c >= pod.cubes)
      bad(who + ": cube " + std::to_string(c) + " is not in the pod (cubes 0.." +
          std::to_string(pod.cubes - 1) + ")");
    if (!seen.insert(c).second)
      bad(who + ": cube " + std::to_string(c) +
          " is listed twice (the switches would connect its faces twice)");
  }
  if (s.twist) {
    for (int d = 0; d < 3; ++d)
      if (!s.wrap[d] && s.shape[d] > 1)
        bad(who + ": a twisted slice wraps every dimension (" + kTwistRule + ")");
    try {
      twist_bits(s.shape);
    } catch (const std::invalid_argument& e) {
      bad(who + ": " + e.what());
    }
  }
}

}  // namespace

std::vector<ChipWire> torus_wiring(const Topology& topo, bool twist) {
  const int n = topo.num_chips();
  std::array<int, 3> k{};
  std::array<bool, 3> wrap{};
  for (int d = 0; d < 3; ++d) {
    k[d] = topo.extent(d);
    wrap[d] = topo.wraps(d);
  }
  const unsigned bits = twist ? twist_bits(topo) : 0u;  // throws naming the rule
  const TorusShape tshape{k, bits};
  std::vector<ChipWire> w(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    ChipWire& cw = w[static_cast<std::size_t>(i)];
    const PodCoord c = topo.coord(i);
    for (int d = 0; d < 3; ++d) cw.me[d] = c[d];
    cw.k = k;
    cw.wrap = wrap;
    cw.twist = bits;
    for (int d = 0; d < 3; ++d) {
      if (k[d] < 2) continue;
      for (int s = 0; s < 2; ++s) {  // s = 0: + neighbour, 1: - neighbour
        PodCoord nb = c;
        nb[d] += s == 0 ? 1 : -1;
        if (nb[d] < 0 || nb[d] >= k[d]) {
          if (!wrap[d]) continue;
          nb[d] = (nb[d] + k[d]) % k[d];
        }
        const int dir = 2 * d + s;
        if (bits) nb = torus_neighbour(tshape, {c[0], c[1], c[2]}, dir);
        cw.peer[static_cast<std::size_t>(dir)] = topo.id(nb);
      }
    }
  }
  return w;
}

Topology OcsPod::floor() const {
  return Topology::mesh({cube[0], cube[1], cube[2] * std::max(cubes, 1)});
}

int OcsPod::slice_of_cube(int c) const {
  for (std::size_t s = 0; s < slices.size(); ++s)
    for (int x : slices[s].cubes)
      if (x == c) return static_cast<int>(s);
  return -1;
}

std::vector<int> OcsPod::spares() const {
  std::vector<int> v;
  for (int c = 0; c < cubes; ++c)
    if (slice_of_cube(c) < 0) v.push_back(c);
  return v;
}

void OcsPod::validate() const {
  for (int d = 0; d < 3; ++d)
    if (cube[d] < 1 || cube[d] > kPodMaxPerDim)
      bad("cube " + shape_text(cube) + ": each dimension 1 to " + std::to_string(kPodMaxPerDim) +
          " chips");
  if (cubes < 1 || cube[2] * cubes > kPodMaxPerDim)
    bad(std::to_string(cubes) + " cubes of " + shape_text(cube) + ": from 1 to " +
        std::to_string(kPodMaxPerDim / cube[2]) +
        " (the cubes stand side by side along z, at most " + std::to_string(kPodMaxPerDim) +
        " chips)");
  std::map<int, std::string> owner;
  std::set<std::string> names;
  for (const OcsSlice& s : slices) {
    validate_slice(*this, s);
    if (!names.insert(s.name).second) bad("slice '" + s.name + "' is named twice");
    for (int c : s.cubes) {
      const auto it = owner.find(c);
      if (it != owner.end())
        bad("slices '" + it->second + "' and '" + s.name + "' share cube " + std::to_string(c) +
            " (a cube belongs to one slice at most)");
      owner[c] = s.name;
    }
  }
  (void)ocs_map(*this);  // a face joined twice
}

Topology slice_topology(const OcsPod& pod, const int s) {
  const OcsSlice& sl = pod.slices.at(static_cast<std::size_t>(s));
  int rank = 3;
  while (rank > 1 && sl.shape[static_cast<std::size_t>(rank - 1)] == 1) --rank;
  Topology t;
  for (int d = 0; d < rank; ++d) {
    t.size.push_back(sl.shape[d]);
    t.wrap.push_back(sl.wrap[d]);
  }
  return t;
}

std::vector<int> slice_chips(const OcsPod& pod, const int s) {
  const OcsSlice& sl = pod.slices.at(static_cast<std::size_t>(s));
  const std::array<int, 3> g = grid_of(pod, sl);
  const std::array<int, 3>& cu = pod.cube;
  std::vector<int> v;
  for (int z = 0; z < sl.shape[2]; ++z)
    for (int y = 0; y < sl.shape[1]; ++y)
      for (int x = 0; x < sl.shape[0]; ++x) {
        const int cube =
            sl.cubes[static_cast<std::size_t>(x / cu[0] + g[0] * (y / cu[1] + g[1] * (z / cu[2])))];
        v.push_back(cube * pod.cube_chips() + x % cu[0] +
                    cu[0] * (y % cu[1] + cu[1] * (z % cu[2])));
      }
  return v;
}

namespace {
// Chips `chips` (pod ids) wired as `topo` (ids in it) into w.
void wire_into(std::vector<ChipWire>& w, const Topology& topo, bool twist,
               const std::vector<int>& chips) {
  const std::vector<ChipWire> local = torus_wiring(topo, twist);
  for (std::size_t i = 0; i < local.size(); ++i) {
    ChipWire cw = local[i];
    for (int& p : cw.peer)
      if (p >= 0) p = chips[static_cast<std::size_t>(p)];
    w[static_cast<std::size_t>(chips[i])] = cw;
  }
}
}  // namespace

std::vector<ChipWire> ocs_wiring(const OcsPod& pod) {
  std::vector<ChipWire> w(static_cast<std::size_t>(pod.num_chips()));
  for (std::size_t s = 0; s < pod.slices.size(); ++s)
    wire_into(w, slice_topology(pod, static_cast<int>(s)), pod.slices[s].twist,
              slice_chips(pod, static_cast<int>(s)));
  // A spare cube: the mesh of its own links.
  OcsPod one = pod;
  for (int c : pod.spares()) {
    one.slices = {OcsSlice{"spare", pod.cube, {c}, {false, false, false}, false}};
    wire_into(w, slice_topology(one, 0), false, slice_chips(one, 0));
  }
  return w;
}

std::string ocs_face_name(const OcsFace& f) {
  return "cube " + std::to_string(f.cube) + " " + kDirNames[f.face];
}

std::vector<OcsCircuit> ocs_map(const OcsPod& pod) {
  const std::vector<ChipWire> w = ocs_wiring(pod);
  const int cc = pod.cube_chips();
  std::map<std::pair<int, int>, std::pair<int, int>> partner;  // (cube, face) -> (cube, face)
  std::map<std::pair<int, int>, int> links;                    // + face -> chip links
  std::vector<std::pair<int, int>> order;                      // + faces, first seen
  for (std::size_t s = 0; s < pod.slices.size(); ++s)
    for (int p : slice_chips(pod, static_cast<int>(s))) {
      const int local = p % cc;
      const std::array<int, 3> lc{local % pod.cube[0], (local / pod.cube[0]) % pod.cube[1],
                                  local / (pod.cube[0] * pod.cube[1])};
      for (int dir = 0; dir < 6; ++dir) {
        const int q = w[static_cast<std::size_t>(p)].peer[static_cast<std::size_t>(dir)];
        const int d = dir / 2;
        const bool at_face = dir % 2 == 0 ? lc[d] == pod.cube[d] - 1 : lc[d] == 0;
        if (q < 0 || !at_face) continue;
        const std::pair<int, int> a{p / cc, dir}, b{q / cc, dir ^ 1};
        const auto it = partner.find(a);
        if (it != partner.end() && it->second != b)
          bad("slice '" + pod.slices[s].name + "': the switches would connect " +
              ocs_face_name({a.first, a.second}) + " to " +
              ocs_face_name({it->second.first, it->second.second}) + " and to " +
              ocs_face_name({b.first, b.second}) +
              ": a face is connected once (a twisted slice's shift must be whole cubes)");
        partner[a] = b;
        if (dir % 2 == 0) {
          if (links[a]++ == 0) order.push_back(a);
        }
      }
    }
  std::vector<OcsCircuit> v;
  for (const auto& a : order) {
    const auto& b = partner.at(a);
    v.push_back({{a.first, a.second},
                 {b.first, b.second},
                 links.at(a),
                 pod.slices[static_cast<std::size_t>(pod.slice_of_cube(a.first))].name});
  }
  return v;
}

std::vector<OcsRemap> ocs_replace(OcsPod& pod, const std::vector<int>& failed) {
  const std::set<int> down(failed.begin(), failed.end());
  std::vector<int> free;
  for (int c : pod.spares())
    if (!down.count(c)) free.push_back(c);
  std::vector<OcsRemap> moves;
  std::size_t next = 0;
  for (std::size_t s = 0; s < pod.slices.size(); ++s)
    for (int& c : pod.slices[s].cubes) {
      if (!down.count(c)) continue;
      if (next == free.size()) {
        std::string spare_list;
        for (int f : free) spare_list += (spare_list.empty() ? "" : ", ") + std::to_string(f);
        bad("slice '" + pod.slices[s].name + "': cube " + std::to_string(c) +
            " failed and no spare cube is left (" +
            (free.empty() ? std::string("the pod has none") : "spares: " + spare_list) + ")");
      }
      moves.push_back({static_cast<int>(s), c, free[next]});
      c = free[next++];
    }
  return moves;
}

}  // namespace tpu
