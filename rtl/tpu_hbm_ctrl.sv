// tpu_hbm_ctrl: HBM controller top: address decode, one tpu_hbm_chan per channel, responses.
//
// Host side (for the DMA engine): NumPorts (1 or 2) request streams and as many response
// streams, valid/ready, the payload held while valid && !ready.
//   request  hbm_req_t {write, addr (64-byte aligned byte address), tag, data (64 bytes)}
//   response hbm_rsp_t {write, tag, data}: read data for a read, an acknowledge (data zero) for a
//            write. Responses come back out of order (FR-FCFS, channels in parallel) and on any
//            response port; the tag matches them. A write is acknowledged once it is buffered:
//            every later read through this controller sees it.
// Each port's address is decoded with the run-time map cfg_i.addr_map (tpu_hbm_pkg::hbm_map_e,
// docs/hbm.md) and handed to its channel; a channel takes one request per cycle: when both ports
// ask for the same channel in one cycle one waits (the ports take turns; a choice holds while
// its request waits, so the channel sees a stable request). Requests of one port reach a
// channel in the order they were sent; two ports are not ordered with each other (a client that
// needs an order between two requests sends them on one port). Responses of the channels are
// merged round robin onto the response ports, each port a different channel; a port's choice
// holds while its response waits for ready.
// Throughput: NumPorts requests and NumPorts responses per cycle (2 x 64 B/cycle, the peak of
// four channels). Timing and configuration are run-time inputs that must be held constant after
// reset. Statistics of channel `stat_ch_i` are read by index (`stat_id_i`,
// tpu_hbm_pkg::hbm_stat_e) on `stat_o`, combinationally.
// ECC (SECDED 72,64 per 64-bit word, tpu_hbm_pkg): each channel sends 8 check bits per word with
// the write data (`wcheck_o`) and checks read data with the check bits that come back
// (`rcheck_i`), in the same cycle: single-bit errors are corrected, uncorrectable words are
// flagged in the response (`rsp_o.ue`). `ecc_ce_o` / `ecc_ue_o`: corrected / uncorrectable words
// read this cycle, all channels together.
`include "tpu_assert.svh"

module tpu_hbm_ctrl
  import tpu_hbm_pkg::*;
#(
  parameter int unsigned NumCh = 2,
  parameter int unsigned NumPorts = 1,
  parameter int unsigned RowsPerBank = 64,
  parameter int unsigned RqDepth = 32,
  parameter int unsigned WqDepth = 16,
  parameter int unsigned RspDepth = 16
) (
  input  logic                        clk_i,
  input  logic                        rst_ni,
  input  hbm_timing_t                 timing_i,
  input  hbm_ctrl_cfg_t               cfg_i,
  // host requests, one stream per port
  input  logic          [NumPorts-1:0] req_valid_i,
  output logic          [NumPorts-1:0] req_ready_o,
  input  hbm_req_t      [NumPorts-1:0] req_i,
  // host responses, one stream per port
  output logic          [NumPorts-1:0] rsp_valid_o,
  input  logic          [NumPorts-1:0] rsp_ready_i,
  output hbm_rsp_t      [NumPorts-1:0] rsp_o,
  // device, one command bus and data bus per channel
  output hbm_cmd_t      [NumCh-1:0]   cmd_o,
  output logic          [NumCh-1:0]   wvalid_o,
  output hbm_bus_t      [NumCh-1:0]   wdata_o,
  output hbm_bus_ecc_t  [NumCh-1:0]   wcheck_o,
  input  logic          [NumCh-1:0]   rvalid_i,
  input  hbm_bus_t      [NumCh-1:0]   rdata_i,
  input  hbm_bus_ecc_t  [NumCh-1:0]   rcheck_i,
  output logic          [7:0]         ecc_ce_o,
  output logic          [7:0]         ecc_ue_o,
  // statistics and status
  input  hbm_ch_t                     stat_ch_i,
  input  hbm_stat_e                   stat_id_i,
  output hbm_ctr_t                    stat_o,
  output logic          [NumCh-1:0]   ref_pending_o,
  output logic                        idle_o
);

  localparam int unsigned ChW = (NumCh > 1) ? $clog2(NumCh) : 0;
  localparam int unsigned ChIdxW = (NumCh > 1) ? $clog2(NumCh) : 1;
  localparam int unsigned RowW = $clog2(RowsPerBank);
  localparam longint unsigned Capacity = longint'(NumCh) * HBM_BANKS * RowsPerBank * HBM_ROW_BYTES;

  // ---- Decode and steer requests ----
  // Per channel: the port it serves this cycle (sel); with both ports asking, the one whose turn
  // it is (prio_q); a choice holds while the channel is not ready (lock_q).
  localparam int unsigned PortW = (NumPorts > 1) ? $clog2(NumPorts) : 1;
  hbm_loc_t      [NumPorts-1:0] loc;
  logic          [NumPorts-1:0][ChIdxW-1:0] req_ch;
  hbm_chan_req_t [NumCh-1:0] chan_req;
  logic [NumCh-1:0] chan_req_valid, chan_req_ready;
  logic [NumCh-1:0][PortW-1:0] sel, sel_q, prio_q, prio_d;
  logic [NumCh-1:0] lock_q;
  logic [NumCh-1:0][NumPorts-1:0] cand;

  for (genvar p = 0; p < NumPorts; p++) begin : gen_decode
    assign loc[p] = hbm_decode(req_i[p].addr, cfg_i.addr_map, ChW, RowW);
    assign req_ch[p] = ChIdxW'(loc[p].ch);
  end

  always_comb begin
    for (int unsigned c = 0; c < NumCh; c++) begin
      for (int unsigned p = 0; p < NumPorts; p++)
        cand[c][p] = req_valid_i[p] && (32'(req_ch[p]) == c);
      sel[c] = prio_q[c];
      if (lock_q[c]) sel[c] = sel_q[c];
      else if (!cand[c][prio_q[c]]) begin
        for (int p = int'(NumPorts) - 1; p >= 0; p--) if (cand[c][p]) sel[c] = PortW'(p);
      end
      chan_req_valid[c] = cand[c][sel[c]];
      // The selected port's request, picked by comparing sel with each constant port index: a
      // verilated model copies a packed array's element at a variable index through a shift of
      // the whole array (two 553-bit requests here), and this runs in every eval() (the ports
      // are top-level inputs). Same request as req_i[sel[c]] (sel is always below NumPorts).
      chan_req[c] = '{write: req_i[0].write, bg: loc[0].bg, ba: loc[0].ba, row: loc[0].row,
                      col: loc[0].col, tag: req_i[0].tag, data: req_i[0].data};
      for (int unsigned p = 1; p < NumPorts; p++) begin
        if (32'(sel[c]) == p)
          chan_req[c] = '{write: req_i[p].write, bg: loc[p].bg, ba: loc[p].ba, row: loc[p].row,
                          col: loc[p].col, tag: req_i[p].tag, data: req_i[p].data};
      end
    end
  end

  always_comb begin
    prio_d = prio_q;
    // Both asked and one went: the other one's turn next.
    for (int unsigned c = 0; c < NumCh; c++)
      if (&cand[c] && chan_req_ready[c] && NumPorts > 1) prio_d[c] = PortW'(32'(sel[c]) + 1);
    for (int unsigned p = 0; p < NumPorts; p++)
      req_ready_o[p] = chan_req_ready[req_ch[p]] && (32'(sel[req_ch[p]]) == p);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      sel_q  <= '0;
      prio_q <= '0;
      lock_q <= '0;
    end else begin
      sel_q  <= sel;
      prio_q <= prio_d;
      lock_q <= chan_req_valid & ~chan_req_ready;
    end
  end

  // ---- Channels ----
  logic [NumCh-1:0] chan_rsp_valid, chan_rsp_ready, chan_idle;
  hbm_rsp_t [NumCh-1:0] chan_rsp;
  hbm_ctr_t [NumCh-1:0][HBM_NUM_STATS-1:0] chan_stats;
  logic [NumCh-1:0][2:0] chan_ce, chan_ue;

  for (genvar c = 0; c < NumCh; c++) begin : gen_chan
    tpu_hbm_chan #(
      .RqDepth (RqDepth),
      .WqDepth (WqDepth),
      .RspDepth(RspDepth)
    ) i_chan (
      .clk_i        (clk_i),
      .rst_ni       (rst_ni),
      .timing_i     (timing_i),
      .cfg_i        (cfg_i),
      .req_valid_i  (chan_req_valid[c]),
      .req_ready_o  (chan_req_ready[c]),
      .req_i        (chan_req[c]),
      .rsp_valid_o  (chan_rsp_valid[c]),
      .rsp_ready_i  (chan_rsp_ready[c]),
      .rsp_o        (chan_rsp[c]),
      .cmd_o        (cmd_o[c]),
      .wvalid_o     (wvalid_o[c]),
      .wdata_o      (wdata_o[c]),
      .wcheck_o     (wcheck_o[c]),
      .rvalid_i     (rvalid_i[c]),
      .rdata_i      (rdata_i[c]),
      .rcheck_i     (rcheck_i[c]),
      .ecc_ce_o     (chan_ce[c]),
      .ecc_ue_o     (chan_ue[c]),
      .stats_o      (chan_stats[c]),
      .ref_pending_o(ref_pending_o[c]),
      .idle_o       (chan_idle[c])
    );
  end

  assign idle_o = &chan_idle;
  always_comb begin
    ecc_ce_o = '0;
    ecc_ue_o = '0;
    for (int unsigned c = 0; c < NumCh; c++) begin
      ecc_ce_o += 8'(chan_ce[c]);
      ecc_ue_o += 8'(chan_ue[c]);
    end
  end
  assign stat_o = (32'(stat_ch_i) < NumCh) ? chan_stats[ChIdxW'(stat_ch_i)][stat_id_i] : '0;

  // ---- Responses: round robin over the channels, one channel per port, held while waiting ----
  // Port 0 picks first, then port 1 from the channels port 0 did not take; a port that waits for
  // ready keeps its channel (hold_q), and the other port does not take it meanwhile.
  logic [NumPorts-1:0][ChIdxW-1:0] grant, grant_q;
  logic [NumPorts-1:0] hold_q, rsp_fire;
  logic [ChIdxW-1:0] rr_q, rr_d;
  logic [NumCh-1:0] taken;

  always_comb begin
    logic [ChIdxW-1:0] c;
    taken = '0;
    c = '0;
    // Held choices first: they own their channel.
    for (int unsigned p = 0; p < NumPorts; p++) if (hold_q[p]) taken[grant_q[p]] = 1'b1;
    for (int unsigned p = 0; p < NumPorts; p++) begin
      grant[p] = grant_q[p];
      rsp_valid_o[p] = hold_q[p] && chan_rsp_valid[grant_q[p]];
      if (!hold_q[p]) begin
        // First valid channel at or after the round-robin pointer that no port has taken.
        grant[p] = rr_q;
        rsp_valid_o[p] = 1'b0;
        for (int i = int'(NumCh) - 1; i >= 0; i--) begin
          c = ChIdxW'((32'(rr_q) + 32'(i)) % NumCh);
          if (chan_rsp_valid[c] && !taken[c]) begin
            grant[p] = c;
            rsp_valid_o[p] = 1'b1;
          end
        end
        if (rsp_valid_o[p]) taken[grant[p]] = 1'b1;
      end
      rsp_o[p] = chan_rsp[grant[p]];
    end
  end

  always_comb begin
    chan_rsp_ready = '0;
    rr_d = rr_q;
    for (int unsigned p = 0; p < NumPorts; p++) begin
      rsp_fire[p] = rsp_valid_o[p] && rsp_ready_i[p];
      if (rsp_fire[p]) begin
        chan_rsp_ready[grant[p]] = 1'b1;
        rr_d = ChIdxW'((32'(grant[p]) + 1) % NumCh);
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      grant_q <= '0;
      rr_q <= '0;
      hold_q <= '0;
    end else begin
      grant_q <= grant;
      hold_q <= rsp_valid_o & ~rsp_ready_i;
      rr_q <= rr_d;
    end
  end

  // ---- Assertions ----
  `TPU_ASSERT_INIT(Pow2Channels_A, NumCh >= 1 && NumCh <= 16 && (NumCh & (NumCh - 1)) == 0,
      ("tpu_hbm_ctrl: NumCh must be a power of two in 1..16"))
  `TPU_ASSERT_INIT(Ports_A, NumPorts == 1 || NumPorts == 2,
      ("tpu_hbm_ctrl: NumPorts must be 1 or 2"))
  `TPU_ASSERT_INIT(Pow2Rows_A, RowsPerBank >= 2 && (RowsPerBank & (RowsPerBank - 1)) == 0 &&
                               RowsPerBank <= (1 << HBM_ROW_W),
      ("tpu_hbm_ctrl: RowsPerBank must be a power of two in 2..16384"))
  for (genvar p = 0; p < NumPorts; p++) begin : gen_port_sva
    `TPU_ASSERT(ReqValidHeld_A,
                                       req_valid_i[p] && !req_ready_o[p] |=> req_valid_i[p],
        ("tpu_hbm_ctrl: port %0d: request valid dropped before ready", p))
    `TPU_ASSERT(RspValidHeld_A,
                                       rsp_valid_o[p] && !rsp_ready_i[p] |=> rsp_valid_o[p],
        ("tpu_hbm_ctrl: port %0d: response valid dropped before ready", p))
    // The payload checks are immediate, at the clock edge (the stability ones against a copy
    // taken only while the port waits): as concurrent assertions a verilated model sampled each
    // whole payload (over 500 bits) in every eval(), and $stable kept a copy of it every cycle
    // (docs/scale.md). The same cycles are checked.
    logic req_wait_q, rsp_wait_q;
    hbm_req_t req_held_q;
    hbm_rsp_t rsp_held_q;
    always_ff @(posedge clk_i) begin
      if (rst_ni && req_wait_q) begin
        `TPU_ASSERT_I(ReqStable_A, req_i[p] == req_held_q,
            ("tpu_hbm_ctrl: port %0d: request payload changed while waiting for ready", p))
      end
      if (rst_ni && req_valid_i[p]) begin
        `TPU_ASSERT_I(ReqAligned_A, req_i[p].addr[HBM_OFFSET_W-1:0] == '0,
            ("tpu_hbm_ctrl: port %0d: request address %h is not 64-byte aligned", p,
                    req_i[p].addr))
        `TPU_ASSERT_I(ReqInRange_A, 64'(req_i[p].addr) < Capacity,
            ("tpu_hbm_ctrl: port %0d: request address %h beyond the capacity", p,
                    req_i[p].addr))
      end
      if (rst_ni && rsp_wait_q) begin
        `TPU_ASSERT_I(RspStable_A, rsp_o[p] == rsp_held_q,
            ("tpu_hbm_ctrl: port %0d: response payload changed while waiting for ready", p))
      end
      req_wait_q <= req_valid_i[p] && !req_ready_o[p];
      rsp_wait_q <= rsp_valid_o[p] && !rsp_ready_i[p];
      if (req_valid_i[p] && !req_ready_o[p]) req_held_q <= req_i[p];
      if (rsp_valid_o[p] && !rsp_ready_i[p]) rsp_held_q <= rsp_o[p];
    end
  end
  // A channel takes one request a cycle, and a response goes out on one port only.
  for (genvar c = 0; c < NumCh; c++) begin : gen_chan_sva
    `TPU_ASSERT(OnePortPerChan_A,
        $countones(req_valid_i & req_ready_o & cand[c]) <= 1,
        ("tpu_hbm_ctrl: channel %0d took two requests in one cycle", c))
  end
  if (NumPorts > 1) begin : gen_rsp_sva
    `TPU_ASSERT(RspDistinct_A,
        rsp_valid_o[0] && rsp_valid_o[1] |-> grant[0] != grant[1],
        ("tpu_hbm_ctrl: one channel's response on both ports"))
  end

endmodule
