// The GPT training step on a chip (sw/driver/gpt_train.h, docs/training.md "The GPT step on the
// chip"): after every step, every parameter and both Adam moments of every tensor equal the
// golden's (model/, GptGolden) bit for bit, the loss partials too, and the loss falls; heads of
// 16 columns (padded to 32 on the chip) and of 32; the inputs the chip program refuses.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpt_decode.h"
#include "gpt_train.h"
#include "mesh_text.h"
#include "pod.h"
#include "tpu/gpt.h"
#include "tpu/pipeline.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

std::vector<uint8_t> text(std::size_t vocab) {
  const std::string t =
      "A systolic array multiplies matrices by passing operands between neighbouring cells; "
      "every cell adds one product to a running sum and hands it on. ";
  std::vector<uint8_t> v;
  for (int i = 0; i < 6; ++i)
    for (char c : t) v.push_back(static_cast<uint8_t>(static_cast<unsigned char>(c) % vocab));
  // vocab is 256: every byte a token
  return v;
}

std::size_t mismatches(const GptParams& got, const GptParams& want, std::string* first) {
  std::size_t bad = 0;
  for (std::size_t k = 0; k < want.size(); ++k)
    for (std::size_t i = 0; i < want[k].v.size(); ++i)
      if (f32_bits(got[k].v[i]) != f32_bits(want[k].v[i]) && bad++ == 0)
        *first = want[k].name + "[" + std::to_string(i) + "]: got " +
                 std::to_string(got[k].v[i]) + " want " + std::to_string(want[k].v[i]);
  return bad;
}

struct GptCase {
  const char* name;
  std::size_t layers, d, heads, seq, vocab, batch;
  std::vector<int> shape = {1};  // the pod's torus
  const char* mesh = "";         // "": data parallel over every chip
  uint64_t steps = 3;
  std::size_t microbatches = 1;  // with a stage axis: the pipeline (issue 35)
  const char* schedule = "gpipe";
  bool one_token = false;  // every window one repeated byte: the embedding's longest id lists
};
void PrintTo(const GptCase& c, std::ostream* os) { *os << c.name; }

class GptChip : public ::testing::TestWithParam<GptCase> {};

TEST_P(GptChip, EveryStepBitExactToTheGolden) {
  const GptCase& c = GetParam();
  PodParams pp;
  pp.topo = Topology::torus(c.shape);
  pp.variant = "16x16";
  pp.link_latency = 2;
  CppPodHost host(pp);
  GptSpec spec;
  spec.layers = c.layers;
  spec.d_model = c.d;
  spec.heads = c.heads;
  spec.seq = c.seq;
  spec.vocab = c.vocab;
  spec.batch = c.batch;
  spec.lr = 1e-2f;
  spec.weight_decay = 0.1f;
  GptTrainOptions opt;
  opt.backdoor = true;
  if (std::string(c.mesh).size()) opt.mesh = parse_mesh(c.mesh);
  opt.microbatches = c.microbatches;
  opt.schedule = parse_pipe_schedule(c.schedule);
  GptTrainer tr(host, spec, opt);
  const GptParams init = gpt_init(tr.spec(), 5);
  GptGolden golden(tr.spec(), init);
  GptGolden plain(tr.spec(), init);  // model sums folded in model-rank order
  tr.load_params(init);
  const std::vector<uint8_t> data =
      c.one_token ? std::vector<uint8_t>(text(c.vocab).size(), 'a') : text(c.vocab);
  double first = 0, last = 0;
  for (uint64_t step = 0; step < c.steps; ++step) {
    const std::vector<int32_t> win = gpt_windows(tr.spec(), data, 5, step);
    const GptStepRun run = tr.step(win);
    const GptStepResult g = golden.step(win, tr.golden_data_reduce(), tr.golden_model_reduce());
    std::printf("[gpt chip] %s step %llu: loss %.6f (golden %.6f), %llu cycles, %zu commands\n",
                c.name, static_cast<unsigned long long>(step), run.loss, g.loss,
                static_cast<unsigned long long>(run.prog.run.cycles), run.commands);
    ASSERT_EQ(run.loss_parts.size(), g.loss_parts.size());
    for (std::size_t k = 0; k < g.loss_parts.size(); ++k)
      for (std::size_t b = 0; b < g.loss_parts[k].size(); ++b)
        ASSERT_EQ(f32_bits(run.loss_parts[k][b]), f32_bits(g.loss_parts[k][b]))
            << "chip " << k << " window " << b;
    EXPECT_EQ(run.loss, g.loss);
    for (int k = 0; k < tr.spec().chips(); ++k) {
      std::string where;
      ASSERT_EQ(mismatches(tr.read_params(k), golden.params(k), &where), 0u)
          << "chip " << k << " params: " << where;
      ASSERT_EQ(mismatches(tr.read_moment1(k), golden.moment1(k), &where), 0u)
          << "chip " << k << " m: " << where;
      ASSERT_EQ(mismatches(tr.read_moment2(k), golden.moment2(k), &where), 0u)
          << "chip " << k << " v: " << where;
    }
    if (tr.spec().model > 2) {  // more than two chips: the rounds' order is not the fold's
      plain.step(win, tr.golden_data_reduce());
      std::string where;
      EXPECT_GT(mismatches(tr.read_params(0), plain.params(0), &where), 0u)
          << "the model-rank fold gave the chips' bits: the replay is not needed";
    }
    if (step == 0) first = run.loss;
    last = run.loss;
  }
  EXPECT_LT(last, first);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GptChip,
    ::testing::Values(GptCase{"heads16", 1, 32, 2, 32, 256, 2},
                      GptCase{"heads32_two_layers", 2, 64, 2, 32, 256, 1},
                      GptCase{"data2", 1, 32, 2, 32, 256, 1, {2}, "", 2},
                      GptCase{"model2", 1, 32, 2, 32, 256, 2, {2}, "model=2", 2},
                      GptCase{"data2_model2", 2, 32, 2, 32, 256, 1, {2, 2}, "data=2,model=2", 2},
                      GptCase{"model4", 1, 64, 4, 32, 256, 1, {2, 2}, "model=4", 2},
                      // Issue 35: micro-batches alone, stages, all three axes, interleaved.
                      GptCase{"microbatches2", 1, 32, 2, 32, 256, 2, {1}, "", 2, 2},
                      GptCase{"stage2_1f1b", 2, 32, 2, 32, 256, 2, {2}, "stage=2", 2, 2, "1f1b"},
                      GptCase{"data2_model2_stage2", 2, 32, 2, 32, 256, 2, {2, 2, 2},
                              "data=2,model=2,stage=2", 2, 2, "1f1b"},
                      GptCase{"interleaved2", 4, 32, 2, 32, 256, 2, {2}, "stage=2", 2, 2,
                              "interleaved:2"},
                      // One token T times: the embedding backward's T rounds of one position.
                      GptCase{"one_token", 1, 32, 2, 32, 256, 2, {1}, "", 2, 1, "gpipe", true}),
    [](const auto& p) { return std::string(p.param.name); });

