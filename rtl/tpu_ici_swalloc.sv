// tpu_ici_swalloc: the router's combined VC + switch allocator: a maximal matching of the
// requesting input VCs to the output ports, at most one VC per input and one input per output.
//
// Every input VC whose head can move requests (tpu_ici_input: a body flit has a credit on its
// packet's output VC; a head flit has a free output VC with a credit), so a grant is a complete
// VC + switch allocation: no separate VC-allocation cycle. Two passes over the outputs:
//   1. body flits only (VCs whose packet already holds its output VC), so that a packet that has
//      begun crosses the router without gaps and frees its output VC (and, at the ejection port,
//      the single ejection VC) as early as possible;
//   2. every request left (heads, and bodies whose output or input pass 1 gave to another).
// In each pass the outputs take turns in a rotating order (the first one moves on every cycle);
// an output takes the first unmatched input that requests it in round-robin order from its
// pointer, and that input gives it its first VC (round robin from the input's pointer) that
// requests this output. The result is maximal: a request is left ungranted only when its input
// or its output is matched to another (asserted, `AllocMaximal_A`), unlike a single-iteration
// separable allocator, where a VC that loses its output also idles its input's other VCs.
// Pointers move past the grants they made, so a request waits a bounded time (packets are at
// most 256 flits, which bounds how long pass 1 can keep a head waiting).
// Latency 0 (combinational grants from registered requests). In hardware the passes form a
// chain like a wavefront allocator's (2 x NumP output steps).
`include "tpu_assert.svh"

module tpu_ici_swalloc
  import tpu_ici_pkg::*;
#(
  parameter int unsigned NumVc = 2,
  parameter int unsigned NumP = NumPorts,  // router ports (NumPorts, + 1 with a second local port)
  localparam int unsigned VcW = vc_width(NumVc)
) (
  input  logic                                 clk_i,
  input  logic                                 rst_ni,
  input  logic      [NumP-1:0][NumVc-1:0]  req_i,       // [input][VC] can move now
  input  logic      [NumP-1:0][NumVc-1:0]  req_body_i,  // ... and is a body flit
  input  ici_port_e [NumP-1:0][NumVc-1:0]  req_port_i,  // its output port
  output logic      [NumP-1:0][NumVc-1:0]  gnt_o,       // per input: the VC that crosses
  output logic      [NumP-1:0]             out_valid_o,
  output logic      [NumP-1:0][PortW-1:0]  out_sel_o    // per output: the input it takes
);

  localparam int unsigned SelW = $clog2(NumP);

  logic [NumP-1:0][VcW-1:0]  vc_ptr_q, vc_ptr_d;   // per input: VC with priority
  logic [NumP-1:0][SelW-1:0] out_ptr_q, out_ptr_d;  // per output: input with priority
  logic [SelW-1:0]               first_q, first_d;      // the output that picks first
  logic [NumP-1:0]           in_matched, out_matched;

  // Per output: whether any input VC requests it (pass 2), with a body flit (pass 1). An
  // output nobody requests is skipped, and with no request at all nothing is scanned (the
  // result is the same: such an output matches nothing).
  logic [NumP-1:0] any_req, body_req;
  always_comb begin
    any_req = '0;
    body_req = '0;
    for (int unsigned i = 0; i < NumP; i++) begin
      for (int unsigned v = 0; v < NumVc; v++) begin
        if (req_i[i][v] && 32'(req_port_i[i][v]) < NumP) begin
          any_req[req_port_i[i][v]] = 1'b1;
          if (req_body_i[i][v]) body_req[req_port_i[i][v]] = 1'b1;
        end
      end
    end
  end

  always_comb begin
    int unsigned o, i, v;
    gnt_o = '0;
    out_valid_o = '0;
    out_sel_o = '0;
    in_matched = '0;
    out_matched = '0;
    vc_ptr_d = vc_ptr_q;
    out_ptr_d = out_ptr_q;
    first_d = SelW'((32'(first_q) + 1) % NumP);
    o = 0;
    i = 0;
    v = 0;
    if (any_req != '0) begin
      for (int unsigned pass = 0; pass < 2; pass++) begin
        for (int unsigned k = 0; k < NumP; k++) begin
          o = (32'(first_q) + k) % NumP;
          if (!out_matched[o] && ((pass == 1) ? any_req[o] : body_req[o])) begin
            for (int unsigned ki = 0; ki < NumP; ki++) begin
              i = (32'(out_ptr_q[o]) + ki) % NumP;
              if (!in_matched[i] && req_i[i] != '0) begin
                for (int unsigned kv = 0; kv < NumVc; kv++) begin
                  v = (32'(vc_ptr_q[i]) + kv) % NumVc;
                  if (!out_matched[o] && !in_matched[i] && req_i[i][v] &&
                      req_port_i[i][v] == ici_port_e'(o) && (pass == 1 || req_body_i[i][v])) begin
                    out_matched[o] = 1'b1;
                    in_matched[i] = 1'b1;
                    gnt_o[i][v] = 1'b1;
                    out_valid_o[o] = 1'b1;
                    out_sel_o[o] = PortW'(i);
                    out_ptr_d[o] = SelW'((i + 1) % NumP);
                    vc_ptr_d[i] = VcW'((v + 1) % NumVc);
                  end
                end
              end
            end
          end
        end
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      vc_ptr_q <= '0;
      out_ptr_q <= '0;
      first_q <= '0;
    end else begin
      vc_ptr_q <= vc_ptr_d;
      out_ptr_q <= out_ptr_d;
      first_q <= first_d;
    end
  end

  // ---- Assertions ----
  // Maximal: no request is left with both its input and its output unmatched.
  logic left_out;
  always_comb begin
    left_out = 1'b0;
    if (req_i != '0)
      for (int unsigned i = 0; i < NumP; i++)
        for (int unsigned v = 0; v < NumVc; v++)
          if (req_i[i][v] && !in_matched[i] && !out_matched[req_port_i[i][v]]) left_out = 1'b1;
  end
  `TPU_ASSERT(AllocMaximal_A,
      !left_out,
      ("tpu_ici_swalloc: a request left with its input and its output both idle"))
  // A grant goes to a requesting VC, at most one per input, and the output it was granted for
  // takes that input.
  logic bad_gnt;
  always_comb begin
    bad_gnt = 1'b0;
    for (int unsigned i = 0; i < NumP; i++) if (req_i[i] != '0 || gnt_o[i] != '0) begin
      if (!$onehot0(gnt_o[i]) || (gnt_o[i] & ~req_i[i]) != '0) bad_gnt = 1'b1;
      for (int unsigned v = 0; v < NumVc; v++)
        if (gnt_o[i][v] && (!out_valid_o[req_port_i[i][v]] ||
                            32'(out_sel_o[req_port_i[i][v]]) != i)) bad_gnt = 1'b1;
    end
  end
  `TPU_ASSERT(GntConsistent_A,
      !bad_gnt,
      ("tpu_ici_swalloc: a grant without a request, or not matching its output's choice"))

endmodule
