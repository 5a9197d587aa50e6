// The value types of the host port (host_port.h) and of what a machine is: a chip variant's
// compile-time shape, the HBM's run-time timing and policy, the timeline's events. Plain structs
// over the generated hardware contract (tpu_contract.h), with no behaviour of the engines behind
// the port, so that a driver can see a machine without seeing how it is simulated.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "tpu_contract.h"

namespace tpu {

// Compile-time shape of a chip variant (rtl/tpu_pkg.sv variant_cfg).
struct ChipShape {
  unsigned rows = 0;       // MXU rows (K extent of a weight tile)
  unsigned cols = 0;       // MXU columns = VPU lanes = lanes of a memory row
  unsigned wbanks = 0;     // MXU weight banks: weight tiles loaded and not yet consumed
  unsigned wrows = 0;      // weight rows a LOADW moves per cycle
  unsigned vmem_rows = 0;  // vector memory rows
  unsigned amem_rows = 0;  // accumulator memory rows
  unsigned hbm_channels = 0;
  uint64_t hbm_bytes = 0;  // HBM capacity
};

// Shape of a variant by name (built or not; the generated contract's table); throws
// std::invalid_argument if unknown.
inline ChipShape chip_shape(const std::string& variant) {
  const ChipVariant* v = find_chip_variant(variant.c_str());
  if (v == nullptr) {
    std::string all;
    for (const auto& k : kChipVariants) all += (all.empty() ? "" : ", ") + std::string(k.name);
    throw std::invalid_argument("unknown chip variant '" + variant + "' (chip variants: " + all +
                                ")");
  }
  ChipShape s;
  s.rows = v->mxu_rows;
  s.cols = v->mxu_cols;
  s.wbanks = v->mxu_wbanks;
  s.wrows = v->mxu_wrows;
  s.vmem_rows = v->vmem_rows;
  s.amem_rows = v->amem_rows;
  s.hbm_channels = v->hbm_channels;
  s.hbm_bytes = uint64_t{v->hbm_channels} * 16 * v->hbm_rows_per_bank * 2048;
  return s;
}

// The fewest VMEM and AMEM rows a chip may expose (chip.vmem_rows, chip.amem_rows).
constexpr unsigned kMinMemRows = 256;

// The shape of a chip that exposes only `vmem_rows` VMEM and `amem_rows` AMEM rows of its
// variant's memories (0: all of them): a scale model's smaller on-chip memory (the chip's range
// checks follow, rtl/tpu_seq.sv; docs/scale_models.md). std::invalid_argument naming the key and
// the rule ("key 'chip.vmem_rows': must be ...", as a configuration error words it) for a count
// above the variant's or below kMinMemRows.
inline ChipShape chip_shape(const std::string& variant, unsigned vmem_rows, unsigned amem_rows) {
  ChipShape s = chip_shape(variant);
  auto cap = [&](unsigned want, unsigned* rows, const char* key, const char* mem) {
    if (want == 0) return;
    const std::string got = " (got " + std::to_string(want) + ")";
    if (want < kMinMemRows)
      throw std::invalid_argument(std::string("key '") + key + "': must be at least " +
                                  std::to_string(kMinMemRows) + " rows" + got);
    if (want > *rows)
      throw std::invalid_argument(std::string("key '") + key + "': must be at most the " + variant +
                                  " chip's " + std::to_string(*rows) + " " + mem + " rows" + got);
    *rows = want;
  };
  cap(vmem_rows, &s.vmem_rows, "chip.vmem_rows", "VMEM");
  cap(amem_rows, &s.amem_rows, "chip.amem_rows", "AMEM");
  return s;
}

// Address maps of tpu_hbm_pkg::hbm_map_e (same values). Fields from bit 6 upwards.
enum class HbmAddrMap : uint8_t {
  kChBgCoBa = 0,    // default: channel, bank group, column, bank, row
  kChBgBaCo = 1,    // channel, bank group, bank, column, row
  kChCoBgBa = 2,    // channel, column, bank group, bank, row
  kCoBgBaRoCh = 3,  // column, bank group, bank, row, channel (one region per channel)
};

// Device timing in tCK (tpu_hbm_pkg::hbm_timing_t). Defaults: HBM2 at tCK = 1 ns.
struct HbmTiming {
  uint32_t cl = 14;      // CL: RD to first read data
  uint32_t cwl = 4;      // CWL: WR to first write data
  uint32_t rcd = 14;     // tRCD: ACT to RD/WR, same bank
  uint32_t rp = 14;      // tRP: PRE to ACT same bank, last PRE to REF
  uint32_t ras = 34;     // tRAS: ACT to PRE, same bank
  uint32_t rc = 48;      // tRC: ACT to ACT, same bank
  uint32_t ccd_s = 2;    // tCCD_S: RD to RD / WR to WR, different bank group
  uint32_t ccd_l = 4;    // tCCD_L: RD to RD / WR to WR, same bank group
  uint32_t rrd_s = 4;    // tRRD_S: ACT to ACT, different bank group
  uint32_t rrd_l = 6;    // tRRD_L: ACT to ACT, same bank group
  uint32_t faw = 30;     // tFAW: window holding at most four ACTs
  uint32_t wr = 16;      // tWR: end of write data to PRE, same bank
  uint32_t wtr_s = 6;    // tWTR_S: end of write data to RD, different bank group
  uint32_t wtr_l = 8;    // tWTR_L: end of write data to RD, same bank group
  uint32_t rtp = 5;      // tRTP: RD to PRE, same bank
  uint32_t rfc = 260;    // tRFC: REF to ACT or REF
  uint32_t refi = 3900;  // tREFI: REF number k is due by cycle k * tREFI
};

// Controller policy (tpu_hbm_pkg::hbm_ctrl_cfg_t).
struct HbmCtrlParams {
  HbmAddrMap addr_map = HbmAddrMap::kChBgCoBa;  // address map
  uint32_t starve_cap = 512;  // cycles after which the oldest request is served first
  uint32_t wr_hi = 12;        // buffered writes that start a write drain
  uint32_t wr_lo = 4;         // buffered writes at which a drain stops
};

struct HbmConfig {
  std::string source = "<defaults>";  // file the values came from
  double tck_ns = 1.0;                // clock period, for reports in ns and GB/s
  uint32_t burst_length = 4;          // beats per access; the data path is built for BL4
  HbmTiming timing;
  HbmCtrlParams ctrl;
};

// Write buffer entries of the built controller (tpu_hbm_chan WqDepth): wr_hi may not exceed it.
constexpr uint32_t kHbmWriteBufferEntries = 16;

// A track of the timeline: one per unit of a chip (ICI sends: one per send context).
enum class TraceUnit : unsigned {
  kSeq = 0,      // NOP, FENCE, HALT: one cycle at issue
  kDma = 1,      // DMA, issue to done (queued for the engine included)
  kLoadW = 2,    // LOADW ("MXU weights")
  kMatmul = 3,   // MATMUL ("MXU")
  kVpu = 4,      // VPU
  kIciSend = 5,  // ICI_SEND, per send context (lane)
  kIciWait = 6,  // ICI_WAIT: the cycles it blocked the queue
  kHost = 7,     // host-port copies: first request to the cycle after the last response
};
constexpr unsigned kNumTraceUnits = 8;
constexpr unsigned kTraceSendLanes = kIciSendContexts;  // ICI send contexts
// "sequencer", "DMA", "MXU weights", "MXU", ...
inline const char* trace_unit_name(TraceUnit u) {
  switch (u) {
    case TraceUnit::kSeq:
      return "sequencer";
    case TraceUnit::kDma:
      return "DMA";
    case TraceUnit::kLoadW:
      return "MXU weights";
    case TraceUnit::kMatmul:
      return "MXU";
    case TraceUnit::kVpu:
      return "VPU";
    case TraceUnit::kIciSend:
      return "ICI send";
    case TraceUnit::kIciWait:
      return "ICI wait";
    case TraceUnit::kHost:
      return "host port";
  }
  return "unknown";
}

// One command (or blocked ICI_WAIT, or host copy) of one chip, in pod cycles.
struct TraceEvent {
  int chip = 0;
  TraceUnit unit = TraceUnit::kSeq;
  unsigned lane = 0;   // kIciSend: the send context (its own track); else 0
  uint64_t issue = 0;  // issued (ICI_WAIT: first blocked cycle; copy: first request)
  uint64_t done = 0;   // completed: its done pulse (ICI_WAIT: issue; copy: last response + 1)
  uint64_t begin = 0;  // drawn as [begin, end): begin = max(issue, the track's previous end),
  uint64_t end = 0;    // end = max(done, the track's previous end); no overlap on a track
  int64_t index = -1;  // command index since reset or clear (-1: a host copy)
  unsigned op = 0;     // ChipOp (the chip's decode of the head)
  ChipCmd cmd;         // the command word the host pushed (zero if pushed before tracing)
  std::string label;   // the label the driver gave (HostPort::trace_label), or ""
  bool write = false;  // host copy: a write into HBM
  uint64_t addr = 0;   // host copy: HBM address
  uint64_t bytes = 0;  // host copy: length
};

// Whether to record, and the cycle window [from, to) of the events kept (any overlap).
struct TraceOptions {
  bool enabled = false;
  uint64_t from = 0;
  uint64_t to = std::numeric_limits<uint64_t>::max();
};

}  // namespace tpu
