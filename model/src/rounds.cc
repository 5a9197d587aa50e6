#include "tpu/rounds.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

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
        const std::size_t a = std::min(x.offset * g, end),
                          b = std::min((x.offset + x.count) * g, end);
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
        for (const RoundPiece& x :
             rs ? rd.in[static_cast<std::size_t>(c)] : rd.out[static_cast<std::size_t>(c)])
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
    rank[static_cast<std::size_t>(c)] =
        static_cast<std::size_t>(group_rank(topo, spec.group_dims, c));
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

}  // namespace tpu
