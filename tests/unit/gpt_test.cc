// The GPT golden (tpu/gpt.h): the spec's rules, init and windows, the tensor-parallel shards,
// the gradients against an independent f64 reference (gpt_ref.h), sharded against unsharded,
// the optimizer and GELU's derivative, and the loss of a tiny model falling.
#include "tpu/gpt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "expect_invalid.h"
#include "gpt_ref.h"
#include "tpu/transcend.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

GptSpec tiny(int data = 1, int model = 1, std::size_t batch = 2) {
  GptSpec s;
  s.layers = 2;
  s.d_model = 32;
  s.heads = 2;
  s.seq = 8;
  s.batch = batch;
  s.data = data;
  s.model = model;
  s.lanes = 8;
  s.lr = 1e-2f;
  return s;
}

std::vector<uint8_t> text() {
  const std::string t =
      "A systolic array multiplies matrices by passing operands between neighbouring cells; "
      "every cell adds one product to a running sum and hands it on. The vector unit applies "
      "the same operation to every lane, and reduces a row of lanes by a fixed tree. ";
  std::string all;
  for (int i = 0; i < 8; ++i) all += t;
  return std::vector<uint8_t>(all.begin(), all.end());
}

// The issue's default data: the project's docs/*.md, concatenated in name order.
std::vector<uint8_t> project_docs() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(TPU_SOURCE_DIR "/docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<uint8_t> all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return all;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(Gpt, SpecRejectsBadValues) {
  GptSpec s = tiny();
  s.heads = 3;
  expect_invalid([&] { s.validate(); }, {"d_model", "32", "heads"});
  s = tiny(1, 4);
  expect_invalid([&] { s.validate(); }, {"model", "4", "heads"});
  s = tiny(1, 2);
  s.d_model = 24;
  s.heads = 2;
  expect_invalid([&] { s.validate(); }, {"d_model", "24", "model x lanes", "16"});
  s = tiny();
  s.n_ctx = 4;
  expect_invalid([&] { s.validate(); }, {"seq", "8", "wpe", "4"});
  s = tiny();
  s.vocab = 512;
  expect_invalid([&] { s.validate(); }, {"vocab", "512", "256"});
  s = tiny();
  s.lanes = 6;
  expect_invalid([&] { s.validate(); }, {"lanes", "6", "power of two"});
  s = tiny();
  s.microbatches = 3;
  expect_invalid([&] { s.validate(); }, {"microbatches", "3", "divide", "2"});
  const std::vector<uint8_t> short_text(8, 'a');
  expect_invalid([&] { gpt_windows(tiny(), short_text, 1, 0); }, {"data", "8", "9"});
  GptGolden g(tiny(), gpt_init(tiny(), 1));
  std::vector<int32_t> w(2 * 9, 65);
  w[5] = 300;
  expect_invalid([&] { g.step(w); }, {"tokens", "300", "256"});
  w.pop_back();
  expect_invalid([&] { g.step(w); }, {"17 tokens", "18"});
}

