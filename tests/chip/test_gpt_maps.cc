// The GPT step's VPU maps (sw/driver/gpt_maps.h) on the RTL chip, 4x4 and 16x16: layer norm and
// its backward, the causal softmax and its backward, the cross-entropy, the loss per window, GELU
// and its backward, a bias gradient and AdamW, every output bit against the GPT golden's
// functions (model/, tpu/gpt.h), with random data and special values; one map that streams in
// several chunks (row values and column sums across chunk boundaries); and the maps' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpt_maps.h"
#include "lone_chip.h"
#include "tpu/bf16.h"
#include "tpu/gpt.h"
#include "tpu/transcend.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

std::vector<float> randn(std::size_t n, uint64_t seed, float scale, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(mean, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// A chip, its constants, and matrices in its HBM.
class Rig {
 public:
  // d: the model width (LN's 1/d constant).
  explicit Rig(const std::string& variant, std::size_t d = 32) : drv_(variant) {
    spec_.d_model = d;
    spec_.heads = 2;
    spec_.seq = 16;
    spec_.batch = 2;
    spec_.data = 2;
    spec_.lanes = drv_.shape().cols;
    adam_ = gpt_adam_consts(spec_, 3);
    consts_ = matrix(kGcCount, drv_.shape().cols,
                     gpt_const_image(spec_, adam_, drv_.shape().cols));
  }
  std::size_t lanes() const { return drv_.shape().cols; }
  const GptSpec& spec() const { return spec_; }
  const AdamConsts& adam() const { return adam_; }
  const HbmMatrix& consts() const { return consts_; }

  HbmMatrix matrix(std::size_t rows, std::size_t cols, const std::vector<float>& v = {}) {
    HbmMatrix m{drv_.alloc(rows * cols * 4 + 64), rows, cols, cols, Dtype::kF32};
    if (!v.empty()) drv_.write(m.addr, v.data(), v.size() * 4);
    return m;
  }
  HbmMatrix bf16(std::size_t rows, std::size_t cols, const std::vector<float>& v = {}) {
    HbmMatrix m{drv_.alloc(rows * cols * 2 + 64), rows, cols, cols, Dtype::kBf16};
    if (!v.empty()) {
      const std::vector<bf16_t> b = vector_to_bf16(v);
      drv_.write(m.addr, b.data(), b.size() * 2);
    }
    return m;
  }
  // A vector of n values (rounded up for per-row values).
  HbmMatrix vec(std::size_t n, const std::vector<float>& v = {}) {
    const std::size_t q = std::max<std::size_t>(16, lanes()), m = (n + q - 1) / q * q;
    std::vector<float> pad = v;
    if (!pad.empty()) pad.resize(m, 0.0f);
    return matrix(1, m, pad);
  }
  // Plans the map (VMEM rows [0, vmem_rows), all of them by default) and runs it; returns the
  // chunk.
  std::size_t run(const VpuMap& m, const char* what, uint32_t vmem_rows = 0) {
    VpuMapPlan p = plan_vpu_map(m, drv_.shape(), 0, vmem_rows ? vmem_rows : drv_.shape().vmem_rows);
    p.prog.push_back(cmd_halt());
    const ProgramResult r = drv_.run(p.prog);
    EXPECT_EQ(r.err, 0u);
    std::printf("[gpt map] %s on %s: %zu commands, %llu cycles, chunk %zu rows, %zu slot(s)\n",
                what, drv_.shape().cols == 4 ? "4x4" : "16x16", p.prog.size(),
                static_cast<unsigned long long>(r.cycles), p.chunk, p.slots);
    return p.chunk;
  }
  ChipShape shape() const { return drv_.shape(); }
  std::vector<float> f32(const HbmMatrix& m, std::size_t n) {
    std::vector<float> v(n);
    drv_.read(m.addr, v.data(), n * 4);
    return v;
  }
  std::vector<bf16_t> bf16_of(const HbmMatrix& m) {
    std::vector<bf16_t> v(m.rows * m.cols);
    drv_.read(m.addr, v.data(), v.size() * 2);
    return v;
  }

 private:
  LoneChip drv_;
  GptSpec spec_;
  AdamConsts adam_{};
  HbmMatrix consts_;
};

void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (f32_bits(got[i]) != f32_bits(want[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": first at " << first << ": got " << got[first] << " want "
                     << want[first];
}

void expect_bf16(const std::vector<bf16_t>& got, const std::vector<float>& want,
                 const std::string& what) {
  const std::vector<bf16_t> w = vector_to_bf16(want);
  ASSERT_EQ(got.size(), w.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != w[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": first at " << first;
}

class GptMaps : public ::testing::TestWithParam<const char*> {};

TEST_P(GptMaps, LayerNormForwardAndBackwardAreTheGoldens) {
  Rig rig(GetParam());
  const std::size_t T = 48, d = 32, L = rig.lanes();
  std::vector<float> x = randn(T * d, 1, 2.0f, 0.5f), g = randn(d, 2, 0.3f, 1.0f),
                     bias = randn(d, 3, 0.1f), dy = randn(T * d, 4, 1.0f);
  x[7] = -0.0f;
  dy[9] = -0.0f;
  std::vector<float> xhat, rstd, dg(d, 0.0f), db(d, 0.0f);
  const std::vector<float> y = gpt_layernorm(x, T, d, g, bias, L, xhat, rstd);
  const std::vector<float> dx = gpt_layernorm_back(dy, xhat, rstd, T, d, g, L, dg, db);

  const HbmMatrix hx = rig.matrix(T, d, x), hg = rig.matrix(1, d, g), hb = rig.matrix(1, d, bias);
  const HbmMatrix hy = rig.bf16(T, d), hxh = rig.matrix(T, d), hrs = rig.vec(T);
  rig.run(gpt_ln_forward_map(rig.consts(), hx, hg, hb, hy, hxh, hrs), "ln forward");
  expect_bf16(rig.bf16_of(hy), y, "y");
  expect_bits(rig.f32(hxh, T * d), xhat, "xhat");
  expect_bits(rig.f32(hrs, T), rstd, "rstd");

  const HbmMatrix hdy = rig.matrix(T, d, dy), hdx = rig.matrix(T, d), hdg = rig.matrix(1, d),
                  hdb = rig.matrix(1, d);
  rig.run(gpt_ln_backward_map(rig.consts(), hdy, hxh, hrs, hg, hdx, hdg, hdb), "ln backward");
  expect_bits(rig.f32(hdx, T * d), dx, "dx");
  expect_bits(rig.f32(hdg, d), dg, "dg");
  expect_bits(rig.f32(hdb, d), db, "db");
}

TEST_P(GptMaps, CausalSoftmaxAndItsBackwardAreTheGoldens) {
  Rig rig(GetParam());
  const std::size_t S = 32, rows = 4 * S, L = rig.lanes();
  const float scale = xcend_rsqrt(16.0f);
  std::vector<float> z = randn(rows * S, 5, 3.0f), dp = randn(rows * S, 6, 1.0f);
  z[3] = std::numeric_limits<float>::infinity();  // masked (k > i): still exactly 0
  z[S * 5 + 2] = -0.0f;
  const std::vector<float> p = gpt_causal_softmax(z, rows, S, scale, L);
  const std::vector<float> ds = gpt_softmax_back(p, dp, rows, S, scale, L);
  const HbmMatrix hz = rig.matrix(rows, S, z), hm = rig.bf16(rows, S, gpt_causal_mask(rows, S));
  const HbmMatrix hp = rig.matrix(rows, S), hpb = rig.bf16(rows, S);
  rig.run(gpt_softmax_map(rig.consts(), hz, hm, hp, hpb), "softmax");
  expect_bits(rig.f32(hp, rows * S), p, "p");
  expect_bf16(rig.bf16_of(hpb), p, "p bf16");
  const HbmMatrix hdp = rig.matrix(rows, S, dp), hds = rig.bf16(rows, S);
  rig.run(gpt_softmax_back_map(rig.consts(), hp, hdp, hds), "softmax backward");
  expect_bf16(rig.bf16_of(hds), ds, "ds");
}

// A cross-entropy case on the rig: T = batch x seq rows of V = 64 logits (seed), targets
// (t * mul + add) mod V, the golden's loss and dlogits, and the map's HBM matrices (sel as the
// trainer keeps it: bf16, -0 and -Inf exact). neg_zero: row 5's target logit is -0.
struct CrossEntropyCase {
  std::size_t T = 0;
  std::vector<float> loss, dl;
  HbmMatrix hl, hs, hloss, hdl;
};
CrossEntropyCase cross_entropy_case(Rig& rig, uint64_t seed, std::size_t mul, std::size_t add,
                                    bool neg_zero) {
  const GptSpec& s = rig.spec();
  CrossEntropyCase c;
  c.T = s.batch * s.seq;
  const std::size_t V = 64;
  std::vector<float> logits = randn(c.T * V, seed, 2.0f);
  std::vector<int32_t> tgt(c.T);
  for (std::size_t t = 0; t < c.T; ++t) tgt[t] = static_cast<int32_t>((t * mul + add) % V);
  if (neg_zero) logits[5 * V + static_cast<std::size_t>(tgt[5])] = -0.0f;
  const float inv_n = xcend_rcp(static_cast<float>(s.global_batch() * s.seq));
  gpt_cross_entropy(logits, tgt, V, inv_n, rig.lanes(), c.loss, c.dl);
  c.hl = rig.matrix(c.T, V, logits);
  c.hs = rig.bf16(c.T, V, gpt_target_sel(tgt, V));
  c.hloss = rig.vec(c.T);
  c.hdl = rig.bf16(c.T, V);
  return c;
}

TEST_P(GptMaps, CrossEntropyAndWindowLossesAreTheGoldens) {
  Rig rig(GetParam());
  const GptSpec& s = rig.spec();
  const CrossEntropyCase c = cross_entropy_case(rig, 7, 29, 3, true);
  const std::size_t T = c.T, L = rig.lanes();
  const HbmMatrix hloss = c.hloss, hparts = rig.vec(s.batch);
  std::vector<float> parts(s.batch);
  for (std::size_t b = 0; b < s.batch; ++b)
    parts[b] = vector_reduce(
        VpuOp::kRedSum,
        std::vector<float>(c.loss.begin() + static_cast<std::ptrdiff_t>(b * s.seq),
                           c.loss.begin() + static_cast<std::ptrdiff_t>((b + 1) * s.seq)),
        L);
  rig.run(gpt_cross_entropy_map(rig.consts(), c.hl, c.hs, hloss, c.hdl), "cross-entropy");
  expect_bits(rig.f32(hloss, T), c.loss, "loss");
  expect_bf16(rig.bf16_of(c.hdl), c.dl, "dlogits");
  const HbmMatrix loss_bs{hloss.addr, s.batch, s.seq, s.seq, Dtype::kF32};
  rig.run(gpt_window_loss_map(loss_bs, hparts), "window losses");
  expect_bits(rig.f32(hparts, s.batch), parts, "loss parts");
}

// Where VMEM holds a chunk's values once but not twice (the v4 scale model's maps beside its
// collectives), the map runs chunk after chunk instead of refusing: the same bits.
TEST_P(GptMaps, CrossEntropyRunsSingleBufferedWhereTwoChunksDoNotFit) {
  Rig rig(GetParam());
  const CrossEntropyCase c = cross_entropy_case(rig, 8, 13, 5, false);
  const VpuMap m = gpt_cross_entropy_map(rig.consts(), c.hl, c.hs, c.hloss, c.hdl);
  // The fewest VMEM rows that plan at all, and the fewest that plan double-buffered.
  auto slots_at = [&](uint32_t rows) -> std::size_t {
    try {
      return plan_vpu_map(m, rig.shape(), 0, rows).slots;
    } catch (const std::invalid_argument&) {
      return 0;
    }
  };
  uint32_t least = 1, least_double = 0;
  while (slots_at(least) == 0) ++least;
  for (uint32_t r = least; r <= rig.shape().vmem_rows && !least_double; ++r)
    if (slots_at(r) == 2) least_double = r;
  ASSERT_GT(least_double, least) << "no VMEM size where only one set of the chunk fits";
  EXPECT_EQ(slots_at(least), 1u);
  EXPECT_EQ(slots_at(least_double - 1), 1u);
  // One block of 16 rows a chunk: two chunks, the second loaded after the first is stored.
  EXPECT_EQ(rig.run(m, "cross-entropy (one slot)", least), 16u);
  expect_bits(rig.f32(c.hloss, c.T), c.loss, "loss");
  expect_bf16(rig.bf16_of(c.hdl), c.dl, "dlogits");
  // Below the one set: the rule, as before.
  std::string msg = "no error";
  try {
    plan_vpu_map(m, rig.shape(), 0, least - 1);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("hold less than one matrix row of every operand"), std::string::npos) << msg;
}

TEST_P(GptMaps, GeluItsBackwardAndABiasGradientAreTheGoldens) {
  Rig rig(GetParam());
  const std::size_t T = 32, f = 64;
  std::vector<float> u = randn(T * f, 8, 2.0f), da = randn(T * f, 9, 1.0f);
  u[1] = -0.0f;
  u[2] = 12.0f;
  u[3] = -12.0f;
  std::vector<float> a(T * f), du(T * f), db(f, 0.0f);
  for (std::size_t i = 0; i < u.size(); ++i) {
    a[i] = xcend_gelu(u[i]);
    du[i] = f32_mul(da[i], gpt_gelu_grad(u[i]));
  }
  gpt_col_sum(db, du, T, f);
  const HbmMatrix hu = rig.matrix(T, f, u), ha = rig.bf16(T, f);
  rig.run(gpt_gelu_map(rig.consts(), hu, ha), "gelu");
  expect_bf16(rig.bf16_of(ha), a, "gelu");
  const HbmMatrix hda = rig.matrix(T, f, da), hdu = rig.bf16(T, f), hdb = rig.matrix(1, f);
  rig.run(gpt_gelu_back_map(rig.consts(), hda, hu, hdu, hdb), "gelu backward");
  expect_bf16(rig.bf16_of(hdu), du, "du");
  expect_bits(rig.f32(hdb, f), db, "db1");
  // The backward that reads the forward's s: the same bits.
  const HbmMatrix hs = rig.matrix(T, f), hdu2 = rig.bf16(T, f), hdb1 = rig.matrix(1, f);
  rig.run(gpt_gelu_map(rig.consts(), hu, ha, &hs), "gelu (s kept)");
  expect_bf16(rig.bf16_of(ha), a, "gelu, s kept");
  rig.run(gpt_gelu_back_map(rig.consts(), hda, hu, hdu2, hdb1, &hs), "gelu backward (s read)");
  expect_bf16(rig.bf16_of(hdu2), du, "du, s read");
  expect_bits(rig.f32(hdb1, f), db, "db1, s read");
  std::vector<float> db2(f, 0.0f);
  gpt_col_sum(db2, da, T, f);
  const HbmMatrix hdb2 = rig.matrix(1, f);
  rig.run(gpt_col_sum_map(rig.consts(), hda, hdb2), "bias gradient");
  expect_bits(rig.f32(hdb2, f), db2, "column sums");
}

TEST_P(GptMaps, AdamWIsTheGoldensElementByElement) {
  Rig rig(GetParam());
  const std::size_t rows = 16, cols = 32, n = rows * cols;
  std::vector<float> w = randn(n, 10, 0.02f), g = randn(n, 11, 0.01f), m = randn(n, 12, 0.001f),
                     v = randn(n, 13, 1e-3f);
  for (auto& x : v) x = std::fabs(x) * 1e-3f;
  g[4] = 0.0f;
  v[4] = 0.0f;  // sqrt(0) through rcp(rsqrt(0)) = 0
  for (bool decay : {true, false}) {
    GptSpec s = rig.spec();
    std::vector<float> ww = w, mm = m, vv = v;
    for (std::size_t i = 0; i < n; ++i) gpt_adam_element(rig.adam(), decay, g[i], ww[i], mm[i], vv[i]);
    const HbmMatrix hw = rig.matrix(rows, cols, w), hg = rig.matrix(rows, cols, g),
                    hm = rig.matrix(rows, cols, m), hv = rig.matrix(rows, cols, v),
                    hwb = rig.bf16(rows, cols);
    rig.run(gpt_adam_map(rig.consts(), hw, hg, hm, hv, decay, hwb), decay ? "adamw" : "adam");
    expect_bits(rig.f32(hw, n), ww, "w");
    expect_bits(rig.f32(hm, n), mm, "m");
    expect_bits(rig.f32(hv, n), vv, "v");
    expect_bf16(rig.bf16_of(hwb), ww, "w bf16");
  }
}

// Rows that do not fit one chunk: the per-row values, the per-column inputs and the column sums
// carry across chunks (1024 rows of 64 on the 4x4 chip's 4096 VMEM rows).
TEST_P(GptMaps, LayerNormStreamsInChunks) {
  Rig rig(GetParam(), 64);
  const std::size_t T = 1024, d = 64, L = rig.lanes();
  std::vector<float> x = randn(T * d, 14, 1.0f), g = randn(d, 15, 0.2f, 1.0f),
                     bias = randn(d, 16, 0.1f), dy = randn(T * d, 17, 1.0f);
  std::vector<float> xhat, rstd, dg(d, 0.0f), db(d, 0.0f);
  const std::vector<float> y = gpt_layernorm(x, T, d, g, bias, L, xhat, rstd);
  const std::vector<float> dx = gpt_layernorm_back(dy, xhat, rstd, T, d, g, L, dg, db);
  const HbmMatrix hx = rig.matrix(T, d, x), hg = rig.matrix(1, d, g), hb = rig.matrix(1, d, bias);
  const HbmMatrix hy = rig.bf16(T, d), hxh = rig.matrix(T, d), hrs = rig.vec(T);
  const std::size_t chunk =
      rig.run(gpt_ln_forward_map(rig.consts(), hx, hg, hb, hy, hxh, hrs), "ln forward (chunks)");
  EXPECT_LT(chunk, T);
  EXPECT_EQ(chunk % 16, 0u);
  expect_bf16(rig.bf16_of(hy), y, "y");
  expect_bits(rig.f32(hrs, T), rstd, "rstd");
  const HbmMatrix hdy = rig.matrix(T, d, dy), hdx = rig.matrix(T, d), hdg = rig.matrix(1, d),
                  hdb = rig.matrix(1, d);
  rig.run(gpt_ln_backward_map(rig.consts(), hdy, hxh, hrs, hg, hdx, hdg, hdb),
          "ln backward (chunks)");
  expect_bits(rig.f32(hdx, T * d), dx, "dx");
  expect_bits(rig.f32(hdg, d), dg, "dg");
  expect_bits(rig.f32(hdb, d), db, "db");
  // Independent: db against an f64 column sum, within the rounding of its adds.
  for (std::size_t j = 0; j < d; ++j) {
    double f = 0, a = 0;
    for (std::size_t t = 0; t < T; ++t) {
      f += dy[t * d + j];
      a += std::fabs(dy[t * d + j]);
    }
    EXPECT_LE(std::fabs(rig.f32(hdb, d)[j] - f), static_cast<double>(T) * 0x1p-24 * a) << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, GptMaps, ::testing::Values("4x4", "16x16"),
                         [](const auto& p) { return std::string(p.param); });

// What a map cannot run names the operand and the rule.
TEST(GptMapErrors, BadShapesNameTheOperandAndTheRule) {
  const ChipShape s = chip_shape("4x4");
  const HbmMatrix consts{0, kGcCount, 4, 4, Dtype::kF32};
  const HbmMatrix x{4096, 40, 32, 32, Dtype::kF32}, g{65536, 1, 32, 32, Dtype::kF32};
  const HbmMatrix dy{131072, 40, 32, 32, Dtype::kF32}, dg{262144, 1, 32, 32, Dtype::kF32};
  const HbmMatrix rs{270336, 1, 48, 48, Dtype::kF32}, short_rs{270336, 1, 32, 32, Dtype::kF32};
  auto expect_error = [&](const VpuMap& m, const std::string& part) {
    std::string msg = "no error";
    try {
      plan_vpu_map(m, s, 0, s.vmem_rows);
    } catch (const std::invalid_argument& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  };
  const HbmMatrix x48{4096, 48, 32, 32, Dtype::kF32}, y48{32768, 48, 32, 32, Dtype::kBf16};
  // 40 rows: not whole blocks of 16 for the column sums.
  expect_error(gpt_ln_backward_map(consts, dy, x, rs, g, x, dg, dg), "multiple of 16");
  // A per-row vector shorter than the rows rounded up.
  expect_error(gpt_ln_forward_map(consts, x48, g, g, y48, x48, short_rs), "1 x at least 48");
  // A per-column vector of the wrong width.
  const HbmMatrix g16{65536, 1, 16, 16, Dtype::kF32};
  expect_error(gpt_ln_forward_map(consts, x48, g16, g, y48, x48, rs), "per column");
  // A row reduction of a row value, a matrix op with a row value as x, a per-row exp.
  VpuMap m;
  m.rows = 16;
  m.cols = 32;
  m.in = {x48};
  m.in[0].rows = 16;
  m.ops = {{VpuOp::kRedSum, 0, -1, false}, {VpuOp::kRedSum, 1, -1, false}};
  expect_error(m, "a row reduction takes one f32 matrix value");
  m.ops = {{VpuOp::kRedSum, 0, -1, false}, {VpuOp::kSub, 1, 0, false}};
  expect_error(m, "x is a row value");
  m.ops = {{VpuOp::kRedSum, 0, -1, false}, {VpuOp::kExp, 0, 1, false}};
  expect_error(m, "a per-row y takes add, sub, mul, max or min");
  // A bf16 output of 16 columns: 32 bytes, not a whole burst.
  const HbmMatrix z{4096, 32, 16, 16, Dtype::kF32}, zb{65536, 32, 16, 16, Dtype::kBf16};
  expect_error(gpt_softmax_map(consts, z, z, z, zb), "whole 64-byte bursts");
}

}  // namespace
}  // namespace tpu
