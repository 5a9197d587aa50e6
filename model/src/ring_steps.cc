// Rings through the pod (the Hamiltonian cycle of `ring` and `biring`, the rings of one
// dimension) and the ring and chain step builders on them (plan_steps.h).
#include <cstdlib>

#include "plan_steps.h"

namespace tpu {
namespace detail {

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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
    cyc = comb(cyc, d, dim_order(t.extent(d), t.wraps(d)), dim_routes(d, t.extent(d), t.wraps(d)));
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

}  // namespace detail

std::vector<int> ring_order(const Topology& topo) {
  topo.validate();
  return detail::hamiltonian_ring(topo).chips;
}

}  // namespace tpu
