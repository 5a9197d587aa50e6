// PodDriver: runs collectives on a pod (tb/pod) by issuing a CollectivePlan (model/collective.h)
// on the chips: ICI remote writes for the transfers, counters for the arrivals, VPU ops for the
// reductions (docs/pod.md has the program each chip runs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pod.h"
#include "tpu/collective.h"

namespace tpu {

struct PodCollectiveOptions {
  // Rows per pipelined block of a transfer (each transfer is cut into equal blocks of at most
  // this many rows). 0: automatic, the plan's smallest transfer clamped to 16..64 rows, so
  // every phase of the plan uses blocks of one size and the pipeline runs across the phases.
  unsigned block_rows = 0;
  uint64_t hbm_base = 0;     // HBM bytes from here (64-byte aligned) hold the in/out buffers
};

struct PodCollectiveRun {
  CollectivePlan plan;
  std::vector<std::vector<uint32_t>> out;  // per chip: f32 bits, or bf16 bits in the low 16
  uint64_t load_cycles = 0;        // HBM -> VMEM (and bf16 -> f32) of the working buffers
  uint64_t collective_cycles = 0;  // the plan's steps: first command to every chip idle
  uint64_t store_cycles = 0;       // results -> HBM
  std::size_t commands = 0;        // commands of the collective phase, all chips
  std::size_t vmem_rows_used = 0;  // the most VMEM rows a chip needed
  std::vector<LinkStat> link_flits;  // flits per directed link in the collective phase
  std::vector<ChipCounters> chip_delta;  // per chip: its counters over the collective phase
  uint64_t row_bytes = 0;          // bytes one flit carries (a memory row: lanes x 4)
  double link_bytes_per_cycle = 0; // what one link carries (row bytes / cycles per flit)
};

class PodDriver {
 public:
  explicit PodDriver(PodHost& host) : host_(host) {}
  PodHost& host() { return host_; }

  // Runs `spec` on the pod. inputs[chip] holds plan.input_len(chip) elements: f32 bits, or
  // bf16 bits (low 16) when spec.dtype is bf16. Inputs are copied into each chip's HBM, moved
  // into VMEM, the plan runs on the chips, and the outputs come back through HBM. Throws
  // std::invalid_argument for a spec the pod cannot run (naming the rule: e.g. a buffer that
  // does not fit in VMEM), PodError for a chip error or a hang.
  PodCollectiveRun run(const CollectiveSpec& spec,
                       const std::vector<std::vector<uint32_t>>& inputs,
                       const PodCollectiveOptions& opt = {});

 private:
  PodHost& host_;
};

}  // namespace tpu
