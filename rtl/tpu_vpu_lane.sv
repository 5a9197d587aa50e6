// tpu_vpu_lane: one lane of the vector unit: operand widening, the lane's FMA and comparator,
// the reduction step, and the result format.
//
// Combinational (0 cycles); tpu_vpu registers its outputs. Every arithmetic op goes through the
// one tpu_fma32: add = x * 1 + y, sub = x * 1 + (-y), mul = x * y + (-0), fma = x * y + z, and the
// reduction step acc + x = x * 1 + acc. -0 is the exact additive identity and -Inf the identity
// of maximum, which is what masked-off lanes and the first beat of a group feed in.
`include "tpu_assert.svh"

module tpu_vpu_lane
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
(
  input  logic       en_i,        // a beat is presented: compute (else nothing is computed and
                                  // res_o/acc_o are 0)
  input  vpu_op_e    op_i,
  input  logic [2:0] src_bf16_i,  // {z, y, x}: the operand holds bf16 in bits [15:0]
  input  logic       dst_bf16_i,  // round the result to bf16, in bits [15:0]
  input  logic       first_i,     // reductions: the group starts, ignore acc_i
  input  logic       mask_i,      // reductions: this lane's x takes part
  input  f32_t       x_i,
  input  f32_t       y_i,
  input  f32_t       z_i,
  input  f32_t       acc_i,       // reductions: this lane's running value
  output f32_t       res_o,       // elementwise result, formatted (f32 or bf16 in [15:0])
  output f32_t       acc_o        // reductions: this lane's next running value (f32)
);

  logic x_bf16, out_bf16, pack;
  assign x_bf16   = src_bf16_i[0] | (op_i == VpuCvtBf16F32);
  assign pack     = (op_i == VpuPackBf16);  // two bf16 results in one lane; dst_bf16 is ignored
  assign out_bf16 = !pack && (dst_bf16_i || (op_i == VpuCvtF32Bf16));

  // Operands, then the FMA, then the result: two processes under en_i, so that an idle lane
  // computes nothing (a verilated model runs every always_comb every cycle; docs/scale.md "One
  // core"). Without a beat every signal below is 0 and the FMA idles.
  f32_t x_w, y_w;  // x and y widened to f32
  f32_t red_x, red_acc;
  f32_t fma_a, fma_b, fma_c, fma_r;
  always_comb begin
    f32_t z_w, red_id;
    z_w = '0;
    red_id = '0;
    x_w = '0;
    y_w = '0;
    red_x = '0;
    red_acc = '0;
    fma_a = '0;
    fma_b = '0;
    fma_c = '0;
    if (en_i) begin
      x_w = (op_i == VpuCvtBf16HiF32) ? bf16_to_f32(x_i[31:16]) :
            x_bf16                    ? bf16_to_f32(x_i[15:0])  : x_i;
      y_w = src_bf16_i[1] ? bf16_to_f32(y_i[15:0]) : y_i;
      z_w = src_bf16_i[2] ? bf16_to_f32(z_i[15:0]) : z_i;
      // Reduction operands: identity where masked off, and in place of acc_i on the first beat.
      red_id  = (op_i == VpuRedMax) ? F32_NEG_INF : F32_NEG_ZERO;
      red_x   = mask_i ? x_w : red_id;
      red_acc = first_i ? red_id : acc_i;
      fma_a = x_w;
      fma_b = F32_ONE;
      fma_c = F32_NEG_ZERO;
      unique case (op_i)
        VpuAdd: fma_c = y_w;
        VpuSub: fma_c = {~y_w[31], y_w[30:0]};
        VpuMul: fma_b = y_w;
        VpuFma: begin
          fma_b = y_w;
          fma_c = z_w;
        end
        VpuRedSum: begin
          fma_a = red_x;
          fma_c = red_acc;
        end
        default: ;
      endcase
    end
  end

  tpu_fma32 i_fma (
    .en_i(en_i),
    .a_i(fma_a),
    .b_i(fma_b),
    .c_i(fma_c),
    .r_o(fma_r)
  );

  always_comb begin
    f32_t val;  // the op's f32 result
    val = '0;
    res_o = '0;
    acc_o = '0;
    if (en_i) begin
      unique case (op_i)
        VpuAdd, VpuSub, VpuMul, VpuFma, VpuRedSum: val = fma_r;
        VpuMax:                                    val = f32_maximum(x_w, y_w);
        VpuMin:                                    val = f32_minimum(x_w, y_w);
        VpuRelu:                                   val = f32_maximum(x_w, F32_POS_ZERO);
        VpuRedMax:                                 val = f32_maximum(red_acc, red_x);
        VpuCvtF32Bf16, VpuCvtBf16F32, VpuCvtBf16HiF32,
        VpuPackBf16:                               val = x_w;
        default:                                   val = F32_POS_ZERO;
      endcase
      res_o = pack     ? {f32_to_bf16(y_w), f32_to_bf16(x_w)} :
              out_bf16 ? {16'h0000, f32_to_bf16(val)}        : f32_canon(val);
      acc_o = val;
      // -------------------------------------------------------------------------------------------
      // Assertions (with a beat: without one the results are 0)
      // -------------------------------------------------------------------------------------------
      // f32 results: any NaN is the canonical one. bf16 results: the upper half is zero.
      `TPU_ASSERT_I(ResNanCanonical_A,
          out_bf16 || pack || !f32_is_nan(res_o) || (res_o == F32_CANON_NAN),
          ("%m: ResNanCanonical_A failed"))
      `TPU_ASSERT_I(ResBf16UpperZero_A, !out_bf16 || (res_o[31:16] == 16'h0000),
          ("%m: ResBf16UpperZero_A failed"))
    end
  end

endmodule
