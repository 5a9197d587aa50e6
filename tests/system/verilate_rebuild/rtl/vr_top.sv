// Scratch top of the rebuild test: one vr_sub; z_o is 0 (edits/vr_top_add.sv drives it).
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
  assign z_o = '0;
endmodule
