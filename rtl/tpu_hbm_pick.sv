// tpu_hbm_pick: the FR-FCFS choice over one age-ordered request queue of a channel (comb only).
//
// For every valid entry it works out the entry's next command from the bank state: a column
// command if its row is open (a row hit), an ACT if its bank is closed, a PRE if another row is
// open (a conflict). An entry is ready when the channel says that command may be issued to that
// bank this cycle (`can_*_i`, which fold in every timing rule). Out of the ready entries it offers
//   - the oldest ready column command (first ready), and
//   - the oldest ready row command (ACT or PRE),
// and the channel prefers the column command. A PRE is held back while any entry of this queue
// still hits the open row of that bank, so hits drain before the row closes. When `head_first_i`
// is set (the oldest entry is starved): entry 0's PRE is not held back; when entry 0 has a ready
// command it is the only one offered; otherwise other entries may go, except to entry 0's bank
// (so that no new hit delays the PRE it waits for).
module tpu_hbm_pick
  import tpu_hbm_pkg::*;
#(
  parameter int unsigned Depth = 16,
  localparam int unsigned IdxW = (Depth > 1) ? $clog2(Depth) : 1
) (
  input  logic      [Depth-1:0]     valid_i,
  input  hbm_bank_t [Depth-1:0]     bank_i,
  input  hbm_row_t  [Depth-1:0]     row_i,
  input  logic      [HBM_BANKS-1:0] open_i,
  input  hbm_row_t  [HBM_BANKS-1:0] open_row_i,
  input  logic      [HBM_BANKS-1:0] can_col_i,
  input  logic      [HBM_BANKS-1:0] can_act_i,
  input  logic      [HBM_BANKS-1:0] can_pre_i,
  input  logic                      head_first_i,
  output logic                      col_found_o,
  output logic      [IdxW-1:0]      col_idx_o,
  output logic                      row_found_o,
  output logic      [IdxW-1:0]      row_idx_o,
  output logic                      row_is_act_o
);

  logic [Depth-1:0] hit, col_rdy, act_rdy, pre_rdy;
  logic head_rdy;
  logic [HBM_BANKS-1:0] hit_pending;

  // An empty queue offers nothing: every output is 0, and the scans are skipped (a simulator
  // then does no per-entry work in the cycles a channel idles; docs/scale.md, "One core").
  logic any_valid;
  assign any_valid = (valid_i != '0);

  always_comb begin
    hit_pending = '0;
    hit = '0;
    if (any_valid) begin
      for (int unsigned i = 0; i < Depth; i++) begin
        hit[i] = valid_i[i] && open_i[bank_i[i]] && (open_row_i[bank_i[i]] == row_i[i]);
        if (hit[i]) hit_pending[bank_i[i]] = 1'b1;
      end
    end
  end

  always_comb begin
    logic allowed;
    allowed = 1'b0;
    col_found_o = 1'b0;
    col_idx_o = '0;
    row_found_o = 1'b0;
    row_idx_o = '0;
    row_is_act_o = 1'b0;
    col_rdy = '0;
    act_rdy = '0;
    pre_rdy = '0;
    head_rdy = 1'b0;
    if (any_valid) begin
      for (int unsigned i = 0; i < Depth; i++) begin
        allowed = valid_i[i] && (!head_first_i || i == 0 || bank_i[i] != bank_i[0]);
        col_rdy[i] = allowed && hit[i] && can_col_i[bank_i[i]];
        act_rdy[i] = allowed && !open_i[bank_i[i]] && can_act_i[bank_i[i]];
        pre_rdy[i] = allowed && open_i[bank_i[i]] && !hit[i] && can_pre_i[bank_i[i]] &&
                     (!hit_pending[bank_i[i]] || (head_first_i && i == 0));
      end
      head_rdy = col_rdy[0] || act_rdy[0] || pre_rdy[0];
      // Priority encoders, oldest (lowest index) first: scan downwards so the lowest wins.
      for (int i = int'(Depth) - 1; i >= 0; i--) begin
        if (col_rdy[i]) begin
          col_found_o = 1'b1;
          col_idx_o = IdxW'(i);
        end
        if (act_rdy[i] || pre_rdy[i]) begin
          row_found_o = 1'b1;
          row_idx_o = IdxW'(i);
          row_is_act_o = act_rdy[i];
        end
      end
      // A starved head with a ready command: offer nothing else.
      if (head_first_i && head_rdy) begin
        col_found_o = col_rdy[0];
        col_idx_o = '0;
        row_found_o = !col_rdy[0];
        row_idx_o = '0;
        row_is_act_o = act_rdy[0];
      end
    end
  end

endmodule
