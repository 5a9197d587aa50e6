// Edit 2 (removes signals): no counter any more (cnt_q, up, down gone), y_o = a_i ^ b_i.
module vr_sub (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic [7:0] a_i,
  input  logic [7:0] b_i,
  output logic [7:0] y_o
);
  /* verilator no_inline_module */
  logic unused;
  assign unused = clk_i ^ rst_ni;
  assign y_o = a_i ^ b_i;
endmodule
