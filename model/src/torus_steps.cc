// The all-reduce schedules of `torus` and `direct` (docs/collectives.md): per active dimension
// one part of the buffer, reduce-scattered dimension by dimension and gathered back in reverse.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "plan_steps.h"

namespace tpu::detail {
namespace {

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

}  // namespace

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
            chunks.push_back(
                chunk_of(seg, static_cast<std::size_t>(kd), static_cast<std::size_t>(pos)));
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

}  // namespace tpu::detail
