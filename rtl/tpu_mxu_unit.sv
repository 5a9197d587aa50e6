// tpu_mxu_unit: the MXU with its command front ends: weight loader, activation streamer and the
// result write-back into the accumulator memory.
//
// LOADW (lw_start_i): reads Rows VMEM rows lw_row_i + i * lw_stride_i (lane j bits [15:0] = the
// bf16 weight of column j) into the array's next free weight bank, WRows rows per cycle (one read
// port each) when the array takes them; lw_done_o pulses with the last rows. With lw_t_i set
// (transposed LOADW, square arrays only) the loader first reads the whole tile, WRows rows per
// cycle, into a staging register (Rows / WRows cycles, the array not involved), then feeds the
// array from it with rows and columns swapped (weight row k, column n = staged row n lane k),
// WRows rows per cycle as above: Rows / WRows cycles more than a plain load. MATMUL
// (mm_start_i): streams mm_rows_i activation rows from VMEM rows mm_a_row_i + r * mm_a_stride_i (lane i bits [15:0] = a_k for
// k = i) with the running sums of AMEM rows mm_c_row_i.. when mm_acc_i is set, marks the last row
// (releasing the weight tile), and writes result row r to AMEM row mm_c_row_i + r. The streamer
// takes the next MATMUL in the cycle the previous one streams its last row, so back-to-back
// MATMULs leave no bubble between their rows (docs/mxu.md); up to WbDepth commands may be in
// flight in the array, their results written in order; mm_done_o pulses as each completes.
// Latency: Rows + Cols cycles from a row's activation beat to its AMEM write. Throughput: one
// activation row and WRows weight rows per cycle (tpu_mxu). Handshakes: *_start_i taken only when
// the matching *_ready_o is high.
`include "tpu_assert.svh"

module tpu_mxu_unit #(
  parameter int unsigned Rows     = 8,
  parameter int unsigned Cols     = 8,
  parameter int unsigned WBanks   = 4,   // weight banks of the array
  parameter int unsigned WRows    = 2,   // weight rows loaded per cycle (VMEM read ports)
  parameter int unsigned MemAddrW = 16,
  parameter int unsigned WbDepth  = 4,
  localparam int unsigned RowW    = Cols * 32
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  // LOADW
  input  logic                lw_start_i,
  output logic                lw_ready_o,
  input  logic [15:0]         lw_row_i,
  input  logic [15:0]         lw_stride_i,   // VMEM rows between weight rows (0 means 1)
  input  logic                lw_t_i,        // load the tile transposed
  output logic                lw_done_o,
  // MATMUL
  input  logic                mm_start_i,
  output logic                mm_ready_o,
  input  logic [15:0]         mm_a_row_i,
  input  logic [15:0]         mm_a_stride_i, // VMEM rows between activation rows (0 means 1)
  input  logic [15:0]         mm_rows_i,
  input  logic [15:0]         mm_c_row_i,
  input  logic                mm_acc_i,
  output logic                mm_done_o,
  // memories
  output logic [WRows-1:0][MemAddrW-1:0] w_rd_addr_o,  // VMEM, weights (WRows ports)
  input  logic [WRows-1:0][RowW-1:0]     w_rd_data_i,
  output logic [MemAddrW-1:0] a_rd_addr_o,   // VMEM, activations
  input  logic [RowW-1:0]     a_rd_data_i,
  output logic [MemAddrW-1:0] c_rd_addr_o,   // AMEM, running sums
  input  logic [RowW-1:0]     c_rd_data_i,
  output logic                c_we_o,        // AMEM, results
  output logic [MemAddrW-1:0] c_wr_addr_o,
  output logic [RowW-1:0]     c_wr_data_o,
  // status
  output logic                busy_o,
  output logic                a_beat_o,      // an activation row entered the array
  output logic                w_beat_o       // a weight beat (WRows rows) entered the array
);

  typedef struct packed {
    logic [15:0] c_row;
    logic [15:0] rows;
  } wb_t;

  localparam int unsigned WbCntW = $clog2(WbDepth + 1);
  localparam int unsigned Beats  = Rows / WRows;  // weight beats per tile

  // ---- Weight loader ----
  // A plain load feeds the array (lw_active_q) from VMEM. A transposed one first fills the staging
  // register (lw_fill_q, one beat of WRows VMEM rows per cycle, no handshake: the read ports are
  // the loader's own), then feeds the array (lw_active_q with lw_t_q) from it. lw_i_q counts the
  // beats of either phase.
  localparam int unsigned StRowW = tpu_pkg::idx_width(Rows);

  logic        lw_active_q, lw_active_d, lw_fill_q, lw_fill_d, lw_t_q, lw_t_d;
  logic [15:0] lw_row_q, lw_row_d;
  logic [15:0] lw_i_q, lw_i_d, lw_stride_q, lw_stride_d;
  logic        lw_last_beat, lw_start;
  logic        w_valid, w_ready, w_fire;
  tpu_pkg::bf16_t w_data   [WRows*Cols];
  tpu_pkg::bf16_t w_vmem   [WRows*Cols];  // the beat's VMEM rows, row-major
  tpu_pkg::bf16_t w_staged [WRows*Cols];  // the beat's weight rows from the staging register
  // The staging register: stage_q[i][j] = lane j of tile row i (VMEM row vmem_row + i * stride).
  tpu_pkg::bf16_t stage_q  [Rows][Cols];
  logic [StRowW-1:0] st_base;             // first tile row a fill beat writes / weight row a
                                          // drain beat reads

  assign st_base      = StRowW'(32'(lw_i_q) * WRows);
  assign lw_last_beat = (32'(lw_i_q) == Beats - 1);
  assign w_valid      = lw_active_q;
  assign w_fire       = w_valid && w_ready;
  // A beat reads rows lw_row_q + r * stride, r < WRows: tile rows lw_i_q * WRows + r.
  for (genvar r = 0; r < WRows; r++) begin : gen_w_rd
    assign w_rd_addr_o[r] = MemAddrW'(lw_row_q + 16'(r) * lw_stride_q);
    for (genvar j = 0; j < Cols; j++) begin : gen_w_data
      assign w_vmem[r*Cols + j] = w_rd_data_i[r][32*j +: 16];
      // Weight row k = st_base + r, column j: lane k of staged tile row j.
      assign w_staged[r*Cols + j] = stage_q[j][st_base + StRowW'(r)];
      assign w_data[r*Cols + j]   = lw_t_q ? w_staged[r*Cols + j] : w_vmem[r*Cols + j];
    end
  end
  assign lw_ready_o = !lw_active_q && !lw_fill_q;
  assign lw_start   = lw_start_i && lw_ready_o;
  assign lw_done_o  = w_fire && lw_last_beat;

  always_comb begin
    lw_active_d = lw_active_q;
    lw_fill_d   = lw_fill_q;
    lw_t_d      = lw_t_q;
    lw_row_d    = lw_row_q;
    lw_i_d      = lw_i_q;
    lw_stride_d = lw_stride_q;
    if (lw_start) begin
      lw_active_d = !lw_t_i;
      lw_fill_d   = lw_t_i;
      lw_t_d      = lw_t_i;
      lw_row_d    = lw_row_i;
      lw_i_d      = '0;
      lw_stride_d = (lw_stride_i == '0) ? 16'd1 : lw_stride_i;
    end
    if (lw_fill_q) begin  // a fill beat every cycle; the array phase follows the last one
      lw_i_d   = lw_last_beat ? '0 : lw_i_q + 1'b1;
      lw_row_d = lw_row_q + 16'(WRows) * lw_stride_q;
      if (lw_last_beat) begin
        lw_fill_d   = 1'b0;
        lw_active_d = 1'b1;
      end
    end
    if (w_fire) begin
      lw_i_d   = lw_i_q + 1'b1;
      lw_row_d = lw_row_q + 16'(WRows) * lw_stride_q;
      if (lw_last_beat) lw_active_d = 1'b0;
    end
  end

  // The staging register is a datapath register file (like tpu_mem): written WRows rows per fill
  // beat, not reset, read only after a whole tile has been written.
  always_ff @(posedge clk_i) begin
    if (lw_fill_q) begin
      for (int unsigned r = 0; r < WRows; r++) begin
        for (int unsigned j = 0; j < Cols; j++) begin
          stage_q[st_base + StRowW'(r)][j] <= w_vmem[r*Cols + j];
        end
      end
    end
  end

  // ---- Activation streamer ----
  logic        mm_active_q, mm_active_d;
  logic [15:0] mm_a_row_q, mm_a_row_d, mm_c_row_q, mm_c_row_d, mm_rows_q, mm_rows_d;
  logic [15:0] mm_i_q, mm_i_d, mm_a_stride_q, mm_a_stride_d;
  logic        mm_acc_q, mm_acc_d;
  logic        a_valid, a_ready, a_fire, a_last;
  tpu_pkg::bf16_t a_data   [Rows];
  tpu_pkg::f32_t  acc_data [Cols];

  // ---- Write-back queue (commands whose rows are in the array) ----
  logic  wb_push, wb_pop, wb_empty, wb_full;
  wb_t   wb_head;
  logic [WbCntW-1:0] wb_count;

  assign a_valid     = mm_active_q;
  assign a_fire      = a_valid && a_ready;
  assign a_last      = (mm_i_q == mm_rows_q - 1'b1);
  assign a_rd_addr_o = MemAddrW'(mm_a_row_q);
  assign c_rd_addr_o = MemAddrW'(mm_c_row_q + mm_i_q);
  for (genvar i = 0; i < Rows; i++) begin : gen_a_data
    assign a_data[i] = a_rd_data_i[32*i +: 16];
  end
  for (genvar j = 0; j < Cols; j++) begin : gen_acc_data
    assign acc_data[j] = c_rd_data_i[32*j +: 32];
  end
  // Ready while idle, or in the cycle the last row enters the array (no bubble between commands).
  assign mm_ready_o = (!mm_active_q || (a_fire && a_last)) && !wb_full;
  assign wb_push    = mm_start_i && mm_ready_o;

  always_comb begin
    mm_active_d = mm_active_q;
    mm_a_row_d  = mm_a_row_q;
    mm_c_row_d  = mm_c_row_q;
    mm_rows_d   = mm_rows_q;
    mm_i_d      = mm_i_q;
    mm_acc_d    = mm_acc_q;
    mm_a_stride_d = mm_a_stride_q;
    if (a_fire) begin
      mm_i_d     = mm_i_q + 1'b1;
      mm_a_row_d = mm_a_row_q + mm_a_stride_q;
      if (a_last) mm_active_d = 1'b0;
    end
    if (wb_push) begin  // after the last row's update: a new command takes over in the same cycle
      mm_a_stride_d = (mm_a_stride_i == '0) ? 16'd1 : mm_a_stride_i;
      mm_active_d = 1'b1;
      mm_a_row_d  = mm_a_row_i;
      mm_c_row_d  = mm_c_row_i;
      mm_rows_d   = mm_rows_i;
      mm_i_d      = '0;
      mm_acc_d    = mm_acc_i;
    end
  end

  tpu_fifo #(
    .data_t(wb_t),
    .Depth (WbDepth)
  ) i_wb_fifo (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .push_i (wb_push),
    .data_i ('{c_row: mm_c_row_i, rows: mm_rows_i}),
    .pop_i  (wb_pop),
    .data_o (wb_head),
    .empty_o(wb_empty),
    .full_o (wb_full),
    .count_o(wb_count)
  );

  // ---- The array ----
  logic          o_valid, o_last, idle;
  tpu_pkg::f32_t o_data [Cols];

  tpu_mxu #(
    .Rows  (Rows),
    .Cols  (Cols),
    .WBanks(WBanks),
    .WRows (WRows)
  ) i_mxu (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .w_valid_i (w_valid),
    .w_ready_o (w_ready),
    .w_data_i  (w_data),
    .a_valid_i (a_valid),
    .a_ready_o (a_ready),
    .a_data_i  (a_data),
    .acc_data_i(acc_data),
    .a_acc_i   (mm_acc_q),
    .a_last_i  (a_last),
    .o_valid_o (o_valid),
    .o_ready_i (1'b1),
    .o_data_o  (o_data),
    .o_last_o  (o_last),
    .idle_o    (idle)
  );

  // ---- Result write-back ----
  logic [15:0] wb_i_q, wb_i_d;
  logic        wb_last;

  assign wb_last     = (wb_i_q == wb_head.rows - 1'b1);
  assign c_we_o      = o_valid;
  assign c_wr_addr_o = MemAddrW'(wb_head.c_row + wb_i_q);
  for (genvar j = 0; j < Cols; j++) begin : gen_c_data
    assign c_wr_data_o[32*j +: 32] = o_data[j];
  end
  assign wb_pop    = o_valid && wb_last;
  assign mm_done_o = wb_pop;

  always_comb begin
    wb_i_d = wb_i_q;
    if (o_valid) wb_i_d = wb_last ? '0 : wb_i_q + 1'b1;
  end

  // The upper half of each VMEM lane holding a bf16 operand is not read (lowRISC idiom).
  logic unused_bits;
  always_comb begin
    unused_bits = ^wb_count;
    for (int unsigned l = 0; l < Cols; l++) begin
      for (int unsigned r = 0; r < WRows; r++) unused_bits ^= ^w_rd_data_i[r][32*l+16 +: 16];
      unused_bits ^= ^a_rd_data_i[32*l+16 +: 16];
    end
  end

  assign busy_o   = lw_active_q || lw_fill_q || mm_active_q || !wb_empty;
  assign a_beat_o = a_fire;
  assign w_beat_o = w_fire;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      lw_active_q <= 1'b0;
      lw_fill_q   <= 1'b0;
      lw_t_q      <= 1'b0;
      lw_row_q    <= '0;
      lw_i_q      <= '0;
      lw_stride_q <= 16'd1;
      mm_a_stride_q <= 16'd1;
      mm_active_q <= 1'b0;
      mm_a_row_q  <= '0;
      mm_c_row_q  <= '0;
      mm_rows_q   <= '0;
      mm_i_q      <= '0;
      mm_acc_q    <= 1'b0;
      wb_i_q      <= '0;
    end else begin
      lw_active_q <= lw_active_d;
      lw_fill_q   <= lw_fill_d;
      lw_t_q      <= lw_t_d;
      lw_row_q    <= lw_row_d;
      lw_i_q      <= lw_i_d;
      lw_stride_q <= lw_stride_d;
      mm_a_stride_q <= mm_a_stride_d;
      mm_active_q <= mm_active_d;
      mm_a_row_q  <= mm_a_row_d;
      mm_c_row_q  <= mm_c_row_d;
      mm_rows_q   <= mm_rows_d;
      mm_i_q      <= mm_i_d;
      mm_acc_q    <= mm_acc_d;
      wb_i_q      <= wb_i_d;
    end
  end

  // Assertions
  `TPU_ASSERT(ResultHasCommand_A,
      o_valid |-> !wb_empty,
      ("%m: ResultHasCommand_A failed"))
  `TPU_ASSERT(ResultLastInStep_A,
      o_valid |-> o_last == wb_last,
      ("%m: ResultLastInStep_A failed"))
  `TPU_ASSERT(MatmulRowsNonZero_A,
      wb_push |-> mm_rows_i != '0,
      ("%m: MatmulRowsNonZero_A failed"))
  `TPU_ASSERT(LoadStartWhenIdle_A,
      lw_start_i |-> lw_ready_o,
      ("%m: LoadStartWhenIdle_A failed"))
  `TPU_ASSERT(LoadBeatsInTile_A,
      lw_active_q |-> 32'(lw_i_q) < Beats,
      ("%m: LoadBeatsInTile_A failed"))
  `TPU_ASSERT(LoadFillBeatsInTile_A,
      lw_fill_q |-> 32'(lw_i_q) < Beats,
      ("%m: LoadFillBeatsInTile_A failed"))
  `TPU_ASSERT(LoadFillOrFeed_A,
      !(lw_fill_q && lw_active_q),
      ("%m: LoadFillOrFeed_A failed"))
  `TPU_ASSERT(LoadFillOnlyTransposed_A,
      lw_fill_q |-> lw_t_q,
      ("%m: LoadFillOnlyTransposed_A failed"))
  // A transposed tile is only defined for a square array (every chip variant is square).
  `TPU_ASSERT(LoadTransposeSquare_A,
      lw_start_i && lw_t_i |-> Rows == Cols,
      ("%m: LoadTransposeSquare_A failed"))
  // The array phase of a transposed load starts from the first weight row, right after the fill.
  `TPU_ASSERT(LoadTransposeFeedsAfterFill_A,
      lw_fill_q && lw_last_beat |=> lw_active_q && lw_t_q && lw_i_q == '0,
      ("%m: LoadTransposeFeedsAfterFill_A failed"))
  `TPU_ASSERT(MatmulStartWhenReady_A,
      mm_start_i |-> mm_ready_o,
      ("%m: MatmulStartWhenReady_A failed"))
  `TPU_ASSERT(IdleMeansEmpty_A,
      idle && !mm_active_q |-> wb_empty,
      ("%m: IdleMeansEmpty_A failed"))

endmodule