TEST(Gpt, InitFollowsTheIssue) {
  GptSpec s = tiny();
  s.d_model = 64;
  s.layers = 3;
  const GptParams p = gpt_init(s, 7);
  ASSERT_EQ(p.size(), 2 + 12 * 3 + 3u);
  EXPECT_EQ(p[0].name, "wte");
  EXPECT_EQ(p[gpt_index(1, kWqkv)].name, "h1.attn.wqkv");
  EXPECT_EQ(p[gpt_index(1, kWqkv)].cols, 3 * 64u);
  EXPECT_EQ(p[gpt_index(2, kW2)].name, "h2.mlp.w2");
  EXPECT_EQ(p[gpt_index(2, kW2)].rows, 256u);
  EXPECT_EQ(p.back().name, "head.w");
  EXPECT_EQ(p.back().cols, 256u);
  auto stats = [](const std::vector<float>& v, double& mean, double& sd) {
    double s1 = 0, s2 = 0;
    for (float x : v) s1 += x, s2 += static_cast<double>(x) * x;
    mean = s1 / static_cast<double>(v.size());
    sd = std::sqrt(s2 / static_cast<double>(v.size()) - mean * mean);
  };
  double mean, sd;
  stats(p[0].v, mean, sd);
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.03);
  EXPECT_NEAR(mean, 0.0, 0.001);
  stats(p[gpt_index(0, kWo)].v, mean, sd);
  EXPECT_NEAR(sd, 0.02 / std::sqrt(6.0), 0.02 / std::sqrt(6.0) * 0.05);
  stats(p[gpt_index(1, kW2)].v, mean, sd);
  EXPECT_NEAR(sd, 0.02 / std::sqrt(6.0), 0.02 / std::sqrt(6.0) * 0.05);
  for (float x : p[gpt_index(2, kLn2G)].v) EXPECT_EQ(x, 1.0f);
  for (float x : p[gpt_index(2, kB1)].v) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(gpt_init(s, 7)[0].v, p[0].v);
  EXPECT_NE(gpt_init(s, 8)[0].v, p[0].v);
  EXPECT_NE(p[0].v, p[1].v);  // each tensor its own stream
  // Irwin-Hall: variance exactly 1, bounded by +-6.
  double s2 = 0;
  for (uint64_t i = 0; i < 20000; ++i) {
    const double z = gpt_normal(12345, i);
    ASSERT_LE(std::fabs(z), 6.0);
    s2 += z * z;
  }
  EXPECT_NEAR(s2 / 20000, 1.0, 0.04);
}

TEST(Gpt, WindowsAreSlicesOfTheText) {
  const GptSpec s = tiny(2, 1, 3);
  const std::vector<uint8_t> t = text();
  const std::vector<int32_t> w0 = gpt_windows(s, t, 5, 0), w1 = gpt_windows(s, t, 5, 1);
  ASSERT_EQ(w0.size(), 6 * 9u);
  EXPECT_EQ(w0, gpt_windows(s, t, 5, 0));
  EXPECT_NE(w0, w1);
  EXPECT_NE(w0, gpt_windows(s, t, 6, 0));
  for (std::size_t b = 0; b < 6; ++b) {
    const std::string win(w0.begin() + static_cast<std::ptrdiff_t>(b * 9),
                          w0.begin() + static_cast<std::ptrdiff_t>(b * 9 + 9));
    EXPECT_NE(std::string(t.begin(), t.end()).find(win), std::string::npos) << b;
  }
  // A text of exactly one window: every window is the text.
  const std::vector<uint8_t> one(t.begin(), t.begin() + 9);
  for (int32_t x : gpt_windows(s, one, 3, 4)) EXPECT_LT(x, 256);
  EXPECT_EQ(gpt_windows(s, one, 3, 4)[9], one[0]);
}

// The lines scripts/gpt_data.py prints for `args` (python3, the project's dependency).
std::vector<std::string> python_lines(const std::string& args) {
  const std::string cmd =
      std::string(TPU_PYTHON) + " '" TPU_SOURCE_DIR "/scripts/gpt_data.py' " + args;
  std::vector<std::string> lines;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return lines;
  std::string cur;
  for (int ch; (ch = std::fgetc(f)) != EOF;) {
    if (ch == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(ch));
    }
  }
  EXPECT_EQ(pclose(f), 0) << cmd;
  return lines;
}

// The plain-Python init and windows (for replays outside C++) give the golden's bits.
TEST(Gpt, PythonReproducesInitAndWindows) {
  GptSpec s = tiny(2, 1, 3);
  s.n_ctx = 12;
  const GptParams p = gpt_init(s, 7);
  const std::vector<std::string> init =
      python_lines("init --seed 7 --layers 2 --d-model 32 --n-ctx 12 --count 64");
  ASSERT_EQ(init.size(), p.size());
  for (std::size_t k = 0; k < p.size(); ++k) {
    std::istringstream in(init[k]);
    std::string name;
    in >> name;
    EXPECT_EQ(name, p[k].name);
    for (std::size_t i = 0; i < 64 && i < p[k].v.size(); ++i) {
      std::string hex;
      in >> hex;
      EXPECT_EQ(std::stoul(hex, nullptr, 16), f32_bits(p[k].v[i])) << name << " " << i;
    }
  }
  const std::string path = ::testing::TempDir() + "gpt_text.bin";
  const std::vector<uint8_t> t = text();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size()));
  const std::vector<int32_t> w = gpt_windows(s, t, 5, 3);
  const std::vector<std::string> win =
      python_lines("windows --seed 5 --seq 8 --global-batch 6 --step 3 '" + path + "'");
  ASSERT_EQ(win.size(), 6u);
  for (std::size_t b = 0; b < 6; ++b) {
    std::istringstream in(win[b]);
    for (std::size_t i = 0; i < 9; ++i) {
      int x = -1;
      in >> x;
      EXPECT_EQ(x, w[b * 9 + i]) << b << " " << i;
    }
  }
}

