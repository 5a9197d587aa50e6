// tpu_pe: one processing element of the weight-stationary systolic array.
//
// Holds two weights (double buffer). Each enabled cycle it takes an activation from the left and
// a partial sum from above, computes psum_o = fma(a, w[sel], psum_i) with one rounding (tpu_mac),
// and registers the activation (with its bank select) to the right and the new partial sum
// downward. Latency: one cycle right, one cycle down. Weight writes go straight into the named
// bank and are independent of `en_i`; the MXU guarantees no in-flight beat still reads that bank.
module tpu_pe (
  input  logic           clk_i,
  input  logic           rst_ni,
  input  logic           en_i,       // the array advances this cycle
  // weight write port
  input  logic           w_we_i,
  input  logic           w_bank_i,
  input  tpu_pkg::bf16_t w_data_i,
  // activation in from the left, out to the right
  input  tpu_pkg::bf16_t a_i,
  input  logic           sel_i,      // which weight bank this activation multiplies
  output tpu_pkg::bf16_t a_o,
  output logic           sel_o,
  // partial sum in from above, out below
  input  tpu_pkg::f32_t  psum_i,
  output tpu_pkg::f32_t  psum_o
);

  tpu_pkg::bf16_t w_q [2];
  tpu_pkg::bf16_t a_q;
  logic           sel_q;
  tpu_pkg::f32_t  psum_d, psum_q;

  tpu_mac i_mac (
    .a_i  (a_i),
    .w_i  (w_q[sel_i]),
    .acc_i(psum_i),
    .acc_o(psum_d)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      w_q[0] <= '0;
      w_q[1] <= '0;
    end else if (w_we_i) begin
      w_q[w_bank_i] <= w_data_i;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      a_q    <= '0;
      sel_q  <= 1'b0;
      psum_q <= '0;
    end else if (en_i) begin
      a_q    <= a_i;
      sel_q  <= sel_i;
      psum_q <= psum_d;
    end
  end

  assign a_o    = a_q;
  assign sel_o  = sel_q;
  assign psum_o = psum_q;

endmodule
