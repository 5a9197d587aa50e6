// Pipeline parallelism's tables of slots (tpu/pipeline.h) without hardware: every micro-batch's
// forward before its backward on every stage, each once; the tables run to the end when every
// slot waits for the one before it on the previous stage (a unit-time simulation), and that
// simulation's bubble is the formula's; 1F1B holds at most p micro-batches, GPipe m; the
// interleaved schedule's chunk order; the backwards of a chunk in micro-batch order (the
// gradient's accumulation order); the stage split and the refusals naming the value and the
// rule. Then the golden's micro-batch accumulation against the whole batch at once and an f64
// reference of the accumulated gradient.
#include "tpu/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "expect_invalid.h"
#include "tpu/train.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

struct Case {
  PipeSchedule s;
  int p, m;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (int p : {1, 2, 3, 4})
    for (int m : {4, 8, 12, 16}) {
      c.push_back({PipeSchedule{PipeKind::kGpipe, 1}, p, m});
      c.push_back({PipeSchedule{PipeKind::k1f1b, 1}, p, m});
      for (int v : {1, 2, 3})
        if (m % p == 0) c.push_back({PipeSchedule{PipeKind::kInterleaved, v}, p, m});
    }
  return c;
}

std::string name(const Case& c) {
  return pipe_schedule_text(c.s) + " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m);
}

// Runs the tables with a forward slot taking tf and a backward tb time units (one chunk: 1/v of
// that), each slot starting once its stage is free and the slot it needs has finished (the
// forward of the virtual stage before, the backward of the one after; the last virtual stage's
// backward needs its own forward). Returns per stage its busy time, and the makespan; 0 when a
// table waits forever.
struct Sim {
  double span = 0;
  std::vector<double> busy;
};
Sim simulate(const std::vector<std::vector<PipeSlot>>& t, int p, int v, double tf, double tb) {
  Sim sim;
  sim.busy.assign(static_cast<std::size_t>(p), 0.0);
  std::map<std::tuple<int, int, bool>, double> end;  // (mb, virtual, backward) -> finish
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free(static_cast<std::size_t>(p), 0.0);
  const int last = p * v - 1;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      auto& i = next[static_cast<std::size_t>(s)];
      while (i < t[static_cast<std::size_t>(s)].size()) {
        const PipeSlot& x = t[static_cast<std::size_t>(s)][i];
        const int j = x.chunk * p + s;
        std::tuple<int, int, bool> need =
            x.backward
                ? (j == last ? std::make_tuple(x.mb, j, false) : std::make_tuple(x.mb, j + 1, true))
                : std::make_tuple(x.mb, j - 1, false);
        double ready = 0;
        if (x.backward || j > 0) {
          const auto it = end.find(need);
          if (it == end.end()) break;
          ready = it->second;
        }
        const double d = (x.backward ? tb : tf) / v;
        const double start = std::max(ready, free[static_cast<std::size_t>(s)]);
        free[static_cast<std::size_t>(s)] = start + d;
        end[{x.mb, j, x.backward}] = start + d;
        sim.busy[static_cast<std::size_t>(s)] += d;
        sim.span = std::max(sim.span, start + d);
        ++i;
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[static_cast<std::size_t>(s)] != t[static_cast<std::size_t>(s)].size()) sim.span = 0;
  return sim;
}

