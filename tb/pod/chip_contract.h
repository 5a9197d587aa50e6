// The chip's hardware contract as C++ (docs/isa.md): the encoders the harness and the drivers
// build commands with. The contract itself (ChipOp, ChipCmd and one struct per opcode, ChipErr,
// ChipStat, the chip variants) is generated from configs/tpu_contract.yaml into tpu_contract.h,
// as the RTL's tpu_contract_pkg.sv is; the encoders here only fill the per-opcode structs.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tpu_contract.h"

namespace tpu {

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

inline ChipCmd cmd_nop() { return CmdNop{}.encode(); }
inline ChipCmd cmd_fence() { return CmdFence{}.encode(); }
inline ChipCmd cmd_halt() { return CmdHalt{}.encode(); }
// rows HBM segments of seg_bytes at hbm_addr + i * stride <-> memory rows from mem_row. tail
// (HBM -> VMEM only): when not 0, the last memory row of each segment keeps its first tail
// lanes and the others are written as -0.
// hi: to HBM, bf16 only: each lane's bits [31:16] (the upper bf16 of a VpuPackBf16 pair).
inline ChipCmd cmd_dma(DmaDir dir, bool bf16, uint32_t mem_row, uint32_t rows, uint32_t seg_bytes,
                       uint32_t hbm_addr, uint32_t stride, uint32_t tail = 0, bool hi = false) {
  CmdDma c;
  c.dir = static_cast<uint32_t>(dir);
  c.bf16 = bf16 ? 1u : 0u;
  c.hi = hi ? 1u : 0u;
  c.tail = tail;
  c.mem_row = mem_row;
  c.rows = rows;
  c.seg_bytes = seg_bytes;
  c.hbm_addr = hbm_addr;
  c.stride = stride;
  return c.encode();
}
// Indexed DMA (docs/isa.md, DMA_IDX): for j = 0 .. ids-1, table row list[j] (seg_bytes bytes at
// table + list[j] * seg_bytes; list[j] is the int32 in lane j % Lanes of VMEM row idx_row +
// j / Lanes) <-> the seg_bytes / piece memory rows from mem_row + j * (seg_bytes / piece).
// Gather: HBM -> VMEM; scatter: VMEM -> HBM. Every id must be below table_rows (ErrIdxRange).
inline ChipCmd cmd_dma_idx(bool scatter, bool bf16, uint32_t mem_row, uint32_t ids,
                           uint32_t seg_bytes, uint32_t table, uint32_t idx_row,
                           uint32_t table_rows) {
  CmdDmaIdx c;
  c.scatter = scatter ? 1u : 0u;
  c.bf16 = bf16 ? 1u : 0u;
  c.mem_row = mem_row;
  c.rows = ids;
  c.seg_bytes = seg_bytes;
  c.hbm_addr = table;
  c.idx_row = idx_row;
  c.table_rows = table_rows;
  return c.encode();
}
// Weight rows from VMEM rows row, row + stride, ... (stride 0 means 1); transpose: the tile
// goes in transposed (lane j of tile row i is weight row j, column i).
inline ChipCmd cmd_loadw(uint32_t vmem_row, uint32_t stride = 1, bool transpose = false) {
  // The word's [95:64] carries the whole 32-bit stride argument, as it always has; the chip reads
  // the low 16 bits (CmdLoadW::stride) and ignores the rest.
  ChipCmd c = CmdLoadW{transpose ? 1u : 0u, vmem_row, stride}.encode();
  c.w[2] = stride;
  return c;
}
// rows activation rows from VMEM a_row + r * a_stride -> AMEM c_row + r (+= when acc).
inline ChipCmd cmd_matmul(uint32_t a_row, uint32_t rows, uint32_t c_row, bool acc,
                          uint32_t a_stride = 1) {
  // As for LOADW, the word carries the whole 32-bit stride argument; the chip reads 16 bits.
  ChipCmd c = CmdMatmul{acc ? 1u : 0u, a_row, rows, c_row, a_stride}.encode();
  c.w[2] = a_stride;
  return c;
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
  // >= 0: the x rows arrive over ICI; each is read once this ICI counter is >= 1, taking 1 off
  // it (x_wait: the reduction runs as its rows land).
  int x_counter = -1;
  // >= 0: each destination row adds 1 to this ICI counter as it is written (sig), for a send
  // with wait_rows that forwards the rows as they come.
  int sig_counter = -1;
};
// An elementwise op over `rows` rows of one memory: dst[i] = op(x[i], y[i]).
inline VpuCmdArgs vpu_rows(VpuOp op, Mem mem, uint32_t x_row, uint32_t y_row, uint32_t dst_row,
                           uint32_t rows) {
  VpuCmdArgs a;
  a.op = static_cast<unsigned>(op);
  a.x_mem = a.y_mem = a.dst_mem = mem;
  a.x_row = x_row;
  a.y_row = y_row;
  a.dst_row = dst_row;
  a.rows = rows;
  return a;
}
inline ChipCmd cmd_vpu(const VpuCmdArgs& a) {
  CmdVpu c;
  c.vop = a.op;
  c.dst_bf16 = a.dst_bf16 ? 1u : 0u;
  c.src_bf16 = a.src_bf16;
  c.x_mem = static_cast<uint32_t>(a.x_mem);
  c.y_mem = static_cast<uint32_t>(a.y_mem);
  c.y_bcast = a.y_bcast ? 1u : 0u;
  c.dst_mem = static_cast<uint32_t>(a.dst_mem);
  c.x_row = a.x_row;
  c.rows = a.rows;
  c.y_row = a.y_row;
  c.dst_row = a.dst_row;
  c.dst_stride = a.dst_stride;
  if (a.x_counter >= 0) {
    c.x_wait = 1;
    c.x_counter = static_cast<uint32_t>(a.x_counter);
  }
  if (a.sig_counter >= 0) {
    c.sig = 1;
    c.sig_counter = static_cast<uint32_t>(a.sig_counter);
  }
  return c.encode();
}

// VROW (docs/isa.md "VROW"): `rows` logical rows of `beats` memory rows of one memory, beat j of
// row r at x_row + r * row_stride + j * beat_stride (0 means 1). red_sum / red_max: one value
// per row, packed L to a row from dst_row (lane r mod L of row dst_row + r / L); any other op of
// tpu_vpu: y per row (lane r mod L of row y_row + r / L, broadcast), the results at the x rows'
// offsets from dst_row.
inline ChipCmd cmd_vrow(VpuOp op, Mem mem, uint32_t x_row, uint32_t rows, uint32_t beats,
                        uint32_t beat_stride, uint32_t row_stride, uint32_t y_row,
                        uint32_t dst_row) {
  CmdVrow c;
  c.vop = static_cast<uint32_t>(op);
  c.x_mem = c.y_mem = c.dst_mem = static_cast<uint32_t>(mem);
  c.x_row = x_row;
  c.rows = rows;
  c.beats = beats;
  c.beat_stride = beat_stride;
  c.row_stride = row_stride;
  c.y_row = y_row;
  c.dst_row = dst_row;
  return c.encode();
}

// kIciCounters (ICI_WAIT counters) and kIciPacketRows (rows per remote-write packet: a send of n
// rows is ceil(n / kIciPacketRows) packets, each a head flit and its rows; tests/chip/test_chip.cc
// counts them) come from the contract (configs/tpu_contract.yaml, constants).

// ICI_SEND: rows memory rows from src_row of src_mem -> chip dst {x, y, z} at dst_row of dst_mem
// (remote writes); each packet adds its rows to counter `counter` there. tie_dir: the way a tie
// goes (a ring distance of exactly k/2, every hop of a 2-ring), in every dimension of the route:
// +1 plus, -1 minus (flags[2] hint valid, flags[3] minus); 0 no hint, the router's parity rule.
// wait_counter >= 0 (wait_rows): each row goes only once this chip's counter wait_counter is
// >= 1, taking 1 off it: rows that still arrive, or that a VPU command with sig still writes
// (wait_local: then the send holds them as a read range only).
inline ChipCmd cmd_ici_send(Mem src_mem, uint32_t src_row, uint32_t rows,
                            const std::array<int, 3>& dst, Mem dst_mem, uint32_t dst_row,
                            uint32_t counter, int tie_dir = 0, int wait_counter = -1,
                            bool wait_local = false) {
  CmdIciSend c;
  c.src_mem = static_cast<uint32_t>(src_mem);
  c.dst_mem = static_cast<uint32_t>(dst_mem);
  c.tie = tie_dir > 0 ? 1u : tie_dir < 0 ? 3u : 0u;  // {minus, valid}
  c.src_row = src_row;
  c.rows = rows;
  c.dst_row = dst_row;
  c.dst_x = static_cast<uint32_t>(dst[0]);
  c.dst_y = static_cast<uint32_t>(dst[1]);
  c.dst_z = static_cast<uint32_t>(dst[2]);
  c.counter = counter;
  if (wait_counter >= 0) {
    c.wait_rows = 1;
    c.wait_local = wait_local ? 1u : 0u;
    c.wait_counter = static_cast<uint32_t>(wait_counter);
  }
  return c.encode();
}
// ICI_SEND count_only: a token, one CNT_INC packet that adds 1 to counter `counter` of chip dst
// and writes nothing there. (order_mem, order_row) is read as a one-row range only, so the token
// goes after the commands that write that row.
inline ChipCmd cmd_ici_count(Mem order_mem, uint32_t order_row, const std::array<int, 3>& dst,
                             uint32_t counter) {
  CmdIciSend c = CmdIciSend::decode(cmd_ici_send(order_mem, order_row, 1, dst, Mem::kVmem, 0,
                                                 counter));
  c.count_only = 1;
  return c.encode();
}
// ICI_WAIT: holds issue until counter >= value, then takes value off it.
inline ChipCmd cmd_ici_wait(uint32_t counter, uint32_t value) {
  CmdIciWait c;
  c.counter = counter;
  c.value = value;
  return c.encode();
}

}  // namespace tpu
