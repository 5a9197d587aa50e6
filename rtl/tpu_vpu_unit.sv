// tpu_vpu_unit: the VPU with its command front end: streams memory rows through tpu_vpu.
//
// A command (start_i) names an elementwise op (vpu_op_e, configs/tpu_contract.yaml), `rows`
// rows of x from x_mem/x_row, y from y_mem/y_row (the same y row for every x row when y_bcast_i
// is set: a bias), z = -0, and the destination rows dst_row + r * dst_stride in dst_mem;
// src_bf16/dst_bf16 as in tpu_vpu.
// Row r: dst[dst_row + r * dst_stride] = op(x[x_row + r], y[y_row + (y_bcast ? 0 : r)]).
// A VROW command (row_i, docs/isa.md "VROW") works on logical rows of `beats` memory rows:
// logical row r's beat j is memory row x_row + r * row_stride + j * beat_stride (an offset o
// from x_row). A reduction (red_sum, red_max) feeds each logical row to tpu_vpu as one group
// and packs the results: r's result goes to lane r mod Lanes of row dst_row + r / Lanes, which is
// written once its last lane (or the command's last row) is in, the lanes past the last row +0.
// Any other op reads y per logical row: lane r mod Lanes of y row y_row + r / Lanes, broadcast
// over the lanes, and writes dst_row + o. VPU commands are VROWs of one beat a row at stride 1.
// x_wait: the x rows arrive over ICI; row r goes in only once ICI counter x_cnt is >= 1
// (cnt_avail_i) and takes 1 off it (cnt_take_o), so a reduction runs as its rows land (the
// counter counts rows as they are written, in order). sig: each destination row adds 1 to ICI
// counter sig_cnt as it is written (sig_o), for a send that forwards the rows as they come.
// Commands held: up to Slots, oldest first. Each cycle the oldest one with a row to go feeds it
// into tpu_vpu; a younger one may go ahead of older ones that wait for their x rows, so that
// reductions fed by several links at once run as their rows land, not one after another. It
// goes ahead only where no older held command with rows to go waits on the same x counter or
// signals the same sig counter (each counter's rows stay in order). It may finish first, but
// done_o still reports commands in order: a send waiting on its sig rows must not wait for an
// older command (its packet, begun, would hold its path meanwhile: a deadlock across chips).
// Memory hazards between held commands cannot arise: the sequencer issues a VPU command only
// when its ranges do not overlap those of the VPU commands in flight (tpu_seq).
// The transcendental ops (VpuExp2 .. VpuExp) go to tpu_vpu_xcend instead of tpu_vpu, their
// destination beside them through its five stages.
// Latency: 1 cycle (tpu_vpu) plus the write; 5 cycles (tpu_vpu_xcend) plus the write for the
// transcendental ops. Throughput: one row per cycle, across commands too: the next command's
// first row follows the oldest one's last without a gap; a row of a tpu_vpu op behind rows of
// transcendental ops waits until theirs are at their write (up to 4 cycles), so that rows are
// written in the order they went in, one a cycle. A command is done only once its rows are
// written. Handshake: start_i
// is taken when ready_o is high (a slot free); done_o pulses once per command, in order: in the
// cycle its last row is written, or, for one that finished before an older one, the cycle after
// the older one's (one command a cycle).
`include "tpu_assert.svh"

module tpu_vpu_unit
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
#(
  parameter int unsigned Lanes    = 8,
  parameter int unsigned MemAddrW = 16,
  parameter int unsigned CntW     = 6,   // ICI counter ids
  parameter int unsigned Slots    = 4,   // commands held (the sequencer's VPU scoreboard ring)
  localparam int unsigned RowW    = Lanes * 32
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                start_i,
  output logic                ready_o,
  input  vpu_op_e             op_i,
  input  logic [2:0]          src_bf16_i,
  input  logic                dst_bf16_i,
  input  logic                x_mem_i,
  input  logic [15:0]         x_row_i,
  input  logic                y_mem_i,
  input  logic [15:0]         y_row_i,
  input  logic                y_bcast_i,
  input  logic                dst_mem_i,
  input  logic [15:0]         dst_row_i,
  input  logic [15:0]         dst_stride_i,  // rows between destination rows (0 means 1)
  input  logic [15:0]         rows_i,
  input  logic                x_wait_i,      // x rows arrive over ICI (docs/isa.md)
  input  logic [CntW-1:0]     x_cnt_i,
  input  logic                sig_i,         // signal each written row
  input  logic [CntW-1:0]     sig_cnt_i,
  input  logic                row_i,         // a VROW command: the three fields below
  input  logic [7:0]          beats_i,       // memory rows per logical row (1..)
  input  logic [15:0]         beat_stride_i, // rows between a logical row's beats (0 means 1)
  input  logic [15:0]         row_stride_i,  // rows between logical rows (0 means 1)
  output logic                done_o,
  output logic                busy_o,
  output logic                rows_wait_o,   // no row goes in, and the oldest command waits for
                                             // its next x row
  // operand reads: the chip reads both memories at each address and picks by *_mem_o
  output logic                x_mem_o,
  output logic [MemAddrW-1:0] x_addr_o,
  input  logic [RowW-1:0]     x_vmem_i,
  input  logic [RowW-1:0]     x_amem_i,
  output logic                y_mem_o,
  output logic [MemAddrW-1:0] y_addr_o,
  input  logic [RowW-1:0]     y_vmem_i,
  input  logic [RowW-1:0]     y_amem_i,
  // result write
  output logic                vmem_we_o,
  output logic                amem_we_o,
  output logic [MemAddrW-1:0] wr_addr_o,
  output logic [RowW-1:0]     wr_data_o,
  // ICI counters (tpu_ici_eng)
  output logic [Slots-1:0][CntW-1:0] cnt_id_o,  // x_wait's counter of each held command
  input  logic [Slots-1:0]    cnt_avail_i,  // it is >= 1
  output logic                cnt_take_o,   // an x row goes in: take 1 off cnt_take_id_o
  output logic [CntW-1:0]     cnt_take_id_o,
  output logic                sig_o,        // a sig row is written: add 1 to sig_cnt_o
  output logic [CntW-1:0]     sig_cnt_o
);

  // One command as the unit holds it (dst_stride: 0 already read as 1).
  typedef struct packed {
    vpu_op_e     op;
    logic [2:0]  src_bf16;
    logic        dst_bf16;
    logic        x_mem;
    logic        y_mem;
    logic        y_bcast;
    logic        dst_mem;
    logic [15:0] x_row;
    logic [15:0] y_row;
    logic [15:0] dst_row;
    logic [15:0] dst_stride;
    logic [15:0] rows;
    logic        x_wait;
    logic [CntW-1:0] x_cnt;
    logic        sig;
    logic [CntW-1:0] sig_cnt;
    logic        row;
    logic [7:0]  beats;
    logic [15:0] beat_stride;
    logic [15:0] row_stride;
  } vcmd_t;

  // Slot 0 holds the oldest command; held commands are packed from slot 0 and move down a slot
  // in the cycle the oldest one is done. Each slot keeps its rows fed (fed_q) and its next
  // destination row (ptr_q). Each row's destination rides beside it through the VPU's one-cycle
  // output register (wr_*_q).
  localparam int unsigned SlotW = $clog2(Slots);
  localparam int unsigned NumW  = $clog2(Slots + 1);
  vcmd_t       cmd_q [Slots];
  vcmd_t       cmd_d [Slots];
  vcmd_t       new_cmd, sel_cmd;
  logic [Slots-1:0] v_q, v_d, can;
  logic [15:0] fed_q [Slots];
  logic [15:0] fed_d [Slots];
  logic [15:0] ptr_q [Slots];
  logic [15:0] ptr_d [Slots];
  // VROW position of each slot: the beat j of its logical row fed_q, the offset of that row's
  // first beat (base_q) and of the beat (off_q) from x_row.
  logic [7:0]  beat_q [Slots];
  logic [7:0]  beat_d [Slots];
  logic [15:0] base_q [Slots];
  logic [15:0] base_d [Slots];
  logic [15:0] off_q [Slots];
  logic [15:0] off_d [Slots];
  logic [SlotW-1:0] sel;
  logic [15:0] sel_fed;
  logic [NumW-1:0]  held, kept;
  logic [15:0] wr_addr_q, wr_addr_d;
  logic        wr_mem_q, wr_mem_d, wr_sig_q, wr_sig_d;
  logic [CntW-1:0] wr_sig_cnt_q, wr_sig_cnt_d;
  // A reduction's result rides beside it too: its lane of the packed row and whether that row
  // is written now (its last lane, or the command's last row); pk_q holds the lanes before it.
  localparam int unsigned LaneW = $clog2(Lanes);
  logic             wr_red_q, wr_red_d, wr_flush_q, wr_flush_d;
  logic [LaneW-1:0] wr_lane_q, wr_lane_d;
  tpu_pkg::f32_t [Lanes-1:0] pk_q, pk_d, pk_row;
  logic             sel_red, sel_last, out_write;
  logic [7:0]       sel_beat;
  logic [15:0]      sel_off;
  tpu_pkg::f32_t    y_lane;

  logic             in_valid, in_ready, in_fire, out_valid, out_scalar, idle;
  logic [Slots-1:0] fin;  // every row fed (the last one's write at most a cycle behind)
  tpu_pkg::f32_t [Lanes-1:0] x, y, z, out_data;

  // The transcendental lanes: the row's destination {sig_cnt, sig, mem, addr} is the tag.
  localparam int unsigned XTagW = CntW + 2 + 16;
  logic                      sel_xc, vpu_valid, xc_valid, xc_out, xc_pend;
  logic [XTagW-1:0]          xc_tag;
  logic [CntW-1:0]           xc_sig_cnt;
  logic                      xc_sig, xc_mem;
  logic [15:0]               xc_addr;
  tpu_pkg::f32_t [Lanes-1:0] xc_data;

  assign new_cmd = '{op: op_i, src_bf16: src_bf16_i, dst_bf16: dst_bf16_i, x_mem: x_mem_i,
                     y_mem: y_mem_i, y_bcast: y_bcast_i, dst_mem: dst_mem_i, x_row: x_row_i,
                     y_row: y_row_i, dst_row: dst_row_i,
                     dst_stride: (dst_stride_i == '0) ? 16'd1 : dst_stride_i, rows: rows_i,
                     x_wait: x_wait_i, x_cnt: x_cnt_i, sig: sig_i, sig_cnt: sig_cnt_i,
                     row: row_i, beats: row_i ? beats_i : 8'd1,
                     beat_stride: (!row_i || beat_stride_i == '0) ? 16'd1 : beat_stride_i,
                     row_stride: (!row_i || row_stride_i == '0) ? 16'd1 : row_stride_i};

  // Which slot feeds a row: the oldest that can. A slot can when it has rows to go and its x row
  // is there, and no older slot with rows to go shares its x counter or its sig counter.
  always_comb begin
    for (int unsigned k = 0; k < Slots; k++) fin[k] = fed_q[k] == cmd_q[k].rows;
    for (int unsigned k = 0; k < Slots; k++) begin
      can[k] = v_q[k] && !fin[k] && (!cmd_q[k].x_wait || cnt_avail_i[k]) &&
               (vpu_op_is_xcend(cmd_q[k].op) || !xc_pend);
      if (k > 0) begin
        for (int unsigned j = 0; j < k; j++) begin
          if (v_q[j] && !fin[j] &&
              ((cmd_q[j].x_wait && cmd_q[k].x_wait && cmd_q[j].x_cnt == cmd_q[k].x_cnt) ||
               (cmd_q[j].sig && cmd_q[k].sig && cmd_q[j].sig_cnt == cmd_q[k].sig_cnt)))
            can[k] = 1'b0;
        end
      end
    end
    sel = '0;
    for (int k = Slots - 1; k >= 0; k--) if (can[k]) sel = SlotW'(k);
    sel_cmd  = cmd_q[sel];
    sel_fed  = fed_q[sel];
    sel_beat = beat_q[sel];
    sel_off  = off_q[sel];
  end
  assign sel_red  = vpu_op_is_red(sel_cmd.op);
  assign sel_last = sel_beat == sel_cmd.beats - 8'd1;

  for (genvar k = 0; k < Slots; k++) begin : gen_cnt_id
    assign cnt_id_o[k] = cmd_q[k].x_cnt;
  end
  assign in_valid      = |can;
  assign cnt_take_o    = in_fire && sel_cmd.x_wait;
  assign cnt_take_id_o = sel_cmd.x_cnt;
  assign rows_wait_o   = !in_valid && v_q[0] && !fin[0] && cmd_q[0].x_wait;
  // the row's write: its sig rides beside it
  assign sig_o      = (out_write && wr_sig_q) || (xc_out && xc_sig);
  assign sig_cnt_o  = xc_out ? xc_sig_cnt : wr_sig_cnt_q;
  assign in_fire  = in_valid && in_ready;
  assign x_mem_o  = sel_cmd.x_mem;
  assign y_mem_o  = sel_cmd.y_mem;
  assign x_addr_o = MemAddrW'(sel_cmd.x_row + sel_off);
  assign y_addr_o = MemAddrW'(sel_cmd.row ? sel_cmd.y_row + (sel_fed >> LaneW) :
                              sel_cmd.y_bcast ? sel_cmd.y_row : sel_cmd.y_row + sel_fed);
  assign x        = sel_cmd.x_mem ? x_amem_i : x_vmem_i;
  // (a VROW's y: its logical row's lane of the packed row, in every lane)
  assign y_lane   = sel_cmd.y_mem ? y_amem_i[32*sel_fed[LaneW-1:0] +: 32] :
                                    y_vmem_i[32*sel_fed[LaneW-1:0] +: 32];
  assign y        = sel_cmd.row ? {Lanes{y_lane}} : sel_cmd.y_mem ? y_amem_i : y_vmem_i;
  assign z        = {Lanes{tpu_vpu_pkg::F32_NEG_ZERO}};

  tpu_vpu #(
    .Lanes(Lanes)
  ) i_vpu (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .in_valid_i   (vpu_valid),
    .in_ready_o   (in_ready),
    .in_op_i      (sel_cmd.op),
    .in_src_bf16_i(sel_cmd.src_bf16),
    .in_dst_bf16_i(sel_cmd.dst_bf16),
    .in_first_i   (sel_beat == '0),
    .in_last_i    (sel_last),
    .in_mask_i    ('1),
    .in_x_i       (x),
    .in_y_i       (y),
    .in_z_i       (z),
    .out_valid_o  (out_valid),
    .out_ready_i  (1'b1),
    .out_scalar_o (out_scalar),
    .out_data_o   (out_data),
    .idle_o       (idle)
  );

  assign sel_xc    = vpu_op_is_xcend(sel_cmd.op);
  assign vpu_valid = in_valid && !sel_xc;
  assign xc_valid  = in_valid && sel_xc;

  tpu_vpu_xcend #(
    .Lanes(Lanes),
    .TagW (XTagW)
  ) i_xcend (
    .clk_i          (clk_i),
    .rst_ni         (rst_ni),
    .in_valid_i     (xc_valid),
    .in_op_i        (sel_cmd.op),
    .in_src_bf16_x_i(sel_cmd.src_bf16[0]),
    .in_dst_bf16_i  (sel_cmd.dst_bf16),
    .in_tag_i       ({sel_cmd.sig_cnt, sel_cmd.sig, sel_cmd.dst_mem, ptr_q[sel]}),
    .in_x_i         (x),
    .out_valid_o    (xc_out),
    .out_tag_o      (xc_tag),
    .out_data_o     (xc_data),
    .pend_o         (xc_pend)
  );
  assign {xc_sig_cnt, xc_sig, xc_mem, xc_addr} = xc_tag;

  // A reduction's result goes into the packed row; the row is written with its last lane.
  always_comb begin
    pk_row = pk_q;
    pk_row[wr_lane_q] = out_data[0];
  end
  assign out_write = out_valid && (!wr_red_q || wr_flush_q);
  assign vmem_we_o = (out_write && !wr_mem_q) || (xc_out && !xc_mem);
  assign amem_we_o = (out_write && wr_mem_q) || (xc_out && xc_mem);
  assign wr_addr_o = MemAddrW'(xc_out ? xc_addr : wr_addr_q);
  assign wr_data_o = xc_out ? xc_data : wr_red_q ? pk_row : out_data;
  // (in the cycle its last row is written, or later: rows in the transcendental lanes' first
  // four stages, of any command, hold it back)
  assign done_o    = v_q[0] && fin[0] && !xc_pend;
  assign ready_o   = !v_q[Slots-1];
  assign busy_o    = |v_q || out_valid || xc_out || xc_pend;

  always_comb begin
    held = '0;
    for (int unsigned k = 0; k < Slots; k++) held += NumW'(v_q[k]);
    kept = held - NumW'(done_o);
  end

  always_comb begin
    for (int unsigned k = 0; k < Slots; k++) begin
      cmd_d[k] = cmd_q[k];
      fed_d[k] = fed_q[k];
      ptr_d[k] = ptr_q[k];
      beat_d[k] = beat_q[k];
      base_d[k] = base_q[k];
      off_d[k]  = off_q[k];
    end
    wr_addr_d = wr_addr_q;
    wr_mem_d  = wr_mem_q;
    wr_sig_d  = 1'b0;
    wr_sig_cnt_d = wr_sig_cnt_q;
    wr_red_d   = wr_red_q;
    wr_lane_d  = wr_lane_q;
    wr_flush_d = wr_flush_q;
    pk_d       = pk_q;
    if (out_valid && wr_red_q) pk_d = wr_flush_q ? '0 : pk_row;
    if (in_fire && !sel_xc) begin  // (a transcendental row's destination rides in its tag)
      wr_addr_d = !sel_cmd.row ? ptr_q[sel] :
                  sel_red ? sel_cmd.dst_row + (sel_fed >> LaneW) : sel_cmd.dst_row + sel_off;
      wr_mem_d  = sel_cmd.dst_mem;
      wr_sig_d  = sel_cmd.sig;
      wr_sig_cnt_d = sel_cmd.sig_cnt;
      wr_red_d   = sel_red;
      wr_lane_d  = sel_fed[LaneW-1:0];
      wr_flush_d = (sel_fed[LaneW-1:0] == LaneW'(Lanes - 1)) || (sel_fed + 1'b1 == sel_cmd.rows);
    end
    if (in_fire) begin
      if (sel_last) begin  // the logical row's last beat: on to the next row
        fed_d[sel]  = sel_fed + 1'b1;
        ptr_d[sel]  = ptr_q[sel] + sel_cmd.dst_stride;
        beat_d[sel] = '0;
        base_d[sel] = base_q[sel] + sel_cmd.row_stride;
        off_d[sel]  = base_q[sel] + sel_cmd.row_stride;
      end else begin
        beat_d[sel] = sel_beat + 1'b1;
        off_d[sel]  = sel_off + sel_cmd.beat_stride;
      end
    end
    if (done_o) begin  // the oldest command leaves: the others move down a slot
      for (int unsigned k = 0; k + 1 < Slots; k++) begin
        cmd_d[k] = cmd_d[k + 1];
        fed_d[k] = fed_d[k + 1];
        ptr_d[k] = ptr_d[k + 1];
        beat_d[k] = beat_d[k + 1];
        base_d[k] = base_d[k + 1];
        off_d[k]  = off_d[k + 1];
      end
    end
    for (int unsigned k = 0; k < Slots; k++) v_d[k] = NumW'(k) < kept;
    if (start_i) begin  // (only with a slot free: ready_o)
      cmd_d[kept[SlotW-1:0]] = new_cmd;
      fed_d[kept[SlotW-1:0]] = '0;
      ptr_d[kept[SlotW-1:0]] = new_cmd.dst_row;
      beat_d[kept[SlotW-1:0]] = '0;
      base_d[kept[SlotW-1:0]] = '0;
      off_d[kept[SlotW-1:0]]  = '0;
      v_d[kept[SlotW-1:0]]   = 1'b1;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      for (int unsigned k = 0; k < Slots; k++) begin
        cmd_q[k] <= '0;
        fed_q[k] <= '0;
        ptr_q[k] <= '0;
        beat_q[k] <= '0;
        base_q[k] <= '0;
        off_q[k]  <= '0;
      end
      v_q       <= '0;
      wr_red_q   <= 1'b0;
      wr_lane_q  <= '0;
      wr_flush_q <= 1'b0;
      pk_q       <= '0;
      wr_addr_q <= '0;
      wr_mem_q  <= 1'b0;
      wr_sig_q  <= 1'b0;
      wr_sig_cnt_q <= '0;
    end else begin
      for (int unsigned k = 0; k < Slots; k++) begin
        cmd_q[k] <= cmd_d[k];
        fed_q[k] <= fed_d[k];
        ptr_q[k] <= ptr_d[k];
        beat_q[k] <= beat_d[k];
        base_q[k] <= base_d[k];
        off_q[k]  <= off_d[k];
      end
      v_q       <= v_d;
      wr_red_q   <= wr_red_d;
      wr_lane_q  <= wr_lane_d;
      wr_flush_q <= wr_flush_d;
      pk_q       <= pk_d;
      wr_addr_q <= wr_addr_d;
      wr_mem_q  <= wr_mem_d;
      wr_sig_q  <= wr_sig_d;
      wr_sig_cnt_q <= wr_sig_cnt_d;
    end
  end

  // Assertions
  `TPU_ASSERT(StartWhenReady_A,
      start_i |-> ready_o,
      ("%m: StartWhenReady_A failed"))
  `TPU_ASSERT(StartHasRows_A,
      start_i |-> rows_i != '0,
      ("%m: StartHasRows_A failed: a command of no rows"))
  `TPU_ASSERT(ElementwiseOnly_A,
      start_i && !row_i |-> vpu_op_elementwise(op_i),
      ("%m: ElementwiseOnly_A failed"))
  `TPU_ASSERT(RowOpKnown_A,
      start_i && row_i |-> vpu_op_vector(op_i) && beats_i != '0 && !x_wait_i && !sig_i,
      ("%m: RowOpKnown_A failed: a VROW of an op tpu_vpu lacks, of no beats, or chained"))
  // A reduction's packed rows are written while its x rows are still read: they must lie apart
  // (software's rule, docs/isa.md "VROW"; the sequencer orders commands, not a command's rows).
  `TPU_ASSERT(RedDstApart_A,
      start_i && row_i && vpu_op_is_red(op_i) && x_mem_i == dst_mem_i |->
      (32'(dst_row_i) + (32'(rows_i) + Lanes - 1) / Lanes <= 32'(x_row_i)) ||
      (32'(dst_row_i) >= 32'(x_row_i) +
       (32'(rows_i) - 1) * ((row_stride_i == '0) ? 32'd1 : 32'(row_stride_i)) +
       (32'(beats_i) - 1) * ((beat_stride_i == '0) ? 32'd1 : 32'(beat_stride_i)) + 1),
      ("%m: RedDstApart_A failed: a VROW reduction writes rows it still reads"))
  `TPU_ASSERT(PackedInOrder_A,
      out_valid && wr_red_q && !wr_flush_q |-> wr_lane_q != LaneW'(Lanes - 1),
      ("%m: PackedInOrder_A failed: a full packed row was not written"))
  `TPU_ASSERT(SlotsPacked_A,
      (v_q & (v_q + 1'b1)) == '0,
      ("%m: SlotsPacked_A failed: held commands are not packed from slot 0"))
  `TPU_ASSERT(NoRowPastTheLast_A,
      in_fire |-> sel_fed < sel_cmd.rows,
      ("%m: NoRowPastTheLast_A failed: a command fed more rows than it has"))
  `TPU_ASSERT(VpuNeverStalls_A,
      in_valid |-> in_ready,
      ("%m: VpuNeverStalls_A failed: a row's destination would no longer ride beside it"))
  `TPU_ASSERT(NoScalarOut_A,
      out_valid |-> out_scalar == wr_red_q,
      ("%m: NoScalarOut_A failed"))
  `TPU_ASSERT(OneWriterACycle_A,
      !(out_valid && xc_out),
      ("%m: OneWriterACycle_A failed: tpu_vpu and the transcendental lanes write in one cycle"))
  `TPU_ASSERT(IdleWhenDone_A,
      !busy_o |-> idle,
      ("%m: IdleWhenDone_A failed"))

endmodule
