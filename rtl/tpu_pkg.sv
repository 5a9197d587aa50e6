// tpu_pkg: shared types, width helpers and the named chip variants.
//
// A chip variant fixes every compile-time parameter of the RTL (array size, lanes, memory sizes).
// Verilated tops take a numeric `VariantId` (Verilator's -G cannot set an enum) and decode it
// with variant_cfg. A variant's shape is written down once, in configs/tpu_contract.yaml, which
// generates this side (tpu_contract_pkg), the C++ table (tpu_contract.h) and CMake's lists.
package tpu_pkg;

  // bfloat16 (1-8-7) and binary32, as raw bits.
  typedef logic [15:0] bf16_t;
  typedef logic [31:0] f32_t;

  localparam f32_t F32_CANON_NAN = 32'h7FC0_0000;
  localparam bf16_t BF16_CANON_NAN = 16'h7FC0;

  // Number of bits needed to index `n` things (at least 1), after common_cells' cc_pkg.
  function automatic int unsigned idx_width(int unsigned n);
    return (n > 1) ? $clog2(n) : 1;
  endfunction

  // The named chip variants (variant_e, chip_cfg_t, variant_cfg) are part of the hardware
  // contract, generated from configs/tpu_contract.yaml into tpu_contract_pkg; passed on here so
  // `tpu_pkg::variant_cfg(...)` names them as before.
  import tpu_contract_pkg::*;
  export tpu_contract_pkg::*;

endpackage
