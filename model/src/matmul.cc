#include "tpu/matmul.h"

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
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      float acc = c[i * n + j];
      for (std::size_t kk = 0; kk < k; ++kk) acc = mac(a[i * k + kk], w[kk * n + j], acc);
      c[i * n + j] = acc;
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

std::vector<bf16_t> golden_transpose(const std::vector<bf16_t>& src, std::size_t rows,
                                     std::size_t cols) {
  std::vector<bf16_t> t(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      bf16_t v = src[i * cols + j];
      t[j * rows + i] = v == 0x8000 ? 0 : v;
    }
  return t;
}

}  // namespace tpu
