#include "tpu/collective_plan.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "plan_steps.h"

namespace tpu {

using detail::chunk_of;
using detail::chunks_by_chip;
using detail::even_chunks;
using detail::reverse_ring;
using detail::Ring;
using detail::ring_all_gather;
using detail::ring_reduce_scatter;

namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

bool known_algorithm(const std::string& a) {
  return a == "ring" || a == "biring" || a == "torus" || a == "direct";
}

}  // namespace

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

// Throws std::invalid_argument for a spec the whole of `topo` cannot run: an unknown algorithm,
// one the collective does not have, part weights that do not fit, a root that is not a chip, an
// all_to_all buffer that does not split into a block per chip.
void check_whole_spec(const Topology& topo, const CollectiveSpec& spec) {
  const std::string& algo = spec.algorithm;
  const char* coll = collective_name(spec.collective);
  if (!known_algorithm(algo)) {
    bad("algorithm: unknown '" + algo + "'; expected 'ring', 'biring', 'torus' or 'direct'");
  }
  if (algo == "torus" && spec.collective != Collective::kAllReduce) {
    bad(std::string("algorithm: 'torus' is defined for all_reduce only, not ") + coll);
  }
  if (algo == "direct" && spec.collective != Collective::kAllReduce &&
      spec.collective != Collective::kAllToAll) {
    bad(std::string("algorithm: 'direct' is defined for all_reduce and all_to_all only, not ") +
        coll);
  }
  if (algo == "biring" && spec.collective == Collective::kAllToAll) {
    bad("algorithm: all_to_all supports 'ring' and 'direct' only");
  }
  if (algo == "torus" && topo.active_dims().size() < 2) {
    bad("algorithm: 'torus' needs at least 2 dimensions with more than one chip; topology " +
        topo.name() + " has " + std::to_string(topo.active_dims().size()));
  }
  if (!spec.part_weights.empty()) {
    if (algo != "torus") bad("part_weights: only 'torus' has parts, not '" + algo + "'");
    if (spec.part_weights.size() != topo.active_dims().size()) {
      bad("part_weights: " + std::to_string(spec.part_weights.size()) + " weights; " + topo.name() +
          " has " + std::to_string(topo.active_dims().size()) +
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
  if (spec.collective == Collective::kBroadcast && (spec.root < 0 || spec.root >= pi)) {
    bad("root: " + std::to_string(spec.root) + " is not a chip; 0 <= root < " + std::to_string(pi));
  }
  if (spec.collective == Collective::kAllToAll && spec.n % static_cast<std::size_t>(pi) != 0) {
    bad("n: " + std::to_string(spec.n) + " elements for all_to_all; must be a multiple of the " +
        std::to_string(pi) + " chips");
  }
}

// The layouts and steps of each collective on the whole pod, around `ring` (the Hamiltonian
// cycle). `plan` comes with topo, spec, element_bytes, one layout per chip and buffer_len = n.

void plan_all_reduce(const Ring& ring, CollectivePlan& plan) {
  const Topology& topo = plan.topo;
  const std::string& algo = plan.spec.algorithm;
  const std::size_t n = plan.spec.n;
  const std::size_t p = plan.chips.size();
  const Segment whole{0, n};
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
    detail::plan_direct_allreduce(topo, n, plan.steps);
  } else {
    detail::plan_torus_allreduce(topo, n, plan.spec.part_weights, plan.steps);
    std::size_t rs_steps = 0;
    for (int d : topo.active_dims()) rs_steps += static_cast<std::size_t>(topo.extent(d) - 1);
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
      plan.steps[s].phase = s < rs_steps ? "reduce_scatter" : "all_gather";
    }
  }
}

// reduce_scatter and all_gather: shard j of the buffer belongs to chip j.
void plan_shards(const Ring& ring, CollectivePlan& plan) {
  const std::size_t n = plan.spec.n;
  const std::size_t p = plan.chips.size();
  const Segment whole{0, n};
  std::vector<Segment> shards;
  for (std::size_t j = 0; j < p; ++j) {
    shards.push_back(Segment{chunk_offset(n, p, j), chunk_len(n, p, j)});
  }
  const bool rs = plan.spec.collective == Collective::kReduceScatter;
  for (std::size_t j = 0; j < p; ++j) {
    plan.chips[j].input = {rs ? whole : shards[j]};
    plan.chips[j].output = {rs ? shards[j] : whole};
  }
  const auto run = rs ? ring_reduce_scatter : ring_all_gather;
  if (plan.spec.algorithm == "ring") {
    run(plan.steps, 0, ring, chunks_by_chip(ring, shards));
  } else {
    std::vector<Segment> cw, ccw;
    detail::shard_halves(n, p, &cw, &ccw);
    const Ring rev = reverse_ring(ring);
    run(plan.steps, 0, ring, chunks_by_chip(ring, cw));
    run(plan.steps, 0, rev, chunks_by_chip(rev, ccw));
  }
}

// The all_to_all layout (both algorithms): [0, n) output, [n, 2n) input; block i of chip c's
// output is block c of chip i's input, its own block read from the input where it is.
void all_to_all_layout(CollectivePlan& plan) {
  const std::size_t n = plan.spec.n;
  const std::size_t p = plan.chips.size();
  const std::size_t b = n / p;
  plan.buffer_len = 2 * n;
  for (std::size_t c = 0; c < p; ++c) {
    plan.chips[c].input = {Segment{n, n}};
    for (std::size_t i = 0; i < p; ++i) {
      plan.chips[c].output.push_back(i == c ? Segment{n + c * b, b} : Segment{i * b, b});
    }
  }
}

// direct: one step. Chip c sends block j of its input straight to chip j's output block c. A
// tie (distance k / 2 on an even ring) goes + where the coordinates of sender and receiver sum
// to an even number, - where odd, so each chip's ties split both ways. A chip's sends go to its
// p - 1 peers taking their first links in turn: grouped by the first leg of their way (which
// picks the send context, docs/isa.md), one send of each group in turn. A chip issues its
// commands in order and a send waits while its context's queue is full, so sends one after
// another on one context would hold the others back. Within a group: on one active dimension
// shift order (the chip k further on, k = 1, 2, ..: every chip sends the same displacement at
// once, each link of the ring carrying the same load at every moment); on more, a fixed
// shuffle of its own for each chip (Fisher-Yates over mt19937 seeded with the chip id), since
// in shift order the packets of one displacement turn into the same dimension at once and
// collide in waves. Measured (cycles, shift / shuffled, docs/collectives.md): ring of 8, 64 KiB
// 7439 / 10 508; 4x4, 64 KiB 4291 / 4100; 4x4x8 of 4x4 chips, 64 bytes per destination, 2097 /
// 1734 plain, 1346 / 1212 twisted.
void plan_direct_all_to_all(CollectivePlan& plan) {
  const Topology& topo = plan.topo;
  const std::size_t n = plan.spec.n;
  const int p = topo.num_chips();
  const std::size_t b = n / static_cast<std::size_t>(p);
  all_to_all_layout(plan);
  Step step{"all_to_all", {}};
  const bool shuffle = topo.active_dims().size() >= 2;
  for (int c = 0; c < p && b > 0; ++c) {
    const PodCoord at = topo.coord(c);
    std::map<std::pair<int, int>, std::vector<Transfer>> by_first;  // (dim, dir) -> sends
    for (int k = 1; k < p; ++k) {
      const PodCoord by = topo.coord(k);
      PodCoord to{};
      for (int d = 0; d < kPodMaxDims; ++d) to[d] = (at[d] + by[d]) % topo.extent(d);
      Transfer t;
      t.src = c;
      t.dst = topo.id(to);
      t.src_offset = n + static_cast<std::size_t>(t.dst) * b;
      t.dst_offset = static_cast<std::size_t>(c) * b;
      t.count = b;
      t.routed = true;
      t.route.dir = (at[0] + at[1] + at[2] + to[0] + to[1] + to[2]) % 2 == 0 ? +1 : -1;
      const std::vector<Route> legs = routed_path(topo, t);
      t.route.dim = legs.front().dim;
      t.route.hops = 0;
      for (const Route& r : legs) t.route.hops += r.hops;
      by_first[{legs.front().dim, legs.front().dir}].push_back(t);
    }
    std::mt19937 rng(static_cast<uint32_t>(c));
    for (auto& [first, sends] : by_first)
      for (std::size_t i = sends.size(); i > 1 && shuffle; --i)  // the same on every platform
        std::swap(sends[i - 1], sends[rng() % i]);
    for (std::size_t i = 0; i < static_cast<std::size_t>(p); ++i)
      for (const auto& [first, sends] : by_first)
        if (i < sends.size()) step.transfers.push_back(sends[i]);
  }
  if (!step.transfers.empty()) plan.steps.push_back(std::move(step));
}

void plan_all_to_all(const Ring& ring, CollectivePlan& plan) {
  if (plan.spec.algorithm == "direct") {
    plan_direct_all_to_all(plan);
    return;
  }
  const std::size_t n = plan.spec.n;
  const std::size_t p = plan.chips.size();
  // Working buffer: [0, n) output, [n, 2n) input, then two staging banks of p - 2 blocks.
  const std::size_t b = n / p;
  const std::size_t bank = (p >= 2 ? p - 2 : 0) * b;
  all_to_all_layout(plan);
  plan.buffer_len = 2 * n + 2 * bank;
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
        const std::size_t from =
            t == 1 ? n + static_cast<std::size_t>(target) * b : bank_slot(t - 1, k - 1);
        const std::size_t to = k == 1 ? static_cast<std::size_t>(origin) * b : bank_slot(t, k - 2);
        step.transfers.push_back(Transfer{src, dst, from, to, b, TransferKind::kCopy, ring.fwd[q]});
      }
    }
    plan.steps.push_back(std::move(step));
  }
}

