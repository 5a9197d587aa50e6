// ici_net_tb_top: SIMULATION-ONLY top for the C++ harness (tb/ici): N tpu_ici_router wired, at
// run time, into the ring / torus / mesh given by `k_i` (nodes per dimension, product <= N) and
// `wrap_i`, with every link a tpu_ici_delay of `link_lat_i` cycles in each direction (flits one
// way, credits the other). Routers beyond the run-time node count, and directions without a
// neighbour (a mesh edge, a dimension of size 1), are tied off. Any shape of up to N nodes runs
// on one build (N = 16: a 4-ring, 4x4, 2x2x2, 3x3, 4x2x2, 16-ring ...).
//
// Node n is router n; `coord_i[n]` is its own coordinate (a run-time input, like the shape) and
// must be (x, y, z) with n = x + kx * (y + ky * z): the wiring finds neighbours by that rule.
// The local ports of all nodes are flat vectors indexed by n so that C++ can drive them by name;
// flits are split into head / tail / data. Statistics: `stat_node_i` picks a router, the other
// stat_* inputs a counter (tpu_ici_router). `dbg_cr_*` adds a spurious credit on one router's
// output (tests use it to prove that the credit-conservation assertions fire).
module ici_net_tb_top
  import tpu_ici_pkg::*;
