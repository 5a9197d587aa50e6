// The parts of a report every pod job fills alike (sw/common/report.h): the tool, config, engine
// and pod (group "pod", and "mpi" across ranks), the links' bytes and faults (group "ici"), the
// per-chip counter table, and the f64 check of a sum reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chip_config.h"
#include "engine.h"
#include "json.h"
#include "pod_driver.h"
#include "report.h"

namespace tpu {

// The chips of chip c's group over the torus dimensions `dims` (empty: the pod).
std::vector<int> group_of(const Topology& t, const std::vector<int>& dims, int c);
// Per-link bytes and the busiest link (group "ici").
ReportGroup& add_links(Report& rep, const std::vector<LinkStat>& flits, uint64_t row_bytes,
                       const Topology& topo);
// tool, config, engine and the pod's shape and links (group "pod").
void add_pod(Report& rep, const PodConfig& cfg, const MachineInfo& mi, const EngineOptions& eng);
// Per chip: cycles and the unit counters of a program run.
Json chip_table(const PodProgramRun& pr);

// The independent check of a sum reduction: every output within (p - 1) u sum |x| of the f64
// sum of the group's inputs (u = 2^-24; bf16 outputs: plus half a bf16 ulp of the result).
struct F64Check {
  bool applies = false;  // a sum all-reduce or reduce-scatter
  std::size_t outside = 0;
  double worst = 0;  // largest |error| / bound
};
F64Check f64_check(const CollectivePlan& plan, const std::vector<int>& dims,
                   const std::vector<std::vector<uint32_t>>& in,
                   const std::vector<std::vector<uint32_t>>& out);

}  // namespace tpu