TEST(Gpt, ShardsSplitHeadsAndRoundTrip) {
  GptSpec s = tiny(1, 2);
  const GptParams full = gpt_init(s, 3);
  const GptParams s1 = gpt_shard(s, full, 1);
  const std::size_t d = 32, dm = 16;
  const GptTensor& wq = s1[gpt_index(0, kWqkv)];
  // Row 3 of the shard: q columns [16, 32), then k's [48, 64), then v's [80, 96).
  const std::vector<float>& fw = full[gpt_index(0, kWqkv)].v;
  EXPECT_EQ(wq.v[3 * 48 + 0], fw[3 * 96 + 16]);
  EXPECT_EQ(wq.v[3 * 48 + 16], fw[3 * 96 + 48]);
  EXPECT_EQ(wq.v[3 * 48 + 47], fw[3 * 96 + 95]);
  EXPECT_EQ(s1[gpt_index(0, kWo)].v[0], full[gpt_index(0, kWo)].v[dm * d]);
  EXPECT_EQ(s1[gpt_index(1, kW2)].v[0], full[gpt_index(1, kW2)].v[64 * d]);
  EXPECT_EQ(s1[gpt_index(1, kW1)].v[64 + 1], full[gpt_index(1, kW1)].v[4 * d + 64 + 1]);
  const GptParams back = gpt_unshard(s, {gpt_shard(s, full, 0), s1});
  for (std::size_t k = 0; k < full.size(); ++k) EXPECT_EQ(back[k].v, full[k].v) << full[k].name;
}

// One window's MACs, worked by hand for the tiny model (S 32, d 32, 2 heads of 16, 2 layers,
// vocab 256): per layer qkv 32 x 32 x 96 = 98,304, scores and values 2 x 2 heads x 32 x 32 x 16
// = 65,536, output 32,768, MLP 2 x 32 x 32 x 128 = 262,144 (458,752); the head 32 x 32 x 256 =
// 262,144; forward 1,179,648, with the backward 3x. Two model ranks split all of it, the head
// included (each counts half), so they sum to the whole model's.
TEST(Gpt, WindowMacsCountTheMatmulsOnce) {
  GptSpec one = tiny(1, 1), two = tiny(1, 2);
  one.seq = two.seq = 32;
  EXPECT_EQ(gpt_window_macs(one), 3u * (2u * 458752u + 262144u));
  EXPECT_EQ(2 * gpt_window_macs(two), gpt_window_macs(one));
  GptSpec wide = one;
  wide.d_model = 64;  // qkv, output, MLP 4x; scores 2x; head 2x
  EXPECT_EQ(gpt_window_macs(wide),
            3u * (2u * (4u * (98304u + 32768u + 262144u) + 2u * 65536u) + 2u * 262144u));
}

