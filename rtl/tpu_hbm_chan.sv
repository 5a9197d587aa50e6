// tpu_hbm_chan: the scheduler of one HBM channel (open-page FR-FCFS, write buffering, refresh).
//
// Requests (already decoded to bank/row/column) enter over a valid/ready port, one per cycle:
//   - a read goes to the read queue (RqDepth), or, when the write buffer holds a write to the
//     same 64-byte block, is answered at once from the buffer (forwarded);
//   - a write goes to the write buffer (WqDepth) and is acknowledged at once (posted): from then
//     on every read of the block, through this controller, returns it. A write to a block already
//     buffered overwrites the buffered data (merged). A write to a block that a queued read still
//     has to read waits (ready low) until that read has been issued, so it cannot overtake it.
// Every cycle at most one command goes to the device (registered on `cmd_o`):
//   1. refresh: every tREFI (grid from reset) the channel stops opening rows tRAS + hbm_ref_lead()
//      cycles before the deadline (so every open row may close when needed), stops issuing any
//      other command hbm_ref_lead() cycles before it, closes every open bank with one PREA as
//      soon as all of them may close, then issues an all-bank REF;
//   2. otherwise FR-FCFS over the served queue (tpu_hbm_pick): oldest ready row hit first, then
//      the oldest ready ACT/PRE; a request older than cfg_i.starve_cap cycles goes first whenever
//      it can, and nothing else may use its bank meanwhile;
//   3. reads are served unless the write buffer is draining: a drain starts at cfg_i.wr_hi
//      buffered writes and stops at cfg_i.wr_lo; writes are also served when no read waits or the
//      oldest write is starved.
// Each command is issued only when every timing rule allows it: per-bank, per-bank-group and
// channel down-counters hold the cycles left before each command may go (see docs/hbm.md).
// Read data comes back CL cycles after the RD (two bus cycles per burst) into the response queue
// (RspDepth, reserved before the RD is issued, so returning data always has room); write acks
// and forwarded reads use a small queue of their own. Responses leave over a valid/ready port
// and may be out of order (match them by tag). Latency of a row hit with no load, from the
// request handshake to the response handshake: into the queue 1, issue 1, on the device
// CL + 2 (the RD's bus cycle is counted in the first): CL + 4 cycles.
// ECC (tpu_hbm_pkg SECDED 72,64): the check bits of every 64-bit word leave with the write data
// (`wcheck_o`, computed from the same word, registered with it) and come back with the read data
// (`rcheck_i`); each read word is checked combinationally as it arrives: a single-bit error is
// corrected, an uncorrectable one is flagged in the response (`rsp_o.ue`, per word). No cycle is
// added. `ecc_ce_o` / `ecc_ue_o` count the corrected / uncorrectable words of this cycle.
// Forwarded reads never touched the device and are not checked.
`include "tpu_assert.svh"

module tpu_hbm_chan
  import tpu_hbm_pkg::*;
#(
  parameter int unsigned RqDepth = 16,
  parameter int unsigned WqDepth = 16,
  parameter int unsigned RspDepth = 16,
  parameter int unsigned AckDepth = 4,
  parameter int unsigned WpipeDepth = 8
) (
  input  logic                               clk_i,
  input  logic                               rst_ni,
  input  hbm_timing_t                        timing_i,
  input  hbm_ctrl_cfg_t                      cfg_i,
  // requests
  input  logic                               req_valid_i,
  output logic                               req_ready_o,
  input  hbm_chan_req_t                      req_i,
  // responses
  output logic                               rsp_valid_o,
  input  logic                               rsp_ready_i,
  output hbm_rsp_t                           rsp_o,
  // device
  output hbm_cmd_t                           cmd_o,
  output logic                               wvalid_o,
  output hbm_bus_t                           wdata_o,
  output hbm_bus_ecc_t                       wcheck_o,
  input  logic                               rvalid_i,
  input  hbm_bus_t                           rdata_i,
  input  hbm_bus_ecc_t                       rcheck_i,
  // ECC events of this cycle (words)
  output logic          [2:0]                ecc_ce_o,
  output logic          [2:0]                ecc_ue_o,
  // observation
  output hbm_ctr_t      [HBM_NUM_STATS-1:0]  stats_o,
  output logic                               ref_pending_o,
  output logic                               idle_o
);

  localparam int unsigned RqIdxW = (RqDepth > 1) ? $clog2(RqDepth) : 1;
  localparam int unsigned WqIdxW = (WqDepth > 1) ? $clog2(WqDepth) : 1;
  localparam int unsigned SlotW = WqIdxW;
  localparam int unsigned RqCntW = $clog2(RqDepth + 1);
  localparam int unsigned WqCntW = $clog2(WqDepth + 1);
  localparam int unsigned RspCntW = $clog2(RspDepth + 1);

  // A queued request: where it goes, its tag, when it arrived, and (writes) its data slot.
  typedef struct packed {
    hbm_bank_t bank;
    hbm_row_t row;
    hbm_col_t col;
    hbm_tag_t tag;
    hbm_cyc_t ts;
    logic [SlotW-1:0] slot;
  } qent_t;

  // A RD on its way: the tag, its arrival time and the cycle its first data beat is due.
  typedef struct packed {
    hbm_tag_t tag;
    hbm_cyc_t ts;
    hbm_cyc_t due;
  } rd_flight_t;

  // A WR's data on its way to the bus: first beat pair sent in cycle `due`.
  typedef struct packed {
    hbm_data_t data;
    hbm_cyc_t due;
  } wr_flight_t;

  // ---------------------------------------------------------------------------------------------
  // Cycle counter (time stamps) and derived timing
  // ---------------------------------------------------------------------------------------------
  hbm_cyc_t now_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) now_q <= '0;
    else now_q <= now_q + 1'b1;
  end

  hbm_cyc_t t_rd_to_wr, t_wr_to_pre, t_wr_to_rd_s, t_wr_to_rd_l, t_ref_lead;
  assign t_rd_to_wr = hbm_rd_to_wr(timing_i.cl, timing_i.cwl);
  assign t_wr_to_pre = hbm_wr_to_pre(timing_i.cwl, timing_i.wr);
  assign t_wr_to_rd_s = hbm_wr_to_rd(timing_i.cwl, timing_i.wtr_s);
  assign t_wr_to_rd_l = hbm_wr_to_rd(timing_i.cwl, timing_i.wtr_l);
  assign t_ref_lead = hbm_ref_lead(timing_i.ras, timing_i.cwl, timing_i.wr, timing_i.rtp,
                                   timing_i.rp);

  // "Cycles until allowed" down-counters: each cycle they count down (cnt_dec); a command that
  // must be followed by `n` cycles before the next one raises the counter to n - 1 (cnt_max),
  // so the next command may go exactly n cycles later.
  function automatic hbm_cyc_t cnt_dec(hbm_cyc_t q);
    return (q != '0) ? q - 1'b1 : '0;
  endfunction

  function automatic hbm_cyc_t cnt_max(hbm_cyc_t d, hbm_cyc_t n);
    return (n > 16'd1 && (n - 1'b1) > d) ? n - 1'b1 : d;
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Queues and buffers
  // ---------------------------------------------------------------------------------------------
  logic rq_push, rq_pop, wq_push, wq_pop;
  logic [RqIdxW-1:0] rq_pop_idx;
  logic [WqIdxW-1:0] wq_pop_idx;
  qent_t rq_new, wq_new;
  qent_t [RqDepth-1:0] rq_ent;
  qent_t [WqDepth-1:0] wq_ent;
  logic [RqDepth-1:0] rq_valid;
  logic [WqDepth-1:0] wq_valid;
  logic [RqCntW-1:0] rq_count_unused;
  logic [WqCntW-1:0] wq_count;
  logic rq_full, rq_empty, wq_full, wq_empty;

  tpu_hbm_cqueue #(
    .entry_t(qent_t),
    .Depth  (RqDepth)
  ) i_rq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .push_i      (rq_push),
    .push_entry_i(rq_new),
    .pop_i       (rq_pop),
    .pop_idx_i   (rq_pop_idx),
    .entries_o   (rq_ent),
    .valid_o     (rq_valid),
    .count_o     (rq_count_unused),
    .full_o      (rq_full),
    .empty_o     (rq_empty)
  );

  tpu_hbm_cqueue #(
    .entry_t(qent_t),
    .Depth  (WqDepth)
  ) i_wq (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .push_i      (wq_push),
    .push_entry_i(wq_new),
    .pop_i       (wq_pop),
    .pop_idx_i   (wq_pop_idx),
    .entries_o   (wq_ent),
    .valid_o     (wq_valid),
    .count_o     (wq_count),
    .full_o      (wq_full),
    .empty_o     (wq_empty)
  );

  // Write data, one slot per buffered write.
  hbm_data_t wbuf_q[WqDepth];
  logic [WqDepth-1:0] wslot_busy_q, wslot_busy_d;

  // Response queue (device read data), in-flight reads, write acks / forwarded reads, write data.
  logic rspq_push, rspq_pop, rspq_empty, rspq_full;
  hbm_rsp_t rspq_in, rspq_head;
  logic [RspCntW-1:0] rspq_count, fl_count;
  logic fl_push, fl_pop, fl_empty, fl_full;
  rd_flight_t fl_in, fl_head;
  logic ackq_push, ackq_pop, ackq_empty, ackq_full;
  hbm_rsp_t ackq_in, ackq_head;
  logic wp_push, wp_pop, wp_empty, wp_full;
  wr_flight_t wp_in, wp_head;
  logic [$clog2(AckDepth+1)-1:0] ackq_count_unused;
  logic [$clog2(WpipeDepth+1)-1:0] wp_count_unused;
  hbm_map_e addr_map_unused;  // the address map is applied by tpu_hbm_ctrl
  assign addr_map_unused = cfg_i.addr_map;

  tpu_fifo #(
    .data_t(hbm_rsp_t),
    .Depth (RspDepth)
  ) i_rspq (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (rspq_push),
    .data_i (rspq_in),
    .pop_i  (rspq_pop),
    .data_o (rspq_head),
    .empty_o(rspq_empty),
    .full_o (rspq_full),
    .count_o(rspq_count)
  );

  tpu_fifo #(
    .data_t(rd_flight_t),
    .Depth (RspDepth)
  ) i_flight (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (fl_push),
    .data_i (fl_in),
    .pop_i  (fl_pop),
    .data_o (fl_head),
    .empty_o(fl_empty),
    .full_o (fl_full),
    .count_o(fl_count)
  );

  tpu_fifo #(
    .data_t(hbm_rsp_t),
    .Depth (AckDepth)
  ) i_ackq (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (ackq_push),
    .data_i (ackq_in),
    .pop_i  (ackq_pop),
    .data_o (ackq_head),
    .empty_o(ackq_empty),
    .full_o (ackq_full),
    .count_o(ackq_count_unused)
  );

  tpu_fifo #(
    .data_t(wr_flight_t),
    .Depth (WpipeDepth)
  ) i_wpipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (wp_push),
    .data_i (wp_in),
    .pop_i  (wp_pop),
    .data_o (wp_head),
    .empty_o(wp_empty),
    .full_o (wp_full),
    .count_o(wp_count_unused)
  );

  // ---------------------------------------------------------------------------------------------
  // Bank state and timing counters
  // ---------------------------------------------------------------------------------------------
  logic [HBM_BANKS-1:0] open_q;
  hbm_row_t row_q[HBM_BANKS];  // open row of each bank (an array: one trace signal per bank)
  hbm_row_t [HBM_BANKS-1:0] open_row;
  always_comb begin
    for (int unsigned b = 0; b < HBM_BANKS; b++) open_row[b] = row_q[b];
  end
  logic [HBM_BANKS-1:0] fresh_q;  // opened by an ACT, no column command yet
  logic [HBM_BANKS-1:0] confl_q;  // last PRE closed a row another request conflicted
  hbm_cyc_t [HBM_BANKS-1:0] act_cnt_q;  // tRC, tRP
  hbm_cyc_t [HBM_BANKS-1:0] col_cnt_q;  // tRCD
  hbm_cyc_t [HBM_BANKS-1:0] pre_cnt_q;  // tRAS, tRTP, tWR
  hbm_cyc_t [HBM_BANK_GROUPS-1:0] act_bg_cnt_q;  // tRRD_S/L, tRFC
  hbm_cyc_t [HBM_BANK_GROUPS-1:0] rd_bg_cnt_q;  // tCCD_S/L, tWTR_S/L
  hbm_cyc_t [HBM_BANK_GROUPS-1:0] wr_bg_cnt_q;  // tCCD_S/L, tRTW
  hbm_cyc_t ref_cnt_q;  // tRP after a PRE, tRFC after a REF
  hbm_cyc_t [3:0] faw_q;  // tFAW window: one counter per of the last four ACTs
  logic [1:0] faw_ptr_q;  // counter of the oldest of the last four ACTs

  // Refresh.
  hbm_cyc_t ref_timer_q, ref_timer_d;
  logic ref_pending_q, ref_pending_d;  // closing banks for the refresh: nothing else is issued
  logic ref_noact_q, ref_noact_d;  // refresh soon: no new ACT, so no row is too young to close

  // Write drain mode.
  logic drain_q, drain_d;

  // Command chosen this cycle.
  hbm_cmd_t cmd_d, cmd_q;
  hbm_bank_t cmd_bank;

  // ---------------------------------------------------------------------------------------------
  // Accepting requests
  // ---------------------------------------------------------------------------------------------
  hbm_bank_t req_bank;
  logic rq_hit, wq_hit;
  logic [WqIdxW-1:0] wq_hit_idx;
  logic [SlotW-1:0] wq_hit_slot, free_slot;
  logic merge, forward, req_fire;

  assign req_bank = {req_i.bg, req_i.ba};

  // The request is matched only while it is valid (ready is looked at only with valid), and only
  // against valid entries; the read queue only for a write (rq_hit blocks nothing else). The
  // request may come from the chip's host port, a top-level input, so this runs in every eval()
  // of a verilated model: nothing is scanned in the cycles without a request (docs/scale.md).
  always_comb begin
    rq_hit = 1'b0;
    wq_hit = 1'b0;
    wq_hit_idx = '0;
    if (req_valid_i) begin
      if (req_i.write) begin
        for (int unsigned i = 0; i < RqDepth; i++) begin
          if (rq_valid[i] && rq_ent[i].bank == req_bank && rq_ent[i].row == req_i.row &&
              rq_ent[i].col == req_i.col)
            rq_hit = 1'b1;
        end
      end
      // Merging keeps buffered blocks unique, so at most one entry matches.
      for (int unsigned i = 0; i < WqDepth; i++) begin
        if (wq_valid[i] && wq_ent[i].bank == req_bank && wq_ent[i].row == req_i.row &&
            wq_ent[i].col == req_i.col) begin
          wq_hit = 1'b1;
          wq_hit_idx = WqIdxW'(i);
        end
      end
    end
    wq_hit_slot = wq_ent[wq_hit_idx].slot;
    free_slot = '0;
    for (int i = int'(WqDepth) - 1; i >= 0; i--) begin
      if (!wslot_busy_q[i]) free_slot = SlotW'(i);
    end
  end

  // A write merges into the buffered one unless that one is sent to the device this cycle.
  assign merge = req_i.write && wq_hit && !(wq_pop && wq_pop_idx == wq_hit_idx);
  assign forward = !req_i.write && wq_hit;
  assign req_ready_o = req_i.write ? (!rq_hit && !ackq_full && (merge || !wq_full))
                                   : (forward ? !ackq_full : !rq_full);
  assign req_fire = req_valid_i && req_ready_o;

  always_comb begin
    rq_push = req_fire && !req_i.write && !forward;
    wq_push = req_fire && req_i.write && !merge;
    rq_new = '{bank: req_bank, row: req_i.row, col: req_i.col, tag: req_i.tag, ts: now_q,
               slot: '0};
    wq_new = '{bank: req_bank, row: req_i.row, col: req_i.col, tag: req_i.tag, ts: now_q,
               slot: free_slot};
    ackq_push = req_fire && (req_i.write || forward);
    ackq_in = req_i.write ? '{write: 1'b1, tag: req_i.tag, ue: '0, data: '0}
                          : '{write: 1'b0, tag: req_i.tag, ue: '0,
                             data: wbuf_q[wq_hit_slot]};
  end

  // ---------------------------------------------------------------------------------------------
  // Scheduling
  // ---------------------------------------------------------------------------------------------
  logic rd_starved, wr_starved, serve_wr, rd_credit;
  logic [HBM_BANKS-1:0] can_act, can_rd, can_wr, can_pre;
  logic faw_ok;
  hbm_bank_t [RqDepth-1:0] rq_bank;
  hbm_row_t [RqDepth-1:0] rq_row;
  hbm_bank_t [WqDepth-1:0] wq_bank;
  hbm_row_t [WqDepth-1:0] wq_row;
  logic rp_col_found, rp_row_found, rp_row_is_act, wp_col_found, wp_row_found, wp_row_is_act;
  logic [RqIdxW-1:0] rp_col_idx, rp_row_idx;
  logic [WqIdxW-1:0] wp_col_idx, wp_row_idx;

  assign rd_starved = !rq_empty && ((now_q - rq_ent[0].ts) >= cfg_i.starve_cap);
  assign wr_starved = !wq_empty && ((now_q - wq_ent[0].ts) >= cfg_i.starve_cap);
  assign serve_wr = !wq_empty && (rq_empty || (drain_q && !rd_starved) ||
                                  (wr_starved && !rd_starved));
  // Room for the data of one more RD in the response queue, counting the reads in flight.
  assign rd_credit = (32'(rspq_count) + 32'(fl_count)) < RspDepth;
  assign faw_ok = (faw_q[faw_ptr_q] == '0);

  always_comb begin
    for (int unsigned b = 0; b < HBM_BANKS; b++) begin
      logic [HBM_BG_W-1:0] g;
      g = HBM_BG_W'(b >> HBM_BA_W);
      can_act[b] = !ref_noact_q && act_cnt_q[b] == '0 && act_bg_cnt_q[g] == '0 && faw_ok;
      can_rd[b] = !ref_pending_q && col_cnt_q[b] == '0 && rd_bg_cnt_q[g] == '0 && rd_credit &&
                  !fl_full;
      can_wr[b] = !ref_pending_q && col_cnt_q[b] == '0 && wr_bg_cnt_q[g] == '0 && !wp_full;
      can_pre[b] = pre_cnt_q[b] == '0;
    end
    for (int unsigned i = 0; i < RqDepth; i++) begin
      rq_bank[i] = rq_ent[i].bank;
      rq_row[i] = rq_ent[i].row;
    end
    for (int unsigned i = 0; i < WqDepth; i++) begin
      wq_bank[i] = wq_ent[i].bank;
      wq_row[i] = wq_ent[i].row;
    end
  end

  tpu_hbm_pick #(
    .Depth(RqDepth)
  ) i_pick_rd (
    .valid_i     (rq_valid),
    .bank_i      (rq_bank),
    .row_i       (rq_row),
    .open_i      (open_q),
    .open_row_i  (open_row),
    .can_col_i   (can_rd),
    .can_act_i   (can_act),
    .can_pre_i   (can_pre),
    .head_first_i(rd_starved),
    .col_found_o (rp_col_found),
    .col_idx_o   (rp_col_idx),
    .row_found_o (rp_row_found),
    .row_idx_o   (rp_row_idx),
    .row_is_act_o(rp_row_is_act)
  );

  tpu_hbm_pick #(
    .Depth(WqDepth)
  ) i_pick_wr (
    .valid_i     (wq_valid),
    .bank_i      (wq_bank),
    .row_i       (wq_row),
    .open_i      (open_q),
    .open_row_i  (open_row),
    .can_col_i   (can_wr),
    .can_act_i   (can_act),
    .can_pre_i   (can_pre),
    .head_first_i(wr_starved),
    .col_found_o (wp_col_found),
    .col_idx_o   (wp_col_idx),
    .row_found_o (wp_row_found),
    .row_idx_o   (wp_row_idx),
    .row_is_act_o(wp_row_is_act)
  );

  // The command of this cycle.
  always_comb begin
    cmd_d = HBM_CMD_NOP;
    rq_pop = 1'b0;
    rq_pop_idx = rp_col_idx;
    wq_pop = 1'b0;
    wq_pop_idx = wp_col_idx;
    if (ref_pending_q) begin
      // Close every bank with one PREA as soon as all open banks may close, then REF.
      if (open_q == '0) begin
        if (ref_cnt_q == '0) cmd_d.cmd = HbmRef;
      end else if ((open_q & ~can_pre) == '0) begin
        cmd_d.cmd = HbmPrea;
      end
    end else if (serve_wr) begin
      if (wp_col_found) begin
        cmd_d = '{cmd: HbmWr, bg: wq_ent[wp_col_idx].bank[HBM_BANK_W-1-:HBM_BG_W],
                  ba: wq_ent[wp_col_idx].bank[HBM_BA_W-1:0], row: wq_ent[wp_col_idx].row,
                  col: wq_ent[wp_col_idx].col};
        wq_pop = 1'b1;
      end else if (wp_row_found) begin
        cmd_d = '{cmd: wp_row_is_act ? HbmAct : HbmPre,
                  bg: wq_ent[wp_row_idx].bank[HBM_BANK_W-1-:HBM_BG_W],
                  ba: wq_ent[wp_row_idx].bank[HBM_BA_W-1:0], row: wq_ent[wp_row_idx].row,
                  col: '0};
      end
    end else if (!rq_empty) begin
      if (rp_col_found) begin
        cmd_d = '{cmd: HbmRd, bg: rq_ent[rp_col_idx].bank[HBM_BANK_W-1-:HBM_BG_W],
                  ba: rq_ent[rp_col_idx].bank[HBM_BA_W-1:0], row: rq_ent[rp_col_idx].row,
                  col: rq_ent[rp_col_idx].col};
        rq_pop = 1'b1;
      end else if (rp_row_found) begin
        cmd_d = '{cmd: rp_row_is_act ? HbmAct : HbmPre,
                  bg: rq_ent[rp_row_idx].bank[HBM_BANK_W-1-:HBM_BG_W],
                  ba: rq_ent[rp_row_idx].bank[HBM_BA_W-1:0], row: rq_ent[rp_row_idx].row,
                  col: '0};
      end
    end
  end

  assign cmd_bank = {cmd_d.bg, cmd_d.ba};

  // Bank state and timing counters after this cycle's command, worked out at the clock edge (it
  // feeds only registers, docs/scale.md "One core"): the down-counters that run count down, then
  // the command (if any) raises those of its bank, its bank group and the channel.
  always_ff @(posedge clk_i or negedge rst_ni) begin : p_banks
    hbm_cyc_t [HBM_BANKS-1:0] act_n, col_n, pre_n;
    hbm_cyc_t [HBM_BANK_GROUPS-1:0] act_bg_n, rd_bg_n, wr_bg_n;
    hbm_cyc_t ref_n;
    hbm_cyc_t [3:0] faw_n;
    if (!rst_ni) begin
      open_q <= '0;
      for (int unsigned b = 0; b < HBM_BANKS; b++) row_q[b] <= '0;
      fresh_q <= '0;
      confl_q <= '0;
      act_cnt_q <= '0;
      col_cnt_q <= '0;
      pre_cnt_q <= '0;
      act_bg_cnt_q <= '0;
      rd_bg_cnt_q <= '0;
      wr_bg_cnt_q <= '0;
      ref_cnt_q <= '0;
      faw_q <= '0;
      faw_ptr_q <= '0;
    end else begin
      act_n = act_cnt_q;
      col_n = col_cnt_q;
      pre_n = pre_cnt_q;
      act_bg_n = act_bg_cnt_q;
      rd_bg_n = rd_bg_cnt_q;
      wr_bg_n = wr_bg_cnt_q;
      faw_n = faw_q;
      for (int unsigned b = 0; b < HBM_BANKS; b++) begin
        if (act_n[b] != '0) act_n[b] = act_n[b] - 1'b1;
        if (col_n[b] != '0) col_n[b] = col_n[b] - 1'b1;
        if (pre_n[b] != '0) pre_n[b] = pre_n[b] - 1'b1;
      end
      for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++) begin
        if (act_bg_n[g] != '0) act_bg_n[g] = act_bg_n[g] - 1'b1;
        if (rd_bg_n[g] != '0) rd_bg_n[g] = rd_bg_n[g] - 1'b1;
        if (wr_bg_n[g] != '0) wr_bg_n[g] = wr_bg_n[g] - 1'b1;
      end
      for (int unsigned i = 0; i < 4; i++) if (faw_n[i] != '0) faw_n[i] = faw_n[i] - 1'b1;
      ref_n = cnt_dec(ref_cnt_q);
      case (cmd_d.cmd)
        HbmAct: begin
          act_n[cmd_bank] = cnt_max(act_n[cmd_bank], timing_i.rc);
          col_n[cmd_bank] = cnt_max(col_n[cmd_bank], timing_i.rcd);
          pre_n[cmd_bank] = cnt_max(pre_n[cmd_bank], timing_i.ras);
          for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++)
            act_bg_n[g] = cnt_max(act_bg_n[g], (HBM_BG_W'(g) == cmd_d.bg) ? timing_i.rrd_l
                                                                            : timing_i.rrd_s);
          faw_n[faw_ptr_q] = (timing_i.faw > 16'd1) ? timing_i.faw - 1'b1 : '0;
          faw_ptr_q <= faw_ptr_q + 1'b1;
          open_q[cmd_bank] <= 1'b1;
          row_q[cmd_bank] <= cmd_d.row;
          fresh_q[cmd_bank] <= 1'b1;
        end
        HbmPre: begin
          act_n[cmd_bank] = cnt_max(act_n[cmd_bank], timing_i.rp);
          ref_n = cnt_max(ref_n, timing_i.rp);
          open_q[cmd_bank] <= 1'b0;
          // A PRE (not the refresh's PREA) closes a row that some request conflicts with.
          confl_q[cmd_bank] <= 1'b1;
        end
        HbmPrea: begin
          for (int unsigned b = 0; b < HBM_BANKS; b++) act_n[b] = cnt_max(act_n[b], timing_i.rp);
          ref_n = cnt_max(ref_n, timing_i.rp);
          open_q <= '0;
          confl_q <= '0;
        end
        HbmRd, HbmWr: begin
          pre_n[cmd_bank] = cnt_max(pre_n[cmd_bank], (cmd_d.cmd == HbmRd) ? timing_i.rtp
                                                                           : t_wr_to_pre);
          for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++) begin
            logic same;
            same = (HBM_BG_W'(g) == cmd_d.bg);
            if (cmd_d.cmd == HbmRd) begin
              rd_bg_n[g] = cnt_max(rd_bg_n[g], same ? timing_i.ccd_l : timing_i.ccd_s);
              wr_bg_n[g] = cnt_max(wr_bg_n[g], t_rd_to_wr);
            end else begin
              rd_bg_n[g] = cnt_max(rd_bg_n[g], same ? t_wr_to_rd_l : t_wr_to_rd_s);
              wr_bg_n[g] = cnt_max(wr_bg_n[g], same ? timing_i.ccd_l : timing_i.ccd_s);
            end
          end
          fresh_q[cmd_bank] <= 1'b0;
          confl_q[cmd_bank] <= 1'b0;
        end
        HbmRef: begin
          for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++)
            act_bg_n[g] = cnt_max(act_bg_n[g], timing_i.rfc);
          ref_n = cnt_max(ref_n, timing_i.rfc);
        end
        default: ;
      endcase
      act_cnt_q <= act_n;
      col_cnt_q <= col_n;
      pre_cnt_q <= pre_n;
      act_bg_cnt_q <= act_bg_n;
      rd_bg_cnt_q <= rd_bg_n;
      wr_bg_cnt_q <= wr_bg_n;
      ref_cnt_q <= ref_n;
      faw_q <= faw_n;
    end
  end

  // Refresh timer: REF number k is due by cycle k*tREFI; rows stop opening t_ref_lead before.
  always_comb begin
    ref_timer_d = (ref_timer_q == timing_i.refi - 1'b1) ? '0 : ref_timer_q + 1'b1;
    ref_pending_d = ref_pending_q;
    ref_noact_d = ref_noact_q;
    if (ref_timer_q == timing_i.refi - 1'b1 - t_ref_lead - timing_i.ras) ref_noact_d = 1'b1;
    if (ref_timer_q == timing_i.refi - 1'b1 - t_ref_lead) ref_pending_d = 1'b1;
    if (cmd_d.cmd == HbmRef) begin
      ref_pending_d = 1'b0;
      ref_noact_d = 1'b0;
    end
  end

  // Write drain hysteresis.
  always_comb begin
    drain_d = drain_q;
    if (32'(wq_count) >= 32'(cfg_i.wr_hi)) drain_d = 1'b1;
    else if (32'(wq_count) <= 32'(cfg_i.wr_lo)) drain_d = 1'b0;
  end

  // ---------------------------------------------------------------------------------------------
  // Data paths: write data out, read data in, responses out
  // ---------------------------------------------------------------------------------------------
  logic wbeat_q, wbeat_d, wvalid_d, rbeat_q, rbeat_d;
  hbm_bus_t wdata_d, rlo_q;
  hbm_cyc_t rd_lat;

  // Buffered write slots: filled on accept (new or merged), freed when the WR is issued.
  always_comb begin
    wslot_busy_d = wslot_busy_q;
    if (wq_pop) wslot_busy_d[wq_ent[wq_pop_idx].slot] = 1'b0;
    if (wq_push) wslot_busy_d[free_slot] = 1'b1;
  end

  always_ff @(posedge clk_i) begin
    if (req_fire && req_i.write) wbuf_q[merge ? wq_hit_slot : free_slot] <= req_i.data;
  end

  // WR issued: its data goes out CWL cycles after the command reaches the device.
  assign wp_push = wq_pop;
  assign wp_in = '{data: wbuf_q[wq_ent[wq_pop_idx].slot], due: now_q + timing_i.cwl};

  always_comb begin
    wbeat_d = wbeat_q;
    wvalid_d = 1'b0;
    wdata_d = '0;
    wp_pop = 1'b0;
    if (wbeat_q) begin
      wvalid_d = 1'b1;
      wdata_d = wp_head.data[HBM_BUS_BITS+:HBM_BUS_BITS];
      wp_pop = 1'b1;
      wbeat_d = 1'b0;
    end else if (!wp_empty && wp_head.due == now_q) begin
      wvalid_d = 1'b1;
      wdata_d = wp_head.data[0+:HBM_BUS_BITS];
      wbeat_d = 1'b1;
    end
  end

  // ECC: encode the write data of the next bus cycle (at the clock edge, only for a data beat:
  // the check bits of the zero word are zero); check the read data of this one, only in a cycle
  // with read data (rd_fix is used only then).
  hbm_bus_t rd_fix;
  logic [HBM_BUS_WORDS-1:0] rd_ce, rd_ue, rlo_ue_q;
  hbm_secded_dec_t [HBM_BUS_WORDS-1:0] rd_dec;
  always_comb begin
    rd_dec = '0;
    rd_fix = '0;
    rd_ce = '0;
    rd_ue = '0;
    if (rvalid_i) begin
      for (int unsigned w = 0; w < HBM_BUS_WORDS; w++) begin
        rd_dec[w] = hbm_secded_dec(rdata_i[w*64+:64], rcheck_i[w*8+:8]);
        rd_fix[w*64+:64] = rd_dec[w].data;
        rd_ce[w] = rd_dec[w].ce;
        rd_ue[w] = rd_dec[w].ue;
      end
    end
  end
  logic unused_syndrome;  // the syndromes are for waves and debugging
  assign unused_syndrome = ^{rd_dec[0].syndrome, rd_dec[1].syndrome, rd_dec[2].syndrome,
                             rd_dec[3].syndrome};
  assign ecc_ce_o = 3'($countones(rd_ce));
  assign ecc_ue_o = 3'($countones(rd_ue));

  // RD issued: remember its tag; the device answers in order, CL cycles after it sees the RD.
  assign fl_push = rq_pop;
  assign fl_in = '{tag: rq_ent[rp_col_idx].tag, ts: rq_ent[rp_col_idx].ts,
                   due: now_q + 16'd1 + timing_i.cl};

  always_comb begin
    rbeat_d = rbeat_q;
    rspq_push = 1'b0;
    fl_pop = 1'b0;
    rspq_in = '{write: 1'b0, tag: fl_head.tag, ue: {rd_ue, rlo_ue_q}, data: {rd_fix, rlo_q}};
    if (rvalid_i) begin
      rbeat_d = !rbeat_q;
      if (rbeat_q) begin
        rspq_push = 1'b1;
        fl_pop = 1'b1;
      end
    end
  end
  // From the request handshake to the response at this channel's output.
  assign rd_lat = now_q + 16'd1 - fl_head.ts;

  // Output: write acks / forwarded reads and device read data take turns; a choice holds while
  // the response waits for ready.
  logic sel_ack, sel_ack_q, hold_q, turn_ack_q;
  always_comb begin
    if (hold_q) sel_ack = sel_ack_q;
    else if (ackq_empty) sel_ack = 1'b0;
    else if (rspq_empty) sel_ack = 1'b1;
    else sel_ack = turn_ack_q;
  end
  assign rsp_valid_o = !ackq_empty || !rspq_empty;
  assign rsp_o = sel_ack ? ackq_head : rspq_head;
  assign ackq_pop = rsp_valid_o && rsp_ready_i && sel_ack;
  assign rspq_pop = rsp_valid_o && rsp_ready_i && !sel_ack;

  // ---------------------------------------------------------------------------------------------
  // Statistics
  // ---------------------------------------------------------------------------------------------
  hbm_ctr_t [HBM_NUM_STATS-1:0] stats_q;
  // Counted at the clock edge (one process, not a next-state always_comb): the request handshake
  // comes from the chip's host port, and a verilated model re-evaluates every always_comb that
  // depends on a top-level input at each eval(), twice a cycle (docs/scale.md, "One core").
  always_ff @(posedge clk_i or negedge rst_ni) begin : p_stats
    hbm_ctr_t [HBM_NUM_STATS-1:0] stats_d;
    logic col_cmd;
    if (!rst_ni) begin
      stats_q <= '0;
    end else begin
      col_cmd = (cmd_d.cmd == HbmRd) || (cmd_d.cmd == HbmWr);
      stats_d = stats_q;
      if (req_fire && !req_i.write) stats_d[StatRdReqs] += 1;
      if (req_fire && req_i.write) stats_d[StatWrReqs] += 1;
      if (req_fire && forward) stats_d[StatRdForwarded] += 1;
      if (req_fire && req_i.write && merge) stats_d[StatWrMerged] += 1;
      if (cmd_d.cmd == HbmRd) stats_d[StatRdBytes] += hbm_ctr_t'(HBM_BURST_BYTES);
      if (cmd_d.cmd == HbmWr) stats_d[StatWrBytes] += hbm_ctr_t'(HBM_BURST_BYTES);
      if (col_cmd && !fresh_q[cmd_bank]) stats_d[StatRowHits] += 1;
      if (col_cmd && fresh_q[cmd_bank] && !confl_q[cmd_bank]) stats_d[StatRowMisses] += 1;
      if (col_cmd && fresh_q[cmd_bank] && confl_q[cmd_bank]) stats_d[StatRowConflict] += 1;
      if (cmd_d.cmd == HbmAct) stats_d[StatActs] += 1;
      if (cmd_d.cmd == HbmPre || cmd_d.cmd == HbmPrea) stats_d[StatPres] += 1;
      if (cmd_d.cmd == HbmRef) stats_d[StatRefreshes] += 1;
      if (rvalid_i || wvalid_o) stats_d[StatBusBusy] += 1;
      if (drain_d && !drain_q) stats_d[StatWrDrains] += 1;
      stats_d[StatEccCe] += hbm_ctr_t'(ecc_ce_o);
      stats_d[StatEccUe] += hbm_ctr_t'(ecc_ue_o);
      if (rspq_push) begin
        stats_d[StatLatSum] += hbm_ctr_t'(rd_lat);
        stats_d[StatLatCount] += 1;
        stats_d[32'(StatLatHist0)+hbm_lat_bucket(rd_lat)] += 1;
      end
      stats_q <= stats_d;
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Registers
  // ---------------------------------------------------------------------------------------------
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wslot_busy_q <= '0;
      ref_timer_q <= '0;
      ref_pending_q <= 1'b0;
      ref_noact_q <= 1'b0;
      drain_q <= 1'b0;
      cmd_q <= HBM_CMD_NOP;
      wbeat_q <= 1'b0;
      wvalid_o <= 1'b0;
      wdata_o <= '0;
      wcheck_o <= '0;
      rbeat_q <= 1'b0;
      rlo_q <= '0;
      rlo_ue_q <= '0;
      sel_ack_q <= 1'b0;
      hold_q <= 1'b0;
      turn_ack_q <= 1'b0;
    end else begin
      wslot_busy_q <= wslot_busy_d;
      ref_timer_q <= ref_timer_d;
      ref_pending_q <= ref_pending_d;
      ref_noact_q <= ref_noact_d;
      drain_q <= drain_d;
      cmd_q <= cmd_d;
      wbeat_q <= wbeat_d;
      wvalid_o <= wvalid_d;
      wdata_o <= wdata_d;
      wcheck_o <= wvalid_d ? hbm_ecc_enc_bus(wdata_d) : '0;
      rbeat_q <= rbeat_d;
      if (rvalid_i && !rbeat_q) begin
        rlo_q <= rd_fix;
        rlo_ue_q <= rd_ue;
      end
      sel_ack_q <= sel_ack;
      hold_q <= rsp_valid_o && !rsp_ready_i;
      if (rsp_valid_o && rsp_ready_i) turn_ack_q <= !sel_ack;
    end
  end

  assign cmd_o = cmd_q;
  assign stats_o = stats_q;
  assign ref_pending_o = ref_pending_q;
  assign idle_o = rq_empty && wq_empty && fl_empty && wp_empty && rspq_empty && ackq_empty &&
                  !wbeat_q && !wvalid_o && !rbeat_q;

  // ---------------------------------------------------------------------------------------------
  // Assertions
  // ---------------------------------------------------------------------------------------------
  // Host side: the request is held, unchanged, until it is taken.
  `TPU_ASSERT(ReqValidHeld_A,
                                     req_valid_i && !req_ready_o |=> req_valid_i,
      ("tpu_hbm_chan: request valid dropped before ready"))
  // The payload checks are immediate, at the clock edge, against a copy taken only while the
  // port waits: as concurrent $stable checks a verilated model sampled and kept a copy of each
  // whole payload (over 500 bits) in every eval() (docs/scale.md). The same cycles are checked.
  logic req_wait_q, rsp_wait_q;
  hbm_chan_req_t req_held_q;
  hbm_rsp_t rsp_held_q;
  always_ff @(posedge clk_i) begin
    if (rst_ni && req_wait_q) begin
      `TPU_ASSERT_I(ReqStable_A, req_i == req_held_q,
          ("tpu_hbm_chan: request payload changed while waiting for ready"))
    end
    if (rst_ni && rsp_wait_q) begin
      `TPU_ASSERT_I(RspStable_A, rsp_o == rsp_held_q,
          ("tpu_hbm_chan: response payload changed while waiting for ready"))
    end
    req_wait_q <= req_valid_i && !req_ready_o;
    rsp_wait_q <= rsp_valid_o && !rsp_ready_i;
    if (req_valid_i && !req_ready_o) req_held_q <= req_i;
    if (rsp_valid_o && !rsp_ready_i) rsp_held_q <= rsp_o;
  end
  // Response side: the same, for what this channel drives.
  `TPU_ASSERT(RspValidHeld_A,
                                     rsp_valid_o && !rsp_ready_i |=> rsp_valid_o,
      ("tpu_hbm_chan: response valid dropped before ready"))
  // ECC: the check bits on the write bus are those of the word beside them, and a response
  // flags uncorrectable words only for device read data.
  // Immediate, at the clock edge, only with a data beat: as a concurrent assertion a verilated
  // model encoded the bus (32 parity trees) every cycle, beat or not (docs/scale.md).
  always_ff @(posedge clk_i) begin
    if (rst_ni && wvalid_o) begin
      `TPU_ASSERT_I(WcheckMatches_A, wcheck_o == hbm_ecc_enc_bus(wdata_o),
          ("tpu_hbm_chan: write check bits do not match their data"))
    end
  end
  always_ff @(posedge clk_i) begin
    if (rst_ni && rsp_valid_o && rsp_o.write) begin
      `TPU_ASSERT_I(UeOnlyOnReads_A, rsp_o.ue == '0,
          ("tpu_hbm_chan: a write acknowledge flagged with an ECC error"))
    end
  end
  // Returning read data always has room, and arrives CL cycles after its RD reached the device.
  `TPU_ASSERT(RspRoom_A,
      rspq_push |-> !rspq_full,
      ("tpu_hbm_chan: read data with no room in the response queue"))
  `TPU_ASSERT(RdataExpected_A,
      rvalid_i |-> !fl_empty,
      ("tpu_hbm_chan: read data with no read in flight"))
  `TPU_ASSERT(RdataOnCl_A,
                                  rvalid_i && !rbeat_q |-> fl_head.due == now_q,
      ("tpu_hbm_chan: read data not CL cycles after its RD"))
  // Write data is sent on time (its due cycle is never in the past).
  `TPU_ASSERT(WdataOnTime_A,
                                    !wp_empty && !wbeat_q |-> (wp_head.due - now_q) <= timing_i.cwl,
      ("tpu_hbm_chan: write data missed its CWL slot"))
  // One buffered-data slot per queued write.
  `TPU_ASSERT(Wslots_A,
                             $countones(wslot_busy_q) == 32'(wq_count),
      ("tpu_hbm_chan: write slots out of step with the write queue"))
  // Refresh is issued before its deadline.
  `TPU_ASSERT(RefOnTime_A,
                                  ref_pending_q && ref_timer_q == timing_i.refi - 16'd2
                                  |-> cmd_d.cmd == HbmRef,
      ("tpu_hbm_chan: refresh late"))
  // Commands only to banks in the state they need.
  `TPU_ASSERT(ColOpen_A,
                               (cmd_d.cmd == HbmRd || cmd_d.cmd == HbmWr) |->
                               open_q[cmd_bank] && open_row[cmd_bank] == cmd_d.row,
      ("tpu_hbm_chan: column command to a bank without its row open"))
  `TPU_ASSERT(ActClosed_A,
                                 cmd_d.cmd == HbmAct |-> !open_q[cmd_bank],
      ("tpu_hbm_chan: ACT to an open bank"))

endmodule