// The decoder tests' model: 32 wide, 2 heads, a context of 32, on one 16x16 chip.
GptSpec decode_spec(std::size_t layers) {
  GptSpec spec;
  spec.layers = layers;
  spec.d_model = 32;
  spec.heads = 2;
  spec.seq = 32;
  spec.lanes = 16;
  return spec;
}
PodParams one_chip() {
  PodParams pp;
  pp.topo = Topology::torus({1});
  pp.variant = "16x16";
  return pp;
}

// Issue 35: stages change nothing in the arithmetic. Two stages (1F1B, 2 micro-batches) give, step
// for step, the bits of one chip running the same 2 micro-batches: every parameter, moment and
// loss partial. The pipelined run's slots are on the timeline in each stage's table order, and
// its measurements have the table's shape (1F1B holds p - s micro-batches on stage s).
TEST(GptPipeline, StagesEqualOneChipWithTheSameMicrobatches) {
  GptSpec spec = decode_spec(2);
  spec.batch = 2;
  spec.lr = 1e-2f;
  PodParams ring2 = one_chip();
  ring2.topo = Topology::torus({2});
  CppPodHost h1(one_chip()), h2(ring2);
  GptTrainOptions one, two;
  one.backdoor = two.backdoor = true;
  one.microbatches = two.microbatches = 2;
  one.schedule = two.schedule = parse_pipe_schedule("1f1b");
  two.mesh = parse_mesh("stage=2");
  GptTrainer a(h1, spec, one), b(h2, spec, two);
  ASSERT_TRUE(b.pipelined());
  ASSERT_EQ(b.stages(), 2);
  const GptParams init = gpt_init(a.spec(), 3);
  a.load_params(init);
  b.load_params(init);
  TraceOptions topt;
  topt.enabled = true;
  h2.set_trace(topt);
  const std::vector<uint8_t> data = text(256);
  for (uint64_t step = 0; step < 2; ++step) {
    const std::vector<int32_t> win = gpt_windows(a.spec(), data, 3, step);
    const GptStepRun ra = a.step(win), rb = b.step(win);
    EXPECT_EQ(ra.loss_parts, rb.loss_parts);
    std::string where;
    EXPECT_EQ(mismatches(b.read_params(0), a.read_params(0), &where), 0u) << where;
    EXPECT_EQ(mismatches(b.read_moment2(0), a.read_moment2(0), &where), 0u) << where;
    const PipelineStats st = b.measure(h2.take_trace());
    ASSERT_EQ(st.stages.size(), 2u);
    EXPECT_GT(st.span, 0u);
    for (int s = 0; s < 2; ++s) {
      const PipelineStageStats& x = st.stages[static_cast<std::size_t>(s)];
      EXPECT_EQ(x.first_layer, static_cast<std::size_t>(s));
      EXPECT_EQ(x.last_layer, static_cast<std::size_t>(s));
      EXPECT_EQ(x.peak_in_flight, 2 - s);
      EXPECT_GT(x.peak_activation_bytes, 0u);
      EXPECT_GT(x.bubble, 0.0);
      EXPECT_LT(x.bubble, 1.0);
      std::vector<std::string> order;  // the slots in time order: the stage's table
      for (const PipelineSlotSpan& sp : x.slots) order.push_back(sp.slot);
      const std::vector<std::string> want =
          s == 0 ? std::vector<std::string>{"F mb0", "F mb1", "B mb0", "B mb1"}
                 : std::vector<std::string>{"F mb0", "B mb0", "F mb1", "B mb1"};
      EXPECT_EQ(order, want) << "stage " << s;
    }
  }
}

