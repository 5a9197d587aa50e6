// tpu_chip_pkg: the chip's command set (docs/isa.md), error codes and statistics indices.
//
// A command is one 128-bit word pushed on the host port. Field meaning depends on the opcode;
// docs/isa.md has the table. tb/chip/chip_contract.h mirrors these values; change both together.
package tpu_chip_pkg;

  typedef enum logic [3:0] {
    OpNop     = 4'd0,   // no operation
    OpDma     = 4'd1,   // 2D strided copy HBM <-> VMEM / AMEM -> HBM
    OpLoadW   = 4'd2,   // VMEM rows -> MXU weight port (one weight tile)
    OpMatmul  = 4'd3,   // VMEM activation rows [+ AMEM running sums] -> AMEM
    OpVpu     = 4'd4,   // elementwise VPU op over memory rows
    OpFence   = 4'd5,   // wait until every earlier command has completed
    OpHalt    = 4'd6,   // fence, then stop and raise `halted`
    OpIciSend = 4'd7,   // memory rows -> remote write into any chip's memory over ICI;
                        // flags[2] tie hint valid, flags[3] minus (tpu_ici_pkg::ici_tie_t)
    OpIciWait = 4'd8    // wait until an ICI counter reaches a value, then take it off
  } chip_op_e;

  // DMA directions (flags[1:0] of OpDma).
  typedef enum logic [1:0] {
    DmaHbmToVmem  = 2'd0,
    DmaVmemToHbm  = 2'd1,
    DmaAmemToHbm  = 2'd2,
    DmaReserved   = 2'd3
  } dma_dir_e;

  // Sticky error codes (first error wins; cleared by the host's clear input).
  typedef enum logic [7:0] {
    ErrNone       = 8'd0,
    ErrIllegalOp  = 8'd1,  // opcode 9..15
    ErrUnimpl     = 8'd2,  // reserved opcode not implemented in this chip (none today)
    ErrBadField   = 8'd3,  // a field value is not allowed (DMA dir 3, zero rows, VPU op)
    ErrVmemRange  = 8'd4,  // a VMEM row range ends beyond vmem_rows
    ErrAmemRange  = 8'd5,  // an AMEM row range ends beyond amem_rows
    ErrHbmRange   = 8'd6,  // a DMA's HBM range ends beyond the HBM capacity
    ErrAlign      = 8'd7,  // DMA address / stride / row bytes not aligned as required
    ErrNoWeights  = 8'd8,  // MATMUL with no weight tile loaded ahead of it
    ErrWeightsFull = 8'd9  // LOADW with every MXU weight bank loaded and not consumed (would hang)
  } chip_err_e;

  // Statistics, read by index on the host port (64-bit counters since reset). docs/profiling.md
  // says what each one counts. "In flight" is the sequencer's scoreboard: a command is in flight
  // from the cycle after it issues to the cycle its unit's done pulse comes (done - issue cycles),
  // which is what the timeline (trace port below) draws, so a unit's busy time in the trace
  // equals its *Flight counter. The four Cls* counters put every cycle in exactly one class.
  typedef enum logic [4:0] {
    StatCycles     = 5'd0,   // cycles since reset
    StatMxuBusy    = 5'd1,   // cycles the MXU unit had a LOADW or MATMUL in flight
    StatMxuBeats   = 5'd2,   // activation beats taken by the array (one row x R x C MACs each)
    StatVpuBusy    = 5'd3,   // cycles the VPU unit had a command in flight
    StatDmaBusy    = 5'd4,   // cycles the DMA engine had a command in flight
    StatDmaRdBytes = 5'd5,   // bytes the DMA read from HBM (64 per burst)
    StatDmaWrBytes = 5'd6,   // bytes the DMA wrote to HBM
    StatOverlap    = 5'd7,   // cycles with both the DMA and the MXU busy
    StatCmdsDone   = 5'd8,   // commands retired
    StatHostRdB    = 5'd9,   // bytes the host port read from HBM
    StatHostWrB    = 5'd10,  // bytes the host port wrote to HBM
    StatWeightBeats = 5'd11, // weight beats into the array (mxu_wrows rows each)
    StatIciTxFlits = 5'd12,  // flits the ICI engine injected into the router (heads included)
    StatIciRxFlits = 5'd13,  // flits the router ejected to the ICI engine
    StatIciBusy    = 5'd14,  // cycles an ICI_SEND was in flight
    StatIciWait    = 5'd15,  // cycles the queue head was an ICI_WAIT whose counter was short
    StatMxuMacs    = 5'd16,  // MACs of the array: activation beats x Rows x Cols (padding too)
    StatLoadWFlight = 5'd17, // cycles a LOADW was in flight (weight-load cycles)
    StatMatmulFlight = 5'd18, // cycles a MATMUL was in flight
    StatMxuStarved = 5'd19,  // cycles a MATMUL was in flight and no activation beat entered
    StatDmaFlight  = 5'd20,  // cycles a DMA was in flight (queued for the engine included)
    StatVpuFlight  = 5'd21,  // cycles a VPU command was in flight
    StatSendFlight = 5'd22,  // cycles an ICI_SEND was in flight (any send context)
    StatIciRxBusy  = 5'd23,  // cycles the router's ejection port held a flit for the engine
    StatHostBusy   = 5'd24,  // cycles the host port had an HBM request waiting or outstanding
    StatSeqIdle    = 5'd25,  // cycles the queue was empty and nothing was in flight
    StatClsCompute = 5'd26,  // class: LOADW, MATMUL or VPU in flight
    StatClsComm    = 5'd27,  // class: not compute; ICI send or receive busy, or ICI_WAIT blocked
    StatClsMemory  = 5'd28,  // class: neither; a DMA in flight or host-port HBM traffic
    StatClsIdle    = 5'd29   // class: none of these
  } chip_stat_e;
  localparam int unsigned CHIP_NUM_STATS = 30;

  // The trace port's done bits (tpu_chip trc_done_o): one pulse per completed command.
  localparam int unsigned TRC_DONE_DMA    = 0;
  localparam int unsigned TRC_DONE_LOADW  = 1;
  localparam int unsigned TRC_DONE_MATMUL = 2;
  localparam int unsigned TRC_DONE_VPU    = 3;
  localparam int unsigned TRC_DONE_SEND   = 4;  // 4..7: ICI send context 0..3

  // One command word. The generic fields are named by position; docs/isa.md gives each opcode's
  // use of them.
  typedef struct packed {
    logic [31:0] w3;     // [127:96] DMA: HBM row stride (bytes)
    logic [31:0] w2;     // [95:64]  DMA: HBM address; VPU: [15:0] destination row
    logic [15:0] f3;     // [63:48]  DMA: bytes per HBM row; MATMUL: AMEM row; VPU: y row
    logic [15:0] f2;     // [47:32]  row count (DMA: HBM rows)
    logic [15:0] f1;     // [31:16]  first memory row (DMA, LOADW, MATMUL: VMEM; VPU: x row)
    logic [11:0] flags;  // [15:4]   per-opcode flags
    chip_op_e    op;     // [3:0]
  } chip_cmd_t;

  // Memories, for the scoreboard.
  localparam logic MEM_VMEM = 1'b0;
  localparam logic MEM_AMEM = 1'b1;

  // A row range [lo, hi) of one memory, as the scoreboard records it.
  typedef struct packed {
    logic        valid;
    logic        mem;
    logic [16:0] lo;
    logic [16:0] hi;
  } mem_range_t;

  function automatic logic ranges_overlap(mem_range_t a, mem_range_t b);
    return a.valid && b.valid && (a.mem == b.mem) && (a.lo < b.hi) && (b.lo < a.hi);
  endfunction

endpackage
