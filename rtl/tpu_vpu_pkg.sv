// tpu_vpu_pkg: the vector unit's op encoding and its small f32/bf16 helper functions.
//
// The encodings of vpu_op_e are part of the ISA (docs/vpu.md) and are mirrored by tpu::VpuOp in
// model/include/tpu/vector.h; change both together.
package tpu_vpu_pkg;

  import tpu_pkg::*;

  // VPU operations. x, y, z are the three operand vectors of a beat.
  typedef enum logic [3:0] {
    VpuAdd        = 4'd0,   // x + y
    VpuSub        = 4'd1,   // x - y
    VpuMul        = 4'd2,   // x * y
    VpuFma        = 4'd3,   // x * y + z, one rounding (scale and bias)
    VpuMax        = 4'd4,   // IEEE 754-2019 maximum(x, y)
    VpuMin        = 4'd5,   // IEEE 754-2019 minimum(x, y)
    VpuRelu       = 4'd6,   // maximum(x, +0)
    VpuCvtF32Bf16 = 4'd7,   // x rounded to bf16 (as if dst_bf16 were set)
    VpuCvtBf16F32 = 4'd8,   // x read as bf16, widened exactly (as if src_bf16.x were set)
    VpuRedSum     = 4'd9,   // sum of x over the beats of a group (order: docs/vpu.md)
    VpuRedMax     = 4'd10,  // maximum of x over the beats of a group
    VpuPackBf16   = 4'd11,  // {bf16(y), bf16(x)}: both rounded, two bf16 in one lane
    VpuCvtBf16HiF32 = 4'd12 // x bits [31:16] read as bf16, widened exactly (VpuPackBf16's y)
  } vpu_op_e;

  localparam int unsigned VPU_NUM_OPS = 13;

  localparam f32_t F32_ONE      = 32'h3F80_0000;
  localparam f32_t F32_POS_ZERO = 32'h0000_0000;
  localparam f32_t F32_NEG_ZERO = 32'h8000_0000;
  localparam f32_t F32_NEG_INF  = 32'hFF80_0000;

  function automatic logic vpu_op_is_red(vpu_op_e op);
    return (op == VpuRedSum) || (op == VpuRedMax);
  endfunction

  function automatic logic vpu_op_valid(vpu_op_e op);
    return 32'(op) < VPU_NUM_OPS;
  endfunction

  // The ops a chip's VPU command may name: tpu_vpu_unit streams rows elementwise, so the
  // reductions are for the vector unit alone (tb/vpu).
  function automatic logic vpu_op_elementwise(vpu_op_e op);
    return vpu_op_valid(op) && !vpu_op_is_red(op);
  endfunction

  function automatic logic f32_is_nan(f32_t x);
    return (x & 32'h7FFF_FFFF) > 32'h7F80_0000;
  endfunction

  // Any NaN becomes the canonical quiet NaN; every other value passes unchanged.
  function automatic f32_t f32_canon(f32_t x);
    return f32_is_nan(x) ? F32_CANON_NAN : x;
  endfunction

  // Key under which unsigned comparison is the IEEE total order of non-NaN values (-0 < +0).
  function automatic logic [31:0] f32_order_key(f32_t x);
    return x[31] ? ~x : {1'b1, x[30:0]};
  endfunction

  // IEEE 754-2019 maximum: NaN if either operand is NaN (canonical), -0 < +0.
  function automatic f32_t f32_maximum(f32_t a, f32_t b);
    if (f32_is_nan(a) || f32_is_nan(b)) return F32_CANON_NAN;
    return (f32_order_key(a) < f32_order_key(b)) ? b : a;
  endfunction

  // IEEE 754-2019 minimum: NaN if either operand is NaN (canonical), -0 < +0.
  function automatic f32_t f32_minimum(f32_t a, f32_t b);
    if (f32_is_nan(a) || f32_is_nan(b)) return F32_CANON_NAN;
    return (f32_order_key(b) < f32_order_key(a)) ? b : a;
  endfunction

  // f32 -> bf16: round to nearest, ties to even; overflow gives Inf; any NaN gives 0x7FC0.
  // A carry out of the kept mantissa bumps the exponent, which is exactly right.
  function automatic bf16_t f32_to_bf16(f32_t x);
    if (f32_is_nan(x)) return BF16_CANON_NAN;
    return 16'((x + 32'h0000_7FFF + 32'(x[16])) >> 16);
  endfunction

  // bf16 -> f32: exact (the caller canonicalises a NaN where the contract asks for it).
  function automatic f32_t bf16_to_f32(bf16_t x);
    return {x, 16'h0000};
  endfunction

endpackage