// Golden gradients (data = 1, model = 1) against the f64 reference on the same parameters.
// Bound: bf16 matmul operands carry a relative error of up to 2^-9 each; through the ~10
// matmuls between the loss and the first layer's weights, and summed with random signs over
// the tokens, the per-tensor error measured is 0.72% of the tensor's largest gradient; the
// test allows 4%, and asserts the f32-only parts (gains, biases, embeddings) too.
TEST(Gpt, GradientsMatchF64Reference) {
  GptSpec s = tiny(1, 1, 3);
  GptParams p = gpt_init(s, 11);
  // Non-trivial gains and biases, so their paths are exercised.
  for (GptTensor& t : p)
    if (!t.matrix())
      for (std::size_t i = 0; i < t.v.size(); ++i)
        t.v[i] += 0.1f * static_cast<float>(gpt_normal(99 + t.v.size(), i));
  const std::vector<int32_t> w = gpt_windows(s, text(), 2, 0);
  GptGolden g(s, p);
  const double loss = g.step(w).loss;
  std::vector<ref::Vec> rp, rg;
  for (const GptTensor& t : p) rp.emplace_back(t.v.begin(), t.v.end());
  const double rloss = ref::step({s.layers, s.d_model, s.heads, s.seq, s.vocab, 3}, rp, w, rg);
  EXPECT_NEAR(loss, rloss, 2e-3 * rloss);
  double worst = 0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double m = max_abs(rg[k]);
    ASSERT_GT(m, 0.0) << p[k].name;
    double e = 0;
    for (std::size_t i = 0; i < rg[k].size(); ++i)
      e = std::max(e, std::fabs(static_cast<double>(g.grads(0)[k].v[i]) - rg[k][i]));
    EXPECT_LE(e / m, 0.04) << p[k].name;
    worst = std::max(worst, e / m);
  }
  std::printf("golden vs f64: loss %.6f vs %.6f, worst gradient error %.4f of the tensor max\n",
              loss, rloss, worst);
}

// data = 2 x model = 2 against one chip on the same global batch: split contractions (wo, w2,
// the input gradients, the data sum) change roundings only.
TEST(Gpt, ShardedMatchesUnsharded) {
  const GptSpec s1 = tiny(1, 1, 4), s4 = tiny(2, 2, 2);
  const GptParams p = gpt_init(s1, 5);
  GptGolden a(s1, p), b(s4, p);
  for (uint64_t step = 0; step < 3; ++step) {
    const std::vector<int32_t> w = gpt_windows(s1, text(), 9, step);
    const double la = a.step(w).loss, lb = b.step(w).loss;
    EXPECT_NEAR(la, lb, 1e-4 * la) << step;
    if (step == 0) {
      const GptParams ga = a.grads(0), gb = gpt_unshard(s4, {b.grads(0), b.grads(1)});
      for (std::size_t k = 0; k < ga.size(); ++k) {
        double m = 0, e = 0;
        for (std::size_t i = 0; i < ga[k].v.size(); ++i) {
          m = std::max(m, static_cast<double>(std::fabs(ga[k].v[i])));
          e = std::max(e, static_cast<double>(std::fabs(ga[k].v[i] - gb[k].v[i])));
        }
        EXPECT_LE(e, 0.02 * m) << ga[k].name;
      }
    }
  }
  // Replicas: both data ranks hold the same bits; replicated tensors equal across model ranks.
  for (int c = 0; c < 2; ++c)
    for (std::size_t k = 0; k < b.params(c).size(); ++k) {
      EXPECT_EQ(b.params(c)[k].v, b.params(c + 2)[k].v) << k;
      EXPECT_EQ(b.moment2(c)[k].v, b.moment2(c + 2)[k].v) << k;
    }
  EXPECT_EQ(b.params(0)[0].v, b.params(1)[0].v);
  EXPECT_EQ(b.params(0).back().v, b.params(1).back().v);
  EXPECT_EQ(b.params(0)[gpt_index(1, kBo)].v, b.params(1)[gpt_index(1, kBo)].v);
  EXPECT_NE(b.params(0)[gpt_index(1, kWo)].v, b.params(1)[gpt_index(1, kWo)].v);
}

