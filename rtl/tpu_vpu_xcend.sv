// tpu_vpu_xcend: the VPU's transcendental lanes: Lanes tpu_xcend units side by side, for the
// VPU ops VpuExp2, VpuLog2, VpuRcp, VpuRsqrt, VpuTanh and VpuExp (docs/vpu.md), with the VPU's
// operand and result formats and a tag (the row's destination) that rides beside each beat.
//
// Input beat: op (one of the six; SVA XcendOpOnly_A), x (f32 lanes, or bf16 in bits [15:0] with
// src_bf16_x_i), dst_bf16_i (round each result to bf16, in bits [15:0], upper bits 0), a tag.
// Each lane computes tpu_xcend function (op - VpuExp2) of its widened x: the golden is
// tpu::vpu_lane (model/src/vector.cc), i.e. tpu::xcend_bits, then f32_to_bf16 with dst_bf16.
// Handshake: none (always ready, as tpu_xcend): a beat with in_valid_i is taken every cycle.
// Latency: 5 cycles (tpu_xcend's), throughput one beat per cycle, in order: a beat taken at edge
// t is on out_valid_o / out_data_o / out_tag_o from edge t + 4 to edge t + 5 (tpu_vpu's output
// is there from edge t: 4 cycles later than tpu_vpu). pend_o: a beat is in the first four
// stages, i.e. its output is still to come after the next edge (tpu_vpu_unit keeps tpu_vpu's
// writes off the cycles of these, and in order behind them).
// Stages: the five of tpu_xcend (its x widened in front, the bf16 rounding behind its output
// register, both combinational); the tag and dst_bf16 in a shift register beside them.
`include "tpu_assert.svh"

module tpu_vpu_xcend
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
#(
  parameter int unsigned Lanes = 8,
  parameter int unsigned TagW  = 1,
  localparam int unsigned Lat  = 5  // tpu_xcend's latency
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic             in_valid_i,
  input  vpu_op_e          in_op_i,
  input  logic             in_src_bf16_x_i,  // x lanes hold bf16 in bits [15:0]
  input  logic             in_dst_bf16_i,    // results are bf16 in bits [15:0]
  input  logic [TagW-1:0]  in_tag_i,
  input  f32_t [Lanes-1:0] in_x_i,
  output logic             out_valid_o,
  output logic [TagW-1:0]  out_tag_o,
  output f32_t [Lanes-1:0] out_data_o,
  output logic             pend_o           // a beat in stages 1 .. Lat-1
);

  // valid, dst_bf16 and tag of the beat in each stage (stage Lat-1 is the output's)
  logic [Lat-1:0]            v_q;
  logic [Lat-1:0]            bf_q;
  logic [Lat-1:0][TagW-1:0]  tag_q;
  logic [2:0]                fn;
  f32_t [Lanes-1:0]          x_w, y;
  logic [Lanes-1:0]          lane_v;

  assign fn = vpu_op_xcend_fn(in_op_i);

  for (genvar l = 0; l < Lanes; l++) begin : gen_lane
    assign x_w[l] = in_src_bf16_x_i ? bf16_to_f32(in_x_i[l][15:0]) : in_x_i[l];
    tpu_xcend i_xcend (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .valid_i(in_valid_i),
      .fn_i   (fn),
      .x_i    (x_w[l]),
      .valid_o(lane_v[l]),
      .y_o    (y[l])
    );
    assign out_data_o[l] = bf_q[Lat-1] ? {16'h0000, f32_to_bf16(y[l])} : y[l];
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      v_q   <= '0;
      bf_q  <= '0;
      tag_q <= '0;
    end else begin
      v_q  <= {v_q[Lat-2:0], in_valid_i};
      bf_q <= {bf_q[Lat-2:0], in_dst_bf16_i};
      for (int unsigned s = Lat - 1; s > 0; s--) tag_q[s] <= tag_q[s-1];
      tag_q[0] <= in_tag_i;
    end
  end

  assign out_valid_o = v_q[Lat-1];
  assign out_tag_o   = tag_q[Lat-1];
  assign pend_o      = |v_q[Lat-2:0];

  // Assertions
  `TPU_ASSERT(XcendOpOnly_A,
      in_valid_i |-> vpu_op_is_xcend(in_op_i),
      ("%m: XcendOpOnly_A failed: op %0d is not a transcendental op", in_op_i))
  `TPU_ASSERT(XcendLanesInStep_A,
      lane_v == {Lanes{out_valid_o}},
      ("%m: XcendLanesInStep_A failed: the lanes' valid is not the beat's"))

endmodule
