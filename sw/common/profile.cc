#include "profile.h"

#include <algorithm>

#include "tpu/perf.h"

namespace tpu {

Breakdown chip_breakdown(const ChipCounters& d) {
  Breakdown b;
  const double n = static_cast<double>(d[kStatClsCompute] + d[kStatClsComm] + d[kStatClsMemory] +
                                       d[kStatClsIdle]);
  if (n <= 0) return b;
  b.compute = static_cast<double>(d[kStatClsCompute]) / n;
  b.communication = static_cast<double>(d[kStatClsComm]) / n;
  b.memory = static_cast<double>(d[kStatClsMemory]) / n;
  b.idle = static_cast<double>(d[kStatClsIdle]) / n;
  return b;
}

PodProfile make_profile(const std::vector<ChipCounters>& deltas, uint64_t pod_cycles,
                        uint64_t useful_macs, uint64_t peak_macs_per_cycle) {
  PodProfile p;
  p.chips = static_cast<int>(deltas.size());
  p.pod_cycles = pod_cycles;
  p.useful_macs = useful_macs;
  p.peak_macs_per_cycle = peak_macs_per_cycle;
  double denom = 0, comp = 0, comm = 0, mem = 0;
  for (std::size_t c = 0; c < deltas.size(); ++c) {
    const ChipCounters& d = deltas[c];
    ChipProfile cp;
    cp.chip = static_cast<int>(c);
    cp.cycles = d[kStatCycles];
    cp.breakdown = chip_breakdown(d);
    cp.delta = d;
    p.per_chip.push_back(cp);
    p.hardware_macs += d[kStatMxuMacs];
    denom += static_cast<double>(std::max(pod_cycles, cp.cycles));
    comp += static_cast<double>(d[kStatClsCompute]);
    comm += static_cast<double>(d[kStatClsComm]);
    mem += static_cast<double>(d[kStatClsMemory]);
  }
  if (denom > 0) {
    p.breakdown.compute = comp / denom;
    p.breakdown.communication = comm / denom;
    p.breakdown.memory = mem / denom;
    p.breakdown.idle =
        std::max(0.0, 1.0 - p.breakdown.compute - p.breakdown.communication - p.breakdown.memory);
  }
  if (pod_cycles > 0 && peak_macs_per_cycle > 0 && p.chips > 0) {
    p.mfu = mfu(useful_macs, p.chips, peak_macs_per_cycle, pod_cycles);
    p.hardware_mac_utilization =
        static_cast<double>(p.hardware_macs) /
        (static_cast<double>(p.chips) * static_cast<double>(peak_macs_per_cycle) *
         static_cast<double>(pod_cycles));
  }
  return p;
}

void add_profile(ReportGroup& rep, const PodProfile& p) {
  rep.set_mfu(p.mfu);
  ReportGroup& g = rep.group("breakdown");
  g.metric("compute", p.breakdown.compute, "fraction",
           "chip cycles with a LOADW, MATMUL or VPU command in flight", true);
  g.metric("communication", p.breakdown.communication, "fraction",
           "not compute: ICI send or receive busy, or blocked in ICI_WAIT", true);
  g.metric("memory", p.breakdown.memory, "fraction",
           "neither: a DMA in flight or host-port HBM traffic", true);
  g.metric("idle", p.breakdown.idle, "fraction", "none of these (chips done early too)", true);
  g.metric("pod_cycles", p.pod_cycles, "cycles", "the denominator: the run's cycles");
  g.metric("useful_macs", p.useful_macs, "", "MACs the workload needs (no padding)");
  g.metric("hardware_macs", p.hardware_macs, "", "MACs the arrays did (padding included)");
  g.metric("hardware_mac_utilization", p.hardware_mac_utilization, "fraction",
           "hardware MACs / (chips x peak x cycles)");
  Json chips = Json::array();
  for (const ChipProfile& c : p.per_chip) {
    Json counters = Json::object();
    for (unsigned s = 0; s < kNumChipStats; ++s) counters[chip_stat_name(s)] = c.delta[s];
    chips.push_back(Json::object({{"chip", c.chip},
                                  {"cycles", c.cycles},
                                  {"compute", c.breakdown.compute},
                                  {"communication", c.breakdown.communication},
                                  {"memory", c.breakdown.memory},
                                  {"idle", c.breakdown.idle},
                                  {"counters", counters}}));
  }
  g.field("chips", chips);
  // ECC (docs/hbm.md): every report's HBM section, from the chips' counters.
  uint64_t ce = 0, ue = 0;
  for (const ChipProfile& c : p.per_chip) {
    ce += c.delta[kStatEccCorrected];
    ue += c.delta[kStatEccUncorr];
  }
  ReportGroup& h = rep.group("hbm");
  h.metric("ecc_corrected", ce, "words", "HBM words read with a single-bit error, corrected");
  h.metric("ecc_uncorrectable", ue, "words", "HBM words read with an uncorrectable error");
}

PodProfile report_profile(ReportGroup& rep, const std::vector<ChipCounters>& deltas,
                          uint64_t pod_cycles, uint64_t useful_macs, uint64_t peak_macs_per_cycle) {
  const PodProfile p = make_profile(deltas, pod_cycles, useful_macs, peak_macs_per_cycle);
  add_profile(rep, p);
  return p;
}

}  // namespace tpu