// Data parallel only: the forward pass does not depend on the split, so the loss partials and
// the loss are the same bits; the gradients differ only in the data sum's order, so a reduce
// that continues the one chip's order cannot exist, but the data sum is the one given.
TEST(Gpt, DataParallelSameLossBits) {
  const GptSpec s1 = tiny(1, 1, 4), s2 = tiny(2, 1, 2);
  const GptParams p = gpt_init(s1, 4);
  GptGolden a(s1, p), b(s2, p);
  const std::vector<int32_t> w = gpt_windows(s1, text(), 1, 0);
  int calls = 0;
  const GptStepResult ra = a.step(w);
  const GptStepResult rb = b.step(w, [&](std::size_t k, const std::vector<std::vector<float>>& parts) {
    EXPECT_EQ(k, static_cast<std::size_t>(calls));  // each tensor once, in order
    ++calls;
    EXPECT_EQ(parts.size(), 2u);
    std::vector<float> s(parts[0].size());
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = parts[1][i] + parts[0][i];
    return s;
  });
  EXPECT_EQ(ra.loss, rb.loss);
  std::vector<float> cat = rb.loss_parts[0];
  cat.insert(cat.end(), rb.loss_parts[1].begin(), rb.loss_parts[1].end());
  EXPECT_EQ(ra.loss_parts[0], cat);
  EXPECT_EQ(calls, static_cast<int>(p.size()));
  EXPECT_EQ(b.params(0)[3].v, b.params(1)[3].v);
  // One chip's gradient of a bias is the token-order column sum; two chips' is the sum of two
  // halves: equal to rounding.
  for (std::size_t i = 0; i < 32; ++i)
    EXPECT_NEAR(a.grads(0)[gpt_index(0, kBo)].v[i], b.grads(0)[gpt_index(0, kBo)].v[i], 1e-6);
}

// Where the orders are the same the bits are: a data = 2 step's gradient is the fold g0 + g1 of
// two one-chip steps on each rank's windows (whose mean is over half the tokens: their
// gradients are twice as large, exactly, so halved), and its loss partials are theirs.
TEST(Gpt, DataParallelIsTheFoldOfOneChipSteps) {
  const GptSpec s1 = tiny(1, 1, 2), s2 = tiny(2, 1, 2);
  const GptParams p = gpt_init(s1, 8);
  const std::vector<int32_t> w = gpt_windows(s2, text(), 3, 0);
  const std::ptrdiff_t half = static_cast<std::ptrdiff_t>(w.size() / 2);
  GptGolden r0(s1, p), r1(s1, p), b(s2, p);
  const GptStepResult a0 = r0.step({w.begin(), w.begin() + half});
  const GptStepResult a1 = r1.step({w.begin() + half, w.end()});
  const GptStepResult rb = b.step(w);
  EXPECT_EQ(a0.loss_parts[0], rb.loss_parts[0]);
  EXPECT_EQ(a1.loss_parts[0], rb.loss_parts[1]);
  for (std::size_t k = 0; k < p.size(); ++k)
    for (std::size_t i = 0; i < p[k].v.size(); ++i)
      ASSERT_EQ(f32_bits(b.grads(1)[k].v[i]), f32_bits(f32_add(f32_mul(r0.grads(0)[k].v[i], 0.5f),
                                                               f32_mul(r1.grads(0)[k].v[i], 0.5f))))
          << p[k].name << " " << i;
}

// Micro-batches (issue 35): one chip's batch of 4 windows in 2 micro-batches accumulates g = g0 +
// g1 with the global loss scale, which is the data = 2 step's fold of the same halves: the same
// gradients, loss partials and updated parameters, bit for bit (a second formulation of the
// accumulation); against the whole batch at once only the rounding differs.
TEST(Gpt, MicrobatchesAccumulateAsTheDataFold) {
  GptSpec s1 = tiny(1, 1, 4);
  s1.microbatches = 2;
  const GptSpec s2 = tiny(2, 1, 2), whole = tiny(1, 1, 4);
  const GptParams p = gpt_init(s1, 5);
  GptGolden a(s1, p), b(s2, p), c(whole, p);
  for (uint64_t step = 0; step < 2; ++step) {
    const std::vector<int32_t> w = gpt_windows(s2, text(), 2, step);
    const GptStepResult ra = a.step(w), rb = b.step(w), rc = c.step(w);
    std::vector<float> cat = rb.loss_parts[0];
    cat.insert(cat.end(), rb.loss_parts[1].begin(), rb.loss_parts[1].end());
    EXPECT_EQ(ra.loss_parts[0], cat);
    EXPECT_EQ(ra.loss_parts[0], rc.loss_parts[0]);  // the forward does not see the split
    for (std::size_t k = 0; k < p.size(); ++k) {
      for (std::size_t i = 0; i < p[k].v.size(); ++i) {
        ASSERT_EQ(f32_bits(a.grads(0)[k].v[i]), f32_bits(b.grads(0)[k].v[i])) << p[k].name << i;
        ASSERT_EQ(f32_bits(a.params(0)[k].v[i]), f32_bits(b.params(1)[k].v[i])) << p[k].name;
        ASSERT_NEAR(a.grads(0)[k].v[i], c.grads(0)[k].v[i],
                    1e-6 + 1e-3 * std::fabs(c.grads(0)[k].v[i]));
      }
    }
  }
}

