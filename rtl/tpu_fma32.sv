// tpu_fma32: correctly rounded IEEE-754 binary32 fused multiply-add, r = a * b + c.
//
// One rounding (round to nearest, ties to even) of the exact a * b + c. Subnormal inputs and
// results are honoured (no flush to zero); any NaN result is the canonical 0x7FC00000; an exact
// zero sum is +0 unless both the product and the addend are zeros of negative sign (IEEE RNE
// zero-sign rule); overflow gives Inf of the result's sign. The VPU derives every arithmetic op
// from this one unit: add = a * 1.0 + c, sub = a * 1.0 + (-c), mul = a * b + (-0.0).
//
// Latency: combinational (0 cycles), no state, no handshake. Callers register around it. While
// en_i is low the unit computes nothing and r_o is 0.
//
// Datapath (p = 24 significand bits):
//   1. Subnormal a, b are normalised first, so the 48-bit product significand mp has its leading
//      one at bit 46 or 47.
//   2. The addend c is aligned in a 3p+4 = 76-bit window in which the product sits at bits
//      [49:2]. c's significand is shifted right from window bits [75:52]; bits that fall below
//      the window are OR'ed into a sticky bit (only ever when c is far below the product). When
//      c is more than 27 binades above the product the window is pinned to c and the product,
//      which then lies at least two bits below c's last bit, acts as a sticky bit.
//   3. One 77-bit add (or subtract with the sticky folded into the carry-in), complement when
//      negative, normalise by a leading-zero count bounded by the minimum exponent (subnormal
//      results), round to nearest even, repack; a carry out of the significand bumps the
//      exponent and turns the largest finite values into Inf on overflow.
`include "tpu_assert.svh"

module tpu_fma32
  import tpu_pkg::*;
(
  input  logic en_i,  // compute; low: r_o is 0 and nothing is evaluated
  input  f32_t a_i,
  input  f32_t b_i,
  input  f32_t c_i,
  output f32_t r_o
);

  localparam int unsigned P = 24;          // significand precision, hidden bit included
  localparam int unsigned W = 3 * P + 4;   // alignment window width (76)
  localparam int unsigned SW = W + 1;      // sum width: one carry bit above the window (77)
  localparam int unsigned CW = W + P;      // addend shifter: window plus sticky positions (100)
  localparam int unsigned EW = 12;         // signed width of every internal exponent
  localparam int unsigned PIN = 27;        // exponent distance beyond which c pins the window
  localparam int signed BIAS = 127;

  typedef logic signed [EW-1:0] exp_t;

  // Leading zeros of a 24-bit significand (24 when zero).
  function automatic logic [4:0] lzc24(logic [P-1:0] m);
    logic [4:0] n;
    n = 5'(P);
    for (int unsigned i = 0; i < P; i++) begin
      if (m[i]) n = 5'(P - 1 - i);
    end
    return n;
  endfunction

  // Leading zeros of the 77-bit sum (77 when zero).
  function automatic logic [6:0] lzc77(logic [SW-1:0] v);
    logic [6:0] n;
    n = 7'(SW);
    for (int unsigned i = 0; i < SW; i++) begin
      if (v[i]) n = 7'(SW - 1 - i);
    end
    return n;
  endfunction

  logic       sa, sb, sc;
  logic [7:0] ea, eb, ec;
  logic [22:0] fa, fb, fc;
  logic a_nan, b_nan, c_nan, a_inf, b_inf, c_inf, a_zero, b_zero, c_zero;
  logic sp;         // product sign
  logic prod_inf;   // the product is infinite (and not NaN)
  logic prod_zero;  // the product is an exact zero (and not NaN)
  logic res_nan;    // the result is NaN
  logic [P-1:0] ma_raw, mb_raw, ma, mb, mc;
  logic [4:0]   lza, lzb;
  exp_t         ea_n, eb_n, ec_e;
  logic [2*P-1:0] mp;  // exact product significand, leading one at bit 46 or 47
  exp_t           ep;  // product exponent: value = mp * 2^(ep - 173)
  exp_t         d;         // ec - ep
  exp_t         e_ref;     // reference exponent of the window
  logic [6:0]   shamt;     // right shift of c from window bits [75:52], 0 .. W
  logic [CW-1:0] c_ext;
  logic [W-1:0] c_win, p_win;
  logic         c_sticky;
  logic          eff_sub, carry_in;
  logic [SW-1:0] sum_raw, mag;
  logic          res_sign;
  logic [6:0]    lz;
  exp_t          max_sh;   // largest left shift that keeps the exponent >= 1
  logic [6:0]    sh;
  logic [SW-1:0] norm;
  exp_t          e_res;    // biased exponent of norm[76] (>= 1)
  logic          is_norm, overflow, guard_bit, sticky_bit, lsb_bit, round_up;
  logic [7:0]    exp_field;
  logic [30:0]   packed_mag;

  // The whole datapath is one process, computed only while en_i is high (else every signal is
  // 0): a simulator then skips it in the cycles nobody uses the result (a VPU lane idles most
  // cycles of a program; docs/scale.md, "One core").
  always_comb begin
    {sa, ea, fa} = '0;
    {sb, eb, fb} = '0;
    {sc, ec, fc} = '0;
    {a_nan, b_nan, c_nan, a_inf, b_inf, c_inf, a_zero, b_zero, c_zero} = '0;
    {sp, prod_inf, prod_zero, res_nan} = '0;
    {ma_raw, mb_raw, ma, mb, mc, lza, lzb} = '0;
    {ea_n, eb_n, ec_e, mp, ep, d, e_ref, shamt} = '0;
    {c_ext, c_win, p_win, c_sticky} = '0;
    {eff_sub, carry_in, sum_raw, mag, res_sign} = '0;
    {lz, max_sh, sh, norm, e_res} = '0;
    {is_norm, overflow, guard_bit, sticky_bit, lsb_bit, round_up, exp_field, packed_mag} = '0;
    r_o = '0;
    if (en_i) begin
      // -------------------------------------------------------------------------------------------
      // Unpack and classify.
      // -------------------------------------------------------------------------------------------
      {sa, ea, fa} = a_i;
      {sb, eb, fb} = b_i;
      {sc, ec, fc} = c_i;
      a_nan  = (ea == 8'hFF) && (fa != '0);
      b_nan  = (eb == 8'hFF) && (fb != '0);
      c_nan  = (ec == 8'hFF) && (fc != '0);
      a_inf  = (ea == 8'hFF) && (fa == '0);
      b_inf  = (eb == 8'hFF) && (fb == '0);
      c_inf  = (ec == 8'hFF) && (fc == '0);
      a_zero = (ea == '0) && (fa == '0);
      b_zero = (eb == '0) && (fb == '0);
      c_zero = (ec == '0) && (fc == '0);
      sp        = sa ^ sb;
      prod_inf  = a_inf | b_inf;
      prod_zero = a_zero | b_zero;
      res_nan   = a_nan | b_nan | c_nan | (a_inf & b_zero) | (a_zero & b_inf) |
                  (prod_inf & c_inf & (sp != sc));

      // -------------------------------------------------------------------------------------------
      // Normalise a and b, form the exact product.
      // -------------------------------------------------------------------------------------------
      ma_raw = {ea != '0, fa};
      mb_raw = {eb != '0, fb};
      mc     = {ec != '0, fc};
      lza    = lzc24(ma_raw);
      lzb    = lzc24(mb_raw);
      ma     = ma_raw << lza;
      mb     = mb_raw << lzb;
      // Subnormals carry exponent 1 (their scale), less the normalisation shift.
      ea_n   = ((ea == '0) ? exp_t'(1) : exp_t'(ea)) - exp_t'(lza);
      eb_n   = ((eb == '0) ? exp_t'(1) : exp_t'(eb)) - exp_t'(lzb);
      ec_e   = (ec == '0) ? exp_t'(1) : exp_t'(ec);
      mp = ma * mb;
      ep = ea_n + eb_n - exp_t'(BIAS);

      // -------------------------------------------------------------------------------------------
      // Align the addend in the window. Window bit i weighs 2^(e_ref - 175 + i).
      // -------------------------------------------------------------------------------------------
      d = ec_e - ep;
      if (d > exp_t'(PIN)) begin
        // c is far above the product: pin the window to c, the product becomes sticky-only.
        e_ref = ec_e - exp_t'(PIN);
        shamt = '0;
      end else begin
        e_ref = ep;
        shamt = (d < exp_t'(PIN) - exp_t'(W)) ? 7'(W) : 7'(exp_t'(PIN) - d);
      end
      c_ext    = {mc, {W{1'b0}}} >> shamt;
      c_win    = c_ext[CW-1 -: W];
      c_sticky = |c_ext[P-1:0];
      p_win    = {{(W - 2 * P - 2){1'b0}}, mp, 2'b00};

      // -------------------------------------------------------------------------------------------
      // Add / subtract. In a subtraction the addend's sticky bits mean "a little more than
      // c_win": leaving out the +1 of the two's complement computes p - c_win - 1, the floor of
      // the exact difference, and the sticky bit stays set. The difference can only be negative
      // when no bits were shifted out (c is then not below the product), so the complement
      // below is exact.
      // -------------------------------------------------------------------------------------------
      eff_sub  = sp ^ sc;
      carry_in = eff_sub & ~c_sticky;
      sum_raw  = {1'b0, p_win} + {1'b0, (eff_sub ? ~c_win : c_win)} + SW'(carry_in);
      if (!eff_sub) begin
        mag      = sum_raw;
        res_sign = sp;
      end else if (sum_raw[W]) begin
        // carry out: p - c >= 0
        mag      = {1'b0, sum_raw[W-1:0]};
        res_sign = sp;
      end else begin
        mag      = {1'b0, (~sum_raw[W-1:0]) + W'(1)};
        res_sign = sc;
      end

      // -------------------------------------------------------------------------------------------
      // Normalise (bounded by the minimum exponent), round to nearest even, pack.
      // -------------------------------------------------------------------------------------------
      lz     = lzc77(mag);
      max_sh = e_ref + exp_t'(PIN);
      sh     = (max_sh < exp_t'(0)) ? 7'd0 :
               (max_sh < exp_t'(lz)) ? 7'(max_sh) : lz;
      norm   = mag << sh;
      e_res  = e_ref + exp_t'(PIN + 1) - exp_t'(sh);

      is_norm    = norm[SW-1];
      overflow   = is_norm && (e_res >= exp_t'(255));
      exp_field  = is_norm ? e_res[7:0] : 8'd0;
      lsb_bit    = norm[SW-P];
      guard_bit  = norm[SW-P-1];
      sticky_bit = (|norm[SW-P-2:0]) | c_sticky;
      round_up   = guard_bit & (sticky_bit | lsb_bit);
      packed_mag = {exp_field, norm[SW-2 -: P-1]} + 31'(round_up);

      // -------------------------------------------------------------------------------------------
      // Result select: specials first.
      // -------------------------------------------------------------------------------------------
      if (res_nan) begin
        r_o = F32_CANON_NAN;
      end else if (prod_inf) begin
        r_o = {sp, 8'hFF, 23'd0};
      end else if (c_inf) begin
        r_o = c_i;
      end else if (prod_zero) begin
        // 0 + c is c exactly; 0 + 0 is -0 only when both are -0 (RNE zero-sign rule).
        r_o = c_zero ? {sp & sc, 31'd0} : c_i;
      end else if (mag == '0 && !c_sticky) begin
        r_o = 32'd0;  // exact cancellation: +0 under round to nearest
      end else if (overflow) begin
        r_o = {res_sign, 8'hFF, 23'd0};
      end else begin
        r_o = {res_sign, packed_mag};
      end
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Assertions
  // ---------------------------------------------------------------------------------------------
  // Any NaN the unit produces is the canonical one.
  always_comb begin
    `TPU_ASSERT_I(NanIsCanonical_A, !((r_o[30:23] == 8'hFF) && (r_o[22:0] != '0)) ||
                            (r_o == F32_CANON_NAN),
        ("%m: NanIsCanonical_A failed"))
  end

endmodule
