#include "tpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tpu/vector.h"

namespace tpu {

std::vector<float> golden_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                 std::size_t m, std::size_t k, std::size_t n,
                                 const std::vector<float>* acc_init) {
  if (a.size() != m * k || w.size() != k * n || (acc_init && acc_init->size() != m * n)) {
    throw std::invalid_argument("golden_matmul: operand sizes do not match M, K, N");
  }
  std::vector<float> c(m * n, 0.0f);
  if (acc_init) c = *acc_init;
  // mac() in a form that runs fast: the operands widened once (bf16 -> f32 is exact), W read by
  // columns, and NaN canonicalised once at the end: fmaf gives a NaN whenever an operand is one,
  // so a NaN met midway stays a NaN to the end and only its payload differs, which the final
  // canonicalize() erases. Same bits as acc = mac(a, w, acc) step by step.
  std::vector<float> af(m * k), wt(k * n);
  for (std::size_t i = 0; i < m * k; ++i) af[i] = bf16_to_f32(a[i]);
  for (std::size_t kk = 0; kk < k; ++kk)
    for (std::size_t j = 0; j < n; ++j) wt[j * k + kk] = bf16_to_f32(w[kk * n + j]);
  for (std::size_t i = 0; i < m; ++i) {
    const float* ar = af.data() + i * k;
    for (std::size_t j = 0; j < n; ++j) {
      const float* wc = wt.data() + j * k;
      float acc = c[i * n + j];
      for (std::size_t kk = 0; kk < k; ++kk) acc = std::fmaf(ar[kk], wc[kk], acc);
      c[i * n + j] = k > 0 ? canonicalize(acc) : acc;  // K = 0: acc_init as given
    }
  }
  return c;
}

std::vector<uint32_t> golden_matmul_epilogue(const std::vector<float>& c, std::size_t m,
                                             std::size_t n, const std::vector<float>* bias,
                                             bool relu, bool out_bf16) {
  if (c.size() != m * n || (bias && bias->size() != n))
    throw std::invalid_argument("golden_matmul_epilogue: sizes do not match M, N");
  std::vector<uint32_t> out(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float v = c[i * n + j];
      if (bias) v = f32_add(v, (*bias)[j]);
      if (relu) v = f32_relu(v);
      out[i * n + j] = out_bf16 ? f32_to_bf16(v) : f32_bits(canonicalize(v));
    }
  return out;
}

namespace {
bool bf16_finite(bf16_t b) { return (b & 0x7F80u) != 0x7F80u; }
bool bf16_nan(bf16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0; }
}  // namespace

// Equal to golden_matmul(I, transpose(tile)) per tile (tests/unit/matmul_test.cc checks it on
// random data with signed zeros, Inf and NaN): dst[j][i] = sum over k of I[j][k] * src[i][k]
// from +0, whose only term that is not a zero is src[i][j]; a zero term is +-0 unless
// src[i][k] is not finite (0 x Inf and 0 x NaN are NaN).
std::vector<bf16_t> golden_transpose(const std::vector<bf16_t>& src, std::size_t rows,
                                     std::size_t cols, std::size_t lanes) {
  if (src.size() != rows * cols)
    throw std::invalid_argument("golden_transpose: src must hold rows x cols values");
  const std::size_t tile = lanes == 0 ? std::max<std::size_t>(cols, 1) : lanes;
  std::vector<bf16_t> dst(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t t0 = 0; t0 < cols; t0 += tile) {
      const std::size_t t1 = std::min(cols, t0 + tile);
      std::size_t nonfinite = 0;
      for (std::size_t j = t0; j < t1; ++j) nonfinite += bf16_finite(src[i * cols + j]) ? 0 : 1;
      for (std::size_t j = t0; j < t1; ++j) {
        const bf16_t v = src[i * cols + j];
        const std::size_t others = nonfinite - (bf16_finite(v) ? 0 : 1);
        bf16_t out = v;
        if (others > 0 || bf16_nan(v)) out = kBf16CanonNan;
        else if (v == 0x8000u) out = 0x0000u;
        dst[j * rows + i] = out;
      }
    }
  }
  return dst;
}

}  // namespace tpu
