// tpu_fifo: a synchronous FIFO of `data_t` (after common_cells' cc_fifo), Depth entries.
// Shared by every block (HBM queues, router buffers, sequencer, MXU unit).
//
// `data_o` shows the head while `empty_o` is low; a push is visible at the head the cycle after.
// Push and pop may happen in the same cycle. The user must never push when full or pop when
// empty (asserted). Fall-through is not provided: zero-latency paths use the head directly.
`include "tpu_assert.svh"

module tpu_fifo #(
  parameter type data_t = logic,
  parameter int unsigned Depth = 4,
  localparam int unsigned PtrW = (Depth > 1) ? $clog2(Depth) : 1,
  localparam int unsigned CntW = $clog2(Depth + 1)
) (
  input  logic            clk_i,
  input  logic            rst_ni,
  input  logic            push_i,
  input  data_t           data_i,
  input  logic            pop_i,
  output data_t           data_o,
  output logic            empty_o,
  output logic            full_o,
  output logic [CntW-1:0] count_o
);

  data_t mem_q[Depth];
  logic [PtrW-1:0] rd_ptr_q, wr_ptr_q;
  logic [CntW-1:0] count_q;

  function automatic logic [PtrW-1:0] ptr_inc(logic [PtrW-1:0] p);
    return (32'(p) == Depth - 1) ? '0 : p + 1'b1;
  endfunction

  // Pointers and count move at the clock edge (no next-state always_comb: push_i often depends
  // on a top-level input, which would evaluate it at every eval() of a verilated model).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_ptr_q <= '0;
      wr_ptr_q <= '0;
      count_q <= '0;
    end else begin
      if (push_i) wr_ptr_q <= ptr_inc(wr_ptr_q);
      if (pop_i) rd_ptr_q <= ptr_inc(rd_ptr_q);
      if (push_i && !pop_i) count_q <= count_q + 1'b1;
      if (pop_i && !push_i) count_q <= count_q - 1'b1;
    end
  end

  // Storage needs no reset: an entry is only read after it was written.
  always_ff @(posedge clk_i) begin
    if (push_i) mem_q[wr_ptr_q] <= data_i;
  end

  assign data_o = mem_q[rd_ptr_q];
  assign empty_o = (count_q == '0);
  assign full_o = (32'(count_q) == Depth);
  assign count_o = count_q;

  // ---- Assertions ----
  `TPU_ASSERT(NoPushFull_A,
      push_i |-> !full_o,
      ("tpu_fifo: push while full"))
  `TPU_ASSERT(NoPopEmpty_A,
      pop_i |-> !empty_o,
      ("tpu_fifo: pop while empty"))

endmodule
