// tpu_vpu_unit: the VPU with its command front end: streams memory rows through tpu_vpu.
//
// A command (start_i) names an elementwise op (vpu_op_e, configs/tpu_contract.yaml), `rows`
// rows of x from x_mem/x_row, y from y_mem/y_row (the same y row for every x row when y_bcast_i
// is set: a bias), z = -0, and the destination rows dst_row + r * dst_stride in dst_mem;
// src_bf16/dst_bf16 as in tpu_vpu.
// Row r: dst[dst_row + r * dst_stride] = op(x[x_row + r], y[y_row + (y_bcast ? 0 : r)]).
// x_wait: the x rows arrive over ICI; row r goes in only once ICI counter x_cnt is >= 1
// (cnt_avail_i) and takes 1 off it (cnt_take_o), so a reduction runs as its rows land (the
// counter counts rows as they are written, in order). sig: each destination row adds 1 to ICI
// counter sig_cnt as it is written (sig_o), for a send that forwards the rows as they come.
// Latency: 1 cycle (tpu_vpu) plus the write. Throughput: one row per cycle (x_wait: as the rows
// come), across commands too: one more command is taken while one runs, and its first row
// follows the running one's last without a gap. Handshake: start_i is taken when ready_o is high (no command held); done_o
// pulses once per command, in order, when its last row has been written.
`include "tpu_assert.svh"

module tpu_vpu_unit
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
#(
  parameter int unsigned Lanes    = 8,
  parameter int unsigned MemAddrW = 16,
  parameter int unsigned CntW     = 6,   // ICI counter ids
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
  input  logic                x_wait_i,      // x rows arrive over ICI (docs/isa.md)
  input  logic [CntW-1:0]     x_cnt_i,
  input  logic                sig_i,         // signal each written row
  input  logic [CntW-1:0]     sig_cnt_i,
  output logic                done_o,
  output logic                busy_o,
  output logic                rows_wait_o,   // the running x_wait command waits for its next row
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
  output logic [RowW-1:0]     wr_data_o,
  // ICI counters (tpu_ici_eng)
  output logic [CntW-1:0]     cnt_id_o,     // x_wait's counter of the running command
  input  logic                cnt_avail_i,  // it is >= 1
  output logic                cnt_take_o,   // an x row goes in: take 1
  output logic                sig_o,        // a sig row is written: add 1 to sig_cnt_o
  output logic [CntW-1:0]     sig_cnt_o
);

  // One command as the unit holds it (dst_stride: 0 already read as 1).
  typedef struct packed {
    vpu_op_e     op;
    logic [2:0]  src_bf16;
    logic        dst_bf16;
    logic        x_mem;
    logic        y_mem;
    logic        y_bcast;
    logic        dst_mem;
    logic [15:0] x_row;
    logic [15:0] y_row;
    logic [15:0] dst_row;
    logic [15:0] dst_stride;
    logic [15:0] rows;
    logic        x_wait;
    logic [CntW-1:0] x_cnt;
    logic        sig;
    logic [CntW-1:0] sig_cnt;
  } vcmd_t;

  // `cur` feeds its rows into tpu_vpu, one a cycle; `nxt` holds the command taken while cur runs
  // and becomes cur in the cycle cur's last row goes in, so back-to-back commands feed a row
  // every cycle. Each row's destination rides beside it through the VPU's one-cycle output
  // register (wr_*_q).
  vcmd_t       cur_q, cur_d, nxt_q, nxt_d, new_cmd;
  logic        cur_v_q, cur_v_d, nxt_v_q, nxt_v_d;
  logic [15:0] in_i_q, in_i_d, dst_ptr_q, dst_ptr_d;
  logic [15:0] wr_addr_q, wr_addr_d;
  logic        wr_mem_q, wr_mem_d, wr_last_q, wr_last_d, wr_sig_q, wr_sig_d;
  logic [CntW-1:0] wr_sig_cnt_q, wr_sig_cnt_d;

  logic             in_valid, in_ready, in_fire, last_in, out_valid, out_scalar, idle;
  tpu_pkg::f32_t [Lanes-1:0] x, y, z, out_data;

  assign new_cmd = '{op: op_i, src_bf16: src_bf16_i, dst_bf16: dst_bf16_i, x_mem: x_mem_i,
                     y_mem: y_mem_i, y_bcast: y_bcast_i, dst_mem: dst_mem_i, x_row: x_row_i,
                     y_row: y_row_i, dst_row: dst_row_i,
                     dst_stride: (dst_stride_i == '0) ? 16'd1 : dst_stride_i, rows: rows_i,
                     x_wait: x_wait_i, x_cnt: x_cnt_i, sig: sig_i, sig_cnt: sig_cnt_i};
  assign in_valid   = cur_v_q && (!cur_q.x_wait || cnt_avail_i);
  assign cnt_id_o   = cur_q.x_cnt;
  assign cnt_take_o = in_fire && cur_q.x_wait;
  assign rows_wait_o = cur_v_q && cur_q.x_wait && !cnt_avail_i;
  assign sig_o      = out_valid && wr_sig_q;  // the row's write: its sig rides beside it
  assign sig_cnt_o  = wr_sig_cnt_q;
  assign in_fire  = in_valid && in_ready;
  assign last_in  = in_fire && (in_i_q == cur_q.rows - 1'b1);
  assign x_mem_o  = cur_q.x_mem;
  assign y_mem_o  = cur_q.y_mem;
  assign x_addr_o = MemAddrW'(cur_q.x_row + in_i_q);
  assign y_addr_o = MemAddrW'(cur_q.y_bcast ? cur_q.y_row : cur_q.y_row + in_i_q);
  assign x        = cur_q.x_mem ? x_amem_i : x_vmem_i;
  assign y        = cur_q.y_mem ? y_amem_i : y_vmem_i;
  assign z        = {Lanes{tpu_vpu_pkg::F32_NEG_ZERO}};

  tpu_vpu #(
    .Lanes(Lanes)
  ) i_vpu (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .in_valid_i   (in_valid),
    .in_ready_o   (in_ready),
    .in_op_i      (cur_q.op),
    .in_src_bf16_i(cur_q.src_bf16),
    .in_dst_bf16_i(cur_q.dst_bf16),
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

  assign vmem_we_o = out_valid && !wr_mem_q;
  assign amem_we_o = out_valid && wr_mem_q;
  assign wr_addr_o = MemAddrW'(wr_addr_q);
  assign wr_data_o = out_data;
  assign done_o    = out_valid && wr_last_q;
  assign ready_o   = !nxt_v_q;
  assign busy_o    = cur_v_q || nxt_v_q || out_valid;

  always_comb begin
    cur_d     = cur_q;
    cur_v_d   = cur_v_q;
    nxt_d     = nxt_q;
    nxt_v_d   = nxt_v_q;
    in_i_d    = in_i_q;
    dst_ptr_d = dst_ptr_q;
    wr_addr_d = wr_addr_q;
    wr_mem_d  = wr_mem_q;
    wr_last_d = 1'b0;
    wr_sig_d  = 1'b0;
    wr_sig_cnt_d = wr_sig_cnt_q;
    if (in_fire) begin
      wr_addr_d = dst_ptr_q;
      wr_mem_d  = cur_q.dst_mem;
      wr_last_d = last_in;
      wr_sig_d  = cur_q.sig;
      wr_sig_cnt_d = cur_q.sig_cnt;
      in_i_d    = in_i_q + 1'b1;
      dst_ptr_d = dst_ptr_q + cur_q.dst_stride;
    end
    if (!cur_v_q || last_in) begin  // cur is free next cycle: the held command, or a new one
      if (nxt_v_q) cur_d = nxt_q;
      else if (start_i) cur_d = new_cmd;
      nxt_v_d   = 1'b0;  // (start_i is low while a command is held)
      cur_v_d   = nxt_v_q || start_i;
      in_i_d    = '0;
      dst_ptr_d = cur_d.dst_row;
    end else if (start_i) begin
      nxt_d   = new_cmd;
      nxt_v_d = 1'b1;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cur_q     <= '0;
      cur_v_q   <= 1'b0;
      nxt_q     <= '0;
      nxt_v_q   <= 1'b0;
      in_i_q    <= '0;
      dst_ptr_q <= '0;
      wr_addr_q <= '0;
      wr_mem_q  <= 1'b0;
      wr_last_q <= 1'b0;
      wr_sig_q  <= 1'b0;
      wr_sig_cnt_q <= '0;
    end else begin
      cur_q     <= cur_d;
      cur_v_q   <= cur_v_d;
      nxt_q     <= nxt_d;
      nxt_v_q   <= nxt_v_d;
      in_i_q    <= in_i_d;
      dst_ptr_q <= dst_ptr_d;
      wr_addr_q <= wr_addr_d;
      wr_mem_q  <= wr_mem_d;
      wr_last_q <= wr_last_d;
      wr_sig_q  <= wr_sig_d;
      wr_sig_cnt_q <= wr_sig_cnt_d;
    end
  end

  // Assertions
  `TPU_ASSERT(StartWhenReady_A,
      start_i |-> ready_o,
      ("%m: StartWhenReady_A failed"))
  `TPU_ASSERT(StartHasRows_A,
      start_i |-> rows_i != '0,
      ("%m: StartHasRows_A failed: a command of no rows"))
  `TPU_ASSERT(ElementwiseOnly_A,
      start_i |-> vpu_op_elementwise(op_i),
      ("%m: ElementwiseOnly_A failed"))
  `TPU_ASSERT(HeldOnlyBehindARunningCommand_A,
      nxt_v_q |-> cur_v_q,
      ("%m: HeldOnlyBehindARunningCommand_A failed"))
  `TPU_ASSERT(VpuNeverStalls_A,
      in_valid |-> in_ready,
      ("%m: VpuNeverStalls_A failed: a row's destination would no longer ride beside it"))
  `TPU_ASSERT(NoScalarOut_A,
      out_valid |-> !out_scalar,
      ("%m: NoScalarOut_A failed"))
  `TPU_ASSERT(IdleWhenDone_A,
      !busy_o |-> idle,
      ("%m: IdleWhenDone_A failed"))

endmodule
