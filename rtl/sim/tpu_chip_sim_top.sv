// tpu_chip_sim_top: SIMULATION-ONLY top for the C++ harness (tb/chip): tpu_chip + hbm_device.
//
// Flat ports so that C++ drives them by name: HBM timing and controller configuration (held
// constant after reset), the chip's host port (commands, HBM access, status) and the device
// checker's violation count; the ICI configuration and links, per direction d (+X -X +Y -Y +Z
// -Z) a flit's row in `*_data[d]` and its {head, tail} bits in `*_ht[d]` (word-aligned for C++),
// its link sequence number and CRC in `*_seq[d]`, `*_crc[d]`; the link's control words (CtlW bits
// in 32) and their CRC in `ici_tx_ctl*` / `ici_rx_ctl*`.
// See tpu_chip for the handshakes and latencies.
module tpu_chip_sim_top
  import tpu_hbm_pkg::*;
  import tpu_chip_pkg::*;
#(
  parameter  int unsigned        VariantId = 0,
  localparam tpu_pkg::chip_cfg_t Cfg       = tpu_pkg::variant_cfg(tpu_pkg::variant_e'(VariantId)),
  localparam int unsigned        NumCh     = Cfg.hbm_channels,
  localparam int unsigned        RowW      = Cfg.mxu_cols * 32
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  input  logic [15:0]  t_cl_i,
  input  logic [15:0]  t_cwl_i,
  input  logic [15:0]  t_rcd_i,
  input  logic [15:0]  t_rp_i,
  input  logic [15:0]  t_ras_i,
  input  logic [15:0]  t_rc_i,
  input  logic [15:0]  t_ccd_s_i,
  input  logic [15:0]  t_ccd_l_i,
  input  logic [15:0]  t_rrd_s_i,
  input  logic [15:0]  t_rrd_l_i,
  input  logic [15:0]  t_faw_i,
  input  logic [15:0]  t_wr_i,
  input  logic [15:0]  t_wtr_s_i,
  input  logic [15:0]  t_wtr_l_i,
  input  logic [15:0]  t_rtp_i,
  input  logic [15:0]  t_rfc_i,
  input  logic [15:0]  t_refi_i,
  input  logic [1:0]   addr_map_i,
  input  logic [15:0]  starve_cap_i,
  input  logic [7:0]   wr_hi_i,
  input  logic [7:0]   wr_lo_i,
  // commands
  input  logic         cmd_valid_i,
  output logic         cmd_ready_o,
  input  logic [127:0] cmd_i,
  // HBM access
  input  logic         hm_req_valid_i,
  output logic         hm_req_ready_o,
  input  logic         hm_req_write_i,
  input  logic [31:0]  hm_req_addr_i,
  input  logic [6:0]   hm_req_tag_i,
  input  logic [511:0] hm_req_data_i,
  output logic         hm_rsp_valid_o,
  input  logic         hm_rsp_ready_i,
  output logic         hm_rsp_write_o,
  output logic [6:0]   hm_rsp_tag_o,
  output logic [511:0] hm_rsp_data_o,
  output logic [7:0]   hm_rsp_ue_o,     // words of the response with an uncorrectable ECC error
  // status
  input  logic         clear_i,
  output logic         busy_o,
  output logic         hbm_idle_o,
  output logic         halted_o,
  output logic [7:0]   err_o,
  output logic [31:0]  err_cmd_o,
  output logic [31:0]  err_addr_o,
  input  logic [$bits(chip_stat_e)-1:0] stat_id_i,  // as wide as the statistics need
  output logic [63:0]  stat_o,
  // trace port (tpu_chip: trc_*)
  output logic         trc_issue_o,
  output logic [3:0]   trc_op_o,
  output logic [31:0]  trc_idx_o,
  output logic [2:0]   trc_eng_o,
  output logic [9:0]   trc_done_o,
  output logic         trc_wait_o,
  output logic [31:0]  viol_count_o,
  // ICI
  input  logic [$bits(tpu_ici_pkg::ici_coord_t)-1:0] ici_me_i,    // {z, y, x}
  input  logic [$bits(tpu_ici_pkg::ici_topo_t)-1:0]  ici_topo_i,  // tpu_ici_pkg::ici_topo_t
  input  logic [tpu_ici_pkg::LinkGapW-1:0] ici_link_gap_i,
  input  logic [15:0]      ici_replay_timeout_i,
  input  logic [15:0]      mem_vrows_i,     // on-chip rows exposed (0: all)
  input  logic [15:0]      mem_arows_i,
  output logic [5:0]       ici_tx_valid_o,
  output logic [11:0]      ici_tx_vc_o,     // 2 bits per direction
  output logic [5:0][RowW-1:0] ici_tx_data_o,
  output logic [5:0][1:0]  ici_tx_ht_o,
  output logic [5:0][7:0]  ici_tx_seq_o,
  output logic [5:0][31:0] ici_tx_crc_o,
  input  logic [5:0]       ici_tx_ctl_valid_i,
  input  logic [5:0][31:0] ici_tx_ctl_i,    // CtlW bits used, the rest zero
  input  logic [5:0][31:0] ici_tx_ctl_crc_i,
  input  logic [5:0]       ici_rx_valid_i,
  input  logic [11:0]      ici_rx_vc_i,
  input  logic [5:0][RowW-1:0] ici_rx_data_i,
  input  logic [5:0][1:0]  ici_rx_ht_i,
  input  logic [5:0][7:0]  ici_rx_seq_i,
  input  logic [5:0][31:0] ici_rx_crc_i,
  output logic [5:0]       ici_rx_ctl_valid_o,
  output logic [5:0][31:0] ici_rx_ctl_o,
  output logic [5:0][31:0] ici_rx_ctl_crc_o,
  output logic [5:0]       ici_rx_cr_valid_o,  // the router's credits (observation)
  output logic [11:0]      ici_rx_cr_vc_o,
  output logic [5:0]       ici_link_down_o,
  input  logic [2:0]       ici_lstat_sel_i,    // tpu_ici_pkg::link_stat_e
  input  logic [2:0]       ici_lstat_dir_i,
  output logic [31:0]      ici_lstat_o,
  output logic             ici_idle_o,
  // Backdoor into the HBM device (no simulated time; see hbm_device): a rising edge of bd_stb_i
  // between clock cycles writes bd_wdata_i at byte address bd_addr_i (64-byte block, decoded
  // with the controller's address map) when bd_we_i, and shows the block on bd_rdata_o.
  input  logic             bd_stb_i,
  input  logic             bd_we_i,
  input  logic [31:0]      bd_addr_i,
  input  logic [511:0]     bd_wdata_i,
  output logic [511:0]     bd_rdata_o,
  output logic [7:0]       bd_ue_o,       // words of the backdoor read with an uncorrectable error
  // HBM fault injection (hbm_device.sv): random flips per word read, seeded at reset; one-time
  // flips armed by a rising edge of fi_stb_i for the word at byte address fi_addr_i
  input  logic [63:0]      fi_seed_i,
  input  logic [31:0]      fi_sbe_thr_i,
  input  logic [31:0]      fi_dbe_thr_i,
  input  logic             fi_stb_i,
  input  logic [31:0]      fi_addr_i,
  input  logic [71:0]      fi_mask_i,
  output logic [31:0]      fi_sbe_o,
  output logic [31:0]      fi_dbe_o
);

  localparam int unsigned CtlW = tpu_ici_pkg::link_ctl_width(4);
  logic [5:0][RowW+1:0] tx_flit, rx_flit;
  logic [5:0][CtlW-1:0] tx_ctl, rx_ctl;
  for (genvar d = 0; d < 6; d++) begin : gen_link
    assign {ici_tx_ht_o[d], ici_tx_data_o[d]} = tx_flit[d];
    assign rx_flit[d] = {ici_rx_ht_i[d], ici_rx_data_i[d]};
    assign tx_ctl[d] = ici_tx_ctl_i[d][CtlW-1:0];
    assign ici_rx_ctl_o[d] = 32'(rx_ctl[d]);
  end

  hbm_timing_t timing;
  hbm_ctrl_cfg_t cfg;
  hbm_cmd_t [NumCh-1:0] hbm_cmd;
  logic [NumCh-1:0] wvalid, rvalid;
  hbm_bus_t [NumCh-1:0] wdata, rdata;
  hbm_bus_ecc_t [NumCh-1:0] wcheck, rcheck;
  chip_err_e err;
  chip_op_e  trc_op;
  logic [31:0] viol_mask;
  hbm_rule_e viol_last;
  // The same decode as the chip's HBM controller (tpu_hbm_ctrl: ChW, RowW).
  localparam int unsigned BdChW = (NumCh > 1) ? $clog2(NumCh) : 0;
  localparam int unsigned BdRowW = $clog2(Cfg.hbm_rows_per_bank);
  hbm_loc_t bd_loc;
  assign bd_loc = hbm_decode(bd_addr_i, hbm_map_e'(addr_map_i), BdChW, BdRowW);
  hbm_loc_t fi_loc;
  assign fi_loc = hbm_decode(fi_addr_i, hbm_map_e'(addr_map_i), BdChW, BdRowW);

  assign timing = '{cl: t_cl_i, cwl: t_cwl_i, rcd: t_rcd_i, rp: t_rp_i, ras: t_ras_i,
                    rc: t_rc_i, ccd_s: t_ccd_s_i, ccd_l: t_ccd_l_i, rrd_s: t_rrd_s_i,
                    rrd_l: t_rrd_l_i, faw: t_faw_i, wr: t_wr_i, wtr_s: t_wtr_s_i,
                    wtr_l: t_wtr_l_i, rtp: t_rtp_i, rfc: t_rfc_i, refi: t_refi_i};
  assign cfg = '{addr_map: hbm_map_e'(addr_map_i), starve_cap: starve_cap_i, wr_hi: wr_hi_i,
                 wr_lo: wr_lo_i};

  tpu_chip #(
    .VariantId(VariantId)
  ) i_chip (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .hbm_timing_i  (timing),
    .hbm_cfg_i     (cfg),
    .cmd_valid_i   (cmd_valid_i),
    .cmd_ready_o   (cmd_ready_o),
    .cmd_i         (chip_cmd_t'(cmd_i)),
    .hm_req_valid_i(hm_req_valid_i),
    .hm_req_ready_o(hm_req_ready_o),
    .hm_req_write_i(hm_req_write_i),
    .hm_req_addr_i (hm_req_addr_i),
    .hm_req_tag_i  (hm_req_tag_i),
    .hm_req_data_i (hm_req_data_i),
    .hm_rsp_valid_o(hm_rsp_valid_o),
    .hm_rsp_ready_i(hm_rsp_ready_i),
    .hm_rsp_write_o(hm_rsp_write_o),
    .hm_rsp_tag_o  (hm_rsp_tag_o),
    .hm_rsp_data_o (hm_rsp_data_o),
    .hm_rsp_ue_o   (hm_rsp_ue_o),
    .clear_i       (clear_i),
    .busy_o        (busy_o),
    .hbm_idle_o    (hbm_idle_o),
    .halted_o      (halted_o),
    .err_o         (err),
    .err_cmd_o     (err_cmd_o),
    .err_addr_o    (err_addr_o),
    .stat_id_i     (chip_stat_e'(stat_id_i)),
    .stat_o        (stat_o),
    .trc_issue_o   (trc_issue_o),
    .trc_op_o      (trc_op),
    .trc_idx_o     (trc_idx_o),
    .trc_eng_o     (trc_eng_o),
    .trc_done_o    (trc_done_o),
    .trc_wait_o    (trc_wait_o),
    .ici_me_i      (tpu_ici_pkg::ici_coord_t'(ici_me_i)),
    .ici_topo_i    (tpu_ici_pkg::ici_topo_t'(ici_topo_i)),
    .ici_link_gap_i(ici_link_gap_i),
    .ici_replay_timeout_i(ici_replay_timeout_i),
    .mem_vrows_i   (mem_vrows_i),
    .mem_arows_i   (mem_arows_i),
    .ici_tx_valid_o(ici_tx_valid_o),
    .ici_tx_vc_o   (ici_tx_vc_o),
    .ici_tx_flit_o (tx_flit),
    .ici_tx_seq_o  (ici_tx_seq_o),
    .ici_tx_crc_o  (ici_tx_crc_o),
    .ici_tx_ctl_valid_i(ici_tx_ctl_valid_i),
    .ici_tx_ctl_i  (tx_ctl),
    .ici_tx_ctl_crc_i(ici_tx_ctl_crc_i),
    .ici_rx_valid_i(ici_rx_valid_i),
    .ici_rx_vc_i   (ici_rx_vc_i),
    .ici_rx_flit_i (rx_flit),
    .ici_rx_seq_i  (ici_rx_seq_i),
    .ici_rx_crc_i  (ici_rx_crc_i),
    .ici_rx_ctl_valid_o(ici_rx_ctl_valid_o),
    .ici_rx_ctl_o  (rx_ctl),
    .ici_rx_ctl_crc_o(ici_rx_ctl_crc_o),
    .ici_rx_cr_valid_o(ici_rx_cr_valid_o),
    .ici_rx_cr_vc_o(ici_rx_cr_vc_o),
    .ici_link_down_o(ici_link_down_o),
    .ici_lstat_sel_i(tpu_ici_pkg::link_stat_e'(ici_lstat_sel_i)),
    .ici_lstat_dir_i(ici_lstat_dir_i),
    .ici_lstat_o   (ici_lstat_o),
    .ici_idle_o    (ici_idle_o),
    .hbm_cmd_o     (hbm_cmd),
    .hbm_wvalid_o  (wvalid),
    .hbm_wdata_o   (wdata),
    .hbm_wcheck_o  (wcheck),
    .hbm_rvalid_i  (rvalid),
    .hbm_rdata_i   (rdata),
    .hbm_rcheck_i  (rcheck)
  );
  assign err_o = err;
  assign trc_op_o = trc_op;

  hbm_device #(
    .NumCh      (NumCh),
    .RowsPerBank(Cfg.hbm_rows_per_bank)
  ) i_dev (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .timing_i    (timing),
    .cmd_i       (hbm_cmd),
    .wvalid_i    (wvalid),
    .wdata_i     (wdata),
    .wcheck_i    (wcheck),
    .rvalid_o    (rvalid),
    .rdata_o     (rdata),
    .rcheck_o    (rcheck),
    .viol_count_o(viol_count_o),
    .viol_mask_o (viol_mask),
    .viol_last_o (viol_last),
    .bd_stb_i    (bd_stb_i),
    .bd_we_i     (bd_we_i),
    .bd_loc_i    (bd_loc),
    .bd_wdata_i  (bd_wdata_i),
    .bd_rdata_o  (bd_rdata_o),
    .bd_ue_o     (bd_ue_o),
    .fi_seed_i   (fi_seed_i),
    .fi_sbe_thr_i(fi_sbe_thr_i),
    .fi_dbe_thr_i(fi_dbe_thr_i),
    .fi_stb_i    (fi_stb_i),
    .fi_loc_i    (fi_loc),
    .fi_word_i   (fi_addr_i[5:3]),
    .fi_mask_i   (fi_mask_i),
    .fi_sbe_o    (fi_sbe_o),
    .fi_dbe_o    (fi_dbe_o)
  );

  logic unused_bits;
  logic [5:0][31-CtlW:0] unused_ctl;
  for (genvar d = 0; d < 6; d++) begin : gen_unused
    assign unused_ctl[d] = ici_tx_ctl_i[d][31:CtlW];
  end
  assign unused_bits = ^{viol_mask, viol_last, unused_ctl};

endmodule
