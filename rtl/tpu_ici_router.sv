// tpu_ici_router: one ICI router: six torus links (+X -X +Y -Y +Z -Z) and a local port, input
// buffered, NumVc virtual channels of Depth flits per link input, credit-based, wormhole,
// dimension-order routing with dateline VC classes (tpu_ici_pkg::ici_route).
//
// Link interface, per direction d (PORT_XP + d): outgoing `tx_valid_o/tx_vc_o/tx_flit_o` and the
// credits coming back for them `tx_cr_valid_i/tx_cr_vc_i`; incoming `rx_valid_i/rx_vc_i/rx_flit_i`
// and the credits sent back for them `rx_cr_valid_o/rx_cr_vc_o`. No ready crosses a link, so a
// link can be any pure delay line of >= 1 cycle (tpu_ici_delay). Every link output is a function
// of registered state only (no combinational path from any input to any link output), so chips
// couple only through their links. The receiver of a link must have Depth slots per VC.
// Directions a topology does not use are tied off (valid 0) by the instantiating top.
// Local port: `inj_*` valid/ready (a packet's flits in order, valid and flit held until ready;
// ready may depend on the head flit's destination, which picks the local input VC), `ej_*`
// valid/ready out of an EjectDepth-flit FIFO (whole packets, never interleaved).
// Pipeline and zero-load latency: a flit arriving in cycle t is written into its VC buffer at
// the end of t; in t+1 route computation, VC selection and the switch/VC allocation happen in
// one step and the flit crosses the crossbar onto the outgoing link. Per hop: 1 router cycle +
// the link latency. Injection to ejection of a head over H hops with link latency L:
// H * (1 + L) + 2 cycles (1 to leave the local input buffer, 1 through the ejection FIFO).
// Throughput: one flit per port per cycle; a VC streams at full rate when Depth >= 2L + 2 (the
// credit round trip).
// Statistics: per (port, VC) flits in, flits out and stall cycles (ici_stat_e), read through
// `stat_*_i` -> `stat_o` (combinational).
// Local VCs (parameter InjVcSel): 0, the head's destination hash picks the local input VC and
// the port carries one packet at a time each way; 1, the local port has VCs both ways, like a
// link. Injection: the injector names the VC of every flit (`inj_vc_i`; a packet keeps its VC)
// and may interleave the flits of packets on different VCs; `inj_vc_ready_o[v]` says VC v has
// room (several senders share the port without one stalled packet blocking the others).
// Ejection: a packet ejects on the VC of the port it arrived on (ej_vc: PortId % NumVc, or with
// two local ports the dimension of its link, 3 for a local input), `ej_vc_o`
// names each flit's VC, and packets on different VCs interleave flit by flit (packets arriving
// on different links eject side by side; one source's packets, one route, stay in order).
// Second local port (parameter LocalPorts = 2, with InjVcSel): PORT_LOCAL1, the `[1]` of every
// `inj_*`/`ej_*` array, a local port like the first with its own input VCs and ejection FIFO,
// so the chip injects and ejects two flits a cycle. Packets arriving on a - link (-X -Y -Z) (or
// injected on it) eject on it, all others on port 0: the + links share port 0 and the - links
// port 1, three links (three quarter-row flits a cycle at most) each on a 3D torus, and a ring's
// or a 2D torus's links split evenly.
`include "tpu_assert.svh"

module tpu_ici_router
  import tpu_ici_pkg::*;
#(
  parameter type flit_t = ici_flit_t,
  parameter int unsigned NumVc = 2,
  parameter int unsigned Depth = 8,
  parameter int unsigned EjectDepth = 2,
  parameter bit InjVcSel = 1'b0,
  parameter int unsigned LocalPorts = 1,  // 1, or 2 (with InjVcSel): PORT_LOCAL1 as well
  localparam int unsigned VcW = vc_width(NumVc),
  localparam int unsigned LP = LocalPorts
) (
  input  logic                          clk_i,
  input  logic                          rst_ni,
  input  ici_coord_t                    me_i,
  input  ici_topo_t                     topo_i,
  input  logic  [LinkGapW-1:0]          link_gap_i,  // cycles per flit on a link (0, 1: every
                                                     // cycle): a link narrower than a flit
  input  logic  [LinkGapW-1:0]          link_hgap_i, // cycles per head flit (0, 1: one): a
                                                     // head carries only its 8-byte header
  // links
  output logic  [NumDirs-1:0]           tx_valid_o,
  output logic  [NumDirs-1:0][VcW-1:0]  tx_vc_o,
  output flit_t [NumDirs-1:0]           tx_flit_o,
  input  logic  [NumDirs-1:0]           tx_cr_valid_i,
  input  logic  [NumDirs-1:0][VcW-1:0]  tx_cr_vc_i,
  input  logic  [NumDirs-1:0]           rx_valid_i,
  input  logic  [NumDirs-1:0][VcW-1:0]  rx_vc_i,
  input  flit_t [NumDirs-1:0]           rx_flit_i,
  output logic  [NumDirs-1:0]           rx_cr_valid_o,
  output logic  [NumDirs-1:0][VcW-1:0]  rx_cr_vc_o,
  // local ports ([0] PORT_LOCAL, [1] PORT_LOCAL1)
  input  logic  [LP-1:0]                inj_valid_i,
  output logic  [LP-1:0]                inj_ready_o,
  input  flit_t [LP-1:0]                inj_flit_i,
  input  logic  [LP-1:0][VcW-1:0]       inj_vc_i,        // InjVcSel: the flit's local VC
  output logic  [LP-1:0][NumVc-1:0]     inj_vc_ready_o,  // InjVcSel: VC v can take a flit
  output logic  [LP-1:0]                ej_valid_o,
  input  logic  [LP-1:0]                ej_ready_i,
  output flit_t [LP-1:0]                ej_flit_o,
  output logic  [LP-1:0][VcW-1:0]       ej_vc_o,         // InjVcSel: the flit's ejection VC
  // statistics
  input  ici_port_e                     stat_port_i,
  input  logic  [VcW-1:0]               stat_vc_i,
  input  ici_stat_e                     stat_sel_i,
  output logic  [StatW-1:0]             stat_o,
  output logic                          idle_o,          // no flit buffered here
  output logic                          credits_full_o   // every output VC holds all credits
);

  localparam int unsigned NP = NumPorts + LP - 1;  // router ports: links and local ports

  // Configuration registers: the coordinate and topology are sampled every cycle (they are held
  // constant after reset); only registered copies feed the route logic.
  ici_coord_t me_q;
  ici_topo_t  topo_q;
  logic [LinkGapW-1:0] gap_q, hgap_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      me_q <= '0;
      topo_q <= '0;
      gap_q <= LinkGapW'(1);
      hgap_q <= LinkGapW'(1);
    end else begin
      me_q <= me_i;
      topo_q <= topo_i;
      gap_q <= (link_gap_i == '0) ? LinkGapW'(1) : link_gap_i;
      hgap_q <= (link_hgap_i == '0) ? LinkGapW'(1) : link_hgap_i;
    end
  end

  // ---- Input side ----
  logic      [NP-1:0]            in_valid;
  logic      [NP-1:0][VcW-1:0]   in_vc;
  flit_t                         in_flit[NP];  // unpacked: one word-aligned flit per port
  logic      [NP-1:0][NumVc-1:0] in_full;
  logic      [NP-1:0]            cr_valid;
  logic      [NP-1:0][VcW-1:0]   cr_vc;
  logic      [NP-1:0][NumVc-1:0] req, gnt, req_body;
  logic      [NP-1:0]            in_empty;
  ici_port_e [NP-1:0][NumVc-1:0] req_port;
  logic      [VcW-1:0]           req_vc[NP];
  flit_t                         req_flit[NP];
  logic      [NumVc-1:0][StatW-1:0] st_in[NP], st_stall[NP], st_lost[NP];
  logic      [NumVc-1:0][StatW-1:0] st_out[NP];
  logic      [NP-1:0][NumVc-1:0] ovc_free, ovc_credit, ovc_credit_now;
  logic      [NP-1:0]            all_credits;

  // Local inputs. InjVcSel = 0: a packet goes to the VC its destination hashes to
  // (deterministic, so a source/destination pair stays in order), chosen at the head and kept
  // to the tail. InjVcSel = 1: the injector names the VC; framing is tracked per VC.
  // Local port l is router port lport(l): 0, or PORT_LOCAL1.
  function automatic int unsigned lport(int unsigned l);
    return (l == 0) ? 0 : 32'(PORT_LOCAL1);
  endfunction
  // Where a packet that ends here ejects, by the port it arrived on: with two local ports, those
  // from the + links (and injected on port 0) on port 0, from the - links (and injected on port
  // 1) on port 1, each input on a VC of its own there (its dimension; 3 for the local input),
  // so the three links of a port eject side by side. With one local port, VC PortId % NumVc.
  function automatic ici_port_e ej_port(int unsigned p);
    if (LP == 1) return PORT_LOCAL;
    return (p == 32'(PORT_XM) || p == 32'(PORT_YM) || p == 32'(PORT_ZM) ||
            p == 32'(PORT_LOCAL1)) ? PORT_LOCAL1 : PORT_LOCAL;
  endfunction
  function automatic int unsigned ej_vc(int unsigned p);
    if (LP == 1) return p % NumVc;
    return ((p == 0 || p == 32'(PORT_LOCAL1)) ? 3 : (p - 1) / 2) % NumVc;
  endfunction
  logic [LP-1:0][VcW-1:0]   inj_vc;
  logic [VcW-1:0]           inj_vc_q, inj_vc_d;
  logic [LP-1:0][NumVc-1:0] inj_mid_q, inj_mid_d;  // per VC: an accepted head, its tail to come
  logic                     inj_mid_any;
  assign inj_mid_any = |inj_mid_q[0];
  always_comb begin : p_inj_vc
    for (int unsigned l = 0; l < LP; l++) inj_vc[l] = inj_vc_i[l];
    if (!InjVcSel)
      inj_vc[0] = inj_mid_any ? inj_vc_q
                : VcW'(dst_hash(hdr_dst(inj_flit_i[0].data[DstW-1:0])) % NumVc);
  end
  always_comb begin
    inj_vc_d = inj_vc_q;
    inj_mid_d = inj_mid_q;
    for (int unsigned l = 0; l < LP; l++) begin
      if (inj_valid_i[l] && inj_ready_o[l]) begin
        if (l == 0) inj_vc_d = inj_vc[0];
        inj_mid_d[l][inj_vc[l]] = !inj_flit_i[l].tail;
      end
    end
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      inj_vc_q <= '0;
      inj_mid_q <= '0;
    end else begin
      inj_vc_q <= inj_vc_d;
      inj_mid_q <= inj_mid_d;
    end
  end

  for (genvar l = 0; l < LP; l++) begin : gen_inj
    assign inj_ready_o[l] = !in_full[lport(l)][inj_vc[l]];
    assign inj_vc_ready_o[l] = ~in_full[lport(l)];
    assign in_valid[lport(l)] = inj_valid_i[l] && inj_ready_o[l];
    assign in_vc[lport(l)] = inj_vc[l];
    assign in_flit[lport(l)] = inj_flit_i[l];
  end
  for (genvar d = 0; d < NumDirs; d++) begin : gen_rx
    assign in_valid[d+1] = rx_valid_i[d];
    assign in_vc[d+1] = rx_vc_i[d];
    assign in_flit[d+1] = rx_flit_i[d];
    assign rx_cr_valid_o[d] = cr_valid[d+1];
    assign rx_cr_vc_o[d] = cr_vc[d+1];
  end

  for (genvar p = 0; p < NP; p++) begin : gen_in
    tpu_ici_input #(
      .flit_t(flit_t),
      .NumVc (NumVc),
      .Depth (Depth),
      .PortId(p),
      .LocalVcs(InjVcSel),
      .NumP  (NP),
      .EjPort(ej_port(p)),
      .EjVc  (ej_vc(p))
    ) i_input (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .me_i        (me_q),
      .topo_i      (topo_q),
      .in_valid_i  (in_valid[p]),
      .in_vc_i     (in_vc[p]),
      .in_flit_i   (in_flit[p]),
      .full_o      (in_full[p]),
      .cr_valid_o  (cr_valid[p]),
      .cr_vc_o     (cr_vc[p]),
      .ovc_free_i  (ovc_free),
      .ovc_credit_i(ovc_credit_now),
      .req_o       (req[p]),
      .req_body_o  (req_body[p]),
      .req_port_o  (req_port[p]),
      .gnt_i       (gnt[p]),
      .out_vc_o    (req_vc[p]),
      .out_flit_o  (req_flit[p]),
      .st_in_o     (st_in[p]),
      .st_stall_o  (st_stall[p]),
      .st_lost_o   (st_lost[p]),
      .empty_o     (in_empty[p])
    );
  end

  // ---- Allocation and crossbar ----
  logic  [NP-1:0]            out_valid;
  logic  [NP-1:0][PortW-1:0] out_sel;
  flit_t                     out_flit[NP];
  logic  [VcW-1:0]           out_vc[NP];

  tpu_ici_swalloc #(
    .NumVc(NumVc),
    .NumP (NP)
  ) i_swalloc (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .req_i      (req),
    .req_body_i (req_body),
    .req_port_i (req_port),
    .gnt_o      (gnt),
    .out_valid_o(out_valid),
    .out_sel_o  (out_sel)
  );

  tpu_ici_xbar #(
    .flit_t(flit_t),
    .VcW   (VcW),
    .NumP  (NP)
  ) i_xbar (
    .in_flit_i (req_flit),
    .in_vc_i   (req_vc),
    .sel_i     (out_sel),
    .out_flit_o(out_flit),
    .out_vc_o  (out_vc)
  );

  // ---- Link serialization ----
  // A link that carries a flit in gap_q cycles (link_gap_i), a head flit (its header only) in
  // hgap_q (link_hgap_i), takes no other flit until the last one is through: its output shows
  // no credit meanwhile, so nothing requests it.
  logic [NP-1:0][LinkGapW-1:0] busy_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q <= '0;
    end else begin
      for (int unsigned o = 1; o <= NumDirs; o++) begin
        if (out_valid[o]) busy_q[o] <= (out_flit[o].head ? hgap_q : gap_q) - LinkGapW'(1);
        else if (busy_q[o] != '0) busy_q[o] <= busy_q[o] - LinkGapW'(1);
      end
    end
  end
  for (genvar o = 0; o < NP; o++) begin : gen_gate
    if (o == 0 || o > NumDirs) begin : gen_local
      assign ovc_credit_now[o] = ovc_credit[o];
    end else begin : gen_link
      assign ovc_credit_now[o] = (busy_q[o] != '0) ? '0 : ovc_credit[o];
    end
  end

  // ---- Output side ----
  logic [NP-1:0]          ocr_valid;
  logic [NP-1:0][VcW-1:0] ocr_vc;
  logic [LP-1:0]          ej_empty;

  for (genvar o = 0; o < NP; o++) begin : gen_out
    tpu_ici_output #(
      .NumVc  (NumVc),
      .Credits((o == 0 || o > NumDirs) ? EjectDepth : Depth)
    ) i_output (
      .clk_i        (clk_i),
      .rst_ni       (rst_ni),
      .send_i       (out_valid[o]),
      .send_vc_i    (out_vc[o]),
      .send_head_i  (out_flit[o].head),
      .send_tail_i  (out_flit[o].tail),
      .cr_valid_i   (ocr_valid[o]),
      .cr_vc_i      (ocr_vc[o]),
      .free_o       (ovc_free[o]),
      .credit_o     (ovc_credit[o]),
      .st_out_o     (st_out[o]),
      .all_credits_o(all_credits[o])
    );
  end

  for (genvar d = 0; d < NumDirs; d++) begin : gen_tx
    assign tx_valid_o[d] = out_valid[d+1];
    assign tx_vc_o[d] = out_vc[d+1];
    assign tx_flit_o[d] = out_flit[d+1];
    assign ocr_valid[d+1] = tx_cr_valid_i[d];
    assign ocr_vc[d+1] = tx_cr_vc_i[d];
  end

  // Ejection: a local output's "downstream buffer" is its FIFO; a pop returns its credit.
  // With local VCs it holds EjectDepth flits per VC (each VC's credits), with their VC.
  localparam int unsigned EjFifo = InjVcSel ? EjectDepth * NumVc : EjectDepth;
  typedef struct packed {
    logic [VcW-1:0] vc;
    flit_t          flit;
  } ej_entry_t;
  logic [LP-1:0] ej_full;
  for (genvar l = 0; l < LP; l++) begin : gen_ej
    ej_entry_t ej_in, ej_out;
    logic ej_pop;
    logic [$clog2(EjFifo+1)-1:0] unused_ej_count;
    assign ej_in = '{vc: out_vc[lport(l)], flit: out_flit[lport(l)]};
    tpu_fifo #(
      .data_t(ej_entry_t),
      .Depth (EjFifo)
    ) i_eject (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .push_i (out_valid[lport(l)]),
      .data_i (ej_in),
      .pop_i  (ej_pop),
      .data_o (ej_out),
      .empty_o(ej_empty[l]),
      .full_o (ej_full[l]),
      .count_o(unused_ej_count)
    );
    assign ej_flit_o[l] = ej_out.flit;
    assign ej_vc_o[l] = ej_out.vc;
    assign ej_valid_o[l] = !ej_empty[l];
    assign ej_pop = ej_valid_o[l] && ej_ready_i[l];
    assign ocr_valid[lport(l)] = ej_pop;
    assign ocr_vc[lport(l)] = ej_out.vc;
    // Ejection never overflows: the local output spends a credit per flit into the FIFO.
    `TPU_ASSERT(EjectNoOverflow_A,
        out_valid[lport(l)] |-> !ej_full[l] || ej_pop,
        ("tpu_ici_router: ejection FIFO overflow"))
  end

  // ---- Statistics and status ----
  always_comb begin
    stat_o = '0;
    if (32'(stat_port_i) < NP && 32'(stat_vc_i) < NumVc) begin
      unique case (stat_sel_i)
        ICI_ST_FLITS_IN:  stat_o = st_in[stat_port_i][stat_vc_i];
        ICI_ST_FLITS_OUT: stat_o = st_out[stat_port_i][stat_vc_i];
        ICI_ST_STALL:     stat_o = st_stall[stat_port_i][stat_vc_i];
        ICI_ST_LOST:      stat_o = st_lost[stat_port_i][stat_vc_i];
        default:          stat_o = '0;
      endcase
    end
  end
  assign idle_o = (&in_empty) && (&ej_empty) && !(|inj_mid_q);

  assign credits_full_o = &all_credits;

  logic unused_ok;
  assign unused_ok = ^{cr_valid[0], cr_vc[0], cr_valid[NP-1], cr_vc[NP-1], in_full,
                       busy_q[0], busy_q[NP-1], inj_vc_i, inj_vc_q};

  // ---- Assertions ----
  for (genvar l = 0; l < LP; l++) begin : gen_sva_local
    logic inj_v, ej_v, ej_r;  // (Verilator 5.006 wants plain signals in the properties)
    flit_t inj_f, ej_f;
    logic  inj_head, inj_mid_here;
    assign inj_v = inj_valid_i[l] && !inj_ready_o[l];
    assign inj_f = inj_flit_i[l];
    assign ej_v = ej_valid_o[l];
    assign ej_r = ej_ready_i[l];
    assign ej_f = ej_flit_o[l];
    assign inj_head = inj_flit_i[l].head;
    assign inj_mid_here = inj_mid_q[l][inj_vc[l]];
    // Local port: valid held and payload stable until the handshake, on both sides. Immediate,
    // at the clock edge, against a copy of the flit taken only while it waits: as concurrent
    // $stable checks a verilated model sampled and copied both whole flits at every eval().
    logic inj_wait_q, ej_wait_q;
    flit_t inj_held_q, ej_held_q;
    always_ff @(posedge clk_i) begin
      if (rst_ni && inj_wait_q) begin
        `TPU_ASSERT_I(InjStable_A, inj_valid_i[l] && inj_f == inj_held_q,
            ("tpu_ici_router: injected flit dropped or changed while not ready"))
      end
      if (rst_ni && ej_wait_q) begin
        `TPU_ASSERT_I(EjStable_A, ej_valid_o[l] && ej_f == ej_held_q,
            ("tpu_ici_router: ejected flit dropped or changed while not ready"))
      end
      inj_wait_q <= inj_v;
      ej_wait_q <= ej_v && !ej_r;
      if (inj_v) inj_held_q <= inj_f;
      if (ej_v && !ej_r) ej_held_q <= ej_f;
    end
    // Injection framing: a head only between packets, a body flit only inside one.
    `TPU_ASSERT(InjFraming_A,
        inj_valid_i[l] |-> (inj_head == !inj_mid_here) &&
                           (InjVcSel || !inj_mid_any || inj_mid_here),
        ("tpu_ici_router: injected packet framing broken (head/tail)"))
  end
  // A serializing link sends nothing.
  for (genvar o = 1; o <= NumDirs; o++) begin : gen_sva_gap
    `TPU_ASSERT(LinkGap_A,
        out_valid[o] |-> busy_q[o] == '0,
        ("tpu_ici_router: flit sent on a link still serializing the previous one"))
  end
  if (LP > 1) begin : gen_lp_ok
    if (!InjVcSel) begin : gen_lp_err
      $error("tpu_ici_router: LocalPorts = 2 needs InjVcSel");
    end
  end

endmodule
