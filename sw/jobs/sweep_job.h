// Sweeps in the nccl-tests form (`tpusim sweep`): one collective over a range of sizes
// (CollectiveSweep) or one matmul over a list of shapes (MatmulSweep), each row the real job
// (CollectiveJob, MatmulJob: golden-checked) run alone, then a table (size, count, type, cycles,
// time at the configured clock, algbw, busbw, fraction of the bound, golden verdict) and a report
// whose "rows" hold every row for `python3 -m tpusim.plot`. Also the size-range and shape-list
// syntax the sweeps take (parse_size_range, parse_shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chip_config.h"
#include "collective_job.h"
#include "engine.h"
#include "json.h"
#include "matmul_job.h"
#include "progress.h"
#include "report.h"

namespace tpu {

// A range of sizes "START:STOP:xFACTOR" (START, START*F, ... up to STOP), "START:STOP:+STEP"
// (START, START+STEP, ... up to STOP) or one size "N"; each number with an optional binary unit
// K, M or G (1K = 1024). Rules: every size >= 1, STOP >= START, FACTOR >= 2, STEP >= 1, at most
// kMaxSweepRows sizes. A bad text is std::invalid_argument naming `flag` and the rule.
constexpr std::size_t kMaxSweepRows = 256;
std::vector<uint64_t> parse_size_range(const std::string& text, const std::string& flag);

// Matmul shapes "MxKxN,MxKxN,...": std::invalid_argument naming `flag` and the rule.
struct MatmulShape {
  std::size_t m = 0, k = 0, n = 0;
};
std::vector<MatmulShape> parse_shapes(const std::string& text, const std::string& flag);

// Runs f in a forked child process and returns its JSON (SystemC elaborates one machine per
// process: a sweep on it runs each row in a child). An exception in the child is thrown again
// here: HangError, PodError, or std::invalid_argument for any other (exit 2), with its message.
Json in_child_process(const std::function<Json()>& f);

// Reports' progress: rows done of all (unit "sizes" or "shapes"), the row now running as the
// phase, and the simulated cycles of the rows done so far.
using SweepProgress = RunProgressFn;

// One collective (`base`: everything but the size) at each of `bytes`, on the pod of `cfg`.
class CollectiveSweep {
 public:
  // Checks every size against the options (element size, the mesh) before any run:
  // std::invalid_argument naming --bytes and the rule. `command`: "allreduce" or "collective".
  CollectiveSweep(PodConfig cfg, const CollectiveJobOptions& base, std::vector<uint64_t> bytes,
                  std::string command);

  // Runs the rows one after the other on fresh pods of the engine `eng`. With eng.check each
  // size is planned (its HBM checked), then CheckStop is thrown before any cycle.
  void run(const EngineOptions& eng, const SweepProgress& progress = nullptr);

  bool pass() const;
  // The table in the nccl-tests form, header lines starting with '#'.
  std::string table() const;
  // The report: the pod, the sweep's settings, "rows" (one object per size) and the verdict.
  Report report(const EngineOptions& eng) const;
  const Json& rows() const { return rows_; }

 private:
  // One size: {"row": the table's row, and the pod's link_latency, link_bytes_per_cycle and
  // host_bytes_per_cycle}.
  Json run_row(const EngineOptions& eng, uint64_t bytes) const;

  PodConfig cfg_;
  CollectiveJobOptions base_;
  std::vector<uint64_t> bytes_;
  std::string command_;
  std::string algorithm_;  // the algorithm the jobs chose (the same for every size)
  MachineInfo mi_;
  int group_chips_ = 0;
  Json rows_ = Json::array();
};

// One matmul of random operands at each of `shapes` on the chip of `cfg`.
class MatmulSweep {
 public:
  // `base`: variant, seed, dist, watchdog, faults (its m, k and n are the shapes'). Each shape
  // is checked (capacity) before any run: std::invalid_argument naming the shape and the rule.
  // With base.check every shape's plan is made and CheckStop thrown before any cycle.
  MatmulSweep(ChipConfig cfg, std::string config_path, const MatmulJobOptions& base,
              std::vector<MatmulShape> shapes);

  void run(const SweepProgress& progress = nullptr);

  bool pass() const;
  std::string table() const;
  // The report: the chip, its peaks (compute, HBM), "rows" (one object per shape), the verdict.
  Report report() const;
  const Json& rows() const { return rows_; }

 private:
  ChipConfig cfg_;
  std::string config_path_;
  MatmulJobOptions base_;
  std::vector<MatmulShape> shapes_;
  std::string variant_;
  uint64_t peak_macs_ = 0;     // MACs per cycle of the array
  double peak_hbm_bytes_ = 0;  // HBM bytes per cycle at peak
  Json rows_ = Json::array();
};

}  // namespace tpu
