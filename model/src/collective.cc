#include "tpu/collective.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tpu/vector.h"

namespace tpu {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

// A cycle through chips: chips[i] -> chips[i + 1] (and the last back to the first) over fwd[i].
struct Ring {
  std::vector<int> chips;
  std::vector<Route> fwd;
};

Route reversed(Route r) {
  r.dir = -r.dir;
  return r;
}

Ring reverse_ring(const Ring& r) {
  const std::size_t len = r.chips.size();
  Ring out;
  out.chips.assign(r.chips.rbegin(), r.chips.rend());
  out.fwd.resize(len);
  for (std::size_t i = 0; i < len; ++i) out.fwd[i] = reversed(r.fwd[(2 * len - 2 - i) % len]);
  return out;
}

// The order in which a dimension's ring visits its coordinates: 0, 1, .., k-1 on a ring; on a
// line the folded order 0, 2, 4, .., then the odd ones downwards (.., 5, 3, 1), so that every
// logical hop is at most 2 links and each direction of every link is used once per round.
std::vector<int> dim_order(int k, bool wrap) {
  std::vector<int> order;
  if (wrap) {
    for (int i = 0; i < k; ++i) order.push_back(i);
  } else {
    for (int i = 0; i < k; i += 2) order.push_back(i);
    for (int i = (k % 2 == 0) ? k - 1 : k - 2; i >= 1; i -= 2) order.push_back(i);
  }
  return order;
}

// Hops along a dimension's ring: fwd[i] goes from order[i] to order[i + 1 mod k].
std::vector<Route> dim_routes(int dim, int k, bool wrap) {
  const std::vector<int> order = dim_order(k, wrap);
  std::vector<Route> fwd(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) {
    const int from = order[static_cast<std::size_t>(i)];
    const int to = order[static_cast<std::size_t>((i + 1) % k)];
    if (wrap) {
      fwd[static_cast<std::size_t>(i)] = Route{dim, +1, 1};
    } else {
      fwd[static_cast<std::size_t>(i)] = Route{dim, to > from ? +1 : -1, std::abs(to - from)};
    }
  }
  return fwd;
}

// The ring through the chips of one line along `dim` (the chips that share `base` elsewhere).
Ring dim_ring(const Topology& t, int dim, PodCoord base) {
  const int k = t.extent(dim);
  Ring r;
  for (int c : dim_order(k, t.wraps(dim))) {
    base[static_cast<std::size_t>(dim)] = c;
    r.chips.push_back(t.id(base));
  }
  r.fwd = dim_routes(dim, k, t.wraps(dim));
  return r;
}

// A cycle through all chips: the rings of the active dimensions combined one by one with a comb
// (docs/collectives.md). Product of a cycle A (length na >= 2) and a dimension ring B (kb >= 2),
// as (a, b) positions: row b = 0 goes a = 0 .. na-1; rows b = 1 .. kb-1 snake over a = na-1 .. 1;
// then a = 0 back down from row kb-1 to row 1 and closes at (0, 0).
struct CoordCycle {
  std::vector<PodCoord> nodes;
  std::vector<Route> fwd;
};

CoordCycle comb(const CoordCycle& a, int bdim, const std::vector<int>& border,
                const std::vector<Route>& bfwd) {
  const int na = static_cast<int>(a.nodes.size());
  const int kb = static_cast<int>(border.size());
  const auto afwd = [&](int i) { return a.fwd[static_cast<std::size_t>(i)]; };
  const auto bf = [&](int r) { return bfwd[static_cast<std::size_t>(r)]; };
  CoordCycle out;
  // Each node with the route to the next one.
  const auto add = [&](int ia, int ib, Route to_next) {
    PodCoord c = a.nodes[static_cast<std::size_t>(ia)];
    c[static_cast<std::size_t>(bdim)] = border[static_cast<std::size_t>(ib)];
    out.nodes.push_back(c);
    out.fwd.push_back(to_next);
  };
  for (int i = 0; i < na; ++i) add(i, 0, i + 1 < na ? afwd(i) : bf(0));
  for (int r = 1; r < kb; ++r) {
    const bool last = r == kb - 1;
    if (r % 2 == 1) {  // a = na-1 down to 1; then up a row, or over to column 0 (a: 1 -> 0)
      for (int i = na - 1; i >= 1; --i) {
        add(i, r, i > 1 ? reversed(afwd(i - 1)) : last ? reversed(afwd(0)) : bf(r));
      }
    } else {  // a = 1 up to na-1; then up a row, or over to column 0 (A's closing hop na-1 -> 0)
      for (int i = 1; i <= na - 1; ++i) {
        add(i, r, i < na - 1 ? afwd(i) : last ? afwd(na - 1) : bf(r));
      }
    }
  }
  for (int r = kb - 1; r >= 1; --r) add(0, r, reversed(bf(r - 1)));
  return out;
}

Ring hamiltonian_ring(const Topology& t) {
  const std::vector<int> dims = t.active_dims();
  Ring ring;
  if (dims.empty()) {
    ring.chips = {0};
    ring.fwd = {Route{}};  // never used: a single chip sends nothing
    return ring;
  }
  CoordCycle cyc;
  const int d0 = dims[0];
  for (int c : dim_order(t.extent(d0), t.wraps(d0))) {
    PodCoord p{0, 0, 0};
    p[static_cast<std::size_t>(d0)] = c;
    cyc.nodes.push_back(p);
  }
  cyc.fwd = dim_routes(d0, t.extent(d0), t.wraps(d0));
  for (std::size_t i = 1; i < dims.size(); ++i) {
    const int d = dims[i];
    cyc = comb(cyc, d, dim_order(t.extent(d), t.wraps(d)),
               dim_routes(d, t.extent(d), t.wraps(d)));
  }
  for (const auto& c : cyc.nodes) ring.chips.push_back(t.id(c));
  ring.fwd = cyc.fwd;
  return ring;
}

Segment chunk_of(const Segment& seg, std::size_t parts, std::size_t i) {
  return Segment{seg.offset + chunk_offset(seg.count, parts, i), chunk_len(seg.count, parts, i)};
}

std::vector<Step>& grow(std::vector<Step>& steps, std::size_t len, const char* phase) {
  while (steps.size() < len) steps.push_back(Step{phase, {}});
  return steps;
}

// Ring reduce-scatter of the chunks over the ring, from step step0 for p - 1 steps. chunk[i] is
// the chunk that ring position i owns at the end. At step s position i sends chunk[i - s - 1]
// to position i + 1, which reduces it into its own, so chunk[q] is reduced in the order
// x[q+1], x[q+2], .., x[q-1], x[q] (positions modulo p), each step op(incoming, own).
void ring_reduce_scatter(std::vector<Step>& steps, std::size_t step0, const Ring& ring,
                         const std::vector<Segment>& chunk) {
  const std::size_t p = ring.chips.size();
  if (p < 2) return;
  grow(steps, step0 + p - 1, "reduce_scatter");
  for (std::size_t s = 0; s + 1 < p; ++s) {
    for (std::size_t i = 0; i < p; ++i) {
      const Segment& c = chunk[(i + 2 * p - s - 1) % p];
      if (c.count == 0) continue;
      steps[step0 + s].transfers.push_back(Transfer{ring.chips[i], ring.chips[(i + 1) % p],
                                                    c.offset, c.offset, c.count,
                                                    TransferKind::kReduce, ring.fwd[i]});
    }
  }
}

// Ring all-gather: position i starts with chunk[i]; at step s it passes chunk[i - s] on.
void ring_all_gather(std::vector<Step>& steps, std::size_t step0, const Ring& ring,
                     const std::vector<Segment>& chunk) {
  const std::size_t p = ring.chips.size();
  if (p < 2) return;
  grow(steps, step0 + p - 1, "all_gather");
  for (std::size_t s = 0; s + 1 < p; ++s) {
    for (std::size_t i = 0; i < p; ++i) {
      const Segment& c = chunk[(i + p - s) % p];
      if (c.count == 0) continue;
      steps[step0 + s].transfers.push_back(Transfer{ring.chips[i], ring.chips[(i + 1) % p],
                                                    c.offset, c.offset, c.count,
                                                    TransferKind::kCopy, ring.fwd[i]});
    }
  }
}

// The chunk each ring position owns when chunks are assigned by chip id: position i owns
// by_chip[chips[i]].
std::vector<Segment> chunks_by_chip(const Ring& ring, const std::vector<Segment>& by_chip) {
  std::vector<Segment> out;
  for (int c : ring.chips) out.push_back(by_chip[static_cast<std::size_t>(c)]);
  return out;
}

std::vector<Segment> even_chunks(const Segment& seg, std::size_t p) {
  std::vector<Segment> out;
  for (std::size_t i = 0; i < p; ++i) out.push_back(chunk_of(seg, p, i));
  return out;
}

// Shard halves for biring reduce-scatter / all-gather: each chip's shard, first half (the larger)
// clockwise, second half counter-clockwise.
void shard_halves(std::size_t n, std::size_t p, std::vector<Segment>* cw,
                  std::vector<Segment>* ccw) {
  for (std::size_t j = 0; j < p; ++j) {
    const Segment s{chunk_offset(n, p, j), chunk_len(n, p, j)};
    cw->push_back(chunk_of(s, 2, 0));
    ccw->push_back(chunk_of(s, 2, 1));
  }
}

// Part k of d: the chunking rule, or with weights [floor(n W_<k / W), floor(n W_<=k / W)).
Segment part_of(std::size_t n, std::size_t d, std::size_t k, const std::vector<unsigned>& w) {
  if (w.empty()) return chunk_of(Segment{0, n}, d, k);
  uint64_t below = 0, total = 0;  // at most 3 x 65536: n x total fits 64 bits below 2^45
  for (std::size_t i = 0; i < w.size(); ++i) {
    total += w[i];
    if (i < k) below += w[i];
  }
  const auto at = [&](uint64_t num) {
    return static_cast<std::size_t>(static_cast<uint64_t>(n) * num / total);
  };
  const std::size_t lo = at(below), hi = at(below + w[k]);
  return Segment{lo, hi - lo};
}

void plan_torus_allreduce(const Topology& t, std::size_t n, const std::vector<unsigned>& weights,
                          std::vector<Step>& steps) {
  const std::vector<int> dims = t.active_dims();
  const std::size_t d = dims.size();
  const int p = t.num_chips();
  for (std::size_t k = 0; k < d; ++k) {
    const Segment part = part_of(n, d, k, weights);
    for (std::size_t half = 0; half < 2; ++half) {
      std::vector<Segment> owned(static_cast<std::size_t>(p), chunk_of(part, 2, half));
      struct Done {
        Ring ring;
        std::vector<Segment> chunks;
      };
      std::vector<std::vector<Done>> phases;
      std::size_t step = 0;
      for (std::size_t ph = 0; ph < d; ++ph) {
        const int dim = dims[(k + ph) % d];
        const int kd = t.extent(dim);
        phases.emplace_back();
        std::vector<Segment> next = owned;
        for (int id = 0; id < p; ++id) {
          const PodCoord base = t.coord(id);
          if (base[static_cast<std::size_t>(dim)] != 0) continue;  // one ring per line
          Ring ring = dim_ring(t, dim, base);
          if (half == 1) ring = reverse_ring(ring);
          const Segment seg = owned[static_cast<std::size_t>(id)];
          std::vector<Segment> chunks;
          for (int c : ring.chips) {
            const int pos = t.coord(c)[static_cast<std::size_t>(dim)];
            chunks.push_back(chunk_of(seg, static_cast<std::size_t>(kd),
                                      static_cast<std::size_t>(pos)));
            next[static_cast<std::size_t>(c)] = chunks.back();
          }
          ring_reduce_scatter(steps, step, ring, chunks);
          phases.back().push_back(Done{ring, chunks});
        }
        owned = next;
        step += static_cast<std::size_t>(kd - 1);
      }
      for (std::size_t ph = d; ph-- > 0;) {
        for (const Done& done : phases[ph]) ring_all_gather(steps, step, done.ring, done.chunks);
        step += static_cast<std::size_t>(t.extent(dims[(k + ph) % d]) - 1);
      }
    }
  }
}

// The direct route from coordinate `from` to `to` along `dim`: on a ring the shorter way round
// (+1 on a tie, k even and the distance k / 2), on a line straight there. hops is the distance,
// so it may exceed 2.
Route direct_route(const Topology& t, int dim, int from, int to) {
  const int k = t.extent(dim);
  if (t.wraps(dim)) {
    const int s = ((to - from) % k + k) % k;
    return 2 * s <= k ? Route{dim, +1, s} : Route{dim, -1, k - s};
  }
  return Route{dim, to > from ? +1 : -1, std::abs(to - from)};
}

// Direct all-reduce (docs/collectives.md). The buffer is cut into d parts (d active
// dimensions), as in torus: part q runs its phases over the dimensions in the order dims[q],
// dims[q + 1], .. (mod d), so in every phase each dimension carries one part. In a phase along
// dimension `dim`, every line along it reduce-scatters the segment its chips hold of the part
// into k chunks (chunk j owned by the chip at coordinate j) in k - 1 independent steps: at step
// s (1 .. k-1) the chip at coordinate i sends its own input chunk (i + s) mod k straight to the
// chip at that coordinate, which reduces it into its chunk. So chunk j is reduced as
// x[j] op= x[j-1], then x[j-2], .., x[j+1] (mod k), each op(incoming, own). A tie (distance
// k/2 on an even ring) goes half each way, the first half +1. A sender only ever reduces into
// its own chunk, so no step of a phase sends a value an earlier step of that phase wrote. The
// all-gathers run the phases in reverse, also in k - 1 independent steps: at step s coordinate
// i copies its chunk i to coordinate i + s. Every phase takes k - 1 steps of the longest active
// dimension (its parts cover every dimension).
void plan_direct_allreduce(const Topology& t, std::size_t n, std::vector<Step>& steps) {
  const std::vector<int> dims = t.active_dims();
  const std::size_t d = dims.size();
  if (d == 0) return;  // one chip: nothing moves
  const std::size_t p = static_cast<std::size_t>(t.num_chips());
  const auto dim_of = [&](std::size_t q, std::size_t ph) { return dims[(q + ph) % d]; };
  // Every phase moves one part along each dimension, so each takes the longest one's k - 1 steps.
  std::size_t phase_len = 0;
  for (int dim : dims) {
    phase_len = std::max(phase_len, static_cast<std::size_t>(t.extent(dim) - 1));
  }
  // Chip c (coordinate i along dim) sends `ch` to coordinate j; a tie goes in two halves.
  const auto send = [&](Step& st, std::size_t c, int dim, int i, int j, const Segment& ch,
                        TransferKind kind) {
    if (ch.count == 0) return;
    PodCoord to = t.coord(static_cast<int>(c));
    to[static_cast<std::size_t>(dim)] = j;
    const Route r = direct_route(t, dim, i, j);
    const bool tie = t.wraps(dim) && 2 * r.hops == t.extent(dim) && ch.count > 1;
    for (std::size_t h = 0; h < (tie ? 2u : 1u); ++h) {
      const Segment piece = tie ? chunk_of(ch, 2, h) : ch;
      const Route rh{r.dim, h == 0 ? r.dir : -r.dir, r.hops};
      st.transfers.push_back(Transfer{static_cast<int>(c), t.id(to), piece.offset, piece.offset,
                                      piece.count, kind, rh});
    }
  };
  // held[q][c]: the segment of part q chip c holds; start[ph][q]: held at the start of phase ph.
  std::vector<std::vector<Segment>> held(d);
  for (std::size_t q = 0; q < d; ++q) held[q].assign(p, chunk_of(Segment{0, n}, d, q));
  std::vector<std::vector<std::vector<Segment>>> start;
  const auto coord_along = [&](std::size_t c, int dim) {
    return t.coord(static_cast<int>(c))[static_cast<std::size_t>(dim)];
  };
  for (std::size_t ph = 0; ph < d; ++ph) {
    const std::size_t step0 = steps.size();
    grow(steps, step0 + phase_len, "reduce_scatter");
    start.push_back(held);
    for (std::size_t q = 0; q < d; ++q) {
      const int dim = dim_of(q, ph);
      const int k = t.extent(dim);
      const std::size_t ku = static_cast<std::size_t>(k);
      for (std::size_t c = 0; c < p; ++c) {
        const int i = coord_along(c, dim);
        const Segment own = start[ph][q][c];
        held[q][c] = chunk_of(own, ku, static_cast<std::size_t>(i));
        for (int s = 1; s < k; ++s) {
          const int j = (i + s) % k;
          send(steps[step0 + static_cast<std::size_t>(s) - 1], c, dim, i, j,
               chunk_of(own, ku, static_cast<std::size_t>(j)), TransferKind::kReduce);
        }
      }
    }
  }
  for (std::size_t ph = d; ph-- > 0;) {
    const std::size_t step0 = steps.size();
    grow(steps, step0 + phase_len, "all_gather");
    for (std::size_t q = 0; q < d; ++q) {
      const int dim = dim_of(q, ph);
      const int k = t.extent(dim);
      for (std::size_t c = 0; c < p; ++c) {
        const int i = coord_along(c, dim);
        const Segment mine =
            chunk_of(start[ph][q][c], static_cast<std::size_t>(k), static_cast<std::size_t>(i));
        for (int s = 1; s < k; ++s) {
          send(steps[step0 + static_cast<std::size_t>(s) - 1], c, dim, i, (i + s) % k, mine,
               TransferKind::kCopy);
        }
      }
    }
  }
}

// Pipelined broadcast down a chain: chain[0] is the root; chunk c leaves the root at step c and
// moves one chain position per step.
void chain_broadcast(std::vector<Step>& steps, const std::vector<int>& chain,
                     const std::vector<Route>& routes, const std::vector<Segment>& chunks) {
  if (chain.size() < 2) return;
  const std::size_t hops = chain.size() - 1;
  grow(steps, hops + chunks.size() - 1, "broadcast");
  for (std::size_t j = 0; j < hops; ++j) {
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      if (chunks[c].count == 0) continue;
      steps[j + c].transfers.push_back(Transfer{chain[j], chain[j + 1], chunks[c].offset,
                                                chunks[c].offset, chunks[c].count,
                                                TransferKind::kCopy, routes[j]});
    }
  }
}

