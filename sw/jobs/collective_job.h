// CollectiveJob: one collective (all-reduce, reduce-scatter, all-gather, all-to-all, broadcast)
// on a pod: the config and options checked, random inputs made once the plan fits HBM, the
// buffers in through the host ports (or the backdoor), the programs run, the outputs checked
// bit for bit against the golden of the driver's rounds (and a sum against f64), the bound from
// model/perf, and tpusim's report. `tpusim allreduce`, `tpusim collective` and bench_pod run it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chip_config.h"
#include "engine.h"
#include "pod_driver.h"
#include "pod_report.h"
#include "report.h"
#include "tpu/perf.h"

namespace tpu {

struct CollectiveJobOptions {
  Collective kind = Collective::kAllReduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t bytes = 65536;  // per chip (all_gather: of the output), a multiple of the element size
  std::string algorithm;   // "": torus (biring on one dimension) for all_reduce, else ring
  // The groups: the axis `axis` of the named mesh `mesh` (e.g. "data=2,model=2"), or, without a
  // mesh, the torus dimensions `group_dims` (empty: the whole pod).
  std::string mesh, axis;
  std::vector<int> group_dims;
  int root = 0;             // broadcast: rank within its group
  unsigned block_rows = 0;  // rows per pipelined block; 0: automatic
  uint64_t rounds = 0;      // rounds through VMEM; 0: as few as fit
  bool backdoor = false;    // inputs in and outputs out through the backdoor (no time)
  uint64_t seed = 1;        // random inputs: normal(0, input_stddev), chip after chip
  float input_stddev = 4.0f;
  bool keep_link_stats = false;  // record the link layer's counters after the run (link_stats)
  // The inputs given instead of random ones (the Python module): per chip, plan.input_len(c)
  // elements, f32 bits or bf16 bits in the low 16 (std::invalid_argument otherwise).
  std::vector<std::vector<uint32_t>> inputs;
};

class CollectiveJob {
 public:
  // Checks the options against the pod (--bytes, --mesh and --axis, the algorithm's default):
  // std::invalid_argument naming the flag and the rule.
  CollectiveJob(PodConfig cfg, const CollectiveJobOptions& o);

  // On the engine: plans (the plan's checks and HBM before any input), makes the inputs, runs
  // the collective with its copies, then checks the outputs. progress: the pod's cycles since the run
  // began (one count over the copies and the collective, never going back), now and then.
  void run(const EngineOptions& eng, const std::function<void(uint64_t)>& progress = nullptr);

  bool pass() const { return mismatches_ == 0 && f64_.outside == 0; }
  // tpusim's report of the run (eng: the engine it ran on).
  Report report(const EngineOptions& eng) const;

  const PodConfig& config() const { return cfg_; }
  const CollectiveSpec& spec() const { return spec_; }
  const MachineInfo& info() const { return mi_; }
  const PodCollectiveRun& result() const { return r_; }
  // The bound of the run (model/perf.h): every link the topology gives a chip of the group.
  CollectiveBound bound() const;
  int group_chips() const { return gtopo_.num_chips(); }
  std::size_t outputs() const { return outputs_; }
  std::size_t mismatches() const { return mismatches_; }
  // Per chip, the inputs of the run (random or given) and its outputs (f32 bits, or bf16 bits in
  // the low 16).
  const std::vector<std::vector<uint32_t>>& inputs() const { return in_; }
  const std::vector<std::vector<uint32_t>>& outputs_of_chips() const { return r_.out; }
  const std::vector<LinkStat>& link_stats() const { return links_; }
  double run_seconds() const { return run_wall_; }  // the collective with its copies alone

 private:
  void check_given_inputs(const CollectivePlan& plan) const;

  PodConfig cfg_;
  CollectiveJobOptions o_;
  CollectiveSpec spec_;
  std::string axis_ = "all";
  Topology gtopo_;
  MachineInfo mi_;
  std::vector<std::vector<uint32_t>> in_;
  PodCollectiveRun r_;
  std::vector<LinkStat> links_;
  uint64_t backdoor_bytes_ = 0;
  std::size_t outputs_ = 0, mismatches_ = 0;
  F64Check f64_;
  double wall_ = 0, run_wall_ = 0;
};

// The bound of a collective of S bytes per chip within groups of `dims` (model/perf.h): every
// link the topology gives a chip of the group, and the HBM traffic at the chip's peak.
CollectiveBound collective_bound_on(const MachineInfo& mi, Collective k,
                                    const std::vector<int>& dims, double S);

}  // namespace tpu
