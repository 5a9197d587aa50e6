// MatmulJob: `tpusim matmul`, one bf16 matmul C = A x W on one chip: the config (variant and
// faults) checked, the operands random, from .npy files or given, the capacity checked first;
// then on the whole chip (HBM, DMA, sequencer, MXU, the VPU's bias, ReLU and bf16 epilogue) or
// on the bare MXU array; C checked bit for bit against the golden, the roofline from
// model/perf, the report and the output files. bench_chip runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chip_config.h"
#include "chip_driver.h"
#include "chip_trace.h"
#include "progress.h"
#include "report.h"
#include "tpu/bf16.h"

namespace tpu {

struct MatmulJobOptions {
  std::optional<std::string> variant;  // overrides the config's chip.variant
  // Random operands: M x K and K x N from `seed`, exponents narrow (2^-4..2^4) or wide.
  std::size_t m = 64, k = 64, n = 64;
  uint64_t seed = 1;
  std::string dist = "narrow";
  std::string a_file, w_file;  // the operands from .npy files instead (both or neither)
  std::vector<bf16_t> a, w;    // or given (M x K, K x N; both or neither)
  std::string bias_file;       // N float32 values added to every row (VPU), or ""
  bool relu = false;
  std::optional<std::string> out_dtype;  // "bf16" rounds on the VPU; none given: f32
  bool mxu_only = false;                 // the bare MXU array (no HBM, DMA, sequencer, VPU)
  std::vector<std::string> faults;       // KEY=VALUE fault flags over the config's faults:
  std::optional<uint64_t> watchdog;      // none: the config's chip.watchdog_cycles
  std::string waves, trace, out;         // FST waves, the timeline, C as float32 ("": none)
  std::optional<std::pair<uint64_t, uint64_t>> trace_cycles;  // only events overlapping [A, B)
  bool check = false;  // stop before the first simulated cycle, write no files
};

class MatmulJob {
 public:
  // Loads the config at `config_path`, applies the variant and faults, makes or reads the
  // operands (std::invalid_argument naming the flag or file and the rule).
  MatmulJob(const std::string& config_path, const MatmulJobOptions& o);
  // The same on a config already made (`config_path`: what the messages name).
  MatmulJob(ChipConfig cfg, const std::string& config_path, const MatmulJobOptions& o);

  // Runs the matmul and checks it against the golden. progress, now and then: (done, total)
  // and what counts: the whole chip's "commands issued" (taken by the chip from its host
  // port) of the program, or the bare MXU's "result rows".
  void run(const std::function<void(uint64_t, uint64_t, const char*)>& progress = nullptr);
  // Beside run()'s progress (not instead): the same counts with the chip's (or the array's)
  // cycles since the run began.
  void set_progress(RunProgressFn f) { detail_ = std::move(f); }
  // "matmul MxKxN on chip V" or "... on MXU V": the progress line's label.
  std::string label() const;

  bool pass() const { return mismatches_ == 0; }
  // The report, golden verdict and host time included (once: the job keeps no copy).
  Report take_report();
  // "golden check: PASS (...)" and the first mismatch, on stdout.
  void print_check() const;
  // --out and --trace: a failed write is an error naming the path.
  void write_outputs() const;

  const MatmulRun& result() const { return r_; }      // the whole chip's run
  const std::vector<float>& c() const { return c_; }  // C as float32, M x N (after run)
  std::size_t m() const { return m_; }
  std::size_t n() const { return n_; }
  const ChipShape& shape() const { return shape_; }
  double run_seconds() const { return wall_; }  // host time of the matmul call

 private:
  void make_inputs();
  void check_capacity() const;
  void run_chip(const std::function<void(uint64_t, uint64_t, const char*)>& progress);
  void run_mxu(const std::function<void(uint64_t, uint64_t, const char*)>& progress);
  void chip_report(Report& rep) const;
  std::string chose_variant() const;

  ChipConfig cfg_;
  std::string config_path_;
  MatmulJobOptions o_;
  std::size_t m_ = 0, k_ = 0, n_ = 0;
  std::vector<bf16_t> a_, w_;
  std::vector<float> bias_;
  std::string inputs_;
  ChipShape shape_;
  MatmulRun r_;
  std::optional<Report> rep_;
  std::vector<uint32_t> got_, want_;
  std::vector<float> c_;  // C as float32, for --out
  std::vector<TraceEvent> events_;
  MachineInfo mi_;
  uint64_t cycles_ = 0;
  std::size_t mismatches_ = 0;
  long first_bad_ = -1;
  double wall_ = 0;
  RunProgressFn detail_;
};

}  // namespace tpu
