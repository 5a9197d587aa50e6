// tpu_seq: the sequencer: command queue, decode and checks, scoreboard, in-order issue.
//
// Commands (tpu_chip_pkg::chip_cmd_t, docs/isa.md) are pushed on cmd_valid_i/cmd_ready_o into a
// QueueDepth FIFO. The head is decoded into the memory row ranges it reads (up to two) and
// writes (one) and checked (opcode, fields, ranges against the memory rows the chip exposes
// (vmem_rows_i / amem_rows_i: all of them, or fewer on a scale model) and the HBM capacity,
// alignment, weight-tile balance: at most WBanks tiles loaded and not consumed). A failing
// command sets the sticky error code and err_cmd_o (its index, counting from 0 after reset or
// clear); from then on the queue is drained without issuing, so the host never blocks
// and nothing hangs. clear_i clears error and halt.
// A DMA that reads an uncorrectable HBM word (dma_ecc_err_i) sets ErrHbmUncorr the same way,
// with that DMA's own command index (kept per DMA scoreboard slot: dma_ecc_which_i counts from
// the oldest DMA, as the engine runs several reads at once) and the word's byte address
// on err_addr_o (zero for every other error). A DMA_IDX whose list holds an id outside its table
// (dma_idx_err_i) sets ErrIdxRange the same way, with the id's position in the list on err_addr_o.
// DMA_IDX is a DMA for the scoreboard (same slots, same engine); its ranges are its VMEM rows
// (written by a gather, read by a scatter) and its list's rows (read). An ICI link declared down (link_down_i) sets
// ErrIciLinkDown with the head's index and the link's direction on err_addr_o.
// A legal head issues to its unit when the unit can take it and its ranges do not overlap a
// range written by an in-flight command, nor write a range an in-flight command reads or writes
// (RAW, WAR, WAW on VMEM and AMEM); an ICI_SEND with wait_rows is not held by VPU commands (its
// counter orders its rows, docs/isa.md) and, unless wait_local (rows its VPU writes), holds its
// rows as a write range too, until they have all landed (ici_in_i: the engine's counter holds
// every row the send has still to take), not until the send is done. The scoreboard has DmaQ
// entries for DMAs (queued in front of the one engine, completing in order), one for LOADW,
// VpuQ for VPU commands (held by the unit, which may feed rows of a younger one ahead of an
// older one but completes them in order: the hazard check keeps their ranges apart), and
// MmSlots for MATMULs (in flight in the array, completing in order). HBM needs no tracking:
// the one DMA engine runs its commands in order and overlaps only reads with reads and writes
// with writes to other bytes (tpu_dma), so no access overtakes an earlier one to the same
// bytes. FENCE waits for an empty scoreboard; HALT too, then raises halted_o and stops
// issue. Issue rate: at most one command per cycle. Latency: a command at the head with no
// hazard issues in the cycle it reaches the head.
`include "tpu_assert.svh"

module tpu_seq
  import tpu_chip_pkg::*;
#(
  parameter int unsigned Lanes      = 8,
  parameter int unsigned VmemRows   = 1024,
  parameter int unsigned AmemRows   = 1024,
  parameter longint unsigned HbmBytes = 64'd4194304,
  parameter int unsigned QueueDepth = 16,
  parameter int unsigned MmSlots    = 8,   // MATMULs in flight (a power of two)
  parameter int unsigned WBanks     = 4,   // weight tiles the MXU holds (LOADWs ahead of MATMULs)
  parameter int unsigned DmaQ       = 4,   // DMAs issued ahead of the engine (a power of two)
  parameter int unsigned VpuQ       = 4,   // VPU commands in flight (a power of two, >= 2)
  parameter int unsigned NumCnt     = 64,
  parameter int unsigned NumEng     = 4,   // ICI send contexts
  parameter int unsigned IciQ       = 4,   // ICI sends in flight per context (a power of two)
  localparam int unsigned EngW      = (NumEng > 1) ? $clog2(NumEng) : 1,
  localparam int unsigned DmaW      = (DmaQ > 1) ? $clog2(DmaQ) : 1
) (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic       cmd_valid_i,
  output logic       cmd_ready_o,
  input  chip_cmd_t  cmd_i,
  input  logic       clear_i,
  // the head command, for the units to latch on their start pulse
  output chip_cmd_t  head_o,
  output logic       dma_start_o,
  input  logic       dma_ready_i,
  input  logic       dma_done_i,
  input  logic       dma_ecc_err_i,   // the running DMA read an uncorrectable HBM word
  input  logic [31:0] dma_ecc_addr_i,  // its byte address
  input  logic [DmaW-1:0] dma_ecc_which_i,  // the word's DMA: 0 the oldest in flight
  input  logic       dma_idx_err_i,   // the walking DMA_IDX read an id outside its table
  input  logic [15:0] dma_idx_pos_i,  // the id's position in the list
  input  logic [DmaW-1:0] dma_idx_which_i,  // that DMA: 0 the oldest in flight
  input  logic       link_down_i,     // an ICI link of this chip is down (tpu_ici_link_tx)
  input  logic [2:0] link_down_dir_i, // the lowest such direction (0..5: +X -X +Y -Y +Z -Z)
  output logic       lw_start_o,
  input  logic       lw_ready_i,
  input  logic       lw_done_i,
  output logic       mm_start_o,
  input  logic       mm_ready_i,
  input  logic       mm_done_i,
  output logic       vpu_start_o,
  input  logic       vpu_ready_i,
  input  logic       vpu_done_i,
  output logic       ici_start_o,
  input  logic       ici_ready_i,   // the send context of the head's destination is free
  input  logic [EngW-1:0] ici_eng_i,  // which context that is
  input  logic [NumEng-1:0] ici_done_i,
  input  logic [NumEng-1:0] ici_in_i,  // context e's oldest send (wait_rows) has all its rows
  input  logic       wait_ok_i,    // the ICI counter named by the head's ICI_WAIT is >= its value
  output logic       wait_take_o,  // the ICI_WAIT issues: take its value off the counter
  input  tpu_ici_pkg::ici_topo_t topo_i,  // pod shape, for ICI_SEND's destination check
  // The VMEM and AMEM rows the chip exposes, held after reset: every range check is against
  // them (0: all VmemRows / AmemRows; a scale model's smaller on-chip memory, docs/scale_models.md)
  input  logic [15:0] vmem_rows_i,
  input  logic [15:0] amem_rows_i,
  // status
  output logic       busy_o,
  output logic       halted_o,
  output chip_err_e  err_o,
  output logic [31:0] err_cmd_o,
  output logic [31:0] err_addr_o,
  output logic [3:0] retired_o,
  output logic       wait_block_o, // the head is an ICI_WAIT whose counter is not there yet
  // trace and statistics: the head issues this cycle; the head's command index (counting from
  // 0 after reset or clear); commands in flight per unit {ICI_SEND, VPU, MATMUL, LOADW, DMA}
  output logic       issue_o,
  output logic [31:0] cmd_idx_o,
  output logic [4:0] inflight_o
);

  // Scoreboard slots: a ring of DmaQ DMAs, LOADW, a ring of VpuQ VPU commands, a ring of IciQ
  // ICI sends per send context (they complete in order per context), the MATMUL ring.
  localparam int unsigned LwSlot   = DmaQ;
  localparam int unsigned VpuBase  = DmaQ + 1;
  localparam int unsigned IciBase  = VpuBase + VpuQ;
  localparam int unsigned MmBase   = IciBase + NumEng * IciQ;
  localparam int unsigned NumSlots = MmBase + MmSlots;
  localparam int unsigned IciQW    = (IciQ > 1) ? $clog2(IciQ) : 1;
  localparam int unsigned MmW      = $clog2(MmSlots);
  localparam int unsigned VpuW     = $clog2(VpuQ);
  localparam int unsigned SlotW    = $clog2(NumSlots);
  localparam int unsigned QCntW    = $clog2(QueueDepth + 1);
  localparam int unsigned WtW      = $clog2(WBanks + 1);

  // ---- Queue ----
  logic             q_pop, q_empty, q_full;
  logic [QCntW-1:0] q_count;
  chip_cmd_t        head;

  tpu_fifo #(
    .data_t(chip_cmd_t),
    .Depth (QueueDepth)
  ) i_queue (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (cmd_valid_i && !q_full),
    .data_i (cmd_i),
    .pop_i  (q_pop),
    .data_o (head),
    .empty_o(q_empty),
    .full_o (q_full),
    .count_o(q_count)
  );
  assign cmd_ready_o = !q_full;
  assign head_o      = head;

  // ---- State ----
  mem_range_t       sb_rd0_q [NumSlots];
  mem_range_t       sb_rd1_q [NumSlots];
  mem_range_t       sb_wr_q  [NumSlots];
  mem_range_t       sb_rd0_d [NumSlots];
  mem_range_t       sb_rd1_d [NumSlots];
  mem_range_t       sb_wr_d  [NumSlots];
  logic [NumSlots-1:0] sb_valid_q, sb_valid_d;
  logic [MmW-1:0]   mm_head_q, mm_head_d, mm_tail_q, mm_tail_d;
  logic [DmaW-1:0]  dma_head_q, dma_head_d, dma_tail_q, dma_tail_d;
  logic [VpuW-1:0]  vpu_head_q, vpu_head_d, vpu_tail_q, vpu_tail_d;
  logic [NumEng-1:0][IciQW-1:0] ici_head_q, ici_head_d, ici_tail_q, ici_tail_d;
  logic [WtW-1:0]   wt_pending_q, wt_pending_d;  // LOADWs issued ahead of their MATMULs
  logic             halted_q, halted_d;
  chip_err_e        err_q, err_d;
  logic [31:0]      err_cmd_q, err_cmd_d, cmd_idx_q, cmd_idx_d;
  logic [31:0]      err_addr_q, err_addr_d;
  logic [31:0]      dma_idx_q [DmaQ];  // command index of the DMA in each scoreboard slot
  logic [31:0]      dma_idx_d [DmaQ];

  // The pod shape, registered (held constant after reset).
  logic [2:0][tpu_ici_pkg::CoordW:0] pod_k_q;  // chips per dimension
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) pod_k_q <= '0;
    else         pod_k_q <= topo_i.k;
  end

  // ---- Decode of the head ----
  mem_range_t rd0, rd1, wr;
  chip_err_e  chk;

  function automatic mem_range_t mk_range(logic mem, logic [15:0] row, logic [31:0] n);
    mem_range_t r;
    r.valid = 1'b1;
    r.mem   = mem;
    r.lo    = {1'b0, row};
    r.hi    = 17'(32'(row) + n);
    return r;
  endfunction

  // Rows base, base + stride, ... (n rows; stride 0 means 1), as the range [base, last + 1).
  function automatic logic [31:0] span(logic [31:0] n, logic [15:0] stride);
    logic [31:0] st;
    st = (stride == '0) ? 32'd1 : 32'(stride);
    return (n == '0) ? 32'd0 : (n - 32'd1) * st + 32'd1;
  endfunction

  // The rows the range checks allow: the exposed ones, never more than the memories have.
  logic [31:0] vlim, alim;
  assign vlim = (vmem_rows_i == '0 || 32'(vmem_rows_i) > VmemRows) ? VmemRows : 32'(vmem_rows_i);
  assign alim = (amem_rows_i == '0 || 32'(amem_rows_i) > AmemRows) ? AmemRows : 32'(amem_rows_i);
  `TPU_ASSERT(MemRowsInRange_A, 32'(vmem_rows_i) <= VmemRows && 32'(amem_rows_i) <= AmemRows,
              ("exposed memory rows %0d / %0d above the memories' %0d / %0d", vmem_rows_i,
               amem_rows_i, VmemRows, AmemRows))

  function automatic logic range_ok(logic [15:0] row, logic [31:0] n, logic [31:0] rows);
    return (64'(row) + 64'(n)) <= 64'(rows);
  endfunction

  // A destination coordinate inside the pod's shape.
  function automatic logic dst_in_pod(tpu_ici_pkg::ici_coord_t dst);
    logic ok;
    ok = 1'b1;
    for (int unsigned d = 0; d < 3; d++) begin
      if ({1'b0, dst[d]} >= pod_k_q[d]) ok = 1'b0;
    end
    return ok;
  endfunction

  // The queue head seen through each opcode's packed struct (tpu_contract_pkg, generated from
  // configs/tpu_contract.yaml): the checks below read fields by name, not by bit position.
  cmd_dma_t      h_dma;
  cmd_loadw_t    h_lw;
  cmd_matmul_t   h_mm;
  cmd_vpu_t      h_vpu;
  cmd_vrow_t     h_row;
  cmd_ici_send_t h_send;
  cmd_ici_wait_t h_wait;
  cmd_dma_idx_t  h_dmx;
  assign h_dmx  = cmd_dma_idx_t'(head);
  assign h_dma  = cmd_dma_t'(head);
  assign h_lw   = cmd_loadw_t'(head);
  assign h_mm   = cmd_matmul_t'(head);
  assign h_vpu  = cmd_vpu_t'(head);
  assign h_row  = cmd_vrow_t'(head);
  assign h_send = cmd_ici_send_t'(head);
  assign h_wait = cmd_ici_wait_t'(head);
  // Not read here: fields only the units use (bf16 flags, tie hint, wait value), reserved bits
  // (never checked, as before the contract was generated) and each view's opcode (head.op is).
  logic unused_cmd_bits;
  assign unused_cmd_bits = ^{h_dma.op, h_lw.rsvd_80, h_lw.rsvd_32, h_lw.rsvd_5,
                             h_lw.transpose,
                             h_lw.op, h_mm.rsvd_80, h_mm.rsvd_5, h_mm.op, h_vpu.rsvd_125,
                             h_vpu.rsvd_4, h_vpu.rsvd_98, h_vpu.src_bf16, h_vpu.dst_bf16, h_vpu.op,
                             h_row.rsvd_125, h_row.rsvd_14, h_row.rsvd_4, h_row.op,
                             h_send.rsvd_104, h_send.rsvd_92, h_send.early_head,
                             h_send.rsvd_76, h_send.rsvd_8, h_send.tie, h_send.op, h_wait.rsvd_96,
                             h_wait.value, h_wait.rsvd_32, h_wait.rsvd_4, h_wait.op,
                             h_dmx.rsvd_6, h_dmx.op};

  // DMA_IDX (docs/isa.md): ids and table rows at least 1; the table (table_rows rows of seg_bytes,
  // whole pieces, aligned; a scatter: whole 64-byte bursts) inside HBM; its VMEM rows and its
  // list's rows (ceil(rows / Lanes)) inside VMEM. The ids themselves are checked by the engine.
  task automatic dma_idx_check(output mem_range_t r0, output mem_range_t r1,
                               output mem_range_t w, output chip_err_e c);
    logic [31:0] piece, count, nlist, bits;
    logic [63:0] tbl_end;
    piece   = h_dmx.bf16 ? 32'(2 * Lanes) : 32'(4 * Lanes);
    count   = (32'(h_dmx.rows) * 32'(h_dmx.seg_bytes)) / piece;
    nlist   = (32'(h_dmx.rows) + 32'(Lanes) - 32'd1) / 32'(Lanes);
    bits    = h_dmx.hbm_addr | 32'(h_dmx.seg_bytes);
    tbl_end = 64'(h_dmx.hbm_addr) + 64'(h_dmx.table_rows) * 64'(h_dmx.seg_bytes);
    r0 = '0;
    r1 = mk_range(MEM_VMEM, h_dmx.idx_row, nlist);
    w  = '0;
    c  = ErrNone;
    if (h_dmx.rows == '0 || h_dmx.seg_bytes == '0 || h_dmx.table_rows == '0) c = ErrBadField;
    else if ((bits & (piece - 32'd1)) != '0 || (h_dmx.scatter && (bits & 32'd63) != '0))
      c = ErrAlign;
    else if (tbl_end > 64'(HbmBytes)) c = ErrHbmRange;
    else if (!range_ok(h_dmx.mem_row, count, vlim) ||
             !range_ok(h_dmx.idx_row, nlist, vlim))
      c = ErrVmemRange;
    if (h_dmx.scatter) r0 = mk_range(MEM_VMEM, h_dmx.mem_row, count);
    else               w  = mk_range(MEM_VMEM, h_dmx.mem_row, count);
    // A gather may not write its own list (its ids would change under it).
    if (c == ErrNone && ranges_overlap(w, r1)) c = ErrBadField;
  endtask

  always_comb begin
    logic        wr_hbm;
    logic [31:0] piece, count, total, ny, hbm_bits, rspan, rpk;
    logic        rred;
    logic [63:0] hbm_end;
    rd0 = '0;
    rd1 = '0;
    wr  = '0;
    chk = ErrNone;
    piece = h_dma.bf16 ? 32'(2 * Lanes) : 32'(4 * Lanes);
    total = 32'(h_dma.rows) * 32'(h_dma.seg_bytes);
    count = h_dma.bf16 ? total / (2 * Lanes) : total / (4 * Lanes);
    hbm_end = 64'(h_dma.hbm_addr) + 64'(h_dma.seg_bytes) +
              ((h_dma.rows == '0) ? 64'd0 : (64'(h_dma.rows) - 64'd1) * 64'(h_dma.stride));
    hbm_bits = h_dma.hbm_addr | h_dma.stride | 32'(h_dma.seg_bytes);
    wr_hbm = (h_dma.dir == DmaVmemToHbm) || (h_dma.dir == DmaAmemToHbm);
    ny     = h_vpu.y_bcast ? 32'd1 : 32'(h_vpu.rows);
    // VROW: the rows from x_row its beats span, and its packed rows (one lane per logical row)
    rred   = tpu_vpu_pkg::vpu_op_is_red(tpu_pkg::vpu_op_e'(h_row.vop));
    rspan  = (h_row.rows == '0 || h_row.beats == '0) ? 32'd0 :
             span(32'(h_row.rows), h_row.row_stride) - 32'd1 +
             span(32'(h_row.beats), h_row.beat_stride);
    rpk    = (32'(h_row.rows) + Lanes - 1) / Lanes;
    unique case (head.op)
      OpNop, OpFence, OpHalt: ;
      OpDma: begin
        if (h_dma.dir == DmaReserved || h_dma.rows == '0 || h_dma.seg_bytes == '0 ||
            32'(h_dma.tail) >= Lanes || (h_dma.tail != '0 && h_dma.dir != DmaHbmToVmem) ||
            (h_dma.hi && (!h_dma.bf16 || h_dma.dir == DmaHbmToVmem))) begin
          chk = ErrBadField;
        end else if ((hbm_bits & (piece - 32'd1)) != '0 ||
                     (wr_hbm && (hbm_bits & 32'd63) != '0)) begin
          chk = ErrAlign;
        end else if (hbm_end > 64'(HbmBytes)) begin
          chk = ErrHbmRange;
        end else if (h_dma.dir == DmaAmemToHbm) begin
          if (!range_ok(h_dma.mem_row, count, alim)) chk = ErrAmemRange;
          rd0 = mk_range(MEM_AMEM, h_dma.mem_row, count);
        end else begin
          if (!range_ok(h_dma.mem_row, count, vlim)) chk = ErrVmemRange;
          if (h_dma.dir == DmaHbmToVmem) wr  = mk_range(MEM_VMEM, h_dma.mem_row, count);
          else                           rd0 = mk_range(MEM_VMEM, h_dma.mem_row, count);
        end
      end
      OpDmaIdx: dma_idx_check(rd0, rd1, wr, chk);
      OpLoadW: begin
        if (!range_ok(h_lw.vmem_row, span(32'(Lanes), h_lw.stride), vlim))
          chk = ErrVmemRange;
        else if (32'(wt_pending_q) == WBanks) chk = ErrWeightsFull;
        rd0 = mk_range(MEM_VMEM, h_lw.vmem_row, span(32'(Lanes), h_lw.stride));
      end
      OpMatmul: begin
        if (h_mm.rows == '0) chk = ErrBadField;
        else if (!range_ok(h_mm.a_row, span(32'(h_mm.rows), h_mm.a_stride), vlim))
          chk = ErrVmemRange;
        else if (!range_ok(h_mm.c_row, 32'(h_mm.rows), alim)) chk = ErrAmemRange;
        else if (wt_pending_q == '0) chk = ErrNoWeights;
        rd0 = mk_range(MEM_VMEM, h_mm.a_row, span(32'(h_mm.rows), h_mm.a_stride));
        wr  = mk_range(MEM_AMEM, h_mm.c_row, 32'(h_mm.rows));
        if (h_mm.acc) rd1 = wr;
      end
      OpVpu: begin
        if (h_vpu.rows == '0 ||
            !tpu_vpu_pkg::vpu_op_elementwise(tpu_pkg::vpu_op_e'(h_vpu.vop)))
          chk = ErrBadField;
        else if ((h_vpu.x_wait && 32'(h_vpu.x_counter) >= NumCnt) ||
                 (h_vpu.sig && 32'(h_vpu.sig_counter) >= NumCnt))
          chk = ErrBadField;
        else if (!range_ok(h_vpu.x_row, 32'(h_vpu.rows), h_vpu.x_mem ? alim : vlim))
          chk = h_vpu.x_mem ? ErrAmemRange : ErrVmemRange;
        else if (!range_ok(h_vpu.y_row, ny, h_vpu.y_mem ? alim : vlim))
          chk = h_vpu.y_mem ? ErrAmemRange : ErrVmemRange;
        else if (!range_ok(h_vpu.dst_row, span(32'(h_vpu.rows), h_vpu.dst_stride),
                           h_vpu.dst_mem ? alim : vlim))
          chk = h_vpu.dst_mem ? ErrAmemRange : ErrVmemRange;
        rd0 = mk_range(h_vpu.x_mem, h_vpu.x_row, 32'(h_vpu.rows));
        rd1 = mk_range(h_vpu.y_mem, h_vpu.y_row, ny);
        wr  = mk_range(h_vpu.dst_mem, h_vpu.dst_row, span(32'(h_vpu.rows), h_vpu.dst_stride));
      end
      OpVrow: begin
        if (h_row.rows == '0 || h_row.beats == '0 ||
            !tpu_vpu_pkg::vpu_op_vector(tpu_pkg::vpu_op_e'(h_row.vop)))
          chk = ErrBadField;
        else if (!range_ok(h_row.x_row, rspan, h_row.x_mem ? alim : vlim))
          chk = h_row.x_mem ? ErrAmemRange : ErrVmemRange;
        else if (!rred && !range_ok(h_row.y_row, rpk, h_row.y_mem ? alim : vlim))
          chk = h_row.y_mem ? ErrAmemRange : ErrVmemRange;
        else if (!range_ok(h_row.dst_row, rred ? rpk : rspan, h_row.dst_mem ? alim : vlim))
          chk = h_row.dst_mem ? ErrAmemRange : ErrVmemRange;
        rd0 = mk_range(h_row.x_mem, h_row.x_row, rspan);
        if (!rred) rd1 = mk_range(h_row.y_mem, h_row.y_row, rpk);
        wr  = mk_range(h_row.dst_mem, h_row.dst_row, rred ? rpk : rspan);
      end
      OpIciSend: begin
        // The destination rows are checked against this chip's memory: every chip of a pod is
        // the same variant.
        if (h_send.rows == '0 || 32'(h_send.counter) >= NumCnt ||
            (h_send.wait_rows && 32'(h_send.wait_counter) >= NumCnt) ||
            (h_send.wait_rows && h_send.count_only) ||
            !dst_in_pod(tpu_ici_pkg::ici_coord_t'({h_send.dst_z, h_send.dst_y, h_send.dst_x})))
          chk = ErrBadField;
        else if (!range_ok(h_send.src_row, 32'(h_send.rows), h_send.src_mem ? alim : vlim))
          chk = h_send.src_mem ? ErrAmemRange : ErrVmemRange;
        else if (!range_ok(h_send.dst_row, 32'(h_send.rows), h_send.dst_mem ? alim : vlim))
          chk = h_send.dst_mem ? ErrAmemRange : ErrVmemRange;
        rd0 = mk_range(h_send.src_mem, h_send.src_row, 32'(h_send.rows));
        // wait_rows: its rows are still arriving or being written by the VPU; later commands
        // that touch arriving rows wait for the send, as for a write. Rows the VPU writes
        // (wait_local) need not: the VPU command's own entry holds them until they are written.
        if (h_send.wait_rows && !h_send.wait_local) wr = rd0;
      end
      OpIciWait: begin
        if (32'(h_wait.counter) >= NumCnt) chk = ErrBadField;
      end
      default: chk = ErrIllegalOp;
    endcase
  end

  // ---- Hazards against every in-flight command ----
  // A send with wait_rows is not held by the VPU commands in flight: its counter says when each
  // of its rows is written (the VPU's sig).
  logic hazard, sb_empty, chained;
  assign chained = head.op == OpIciSend && h_send.wait_rows;
  always_comb begin
    hazard = 1'b0;
    for (int unsigned s = 0; s < NumSlots; s++) begin
      if (sb_valid_q[s] && !(chained && s >= VpuBase && s < VpuBase + VpuQ)) begin
        hazard |= ranges_overlap(wr, sb_rd0_q[s]) || ranges_overlap(wr, sb_rd1_q[s]) ||
                  ranges_overlap(wr, sb_wr_q[s]) || ranges_overlap(rd0, sb_wr_q[s]) ||
                  ranges_overlap(rd1, sb_wr_q[s]);
      end
    end
  end
  assign sb_empty = (sb_valid_q == '0);

  // ---- Issue ----
  logic [SlotW-1:0] mm_slot, ici_slot, dma_slot, vpu_slot;
  logic           can_issue;
  always_comb begin
    mm_slot = SlotW'(MmBase + 32'(mm_tail_q));
    dma_slot = SlotW'(dma_tail_q);
    vpu_slot = SlotW'(VpuBase + 32'(vpu_tail_q));
    ici_slot = SlotW'(IciBase + 32'(ici_eng_i) * IciQ + 32'(ici_tail_q[ici_eng_i]));
    q_pop       = 1'b0;
    dma_start_o = 1'b0;
    lw_start_o  = 1'b0;
    mm_start_o  = 1'b0;
    vpu_start_o = 1'b0;
    ici_start_o = 1'b0;
    wait_take_o = 1'b0;
    sb_valid_d  = sb_valid_q;
    sb_rd0_d    = sb_rd0_q;
    sb_rd1_d    = sb_rd1_q;
    sb_wr_d     = sb_wr_q;
    mm_head_d   = mm_head_q;
    mm_tail_d   = mm_tail_q;
    dma_head_d  = dma_head_q;
    dma_tail_d  = dma_tail_q;
    vpu_head_d  = vpu_head_q;
    vpu_tail_d  = vpu_tail_q;
    wt_pending_d = wt_pending_q;
    halted_d    = halted_q;
    err_d       = err_q;
    err_cmd_d   = err_cmd_q;
    err_addr_d  = err_addr_q;
    dma_idx_d   = dma_idx_q;
    cmd_idx_d   = cmd_idx_q;
    retired_o   = '0;
    can_issue   = 1'b0;

    // completions
    if (dma_done_i) begin
      sb_valid_d[SlotW'(dma_head_q)] = 1'b0;
      dma_head_d = dma_head_q + 1'b1;
    end
    if (lw_done_i)  sb_valid_d[LwSlot] = 1'b0;
    if (vpu_done_i) begin
      sb_valid_d[VpuBase + 32'(vpu_head_q)] = 1'b0;
      vpu_head_d = vpu_head_q + 1'b1;
    end
    ici_head_d = ici_head_q;
    ici_tail_d = ici_tail_q;
    for (int unsigned e = 0; e < NumEng; e++) begin
      // Its rows are all in memory: later readers of them need not wait for the send's link.
      if (ici_in_i[e]) sb_wr_d[IciBase + e * IciQ + 32'(ici_head_q[e])] = '0;
      if (ici_done_i[e]) begin
        sb_valid_d[IciBase + e * IciQ + 32'(ici_head_q[e])] = 1'b0;
        ici_head_d[e] = ici_head_q[e] + 1'b1;
      end
    end
    if (mm_done_i) begin
      sb_valid_d[MmBase + 32'(mm_head_q)] = 1'b0;
      mm_head_d = mm_head_q + 1'b1;
    end
    retired_o = 4'(dma_done_i) + 4'(lw_done_i) + 4'(vpu_done_i) + 4'(mm_done_i) +
                4'($countones(ici_done_i));

    if (!q_empty && err_q != ErrNone) begin
      q_pop = 1'b1;  // drain without issuing
    end else if (!q_empty && !halted_q) begin
      if (chk != ErrNone) begin
        err_d     = chk;
        err_cmd_d = cmd_idx_q;
        q_pop     = 1'b1;
      end else begin
        unique case (head.op)
          OpDma, OpDmaIdx: can_issue = dma_ready_i && !sb_valid_q[dma_slot] && !hazard;
          OpLoadW:  can_issue = lw_ready_i && !sb_valid_q[LwSlot] && !hazard;
          OpVpu, OpVrow: can_issue = vpu_ready_i && !sb_valid_q[vpu_slot] && !hazard;
          OpMatmul: can_issue = mm_ready_i && !sb_valid_q[mm_slot] && !hazard;
          OpIciSend: can_issue = ici_ready_i && !sb_valid_q[ici_slot] && !hazard;
          OpIciWait: can_issue = wait_ok_i;
          OpFence, OpHalt: can_issue = sb_empty;
          default:  can_issue = 1'b1;  // NOP
        endcase
        if (can_issue) begin
          q_pop     = 1'b1;
          cmd_idx_d = cmd_idx_q + 1'b1;
          unique case (head.op)
            OpDma, OpDmaIdx: begin
              dma_start_o = 1'b1;
              sb_valid_d[dma_slot] = 1'b1;
              dma_idx_d[dma_tail_q] = cmd_idx_q;
              {sb_rd0_d[dma_slot], sb_rd1_d[dma_slot], sb_wr_d[dma_slot]} = {rd0, rd1, wr};
              dma_tail_d = dma_tail_q + 1'b1;
            end
            OpLoadW: begin
              lw_start_o = 1'b1;
              sb_valid_d[LwSlot] = 1'b1;
              {sb_rd0_d[LwSlot], sb_rd1_d[LwSlot], sb_wr_d[LwSlot]} = {rd0, rd1, wr};
              wt_pending_d = wt_pending_q + 1'b1;
            end
            OpVpu, OpVrow: begin
              vpu_start_o = 1'b1;
              sb_valid_d[vpu_slot] = 1'b1;
              {sb_rd0_d[vpu_slot], sb_rd1_d[vpu_slot], sb_wr_d[vpu_slot]} = {rd0, rd1, wr};
              vpu_tail_d = vpu_tail_q + 1'b1;
            end
            OpMatmul: begin
              mm_start_o = 1'b1;
              sb_valid_d[mm_slot] = 1'b1;
              {sb_rd0_d[mm_slot], sb_rd1_d[mm_slot], sb_wr_d[mm_slot]} = {rd0, rd1, wr};
              mm_tail_d = mm_tail_q + 1'b1;
              wt_pending_d = wt_pending_q - 1'b1;
            end
            OpIciSend: begin
              ici_start_o = 1'b1;
              ici_tail_d[ici_eng_i] = ici_tail_q[ici_eng_i] + 1'b1;
              sb_valid_d[ici_slot] = 1'b1;
              {sb_rd0_d[ici_slot], sb_rd1_d[ici_slot], sb_wr_d[ici_slot]} = {rd0, rd1, wr};
            end
            OpIciWait: begin
              wait_take_o = 1'b1;
              retired_o   = retired_o + 4'd1;
            end
            OpHalt: begin
              halted_d  = 1'b1;
              retired_o = retired_o + 4'd1;
            end
            default: retired_o = retired_o + 4'd1;  // NOP, FENCE
          endcase
        end
      end
    end

    // The DMA engine runs the oldest DMA of the scoreboard (in order, one at a time). First error
    // wins: a command's own error of this cycle, or an earlier one, keeps its place.
    if (dma_ecc_err_i && err_d == ErrNone) begin
      err_d      = ErrHbmUncorr;
      err_cmd_d  = dma_idx_q[dma_head_q + dma_ecc_which_i];
      err_addr_d = dma_ecc_addr_i;
    end
    if (dma_idx_err_i && err_d == ErrNone) begin
      err_d      = ErrIdxRange;
      err_cmd_d  = dma_idx_q[dma_head_q + dma_idx_which_i];
      err_addr_d = 32'(dma_idx_pos_i);
    end
    // A link declared down stops the program the same way (the command at the head; err_addr_o
    // names the direction). It stays down until reset, so it is raised again after a clear.
    if (link_down_i && err_d == ErrNone) begin
      err_d      = ErrIciLinkDown;
      err_cmd_d  = cmd_idx_q;
      err_addr_d = 32'(link_down_dir_i);
    end

    if (clear_i) begin
      err_d     = ErrNone;
      err_cmd_d = '0;
      err_addr_d = '0;
      halted_d  = 1'b0;
      cmd_idx_d = '0;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      sb_valid_q   <= '0;
      mm_head_q    <= '0;
      mm_tail_q    <= '0;
      dma_head_q   <= '0;
      dma_tail_q   <= '0;
      vpu_head_q   <= '0;
      vpu_tail_q   <= '0;
      ici_head_q   <= '0;
      ici_tail_q   <= '0;
      wt_pending_q <= '0;
      halted_q     <= 1'b0;
      err_q        <= ErrNone;
      err_cmd_q    <= '0;
      err_addr_q   <= '0;
      for (int unsigned s = 0; s < DmaQ; s++) dma_idx_q[s] <= '0;
      cmd_idx_q    <= '0;
      for (int unsigned s = 0; s < NumSlots; s++) begin
        sb_rd0_q[s] <= '0;
        sb_rd1_q[s] <= '0;
        sb_wr_q[s]  <= '0;
      end
    end else begin
      sb_valid_q   <= sb_valid_d;
      mm_head_q    <= mm_head_d;
      mm_tail_q    <= mm_tail_d;
      dma_head_q   <= dma_head_d;
      dma_tail_q   <= dma_tail_d;
      vpu_head_q   <= vpu_head_d;
      vpu_tail_q   <= vpu_tail_d;
      ici_head_q   <= ici_head_d;
      ici_tail_q   <= ici_tail_d;
      wt_pending_q <= wt_pending_d;
      halted_q     <= halted_d;
      err_q        <= err_d;
      err_cmd_q    <= err_cmd_d;
      err_addr_q   <= err_addr_d;
      for (int unsigned s = 0; s < DmaQ; s++) dma_idx_q[s] <= dma_idx_d[s];
      cmd_idx_q    <= cmd_idx_d;
      for (int unsigned s = 0; s < NumSlots; s++) begin
        sb_rd0_q[s] <= sb_rd0_d[s];
        sb_rd1_q[s] <= sb_rd1_d[s];
        sb_wr_q[s]  <= sb_wr_d[s];
      end
    end
  end

  assign busy_o    = !q_empty || !sb_empty;
  assign wait_block_o = !q_empty && err_q == ErrNone && !halted_q && head.op == OpIciWait &&
                        chk == ErrNone && !wait_ok_i;
  assign halted_o  = halted_q;
  assign issue_o   = can_issue;
  assign cmd_idx_o = cmd_idx_q;
  assign inflight_o = {|sb_valid_q[MmBase-1:IciBase], |sb_valid_q[IciBase-1:VpuBase],
                       |sb_valid_q[NumSlots-1:MmBase], sb_valid_q[LwSlot],
                       |sb_valid_q[DmaQ-1:0]};
  assign err_o     = err_q;
  assign err_cmd_o = err_cmd_q;
  assign err_addr_o = err_addr_q;

  logic unused_bits;
  assign unused_bits = ^{q_count, topo_i.wrap, topo_i.no_dateline, topo_i.twist};

  // Assertions
  `TPU_ASSERT(QueueNoOverflow_A,
      q_full |-> !(cmd_valid_i && cmd_ready_o),
      ("%m: QueueNoOverflow_A failed"))
  `TPU_ASSERT(CmdValidHeld_A,
      cmd_valid_i && !cmd_ready_o |=> cmd_valid_i,
      ("%m: CmdValidHeld_A failed"))
  `TPU_ASSERT(CmdPayloadStable_A,
      cmd_valid_i && !cmd_ready_o |=> $stable(cmd_i),
      ("%m: CmdPayloadStable_A failed"))
  `TPU_ASSERT(DoneOnlyInFlight_A,
      (dma_done_i || lw_done_i || vpu_done_i) |->
      (!dma_done_i || sb_valid_q[SlotW'(dma_head_q)]) && (!lw_done_i || sb_valid_q[LwSlot]) &&
      (!vpu_done_i || sb_valid_q[VpuBase + 32'(vpu_head_q)]),
      ("%m: DoneOnlyInFlight_A failed"))
  `TPU_ASSERT(MatmulDoneInFlight_A,
      mm_done_i |-> sb_valid_q[MmBase + 32'(mm_head_q)],
      ("%m: MatmulDoneInFlight_A failed"))
  `TPU_ASSERT(WeightsBalanced_A,
      32'(wt_pending_q) <= WBanks,
      ("%m: WeightsBalanced_A failed"))
  `TPU_ASSERT(IssueOnlyLegal_A,
      (dma_start_o || lw_start_o || mm_start_o || vpu_start_o || ici_start_o) |->
      chk == ErrNone && !hazard,
      ("%m: IssueOnlyLegal_A failed"))
  for (genvar e = 0; e < NumEng; e++) begin : gen_sva_ici
    `TPU_ASSERT(IciDoneInFlight_A,
        ici_done_i[e] |-> sb_valid_q[IciBase + e * IciQ + 32'(ici_head_q[e])],
        ("%m: IciDoneInFlight_A failed"))
    `TPU_ASSERT(IciInInFlight_A,
        ici_in_i[e] |-> sb_valid_q[IciBase + e * IciQ + 32'(ici_head_q[e])],
        ("%m: IciInInFlight_A failed"))
  end

endmodule
