// tpu_mem: on-chip memory (vector or accumulator memory): Rows rows of Width bits.
//
// NumRd combinational read ports and NumWr write ports. A model of a banked SRAM: each unit of
// the chip owns a port, so units run concurrently without arbitration; the sequencer's
// scoreboard guarantees that no two ports write the same row in one cycle, and no port reads a
// row another in-flight command writes. Should two writes hit one row anyway, the higher port
// index wins (and the SVA NoWriteCollision_A fires).
// Latency: a write at edge t is visible to reads after edge t; a read is combinational.
// Throughput: one read per read port and one write per write port per cycle. No handshake.
// Storage is not reset (an SRAM); out-of-range addresses are never presented (the sequencer
// checks every range), reads of them return zero.
`include "tpu_assert.svh"

module tpu_mem #(
  parameter int unsigned Rows  = 1024,
  parameter int unsigned Width = 128,
  parameter int unsigned NumRd = 2,
  parameter int unsigned NumWr = 2,
  localparam int unsigned AddrW = tpu_pkg::idx_width(Rows)
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic [NumRd-1:0][AddrW-1:0] rd_addr_i,
  output logic [NumRd-1:0][Width-1:0] rd_data_o,
  input  logic [NumWr-1:0]            we_i,
  input  logic [NumWr-1:0][AddrW-1:0] wr_addr_i,
  input  logic [NumWr-1:0][Width-1:0] wr_data_i
);

  logic [Width-1:0] mem_q [Rows];

  for (genvar p = 0; p < NumRd; p++) begin : gen_rd
    assign rd_data_o[p] = (32'(rd_addr_i[p]) < Rows) ? mem_q[rd_addr_i[p]] : '0;
  end

  always_ff @(posedge clk_i) begin
    for (int unsigned p = 0; p < NumWr; p++) begin
      if (we_i[p] && 32'(wr_addr_i[p]) < Rows) mem_q[wr_addr_i[p]] <= wr_data_i[p];
    end
  end

  // Assertions
  for (genvar p = 0; p < NumWr; p++) begin : gen_sva
    `TPU_ASSERT(WriteInRange_A,
        we_i[p] |-> 32'(wr_addr_i[p]) < Rows,
        ("%m: WriteInRange_A failed"))
    for (genvar q = p + 1; q < NumWr; q++) begin : gen_pair
      `TPU_ASSERT(NoWriteCollision_A,
          !(we_i[p] && we_i[q] && wr_addr_i[p] == wr_addr_i[q]),
          ("%m: NoWriteCollision_A failed"))
    end
  end

endmodule