// Decoding with the keys and values cached in HBM: the logits of the token at position t are
// row t of the golden's forward over the window of tokens 0..t, bit for bit; the context's end.
TEST(GptDecode, EachTokensLogitsAreTheFullWindowForwardsRow) {
  CppPodHost host(one_chip());
  const GptSpec spec = decode_spec(2);
  const GptParams params = gpt_init(spec, 7);
  GptDecoder dec(host, spec, params);
  const std::vector<uint8_t> data = text(256);
  std::vector<int32_t> tokens;
  for (std::size_t t = 0; t < 6; ++t) {
    tokens.push_back(data[t]);
    const GptDecoder::Step st = dec.feed(tokens.back());
    const std::vector<float> want = gpt_logits(spec, params, tokens);
    ASSERT_EQ(st.logits.size(), 256u);
    std::size_t bad = 0;
    for (std::size_t k = 0; k < 256; ++k)
      bad += f32_bits(st.logits[k]) != f32_bits(want[t * 256 + k]);
    EXPECT_EQ(bad, 0u) << "position " << t;
    std::printf("[gpt decode] position %zu: %llu cycles, %zu commands\n", t,
                static_cast<unsigned long long>(st.cycles), st.commands);
  }
  try {
    dec.feed(256);
    FAIL() << "token 256 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos);
  }
}

// A full cache, then restart(): a window fed again from position 0 (over caches that held
// another window's keys and values, zeroed on the chip), three tokens in one program and then one,
// gives the golden's forward over that window alone, bit for bit; a token past the context is
// refused.
TEST(GptDecode, RestartFeedsANewWindowAsTheFirst) {
  CppPodHost host(one_chip());
  const GptSpec spec = decode_spec(1);
  const GptParams params = gpt_init(spec, 11);
  GptDecoder dec(host, spec, params);
  const std::vector<uint8_t> data = text(256);
  for (std::size_t t = 0; t < spec.seq; ++t) dec.feed(data[t]);
  try {
    dec.feed(data[spec.seq]);
    FAIL() << "a token past the context accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the context holds 32"), std::string::npos) << e.what();
  }
  dec.restart();
  EXPECT_EQ(dec.position(), 0u);
  // Three tokens in one program (a prefill), then one alone: every row is the window's forward.
  std::vector<int32_t> win(data.begin() + 100, data.begin() + 103);
  GptDecoder::Step st = dec.feed(win);
  ASSERT_EQ(st.logits.size(), 3u * 256u);
  std::vector<float> want = gpt_logits(spec, params, win);
  std::size_t bad = 0;
  for (std::size_t k = 0; k < 3 * 256; ++k) bad += f32_bits(st.logits[k]) != f32_bits(want[k]);
  EXPECT_EQ(bad, 0u) << "the prefill after the restart";
  win.push_back(data[103]);
  st = dec.feed(win.back());
  want = gpt_logits(spec, params, win);
  bad = 0;
  for (std::size_t k = 0; k < 256; ++k) bad += f32_bits(st.logits[k]) != f32_bits(want[3 * 256 + k]);
  EXPECT_EQ(bad, 0u) << "position 3 after the restart";
  EXPECT_EQ(dec.position(), 4u);
}

TEST(GptChipErrors, RefusedInputsNameTheValueAndTheRule) {
  PodParams pp;
  pp.topo = Topology::torus({1});
  pp.variant = "16x16";
  CppPodHost host(pp);
  GptSpec spec;
  spec.d_model = 48;
  spec.heads = 2;
  spec.seq = 32;
  try {
    GptTrainer tr(host, spec);
    FAIL() << "d_model 48 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("d_model 48 must be a multiple of 32"), std::string::npos)
        << e.what();
  }
  spec.d_model = 32;
  GptTrainOptions opt;
  opt.backdoor = true;
  GptTrainer tr(host, spec, opt);
  try {
    tr.step(std::vector<int32_t>(3, 0));
    FAIL() << "a short batch accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("global batch x (seq + 1)"), std::string::npos);
  }
  std::vector<int32_t> win(spec.global_batch() * (spec.seq + 1), 1);
  win[5] = 256;
  try {
    tr.step(win);
    FAIL() << "token 256 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token id 256 is outside the vocabulary [0, 256)"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace tpu
