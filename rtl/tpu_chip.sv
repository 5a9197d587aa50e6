// tpu_chip: one TPU-style chip: sequencer, DMA, MXU, VPU, vector and accumulator memories and
// the HBM controller (the HBM device sits outside, on the PHY-side ports).
//
// Host port:
//   commands      cmd_valid_i / cmd_ready_o, cmd_i (tpu_chip_pkg::chip_cmd_t, docs/isa.md)
//   HBM access    hm_req_* (valid/ready; 64-byte bursts, 7-bit tag) and hm_rsp_* (valid/ready,
//                 out of order, tag returned); shares the controller port with the DMA
//   status        busy_o, hbm_idle_o (no HBM request or posted write pending), halted_o, err_o
//                 (sticky chip_err_e), err_cmd_o, err_addr_o (ErrHbmUncorr: the HBM byte
//                 address of the word), clear_i (clears error and halt),
//                 stat_id_i -> stat_o (64-bit counters, chip_stat_e)
// Trace port (observation only, for the harness's timeline): trc_issue_o pulses when the head
//                 command issues, trc_op_o/trc_idx_o are the head's opcode and command index
//                 (from 0 after reset or clear), trc_eng_o the send context an ICI_SEND goes to;
//                 trc_done_o pulses per completed command (TRC_DONE_*: DMA, LOADW, MATMUL, VPU,
//                 ICI send context 0..3), trc_wait_o: the head is an ICI_WAIT that is blocked.
// HBM PHY side:   one command bus, write-data and read-data bus per channel (tpu_hbm_ctrl),
//                 with 8 SECDED check bits per 64-bit word beside the data (hbm_wcheck_o,
//                 hbm_rcheck_i). A DMA that reads an uncorrectable word stops the program with
//                 ErrHbmUncorr (its command index, the word's address); a host-port read flags
//                 its uncorrectable words on hm_rsp_ue_o (the driver raises the error).
// ICI:            the chip's router (tpu_ici_router, NumVc 4, IciDepth flits per VC) with one
//                 link port per torus direction (+X -X +Y -Y +Z -Z, index d = 0..5): flits out
//                 `ici_tx_*` with their control words back `ici_tx_ctl_*`, flits in `ici_rx_*`
//                 with the control words sent back `ici_rx_ctl_*`. A flit is {head, tail,
//                 data[RowW-1:0]}:
//                 one memory row per flit. No ready crosses a link and every link output is a
//                 register, so chips couple only through >= 1-cycle link channels (docs/ici.md).
//                 `ici_me_i` / `ici_topo_i` (the chip's coordinate and the pod shape) and
//                 `ici_link_gap_i` (cycles a link needs per flit: a link narrower than a row;
//                 a head flit, its 8-byte header only, needs ceil(8 / link bytes) of them)
//                 are held constant after reset. Unused directions: tie rx_valid and
//                 tx_ctl_valid to 0.
//                 The ICI engine (tpu_ici_eng) runs ICI_SEND and the counters of ICI_WAIT.
//                 Link layer (tpu_ici_link_tx/_rx per direction, docs/ici.md): on the wire a flit
//                 word is {flit, vc, seq} with a CRC-32C (`ici_tx_seq/crc`, `ici_rx_seq/crc`),
//                 and the reverse channel carries control words (ACK/NAK and credit counts, with
//                 their own CRC: `ici_tx_ctl_*` in, `ici_rx_ctl_*` out) instead of bare credits.
//                 `ici_rx_cr_*` still show the router's credits (observation only). Replays
//                 after `ici_replay_timeout_i` cycles without an ACK; a link whose replays fail
//                 8 times in a row is down (`ici_link_down_o`, error ErrIciLinkDown). Per-link
//                 counters: `ici_lstat_dir_i`/`ici_lstat_sel_i` -> `ici_lstat_o` (link_stat_e).
// Throughput: the MXU takes one activation row and Cfg.mxu_wrows weight rows per cycle; the DMA
// moves one memory row per cycle;
// the VPU one row per cycle; they run concurrently under the sequencer's scoreboard.
// Handshakes: valid/ready everywhere; a payload is held while valid && !ready.
`include "tpu_assert.svh"

module tpu_chip
  import tpu_hbm_pkg::*;
  import tpu_chip_pkg::*;
#(
  parameter  int unsigned        VariantId = 0,
  localparam tpu_pkg::chip_cfg_t Cfg       = tpu_pkg::variant_cfg(tpu_pkg::variant_e'(VariantId)),
  localparam int unsigned        Lanes     = Cfg.mxu_cols,
  localparam int unsigned        NumCh     = Cfg.hbm_channels,
  localparam int unsigned        RowW      = Lanes * 32,
  localparam int unsigned        FlitW     = RowW + 2,
  localparam int unsigned        DmaQ      = DmaInFlight,  // DMAs issued and not complete
  localparam int unsigned        MmSlots   = 8,  // MATMULs in flight (sequencer, MXU write-back)
  localparam int unsigned        VpuSlots  = 4,  // VPU commands in flight (sequencer, VPU unit)
  localparam int unsigned        WRows     = Cfg.mxu_wrows,
  localparam int unsigned        NumVRd    = 7 + WRows,  // VMEM read ports
  localparam int unsigned        NumDirs   = tpu_ici_pkg::NumDirs,
  localparam int unsigned        IciVcW    = 2,  // 4 VCs per link (2 dateline classes x 2)
  localparam int unsigned        LinkSeqW  = tpu_ici_pkg::LinkSeqW,
  localparam int unsigned        CtlW      = tpu_ici_pkg::link_ctl_width(4)
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  hbm_timing_t               hbm_timing_i,
  input  hbm_ctrl_cfg_t             hbm_cfg_i,
  // host: commands
  input  logic                      cmd_valid_i,
  output logic                      cmd_ready_o,
  input  chip_cmd_t                 cmd_i,
  // host: HBM access
  input  logic                      hm_req_valid_i,
  output logic                      hm_req_ready_o,
  input  logic                      hm_req_write_i,
  input  logic [31:0]               hm_req_addr_i,
  input  logic [6:0]                hm_req_tag_i,
  input  hbm_data_t                 hm_req_data_i,
  output logic                      hm_rsp_valid_o,
  input  logic                      hm_rsp_ready_i,
  output logic                      hm_rsp_write_o,
  output logic [6:0]                hm_rsp_tag_o,
  output hbm_data_t                 hm_rsp_data_o,
  output hbm_word_mask_t            hm_rsp_ue_o,  // words of the response with an ECC error
  // host: status
  input  logic                      clear_i,
  output logic                      busy_o,
  output logic                      hbm_idle_o,  // the HBM controller holds no request or write
  output logic                      halted_o,
  output chip_err_e                 err_o,
  output logic [31:0]               err_cmd_o,
  output logic [31:0]               err_addr_o,
  input  chip_stat_e                stat_id_i,
  output logic [63:0]               stat_o,
  // trace port
  output logic                      trc_issue_o,
  output chip_op_e                  trc_op_o,
  output logic [31:0]               trc_idx_o,
  output logic [2:0]                trc_eng_o,
  output logic [TRC_DONE_SEND+IciSendContexts-1:0] trc_done_o,
  output logic                      trc_wait_o,
  // ICI links and configuration
  input  tpu_ici_pkg::ici_coord_t   ici_me_i,
  input  tpu_ici_pkg::ici_topo_t    ici_topo_i,
  input  logic [tpu_ici_pkg::LinkGapW-1:0] ici_link_gap_i,  // cycles per flit on a link (0, 1: 1)
  input  logic [15:0]               ici_replay_timeout_i,  // link layer: cycles without ACK
  // On-chip memory rows exposed (0: all; held after reset): the range checks' limits (tpu_seq)
  input  logic [15:0]               mem_vrows_i,
  input  logic [15:0]               mem_arows_i,
  output logic [NumDirs-1:0]        ici_tx_valid_o,
  output logic [NumDirs-1:0][IciVcW-1:0] ici_tx_vc_o,
  output logic [NumDirs-1:0][FlitW-1:0] ici_tx_flit_o,
  output logic [NumDirs-1:0][LinkSeqW-1:0] ici_tx_seq_o,
  output logic [NumDirs-1:0][31:0]  ici_tx_crc_o,
  input  logic [NumDirs-1:0]        ici_tx_ctl_valid_i,
  input  logic [NumDirs-1:0][CtlW-1:0] ici_tx_ctl_i,
  input  logic [NumDirs-1:0][31:0]  ici_tx_ctl_crc_i,
  input  logic [NumDirs-1:0]        ici_rx_valid_i,
  input  logic [NumDirs-1:0][IciVcW-1:0] ici_rx_vc_i,
  input  logic [NumDirs-1:0][FlitW-1:0] ici_rx_flit_i,
  input  logic [NumDirs-1:0][LinkSeqW-1:0] ici_rx_seq_i,
  input  logic [NumDirs-1:0][31:0]  ici_rx_crc_i,
  output logic [NumDirs-1:0]        ici_rx_ctl_valid_o,
  output logic [NumDirs-1:0][CtlW-1:0] ici_rx_ctl_o,
  output logic [NumDirs-1:0][31:0]  ici_rx_ctl_crc_o,
  output logic [NumDirs-1:0]        ici_rx_cr_valid_o,  // observation: the router's credits
  output logic [NumDirs-1:0][IciVcW-1:0] ici_rx_cr_vc_o,
  output logic [NumDirs-1:0]        ici_link_down_o,
  input  tpu_ici_pkg::link_stat_e   ici_lstat_sel_i,
  input  logic [2:0]                ici_lstat_dir_i,
  output logic [31:0]               ici_lstat_o,
  output logic                      ici_idle_o,   // no flit buffered in the router
  // HBM PHY side
  output hbm_cmd_t      [NumCh-1:0] hbm_cmd_o,
  output logic          [NumCh-1:0] hbm_wvalid_o,
  output hbm_bus_t      [NumCh-1:0] hbm_wdata_o,
  output hbm_bus_ecc_t  [NumCh-1:0] hbm_wcheck_o,
  input  logic          [NumCh-1:0] hbm_rvalid_i,
  input  hbm_bus_t      [NumCh-1:0] hbm_rdata_i,
  input  hbm_bus_ecc_t  [NumCh-1:0] hbm_rcheck_i
);

  localparam int unsigned VAddrW = tpu_pkg::idx_width(Cfg.vmem_rows);
  localparam int unsigned IciNumCnt  = IciCounters;  // ICI_WAIT counters (the contract's)
  localparam int unsigned IciPktRows = IciPacketRows;  // rows per remote-write packet (+ 1 head
                                                      // flit): a pod transfer block of <= 64
                                                      // rows is one packet
  localparam int unsigned IciDepth   = 16;  // flits per router VC buffer: full rate up to a
                                            // 7-cycle link (Depth >= 2L + 2)
  localparam int unsigned AAddrW = tpu_pkg::idx_width(Cfg.amem_rows);
  localparam longint unsigned HbmBytes =
      longint'(NumCh) * HBM_BANKS * Cfg.hbm_rows_per_bank * HBM_ROW_BYTES;

  // ---------------------------------------------------------------------------------------------
  // Sequencer
  // ---------------------------------------------------------------------------------------------
  chip_cmd_t  head;
  // The head command through each opcode's packed struct (tpu_contract_pkg, generated from
  // configs/tpu_contract.yaml): the units' ports take fields by name.
  cmd_loadw_t    c_lw;
  cmd_matmul_t   c_mm;
  cmd_vpu_t      c_vpu;
  cmd_vrow_t     c_row;  // VROW: the VPU unit's row-wise command (its fields overlay VPU's)
  logic          vpu_row;
  cmd_ici_send_t c_send;
  cmd_ici_wait_t c_wait;
  assign c_lw   = cmd_loadw_t'(head);
  assign c_mm   = cmd_matmul_t'(head);
  assign c_vpu  = cmd_vpu_t'(head);
  assign c_row  = cmd_vrow_t'(head);
  assign vpu_row = head.op == OpVrow;
  logic unused_row;  // (VROW's other fields sit where VPU's do: the unit takes those from c_vpu)
  assign unused_row = ^{c_row.rsvd_125, c_row.vop, c_row.dst_row, c_row.y_row, c_row.rows,
                        c_row.x_row, c_row.dst_mem, c_row.rsvd_14, c_row.y_mem, c_row.x_mem,
                        c_row.rsvd_4, c_row.op};
  assign c_send = cmd_ici_send_t'(head);
  assign c_wait = cmd_ici_wait_t'(head);
  logic       dma_start, dma_ready, dma_done, dma_busy, dma_ecc_err;
  logic [$clog2(DmaQ)-1:0] dma_ecc_which;
  logic [31:0] dma_ecc_addr;
  logic       dma_idx_err;
  logic [15:0] dma_idx_pos, dma_list_lo, dma_list_hi;
  logic [$clog2(DmaQ)-1:0] dma_idx_which;
  logic       lw_start, lw_ready, lw_done, mm_start, mm_ready, mm_done, mxu_busy;
  logic       vpu_start, vpu_ready, vpu_done, vpu_busy;
  logic       ici_start, ici_ready, wait_ok, wait_take, wait_block;
  logic [2:0] ici_eng;
  logic [IciSendContexts-1:0] ici_done, ici_in, ici_busy;
  logic [3:0] retired;
  logic       seq_issue;
  logic [31:0] seq_idx;
  logic [4:0] inflight;  // {ICI_SEND, VPU, MATMUL, LOADW, DMA}

  tpu_seq #(
    .Lanes   (Lanes),
    .VmemRows(Cfg.vmem_rows),
    .AmemRows(Cfg.amem_rows),
    .HbmBytes(HbmBytes),
    .NumCnt  (IciNumCnt),
    .NumEng  (IciSendContexts),
    .DmaQ    (DmaQ),
    .MmSlots (MmSlots),
    .VpuQ    (VpuSlots),
    .WBanks  (Cfg.mxu_wbanks)
  ) i_seq (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .cmd_valid_i(cmd_valid_i),
    .cmd_ready_o(cmd_ready_o),
    .cmd_i      (cmd_i),
    .clear_i    (clear_i),
    .head_o     (head),
    .dma_start_o(dma_start),
    .dma_ready_i(dma_ready),
    .dma_done_i (dma_done),
    .dma_ecc_err_i(dma_ecc_err),
    .dma_ecc_addr_i(dma_ecc_addr),
    .dma_ecc_which_i(dma_ecc_which),
    .dma_idx_err_i  (dma_idx_err),
    .dma_idx_pos_i  (dma_idx_pos),
    .dma_idx_which_i(dma_idx_which),
    .link_down_i   (link_down),
    .link_down_dir_i(link_down_dir),
    .lw_start_o (lw_start),
    .lw_ready_i (lw_ready),
    .lw_done_i  (lw_done),
    .mm_start_o (mm_start),
    .mm_ready_i (mm_ready),
    .mm_done_i  (mm_done),
    .vpu_start_o(vpu_start),
    .vpu_ready_i(vpu_ready),
    .vpu_done_i (vpu_done),
    .ici_start_o(ici_start),
    .ici_ready_i(ici_ready),
    .ici_eng_i  (ici_eng),
    .ici_done_i (ici_done),
    .ici_in_i   (ici_in),
    .wait_ok_i  (wait_ok),
    .wait_take_o(wait_take),
    .topo_i     (ici_topo_i),
    .vmem_rows_i(mem_vrows_i),
    .amem_rows_i(mem_arows_i),
    .busy_o     (busy_o),
    .halted_o   (halted_o),
    .err_o      (err_o),
    .err_cmd_o  (err_cmd_o),
    .err_addr_o (err_addr_o),
    .retired_o  (retired),
    .wait_block_o(wait_block),
    .issue_o    (seq_issue),
    .cmd_idx_o  (seq_idx),
    .inflight_o (inflight)
  );

  assign trc_issue_o = seq_issue;
  assign trc_op_o    = head.op;
  assign trc_idx_o   = seq_idx;
  assign trc_eng_o   = ici_eng;
  assign trc_wait_o  = wait_block;
  always_comb begin
    trc_done_o = '0;
    trc_done_o[TRC_DONE_DMA]    = dma_done;
    trc_done_o[TRC_DONE_LOADW]  = lw_done;
    trc_done_o[TRC_DONE_MATMUL] = mm_done;
    trc_done_o[TRC_DONE_VPU]    = vpu_done;
    trc_done_o[TRC_DONE_SEND +: IciSendContexts] = ici_done;
  end

  // ---------------------------------------------------------------------------------------------
  // Memories. VMEM read ports: 0 DMA, 1 LOADW, 2 MATMUL activations, 3 VPU x, 4 VPU y, 5 DMA
  // (second row), 6 ICI send (local port 0), 7 .. 5 + WRows LOADW (weight rows 1 .. WRows - 1 of
  // a beat), 6 + WRows ICI send (local port 1); write ports: 0 DMA, 1 VPU, 2 DMA (second row),
  // 3 and 4 ICI receive (local ports 0 and 1).
  // AMEM read ports: 0 DMA, 1 MATMUL running sums, 2 VPU x, 3 VPU y, 4 DMA (second row), 5 and 6
  // ICI send; write ports: 0 MXU results, 1 VPU, 2 and 3 ICI receive.
  // ---------------------------------------------------------------------------------------------
  logic [NumVRd-1:0][VAddrW-1:0] v_rd_addr;
  logic [NumVRd-1:0][RowW-1:0]   v_rd_data;
  logic [4:0]             v_we;
  logic [4:0][VAddrW-1:0] v_wr_addr;
  logic [4:0][RowW-1:0]   v_wr_data;
  logic [6:0][AAddrW-1:0] a_rd_addr;
  logic [6:0][RowW-1:0]   a_rd_data;
  logic [3:0]             a_we;
  logic [3:0][AAddrW-1:0] a_wr_addr;
  logic [3:0][RowW-1:0]   a_wr_data;

  tpu_mem #(
    .Rows (Cfg.vmem_rows),
    .Width(RowW),
    .NumRd(NumVRd),
    .NumWr(5)
  ) i_vmem (
    .clk_i    (clk_i),
    .rst_ni   (rst_ni),
    .rd_addr_i(v_rd_addr),
    .rd_data_o(v_rd_data),
    .we_i     (v_we),
    .wr_addr_i(v_wr_addr),
    .wr_data_i(v_wr_data)
  );

  tpu_mem #(
    .Rows (Cfg.amem_rows),
    .Width(RowW),
    .NumRd(7),
    .NumWr(4)
  ) i_amem (
    .clk_i    (clk_i),
    .rst_ni   (rst_ni),
    .rd_addr_i(a_rd_addr),
    .rd_data_o(a_rd_data),
    .we_i     (a_we),
    .wr_addr_i(a_wr_addr),
    .wr_data_i(a_wr_data)
  );

  // ---------------------------------------------------------------------------------------------
  // DMA
  // ---------------------------------------------------------------------------------------------
  logic     [1:0] dma_req_valid, dma_req_ready, dma_rsp_valid, dma_rsp_ready;
  hbm_req_t [1:0] dma_req;
  logic [1:0]  dma_we;
  logic [1:0][15:0] dma_rd_addr, dma_wr_addr;
  logic [1:0][RowW-1:0] dma_wr_data;

  // DMAs issued ahead of the engine wait here in order (the sequencer keeps their scoreboard
  // entries until each is done), so a DMA at the head of the command queue does not hold issue
  // while the engine is still busy with the previous one.
  chip_cmd_t dma_cmd;
  cmd_dma_t  c_dma;  // the DMA queue's head, by field
  cmd_dma_idx_t c_dmx;  // the same head seen as a DMA_IDX (indexed: gather / scatter)
  logic      dmx;  // the head is a DMA_IDX
  assign c_dma = cmd_dma_t'(dma_cmd);
  assign c_dmx = cmd_dma_idx_t'(dma_cmd);
  assign dmx   = dma_cmd.op == OpDmaIdx;
  logic [$clog2(DmaQ+1)-1:0] dmaq_count;
  logic      dmaq_empty, dmaq_full, dma_eng_ready, dma_eng_start;
  tpu_fifo #(
    .data_t(chip_cmd_t),
    .Depth (DmaQ)
  ) i_dma_queue (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (dma_start),
    .data_i (head),
    .pop_i  (dma_eng_start),
    .data_o (dma_cmd),
    .empty_o(dmaq_empty),
    .full_o (dmaq_full),
    .count_o(dmaq_count)
  );
  assign dma_ready = !dmaq_full;
  assign dma_eng_start = !dmaq_empty && dma_eng_ready;

  tpu_dma #(
    .Lanes  (Lanes),
    .NumTags(128),
    .InFlight(DmaQ)
  ) i_dma (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .start_i       (dma_eng_start),
    .ready_o       (dma_eng_ready),
    .dir_i         (dmx ? (c_dmx.scatter ? DmaVmemToHbm : DmaHbmToVmem) : c_dma.dir),
    .bf16_i        (dmx ? c_dmx.bf16 : c_dma.bf16),
    .hi_i          (dmx ? 1'b0 : c_dma.hi),
    .tail_i        (dmx ? 8'd0 : c_dma.tail),
    .mem_row_i     (dmx ? c_dmx.mem_row : c_dma.mem_row),
    .rows_i        (dmx ? c_dmx.rows : c_dma.rows),
    .seg_bytes_i   (dmx ? c_dmx.seg_bytes : c_dma.seg_bytes),
    .hbm_addr_i    (dmx ? c_dmx.hbm_addr : c_dma.hbm_addr),
    .stride_i      (dmx ? 32'(c_dmx.seg_bytes) : c_dma.stride),
    .idx_i         (dmx),
    .idx_row_i     (c_dmx.idx_row),
    .vrows_i       (c_dmx.table_rows),
    .done_o        (dma_done),
    .busy_o        (dma_busy),
    .ecc_err_o     (dma_ecc_err),
    .ecc_addr_o    (dma_ecc_addr),
    .ecc_which_o   (dma_ecc_which),
    .idx_err_o     (dma_idx_err),
    .idx_pos_o     (dma_idx_pos),
    .idx_which_o   (dma_idx_which),
    .list_lo_o     (dma_list_lo),
    .list_hi_o     (dma_list_hi),
    .req_valid_o   (dma_req_valid),
    .req_ready_i   (dma_req_ready),
    .req_o         (dma_req),
    .rsp_valid_i   (dma_rsp_valid),
    .rsp_ready_o   (dma_rsp_ready),
    .rsp_i         (ctrl_rsp),
    .rd_addr_o     (dma_rd_addr),
    .vmem_rd_data_i({v_rd_data[5], v_rd_data[0]}),
    .amem_rd_data_i({a_rd_data[4], a_rd_data[0]}),
    .vmem_we_o     (dma_we),
    .wr_addr_o     (dma_wr_addr),
    .wr_data_o     (dma_wr_data)
  );

  // ---------------------------------------------------------------------------------------------
  // MXU
  // ---------------------------------------------------------------------------------------------
  logic [WRows-1:0][15:0]   mxu_w_addr;
  logic [WRows-1:0][RowW-1:0] mxu_w_data;
  logic [15:0] mxu_a_addr, mxu_c_addr, mxu_c_wr_addr;
  logic        mxu_c_we, mxu_a_beat, mxu_w_beat;
  logic [RowW-1:0] mxu_c_wr_data;

  tpu_mxu_unit #(
    .Rows   (Cfg.mxu_rows),
    .Cols   (Cfg.mxu_cols),
    .WBanks (Cfg.mxu_wbanks),
    .WRows  (WRows),
    .WbDepth(MmSlots)
  ) i_mxu_unit (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .lw_start_i (lw_start),
    .lw_ready_o (lw_ready),
    .lw_row_i   (c_lw.vmem_row),
    .lw_stride_i(c_lw.stride),
    .lw_t_i     (c_lw.transpose),
    .lw_done_o  (lw_done),
    .mm_start_i (mm_start),
    .mm_ready_o (mm_ready),
    .mm_a_row_i (c_mm.a_row),
    .mm_a_stride_i(c_mm.a_stride),
    .mm_rows_i  (c_mm.rows),
    .mm_c_row_i (c_mm.c_row),
    .mm_acc_i   (c_mm.acc),
    .mm_done_o  (mm_done),
    .w_rd_addr_o(mxu_w_addr),
    .w_rd_data_i(mxu_w_data),
    .a_rd_addr_o(mxu_a_addr),
    .a_rd_data_i(v_rd_data[2]),
    .c_rd_addr_o(mxu_c_addr),
    .c_rd_data_i(a_rd_data[1]),
    .c_we_o     (mxu_c_we),
    .c_wr_addr_o(mxu_c_wr_addr),
    .c_wr_data_o(mxu_c_wr_data),
    .busy_o     (mxu_busy),
    .a_beat_o   (mxu_a_beat),
    .w_beat_o   (mxu_w_beat)
  );

  // ---------------------------------------------------------------------------------------------
  // VPU
  // ---------------------------------------------------------------------------------------------
  logic        vpu_x_mem, vpu_y_mem, vpu_v_we, vpu_a_we;
  logic [15:0] vpu_x_addr, vpu_y_addr, vpu_wr_addr;
  logic [RowW-1:0] vpu_wr_data;
  logic [VpuSlots-1:0][$clog2(IciNumCnt)-1:0] vpu_cnt_id;
  logic [VpuSlots-1:0] vpu_cnt_avail;
  logic [$clog2(IciNumCnt)-1:0] vpu_take_cnt, vpu_sig_cnt;
  logic        vpu_cnt_take, vpu_sig, vpu_rows_wait;

  tpu_vpu_unit #(
    .Lanes(Lanes),
    .CntW ($clog2(IciNumCnt)),
    .Slots(VpuSlots)
  ) i_vpu_unit (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .start_i   (vpu_start),
    .ready_o   (vpu_ready),
    .op_i      (tpu_pkg::vpu_op_e'(c_vpu.vop)),
    .src_bf16_i(vpu_row ? 3'b000 : c_vpu.src_bf16),
    .dst_bf16_i(!vpu_row && c_vpu.dst_bf16),
    .x_mem_i   (c_vpu.x_mem),
    .x_row_i   (c_vpu.x_row),
    .y_mem_i   (c_vpu.y_mem),
    .y_row_i   (c_vpu.y_row),
    .y_bcast_i (!vpu_row && c_vpu.y_bcast),
    .dst_mem_i (c_vpu.dst_mem),
    .dst_row_i (c_vpu.dst_row),
    .dst_stride_i(c_vpu.dst_stride),
    .rows_i    (c_vpu.rows),
    .x_wait_i  (!vpu_row && c_vpu.x_wait),
    .x_cnt_i   (c_vpu.x_counter[$clog2(IciNumCnt)-1:0]),
    .sig_i     (!vpu_row && c_vpu.sig),
    .sig_cnt_i (c_vpu.sig_counter[$clog2(IciNumCnt)-1:0]),
    .row_i     (vpu_row),
    .beats_i   (c_row.beats),
    .beat_stride_i(c_row.beat_stride),
    .row_stride_i(c_row.row_stride),
    .done_o    (vpu_done),
    .busy_o    (vpu_busy),
    .rows_wait_o(vpu_rows_wait),
    .x_mem_o   (vpu_x_mem),
    .x_addr_o  (vpu_x_addr),
    .x_vmem_i  (v_rd_data[3]),
    .x_amem_i  (a_rd_data[2]),
    .y_mem_o   (vpu_y_mem),
    .y_addr_o  (vpu_y_addr),
    .y_vmem_i  (v_rd_data[4]),
    .y_amem_i  (a_rd_data[3]),
    .vmem_we_o (vpu_v_we),
    .amem_we_o (vpu_a_we),
    .wr_addr_o (vpu_wr_addr),
    .wr_data_o (vpu_wr_data),
    .cnt_id_o  (vpu_cnt_id),
    .cnt_avail_i(vpu_cnt_avail),
    .cnt_take_o(vpu_cnt_take),
    .cnt_take_id_o(vpu_take_cnt),
    .sig_o     (vpu_sig),
    .sig_cnt_o (vpu_sig_cnt)
  );

  // Memory port wiring
  assign v_rd_addr[0] = VAddrW'(dma_rd_addr[0]);
  assign v_rd_addr[5] = VAddrW'(dma_rd_addr[1]);
  assign v_rd_addr[1] = VAddrW'(mxu_w_addr[0]);
  assign mxu_w_data[0] = v_rd_data[1];
  for (genvar r = 1; r < WRows; r++) begin : gen_w_port
    assign v_rd_addr[6 + r] = VAddrW'(mxu_w_addr[r]);
    assign mxu_w_data[r]    = v_rd_data[6 + r];
  end
  assign v_rd_addr[2] = VAddrW'(mxu_a_addr);
  assign v_rd_addr[3] = VAddrW'(vpu_x_addr);
  assign v_rd_addr[4] = VAddrW'(vpu_y_addr);
  assign v_rd_addr[6]          = VAddrW'(ici_rd_addr[0]);
  assign v_rd_addr[NumVRd - 1] = VAddrW'(ici_rd_addr[1]);
  assign a_rd_addr[5]          = AAddrW'(ici_rd_addr[0]);
  assign a_rd_addr[6]          = AAddrW'(ici_rd_addr[1]);
  assign ici_v_rd_data         = {v_rd_data[NumVRd - 1], v_rd_data[6]};
  assign ici_a_rd_data         = {a_rd_data[6], a_rd_data[5]};
  for (genvar l = 0; l < 2; l++) begin : gen_ici_wr
    assign v_we[3 + l]      = ici_v_we[l];
    assign v_wr_addr[3 + l] = VAddrW'(ici_wr_addr[l]);
    assign v_wr_data[3 + l] = ici_wr_data[l];
    assign a_we[2 + l]      = ici_a_we[l];
    assign a_wr_addr[2 + l] = AAddrW'(ici_wr_addr[l]);
    assign a_wr_data[2 + l] = ici_wr_data[l];
  end
  assign v_we[0]      = dma_we[0];
  assign v_wr_addr[0] = VAddrW'(dma_wr_addr[0]);
  assign v_wr_data[0] = dma_wr_data[0];
  assign v_we[2]      = dma_we[1];
  assign v_wr_addr[2] = VAddrW'(dma_wr_addr[1]);
  assign v_wr_data[2] = dma_wr_data[1];
  assign v_we[1]      = vpu_v_we;
  assign v_wr_addr[1] = VAddrW'(vpu_wr_addr);
  assign v_wr_data[1] = vpu_wr_data;
  assign a_rd_addr[0] = AAddrW'(dma_rd_addr[0]);
  assign a_rd_addr[4] = AAddrW'(dma_rd_addr[1]);
  assign a_rd_addr[1] = AAddrW'(mxu_c_addr);
  assign a_rd_addr[2] = AAddrW'(vpu_x_addr);
  assign a_rd_addr[3] = AAddrW'(vpu_y_addr);
  assign a_we[0]      = mxu_c_we;
  assign a_wr_addr[0] = AAddrW'(mxu_c_wr_addr);
  assign a_wr_data[0] = mxu_c_wr_data;
  assign a_we[1]      = vpu_a_we;
  assign a_wr_addr[1] = AAddrW'(vpu_wr_addr);
  assign a_wr_data[1] = vpu_wr_data;

  // ---------------------------------------------------------------------------------------------
  // ICI: engine and router. One memory row per flit.
  // ---------------------------------------------------------------------------------------------
  typedef struct packed {
    logic            head;
    logic            tail;
    logic [RowW-1:0] data;
  } row_flit_t;

  // The router's two local ports: [0] for the X and Y links, [1] for Z (tpu_ici_router).
  logic [1:0]            ici_rd_mem, ici_inj_valid, ici_inj_ready, ici_ej_valid, ici_ej_ready;
  logic [1:0][1:0]       ici_inj_vc, ici_ej_vc;
  logic [1:0][3:0]       ici_inj_vc_ready;
  logic [1:0]            ici_v_we, ici_a_we, ici_tx_ev, ici_rx_ev, ici_rx_drop;
  logic                  ici_credits_full;
  logic [1:0][15:0]      ici_rd_addr, ici_wr_addr;
  logic [1:0][RowW-1:0]  ici_wr_data, ici_v_rd_data, ici_a_rd_data;
  row_flit_t [1:0]       ici_inj_flit, ici_ej_flit;
  row_flit_t [NumDirs-1:0] ici_tx_flit, ici_rx_flit;
  // A head flit carries only its 8-byte header (tpu_ici_pkg::ici_hdr_t): on a link of
  // RowW / 8 / gap bytes a cycle it takes ceil(8 * gap / (4 * Lanes)) cycles (0 counts as 1,
  // as a gap of 0 does).
  logic [tpu_ici_pkg::LinkGapW-1:0] ici_link_hgap;
  assign ici_link_hgap =
      tpu_ici_pkg::LinkGapW'((2 * 32'(ici_link_gap_i) + Lanes - 1) / Lanes);
  logic [tpu_ici_pkg::StatW-1:0] ici_stat;
  logic             ici_rt_idle;
  // Idle: no flit in the router, none unacknowledged, no ACK or NAK waiting to go out.
  assign ici_idle_o = ici_rt_idle && (&lk_tx_idle) && (&lk_rx_idle);

  tpu_ici_eng #(
    .Lanes  (Lanes),
    .NumCnt (IciNumCnt),
    .PktRows(IciPktRows),
    .NumEng (IciSendContexts),
    .VpuSlots(VpuSlots)
  ) i_ici_eng (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .me_i          (ici_me_i),
    .topo_i        (ici_topo_i),
    .start_i       (ici_start),
    .ready_o       (ici_ready),
    .eng_o         (ici_eng),
    .src_mem_i     (c_send.src_mem),
    .src_row_i     (c_send.src_row),
    .rows_i        (c_send.rows),
    .dst_mem_i     (c_send.dst_mem),
    .dst_row_i     (c_send.dst_row),
    .dst_i         (tpu_ici_pkg::ici_coord_t'({c_send.dst_z, c_send.dst_y, c_send.dst_x})),
    .tie_i         (tpu_ici_pkg::ici_tie_t'(c_send.tie)),
    .cnt_i         (c_send.counter),
    .wait_i        (c_send.wait_rows),
    .wait_cnt_id_i (c_send.wait_counter[$clog2(IciNumCnt)-1:0]),
    .count_only_i  (c_send.count_only),
    .early_head_i  (c_send.early_head),
    .done_o        (ici_done),
    .in_o          (ici_in),
    .busy_o        (ici_busy),
    .rd_mem_o      (ici_rd_mem),
    .rd_addr_o     (ici_rd_addr),
    .vmem_rd_data_i(ici_v_rd_data),
    .amem_rd_data_i(ici_a_rd_data),
    .wait_cnt_i    (c_wait.counter[$clog2(IciNumCnt)-1:0]),
    .wait_val_i    (c_wait.value),
    .wait_ok_o     (wait_ok),
    .wait_take_i   (wait_take),
    .vpu_cnt_i     (vpu_cnt_id),
    .vpu_avail_o   (vpu_cnt_avail),
    .vpu_take_i    (vpu_cnt_take),
    .vpu_take_cnt_i(vpu_take_cnt),
    .vpu_sig_i     (vpu_sig),
    .vpu_sig_cnt_i (vpu_sig_cnt),
    .inj_valid_o   (ici_inj_valid),
    .inj_vc_o      (ici_inj_vc),
    .inj_vc_ready_i(ici_inj_vc_ready),
    .inj_flit_o    (ici_inj_flit),
    .ej_valid_i    (ici_ej_valid),
    .ej_ready_o    (ici_ej_ready),
    .ej_flit_i     (ici_ej_flit),
    .ej_vc_i       (ici_ej_vc),
    .vmem_we_o     (ici_v_we),
    .amem_we_o     (ici_a_we),
    .wr_addr_o     (ici_wr_addr),
    .wr_data_o     (ici_wr_data),
    .tx_flit_o     (ici_tx_ev),
    .rx_flit_o     (ici_rx_ev),
    .rx_drop_o     (ici_rx_drop)
  );

  // The link layer between each router link port and the wire.
  logic [NumDirs-1:0]             rt_tx_valid, rt_tx_cr_valid, rt_rx_valid, rt_rx_cr_valid;
  logic [NumDirs-1:0][IciVcW-1:0] rt_tx_vc, rt_tx_cr_vc, rt_rx_vc, rt_rx_cr_vc;
  logic [NumDirs-1:0]             lk_tx_idle, lk_rx_idle;
  logic [NumDirs-1:0][31:0]       lk_replays, lk_replayed, lk_ctl_err, lk_crc_err;
  row_flit_t [NumDirs-1:0]        w_tx_flit;
  for (genvar d = 0; d < NumDirs; d++) begin : gen_link
    tpu_ici_link_tx #(
      .flit_t    (row_flit_t),
      .NumVc     (4),
      .Depth     (IciDepth),
      .MaxReplays(8)
    ) i_link_tx (
      .clk_i        (clk_i),
      .rst_ni       (rst_ni),
      .link_gap_i   (ici_link_gap_i),
      .link_hgap_i  (ici_link_hgap),
      .timeout_i    (ici_replay_timeout_i),
      .tx_valid_i   (rt_tx_valid[d]),
      .tx_vc_i      (rt_tx_vc[d]),
      .tx_flit_i    (ici_tx_flit[d]),
      .tx_cr_valid_o(rt_tx_cr_valid[d]),
      .tx_cr_vc_o   (rt_tx_cr_vc[d]),
      .w_valid_o    (ici_tx_valid_o[d]),
      .w_vc_o       (ici_tx_vc_o[d]),
      .w_flit_o     (w_tx_flit[d]),
      .w_seq_o      (ici_tx_seq_o[d]),
      .w_crc_o      (ici_tx_crc_o[d]),
      .c_valid_i    (ici_tx_ctl_valid_i[d]),
      .c_ctl_i      (ici_tx_ctl_i[d]),
      .c_crc_i      (ici_tx_ctl_crc_i[d]),
      .down_o       (ici_link_down_o[d]),
      .idle_o       (lk_tx_idle[d]),
      .st_replays_o (lk_replays[d]),
      .st_replayed_o(lk_replayed[d]),
      .st_ctl_err_o (lk_ctl_err[d])
    );
    assign ici_tx_flit_o[d] = w_tx_flit[d];

    tpu_ici_link_rx #(
      .flit_t(row_flit_t),
      .NumVc (4)
    ) i_link_rx (
      .clk_i        (clk_i),
      .rst_ni       (rst_ni),
      .w_valid_i    (ici_rx_valid_i[d]),
      .w_vc_i       (ici_rx_vc_i[d]),
      .w_flit_i     (row_flit_t'(ici_rx_flit_i[d])),
      .w_seq_i      (ici_rx_seq_i[d]),
      .w_crc_i      (ici_rx_crc_i[d]),
      .c_valid_o    (ici_rx_ctl_valid_o[d]),
      .c_ctl_o      (ici_rx_ctl_o[d]),
      .c_crc_o      (ici_rx_ctl_crc_o[d]),
      .rx_valid_o   (rt_rx_valid[d]),
      .rx_vc_o      (rt_rx_vc[d]),
      .rx_flit_o    (ici_rx_flit[d]),
      .rx_cr_valid_i(rt_rx_cr_valid[d]),
      .rx_cr_vc_i   (rt_rx_cr_vc[d]),
      .idle_o       (lk_rx_idle[d]),
      .st_crc_err_o (lk_crc_err[d])
    );
  end
  assign ici_rx_cr_valid_o = rt_rx_cr_valid;
  assign ici_rx_cr_vc_o    = rt_rx_cr_vc;

  always_comb begin
    ici_lstat_o = '0;
    if (32'(ici_lstat_dir_i) < NumDirs) begin
      unique case (ici_lstat_sel_i)
        tpu_ici_pkg::LINK_ST_CRC_ERR:  ici_lstat_o = lk_crc_err[ici_lstat_dir_i];
        tpu_ici_pkg::LINK_ST_CTL_ERR:  ici_lstat_o = lk_ctl_err[ici_lstat_dir_i];
        tpu_ici_pkg::LINK_ST_REPLAYS:  ici_lstat_o = lk_replays[ici_lstat_dir_i];
        tpu_ici_pkg::LINK_ST_REPLAYED: ici_lstat_o = lk_replayed[ici_lstat_dir_i];
        tpu_ici_pkg::LINK_ST_DOWN:     ici_lstat_o = 32'(ici_link_down_o[ici_lstat_dir_i]);
        default:                       ici_lstat_o = '0;
      endcase
    end
  end

  // A link down stops the program (tpu_seq): the lowest direction that is down.
  logic       link_down;
  logic [2:0] link_down_dir;
  always_comb begin
    link_down     = |ici_link_down_o;
    link_down_dir = '0;
    for (int d = NumDirs - 1; d >= 0; d--) if (ici_link_down_o[d]) link_down_dir = 3'(d);
  end

  tpu_ici_router #(
    .flit_t    (row_flit_t),
    .NumVc     (4),
    .Depth     (IciDepth),
    .EjectDepth(2),
    .InjVcSel  (1'b1),
    .LocalPorts(2)
  ) i_ici_router (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .me_i          (ici_me_i),
    .topo_i        (ici_topo_i),
    .link_gap_i    (ici_link_gap_i),
    .link_hgap_i   (ici_link_hgap),
    .tx_valid_o    (rt_tx_valid),
    .tx_vc_o       (rt_tx_vc),
    .tx_flit_o     (ici_tx_flit),
    .tx_cr_valid_i (rt_tx_cr_valid),
    .tx_cr_vc_i    (rt_tx_cr_vc),
    .rx_valid_i    (rt_rx_valid),
    .rx_vc_i       (rt_rx_vc),
    .rx_flit_i     (ici_rx_flit),
    .rx_cr_valid_o (rt_rx_cr_valid),
    .rx_cr_vc_o    (rt_rx_cr_vc),
    .inj_valid_i   (ici_inj_valid),
    .inj_ready_o   (ici_inj_ready),
    .inj_flit_i    (ici_inj_flit),
    .inj_vc_i      (ici_inj_vc),
    .inj_vc_ready_o(ici_inj_vc_ready),
    .ej_valid_o    (ici_ej_valid),
    .ej_ready_i    (ici_ej_ready),
    .ej_flit_o     (ici_ej_flit),
    .ej_vc_o       (ici_ej_vc),
    .stat_port_i   (tpu_ici_pkg::PORT_LOCAL),
    .stat_vc_i     (2'd0),
    .stat_sel_i    (tpu_ici_pkg::ICI_ST_FLITS_IN),
    .stat_o        (ici_stat),
    .idle_o        (ici_rt_idle),
    .credits_full_o(ici_credits_full)
  );

  // ---------------------------------------------------------------------------------------------
  // HBM controller, two request and two response ports, shared by the DMA (its two lanes) and
  // the host port. Port 0: the host when it asks, else DMA lane 0; a choice holds while its
  // request waits (payload stability). Port 1: DMA lane 1. Responses go back by tag bit 7
  // (1: host); the host takes one a cycle (port 0's first), its choice held while it waits.
  // ---------------------------------------------------------------------------------------------
  logic     [1:0] ctrl_req_valid, ctrl_req_ready, ctrl_rsp_valid, ctrl_rsp_ready, rsp_host;
  logic     ctrl_idle;
  hbm_req_t [1:0] ctrl_req;
  hbm_req_t host_req;
  hbm_rsp_t [1:0] ctrl_rsp;
  logic     grant_host, lock_q, lock_d, lock_host_q, lock_host_d;
  logic     hsel, hsel_q, hlock_q;  // the response port the host is shown
  logic [NumCh-1:0] ref_pending;

  assign host_req = '{write: hm_req_write_i, addr: hm_req_addr_i, tag: {1'b1, hm_req_tag_i},
                      data: hm_req_data_i};
  assign grant_host        = lock_q ? lock_host_q : hm_req_valid_i;
  assign ctrl_req_valid[0] = grant_host ? hm_req_valid_i : dma_req_valid[0];
  assign ctrl_req[0]       = grant_host ? host_req : dma_req[0];
  assign ctrl_req_valid[1] = dma_req_valid[1];
  assign ctrl_req[1]       = dma_req[1];
  assign hm_req_ready_o    = grant_host && ctrl_req_ready[0];
  assign dma_req_ready     = {ctrl_req_ready[1], !grant_host && ctrl_req_ready[0]};
  assign lock_d            = ctrl_req_valid[0] && !ctrl_req_ready[0];
  assign lock_host_d       = grant_host;

  assign rsp_host       = {ctrl_rsp[1].tag[7], ctrl_rsp[0].tag[7]};
  assign hsel           = hlock_q ? hsel_q : !(ctrl_rsp_valid[0] && rsp_host[0]);
  assign hm_rsp_valid_o = ctrl_rsp_valid[hsel] && rsp_host[hsel];
  assign dma_rsp_valid  = ctrl_rsp_valid & ~rsp_host;
  assign ctrl_rsp_ready = {rsp_host[1] ? hm_rsp_ready_i && hsel : dma_rsp_ready[1],
                           rsp_host[0] ? hm_rsp_ready_i && !hsel : dma_rsp_ready[0]};
  assign hm_rsp_write_o = ctrl_rsp[hsel].write;
  assign hm_rsp_tag_o   = ctrl_rsp[hsel].tag[6:0];
  assign hm_rsp_data_o  = ctrl_rsp[hsel].data;
  assign hm_rsp_ue_o    = ctrl_rsp[hsel].ue;

  // The HBM timing and controller settings, held in registers as configuration registers are
  // (loaded from the ports every cycle, no reset: hold the ports steady through reset and the
  // run, as the harness does). Besides being what hardware does, this keeps the scheduler of
  // every channel off the chip's input ports: a verilated model re-evaluates all logic that
  // depends combinationally on a top-level input at every eval() (twice a cycle), and the
  // timing values reach nearly every next-state equation of tpu_hbm_chan (~16% of a 16x16
  // chip's simulation time before; docs/scale.md, "One core").
  hbm_timing_t hbm_timing_q;
  hbm_ctrl_cfg_t hbm_cfg_q;
  always_ff @(posedge clk_i) begin
    hbm_timing_q <= hbm_timing_i;
    hbm_cfg_q <= hbm_cfg_i;
  end

  hbm_ctr_t hbm_stat;
  logic [7:0] ecc_ce, ecc_ue;
  tpu_hbm_ctrl #(
    .NumCh      (NumCh),
    .NumPorts   (2),
    .RowsPerBank(Cfg.hbm_rows_per_bank)
  ) i_hbm_ctrl (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .timing_i     (hbm_timing_q),
    .cfg_i        (hbm_cfg_q),
    .req_valid_i  (ctrl_req_valid),
    .req_ready_o  (ctrl_req_ready),
    .req_i        (ctrl_req),
    .rsp_valid_o  (ctrl_rsp_valid),
    .rsp_ready_i  (ctrl_rsp_ready),
    .rsp_o        (ctrl_rsp),
    .cmd_o        (hbm_cmd_o),
    .wvalid_o     (hbm_wvalid_o),
    .wdata_o      (hbm_wdata_o),
    .wcheck_o     (hbm_wcheck_o),
    .rvalid_i     (hbm_rvalid_i),
    .rdata_i      (hbm_rdata_i),
    .rcheck_i     (hbm_rcheck_i),
    .ecc_ce_o     (ecc_ce),
    .ecc_ue_o     (ecc_ue),
    .stat_ch_i    ('0),
    .stat_id_i    (StatRdReqs),
    .stat_o       (hbm_stat),
    .ref_pending_o(ref_pending),
    .idle_o       (ctrl_idle)
  );

  // ---------------------------------------------------------------------------------------------
  // Statistics
  // ---------------------------------------------------------------------------------------------
  logic [63:0] stats_q [CHIP_NUM_STATS];
  logic [63:0] stats_d [CHIP_NUM_STATS];
  logic [1:0]  dma_req_fire;
  logic        host_req_fire, host_rsp_fire, host_busy;
  logic        cls_compute, cls_comm, cls_mem, cls_idle;
  logic [7:0]  host_out_q, host_out_d;  // host-port HBM requests outstanding (<= 128 tags)
  localparam longint unsigned MacsPerBeat = longint'(Cfg.mxu_rows) * Cfg.mxu_cols;

  assign dma_req_fire  = dma_req_valid & dma_req_ready;
  assign host_req_fire = hm_req_valid_i && hm_req_ready_o;
  assign host_rsp_fire = hm_rsp_valid_o && hm_rsp_ready_i;
  assign host_out_d    = host_out_q + 8'(host_req_fire) - 8'(host_rsp_fire);
  assign host_busy     = hm_req_valid_i || (host_out_q != '0);

  // Every cycle in exactly one class, in this priority (docs/profiling.md).
  // A VPU command that waits for its next x row over ICI (x_wait) is communication, not compute.
  assign cls_compute = inflight[1] || inflight[2] || (inflight[3] && !vpu_rows_wait);
  assign cls_comm    = !cls_compute && (inflight[4] || (|ici_ej_valid) || wait_block ||
                                        vpu_rows_wait);
  assign cls_mem     = !cls_compute && !cls_comm && (inflight[0] || host_busy);
  assign cls_idle    = !cls_compute && !cls_comm && !cls_mem;

  always_comb begin
    for (int unsigned s = 0; s < CHIP_NUM_STATS; s++) stats_d[s] = stats_q[s];
    stats_d[StatCycles] = stats_q[StatCycles] + 64'd1;
    if (mxu_busy) stats_d[StatMxuBusy] = stats_q[StatMxuBusy] + 64'd1;
    if (mxu_a_beat) stats_d[StatMxuBeats] = stats_q[StatMxuBeats] + 64'd1;
    if (vpu_busy) stats_d[StatVpuBusy] = stats_q[StatVpuBusy] + 64'd1;
    if (dma_busy) stats_d[StatDmaBusy] = stats_q[StatDmaBusy] + 64'd1;
    for (int unsigned l = 0; l < 2; l++) begin
      if (dma_req_fire[l] && !dma_req[l].write)
        stats_d[StatDmaRdBytes] = stats_d[StatDmaRdBytes] + 64'(HBM_BURST_BYTES);
      if (dma_req_fire[l] && dma_req[l].write)
        stats_d[StatDmaWrBytes] = stats_d[StatDmaWrBytes] + 64'(HBM_BURST_BYTES);
    end
    if (dma_busy && mxu_busy) stats_d[StatOverlap] = stats_q[StatOverlap] + 64'd1;
    stats_d[StatCmdsDone] = stats_q[StatCmdsDone] + 64'(retired);
    if (host_req_fire && !hm_req_write_i)
      stats_d[StatHostRdBytes] = stats_q[StatHostRdBytes] + 64'(HBM_BURST_BYTES);
    if (host_req_fire && hm_req_write_i)
      stats_d[StatHostWrBytes] = stats_q[StatHostWrBytes] + 64'(HBM_BURST_BYTES);
    if (mxu_w_beat) stats_d[StatWeightBeats] = stats_q[StatWeightBeats] + 64'd1;
    stats_d[StatIciTxFlits] = stats_q[StatIciTxFlits] + 64'($countones(ici_tx_ev));
    stats_d[StatIciRxFlits] = stats_q[StatIciRxFlits] + 64'($countones(ici_rx_ev));
    if (|ici_busy) stats_d[StatIciBusy] = stats_q[StatIciBusy] + 64'd1;
    if (wait_block) stats_d[StatIciWait] = stats_q[StatIciWait] + 64'd1;
    if (mxu_a_beat) stats_d[StatMxuMacs] = stats_q[StatMxuMacs] + 64'(MacsPerBeat);
    if (inflight[1]) stats_d[StatLoadWFlight] = stats_q[StatLoadWFlight] + 64'd1;
    if (inflight[2]) stats_d[StatMatmulFlight] = stats_q[StatMatmulFlight] + 64'd1;
    if (inflight[2] && !mxu_a_beat)
      stats_d[StatMxuStarved] = stats_q[StatMxuStarved] + 64'd1;
    if (inflight[0]) stats_d[StatDmaFlight] = stats_q[StatDmaFlight] + 64'd1;
    if (inflight[3]) stats_d[StatVpuFlight] = stats_q[StatVpuFlight] + 64'd1;
    if (inflight[4]) stats_d[StatSendFlight] = stats_q[StatSendFlight] + 64'd1;
    if (|ici_ej_valid) stats_d[StatIciRxBusy] = stats_q[StatIciRxBusy] + 64'd1;
    if (host_busy) stats_d[StatHostBusy] = stats_q[StatHostBusy] + 64'd1;
    if (!busy_o) stats_d[StatSeqIdle] = stats_q[StatSeqIdle] + 64'd1;
    if (cls_compute) stats_d[StatClsCompute] = stats_q[StatClsCompute] + 64'd1;
    if (cls_comm) stats_d[StatClsComm] = stats_q[StatClsComm] + 64'd1;
    if (cls_mem) stats_d[StatClsMemory] = stats_q[StatClsMemory] + 64'd1;
    if (cls_idle) stats_d[StatClsIdle] = stats_q[StatClsIdle] + 64'd1;
    stats_d[StatEccCorrected] = stats_q[StatEccCorrected] + 64'(ecc_ce);
    stats_d[StatEccUncorr] = stats_q[StatEccUncorr] + 64'(ecc_ue);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      lock_q      <= 1'b0;
      lock_host_q <= 1'b0;
      hsel_q      <= 1'b0;
      hlock_q     <= 1'b0;
      host_out_q  <= '0;
      for (int unsigned s = 0; s < CHIP_NUM_STATS; s++) stats_q[s] <= '0;
    end else begin
      lock_q      <= lock_d;
      lock_host_q <= lock_host_d;
      hsel_q      <= hsel;
      hlock_q     <= hm_rsp_valid_o && !hm_rsp_ready_i;
      host_out_q  <= host_out_d;
      for (int unsigned s = 0; s < CHIP_NUM_STATS; s++) stats_q[s] <= stats_d[s];
    end
  end

  // For ClassesSumToCycles_A (Verilator wants plain signals in an assertion, not array selects).
  logic [63:0] cls_sum, cycles_now;
  assign cls_sum = stats_q[StatClsCompute] + stats_q[StatClsComm] + stats_q[StatClsMemory] +
                   stats_q[StatClsIdle];
  assign cycles_now = stats_q[StatCycles];

  assign stat_o = (32'(stat_id_i) < CHIP_NUM_STATS) ? stats_q[stat_id_i] : '0;

  // Unit addresses are 16 bits; the sequencer has checked every range against the memory size,
  // so the bits above a memory's address width are zero. Opcode bits are the sequencer's.
  logic unused_bits;
  assign hbm_idle_o = ctrl_idle;
  assign unused_bits = ^{hbm_stat, ref_pending, dmaq_count, dma_cmd.op, head.op, dma_rd_addr,
                         dma_wr_addr,
                         mxu_w_addr, mxu_a_addr, mxu_c_addr, mxu_c_wr_addr, vpu_x_addr,
                         vpu_y_addr, vpu_wr_addr, vpu_x_mem, vpu_y_mem, ici_rd_mem, ici_rd_addr,
                         ici_wr_addr, ici_rx_drop, ici_stat, ici_credits_full, ici_inj_ready,
                         c_lw.rsvd_80, c_lw.rsvd_32, c_lw.rsvd_5, c_lw.op, c_mm.rsvd_80,
                         c_mm.rsvd_5, c_mm.op, c_vpu.rsvd_125, c_vpu.rsvd_98, c_vpu.rsvd_4,
                         c_vpu.op,
                         c_vpu.x_counter[7:$clog2(IciNumCnt)],
                         c_vpu.sig_counter[7:$clog2(IciNumCnt)], c_send.rsvd_104,
                         c_send.wait_counter[7:$clog2(IciNumCnt)], c_send.rsvd_92,
                         c_send.wait_local, c_send.rsvd_76, c_send.rsvd_8, c_send.op,
                         c_wait.rsvd_96, c_wait.rsvd_32, c_wait.rsvd_4, c_wait.op,
                         c_wait.counter[15:$clog2(IciNumCnt)], c_dma.op,
                         c_dmx.rsvd_6, c_dmx.op};

  // Assertions
  `TPU_ASSERT(HostReqHeld_A,
      hm_req_valid_i && !hm_req_ready_o |=> hm_req_valid_i,
      ("%m: HostReqHeld_A failed"))
  `TPU_ASSERT(HostRspHeld_A,
      hm_rsp_valid_o && !hm_rsp_ready_i |=> hm_rsp_valid_o,
      ("%m: HostRspHeld_A failed"))
  // The host port's payloads stable while they wait. Immediate, at the clock edge, against a
  // copy taken only while a beat waits: as concurrent $stable checks a verilated model sampled
  // and copied both whole payloads (a 64-byte line each) at every eval() (docs/scale.md). The
  // request as the controller's port sees it (`host_req`), the response as the host is shown it
  // (`ctrl_rsp[hsel]`, whose tag bit 7 is 1 while it is valid).
  hbm_req_t host_req_held_q;
  hbm_rsp_t host_rsp_held_q;
  logic host_req_wait_q, host_rsp_wait_q;
  always_ff @(posedge clk_i) begin
    if (rst_ni && host_req_wait_q) begin
      `TPU_ASSERT_I(HostReqStable_A, host_req == host_req_held_q,
          ("tpu_chip: HostReqStable_A failed: the host request changed while not ready"))
    end
    if (rst_ni && host_rsp_wait_q) begin
      `TPU_ASSERT_I(HostRspStable_A, ctrl_rsp[hsel] == host_rsp_held_q,
          ("tpu_chip: HostRspStable_A failed: the host response changed while not ready"))
    end
    host_req_wait_q <= hm_req_valid_i && !hm_req_ready_o;
    host_rsp_wait_q <= hm_rsp_valid_o && !hm_rsp_ready_i;
    if (hm_req_valid_i && !hm_req_ready_o) host_req_held_q <= host_req;
    if (hm_rsp_valid_o && !hm_rsp_ready_i) host_rsp_held_q <= ctrl_rsp[hsel];
  end
  `TPU_ASSERT(HostOutNoWrap_A,
      !(host_rsp_fire && !host_req_fire && host_out_q == '0) &&
      !(host_req_fire && !host_rsp_fire && host_out_q == '1),
      ("%m: HostOutNoWrap_A failed"))
  // The four classes split every cycle: one per cycle, so their counters add up to StatCycles.
  `TPU_ASSERT(CycleOneClass_A,
      $onehot({cls_compute, cls_comm, cls_mem, cls_idle}),
      ("%m: CycleOneClass_A failed"))
  `TPU_ASSERT(ClassesSumToCycles_A,
      cls_sum == cycles_now,
      ("%m: ClassesSumToCycles_A failed"))
  // A DMA_IDX's list rows are not written while it still reads them: the sequencer orders the
  // chip's own commands; a remote write (ICI) into them is the program's race, caught here.
  for (genvar k = 0; k < 5; k++) begin : gen_list_sva
    `TPU_ASSERT(IdxListStable_A,
        v_we[k] |-> !(32'(v_wr_addr[k]) >= 32'(dma_list_lo) &&
                      32'(v_wr_addr[k]) < 32'(dma_list_hi)),
        ("%m: IdxListStable_A failed: VMEM port %0d wrote row %0d of a DMA_IDX list [%0d, %0d)",
         k, v_wr_addr[k], dma_list_lo, dma_list_hi))
  end
  `TPU_ASSERT_INIT(SquareArray_A, Cfg.mxu_rows == Cfg.mxu_cols,
      ("tpu_chip: the MXU must be square (%0d x %0d)", Cfg.mxu_rows, Cfg.mxu_cols))

endmodule
