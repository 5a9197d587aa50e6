// tpu collectives (model/include/tpu/collective.h, docs/collectives.md): plan invariants (links,
// disjoint receives, step counts, busy torus links, independent direct steps), the golden executor
// against expected values
// written here from the algorithms' definitions, error bounds against an exact sum, the direct
// algorithm's link costs (plan_cost, tpu/perf.h, where the other plans' costs are tested) against
// the bandwidth bound, the errors on invalid input; collectives over groups (mesh axes)
// against each group's own plan, and collectives in rounds against their splitting rule.
#include "mesh_text.h"
#include "tpu/collective.h"
#include "tpu/perf.h"

#include <gtest/gtest.h>

#include "expect_invalid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tpu/bf16.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

using Buffers = std::vector<std::vector<uint32_t>>;  // per chip; bf16 bits sit in [15:0]

struct TopoCase {
  std::string name;
  Topology topo;
};

Topology mixed_4x1x2() {  // x a ring of 4, y a single chip, z a line of 2
  Topology t;
  t.size = {4, 1, 2};
  t.wrap = {true, true, false};
  return t;
}

std::vector<TopoCase> topologies() {
  return {{"ring4", Topology::torus({4})},         {"ring8", Topology::torus({8})},
          {"line5", Topology::mesh({5})},          {"torus2x2", Topology::torus({2, 2})},
          {"torus4x4", Topology::torus({4, 4})},   {"torus2x2x2", Topology::torus({2, 2, 2})},
          {"torus3x3", Topology::torus({3, 3})},   {"mesh3x3", Topology::mesh({3, 3})},
          {"mixed4x1x2", mixed_4x1x2()},           {"single1", Topology::torus({1})}};
}

// Test names from the cases' own names.
struct ByName {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& i) const {
    return i.param.name;
  }
};

// ------------------------------------------------------------------------------------------
// Independent helpers: the chunking rule and the ring's reduction order, from their definitions.

// n elements in p chunks, the first n % p one element longer: [start, start + len) of chunk j.
size_t rule_start(size_t n, size_t p, size_t j) {
  size_t s = 0;
  for (size_t i = 0; i < j; ++i) s += n / p + (i < n % p ? 1 : 0);
  return s;
}
size_t rule_len(size_t n, size_t p, size_t j) { return n / p + (j < n % p ? 1 : 0); }
size_t rule_chunk_of(size_t n, size_t p, size_t e) {
  size_t j = 0;
  while (e >= rule_start(n, p, j) + rule_len(n, p, j)) ++j;
  return j;
}

float op_apply(ReduceOp op, float incoming, float own) {
  return op == ReduceOp::kMax ? f32_maximum(incoming, own) : f32_add(incoming, own);
}

// A ring reduce-scatter delivers the chunk that chip `owner` keeps after it has travelled once
// round the ring `order`: it starts as the value of the chip after the owner, and each chip on
// the way (the owner last) combines op(incoming partial, own value).
float ring_fold(const std::vector<int>& order, int owner, ReduceOp op,
                const std::function<float(int)>& x) {
  const size_t p = order.size();
  const size_t q = static_cast<size_t>(std::find(order.begin(), order.end(), owner) -
                                       order.begin());
  float acc = x(order[(q + 1) % p]);
  for (size_t k = 2; k <= p; ++k) acc = op_apply(op, acc, x(order[(q + k) % p]));
  return acc;
}

// A direct all-reduce, from its definition: the buffer is cut into d parts (d active
// dimensions) and part q takes the dimensions in the order dims[q], dims[q + 1], .. (mod d).
// Element e of part q ends at the chip whose coordinate along each of those dimensions is e's
// chunk (over k) in the segment the chips own before that dimension's phase. After phase m the
// owner `at` of e holds V_m(at) = V_{m-1}(at) op= V_{m-1}(at with coordinate j - 1 along the
// phase's dimension), then j - 2, .., j + 1 (mod k; j = at's coordinate along it), each
// op(incoming, own); V_0 is the input.
float direct_fold(const Topology& t, size_t n, size_t e, ReduceOp op,
                  const std::function<float(int)>& x) {
  const std::vector<int> dims = t.active_dims();
  const size_t d = dims.size();
  if (d == 0) return x(0);  // one chip: its own value
  const size_t part = rule_chunk_of(n, d, e);
  std::vector<int> order;  // the part's dimensions, in phase order
  for (size_t m = 0; m < d; ++m) order.push_back(dims[(part + m) % d]);
  size_t off = rule_start(n, d, part), len = rule_len(n, d, part);
  PodCoord owner{0, 0, 0};
  for (int dim : order) {
    const size_t k = static_cast<size_t>(t.extent(dim));
    const size_t j = rule_chunk_of(len, k, e - off);
    owner[static_cast<size_t>(dim)] = static_cast<int>(j);
    off += rule_start(len, k, j);
    len = rule_len(len, k, j);
  }
  std::function<float(size_t, const PodCoord&)> v = [&](size_t m, const PodCoord& at) -> float {
    if (m == 0) return x(t.id(at));
    const size_t du = static_cast<size_t>(order[m - 1]);
    const int k = t.extent(order[m - 1]);
    float acc = v(m - 1, at);
    for (int s = 1; s < k; ++s) {
      PodCoord from = at;
      from[du] = (at[du] - s + k) % k;
      acc = op_apply(op, v(m - 1, from), acc);
    }
    return acc;
  };
  return v(d, owner);
}

float widen(uint32_t bits, DType t) {
  return t == DType::kBf16 ? bf16_to_f32(static_cast<bf16_t>(bits)) : f32_from_bits(bits);
}
uint32_t narrow(float f, DType t) { return t == DType::kBf16 ? f32_to_bf16(f) : f32_bits(f); }

Buffers run(const CollectivePlan& plan, const Buffers& in) { return execute_plan_bits(plan, in); }

// Random finite values with exponents in [-10, 10] (24-bit significands, so the f64 sum of up
// to 64 of them is exact), rounded to bf16 for bf16 buffers. With `special`, some elements get
// -0 on every chip, and NaN (non-canonical), +Inf or -Inf on some chips.
Buffers random_values(size_t chips, size_t n, DType t, bool special, std::mt19937& rng) {
  Buffers v(chips, std::vector<uint32_t>(n));
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-10, 10);
  for (auto& chip : v) {
    for (auto& x : chip) {
      float f = std::ldexp(mant(rng), ex(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
      x = narrow(f, t);
    }
  }
  if (!special) return v;
  const uint32_t nan = t == DType::kBf16 ? 0x7F81u : 0xFF812345u;
  const uint32_t pinf = t == DType::kBf16 ? 0x7F80u : 0x7F800000u;
  const uint32_t ninf = t == DType::kBf16 ? 0xFF80u : 0xFF800000u;
  const uint32_t nzero = t == DType::kBf16 ? 0x8000u : 0x80000000u;
  for (size_t e = 0; e < n; ++e) {
    const size_t c = rng() % chips;
    switch (rng() % 8) {
      case 0:
        for (auto& chip : v) chip[e] = nzero;
        break;
      case 1:
        v[c][e] = nan;
        break;
      case 2:
        v[c][e] = pinf;
        break;
      case 3:
        v[c][e] = ninf;
        break;
      case 4:
        v[c][e] = nzero;
        break;
      default:
        break;
    }
  }
  return v;
}

Buffers random_bits(size_t chips, const std::function<size_t(size_t)>& len, DType t,
                    std::mt19937& rng) {
  Buffers v(chips);
  for (size_t c = 0; c < chips; ++c) {
    v[c].resize(len(c));
    for (auto& x : v[c]) x = t == DType::kBf16 ? (rng() & 0xFFFFu) : static_cast<uint32_t>(rng());
  }
  return v;
}

std::vector<size_t> sizes_for(size_t p, std::mt19937& rng) {
  std::set<size_t> s = {1, 2, p, p + 1, 2 * p + 3, 7 * p - 1, 97};
  if (p > 1) s.insert(p - 1);
  for (int i = 0; i < 3; ++i) s.insert(1 + rng() % 300);
  return {s.begin(), s.end()};
}

// ------------------------------------------------------------------------------------------
// Plan invariants that hold for every plan.

void check_plan(const CollectivePlan& plan) {
  const Topology& t = plan.topo;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    std::set<std::pair<int, size_t>> written, read;
    for (const Transfer& x : plan.steps[s].transfers) {
      SCOPED_TRACE("step " + std::to_string(s) + " " + std::to_string(x.src) + "->" +
                   std::to_string(x.dst));
      EXPECT_NE(x.src, x.dst);
      if (x.routed) {
        // The direct all_to_all: the routers' way, dimension by dimension, each the shorter way
        // round: route.dim is the first dimension that differs, hops the sum of the distances,
        // and the legs of routed_path walk link by link to the destination.
        EXPECT_EQ(plan.spec.collective, Collective::kAllToAll);
        const PodCoord a = t.coord(x.src), b = t.coord(x.dst);
        int first = -1, hops = 0;
        for (int d = 0; d < t.rank(); ++d) {
          const int k = t.extent(d), fwd = ((b[d] - a[d]) % k + k) % k;
          if (fwd != 0 && first < 0) first = d;
          hops += t.wraps(d) ? std::min(fwd, k - fwd) : std::abs(b[d] - a[d]);
        }
        EXPECT_EQ(x.route.dim, first);
        EXPECT_EQ(x.route.hops, hops);
        int at = x.src, walked = 0, last_dim = -1;
        for (const Route& leg : routed_path(t, x)) {
          EXPECT_GT(leg.dim, last_dim) << "dimension order";
          last_dim = leg.dim;
          for (int h = 0; h < leg.hops; ++h, ++walked)
            at = route_dst(t, at, Route{leg.dim, leg.dir, 1});
        }
        EXPECT_EQ(at, x.dst);
        EXPECT_EQ(walked, hops);
      } else {
        EXPECT_EQ(route_dst(t, x.src, x.route), x.dst);
      }
      if (!x.routed && plan.spec.algorithm == "direct") {
        // Straight to the destination in one dimension: the shorter way round a ring (a tie,
        // k/2 away, either way: its halves go one each), straight along a line.
        const size_t d = static_cast<size_t>(x.route.dim);
        const int k = t.extent(x.route.dim);
        const PodCoord a = t.coord(x.src), b = t.coord(x.dst);
        for (size_t o = 0; o < a.size(); ++o) {
          if (o != d) {
            EXPECT_EQ(a[o], b[o]) << "moves in two dimensions";
          }
        }
        int dir = b[d] > a[d] ? +1 : -1, hops = std::abs(b[d] - a[d]);
        if (t.wraps(x.route.dim)) {
          const int fwd = (b[d] - a[d] + k) % k;
          dir = 2 * fwd <= k ? +1 : -1;
          hops = dir > 0 ? fwd : k - fwd;
          if (2 * fwd == k) dir = x.route.dir;  // a tie: checked by DirectSplitsTies
        }
        EXPECT_EQ(x.route.dir, dir);
        EXPECT_EQ(x.route.hops, hops);
      } else if (!x.routed) {
        // Between neighbours: one link, or two along a line dimension (the folded ring).
        EXPECT_TRUE(x.route.hops == 1 || (x.route.hops == 2 && !t.wraps(x.route.dim)));
      }
      EXPECT_GT(x.count, 0u);
      EXPECT_LE(x.src_offset + x.count, plan.buffer_len);
      EXPECT_LE(x.dst_offset + x.count, plan.buffer_len);
      EXPECT_EQ(x.kind == TransferKind::kReduce, collective_reduces(plan.spec.collective) &&
                                                     plan.steps[s].phase == "reduce_scatter");
      for (size_t i = 0; i < x.count; ++i) {
        EXPECT_TRUE(written.insert({x.dst, x.dst_offset + i}).second)
            << "element " << x.dst_offset + i << " received twice";
        read.insert({x.src, x.src_offset + i});
      }
    }
    // A chip never sends from elements it receives into in the same step (no double buffering).
    for (const auto& w : written) EXPECT_EQ(read.count(w), 0u) << "step " << s;
  }
}

// The steps of a direct all-reduce, one span [first, end) per phase: d reduce-scatter phases,
// then d all-gather phases (d active dimensions). Every phase moves one part along each
// dimension, so each takes k - 1 steps of the longest one.
size_t direct_phase_len(const Topology& t) {
  int k = 1;
  for (int d : t.active_dims()) k = std::max(k, t.extent(d));
  return static_cast<size_t>(k - 1);
}

std::vector<std::pair<size_t, size_t>> direct_phases(const Topology& t) {
  std::vector<std::pair<size_t, size_t>> spans;
  const size_t len = direct_phase_len(t);
  for (size_t ph = 0; ph < 2 * t.active_dims().size(); ++ph) {
    spans.emplace_back(ph * len, (ph + 1) * len);
  }
  return spans;
}

