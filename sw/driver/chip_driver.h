// ChipDriver: the host's C++ API for one simulated chip: HBM buffers, copies through the host
// port, command programs, and a tiled, double-buffered matmul with a VPU epilogue. It sees only
// the chip's host port (tb/pod/host_port.h): a chip alone is a machine of one chip.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_contract.h"
#include "host_port.h"
#include "tpu/bf16.h"

namespace tpu {

struct ProgramResult {
  uint64_t cycles = 0;   // from the first command offered until the chip is idle again
  ChipCounters delta;    // counters over the run
  unsigned err = 0;      // sticky error code at the end (0: none)
  uint32_t err_cmd = 0;  // index of the failing command
  uint32_t err_addr = 0;  // hbm_uncorrectable: the HBM byte address of the word
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

// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of m, as a matrix of its own (same pitch);
// std::logic_error if it leaves m or does not start on a 64-byte burst.
HbmMatrix hbm_view(const HbmMatrix& m, std::size_t r0, std::size_t rows, std::size_t c0,
                   std::size_t cols);

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

// The HBM bytes ChipDriver::matmul from host vectors allocates on a chip of shape s (A, W, C and
// the bias row, each with its legal pitch and rounded to a burst), and the check made before
// anything is allocated or generated: std::invalid_argument naming the shape and what it needs
// when that exceeds the chip's HBM.
uint64_t matmul_hbm_bytes(const ChipShape& s, std::size_t m, std::size_t k, std::size_t n,
                          const MatmulOptions& opt);
void check_matmul_fits(const ChipShape& s, std::size_t m, std::size_t k, std::size_t n,
                       const MatmulOptions& opt);

struct MatmulRun {
  std::vector<ChipCmd> program;  // the on-chip program (ends with HALT)
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
  // Chip `chip` of a machine: copies and programs go through that chip's host port, which the
  // driver does not own (a chip alone: LoneChip, sw/jobs/lone_chip.h); run() runs the whole
  // machine until it is idle. The HBM allocator starts at 0 on that chip.
  ChipDriver(HostPort& port, int chip);
  ~ChipDriver();

  HostPort& port() { return *port_; }
  int chip() const { return chip_; }
  const ChipShape& shape() const { return port_->info().shape; }
  const HbmConfig& hbm() const { return port_->info().hbm; }

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
  // The same as images of the matrix's HBM bytes (padding as zeros), for copies batched over
  // many chips (HostPort::copy) or the backdoor.
  std::vector<uint8_t> matrix_image(const HbmMatrix& m, const std::vector<bf16_t>& data) const;
  std::vector<uint8_t> matrix_image(const HbmMatrix& m, const std::vector<float>& data) const;
  static std::vector<uint32_t> matrix_from_image(const HbmMatrix& m,
                                                 const std::vector<uint8_t>& image);

  // Copies through the host port (any byte range; partial bursts are read, merged, written).
  void write(uint64_t addr, const void* data, std::size_t n);
  void read(uint64_t addr, void* data, std::size_t n);

  // Pushes the commands, runs until the machine is idle (or `max_cycles` pass: ChipError
  // "hung"). With throw_on_error, a set error register throws ChipError; the register (and a
  // final HALT's `halted`) is then cleared. The default bound is PodDriver's, not HostPort's 50
  // million: a matmul on a scale model's chip runs longer, and the watchdog stops a hang.
  ProgramResult run(const std::vector<ChipCmd>& prog, bool throw_on_error = true,
                    uint64_t max_cycles = uint64_t{1} << 40);
  ChipCounters counters();

  // plan_matmul uses VMEM rows [0, vmem_rows_limit) only (0: all of them), leaving the rest to
  // a program that runs beside it (a collective: PodCollectiveOptions::vmem_base).
  uint32_t vmem_rows_limit = 0;

  // Called by run() about every `progress_every` cycles with (cycles so far, commands in the
  // program): long runs tell what they are doing.
  std::function<void(uint64_t, uint64_t)> progress;
  uint64_t progress_every = 4096;

