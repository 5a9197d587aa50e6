// Rounds (docs/collectives.md, "Mesh axes and rounds"): a collective over a buffer larger than
// on-chip memory, streamed in rounds; each round is a plan of its own (tpu/collective_plan.h) and
// pieces that say where its input comes from and its output goes in the chips' whole buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "tpu/collective_plan.h"
#include "tpu/topology.h"

namespace tpu {

// `count` elements at `offset` of a chip's whole (un-rounded) input or output buffer.
struct RoundPiece {
  std::size_t offset = 0, count = 0;
};
// One round: plan = make_plan(topo, spec with n = this round's n). in[chip]: where the round
// plan's input for chip (its plan.chips[chip].input segments concatenated) comes from in the
// chip's whole input, piece after piece; out[chip]: where the round's output goes in the chip's
// whole output. Pieces of zero elements are left out; pieces that follow on in the whole buffer
// are merged into one.
struct CollectiveRound {
  CollectivePlan plan;
  std::vector<std::vector<RoundPiece>> in, out;
};
// Splits `spec` into `rounds` rounds (P = the group size):
//   all_reduce, broadcast: round r is the slice chunk_offset(n, R, r) / chunk_len(n, R, r).
//   reduce_scatter, all_gather: each shard j (chunk_len(n, P, j) elements) is cut into R
//     sub-slices (chunk_len(shard, R, r)); round r has the r-th sub-slice of every shard.
//   all_to_all: round r has the sub-slice chunk_offset(b, R, r) / chunk_len(b, R, r) of every
//     block of b = n / P elements.
// Rounds of no elements are dropped, so rounds > n acts as fewer rounds (never an error); n = 0
// gives one round of n = 0. Throws std::invalid_argument for rounds < 1 and for whatever
// make_plan(topo, spec) refuses.
std::vector<CollectiveRound> make_rounds(const Topology& topo, const CollectiveSpec& spec,
                                         std::size_t rounds);

}  // namespace tpu
