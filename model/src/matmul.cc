#include "tpu/matmul.h"

#include <stdexcept>

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

}  // namespace tpu
