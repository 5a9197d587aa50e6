// tpu_dma: the DMA engine: 2D strided copies between HBM and the on-chip memories.
//
// A command names an HBM region of `rows` segments of `seg_bytes` bytes, segment i at
// hbm_addr + i * stride, and a run of consecutive on-chip rows from mem_row. The bytes of the
// region, in order, are the on-chip rows in order: each row is one "piece" of Lanes elements,
// 2 bytes each (bf16: lane bits [15:0], upper bits zero on the way in, dropped on the way out) or
// 4 bytes (f32). The sequencer checks every rule before start_i (docs/isa.md): pieces aligned,
// seg_bytes a multiple of the piece, and for writes to HBM whole 64-byte bursts.
//   HBM -> VMEM: pieces that are contiguous within one 64-byte burst share one read request.
//     Responses come back out of order; a tag table maps each to its rows. A response's first
//     two pieces are written in the cycle it is taken (two write ports), further pieces two per
//     cycle. With tail_i != 0,
//     the last piece of every segment keeps only its first tail_i lanes: the others are written
//     as -0 (bf16 0x8000, f32 0x80000000), the neutral padding of a K tile (docs/isa.md), so an
//     edge tile is padded on chip whatever the bytes beyond the matrix's columns hold.
//   VMEM/AMEM -> HBM: up to two rows read per cycle (two read ports) are packed into a burst
//     buffer; a full burst is sent as a write request; the command completes when every write is
//     acknowledged.
// Throughput: two on-chip rows per cycle when they lie in one segment and one 64-byte burst
// (bf16 rows of <= 16 lanes, f32 rows of <= 8), else one: up to 64 B/cycle, one burst per cycle,
// the rate of the HBM controller's port. NumTags requests in flight (the chip uses 64: at one
// burst per cycle, 32 did not cover a row miss plus queueing). Handshakes: valid/ready to the
// HBM controller (payload held while waiting); start_i is taken when ready_o is high; done_o pulses for one cycle when the command has completed (all
// data in memory, or all writes acknowledged and so visible in HBM).
// ECC: a read response with an uncorrectable word (rsp_i.ue, tpu_hbm_ctrl) is still written (the
// data as read), and `ecc_err_o` pulses with `ecc_addr_o`, the byte address of its first such
// word, so that the sequencer stops the program with ErrHbmUncorr naming this DMA.
module tpu_dma
  import tpu_hbm_pkg::*;
  import tpu_chip_pkg::*;
