// tpu_ici_swalloc: output stage of the combined VC + switch allocator: one round-robin arbiter
// per output port over the input ports that request it.
//
// Each input port presents at most one request (already a VC chosen by tpu_ici_input whose
// output VC is free or owned and has a credit), so a grant here is a complete VC + switch
// allocation: no separate VC-allocation cycle. Latency 0 (combinational grants); one flit per
// output and per input per cycle. An arbiter's priority moves only past a used grant.
module tpu_ici_swalloc
  import tpu_ici_pkg::*;
(
  input  logic                                 clk_i,
  input  logic                                 rst_ni,
  input  logic      [NumPorts-1:0]             req_i,
  input  ici_port_e [NumPorts-1:0]             req_port_i,
  output logic      [NumPorts-1:0]             gnt_o,      // per input
  output logic      [NumPorts-1:0]             out_valid_o,
  output logic      [NumPorts-1:0][PortW-1:0]  out_sel_o   // per output: the input it takes
);

  localparam int unsigned SelW = $clog2(NumPorts);

  logic [NumPorts-1:0][NumPorts-1:0] out_req, out_gnt;  // [output][input]

  for (genvar o = 0; o < NumPorts; o++) begin : gen_out
    logic [SelW-1:0] idx;
    for (genvar i = 0; i < NumPorts; i++) begin : gen_in
      assign out_req[o][i] = req_i[i] && (req_port_i[i] == ici_port_e'(o));
    end
    tpu_ici_rr_arb #(
      .N(NumPorts)
    ) i_arb (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .req_i  (out_req[o]),
      .upd_i  (1'b1),
      .gnt_o  (out_gnt[o]),
      .idx_o  (idx),
      .valid_o(out_valid_o[o])
    );
    assign out_sel_o[o] = PortW'(idx);
  end

  always_comb begin
    gnt_o = '0;
    for (int unsigned o = 0; o < NumPorts; o++) gnt_o |= out_gnt[o];
  end

  // ---- Assertions ----
  logic multi_gnt;
  always_comb begin
    logic [NumPorts-1:0] seen;
    seen = '0;
    multi_gnt = 1'b0;
    for (int unsigned o = 0; o < NumPorts; o++) begin
      if ((seen & out_gnt[o]) != '0) multi_gnt = 1'b1;
      seen |= out_gnt[o];
    end
  end
  a_one_output_per_input: assert property (@(posedge clk_i) disable iff (!rst_ni) !multi_gnt)
  else $error("tpu_ici_swalloc: an input granted two outputs");

endmodule
