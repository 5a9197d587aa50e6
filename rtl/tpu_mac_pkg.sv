// tpu_mac_pkg::mac: bf16 x bf16 + f32 fused multiply-add, the arithmetic of one MXU processing
// element, as a function (the MXU calls it in a loop over its array; tpu_mac wraps it).
//
// mac(a, w, acc) = fmaf(a, w, acc): the exact product of the two bf16 operands is added to the f32
// running sum and the result is rounded once, to nearest with ties to even, into binary32. IEEE
// subnormals are honoured on every input and on the output (no flush to zero); overflow gives
// +-Inf; every NaN result (a NaN input, Inf * 0, Inf - Inf) is the canonical 0x7FC00000; an exact
// zero sum is +0 unless both addends are -0 (round-to-nearest rule). Bit-exact with tpu::mac in
// model/include/tpu/bf16.h, the golden definition of DESIGN.md's numerics contract.
//
// Latency: combinational, no clock and no state. Throughput: one operation per evaluation.
// Handshake: none; the MXU registers operands and result.
//
// Datapath: a single-path FMA shaped like a floating-point adder, because the 8x8-bit significand
// product is exact in 16 bits and so fits a 24-bit significand without rounding.
//   1. Product: 8x8-bit multiply, then a 16-bit leading-zero count normalises it (bf16 subnormal
//      operands give leading zeros), so it has a full 24-bit significand with the MSB set and an
//      exponent that may lie far below the f32 range (products reach down to 2^-266).
//   2. Align: the operand with the larger exponent, x, stays; the other, y, shifts right by the
//      exponent difference into a 27-bit window: 24 bits, two guard bits, one sticky bit.
//      A tiny product (exponent below the subnormal one) is always y when the accumulator is x,
//      so this shift is also its denormalisation onto the f32 subnormal grid.
//   3. Add or subtract in 29 bits; take the magnitude of a negative difference (x is not always
//      the larger value: equal exponents, or a subnormal accumulator against a tiny product).
//   4. Normalise: leading-zero count and one left shift, capped by x's exponent so that subnormal
//      results stop on the subnormal grid. Results never need a right shift here.
//   5. Round to nearest even by adding the round bit to {exponent, mantissa}: a mantissa carry
//      moves into the exponent (subnormal to normal, and the largest finite value to Inf).
//
// Why the 27-bit window is exact enough: y's bits fold into the sticky bit (window bit 0) only
// when the exponent difference is 3 or more, so |y| < 2^24 against x's MSB at bit 26. Then either
// x is normalised, the sum loses at most one leading bit and its last kept bit is at window bit 2
// or above, or x is a subnormal accumulator and the result's last bit is on the subnormal grid at
// bit 3. Either way every rounding boundary (ulps and half-ulps) is a multiple of 2 in window
// units, so none lies strictly between the true sum and the sum with y's tail replaced by the
// sticky 1: both round alike, including ties and the inexact direction. With a difference of 2 or
// less no bit is folded and the sum is exact.
//
// Exponents are kept as "LSB exponents" E: an operand is sig * 2^(E - 150) with a 24-bit sig, so
// for an f32 E is its biased exponent field (1 for subnormals), and E >= 1 for x always holds.
`include "tpu_assert.svh"

package tpu_mac_pkg;

  localparam int unsigned WinW = 27;  // aligned window: 24-bit significand, 2 guard, 1 sticky
  localparam int unsigned SumW = 28;  // window plus the carry of an effective addition

  // Leading zeros of a SumW-bit vector (SumW when it is all zero): a priority tree of five
  // test-and-shift steps on 32 bits, with a sentinel one below v that caps the count at SumW.
  function automatic logic [4:0] lzc(logic [SumW-1:0] v);
    logic [31:0] x;
    logic [4:0]  n;
    x = {v, 4'b1000};
    n = '0;
    if (x[31:16] == '0) begin n = n + 5'd16; x = x << 16; end
    if (x[31:24] == '0) begin n = n + 5'd8;  x = x << 8;  end
    if (x[31:28] == '0) begin n = n + 5'd4;  x = x << 4;  end
    if (x[31:30] == '0) begin n = n + 5'd2;  x = x << 2;  end
    if (!x[31])               n = n + 5'd1;
    return n;
  endfunction

  // Exponent field with subnormals mapped to 1: max(e, 1).
  function automatic logic [7:0] eff_exp(logic [7:0] e);
    return {e[7:1], e[0] | (e == 8'd0)};
  endfunction

  function automatic tpu_pkg::f32_t mac(tpu_pkg::bf16_t a, tpu_pkg::bf16_t w,
                                          tpu_pkg::f32_t acc);
    // One C++ function in the verilated model, not inlined into every caller: its locals stay
    // locals there (registers), where inlined they become model members (the MXU's cell loop is
    // evaluated from two scheduling regions, so Verilator cannot localize them).
    /*verilator no_inline_task*/
    tpu_pkg::f32_t res;
    logic       a_s, w_s, p_s, c_s;
    logic [7:0] a_e, w_e, c_e;
    logic       a_zero, w_zero, a_inf, w_inf, a_nan, w_nan, c_inf, c_nan;
    logic [7:0] a_sig, w_sig;  // with the hidden bit
    logic [23:0] c_sig;
    logic [15:0] prod, prod_n;
    logic [4:0]  prod_lz;  // 0..15, or 16 for a zero product
    logic        p_zero;
    logic [9:0]  pe_lhs, pe_rhs, e_diff, e_x;
    logic        prod_is_x, x_s, y_s, eff_sub;
    logic [23:0] x_sig, y_sig;
    logic [4:0]  y_shamt;
    logic [2*WinW-1:0] y_ext;  // y's window followed by the bits shifted out of it
    logic [WinW-1:0] x_win, y_win;
    logic [SumW:0]   sum;  // one more bit: the sign of a difference
    logic [SumW-1:0] mag;
    logic            r_s;
    logic [4:0]      mag_lz, norm_shamt;
    logic [SumW-1:0] norm;
    logic [9:0]      e_r;
    logic            ovf;
    logic [7:0]  e_field;
    logic        round_up;
    logic [30:0] rounded;
    logic p_inf, res_nan, special;
    // ---------------------------------------------------------------------------------------------
    // Unpack and classify.
    // ---------------------------------------------------------------------------------------------

    a_s = a[15];
    w_s = w[15];
    c_s = acc[31];
    p_s = a_s ^ w_s;
    a_e = a[14:7];
    w_e = w[14:7];
    c_e = acc[30:23];

    // An Inf or NaN operand (exponent field all ones) decides the result alone; only finite
    // operands take the datapath (in a simulator, the common case skips the classification).
    special = (a_e == 8'hFF) || (w_e == 8'hFF) || (c_e == 8'hFF);

    if (special) begin
      a_zero  = (a[14:0] == '0);
      w_zero  = (w[14:0] == '0);
      a_inf   = (a_e == 8'hFF) && (a[6:0] == '0);
      w_inf   = (w_e == 8'hFF) && (w[6:0] == '0);
      c_inf   = (c_e == 8'hFF) && (acc[22:0] == '0);
      a_nan   = (a_e == 8'hFF) && (a[6:0] != '0);
      w_nan   = (w_e == 8'hFF) && (w[6:0] != '0);
      c_nan   = (c_e == 8'hFF) && (acc[22:0] != '0);
      p_inf   = a_inf || w_inf;
      res_nan = a_nan || w_nan || c_nan || (a_inf && w_zero) || (w_inf && a_zero) ||
                (p_inf && c_inf && (p_s != c_s));
      if (res_nan) begin
        res = tpu_pkg::F32_CANON_NAN;
      end else if (p_inf) begin
        res = {p_s, 8'hFF, 23'd0};
      end else begin
        // No NaN and a finite product: the Inf is the accumulator.
        res = {c_s, 8'hFF, 23'd0};
      end
    end else begin

      a_sig = {a_e != 8'd0, a[6:0]};
      w_sig = {w_e != 8'd0, w[6:0]};
      c_sig = {c_e != 8'd0, acc[22:0]};

      // -------------------------------------------------------------------------------------------
      // 1. Exact product, normalised to a 24-bit significand.
      // -------------------------------------------------------------------------------------------

      prod    = 16'(a_sig) * 16'(w_sig);
      // A sentinel one below the product caps the count at 16 when the product is zero.
      prod_lz = lzc({prod, 12'h800});
      prod_n  = prod << prod_lz;
      p_zero  = (prod == '0);

      // -------------------------------------------------------------------------------------------
      // 2. Pick x (larger exponent) and align y.
      // The product {prod_n, 8'h00} has LSB exponent E_p = ea + ew - 126 - prod_lz, with ea and ew
      // the operands' max(exponent field, 1); E_p may be negative, so it is compared with the
      // accumulator's E_c = max(c_e, 1) as (ea + ew) >= (E_c + 126 + prod_lz), unsigned. A zero
      // product is never x.
      // -------------------------------------------------------------------------------------------

      pe_lhs    = 10'(eff_exp(a_e)) + 10'(eff_exp(w_e));
      pe_rhs    = 10'(eff_exp(c_e)) + 10'd126 + 10'(prod_lz);
      prod_is_x = !p_zero && (pe_lhs >= pe_rhs);
      e_diff    = prod_is_x ? pe_lhs - pe_rhs : pe_rhs - pe_lhs;
      e_x       = 10'(eff_exp(c_e)) + (prod_is_x ? e_diff : 10'd0);

      x_sig   = prod_is_x ? {prod_n, 8'h00} : c_sig;
      y_sig   = prod_is_x ? c_sig : {prod_n, 8'h00};
      x_s     = prod_is_x ? p_s : c_s;
      y_s     = prod_is_x ? c_s : p_s;
      eff_sub = x_s ^ y_s;

      // Any shift of WinW or more leaves only the sticky bit.
      y_shamt = (e_diff >= 10'(WinW)) ? 5'(WinW) : e_diff[4:0];
      y_ext   = {y_sig, 3'b000, WinW'(0)} >> y_shamt;
      x_win   = {x_sig, 3'b000};
      y_win   = {y_ext[2*WinW-1 -: WinW-1], |y_ext[WinW:0]};

      // -------------------------------------------------------------------------------------------
      // 3. Add or subtract; magnitude and sign.
      // -------------------------------------------------------------------------------------------

      sum = eff_sub ? {2'b00, x_win} - {2'b00, y_win} : {2'b00, x_win} + {2'b00, y_win};
      mag = sum[SumW] ? SumW'(-sum) : sum[SumW-1:0];
      r_s = x_s ^ sum[SumW];

      // -------------------------------------------------------------------------------------------
      // 4. Normalise. The result LSB lands at bit 4 of `norm`, guard at bit 3, sticky below. The
      // shift is min(leading zeros, e_x): at e_x the result is subnormal (or the smallest normal)
      // and stops. The result LSB exponent is then e_x + 1 - shift, at least 1.
      // -------------------------------------------------------------------------------------------

      mag_lz     = lzc(mag);
      norm_shamt = (10'(mag_lz) <= e_x) ? mag_lz : e_x[4:0];
      norm       = mag << norm_shamt;
      e_r        = e_x + 10'd1 - 10'(norm_shamt);
      ovf        = norm[SumW-1] && (e_r >= 10'd255);

      // -------------------------------------------------------------------------------------------
      // 5. Round to nearest, ties to even, on the packed {exponent, mantissa}.
      // -------------------------------------------------------------------------------------------

      // Unnormalised only when the shift stopped at e_x, i.e. e_r == 1: a subnormal, field 0.
      e_field  = norm[SumW-1] ? e_r[7:0] : 8'd0;
      round_up = norm[3] && (norm[4] || (norm[2:0] != '0));
      rounded  = {e_field, norm[26:4]} + 31'(round_up);

      // -------------------------------------------------------------------------------------------
      // The output of a finite sum.
      // -------------------------------------------------------------------------------------------

      if (ovf) begin
        res = {r_s, 8'hFF, 23'd0};
      end else if (mag == '0) begin
        // Exact zero: -0 only for (-0) + (-0); cancellation of non-zero values gives +0 (and then
        // p_s != c_s, so the AND is 0 there as well).
        res = {p_s && c_s, 31'd0};
      end else begin
        // A non-zero sum that rounds to zero keeps the sign of the exact sum, as IEEE requires.
        res = {r_s, rounded};
      end

      // -------------------------------------------------------------------------------------------
      // Assertions: the premises of the window-width argument above.
      // -------------------------------------------------------------------------------------------
      // x's exponent is never below the subnormal one, so the normalising shift never goes right.
      `TPU_ASSERT_I(XExpMin_A, e_x >= 10'd1,
          ("%m: XExpMin_A failed"))
      // Bits folded into the sticky bit only ever sit under a normalised or subnormal-grid x.
      `TPU_ASSERT_I(StickySafe_A, !y_win[0] || (e_diff >= 10'd3 && (x_sig[23] || e_x == 10'd1)),
          ("%m: StickySafe_A failed"))
      // An effective subtraction never needs the carry bit.
      `TPU_ASSERT_I(SubNoCarry_A, !eff_sub || !mag[SumW-1],
          ("%m: SubNoCarry_A failed"))
      // An unnormalised result only occurs on the subnormal grid.
      `TPU_ASSERT_I(NormOrSubnormal_A, mag == '0 || norm[SumW-1] || e_r == 10'd1,
          ("%m: NormOrSubnormal_A failed"))
    end

    return res;
  endfunction

endpackage
