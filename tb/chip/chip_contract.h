// The chip's hardware contract as C++ (docs/isa.md; mirrors rtl/tpu_chip_pkg.sv): command encoders,
// error codes, statistics indices. In tb/ so that both the harness and the drivers use it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tpu {

enum class ChipOp : uint32_t {
  kNop = 0, kDma = 1, kLoadW = 2, kMatmul = 3, kVpu = 4, kFence = 5, kHalt = 6,
  kIciSend = 7, kIciWait = 8,
};

enum class DmaDir : uint32_t { kHbmToVmem = 0, kVmemToHbm = 1, kAmemToHbm = 2 };
enum class Mem : uint32_t { kVmem = 0, kAmem = 1 };

// Sticky error codes (tpu_chip_pkg::chip_err_e).
enum class ChipErr : uint32_t {
  kNone = 0, kIllegalOp = 1, kUnimpl = 2, kBadField = 3, kVmemRange = 4, kAmemRange = 5,
  kHbmRange = 6, kAlign = 7, kNoWeights = 8, kWeightsFull = 9,
};
inline const char* chip_err_name(unsigned code) {
  switch (code) {
    case 0: return "none";
    case 1: return "illegal_opcode";
    case 2: return "unimplemented_opcode";
    case 3: return "bad_field";
    case 4: return "vmem_out_of_range";
    case 5: return "amem_out_of_range";
    case 6: return "hbm_out_of_range";
    case 7: return "misaligned";
    case 8: return "matmul_without_weights";
    case 9: return "weights_overflow";
    default: return "unknown";
  }
}

// Statistics indices (tpu_chip_pkg::chip_stat_e; docs/profiling.md says what each counts).
enum ChipStat : unsigned {
  kStatCycles = 0, kStatMxuBusy = 1, kStatMxuBeats = 2, kStatVpuBusy = 3, kStatDmaBusy = 4,
  kStatDmaRdBytes = 5, kStatDmaWrBytes = 6, kStatOverlap = 7, kStatCmdsDone = 8,
  kStatHostRdBytes = 9, kStatHostWrBytes = 10, kStatWeightBeats = 11, kStatIciTxFlits = 12,
  kStatIciRxFlits = 13, kStatIciBusy = 14, kStatIciWait = 15,
  kStatMxuMacs = 16,       // activation beats x R x C (hardware MACs, padding included)
  kStatLoadWFlight = 17,   // cycles a LOADW was in flight (weight-load cycles)
  kStatMatmulFlight = 18,  // cycles a MATMUL was in flight
  kStatMxuStarved = 19,    // a MATMUL in flight and no activation beat entered the array
  kStatDmaFlight = 20,     // cycles a DMA was in flight (queued for the engine included)
  kStatVpuFlight = 21,     // cycles a VPU command was in flight
  kStatSendFlight = 22,    // cycles an ICI_SEND was in flight (any send context)
  kStatIciRxBusy = 23,     // cycles the router's ejection port held a flit for the engine
  kStatHostBusy = 24,      // cycles the host port had an HBM request waiting or outstanding
  kStatSeqIdle = 25,       // cycles the queue was empty and nothing in flight
  kStatClsCompute = 26,    // class: LOADW, MATMUL or VPU in flight
  kStatClsComm = 27,       // class: not compute; ICI send/receive busy or ICI_WAIT blocked
  kStatClsMemory = 28,     // class: neither; a DMA in flight or host-port HBM traffic
  kStatClsIdle = 29,       // class: none of these
  kNumChipStats = 30,
};

// The counters' names (snake_case, as reports write them), by index.
inline const char* chip_stat_name(unsigned i) {
  static const char* const kNames[kNumChipStats] = {
      "cycles", "mxu_busy", "mxu_beats", "vpu_busy", "dma_busy", "dma_rd_bytes", "dma_wr_bytes",
      "dma_mxu_overlap", "cmds_done", "host_rd_bytes", "host_wr_bytes", "weight_beats",
      "ici_tx_flits", "ici_rx_flits", "ici_busy", "ici_wait", "mxu_macs", "loadw_flight",
      "matmul_flight", "mxu_starved", "dma_flight", "vpu_flight", "send_flight", "ici_rx_busy",
      "host_busy", "seq_idle", "cls_compute", "cls_comm", "cls_memory", "cls_idle"};
  return i < kNumChipStats ? kNames[i] : "unknown";
}

// Counters of the chip (rtl/tpu_chip_pkg.sv chip_stat_e), one snapshot or a difference.
struct ChipCounters {
  uint64_t v[kNumChipStats] = {};
  uint64_t operator[](unsigned i) const { return v[i]; }
  ChipCounters operator-(const ChipCounters& o) const {
    ChipCounters d;
    for (unsigned i = 0; i < kNumChipStats; ++i) d.v[i] = v[i] - o.v[i];
    return d;
  }
};

// One command: words[0] = bits [31:0] ... words[3] = bits [127:96].
struct ChipCmd {
  std::array<uint32_t, 4> w{};
  static ChipCmd make(ChipOp op, uint32_t flags, uint32_t f1, uint32_t f2, uint32_t f3,
                      uint32_t w2, uint32_t w3) {
    ChipCmd c;
    c.w[0] = (static_cast<uint32_t>(op) & 0xFu) | ((flags & 0xFFFu) << 4) | ((f1 & 0xFFFFu) << 16);
    c.w[1] = (f2 & 0xFFFFu) | ((f3 & 0xFFFFu) << 16);
    c.w[2] = w2;
    c.w[3] = w3;
    return c;
  }
};

