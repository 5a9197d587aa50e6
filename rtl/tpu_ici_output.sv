// tpu_ici_output: output unit of one router port: per output VC a credit counter (free buffer
// slots downstream) and an owner flag (a packet is between its head and its tail on this VC).
//
// Handshake: credit-based. The router sends (`send_i`) a flit on VC v only when `credit_o[v]`
// is set and, for a head, `free_o[v]` too; a flit costs one credit, each credit returned by the
// receiver (`cr_valid_i`, any latency) adds one back. Counters start at Credits (the
// receiver's buffer depth) and must stay in 0..Credits (asserted: credits are conserved).
// Latency: state updates at the clock edge after a send / credit; a credit returned in cycle t
// can be spent in t+1. Throughput: one flit per cycle.
`include "tpu_assert.svh"

module tpu_ici_output
  import tpu_ici_pkg::*;
#(
  parameter int unsigned NumVc = 2,
  parameter int unsigned Credits = 8,
  localparam int unsigned VcW = vc_width(NumVc),
  localparam int unsigned CntW = $clog2(Credits + 1)
) (
  input  logic                        clk_i,
  input  logic                        rst_ni,
  input  logic                        send_i,
  input  logic [VcW-1:0]              send_vc_i,
  input  logic                        send_head_i,
  input  logic                        send_tail_i,
  input  logic                        cr_valid_i,
  input  logic [VcW-1:0]              cr_vc_i,
  output logic [NumVc-1:0]            free_o,
  output logic [NumVc-1:0]            credit_o,
  output logic [NumVc-1:0][StatW-1:0] st_out_o,
  output logic                        all_credits_o
);

  logic [NumVc-1:0][CntW-1:0]  cnt_q;
  logic [NumVc-1:0]            busy_q;
  logic [NumVc-1:0][StatW-1:0] st_out_q;

  // Next state at the clock edge (the credits come from a link, often a top-level input: an
  // always_comb would run at every evaluation of the model).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cnt_q <= {NumVc{CntW'(Credits)}};
      busy_q <= '0;
      st_out_q <= '0;
    end else if (send_i || cr_valid_i) begin
      for (int unsigned v = 0; v < NumVc; v++) begin
        logic sent, ret;
        sent = send_i && (send_vc_i == VcW'(v));
        ret = cr_valid_i && (cr_vc_i == VcW'(v));
        if (sent && !ret) cnt_q[v] <= cnt_q[v] - 1'b1;
        if (ret && !sent) cnt_q[v] <= cnt_q[v] + 1'b1;
        if (sent) begin
          st_out_q[v] <= st_out_q[v] + 1'b1;
          if (send_head_i) busy_q[v] <= 1'b1;
          if (send_tail_i) busy_q[v] <= 1'b0;
        end
      end
    end
  end

  always_comb begin
    all_credits_o = 1'b1;
    for (int unsigned v = 0; v < NumVc; v++) begin
      credit_o[v] = (cnt_q[v] != '0);
      if (32'(cnt_q[v]) != Credits) all_credits_o = 1'b0;
    end
  end
  assign free_o = ~busy_q;
  assign st_out_o = st_out_q;

  // ---- Assertions ----
  // Credits are conserved: never spent when none is left, never returned beyond the depth.
  `TPU_ASSERT(CreditNoUnderflow_A,
                                          send_i |-> cnt_q[send_vc_i] != '0,
      ("tpu_ici_output: flit sent on VC %0d without a credit", send_vc_i))
  `TPU_ASSERT(CreditNoOverflow_A,
      cr_valid_i |-> (32'(cnt_q[cr_vc_i]) < Credits || (send_i && send_vc_i == cr_vc_i)),
      ("tpu_ici_output: credit on VC %0d beyond the buffer depth %0d", cr_vc_i, Credits))
  for (genvar v = 0; v < NumVc; v++) begin : gen_sva
    `TPU_ASSERT(CreditLeDepth_A,
                                        32'(cnt_q[v]) <= Credits,
        ("tpu_ici_output: VC %0d holds more credits than buffer slots", v))
  end
  // Wormhole on each VC: a head only on a free VC, a body or tail only on the VC its head took.
  `TPU_ASSERT(HeadOnFreeVc_A,
                                      send_i && send_head_i |-> !busy_q[send_vc_i],
      ("tpu_ici_output: head on VC %0d interleaves another packet", send_vc_i))
  `TPU_ASSERT(BodyOnOwnVc_A,
                                     send_i && !send_head_i |-> busy_q[send_vc_i],
      ("tpu_ici_output: body flit on VC %0d that no packet holds", send_vc_i))
  `TPU_ASSERT(SendVcRange_A,
                                    send_i |-> 32'(send_vc_i) < NumVc,
      ("tpu_ici_output: VC %0d out of range", send_vc_i))

endmodule
