// Where the cycles went, from the chips' RTL counters (docs/profiling.md): per chip and for the
// pod the breakdown into compute, exposed communication, exposed memory and idle (the chips'
// Cls* counters, which put every cycle in exactly one class), and MFU. The one function a tool
// calls is report_profile(): it fills `mfu` and `breakdown` into a Report.
#pragma once

#include <cstdint>
#include <vector>

#include "chip_contract.h"
#include "report.h"

namespace tpu {

// Fractions of a cycle count; they add up to 1 (all 0 for no cycles).
struct Breakdown {
  double compute = 0;        // LOADW, MATMUL or VPU in flight
  double communication = 0;  // not compute; ICI send/receive busy or ICI_WAIT blocked
  double memory = 0;         // neither; a DMA in flight or host-port HBM traffic
  double idle = 0;           // none of these (a chip that finished early, too)
};

struct ChipProfile {
  int chip = 0;
  uint64_t cycles = 0;  // the chip's counted cycles (kStatCycles of its delta)
  Breakdown breakdown;  // over its own cycles
  ChipCounters delta;   // the raw counters over the run
};

struct PodProfile {
  int chips = 0;
  uint64_t pod_cycles = 0;              // the run's wall-clock cycles (the denominator)
  uint64_t useful_macs = 0;             // what the workload needs (padding not counted)
  uint64_t hardware_macs = 0;           // what the arrays did: sum of kStatMxuMacs (padding too)
  uint64_t peak_macs_per_cycle = 0;     // one chip's R x C
  double mfu = 0;                       // useful / (chips x peak x pod cycles), tpu::mfu
  double hardware_mac_utilization = 0;  // hardware_macs / (chips x peak x pod cycles)
  Breakdown breakdown;  // chip-cycle weighted: sum over chips / (chips x pod cycles)
  std::vector<ChipProfile> per_chip;
};

// The breakdown of one chip's counters (deltas over a run).
Breakdown chip_breakdown(const ChipCounters& delta);

// The profile of a run: deltas[c] are chip c's counters over the run, pod_cycles its length.
// A chip whose counters cover fewer cycles than pod_cycles is idle for the rest; one that
// covers more weighs its own cycles (the denominator is sum over chips of max(pod, its own)).
PodProfile make_profile(const std::vector<ChipCounters>& deltas, uint64_t pod_cycles,
                        uint64_t useful_macs, uint64_t peak_macs_per_cycle);

// Writes p into rep: metric `mfu`, group `breakdown` {compute, communication, memory, idle,
// useful_macs, hardware_macs, hardware_mac_utilization, pod_cycles, chips: [{chip, cycles,
// compute, communication, memory, idle, counters: {name: value, ...}}]}, and in group `hbm`
// the ECC counters of every chip together: ecc_corrected, ecc_uncorrectable.
void add_profile(ReportGroup& rep, const PodProfile& p);

// make_profile + add_profile: the one call for a tool (tpusim matmul, collective, pod, shard).
PodProfile report_profile(ReportGroup& rep, const std::vector<ChipCounters>& deltas,
                          uint64_t pod_cycles, uint64_t useful_macs, uint64_t peak_macs_per_cycle);

}  // namespace tpu
