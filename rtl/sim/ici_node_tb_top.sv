// ici_node_tb_top: SIMULATION-ONLY top for the C++ harness (tb/ici): one tpu_ici_router with its
// outgoing links, a tpu_ici_delay of `link_lat_i` cycles per direction for its flits and one for
// the credits it returns. The harness builds a network of any size out of instances of this one
// verilated model, wiring in C++ each node's link inputs to its neighbours' delayed outputs
// (IciNet's node model, tb/ici/ici_net_nodes.cc); every model instance runs the same generated
// code, so the build costs one router whatever the network size. The harness names instance n
// "node<n>": its scope in the waves and in assertion messages. Routes, VCs and latencies of the
// network are checked against the rules of docs/ici.md (tests/ici/test_ici_network.cc).
//
// Link ports, per direction d (0..5 = +X -X +Y -Y +Z -Z): `fl_*_o` flits leaving on d and
// `cr_*_o` credits returned to the neighbour in d, both after this node's delay lines (so
// registered: no combinational path from any input to them); `fl_*_i` flits arriving from the
// neighbour in d (its `fl_*_o` on d ^ 1) and `cr_*_i` credits coming back from it (its `cr_*_o` on
// d ^ 1). Flits are split into vc / head / tail / data, so that C++ moves them as whole words
// (packed vectors: Verilator 5.006 does not compile assertions that sample an unpacked top-level
// input). The harness ties off (valid 0) directions without a neighbour. Local port (one packet
// at a time, InjVcSel = 0), statistics (selected by `stat_*_i`) and status, for this node alone;
// `idle_o` also covers the outgoing delay lines. LocalPorts = 2 (a second build, `vici2`): the
// router has two local ports as the chip's has (LocalPorts 2, InjVcSel 1): `inj1_*`/`ej1_*` are
// PORT_LOCAL1, the harness names each injected flit's VC (`inj_vc_i`, `inj1_vc_i`) and ejected
// packets interleave by VC (`ej_vc_o`, `ej1_vc_o`), so a node injects and ejects two flits a
// cycle and the network, not the local port, limits uniform traffic (docs/topology.md). With
// LocalPorts = 1 those ports are unused (outputs 0).
`include "tpu_assert.svh"

module ici_node_tb_top
  import tpu_ici_pkg::*;
#(
  parameter int unsigned NumVc = 2,
  parameter int unsigned Depth = 8,
  parameter int unsigned EjectDepth = 2,
  parameter int unsigned MaxLat = 4,
  parameter int unsigned LocalPorts = 1,  // 1, or 2: PORT_LOCAL1 too (inj1_* / ej1_*)
  localparam int unsigned VcW = vc_width(NumVc),
  localparam int unsigned LatW = $clog2(MaxLat + 1)
) (
  input  logic                              clk_i,
  input  logic                              rst_ni,
  // run-time topology and this node's coordinate (hold constant after reset)
  input  logic [NumDims-1:0][CoordW:0]      k_i,
  input  logic [NumDims-1:0]                wrap_i,
  input  logic                              no_dateline_i,
  input  logic [2:0]                        twist_i,     // ici_topo_t.twist
  input  logic [LatW-1:0]                   link_lat_i,
  input  ici_coord_t                        coord_i,
  // links
  output logic [NumDirs-1:0]                fl_valid_o,
  output logic [NumDirs-1:0][VcW-1:0]       fl_vc_o,
  output logic [NumDirs-1:0]                fl_head_o,
  output logic [NumDirs-1:0]                fl_tail_o,
  output logic [NumDirs-1:0][IciDataW-1:0]  fl_data_o,
  input  logic [NumDirs-1:0]                fl_valid_i,
  input  logic [NumDirs-1:0][VcW-1:0]       fl_vc_i,
  input  logic [NumDirs-1:0]                fl_head_i,
  input  logic [NumDirs-1:0]                fl_tail_i,
  input  logic [NumDirs-1:0][IciDataW-1:0]  fl_data_i,
  output logic [NumDirs-1:0]                cr_valid_o,
  output logic [NumDirs-1:0][VcW-1:0]       cr_vc_o,
  input  logic [NumDirs-1:0]                cr_valid_i,
  input  logic [NumDirs-1:0][VcW-1:0]       cr_vc_i,
  // local port
  input  logic                              inj_valid_i,
  output logic                              inj_ready_o,
  input  logic                              inj_head_i,
  input  logic                              inj_tail_i,
  input  logic [IciDataW-1:0]               inj_data_i,
  output logic                              ej_valid_o,
  input  logic                              ej_ready_i,
  output logic                              ej_head_o,
  output logic                              ej_tail_o,
  output logic [IciDataW-1:0]               ej_data_o,
  // LocalPorts = 2: the local VC of each port's flit, the second local port
  input  logic [VcW-1:0]                    inj_vc_i,
  output logic [VcW-1:0]                    ej_vc_o,
  input  logic                              inj1_valid_i,
  output logic                              inj1_ready_o,
  input  logic                              inj1_head_i,
  input  logic                              inj1_tail_i,
  input  logic [IciDataW-1:0]               inj1_data_i,
  input  logic [VcW-1:0]                    inj1_vc_i,
  output logic                              ej1_valid_o,
  input  logic                              ej1_ready_i,
  output logic                              ej1_head_o,
  output logic                              ej1_tail_o,
  output logic [IciDataW-1:0]               ej1_data_o,
  output logic [VcW-1:0]                    ej1_vc_o,
  // statistics
  input  logic [PortW-1:0]                  stat_port_i,
  input  logic [VcW-1:0]                    stat_vc_i,
  input  logic [1:0]                        stat_sel_i,
  output logic [StatW-1:0]                  stat_o,
  // status
  output logic                              idle_o,          // no flit or credit here or on links
  output logic                              credits_full_o   // every output VC has all credits
);

  typedef struct packed {
    logic [VcW-1:0] vc;
    ici_flit_t      flit;
  } link_t;

  // Configuration registers: the router sees the shape two cycles after the inputs (here, then
  // its own registers).
  ici_topo_t       topo;
  ici_coord_t      me;
  logic [LatW-1:0] lat_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      topo <= '0;
      me <= '0;
      lat_q <= LatW'(1);
    end else begin
      topo.no_dateline <= no_dateline_i;
      topo.twist <= twist_i;
      topo.wrap <= wrap_i;
      topo.k <= k_i;
      me <= coord_i;
      lat_q <= link_lat_i;
    end
  end

  logic      [NumDirs-1:0]          tx_valid, rx_cr_valid, fl_busy, cr_busy;
  logic      [NumDirs-1:0][VcW-1:0] tx_vc, rx_cr_vc;
  ici_flit_t [NumDirs-1:0]          tx_flit, rx_flit;
  localparam int unsigned LP = LocalPorts;
  ici_flit_t [LP-1:0]               inj_flit, ej_flit;
  logic      [LP-1:0]               inj_valid, inj_ready, ej_valid, ej_ready;
  logic      [LP-1:0][VcW-1:0]      inj_vc, ej_vc;
  logic                             router_idle;
  logic      [LP-1:0][NumVc-1:0]    unused_inj_vc_ready;  // inj_ready_o: the VC given

  for (genvar d = 0; d < NumDirs; d++) begin : gen_rx
    assign rx_flit[d].head = fl_head_i[d];
    assign rx_flit[d].tail = fl_tail_i[d];
    assign rx_flit[d].data = fl_data_i[d];
  end

  assign inj_flit[0].head = inj_head_i;
  assign inj_flit[0].tail = inj_tail_i;
  assign inj_flit[0].data = inj_data_i;
  assign inj_valid[0] = inj_valid_i;
  assign inj_vc[0] = inj_vc_i;
  assign ej_ready[0] = ej_ready_i;
  assign inj_ready_o = inj_ready[0];
  assign ej_valid_o = ej_valid[0];
  assign ej_vc_o = (LP == 2) ? ej_vc[0] : '0;  // one local port: every packet on VC 0
  if (LP == 2) begin : gen_local1
    assign inj_flit[LP-1].head = inj1_head_i;
    assign inj_flit[LP-1].tail = inj1_tail_i;
    assign inj_flit[LP-1].data = inj1_data_i;
    assign inj_valid[LP-1] = inj1_valid_i;
    assign inj_vc[LP-1] = inj1_vc_i;
    assign ej_ready[LP-1] = ej1_ready_i;
    assign inj1_ready_o = inj_ready[LP-1];
    assign ej1_valid_o = ej_valid[LP-1];
    assign ej1_head_o = ej_flit[LP-1].head;
    assign ej1_tail_o = ej_flit[LP-1].tail;
    assign ej1_data_o = ej_flit[LP-1].data;
    assign ej1_vc_o = ej_vc[LP-1];
  end else begin : gen_no_local1
    logic unused_local1;
    assign unused_local1 = ^{inj1_valid_i, inj1_head_i, inj1_tail_i, inj1_data_i, inj1_vc_i,
                             ej1_ready_i, ej_vc, inj_vc};
    assign inj1_ready_o = 1'b0;
    assign ej1_valid_o = 1'b0;
    assign ej1_head_o = 1'b0;
    assign ej1_tail_o = 1'b0;
    assign ej1_data_o = '0;
    assign ej1_vc_o = '0;
  end

  tpu_ici_router #(
    .flit_t    (ici_flit_t),
    .NumVc     (NumVc),
    .Depth     (Depth),
    .EjectDepth(EjectDepth),
    .InjVcSel  (LP == 2),
    .LocalPorts(LP)
  ) i_router (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .me_i          (me),
    .topo_i        (topo),
    .link_gap_i    (LinkGapW'(1)),
    .link_hgap_i   (LinkGapW'(1)),
    .tx_valid_o    (tx_valid),
    .tx_vc_o       (tx_vc),
    .tx_flit_o     (tx_flit),
    .tx_cr_valid_i (cr_valid_i),
    .tx_cr_vc_i    (cr_vc_i),
    .rx_valid_i    (fl_valid_i),
    .rx_vc_i       (fl_vc_i),
    .rx_flit_i     (rx_flit),
    .rx_cr_valid_o (rx_cr_valid),
    .rx_cr_vc_o    (rx_cr_vc),
    .inj_valid_i   (inj_valid),
    .inj_ready_o   (inj_ready),
    .inj_flit_i    (inj_flit),
    .inj_vc_i      (inj_vc),
    .inj_vc_ready_o(unused_inj_vc_ready),
    .ej_valid_o    (ej_valid),
    .ej_ready_i    (ej_ready),
    .ej_flit_o     (ej_flit),
    .ej_vc_o       (ej_vc),
    .stat_port_i   (ici_port_e'(stat_port_i)),
    .stat_vc_i     (stat_vc_i),
    .stat_sel_i    (ici_stat_e'(stat_sel_i)),
    .stat_o        (stat_o),
    .idle_o        (router_idle),
    .credits_full_o(credits_full_o)
  );
  assign ej_head_o = ej_flit[0].head;
  assign ej_tail_o = ej_flit[0].tail;
  assign ej_data_o = ej_flit[0].data;

  for (genvar d = 0; d < NumDirs; d++) begin : gen_link
    link_t tx_link, fl_link;
    assign tx_link.vc = tx_vc[d];
    assign tx_link.flit = tx_flit[d];
    assign fl_vc_o[d] = fl_link.vc;
    assign fl_head_o[d] = fl_link.flit.head;
    assign fl_tail_o[d] = fl_link.flit.tail;
    assign fl_data_o[d] = fl_link.flit.data;
    tpu_ici_delay #(
      .data_t(link_t),
      .MaxLat(MaxLat)
    ) i_flit_dl (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .lat_i  (lat_q),
      .valid_i(tx_valid[d]),
      .data_i (tx_link),
      .valid_o(fl_valid_o[d]),
      .data_o (fl_link),
      .busy_o (fl_busy[d])
    );
    tpu_ici_delay #(
      .data_t(logic [VcW-1:0]),
      .MaxLat(MaxLat)
    ) i_credit_dl (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .lat_i  (lat_q),
      .valid_i(rx_cr_valid[d]),
      .data_i (rx_cr_vc[d]),
      .valid_o(cr_valid_o[d]),
      .data_o (cr_vc_o[d]),
      .busy_o (cr_busy[d])
    );
  end

  assign idle_o = router_idle && !(|{fl_busy, cr_busy});

  // ---- Assertions ----
  `TPU_ASSERT(LatRange_A,
                                link_lat_i >= 1 && 32'(link_lat_i) <= MaxLat,
      ("ici_node_tb_top: link latency %0d outside 1..%0d", link_lat_i, MaxLat))
  for (genvar dim = 0; dim < NumDims; dim++) begin : gen_sva
    `TPU_ASSERT(KRange_A,
                                k_i[dim] >= 1 && 32'(k_i[dim]) <= MaxK,
        ("ici_node_tb_top: dimension %0d size %0d outside 1..%0d", dim, k_i[dim], MaxK))
  end

endmodule
