// tpu_hbm_cqueue: an age-ordered ("collapsing") queue of `entry_t` for a scheduler.
//
// Entry 0 is the oldest; a push appends behind the youngest; any entry may be removed (`pop_i`
// with `pop_idx_i`) and the younger ones move down one place in the same cycle, so "oldest ready
// first" is a priority encoder over the indices. Pushes and removals take effect the next cycle;
// both may happen in the same cycle. Never push when full, never remove an invalid entry
// (asserted).
`include "tpu_assert.svh"

module tpu_hbm_cqueue #(
  parameter type entry_t = logic,
  parameter int unsigned Depth = 8,
  localparam int unsigned IdxW = (Depth > 1) ? $clog2(Depth) : 1,
  localparam int unsigned CntW = $clog2(Depth + 1)
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  input  logic                   push_i,
  input  entry_t                 push_entry_i,
  input  logic                   pop_i,
  input  logic   [IdxW-1:0]      pop_idx_i,
  output entry_t [Depth-1:0]     entries_o,
  output logic   [Depth-1:0]     valid_o,
  output logic   [CntW-1:0]      count_o,
  output logic                   full_o,
  output logic                   empty_o
);

  entry_t [Depth-1:0] ent_q;
  logic [CntW-1:0] count_q, count_d;

  always_comb begin
    count_d = count_q;
    if (pop_i) count_d = count_d - 1'b1;
    if (push_i) count_d = count_d + 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      count_q <= '0;
    end else begin
      count_q <= count_d;
    end
  end

  // Entries need no reset: only the first count_q are ever looked at. The shift and the append
  // are worked out here, at the clock edge, rather than as a next-state vector in an always_comb:
  // the pushed entry comes from the chip's host port (a top-level input), and a verilated model
  // re-evaluates all logic that depends on a top-level input at every eval(), twice a cycle, so
  // a combinational next state of all Depth entries cost that much each time (docs/scale.md,
  // "One core"). The registers and their values are the same. The new entries are built in a
  // local and assigned once, only in a cycle that changes them: assigning entries one by one
  // (ent_q[i] <= ent_q[i+1]) made Verilator zero, load and store back a shadow copy of all of
  // them every cycle.
  always_ff @(posedge clk_i) begin
    if (pop_i || push_i) begin
      entry_t [Depth-1:0] ent_n;
      ent_n = ent_q;
      if (pop_i) begin
        for (int unsigned i = 0; i + 1 < Depth; i++) begin
          if (i >= 32'(pop_idx_i)) ent_n[i] = ent_n[i+1];
        end
      end
      if (push_i) ent_n[IdxW'(count_q - CntW'(pop_i))] = push_entry_i;
      ent_q <= ent_n;
    end
  end

  always_comb begin
    for (int unsigned i = 0; i < Depth; i++) valid_o[i] = (i < 32'(count_q));
  end

  assign entries_o = ent_q;
  assign count_o = count_q;
  assign full_o = (32'(count_q) == Depth);
  assign empty_o = (count_q == '0);

  // ---- Assertions ----
  `TPU_ASSERT(NoPushFull_A,
      push_i |-> !full_o,
      ("tpu_hbm_cqueue: push while full"))
  `TPU_ASSERT(NoPopEmpty_A,
      pop_i |-> !empty_o,
      ("tpu_hbm_cqueue: pop while empty"))
  `TPU_ASSERT(PopValid_A,
                                pop_i |-> 32'(pop_idx_i) < 32'(count_q),
      ("tpu_hbm_cqueue: removal of an invalid entry %0d", pop_idx_i))

endmodule