TEST(PipelineSlots, EveryMicrobatchOnceForwardBeforeBackwardChunksInOrder) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    const auto t = pipeline_slots(c.s, c.p, c.m);
    ASSERT_EQ(t.size(), static_cast<std::size_t>(c.p));
    const int v = c.s.v;
    for (const auto& st : t) {
      EXPECT_EQ(st.size(), static_cast<std::size_t>(2 * c.m * v));
      std::set<std::pair<int, int>> fwd, bwd;
      std::vector<int> last_b(static_cast<std::size_t>(v), -1);
      for (const PipeSlot& x : st) {
        ASSERT_GE(x.mb, 0);
        ASSERT_LT(x.mb, c.m);
        ASSERT_GE(x.chunk, 0);
        ASSERT_LT(x.chunk, v);
        if (!x.backward) {
          EXPECT_TRUE(fwd.insert({x.mb, x.chunk}).second) << "F twice";
          continue;
        }
        EXPECT_TRUE(fwd.count({x.mb, x.chunk})) << "B mb" << x.mb << " before its F";
        EXPECT_TRUE(bwd.insert({x.mb, x.chunk}).second) << "B twice";
        // The gradient's accumulation order: a chunk's backwards in micro-batch order.
        EXPECT_EQ(x.mb, last_b[static_cast<std::size_t>(x.chunk)] + 1);
        last_b[static_cast<std::size_t>(x.chunk)] = x.mb;
      }
      EXPECT_EQ(fwd.size(), static_cast<std::size_t>(c.m * v));
      EXPECT_EQ(bwd.size(), static_cast<std::size_t>(c.m * v));
    }
  }
}

// Stage order: with every slot waiting for its neighbour's, the tables finish (no stage waits
// for a slot that comes later in another's table), and with backward = 2 x forward the bubble of
// the busiest-free stage is the formula: exactly for GPipe and 1F1B, at most it for interleaved.
TEST(PipelineSlots, TablesRunToTheEndAndTheirBubbleIsTheFormula) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    const Sim sim = simulate(pipeline_slots(c.s, c.p, c.m), c.p, c.s.v, 1.0, 2.0);
    ASSERT_GT(sim.span, 0.0) << "a stage waits forever";
    const double formula = pipeline_bubble_formula(c.s, c.p, c.m);
    for (int s = 0; s < c.p; ++s) {
      const double bubble = 1.0 - sim.busy[static_cast<std::size_t>(s)] / sim.span;
      if (c.s.kind == PipeKind::kInterleaved && c.s.v > 1)
        EXPECT_LE(bubble, formula + 1e-9) << "stage " << s;
      else
        EXPECT_NEAR(bubble, formula, 1e-9) << "stage " << s;
    }
  }
}

