// tpu_mxu_top: the MXU of a named chip variant, as a verilated top for the MXU harnesses.
//
// VariantId selects a preset from tpu_pkg (Verilator's -G cannot set an enum). Ports are the
// tpu_mxu ports, unchanged; see tpu_mxu for the dataflow, latency and handshakes.
module tpu_mxu_top #(
  parameter  int unsigned        VariantId = 1,
  localparam tpu_pkg::chip_cfg_t Cfg       = tpu_pkg::variant_cfg(tpu_pkg::variant_e'(VariantId)),
  localparam int unsigned        Rows      = Cfg.mxu_rows,
  localparam int unsigned        Cols      = Cfg.mxu_cols,
  localparam int unsigned        WBanks    = Cfg.mxu_wbanks,
  localparam int unsigned        WRows     = Cfg.mxu_wrows
) (
  input  logic           clk_i,
  input  logic           rst_ni,
  input  logic           w_valid_i,
  output logic           w_ready_o,
  input  tpu_pkg::bf16_t w_data_i   [WRows*Cols],
  input  logic           a_valid_i,
  output logic           a_ready_o,
  input  tpu_pkg::bf16_t a_data_i   [Rows],
  input  tpu_pkg::f32_t  acc_data_i [Cols],
  input  logic           a_acc_i,
  input  logic           a_last_i,
  output logic           o_valid_o,
  input  logic           o_ready_i,
  output tpu_pkg::f32_t  o_data_o   [Cols],
  output logic           o_last_o,
  output logic           idle_o
);

  tpu_mxu #(
    .Rows  (Rows),
    .Cols  (Cols),
    .WBanks(WBanks),
    .WRows (WRows)
  ) i_mxu (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .w_valid_i (w_valid_i),
    .w_ready_o (w_ready_o),
    .w_data_i  (w_data_i),
    .a_valid_i (a_valid_i),
    .a_ready_o (a_ready_o),
    .a_data_i  (a_data_i),
    .acc_data_i(acc_data_i),
    .a_acc_i   (a_acc_i),
    .a_last_i  (a_last_i),
    .o_valid_o (o_valid_o),
    .o_ready_i (o_ready_i),
    .o_data_o  (o_data_o),
    .o_last_o  (o_last_o),
    .idle_o    (idle_o)
  );

endmodule
