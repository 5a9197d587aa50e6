// tpu_fma32: correctly rounded IEEE-754 binary32 fused multiply-add, r = a * b + c.
//
// One rounding (round to nearest, ties to even) of the exact a * b + c. Subnormal inputs and
// results are honoured (no flush to zero); any NaN result is the canonical 0x7FC00000; an exact
// zero sum is +0 unless both the product and the addend are zeros of negative sign (IEEE RNE
// zero-sign rule); overflow gives Inf of the result's sign. The VPU derives every arithmetic op
// from this one unit: add = a * 1.0 + c, sub = a * 1.0 + (-c), mul = a * b + (-0.0).
//
// Latency: combinational (0 cycles), no state, no handshake. Callers register around it.
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
module tpu_fma32
  import tpu_pkg::*;
(
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

  // ---------------------------------------------------------------------------------------------
  // Unpack and classify.
  // ---------------------------------------------------------------------------------------------
  logic       sa, sb, sc;
  logic [7:0] ea, eb, ec;
  logic [22:0] fa, fb, fc;
  assign {sa, ea, fa} = a_i;
  assign {sb, eb, fb} = b_i;
  assign {sc, ec, fc} = c_i;

  logic a_nan, b_nan, c_nan, a_inf, b_inf, c_inf, a_zero, b_zero, c_zero;
  assign a_nan  = (ea == 8'hFF) && (fa != '0);
  assign b_nan  = (eb == 8'hFF) && (fb != '0);
  assign c_nan  = (ec == 8'hFF) && (fc != '0);
  assign a_inf  = (ea == 8'hFF) && (fa == '0);
  assign b_inf  = (eb == 8'hFF) && (fb == '0);
  assign c_inf  = (ec == 8'hFF) && (fc == '0);
  assign a_zero = (ea == '0) && (fa == '0);
  assign b_zero = (eb == '0) && (fb == '0);
  assign c_zero = (ec == '0) && (fc == '0);

  logic sp;         // product sign
  logic prod_inf;   // the product is infinite (and not NaN)
  logic prod_zero;  // the product is an exact zero (and not NaN)
  logic res_nan;    // the result is NaN
  assign sp        = sa ^ sb;
  assign prod_inf  = a_inf | b_inf;
  assign prod_zero = a_zero | b_zero;
  assign res_nan   = a_nan | b_nan | c_nan | (a_inf & b_zero) | (a_zero & b_inf) |
                     (prod_inf & c_inf & (sp != sc));

  // ---------------------------------------------------------------------------------------------
  // Normalise a and b, form the exact product.
  // ---------------------------------------------------------------------------------------------
  // Leading zeros of a 24-bit significand (24 when zero).
  function automatic logic [4:0] lzc24(logic [P-1:0] m);
    logic [4:0] n;
    n = 5'(P);
    for (int unsigned i = 0; i < P; i++) begin
      if (m[i]) n = 5'(P - 1 - i);
    end
    return n;
  endfunction

  logic [P-1:0] ma_raw, mb_raw, ma, mb, mc;
  logic [4:0]   lza, lzb;
  exp_t         ea_n, eb_n, ec_e;
  assign ma_raw = {ea != '0, fa};
  assign mb_raw = {eb != '0, fb};
  assign mc     = {ec != '0, fc};
  assign lza    = lzc24(ma_raw);
  assign lzb    = lzc24(mb_raw);
  assign ma     = ma_raw << lza;
  assign mb     = mb_raw << lzb;
  // Subnormals carry exponent 1 (their scale), less the normalisation shift.
  assign ea_n   = ((ea == '0) ? exp_t'(1) : exp_t'(ea)) - exp_t'(lza);
  assign eb_n   = ((eb == '0) ? exp_t'(1) : exp_t'(eb)) - exp_t'(lzb);
  assign ec_e   = (ec == '0) ? exp_t'(1) : exp_t'(ec);

  logic [2*P-1:0] mp;  // exact product significand, leading one at bit 46 or 47
  exp_t           ep;  // product exponent: value = mp * 2^(ep - 173)
  assign mp = ma * mb;
  assign ep = ea_n + eb_n - exp_t'(BIAS);

  // ---------------------------------------------------------------------------------------------
  // Align the addend in the window. Window bit i weighs 2^(e_ref - 175 + i).
  // ---------------------------------------------------------------------------------------------
  exp_t         d;         // ec - ep
  exp_t         e_ref;     // reference exponent of the window
  logic [6:0]   shamt;     // right shift of c from window bits [75:52], 0 .. W
  logic [CW-1:0] c_ext;
  logic [W-1:0] c_win, p_win;
  logic         c_sticky;

  assign d = ec_e - ep;

  always_comb begin
    if (d > exp_t'(PIN)) begin
      // c is far above the product: pin the window to c, the product becomes sticky-only.
      e_ref = ec_e - exp_t'(PIN);
      shamt = '0;
    end else begin
      e_ref = ep;
      shamt = (d < exp_t'(PIN) - exp_t'(W)) ? 7'(W) : 7'(exp_t'(PIN) - d);
    end
  end

  assign c_ext    = {mc, {W{1'b0}}} >> shamt;
  assign c_win    = c_ext[CW-1 -: W];
  assign c_sticky = |c_ext[P-1:0];
  assign p_win    = {{(W - 2 * P - 2){1'b0}}, mp, 2'b00};

  // ---------------------------------------------------------------------------------------------
  // Add / subtract. In a subtraction the addend's sticky bits mean "a little more than c_win":
  // leaving out the +1 of the two's complement computes p - c_win - 1, the floor of the exact
  // difference, and the sticky bit stays set. The difference can only be negative when no bits
  // were shifted out (c is then not below the product), so the complement below is exact.
  // ---------------------------------------------------------------------------------------------
  logic          eff_sub, carry_in;
  logic [SW-1:0] sum_raw, mag;
  logic          res_sign;
  assign eff_sub  = sp ^ sc;
  assign carry_in = eff_sub & ~c_sticky;
  assign sum_raw  = {1'b0, p_win} + {1'b0, (eff_sub ? ~c_win : c_win)} + SW'(carry_in);

  always_comb begin
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
  end

  // ---------------------------------------------------------------------------------------------
  // Normalise (bounded by the minimum exponent), round to nearest even, pack.
  // ---------------------------------------------------------------------------------------------
  function automatic logic [6:0] lzc77(logic [SW-1:0] v);
    logic [6:0] n;
    n = 7'(SW);
    for (int unsigned i = 0; i < SW; i++) begin
      if (v[i]) n = 7'(SW - 1 - i);
    end
    return n;
  endfunction

  logic [6:0]    lz;
  exp_t          max_sh;   // largest left shift that keeps the exponent >= 1
  logic [6:0]    sh;
  logic [SW-1:0] norm;
  exp_t          e_res;    // biased exponent of norm[76] (>= 1)
  logic          is_norm, overflow, guard_bit, sticky_bit, lsb_bit, round_up;
  logic [7:0]    exp_field;
  logic [30:0]   packed_mag;

  assign lz     = lzc77(mag);
  assign max_sh = e_ref + exp_t'(PIN);
  assign sh     = (max_sh < exp_t'(0)) ? 7'd0 :
                  (max_sh < exp_t'(lz)) ? 7'(max_sh) : lz;
  assign norm   = mag << sh;
  assign e_res  = e_ref + exp_t'(PIN + 1) - exp_t'(sh);

  assign is_norm    = norm[SW-1];
  assign overflow   = is_norm && (e_res >= exp_t'(255));
  assign exp_field  = is_norm ? e_res[7:0] : 8'd0;
  assign lsb_bit    = norm[SW-P];
  assign guard_bit  = norm[SW-P-1];
  assign sticky_bit = (|norm[SW-P-2:0]) | c_sticky;
  assign round_up   = guard_bit & (sticky_bit | lsb_bit);
  assign packed_mag = {exp_field, norm[SW-2 -: P-1]} + 31'(round_up);

  // ---------------------------------------------------------------------------------------------
  // Result select: specials first.
  // ---------------------------------------------------------------------------------------------
  always_comb begin
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

  // ---------------------------------------------------------------------------------------------
  // Assertions
  // ---------------------------------------------------------------------------------------------
  // Any NaN the unit produces is the canonical one.
  always_comb begin
    NanIsCanonical: assert (!((r_o[30:23] == 8'hFF) && (r_o[22:0] != '0)) ||
                            (r_o == F32_CANON_NAN));
  end

endmodule
