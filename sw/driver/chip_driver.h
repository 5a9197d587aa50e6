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
#include "pod.h"
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

struct ProgramResult {
  uint64_t cycles = 0;   // from the first command offered until the chip is idle again
  ChipCounters delta;    // counters over the run
  unsigned err = 0;      // sticky error code at the end (0: none)
  uint32_t err_cmd = 0;  // index of the failing command
};

// Element type of an HBM matrix.
enum class Dtype { kBf16, kF32 };
inline std::size_t dtype_bytes(Dtype d) { return d == Dtype::kBf16 ? 2 : 4; }

// A row-major matrix in the chip's HBM: element (i, j) at addr + (i * pitch + j) * element
// bytes. The DMA moves rows of L elements (L = lanes) and writes HBM in whole 64-byte bursts, so
// addr is 64-byte aligned and pitch (elements) is a multiple of L and of 64 bytes; the pitch -
// cols elements at the end of each row are padding, whose contents no operation depends on (a
// matmul pads edge tiles on chip and may overwrite its output's padding).
struct HbmMatrix {
  uint64_t addr = 0;
  std::size_t rows = 0, cols = 0, pitch = 0;
  Dtype dtype = Dtype::kBf16;
  std::size_t esize() const { return dtype_bytes(dtype); }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * pitch * esize(); }
};

// Epilogue of the HBM-resident matmul; the output type is the type of C.
struct MatmulEpilogue {
  const HbmMatrix* bias = nullptr;  // 1 x N f32, added to every row (VPU), or none
  bool relu = false;                // ReLU after the bias (VPU)
};

struct MatmulOptions {
  const std::vector<float>* bias = nullptr;  // N values added to every row (VPU), or none
  bool relu = false;                         // ReLU after the bias (VPU)
  bool out_bf16 = false;                     // round the result to bf16 (VPU), else f32
};

struct MatmulRun {
  std::vector<uint32_t> c_bits;  // host-vector matmul only: M x N f32 bits, or bf16 bits (low 16)
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
  // Chip `chip` of a pod: copies go through the pod host's port (64-byte bursts), programs are
  // pushed and run until the whole pod is idle (a chip error is a PodError); tick_idle is not
  // available. The HBM allocator starts at 0 on that chip.
  ChipDriver(PodHost& pod, int chip);

  ChipDut& dut() { return *d_; }
  const ChipShape& shape() const { return d_->shape(); }
  const HbmConfig& hbm() const { return hbm_; }

  // HBM buffers: a bump allocator of 64-byte aligned regions. release(mark) frees everything
  // allocated since mark = allocated() (a stack), free_all() everything.
  uint64_t alloc(uint64_t bytes);
  uint64_t allocated() const { return next_free_; }
  void release(uint64_t mark);
  void free_all() { release(0); }

  // A rows x cols matrix with the smallest legal pitch (see HbmMatrix).
  HbmMatrix alloc_matrix(std::size_t rows, std::size_t cols, Dtype dtype);
  // Whole-matrix copies from / to row-major host data of rows x cols elements (bf16 bits or
  // f32); the padding is written as zeros. read_matrix returns f32 bits, or bf16 bits in the
  // low 16. A host vector of the wrong size or type is std::invalid_argument.
  void write_matrix(const HbmMatrix& m, const std::vector<bf16_t>& data);
  void write_matrix(const HbmMatrix& m, const std::vector<float>& data);
  std::vector<uint32_t> read_matrix(const HbmMatrix& m);

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

  // C = epilogue(A x W) on matrices in HBM: A M x K bf16, W K x N bf16, C M x N (bf16: rounded
  // on the VPU, or f32), any M, K, N that the on-chip memories can tile. One program: tiled for
  // the array, edge tiles padded on chip, K tiles accumulated in order, DMA double-buffered
  // behind the MXU. Shapes, types, alignment and overlaps are checked first
  // (std::invalid_argument naming the operand and the rule). When K is not a multiple of the
  // lanes, the first such matmul allocates one row of zeros (the driver's; see release()).
  MatmulRun matmul(const HbmMatrix& c, const HbmMatrix& a, const HbmMatrix& w,
                   const MatmulEpilogue& ep = {});

  // The same from host vectors: A M x K, W K x N row-major; copies them (and the bias) into
  // temporary HBM matrices, runs the matmul above, copies C back into c_bits and frees them.
  MatmulRun matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w, std::size_t m,
                   std::size_t k, std::size_t n, const MatmulOptions& opt = {});

 private:
  void host_bursts(const std::vector<uint64_t>& addrs, std::vector<uint8_t>* data, bool write);

  HbmConfig hbm_;
  std::unique_ptr<ChipDut> dut_;  // the chip when it stands alone
  ChipDut* d_ = nullptr;          // the chip driven (dut_, or a pod's)
  PodHost* pod_ = nullptr;
  int pod_chip_ = 0;
  uint64_t next_free_ = 0;
  HbmMatrix zeros_;  // +0 rows for the pad rows of a K edge tile of W (grown on demand)
};

// Bit-exact golden of ChipDriver::matmul (model/: golden_matmul + the VPU golden).
std::vector<uint32_t> golden_chip_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                         std::size_t m, std::size_t k, std::size_t n,
                                         const MatmulOptions& opt);

}  // namespace tpu