// pipeline_timed_bubbles (the measured bubbles' second formulation): with no gap and no hop it is
// the simulation above; by hand, GPipe p = 2, m = 2, F = 1, B = 2 and a hop of 0.5: stage 1's F0
// starts at 1.5, its B1 ends at 7.5, stage 0's B0 starts at 6 and its B1 ends at 10, so each
// stage is busy 6 of 10; a gap of 0.25 between a stage's slots then adds 3 x 0.25 to stage 1's
// chain and 0.25 to stage 0's last.
TEST(PipelineSlots, TimedBubblesAreTheSimulationAndHopsAddToThem) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    const auto t = pipeline_slots(c.s, c.p, c.m);
    const Sim sim = simulate(t, c.p, c.s.v, 1.0, 2.0);
    std::vector<std::vector<double>> dur;
    for (const auto& st : t) {
      dur.emplace_back();
      for (const PipeSlot& x : st) dur.back().push_back((x.backward ? 2.0 : 1.0) / c.s.v);
    }
    const std::vector<double> b = pipeline_timed_bubbles(t, c.s.v, dur, 0, 0);
    ASSERT_EQ(b.size(), static_cast<std::size_t>(c.p));
    const std::vector<double> h = pipeline_timed_bubbles(t, c.s.v, dur, 0, 0.1);
    for (int s = 0; s < c.p; ++s) {
      EXPECT_NEAR(b[static_cast<std::size_t>(s)],
                  1.0 - sim.busy[static_cast<std::size_t>(s)] / sim.span, 1e-12);
      if (c.p > 1) {
        EXPECT_GT(h[static_cast<std::size_t>(s)], b[static_cast<std::size_t>(s)]);
      }
    }
  }
  const auto g = pipeline_slots(PipeSchedule{PipeKind::kGpipe, 1}, 2, 2);
  const std::vector<std::vector<double>> d = {{1, 1, 2, 2}, {1, 1, 2, 2}};
  const std::vector<double> b = pipeline_timed_bubbles(g, 1, d, 0, 0.5);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NEAR(b[0], 0.4, 1e-12);
  EXPECT_NEAR(b[1], 0.4, 1e-12);
  // With a gap of 0.25: stage 1 F0 1.5-2.5, F1 2.75-3.75, B0 4-6, B1 6.25-8.25; stage 0 F0 0-1,
  // F1 1.25-2.25, B0 6.5-8.5, B1 8.75-10.75: span 10.75.
  const std::vector<double> bg = pipeline_timed_bubbles(g, 1, d, 0.25, 0.5);
  EXPECT_NEAR(bg[0], 1.0 - 6.0 / 10.75, 1e-12);
  EXPECT_NEAR(bg[1], 1.0 - 6.0 / 10.75, 1e-12);
  EXPECT_TRUE(pipeline_timed_bubbles(g, 1, {{1, 1}}, 0, 0).empty());  // shapes do not match
  // Half a unit of each of stage 0's backwards needs nothing received (pre), the rest 1.5: B0's
  // pre runs 2-2.5 beside the wait, its rest 6-7.5 (stage 1's B0 ends at 5.5, plus the hop); B1's
  // pre 7.5-8, its rest 8-9.5 (its gradient there at 7.5 + 0.5): span 9.5, each stage busy 6.
  const std::vector<std::vector<double>> rest = {{1, 1, 1.5, 1.5}, {1, 1, 2, 2}},
                                         pre = {{0, 0, 0.5, 0.5}, {0, 0, 0, 0}};
  const std::vector<double> bp = pipeline_timed_bubbles(g, 1, rest, 0, 0.5, pre);
  ASSERT_EQ(bp.size(), 2u);
  EXPECT_NEAR(bp[0], 1.0 - 6.0 / 9.5, 1e-12);
  EXPECT_NEAR(bp[1], 1.0 - 6.0 / 9.5, 1e-12);
  EXPECT_TRUE(pipeline_timed_bubbles(g, 1, d, 0, 0, {{0, 0, 0, 0}}).empty());
}

TEST(PipelineSlots, InFlightMicrobatches) {
  for (int p : {2, 4})
    for (int m : {4, 8, 16}) {
      const auto g = pipeline_slots(PipeSchedule{PipeKind::kGpipe, 1}, p, m);
      const auto f = pipeline_slots(PipeSchedule{PipeKind::k1f1b, 1}, p, m);
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(pipeline_peak_in_flight(g[static_cast<std::size_t>(s)]), m);
        // 1F1B: p - s (at most p), so its activations are at most (p + 1) / m of GPipe's.
        EXPECT_EQ(pipeline_peak_in_flight(f[static_cast<std::size_t>(s)]), p - s);
        EXPECT_LE(pipeline_peak_in_flight(f[static_cast<std::size_t>(s)]), p);
      }
    }
}

