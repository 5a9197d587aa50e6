// Golden matrix multiply: the order and rounding the MXU must reproduce bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {

// C[M x N] = A[M x K] * W[K x N], all row-major. For each output element,
// acc = mac(A[m][k], W[k][n], acc) for k = 0 .. K-1 in increasing order, starting from +0.0, or
// from acc_init[m][n] when acc_init is given (accumulate mode).
std::vector<float> golden_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                 std::size_t m, std::size_t k, std::size_t n,
                                 const std::vector<float>* acc_init = nullptr);

// The chip matmul's VPU epilogue on an M x N f32 product: + bias[j] (f32_add, when given), then
// ReLU (f32_relu), then the output format: bf16 bits (f32_to_bf16) or f32 bits (NaN canonical).
std::vector<uint32_t> golden_matmul_epilogue(const std::vector<float>& c, std::size_t m,
                                             std::size_t n, const std::vector<float>* bias,
                                             bool relu, bool out_bf16);

// The transpose a chip computes (ChipDriver::plan_transpose): src R x C row-major -> C x R,
// exactly as the MXU does it, tile by tile: dst tile = I x transpose(src tile) through
// golden_matmul, rounded to bf16. Every value is kept bit for bit except: -0 becomes +0 (the sum
// starts from +0, and +0 + -0 = +0); any NaN becomes the canonical 0x7FC0; and a +-Inf or NaN at
// (i, j) makes every other element of src row i within the same `lanes`-wide column tile NaN
// (0 x Inf = NaN in the identity product). lanes: the array width (the chip's tiles are lanes x
// lanes, columns [t*lanes, (t+1)*lanes)); 0: one tile as wide as the row. For finite inputs the
// result does not depend on lanes.
std::vector<bf16_t> golden_transpose(const std::vector<bf16_t>& src, std::size_t rows,
                                     std::size_t cols, std::size_t lanes = 0);

}  // namespace tpu
