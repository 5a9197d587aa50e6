// hbm_secded_tb_top: SIMULATION-ONLY top for the SECDED (72,64) unit test (tests/hbm): the
// package's encoder and checker (tpu_hbm_pkg::hbm_secded_enc / hbm_secded_dec, the functions the
// HBM controller, the device's backdoor and the C++ golden tb/common/secded.h share),
// combinational, on flat ports.
module hbm_secded_tb_top
  import tpu_hbm_pkg::*;
(
  input  logic [63:0] enc_data_i,   // a word to encode
  output logic [7:0]  enc_check_o,  // its check bits
  input  logic [63:0] dec_data_i,   // a stored word, possibly with flipped bits
  input  logic [7:0]  dec_check_i,  // its stored check bits
  output logic [63:0] dec_data_o,   // the corrected word
  output logic [7:0]  dec_syndrome_o,
  output logic        dec_ce_o,     // a single-bit error was corrected
  output logic        dec_ue_o      // an uncorrectable error
);
  hbm_secded_dec_t d;
  assign enc_check_o = hbm_secded_enc(enc_data_i);
  assign d = hbm_secded_dec(dec_data_i, dec_check_i);
  assign dec_data_o = d.data;
  assign dec_syndrome_o = d.syndrome;
  assign dec_ce_o = d.ce;
  assign dec_ue_o = d.ue;
endmodule
