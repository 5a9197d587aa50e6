// The step builders collective plans are made of (model/src only, not installed): rings through
// the pod, ring reduce-scatter and all-gather on them, the pipelined broadcast chain, and the
// torus and direct all-reduce schedules. make_plan (collective_plan.cc) combines them.
#pragma once

#include <cstddef>
#include <vector>

#include "tpu/collective_plan.h"
#include "tpu/topology.h"

namespace tpu::detail {

// A cycle through chips: chips[i] -> chips[i + 1] (and the last back to the first) over fwd[i].
struct Ring {
  std::vector<int> chips;
  std::vector<Route> fwd;
};

Route reversed(Route r);           // the same hops the other way
Ring reverse_ring(const Ring& r);  // the same chips, travelled the other way
// The ring through the chips of one line along `dim` (the chips that share `base` elsewhere).
Ring dim_ring(const Topology& t, int dim, PodCoord base);
// The ring through all chips (ring_order), starting at chip 0; one chip: {0}.
Ring hamiltonian_ring(const Topology& t);

// Chunk i of `parts` of a segment (the chunking rule), its chunks, and each ring position's
// chunk when chunks are assigned by chip id (position i owns by_chip[chips[i]]).
Segment chunk_of(const Segment& seg, std::size_t parts, std::size_t i);
std::vector<Segment> even_chunks(const Segment& seg, std::size_t p);
std::vector<Segment> chunks_by_chip(const Ring& ring, const std::vector<Segment>& by_chip);
// Shard halves for biring reduce-scatter / all-gather: each chip's shard, first half (the
// larger) clockwise, second half counter-clockwise.
void shard_halves(std::size_t n, std::size_t p, std::vector<Segment>* cw,
                  std::vector<Segment>* ccw);
// Appends empty steps of `phase` until there are `len`.
std::vector<Step>& grow(std::vector<Step>& steps, std::size_t len, const char* phase);

// Ring reduce-scatter / all-gather of chunk[i] (ring position i's) from step step0 on, p - 1
// steps (ring_steps.cc says in which order each chunk is reduced).
void ring_reduce_scatter(std::vector<Step>& steps, std::size_t step0, const Ring& ring,
                         const std::vector<Segment>& chunk);
void ring_all_gather(std::vector<Step>& steps, std::size_t step0, const Ring& ring,
                     const std::vector<Segment>& chunk);
// Pipelined broadcast of the chunks down a chain of chips from chain[0], hop j over routes[j].
void chain_broadcast(std::vector<Step>& steps, const std::vector<int>& chain,
                     const std::vector<Route>& routes, const std::vector<Segment>& chunks);

// The direct route from coordinate `from` to `to` along `dim`: on a ring the shorter way round
// (+1 on a tie), on a line straight there; hops is the distance (0 where from == to).
Route direct_route(const Topology& t, int dim, int from, int to);

// The all-reduce schedules of `torus` (parts weighted by `weights`, or equal when empty) and
// `direct` (docs/collectives.md), appended to `steps`.
void plan_torus_allreduce(const Topology& t, std::size_t n, const std::vector<unsigned>& weights,
                          std::vector<Step>& steps);
void plan_direct_allreduce(const Topology& t, std::size_t n, std::vector<Step>& steps);

}  // namespace tpu::detail
