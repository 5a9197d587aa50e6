// GatherJob: `tpusim gather`, rows of a float32 table gathered by an id list on one chip with
// the DMA_IDX command (docs/isa.md), golden-checked. The table [V, d] goes to HBM with its rows
// padded to whole memory rows and 64-byte bursts; the ids (int32 or int64, 1-D) are checked on
// the host (each 0..V-1, else std::invalid_argument: exit 2), written to HBM as int32 rows and
// loaded into VMEM; the program gathers chunk after chunk of ids into VMEM (two buffers, so a
// chunk's gather runs beside the previous chunk's store) and stores them to an [n, d] result.
// The golden is the table's rows in the ids' order, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chip_config.h"
#include "chip_driver.h"
#include "progress.h"
#include "report.h"

namespace tpu {

struct GatherJobOptions {
  std::string table_file, ids_file;    // float32 [V, d]; int32 / int64 [n]
  std::string out;                     // the gathered rows as float32 [n, d], or ""
  std::optional<std::string> variant;  // overrides the config's chip.variant
  bool check = false;  // plan, then stop before the first simulated cycle (CheckStop)
};

class GatherJob {
 public:
  // Loads the config and the inputs and checks them: std::invalid_argument naming the flag or
  // file, the value and the rule (NpyError for a file that is not a .npy).
  GatherJob(const std::string& config_path, const GatherJobOptions& o);

  void run();
  void set_progress(RunProgressFn f) { detail_ = std::move(f); }
  std::string label() const;  // "gather 100 rows of 64 from a 256-row table on chip 4x4"
  bool pass() const { return mismatches_ == 0; }
  Report take_report();
  void print_check() const;
  void write_outputs() const;

 private:
  ChipConfig cfg_;
  GatherJobOptions o_;
  std::vector<float> table_;
  std::vector<int32_t> ids_;
  std::size_t v_ = 0, d_ = 0, cols_ = 0;  // table rows, columns, padded columns in HBM
  std::vector<uint32_t> got_;             // n x d result bits
  ProgramResult prog_;
  std::size_t commands_ = 0, chunks_ = 0;
  std::size_t mismatches_ = 0;
  long first_bad_ = -1;
  RunProgressFn detail_;
};

}  // namespace tpu