inline ChipCmd cmd_nop() { return ChipCmd::make(ChipOp::kNop, 0, 0, 0, 0, 0, 0); }
inline ChipCmd cmd_fence() { return ChipCmd::make(ChipOp::kFence, 0, 0, 0, 0, 0, 0); }
inline ChipCmd cmd_halt() { return ChipCmd::make(ChipOp::kHalt, 0, 0, 0, 0, 0, 0); }
// rows HBM segments of seg_bytes at hbm_addr + i * stride <-> memory rows from mem_row. tail
// (HBM -> VMEM only): when not 0, the last memory row of each segment keeps its first tail
// lanes and the others are written as -0.
inline ChipCmd cmd_dma(DmaDir dir, bool bf16, uint32_t mem_row, uint32_t rows, uint32_t seg_bytes,
                       uint32_t hbm_addr, uint32_t stride, uint32_t tail = 0) {
  return ChipCmd::make(ChipOp::kDma,
                       static_cast<uint32_t>(dir) | (bf16 ? 4u : 0u) | ((tail & 0xFFu) << 4),
                       mem_row, rows, seg_bytes, hbm_addr, stride);
}
// Weight rows from VMEM rows row, row + stride, ... (stride 0 means 1).
inline ChipCmd cmd_loadw(uint32_t vmem_row, uint32_t stride = 1) {
  return ChipCmd::make(ChipOp::kLoadW, 0, vmem_row, 0, 0, stride, 0);
}
// rows activation rows from VMEM a_row + r * a_stride -> AMEM c_row + r (+= when acc).
inline ChipCmd cmd_matmul(uint32_t a_row, uint32_t rows, uint32_t c_row, bool acc,
                          uint32_t a_stride = 1) {
  return ChipCmd::make(ChipOp::kMatmul, acc ? 1u : 0u, a_row, rows, c_row, a_stride, 0);
}
struct VpuCmdArgs {
  unsigned op = 0;          // tpu::VpuOp code 0..8
  bool dst_bf16 = false;
  unsigned src_bf16 = 0;    // {z, y, x}
  Mem x_mem = Mem::kAmem;
  uint32_t x_row = 0;
  Mem y_mem = Mem::kVmem;
  uint32_t y_row = 0;
  bool y_bcast = false;
  Mem dst_mem = Mem::kAmem;
  uint32_t dst_row = 0;
  uint32_t dst_stride = 1;
  uint32_t rows = 1;
};
inline ChipCmd cmd_vpu(const VpuCmdArgs& a) {
  const uint32_t flags = (a.op & 0xFu) | (a.dst_bf16 ? 0x10u : 0u) | ((a.src_bf16 & 7u) << 5) |
                         (static_cast<uint32_t>(a.x_mem) << 8) |
                         (static_cast<uint32_t>(a.y_mem) << 9) | (a.y_bcast ? 0x400u : 0u) |
                         (static_cast<uint32_t>(a.dst_mem) << 11);
  return ChipCmd::make(ChipOp::kVpu, flags, a.x_row, a.rows, a.y_row,
                       (a.dst_row & 0xFFFFu) | ((a.dst_stride & 0xFFFFu) << 16), 0);
}

// ICI counters a chip has for ICI_WAIT (tpu_chip: IciNumCnt), rows per remote-write packet.
constexpr unsigned kIciCounters = 64;
constexpr unsigned kIciPacketRows = 32;

// ICI_SEND: rows memory rows from src_row of src_mem -> chip dst {x, y, z} at dst_row of dst_mem
// (remote writes); each packet adds its rows to counter `counter` there. tie_dir: the way a tie
// goes (a ring distance of exactly k/2, every hop of a 2-ring), in every dimension of the route:
// +1 plus, -1 minus (flags[2] hint valid, flags[3] minus); 0 no hint, the router's parity rule.
inline ChipCmd cmd_ici_send(Mem src_mem, uint32_t src_row, uint32_t rows,
                            const std::array<int, 3>& dst, Mem dst_mem, uint32_t dst_row,
                            uint32_t counter, int tie_dir = 0) {
  const uint32_t coord = (static_cast<uint32_t>(dst[0]) & 7u) |
                         ((static_cast<uint32_t>(dst[1]) & 7u) << 3) |
                         ((static_cast<uint32_t>(dst[2]) & 7u) << 6);
  const uint32_t hint = tie_dir > 0 ? 0x4u : tie_dir < 0 ? 0xCu : 0u;
  return ChipCmd::make(ChipOp::kIciSend,
                       static_cast<uint32_t>(src_mem) | (static_cast<uint32_t>(dst_mem) << 1) |
                           hint,
                       src_row, rows, dst_row, coord | ((counter & 0xFFu) << 16), 0);
}
// ICI_WAIT: holds issue until counter >= value, then takes value off it.
inline ChipCmd cmd_ici_wait(uint32_t counter, uint32_t value) {
  return ChipCmd::make(ChipOp::kIciWait, 0, counter, 0, 0, value, 0);
}

}  // namespace tpu
