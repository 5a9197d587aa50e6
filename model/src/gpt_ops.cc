// The GPT golden's f32 ops: AdamW, LayerNorm forward and backward, GELU's derivative, and the
// helpers of model/src/gpt_ops.h. Every op is one f32 VPU op (tpu/vector.h) or one function of
// the transcendental unit (tpu/transcend.h), in the order written.
#include "gpt_ops.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "tpu/gpt.h"
#include "tpu/matmul.h"
#include "tpu/transcend.h"

namespace tpu {

namespace gpt_detail {

std::vector<bf16_t> to_bf16(const std::vector<float>& x) { return vector_to_bf16(x); }

std::vector<float> transpose(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  std::vector<float> t(x.size());
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  return t;
}

std::vector<float> mm(const std::vector<float>& a, const std::vector<float>& w, std::size_t m,
                      std::size_t k, std::size_t n) {
  return golden_matmul(to_bf16(a), to_bf16(w), m, k, n);
}

void col_sum(std::vector<float>& acc, const std::vector<float>& x, std::size_t rows,
             std::size_t cols) {
  gpt_col_sum(acc, x, rows, cols);
}

float row_reduce(VpuOp op, const std::vector<float>& x, std::size_t off, std::size_t n,
                 std::size_t lanes) {
  const std::vector<float> row(x.begin() + static_cast<std::ptrdiff_t>(off),
                               x.begin() + static_cast<std::ptrdiff_t>(off + n));
  return vector_reduce(op, row, lanes);
}

void add_into(std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = f32_add(a[i], b[i]);
}

}  // namespace gpt_detail

using namespace gpt_detail;

AdamConsts gpt_adam_consts(const GptSpec& spec, uint64_t t) {
  if (t == 0) throw std::invalid_argument("gpt_adam_consts: steps count from 1");
  double lr = spec.lr;
  if (spec.warmup > 0 && t < spec.warmup)
    lr = lr * static_cast<double>(t) / static_cast<double>(spec.warmup);
  double p1 = spec.beta1, p2 = spec.beta2;
  for (uint64_t i = 1; i < t; ++i) {
    p1 *= static_cast<double>(spec.beta1);
    p2 *= static_cast<double>(spec.beta2);
  }
  AdamConsts k;
  k.lr = static_cast<float>(lr);
  k.bc1 = static_cast<float>(1.0 / (1.0 - p1));
  k.bc2 = static_cast<float>(1.0 / (1.0 - p2));
  k.decay = static_cast<float>(1.0 - lr * static_cast<double>(spec.weight_decay));
  k.beta1 = spec.beta1;
  k.one_m_beta1 = f32_sub(1.0f, spec.beta1);
  k.beta2 = spec.beta2;
  k.one_m_beta2 = f32_sub(1.0f, spec.beta2);
  k.eps = spec.eps;
  return k;
}

void gpt_adam_element(const AdamConsts& k, bool decay, float g, float& w, float& m, float& v) {
  m = f32_add(f32_mul(k.beta1, m), f32_mul(k.one_m_beta1, g));
  v = f32_add(f32_mul(k.beta2, v), f32_mul(k.one_m_beta2, f32_mul(g, g)));
  const float mh = f32_mul(m, k.bc1), vh = f32_mul(v, k.bc2);
  // sqrt(vh) as rcp(rsqrt(vh)): sqrt(0) = rcp(Inf) = 0, where vh x rsqrt(vh) would give NaN.
  const float den = f32_add(xcend_rcp(xcend_rsqrt(vh)), k.eps);
  const float u = f32_mul(mh, xcend_rcp(den));
  if (decay) w = f32_mul(w, k.decay);
  w = f32_sub(w, f32_mul(k.lr, u));
}

void gpt_col_sum(std::vector<float>& acc, const std::vector<float>& x, std::size_t rows,
                 std::size_t cols) {
  constexpr std::size_t kParts = 16;
  std::vector<float> p(kParts * cols, 0.0f);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t j = 0; j < cols; ++j)
      p[(t % kParts) * cols + j] = f32_add(p[(t % kParts) * cols + j], x[t * cols + j]);
  for (std::size_t h = kParts / 2; h >= 1; h /= 2)
    for (std::size_t i = 0; i < h * cols; ++i) p[i] = f32_add(p[i], p[i + h * cols]);
  for (std::size_t j = 0; j < cols; ++j) acc[j] = f32_add(acc[j], p[j]);
}

std::vector<float> gpt_causal_softmax(const std::vector<float>& z, std::size_t rows, std::size_t S,
                                      float scale, std::size_t lanes) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> p(rows * S), t(S), e(S);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t i = r % S;
    for (std::size_t k = 0; k < S; ++k)
      t[k] = f32_add(f32_mul(z[r * S + k], scale), k <= i ? -0.0f : ninf);
    const float mx = vector_reduce(VpuOp::kRedMax, t, lanes);
    for (std::size_t k = 0; k < S; ++k) e[k] = xcend_exp(f32_sub(t[k], mx));
    const float rs = xcend_rcp(vector_reduce(VpuOp::kRedSum, e, lanes));
    for (std::size_t k = 0; k < S; ++k) p[r * S + k] = f32_mul(e[k], rs);
  }
  return p;
}

std::vector<float> gpt_softmax_back(const std::vector<float>& p, const std::vector<float>& dp,
                                    std::size_t rows, std::size_t n, float scale,
                                    std::size_t lanes) {
  std::vector<float> ds(rows * n), pd(n);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t x = 0; x < n; ++x) pd[x] = f32_mul(p[r * n + x], dp[r * n + x]);
    const float dot = vector_reduce(VpuOp::kRedSum, pd, lanes);
    for (std::size_t x = 0; x < n; ++x)
      ds[r * n + x] = f32_mul(f32_mul(p[r * n + x], f32_sub(dp[r * n + x], dot)), scale);
  }
  return ds;
}