void plan_broadcast(const Ring& ring, CollectivePlan& plan) {
  const std::size_t n = plan.spec.n;
  const std::size_t p = plan.chips.size();
  const int root = plan.spec.root;
  const Segment whole{0, n};
  for (std::size_t c = 0; c < p; ++c) {
    plan.chips[c].input =
        static_cast<int>(c) == root ? std::vector<Segment>{whole} : std::vector<Segment>{};
    plan.chips[c].output = {whole};
  }
  std::size_t rpos = 0;
  while (ring.chips[rpos] != root) ++rpos;
  const auto chunks = even_chunks(whole, p);
  // Positions reached clockwise: all but the root on `ring`, half of them on `biring`.
  const std::size_t cw_len = plan.spec.algorithm == "ring" ? p - 1 : p / 2;
  std::vector<int> chain;
  std::vector<Route> routes;
  for (std::size_t j = 0; j <= cw_len; ++j) {
    chain.push_back(ring.chips[(rpos + j) % p]);
    routes.push_back(ring.fwd[(rpos + j) % p]);
  }
  detail::chain_broadcast(plan.steps, chain, routes, chunks);
  chain.clear();
  routes.clear();
  for (std::size_t j = 0; j < p - cw_len; ++j) {  // counter-clockwise: the rest
    chain.push_back(ring.chips[(rpos + p - j) % p]);
    routes.push_back(detail::reversed(ring.fwd[(rpos + 2 * p - j - 1) % p]));
  }
  detail::chain_broadcast(plan.steps, chain, routes, chunks);
}