bool known_algorithm(const std::string& a) {
  return a == "ring" || a == "biring" || a == "torus" || a == "direct";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Topology

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

// ---------------------------------------------------------------------------------------------
// Names and the chunking rule

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kBroadcast:
      return "broadcast";
  }
  return "unknown";
}

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::kMax ? "max" : "sum"; }
const char* dtype_name(DType t) { return t == DType::kBf16 ? "bf16" : "f32"; }

bool collective_reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter;
}

std::size_t chunk_len(std::size_t n, std::size_t parts, std::size_t i) {
  return n / parts + (i < n % parts ? 1 : 0);
}

std::size_t chunk_offset(std::size_t n, std::size_t parts, std::size_t i) {
  return i * (n / parts) + std::min(i, n % parts);
}

std::vector<int> ring_order(const Topology& topo) {
  topo.validate();
  return hamiltonian_ring(topo).chips;
}

// ---------------------------------------------------------------------------------------------
// Plans

std::size_t CollectivePlan::input_len(int chip) const {
  std::size_t len = 0;
  for (const Segment& s : chips.at(static_cast<std::size_t>(chip)).input) len += s.count;
  return len;
}

std::size_t CollectivePlan::output_len(int chip) const {
  std::size_t len = 0;
  for (const Segment& s : chips.at(static_cast<std::size_t>(chip)).output) len += s.count;
  return len;
}

