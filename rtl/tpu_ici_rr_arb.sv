// tpu_ici_rr_arb: round-robin arbiter over N requesters.
//
// Combinational grant (`gnt_o` one-hot, `idx_o` its index, `valid_o` = any request) from the
// requests and the priority pointer; latency 0. When `upd_i` is high the pointer moves to the
// requester after the granted one (call it only when the grant was used, so a requester that
// lost downstream keeps its priority). One grant per cycle.
module tpu_ici_rr_arb #(
  parameter int unsigned N = 4,
  localparam int unsigned IdxW = (N > 1) ? $clog2(N) : 1
) (
  input  logic            clk_i,
  input  logic            rst_ni,
  input  logic [N-1:0]    req_i,
  input  logic            upd_i,
  output logic [N-1:0]    gnt_o,
  output logic [IdxW-1:0] idx_o,
  output logic            valid_o
);

  logic [IdxW-1:0] ptr_q, ptr_d;

  always_comb begin
    gnt_o = '0;
    idx_o = '0;
    valid_o = 1'b0;
    for (int unsigned i = 0; i < N; i++) begin
      logic [IdxW-1:0] j;
      j = IdxW'((32'(ptr_q) + i) % N);
      if (!valid_o && req_i[j]) begin
        valid_o = 1'b1;
        idx_o = j;
        gnt_o[j] = 1'b1;
      end
    end
  end

  always_comb begin
    ptr_d = ptr_q;
    if (upd_i && valid_o) ptr_d = IdxW'((32'(idx_o) + 1) % N);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) ptr_q <= '0;
    else ptr_q <= ptr_d;
  end

  // ---- Assertions ----
  a_gnt_onehot: assert property (@(posedge clk_i) disable iff (!rst_ni) $onehot0(gnt_o))
  else $error("tpu_ici_rr_arb: grant not one-hot");
  a_gnt_requested: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                    (gnt_o & ~req_i) == '0)
  else $error("tpu_ici_rr_arb: grant without request");
  a_ptr_range: assert property (@(posedge clk_i) disable iff (!rst_ni) 32'(ptr_q) < N)
  else $error("tpu_ici_rr_arb: pointer out of range");

endmodule
