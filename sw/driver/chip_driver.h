// ChipDriver: the host's C++ API for one simulated chip: HBM buffers, copies through the host
// port, command programs, and a tiled, double-buffered matmul with a VPU epilogue.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_dut.h"
#include "chip_isa.h"
#include "hbm_config.h"
#include "tpu/bf16.h"

namespace tpu {

// The chip stopped with its sticky error register set, or hung. The message names the error
// code (chip_err_name), the failing command index and the program.
class ChipError : public std::runtime_error {
 public:
  ChipError(const std::string& what, unsigned code) : std::runtime_error(what), code_(code) {}
  unsigned code() const { return code_; }

 private:
  unsigned code_;
};

// Counters of the chip (rtl/tpu_chip_pkg.sv chip_stat_e), one snapshot or a difference.
struct ChipCounters {
  uint64_t v[kNumChipStats] = {};
  uint64_t operator[](unsigned i) const { return v[i]; }
  ChipCounters operator-(const ChipCounters& o) const {
    ChipCounters d;
    for (unsigned i = 0; i < kNumChipStats; ++i) d.v[i] = v[i] - o.v[i];
    return d;
  }
};

struct ProgramResult {
  uint64_t cycles = 0;   // from the first command offered until the chip is idle again
  ChipCounters delta;    // counters over the run
  unsigned err = 0;      // sticky error code at the end (0: none)
  uint32_t err_cmd = 0;  // index of the failing command
};

struct MatmulOptions {
  const std::vector<float>* bias = nullptr;  // N values added to every row (VPU), or none
  bool relu = false;                         // ReLU after the bias (VPU)
  bool out_bf16 = false;                     // round the result to bf16 (VPU), else f32
};

struct MatmulRun {
  std::vector<uint32_t> c_bits;  // M x N: f32 bits, or bf16 bits (low 16) when out_bf16
  ProgramResult prog;            // the on-chip program (copies in/out not included)
  std::size_t commands = 0;      // commands in the program
  std::size_t m_chunk = 0;       // rows of A per on-chip chunk
  uint64_t hbm_bytes = 0;        // bytes the DMA moved to and from HBM
  uint64_t compute_cycles = 0;   // activation beats the MXU needs: M x ceil(K/R) x ceil(N/C)
  uint64_t roofline_cycles = 0;  // max(compute, hbm_bytes / peak bytes per cycle)
  double peak_bytes_per_cycle = 0;
};

class ChipDriver {
 public:
  explicit ChipDriver(const std::string& variant, const HbmConfig& hbm = HbmConfig{});

  ChipDut& dut() { return *dut_; }
  const ChipShape& shape() const { return dut_->shape(); }
  const HbmConfig& hbm() const { return hbm_; }

  // HBM buffers: a bump allocator of 64-byte aligned regions.
  uint64_t alloc(uint64_t bytes);
  void free_all() { next_free_ = 0; }

  // Copies through the host port (any byte range; partial bursts are read, merged, written).
  void write(uint64_t addr, const void* data, std::size_t n);
  void read(uint64_t addr, void* data, std::size_t n);

  // Pushes the commands, runs until the chip is idle (or `max_cycles` pass: ChipError "hung").
  // With throw_on_error, a set error register throws ChipError; the register is then cleared.
  ProgramResult run(const std::vector<ChipCmd>& prog, bool throw_on_error = true,
                    uint64_t max_cycles = 50'000'000);
  ChipCounters counters();
  void tick_idle(uint64_t cycles);

  // Called by run() about every `progress_every` cycles with (commands issued, commands in the
  // program): long runs tell what they are doing.
  std::function<void(uint64_t, uint64_t)> progress;
  uint64_t progress_every = 4096;

  // C = epilogue(A x W): A M x K bf16, W K x N bf16, row-major on the host. Copies A, W (and
  // the bias) into HBM, runs one program, copies C back.
  MatmulRun matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w, std::size_t m,
                   std::size_t k, std::size_t n, const MatmulOptions& opt = {});

 private:
  void host_bursts(const std::vector<uint64_t>& addrs, std::vector<uint8_t>* data, bool write);

  HbmConfig hbm_;
  std::unique_ptr<ChipDut> dut_;
  uint64_t next_free_ = 0;
};

// Bit-exact golden of ChipDriver::matmul (model/: golden_matmul + the VPU golden).
std::vector<uint32_t> golden_chip_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                         std::size_t m, std::size_t k, std::size_t n,
                                         const MatmulOptions& opt);

}  // namespace tpu