#(
  parameter int unsigned Lanes   = 8,
  parameter int unsigned NumTags = 32,
  parameter int unsigned MemAddrW = 16,
  localparam int unsigned RowW   = Lanes * 32,
  localparam int unsigned TagW   = $clog2(NumTags)
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  // command
  input  logic                start_i,
  output logic                ready_o,
  input  dma_dir_e            dir_i,
  input  logic                bf16_i,
  input  logic [7:0]          tail_i,
  input  logic [15:0]         mem_row_i,
  input  logic [15:0]         rows_i,
  input  logic [15:0]         seg_bytes_i,
  input  logic [31:0]         hbm_addr_i,
  input  logic [31:0]         stride_i,
  output logic                done_o,
  output logic                busy_o,
  output logic                ecc_err_o,
  output logic [31:0]         ecc_addr_o,
  // HBM controller port
  output logic                req_valid_o,
  input  logic                req_ready_i,
  output hbm_req_t            req_o,
  input  logic                rsp_valid_i,
  output logic                rsp_ready_o,
  input  hbm_rsp_t            rsp_i,
  // on-chip memories
  // on-chip memories: two read ports (rows mrow, mrow + 1) and two VMEM write ports
  output logic [1:0][MemAddrW-1:0] rd_addr_o,
  input  logic [1:0][RowW-1:0]     vmem_rd_data_i,
  input  logic [1:0][RowW-1:0]     amem_rd_data_i,
  output logic [1:0]               vmem_we_o,
  output logic [1:0][MemAddrW-1:0] wr_addr_o,
  output logic [1:0][RowW-1:0]     wr_data_o
);

  localparam int unsigned BurstW = HBM_BURST_BYTES * 8;
  // Most pieces one burst can hold (bf16 pieces of 2 * Lanes bytes).
  localparam int unsigned MaxPieces = (HBM_BURST_BYTES / (2 * Lanes) > 0) ?
                                      HBM_BURST_BYTES / (2 * Lanes) : 1;

  typedef struct packed {
    logic [15:0] row0;  // first on-chip row of the response
    logic [5:0]  off0;  // byte offset of its piece in the burst
    logic [6:0]  cnt;   // pieces in the burst
    logic [MaxPieces-1:0] last;  // piece i is the last of its segment (tail fill applies)
    logic [31-HBM_OFFSET_W:0] blk;  // the burst's address / 64 (for ECC error reports)
  } tag_ent_t;

  // ---- Command registers and the walker over the HBM region ----
  logic        active_q, active_d;
  dma_dir_e    dir_q, dir_d;
  logic        bf16_q, bf16_d;
  logic [7:0]  tail_q, tail_d;
  logic [15:0] seg_left_q, seg_left_d, off_q, off_d, seg_bytes_q, seg_bytes_d;
  logic [15:0] mrow_q, mrow_d;
  logic [31:0] seg_addr_q, seg_addr_d, stride_q, stride_d;

  logic [31:0] pbytes, pa;
  logic        walker_has, is_read, absorb, done, seg_end, seg_end1, two;
  logic [31:0] nbytes;

  assign pbytes     = bf16_q ? 32'(2 * Lanes) : 32'(4 * Lanes);
  assign pa         = seg_addr_q + 32'(off_q);
  assign walker_has = active_q && (seg_left_q != '0);
  assign is_read    = (dir_q == DmaHbmToVmem);
  assign seg_end    = 32'(off_q) + pbytes >= 32'(seg_bytes_q);
  assign seg_end1   = 32'(off_q) + 2 * pbytes >= 32'(seg_bytes_q);
  // A second piece this cycle: the next one of the same segment, in the same burst.
  assign two        = walker_has && !seg_end &&
                      32'(pa[5:0]) + 2 * pbytes <= 32'(HBM_BURST_BYTES);
  assign nbytes     = two ? 2 * pbytes : pbytes;

  // ---- Tags ----
  logic [NumTags-1:0] tag_busy_q, tag_busy_d;
  tag_ent_t           tag_tab_q [NumTags];
  tag_ent_t           tag_tab_d [NumTags];
  logic [TagW-1:0]    next_tag_q, next_tag_d;
  logic               tag_ok, send;

  assign tag_ok = !tag_busy_q[next_tag_q];

  // ---- Read side: pending (not yet sent) request ----
  logic        pend_valid_q, pend_valid_d;
  logic [31:0] pend_addr_q, pend_addr_d, pend_next_q, pend_next_d;
  logic [15:0] pend_row0_q, pend_row0_d;
  logic [5:0]  pend_off0_q, pend_off0_d;
  logic [6:0]  pend_cnt_q, pend_cnt_d;
  logic [MaxPieces-1:0] pend_last_q, pend_last_d;
  logic        can_merge;

  assign can_merge = pend_valid_q && walker_has && (pa == pend_next_q) &&
                     (pa[31:6] == pend_addr_q[31:6]);

  // ---- Write side: burst buffer and the request waiting to be sent ----
  logic              sreq_valid_q, sreq_valid_d;
  logic [31:0]       sreq_addr_q, sreq_addr_d;
  logic [BurstW-1:0] sreq_data_q, sreq_data_d, wbuf_q, wbuf_d;
  logic [BurstW-1:0] piece_out, piece_mask, wbuf_new;
  logic [1:0][RowW-1:0] src_row;
  logic              completes;

  assign completes    = (32'(pa[5:0]) + nbytes) == 32'(HBM_BURST_BYTES);
  assign rd_addr_o[0] = MemAddrW'(mrow_q);
  assign rd_addr_o[1] = MemAddrW'(mrow_q + 16'd1);
  assign src_row      = (dir_q == DmaAmemToHbm) ? amem_rd_data_i : vmem_rd_data_i;

  always_comb begin
    logic [BurstW-1:0] packed_row, lane_mask;
    piece_out  = '0;
    piece_mask = '0;
    for (int unsigned i = 0; i < 2; i++) begin
      packed_row = '0;
      lane_mask  = '0;
      for (int unsigned l = 0; l < Lanes; l++) begin
        if (bf16_q) begin
          packed_row[16*l +: 16] = src_row[i][32*l +: 16];
          lane_mask[16*l +: 16]  = '1;
        end else begin
          packed_row[32*l +: 32] = src_row[i][32*l +: 32];
          lane_mask[32*l +: 32]  = '1;
        end
      end
      if (i == 0 || two) begin
        piece_out  |= packed_row << ((32'(pa[5:0]) + i * pbytes) * 8);
        piece_mask |= lane_mask << ((32'(pa[5:0]) + i * pbytes) * 8);
      end
    end
    wbuf_new = (wbuf_q & ~piece_mask) | (piece_out & piece_mask);
  end

  // ---- Responses and the unpack stage ----
  logic              unp_busy;
  logic [6:0]        unp_cnt_q, unp_cnt_d;
  logic [15:0]       unp_row_q, unp_row_d;
  logic [5:0]        unp_off_q, unp_off_d;
  logic [BurstW-1:0] unp_data_q, unp_data_d;
  logic [MaxPieces-1:0] unp_last_q, unp_last_d;
  logic              rsp_fire;
  tag_ent_t          rsp_ent;
  logic [TagW-1:0]   rsp_tag;
  logic [BurstW-1:0] wr_src;
  logic [5:0]        wr_off;
  logic [1:0]        wr_last;
  logic [15:0]       wr_row;
  logic [6:0]        wr_left;  // pieces left in the burst being written, this one included

  assign unp_busy    = unp_cnt_q != '0;
  assign rsp_ready_o = !unp_busy;
  assign rsp_fire    = rsp_valid_i && rsp_ready_o;
  assign rsp_tag     = rsp_i.tag[TagW-1:0];
  assign rsp_ent     = tag_tab_q[rsp_tag];

  // The rows written this cycle: up to two pieces of a fresh read response, or of the latched one.
  always_comb begin
    logic [BurstW-1:0] sh;
    vmem_we_o = '0;
    wr_row    = unp_row_q;
    wr_src    = unp_data_q;
    wr_off    = unp_off_q;
    wr_last   = 2'(unp_last_q);
    wr_left   = unp_cnt_q;
    if (rsp_fire && !rsp_i.write) begin
      wr_row  = rsp_ent.row0;
      wr_src  = rsp_i.data;
      wr_off  = rsp_ent.off0;
      wr_last = 2'(rsp_ent.last);
      wr_left = rsp_ent.cnt;
    end else if (!unp_busy) begin
      wr_left = '0;
    end
    wr_data_o = '0;
    for (int unsigned i = 0; i < 2; i++) begin
      vmem_we_o[i] = 32'(wr_left) > i;
      wr_addr_o[i] = MemAddrW'(wr_row + 16'(i));
      sh = wr_src >> ((32'(wr_off) + i * pbytes) * 8);
      for (int unsigned l = 0; l < Lanes; l++) begin
        if (wr_last[i] && tail_q != '0 && l >= 32'(tail_q))
          wr_data_o[i][32*l +: 32] = bf16_q ? 32'h0000_8000 : 32'h8000_0000;
        else if (bf16_q) wr_data_o[i][32*l +: 32] = {16'h0000, sh[16*l +: 16]};
        else             wr_data_o[i][32*l +: 32] = sh[32*l +: 32];
      end
    end
  end

  // ---- ECC errors of read responses ----
  always_comb begin
    logic [2:0] w;
    w = '0;
    for (int i = HBM_BURST_WORDS - 1; i >= 0; i--) if (rsp_i.ue[i]) w = 3'(i);
    ecc_err_o  = rsp_fire && !rsp_i.write && (rsp_i.ue != '0);
    ecc_addr_o = {rsp_ent.blk, HBM_OFFSET_W'(0)} | 32'({w, 3'b000});
  end

  // ---- Request port ----
  always_comb begin
    req_o = '0;
    req_o.tag = hbm_tag_t'(next_tag_q);  // bit 7 = 0: a DMA tag (the host port uses bit 7 = 1)
    if (is_read) begin
      req_valid_o = pend_valid_q && !can_merge && tag_ok;
      req_o.write = 1'b0;
      req_o.addr  = pend_addr_q;
    end else begin
      req_valid_o = sreq_valid_q && tag_ok;
      req_o.write = 1'b1;
      req_o.addr  = sreq_addr_q;
      req_o.data  = sreq_data_q;
    end
  end
  assign send = req_valid_o && req_ready_i;

  always_comb begin
    if (is_read) absorb = walker_has && (can_merge || !pend_valid_q || send);
    else         absorb = walker_has && (!completes || !sreq_valid_q || send);
  end

  assign done   = active_q && !walker_has && !pend_valid_q && !sreq_valid_q &&
                  (tag_busy_q == '0) && !unp_busy;
  assign done_o  = done;
  assign ready_o = !active_q;
  assign busy_o  = active_q;

  // ---- Next state ----
  always_comb begin
    active_d     = active_q;
    dir_d        = dir_q;
    bf16_d       = bf16_q;
    tail_d       = tail_q;
    seg_left_d   = seg_left_q;
    off_d        = off_q;
    seg_bytes_d  = seg_bytes_q;
    mrow_d       = mrow_q;
    seg_addr_d   = seg_addr_q;
    stride_d     = stride_q;
    tag_busy_d   = tag_busy_q;
    tag_tab_d    = tag_tab_q;
    next_tag_d   = next_tag_q;
    pend_valid_d = pend_valid_q;
    pend_addr_d  = pend_addr_q;
    pend_next_d  = pend_next_q;
    pend_row0_d  = pend_row0_q;
    pend_off0_d  = pend_off0_q;
    pend_cnt_d   = pend_cnt_q;
    pend_last_d  = pend_last_q;
    sreq_valid_d = sreq_valid_q;
    sreq_addr_d  = sreq_addr_q;
    sreq_data_d  = sreq_data_q;
    wbuf_d       = wbuf_q;
    unp_cnt_d    = unp_cnt_q;
    unp_row_d    = unp_row_q;
    unp_off_d    = unp_off_q;
    unp_data_d   = unp_data_q;
    unp_last_d   = unp_last_q;

    if (start_i && !active_q) begin
      active_d    = 1'b1;
      dir_d       = dir_i;
      bf16_d      = bf16_i;
      tail_d      = tail_i;
      seg_left_d  = rows_i;
      off_d       = '0;
      seg_bytes_d = seg_bytes_i;
      mrow_d      = mem_row_i;
      seg_addr_d  = hbm_addr_i;
      stride_d    = stride_i;
    end
    if (done) active_d = 1'b0;

    // request sent
    if (send) begin
      tag_busy_d[next_tag_q] = 1'b1;
      tag_tab_d[next_tag_q]  = '{row0: pend_row0_q, off0: pend_off0_q, cnt: pend_cnt_q,
                                 last: pend_last_q, blk: req_o.addr[31:HBM_OFFSET_W]};
      next_tag_d             = (32'(next_tag_q) == NumTags - 1) ? '0 : next_tag_q + 1'b1;
      if (is_read) pend_valid_d = 1'b0;
      else         sreq_valid_d = 1'b0;
    end

    // walker absorbs one piece, or two (`two`: the second is the last of the segment or not)
    if (absorb) begin
      if (is_read) begin
        if (can_merge) begin
          pend_cnt_d  = pend_cnt_q + (two ? 7'd2 : 7'd1);
          pend_last_d = pend_last_q |
                        (MaxPieces'({two && seg_end1, seg_end}) << pend_cnt_q);
        end else begin
          pend_valid_d = 1'b1;
          pend_addr_d  = {pa[31:6], 6'b0};
          pend_row0_d  = mrow_q;
          pend_off0_d  = pa[5:0];
          pend_cnt_d   = two ? 7'd2 : 7'd1;
          pend_last_d  = MaxPieces'({two && seg_end1, seg_end});
        end
        pend_next_d = pa + nbytes;
      end else begin
        wbuf_d = wbuf_new;
        if (completes) begin
          sreq_valid_d = 1'b1;
          sreq_addr_d  = {pa[31:6], 6'b0};
          sreq_data_d  = wbuf_new;
        end
      end
      mrow_d = mrow_q + (two ? 16'd2 : 16'd1);
      if (two ? seg_end1 : seg_end) begin
        off_d      = '0;
        seg_addr_d = seg_addr_q + stride_q;
        seg_left_d = seg_left_q - 1'b1;
      end else begin
        off_d = off_q + 16'(nbytes);
      end
    end

    // responses
    if (rsp_fire) begin
      tag_busy_d[rsp_tag] = 1'b0;
      if (!rsp_i.write && rsp_ent.cnt > 7'd2) begin
        unp_cnt_d  = rsp_ent.cnt - 7'd2;
        unp_row_d  = rsp_ent.row0 + 16'd2;
        unp_off_d  = rsp_ent.off0 + 6'(2 * pbytes);
        unp_data_d = rsp_i.data;
        unp_last_d = rsp_ent.last >> 2;
      end
    end else if (unp_busy) begin
      unp_cnt_d  = (unp_cnt_q > 7'd2) ? unp_cnt_q - 7'd2 : '0;
      unp_last_d = unp_last_q >> 2;
      unp_row_d  = unp_row_q + 16'd2;
      unp_off_d  = unp_off_q + 6'(2 * pbytes);
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q     <= 1'b0;
      dir_q        <= DmaHbmToVmem;
      bf16_q       <= 1'b0;
      tail_q       <= '0;
      seg_left_q   <= '0;
      off_q        <= '0;
      seg_bytes_q  <= '0;
      mrow_q       <= '0;
      seg_addr_q   <= '0;
      stride_q     <= '0;
      tag_busy_q   <= '0;
      next_tag_q   <= '0;
      pend_valid_q <= 1'b0;
      pend_addr_q  <= '0;
      pend_next_q  <= '0;
      pend_row0_q  <= '0;
      pend_off0_q  <= '0;
      pend_cnt_q   <= '0;
      pend_last_q  <= '0;
      sreq_valid_q <= 1'b0;
      sreq_addr_q  <= '0;
      sreq_data_q  <= '0;
      wbuf_q       <= '0;
      unp_cnt_q    <= '0;
      unp_row_q    <= '0;
      unp_off_q    <= '0;
      unp_data_q   <= '0;
      unp_last_q   <= '0;
      for (int unsigned t = 0; t < NumTags; t++) tag_tab_q[t] <= '0;
    end else begin
      active_q     <= active_d;
      dir_q        <= dir_d;
      bf16_q       <= bf16_d;
      tail_q       <= tail_d;
      seg_left_q   <= seg_left_d;
      off_q        <= off_d;
      seg_bytes_q  <= seg_bytes_d;
      mrow_q       <= mrow_d;
      seg_addr_q   <= seg_addr_d;
      stride_q     <= stride_d;
      tag_busy_q   <= tag_busy_d;
      next_tag_q   <= next_tag_d;
      pend_valid_q <= pend_valid_d;
      pend_addr_q  <= pend_addr_d;
      pend_next_q  <= pend_next_d;
      pend_row0_q  <= pend_row0_d;
      pend_off0_q  <= pend_off0_d;
      pend_cnt_q   <= pend_cnt_d;
      pend_last_q  <= pend_last_d;
      sreq_valid_q <= sreq_valid_d;
      sreq_addr_q  <= sreq_addr_d;
      sreq_data_q  <= sreq_data_d;
      wbuf_q       <= wbuf_d;
      unp_cnt_q    <= unp_cnt_d;
      unp_row_q    <= unp_row_d;
      unp_off_q    <= unp_off_d;
      unp_data_q   <= unp_data_d;
      unp_last_q   <= unp_last_d;
      for (int unsigned t = 0; t < NumTags; t++) tag_tab_q[t] <= tag_tab_d[t];
    end
  end

  // Assertions
  ReqValidHeld: assert property (@(posedge clk_i) disable iff (!rst_ni)
      req_valid_o && !req_ready_i |=> req_valid_o);
  ReqPayloadStable: assert property (@(posedge clk_i) disable iff (!rst_ni)
      req_valid_o && !req_ready_i |=> $stable(req_o));
  ReqAligned: assert property (@(posedge clk_i) disable iff (!rst_ni)
      req_valid_o |-> req_o.addr[5:0] == 6'b0);
  RspTagOutstanding: assert property (@(posedge clk_i) disable iff (!rst_ni)
      rsp_valid_i |-> rsp_i.tag[7:TagW] == '0 && tag_busy_q[rsp_tag]);
  RspKindMatches: assert property (@(posedge clk_i) disable iff (!rst_ni)
      rsp_valid_i |-> rsp_i.write == !is_read);
  StartWhenIdle: assert property (@(posedge clk_i) disable iff (!rst_ni)
      start_i |-> !active_q);
  PieceAligned: assert property (@(posedge clk_i) disable iff (!rst_ni)
      walker_has |-> (pa & (pbytes - 32'd1)) == '0);

endmodule
