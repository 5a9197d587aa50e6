// tpu_vpu_unit: the VPU with its command front end: streams memory rows through tpu_vpu.
//
// A command (start_i) names an elementwise op (vpu_op_e, configs/tpu_contract.yaml), `rows`
// rows of x from x_mem/x_row, y from y_mem/y_row (the same y row for every x row when y_bcast_i
// is set: a bias), z = -0, and the destination rows dst_row + r * dst_stride in dst_mem;
// src_bf16/dst_bf16 as in tpu_vpu.
// Row r: dst[dst_row + r * dst_stride] = op(x[x_row + r], y[y_row + (y_bcast ? 0 : r)]).
// Latency: 1 cycle (tpu_vpu) plus the write. Throughput: one row per cycle. Handshake: start_i is
// taken when ready_o is high; done_o pulses when the last row has been written.
`include "tpu_assert.svh"

module tpu_vpu_unit
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
#(
  parameter int unsigned Lanes    = 8,
  parameter int unsigned MemAddrW = 16,
  localparam int unsigned RowW    = Lanes * 32
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                start_i,
  output logic                ready_o,
  input  vpu_op_e             op_i,
  input  logic [2:0]          src_bf16_i,
  input  logic                dst_bf16_i,
  input  logic                x_mem_i,
  input  logic [15:0]         x_row_i,
  input  logic                y_mem_i,
  input  logic [15:0]         y_row_i,
  input  logic                y_bcast_i,
  input  logic                dst_mem_i,
  input  logic [15:0]         dst_row_i,
  input  logic [15:0]         dst_stride_i,  // rows between destination rows (0 means 1)
  input  logic [15:0]         rows_i,
  output logic                done_o,
  output logic                busy_o,
  // operand reads: the chip reads both memories at each address and picks by *_mem_o
  output logic                x_mem_o,
  output logic [MemAddrW-1:0] x_addr_o,
  input  logic [RowW-1:0]     x_vmem_i,
  input  logic [RowW-1:0]     x_amem_i,
  output logic                y_mem_o,
  output logic [MemAddrW-1:0] y_addr_o,
  input  logic [RowW-1:0]     y_vmem_i,
  input  logic [RowW-1:0]     y_amem_i,
  // result write
  output logic                vmem_we_o,
  output logic                amem_we_o,
  output logic [MemAddrW-1:0] wr_addr_o,
  output logic [RowW-1:0]     wr_data_o
);

  logic        active_q, active_d;
  vpu_op_e     op_q, op_d;
  logic [2:0]  src_bf16_q, src_bf16_d;
  logic        dst_bf16_q, dst_bf16_d, x_mem_q, x_mem_d, y_mem_q, y_mem_d, y_bcast_q, y_bcast_d;
  logic        dst_mem_q, dst_mem_d;
  logic [15:0] x_row_q, x_row_d, y_row_q, y_row_d, dst_row_q, dst_row_d, rows_q, rows_d;
  logic [15:0] in_i_q, in_i_d, out_i_q, out_i_d, dst_stride_q, dst_stride_d;

  logic             in_valid, in_ready, in_fire, out_valid, out_scalar, idle, last_out;
  tpu_pkg::f32_t [Lanes-1:0] x, y, z, out_data;

  assign in_valid = active_q && (in_i_q != rows_q);
  assign in_fire  = in_valid && in_ready;
  assign x_mem_o  = x_mem_q;
  assign y_mem_o  = y_mem_q;
  assign x_addr_o = MemAddrW'(x_row_q + in_i_q);
  assign y_addr_o = MemAddrW'(y_bcast_q ? y_row_q : y_row_q + in_i_q);
  assign x        = x_mem_q ? x_amem_i : x_vmem_i;
  assign y        = y_mem_q ? y_amem_i : y_vmem_i;
  assign z        = {Lanes{tpu_vpu_pkg::F32_NEG_ZERO}};
  assign last_out = out_valid && (out_i_q == rows_q - 1'b1);

  tpu_vpu #(
    .Lanes(Lanes)
  ) i_vpu (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .in_valid_i   (in_valid),
    .in_ready_o   (in_ready),
    .in_op_i      (op_q),
    .in_src_bf16_i(src_bf16_q),
    .in_dst_bf16_i(dst_bf16_q),
    .in_first_i   (1'b1),
    .in_last_i    (1'b1),
    .in_mask_i    ('1),
    .in_x_i       (x),
    .in_y_i       (y),
    .in_z_i       (z),
    .out_valid_o  (out_valid),
    .out_ready_i  (1'b1),
    .out_scalar_o (out_scalar),
    .out_data_o   (out_data),
    .idle_o       (idle)
  );

  assign vmem_we_o = out_valid && !dst_mem_q;
  assign amem_we_o = out_valid && dst_mem_q;
  assign wr_addr_o = MemAddrW'(dst_row_q);
  assign wr_data_o = out_data;
  assign done_o    = last_out;
  assign ready_o   = !active_q;
  assign busy_o    = active_q;

  always_comb begin
    active_d   = active_q;
    op_d       = op_q;
    src_bf16_d = src_bf16_q;
    dst_bf16_d = dst_bf16_q;
    x_mem_d    = x_mem_q;
    y_mem_d    = y_mem_q;
    y_bcast_d  = y_bcast_q;
    dst_mem_d  = dst_mem_q;
    x_row_d    = x_row_q;
    y_row_d    = y_row_q;
    dst_row_d  = dst_row_q;
    rows_d     = rows_q;
    in_i_d     = in_i_q;
    out_i_d    = out_i_q;
    dst_stride_d = dst_stride_q;
    if (start_i && !active_q) begin
      dst_stride_d = (dst_stride_i == '0) ? 16'd1 : dst_stride_i;
      active_d   = 1'b1;
      op_d       = op_i;
      src_bf16_d = src_bf16_i;
      dst_bf16_d = dst_bf16_i;
      x_mem_d    = x_mem_i;
      y_mem_d    = y_mem_i;
      y_bcast_d  = y_bcast_i;
      dst_mem_d  = dst_mem_i;
      x_row_d    = x_row_i;
      y_row_d    = y_row_i;
      dst_row_d  = dst_row_i;
      rows_d     = rows_i;
      in_i_d     = '0;
      out_i_d    = '0;
    end
    if (in_fire) in_i_d = in_i_q + 1'b1;
    if (out_valid) begin
      out_i_d   = out_i_q + 1'b1;
      dst_row_d = dst_row_q + dst_stride_q;
    end
    if (last_out) active_d = 1'b0;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q   <= 1'b0;
      op_q       <= VpuAdd;
      src_bf16_q <= '0;
      dst_bf16_q <= 1'b0;
      x_mem_q    <= 1'b0;
      y_mem_q    <= 1'b0;
      y_bcast_q  <= 1'b0;
      dst_mem_q  <= 1'b0;
      x_row_q    <= '0;
      y_row_q    <= '0;
      dst_row_q  <= '0;
      rows_q     <= '0;
      in_i_q     <= '0;
      out_i_q    <= '0;
      dst_stride_q <= 16'd1;
    end else begin
      active_q   <= active_d;
      op_q       <= op_d;
      src_bf16_q <= src_bf16_d;
      dst_bf16_q <= dst_bf16_d;
      x_mem_q    <= x_mem_d;
      y_mem_q    <= y_mem_d;
      y_bcast_q  <= y_bcast_d;
      dst_mem_q  <= dst_mem_d;
      x_row_q    <= x_row_d;
      y_row_q    <= y_row_d;
      dst_row_q  <= dst_row_d;
      rows_q     <= rows_d;
      in_i_q     <= in_i_d;
      out_i_q    <= out_i_d;
      dst_stride_q <= dst_stride_d;
    end
  end

  // Assertions
  `TPU_ASSERT(StartWhenIdle_A,
      start_i |-> !active_q,
      ("%m: StartWhenIdle_A failed"))
  `TPU_ASSERT(ElementwiseOnly_A,
      start_i |-> vpu_op_elementwise(op_i),
      ("%m: ElementwiseOnly_A failed"))
  `TPU_ASSERT(NoScalarOut_A,
      out_valid |-> !out_scalar,
      ("%m: NoScalarOut_A failed"))
  `TPU_ASSERT(IdleWhenDone_A,
      !active_q |-> idle,
      ("%m: IdleWhenDone_A failed"))

endmodule
