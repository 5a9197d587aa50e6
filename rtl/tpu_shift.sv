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

    // One process per stage (not a loop): arrays longer than Verilator's unroll limit stay
    // supported, as the 128x128 array's skew lines need.
    for (genvar s = 0; s < Depth; s++) begin : gen_stage
      data_t stage_d;
      if (s == 0) begin : gen_first
        assign stage_d = d_i;
      end else begin : gen_next
        assign stage_d = stage_q[s-1];
      end

      always_ff @(posedge clk_i or negedge rst_ni) begin
        if (!rst_ni) begin
          stage_q[s] <= '0;
        end else if (en_i) begin
          stage_q[s] <= stage_d;
        end
      end
    end

    assign q_o = stage_q[Depth-1];
  end

endmodule
