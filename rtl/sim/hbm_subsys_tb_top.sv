// hbm_subsys_tb_top: SIMULATION-ONLY top for the C++ harness (tb/hbm): tpu_hbm_ctrl + hbm_device.
//
// Ports are flat scalars and vectors so that C++ can drive them by name: the timing values and
// controller configuration (hold them constant after reset), the host request / response streams,
// a statistics read port and the device checker's violation report. The controller has two
// request / response ports (NumPorts = 2, as in the chip): port 0 is req_* / rsp_*, port 1
// req1_* / rsp1_* (a harness that drives only port 0 holds req1_valid_i low). With `dev_direct_i` set, the
// harness drives the device's command and write-data buses of channel `dbg_ch_i` itself (the
// controller's commands are dropped), to prove the checker catches illegal sequences; the
// monitor outputs show channel `dbg_ch_i`'s command and read-data buses in either mode.
// ECC: directly driven write data gets its SECDED check bits here, XORed with
// `dbg_wcheck_flip_i` (to prove the device's write-ECC rule fires); `rsp_ue_o` is the response's
// uncorrectable-word mask; `fi_*` are the device's random fault injection inputs.
module hbm_subsys_tb_top
  import tpu_hbm_pkg::*;
#(
  parameter int unsigned NumCh = 2,
  parameter int unsigned RowsPerBank = 64
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  // timing, in tCK (tpu_hbm_pkg::hbm_timing_t)
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
  // controller configuration (tpu_hbm_pkg::hbm_ctrl_cfg_t)
  input  logic [1:0]   addr_map_i,
  input  logic [15:0]  starve_cap_i,
  input  logic [7:0]   wr_hi_i,
  input  logic [7:0]   wr_lo_i,
  // host request
  input  logic         req_valid_i,
  output logic         req_ready_o,
  input  logic         req_write_i,
  input  logic [31:0]  req_addr_i,
  input  logic [7:0]   req_tag_i,
  input  logic [511:0] req_data_i,
  // host response
  output logic         rsp_valid_o,
  input  logic         rsp_ready_i,
  output logic         rsp_write_o,
  output logic [7:0]   rsp_tag_o,
  output logic [511:0] rsp_data_o,
  output logic [7:0]   rsp_ue_o,
  // host request and response, port 1
  input  logic         req1_valid_i,
  output logic         req1_ready_o,
  input  logic         req1_write_i,
  input  logic [31:0]  req1_addr_i,
  input  logic [7:0]   req1_tag_i,
  input  logic [511:0] req1_data_i,
  output logic         rsp1_valid_o,
  input  logic         rsp1_ready_i,
  output logic         rsp1_write_o,
  output logic [7:0]   rsp1_tag_o,
  output logic [511:0] rsp1_data_o,
  output logic [7:0]   rsp1_ue_o,
  // device fault injection (random flips on read; hbm_device.sv)
  input  logic [63:0]  fi_seed_i,
  input  logic [31:0]  fi_sbe_thr_i,
  input  logic [31:0]  fi_dbe_thr_i,
  output logic [31:0]  fi_sbe_o,
  output logic [31:0]  fi_dbe_o,
  // statistics
  input  logic [3:0]   stat_ch_i,
  input  logic [4:0]   stat_id_i,
  output logic [63:0]  stat_o,
  output logic         idle_o,
  output logic [NumCh-1:0] ref_pending_o,
  // device checker
  output logic [31:0]  viol_count_o,
  output logic [31:0]  viol_mask_o,
  output logic [4:0]   viol_last_o,
  // direct drive of the device (checker tests) and monitor of channel dbg_ch_i
  input  logic         dev_direct_i,
  input  logic [3:0]   dbg_ch_i,
  input  logic [2:0]   dbg_cmd_i,
  input  logic [1:0]   dbg_bg_i,
  input  logic [1:0]   dbg_ba_i,
  input  logic [13:0]  dbg_row_i,
  input  logic [4:0]   dbg_col_i,
  input  logic         dbg_wvalid_i,
  input  logic [255:0] dbg_wdata_i,
  input  logic [31:0]  dbg_wcheck_flip_i,
  output logic [2:0]   mon_cmd_o,
  output logic [1:0]   mon_bg_o,
  output logic [1:0]   mon_ba_o,
  output logic [13:0]  mon_row_o,
  output logic [4:0]   mon_col_o,
  output logic         mon_rvalid_o,
  output logic [255:0] mon_rdata_o
);

  hbm_timing_t timing;
  hbm_ctrl_cfg_t cfg;
  hbm_req_t [1:0] req;
  hbm_rsp_t [1:0] rsp;
  hbm_cmd_t [NumCh-1:0] ctrl_cmd, dev_cmd;
  logic [NumCh-1:0] ctrl_wvalid, dev_wvalid, rvalid;
  hbm_bus_t [NumCh-1:0] ctrl_wdata, dev_wdata, rdata;
  hbm_bus_ecc_t [NumCh-1:0] ctrl_wcheck, dev_wcheck, rcheck;
  logic [7:0] ecc_ce_unused, ecc_ue_unused;
  hbm_rule_e viol_last;
  logic [NumCh-1:0] ctrl_rvalid;

  // In direct mode the device's read data is the harness's, not the controller's.
  assign ctrl_rvalid = dev_direct_i ? '0 : rvalid;

  assign timing = '{cl: t_cl_i, cwl: t_cwl_i, rcd: t_rcd_i, rp: t_rp_i, ras: t_ras_i,
                    rc: t_rc_i, ccd_s: t_ccd_s_i, ccd_l: t_ccd_l_i, rrd_s: t_rrd_s_i,
                    rrd_l: t_rrd_l_i, faw: t_faw_i, wr: t_wr_i, wtr_s: t_wtr_s_i,
                    wtr_l: t_wtr_l_i, rtp: t_rtp_i, rfc: t_rfc_i, refi: t_refi_i};
  assign cfg = '{addr_map: hbm_map_e'(addr_map_i), starve_cap: starve_cap_i, wr_hi: wr_hi_i,
                 wr_lo: wr_lo_i};
  assign req[0] = '{write: req_write_i, addr: req_addr_i, tag: req_tag_i, data: req_data_i};
  assign req[1] = '{write: req1_write_i, addr: req1_addr_i, tag: req1_tag_i, data: req1_data_i};

  tpu_hbm_ctrl #(
    .NumCh      (NumCh),
    .NumPorts   (2),
    .RowsPerBank(RowsPerBank)
  ) i_ctrl (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .timing_i     (timing),
    .cfg_i        (cfg),
    .req_valid_i  ({req1_valid_i, req_valid_i}),
    .req_ready_o  ({req1_ready_o, req_ready_o}),
    .req_i        (req),
    .rsp_valid_o  ({rsp1_valid_o, rsp_valid_o}),
    .rsp_ready_i  ({rsp1_ready_i, rsp_ready_i}),
    .rsp_o        (rsp),
    .cmd_o        (ctrl_cmd),
    .wvalid_o     (ctrl_wvalid),
    .wdata_o      (ctrl_wdata),
    .wcheck_o     (ctrl_wcheck),
    .rvalid_i     (ctrl_rvalid),
    .rdata_i      (rdata),
    .rcheck_i     (rcheck),
    .ecc_ce_o     (ecc_ce_unused),
    .ecc_ue_o     (ecc_ue_unused),
    .stat_ch_i    (hbm_ch_t'(stat_ch_i)),
    .stat_id_i    (hbm_stat_e'(stat_id_i)),
    .stat_o       (stat_o),
    .ref_pending_o(ref_pending_o),
    .idle_o       (idle_o)
  );

  assign rsp_write_o = rsp[0].write;
  assign rsp_tag_o = rsp[0].tag;
  assign rsp_data_o = rsp[0].data;
  assign rsp_ue_o = rsp[0].ue;
  assign rsp1_write_o = rsp[1].write;
  assign rsp1_tag_o = rsp[1].tag;
  assign rsp1_data_o = rsp[1].data;
  assign rsp1_ue_o = rsp[1].ue;

  // Command / write-data mux: the controller, or the harness on channel dbg_ch_i.
  always_comb begin
    for (int unsigned c = 0; c < NumCh; c++) begin
      if (dev_direct_i) begin
        dev_cmd[c] = HBM_CMD_NOP;
        dev_wvalid[c] = 1'b0;
        dev_wdata[c] = '0;
        dev_wcheck[c] = '0;
        if (32'(dbg_ch_i) == c) begin
          dev_cmd[c] = '{cmd: hbm_cmd_e'(dbg_cmd_i), bg: dbg_bg_i, ba: dbg_ba_i, row: dbg_row_i,
                         col: dbg_col_i};
          dev_wvalid[c] = dbg_wvalid_i;
          dev_wdata[c] = dbg_wdata_i;
          dev_wcheck[c] = hbm_ecc_enc_bus(dbg_wdata_i) ^ dbg_wcheck_flip_i;
        end
      end else begin
        dev_cmd[c] = ctrl_cmd[c];
        dev_wvalid[c] = ctrl_wvalid[c];
        dev_wdata[c] = ctrl_wdata[c];
        dev_wcheck[c] = ctrl_wcheck[c];
      end
    end
  end

  // The backdoor is the chip harness's (tpu_chip_sim_top); this harness does not use it.
  hbm_data_t bd_rdata;
  hbm_word_mask_t bd_ue;
  logic unused_bd;
  assign unused_bd = ^{bd_rdata, bd_ue, ecc_ce_unused, ecc_ue_unused};

  hbm_device #(
    .NumCh      (NumCh),
    .RowsPerBank(RowsPerBank)
  ) i_dev (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .timing_i    (timing),
    .cmd_i       (dev_cmd),
    .wvalid_i    (dev_wvalid),
    .wdata_i     (dev_wdata),
    .wcheck_i    (dev_wcheck),
    .rvalid_o    (rvalid),
    .rdata_o     (rdata),
    .rcheck_o    (rcheck),
    .viol_count_o(viol_count_o),
    .viol_mask_o (viol_mask_o),
    .viol_last_o (viol_last),
    .bd_stb_i    (1'b0),
    .bd_we_i     (1'b0),
    .bd_loc_i    ('0),
    .bd_wdata_i  ('0),
    .bd_rdata_o  (bd_rdata),
    .bd_ue_o     (bd_ue),
    .fi_seed_i   (fi_seed_i),
    .fi_sbe_thr_i(fi_sbe_thr_i),
    .fi_dbe_thr_i(fi_dbe_thr_i),
    .fi_stb_i    (1'b0),
    .fi_loc_i    ('0),
    .fi_word_i   ('0),
    .fi_mask_i   ('0),
    .fi_sbe_o    (fi_sbe_o),
    .fi_dbe_o    (fi_dbe_o)
  );

  assign viol_last_o = viol_last;

  // Monitor of channel dbg_ch_i.
  always_comb begin
    hbm_cmd_t m;
    m = HBM_CMD_NOP;
    mon_rvalid_o = 1'b0;
    mon_rdata_o = '0;
    for (int unsigned c = 0; c < NumCh; c++) begin
      if (32'(dbg_ch_i) == c) begin
        m = dev_cmd[c];
        mon_rvalid_o = rvalid[c];
        mon_rdata_o = rdata[c];
      end
    end
    mon_cmd_o = m.cmd;
    mon_bg_o = m.bg;
    mon_ba_o = m.ba;
    mon_row_o = m.row;
    mon_col_o = m.col;
  end

endmodule