std::size_t CollectivePlan::transfer_bytes(const Transfer& t) const {
  const std::size_t copy_bytes = spec.dtype == DType::kBf16 ? 2 : 4;
  return t.count * (t.kind == TransferKind::kCopy ? copy_bytes : element_bytes);
}

namespace {

// The plan of one group that is the whole of `topo` (spec.group_dims is ignored).
CollectivePlan plan_whole(const Topology& topo, const CollectiveSpec& spec) {
  const std::string& algo = spec.algorithm;
  const char* coll = collective_name(spec.collective);
  if (!known_algorithm(algo)) {
    bad("algorithm: unknown '" + algo + "'; expected 'ring', 'biring', 'torus' or 'direct'");
  }
  const bool reduces = collective_reduces(spec.collective);
  if ((algo == "torus" || algo == "direct") && spec.collective != Collective::kAllReduce) {
    bad("algorithm: '" + algo + "' is defined for all_reduce only, not " + coll);
  }
  if (algo == "biring" && spec.collective == Collective::kAllToAll) {
    bad("algorithm: all_to_all supports 'ring' only");
  }
  if (algo == "torus" && topo.active_dims().size() < 2) {
    bad("algorithm: 'torus' needs at least 2 dimensions with more than one chip; topology " +
        topo.name() + " has " + std::to_string(topo.active_dims().size()));
  }
  if (!spec.part_weights.empty()) {
    if (algo != "torus") bad("part_weights: only 'torus' has parts, not '" + algo + "'");
    if (spec.part_weights.size() != topo.active_dims().size()) {
      bad("part_weights: " + std::to_string(spec.part_weights.size()) + " weights; " +
          topo.name() + " has " + std::to_string(topo.active_dims().size()) +
          " active dimensions, one part each");
    }
    for (unsigned w : spec.part_weights) {
      if (w == 0 || w > 65536) {
        bad("part_weights: " + std::to_string(w) + "; each weight is 1..65536");
      }
    }
    if (spec.n >= (std::size_t{1} << 44)) {
      bad("part_weights: n " + std::to_string(spec.n) + " elements; weighted parts need n < 2^44");
    }
  }
  const int pi = topo.num_chips();
  const std::size_t p = static_cast<std::size_t>(pi);
  if (spec.collective == Collective::kBroadcast && (spec.root < 0 || spec.root >= pi)) {
    bad("root: " + std::to_string(spec.root) + " is not a chip; 0 <= root < " +
        std::to_string(pi));
  }
  if (spec.collective == Collective::kAllToAll && spec.n % p != 0) {
    bad("n: " + std::to_string(spec.n) + " elements for all_to_all; must be a multiple of the " +
        std::to_string(pi) + " chips");
  }

  CollectivePlan plan;
  plan.topo = topo;
  plan.spec = spec;
  plan.element_bytes = (spec.dtype == DType::kF32 || reduces) ? 4 : 2;
  plan.chips.resize(p);
  const std::size_t n = spec.n;
  const Segment whole{0, n};
  const Ring ring = hamiltonian_ring(topo);
  std::vector<Segment> shards;  // shard j of the buffer belongs to chip j
  for (std::size_t j = 0; j < p; ++j) shards.push_back(Segment{chunk_offset(n, p, j),
                                                               chunk_len(n, p, j)});
  plan.buffer_len = n;

  switch (spec.collective) {
    case Collective::kAllReduce: {
      for (auto& c : plan.chips) c.input = c.output = {whole};
      if (algo == "ring") {
        const auto ch = chunks_by_chip(ring, even_chunks(whole, p));
        ring_reduce_scatter(plan.steps, 0, ring, ch);
        ring_all_gather(plan.steps, p - 1, ring, ch);
      } else if (algo == "biring") {
        const Ring rev = reverse_ring(ring);
        const auto cw = chunks_by_chip(ring, even_chunks(chunk_of(whole, 2, 0), p));
        const auto ccw = chunks_by_chip(rev, even_chunks(chunk_of(whole, 2, 1), p));
        ring_reduce_scatter(plan.steps, 0, ring, cw);
        ring_reduce_scatter(plan.steps, 0, rev, ccw);
        ring_all_gather(plan.steps, p - 1, ring, cw);
        ring_all_gather(plan.steps, p - 1, rev, ccw);
      } else if (algo == "direct") {
        plan_direct_allreduce(topo, n, plan.steps);
      } else {
        plan_torus_allreduce(topo, n, spec.part_weights, plan.steps);
        std::size_t rs_steps = 0;
        for (int d : topo.active_dims()) rs_steps += static_cast<std::size_t>(topo.extent(d) - 1);
        for (std::size_t s = 0; s < plan.steps.size(); ++s) {
          plan.steps[s].phase = s < rs_steps ? "reduce_scatter" : "all_gather";
        }
      }
      break;
    }
    case Collective::kReduceScatter:
    case Collective::kAllGather: {
      const bool rs = spec.collective == Collective::kReduceScatter;
      for (std::size_t j = 0; j < p; ++j) {
        plan.chips[j].input = {rs ? whole : shards[j]};
        plan.chips[j].output = {rs ? shards[j] : whole};
      }
      const auto run = rs ? ring_reduce_scatter : ring_all_gather;
      if (algo == "ring") {
        run(plan.steps, 0, ring, chunks_by_chip(ring, shards));
      } else {
        std::vector<Segment> cw, ccw;
        shard_halves(n, p, &cw, &ccw);
        const Ring rev = reverse_ring(ring);
        run(plan.steps, 0, ring, chunks_by_chip(ring, cw));
        run(plan.steps, 0, rev, chunks_by_chip(rev, ccw));
      }
      break;
    }
    case Collective::kAllToAll: {
      // Working buffer: [0, n) output, [n, 2n) input, then two staging banks of p - 2 blocks.
      const std::size_t b = n / p;
      const std::size_t bank = (p >= 2 ? p - 2 : 0) * b;
      plan.buffer_len = 2 * n + 2 * bank;
      std::vector<std::size_t> pos(p);
      for (std::size_t i = 0; i < p; ++i) pos[static_cast<std::size_t>(ring.chips[i])] = i;
      for (std::size_t c = 0; c < p; ++c) {
        plan.chips[c].input = {Segment{n, n}};
        for (std::size_t i = 0; i < p; ++i) {
          plan.chips[c].output.push_back(i == c ? Segment{n + c * b, b} : Segment{i * b, b});
        }
      }
      const auto bank_slot = [&](std::size_t step, std::size_t slot) {
        return 2 * n + (step % 2) * bank + slot * b;
      };
      // Step t (1-based): position q passes on the blocks that started at position q - t + 1,
      // those still k = 1 .. p - t positions away; the receiver keeps k = 1, stores the rest in
      // bank t % 2, slot k - 2, to pass on at step t + 1 (they sit in bank (t - 1) % 2 then).
      for (std::size_t t = 1; t < p; ++t) {
        Step step{"all_to_all", {}};
        for (std::size_t q = 0; q < p; ++q) {
          const int src = ring.chips[q];
          const int dst = ring.chips[(q + 1) % p];
          const int origin = ring.chips[(q + p - (t - 1)) % p];
          for (std::size_t k = 1; k + t <= p; ++k) {
            if (b == 0) continue;
            const int target = ring.chips[(q + k) % p];
            const std::size_t from = t == 1 ? n + static_cast<std::size_t>(target) * b
                                            : bank_slot(t - 1, k - 1);
            const std::size_t to = k == 1 ? static_cast<std::size_t>(origin) * b
                                          : bank_slot(t, k - 2);
            step.transfers.push_back(
                Transfer{src, dst, from, to, b, TransferKind::kCopy, ring.fwd[q]});
          }
        }
        plan.steps.push_back(std::move(step));
      }
      break;
    }
    case Collective::kBroadcast: {
      for (std::size_t c = 0; c < p; ++c) {
        plan.chips[c].input = static_cast<int>(c) == spec.root ? std::vector<Segment>{whole}
                                                               : std::vector<Segment>{};
        plan.chips[c].output = {whole};
      }
      std::size_t rpos = 0;
      while (ring.chips[rpos] != spec.root) ++rpos;
      const auto chunks = even_chunks(whole, p);
      const std::size_t cw_len = algo == "ring" ? p - 1 : p / 2;  // positions reached clockwise
      std::vector<int> chain;
      std::vector<Route> routes;
      for (std::size_t j = 0; j <= cw_len; ++j) {
        chain.push_back(ring.chips[(rpos + j) % p]);
        routes.push_back(ring.fwd[(rpos + j) % p]);
      }
      chain_broadcast(plan.steps, chain, routes, chunks);
      chain.clear();
      routes.clear();
      for (std::size_t j = 0; j < p - cw_len; ++j) {  // counter-clockwise: the rest
        chain.push_back(ring.chips[(rpos + p - j) % p]);
        routes.push_back(reversed(ring.fwd[(rpos + 2 * p - j - 1) % p]));
      }
      chain_broadcast(plan.steps, chain, routes, chunks);
      break;
    }
  }
  return plan;
}

std::string dims_text(const std::vector<int>& dims) {
  std::string s = "{";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "}";
}

bool in_dims(const std::vector<int>& dims, int d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

}  // namespace

namespace {

CollectivePlan plan_grouped(const Topology& topo, const CollectiveSpec& spec);

// The plan in granules (spec.granule > 1): the plan of ceil(n / g) elements, every offset and
// count times g, clipped at the end of the buffer (all_to_all: blocks of whole granules).
CollectivePlan plan_granules(const Topology& topo, const CollectiveSpec& spec) {
  const std::size_t g = spec.granule;
  const std::size_t P = static_cast<std::size_t>(group_size(topo, spec.group_dims));
  CollectiveSpec u = spec;
  u.granule = 1;
  std::size_t end = spec.n;  // the clip: the working buffer's end for all but all_to_all
  if (spec.collective == Collective::kAllToAll) {
    if (spec.n % P != 0 || (spec.n / P) % g != 0)
      bad("n: " + std::to_string(spec.n) + " elements for all_to_all in granules of " +
          std::to_string(g) + ": each of the " + std::to_string(P) +
          " blocks must be a whole number of granules (n a multiple of " + std::to_string(P * g) +
          ")");
    u.n = spec.n / g;
    end = ~std::size_t{0};
  } else {
    u.n = (spec.n + g - 1) / g;
  }
  CollectivePlan plan = plan_grouped(topo, u);
  plan.spec = spec;
  const auto clip = [&](std::size_t off, std::size_t cnt, std::size_t* o, std::size_t* c) {
    const std::size_t a = std::min(off * g, end), b = std::min((off + cnt) * g, end);
    *o = a;
    *c = b - a;
  };
  plan.buffer_len = std::min(plan.buffer_len * g, end);
  for (ChipLayout& cl : plan.chips) {
    for (Segment& s : cl.input) clip(s.offset, s.count, &s.offset, &s.count);
    for (Segment& s : cl.output) clip(s.offset, s.count, &s.offset, &s.count);
  }
  for (Step& st : plan.steps) {
    std::vector<Transfer> keep;
    for (Transfer t : st.transfers) {
      std::size_t so = 0, sc = 0, dc = 0;
      clip(t.src_offset, t.count, &so, &sc);
      clip(t.dst_offset, t.count, &t.dst_offset, &dc);
      t.src_offset = so;
      t.count = std::min(sc, dc);
      if (t.count > 0) keep.push_back(t);
    }
    st.transfers = std::move(keep);
  }
  return plan;
}

}  // namespace

CollectivePlan make_plan(const Topology& topo, const CollectiveSpec& spec) {
  topo.validate();
  if (spec.granule == 0) bad("granule: 0; chunks are made of granules of >= 1 element");
  if (spec.granule > 1) {
    validate_group_dims(topo, spec.group_dims, "group_dims");
    return plan_granules(topo, spec);
  }
  return plan_grouped(topo, spec);
}

namespace {

CollectivePlan plan_grouped(const Topology& topo, const CollectiveSpec& spec) {
  if (spec.group_dims.empty()) return plan_whole(topo, spec);
  const std::vector<int>& dims = spec.group_dims;
  validate_group_dims(topo, dims, "group_dims");
  const Topology sub = group_topology(topo, dims);
  CollectiveSpec sub_spec = spec;
  sub_spec.group_dims.clear();
  CollectivePlan g;
  try {
    g = plan_whole(sub, sub_spec);
  } catch (const std::invalid_argument& e) {
    bad(std::string(e.what()) + " (per group: group_dims " + dims_text(dims) + " of " +
        topo.name() + " make groups of " + std::to_string(sub.num_chips()) + " chips, " +
        sub.name() + ")");
  }
  // members[group][rank] = pod chip id.
  const int pi = topo.num_chips();
  const std::size_t gs = static_cast<std::size_t>(sub.num_chips());
  const std::size_t groups = static_cast<std::size_t>(pi) / gs;
  std::vector<std::vector<int>> members(groups, std::vector<int>(gs, -1));
  CollectivePlan plan;
  plan.topo = topo;
  plan.spec = spec;
  plan.buffer_len = g.buffer_len;
  plan.element_bytes = g.element_bytes;
  plan.chips.resize(static_cast<std::size_t>(pi));
  for (int c = 0; c < pi; ++c) {
    const std::size_t rank = static_cast<std::size_t>(group_rank(topo, dims, c));
    members[static_cast<std::size_t>(group_index(topo, dims, c))][rank] = c;
    plan.chips[static_cast<std::size_t>(c)] = g.chips[rank];
  }
  plan.steps.resize(g.steps.size());
  for (std::size_t s = 0; s < g.steps.size(); ++s) {
    plan.steps[s].phase = g.steps[s].phase;
    plan.steps[s].transfers.reserve(groups * g.steps[s].transfers.size());
    for (std::size_t gi = 0; gi < groups; ++gi) {
      for (const Transfer& t : g.steps[s].transfers) {
        Transfer u = t;
        u.src = members[gi][static_cast<std::size_t>(t.src)];
        u.dst = members[gi][static_cast<std::size_t>(t.dst)];
        u.route.dim = dims[static_cast<std::size_t>(t.route.dim)];
        plan.steps[s].transfers.push_back(u);
      }
    }
  }
  return plan;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Groups and mesh axes

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

// ---------------------------------------------------------------------------------------------
// Rounds

namespace {

void add_piece(std::vector<RoundPiece>& v, std::size_t offset, std::size_t count) {
  if (count == 0) return;
  if (!v.empty() && v.back().offset + v.back().count == offset) {
    v.back().count += count;  // contiguous with the previous piece: one piece
  } else {
    v.push_back(RoundPiece{offset, count});
  }
}

std::size_t piece_total(const std::vector<RoundPiece>& v) {
  std::size_t n = 0;
  for (const RoundPiece& x : v) n += x.count;
  return n;
}

// Every chip's pieces of round r add up to the round plan's input and output (make_rounds'
// own consistency check; a failure is a bug here, not bad input).
void check_round_pieces(const CollectiveRound& rd, std::size_t r, int chips) {
  for (int c = 0; c < chips; ++c) {
    const std::size_t cu = static_cast<std::size_t>(c);
    if (piece_total(rd.in[cu]) != rd.plan.input_len(c) ||
        piece_total(rd.out[cu]) != rd.plan.output_len(c)) {
      throw std::logic_error("make_rounds: round " + std::to_string(r) + " chip " +
                             std::to_string(c) + ": pieces do not match the round's plan");
    }
  }
}

}  // namespace

namespace {
std::vector<CollectiveRound> rounds_of_elements(const Topology& topo, const CollectiveSpec& spec,
                                                std::size_t rounds);
}  // namespace

std::vector<CollectiveRound> make_rounds(const Topology& topo, const CollectiveSpec& spec,
                                         std::size_t rounds) {
  if (spec.granule <= 1) return rounds_of_elements(topo, spec, rounds);
  // In granules: the rounds of the collective of ceil(n / g) elements, their pieces scaled and
  // clipped at the whole buffers' ends; each round's plan is made_plan of its own n in the
  // same granules (only the round holding a buffer's last, partial granule is shorter).
  const CollectivePlan whole = make_plan(topo, spec);  // every check, in granules
  const std::size_t g = spec.granule;
  CollectiveSpec u = spec;
  u.granule = 1;
  u.n = spec.collective == Collective::kAllToAll ? spec.n / g : (spec.n + g - 1) / g;
  std::vector<CollectiveRound> out = rounds_of_elements(topo, u, rounds);
  const int pi = topo.num_chips();
  for (std::size_t r = 0; r < out.size(); ++r) {
    CollectiveRound& rd = out[r];
    auto scale = [&](std::vector<RoundPiece>& v, std::size_t end) {
      std::vector<RoundPiece> w;
      for (const RoundPiece& x : v) {
        const std::size_t a = std::min(x.offset * g, end), b = std::min((x.offset + x.count) * g, end);
        if (b > a) add_piece(w, a, b - a);
      }
      v = std::move(w);
    };
    for (int c = 0; c < pi; ++c) {
      const std::size_t cu = static_cast<std::size_t>(c);
      scale(rd.in[cu], whole.input_len(c));
      scale(rd.out[cu], whole.output_len(c));
    }
    // The round's n in elements: its units, less the part of a partial last granule it holds.
    std::size_t nr = rd.plan.spec.n * g;
    if (spec.collective != Collective::kAllToAll && spec.n % g != 0) {
      const bool rs = spec.collective == Collective::kReduceScatter;
      bool last = false;
      for (int c = 0; c < pi; ++c)
        for (const RoundPiece& x : rs ? rd.in[static_cast<std::size_t>(c)]
                                      : rd.out[static_cast<std::size_t>(c)])
          last = last || x.offset + x.count == spec.n;
      if (last) nr -= g - spec.n % g;
    }
    CollectiveSpec rspec = spec;
    rspec.n = nr;
    rd.plan = make_plan(topo, rspec);
    check_round_pieces(rd, r, pi);
  }
  return out;
}

namespace {

std::vector<CollectiveRound> rounds_of_elements(const Topology& topo, const CollectiveSpec& spec,
                                                std::size_t rounds) {
  if (rounds < 1) bad("rounds: 0; a collective runs in at least 1 round");
  make_plan(topo, spec);  // every check of the whole collective
  const int pi = topo.num_chips();
  const std::size_t P = static_cast<std::size_t>(group_size(topo, spec.group_dims));
  const std::size_t n = spec.n;
  const std::size_t R = rounds;
  std::vector<std::size_t> rank(static_cast<std::size_t>(pi));
  for (int c = 0; c < pi; ++c) {
    rank[static_cast<std::size_t>(c)] = static_cast<std::size_t>(group_rank(topo, spec.group_dims, c));
  }
  // Rounds from `limit` on are empty (each piece cut in R has fewer than R elements).
  std::size_t limit = n;
  if (spec.collective == Collective::kReduceScatter || spec.collective == Collective::kAllGather) {
    limit = chunk_len(n, P, 0);
  } else if (spec.collective == Collective::kAllToAll) {
    limit = n / P;
  }
  const std::size_t count = std::max<std::size_t>(1, std::min(R, limit));

  std::vector<CollectiveRound> out;
  for (std::size_t r = 0; r < count; ++r) {
    CollectiveRound round;
    round.in.resize(static_cast<std::size_t>(pi));
    round.out.resize(static_cast<std::size_t>(pi));
    std::size_t nr = 0;
    switch (spec.collective) {
      case Collective::kAllReduce:
      case Collective::kBroadcast: {
        const std::size_t off = chunk_offset(n, R, r);
        nr = chunk_len(n, R, r);
        for (std::size_t c = 0; c < static_cast<std::size_t>(pi); ++c) {
          if (spec.collective == Collective::kAllReduce ||
              rank[c] == static_cast<std::size_t>(spec.root)) {
            add_piece(round.in[c], off, nr);
          }
          add_piece(round.out[c], off, nr);
        }
        break;
      }
      case Collective::kReduceScatter:
      case Collective::kAllGather: {
        std::vector<std::size_t> shard_off(P), sub_off(P), sub_len(P);
        for (std::size_t j = 0; j < P; ++j) {
          const std::size_t len = chunk_len(n, P, j);
          shard_off[j] = chunk_offset(n, P, j);
          sub_off[j] = chunk_offset(len, R, r);
          sub_len[j] = chunk_len(len, R, r);
          nr += sub_len[j];
        }
        // The shards' sub-slices are non-increasing in j and differ by at most one, so the
        // round plan's chunking of nr gives exactly them.
        for (std::size_t j = 0; j < P; ++j) {
          if (chunk_len(nr, P, j) != sub_len[j]) {
            throw std::logic_error("make_rounds: round " + std::to_string(r) + " shard " +
                                   std::to_string(j) + " does not chunk as its sub-slice");
          }
        }
        const bool rs = spec.collective == Collective::kReduceScatter;
        for (std::size_t c = 0; c < static_cast<std::size_t>(pi); ++c) {
          std::vector<RoundPiece>& all = rs ? round.in[c] : round.out[c];
          std::vector<RoundPiece>& own = rs ? round.out[c] : round.in[c];
          for (std::size_t j = 0; j < P; ++j) add_piece(all, shard_off[j] + sub_off[j], sub_len[j]);
          add_piece(own, sub_off[rank[c]], sub_len[rank[c]]);
        }
        break;
      }
      case Collective::kAllToAll: {
        const std::size_t b = n / P;
        const std::size_t off = chunk_offset(b, R, r), len = chunk_len(b, R, r);
        nr = P * len;
        for (std::size_t c = 0; c < static_cast<std::size_t>(pi); ++c) {
          for (std::size_t j = 0; j < P; ++j) {
            add_piece(round.in[c], j * b + off, len);
            add_piece(round.out[c], j * b + off, len);
          }
        }
        break;
      }
    }
    if (nr == 0 && n > 0) continue;  // an empty round (cannot happen below `count`)
    CollectiveSpec rspec = spec;
    rspec.n = nr;
    round.plan = make_plan(topo, rspec);
    check_round_pieces(round, r, pi);
    out.push_back(std::move(round));
  }
  return out;
}

}  // namespace

namespace {

// Checks that the pieces of all rounds cover each chip's whole buffer exactly once; returns the
// buffers' lengths. `what` is "in" or "out".
std::vector<std::size_t> covered_lengths(const std::vector<CollectiveRound>& rounds,
                                         std::size_t p, bool input) {
  const char* what = input ? "in" : "out";
  std::vector<std::size_t> len(p, 0);
  for (const CollectiveRound& rd : rounds) {
    for (std::size_t c = 0; c < p; ++c) len[c] += piece_total((input ? rd.in : rd.out)[c]);
  }
  for (std::size_t c = 0; c < p; ++c) {
    std::vector<bool> seen(len[c], false);
    for (std::size_t r = 0; r < rounds.size(); ++r) {
      for (const RoundPiece& x : (input ? rounds[r].in : rounds[r].out)[c]) {
        for (std::size_t i = x.offset; i < x.offset + x.count; ++i) {
          if (i >= len[c] || seen[i]) {
            bad("rounds[" + std::to_string(r) + "]." + what + "[" + std::to_string(c) +
                "]: element " + std::to_string(i) + (i >= len[c] ? " past the buffer of " +
                std::to_string(len[c]) : std::string(" used twice")) +
                "; the rounds' pieces must cover each buffer exactly once");
          }
          seen[i] = true;
        }
      }
    }
  }
  return len;
}

template <class T, class Run>
std::vector<std::vector<T>> execute_rounds_impl(const std::vector<CollectiveRound>& rounds,
                                                const std::vector<std::vector<T>>& inputs,
                                                Run run) {
  if (rounds.empty()) bad("rounds: empty; make_rounds gives at least one round");
  const std::size_t p = static_cast<std::size_t>(rounds[0].plan.topo.num_chips());
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const CollectiveRound& rd = rounds[r];
    if (static_cast<std::size_t>(rd.plan.topo.num_chips()) != p || rd.in.size() != p ||
        rd.out.size() != p) {
      bad("rounds[" + std::to_string(r) + "]: a plan and pieces for each of the " +
          std::to_string(p) + " chips");
    }
    for (std::size_t c = 0; c < p; ++c) {
      if (piece_total(rd.in[c]) != rd.plan.input_len(static_cast<int>(c)) ||
          piece_total(rd.out[c]) != rd.plan.output_len(static_cast<int>(c))) {
        bad("rounds[" + std::to_string(r) + "]: chip " + std::to_string(c) +
            "'s pieces do not match its plan's input and output lengths");
      }
    }
  }
  if (inputs.size() != p) {
    bad("inputs: " + std::to_string(inputs.size()) + " buffers; one per chip (" +
        std::to_string(p) + ")");
  }
  const std::vector<std::size_t> in_len = covered_lengths(rounds, p, true);
  const std::vector<std::size_t> out_len = covered_lengths(rounds, p, false);
  std::vector<std::vector<T>> out(p);
  for (std::size_t c = 0; c < p; ++c) {
    if (inputs[c].size() != in_len[c]) {
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(inputs[c].size()) +
          " elements; these rounds need " + std::to_string(in_len[c]));
    }
    out[c].resize(out_len[c]);
  }
  for (const CollectiveRound& rd : rounds) {
    std::vector<std::vector<T>> in(p);
    for (std::size_t c = 0; c < p; ++c) {
      for (const RoundPiece& x : rd.in[c]) {
        in[c].insert(in[c].end(), inputs[c].begin() + static_cast<std::ptrdiff_t>(x.offset),
                     inputs[c].begin() + static_cast<std::ptrdiff_t>(x.offset + x.count));
      }
    }
    const std::vector<std::vector<T>> res = run(rd.plan, in);
    for (std::size_t c = 0; c < p; ++c) {
      std::size_t k = 0;
      for (const RoundPiece& x : rd.out[c]) {
        std::copy(res[c].begin() + static_cast<std::ptrdiff_t>(k),
                  res[c].begin() + static_cast<std::ptrdiff_t>(k + x.count),
                  out[c].begin() + static_cast<std::ptrdiff_t>(x.offset));
        k += x.count;
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<uint32_t>> execute_rounds_f32(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<uint32_t>>& inputs) {
  return execute_rounds_impl(rounds, inputs, execute_plan_f32);
}

std::vector<std::vector<bf16_t>> execute_rounds_bf16(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<bf16_t>>& inputs) {
  return execute_rounds_impl(rounds, inputs, execute_plan_bf16);
}

// ---------------------------------------------------------------------------------------------
// Executor

namespace {

// Runs the plan on 32-bit lanes. reduce_bf16: the inputs are bf16 bits, widened on load, and the
// outputs are rounded to bf16 once at the end; otherwise the lanes move untouched.
std::vector<std::vector<uint32_t>> execute_lanes(const CollectivePlan& plan,
                                                 const std::vector<std::vector<uint32_t>>& in,
                                                 bool widen_bf16) {
  const int pi = plan.topo.num_chips();
  const std::size_t p = static_cast<std::size_t>(pi);
  if (plan.chips.size() != p) bad("plan.chips: one layout per chip");
  if (in.size() != p) {
    bad("inputs: " + std::to_string(in.size()) + " buffers; one per chip (" + std::to_string(p) +
        ")");
  }
  const bool reduces = collective_reduces(plan.spec.collective);
  const std::size_t len = plan.buffer_len;
  std::vector<std::vector<uint32_t>> buf(p, std::vector<uint32_t>(len, 0u));
  for (std::size_t c = 0; c < p; ++c) {
    const std::size_t want = plan.input_len(static_cast<int>(c));
    if (in[c].size() != want) {
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(in[c].size()) +
          " elements; this plan needs " + std::to_string(want));
    }
    std::size_t k = 0;
    for (const Segment& s : plan.chips[c].input) {
      if (s.offset + s.count > len) bad("plan: input segment outside the working buffer");
      for (std::size_t i = 0; i < s.count; ++i, ++k) {
        buf[c][s.offset + i] = widen_bf16 ? in[c][k] << 16 : in[c][k];
      }
    }
  }

  std::vector<std::size_t> stamp(p * len, 0);  // step + 1 that last received into an element
  for (std::size_t si = 0; si < plan.steps.size(); ++si) {
    const Step& step = plan.steps[si];
    std::vector<std::vector<uint32_t>> incoming;
    incoming.reserve(step.transfers.size());
    for (const Transfer& t : step.transfers) {  // every read sees the start of the step
      if (t.src < 0 || t.src >= pi || t.dst < 0 || t.dst >= pi ||
          t.src_offset + t.count > len || t.dst_offset + t.count > len) {
        bad("plan: step " + std::to_string(si) + " has a transfer outside the pod or buffer");
      }
      const auto& s = buf[static_cast<std::size_t>(t.src)];
      incoming.emplace_back(s.begin() + static_cast<std::ptrdiff_t>(t.src_offset),
                            s.begin() + static_cast<std::ptrdiff_t>(t.src_offset + t.count));
    }
    for (std::size_t ti = 0; ti < step.transfers.size(); ++ti) {
      const Transfer& t = step.transfers[ti];
      auto& d = buf[static_cast<std::size_t>(t.dst)];
      for (std::size_t i = 0; i < t.count; ++i) {
        std::size_t& st = stamp[static_cast<std::size_t>(t.dst) * len + t.dst_offset + i];
        if (st == si + 1) {
          bad("plan: step " + std::to_string(si) + " writes chip " + std::to_string(t.dst) +
              " element " + std::to_string(t.dst_offset + i) + " twice");
        }
        st = si + 1;
        const uint32_t x = incoming[ti][i];
        uint32_t& own = d[t.dst_offset + i];
        if (t.kind == TransferKind::kCopy) {
          own = x;
        } else {
          if (!reduces) bad("plan: a reduce transfer in a collective that does not reduce");
          const float a = f32_from_bits(x), b = f32_from_bits(own);
          own = f32_bits(plan.spec.op == ReduceOp::kMax ? f32_maximum(a, b) : f32_add(a, b));
        }
      }
    }
  }

  std::vector<std::vector<uint32_t>> out(p);
  for (std::size_t c = 0; c < p; ++c) {
    for (const Segment& s : plan.chips[c].output) {
      if (s.offset + s.count > len) bad("plan: output segment outside the working buffer");
      for (std::size_t i = 0; i < s.count; ++i) {
        const uint32_t x = buf[c][s.offset + i];
        out[c].push_back(widen_bf16 ? f32_to_bf16(f32_from_bits(x)) : x);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<uint32_t>> execute_plan_f32(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs) {
  if (plan.spec.dtype != DType::kF32) bad("plan.spec.dtype: bf16 plan run with f32 buffers");
  return execute_lanes(plan, inputs, false);
}

std::vector<std::vector<bf16_t>> execute_plan_bf16(const CollectivePlan& plan,
                                                   const std::vector<std::vector<bf16_t>>& inputs) {
  if (plan.spec.dtype != DType::kBf16) bad("plan.spec.dtype: f32 plan run with bf16 buffers");
  std::vector<std::vector<uint32_t>> wide(inputs.size());
  for (std::size_t c = 0; c < inputs.size(); ++c) wide[c].assign(inputs[c].begin(), inputs[c].end());
  const auto lanes = execute_lanes(plan, wide, collective_reduces(plan.spec.collective));
  std::vector<std::vector<bf16_t>> out(lanes.size());
  for (std::size_t c = 0; c < lanes.size(); ++c) {
    for (uint32_t x : lanes[c]) out[c].push_back(static_cast<bf16_t>(x & 0xFFFFu));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cost

std::vector<DirectedLink> topology_links(const Topology& topo) {
  std::vector<DirectedLink> links;
  for (int c = 0; c < topo.num_chips(); ++c) {
    for (int d : topo.active_dims()) {
      for (int dir : {+1, -1}) {
        if (route_dst(topo, c, Route{d, dir, 1}) >= 0) links.push_back(DirectedLink{c, d, dir});
      }
    }
  }
  return links;
}

PlanCost plan_cost(const CollectivePlan& plan) {
  PlanCost cost;
  cost.steps = plan.steps.size();
  for (const Step& step : plan.steps) {
    std::map<DirectedLink, uint64_t> here;
    for (const Transfer& t : step.transfers) {
      int at = t.src;
      for (int h = 0; h < t.route.hops; ++h) {
        here[DirectedLink{at, t.route.dim, t.route.dir}] += plan.transfer_bytes(t);
        at = route_dst(plan.topo, at, Route{t.route.dim, t.route.dir, 1});
        if (at < 0) bad("plan: a route leaves the topology");
      }
    }
    uint64_t mx = 0;
    for (const auto& [link, bytes] : here) {
      cost.link_bytes[link] += bytes;
      mx = std::max(mx, bytes);
    }
    cost.step_max_link_bytes.push_back(mx);
    cost.step_link_bytes.push_back(std::move(here));
  }
  for (const auto& [link, bytes] : cost.link_bytes) {
    cost.max_link_bytes = std::max(cost.max_link_bytes, bytes);
  }
  return cost;
}

double PlanCost::time_s(double link_bytes_per_s) const {
  double t = 0;
  for (uint64_t b : step_max_link_bytes) t += static_cast<double>(b) / link_bytes_per_s;
  return t;
}

double allreduce_bound_s(int chips, int links_per_chip, double bytes, double link_bytes_per_s) {
  if (chips < 1 || links_per_chip < 1 || link_bytes_per_s <= 0) {
    bad("allreduce_bound_s: chips >= 1, links_per_chip >= 1 and link_bytes_per_s > 0");
  }
  const double p = chips;
  return 2.0 * (p - 1.0) / p * bytes / (links_per_chip * link_bytes_per_s);
}

int allreduce_links_per_chip(const Topology& topo, const std::string& algorithm) {
  if (algorithm == "ring") return 1;
  if (algorithm == "biring") return 2;
  if (algorithm == "torus" || algorithm == "direct") {
    return 2 * static_cast<int>(topo.active_dims().size());
  }
  bad("algorithm: unknown '" + algorithm + "'; expected 'ring', 'biring', 'torus' or 'direct'");
}

int allreduce_links_per_chip(const Topology& topo, const std::vector<int>& group_dims,
                             const std::string& algorithm) {
  return allreduce_links_per_chip(group_topology(topo, group_dims), algorithm);
}

namespace {
std::vector<std::vector<bf16_t>> narrow_words(const std::vector<std::vector<uint32_t>>& in) {
  std::vector<std::vector<bf16_t>> b(in.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (uint32_t x : in[c]) b[c].push_back(static_cast<bf16_t>(x & 0xFFFFu));
  return b;
}
std::vector<std::vector<uint32_t>> widen_words(const std::vector<std::vector<bf16_t>>& in) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& v : in) out.emplace_back(v.begin(), v.end());
  return out;
}
}  // namespace

std::vector<std::vector<uint32_t>> execute_plan_bits(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs) {
  if (plan.spec.dtype == DType::kF32) return execute_plan_f32(plan, inputs);
  return widen_words(execute_plan_bf16(plan, narrow_words(inputs)));
}

std::vector<std::vector<uint32_t>> execute_rounds_bits(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<uint32_t>>& inputs) {
  if (rounds.empty()) bad("rounds: empty; a collective runs in at least 1 round");
  if (rounds[0].plan.spec.dtype == DType::kF32) return execute_rounds_f32(rounds, inputs);
  return widen_words(execute_rounds_bf16(rounds, narrow_words(inputs)));
}

}  // namespace tpu
