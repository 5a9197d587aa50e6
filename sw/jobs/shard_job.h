// ShardJob: `tpusim shard`, one matmul Y = X @ W sharded over a named mesh of the pod
// (docs/sharding.md): the mesh and partition specs planned once, the operands from .npy files
// or random (made once the plan fits HBM), loaded through the host ports or the backdoor, the
// sharded program run with its timeline (each phase's cycles), Y read back and checked bit for
// bit against the golden (replicas equal, an f64 bound), and the report. bench_shard runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chip_config.h"
#include "engine.h"
#include "report.h"
#include "shard_plan.h"
#include "sharded_matmul.h"

namespace tpu {

struct ShardJobOptions {
  std::string mesh;  // "data=2,model=2"; "": the config's mesh: section
  std::string x_spec, w_spec,
      y_spec;  // partition specs; "": first-axis,- / -,second-axis / the product's
  std::size_t m = 512, k = 512, n = 512;  // random operands' shape
  uint64_t seed = 1;                      // random operands: X then W from one generator
  std::string a_file, w_file;             // X and W from .npy files instead (both or neither)
  std::vector<bf16_t> x, w;  // or given (m x k, k x n; both or neither: the Python module)
  std::string bias_file;     // a bias row (N float32 values), or ""
  bool relu = false;
  bool backdoor = false;  // operands in and Y out through the backdoor (no simulated time)
  // tpusim's sections of the report: the pod (add_pod), the per-chip table and the links.
  bool pod_sections = true;
};

class ShardJob {
 public:
  // The mesh checked, the operand files read, the plan made (std::invalid_argument naming the
  // flag and the rule); `config`: the config's path, for the messages.
  ShardJob(PodConfig cfg, const ShardJobOptions& o, const std::string& config = "");

  // "sharded matmul MxKxN on T (P chips V), mesh ...: X ..., W ..., Y ...".
  std::string title() const;
  // On the engine: the operands made and loaded, the program run (its timeline always recorded;
  // eng.trace writes it), Y read and checked; rep gets the trace path, the pod's sections (if
  // asked) and fill_shard_report's. progress: the pod's cycles since the run began (never going back), now
  // and then.
  void run(const EngineOptions& eng, Report& rep,
           const std::function<void(uint64_t)>& progress = nullptr);

  std::size_t m() const { return M_; }
  std::size_t k() const { return K_; }
  std::size_t n() const { return N_; }
  bool pass() const { return chk_.pass(); }
  const ShardCheck& check() const { return chk_; }
  uint64_t pod_cycles() const { return pod_cycles_; }  // the sharded program's
  double run_seconds() const { return run_wall_; }     // host time of the program alone
  // The gathered Y (float32, M x N), and written to a file.
  std::vector<float> y() const;
  void write_y(const std::string& path) const;

 private:
  PodConfig cfg_;
  ShardJobOptions o_;
  Mesh mesh_;
  std::size_t M_, K_, N_;
  std::vector<bf16_t> x_, w_;
  ShardedMatmulOptions so_;
  ShardPlan plan_;
  ShardCheck chk_;
  uint64_t pod_cycles_ = 0;
  double run_wall_ = 0;
};

}  // namespace tpu