TEST(Gpt, AdamElementMatchesF64) {
  GptSpec s = tiny();
  s.lr = 3e-3f;
  s.weight_decay = 0.1f;
  s.warmup = 4;
  const AdamConsts k1 = gpt_adam_consts(s, 1), k5 = gpt_adam_consts(s, 5);
  EXPECT_FLOAT_EQ(k1.lr, 3e-3f / 4);
  EXPECT_FLOAT_EQ(k5.lr, 3e-3f);
  EXPECT_FLOAT_EQ(k1.bc1, 10.0f);
  EXPECT_FLOAT_EQ(k1.bc2, 20.0f);
  // Step 1: m hat = g, v hat = g^2, so w moves by lr x g / (|g| + eps) after the decay.
  for (float g0 : {0.5f, -2e-3f, 1e-6f, 0.0f}) {
    float w = 0.25f, m = 0, v = 0;
    gpt_adam_element(k1, true, g0, w, m, v);
    const double gd = g0,
                 want = 0.25 * (1.0 - 3e-3 / 4 * 0.1) - 3e-3 / 4 * gd / (std::fabs(gd) + 1e-8);
    EXPECT_NEAR(w, want, 1e-6) << g0;
    float w2 = 0.25f, m2 = 0, v2 = 0;
    gpt_adam_element(k1, false, g0, w2, m2, v2);  // a gain or bias: no decay
    EXPECT_NEAR(w2, 0.25 - 3e-3 / 4 * gd / (std::fabs(gd) + 1e-8), 1e-6) << g0;
  }
}

// Decoupled weight decay touches the matrices only: with and without it, one step from the
// same parameters (the same gradients; biases made non-zero so a decay would show) leaves the
// gains and biases the same bits and every matrix different; the moments do not see it.
TEST(Gpt, WeightDecayOnMatricesOnly) {
  GptSpec s = tiny(1, 2, 1);
  GptSpec sd = s;
  sd.weight_decay = 0.5f;
  GptParams p = gpt_init(s, 2);
  for (GptTensor& t : p)
    if (!t.matrix())
      for (float& x : t.v) x += 0.25f;
  const std::vector<int32_t> w = gpt_windows(s, text(), 4, 0);
  GptGolden a(s, p), b(sd, p);
  a.step(w);
  b.step(w);
  for (int c = 0; c < 2; ++c)
    for (std::size_t k = 0; k < p.size(); ++k) {
      const GptTensor& x = a.params(c)[k];
      if (x.matrix())
        EXPECT_NE(x.v, b.params(c)[k].v) << x.name;
      else
        EXPECT_EQ(x.v, b.params(c)[k].v) << x.name;
      EXPECT_EQ(a.moment2(c)[k].v, b.moment2(c)[k].v) << x.name;
    }
}

TEST(Gpt, GeluGradMatchesF64) {
  for (float x = -6.0f; x <= 6.0f; x += 0.0625f)
    EXPECT_NEAR(gpt_gelu_grad(x), ref::gelu_d(x), 2e-6) << x;
}

