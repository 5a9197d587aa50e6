// Edit 1 (adds signals and a module): z_o is the running sum of a_i, from a new vr_acc.
module vr_top (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic [7:0] a_i,
  input  logic [7:0] b_i,
  output logic [7:0] y_o,
  output logic [7:0] z_o
);
  vr_sub i_sub (
    .clk_i (clk_i),
    .rst_ni(rst_ni),
    .a_i   (a_i),
    .b_i   (b_i),
    .y_o   (y_o)
  );
  vr_acc i_acc (
    .clk_i (clk_i),
    .rst_ni(rst_ni),
    .d_i   (a_i),
    .sum_o (z_o)
  );
endmodule
