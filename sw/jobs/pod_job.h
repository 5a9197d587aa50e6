// PodJob: `tpusim pod`, the pod job: a bf16 matmul on every chip at once (random operands copied
// in through every host port, one SPMD program), then an all-reduce of the f32 results where
// the matmuls left them in HBM; both checked bit for bit against the golden (the all-reduce also
// against f64), the bounds from model/perf, and the report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chip_config.h"
#include "chip_driver.h"
#include "engine.h"
#include "pod_driver.h"
#include "pod_report.h"
#include "report.h"
#include "scheduler.h"

namespace tpu {

struct PodJobOptions {
  std::size_t m = 64, k = 64, n = 64;  // every chip's matmul, M x K x N
  uint64_t seed = 1;                   // chip c's operands: normal(0, 1) from seed * 1000 + c
  std::string algorithm;               // the all-reduce's; "": torus, or biring on one dimension
};

class PodJob {
 public:
  PodJob(PodConfig cfg, const PodJobOptions& o);
  // On the engine: operands in, the matmuls, the all-reduce, the results read back by the
  // backdoor; then the golden checks. progress: the pod's cycles since the run began (never going
  // back), now and then.
  void run(const EngineOptions& eng, const std::function<void(uint64_t)>& progress = nullptr);
  bool pass() const { return mm_bad_ == 0 && ar_bad_ == 0 && f64_.outside == 0; }
  Report report(const EngineOptions& eng) const;
  // The job's programs on any machine (run() gives it the engine's; the pins test a fake host
  // port): operands in, the matmuls, the all-reduce, the results read back by the backdoor.
  // run() sizes the per-chip results before it; run_on does so itself.
  void run_on(HostPort& h, const std::function<void(uint64_t)>& progress = nullptr);

 private:
  void run_all_reduce(Workload& wl, int in, int out);

  PodConfig cfg_;
  PodJobOptions o_;
  CollectiveSpec spec_;
  std::vector<MatmulRun> mm_;
  std::vector<std::vector<uint32_t>> want_c_, c_bits_, c_whole_, ar_out_;
  PodProgramRun mm_run_;
  PodCollectiveRun ar_;
  MachineInfo mi_;
  uint64_t in_cycles_ = 0, backdoor_bytes_ = 0;
  std::size_t mm_bad_ = 0, ar_bad_ = 0;
  F64Check f64_;
  double wall_ = 0;
};

}  // namespace tpu