TEST(Gpt, LayerNormMatchesF64AndUsesTheLaneOrder) {
  const std::size_t n = 48;
  std::vector<float> x(n), g(n, 1.5f), b(n, -0.25f), xh, rs;
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(gpt_normal(3, i)) * 4.0f + 100.0f;
  const std::vector<float> y = gpt_layernorm(x, 1, n, g, b, 8, xh, rs);
  ref::Vec xd(x.begin(), x.end()), gd(g.begin(), g.end()), bd(b.begin(), b.end());
  ref::Ln c;
  const ref::Vec yd = ref::ln_fwd(xd, 1, n, gd, bd, c);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], yd[i], 2e-5) << i;
  // The mean and variance are vector_reduce's order (per lane in beat order, then the tree):
  // recompute rstd from its definition and compare bits.
  const float inv_n = xcend_rcp(48.0f);
  const float mean = f32_mul(vector_reduce(VpuOp::kRedSum, x, 8), inv_n);
  std::vector<float> sq(n);
  for (std::size_t i = 0; i < n; ++i) sq[i] = f32_mul(f32_sub(x[i], mean), f32_sub(x[i], mean));
  const float var = f32_mul(vector_reduce(VpuOp::kRedSum, sq, 8), inv_n);
  EXPECT_EQ(f32_bits(rs[0]), f32_bits(xcend_rsqrt(f32_add(var, 1e-5f))));
  EXPECT_EQ(f32_bits(y[5]),
            f32_bits(f32_add(f32_mul(f32_mul(f32_sub(x[5], mean), rs[0]), 1.5f), -0.25f)));
}

// Column sums: 16 partials by row mod 16, folded in halves. An independent f64 sum bounds it, and
// a second formulation (the partials as 16 sequential sums, then the tree by hand) gives its bits.
TEST(Gpt, ColumnSumsFoldSixteenPartials) {
  const std::size_t rows = 40, cols = 8;
  std::vector<float> x(rows * cols), acc(cols, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(gpt_normal(5, i)) * 3.0f;
  x[3] = -0.0f;
  gpt_col_sum(acc, x, rows, cols);
  for (std::size_t j = 0; j < cols; ++j) {
    double f = 0, a = 0;
    std::vector<float> p(16, 0.0f);
    for (std::size_t t = 0; t < rows; ++t) {
      f += x[t * cols + j];
      a += std::fabs(x[t * cols + j]);
      p[t % 16] = f32_add(p[t % 16], x[t * cols + j]);
    }
    EXPECT_LE(std::fabs(acc[j] - f), static_cast<double>(rows) * 0x1p-24 * a) << j;
    const float q0 = f32_add(f32_add(f32_add(p[0], p[8]), f32_add(p[4], p[12])),
                             f32_add(f32_add(p[2], p[10]), f32_add(p[6], p[14])));
    const float q1 = f32_add(f32_add(f32_add(p[1], p[9]), f32_add(p[5], p[13])),
                             f32_add(f32_add(p[3], p[11]), f32_add(p[7], p[15])));
    EXPECT_EQ(f32_bits(acc[j]), f32_bits(f32_add(0.0f, f32_add(q0, q1)))) << j;
  }
}

// The causal softmax: each row a distribution over positions <= its own (f64), masked entries
// exactly +0; its backward against the f64 formula.
TEST(Gpt, CausalSoftmaxAndItsBackwardMatchF64) {
  const std::size_t S = 16, rows = 2 * S;
  const float scale = xcend_rsqrt(16.0f);
  std::vector<float> z(rows * S), dp(rows * S);
  for (std::size_t i = 0; i < z.size(); ++i) {
    z[i] = static_cast<float>(gpt_normal(7, i)) * 4.0f;
    dp[i] = static_cast<float>(gpt_normal(8, i));
  }
  const std::vector<float> p = gpt_causal_softmax(z, rows, S, scale, 8);
  const std::vector<float> ds = gpt_softmax_back(p, dp, rows, S, scale, 8);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t i = r % S;
    double mx = -1e300, sum = 0, dot = 0;
    for (std::size_t k = 0; k <= i; ++k) mx = std::max(mx, z[r * S + k] * 0.25);
    for (std::size_t k = 0; k <= i; ++k) sum += std::exp(z[r * S + k] * 0.25 - mx);
    for (std::size_t k = 0; k < S; ++k) dot += static_cast<double>(p[r * S + k]) * dp[r * S + k];
    for (std::size_t k = 0; k < S; ++k) {
      const double want = k <= i ? std::exp(z[r * S + k] * 0.25 - mx) / sum : 0.0;
      if (k > i) {
        EXPECT_EQ(f32_bits(p[r * S + k]), 0u) << r << "," << k;
      }
      EXPECT_NEAR(p[r * S + k], want, 4e-7 + 1e-5 * want) << r << "," << k;
      const double dsw = static_cast<double>(p[r * S + k]) * (dp[r * S + k] - dot) * 0.25;
      EXPECT_NEAR(ds[r * S + k], dsw, 1e-6) << r << "," << k;
    }
  }
}

