// tpu_vpu_pkg: the vector unit's op encoding and its small f32/bf16 helper functions.
//
// The VPU op encoding (vpu_op_e, VPU_OP_COUNT) is part of the ISA: it is written once, in
// configs/tpu_contract.yaml's enums, and generated into tpu_contract_pkg (passed on by tpu_pkg)
// and into the C++ tpu::VpuOp (docs/vpu.md).
package tpu_vpu_pkg;

  import tpu_pkg::*;

  localparam f32_t F32_ONE      = 32'h3F80_0000;
  localparam f32_t F32_POS_ZERO = 32'h0000_0000;
  localparam f32_t F32_NEG_ZERO = 32'h8000_0000;
  localparam f32_t F32_NEG_INF  = 32'hFF80_0000;

  function automatic logic vpu_op_is_red(vpu_op_e op);
    return (op == VpuRedSum) || (op == VpuRedMax);
  endfunction

  function automatic logic vpu_op_valid(vpu_op_e op);
    return 32'(op) < VPU_OP_COUNT;
  endfunction

  // The transcendental ops (VpuExp2 .. VpuExp): computed by tpu_xcend lanes, whose function
  // select is the op's distance from VpuExp2 (tpu::XcendFn's order).
  function automatic logic vpu_op_is_xcend(vpu_op_e op);
    return (32'(op) >= 32'(VpuExp2)) && (32'(op) <= 32'(VpuExp));
  endfunction

  function automatic logic [2:0] vpu_op_xcend_fn(vpu_op_e op);
    return 3'(32'(op) - 32'(VpuExp2));
  endfunction

  // The ops tpu_vpu (the vector unit alone, tb/vpu) takes: all but the transcendental ones.
  function automatic logic vpu_op_vector(vpu_op_e op);
    return vpu_op_valid(op) && !vpu_op_is_xcend(op);
  endfunction

  // The ops a chip's VPU command may name: tpu_vpu_unit streams rows elementwise, so the
  // reductions are for the vector unit alone (tb/vpu); the transcendental ops go to its tpu_xcend
  // lanes.
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
