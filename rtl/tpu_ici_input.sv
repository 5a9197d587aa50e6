// tpu_ici_input: input unit of one router port: NumVc virtual-channel buffers of Depth flits,
// route computation and the per-VC requests to the combined VC + switch allocator. The route of
// a head flit is ici_route() of its header's destination and tie hint (tpu_ici_pkg::ici_hdr_t).
//
// Handshake: credit-based. An upstream sender only sends a flit on VC v when it holds a credit
// for v, so a buffer is never pushed full (asserted); every flit that leaves a buffer returns
// one credit on `cr_valid_o`/`cr_vc_o` in the cycle it leaves. (On the local port the router
// uses `full_o` as back-pressure instead.)
// Latency: a flit written in cycle t is at its buffer's head in t+1, where it can win the
// switch in the same cycle (route computation, VC selection and switch request are one
// combinational step on registered state). Throughput: one flit in and one flit out per cycle.
// Allocation: every VC whose head can move requests its output port (`req_o[v]`, with
// `req_body_o[v]` set for a body flit): a body flit when its packet's output VC has a credit, a
// head flit when its route's output VC is free and has a credit. The router's allocator
// (tpu_ici_swalloc) grants at most one VC (`gnt_i`, one-hot), whose flit and output VC leave on
// `out_flit_o`/`out_vc_o`. Every VC of the port is offered, so a VC whose output is taken does
// not keep the port's other VCs waiting behind it.
`include "tpu_assert.svh"

module tpu_ici_input
  import tpu_ici_pkg::*;
#(
  parameter type flit_t = ici_flit_t,
  parameter int unsigned NumVc = 2,
  parameter int unsigned Depth = 8,
  parameter int unsigned PortId = 0,       // this input's port (ici_port_e)
  parameter bit LocalVcs = 1'b0,           // ejection uses VC EjVc (else VC 0)
  parameter int unsigned NumP = NumPorts,  // router ports (NumPorts, + 1 with a second local port)
  parameter ici_port_e EjPort = PORT_LOCAL, // the local output a packet that ends here takes
  parameter int unsigned EjVc = PortId % NumVc,  // its VC there (LocalVcs)
  localparam int unsigned VcW = vc_width(NumVc)
) (
  input  logic                               clk_i,
  input  logic                               rst_ni,
  // this router's place in the topology (constant after reset)
  input  ici_coord_t                         me_i,
  input  ici_topo_t                          topo_i,
  // incoming flits (a link, or the router's local-port adapter)
  input  logic                               in_valid_i,
  input  logic [VcW-1:0]                     in_vc_i,
  input  flit_t                              in_flit_i,
  output logic [NumVc-1:0]                   full_o,
  // credits back to the sender
  output logic                               cr_valid_o,
  output logic [VcW-1:0]                     cr_vc_o,
  // state of every output VC of the router (registered there)
  input  logic [NumP-1:0][NumVc-1:0]     ovc_free_i,
  input  logic [NumP-1:0][NumVc-1:0]     ovc_credit_i,
  // switch requests (one per VC whose head can move) and the grant (at most one VC)
  output logic      [NumVc-1:0]              req_o,
  output logic      [NumVc-1:0]              req_body_o,  // the request is a body flit
  output ici_port_e [NumVc-1:0]              req_port_o,
  input  logic      [NumVc-1:0]              gnt_i,
  output logic [VcW-1:0]                     out_vc_o,    // the granted VC's output VC
  output flit_t                              out_flit_o,  // and its head flit
  // statistics and status
  output logic [NumVc-1:0][StatW-1:0]        st_in_o,
  output logic [NumVc-1:0][StatW-1:0]        st_stall_o,
  output logic [NumVc-1:0][StatW-1:0]        st_lost_o,   // could move, not granted
  output logic                               empty_o
);

  localparam int unsigned Half = (NumVc > 1) ? NumVc / 2 : 1;
  localparam int unsigned CntW = $clog2(Depth + 1);

  // The VC of the next hop for a route: the class picks the half, the destination hash the VC
  // inside it. The local output (ejection) uses VC 0, or with LocalVcs the VC of this input port
  // (EjVc, its own among the ports that eject on EjPort): packets arriving on different links
  // eject side by side, and the packets of one source (one route, so one input port) stay in
  // order. A router with two local ports ejects through the one its instance names (EjPort).
  function automatic logic [VcW-1:0] vc_of(ici_route_t r, ici_coord_t dst);
    if (r.port == PORT_LOCAL) return LocalVcs ? VcW'(EjVc) : '0;
    return VcW'(32'(r.cls) * Half + dst_hash(dst) % Half);
  endfunction

  flit_t                 head_flit[NumVc];
  logic  [NumVc-1:0]     vc_empty, vc_full, vc_push, vc_pop, front_head;
  logic  [NumVc-1:0]     active_q;                    // a packet holds an output VC
  ici_port_e [NumVc-1:0] oport_q;
  logic  [NumVc-1:0][VcW-1:0] ovc_q;
  logic  [NumVc-1:0]     in_open_q;                   // arrival side: packet begun, tail to come
  ici_port_e             tgt_port[NumVc];
  logic  [VcW-1:0]       tgt_vc[NumVc];
  logic  [NumVc-1:0]     cand;
  logic  [VcW-1:0]       sel;
  logic  [NumVc-1:0][StatW-1:0] st_in_q, st_stall_q, st_lost_q;

  for (genvar v = 0; v < NumVc; v++) begin : gen_vc
    logic [CntW-1:0] unused_count;
    assign vc_push[v] = in_valid_i && (in_vc_i == VcW'(v));
    assign vc_pop[v] = gnt_i[v];
    assign front_head[v] = head_flit[v].head;
    tpu_fifo #(
      .data_t(flit_t),
      .Depth (Depth)
    ) i_buf (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .push_i (vc_push[v]),
      .data_i (in_flit_i),
      .pop_i  (vc_pop[v]),
      .data_o (head_flit[v]),
      .empty_o(vc_empty[v]),
      .full_o (vc_full[v]),
      .count_o(unused_count)
    );
  end

  // Route computation and the per-VC request (the allocator's input stage). Only a VC with a
  // flit at its front requests; only a head that holds no output VC yet needs a route (a packet
  // that holds one keeps its port and VC), so an empty input port computes nothing. The target of
  // an empty VC is its last packet's (a don't-care: it requests nothing).
  always_comb begin
    for (int unsigned v = 0; v < NumVc; v++) begin
      ici_coord_t dst;
      ici_route_t rt;
      dst = '0;
      rt = '0;
      tgt_port[v] = oport_q[v];
      tgt_vc[v] = ovc_q[v];
      cand[v] = 1'b0;
      if (!vc_empty[v]) begin
        if (!active_q[v]) begin
          dst = hdr_dst(head_flit[v].data[DstW-1:0]);
          // the header's tie hint travels with the packet: every hop routes by it
          rt = ici_route(me_i, dst, topo_i, hdr_tie(head_flit[v].data[TieLsb+:TieW]));
          tgt_port[v] = (rt.port == PORT_LOCAL) ? EjPort : rt.port;
          tgt_vc[v] = vc_of(rt, dst);
        end
        cand[v] = ovc_credit_i[tgt_port[v]][tgt_vc[v]] &&
                  (active_q[v] || ovc_free_i[tgt_port[v]][tgt_vc[v]]);
      end
    end
  end

  always_comb begin
    sel = '0;
    for (int unsigned v = 0; v < NumVc; v++) if (gnt_i[v]) sel = VcW'(v);
  end

  assign req_o = cand;
  assign req_body_o = active_q;
  for (genvar v = 0; v < NumVc; v++) begin : gen_req
    assign req_port_o[v] = tgt_port[v];
  end
  assign out_vc_o = tgt_vc[sel];
  assign out_flit_o = head_flit[sel];
  assign cr_valid_o = |gnt_i;
  assign cr_vc_o = sel;
  assign full_o = vc_full;
  assign empty_o = &vc_empty;

  // Packet state: a head that leaves without its tail binds the VC to (port, VC) until the tail.
  // Worked out at the clock edge (the arrival side depends on the link inputs: an always_comb
  // here would run at every evaluation of the model).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q <= '0;
      oport_q <= {NumVc{PORT_LOCAL}};
      ovc_q <= '0;
      in_open_q <= '0;
      st_in_q <= '0;
      st_stall_q <= '0;
      st_lost_q <= '0;
    end else begin
      if (in_valid_i) begin
        for (int unsigned v = 0; v < NumVc; v++) begin
          if (vc_push[v]) begin
            in_open_q[v] <= !in_flit_i.tail;
            st_in_q[v] <= st_in_q[v] + 1'b1;
          end
        end
      end
      if (!empty_o) begin
        for (int unsigned v = 0; v < NumVc; v++) begin
          if (vc_pop[v]) begin
            if (head_flit[v].head) begin
              active_q[v] <= 1'b1;
              oport_q[v] <= tgt_port[v];
              ovc_q[v] <= tgt_vc[v];
            end
            if (head_flit[v].tail) active_q[v] <= 1'b0;
          end
          if (!vc_empty[v] && !vc_pop[v]) st_stall_q[v] <= st_stall_q[v] + 1'b1;
          if (cand[v] && !vc_pop[v]) st_lost_q[v] <= st_lost_q[v] + 1'b1;
        end
      end
    end
  end

  assign st_in_o = st_in_q;
  assign st_stall_o = st_stall_q;
  assign st_lost_o = st_lost_q;

  // ---- Assertions ----
  // Credits upstream: never a flit into a full VC buffer (also in each tpu_fifo).
  `TPU_ASSERT(NoPushFull_A,
                                   in_valid_i |-> !vc_full[in_vc_i],
      ("tpu_ici_input: flit into full VC %0d (sender ignored credits)", in_vc_i))
  `TPU_ASSERT(VcRange_A,
                               in_valid_i |-> 32'(in_vc_i) < NumVc,
      ("tpu_ici_input: VC %0d out of range", in_vc_i))
  // A packet stays on one VC and is not interleaved with another packet's flits on that VC:
  // on each VC, a head only after a tail, a body or tail flit only inside an open packet.
  // Immediate, at the clock edge (the same checks as concurrent ones, which a verilated model
  // paid for by sampling the whole arriving flit at every eval() for its head bit).
  always_ff @(posedge clk_i) begin
    if (rst_ni && in_valid_i) begin
      if (in_flit_i.head) begin
        `TPU_ASSERT_I(ArriveHeadWhenClosed_A, !in_open_q[in_vc_i],
            ("tpu_ici_input: head on VC %0d inside another packet", in_vc_i))
      end else begin
        `TPU_ASSERT_I(ArriveBodyWhenOpen_A, in_open_q[in_vc_i],
            ("tpu_ici_input: body flit on VC %0d outside a packet", in_vc_i))
      end
    end
  end
  // Buffer heads: a VC without an output holds a head at its front, one with an output a body.
  // An immediate assertion at the clock edge (the same check as a concurrent one): Verilator
  // samples every signal of a concurrent assertion at every eval(), here the whole front flit
  // of every VC for its head bit.
  for (genvar v = 0; v < NumVc; v++) begin : gen_sva
    always_ff @(posedge clk_i) begin
      if (rst_ni && !vc_empty[v]) begin
        `TPU_ASSERT_I(HeadAtFront_A, front_head[v] == !active_q[v],
            ("tpu_ici_input: VC %0d front flit does not match its packet state", v))
      end
    end
  end
  `TPU_ASSERT(GntHasReq_A,
      (gnt_i & ~req_o) == '0,
      ("tpu_ici_input: grant without request"))
  `TPU_ASSERT(GntOnehot_A,
      $onehot0(gnt_i),
      ("tpu_ici_input: more than one VC granted"))

endmodule
