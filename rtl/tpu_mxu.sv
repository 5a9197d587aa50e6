// tpu_mxu: Rows x Cols weight-stationary systolic array, bf16 x bf16 -> f32.
//
// Dataflow. PE(i, j) holds W[k0 + i][n0 + j] of the current weight tile. One activation beat is a
// row of A (Rows bf16 values, one per k) plus, per column, the f32 value the column starts from:
// +0.0, or acc_data_i[j] when a_acc_i is set (the running sum of the previous K tile, so a K-tiled
// product keeps the sequential order of docs/numerics.md). Row i is skewed by i cycles and the
// start value of column j by j cycles; the partial sum of column j walks down through k = 0..Rows-1
// (acc = fma(a_k, w_k, acc) in each PE), and the outputs are deskewed so that a whole result row
// leaves together.
//
// Weights sit in WBanks banks per PE, filled and consumed round robin. The weight port writes
// WRows rows of the bank being filled per beat (rows r .. r + WRows - 1 from w_data_i, row-major),
// rows 0..Rows-1 in order; after the last rows the bank is ready and the next weight tile goes to
// the next bank. Each activation carries its bank select along the row, so the switch to a new
// tile ripples through the array with the skew and back-to-back tiles run with no bubble.
// a_last_i marks a tile's last activation row and releases its bank; the bank is rewritten row by
// row only once the last beat that reads it has passed that row (counted in enabled cycles). So a
// tile of M rows occupies its bank for about M + Rows + Cols cycles, and tiles can follow each
// other every max(M, (M + Rows + Cols) / WBanks, Rows / WRows) cycles (docs/mxu.md).
//
// Handshakes: valid/ready on all three streams. The whole array advances with one enable,
// en = !o_valid_o || o_ready_i, so back-pressure on the output stalls every stage in place.
// Latency: Rows + Cols cycles from an accepted activation beat to its result. Throughput: one
// beat (Rows x Cols MACs) per cycle. Loading a weight tile takes Rows / WRows beats.
`include "tpu_assert.svh"

module tpu_mxu #(
  parameter int unsigned Rows   = 8,
  parameter int unsigned Cols   = 8,
  parameter int unsigned WBanks = 4,  // weight banks per PE (>= 2)
  parameter int unsigned WRows  = 2   // weight rows per beat of the weight port (divides Rows)
) (
  input  logic           clk_i,
  input  logic           rst_ni,
  // weight tile rows into the bank being filled: row r + i is w_data_i[i * Cols +: Cols]
  input  logic           w_valid_i,
  output logic           w_ready_o,
  input  tpu_pkg::bf16_t w_data_i   [WRows*Cols],
  // activation rows
  input  logic           a_valid_i,
  output logic           a_ready_o,
  input  tpu_pkg::bf16_t a_data_i   [Rows],
  input  tpu_pkg::f32_t  acc_data_i [Cols],
  input  logic           a_acc_i,    // columns start from acc_data_i (else from +0.0)
  input  logic           a_last_i,   // last row of the current weight tile
  // result rows
  output logic           o_valid_o,
  input  logic           o_ready_i,
  output tpu_pkg::f32_t  o_data_o   [Cols],
  output logic           o_last_o,   // result of a beat that had a_last_i set
  // status
  output logic           idle_o      // no beat in flight and no bank loaded
);

  localparam int unsigned Latency  = Rows + Cols;
  localparam int unsigned RowW     = tpu_pkg::idx_width(Rows);
  localparam int unsigned DrainMax = Rows + Cols;
  localparam int unsigned DrainW   = tpu_pkg::idx_width(DrainMax + 1);
  localparam int unsigned BankW    = tpu_pkg::idx_width(WBanks);

  typedef logic [BankW-1:0] bank_t;

  typedef struct packed {
    bank_t          sel;
    tpu_pkg::bf16_t a;
  } act_t;

  function automatic bank_t next_bank(bank_t b);
    return (32'(b) == WBanks - 1) ? '0 : b + 1'b1;
  endfunction

  typedef struct packed {
    logic valid;
    logic last;
  } tag_t;

  // ---------------------------------------------------------------------------------------------
  // Bank control
  // ---------------------------------------------------------------------------------------------
  logic              en;
  logic              a_fire, w_fire;
  logic [WBanks-1:0] full_d, full_q;          // bank holds a complete, unreleased weight tile
  bank_t             rd_bank_d, rd_bank_q;    // bank the next activation beat multiplies with
  bank_t             wr_bank_d, wr_bank_q;    // bank the weight port fills
  logic [RowW-1:0]   wr_row_d, wr_row_q;      // first row of wr_bank the next beat writes
  logic [DrainW-1:0] drain_d [WBanks];        // enabled cycles since the bank's last beat
  logic [DrainW-1:0] drain_q [WBanks];
  logic              row_free;
  logic [DrainW-1:0] drain_wr;

  assign en        = !o_valid_o || o_ready_i;
  assign a_ready_o = en && full_q[rd_bank_q];
  assign a_fire    = a_valid_i && a_ready_o;
  // Row r of a released bank is free once its last beat has left PE(r, Cols-1); a beat writes
  // rows wr_row_q .. wr_row_q + WRows - 1.
  assign drain_wr  = drain_q[wr_bank_q];
  assign row_free  = 32'(drain_wr) >= 32'(wr_row_q) + WRows - 1 + Cols;
  assign w_ready_o = !full_q[wr_bank_q] && row_free;
  assign w_fire    = w_valid_i && w_ready_o;

  always_comb begin
    full_d    = full_q;
    rd_bank_d = rd_bank_q;
    wr_bank_d = wr_bank_q;
    wr_row_d  = wr_row_q;
    for (int unsigned b = 0; b < WBanks; b++) begin
      drain_d[b] = drain_q[b];
      if (en && 32'(drain_q[b]) < DrainMax) drain_d[b] = drain_q[b] + 1'b1;
    end
    if (w_fire) begin
      if (32'(wr_row_q) == Rows - WRows) begin
        full_d[wr_bank_q] = 1'b1;
        wr_bank_d         = next_bank(wr_bank_q);
        wr_row_d          = '0;
      end else begin
        wr_row_d = wr_row_q + RowW'(WRows);
      end
    end
    if (a_fire && a_last_i) begin
      full_d[rd_bank_q]  = 1'b0;
      drain_d[rd_bank_q] = '0;
      rd_bank_d          = next_bank(rd_bank_q);
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      full_q    <= '0;
      rd_bank_q <= '0;
      wr_bank_q <= '0;
      wr_row_q  <= '0;
      drain_q   <= '{default: DrainW'(DrainMax)};
    end else begin
      full_q    <= full_d;
      rd_bank_q <= rd_bank_d;
      wr_bank_q <= wr_bank_d;
      wr_row_q  <= wr_row_d;
      drain_q   <= drain_d;
    end
  end

  // ---------------------------------------------------------------------------------------------
  // The array. Cell (i, j) - a processing element - holds WBanks weights,
  // wgt_q[bank * Rows + i][j];
  // each enabled cycle it takes the activation entering from the left (with the bank it
  // multiplies) and the partial sum entering from above, computes
  // tpu_mac_pkg::mac(a, w[bank], psum) with one rounding, and registers the activation to the
  // right (a_q, sel_q [i][j]) and the new partial sum downward (psum_q[i][j]): one cycle right, one
  // cycle down. Weight writes go straight into the named bank, independent of `en`; the control
  // above guarantees that no beat in flight still reads that bank.
  // The cells are state arrays and one loop over them (not Rows x Cols instances): the same
  // registers and logic, but Verilator keeps a loop of more than 64 iterations rolled, so the
  // 128 x 128 array verilates to one copy of the cell's code instead of one per instance.
  //
  // Skew and deskew lines (shift registers that advance with `en`): row i's activation enters
  // the array i + 1 cycles after its beat (askew_q[i][i]), column j's running sum j + 1 cycles
  // after (tskew_q[j][j]), and column j's result leaves Cols - 1 - j cycles after the bottom
  // row's (dskew_q[j][Cols - 2 - j]), so a result row leaves together. Stages beyond a line's
  // depth hold values nothing reads.
  // ---------------------------------------------------------------------------------------------
  typedef tpu_pkg::f32_t [Cols-1:0] f32_row_t;
  typedef act_t          [Rows-1:0] act_line_t;

  tpu_pkg::bf16_t        wgt_q   [WBanks*Rows][Cols];
  tpu_pkg::bf16_t        a_q     [Rows][Cols];
  bank_t                 sel_q   [Rows][Cols];
  tpu_pkg::f32_t         psum_q  [Rows][Cols];
  act_line_t             askew_q [Rows];
  act_line_t             askew_d [Rows];
  f32_row_t              tskew_q [Cols];
  f32_row_t              tskew_d [Cols];
  f32_row_t              dskew_q [Cols];
  f32_row_t              dskew_d [Cols];

  always_comb begin
    act_t          a_in;
    tpu_pkg::f32_t p_in;
    for (int unsigned i = 0; i < Rows; i++) begin
      a_in.sel   = rd_bank_q;
      a_in.a     = a_fire ? a_data_i[i] : '0;
      askew_d[i] = {askew_q[i][Rows-2:0], a_in};
    end
    for (int unsigned j = 0; j < Cols; j++) begin
      p_in       = (a_fire && a_acc_i) ? acc_data_i[j] : '0;
      tskew_d[j] = {tskew_q[j][Cols-2:0], p_in};
      dskew_d[j] = {dskew_q[j][Cols-2:0], psum_q[Rows-1][j]};
    end
  end

  // Beats in flight: enabled cycles since the last accepted beat, saturating at LiveMax. A beat
  // has left the cells Latency enabled cycles after it was accepted; from then on the cells
  // hold values no beat will meet (a new beat reaches each cell through its own skew line and
  // its own cells), so they stop: no MACs are evaluated while the array idles (collectives,
  // DMA- or VPU-only programs; docs/scale.md, "One core"). Results and cycles are unchanged.
  localparam int unsigned LiveMax = Latency + 1;
  localparam int unsigned LiveW   = tpu_pkg::idx_width(LiveMax + 1);
  logic [LiveW-1:0] live_q;
  logic             live;
  assign live = 32'(live_q) < LiveMax;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) live_q <= LiveW'(LiveMax);
    else if (a_fire) live_q <= '0;
    else if (en && live) live_q <= live_q + 1'b1;
  end

  // What enters the array at its edges: row i's activation (askew_q[i][i]) and column j's
  // running sum (tskew_q[j][j]), picked once per row and column at constant positions, not by
  // each cell of the loop below (a variable part-select of a packed line).
  act_t          a_edge [Rows];
  tpu_pkg::f32_t p_edge [Cols];
  for (genvar i = 0; i < Rows; i++) begin : gen_a_edge
    assign a_edge[i] = askew_q[i][i];
  end
  for (genvar j = 0; j < Cols; j++) begin : gen_p_edge
    assign p_edge[j] = tskew_q[j][j];
  end

  // The cells' registers (weights, activations, partial sums) are not reset: the control (reset)
  // lets no beat read a bank before a whole tile is written into it, every value a beat meets in
  // the array was computed from that beat's own inputs, and the tag line (reset) marks which
  // outputs are results. They are plain unpacked arrays, which Verilator simulates faster than
  // packed rows (and arrays of that size cannot be reset in one assignment there).
  // The beat's rows as whole rows: a row is written in one assignment (Verilator keeps a loop
  // over 128 columns rolled, and cannot make a delayed assignment to an element inside one).
  tpu_pkg::bf16_t w_row [WRows][Cols];
  for (genvar r = 0; r < WRows; r++) begin : gen_w_row
    for (genvar j = 0; j < Cols; j++) begin : gen_w_col
      assign w_row[r][j] = w_data_i[r*Cols + j];
    end
  end

  always_ff @(posedge clk_i) begin
    if (w_fire) begin
      for (int unsigned r = 0; r < WRows; r++) begin
        wgt_q[32'(wr_bank_q) * Rows + 32'(wr_row_q) + r] <= w_row[r];
      end
    end
  end

  // The cells read registers only and feed only their registers, so they are worked out at the
  // clock edge, in the cycles they move (en && live): in an always_comb they ran every cycle, and
  // an idle array copied all its registers into their next values (docs/scale.md "One core").
  always_ff @(posedge clk_i) begin
    if (en && live) begin
      act_t           a_in;
      tpu_pkg::f32_t  p_in;
      tpu_pkg::bf16_t a_d    [Rows][Cols];
      bank_t          sel_d  [Rows][Cols];
      tpu_pkg::f32_t  psum_d [Rows][Cols];
      for (int unsigned i = 0; i < Rows; i++) begin
        for (int unsigned j = 0; j < Cols; j++) begin
          if (j == 0) a_in = a_edge[i];
          else        a_in = '{sel: sel_q[i][j-1], a: a_q[i][j-1]};
          if (i == 0) p_in = p_edge[j];
          else        p_in = psum_q[i-1][j];
          a_d[i][j]    = a_in.a;
          sel_d[i][j]  = a_in.sel;
          psum_d[i][j] = tpu_mac_pkg::mac(a_in.a, wgt_q[32'(a_in.sel) * Rows + i][j], p_in);
        end
      end
      a_q    <= a_d;
      sel_q  <= sel_d;
      psum_q <= psum_d;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      askew_q <= '{default: '0};
      tskew_q <= '{default: '0};
      dskew_q <= '{default: '0};
    end else if (en) begin
      askew_q <= askew_d;
      tskew_q <= tskew_d;
      dskew_q <= dskew_d;
    end
  end

  for (genvar j = 0; j < Cols; j++) begin : gen_out
    if (j == Cols - 1) begin : gen_last
      assign o_data_o[j] = psum_q[Rows-1][j];
    end else begin : gen_deskew
      assign o_data_o[j] = dskew_q[j][Cols-2-j];
    end
  end

  // Column 0, cell by cell, for waves (waves/mxu.gtkw): what enters each row, both weights, the
  // partial sum entering each cell and the one leaving the bottom.
  for (genvar i = 0; i < Rows; i++) begin : gen_col0
    tpu_pkg::bf16_t dbg_a_in, dbg_w_bank0, dbg_w_bank1;
    bank_t          dbg_sel_in;
    tpu_pkg::f32_t  dbg_psum_in, dbg_psum_out;
    assign dbg_a_in     = askew_q[i][i].a;
    assign dbg_sel_in   = askew_q[i][i].sel;
    assign dbg_w_bank0  = wgt_q[i][0];
    assign dbg_w_bank1  = wgt_q[Rows + i][0];
    assign dbg_psum_in  = (i == 0) ? tskew_q[0][0] : psum_q[i-1][0];
    assign dbg_psum_out = psum_q[i][0];
  end

  tag_t tag_in, tag_out;
  assign tag_in = '{valid: a_fire, last: a_fire && a_last_i};

  tpu_shift #(
    .data_t(tag_t),
    .Depth (Latency)
  ) i_tag_line (
    .clk_i (clk_i),
    .rst_ni(rst_ni),
    .en_i  (en),
    .d_i   (tag_in),
    .q_o   (tag_out)
  );

  assign o_valid_o = tag_out.valid;
  assign o_last_o  = tag_out.last;

  // Idle: nothing loaded, nothing streaming. (A beat in flight implies its bank was full when it
  // entered; once released, the drain counters tell when the beat has left the array.)
  logic drained;
  always_comb begin
    drained = 1'b1;
    for (int unsigned b = 0; b < WBanks; b++) begin
      if (32'(drain_q[b]) < DrainMax) drained = 1'b0;
    end
  end
  assign idle_o = (full_q == '0) && drained && !o_valid_o;

  // ---------------------------------------------------------------------------------------------
  // Assertions
  // ---------------------------------------------------------------------------------------------
  // Payloads stable while a beat waits: immediate assertions at the clock edge against copies
  // taken only while it waits (as concurrent $stable assertions, they made Verilator sample
  // every payload at every eval(), through flattened copies rebuilt every cycle; docs/scale.md
  // "One core"). Same names, messages and cycles.
  logic           a_wait_q, w_wait_q, o_wait_q, a_same, w_same, o_same;
  tpu_pkg::bf16_t a_held_q   [Rows];
  tpu_pkg::f32_t  acc_held_q [Cols];
  logic           a_acc_held_q, a_last_held_q;
  tpu_pkg::bf16_t w_held_q   [WRows*Cols];
  tpu_pkg::f32_t  o_held_q   [Cols];
  logic           o_last_held_q;
  always_comb begin  // compared only while a beat waits
    a_same = 1'b1;
    w_same = 1'b1;
    o_same = 1'b1;
    if (a_wait_q) begin
      a_same = (a_acc_i == a_acc_held_q) && (a_last_i == a_last_held_q);
      for (int unsigned i = 0; i < Rows; i++) a_same = a_same && (a_data_i[i] == a_held_q[i]);
      for (int unsigned j = 0; j < Cols; j++) a_same = a_same && (acc_data_i[j] == acc_held_q[j]);
    end
    if (w_wait_q) begin
      for (int unsigned k = 0; k < WRows * Cols; k++)
        w_same = w_same && (w_data_i[k] == w_held_q[k]);
    end
    if (o_wait_q) begin
      o_same = o_valid_o && (o_last_o == o_last_held_q);
      for (int unsigned j = 0; j < Cols; j++) o_same = o_same && (o_data_o[j] == o_held_q[j]);
    end
  end
  always_ff @(posedge clk_i) begin
    if (rst_ni && a_wait_q) begin
      `TPU_ASSERT_I(PayloadStable_A, a_same,
          ("tpu_mxu: activation payload changed while waiting for ready"))
    end
    if (rst_ni && w_wait_q) begin
      `TPU_ASSERT_I(WPayloadStable_A, w_same,
          ("tpu_mxu: weight payload changed while waiting for ready"))
    end
    if (rst_ni && o_wait_q) begin
      `TPU_ASSERT_I(OPayloadStable_A, o_same,
          ("tpu_mxu: result payload changed while waiting for ready"))
    end
    a_wait_q <= a_valid_i && !a_ready_o;
    w_wait_q <= w_valid_i && !w_ready_o;
    o_wait_q <= o_valid_o && !o_ready_i;
    if (a_valid_i && !a_ready_o) begin
      a_held_q      <= a_data_i;
      acc_held_q    <= acc_data_i;
      a_acc_held_q  <= a_acc_i;
      a_last_held_q <= a_last_i;
    end
    if (w_valid_i && !w_ready_o) w_held_q <= w_data_i;
    if (o_valid_o && !o_ready_i) begin
      o_held_q      <= o_data_o;
      o_last_held_q <= o_last_o;
    end
  end

  `TPU_ASSERT(ValidHeld_A,
    a_valid_i && !a_ready_o |=> a_valid_i,
      ("tpu_mxu: activation valid dropped before ready"))
  `TPU_ASSERT(WValidHeld_A,
    w_valid_i && !w_ready_o |=> w_valid_i,
      ("tpu_mxu: weight valid dropped before ready"))
  `TPU_ASSERT(BankLoaded_A,
    a_fire |-> full_q[rd_bank_q],
      ("tpu_mxu: activation accepted into a bank with no weight tile"))
  `TPU_ASSERT(WBankFree_A,
    w_fire |-> !full_q[wr_bank_q] && 32'(drain_wr) >= 32'(wr_row_q) + WRows - 1 + Cols,
      ("tpu_mxu: weight row written while a beat may still read it"))
  `TPU_ASSERT(WrRowInRange_A,
    32'(wr_row_q) < Rows && 32'(wr_row_q) % WRows == 0,
      ("tpu_mxu: weight row pointer out of range"))
  `TPU_ASSERT(BanksInRange_A,
    32'(rd_bank_q) < WBanks && 32'(wr_bank_q) < WBanks,
      ("tpu_mxu: bank pointer out of range"))
  // Banks fill and drain in the same round-robin order: the full banks are the run from
  // rd_bank_q up to wr_bank_q, so the pointers meet only with none or all of them full.
  `TPU_ASSERT(BankOrder_A,
    wr_bank_q == rd_bank_q |-> full_q == '0 || full_q == '1,
      ("tpu_mxu: weight banks out of round-robin order"))
  `TPU_ASSERT_INIT(ParamsOk_A, WBanks >= 2 && WRows >= 1 && Rows % WRows == 0,
      ("tpu_mxu: WBanks must be >= 2 and WRows must divide Rows"))

endmodule