// The plan of one group that is the whole of `topo` (spec.group_dims is ignored).
CollectivePlan plan_whole(const Topology& topo, const CollectiveSpec& spec) {
  check_whole_spec(topo, spec);
  CollectivePlan plan;
  plan.topo = topo;
  plan.spec = spec;
  plan.element_bytes = (spec.dtype == DType::kF32 || collective_reduces(spec.collective)) ? 4 : 2;
  plan.chips.resize(static_cast<std::size_t>(topo.num_chips()));
  plan.buffer_len = spec.n;
  const Ring ring = detail::hamiltonian_ring(topo);
  switch (spec.collective) {
    case Collective::kAllReduce:
      plan_all_reduce(ring, plan);
      break;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      plan_shards(ring, plan);
      break;
    case Collective::kAllToAll:
      plan_all_to_all(ring, plan);
      break;
    case Collective::kBroadcast:
      plan_broadcast(ring, plan);
      break;
  }
  return plan;
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

std::vector<Route> routed_path(const Topology& topo, const Transfer& t) {
  const PodCoord a = topo.coord(t.src), z = topo.coord(t.dst);
  std::vector<Route> legs;
  for (int d = 0; d < topo.rank(); ++d) {
    Route r = detail::direct_route(topo, d, a[d], z[d]);
    if (r.hops == 0) continue;
    if (topo.wraps(d) && 2 * r.hops == topo.extent(d)) r.dir = t.route.dir < 0 ? -1 : +1;
    legs.push_back(r);
  }
  if (legs.empty()) legs.push_back(Route{0, +1, 0});
  return legs;
}

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

}  // namespace tpu
