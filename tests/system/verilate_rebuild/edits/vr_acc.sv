// Edit 1's new module: the running sum of d_i.
module vr_acc (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic [7:0] d_i,
  output logic [7:0] sum_o
);
  /* verilator no_inline_module */
  logic [7:0] sum_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) sum_q <= '0;
    else sum_q <= sum_q + d_i;
  end
  assign sum_o = sum_q;
endmodule
