// tpu_ici_link_tx: the sending half of the ICI link layer, between a router's link output and
// the wire (docs/ici.md "Link layer"). Go-back-N retransmission, as in PCIe's data link layer.
//
// Every flit the router sends gets the next sequence number (LinkSeqW bits) and goes on the wire
// with a CRC-32C (tpu_ici_crc) over {seq, vc, flit}; it stays in the replay buffer until the
// receiver acknowledges it. Control words come back on the reverse channel (their own CRC-32C;
// a bad one is ignored and counted): a cumulative ACK (the next sequence number the receiver
// expects), a NAK (go back to that number and resend from there) and the receiver's per-VC count
// of credits returned, which this side turns back into one credit per cycle for the router
// (`tx_cr_*`). No ACK progress for `timeout_i` cycles while a flit is unacknowledged resends from
// the oldest one. A replay that is followed by another with no ACK progress in between has
// failed; when MaxReplays replays have failed in a row and another is due, the link is down: it
// sends nothing more (`down_o`, sticky until reset).
//
// Replay buffer: NumVc x Depth entries (rounded up to a power of two). Enough because a flit is
// acknowledged no later than its credit comes back: the receiver sends a credit only for a flit
// that has left its buffer, so the flit was accepted at least one cycle earlier, and every
// control word carries the ACK of everything accepted before it; the ACK and the credit count
// travel in the same word, so whenever the router gets a credit back, the flit it stands for
// (and every earlier one) is acknowledged. The router never has more than NumVc x Depth flits
// without their credit, hence never more than that many unacknowledged (SVA ReplayRoom_A).
//
// Latency and the good path: the wire outputs are a function of registered state (the router's
// link outputs, themselves registered state, or a buffer entry at a registered pointer), and with
// nothing to replay a router flit goes straight to the wire in the same cycle (bypass), so no
// cycle is added; a credit reaches the router in the cycle its control word arrives, as it did
// without the link layer. `link_gap_i` paces the wire like the router's output (one flit per
// gap cycles, a head flit, which carries only its 8-byte header, in `link_hgap_i`), replays
// included; router flits that arrive during a replay wait in the buffer.
`include "tpu_assert.svh"

module tpu_ici_link_tx
  import tpu_ici_pkg::*;
#(
  parameter type         flit_t     = ici_flit_t,
  parameter int unsigned NumVc      = 4,
  parameter int unsigned Depth      = 16,
  parameter int unsigned MaxReplays = 8,
  localparam int unsigned VcW  = vc_width(NumVc),
  localparam int unsigned CtlW = link_ctl_width(NumVc),
  localparam int unsigned SeqW = LinkSeqW
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic [LinkGapW-1:0] link_gap_i,   // cycles per flit on the wire (0, 1: every cycle)
  input  logic [LinkGapW-1:0] link_hgap_i,  // cycles per head flit (0, 1: one)
  input  logic [15:0]         timeout_i,    // cycles without ACK progress before a replay (0: off)
  // router side
  input  logic                tx_valid_i,
  input  logic [VcW-1:0]      tx_vc_i,
  input  flit_t               tx_flit_i,
  output logic                tx_cr_valid_o,
  output logic [VcW-1:0]      tx_cr_vc_o,
  // wire: flit words out, control words back
  output logic                w_valid_o,
  output logic [VcW-1:0]      w_vc_o,
  output flit_t               w_flit_o,
  output logic [SeqW-1:0]     w_seq_o,
  output logic [31:0]         w_crc_o,
  input  logic                c_valid_i,
  input  logic [CtlW-1:0]     c_ctl_i,
  input  logic [31:0]         c_crc_i,
  // status and counters
  output logic                down_o,
  output logic                idle_o,       // every flit acknowledged
  output logic [StatW-1:0]    st_replays_o,
  output logic [StatW-1:0]    st_replayed_o,
  output logic [StatW-1:0]    st_ctl_err_o
);

  localparam int unsigned BufW = $clog2(NumVc * Depth);
  localparam int unsigned BufN = 1 << BufW;
  localparam int unsigned CntW = LinkCntW;
  localparam int unsigned FailW = $clog2(MaxReplays + 1);

  typedef struct packed {
    logic [VcW-1:0] vc;
    flit_t          flit;
  } ent_t;
  typedef struct packed {
    logic [SeqW-1:0]                ack;  // the next sequence number the receiver expects
    logic                           nak;  // resend from `ack`
    logic [NumVc-1:0][CntW-1:0]     cnt;  // credits returned per VC (mod 2^CntW)
  } ctl_t;

  ent_t            buf_q[BufN];
  logic [SeqW-1:0] wr_q;    // the next new flit's sequence number
  logic [SeqW-1:0] snd_q;   // the next one to put on the wire
  logic [SeqW-1:0] ack_q;   // the oldest unacknowledged one
  logic [SeqW-1:0] hi_q;    // one past the highest ever sent (below: a resend)
  logic [LinkGapW-1:0] gap_q, hgap_q, busy_q;
  logic [15:0]     tmr_q;
  logic [FailW-1:0] fails_q;
  logic            down_q;
  logic [NumVc-1:0][CntW-1:0] got_q, out_q;
  logic [StatW-1:0] replays_q, replayed_q, ctl_err_q;

  // ---- Control word in ----
  ctl_t        ctl;
  logic [31:0] ctl_crc;
  logic        c_ok, c_bad;
  assign ctl = ctl_t'(c_ctl_i);
  tpu_ici_crc #(
    .Width(CtlW)
  ) i_ctl_crc (
    .en_i  (c_valid_i),  // compared only beside a valid control word
    .data_i(c_ctl_i),
    .crc_o (ctl_crc)
  );
  assign c_ok  = c_valid_i && !down_q && (ctl_crc == c_crc_i);
  assign c_bad = c_valid_i && !down_q && (ctl_crc != c_crc_i);

  // The ACK, as an offset from the oldest unacknowledged flit: it may acknowledge up to
  // everything ever sent (hi_q), past snd_q when flits sent before a time-out's go-back arrive.
  logic [SeqW-1:0] a_off, hi_off, snd_off, wr_off;
  logic            a_in, progress;
  assign a_off    = ctl.ack - ack_q;
  assign hi_off   = hi_q - ack_q;
  assign snd_off  = snd_q - ack_q;
  assign wr_off   = wr_q - ack_q;
  assign a_in     = c_ok && (a_off <= hi_off);
  assign progress = a_in && (a_off != '0);

  // ---- Wire out: the buffer at snd_q while it is behind, else the router's flit ----
  logic from_buf, send;
  ent_t out_e;
  assign from_buf = snd_q != wr_q;
  assign send     = !down_q && (busy_q == '0) && (from_buf || tx_valid_i);
  assign out_e    = from_buf ? buf_q[snd_q[BufW-1:0]] : '{vc: tx_vc_i, flit: tx_flit_i};
  assign w_valid_o = send;
  assign w_vc_o    = out_e.vc;
  assign w_flit_o  = out_e.flit;
  assign w_seq_o   = snd_q;
  tpu_ici_crc #(
    .Width(SeqW + VcW + $bits(flit_t))
  ) i_flit_crc (
    .en_i  (send),  // w_crc_o is 0 while no word goes out
    .data_i({snd_q, out_e.vc, out_e.flit}),
    .crc_o (w_crc_o)
  );

  // ---- Replays ----
  logic unacked, tmo, nak_go, replay, give_up;
  logic [SeqW-1:0] back;
  assign unacked = ack_q != wr_q;
  assign tmo     = !down_q && unacked && (timeout_i != '0) && (tmr_q >= timeout_i);
  assign nak_go  = a_in && ctl.nak && (ctl.ack != snd_q);
  assign replay  = nak_go || (tmo && !progress);
  assign back    = nak_go ? ctl.ack : ack_q;
  assign give_up = replay && !progress && (32'(fails_q) >= MaxReplays);

  // ---- Credits for the router: one per cycle, from the counts in good control words ----
  logic [NumVc-1:0][CntW-1:0] cnt_now;
  logic [NumVc-1:0]           pend;
  assign cnt_now = c_ok ? ctl.cnt : got_q;
  always_comb begin
    tx_cr_valid_o = 1'b0;
    tx_cr_vc_o    = '0;
    for (int unsigned v = 0; v < NumVc; v++) begin
      pend[v] = cnt_now[v] != out_q[v];
      if (pend[v] && !tx_cr_valid_o) begin
        tx_cr_valid_o = 1'b1;
        tx_cr_vc_o    = VcW'(v);
      end
    end
  end

  // Next state at the clock edge: the control words come from the link (top-level inputs of a
  // chip), so an always_comb here would run at every evaluation of the model.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_q       <= '0;
      snd_q      <= '0;
      ack_q      <= '0;
      hi_q       <= '0;
      gap_q      <= LinkGapW'(1);
      hgap_q     <= LinkGapW'(1);
      busy_q     <= '0;
      tmr_q      <= '0;
      fails_q    <= '0;
      down_q     <= 1'b0;
      got_q      <= '0;
      out_q      <= '0;
      replays_q  <= '0;
      replayed_q <= '0;
      ctl_err_q  <= '0;
    end else begin
      gap_q  <= (link_gap_i == '0) ? LinkGapW'(1) : link_gap_i;
      hgap_q <= (link_hgap_i == '0) ? LinkGapW'(1) : link_hgap_i;
      got_q  <= cnt_now;
      if (c_bad) ctl_err_q <= ctl_err_q + 1'b1;
      if (tx_valid_i && !down_q) wr_q <= wr_q + 1'b1;
      if (tx_cr_valid_o) out_q[tx_cr_vc_o] <= out_q[tx_cr_vc_o] + 1'b1;
      if (send) begin
        snd_q  <= snd_q + 1'b1;
        busy_q <= (out_e.flit.head ? hgap_q : gap_q) - LinkGapW'(1);
        if (snd_q == hi_q) hi_q <= hi_q + 1'b1;
        else replayed_q <= replayed_q + 1'b1;
      end else if (busy_q != '0) begin
        busy_q <= busy_q - LinkGapW'(1);
      end
      if (a_in) begin
        ack_q <= ctl.ack;
        if (!ctl.nak && a_off > snd_off) snd_q <= ctl.ack;  // acknowledged before it was resent
      end
      if (replay) begin
        if (give_up) begin
          down_q <= 1'b1;
        end else begin
          snd_q     <= back;
          replays_q <= replays_q + 1'b1;
          fails_q   <= progress ? FailW'(1) : fails_q + 1'b1;
        end
      end else if (progress) begin
        fails_q <= '0;
      end
      if (!unacked || progress || replay || down_q) tmr_q <= '0;
      else if (tmr_q != '1) tmr_q <= tmr_q + 1'b1;
    end
  end

  // The buffer needs no reset: only entries between ack_q and wr_q are read.
  always_ff @(posedge clk_i) begin
    if (tx_valid_i && !down_q) buf_q[wr_q[BufW-1:0]] <= '{vc: tx_vc_i, flit: tx_flit_i};
  end

  assign down_o        = down_q;
  assign idle_o        = !unacked;
  assign st_replays_o  = replays_q;
  assign st_replayed_o = replayed_q;
  assign st_ctl_err_o  = ctl_err_q;

  // ---- Assertions ----
  // The sequence space holds twice the buffer, so a late ACK is never mistaken for a new one.
  `TPU_ASSERT_INIT(SeqSpace_A, 2 * BufN <= (1 << SeqW),
      ("tpu_ici_link_tx: %0d sequence numbers for a %0d-flit buffer", 1 << SeqW, BufN))
  // The replay buffer never overflows (the credit argument above).
  `TPU_ASSERT(ReplayRoom_A,
      tx_valid_i && !down_q |-> 32'(wr_off) < BufN,
      ("tpu_ici_link_tx: replay buffer full (%0d unacknowledged flits)", wr_off))
  // Pointers in order: ack <= snd <= wr and ack <= hi <= wr (mod 2^SeqW).
  `TPU_ASSERT(PtrOrder_A,
      snd_off <= wr_off && hi_off <= wr_off,
      ("tpu_ici_link_tx: pointers out of order (ack %0d snd %0d hi %0d wr %0d)",
              ack_q, snd_q, hi_q, wr_q))
  // A good control word acknowledges only flits that were sent.
  `TPU_ASSERT(AckInRange_A,
      c_ok |-> a_off <= hi_off,
      ("tpu_ici_link_tx: control word acknowledges sequence number %0d, only up to %0d sent",
              ctl.ack, hi_q))
  // Nothing leaves while the wire is serializing the previous flit, or after the link is down.
  `TPU_ASSERT(WireGap_A,
      w_valid_o |-> busy_q == '0 && !down_q,
      ("tpu_ici_link_tx: flit sent while the wire is busy or down"))
  // A credit count never runs ahead by more than a VC's buffer.
  for (genvar v = 0; v < NumVc; v++) begin : gen_sva_cr
    `TPU_ASSERT(CreditBound_A,
        32'(CntW'(cnt_now[v] - out_q[v])) <= Depth,
        ("tpu_ici_link_tx: VC %0d owes more than %0d credits", v, Depth))
  end

endmodule
