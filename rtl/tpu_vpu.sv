// tpu_vpu: the vector unit: Lanes f32 lanes of elementwise ops, plus sum / max reductions.
//
// Input beat: op, three operand vectors x, y, z (f32 lanes, or bf16 in bits [15:0] where the
// src_bf16 bit of the operand is set), dst_bf16 (round results to bf16), and for reductions
// first / last (group delimiters) and a lane mask. Output beat: Lanes results, or for a
// reduction one scalar in lane 0 (other lanes +0) with out_scalar_o set. docs/vpu.md has the
// encodings and the numerics (the golden model is tpu::VpuModel in model/).
//
// Handshake: valid/ready on both sides; a payload is held stable while valid && !ready.
// Latency: 1 cycle, input beat accepted at edge t, its result valid from edge t onwards (one
// output register). Throughput: one beat per cycle, with in_ready_o = !out_valid_q ||
// out_ready_i (combinational path from out_ready_i to in_ready_o).
// Elementwise beats produce one output beat each. A reduction group is the beats from the one
// with first set to the one with last set (both set: one beat), all with the same op; only its
// last beat produces an output. Lane l accumulates its own x values across the group's beats in
// order, then the lanes are reduced by a fixed pairwise tree (tpu_vpu_tree). Elementwise beats
// may sit between the beats of a group; two groups may not interleave. idle_o: no output beat
// pending and no reduction group open (for a sequencer's fence).
`include "tpu_assert.svh"

module tpu_vpu
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
#(
  parameter int unsigned Lanes = 8  // lanes; equals the MXU column count in a chip variant
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  // Input beat
  input  logic             in_valid_i,
  output logic             in_ready_o,
  input  vpu_op_e          in_op_i,
  input  logic [2:0]       in_src_bf16_i,  // {z, y, x}: operand lanes hold bf16 in bits [15:0]
  input  logic             in_dst_bf16_i,  // results are bf16 in bits [15:0] (upper bits 0)
  input  logic             in_first_i,     // reductions: first beat of a group
  input  logic             in_last_i,      // reductions: last beat of a group
  input  logic [Lanes-1:0] in_mask_i,      // reductions: lanes whose x takes part
  input  f32_t [Lanes-1:0] in_x_i,
  input  f32_t [Lanes-1:0] in_y_i,
  input  f32_t [Lanes-1:0] in_z_i,
  // Output beat
  output logic             out_valid_o,
  input  logic             out_ready_i,
  output logic             out_scalar_o,   // reduction result in lane 0
  output f32_t [Lanes-1:0] out_data_o,
  // Status
  output logic             idle_o          // no output pending and no reduction group open
);

  // ---------------------------------------------------------------------------------------------
  // Handshake
  // ---------------------------------------------------------------------------------------------
  logic out_valid_q, out_valid_d;
  logic in_fire, out_fire, in_red, in_produces;

  assign in_ready_o  = !out_valid_q || out_ready_i;
  assign in_fire     = in_valid_i && in_ready_o;
  assign out_fire    = out_valid_q && out_ready_i;
  assign in_red      = vpu_op_is_red(in_op_i);
  assign in_produces = !in_red || in_last_i;

  // ---------------------------------------------------------------------------------------------
  // Lanes
  // ---------------------------------------------------------------------------------------------
  f32_t [Lanes-1:0] acc_q, acc_d, lane_res, lane_acc;

  for (genvar l = 0; l < Lanes; l++) begin : gen_lane
    tpu_vpu_lane i_lane (
      .en_i      (in_valid_i),  // results are only taken with a beat: idle lanes compute nothing
      .op_i      (in_op_i),
      .src_bf16_i(in_src_bf16_i),
      .dst_bf16_i(in_dst_bf16_i),
      .first_i   (in_first_i),
      .mask_i    (in_mask_i[l]),
      .x_i       (in_x_i[l]),
      .y_i       (in_y_i[l]),
      .z_i       (in_z_i[l]),
      .acc_i     (acc_q[l]),
      .res_o     (lane_res[l]),
      .acc_o     (lane_acc[l])
    );
  end

  // ---------------------------------------------------------------------------------------------
  // Reductions: per-lane accumulators, group state, cross-lane tree on the last beat.
  // ---------------------------------------------------------------------------------------------
  logic    red_active_q, red_active_d;
  vpu_op_e red_op_q, red_op_d;
  f32_t    red_root, red_scalar;

  always_comb begin
    acc_d        = acc_q;
    red_active_d = red_active_q;
    red_op_d     = red_op_q;
    if (in_fire && in_red) begin
      acc_d        = lane_acc;
      red_active_d = !in_last_i;
      red_op_d     = in_op_i;
    end
  end

  tpu_vpu_tree #(
    .Lanes(Lanes)
  ) i_tree (
    .en_i    (in_valid_i && in_red && in_last_i),  // the root is only taken then
    .max_i   (in_op_i == VpuRedMax),
    .leaves_i(lane_acc),
    .root_o  (red_root)
  );

  assign red_scalar = in_dst_bf16_i ? {16'h0000, f32_to_bf16(red_root)} : f32_canon(red_root);

  // ---------------------------------------------------------------------------------------------
  // Output register
  // ---------------------------------------------------------------------------------------------
  logic             out_scalar_q, out_scalar_d;
  f32_t [Lanes-1:0] out_data_q, out_data_d;

  always_comb begin
    out_valid_d  = out_valid_q;
    out_scalar_d = out_scalar_q;
    out_data_d   = out_data_q;
    if (out_fire) begin
      out_valid_d = 1'b0;
    end
    if (in_fire && in_produces) begin
      out_valid_d  = 1'b1;
      out_scalar_d = in_red;
      if (in_red) begin
        out_data_d    = '0;
        out_data_d[0] = red_scalar;
      end else begin
        out_data_d = lane_res;
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      out_valid_q  <= 1'b0;
      out_scalar_q <= 1'b0;
      out_data_q   <= '0;
      acc_q        <= '0;
      red_active_q <= 1'b0;
      red_op_q     <= VpuRedSum;
    end else begin
      out_valid_q  <= out_valid_d;
      out_scalar_q <= out_scalar_d;
      out_data_q   <= out_data_d;
      acc_q        <= acc_d;
      red_active_q <= red_active_d;
      red_op_q     <= red_op_d;
    end
  end

  assign out_valid_o  = out_valid_q;
  assign out_scalar_o = out_scalar_q;
  assign out_data_o   = out_data_q;
  assign idle_o       = !out_valid_q && !red_active_q;

  // ---------------------------------------------------------------------------------------------
  // Assertions
  // ---------------------------------------------------------------------------------------------
  // Upstream protocol: a presented beat stays presented, unchanged, until it is taken.
  `TPU_ASSERT(InValidHeld_A,
      in_valid_i && !in_ready_o |=> in_valid_i,
      ("%m: InValidHeld_A failed"))
  // Payloads stable while a beat waits: immediate assertions at the clock edge against copies
  // taken only while it waits (concurrent $stable assertions sampled all three operand rows and
  // the result at every eval(); docs/scale.md "One core"). Same names, messages and cycles.
  typedef struct packed {
    vpu_op_e          op;
    logic [2:0]       src_bf16;
    logic             dst_bf16, first, last;
    logic [Lanes-1:0] mask;
    f32_t [Lanes-1:0] x, y, z;
  } in_beat_t;
  in_beat_t in_beat, in_held_q;
  logic     in_wait_q, out_wait_q, out_scalar_held_q, in_same, out_same;
  f32_t [Lanes-1:0] out_held_q;
  assign in_beat = '{op: in_op_i, src_bf16: in_src_bf16_i, dst_bf16: in_dst_bf16_i,
                     first: in_first_i, last: in_last_i, mask: in_mask_i, x: in_x_i, y: in_y_i,
                     z: in_z_i};
  always_comb begin  // compared only while a beat waits
    in_same = 1'b1;
    out_same = 1'b1;
    if (in_wait_q) in_same = (in_beat == in_held_q);
    if (out_wait_q) out_same = (out_data_o == out_held_q) && (out_scalar_o == out_scalar_held_q);
  end
  always_ff @(posedge clk_i) begin
    if (rst_ni && in_wait_q) begin
      `TPU_ASSERT_I(InPayloadStable_A, in_same, ("%m: InPayloadStable_A failed"))
    end
    if (rst_ni && out_wait_q) begin
      `TPU_ASSERT_I(OutPayloadStable_A, out_same, ("%m: OutPayloadStable_A failed"))
    end
    in_wait_q <= in_valid_i && !in_ready_o;
    out_wait_q <= out_valid_o && !out_ready_i;
    if (in_valid_i && !in_ready_o) in_held_q <= in_beat;
    if (out_valid_o && !out_ready_i) begin
      out_held_q        <= out_data_o;
      out_scalar_held_q <= out_scalar_o;
    end
  end
  `TPU_ASSERT(InOpKnown_A,
      in_valid_i |-> vpu_op_vector(in_op_i),
      ("%m: InOpKnown_A failed"))
  // Reduction groups: a continuing beat belongs to the open group; groups do not nest.
  `TPU_ASSERT(RedGroupContinues_A,
      in_fire && in_red && !in_first_i |-> red_active_q && (in_op_i == red_op_q),
      ("%m: RedGroupContinues_A failed"))
  `TPU_ASSERT(RedGroupNotNested_A,
      in_fire && in_red && in_first_i |-> !red_active_q,
      ("%m: RedGroupNotNested_A failed"))
  // Downstream protocol: this unit holds its output until it is taken.
  `TPU_ASSERT(OutValidHeld_A,
      out_valid_o && !out_ready_i |=> out_valid_o,
      ("%m: OutValidHeld_A failed"))
  // A reduction result sits in lane 0 alone.
  `TPU_ASSERT(OutScalarLane0Only_A,
      out_valid_o && out_scalar_o |-> (out_data_o >> 32) == '0,
      ("%m: OutScalarLane0Only_A failed"))

endmodule
