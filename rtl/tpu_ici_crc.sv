// tpu_ici_crc: CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, initial value 0xFFFFFFFF,
// final XOR 0xFFFFFFFF) of a Width-bit vector, combinational (latency 0).
//
// The bits are taken LSB first (data_i[0] first), as a reflected CRC takes the bits of each byte:
// for Width a multiple of 8 the result is the standard CRC-32C of the ceil(Width / 8) bytes
// data_i[7:0], data_i[15:8], ... (iSCSI, SSE4.2 `crc32`; "123456789" gives 0xE3069283). Other
// widths continue the same bit-serial definition. The CRC is linear, so it is computed as one
// XOR tree per output bit: crc = (XOR of the columns of the set data bits) ^ crc(0), the columns
// and crc(0) worked out at elaboration. Used by the ICI link layer (tpu_ici_link_tx/_rx) for the
// flit words and the control words of a link.
// `en_i` low: crc_o is 0 and nothing is computed. A user that looks at the CRC only beside a
// valid word passes that valid here, so a simulator skips the XOR trees (a 524-bit flit's CRC is
// ~550 word operations) in the cycles the link carries nothing (docs/scale.md, "One core").
module tpu_ici_crc #(
  parameter int unsigned Width = 64
) (
  input  logic             en_i,
  input  logic [Width-1:0] data_i,
  output logic [31:0]      crc_o
);

  localparam logic [31:0] POLY = 32'h82F63B78;

  // One bit-serial step with data bit 0: what the register does to a bit injected earlier.
  function automatic logic [31:0] step0(logic [31:0] s);
    return s[0] ? ((s >> 1) ^ POLY) : (s >> 1);
  endfunction

  // Column i: the register's change (before the final XOR) caused by data bit i alone. Injecting
  // bit i at step i XORs POLY into the register after that step; the Width - 1 - i zero steps
  // that follow move it on. Built from the last bit back, one step per bit.
  typedef logic [Width-1:0][31:0] cols_t;
  function automatic cols_t crc_cols();
    cols_t cols;
    logic [31:0] v;
    v = POLY;
    for (int i = int'(Width) - 1; i >= 0; i--) begin
      cols[i] = v;
      v = step0(v);
    end
    return cols;
  endfunction

  // crc(0): the initial value through Width zero steps, then the final XOR.
  function automatic logic [31:0] crc_zero();
    logic [31:0] s;
    s = 32'hFFFFFFFF;
    for (int unsigned i = 0; i < Width; i++) s = step0(s);
    return s ^ 32'hFFFFFFFF;
  endfunction

  localparam cols_t       COLS = crc_cols();
  localparam logic [31:0] ZERO = crc_zero();

  // Column masks per output bit: bit i of MASKS[j] is bit j of column i.
  typedef logic [31:0][Width-1:0] masks_t;
  function automatic masks_t crc_masks();
    masks_t m;
    for (int unsigned j = 0; j < 32; j++)
      for (int unsigned i = 0; i < Width; i++) m[j][i] = COLS[i][j];
    return m;
  endfunction
  localparam masks_t MASKS = crc_masks();

  // Output bit j: the parity of the data bits whose column has bit j set.
  always_comb begin
    crc_o = '0;
    if (en_i) begin
      for (int unsigned j = 0; j < 32; j++) crc_o[j] = ^(data_i & MASKS[j]) ^ ZERO[j];
    end
  end

endmodule