void gpt_cross_entropy(const std::vector<float>& logits, const std::vector<int32_t>& targets,
                       std::size_t V, float inv_n, std::size_t lanes, std::vector<float>& loss,
                       std::vector<float>& dlogits) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::size_t T = targets.size();
  loss.assign(T, 0.0f);
  dlogits.assign(T * V, 0.0f);
  std::vector<float> e(V), picked(V);
  for (std::size_t t = 0; t < T; ++t) {
    const std::size_t y = static_cast<std::size_t>(targets[t]);
    const float mx = row_reduce(VpuOp::kRedMax, logits, t * V, V, lanes);
    for (std::size_t k = 0; k < V; ++k) {
      e[k] = xcend_exp(f32_sub(logits[t * V + k], mx));
      picked[k] = f32_add(logits[t * V + k], k == y ? -0.0f : ninf);
    }
    const float s = vector_reduce(VpuOp::kRedSum, e, lanes);
    const float lse = f32_add(mx, f32_mul(xcend_log2(s), kGptLn2));
    loss[t] = f32_sub(lse, vector_reduce(VpuOp::kRedMax, picked, lanes));
    const float rs = xcend_rcp(s);
    for (std::size_t k = 0; k < V; ++k)
      dlogits[t * V + k] = f32_mul(f32_sub(f32_mul(e[k], rs), k == y ? 1.0f : 0.0f), inv_n);
  }
}

std::vector<float> gpt_layernorm(const std::vector<float>& x, std::size_t rows, std::size_t n,
                                 const std::vector<float>& g, const std::vector<float>& b,
                                 std::size_t lanes, std::vector<float>& xhat,
                                 std::vector<float>& rstd) {
  const float inv_n = xcend_rcp(static_cast<float>(n));
  std::vector<float> y(rows * n), c(n), sq(n);
  xhat.assign(rows * n, 0.0f);
  rstd.assign(rows, 0.0f);
  for (std::size_t r = 0; r < rows; ++r) {
    const float mean = f32_mul(row_reduce(VpuOp::kRedSum, x, r * n, n, lanes), inv_n);
    for (std::size_t j = 0; j < n; ++j) {
      c[j] = f32_sub(x[r * n + j], mean);
      sq[j] = f32_mul(c[j], c[j]);
    }
    const float var = f32_mul(vector_reduce(VpuOp::kRedSum, sq, lanes), inv_n);
    rstd[r] = xcend_rsqrt(f32_add(var, 1e-5f));
    for (std::size_t j = 0; j < n; ++j) {
      xhat[r * n + j] = f32_mul(c[j], rstd[r]);
      y[r * n + j] = f32_add(f32_mul(xhat[r * n + j], g[j]), b[j]);
    }
  }
  return y;
}

std::vector<float> gpt_layernorm_back(const std::vector<float>& dy, const std::vector<float>& xhat,
                                      const std::vector<float>& rstd, std::size_t rows,
                                      std::size_t n, const std::vector<float>& g, std::size_t lanes,
                                      std::vector<float>& dg, std::vector<float>& db) {
  const float inv_n = xcend_rcp(static_cast<float>(n));
  std::vector<float> dx(rows * n), dxh(n), p(n), dyx(rows * n);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < n; ++j) {
      dxh[j] = f32_mul(dy[r * n + j], g[j]);
      p[j] = f32_mul(dxh[j], xhat[r * n + j]);
      dyx[r * n + j] = f32_mul(dy[r * n + j], xhat[r * n + j]);
    }
    const float a = f32_mul(vector_reduce(VpuOp::kRedSum, dxh, lanes), inv_n);
    const float c = f32_mul(vector_reduce(VpuOp::kRedSum, p, lanes), inv_n);
    for (std::size_t j = 0; j < n; ++j) {
      const float t = f32_sub(f32_sub(dxh[j], a), f32_mul(xhat[r * n + j], c));
      dx[r * n + j] = f32_mul(t, rstd[r]);
    }
  }
  col_sum(dg, dyx, rows, n);
  col_sum(db, dy, rows, n);
  return dx;
}

float gpt_gelu_grad(float x) {
  // gelu(x) = x s, s = rcp(1 + exp(-2z)) as xcend_gelu computes it; gelu'(x) = s + x s (1 - s)
  // 2 sqrt(2/pi) (1 + 3 0.044715 x^2). Two-operand ops only (the VPU command's): the inner sum
  // is x (1 + 0.044715 x^2), as in xcend_gelu, and no fma.
  const float x2 = f32_mul(x, x);
  const float inner = f32_mul(x, f32_add(f32_mul(x2, kGeluCubic), 1.0f));
  const float s = xcend_rcp(f32_add(1.0f, xcend_exp(f32_mul(inner, kGeluMinus2Sqrt2OverPi))));
  const float dinner = f32_add(f32_mul(x2, kGeluCubic3), 1.0f);
  // s (1 - s) 2 sqrt(2/pi) as s (s - 1) (-2 sqrt(2/pi)): a constant is only ever the y operand.
  float t = f32_mul(s, f32_sub(s, 1.0f));
  t = f32_mul(t, kGeluMinus2Sqrt2OverPi);
  t = f32_mul(t, dinner);
  return f32_add(s, f32_mul(x, t));
}

}  // namespace tpu
