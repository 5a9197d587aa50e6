// ici_crc_tb_top: SIMULATION-ONLY top for tests/chip/test_link.cc: the link layer's CRC-32C
// (tpu_ici_crc) on flat ports, at 72 bits (9 bytes: the standard check value of "123456789" is
// 0xE3069283) and at the width a 4x4 chip's flit word covers ({seq, vc, head, tail, 128-bit row}
// = 140 bits), compared there against an independent software CRC.
module ici_crc_tb_top (
  input  logic [71:0]  d72_i,
  output logic [31:0]  crc72_o,
  input  logic [139:0] d140_i,
  output logic [31:0]  crc140_o
);

  tpu_ici_crc #(
    .Width(72)
  ) i_crc72 (
    .en_i  (1'b1),
    .data_i(d72_i),
    .crc_o (crc72_o)
  );

  tpu_ici_crc #(
    .Width(140)
  ) i_crc140 (
    .en_i  (1'b1),
    .data_i(d140_i),
    .crc_o (crc140_o)
  );

endmodule
