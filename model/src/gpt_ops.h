// Private helpers of the GPT golden (model/src/gpt_*.cc): bf16 operands, transposes, matmuls
// through golden_matmul, column sums and row reductions in the VPU's order.
#pragma once

#include <cstddef>
#include <vector>

#include "tpu/bf16.h"
#include "tpu/vector.h"

namespace tpu::gpt_detail {

std::vector<bf16_t> to_bf16(const std::vector<float>& x);
// rows x cols -> cols x rows; the bits move unchanged.
std::vector<float> transpose(const std::vector<float>& x, std::size_t rows, std::size_t cols);
// golden_matmul(bf16(a) [m x k], bf16(w) [k x n]): f32 accumulation in increasing k.
std::vector<float> mm(const std::vector<float>& a, const std::vector<float>& w, std::size_t m,
                      std::size_t k, std::size_t n);
// acc[j] = acc[j] + x[i][j] for i = 0 .. rows-1 in order (f32_add), for every column j.
void col_sum(std::vector<float>& acc, const std::vector<float>& x, std::size_t rows,
             std::size_t cols);
// vector_reduce(op, x[off .. off+n), lanes): per lane in beat order, then the lane tree.
float row_reduce(VpuOp op, const std::vector<float>& x, std::size_t off, std::size_t n,
                 std::size_t lanes);
// out = a + b elementwise (f32_add), in place into a.
void add_into(std::vector<float>& a, const std::vector<float>& b);

}  // namespace tpu::gpt_detail