  // C = epilogue(A x W) on matrices in HBM: A M x K bf16, W K x N bf16, C M x N (bf16: rounded
  // on the VPU, or f32), any M, K, N that the on-chip memories can tile. One program: tiled for
  // the array, edge tiles padded on chip, K tiles accumulated in order, DMA double-buffered
  // behind the MXU. Shapes, types, alignment and overlaps are checked first
  // (std::invalid_argument naming the operand and the rule). When K is not a multiple of the
  // lanes, the first such matmul allocates one row of zeros (the driver's; see release()).
  // w_transposed: w is N x K and holds W transposed, C = epilogue(A x transpose(w)); its tiles
  // are DMAed as they lie and loaded with LOADW.transpose. Bit for bit the plain matmul with the
  // transposed matrix (the first such matmul with K not a multiple of the lanes allocates one row
  // of bf16 ones, the driver's, for the K edge tile's padding).
  MatmulRun matmul(const HbmMatrix& c, const HbmMatrix& a, const HbmMatrix& w,
                   const MatmulEpilogue& ep = {}, bool w_transposed = false);
  // The same program, not run: `program`, `commands`, `m_chunk` and `compute_cycles` are set.
  // Push it with others (one per chip) to run matmuls on many chips at once; then
  // finish_matmul() fills in the rest from the run's counters.
  MatmulRun plan_matmul(const HbmMatrix& c, const HbmMatrix& a, const HbmMatrix& w,
                        const MatmulEpilogue& ep = {}, bool w_transposed = false);
  void finish_matmul(MatmulRun* r, const ProgramResult& prog) const;

  // dst = transpose(src) on bf16 matrices in HBM (src R x C, dst C x R), on the MXU: per tile of
  // src, LOADW.transpose and a MATMUL of the identity, the VPU rounds the f32 result to bf16,
  // the DMA writes it to its transposed place; pipelined (two buffers each for the input,
  // results and output). A program, not run, no HALT; VMEM rows [0, vmem_rows_limit). The first
  // call allocates the identity (lanes x lanes bf16; the driver's, see release()). Numerics
  // (golden_transpose with lanes = the array width): every value is kept bit for bit except that
  // -0 becomes +0, a NaN becomes 0x7FC0, and an Inf or NaN turns the other values of its src row
  // within the same tile of lanes columns into NaN (0 x Inf in the identity product). dst's
  // padding columns up to the next 64-byte burst (and beyond R up to the next multiple of the
  // lanes) may be overwritten.
  std::vector<ChipCmd> plan_transpose(const HbmMatrix& dst, const HbmMatrix& src);

  // Y = relu(Y + bias) in place on an f32 matrix in HBM (bias: 1 x Y.cols f32, or none; relu
  // optional), the VPU's f32_add then f32_relu per element: the epilogue of a product whose sum
  // finished elsewhere (a K-split sharded matmul after its reduction). A program, not run, no
  // HALT; VMEM rows [0, vmem_rows_limit). Y's padding columns up to the next 64-byte burst are
  // rewritten (as a matmul's output padding may be).
  std::vector<ChipCmd> plan_epilogue(const HbmMatrix& y, const HbmMatrix* bias, bool relu) const;

  // The same from host vectors: A M x K, W K x N row-major; copies them (and the bias) into
  // temporary HBM matrices, runs the matmul above, copies C back into c_bits and frees them.
  MatmulRun matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w, std::size_t m,
                   std::size_t k, std::size_t n, const MatmulOptions& opt = {});

 private:
  HostPort* port_ = nullptr;
  int chip_ = 0;
  uint64_t next_free_ = 0;
  HbmMatrix zeros_;  // +0 rows for the pad rows of a K edge tile of W (grown on demand)
  HbmMatrix ones_;   // a row of bf16 ones: the K edge mask of a transposed W (on demand)
  HbmMatrix ident_;  // the lanes x lanes bf16 identity of plan_transpose (on demand)
};

// Bit-exact golden of ChipDriver::matmul (model/: golden_matmul + the VPU golden).
std::vector<uint32_t> golden_chip_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                         std::size_t m, std::size_t k, std::size_t n,
                                         const MatmulOptions& opt);

}  // namespace tpu
