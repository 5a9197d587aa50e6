// tpu_hbm_ctrl: HBM controller top: address decode, one tpu_hbm_chan per channel, responses.
//
// Host side (for the DMA engine): one request stream and one response stream, valid/ready, the
// payload held while valid && !ready.
//   request  hbm_req_t {write, addr (64-byte aligned byte address), tag, data (64 bytes)}
//   response hbm_rsp_t {write, tag, data}: read data for a read, an acknowledge (data zero) for a
//            write. Responses come back out of order (FR-FCFS, channels in parallel); the tag
//            matches them. A write is acknowledged once it is buffered: every later read through
//            this controller sees it.
// The request's address is decoded with the run-time map cfg_i.addr_map (tpu_hbm_pkg::hbm_map_e,
// docs/hbm.md) and handed to its channel; `req_ready_o` is that channel's ready. Responses of the
// channels are merged round robin; a choice holds while the response waits for ready.
// Throughput: one request and one response per cycle. Timing and configuration are run-time
// inputs that must be held constant after reset. Statistics of channel `stat_ch_i` are read by
// index (`stat_id_i`, tpu_hbm_pkg::hbm_stat_e) on `stat_o`, combinationally.
// ECC (SECDED 72,64 per 64-bit word, tpu_hbm_pkg): each channel sends 8 check bits per word with
// the write data (`wcheck_o`) and checks read data with the check bits that come back
// (`rcheck_i`), in the same cycle: single-bit errors are corrected, uncorrectable words are
// flagged in the response (`rsp_o.ue`). `ecc_ce_o` / `ecc_ue_o`: corrected / uncorrectable words
// read this cycle, all channels together.
module tpu_hbm_ctrl
  import tpu_hbm_pkg::*;
#(
  parameter int unsigned NumCh = 2,
  parameter int unsigned RowsPerBank = 64,
  parameter int unsigned RqDepth = 32,
  parameter int unsigned WqDepth = 16,
  parameter int unsigned RspDepth = 16
) (
  input  logic                        clk_i,
  input  logic                        rst_ni,
  input  hbm_timing_t                 timing_i,
  input  hbm_ctrl_cfg_t               cfg_i,
  // host requests
  input  logic                        req_valid_i,
  output logic                        req_ready_o,
  input  hbm_req_t                    req_i,
  // host responses
  output logic                        rsp_valid_o,
  input  logic                        rsp_ready_i,
  output hbm_rsp_t                    rsp_o,
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
  hbm_loc_t loc;
  logic [ChIdxW-1:0] req_ch;
  hbm_chan_req_t chan_req;
  logic [NumCh-1:0] chan_req_valid, chan_req_ready;

  assign loc = hbm_decode(req_i.addr, cfg_i.addr_map, ChW, RowW);
  assign req_ch = ChIdxW'(loc.ch);
  assign chan_req = '{write: req_i.write, bg: loc.bg, ba: loc.ba, row: loc.row, col: loc.col,
                      tag: req_i.tag, data: req_i.data};

  always_comb begin
    for (int unsigned c = 0; c < NumCh; c++) chan_req_valid[c] = req_valid_i && (32'(req_ch) == c);
  end
  assign req_ready_o = chan_req_ready[req_ch];

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
      .req_i        (chan_req),
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

  // ---- Responses: round robin over the channels, held while waiting for ready ----
  logic [ChIdxW-1:0] grant, grant_q, rr_q;
  logic hold_q, any_valid;

  always_comb begin
    logic [ChIdxW-1:0] c;
    grant = grant_q;
    any_valid = |chan_rsp_valid;
    c = '0;
    if (!hold_q) begin
      // First valid channel at or after the round-robin pointer.
      grant = rr_q;
      for (int i = int'(NumCh) - 1; i >= 0; i--) begin
        c = ChIdxW'((32'(rr_q) + 32'(i)) % NumCh);
        if (chan_rsp_valid[c]) grant = c;
      end
    end
  end

  assign rsp_valid_o = any_valid && chan_rsp_valid[grant];
  assign rsp_o = chan_rsp[grant];
  always_comb begin
    for (int unsigned c = 0; c < NumCh; c++) chan_rsp_ready[c] = rsp_ready_i && (32'(grant) == c);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      grant_q <= '0;
      rr_q <= '0;
      hold_q <= 1'b0;
    end else begin
      grant_q <= grant;
      hold_q <= rsp_valid_o && !rsp_ready_i;
      if (rsp_valid_o && rsp_ready_i) rr_q <= ChIdxW'((32'(grant) + 1) % NumCh);
    end
  end

  // ---- Assertions ----
  initial begin
    a_pow2_channels: assert (NumCh >= 1 && NumCh <= 16 && (NumCh & (NumCh - 1)) == 0)
    else $fatal(1, "tpu_hbm_ctrl: NumCh must be a power of two in 1..16");
    a_pow2_rows: assert (RowsPerBank >= 2 && (RowsPerBank & (RowsPerBank - 1)) == 0 &&
                         RowsPerBank <= (1 << HBM_ROW_W))
    else $fatal(1, "tpu_hbm_ctrl: RowsPerBank must be a power of two in 2..16384");
  end
  a_req_valid_held: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                     req_valid_i && !req_ready_o |=> req_valid_i)
  else $error("tpu_hbm_ctrl: request valid dropped before ready");
  a_req_stable: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                 req_valid_i && !req_ready_o |=> $stable(req_i))
  else $error("tpu_hbm_ctrl: request payload changed while waiting for ready");
  a_req_aligned: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                  req_valid_i |-> req_i.addr[HBM_OFFSET_W-1:0] == '0)
  else $error("tpu_hbm_ctrl: request address %h is not 64-byte aligned", req_i.addr);
  a_req_in_range: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                   req_valid_i |-> 64'(req_i.addr) < Capacity)
  else $error("tpu_hbm_ctrl: request address %h beyond the capacity", req_i.addr);
  a_rsp_valid_held: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                     rsp_valid_o && !rsp_ready_i |=> rsp_valid_o)
  else $error("tpu_hbm_ctrl: response valid dropped before ready");
  a_rsp_stable: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                 rsp_valid_o && !rsp_ready_i |=> $stable(rsp_o))
  else $error("tpu_hbm_ctrl: response payload changed while waiting for ready");

endmodule
