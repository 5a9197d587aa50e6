// plan_vpu_map: an elementwise VPU program over matrices of one shape in a chip's HBM, the
// rows streamed through VMEM in chunks (the DMA of the next chunk behind the VPU work of this
// one). The training step's loss, ReLU mask and SGD update are such maps (docs/training.md).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "chip_driver.h"
#include "tpu/vector.h"

namespace tpu {

// Values, by number: the inputs (0 .. I-1), the constants (I .. I+C-1: rows of `consts`, each
// the same value in every lane, usable only as an op's y operand: the VPU's broadcast row),
// then the ops' results (I+C+k for op k, in order). An op's result is f32, or bf16 when `bf16`
// is set or the op is kCvtF32Bf16. Every matrix (inputs, outputs) is rows x cols with
// cols x element bytes a multiple of 64 and of the lane count: each matrix row is cols / lanes
// memory rows, the same for f32 and bf16, so an op runs over a chunk's rows in one command.
struct VpuMapOp {
  VpuOp op = VpuOp::kAdd;
  int x = 0;
  int y = -1;  // -1: none (ops that read only x)
  bool bf16 = false;
};

struct VpuMap {
  std::size_t rows = 0, cols = 0;
  std::vector<HbmMatrix> in;
  HbmMatrix consts;                  // f32, `lanes` columns; row i = one constant
  std::vector<std::size_t> const_rows;  // the rows of `consts` that are the constants, in order
  std::vector<VpuMapOp> ops;
  std::vector<std::pair<int, HbmMatrix>> out;  // value -> matrix (its dtype: the value's)
  // A value (f32) summed over every element, or -1: acc[i] = v_i + acc[i] over the chunks (memory
  // row i of a chunk; the first chunk copied), then folded (h = n / 2: rows [0, h) += rows
  // [n - h, n), n -= h, down to one row), whose `lanes` values go to sum_out (f32, its first
  // row; the DMA writes one whole 64-byte burst). The order is tpu::mlp_loss_partial's.
  int sum = -1;
  HbmMatrix sum_out;
};

struct VpuMapPlan {
  std::vector<ChipCmd> prog;  // no HALT
  std::size_t chunk = 0;      // matrix rows per chunk
};

// The program for VMEM rows [vmem_base, vmem_base + vmem_rows). std::invalid_argument naming
// the operand and the rule for what cannot run.
VpuMapPlan plan_vpu_map(const VpuMap& m, const ChipShape& s, uint32_t vmem_base,
                        uint32_t vmem_rows);

}  // namespace tpu
