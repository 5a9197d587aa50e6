// tpu_ici_link_rx: the receiving half of the ICI link layer, between the wire and a router's link
// input (docs/ici.md "Link layer"); its partner is the neighbour's tpu_ici_link_tx.
//
// A flit word whose CRC-32C (tpu_ici_crc over {seq, vc, flit}) matches and whose sequence number
// is the expected one goes to the router in the same cycle (`rx_*`; latency 0) and is counted as
// received: each flit reaches the router exactly once and in order. Anything else is dropped: a
// word with a bad CRC (counted, `st_crc_err_o`) or a sequence number ahead of the expected one
// (a flit before it was lost) asks for a replay with a NAK, once until the expected flit arrives
// (the sender's time-out covers a lost NAK); an old sequence number (a resend of a flit already
// received) asks for an ACK, so that a sender whose ACK was lost stops resending.
//
// Control words (to the sender, on the reverse channel, with their own CRC-32C) go out when
// there is something to say: the ACK of a flit accepted the cycle before, a NAK, or a credit the
// router returns this cycle. Every one carries the cumulative ACK (the next expected sequence
// number), the NAK bit and the per-VC counts of credits returned so far (mod 2^LinkCntW), this
// cycle's credit included: a lost control word loses nothing for good, the next good one carries
// the counts and the ACK again. Its CRC (`c_crc_o`) is 0 while no control word goes out. Every
// output is a function of registered state and of the router's credit outputs (registered state
// too), so the link adds no combinational path.
`include "tpu_assert.svh"

module tpu_ici_link_rx
  import tpu_ici_pkg::*;
#(
  parameter type         flit_t = ici_flit_t,
  parameter int unsigned NumVc  = 4,
  localparam int unsigned VcW  = vc_width(NumVc),
  localparam int unsigned CtlW = link_ctl_width(NumVc),
  localparam int unsigned SeqW = LinkSeqW
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  // wire: flit words in, control words back
  input  logic             w_valid_i,
  input  logic [VcW-1:0]   w_vc_i,
  input  flit_t            w_flit_i,
  input  logic [SeqW-1:0]  w_seq_i,
  input  logic [31:0]      w_crc_i,
  output logic             c_valid_o,
  output logic [CtlW-1:0]  c_ctl_o,
  output logic [31:0]      c_crc_o,
  // router side
  output logic             rx_valid_o,
  output logic [VcW-1:0]   rx_vc_o,
  output flit_t            rx_flit_o,
  input  logic             rx_cr_valid_i,
  input  logic [VcW-1:0]   rx_cr_vc_i,
  // status and counters
  output logic             idle_o,      // no ACK or NAK waiting to go out
  output logic [StatW-1:0] st_crc_err_o
);

  localparam int unsigned CntW = LinkCntW;

  typedef struct packed {
    logic [SeqW-1:0]            ack;
    logic                       nak;
    logic [NumVc-1:0][CntW-1:0] cnt;
  } ctl_t;

  logic [SeqW-1:0]            exp_q;  // the next sequence number to accept
  logic                       ack_q, nak_q, nak_sent_q;
  logic [NumVc-1:0][CntW-1:0] cnt_q, cnt_d;
  logic [StatW-1:0]           crc_err_q;

  // ---- Flit word in ----
  logic [31:0]     crc;
  logic            crc_ok, bad, good, ahead, old;
  logic [SeqW-1:0] diff;
  tpu_ici_crc #(
    .Width(SeqW + VcW + $bits(flit_t))
  ) i_flit_crc (
    .en_i  (w_valid_i),  // the CRC is only compared beside a valid word
    .data_i({w_seq_i, w_vc_i, w_flit_i}),
    .crc_o (crc)
  );
  assign crc_ok = w_valid_i && (crc == w_crc_i);
  assign bad    = w_valid_i && (crc != w_crc_i);
  assign diff   = w_seq_i - exp_q;
  assign good   = crc_ok && (diff == '0);
  assign ahead  = crc_ok && (diff != '0) && !diff[SeqW-1];
  assign old    = crc_ok && diff[SeqW-1];

  assign rx_valid_o = good;
  assign rx_vc_o    = w_vc_i;
  assign rx_flit_o  = w_flit_i;

  // The credit counts the control word carries include this cycle's credit (cnt_d); the rest of
  // the next state is worked out at the clock edge (it depends on the link's word, a top-level
  // input of a chip: an always_comb would run at every evaluation of the model).
  always_comb begin
    cnt_d = cnt_q;
    if (rx_cr_valid_i) cnt_d[rx_cr_vc_i] = cnt_q[rx_cr_vc_i] + 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      exp_q      <= '0;
      ack_q      <= 1'b0;
      nak_q      <= 1'b0;
      nak_sent_q <= 1'b0;
      cnt_q      <= '0;
      crc_err_q  <= '0;
    end else begin
      if (good) exp_q <= exp_q + 1'b1;
      ack_q      <= good || old;
      nak_q      <= (bad || ahead) && !nak_sent_q;
      nak_sent_q <= good ? 1'b0 : (nak_sent_q || bad || ahead);
      if (bad) crc_err_q <= crc_err_q + 1'b1;
      if (rx_cr_valid_i) cnt_q <= cnt_d;
    end
  end

  // ---- Control word out ----
  ctl_t ctl;
  assign ctl       = '{ack: exp_q, nak: nak_q, cnt: cnt_d};
  assign c_valid_o = ack_q || nak_q || rx_cr_valid_i;
  assign c_ctl_o   = CtlW'(ctl);
  tpu_ici_crc #(
    .Width(CtlW)
  ) i_ctl_crc (
    .en_i  (c_valid_o),  // the word is only read beside its valid (0 otherwise)
    .data_i(c_ctl_o),
    .crc_o (c_crc_o)
  );

  assign idle_o       = !ack_q && !nak_q;
  assign st_crc_err_o = crc_err_q;

  // ---- Assertions ----
  // Only a good flit with the expected sequence number reaches the router.
  `TPU_ASSERT(DeliverInOrder_A,
      rx_valid_o |-> w_valid_i && crc == w_crc_i && w_seq_i == exp_q,
      ("tpu_ici_link_rx: flit delivered out of order or with a bad CRC"))
  // One NAK per error: a NAK goes out only when none has since the last accepted flit.
  `TPU_ASSERT(OneNak_A,
      nak_q |-> nak_sent_q,
      ("tpu_ici_link_rx: NAK without an error"))
  // A credit comes back only for a flit accepted in an earlier cycle, so the ACK that covers it
  // (carried by this control word or an earlier one) is never behind the credit: what sizes the
  // sender's replay buffer. `owed_q`: flits accepted minus credits returned.
  logic [15:0] owed_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) owed_q <= '0;
    else owed_q <= owed_q + 16'(good) - 16'(rx_cr_valid_i);
  end
  `TPU_ASSERT(CreditOwed_A,
      rx_cr_valid_i |-> owed_q != '0,
      ("tpu_ici_link_rx: credit returned for a flit that was not accepted"))

endmodule