// The cross-entropy: the loss is log-sum-exp minus the target's logit (f64), dlogits the
// softmax minus one-hot over N.
TEST(Gpt, CrossEntropyMatchesF64) {
  const std::size_t T = 8, V = 64;
  std::vector<float> logits(T * V), loss, dl;
  std::vector<int32_t> tgt(T);
  for (std::size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>(gpt_normal(9, i)) * 2.0f;
  for (std::size_t t = 0; t < T; ++t) tgt[t] = static_cast<int32_t>((t * 37) % V);
  const float inv_n = xcend_rcp(static_cast<float>(T));
  gpt_cross_entropy(logits, tgt, V, inv_n, 8, loss, dl);
  for (std::size_t t = 0; t < T; ++t) {
    double mx = -1e300, sum = 0;
    for (std::size_t k = 0; k < V; ++k) mx = std::max(mx, static_cast<double>(logits[t * V + k]));
    for (std::size_t k = 0; k < V; ++k) sum += std::exp(logits[t * V + k] - mx);
    const double lse = mx + std::log(sum);
    const std::size_t y = static_cast<std::size_t>(tgt[t]);
    EXPECT_NEAR(loss[t], lse - logits[t * V + y], 2e-5) << t;
    for (std::size_t k = 0; k < V; ++k) {
      const double want = (std::exp(logits[t * V + k] - lse) - (k == y ? 1.0 : 0.0)) / T;
      EXPECT_NEAR(dl[t * V + k], want, 1e-7) << t << "," << k;
    }
  }
}

// The tiny model of scripts/run.sh's shape (2 layers, d 32, 2 heads) with S 16 on a fixed text:
// the loss starts near ln 256 and falls by >= 30% in 20 steps.
TEST(Gpt, LossFallsOnAFixedText) {
  GptSpec s = tiny(2, 2, 2);
  s.seq = 16;
  s.lr = 1e-2f;
  GptGolden g(s, gpt_init(s, 1));
  std::vector<double> loss;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t step = 0; step < 20; ++step)
    loss.push_back(g.step(gpt_windows(s, text(), 1, step)).loss);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("loss:");
  for (double l : loss) std::printf(" %.3f", l);
  std::printf("\n(%.2f s)\n", secs);
  EXPECT_NEAR(loss[0], std::log(256.0), 0.15);
  EXPECT_LE(loss.back(), 0.7 * loss[0]);
}

// scripts/run.sh's model (2 layers, d 32, 2 heads, S 32, global batch 8, data = 2 x model = 2)
// on the project's docs, 20 steps: the loss falls by >= 30% from about ln 256. It measured 5.544
// -> 3.686 (33.5%): the docs' byte statistics leave little margin at 20 steps (lr 5e-3 .. 3e-2
// and a 5-step warmup all end at 3.65 .. 3.69), so the issue's 30% is tight on this text. The
// docs change with every session, so this runs as a soak (label soak); the default run's
// LossFallsOnAFixedText above holds the same claim on a text that does not move.
TEST(GptSoak, LossFallsOnTheProjectDocs) {
  GptSpec s = tiny(2, 2, 4);
  s.seq = 32;
  s.lr = 1e-2f;
  const std::vector<uint8_t> docs = project_docs();
  ASSERT_GT(docs.size(), 10000u);
  GptGolden g(s, gpt_init(s, 1));
  std::vector<double> loss;
  for (uint64_t step = 0; step < 20; ++step)
    loss.push_back(g.step(gpt_windows(s, docs, 1, step)).loss);
  std::printf("loss on docs/*.md:");
  for (double l : loss) std::printf(" %.3f", l);
  std::printf("\n");
  EXPECT_NEAR(loss[0], std::log(256.0), 0.15);
  EXPECT_LE(loss.back(), 0.7 * loss[0]);
}

}  // namespace
}  // namespace tpu