// The transfers of steps [first, end) that send an element that an earlier step of the span
// wrote at their sender. 0: every transfer reads only what its sender held when the span began,
// so the span's steps may all be issued at once (in any order; only the order of the
// reductions into one element is the plan's).
size_t dependent_transfers(const CollectivePlan& plan, size_t first, size_t end) {
  std::set<std::pair<int, size_t>> written;
  size_t dependent = 0;
  for (size_t s = first; s < end; ++s) {
    for (const Transfer& x : plan.steps[s].transfers) {
      for (size_t i = 0; i < x.count; ++i) {
        if (written.count({x.src, x.src_offset + i}) != 0) {
          ++dependent;
          break;
        }
      }
    }
    for (const Transfer& x : plan.steps[s].transfers) {
      for (size_t i = 0; i < x.count; ++i) written.insert({x.dst, x.dst_offset + i});
    }
  }
  return dependent;
}

// ------------------------------------------------------------------------------------------
// The ring order.

void PrintTo(const TopoCase& c, std::ostream* os) { *os << c.name; }

class CollectiveTopology : public ::testing::TestWithParam<TopoCase> {};

TEST_P(CollectiveTopology, RingOrderVisitsEveryChipOverNeighbourLinks) {
  const Topology& t = GetParam().topo;
  const std::vector<int> order = ring_order(t);
  const int p = t.num_chips();
  ASSERT_EQ(order.size(), static_cast<size_t>(p));
  EXPECT_EQ(order[0], 0);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < p; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  for (int i = 0; p > 1 && i < p; ++i) {
    const PodCoord a = t.coord(order[static_cast<size_t>(i)]);
    const PodCoord b = t.coord(order[static_cast<size_t>((i + 1) % p)]);
    int dims_changed = 0;
    for (int d = 0; d < t.rank(); ++d) {
      const int delta = b[static_cast<size_t>(d)] - a[static_cast<size_t>(d)];
      if (delta == 0) continue;
      ++dims_changed;
      const int k = t.extent(d);
      if (t.wraps(d)) {
        EXPECT_TRUE((delta + k) % k == 1 || (delta + k) % k == k - 1) << "hop " << i;
      } else {
        EXPECT_LE(std::abs(delta), 2) << "hop " << i;
      }
    }
    EXPECT_EQ(dims_changed, 1) << "hop " << i;
  }
  for (int c = 0; c < p; ++c) EXPECT_EQ(t.id(t.coord(c)), c);
}

TEST(CollectiveTopologyNames, NameTheShape) {
  EXPECT_EQ(Topology::torus({8}).name(), "ring8");
  EXPECT_EQ(Topology::torus({4, 4}).name(), "torus4x4");
  EXPECT_EQ(Topology::mesh({3, 3}).name(), "mesh3x3");
  EXPECT_EQ(mixed_4x1x2().name(), "mixed4x1x2:ring,ring,line");
  // Linear ids run x fastest.
  EXPECT_EQ(mixed_4x1x2().id({3, 0, 1}), 7);
  EXPECT_EQ(Topology::torus({4, 4}).coord(6), (PodCoord{2, 1, 0}));
}

INSTANTIATE_TEST_SUITE_P(Pods, CollectiveTopology, ::testing::ValuesIn(topologies()),
                         ByName());

// ------------------------------------------------------------------------------------------
// All-reduce and reduce-scatter.

struct ReduceCase {
  std::string name;
  TopoCase topo;
  Collective coll;
  std::string algo;
  ReduceOp op;
  DType dtype;
  bool special;
};

std::vector<ReduceCase> reduce_cases(Collective coll) {
  std::vector<ReduceCase> cases;
  for (const TopoCase& tc : topologies()) {
    std::vector<std::string> algos = {"ring", "biring"};
    if (coll == Collective::kAllReduce && tc.topo.active_dims().size() >= 2) {
      algos.push_back("torus");
    }
    if (coll == Collective::kAllReduce) algos.push_back("direct");
    for (const std::string& a : algos) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (DType dt : {DType::kF32, DType::kBf16}) {
          for (bool special : {false, true}) {
            cases.push_back({tc.name + "_" + a + "_" + reduce_op_name(op) + "_" + dtype_name(dt) +
                                 (special ? "_special" : ""),
                             tc, coll, a, op, dt, special});
          }
        }
      }
    }
  }
  return cases;
}

// The expected value of element e from the algorithm's definition (ring, biring and direct), or
// false when the test has no closed form (torus: bounded instead).
bool expected_by_order(const ReduceCase& rc, const std::vector<int>& order, size_t n, size_t e,
                       const std::function<float(int)>& x, float* out) {
  const size_t p = order.size();
  std::vector<int> rev(order.rbegin(), order.rend());
  if (rc.algo == "direct") {
    *out = direct_fold(rc.topo.topo, n, e, rc.op, x);
    return true;
  }
  if (rc.algo == "ring") {
    *out = ring_fold(order, static_cast<int>(rule_chunk_of(n, p, e)), rc.op, x);
    return true;
  }
  if (rc.algo != "biring") return false;
  if (rc.coll == Collective::kAllReduce) {  // first half (the larger) clockwise, rest counter-
    const size_t h = (n + 1) / 2;
    *out = e < h ? ring_fold(order, static_cast<int>(rule_chunk_of(h, p, e)), rc.op, x)
                 : ring_fold(rev, static_cast<int>(rule_chunk_of(n - h, p, e - h)), rc.op, x);
    return true;
  }
  // Reduce-scatter: each shard's first half (the larger) clockwise, its second counter-.
  const size_t j = rule_chunk_of(n, p, e);
  const size_t local = e - rule_start(n, p, j);
  const size_t h = (rule_len(n, p, j) + 1) / 2;
  *out = ring_fold(local < h ? order : rev, static_cast<int>(j), rc.op, x);
  return true;
}

void PrintTo(const ReduceCase& c, std::ostream* os) { *os << c.name; }

class CollectiveReduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(CollectiveReduce, MatchesTheAlgorithmAndTheExactValue) {
  const ReduceCase& rc = GetParam();
  const Topology& t = rc.topo.topo;
  const size_t p = static_cast<size_t>(t.num_chips());
  const std::vector<int> order = ring_order(t);
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(rc.name)));
  for (size_t n : sizes_for(p, rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    CollectiveSpec spec;
    spec.collective = rc.coll;
    spec.op = rc.op;
    spec.dtype = rc.dtype;
    spec.n = n;
    spec.algorithm = rc.algo;
    const CollectivePlan plan = make_plan(t, spec);
    check_plan(plan);
    size_t want_steps = 2 * (p - 1);
    if (rc.algo == "torus") {
      want_steps = 0;
      for (int d : t.active_dims()) want_steps += 2 * static_cast<size_t>(t.extent(d) - 1);
    }
    if (rc.algo == "direct") want_steps = direct_phases(t).size() * direct_phase_len(t);
    if (rc.coll == Collective::kReduceScatter) want_steps = p - 1;
    EXPECT_EQ(plan.steps.size(), want_steps);
    EXPECT_EQ(plan.element_bytes, 4u);  // f32, and bf16 partials travel as f32
    if (rc.algo == "direct") {  // each phase's steps read only what their senders held before it
      for (const auto& [first, end] : direct_phases(t)) {
        EXPECT_EQ(dependent_transfers(plan, first, end), 0u) << "steps " << first << ".." << end;
        for (size_t s = first; s < end; ++s) {
          EXPECT_EQ(plan.steps[s].phase, plan.steps[first].phase);
        }
      }
    }

    const Buffers in = random_values(p, n, rc.dtype, rc.special, rng);
    const Buffers out = run(plan, in);
    ASSERT_EQ(out.size(), p);

    for (size_t c = 0; c < p; ++c) {
      const bool all = rc.coll == Collective::kAllReduce;
      const size_t first = all ? 0 : rule_start(n, p, c);
      const size_t len = all ? n : rule_len(n, p, c);
      ASSERT_EQ(out[c].size(), len) << "chip " << c;
      if (all && c > 0) {
        EXPECT_EQ(out[c], out[0]) << "chip " << c << " differs from chip 0";
        continue;
      }
      for (size_t i = 0; i < len; ++i) {
        const size_t e = first + i;
        const auto x = [&](int chip) { return widen(in[static_cast<size_t>(chip)][e], rc.dtype); };
        const uint32_t got = out[c][i];
        float exp_order = 0;
        if (expected_by_order(rc, order, n, e, x, &exp_order)) {
          EXPECT_EQ(got, narrow(exp_order, rc.dtype)) << "element " << e;
        }
        if (rc.op == ReduceOp::kMax) {  // order-free: exact
          float m = x(0);
          for (size_t k = 1; k < p; ++k) m = f32_maximum(m, x(static_cast<int>(k)));
          EXPECT_EQ(got, narrow(m, rc.dtype)) << "element " << e;
          continue;
        }
        bool nan = false, pinf = false, ninf = false, all_nzero = true;
        double exact = 0, abs_sum = 0;
        for (size_t k = 0; k < p; ++k) {
          const float v = x(static_cast<int>(k));
          nan |= std::isnan(v);
          pinf |= v == INFINITY;
          ninf |= v == -INFINITY;
          all_nzero &= v == 0 && std::signbit(v);
          if (std::isfinite(v)) {
            exact += v;  // exact: see random_values
            abs_sum += std::fabs(v);
          }
        }
        const float r = widen(got, rc.dtype);
        if (nan || (pinf && ninf)) {  // canonical, unless a lone chip did no arithmetic at all
          const float want = p > 1 ? f32_from_bits(kF32CanonNan) : x(0);
          EXPECT_EQ(got, narrow(want, rc.dtype)) << "element " << e;
        } else if (pinf || ninf) {
          EXPECT_EQ(r, pinf ? INFINITY : -INFINITY) << "element " << e;
        } else if (all_nzero) {
          EXPECT_EQ(got, narrow(-0.0f, rc.dtype)) << "element " << e;
        } else {
          // Any summation tree of p terms rounds each term at most p - 1 times, so
          // |sum - exact| <= gamma(p-1) * sum|x|, gamma(k) = k u / (1 - k u), u = 2^-24; a bf16
          // result adds one rounding to bf16, at most 2^-8 of its magnitude.
          const double u = std::ldexp(1.0, -24);
          const double k = static_cast<double>(p - 1);
          const double gamma = k * u / (1 - k * u);
          double bound = gamma * abs_sum;
          if (rc.dtype == DType::kBf16) bound += std::ldexp(1.0, -8) * (std::fabs(exact) + bound);
          EXPECT_LE(std::fabs(static_cast<double>(r) - exact), bound) << "element " << e;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllReduce, CollectiveReduce,
                         ::testing::ValuesIn(reduce_cases(Collective::kAllReduce)),
                         ByName());
INSTANTIATE_TEST_SUITE_P(ReduceScatter, CollectiveReduce,
                         ::testing::ValuesIn(reduce_cases(Collective::kReduceScatter)),
                         ByName());

// The ring's order shows in the bits: on a 4-ring (order 0 1 2 3) with chips holding 2^24, 1, 1,
// -2^24 in every element, chunk q (one element each) is summed starting after its owner:
//   q=0: ((1 + 1) - 2^24) + 2^24 = 2      q=1: ((1 - 2^24) + 2^24) + 1 = 2
//   q=2: ((-2^24 + 2^24) + 1) + 1 = 2     q=3: ((2^24 + 1) + 1) - 2^24 = 0 (each +1 ties to even)
TEST(CollectiveGolden, RingSumOrderByHand) {
  const float big = 16777216.0f;
  const Buffers in = {std::vector<uint32_t>(4, f32_bits(big)), std::vector<uint32_t>(4, f32_bits(1)),
                      std::vector<uint32_t>(4, f32_bits(1)), std::vector<uint32_t>(4, f32_bits(-big))};
  CollectiveSpec spec;
  spec.n = 4;
  const Buffers out = execute_plan_f32(make_plan(Topology::torus({4}), spec), in);
  const std::vector<uint32_t> want = {f32_bits(2), f32_bits(2), f32_bits(2), f32_bits(0)};
  for (const auto& chip : out) EXPECT_EQ(chip, want);
}

// Direct on a 4-ring, the same inputs: chunk j (element j) starts at its owner and takes in x[j-1],
// x[j-2], x[j-3] (mod 4), each sent straight from its chip:
//   j=0: ((2^24 - 2^24) + 1) + 1 = 2       j=1: ((1 + 2^24) - 2^24) + 1 = 1 (1 + 2^24 ties to even)
//   j=2: ((1 + 1) + 2^24) - 2^24 = 2       j=3: ((-2^24 + 1) + 1) + 2^24 = 2
// Step 1 goes one link +1, step 2 two links +1 (the tie), step 3 one link -1.
TEST(CollectiveGolden, DirectSumOrderByHandOnARing) {
  const float big = 16777216.0f;
  const Buffers in = {std::vector<uint32_t>(4, f32_bits(big)), std::vector<uint32_t>(4, f32_bits(1)),
                      std::vector<uint32_t>(4, f32_bits(1)), std::vector<uint32_t>(4, f32_bits(-big))};
  CollectiveSpec spec;
  spec.n = 4;
  spec.algorithm = "direct";
  const CollectivePlan plan = make_plan(Topology::torus({4}), spec);
  ASSERT_EQ(plan.steps.size(), 6u);
  const int dirs[3] = {+1, +1, -1}, hops[3] = {1, 2, 1};
  for (size_t s = 0; s < 6; ++s) {
    EXPECT_EQ(plan.steps[s].phase, s < 3 ? "reduce_scatter" : "all_gather");
    ASSERT_EQ(plan.steps[s].transfers.size(), 4u);
    for (const Transfer& x : plan.steps[s].transfers) {
      EXPECT_EQ(x.dst, (x.src + static_cast<int>(s % 3) + 1) % 4);  // distance s + 1, both phases
      EXPECT_EQ(x.src_offset, static_cast<size_t>(s < 3 ? x.dst : x.src));  // chunk = element
      EXPECT_EQ(x.route.dir, dirs[s % 3]);
      EXPECT_EQ(x.route.hops, hops[s % 3]);
    }
  }
  const Buffers out = execute_plan_f32(plan, in);
  const std::vector<uint32_t> want = {f32_bits(2), f32_bits(1), f32_bits(2), f32_bits(2)};
  for (const auto& chip : out) EXPECT_EQ(chip, want);
}

// Direct on a 2x2 (chips 0 = (0,0), 1 = (1,0), 2 = (0,1), 3 = (1,1)), n = 4: part 0 (e0, e1)
// goes x first, then y, so its elements are (x0 + x1) + (x2 + x3); part 1 (e2, e3) goes y
// first: (x0 + x2) + (x1 + x3) (the order within a pair of two does not show: + is
// commutative). Per element the chips hold:
//   e0: 2^24, 1, 1, -2^24  ->  x first: 2^24 + -(2^24 - 1) = 1   (2^24 + 1 ties to even)
//   e1: 2^24, -2^24, 1, 1  ->  x first: 0 + 2 = 2                 (y first would give 1)
//   e2: 1, 1, 2^24, -2^24  ->  y first: 2^24 + -(2^24 - 1) = 1   (x first would give 2)
//   e3: 2^24, 1, -2^24, 1  ->  y first: 0 + 2 = 2                 (x first would give 1)
TEST(CollectiveGolden, DirectSumOrderByHandOn2x2) {
  const uint32_t b = f32_bits(16777216.0f), m = f32_bits(-16777216.0f), o = f32_bits(1);
  const Buffers in = {{b, b, o, b}, {o, m, o, o}, {o, o, b, m}, {m, o, m, o}};
  CollectiveSpec spec;
  spec.n = 4;
  spec.algorithm = "direct";
  const CollectivePlan plan = make_plan(Topology::torus({2, 2}), spec);
  ASSERT_EQ(plan.steps.size(), 4u);
  for (size_t s = 0; s < 4; ++s) {
    // Both parts from every chip in the outer phases; in the inner ones a part's segment is one
    // element, which one chip of each pair owns.
    EXPECT_EQ(plan.steps[s].transfers.size(), s == 0 || s == 3 ? 8u : 4u);
    for (const Transfer& x : plan.steps[s].transfers) {
      const bool part0 = x.src_offset < 2;
      const bool first_dim = s == 0 || s == 3;           // x, y, then y, x (part 0)
      EXPECT_EQ(x.route.dim, part0 == first_dim ? 0 : 1) << "step " << s;
      EXPECT_EQ(x.route.dir, +1);                        // distance 1 of 2: a one-element tie
      EXPECT_EQ(x.route.hops, 1);
    }
  }
  const Buffers out = execute_plan_f32(plan, in);
  const std::vector<uint32_t> want = {f32_bits(1), f32_bits(2), f32_bits(1), f32_bits(2)};
  for (const auto& chip : out) EXPECT_EQ(chip, want);
}

// A tie (distance k/2 on an even ring) goes half each way: on a ring of 4 with chunks of 4
// elements, the distance-2 step sends elements 0-1 of the chunk +1 and 2-3 -1, two links each,
// so the + and the - links carry the same bytes (the ring of 4's reduce-scatter: 1/2 of the
// segment on every directed link, against 3/4 on the + links with the tie one way).
TEST(CollectivePlan, DirectSplitsTies) {
  CollectiveSpec spec;
  spec.n = 16;
  spec.algorithm = "direct";
  const Topology ring4 = Topology::torus({4});
  const CollectivePlan plan = make_plan(ring4, spec);
  ASSERT_EQ(plan.steps.size(), 6u);
  for (size_t s : {1u, 4u}) {  // distance 2, both phases
    ASSERT_EQ(plan.steps[s].transfers.size(), 8u);
    for (const Transfer& x : plan.steps[s].transfers) {
      EXPECT_EQ(x.dst, (x.src + 2) % 4);
      EXPECT_EQ(x.count, 2u);
      EXPECT_EQ(x.route.hops, 2);
      const size_t chunk = 4 * static_cast<size_t>(s == 1 ? x.dst : x.src);
      EXPECT_EQ(x.route.dir, x.src_offset == chunk ? +1 : -1) << "step " << s;
      EXPECT_TRUE(x.src_offset == chunk || x.src_offset == chunk + 2);
    }
  }
  const PlanCost c = plan_cost(plan);
  ASSERT_EQ(c.link_bytes.size(), 8u);
  for (const auto& [link, bytes] : c.link_bytes) EXPECT_EQ(bytes, 64u);  // 2 x (4 + 2 + 2) x 4 B
}

// bf16 inputs accumulate in f32 and round once: 1 + 2^-8 + 2^-8 = 1 + 2^-7 (a bf16 value);
// rounding each partial to bf16 would give 1 (1 + 2^-8 is a tie that rounds to even, 1).
TEST(CollectiveGolden, Bf16AccumulatesInF32AndRoundsOnce) {
  for (const char* algo : {"ring", "biring", "torus", "direct"}) {
    const Topology t = Topology::torus({2, 2});
    const std::vector<std::vector<bf16_t>> in = {
        {0x3F80, 0x3F80, 0x3F80}, {0x3B80, 0x3B80, 0x3B80}, {0x3B80, 0x3B80, 0x3B80}, {0, 0, 0}};
    CollectiveSpec spec;
    spec.dtype = DType::kBf16;
    spec.n = 3;
    spec.algorithm = algo;
    for (const auto& chip : execute_plan_bf16(make_plan(t, spec), in)) {
      EXPECT_EQ(chip, (std::vector<bf16_t>{0x3F81, 0x3F81, 0x3F81})) << algo;
    }
  }
}

// ------------------------------------------------------------------------------------------
// All-gather, all-to-all, broadcast: exact data movement (any bits, NaN payloads included).

struct MoveCase {
  std::string name;
  TopoCase topo;
  Collective coll;
  std::string algo;
  DType dtype;
};

std::vector<MoveCase> move_cases() {
  std::vector<MoveCase> cases;
  for (const TopoCase& tc : topologies()) {
    for (Collective c : {Collective::kAllGather, Collective::kAllToAll, Collective::kBroadcast}) {
      for (std::string a : {"ring", "biring", "direct"}) {
        if (c == Collective::kAllToAll && a == "biring") continue;
        if (c != Collective::kAllToAll && a == "direct") continue;
        for (DType dt : {DType::kF32, DType::kBf16}) {
          cases.push_back({tc.name + "_" + collective_name(c) + "_" + a + "_" + dtype_name(dt),
                           tc, c, a, dt});
        }
      }
    }
  }
  return cases;
}

void PrintTo(const MoveCase& c, std::ostream* os) { *os << c.name; }

class CollectiveMove : public ::testing::TestWithParam<MoveCase> {};

TEST_P(CollectiveMove, DeliversExactly) {
  const MoveCase& mc = GetParam();
  const Topology& t = mc.topo.topo;
  const size_t p = static_cast<size_t>(t.num_chips());
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(mc.name)));
  std::vector<size_t> sizes = sizes_for(p, rng);
  if (mc.coll == Collective::kAllToAll) {  // n = p * block
    sizes = {p, 2 * p, 5 * p, p * (1 + rng() % 20)};
  }
  for (size_t n : sizes) {
    const std::vector<int> roots = {0, static_cast<int>(p) - 1, static_cast<int>(rng() % p)};
    for (int root : roots) {
      if (mc.coll != Collective::kBroadcast && root != 0) continue;
      SCOPED_TRACE("n = " + std::to_string(n) + " root = " + std::to_string(root));
      CollectiveSpec spec;
      spec.collective = mc.coll;
      spec.dtype = mc.dtype;
      spec.n = n;
      spec.algorithm = mc.algo;
      spec.root = root;
      const CollectivePlan plan = make_plan(t, spec);
      check_plan(plan);
      EXPECT_EQ(plan.element_bytes, mc.dtype == DType::kBf16 ? 2u : 4u);
      Buffers in, want(p);
      if (mc.coll == Collective::kAllGather) {
        in = random_bits(p, [&](size_t c) { return rule_len(n, p, c); }, mc.dtype, rng);
        for (size_t c = 0; c < p; ++c) {
          for (const auto& shard : in) want[c].insert(want[c].end(), shard.begin(), shard.end());
        }
        EXPECT_EQ(plan.steps.size(), p - 1);
      } else if (mc.coll == Collective::kAllToAll) {
        const size_t b = n / p;  // chip c's block j goes to chip j, where it is block c
        in = random_bits(p, [&](size_t) { return n; }, mc.dtype, rng);
        for (size_t c = 0; c < p; ++c) {
          for (size_t j = 0; j < p; ++j) {
            want[c].insert(want[c].end(), in[j].begin() + static_cast<std::ptrdiff_t>(c * b),
                           in[j].begin() + static_cast<std::ptrdiff_t>((c + 1) * b));
          }
        }
        EXPECT_EQ(plan.steps.size(), mc.algo == "direct" ? std::min<size_t>(p - 1, 1) : p - 1);
      } else {
        const size_t r = static_cast<size_t>(root);
        in = random_bits(p, [&](size_t c) { return c == r ? n : 0; }, mc.dtype, rng);
        for (size_t c = 0; c < p; ++c) want[c] = in[r];
        const size_t steps = p < 2 ? 0 : mc.algo == "ring" ? 2 * p - 2 : p / 2 + p - 1;
        EXPECT_EQ(plan.steps.size(), steps);
      }
      const Buffers out = run(plan, in);
      for (size_t c = 0; c < p; ++c) EXPECT_EQ(out[c], want[c]) << "chip " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pods, CollectiveMove, ::testing::ValuesIn(move_cases()),
                         ByName());

// ------------------------------------------------------------------------------------------
// The torus algorithm keeps every link busy; costs against the bandwidth bound.

class CollectiveTorusLinks : public ::testing::TestWithParam<TopoCase> {};

TEST_P(CollectiveTorusLinks, EveryDirectedLinkCarriesDataInTheReduceScatterSteps) {
  const Topology& t = GetParam().topo;
  CollectiveSpec spec;
  spec.n = 4000;
  spec.algorithm = "torus";
  const CollectivePlan plan = make_plan(t, spec);
  const PlanCost cost = plan_cost(plan);
  const std::vector<int> dims = t.active_dims();
  bool equal = true;
  for (int d : dims) equal = equal && t.extent(d) == t.extent(dims[0]);
  std::vector<size_t> rs;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (plan.steps[s].phase == "reduce_scatter") rs.push_back(s);
  }
  ASSERT_FALSE(rs.empty());
  for (size_t s : rs) {  // each step moves data in every dimension (when dimensions are equal)
    std::set<int> used;
    for (const Transfer& x : plan.steps[s].transfers) used.insert(x.route.dim);
    if (equal) {
      EXPECT_EQ(used.size(), dims.size()) << "step " << s;
    }
  }
  for (const DirectedLink& l : topology_links(t)) {
    size_t busy = 0;
    for (size_t s : rs) busy += cost.step_link_bytes[s].count(l);
    SCOPED_TRACE("link chip " + std::to_string(l.chip) + " dim " + std::to_string(l.dim) +
                 " dir " + std::to_string(l.dir));
    if (equal) {
      EXPECT_EQ(busy, rs.size());
    } else {  // a short dimension idles while the long one finishes: still at least half
      EXPECT_GE(2 * busy, rs.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pods, CollectiveTorusLinks,
                         ::testing::Values(TopoCase{"torus2x2", Topology::torus({2, 2})},
                                           TopoCase{"torus4x4", Topology::torus({4, 4})},
                                           TopoCase{"torus2x2x2", Topology::torus({2, 2, 2})},
                                           TopoCase{"torus3x3", Topology::torus({3, 3})},
                                           TopoCase{"mesh3x3", Topology::mesh({3, 3})},
                                           TopoCase{"mixed4x1x2", mixed_4x1x2()},
                                           TopoCase{"torus4x2", Topology::torus({4, 2})}),
                         ByName());

// The bytes of the busiest link when every step of a phase is issued at once: per phase, the
// most any link carries over the phase's steps; summed over the phases (bytes per unit bw).
double phase_time(const PlanCost& cost, const std::vector<std::pair<size_t, size_t>>& phases) {
  double t = 0;
  for (const auto& [first, end] : phases) {
    std::map<DirectedLink, uint64_t> sum;
    for (size_t s = first; s < end; ++s) {
      for (const auto& [l, b] : cost.step_link_bytes[s]) sum[l] += b;
    }
    uint64_t mx = 0;
    for (const auto& [l, b] : sum) mx = std::max(mx, b);
    t += static_cast<double>(mx);
  }
  return t;
}

// Direct trades link bytes for latency: 2 sum_d (k_d - 1) steps, but each phase's steps are
// independent (the driver can issue them at once), against torus's dependent chain; transfers
// of distance > 1 cross several links. The figures are in docs/collectives.md.
TEST(CollectiveCost, DirectStepsAreIndependentAndCostMoreLinkBytes) {
  const Topology t44 = Topology::torus({4, 4});
  CollectiveSpec spec;
  spec.n = 640;  // N = 2560 bytes, divisible by every chunking
  spec.algorithm = "direct";
  const CollectivePlan direct = make_plan(t44, spec);
  EXPECT_EQ(direct.steps.size(), 12u);  // 2 * (3 + 3)
  const auto phases = direct_phases(t44);
  ASSERT_EQ(phases.size(), 4u);  // x, y reduce-scatters; y, x all-gathers
  for (const auto& [first, end] : phases) {
    EXPECT_EQ(end - first, 3u);
    EXPECT_EQ(dependent_transfers(direct, first, end), 0u) << "steps " << first << ".." << end;
  }
  // Torus's steps do depend on each other: a ring reduce-scatter forwards partials.
  spec.algorithm = "torus";
  EXPECT_GT(dependent_transfers(make_plan(t44, spec), 0, 3), 0u);
  // Independent steps: issued in the reverse order within each phase, max (order-free) gives
  // the same bits.
  spec.algorithm = "direct";
  spec.op = ReduceOp::kMax;
  spec.n = 37;
  const CollectivePlan mx = make_plan(t44, spec);
  CollectivePlan rev = mx;
  for (const auto& [first, end] : direct_phases(t44)) {
    std::reverse(rev.steps.begin() + static_cast<std::ptrdiff_t>(first),
                 rev.steps.begin() + static_cast<std::ptrdiff_t>(end));
  }
  std::mt19937 rng(7);
  const Buffers in = random_values(16, 37, DType::kF32, true, rng);
  EXPECT_EQ(execute_plan_f32(rev, in), execute_plan_f32(mx, in));

  // Link bytes against the bound (L = 2 d links per chip). 4x4: the part that goes x first
  // (N/2) loads each x link in its x phase with N/8 (distance 1) + N/16 + N/16 (the tie's halves,
  // two links each: its own and its neighbour's), N/4; the other part N/16 in its second phase:
  // 5N/16 per reduce-scatter, 5N/8 = 0.625 N over the plan on every directed link (the y links
  // the same), against a bound of 2 (15/16) N / 4 = 0.46875 N.
  const auto cost_of = [](const Topology& t, size_t n) {
    CollectiveSpec s;
    s.n = n;
    s.algorithm = "direct";
    return plan_cost(make_plan(t, s));
  };
  const PlanCost c44 = cost_of(t44, 640);
  const double n44 = 2560;
  const double bound44 = collective_ici_cycles(Collective::kAllReduce, 16, n44,
                                               allreduce_links_per_chip(t44, "direct"), 1);
  EXPECT_EQ(allreduce_links_per_chip(t44, "direct"), 4);
  EXPECT_DOUBLE_EQ(bound44, 0.46875 * n44);
  EXPECT_EQ(c44.link_bytes.size(), 64u);                    // every directed link carries data
  for (const auto& [link, bytes] : c44.link_bytes) EXPECT_EQ(bytes, 1600u);  // 0.625 N: 1.33x
  EXPECT_EQ(c44.max_link_bytes, 1600u);
  EXPECT_DOUBLE_EQ(c44.link_cycles(1.0), 0.9375 * n44);     // steps back to back: 2.0x
  EXPECT_DOUBLE_EQ(phase_time(c44, phases), 0.625 * n44);   // phases at once: 1.33x
  // Ring of 8: a + link carries (1 + 2 + 3) N/8 at distances 1..3 and 4 N/16 of the tie's +
  // halves per phase, N; a - link the same; bound 2 (7/8) N / 2 = 0.875 N.
  const Topology r8 = Topology::torus({8});
  const PlanCost c8 = cost_of(r8, 800);
  const double n8 = 3200;
  const double bound8 = collective_ici_cycles(Collective::kAllReduce, 8, n8,
                                              allreduce_links_per_chip(r8, "direct"), 1);
  EXPECT_DOUBLE_EQ(bound8, 0.875 * n8);
  EXPECT_EQ(c8.steps, 14u);
  EXPECT_EQ(c8.max_link_bytes, 6400u);                            // 2 N: 2.29x the bound
  EXPECT_DOUBLE_EQ(c8.link_cycles(1.0), 3.5 * n8);                // 4.0x
  EXPECT_DOUBLE_EQ(phase_time(c8, direct_phases(r8)), 2.0 * n8);  // 2.29x
}

// ------------------------------------------------------------------------------------------
// Invalid input.

// The direct all_to_all: one step of p (p - 1) sends, each block straight to its chip over the
// routers' way. Link loads by hand: on a 3x3 torus (no ties) every chip sends 4 blocks one link
// and 4 two links (x then y), and each directed link carries 3 blocks: its own chip's x leg of
// the 3 destinations dx = +1 (any dy), or the y legs of the 3 packets turning into it. On a 5-ring
// each + link carries its chip's +1 and +2 and its - neighbour's +2: 3 blocks. An independent
// total: the links' bytes sum to the transfers' hops times their bytes.
TEST(CollectiveCost, DirectAllToAllGoesTheRoutersWayAndLoadsEveryLinkAlike) {
  for (const auto& [topo, per_link] :
       {std::pair{Topology::torus({3, 3}), 3u}, std::pair{Topology::torus({5}), 3u}}) {
    SCOPED_TRACE(topo.name());
    const std::size_t p = static_cast<std::size_t>(topo.num_chips());
    CollectiveSpec spec;
    spec.collective = Collective::kAllToAll;
    spec.algorithm = "direct";
    spec.n = p * 10;  // blocks of 40 bytes
    const CollectivePlan plan = make_plan(topo, spec);
    ASSERT_EQ(plan.steps.size(), 1u);
    EXPECT_EQ(plan.steps[0].transfers.size(), p * (p - 1));
    const PlanCost cost = plan_cost(plan);
    uint64_t hop_bytes = 0;
    for (const Transfer& t : plan.steps[0].transfers) {
      EXPECT_TRUE(t.routed);
      hop_bytes += static_cast<uint64_t>(t.route.hops) * plan.transfer_bytes(t);
    }
    uint64_t link_sum = 0;
    for (const DirectedLink& l : topology_links(topo)) {
      EXPECT_EQ(cost.link_bytes.count(l) ? cost.link_bytes.at(l) : 0u, per_link * 40u);
      link_sum += cost.link_bytes.count(l) ? cost.link_bytes.at(l) : 0u;
    }
    EXPECT_EQ(link_sum, hop_bytes);
  }
  // Ties split: on a 4x4 torus the two ways of each tie carry the same bytes in total.
  CollectiveSpec spec;
  spec.collective = Collective::kAllToAll;
  spec.algorithm = "direct";
  spec.n = 16 * 4;
  const PlanCost c = plan_cost(make_plan(Topology::torus({4, 4}), spec));
  uint64_t plus = 0, minus = 0;
  for (const auto& [l, bytes] : c.link_bytes) (l.dir > 0 ? plus : minus) += bytes;
  EXPECT_EQ(plus, minus);
}

// A chip's sends take their first links in turn: grouped by the first leg (the send context it
// picks), one of each group in turn, so in every prefix of a chip's sends two groups with sends
// still to come differ by at most one.
TEST(CollectivePlan, DirectAllToAllSendsTakeTheirFirstLinksInTurn) {
  const Topology topo = Topology::torus({4, 4, 8});
  CollectiveSpec spec;
  spec.collective = Collective::kAllToAll;
  spec.algorithm = "direct";
  spec.n = 128 * 4;
  const CollectivePlan plan = make_plan(topo, spec);
  std::map<int, std::vector<std::pair<int, int>>> firsts;  // chip -> first legs in order
  for (const Transfer& t : plan.steps[0].transfers) {
    const Route first = routed_path(topo, t).front();
    firsts[t.src].push_back({first.dim, first.dir});
  }
  ASSERT_EQ(firsts.size(), 128u);
  // On one dimension each group is in shift order (the chip k further on, k = 1, 2, ..): a ring
  // of 8's chip 5 has the - group 2, 3, 4 (k = 5, 6, 7) and the + group 6, 7, 0 and the tie 1
  // (coordinates 5 + 1 even: the + way), one of each in turn, the - group's first.
  spec.n = 8 * 4;
  std::vector<int> to;
  const CollectivePlan ring = make_plan(Topology::torus({8}), spec);
  for (const Transfer& t : ring.steps[0].transfers)
    if (t.src == 5) to.push_back(t.dst);
  EXPECT_EQ(to, (std::vector<int>{2, 6, 3, 7, 4, 0, 1}));
  for (const auto& [chip, seq] : firsts) {
    std::map<std::pair<int, int>, int> total, seen;
    for (const auto& g : seq) ++total[g];
    EXPECT_GE(total.size(), 5u) << "chip " << chip;  // +-x, +-y, +-z (a tie may merge one)
    for (const auto& g : seq) {
      ++seen[g];
      for (const auto& [h, n] : total)
        if (seen[h] < n) {
          EXPECT_LE(seen[g], seen[h] + 1) << "chip " << chip;
        }
    }
  }
}

TEST(CollectiveErrors, InvalidInputNamesTheParameterAndTheRule) {
  CollectiveSpec spec;
  spec.n = 8;
  const auto plan_on = [&](Topology t) { return [t, &spec] { make_plan(t, spec); }; };
  expect_invalid(plan_on(Topology::torus({})), {"topology.size", "1 to 3 dimensions"});
  expect_invalid(plan_on(Topology::torus({2, 2, 2, 2})), {"topology.size", "1 to 3"});
  expect_invalid(plan_on(Topology::torus({4, 17})), {"topology.size[1]", "1 to 16 chips"});
  expect_invalid(plan_on(Topology::mesh({0})), {"topology.size[0]", "1 to 16 chips"});
  Topology bad_wrap = Topology::torus({4, 4});
  bad_wrap.wrap.pop_back();
  expect_invalid(plan_on(bad_wrap), {"topology.wrap", "one per dimension"});
  expect_invalid([] { ring_order(Topology::torus({})); }, {"topology.size"});

  spec.algorithm = "tree";
  expect_invalid(plan_on(Topology::torus({4})), {"algorithm", "'tree'", "'ring'"});
  spec.algorithm = "torus";
  expect_invalid(plan_on(Topology::torus({8})), {"algorithm", "torus", "at least 2 dimensions"});
  expect_invalid(plan_on(Topology::torus({8, 1, 1})), {"algorithm", "at least 2 dimensions"});
  spec.collective = Collective::kReduceScatter;
  expect_invalid(plan_on(Topology::torus({4, 4})), {"algorithm", "all_reduce only"});
  spec.algorithm = "direct";
  for (Collective c :
       {Collective::kReduceScatter, Collective::kAllGather, Collective::kBroadcast}) {
    spec.collective = c;
    expect_invalid(plan_on(Topology::torus({4})),
                   {"algorithm", "'direct'", "all_reduce and all_to_all only", collective_name(c)});
  }
  spec.collective = Collective::kAllReduce;
  EXPECT_NO_THROW(plan_on(Topology::torus({4}))());  // one active dimension is enough
  spec.algorithm = "tree";
  expect_invalid(plan_on(Topology::torus({4})), {"'torus'", "'direct'"});
  spec.collective = Collective::kAllToAll;
  spec.algorithm = "biring";
  expect_invalid(plan_on(Topology::torus({4})), {"algorithm", "'ring' and 'direct' only"});
  spec.algorithm = "ring";
  spec.n = 6;
  expect_invalid(plan_on(Topology::torus({4})), {"n:", "multiple of the 4 chips"});

  spec.collective = Collective::kBroadcast;
  spec.root = 4;
  expect_invalid(plan_on(Topology::torus({4})), {"root", "0 <= root < 4"});
  spec.root = -1;
  expect_invalid(plan_on(Topology::torus({4})), {"root"});

  // Buffers: count, sizes, dtype.
  CollectiveSpec ar;
  ar.n = 5;
  const CollectivePlan plan = make_plan(Topology::torus({2, 2}), ar);
  const Buffers ok(4, std::vector<uint32_t>(5));
  EXPECT_NO_THROW(execute_plan_f32(plan, ok));
  expect_invalid([&] { execute_plan_f32(plan, Buffers(3, std::vector<uint32_t>(5))); },
                 {"inputs", "one per chip"});
  Buffers short_one = ok;
  short_one[1].pop_back();
  expect_invalid([&] { execute_plan_f32(plan, short_one); }, {"inputs[1]", "needs 5"});
  expect_invalid([&] { execute_plan_bf16(plan, std::vector<std::vector<bf16_t>>(4)); },
                 {"dtype"});
  CollectiveSpec bc;
  bc.collective = Collective::kBroadcast;
  bc.n = 3;
  bc.root = 2;
  const CollectivePlan bplan = make_plan(Topology::torus({4}), bc);
  expect_invalid([&] { execute_plan_f32(bplan, Buffers(4, std::vector<uint32_t>(3))); },
                 {"inputs[0]", "needs 0"});
  // A malformed plan (two receives into one element in a step) is refused, not run in some order.
  CollectivePlan broken = plan;
  broken.steps[0].transfers.push_back(broken.steps[0].transfers[0]);
  expect_invalid([&] { execute_plan_f32(broken, ok); }, {"plan", "twice"});
}


// ------------------------------------------------------------------------------------------
// Groups (mesh axes): a grouped plan is every group's own plan, all at once.

const std::vector<Collective> kAllCollectives = {Collective::kAllReduce,
                                                 Collective::kReduceScatter,
                                                 Collective::kAllGather, Collective::kAllToAll,
                                                 Collective::kBroadcast};

// The groups of `dims`, from the definition: chips that share their coordinates in the other
// dimensions; a chip's rank is its coordinates in `dims`, the first fastest.
struct Groups {
  Topology sub;                          // sizes and wraps of dims, in order
  std::vector<std::vector<int>> members;  // members[g][rank] = pod chip
  std::vector<int> group_of, rank_of;     // per pod chip
};

Groups groups_of(const Topology& t, const std::vector<int>& dims) {
  Groups g;
  for (int d : dims) {
    g.sub.size.push_back(t.size[static_cast<size_t>(d)]);
    g.sub.wrap.push_back(t.wrap[static_cast<size_t>(d)]);
  }
  const size_t gs = static_cast<size_t>(g.sub.num_chips());
  std::map<std::vector<int>, int> key_group;
  for (int c = 0; c < t.num_chips(); ++c) {
    const PodCoord x = t.coord(c);
    std::vector<int> key;
    for (int d = 0; d < t.rank(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) key.push_back(x[static_cast<size_t>(d)]);
    }
    int rank = 0, stride = 1;
    for (int d : dims) {
      rank += x[static_cast<size_t>(d)] * stride;
      stride *= t.extent(d);
    }
    auto it = key_group.find(key);
    if (it == key_group.end()) {
      it = key_group.emplace(key, static_cast<int>(g.members.size())).first;
      g.members.emplace_back(gs, -1);
    }
    g.members[static_cast<size_t>(it->second)][static_cast<size_t>(rank)] = c;
    g.group_of.push_back(it->second);
    g.rank_of.push_back(rank);
  }
  return g;
}

std::vector<int> all_dims(const Topology& t) {
  std::vector<int> d;
  for (int i = 0; i < t.rank(); ++i) d.push_back(i);
  return d;
}

struct GroupCase {
  std::string name;
  Topology topo;
  std::vector<int> dims;
  std::string mesh, axis;  // when set: mesh_axis_dims(topo, parse_mesh(mesh), axis) == dims
};

std::vector<GroupCase> group_cases() {
  const Topology t444 = Topology::torus({4, 4, 4});
  return {{"torus4x4_x", Topology::torus({4, 4}), {0}, "x=4,y=4", "x"},
          {"torus4x4_y", Topology::torus({4, 4}), {1}, "x=4,y=4", "y"},
          {"torus2x2x2_xy", Topology::torus({2, 2, 2}), {0, 1}, "", ""},
          {"torus2x2x2_xz", Topology::torus({2, 2, 2}), {0, 2}, "", ""},
          {"torus4x4x4_data", t444, {0, 1}, "data=16,model=4", "data"},
          {"torus4x4x4_model", t444, {2}, "data=16,model=4", "model"},
          {"mesh3x3_x", Topology::mesh({3, 3}), {0}, "x=3,y=3", "x"},
          {"mixed4x1x2_yz", mixed_4x1x2(), {1, 2}, "a=4,b=2", "b"}};
}

struct GroupCollCase {
  std::string name;
  GroupCase group;
  Collective coll;
  std::string algo;
  ReduceOp op;
  DType dtype;
};

// Every collective and algorithm the group's sub-topology allows, sum and max, f32 and bf16.
template <class Case, class Make>
std::vector<Case> sweep(const std::string& prefix, const Topology& sub, const Make& make) {
  std::vector<Case> cases;
  for (Collective c : kAllCollectives) {
    std::vector<std::string> algos = {"ring"};
    if (c != Collective::kAllToAll) algos.push_back("biring");
    if (c == Collective::kAllReduce && sub.active_dims().size() >= 2) algos.push_back("torus");
    if (c == Collective::kAllReduce || c == Collective::kAllToAll) algos.push_back("direct");
    for (const std::string& a : algos) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        if (!collective_reduces(c) && op == ReduceOp::kMax) continue;
        for (DType dt : {DType::kF32, DType::kBf16}) {
          std::string name = prefix + "_" + collective_name(c) + "_" + a;
          if (collective_reduces(c)) name += std::string("_") + reduce_op_name(op);
          cases.push_back(make(name + "_" + dtype_name(dt), c, a, op, dt));
        }
      }
    }
  }
  return cases;
}

std::vector<GroupCollCase> group_coll_cases() {
  std::vector<GroupCollCase> cases;
  for (const GroupCase& gc : group_cases()) {
    const auto more = sweep<GroupCollCase>(
        gc.name, groups_of(gc.topo, gc.dims).sub,
        [&](const std::string& n, Collective c, const std::string& a, ReduceOp op, DType dt) {
          return GroupCollCase{n, gc, c, a, op, dt};
        });
    cases.insert(cases.end(), more.begin(), more.end());
  }
  return cases;
}

// The f64 bound of a sum over `p` chips (see MatchesTheAlgorithmAndTheExactValue), for inputs
// without special values: |r - exact| <= bound.
void expect_within_sum_bound(const std::vector<float>& x, uint32_t got, DType dt,
                             const std::string& what) {
  double exact = 0, abs_sum = 0;
  for (float v : x) {
    exact += v;  // exact: random_values keeps it so
    abs_sum += std::fabs(v);
  }
  const double u = std::ldexp(1.0, -24);
  const double k = static_cast<double>(x.size() - 1);
  double bound = k * u / (1 - k * u) * abs_sum;
  if (dt == DType::kBf16) bound += std::ldexp(1.0, -8) * (std::fabs(exact) + bound);
  EXPECT_LE(std::fabs(static_cast<double>(widen(got, dt)) - exact), bound) << what;
}

void PrintTo(const GroupCollCase& c, std::ostream* os) { *os << c.name; }

class CollectiveGroups : public ::testing::TestWithParam<GroupCollCase> {};

TEST_P(CollectiveGroups, EachGroupRunsItsOwnPlanOnItsOwnLinks) {
  const GroupCollCase& gc = GetParam();
  const Topology& t = gc.group.topo;
  const std::vector<int>& dims = gc.group.dims;
  if (!gc.group.mesh.empty()) {
    EXPECT_EQ(mesh_axis_dims(t, parse_mesh(gc.group.mesh), gc.group.axis), dims);
  }
  const Groups g = groups_of(t, dims);
  const size_t p = static_cast<size_t>(t.num_chips());
  const size_t gp = static_cast<size_t>(g.sub.num_chips());
  EXPECT_EQ(group_size(t, dims), static_cast<int>(gp));
  for (int c = 0; c < t.num_chips(); ++c) {
    EXPECT_EQ(group_rank(t, dims, c), g.rank_of[static_cast<size_t>(c)]) << "chip " << c;
  }
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(gc.name)));
  std::vector<size_t> sizes = {0, 1, gp + 1, 97};
  if (gc.coll == Collective::kAllToAll) sizes = {0, gp, 3 * gp, 13 * gp};
  for (size_t n : sizes) {
    for (int root : {0, static_cast<int>(gp) - 1}) {
      if (gc.coll != Collective::kBroadcast && root != 0) continue;
      for (bool special : {false, true}) {
        if (special && !collective_reduces(gc.coll)) continue;
        SCOPED_TRACE("n = " + std::to_string(n) + " root = " + std::to_string(root) +
                     (special ? " special" : ""));
        CollectiveSpec spec;
        spec.collective = gc.coll;
        spec.op = gc.op;
        spec.dtype = gc.dtype;
        spec.n = n;
        spec.algorithm = gc.algo;
        spec.root = root;
        spec.group_dims = dims;
        const CollectivePlan plan = make_plan(t, spec);
        check_plan(plan);
        EXPECT_EQ(plan.spec.group_dims, dims);
        CollectiveSpec sub_spec = spec;
        sub_spec.group_dims.clear();
        const CollectivePlan sub = make_plan(g.sub, sub_spec);
        ASSERT_EQ(plan.steps.size(), sub.steps.size());
        EXPECT_EQ(plan.buffer_len, sub.buffer_len);
        EXPECT_EQ(plan.element_bytes, sub.element_bytes);
        // (c) Every transfer stays in its group and in the group's dimensions.
        for (size_t s = 0; s < plan.steps.size(); ++s) {
          EXPECT_EQ(plan.steps[s].phase, sub.steps[s].phase);
          EXPECT_EQ(plan.steps[s].transfers.size(),
                    g.members.size() * sub.steps[s].transfers.size());
          for (const Transfer& x : plan.steps[s].transfers) {
            EXPECT_EQ(g.group_of[static_cast<size_t>(x.src)], g.group_of[static_cast<size_t>(x.dst)])
                << "step " << s << " " << x.src << "->" << x.dst << " crosses groups";
            EXPECT_NE(std::find(dims.begin(), dims.end(), x.route.dim), dims.end())
                << "step " << s << " route in dim " << x.route.dim;
          }
        }
        for (size_t c = 0; c < p; ++c) {
          EXPECT_EQ(plan.input_len(static_cast<int>(c)),
                    sub.input_len(g.rank_of[c]));
        }
        // (a) The pod's output is each group's own plan run on the group's inputs.
        Buffers in;
        if (collective_reduces(gc.coll)) {
          in = random_values(p, n, gc.dtype, special, rng);
        } else {
          in = random_bits(p, [&](size_t c) { return plan.input_len(static_cast<int>(c)); },
                           gc.dtype, rng);
        }
        const Buffers out = run(plan, in);
        for (const std::vector<int>& m : g.members) {
          Buffers sub_in;
          for (int c : m) sub_in.push_back(in[static_cast<size_t>(c)]);
          const Buffers sub_out = run(sub, sub_in);
          for (size_t r = 0; r < gp; ++r) {
            EXPECT_EQ(out[static_cast<size_t>(m[r])], sub_out[r]) << "chip " << m[r];
          }
        }
        // (b) Reductions: max exact over the group, sum within the f64 bound of the group's sum.
        if (!collective_reduces(gc.coll) || special) continue;
        for (size_t c = 0; c < p; ++c) {
          const std::vector<int>& m = g.members[static_cast<size_t>(g.group_of[c])];
          const size_t first = gc.coll == Collective::kAllReduce
                                   ? 0 : rule_start(n, gp, static_cast<size_t>(g.rank_of[c]));
          for (size_t i = 0; i < out[c].size(); ++i) {
            std::vector<float> x;
            for (int k : m) x.push_back(widen(in[static_cast<size_t>(k)][first + i], gc.dtype));
            const std::string what = "chip " + std::to_string(c) + " element " +
                                     std::to_string(first + i);
            if (gc.op == ReduceOp::kMax) {
              float mx = x[0];
              for (float v : x) mx = f32_maximum(mx, v);
              EXPECT_EQ(out[c][i], narrow(mx, gc.dtype)) << what;
            } else {
              expect_within_sum_bound(x, out[c][i], gc.dtype, what);
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Axes, CollectiveGroups, ::testing::ValuesIn(group_coll_cases()),
                         ByName());

// (d) Without group_dims every plan is exactly the plan of before groups existed: fingerprints
// of every collective, algorithm, dtype, a few n and roots per topology, computed with the code
// of commit 7f589b1 (before group_dims). group_dims naming every dimension gives the same plans.
uint64_t fnv(uint64_t h, const std::string& s) {
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

std::string plan_text(const CollectivePlan& p) {
  std::string s = p.topo.name() + " " + std::to_string(p.buffer_len) + " " +
                  std::to_string(p.element_bytes) + "\n";
  for (const ChipLayout& c : p.chips) {
    for (const Segment& g : c.input) s += "i" + std::to_string(g.offset) + "+" + std::to_string(g.count);
    for (const Segment& g : c.output) s += "o" + std::to_string(g.offset) + "+" + std::to_string(g.count);
    s += "\n";
  }
  for (const Step& st : p.steps) {
    s += st.phase + ":";
    for (const Transfer& t : st.transfers) {
      s += " " + std::to_string(t.src) + ">" + std::to_string(t.dst) + "@" +
           std::to_string(t.src_offset) + "," + std::to_string(t.dst_offset) + "," +
           std::to_string(t.count) + (t.kind == TransferKind::kReduce ? "r" : "c") +
           std::to_string(t.route.dim) + (t.route.dir > 0 ? "+" : "-") +
           std::to_string(t.route.hops);
    }
    s += "\n";
  }
  return s;
}

uint64_t topology_fingerprint(const Topology& t, const std::vector<int>& group_dims) {
  uint64_t h = 1469598103934665603ull;
  const size_t p = static_cast<size_t>(t.num_chips());
  for (Collective c : kAllCollectives) {
    for (std::string a : {"ring", "biring", "torus"}) {
      if (a == "torus" && (c != Collective::kAllReduce || t.active_dims().size() < 2)) continue;
      if (a == "biring" && c == Collective::kAllToAll) continue;
      for (DType dt : {DType::kF32, DType::kBf16}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{97}}) {
          for (int root : {0, static_cast<int>(p) - 1}) {
            if (c != Collective::kBroadcast && root != 0) continue;
            CollectiveSpec s;
            s.collective = c;
            s.dtype = dt;
            s.n = c == Collective::kAllToAll ? n * p : n;
            s.algorithm = a;
            s.root = root;
            s.group_dims = group_dims;
            h = fnv(h, plan_text(make_plan(t, s)));
          }
        }
      }
    }
  }
  return h;
}

TEST(CollectiveGroupsWhole, EmptyGroupDimsGivesTheSamePlansAsBefore) {
  struct Case {
    Topology topo;
    uint64_t fingerprint;
  };
  for (const Case& c : {Case{Topology::torus({4}), 0xf1d5219db16104ffull},
                        Case{Topology::torus({8}), 0x43ad30884ea348b3ull},
                        Case{Topology::mesh({5}), 0x2a7508e337df1797ull},
                        Case{Topology::torus({2, 2}), 0x0e427b63d971cb3bull},
                        Case{Topology::torus({4, 4}), 0x83676008e0b20093ull},
                        Case{Topology::torus({2, 2, 2}), 0x28b5dba6b415e577ull},
                        Case{Topology::torus({3, 3}), 0xefbbd8022f5ff08full},
                        Case{Topology::mesh({3, 3}), 0x8a1afdb686ee38ffull},
                        Case{mixed_4x1x2(), 0x472900a88b315729ull},
                        Case{Topology::torus({1}), 0x36efd1fc39e9a5bfull},
                        Case{Topology::torus({4, 2}), 0x85f57d4fa1c2d213ull},
                        Case{Topology::torus({4, 4, 4}), 0x8e167b40fffb3667ull}}) {
    SCOPED_TRACE(c.topo.name());
    EXPECT_EQ(topology_fingerprint(c.topo, {}), c.fingerprint);
    EXPECT_EQ(topology_fingerprint(c.topo, all_dims(c.topo)), c.fingerprint);
  }
}

TEST(CollectiveGroupsWhole, HelpersAndTheBandwidthBoundPerGroup) {
  const Topology t = Topology::torus({4, 4, 4});
  EXPECT_EQ(group_size(t, {}), 64);
  EXPECT_EQ(group_size(t, {0, 1}), 16);
  EXPECT_EQ(group_size(t, {2}), 4);
  EXPECT_EQ(group_topology(t, {0, 2}).name(), "torus4x4");
  EXPECT_EQ(group_topology(mixed_4x1x2(), {1, 2}).name(), "mixed1x2:ring,line");
  EXPECT_EQ(group_rank(t, {2}, t.id({3, 1, 2})), 2);
  EXPECT_EQ(group_index(t, {2}, t.id({3, 1, 2})), 3 + 4 * 1);
  EXPECT_EQ(group_rank(t, {0, 2}, t.id({3, 1, 2})), 3 + 4 * 2);
  EXPECT_EQ(group_index(t, {0, 2}, t.id({3, 1, 2})), 1);
  // The 4 data groups of a 4x4x4 pod run at once on their own links: the grouped plan takes
  // the time of one group's plan, which meets the group's bound.
  CollectiveSpec spec;
  spec.n = 640;
  spec.algorithm = "torus";
  spec.group_dims = {0, 1};
  const double grouped = plan_cost(make_plan(t, spec)).link_cycles(1.0);
  spec.group_dims.clear();
  EXPECT_DOUBLE_EQ(grouped, plan_cost(make_plan(Topology::torus({4, 4}), spec)).link_cycles(1.0));
  const int links = allreduce_links_per_chip(t, {0, 1}, "torus");
  EXPECT_DOUBLE_EQ(grouped, collective_ici_cycles(Collective::kAllReduce, group_size(t, {0, 1}),
                                                  4.0 * 640, links, 1.0));
}

TEST(CollectiveMesh, ParseAndAxisDims) {
  const Mesh m = parse_mesh("data=16,model=4");
  ASSERT_EQ(m.axes.size(), 2u);
  EXPECT_EQ(m.axes[0].name, "data");
  EXPECT_EQ(m.axes[0].size, 16);
  EXPECT_EQ(m.axes[1].name, "model");
  EXPECT_EQ(m.axes[1].size, 4);
  EXPECT_EQ(m.num_chips(), 64);
  EXPECT_EQ(m.axis_size("model"), 4);
  EXPECT_EQ(m.text(), "data=16,model=4");
  EXPECT_EQ(parse_mesh(" x = 4 , y_2=4 ").text(), "x=4,y_2=4");
  const Topology t444 = Topology::torus({4, 4, 4});
  EXPECT_EQ(mesh_axis_dims(t444, m, "data"), (std::vector<int>{0, 1}));
  EXPECT_EQ(mesh_axis_dims(t444, m, "model"), (std::vector<int>{2}));
  EXPECT_EQ(mesh_axis_dims(t444, parse_mesh("a=4,b=16"), "b"), (std::vector<int>{1, 2}));
  EXPECT_EQ(mesh_axis_dims(t444, parse_mesh("all=64"), "all"), (std::vector<int>{0, 1, 2}));
  const Topology t44 = Topology::torus({4, 4});
  EXPECT_EQ(mesh_axis_dims(t44, parse_mesh("x=4,y=4"), "x"), (std::vector<int>{0}));
  EXPECT_EQ(mesh_axis_dims(t44, parse_mesh("x=4,y=4"), "y"), (std::vector<int>{1}));
  // Dimensions of one chip: leading ones to the first axis, trailing ones to the last, and a
  // size-1 axis takes the one at its place.
  const Topology m412 = mixed_4x1x2();
  EXPECT_EQ(mesh_axis_dims(m412, parse_mesh("a=4,b=2"), "a"), (std::vector<int>{0}));
  EXPECT_EQ(mesh_axis_dims(m412, parse_mesh("a=4,b=2"), "b"), (std::vector<int>{1, 2}));
  EXPECT_EQ(mesh_axis_dims(m412, parse_mesh("a=4,b=1,c=2"), "b"), (std::vector<int>{1}));
  EXPECT_EQ(mesh_axis_dims(m412, parse_mesh("a=4,b=1,c=2"), "c"), (std::vector<int>{2}));
  EXPECT_EQ(mesh_axis_dims(Topology::torus({1, 4}), parse_mesh("a=4"), "a"),
            (std::vector<int>{0, 1}));
  EXPECT_EQ(mesh_axis_dims(Topology::torus({4, 1}), parse_mesh("a=4"), "a"),
            (std::vector<int>{0, 1}));
}

TEST(CollectiveGroupsErrors, InvalidGroupsAndMeshesNameTheFieldAndTheRule) {
  CollectiveSpec spec;
  spec.n = 8;
  const Topology t = Topology::torus({4, 4});
  const auto plan_with = [&](std::vector<int> dims) {
    return [&t, spec, dims]() mutable {
      spec.group_dims = dims;
      make_plan(t, spec);
    };
  };
  expect_invalid(plan_with({2}), {"group_dims[0]", "0 .. 1"});
  expect_invalid(plan_with({-1}), {"group_dims[0]", "not a dimension"});
  expect_invalid(plan_with({0, 0}), {"group_dims[1]", "no duplicates"});
  expect_invalid(plan_with({1, 0}), {"group_dims[1]", "strictly increasing"});
  expect_invalid([&] { group_size(t, {0, 5}); }, {"group_dims[1]"});
  // Per-group rules: the root is a rank in the group, all_to_all blocks per group.
  spec.collective = Collective::kBroadcast;
  spec.root = 4;
  expect_invalid(plan_with({0}), {"root", "0 <= root < 4", "per group", "group_dims {0}"});
  spec.root = 0;
  spec.collective = Collective::kAllToAll;
  spec.n = 6;
  expect_invalid(plan_with({1}), {"n:", "multiple of the 4 chips", "per group"});
  spec.collective = Collective::kAllReduce;
  spec.algorithm = "torus";
  expect_invalid(plan_with({1}), {"algorithm", "at least 2 dimensions", "ring4"});

  expect_invalid([] { parse_mesh(""); }, {"mesh ''", "empty"});
  expect_invalid([] { parse_mesh("x=4,,y=4"); }, {"mesh 'x=4,,y=4'", "not name=size"});
  expect_invalid([] { parse_mesh("x4"); }, {"mesh 'x4'", "not name=size"});
  expect_invalid([] { parse_mesh("=4"); }, {"mesh '=4'", "empty name"});
  expect_invalid([] { parse_mesh("x=4, =4"); }, {"empty name"});
  expect_invalid([] { parse_mesh("x y=4"); }, {"'x y'", "letters, digits and '_'"});
  expect_invalid([] { parse_mesh("x=4,x=4"); }, {"mesh 'x=4,x=4'", "duplicate name 'x'"});
  expect_invalid([] { parse_mesh("x=0"); }, {"mesh 'x=0'", "size >= 1"});
  expect_invalid([] { parse_mesh("x=-2"); }, {"size -2", "size >= 1"});
  expect_invalid([] { parse_mesh("x=a"); }, {"mesh 'x=a'", "'a'", "not an integer"});
  expect_invalid([] { parse_mesh("x=4.5"); }, {"not an integer"});
  expect_invalid([] { parse_mesh("x="); }, {"not an integer"});
  expect_invalid([] { parse_mesh("x=99999999999"); }, {"not an integer"});
  expect_invalid([] { parse_mesh("x=4").axis_size("y"); }, {"'y'", "not in the mesh"});

  const Mesh m = parse_mesh("data=4,model=4");
  expect_invalid([&] { mesh_axis_dims(t, m, "expert"); },
                 {"axis 'expert'", "not in the mesh", "'data', 'model'"});
  expect_invalid([&] { mesh_axis_dims(Topology::torus({4, 4, 4}), m, "data"); },
                 {"multiply to 16", "pod has 64"});
  expect_invalid([&] { mesh_axis_dims(t, parse_mesh("a=2,b=8"), "b"); },
                 {"axis 'a'", "size 2", "whole torus dimensions", "dims {0}", "4 chips"});
  expect_invalid([&] { mesh_axis_dims(t, parse_mesh("a=8,b=2"), "a"); },
                 {"axis 'a'", "dims {0,1}", "16 chips"});
  // A size-1 axis with no dimension of one chip at its place: asking for it is the error.
  expect_invalid([&] { mesh_axis_dims(t, parse_mesh("a=1,b=16"), "a"); },
                 {"axis 'a'", "size 1", "moves nothing"});
  expect_invalid([&] { mesh_unit_axis(t, parse_mesh("a=16,b=1"), "c"); }, {"'c'"});
  expect_invalid([&] { check_mesh(t, parse_mesh("a=8,b=1")); }, {"multiply to 8"});
}

// An axis of size 1 is the same mesh without it: the other axes get the same dimensions, the
// unit axis is known as such, and dropping it leaves the rest in order.
TEST(CollectiveGroups, SizeOneAxesChangeNothing) {
  const Topology t = Topology::torus({2, 2});
  for (const char* m : {"data=4,model=1", "data=1,model=4", "a=1,data=4", "data=4,a=1,b=1"}) {
    const Mesh mesh = parse_mesh(m);
    check_mesh(t, mesh);
    for (const MeshAxis& a : mesh.axes) {
      EXPECT_EQ(mesh_unit_axis(t, mesh, a.name), a.size == 1) << m << " " << a.name;
      if (a.size > 1) {
        EXPECT_EQ(mesh_axis_dims(t, mesh, a.name), (std::vector<int>{0, 1})) << m;
      }
    }
    const Mesh bare = mesh_without_unit_axes(mesh);
    ASSERT_EQ(bare.axes.size(), 1u) << m;
    EXPECT_EQ(bare.axes[0].size, 4) << m;
  }
  const Topology t44 = Topology::torus({4, 4});
  EXPECT_EQ(mesh_axis_dims(t44, parse_mesh("x=4,u=1,y=4"), "y"), (std::vector<int>{1}));
  EXPECT_EQ(mesh_axis_dims(t44, parse_mesh("x=4,u=1,y=4"), "x"), (std::vector<int>{0}));
  EXPECT_EQ(mesh_without_unit_axes(parse_mesh("x=4,u=1,y=4")).text(), "x=4,y=4");
  // A dimension of one chip at a size-1 axis's place is still that axis's (groups of one chip).
  EXPECT_FALSE(mesh_unit_axis(mixed_4x1x2(), parse_mesh("a=4,b=1,c=2"), "b"));
}

// ------------------------------------------------------------------------------------------
// Rounds: a collective streamed through on-chip memory in R rounds.

struct RoundCase {
  std::string name;
  Topology topo;
  std::vector<int> dims;
  Collective coll;
  std::string algo;
  ReduceOp op;
  DType dtype;
};

std::vector<RoundCase> round_cases() {
  struct Pod {
    std::string name;
    Topology topo;
    std::vector<int> dims;
  };
  std::vector<RoundCase> cases;
  for (const Pod& pod : {Pod{"ring5", Topology::torus({5}), {}},
                         Pod{"mesh3x3", Topology::mesh({3, 3}), {}},
                         Pod{"torus2x2x2", Topology::torus({2, 2, 2}), {}},
                         Pod{"mixed4x1x2", mixed_4x1x2(), {}},
                         Pod{"torus4x4_x", Topology::torus({4, 4}), {0}},
                         Pod{"torus4x4x4_data", Topology::torus({4, 4, 4}), {0, 1}}}) {
    const auto more = sweep<RoundCase>(
        pod.name, groups_of(pod.topo, pod.dims.empty() ? all_dims(pod.topo) : pod.dims).sub,
        [&](const std::string& n, Collective c, const std::string& a, ReduceOp op, DType dt) {
          return RoundCase{n, pod.topo, pod.dims, c, a, op, dt};
        });
    cases.insert(cases.end(), more.begin(), more.end());
  }
  return cases;
}

Buffers run_rounds(const std::vector<CollectiveRound>& rounds, const Buffers& in, DType dt) {
  EXPECT_EQ(rounds.empty() ? dt : rounds[0].plan.spec.dtype, dt);
  return execute_rounds_bits(rounds, in);
}

std::vector<size_t> expand(const std::vector<RoundPiece>& pieces) {
  std::vector<size_t> e;
  for (const RoundPiece& x : pieces) {
    EXPECT_GT(x.count, 0u);
    for (size_t i = 0; i < x.count; ++i) e.push_back(x.offset + i);
  }
  return e;
}

// The splitting rule, from its definition: the elements of chip `rank`'s whole input and output
// that round r takes, in the order of the round's buffers.
struct RoundElems {
  size_t n = 0;  // the round's n
  std::vector<size_t> in, out;
};

RoundElems round_elems(Collective coll, size_t n, size_t p, size_t R, size_t r, size_t rank,
                       size_t root) {
  RoundElems e;
  const auto range = [](std::vector<size_t>& v, size_t start, size_t len) {
    for (size_t i = 0; i < len; ++i) v.push_back(start + i);
  };
  switch (coll) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
      e.n = rule_len(n, R, r);
      if (coll == Collective::kAllReduce || rank == root) range(e.in, rule_start(n, R, r), e.n);
      range(e.out, rule_start(n, R, r), e.n);
      break;
    case Collective::kReduceScatter:
    case Collective::kAllGather: {
      std::vector<size_t> all;
      for (size_t j = 0; j < p; ++j) {
        const size_t len = rule_len(n, p, j);
        range(all, rule_start(n, p, j) + rule_start(len, R, r), rule_len(len, R, r));
        e.n += rule_len(len, R, r);
      }
      std::vector<size_t> own;
      range(own, rule_start(rule_len(n, p, rank), R, r), rule_len(rule_len(n, p, rank), R, r));
      e.in = coll == Collective::kReduceScatter ? all : own;
      e.out = coll == Collective::kReduceScatter ? own : all;
      break;
    }
    case Collective::kAllToAll: {
      const size_t b = n / p;
      for (size_t j = 0; j < p; ++j) range(e.in, j * b + rule_start(b, R, r), rule_len(b, R, r));
      e.out = e.in;
      e.n = p * rule_len(b, R, r);
      break;
    }
  }
  return e;
}

void PrintTo(const RoundCase& c, std::ostream* os) { *os << c.name; }

class CollectiveRounds : public ::testing::TestWithParam<RoundCase> {};

TEST_P(CollectiveRounds, FollowTheSplittingRuleAndMatchTheWholeCollective) {
  const RoundCase& rc = GetParam();
  const Topology& t = rc.topo;
  const size_t p = static_cast<size_t>(t.num_chips());
  const size_t gp = static_cast<size_t>(group_size(t, rc.dims));
  const bool reduces = collective_reduces(rc.coll);
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(rc.name)));
  std::vector<size_t> sizes = {0, 1, 3, 97, 211};
  if (rc.coll == Collective::kAllToAll) sizes = {0, gp, 3 * gp, 13 * gp};
  for (size_t n : sizes) {
    for (size_t R : {size_t{1}, size_t{2}, size_t{3}, size_t{7}}) {
      for (size_t root : {size_t{0}, gp - 1}) {
        if (rc.coll != Collective::kBroadcast && root != 0) continue;
        SCOPED_TRACE("n = " + std::to_string(n) + " R = " + std::to_string(R) + " root = " +
                     std::to_string(root));
        CollectiveSpec spec;
        spec.collective = rc.coll;
        spec.op = rc.op;
        spec.dtype = rc.dtype;
        spec.n = n;
        spec.algorithm = rc.algo;
        spec.root = static_cast<int>(root);
        spec.group_dims = rc.dims;
        const CollectivePlan whole = make_plan(t, spec);
        const std::vector<CollectiveRound> rounds = make_rounds(t, spec, R);
        // Rounds of no elements are dropped; n = 0 keeps one.
        size_t longest = n;  // the longest piece cut in R
        if (rc.coll == Collective::kReduceScatter || rc.coll == Collective::kAllGather) {
          longest = rule_len(n, gp, 0);
        } else if (rc.coll == Collective::kAllToAll) {
          longest = n / gp;
        }
        ASSERT_EQ(rounds.size(), std::max<size_t>(1, std::min(R, longest)));
        // (b) The pieces follow the rule, and cover each whole buffer exactly once.
        std::vector<std::vector<int>> in_used(p), out_used(p);
        for (size_t r = 0; r < rounds.size(); ++r) {
          const CollectiveRound& rd = rounds[r];
          SCOPED_TRACE("round " + std::to_string(r));
          ASSERT_EQ(rd.in.size(), p);
          ASSERT_EQ(rd.out.size(), p);
          CollectiveSpec rs = spec;  // the round's plan is an ordinary plan (checked above)
          rs.n = round_elems(rc.coll, n, gp, R, r, 0, root).n;
          EXPECT_EQ(rd.plan.spec.n, rs.n);
          EXPECT_EQ(plan_text(rd.plan), plan_text(make_plan(t, rs)));
          for (size_t c = 0; c < p; ++c) {
            const size_t rank = static_cast<size_t>(group_rank(t, rc.dims, static_cast<int>(c)));
            const RoundElems want = round_elems(rc.coll, n, gp, R, r, rank, root);
            const std::vector<size_t> got_in = expand(rd.in[c]), got_out = expand(rd.out[c]);
            EXPECT_EQ(got_in, want.in) << "chip " << c;
            EXPECT_EQ(got_out, want.out) << "chip " << c;
            EXPECT_EQ(got_in.size(), rd.plan.input_len(static_cast<int>(c)));
            EXPECT_EQ(got_out.size(), rd.plan.output_len(static_cast<int>(c)));
            for (size_t e : got_in) {
              if (e >= in_used[c].size()) in_used[c].resize(e + 1, 0);
              ++in_used[c][e];
            }
            for (size_t e : got_out) {
              if (e >= out_used[c].size()) out_used[c].resize(e + 1, 0);
              ++out_used[c][e];
            }
          }
        }
        for (size_t c = 0; c < p; ++c) {
          const size_t in_len = whole.input_len(static_cast<int>(c));
          const size_t out_len = whole.output_len(static_cast<int>(c));
          EXPECT_EQ(in_used[c], std::vector<int>(in_len, 1)) << "chip " << c << " input";
          EXPECT_EQ(out_used[c], std::vector<int>(out_len, 1)) << "chip " << c << " output";
        }

        Buffers in;
        if (reduces) {
          in = random_values(p, n, rc.dtype, false, rng);
        } else {
          in = random_bits(p, [&](size_t c) { return whole.input_len(static_cast<int>(c)); },
                           rc.dtype, rng);
        }
        const Buffers got = run_rounds(rounds, in, rc.dtype);
        const Buffers want = run(whole, in);
        ASSERT_EQ(got.size(), p);
        // (a) One round is the whole plan. (c) Data movement, and max, do not depend on the
        // order: the same output for any R.
        if (R == 1) {
          EXPECT_EQ(plan_text(rounds[0].plan), plan_text(whole));
        }
        if (R == 1 || !reduces || rc.op == ReduceOp::kMax) {
          for (size_t c = 0; c < p; ++c) EXPECT_EQ(got[c], want[c]) << "chip " << c;
        }
        if (!reduces || rc.op == ReduceOp::kMax) continue;
        // (c) Sums: within the f64 bound of the group's exact sum.
        const Groups g = groups_of(t, rc.dims.empty() ? all_dims(t) : rc.dims);
        for (size_t c = 0; c < p; ++c) {
          const std::vector<int>& m = g.members[static_cast<size_t>(g.group_of[c])];
          const size_t first = rc.coll == Collective::kAllReduce
                                   ? 0 : rule_start(n, gp, static_cast<size_t>(g.rank_of[c]));
          ASSERT_EQ(got[c].size(), want[c].size());
          for (size_t i = 0; i < got[c].size(); ++i) {
            std::vector<float> x;
            for (int k : m) x.push_back(widen(in[static_cast<size_t>(k)][first + i], rc.dtype));
            expect_within_sum_bound(x, got[c][i], rc.dtype,
                                    "chip " + std::to_string(c) + " element " +
                                        std::to_string(first + i));
          }
        }
        // The reduction order is the round plan's: a ring all-reduce over the pod sums element
        // e of round r as the ring reduce-scatter of the round's buffer orders it.
        if (rc.coll != Collective::kAllReduce || rc.algo != "ring" || !rc.dims.empty()) continue;
        const std::vector<int> order = ring_order(t);
        for (size_t r = 0; r < rounds.size(); ++r) {
          const size_t start = rule_start(n, R, r), nr = rule_len(n, R, r);
          for (size_t i = 0; i < nr; ++i) {
            const auto x = [&](int chip) {
              return widen(in[static_cast<size_t>(chip)][start + i], rc.dtype);
            };
            const float f = ring_fold(order, static_cast<int>(rule_chunk_of(nr, p, i)), rc.op, x);
            EXPECT_EQ(got[0][start + i], narrow(f, rc.dtype)) << "element " << start + i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pods, CollectiveRounds, ::testing::ValuesIn(round_cases()), ByName());

TEST(CollectiveRoundsEdges, MoreRoundsThanElementsActAsFewerRounds) {
  CollectiveSpec spec;
  spec.n = 3;
  const Topology t = Topology::torus({4});
  const auto rounds = make_rounds(t, spec, 7);
  ASSERT_EQ(rounds.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(rounds[r].plan.spec.n, 1u);
    EXPECT_EQ(expand(rounds[r].out[2]), (std::vector<size_t>{r}));
  }
  // A huge R costs nothing: the rounds are those of R = n.
  EXPECT_EQ(make_rounds(t, spec, size_t{1} << 40).size(), 3u);
  spec.n = 0;
  const auto none = make_rounds(t, spec, 5);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].plan.spec.n, 0u);
  EXPECT_EQ(execute_rounds_f32(none, Buffers(4)), Buffers(4));
  // Contiguous sub-slices of neighbouring shards are one piece: reduce_scatter in one round
  // reads the whole input at once.
  spec.collective = Collective::kReduceScatter;
  spec.n = 10;
  const auto one = make_rounds(t, spec, 1);
  ASSERT_EQ(one[0].in[1].size(), 1u);
  EXPECT_EQ(one[0].in[1][0].count, 10u);
}

TEST(CollectiveRoundsErrors, InvalidRoundsAreRefused) {
  CollectiveSpec spec;
  spec.n = 4;
  const Topology t = Topology::torus({4});
  expect_invalid([&] { make_rounds(t, spec, 0); }, {"rounds: 0", "at least 1"});
  CollectiveSpec a2a = spec;
  a2a.collective = Collective::kAllToAll;
  a2a.n = 6;
  expect_invalid([&] { make_rounds(t, a2a, 2); }, {"n:", "multiple of the 4 chips"});
  CollectiveSpec grouped = spec;
  grouped.group_dims = {1};
  expect_invalid([&] { make_rounds(t, grouped, 2); }, {"group_dims[0]"});

  const auto rounds = make_rounds(t, spec, 2);
  const Buffers ok(4, std::vector<uint32_t>(4));
  EXPECT_NO_THROW(execute_rounds_f32(rounds, ok));
  expect_invalid([&] { execute_rounds_f32({}, ok); }, {"rounds: empty"});
  expect_invalid([&] { execute_rounds_f32(rounds, Buffers(3, std::vector<uint32_t>(4))); },
                 {"inputs", "one per chip"});
  Buffers short_one = ok;
  short_one[2].pop_back();
  expect_invalid([&] { execute_rounds_f32(rounds, short_one); }, {"inputs[2]", "need 4"});
  expect_invalid([&] { execute_rounds_bf16(rounds, std::vector<std::vector<bf16_t>>(4, std::vector<bf16_t>(4))); },
                 {"dtype"});
  auto twice = rounds;  // round 1 reads chip 0's first half again
  twice[1].in[0] = twice[0].in[0];
  expect_invalid([&] { execute_rounds_f32(twice, ok); }, {"rounds[", "in[0]", "exactly once"});
  auto wrong = rounds;  // a piece that does not fit the round's plan
  wrong[1].out[3][0].count = 1;
  expect_invalid([&] { execute_rounds_f32(wrong, ok); }, {"rounds[1]", "chip 3"});
}
// Granules (what the pod driver's DMA needs): every chunk starts on a granule; the plan is the
// plan of ceil(n / g) elements scaled and clipped; rounds keep every piece on a granule, and
// their golden agrees with the whole plan (data movement exactly, sums within the f64 bound).
struct GranuleCase {
  const char* name;
  Topology topo;
  std::vector<int> dims;
  Collective coll;
  const char* algo;
  size_t n;
};

class CollectiveGranules : public ::testing::TestWithParam<GranuleCase> {};

TEST_P(CollectiveGranules, ChunksStartOnGranulesAndRoundsAgree) {
  const GranuleCase& gc = GetParam();
  constexpr size_t g = 16;
  CollectiveSpec spec;
  spec.collective = gc.coll;
  spec.algorithm = gc.algo;
  spec.n = gc.n;
  spec.group_dims = gc.dims;
  spec.granule = g;
  const CollectivePlan plan = make_plan(gc.topo, spec);
  for (const Step& st : plan.steps)
    for (const Transfer& t : st.transfers) {
      EXPECT_EQ(t.src_offset % g, 0u);
      EXPECT_EQ(t.dst_offset % g, 0u);
      EXPECT_GT(t.count, 0u);
    }
  for (const ChipLayout& cl : plan.chips)
    for (const auto* v : {&cl.input, &cl.output})
      for (const Segment& s : *v) EXPECT_EQ(s.offset % g, 0u);
  // The same as the plan of ceil(n / g) elements, scaled: the element-by-element golden of the
  // scaled plan equals the unit plan's golden with every unit holding g elements.
  const int p = gc.topo.num_chips();
  std::mt19937 rng(static_cast<unsigned>(gc.n));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Buffers in(static_cast<size_t>(p));
  for (int c = 0; c < p; ++c)
    for (size_t i = 0; i < plan.input_len(c); ++i)
      in[static_cast<size_t>(c)].push_back(f32_bits(nd(rng)));
  const Buffers want = execute_plan_f32(plan, in);
  for (size_t R : {1u, 2u, 3u, 5u}) {
    const auto rounds = make_rounds(gc.topo, spec, R);
    for (const CollectiveRound& rd : rounds)
      for (int c = 0; c < p; ++c)
        for (const auto* v : {&rd.in[static_cast<size_t>(c)], &rd.out[static_cast<size_t>(c)]})
          for (const RoundPiece& x : *v) EXPECT_EQ(x.offset % g, 0u) << "R " << R;
    const Buffers got = execute_rounds_f32(rounds, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t c = 0; c < got.size(); ++c) {
      ASSERT_EQ(got[c].size(), want[c].size()) << "R " << R << " chip " << c;
      if (!collective_reduces(gc.coll) || R == 1) {
        EXPECT_EQ(got[c], want[c]) << "R " << R << " chip " << c;
        continue;
      }
      for (size_t i = 0; i < got[c].size(); ++i) {  // sums in another order: the f64 bound
        const double a = f32_from_bits(got[c][i]), b = f32_from_bits(want[c][i]);
        EXPECT_LE(std::fabs(a - b), 2.0 * p * 0x1p-24 * 8.0 * p) << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pods, CollectiveGranules,
    ::testing::Values(
        GranuleCase{"ring4_ar", Topology::torus({4}), {}, Collective::kAllReduce, "biring", 1000},
        GranuleCase{
            "t22_ar_torus", Topology::torus({2, 2}), {}, Collective::kAllReduce, "torus", 777},
        GranuleCase{"t44_x_ar", Topology::torus({4, 4}), {0}, Collective::kAllReduce, "ring", 333},
        GranuleCase{
            "t44_ar_direct", Topology::torus({4, 4}), {}, Collective::kAllReduce, "direct", 1000},
        GranuleCase{"t444_xz_ar_direct",
                    Topology::torus({4, 4, 4}),
                    {0, 2},
                    Collective::kAllReduce,
                    "direct",
                    555},
        GranuleCase{
            "m33_ar_direct", Topology::mesh({3, 3}), {}, Collective::kAllReduce, "direct", 300},
        GranuleCase{"ring4_rs", Topology::torus({4}), {}, Collective::kReduceScatter, "ring", 1003},
        GranuleCase{"m33_rs", Topology::mesh({3, 3}), {}, Collective::kReduceScatter, "ring", 500},
        GranuleCase{"ring4_ag", Topology::torus({4}), {}, Collective::kAllGather, "ring", 1002},
        GranuleCase{
            "t222_ag_xy", Topology::torus({2, 2, 2}), {0, 1}, Collective::kAllGather, "ring", 71},
        GranuleCase{"t22_a2a", Topology::torus({2, 2}), {}, Collective::kAllToAll, "ring", 4 * 48},
        GranuleCase{"t424_y_a2a_direct",
                    Topology::torus({4, 2, 4}),
                    {0, 2},
                    Collective::kAllToAll,
                    "direct",
                    16 * 32},
        GranuleCase{"line5_bc", Topology::mesh({5}), {}, Collective::kBroadcast, "ring", 300},
        GranuleCase{"ring4_tiny", Topology::torus({4}), {}, Collective::kAllReduce, "ring", 5}),
    [](const ::testing::TestParamInfo<GranuleCase>& i) { return std::string(i.param.name); });

// Torus parts of given weights: part k goes along the k-th active dimension first, so the first
// step's transfers along each dimension carry that part's first chunks, in proportion to the
// weights; the sums stay exact (small integers: every order gives the same bits), and the
// errors name part_weights and the rule.
TEST(CollectivePlan, TorusPartWeightsSizeThePartsAndKeepTheSum) {
  const Topology t = Topology::torus({2, 2, 2});
  CollectiveSpec spec;
  spec.algorithm = "torus";
  spec.n = 9 * 16;  // weights 2 : 5 : 2 -> parts of 32, 80 and 32 elements
  spec.part_weights = {2, 5, 2};
  const CollectivePlan plan = make_plan(t, spec);
  check_plan(plan);
  std::map<int, size_t> first_step;  // dim -> elements sent in step 0
  for (const Transfer& x : plan.steps[0].transfers) first_step[x.route.dim] += x.count;
  // Each part's halves go round their 2-rings in step 0: half of each half, every chip.
  EXPECT_EQ(first_step[0], 8u * 32 / 2);
  EXPECT_EQ(first_step[1], 8u * 80 / 2);
  EXPECT_EQ(first_step[2], 8u * 32 / 2);
  Buffers in(8, std::vector<uint32_t>(spec.n));
  std::vector<uint32_t> want(spec.n);
  for (size_t e = 0; e < spec.n; ++e) {
    float sum = 0;
    for (size_t c = 0; c < 8; ++c) {
      const float v = static_cast<float>((c * 7 + e * 3) % 11) - 5.0f;
      in[c][e] = f32_bits(v);
      sum += v;
    }
    want[e] = f32_bits(sum);
  }
  for (const auto& chip : execute_plan_f32(plan, in)) EXPECT_EQ(chip, want);
  // Equal weights give the equal parts' plan (up to the chunking rule's rounding: n divisible).
  spec.part_weights = {1, 1, 1};
  const CollectivePlan eq = make_plan(t, spec);
  spec.part_weights.clear();
  const CollectivePlan none = make_plan(t, spec);
  ASSERT_EQ(eq.steps.size(), none.steps.size());
  for (size_t st = 0; st < eq.steps.size(); ++st) {
    ASSERT_EQ(eq.steps[st].transfers.size(), none.steps[st].transfers.size());
    for (size_t i = 0; i < eq.steps[st].transfers.size(); ++i) {
      EXPECT_EQ(eq.steps[st].transfers[i].src_offset, none.steps[st].transfers[i].src_offset);
      EXPECT_EQ(eq.steps[st].transfers[i].count, none.steps[st].transfers[i].count);
    }
  }
  const auto plan_with = [&](std::vector<unsigned> w, const char* algo) {
    return [w, algo, t] {
      CollectiveSpec s;
      s.n = 64;
      s.algorithm = algo;
      s.part_weights = w;
      make_plan(t, s);
    };
  };
  expect_invalid(plan_with({1, 2}, "torus"), {"part_weights", "3 active dimensions"});
  expect_invalid(plan_with({1, 0, 1}, "torus"), {"part_weights", "1..65536"});
  expect_invalid(plan_with({1, 70000, 1}, "torus"), {"part_weights", "1..65536"});
  expect_invalid(plan_with({1, 1, 1}, "ring"), {"part_weights", "only 'torus'"});
}

TEST(CollectiveGranules, AllToAllBlocksMustBeWholeGranules) {
  CollectiveSpec spec;
  spec.collective = Collective::kAllToAll;
  spec.n = 4 * 20;
  spec.granule = 16;
  try {
    make_plan(Topology::torus({4}), spec);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("whole number of granules"), std::string::npos) << e.what();
  }
  spec.granule = 0;
  EXPECT_THROW(make_plan(Topology::torus({4}), spec), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
