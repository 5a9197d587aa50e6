// The GPT step's VPU maps (docs/training.md "The GPT step's maps"): layer norm and its backward,
// the causal softmax and its backward, the cross-entropy and its gradient, the loss per window,
// GELU and its backward, a bias gradient (column sums) and AdamW, each a VpuMap (vpu_map.h) over
// matrices in a chip's HBM whose ops are the GPT golden's (model/, tpu/gpt.h) one for one, in the
// golden's order, so a chip that runs the plan gives the golden's bits. The constants every map
// takes are rows of one f32 matrix (gpt_const_image), each constant in every lane: the VPU
// command's broadcast y row. Matrices that only feed matmuls are written as bf16 (the golden
// rounds every matmul operand to bf16: the same bits, half the bytes).
#pragma once

#include <cstddef>
#include <vector>

#include "chip_driver.h"
#include "tpu/gpt.h"
#include "vpu_map.h"

namespace tpu {

// The constant rows (gpt_const_image's order).
enum GptConst : std::size_t {
  kGcZero,        // +0 (the column sums' partials start from it)
  kGcOne,         // 1
  kGcInvD,        // xcend_rcp(d): LN's 1/n
  kGcLnEps,       // 1e-5
  kGcScale,       // xcend_rsqrt(dh): attention's 1/sqrt(dh)
  kGcLn2,         // ln 2 (the cross-entropy's log2 -> ln)
  kGcInvN,        // xcend_rcp(D B S): the mean over the global batch's tokens
  kGcGeluCubic,   // 0.044715
  kGcGeluM2,      // -2 sqrt(2/pi)
  kGcGeluCubic3,  // f32(3 x 0.044715)
  kGcBeta1,       // AdamW (gpt_adam_consts of the step): beta1, 1 - beta1, beta2, 1 - beta2,
  kGcOneMBeta1,   // bc1, bc2, eps, decay, lr
  kGcBeta2,
  kGcOneMBeta2,
  kGcBc1,
  kGcBc2,
  kGcAdamEps,
  kGcDecay,
  kGcLr,
  kGcMinusOne,    // -1 (the cross-entropy's one-hot from sel)
  kGcCount
};

// The constants as kGcCount rows of `lanes` f32 (row-major), for step t's AdamW constants.
std::vector<float> gpt_const_image(const GptSpec& spec, const AdamConsts& adam, std::size_t lanes);

// The causal mask of the softmax map: rows x S, row r (the query at position r mod S) -0 at
// k <= r mod S and -Inf beyond. sel of the cross-entropy map: T x V, -0 at each token's target,
// -Inf elsewhere (the one-hot is made from it on the chip: max(sel, -1) + 1 is 1 at the target
// and +0 elsewhere). Both are exact in bf16: their matrices may be bf16 (half the bytes).
std::vector<float> gpt_causal_mask(std::size_t rows, std::size_t S);
std::vector<float> gpt_target_sel(const std::vector<int32_t>& targets, std::size_t V);

// Every map's matrices are rows x cols f32 unless named _bf16; per-row values (rstd, loss,
// parts) are 1 x n f32 vectors (n the rows rounded up to a multiple of max(16, lanes)); per-column
// vectors (g, b) and column sums (dg, db) 1 x cols f32.

// LayerNorm (gpt_layernorm): y (bf16: it only feeds matmuls), xhat and rstd for the backward.
VpuMap gpt_ln_forward_map(const HbmMatrix& consts, const HbmMatrix& x, const HbmMatrix& g,
                          const HbmMatrix& b, const HbmMatrix& y_bf16, const HbmMatrix& xhat,
                          const HbmMatrix& rstd);
// Its backward (gpt_layernorm_back): dx, and the column sums dg (of dy xhat) and db (of dy).
VpuMap gpt_ln_backward_map(const HbmMatrix& consts, const HbmMatrix& dy, const HbmMatrix& xhat,
                           const HbmMatrix& rstd, const HbmMatrix& g, const HbmMatrix& dx,
                           const HbmMatrix& dg, const HbmMatrix& db);
// The causal softmax (gpt_causal_softmax) of scores z under `mask` (gpt_causal_mask): p in f32
// (the backward's) and bf16 (P V's).
VpuMap gpt_softmax_map(const HbmMatrix& consts, const HbmMatrix& z, const HbmMatrix& mask,
                       const HbmMatrix& p, const HbmMatrix& p_bf16);
// The same softmax for decoding, p only in bf16: a mask of one row (1 x S, bf16 or f32) is every
// row's (a per-column input: queries of one position), else it has z's rows (one per query).
VpuMap gpt_softmax_row_map(const HbmMatrix& consts, const HbmMatrix& z, const HbmMatrix& mask_row,
                           const HbmMatrix& p_bf16);
// A copy of a matrix (any dtype; outputs of the input's dtype): the decoder's cache rows.
VpuMap gpt_copy_map(const HbmMatrix& from, const HbmMatrix& to);
// Its backward (gpt_softmax_back): ds (bf16: it feeds dQ and dK's matmuls).
VpuMap gpt_softmax_back_map(const HbmMatrix& consts, const HbmMatrix& p, const HbmMatrix& dp,
                            const HbmMatrix& ds_bf16);
// The cross-entropy (gpt_cross_entropy): each token's loss, and dlogits (bf16).
VpuMap gpt_cross_entropy_map(const HbmMatrix& consts, const HbmMatrix& logits,
                             const HbmMatrix& sel, const HbmMatrix& loss,
                             const HbmMatrix& dlogits_bf16);
// The loss partial of each window: `loss` (the tokens' losses) read as B x S, red_sum per row.
VpuMap gpt_window_loss_map(const HbmMatrix& loss, const HbmMatrix& parts);
// GELU (xcend_gelu) of u: a (bf16: it feeds the second MLP matmul and its weight gradient).
// s_out (when given): s = rcp(1 + exp(-2z)) in f32, for the backward to read.
VpuMap gpt_gelu_map(const HbmMatrix& consts, const HbmMatrix& u, const HbmMatrix& a_bf16,
                    const HbmMatrix* s_out = nullptr);
// Its backward: du = da x gpt_gelu_grad(u) (bf16), and db (the column sums of du, f32); s_in
// (when given) the forward's s instead of computing it again (7 of the map's ops).
VpuMap gpt_gelu_back_map(const HbmMatrix& consts, const HbmMatrix& da, const HbmMatrix& u,
                         const HbmMatrix& du_bf16, const HbmMatrix& db,
                         const HbmMatrix* s_in = nullptr);
// A bias gradient: the column sums of dy (gpt_col_sum onto +0), and dy rounded to bf16 into
// dy_bf16 when given (the gradient's matmuls take it).
VpuMap gpt_col_sum_map(const HbmMatrix& consts, const HbmMatrix& dy, const HbmMatrix& db,
                       const HbmMatrix* dy_bf16 = nullptr);
// out = h + (y + bias) (f32_add twice; bias 1 x cols): a block's output onto the residual stream.
VpuMap gpt_bias_residual_map(const HbmMatrix& y, const HbmMatrix& bias, const HbmMatrix& h,
                             const HbmMatrix& out);
// out = a + b (f32_add): the residual stream.
VpuMap gpt_add_map(const HbmMatrix& a, const HbmMatrix& b, const HbmMatrix& out);
// Every row of out (f32) set to `row` (1 x out's columns): a gradient cleared to +0.
VpuMap gpt_fill_map(const HbmMatrix& row, const HbmMatrix& out);
// AdamW (gpt_adam_element) of one tensor, in place: w, m, v updated from g; decay for matrices;
// w_bf16 (when it has rows) the updated weights rounded for the next step's matmuls.
VpuMap gpt_adam_map(const HbmMatrix& consts, const HbmMatrix& w, const HbmMatrix& g,
                    const HbmMatrix& m, const HbmMatrix& v, bool decay, const HbmMatrix& w_bf16);

}  // namespace tpu
