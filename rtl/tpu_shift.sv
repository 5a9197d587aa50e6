// tpu_shift: a delay line of `Depth` registers that advance together when `en_i` is high.
//
// Latency: Depth enabled cycles (Depth = 0 is a wire). Throughput: one item per enabled cycle.
// No handshake: the MXU stalls its whole pipeline with one enable, so skew and deskew lines
// move in lockstep with the array.
module tpu_shift #(
  parameter type         data_t = logic,
  parameter int unsigned Depth  = 1
) (
  input  logic  clk_i,
  input  logic  rst_ni,
  input  logic  en_i,
  input  data_t d_i,
  output data_t q_o
);

  if (Depth == 0) begin : gen_wire
    assign q_o = d_i;
    logic unused_ctrl;
    assign unused_ctrl = ^{clk_i, rst_ni, en_i};
  end else begin : gen_regs
    data_t stage_q [Depth];

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        for (int unsigned i = 0; i < Depth; i++) stage_q[i] <= '0;
      end else if (en_i) begin
        stage_q[0] <= d_i;
        for (int unsigned i = 1; i < Depth; i++) stage_q[i] <= stage_q[i-1];
      end
    end

    assign q_o = stage_q[Depth-1];
  end

endmodule
