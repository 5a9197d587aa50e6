// Scratch submodule: counts cycles where a_i < b_i up and the others down (y_o: the count).
module vr_sub (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic [7:0] a_i,
  input  logic [7:0] b_i,
  output logic [7:0] y_o
);
  /* verilator no_inline_module */
  logic       up, down;
  logic [7:0] cnt_q;
  assign up   = a_i < b_i;
  assign down = !up;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) cnt_q <= 8'd100;
    else if (up) cnt_q <= cnt_q + 8'd1;
    else if (down) cnt_q <= cnt_q - 8'd1;
  end
  assign y_o = cnt_q;
endmodule
