// tpu_dma: the DMA engine: 2D strided copies between HBM and the on-chip memories.
//
// A command names an HBM region of `rows` segments of `seg_bytes` bytes, segment i at
// hbm_addr + i * stride, and a run of consecutive on-chip rows from mem_row. The bytes of the
// region, in order, are the on-chip rows in order: each row is one "piece" of Lanes elements,
// 2 bytes each (bf16: lane bits [15:0], upper bits zero on the way in, dropped on the way out;
// with hi_i, on the way out, bits [31:16] instead: the upper bf16 of a packed pair) or
// 4 bytes (f32). The sequencer checks every rule before start_i (docs/isa.md): pieces aligned,
// seg_bytes a multiple of the piece, and for writes to HBM whole 64-byte bursts.
// Two HBM lanes: a burst goes out on lane (address bit 6), i.e. even bursts on request port 0
// and odd bursts on port 1, so consecutive bursts of a stream go out side by side, to different
// channels under the default address map, and the requests for one burst address always take one
// port (in order). Each lane has its own request register and its own half of the tags (tag
// bit 0 = lane). Responses come back on either response port.
//   HBM -> VMEM: pieces that are contiguous within one 64-byte burst share one read request.
//     Responses come back out of order; a tag table maps each to its rows. A response's first
//     pieces are written in the cycle it is taken (two write ports: two one-piece responses, or
//     two pieces of one), further pieces two per cycle. With tail_i != 0,
//     the last piece of every segment keeps only its first tail_i lanes: the others are written
//     as -0 (bf16 0x8000, f32 0x80000000), the neutral padding of a K tile (docs/isa.md), so an
//     edge tile is padded on chip whatever the bytes beyond the matrix's columns hold.
//   VMEM/AMEM -> HBM: up to two rows read per cycle (two read ports) are packed into bursts; a
//     full burst is sent as a write request on its lane; the command completes when every write
//     is acknowledged.
// Overlap: a command whose requests have all gone out drains its responses while the next one
// starts walking: a read beside reads always; otherwise (a write, or a read beside a write) only
// when its HBM bytes (the range covering its segments) meet none of the bytes of a command in
// flight where either is a write, so no HBM access overtakes an earlier one to the same bytes.
// Up to InFlight commands in flight (the walking one and the older ones draining), completing
// oldest first (done_o pulses once per command, in order), so short commands each pay the HBM
// latency side by side, not one after the other. Every response carries its own command's
// generation and format (bf16, tail) in its tag entry.
// Throughput: two on-chip rows per cycle when they lie in one segment (else one), in one burst
// or two: up to two bursts (128 B) per cycle when a row is a whole burst (f32 rows of 16 lanes),
// else two rows' bytes per cycle (bf16 rows of 16 lanes: 64 B/cycle). NumTags requests in flight
// (the chip uses 128, 64 per lane: at one burst per cycle a lane, 32 did not cover a row miss
// plus queueing). Handshakes: valid/ready to the HBM controller (payload held while waiting);
// start_i is taken when ready_o is high (idle, or the overlap above: ready_o then depends on
// dir_i); done_o pulses for one cycle when a command has completed (all data in memory, or all
// writes acknowledged and so visible in HBM).
// Indexed (idx_i, the DMA_IDX command): segment j is the table row list[j] at hbm_addr_i +
// list[j] * stride_i (stride_i = seg_bytes_i), where list[j] is the int32 in lane j % Lanes of
// VMEM row idx_row_i + j / Lanes, read on read port 1: a gather (HBM -> VMEM) or a scatter
// (VMEM -> HBM) by an id list. The first id is read in the cycle after start (one cycle per
// command), each next one in the cycle its segment's last piece is taken (no cycle lost between
// rows); a scatter takes one row a cycle (port 1 reads the list). An id outside
// 0..vrows_i-1 stops the walk there (rows before it are moved, none after) and pulses
// `idx_err_o` with its position in the list on `idx_pos_o` (`idx_which_o`: the command, 0 the
// oldest in flight), for the sequencer's ErrIdxRange. The overlap check takes the whole table
// (vrows_i rows) as the command's HBM bytes. Without idx_i nothing of the above applies: the
// plain DMA's requests and cycles are as before.
// ECC: a read response with an uncorrectable word (rsp_i.ue, tpu_hbm_ctrl) is still written (the
// data as read), and `ecc_err_o` pulses with `ecc_addr_o`, the byte address of its first such
// word, so that the sequencer stops the program with ErrHbmUncorr naming this DMA:
// `ecc_which_o` says which of the commands in flight the word belongs to (0: the oldest).
`include "tpu_assert.svh"

module tpu_dma
  import tpu_hbm_pkg::*;
  import tpu_chip_pkg::*;
#(
  parameter int unsigned Lanes   = 8,
  parameter int unsigned NumTags = 32,
  parameter int unsigned MemAddrW = 16,
  parameter int unsigned InFlight = 4,  // commands in flight at most (a power of two)
  localparam int unsigned RowW   = Lanes * 32,
  localparam int unsigned TagW   = $clog2(NumTags),
  localparam int unsigned GenW   = (InFlight > 1) ? $clog2(InFlight) : 1
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  // command
  input  logic                start_i,
  output logic                ready_o,
  input  dma_dir_e            dir_i,
  input  logic                bf16_i,
  input  logic                hi_i,      // VMEM/AMEM -> HBM bf16: lane bits [31:16]
  input  logic [7:0]          tail_i,
  input  logic [15:0]         mem_row_i,
  input  logic [15:0]         rows_i,
  input  logic [15:0]         seg_bytes_i,
  input  logic [31:0]         hbm_addr_i,
  input  logic [31:0]         stride_i,
  input  logic                idx_i,     // indexed (DMA_IDX): segment j at list[j] * stride_i
  input  logic [15:0]         idx_row_i, // the list's first VMEM row
  input  logic [15:0]         vrows_i,   // table rows: ids 0..vrows_i-1
  output logic                done_o,
  output logic                busy_o,
  output logic                ecc_err_o,
  output logic [31:0]         ecc_addr_o,
  output logic [GenW-1:0]     ecc_which_o,   // the error's command: 0 the oldest in flight
  output logic                idx_err_o,     // an id out of range (the walking command)
  output logic [15:0]         idx_pos_o,     // its position in the list
  output logic [GenW-1:0]     idx_which_o,   // that command: 0 the oldest in flight
  // The list rows a walking DMA_IDX has still to read, [list_lo_o, list_hi_o) (empty: lo = hi),
  // for the chip's check that no unit writes them meanwhile.
  output logic [15:0]         list_lo_o,
  output logic [15:0]         list_hi_o,
  // HBM controller ports (two lanes: even bursts on 0, odd bursts on 1)
  output logic     [1:0]      req_valid_o,
  input  logic     [1:0]      req_ready_i,
  output hbm_req_t [1:0]      req_o,
  input  logic     [1:0]      rsp_valid_i,
  output logic     [1:0]      rsp_ready_o,
  input  hbm_rsp_t [1:0]      rsp_i,
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
  localparam int unsigned LaneTagW = TagW - 1;  // tags per lane: NumTags / 2

  typedef struct packed {
    logic [15:0] row0;  // first on-chip row of the response
    logic [5:0]  off0;  // byte offset of its piece in the burst
    logic [6:0]  cnt;   // pieces in the burst
    logic [MaxPieces-1:0] last;  // piece i is the last of its segment (tail fill applies)
    logic [31-HBM_OFFSET_W:0] blk;  // the burst's address / 64 (for ECC error reports)
    logic [GenW-1:0] gen;  // the command it belongs to (gen_q when it was sent)
    logic        bf16;  // that command's element size and tail fill
    logic [7:0]  tail;
  } tag_ent_t;

  // A read request being built (pieces merged while contiguous in its burst) or waiting to go.
  typedef struct packed {
    logic [31:0] addr;  // the burst's address
    logic [31:0] next;  // byte address right after its last piece
    logic [15:0] row0;
    logic [5:0]  off0;
    logic [6:0]  cnt;
    logic [MaxPieces-1:0] last;
  } pend_t;

  // ---- Command registers and the walker over the HBM region ----
  // active_q: a command is walking (or draining, as the youngest); gen_q: its generation (counts
  // starts, mod InFlight); old_q: how many older commands still drain beside it (generations
  // gen_q - 1 down to gen_q - old_q).
  logic            active_q, active_d;
  logic [GenW-1:0] gen_q, gen_d, old_q, old_d, oldest;
  dma_dir_e    dir_q, dir_d;
  logic        bf16_q, bf16_d;
  logic        hi_q, hi_d;
  logic [7:0]  tail_q, tail_d;
  logic [15:0] seg_left_q, seg_left_d, off_q, off_d, seg_bytes_q, seg_bytes_d;
  logic [15:0] mrow_q, mrow_d;
  logic [31:0] seg_addr_q, seg_addr_d, stride_q, stride_d;
  // Indexed walk: the table's base, its rows, the list's row, the current id's position, and
  // need_id_q: the first id is still to be read (the cycle after start).
  logic        idx_q, idx_d, need_id_q, need_id_d;
  logic [31:0] base_q, base_d;
  logic [15:0] vrows_q, vrows_d, idx_row_q, idx_row_d, seg_i_q, seg_i_d;
  // The id at position id_pos (the current one while need_id_q, else the next), read on port 1.
  logic [15:0] id_pos;
  logic [31:0] id_val, id_addr;
  logic        id_ok;

  // The walker offers piece 0 at pa and, when the segment has another, piece 1 at pa1.
  logic [31:0] pbytes, pa, pa1;
  logic        walker_has, is_read, seg_end, seg_end1, has1, same1;
  logic        l0, l1;  // the lanes of the pieces' bursts
  logic        take1, take2;  // absorb piece 0 / pieces 0 and 1 this cycle

  assign pbytes     = bf16_q ? 32'(2 * Lanes) : 32'(4 * Lanes);
  assign pa         = seg_addr_q + 32'(off_q);
  assign pa1        = pa + pbytes;
  assign walker_has = active_q && (seg_left_q != '0) && !need_id_q;
  assign is_read    = (dir_q == DmaHbmToVmem);
  assign seg_end    = 32'(off_q) + pbytes >= 32'(seg_bytes_q);
  assign seg_end1   = 32'(off_q) + 2 * pbytes >= 32'(seg_bytes_q);
  assign has1       = walker_has && !seg_end;
  assign same1      = pa1[31:6] == pa[31:6];
  assign l0         = pa[6];
  assign l1         = pa1[6];

  // ---- Tags: lane l uses the tags with bit 0 = l, in turn ----
  logic [NumTags-1:0]  tag_busy_q, tag_busy_d;
  // Busy tags per generation (a request sent adds one to its command's, a response takes one
  // off the generation its tag entry names).
  logic [InFlight-1:0][TagW:0] gen_tags_q, gen_tags_d;
  tag_ent_t            tag_tab_q [NumTags];
  logic [1:0][LaneTagW-1:0] next_tag_q, next_tag_d;
  logic [1:0][TagW-1:0] lane_tag;
  logic [1:0]          tag_ok, send, slot_free;
  tag_ent_t [1:0]      new_ent;

  for (genvar l = 0; l < 2; l++) begin : gen_lane_tag
    assign lane_tag[l] = {next_tag_q[l], 1'(l)};
    assign tag_ok[l]   = !tag_busy_q[lane_tag[l]];
  end

  // ---- Read side: per lane, the request being built or waiting to be sent ----
  logic [1:0] pend_valid_q, pend_valid_d;
  pend_t [1:0] pend_q, pend_d;
  logic       merge0;  // piece 0 continues the request of its lane

  assign merge0 = pend_valid_q[l0] && walker_has && (pa == pend_q[l0].next) &&
                  (pa[31:6] == pend_q[l0].addr[31:6]);

  // ---- Write side: the burst being packed, and per lane the request waiting to be sent ----
  logic [1:0]        sreq_valid_q, sreq_valid_d;
  logic [1:0][31:0]  sreq_addr_q, sreq_addr_d;
  logic [1:0][BurstW-1:0] sreq_data_q, sreq_data_d;
  logic [BurstW-1:0] wbuf_q, wbuf_d;
  logic [1:0][BurstW-1:0] piece_out, piece_mask;
  logic [BurstW-1:0] wb_both, wb_first, wb_second;
  logic [1:0][RowW-1:0] src_row;
  logic              cpl0, cpl01, cpl1;  // the burst completes with piece 0 / with 0 and 1 / 1

  assign cpl0         = (32'(pa[5:0]) + pbytes) == 32'(HBM_BURST_BYTES);
  assign cpl01        = (32'(pa[5:0]) + 2 * pbytes) == 32'(HBM_BURST_BYTES);
  assign cpl1         = (32'(pa1[5:0]) + pbytes) == 32'(HBM_BURST_BYTES);
  assign rd_addr_o[0] = MemAddrW'(mrow_q);
  assign rd_addr_o[1] = idx_q ? MemAddrW'(idx_row_q + 16'(32'(id_pos) / Lanes))
                              : MemAddrW'(mrow_q + 16'd1);
  assign id_pos       = need_id_q ? seg_i_q : seg_i_q + 16'd1;
  assign id_val       = vmem_rd_data_i[1][32 * (32'(id_pos) % Lanes) +: 32];
  assign id_ok        = id_val < 32'(vrows_q);
  assign id_addr      = base_q + 32'(id_val[15:0]) * stride_q;
  assign src_row      = (dir_q == DmaAmemToHbm) ? amem_rd_data_i : vmem_rd_data_i;

  // Piece i (row mrow + i) placed at its offset in its burst.
  always_comb begin
    logic [BurstW-1:0] packed_row, lane_mask;
    for (int unsigned i = 0; i < 2; i++) begin
      packed_row = '0;
      lane_mask  = '0;
      for (int unsigned l = 0; l < Lanes; l++) begin
        if (bf16_q) begin
          packed_row[16*l +: 16] = hi_q ? src_row[i][32*l+16 +: 16] : src_row[i][32*l +: 16];
          lane_mask[16*l +: 16]  = '1;
        end else begin
          packed_row[32*l +: 32] = src_row[i][32*l +: 32];
          lane_mask[32*l +: 32]  = '1;
        end
      end
      piece_out[i]  = packed_row << ((i == 0 ? 32'(pa[5:0]) : 32'(pa1[5:0])) * 8);
      piece_mask[i] = lane_mask << ((i == 0 ? 32'(pa[5:0]) : 32'(pa1[5:0])) * 8);
    end
    wb_first  = (wbuf_q & ~piece_mask[0]) | (piece_out[0] & piece_mask[0]);
    wb_both   = (wb_first & ~piece_mask[1]) | (piece_out[1] & piece_mask[1]);
    wb_second = (wbuf_q & ~piece_mask[1]) | (piece_out[1] & piece_mask[1]);
  end

  // ---- Requests ----
  always_comb begin
    for (int unsigned l = 0; l < 2; l++) begin
      req_o[l]     = '0;
      req_o[l].tag = hbm_tag_t'(lane_tag[l]);  // bit 7 = 0: a DMA tag (the host's have bit 7 = 1)
      if (is_read) begin
        // A lane's request goes once the walker has moved past it (piece 0 does not continue it).
        req_valid_o[l] = pend_valid_q[l] && !(merge0 && l0 == 1'(l)) && tag_ok[l];
        req_o[l].write = 1'b0;
        req_o[l].addr  = pend_q[l].addr;
      end else begin
        req_valid_o[l] = sreq_valid_q[l] && tag_ok[l];
        req_o[l].write = 1'b1;
        req_o[l].addr  = sreq_addr_q[l];
        req_o[l].data  = sreq_data_q[l];
      end
      new_ent[l] = '{row0: pend_q[l].row0, off0: pend_q[l].off0, cnt: pend_q[l].cnt,
                     last: pend_q[l].last, blk: req_o[l].addr[31:HBM_OFFSET_W], gen: gen_q,
                     bf16: bf16_q, tail: tail_q};
    end
  end
  assign send = req_valid_o & req_ready_i;

  // How many pieces the walker hands over this cycle: a piece that starts a burst needs its
  // lane's register free (or sending now); a piece of a burst already begun follows it.
  always_comb begin
    for (int unsigned l = 0; l < 2; l++)
      slot_free[l] = is_read ? (!pend_valid_q[l] || send[l]) : (!sreq_valid_q[l] || send[l]);
    if (is_read) begin
      take1 = walker_has && (merge0 || slot_free[l0]);
      take2 = take1 && has1 && (same1 || slot_free[l1]);
    end else begin
      take1 = walker_has && (!cpl0 || slot_free[l0]);
      take2 = walker_has && has1 && !idx_q &&
              (same1 ? (!cpl01 || slot_free[l0]) : (slot_free[l0] && (!cpl1 || slot_free[l1])));
    end
  end

  // ---- Responses and the unpack stage ----
  // Two write ports. A response's pieces are written two per cycle; the first response taken
  // writes on port 0 (and 1), a second one-piece-or-more response taken in the same cycle (only
  // when the first has one piece) on port 1; what is left of the last one taken waits in the
  // unpack stage, which holds off new responses until it is empty.
  logic              unp_busy;
  logic [6:0]        unp_cnt_q, unp_cnt_d;
  logic [15:0]       unp_row_q, unp_row_d;
  logic [5:0]        unp_off_q, unp_off_d;
  logic [BurstW-1:0] unp_data_q, unp_data_d;
  logic [MaxPieces-1:0] unp_last_q, unp_last_d;
  logic [GenW-1:0]   unp_gen_q, unp_gen_d;
  logic              unp_bf16_q, unp_bf16_d;
  logic [7:0]        unp_tail_q, unp_tail_d;
  logic [1:0]        rsp_fire, rsp_rd;
  tag_ent_t [1:0]    rsp_ent;
  logic [1:0][TagW-1:0] rsp_tag;
  logic              both;  // two read responses taken this cycle
  logic              lr;    // the response whose rest goes into the unpack stage
  logic [1:0][BurstW-1:0] w_src;
  logic [1:0][5:0]   w_off;
  logic [1:0]        w_last, w_en, w_bf16;
  logic [1:0][7:0]   w_tail;
  logic [1:0][15:0]  w_row;
  logic [1:0][5:0]   rsp_pb;  // a response's piece bytes (its command's element size)
  logic [5:0]        unp_pb;

  assign unp_busy = unp_cnt_q != '0;
  for (genvar p = 0; p < 2; p++) begin : gen_rsp
    assign rsp_tag[p] = rsp_i[p].tag[TagW-1:0];
    assign rsp_ent[p] = tag_tab_q[rsp_tag[p]];
    assign rsp_rd[p]  = rsp_fire[p] && !rsp_i[p].write;
    assign rsp_pb[p]  = rsp_ent[p].bf16 ? 6'(2 * Lanes) : 6'(4 * Lanes);
  end
  assign unp_pb = unp_bf16_q ? 6'(2 * Lanes) : 6'(4 * Lanes);
  // Port 1 only alongside a port-0 read response of one piece (or an acknowledge, or none).
  assign rsp_ready_o[0] = !unp_busy;
  assign rsp_ready_o[1] = !unp_busy &&
                          (!rsp_valid_i[0] || rsp_i[0].write || rsp_ent[0].cnt == 7'd1);
  assign rsp_fire = rsp_valid_i & rsp_ready_o;
  assign both     = rsp_rd[0] && rsp_rd[1];
  assign lr       = rsp_rd[1];

  // The rows written this cycle.
  always_comb begin
    logic [BurstW-1:0] sh;
    w_en   = '0;
    w_row  = {unp_row_q + 16'd1, unp_row_q};
    w_src  = {unp_data_q, unp_data_q};
    w_off  = {unp_off_q + unp_pb, unp_off_q};
    w_last = 2'(unp_last_q);
    w_bf16 = {unp_bf16_q, unp_bf16_q};
    w_tail = {unp_tail_q, unp_tail_q};
    if (unp_busy) begin
      w_en = {unp_cnt_q > 7'd1, 1'b1};
    end else if (both) begin
      w_en   = 2'b11;
      w_row  = {rsp_ent[1].row0, rsp_ent[0].row0};
      w_src  = {rsp_i[1].data, rsp_i[0].data};
      w_off  = {rsp_ent[1].off0, rsp_ent[0].off0};
      w_last = {rsp_ent[1].last[0], rsp_ent[0].last[0]};
      w_bf16 = {rsp_ent[1].bf16, rsp_ent[0].bf16};
      w_tail = {rsp_ent[1].tail, rsp_ent[0].tail};
    end else if (rsp_rd[0] || rsp_rd[1]) begin
      w_en   = {rsp_ent[lr].cnt > 7'd1, 1'b1};
      w_row  = {rsp_ent[lr].row0 + 16'd1, rsp_ent[lr].row0};
      w_src  = {rsp_i[lr].data, rsp_i[lr].data};
      w_off  = {rsp_ent[lr].off0 + rsp_pb[lr], rsp_ent[lr].off0};
      w_last = 2'(rsp_ent[lr].last);
      w_bf16 = {rsp_ent[lr].bf16, rsp_ent[lr].bf16};
      w_tail = {rsp_ent[lr].tail, rsp_ent[lr].tail};
    end
    wr_data_o = '0;
    for (int unsigned i = 0; i < 2; i++) begin
      vmem_we_o[i] = w_en[i];
      wr_addr_o[i] = MemAddrW'(w_row[i]);
      sh = w_src[i] >> (32'(w_off[i]) * 8);
      for (int unsigned l = 0; l < Lanes; l++) begin
        if (w_last[i] && w_tail[i] != '0 && l >= 32'(w_tail[i]))
          wr_data_o[i][32*l +: 32] = w_bf16[i] ? 32'h0000_8000 : 32'h8000_0000;
        else if (w_bf16[i]) wr_data_o[i][32*l +: 32] = {16'h0000, sh[16*l +: 16]};
        else             wr_data_o[i][32*l +: 32] = sh[32*l +: 32];
      end
    end
  end

  // ---- ECC errors of read responses (the first port's, when both have one) ----
  always_comb begin
    logic [2:0] w;
    logic       p;
    p = !(rsp_rd[0] && rsp_i[0].ue != '0);
    w = '0;
    for (int i = HBM_BURST_WORDS - 1; i >= 0; i--) if (rsp_i[p].ue[i]) w = 3'(i);
    ecc_err_o  = (rsp_rd[0] && rsp_i[0].ue != '0) || (rsp_rd[1] && rsp_i[1].ue != '0);
    ecc_addr_o = {rsp_ent[p].blk, HBM_OFFSET_W'(0)} | 32'({w, 3'b000});
    ecc_which_o = rsp_ent[p].gen - oldest;
  end

  // Completion per generation: none of its tags busy and nothing of it in the unpack stage. The
  // oldest command completes first; the walking one only when it is the only one.
  logic            walked, cur_done, old_done, can_follow;
  logic [InFlight-1:0] gen_busy;
  assign walked = active_q && !walker_has && !need_id_q && (pend_valid_q == '0) &&
                  (sreq_valid_q == '0);
  assign oldest = gen_q - old_q;
  always_comb begin
    for (int unsigned g = 0; g < InFlight; g++) gen_busy[g] = gen_tags_q[g] != '0;
    if (unp_busy) gen_busy[unp_gen_q] = 1'b1;
  end
  assign old_done = (old_q != '0) && !gen_busy[oldest];
  assign cur_done = walked && (old_q == '0) && !gen_busy[gen_q];
  // A command whose requests have all gone out lets the next one start beside it, unless the
  // new one's HBM bytes (the range covering its segments) meet those of a command in flight where
  // either is a write: reads beside reads always, anything else only on other bytes, so no access
  // overtakes an earlier one to the same bytes.
  logic            new_is_read, clash;
  logic [31:0]     new_lo, new_hi;
  logic [InFlight-1:0][31:0] hbm_lo_q, hbm_hi_q;  // per generation: its HBM bytes [lo, hi)
  logic [InFlight-1:0] gen_wr_q;                  // per generation: a write
  assign new_is_read = dir_i == DmaHbmToVmem;
  assign new_lo = hbm_addr_i;
  assign new_hi = hbm_addr_i + ((idx_i ? 32'(vrows_i) : 32'(rows_i)) - 32'd1) * stride_i +
                  32'(seg_bytes_i);
  always_comb begin
    clash = 1'b0;
    for (int unsigned k = 0; k < InFlight; k++)
      if (32'(k) <= 32'(old_q)) begin
        logic [GenW-1:0] g;
        g = gen_q - GenW'(k);
        clash |= (gen_wr_q[g] || !new_is_read) && new_lo < hbm_hi_q[g] && hbm_lo_q[g] < new_hi;
      end
  end
  assign can_follow = walked && (32'(old_q) < InFlight - 1) && !cur_done && !clash;
  assign done_o  = old_done || cur_done;
  assign idx_pos_o   = id_pos;
  assign idx_which_o = old_q;  // the walking command is the youngest
  always_comb begin
    list_lo_o = '0;
    list_hi_o = '0;
    if (active_q && idx_q && seg_left_q != '0) begin
      list_lo_o = idx_row_q + 16'(32'(seg_i_q) / Lanes);
      list_hi_o = idx_row_q + 16'((32'(seg_i_q) + 32'(seg_left_q) - 1) / Lanes) + 16'd1;
    end
  end
  assign ready_o = !active_q || can_follow;
  assign busy_o  = active_q;

  // ---- Next state ----
  always_comb begin
    logic [15:0] n_after;
    n_after      = '0;
    active_d     = active_q;
    gen_d        = gen_q;
    old_d        = old_q;
    dir_d        = dir_q;
    bf16_d       = bf16_q;
    hi_d         = hi_q;
    tail_d       = tail_q;
    seg_left_d   = seg_left_q;
    off_d        = off_q;
    seg_bytes_d  = seg_bytes_q;
    mrow_d       = mrow_q;
    seg_addr_d   = seg_addr_q;
    stride_d     = stride_q;
    idx_d        = idx_q;
    need_id_d    = need_id_q;
    base_d       = base_q;
    vrows_d      = vrows_q;
    idx_row_d    = idx_row_q;
    seg_i_d      = seg_i_q;
    idx_err_o    = 1'b0;
    tag_busy_d   = tag_busy_q;
    gen_tags_d   = gen_tags_q;
    next_tag_d   = next_tag_q;
    pend_valid_d = pend_valid_q;
    pend_d       = pend_q;
    sreq_valid_d = sreq_valid_q;
    sreq_addr_d  = sreq_addr_q;
    sreq_data_d  = sreq_data_q;
    wbuf_d       = wbuf_q;
    unp_cnt_d    = unp_cnt_q;
    unp_row_d    = unp_row_q;
    unp_off_d    = unp_off_q;
    unp_data_d   = unp_data_q;
    unp_last_d   = unp_last_q;
    unp_gen_d    = unp_gen_q;
    unp_bf16_d   = unp_bf16_q;
    unp_tail_d   = unp_tail_q;

    if (old_done) old_d = old_q - 1'b1;
    if (cur_done) active_d = 1'b0;
    if (start_i && ready_o) begin
      if (active_q) old_d = old_d + 1'b1;  // can_follow: the walked one drains beside the new one
      gen_d       = gen_q + 1'b1;
      active_d    = 1'b1;
      dir_d       = dir_i;
      bf16_d      = bf16_i;
      hi_d        = hi_i;
      tail_d      = tail_i;
      seg_left_d  = rows_i;
      off_d       = '0;
      seg_bytes_d = seg_bytes_i;
      mrow_d      = mem_row_i;
      seg_addr_d  = hbm_addr_i;
      stride_d    = stride_i;
      idx_d       = idx_i;
      need_id_d   = idx_i;
      base_d      = hbm_addr_i;
      vrows_d     = vrows_i;
      idx_row_d   = idx_row_i;
      seg_i_d     = '0;
    end

    // indexed: the first id, read the cycle after start (the walker waits for it)
    if (active_q && need_id_q) begin
      need_id_d  = 1'b0;
      seg_addr_d = id_addr;
      if (!id_ok) begin
        idx_err_o  = 1'b1;
        seg_left_d = '0;
      end
    end

    // requests sent
    for (int unsigned l = 0; l < 2; l++) begin
      if (send[l]) begin
        tag_busy_d[lane_tag[l]] = 1'b1;
        gen_tags_d[gen_q] = gen_tags_d[gen_q] + 1'b1;
        next_tag_d[l] = next_tag_q[l] + 1'b1;
        if (is_read) pend_valid_d[l] = 1'b0;
        else         sreq_valid_d[l] = 1'b0;
      end
    end

    // the walker hands over piece 0, or pieces 0 and 1
    if (take1) begin
      if (is_read) begin
        if (merge0) begin
          pend_d[l0].cnt  = pend_q[l0].cnt + 7'd1;
          pend_d[l0].last = pend_q[l0].last | (MaxPieces'(seg_end) << pend_q[l0].cnt);
        end else begin
          pend_valid_d[l0] = 1'b1;
          pend_d[l0] = '{addr: {pa[31:6], 6'b0}, next: '0, row0: mrow_q, off0: pa[5:0],
                         cnt: 7'd1, last: MaxPieces'(seg_end)};
        end
        pend_d[l0].next = pa1;
        if (take2) begin
          if (same1) begin
            pend_d[l0].last = pend_d[l0].last | (MaxPieces'(seg_end1) << pend_d[l0].cnt);
            pend_d[l0].cnt  = pend_d[l0].cnt + 7'd1;
            pend_d[l0].next = pa1 + pbytes;
          end else begin
            pend_valid_d[l1] = 1'b1;
            pend_d[l1] = '{addr: {pa1[31:6], 6'b0}, next: pa1 + pbytes, row0: mrow_q + 16'd1,
                           off0: pa1[5:0], cnt: 7'd1, last: MaxPieces'(seg_end1)};
          end
        end
      end else begin
        if (take2 && !same1) begin
          // piece 0 completes its burst, piece 1 starts the next one
          sreq_valid_d[l0] = 1'b1;
          sreq_addr_d[l0]  = {pa[31:6], 6'b0};
          sreq_data_d[l0]  = wb_first;
          wbuf_d = wb_second;
          if (cpl1) begin
            sreq_valid_d[l1] = 1'b1;
            sreq_addr_d[l1]  = {pa1[31:6], 6'b0};
            sreq_data_d[l1]  = wb_second;
          end
        end else begin
          wbuf_d = take2 ? wb_both : wb_first;
          if (take2 ? cpl01 : cpl0) begin
            sreq_valid_d[l0] = 1'b1;
            sreq_addr_d[l0]  = {pa[31:6], 6'b0};
            sreq_data_d[l0]  = take2 ? wb_both : wb_first;
          end
        end
      end
      n_after = off_q + 16'(take2 ? 2 * pbytes : pbytes);
      mrow_d = mrow_q + (take2 ? 16'd2 : 16'd1);
      if (take2 ? seg_end1 : seg_end) begin
        off_d      = '0;
        seg_addr_d = seg_addr_q + stride_q;
        seg_left_d = seg_left_q - 1'b1;
        if (idx_q) begin  // the next segment is the table row of the next id
          seg_addr_d = id_addr;
          seg_i_d    = seg_i_q + 16'd1;
          if (seg_left_q != 16'd1 && !id_ok) begin
            idx_err_o  = 1'b1;
            seg_left_d = '0;
          end
        end
      end else begin
        off_d = n_after;
      end
    end

    // responses
    for (int unsigned p = 0; p < 2; p++)
      if (rsp_fire[p]) begin
        tag_busy_d[rsp_tag[p]] = 1'b0;
        gen_tags_d[rsp_ent[p].gen] = gen_tags_d[rsp_ent[p].gen] - 1'b1;
      end
    if (unp_busy) begin
      unp_cnt_d  = (unp_cnt_q > 7'd2) ? unp_cnt_q - 7'd2 : '0;
      unp_last_d = unp_last_q >> 2;
      unp_row_d  = unp_row_q + 16'd2;
      unp_off_d  = unp_off_q + 6'(2 * unp_pb);
    end else if (both) begin
      // port 0's one piece and port 1's first are written; port 1's rest waits
      if (rsp_ent[1].cnt > 7'd1) begin
        unp_cnt_d  = rsp_ent[1].cnt - 7'd1;
        unp_row_d  = rsp_ent[1].row0 + 16'd1;
        unp_off_d  = rsp_ent[1].off0 + rsp_pb[1];
        unp_data_d = rsp_i[1].data;
        unp_last_d = rsp_ent[1].last >> 1;
        unp_gen_d  = rsp_ent[1].gen;
        unp_bf16_d = rsp_ent[1].bf16;
        unp_tail_d = rsp_ent[1].tail;
      end
    end else if ((rsp_rd[0] || rsp_rd[1]) && rsp_ent[lr].cnt > 7'd2) begin
      unp_cnt_d  = rsp_ent[lr].cnt - 7'd2;
      unp_row_d  = rsp_ent[lr].row0 + 16'd2;
      unp_off_d  = rsp_ent[lr].off0 + 6'(2 * rsp_pb[lr]);
      unp_data_d = rsp_i[lr].data;
      unp_last_d = rsp_ent[lr].last >> 2;
      unp_gen_d  = rsp_ent[lr].gen;
      unp_bf16_d = rsp_ent[lr].bf16;
      unp_tail_d = rsp_ent[lr].tail;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q     <= 1'b0;
      gen_q        <= '0;
      old_q        <= '0;
      dir_q        <= DmaHbmToVmem;
      bf16_q       <= 1'b0;
      hi_q         <= 1'b0;
      tail_q       <= '0;
      seg_left_q   <= '0;
      off_q        <= '0;
      seg_bytes_q  <= '0;
      mrow_q       <= '0;
      seg_addr_q   <= '0;
      stride_q     <= '0;
      idx_q        <= 1'b0;
      need_id_q    <= 1'b0;
      base_q       <= '0;
      vrows_q      <= '0;
      idx_row_q    <= '0;
      seg_i_q      <= '0;
      tag_busy_q   <= '0;
      gen_tags_q   <= '0;
      next_tag_q   <= '0;
      pend_valid_q <= '0;
      pend_q       <= '0;
      sreq_valid_q <= '0;
      sreq_addr_q  <= '0;
      sreq_data_q  <= '0;
      wbuf_q       <= '0;
      unp_cnt_q    <= '0;
      unp_row_q    <= '0;
      unp_off_q    <= '0;
      unp_data_q   <= '0;
      unp_last_q   <= '0;
      unp_gen_q    <= '0;
      unp_bf16_q   <= 1'b0;
      unp_tail_q   <= '0;
    end else begin
      active_q     <= active_d;
      gen_q        <= gen_d;
      old_q        <= old_d;
      dir_q        <= dir_d;
      bf16_q       <= bf16_d;
      hi_q         <= hi_d;
      tail_q       <= tail_d;
      seg_left_q   <= seg_left_d;
      off_q        <= off_d;
      seg_bytes_q  <= seg_bytes_d;
      mrow_q       <= mrow_d;
      seg_addr_q   <= seg_addr_d;
      stride_q     <= stride_d;
      idx_q        <= idx_d;
      need_id_q    <= need_id_d;
      base_q       <= base_d;
      vrows_q      <= vrows_d;
      idx_row_q    <= idx_row_d;
      seg_i_q      <= seg_i_d;
      tag_busy_q   <= tag_busy_d;
      gen_tags_q   <= gen_tags_d;
      next_tag_q   <= next_tag_d;
      pend_valid_q <= pend_valid_d;
      pend_q       <= pend_d;
      sreq_valid_q <= sreq_valid_d;
      sreq_addr_q  <= sreq_addr_d;
      sreq_data_q  <= sreq_data_d;
      wbuf_q       <= wbuf_d;
      unp_cnt_q    <= unp_cnt_d;
      unp_row_q    <= unp_row_d;
      unp_off_q    <= unp_off_d;
      unp_data_q   <= unp_data_d;
      unp_last_q   <= unp_last_d;
      unp_gen_q    <= unp_gen_d;
      unp_bf16_q   <= unp_bf16_d;
      unp_tail_q   <= unp_tail_d;
    end
  end

  // The HBM bytes and kind of each command in flight (for the check above).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      hbm_lo_q <= '0;
      hbm_hi_q <= '0;
      gen_wr_q <= '0;
    end else if (start_i && ready_o) begin
      hbm_lo_q[gen_d] <= new_lo;
      hbm_hi_q[gen_d] <= new_hi;
      gen_wr_q[gen_d] <= !new_is_read;
    end
  end

  // The tag table: a memory written when a lane sends (an entry is read only while its tag is
  // busy, so it needs no reset; two lanes write two different entries).
  always_ff @(posedge clk_i) begin
    for (int unsigned l = 0; l < 2; l++)
      if (send[l]) tag_tab_q[lane_tag[l]] <= new_ent[l];
  end

  // Assertions
  for (genvar l = 0; l < 2; l++) begin : gen_sva
    `TPU_ASSERT(ReqValidHeld_A,
        req_valid_o[l] && !req_ready_i[l] |=> req_valid_o[l],
        ("%m: ReqValidHeld_A failed"))
    // Payload stable while it waits: immediate at the edge against a copy taken only while a
    // request waits (a concurrent $stable sampled the whole request at every eval()).
    logic req_wait_q;
    hbm_req_t req_held_q;
    always_ff @(posedge clk_i) begin
      if (rst_ni && req_wait_q) begin
        `TPU_ASSERT_I(ReqPayloadStable_A, req_o[l] == req_held_q,
            ("tpu_dma: ReqPayloadStable_A failed: lane %0d's request changed while not ready", l))
      end
      req_wait_q <= req_valid_o[l] && !req_ready_i[l];
      if (req_valid_o[l] && !req_ready_i[l]) req_held_q <= req_o[l];
    end
    `TPU_ASSERT(ReqAligned_A,
        req_valid_o[l] |-> req_o[l].addr[5:0] == 6'b0,
        ("%m: ReqAligned_A failed"))
    // A burst goes out on the lane of its address bit 6 (one burst address, one port: ordered).
    `TPU_ASSERT(ReqLane_A,
        req_valid_o[l] |-> req_o[l].addr[6] == 1'(l),
        ("%m: ReqLane_A failed"))
    `TPU_ASSERT(RspTagOutstanding_A,
        rsp_valid_i[l] |-> rsp_i[l].tag[7:TagW] == '0 && tag_busy_q[rsp_tag[l]],
        ("%m: RspTagOutstanding_A failed"))
    `TPU_ASSERT(RspKindMatches_A,
        rsp_valid_i[l] |-> rsp_i[l].write == gen_wr_q[rsp_ent[l].gen],
        ("%m: RspKindMatches_A failed"))
    `TPU_ASSERT(RspCountedInItsGeneration_A,
        rsp_fire[l] |-> gen_tags_q[rsp_ent[l].gen] != '0,
        ("%m: RspCountedInItsGeneration_A failed"))
  end
  `TPU_ASSERT(RspTagsDistinct_A,
      rsp_valid_i[0] && rsp_valid_i[1] |-> rsp_tag[0] != rsp_tag[1],
      ("%m: RspTagsDistinct_A failed"))
  // At most two rows a cycle reach the two write ports: never a response's piece dropped.
  `TPU_ASSERT(RspFitsPorts_A,
      both |-> rsp_ent[0].cnt == 7'd1,
      ("%m: RspFitsPorts_A failed"))
  // A command starts on an idle engine, or beside walked ones whose bytes it may not disturb.
  `TPU_ASSERT(StartWhenReady_A,
      start_i |-> !active_q || (can_follow && !clash),
      ("%m: StartWhenReady_A failed"))
  `TPU_ASSERT(OverlapNeedsAWalker_A,
      old_q != '0 |-> active_q,
      ("%m: OverlapNeedsAWalker_A failed"))
  `TPU_ASSERT_INIT(InFlightPowerOfTwo_A, InFlight >= 1 && (InFlight & (InFlight - 1)) == 0,
      ("tpu_dma: InFlight must be a power of two, not %0d", InFlight))
  // One completion a cycle: the walking command never completes beside the older one.
  `TPU_ASSERT(OneDoneACycle_A,
      !(old_done && cur_done),
      ("%m: OneDoneACycle_A failed"))
  // Indexed: every segment walked is a row of the table (ids are checked before they are used),
  // the list is read only at positions 0..rows-1, and a command's first id is read before its
  // walk starts.
  `TPU_ASSERT(IdxSegInTable_A,
      walker_has && idx_q |->
          seg_addr_q >= base_q && 64'(32'(seg_addr_q - base_q)) < 64'(vrows_q) * 64'(stride_q),
      ("%m: IdxSegInTable_A failed: segment at %0h, table %0h, %0d rows",
       seg_addr_q, base_q, vrows_q))
  `TPU_ASSERT(IdxErrOnlyIndexed_A,
      idx_err_o |-> idx_q && active_q,
      ("%m: IdxErrOnlyIndexed_A failed"))
  `TPU_ASSERT(IdxFirstBeforeWalk_A,
      start_i && ready_o && idx_i |=> need_id_q && !walker_has,
      ("%m: IdxFirstBeforeWalk_A failed"))
  `TPU_ASSERT(PieceAligned_A,
      walker_has |-> (pa & (pbytes - 32'd1)) == '0,
      ("%m: PieceAligned_A failed"))

endmodule
