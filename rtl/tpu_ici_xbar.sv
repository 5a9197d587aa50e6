// tpu_ici_xbar: the router's crossbar: output o carries the flit and VC of input `sel_i[o]`.
//
// Combinational (latency 0), one flit per output per cycle; no handshake (the allocator's
// grants are the control).
module tpu_ici_xbar
  import tpu_ici_pkg::*;
#(
  parameter type flit_t = ici_flit_t,
  parameter int unsigned VcW = 1,
  parameter int unsigned NumP = NumPorts  // router ports
) (
  input  flit_t                        in_flit_i[NumP],
  input  logic [VcW-1:0]                in_vc_i[NumP],
  input  logic [NumP-1:0][PortW-1:0] sel_i,
  output flit_t                        out_flit_o[NumP],
  output logic [VcW-1:0]                out_vc_o[NumP]
);

  for (genvar o = 0; o < NumP; o++) begin : gen_out
    assign out_flit_o[o] = in_flit_i[sel_i[o]];
    assign out_vc_o[o] = in_vc_i[sel_i[o]];
  end

endmodule