// Interleaved (p = 2, v = 2, m = 4): stage 0 runs chunk 0 of micro-batches 0 and 1, then chunk
// 1 of them, then chunk 0 of 2 and 3 (groups of p micro-batches); its backwards start with the
// last chunk. The whole table of stage 1, written out.
TEST(PipelineSlots, InterleavedChunkOrder) {
  const auto t = pipeline_slots(PipeSchedule{PipeKind::kInterleaved, 2}, 2, 4);
  std::vector<std::pair<int, int>> f0, b0;
  for (const PipeSlot& x : t[0]) (x.backward ? b0 : f0).push_back({x.mb, x.chunk});
  const std::vector<std::pair<int, int>> wf = {{0, 0}, {1, 0}, {0, 1}, {1, 1},
                                               {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  const std::vector<std::pair<int, int>> wb = {{0, 1}, {1, 1}, {0, 0}, {1, 0},
                                               {2, 1}, {3, 1}, {2, 0}, {3, 0}};
  EXPECT_EQ(f0, wf);
  EXPECT_EQ(b0, wb);
  // Stage 1: warm-up (2 - 1 - 1) x 2 + (2 - 1) x 2 = 2 forwards, then one F and one B in turn.
  const std::vector<PipeSlot> s1 = {{0, false, 0}, {1, false, 0}, {0, false, 1}, {0, true, 1},
                                    {1, false, 1}, {1, true, 1},  {2, false, 0}, {0, true, 0},
                                    {3, false, 0}, {1, true, 0},  {2, false, 1}, {2, true, 1},
                                    {3, false, 1}, {3, true, 1},  {2, true, 0},  {3, true, 0}};
  EXPECT_EQ(t[1], s1);
}

TEST(PipelineSlots, GpipeAndOneFOneBTablesWrittenOut) {
  // p = 2, m = 3: GPipe F0 F1 F2 B0 B1 B2 on both; 1F1B stage 0 F0 F1 B0 F2 B1 B2, stage 1
  // F0 B0 F1 B1 F2 B2.
  auto text = [](const std::vector<PipeSlot>& st) {
    std::string s;
    for (const PipeSlot& x : st) s += (x.backward ? "B" : "F") + std::to_string(x.mb) + " ";
    return s;
  };
  const auto g = pipeline_slots(PipeSchedule{PipeKind::kGpipe, 1}, 2, 3);
  EXPECT_EQ(text(g[0]), "F0 F1 F2 B0 B1 B2 ");
  EXPECT_EQ(text(g[1]), "F0 F1 F2 B0 B1 B2 ");
  const auto f = pipeline_slots(PipeSchedule{PipeKind::k1f1b, 1}, 2, 3);
  EXPECT_EQ(text(f[0]), "F0 F1 B0 F2 B1 B2 ");
  EXPECT_EQ(text(f[1]), "F0 B0 F1 B1 F2 B2 ");
}

TEST(PipelineSlots, Formulas) {
  EXPECT_DOUBLE_EQ(pipeline_bubble_formula(PipeSchedule{PipeKind::kGpipe, 1}, 4, 8), 3.0 / 11);
  EXPECT_DOUBLE_EQ(pipeline_bubble_formula(PipeSchedule{PipeKind::k1f1b, 1}, 4, 16), 3.0 / 19);
  // Interleaved: b = (1/v)(p-1)/m relative to the ideal, b / (1 + b) of the step.
  const double b = 0.5 * 3.0 / 8;
  EXPECT_DOUBLE_EQ(pipeline_bubble_formula(PipeSchedule{PipeKind::kInterleaved, 2}, 4, 8),
                   b / (1 + b));
  // Relative to the ideal time: (p-1)/m, and 1/v of it interleaved (b above).
  EXPECT_DOUBLE_EQ(pipeline_bubble_formula_of_ideal(PipeSchedule{PipeKind::k1f1b, 1}, 4, 8),
                   3.0 / 8);
  EXPECT_DOUBLE_EQ(pipeline_bubble_formula_of_ideal(PipeSchedule{PipeKind::kInterleaved, 2}, 4, 8),
                   b);
  EXPECT_EQ(pipe_schedule_text(parse_pipe_schedule("interleaved:2")), "interleaved:2");
  EXPECT_EQ(parse_pipe_schedule("1f1b").kind, PipeKind::k1f1b);
}

TEST(PipelineStages, EqualAndGivenSplits) {
  using V = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(pipeline_stages(8, 4, ""), (V{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(pipeline_stages(5, 2, "0-2,3-4"), (V{{0, 2}, {3, 4}}));
  EXPECT_EQ(pipeline_stages(3, 3, "0,1,2"), (V{{0, 0}, {1, 1}, {2, 2}}));
  // Interleaved: 8 layers, p = 2, v = 2: chunks of 2, chunk j on stage j mod 2.
  EXPECT_EQ(pipeline_chunks(8, 2, PipeSchedule{PipeKind::kInterleaved, 2}, ""),
            (V{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(PipelineStages, BadInputNamesTheValueAndTheRule) {
  expect_invalid([] { pipeline_stages(6, 4, ""); }, {"stage=4", "do not divide the 6 layers"});
  expect_invalid([] { pipeline_stages(4, 2, "0-1,3"); }, {"--stages 0-1,3", "starts at layer 3"});
  expect_invalid([] { pipeline_stages(4, 2, "0-1,2-2"); }, {"--stages", "layers 0-3"});
  expect_invalid([] { pipeline_stages(4, 3, "0-1,2-3"); }, {"--stages", "2 stages", "3"});
  expect_invalid([] { pipeline_stages(4, 2, "0-x,2-3"); }, {"'0-x'", "range"});
  expect_invalid(
      [] {
        check_pipeline(8, 4, 2, PipeSchedule{PipeKind::k1f1b, 1}, "");
      },
      {"--microbatches 2", "1F1B", "at least as many micro-batches as stages (4)"});
  expect_invalid(
      [] {
        check_pipeline(8, 2, 4, PipeSchedule{PipeKind::kInterleaved, 3}, "");
      },
      {"interleaved:3", "v=3", "does not divide the 4 layers per stage"});
  expect_invalid(
      [] {
        check_pipeline(8, 4, 6, PipeSchedule{PipeKind::kInterleaved, 2}, "");
      },
      {"--microbatches 6", "multiple of the 4 stages"});
  expect_invalid([] { parse_pipe_schedule("zigzag"); }, {"--schedule zigzag", "gpipe, 1f1b"});
  expect_invalid([] { parse_pipe_schedule("interleaved:0"); }, {"interleaved:0", "[1, 64]"});
}

// The golden with micro-batches: the gradient is accumulated over them in f32, micro-batch 0
// first. Against the whole batch at once: the same network up to the accumulation's roundings
// (the loss, which is before the update, equal to f32 precision; the updates close, not equal).
// Then the accumulation itself: the gradient the all-reduce gets is the f32 sum, in micro-batch
// order, of the gradients of each micro-batch alone (each computed by a golden of that
// micro-batch's batch, scaled as the whole batch is).
TEST(PipelineGolden, MicrobatchAccumulationAgainstTheWholeBatch) {
  MlpSpec s;
  s.widths = {32, 32, 32, 32};
  s.batch = 32;
  s.chips = 2;
  s.lr = 0.25f;
  s.lanes = 16;
  s.loss_chunk = 4;
  MlpSpec sm = s;
  sm.microbatches = 4;
  const MlpParams p0 = init_mlp_params(s, 7);
  const MlpData d = make_mlp_data(s, 7);
  MlpGolden whole(s, p0), micro(sm, p0);
  std::vector<std::vector<uint32_t>> seen;  // the accumulated gradients, per layer (chip 0)
  const GradAllReduce sum = [&seen](std::size_t, const std::vector<std::vector<uint32_t>>& in) {
    seen.push_back(in[0]);
    std::vector<uint32_t> o(in[0].size());
    for (std::size_t i = 0; i < o.size(); ++i)
      o[i] = f32_bits(f32_add(f32_from_bits(in[0][i]), f32_from_bits(in[1][i])));
    return std::vector<std::vector<uint32_t>>(in.size(), o);
  };
  std::vector<std::vector<uint32_t>> seen_whole;
  const GradAllReduce sum_whole = [&seen_whole](std::size_t,
                                                const std::vector<std::vector<uint32_t>>& in) {
    seen_whole.push_back(in[0]);
    std::vector<uint32_t> o(in[0].size());
    for (std::size_t i = 0; i < o.size(); ++i)
      o[i] = f32_bits(f32_add(f32_from_bits(in[0][i]), f32_from_bits(in[1][i])));
    return std::vector<std::vector<uint32_t>>(in.size(), o);
  };
  const MlpStepResult rw = whole.step(d, sum_whole);
  const MlpStepResult rm = micro.step(d, sum);
  ASSERT_EQ(rm.loss_parts.size(), 2u * 4u);
  EXPECT_NEAR(rm.loss, rw.loss, 1e-5 * rw.loss);
  double mx = 0, diff = 0;
  for (std::size_t l = 0; l < s.layers(); ++l)
    for (std::size_t i = 0; i < p0[l].w.size(); ++i) {
      mx = std::max(mx, std::fabs(static_cast<double>(p0[l].w[i] - whole.params(0)[l].w[i])));
      diff = std::max(
          diff, std::fabs(static_cast<double>(micro.params(0)[l].w[i] - whole.params(0)[l].w[i])));
    }
  ASSERT_GT(mx, 0.0);
  EXPECT_LT(diff, 0.05 * mx);  // the updates agree to a few percent (often to the bit)
  // The gradients are close but not the same computation: the f32 sums run in another order.
  ASSERT_EQ(seen.size(), s.layers());
  ASSERT_EQ(seen_whole.size(), s.layers());
  std::size_t differ = 0;
  for (std::size_t l = 0; l < s.layers(); ++l)
    for (std::size_t i = 0; i < seen[l].size(); ++i) {
      const double a = f32_from_bits(seen[l][i]), w = f32_from_bits(seen_whole[l][i]);
      differ += seen[l][i] != seen_whole[l][i];
      EXPECT_NEAR(a, w, 1e-3 * std::fabs(w) + 1e-7) << "layer " << l << " element " << i;
    }
  EXPECT_GT(differ, 0u);
  // Each micro-batch alone: a golden over 2 chips of 8 examples, the micro-batch's rows of each
  // chip (a second formulation: no accumulation inside it); its global batch is 4 x smaller,
  // so its gradients are 4 x larger, exactly.
  std::vector<std::vector<float>> acc;  // per layer, chip 0's accumulated gradient
  for (int k = 0; k < 4; ++k) {
    MlpSpec one = s;
    one.batch = 8;
    MlpData dk;
    for (int c = 0; c < 2; ++c) {
      const std::size_t r0 = static_cast<std::size_t>(c) * 32 + static_cast<std::size_t>(k) * 8;
      dk.x.insert(dk.x.end(), d.x.begin() + static_cast<std::ptrdiff_t>(r0 * 32),
                  d.x.begin() + static_cast<std::ptrdiff_t>((r0 + 8) * 32));
      dk.t.insert(dk.t.end(), d.t.begin() + static_cast<std::ptrdiff_t>(r0 * 32),
                  d.t.begin() + static_cast<std::ptrdiff_t>((r0 + 8) * 32));
    }
    std::vector<std::vector<uint32_t>> gk;
    const GradAllReduce keep = [&gk](std::size_t, const std::vector<std::vector<uint32_t>>& in) {
      gk.push_back(in[0]);
      return in;
    };
    MlpGolden g1(one, p0);
    g1.step(dk, keep);
    // g1's dY = bf16(D x 2 / (16 x 32)), the whole batch's bf16(D x 2 / (64 x 32)): exactly 4
    // times larger (a power of two: the same roundings unless a value is subnormal), and so is
    // every gradient.
    for (std::size_t l = 0; l < s.layers(); ++l) {
      if (k == 0) acc.emplace_back(gk[l].size(), 0.0f);
      for (std::size_t i = 0; i < gk[l].size(); ++i) {
        const float gi = f32_from_bits(gk[l][i]) * 0.25f;
        acc[l][i] = k == 0 ? gi : f32_add(acc[l][i], gi);
      }
    }
  }
  for (std::size_t l = 0; l < s.layers(); ++l)
    for (std::size_t i = 0; i < acc[l].size(); ++i)
      ASSERT_EQ(f32_bits(acc[l][i]), seen[l][i]) << "layer " << l << " element " << i;
}

}  // namespace
}  // namespace tpu