#(
  parameter int unsigned N = 16,
  parameter int unsigned NumVc = 2,
  parameter int unsigned Depth = 8,
  parameter int unsigned EjectDepth = 2,
  parameter int unsigned MaxLat = 4,
  localparam int unsigned NodeW = (N > 1) ? $clog2(N) : 1,
  localparam int unsigned VcW = vc_width(NumVc),
  localparam int unsigned LatW = $clog2(MaxLat + 1)
) (
  input  logic                        clk_i,
  input  logic                        rst_ni,
  // run-time topology (hold constant after reset)
  input  logic [NumDims-1:0][CoordW:0] k_i,
  input  logic [NumDims-1:0]          wrap_i,
  input  logic                        no_dateline_i,
  input  logic [LatW-1:0]             link_lat_i,
  input  ici_coord_t [N-1:0]          coord_i,         // each router's own coordinate
  // local ports
  input  logic [N-1:0]                inj_valid_i,
  output logic [N-1:0]                inj_ready_o,
  input  logic [N-1:0]                inj_head_i,
  input  logic [N-1:0]                inj_tail_i,
  input  logic [N-1:0][IciDataW-1:0]  inj_data_i,
  output logic [N-1:0]                ej_valid_o,
  input  logic [N-1:0]                ej_ready_i,
  output logic [N-1:0]                ej_head_o,
  output logic [N-1:0]                ej_tail_o,
  output logic [N-1:0][IciDataW-1:0]  ej_data_o,
  // statistics
  input  logic [7:0]                  stat_node_i,
  input  logic [PortW-1:0]            stat_port_i,
  input  logic [VcW-1:0]              stat_vc_i,
  input  logic [1:0]                  stat_sel_i,
  output logic [StatW-1:0]            stat_o,
  // status
  output logic                        idle_o,          // no flit or credit in any buffer or link
  output logic                        credits_full_o,  // every credit back home
  // fault injection: one spurious credit
  input  logic                        dbg_cr_valid_i,
  input  logic [7:0]                  dbg_cr_node_i,
  input  logic [2:0]                  dbg_cr_dir_i,
  input  logic [VcW-1:0]              dbg_cr_vc_i
);

  typedef struct packed {
    logic [VcW-1:0] vc;
    ici_flit_t      flit;
  } link_t;

  // Configuration registers: the run-time shape, coordinates and link latency are sampled every
  // cycle (held constant after reset by the harness); everything else reads the registers.
  ici_topo_t                   topo;
  logic [NumDims-1:0][CoordW:0] k_q;
  logic [NumDims-1:0]          wrap_q;
  logic [LatW-1:0]             lat_q;
  ici_coord_t [N-1:0]          coord_q;
  logic [31:0]                 num_nodes;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      topo <= '0;
      k_q <= '0;
      wrap_q <= '0;
      lat_q <= LatW'(1);
      coord_q <= '0;
    end else begin
      topo.no_dateline <= no_dateline_i;
      topo.wrap <= wrap_i;
      topo.k <= k_i;
      k_q <= k_i;
      wrap_q <= wrap_i;
      lat_q <= link_lat_i;
      coord_q <= coord_i;
    end
  end
  assign num_nodes = 32'(k_q[0]) * 32'(k_q[1]) * 32'(k_q[2]);

  // Link ends after the delay lines, indexed [node][direction of the sender's port].
  // (Unpacked: indexed at run time, which Verilator does cheaply on unpacked arrays only.)
  logic           fl_valid[N][NumDirs];  // flits, leaving node n on direction d
  link_t          fl_data[N][NumDirs];
  logic           cr_valid[N][NumDirs];  // credits, leaving node n on direction d
  logic [VcW-1:0] cr_vc[N][NumDirs];
  logic  [N-1:0]                       node_idle, node_cr_full, dl_busy;
  logic [StatW-1:0] node_stat[N];

  for (genvar n = 0; n < N; n++) begin : gen_node
    localparam int unsigned Id = n;
    ici_coord_t me;
    logic active;
    logic [NumDirs-1:0] has_nb;
    logic [NumDirs-1:0][7:0] nb;
    logic  [NumDirs-1:0]          tx_valid, tx_cr_valid, rx_valid, rx_cr_valid;
    logic  [NumDirs-1:0][VcW-1:0] tx_vc, tx_cr_vc, rx_vc, rx_cr_vc;
    ici_flit_t [NumDirs-1:0]      tx_flit, rx_flit;
    logic  [NumDirs-1:0]          fl_busy, cr_busy;
    ici_flit_t inj_flit, ej_flit;
    logic [NumVc-1:0] unused_inj_vc_ready;  // the local VC comes from the destination hash
    logic [VcW-1:0] unused_ej_vc;           // one packet at a time: ejection on VC 0

    assign me = coord_q[Id];
    assign active = 32'(Id) < num_nodes;

    // The neighbour in each direction: the node whose coordinate differs by one (mod k on a
    // ring), numbered x + kx * (y + ky * z); none at a mesh edge or in a dimension of size 1.
    always_comb begin
      for (int unsigned d = 0; d < NumDirs; d++) begin
        int unsigned dim, k, c;
        int unsigned nc[NumDims];
        dim = d / 2;
        k = 32'(k_q[dim]);
        for (int unsigned i = 0; i < NumDims; i++) nc[i] = 32'(me[i]);
        c = nc[dim];
        has_nb[d] = active && k > 1;
        if (d % 2 == 0) begin
          if (c + 1 < k) nc[dim] = c + 1;
          else if (wrap_q[dim]) nc[dim] = 0;
          else has_nb[d] = 1'b0;
        end else begin
          if (c > 0) nc[dim] = c - 1;
          else if (wrap_q[dim]) nc[dim] = k - 1;
          else has_nb[d] = 1'b0;
        end
        nb[d] = 8'(nc[0] + 32'(k_q[0]) * (nc[1] + 32'(k_q[1]) * nc[2]));
        if (32'(nb[d]) >= N) has_nb[d] = 1'b0;
      end
    end

    // Incoming: the neighbour's delayed output on the opposite direction.
    always_comb begin
      for (int unsigned d = 0; d < NumDirs; d++) begin
        logic [NodeW-1:0] m;
        m = NodeW'(nb[d]);
        rx_valid[d] = has_nb[d] && fl_valid[m][d ^ 1];
        rx_vc[d] = fl_data[m][d ^ 1].vc;
        rx_flit[d] = fl_data[m][d ^ 1].flit;
        tx_cr_valid[d] = has_nb[d] && cr_valid[m][d ^ 1];
        tx_cr_vc[d] = cr_vc[m][d ^ 1];
        if (dbg_cr_valid_i && 32'(dbg_cr_node_i) == Id && 32'(dbg_cr_dir_i) == d) begin
          tx_cr_valid[d] = 1'b1;
          tx_cr_vc[d] = dbg_cr_vc_i;
        end
      end
    end

    assign inj_flit.head = inj_head_i[Id];
    assign inj_flit.tail = inj_tail_i[Id];
    assign inj_flit.data = inj_data_i[Id];

    tpu_ici_router #(
      .flit_t    (ici_flit_t),
      .NumVc     (NumVc),
      .Depth     (Depth),
      .EjectDepth(EjectDepth)
    ) i_router (
      .clk_i         (clk_i),
      .rst_ni        (rst_ni),
      .me_i          (me),
      .topo_i        (topo),
      .link_gap_i    (4'd1),
      .tx_valid_o    (tx_valid),
      .tx_vc_o       (tx_vc),
      .tx_flit_o     (tx_flit),
      .tx_cr_valid_i (tx_cr_valid),
      .tx_cr_vc_i    (tx_cr_vc),
      .rx_valid_i    (rx_valid),
      .rx_vc_i       (rx_vc),
      .rx_flit_i     (rx_flit),
      .rx_cr_valid_o (rx_cr_valid),
      .rx_cr_vc_o    (rx_cr_vc),
      .inj_valid_i   (inj_valid_i[Id] && active),
      .inj_ready_o   (inj_ready_o[Id]),
      .inj_flit_i    (inj_flit),
      .inj_vc_i      ('0),
      .inj_vc_ready_o(unused_inj_vc_ready),
      .ej_valid_o    (ej_valid_o[Id]),
      .ej_ready_i    (ej_ready_i[Id]),
      .ej_flit_o     (ej_flit),
      .ej_vc_o       (unused_ej_vc),
      .stat_port_i   (ici_port_e'(stat_port_i)),
      .stat_vc_i     (stat_vc_i),
      .stat_sel_i    (ici_stat_e'(stat_sel_i)),
      .stat_o        (node_stat[Id]),
      .idle_o        (node_idle[Id]),
      .credits_full_o(node_cr_full[Id])
    );
    assign ej_head_o[Id] = ej_flit.head;
    assign ej_tail_o[Id] = ej_flit.tail;
    assign ej_data_o[Id] = ej_flit.data;

    for (genvar d = 0; d < NumDirs; d++) begin : gen_link
      link_t tx_link;
      assign tx_link.vc = tx_vc[d];
      assign tx_link.flit = tx_flit[d];
      tpu_ici_delay #(
        .data_t(link_t),
        .MaxLat(MaxLat)
      ) i_flit_dl (
        .clk_i  (clk_i),
        .rst_ni (rst_ni),
        .lat_i  (lat_q),
        .valid_i(tx_valid[d]),
        .data_i (tx_link),
        .valid_o(fl_valid[Id][d]),
        .data_o (fl_data[Id][d]),
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
        .valid_o(cr_valid[Id][d]),
        .data_o (cr_vc[Id][d]),
        .busy_o (cr_busy[d])
      );
    end
    assign dl_busy[Id] = |{fl_busy, cr_busy};
  end

  assign stat_o = (32'(stat_node_i) < N) ? node_stat[NodeW'(stat_node_i)] : '0;
  assign idle_o = (&node_idle) && !(|dl_busy);
  assign credits_full_o = &node_cr_full;

  // ---- Assertions ----
  a_lat_range: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                link_lat_i >= 1 && 32'(link_lat_i) <= MaxLat)
  else $error("ici_net_tb_top: link latency %0d outside 1..%0d", link_lat_i, MaxLat);
  for (genvar dim = 0; dim < NumDims; dim++) begin : gen_sva
    a_k_range: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                k_i[dim] >= 1 && 32'(k_i[dim]) <= MaxK)
    else $error("ici_net_tb_top: dimension %0d size %0d outside 1..%0d", dim, k_i[dim], MaxK);
  end
  a_nodes_range: assert property (@(posedge clk_i) disable iff (!rst_ni) num_nodes <= N)
  else $error("ici_net_tb_top: topology of %0d nodes, the model has %0d", num_nodes, N);

endmodule
