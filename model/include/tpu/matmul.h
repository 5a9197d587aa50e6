// Golden matrix multiply: the order and rounding the MXU must reproduce bit for bit.
#pragma once

#include <cstddef>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {

// C[M x N] = A[M x K] * W[K x N], all row-major. For each output element,
// acc = mac(A[m][k], W[k][n], acc) for k = 0 .. K-1 in increasing order, starting from +0.0, or
// from acc_init[m][n] when acc_init is given (accumulate mode).
std::vector<float> golden_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                 std::size_t m, std::size_t k, std::size_t n,
                                 const std::vector<float>* acc_init = nullptr);

}  // namespace tpu
