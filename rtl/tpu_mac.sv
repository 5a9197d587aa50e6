// tpu_mac: bf16 x bf16 + f32 fused multiply-add as a module: acc_o = fmaf(a_i, w_i, acc_i) with
// one rounding. The datapath, its numerics and its assertions are tpu_mac_pkg::mac
// (rtl/tpu_mac_pkg.sv), which the MXU calls for every cell; this wrapper is the unit the MAC
// tests drive (tests/mac).
//
// Latency: combinational, no clock and no state. Throughput: one operation per evaluation.
// Handshake: none.
module tpu_mac (
  input  tpu_pkg::bf16_t a_i,    // activation, bf16 bits
  input  tpu_pkg::bf16_t w_i,    // weight, bf16 bits
  input  tpu_pkg::f32_t  acc_i,  // running sum, f32 bits
  output tpu_pkg::f32_t  acc_o   // fmaf(a, w, acc), one rounding
);

  assign acc_o = tpu_mac_pkg::mac(a_i, w_i, acc_i);

endmodule
