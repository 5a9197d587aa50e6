// VpuJob: `tpusim vpu`, one VPU op over an f32 array on one chip. The ops are the contract's
// VpuOp values (kVpuOpCount, named by the golden's vpu_op_name) that the chip's VPU command takes:
// every one but the reductions and fma (the command feeds z = -0, docs/isa.md); an op reads y
// when the golden declares two operands for it
// (vpu_op_operands). The array (1-D or 2-D, any shape) is laid out row-major into an HBM matrix
// of whole memory rows (zero padding, never read back), streamed through VMEM by plan_vpu_map
// (DMA in, one VPU command per chunk, DMA out), and every result checked bit for bit against the
// golden lane function (model/include/tpu/vector.h) with the operands the command feeds. One
// more op is a program of several commands: gelu, transcend.h's xcend_gelu step by step (its
// constants as broadcast y rows), checked against xcend_gelu. The reductions (red_sum, red_max)
// reduce each row of the array (a 1-D array is one row) with the VROW command, row by row
// checked against vector_reduce with the chip's lanes: the result has one value per row.
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
#include "lone_chip.h"
#include "progress.h"
#include "report.h"
#include "tpu/vector.h"

namespace tpu {

// One op `tpusim vpu` runs.
struct VpuCommandOp {
  VpuOp op = VpuOp::kAdd;
  std::string name;      // the golden's snake_case name
  bool reads_y = false;  // takes --y
  bool gelu = false;     // the GELU program (op unused), not one command
  bool reduce = false;   // a row reduction (VROW), one value per row of x
};

// The ops the commands run, in the contract's order, then gelu.
std::vector<VpuCommandOp> vpu_command_ops();
// Their names, "add, sub, ...".
std::string vpu_command_op_names();

struct VpuJobOptions {
  std::string op;                      // an op's name (vpu_command_ops)
  std::string x_file, y_file, z_file;  // float32 .npy; y and z: "" for none
  std::string out;                     // the result as float32 .npy, or ""
  std::optional<std::string> variant;  // overrides the config's chip.variant
  bool check = false;  // plan, then stop before the first simulated cycle (CheckStop)
};

class VpuJob {
 public:
  // Loads the config, resolves the op, reads and checks the operands and the chip's capacity:
  // std::invalid_argument naming the flag or file and the rule (NpyError for a bad .npy).
  VpuJob(const std::string& config_path, const VpuJobOptions& o);

  // Runs the op on the chip and checks every element against the golden; with `check`, plans
  // the program and throws CheckStop before any copy or cycle.
  // progress, now and then: (commands issued, of the program's, "commands issued").
  void run(const std::function<void(uint64_t, uint64_t, const char*)>& progress = nullptr);
  // Beside run()'s progress (not instead): the same counts with the chip's cycles since the
  // run began.
  void set_progress(RunProgressFn f) { detail_ = std::move(f); }
  std::string label() const;  // "vpu add over 10 elements on chip 16x16"
  bool pass() const { return mismatches_ == 0; }
  Report take_report();
  void print_check() const;    // "golden check: ..." and the first mismatch, on stdout
  void write_outputs() const;  // --out

 private:
  std::vector<float> read_operand(const std::string& flag, const std::string& path);
  void check_reduce(const ChipShape& cs);  // a row's memory rows fit VROW and VMEM
  // The reduction's program on `chip`: rows of x in chunks through VMEM, one VROW each.
  std::vector<ChipCmd> plan_reduce(ChipDriver& chip, uint64_t* out_addr);
  void attach_progress(LoneChip& chip,
                       const std::function<void(uint64_t, uint64_t, const char*)>& progress);
  void check_golden();  // mismatches_ and first_bad_ of got_ against want_

  ChipConfig cfg_;
  VpuJobOptions o_;
  VpuCommandOp op_;
  std::vector<std::size_t> shape_;  // the operands' (and the result's) shape
  std::vector<float> x_, y_;
  std::size_t n_ = 0;     // elements
  std::size_t red_rows_ = 0, red_cols_ = 0;  // a reduction: rows of x and their elements
  uint32_t red_beats_ = 0, red_chunk_ = 0;   // memory rows per row; rows per VROW
  std::size_t cols_ = 0;  // columns of the HBM matrices (whole bursts and memory rows)
  std::vector<uint32_t> got_, want_;
  ProgramResult prog_;
  std::size_t commands_ = 0;
  std::size_t mismatches_ = 0;
  long first_bad_ = -1;
  double wall_ = 0;
  RunProgressFn detail_;
};

}  // namespace tpu
