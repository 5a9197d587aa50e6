// tpu_ici_eng: the chip's ICI engine, between the sequencer, the on-chip memories and the two
// local ports of the chip's ICI router (docs/isa.md ICI_SEND / ICI_WAIT, docs/pod.md).
//
// Send (ICI_SEND): NumEng send contexts, one per local VC of the router's local ports (context e:
// local port e / PortCtx, VC e % PortCtx; six contexts: +X +Y +Z on port 0, -X -Y -Z on port 1, so
// each port feeds three links and a dimension's two links never share one: on a ring or a 2D
// torus the links split evenly over the ports). A send's context is set by the first hop of its
// route (ici_route: +X +Y +Z -> 0 1 2, -X -Y -Z -> 3 4 5, the chip itself -> 0; ctx_of), so
// sends to one destination
// (with one tie hint) always use one context and one local VC and arrive in order, and sends
// towards different links run side by side. A send's tie hint `tie_i` (ICI_SEND flags[3:2]) picks
// the way of a tie (distance k/2 on a ring, every hop of a 2-ring): here for its first hop, and at
// every router from the packets' headers. Each context queues up to SendQ sends behind the one it
// is sending, so the sequencer hands a send over and goes on (a busy link does not hold the command
// queue). `ready_o` says whether the context of the destination `dst_i` (and hint) has room,
// `eng_o` which one it is. A send moves `rows_i` memory rows from `src_row_i` of VMEM or AMEM to
// chip `dst_i` as remote-write packets of up to PktRows rows: a head flit (tpu_ici_pkg::ici_hdr_t
// in data[63:0], ptype ICI_WRITE, addr = {cnt, 1'b0, dst_mem, dst_row}, len = rows in the packet,
// tie = the hint) and one flit per row (the whole row in data). A send with count_only
// (`count_only_i`) sends no rows: one head-and-tail flit, ptype CNT_INC (a token that adds 1 to
// counter cnt there). A send with wait_rows (`wait_i`) sends each row only once this chip's counter
// `wait_cnt_id_i` is >= 1 and takes 1 off it as the row goes: it forwards rows while they still
// arrive, or while the VPU still writes them (tpu_vpu_unit's sig). Its head waits for the first
// row too, but with early_head (`early_head_i`) it goes at once, so a forwarded row does not pay
// the head's cycles on each link of a chain of forwards (a 4 KiB all-reduce on a 4x4: 255 -> 247
// cycles); the head then holds the VCs on its way until its rows come, which only the driver can
// tell is safe (no other packet crosses those links). Every cycle, on each local port, one of its
// contexts whose local VC has room and whose next flit may go sends one flit (round robin),
// reading its row through the port's memory read port; done_o[e] pulses in the cycle context
// e's last flit is taken (the source rows are read by then; the remote memory is written later,
// signalled there by the counter). in_o[e] pulses once for context e's wait_rows send, in the
// first cycle its counter holds every row it has still to send: its rows are all in memory, and
// the sequencer lets later readers of them go (a store of forwarded rows need not wait while
// the send waits for its link).
// Receive: every packet ejected by the router, on either local port, is taken at once
// (ej_ready_o is always 1), with a packet state per port and ejection VC (the router
// interleaves packets of different VCs), through the port's memory write port. A WRITE writes
// its rows into the memory and row its header names, one row per cycle, and adds 1 to counter
// `addr[25:18]` as each row is written (so a counter counts rows as they land). A CNT_INC adds 1
// to counter `addr[25:18]`. Other packet types are dropped (counted in rx_drop_o).
// Counters: NumCnt x 32 bits, reset to 0, semaphores: every take and increment of a cycle (up to
// two received rows, a VPU row, two sends' rows) lands at once. ICI_WAIT asks `wait_ok_o`
// (counter `wait_cnt_i` >= `wait_val_i`) and, when it issues, pulses `wait_take_i` (the counter
// drops by `wait_val_i`). The VPU asks `vpu_avail_o[k]` (counter `vpu_cnt_i[k]` >= 1) for each
// command it holds, takes 1 off counter `vpu_take_cnt_i` with `vpu_take_i` per x row it reads
// over ICI (x_wait), and adds 1 to `vpu_sig_cnt_i` with `vpu_sig_i` per row it writes (sig). A
// send with wait_rows takes 1 per row it sends. Several takers of one counter in one cycle would
// race: the driver gives each counter one consumer at a time (SVA CounterNoUnderflow_A). A
// counter id >= NumCnt in a packet is ignored (the sequencer checks the ids of local commands).
// Latency: a packet's first row is on the router's inject port the cycle after its head was
// taken; a received row is in memory the cycle after it leaves the eject FIFO, its counter the
// same cycle.
`include "tpu_assert.svh"

module tpu_ici_eng
  import tpu_ici_pkg::*;
#(
  parameter  int unsigned Lanes   = 8,
  parameter  int unsigned NumCnt  = 64,
  parameter  int unsigned PktRows = 32,
  parameter  int unsigned NumEng  = 4,   // send contexts
  parameter  int unsigned PortVcs = 4,   // VCs of a router local port (the router's NumVc)
  parameter  int unsigned PortCtx = 3,   // contexts per local port: 0..PortCtx-1 send on local
                                         // port 0, the next on local port 1 (PORT_LOCAL1)
  parameter  int unsigned SendQ   = 4,   // sends each context holds waiting behind its active one
  parameter  int unsigned VpuSlots = 4,  // commands the VPU holds (tpu_vpu_unit's Slots)
  localparam int unsigned RowW    = Lanes * 32,
  localparam int unsigned FlitW   = RowW + 2,
  localparam int unsigned CntW    = $clog2(NumCnt),
  localparam int unsigned EngW    = (NumEng > 1) ? $clog2(NumEng) : 1,
  localparam int unsigned LP      = (NumEng + PortCtx - 1) / PortCtx,  // local ports
  localparam int unsigned PvW     = (PortVcs > 1) ? $clog2(PortVcs) : 1
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  ici_coord_t       me_i,
  input  ici_topo_t        topo_i,
  // ICI_SEND
  input  logic             start_i,
  output logic             ready_o,     // the context of dst_i can take a send
  output logic [EngW-1:0]  eng_o,       // the context a send to dst_i uses
  input  logic             src_mem_i,   // 0 VMEM, 1 AMEM
  input  logic [15:0]      src_row_i,
  input  logic [15:0]      rows_i,
  input  logic             dst_mem_i,
  input  logic [15:0]      dst_row_i,
  input  ici_coord_t       dst_i,
  input  ici_tie_t         tie_i,       // direction hint for ties (valid 0: the parity rule)
  input  logic [7:0]       cnt_i,
  input  logic             wait_i,      // wait_rows: each row waits for counter wait_cnt_id_i
  input  logic [CntW-1:0]  wait_cnt_id_i,
  input  logic             count_only_i, // no rows: one CNT_INC packet (adds 1 to cnt_i there)
  input  logic             early_head_i, // with wait_i: the head goes before the first row
  output logic [NumEng-1:0] done_o,
  output logic [NumEng-1:0] in_o,  // context e's wait_rows send has all its rows (once a send)
  output logic [NumEng-1:0] busy_o,
  // source rows: one read port per local port
  output logic [LP-1:0]            rd_mem_o,
  output logic [LP-1:0][15:0]      rd_addr_o,
  input  logic [LP-1:0][RowW-1:0]  vmem_rd_data_i,
  input  logic [LP-1:0][RowW-1:0]  amem_rd_data_i,
  // ICI_WAIT
  input  logic [CntW-1:0]  wait_cnt_i,
  input  logic [31:0]      wait_val_i,
  output logic             wait_ok_o,
  input  logic             wait_take_i,
  // the VPU's x rows over ICI (x_wait) and its written rows (sig)
  input  logic [VpuSlots-1:0][CntW-1:0] vpu_cnt_i,
  output logic [VpuSlots-1:0] vpu_avail_o,  // counter vpu_cnt_i[k] >= 1
  input  logic             vpu_take_i,   // take 1 off counter vpu_take_cnt_i
  input  logic [CntW-1:0]  vpu_take_cnt_i,
  input  logic             vpu_sig_i,    // add 1 to counter vpu_sig_cnt_i
  input  logic [CntW-1:0]  vpu_sig_cnt_i,
  // router local ports (flit = {head, tail, data[RowW-1:0]}; context e: port e / PortCtx, VC
  // e % PortCtx)
  output logic [LP-1:0]               inj_valid_o,
  output logic [LP-1:0][PvW-1:0]      inj_vc_o,
  input  logic [LP-1:0][PortVcs-1:0]  inj_vc_ready_i,
  output logic [LP-1:0][FlitW-1:0]    inj_flit_o,
  input  logic [LP-1:0]               ej_valid_i,
  output logic [LP-1:0]               ej_ready_o,
  input  logic [LP-1:0][FlitW-1:0]    ej_flit_i,
  input  logic [LP-1:0][PvW-1:0]      ej_vc_i,  // the ejection VC: packets on different VCs
                                                // interleave
  // received rows: one write port per local port
  output logic [LP-1:0]            vmem_we_o,
  output logic [LP-1:0]            amem_we_o,
  output logic [LP-1:0][15:0]      wr_addr_o,
  output logic [LP-1:0][RowW-1:0]  wr_data_o,
  // events for the statistics (per local port)
  output logic [LP-1:0]            tx_flit_o,
  output logic [LP-1:0]            rx_flit_o,
  output logic [LP-1:0]            rx_drop_o
);

  // ---------------------------------------------------------------------------------------------
  // Send contexts
  // ---------------------------------------------------------------------------------------------
  logic [NumEng-1:0] busy_q, need_head_q, src_mem_q, dst_mem_q, wait_q, only_q, early_q, may_go;
  logic [NumEng-1:0] in_q;  // in_o has pulsed for the context's send
  logic [CntW-1:0]   wcnt_q [NumEng];
  logic [15:0]       row_q [NumEng];
  logic [15:0]       left_q [NumEng];
  logic [15:0]       dst_row_q [NumEng];
  logic [15:0]       pkt_left_q [NumEng];
  ici_coord_t        dst_q [NumEng];
  ici_tie_t          tie_q [NumEng];
  logic [7:0]        cnt_q [NumEng];
  ici_route_t        first_hop;

  // Link port p (1..6: +X -X +Y -Y +Z -Z) -> context: the + links 0..2, the - links 3..5, so the
  // two links of every dimension inject on different local ports.
  function automatic int unsigned ctx_of(int unsigned p);
    return ((p - 1) % 2) * PortCtx + (p - 1) / 2;
  endfunction
  // The context of a destination: its first hop's link (the chip itself: 0), with the send's hint
  // (the router's local input routes the head by the same hint, so they agree).
  assign first_hop = ici_route(me_i, dst_i, topo_i, tie_i);
  assign eng_o     = (first_hop.port == PORT_LOCAL) ? '0
                     : EngW'(ctx_of(32'(first_hop.port)) % NumEng);

  // Per context, the sends waiting for it.
  typedef struct packed {
    logic       src_mem;
    logic [15:0] src_row;
    logic [15:0] rows;
    logic       dst_mem;
    logic [15:0] dst_row;
    ici_coord_t dst;
    ici_tie_t   tie;
    logic [7:0] cnt;
    logic       wait_rows;
    logic [CntW-1:0] wait_cnt;
    logic       count_only;
    logic       early_head;
  } send_t;
  send_t             q_in;
  send_t             q_out [NumEng];
  logic [NumEng-1:0] q_empty, q_full, q_push, q_pop;
  assign q_in = '{src_mem: src_mem_i, src_row: src_row_i, rows: rows_i, dst_mem: dst_mem_i,
                  dst_row: dst_row_i, dst: dst_i, tie: tie_i, cnt: cnt_i, wait_rows: wait_i,
                  wait_cnt: wait_cnt_id_i, count_only: count_only_i, early_head: early_head_i};
  for (genvar e = 0; e < NumEng; e++) begin : gen_q
    logic [$clog2(SendQ+1)-1:0] unused_count;
    assign q_push[e] = start_i && eng_o == EngW'(e);
    assign q_pop[e]  = !busy_q[e] && !q_empty[e];  // an idle context takes its next send
    tpu_fifo #(
      .data_t(send_t),
      .Depth (SendQ)
    ) i_q (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .push_i (q_push[e]),
      .data_i (q_in),
      .pop_i  (q_pop[e]),
      .data_o (q_out[e]),
      .empty_o(q_empty[e]),
      .full_o (q_full[e]),
      .count_o(unused_count)
    );
  end
  assign ready_o = !q_full[eng_o];

  // Per local port, round robin over its contexts with a flit that may go (a wait_rows send: its
  // next row is counted, for its head too unless early_head) and room in their local VC. (Two
  // sends on one counter would both see its last row: the driver gives a counter one consumer at
  // a time.)
  logic [31:0] cnt_val_q [NumCnt];
  logic [LP-1:0][EngW-1:0] sel;
  logic [LP-1:0]           any, send_take;  // send_take: a wait_rows send's row goes
  logic [EngW-1:0]         rr_q [LP];
  logic [LP-1:0][15:0]     first_rows;  // per port: the rows of the packet its pick's head opens
  for (genvar e = 0; e < NumEng; e++) begin : gen_may_go
    assign may_go[e] = busy_q[e] && inj_vc_ready_i[e / PortCtx][e % PortCtx] &&
                       (!wait_q[e] || (need_head_q[e] && early_q[e]) ||
                        cnt_val_q[wcnt_q[e]] != '0);
  end
  for (genvar l = 0; l < LP; l++) begin : gen_port
    localparam int unsigned First = l * PortCtx;
    localparam int unsigned Num = (NumEng - First < PortCtx) ? NumEng - First : PortCtx;
    logic [15:0]     pkt_rows;
    ici_hdr_t        hdr;
    logic [RowW-1:0] row_data;
    logic [EngW-1:0] s;
    always_comb begin
      sel[l] = rr_q[l];
      any[l] = 1'b0;
      for (int unsigned k = 0; k < Num; k++) begin
        if (!any[l]) begin
          sel[l] = EngW'(First + (32'(rr_q[l]) - First + k) % Num);
          any[l] = may_go[sel[l]];
        end
      end
    end
    assign s = sel[l];
    assign send_take[l] = any[l] && !need_head_q[s] && wait_q[s];
    assign pkt_rows = (left_q[s] > 16'(PktRows)) ? 16'(PktRows) : left_q[s];
    assign hdr = '{addr: {cnt_q[s], 1'b0, dst_mem_q[s], dst_row_q[s]},
                   len: only_q[s] ? 8'd0 : pkt_rows[7:0],
                   ptype: only_q[s] ? ICI_CNT_INC : ICI_WRITE,
                   tie: tie_q[s], src: me_i, dst: dst_q[s]};
    assign rd_mem_o[l]    = src_mem_q[s];
    assign rd_addr_o[l]   = row_q[s];
    assign row_data       = src_mem_q[s] ? amem_rd_data_i[l] : vmem_rd_data_i[l];
    assign inj_valid_o[l] = any[l];
    assign inj_vc_o[l]    = PvW'(32'(s) - First);
    assign inj_flit_o[l]  = need_head_q[s] ? {1'b1, only_q[s], RowW'(hdr)}
                                           : {1'b0, pkt_left_q[s] == 16'd1, row_data};
    assign tx_flit_o[l]   = any[l];
    assign first_rows[l]  = pkt_rows;
  end
  assign busy_o = busy_q;
  // A wait_rows send whose counter holds every row it has still to send: its rows are all in
  // memory (one consumer per counter, rows counted in the order it sends them), so the sequencer
  // lets later readers of those rows go, while the send itself may still wait for its link.
  for (genvar e = 0; e < NumEng; e++) begin : gen_in
    assign in_o[e] = busy_q[e] && wait_q[e] && !in_q[e] && cnt_val_q[wcnt_q[e]] >= 32'(left_q[e]);
  end
  always_comb begin
    done_o = '0;
    for (int unsigned l = 0; l < LP; l++)
      if (any[l] && (only_q[sel[l]] || (!need_head_q[sel[l]] && left_q[sel[l]] == 16'd1)))
        done_o[sel[l]] = 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q      <= '0;
      in_q        <= '0;
      need_head_q <= '0;
      src_mem_q   <= '0;
      dst_mem_q   <= '0;
      wait_q      <= '0;
      only_q      <= '0;
      early_q     <= '0;
      for (int unsigned l = 0; l < LP; l++) rr_q[l] <= EngW'(l * PortCtx);
      for (int unsigned e = 0; e < NumEng; e++) begin
        row_q[e]      <= '0;
        left_q[e]     <= '0;
        dst_row_q[e]  <= '0;
        pkt_left_q[e] <= '0;
        dst_q[e]      <= '0;
        tie_q[e]      <= '0;
        cnt_q[e]      <= '0;
        wcnt_q[e]     <= '0;
      end
    end else begin
      for (int unsigned l = 0; l < LP; l++) begin
        if (any[l]) begin
          // the next context of this port after the one that sent
          rr_q[l] <= (32'(sel[l]) + 1 == (l + 1) * PortCtx || 32'(sel[l]) + 1 == NumEng)
                     ? EngW'(l * PortCtx) : sel[l] + EngW'(1);
          if (need_head_q[sel[l]]) begin
            need_head_q[sel[l]] <= 1'b0;
            pkt_left_q[sel[l]]  <= first_rows[l];
            if (only_q[sel[l]]) busy_q[sel[l]] <= 1'b0;  // a CNT_INC: its head is all of it
          end else begin
            row_q[sel[l]]      <= row_q[sel[l]] + 16'd1;
            dst_row_q[sel[l]]  <= dst_row_q[sel[l]] + 16'd1;
            left_q[sel[l]]     <= left_q[sel[l]] - 16'd1;
            pkt_left_q[sel[l]] <= pkt_left_q[sel[l]] - 16'd1;
            if (pkt_left_q[sel[l]] == 16'd1) need_head_q[sel[l]] <= 1'b1;
            if (left_q[sel[l]] == 16'd1) busy_q[sel[l]] <= 1'b0;
          end
        end
      end
      in_q <= in_q | in_o;
      for (int unsigned e = 0; e < NumEng; e++) begin
        if (q_pop[e]) begin  // an idle context: not the one sending above
          busy_q[e]      <= q_out[e].rows != '0;
          in_q[e]        <= 1'b0;
          need_head_q[e] <= 1'b1;
          src_mem_q[e]   <= q_out[e].src_mem;
          dst_mem_q[e]   <= q_out[e].dst_mem;
          row_q[e]       <= q_out[e].src_row;
          left_q[e]      <= q_out[e].rows;
          dst_row_q[e]   <= q_out[e].dst_row;
          dst_q[e]       <= q_out[e].dst;
          tie_q[e]       <= q_out[e].tie;
          cnt_q[e]       <= q_out[e].cnt;
          wait_q[e]      <= q_out[e].wait_rows;
          wcnt_q[e]      <= q_out[e].wait_cnt;
          only_q[e]      <= q_out[e].count_only;
          early_q[e]     <= q_out[e].early_head;
        end
      end
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Receive: each local port's ejected packets, with a packet state per ejection VC
  // ---------------------------------------------------------------------------------------------
  logic [LP-1:0]       inc;
  logic [LP-1:0][7:0]  inc_id;  // inc[l]: a received row (or CNT_INC) adds 1 to counter inc_id[l]
  logic [LP-1:0]       unused_hdr;
  for (genvar l = 0; l < LP; l++) begin : gen_rx
    logic [PortVcs-1:0] in_pkt_q, rx_mem_q, rx_write_q;
    logic [15:0]        rx_row_q [PortVcs];
    logic [7:0]         rx_cnt_q [PortVcs];
    logic        ej_head, ej_tail, in_pkt;
    logic [PvW-1:0] v;
    ici_hdr_t    ej_hdr;

    assign ej_ready_o[l] = 1'b1;
    assign v          = ej_vc_i[l];
    assign ej_head    = ej_flit_i[l][FlitW-1];
    assign ej_tail    = ej_flit_i[l][FlitW-2];
    assign ej_hdr     = ici_hdr_t'(ej_flit_i[l][$bits(ici_hdr_t)-1:0]);
    assign in_pkt     = in_pkt_q[v];
    assign rx_flit_o[l] = ej_valid_i[l];
    assign unused_hdr[l] = ^{ej_hdr.tie, ej_hdr.src, ej_hdr.dst, ej_hdr.len};

    // A body flit of a WRITE packet writes its row.
    assign vmem_we_o[l] = ej_valid_i[l] && !ej_head && in_pkt_q[v] && rx_write_q[v] &&
                          !rx_mem_q[v];
    assign amem_we_o[l] = ej_valid_i[l] && !ej_head && in_pkt_q[v] && rx_write_q[v] &&
                          rx_mem_q[v];
    assign wr_addr_o[l] = rx_row_q[v];
    assign wr_data_o[l] = ej_flit_i[l][RowW-1:0];

    always_comb begin
      inc[l]    = 1'b0;
      inc_id[l] = rx_cnt_q[v];
      rx_drop_o[l] = 1'b0;
      if (ej_valid_i[l] && ej_head) begin
        if (ej_hdr.ptype == ICI_CNT_INC) begin
          inc[l]    = ej_tail;  // a one-flit CNT_INC; a longer one counts at its tail
          inc_id[l] = ej_hdr.addr[25:18];
        end else if (ej_hdr.ptype != ICI_WRITE) begin
          rx_drop_o[l] = 1'b1;
        end
      end else if (ej_valid_i[l] && in_pkt_q[v]) begin
        inc[l]    = rx_write_q[v] || ej_tail;  // a WRITE's every row; another packet's tail
      end
    end

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        in_pkt_q   <= '0;
        rx_mem_q   <= '0;
        rx_write_q <= '0;
        for (int unsigned k = 0; k < PortVcs; k++) begin
          rx_row_q[k] <= '0;
          rx_cnt_q[k] <= '0;
        end
      end else if (ej_valid_i[l]) begin
        if (ej_head) begin
          in_pkt_q[v]   <= !ej_tail;
          rx_mem_q[v]   <= ej_hdr.addr[16];
          rx_write_q[v] <= ej_hdr.ptype == ICI_WRITE;
          rx_row_q[v]   <= ej_hdr.addr[15:0];
          rx_cnt_q[v]   <= ej_hdr.addr[25:18];
        end else begin
          rx_row_q[v] <= rx_row_q[v] + 16'd1;
          if (ej_tail) in_pkt_q[v] <= 1'b0;
        end
      end
    end

    // Immediate, at the clock edge (the same checks as concurrent ones, which a verilated model
    // paid for by sampling the whole ejected flit at every eval() for its head bit).
    always_ff @(posedge clk_i) begin
      if (rst_ni && ej_valid_i[l]) begin
        if (ej_head) begin
          `TPU_ASSERT_I(HeadOutsidePacket_A, !in_pkt, ("%m: HeadOutsidePacket_A failed"))
        end else begin
          `TPU_ASSERT_I(BodyInPacket_A, in_pkt, ("%m: BodyInPacket_A failed"))
        end
      end
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Counters
  // ---------------------------------------------------------------------------------------------
  assign wait_ok_o   = cnt_val_q[wait_cnt_i] >= wait_val_i;
  for (genvar k = 0; k < VpuSlots; k++) begin : gen_vpu_avail
    assign vpu_avail_o[k] = cnt_val_q[vpu_cnt_i[k]] != '0;
  end
  logic vpu_take_there;  // (Verilator 5.006 wants plain signals in the properties)
  assign vpu_take_there = cnt_val_q[vpu_take_cnt_i] != '0;

  // This cycle's counter events: what lands (a received row or CNT_INC per local port, a VPU sig
  // row) and what is taken (an ICI_WAIT's value, a VPU x row, a wait_rows send's row per local
  // port), each with its counter and its change (mod 2^32). Only the counters named by an event
  // change, each by the sum of its events (several events may name one counter); the other
  // counters hold (no per-counter logic runs in a cycle without events).
  localparam int unsigned NumEv = 3 + 2 * LP;
  logic [NumEv-1:0]           ev_on;
  logic [NumEv-1:0][7:0]      ev_id;
  logic [NumEv-1:0][31:0]     ev_delta;
  logic [NumEv-1:0]           ev_take;  // a take (else an add)
  always_comb begin
    ev_on[0] = vpu_sig_i && 32'(vpu_sig_cnt_i) < NumCnt;
    ev_id[0] = 8'(vpu_sig_cnt_i);
    ev_delta[0] = 32'd1;
    ev_take[0] = 1'b0;
    ev_on[1] = wait_take_i && 32'(wait_cnt_i) < NumCnt;
    ev_id[1] = 8'(wait_cnt_i);
    ev_delta[1] = -wait_val_i;
    ev_take[1] = 1'b1;
    ev_on[2] = vpu_take_i && 32'(vpu_take_cnt_i) < NumCnt;
    ev_id[2] = 8'(vpu_take_cnt_i);
    ev_delta[2] = '1;  // -1
    ev_take[2] = 1'b1;
    for (int unsigned l = 0; l < LP; l++) begin
      ev_on[3 + l] = inc[l] && 32'(inc_id[l]) < NumCnt;  // an id beyond the counters: ignored
      ev_id[3 + l] = inc_id[l];
      ev_delta[3 + l] = 32'd1;
      ev_take[3 + l] = 1'b0;
      ev_on[3 + LP + l] = send_take[l] && 32'(wcnt_q[sel[l]]) < NumCnt;
      ev_id[3 + LP + l] = 8'(wcnt_q[sel[l]]);
      ev_delta[3 + LP + l] = '1;  // -1
      ev_take[3 + LP + l] = 1'b1;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      for (int unsigned c = 0; c < NumCnt; c++) cnt_val_q[c] <= '0;
    end else if (ev_on != '0) begin
      for (int unsigned a = 0; a < NumEv; a++) begin
        if (ev_on[a]) begin
          logic [31:0] sum;
          sum = cnt_val_q[CntW'(ev_id[a])];
          for (int unsigned b = 0; b < NumEv; b++)
            if (ev_on[b] && ev_id[b] == ev_id[a]) sum = sum + ev_delta[b];
          cnt_val_q[CntW'(ev_id[a])] <= sum;
        end
      end
    end
  end

  logic unused_bits;
  assign unused_bits = ^{unused_hdr, first_hop.cls};

  // Assertions
  for (genvar e = 0; e < NumEng; e++) begin : gen_sva_inj
    logic goes;  // (Verilator 5.006 wants plain signals in the properties)
    assign goes = any[e / PortCtx] && sel[e / PortCtx] == EngW'(e);
    `TPU_ASSERT(InjOnlyWithRoom_A,
        goes |-> inj_vc_ready_i[e / PortCtx][e % PortCtx] && busy_q[e],
        ("%m: InjOnlyWithRoom_A failed"))
  end
  `TPU_ASSERT(StartWhenRoom_A,
      start_i |-> ready_o,
      ("%m: StartWhenRoom_A failed"))
  `TPU_ASSERT(TakeOnlyWhenOk_A,
      wait_take_i |-> wait_ok_o,
      ("%m: TakeOnlyWhenOk_A failed"))
  // Takes never exceed what a counter holds (one consumer per counter at a time), and no
  // counter wraps: checked for each counter an event names (the others do not change).
  for (genvar a = 0; a < NumEv; a++) begin : gen_sva_cnt
    logic [33:0] have, took;  // (Verilator 5.006 wants plain signals in the properties)
    logic        on;
    always_comb begin
      have = '0;
      took = '0;
      on = ev_on[a];
      if (ev_on[a]) begin
        have = 34'(cnt_val_q[CntW'(ev_id[a])]);
        for (int unsigned b = 0; b < NumEv; b++) begin
          if (ev_on[b] && ev_id[b] == ev_id[a]) begin
            if (!ev_take[b]) have = have + 34'd1;
            else if (b == 1) took = took + 34'(wait_val_i);
            else took = took + 34'd1;
          end
        end
      end
    end
    `TPU_ASSERT(CounterNoUnderflow_A,
        on |-> took <= have,
        ("%m: CounterNoUnderflow_A failed: counter %0d takes more than it holds", ev_id[a]))
    `TPU_ASSERT(CounterNoWrap_A,
        on |-> have < 34'h1_0000_0000,
        ("%m: CounterNoWrap_A failed: counter %0d", ev_id[a]))
  end
  `TPU_ASSERT(VpuTakeOnlyWhenThere_A,
      vpu_take_i |-> vpu_take_there,
      ("%m: VpuTakeOnlyWhenThere_A failed"))

endmodule
