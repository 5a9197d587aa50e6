// plan_vpu_map: an elementwise VPU program over matrices of one shape in a chip's HBM, the
// rows streamed through VMEM in chunks (the DMA of the next chunk behind the VPU work of this
// one; chunk after chunk where VMEM holds only one chunk's values). The training step's loss, ReLU
// mask and SGD update are such maps (docs/training.md); so are the GPT step's row-wise ops (layer
// norm, softmax, cross-entropy: docs/training.md "The GPT step's maps"): a map may reduce each row
// to one value (VROW), work on those per-row values, use them as a per-row operand, take a vector
// per column or per row as an input, and sum its columns in the GPT golden's order.
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
//
// Row values: a map's rows may each be reduced to one value (op red_sum or red_max of a matrix
// value: vector_reduce of the row in the VPU's order, a VROW). A row value is f32; an op whose x
// is a row value (y a row value, a constant or none) gives a row value; an op whose x is a matrix
// value and y a row value takes y per row (a VROW with a per-row operand: add, sub, mul, max,
// min). Row values sit packed in VMEM (lane r mod L of row r / L), so their ops cost a row in L.
struct VpuMapOp {
  VpuOp op = VpuOp::kAdd;
  int x = 0;
  int y = -1;  // -1: none (ops that read only x)
  bool bf16 = false;
};

// What an input is: a matrix (rows x cols), a vector of one value per column (1 x cols, the
// same row for every row of the map: its DMA reads the row over and over), or a vector of one
// value per row (a row value, f32, 1 x n with n at least the rows rounded up to a multiple of
// max(16, lanes)).
enum class MapIn : uint8_t { kMatrix, kColumns, kRows };

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
  // Per input (empty, or shorter: a matrix), what it is.
  std::vector<MapIn> in_kind;
  // Column sums: value (f32, a matrix value) -> a 1 x cols f32 matrix, gpt_col_sum's order (16
  // partial rows from +0, row t onto partial t mod 16, folded in halves, then added to +0): the
  // map's rows must be a multiple of 16. Needs `zero_const`.
  std::vector<std::pair<int, HbmMatrix>> col_sums;
  int zero_const = -1;  // the index in const_rows of a row of +0 (the partials start from it)
  // Outputs whose value is a row value are f32 vectors 1 x n (n as for a kRows input).
  // Values share VMEM regions once their last use is past (the GPT maps: more rows per chunk);
  // false, each value its own region (the MLP step's maps, whose pinned cycles assume it).
  bool share_regions = false;
};

struct VpuMapPlan {
  std::vector<ChipCmd> prog;  // no HALT
  std::size_t chunk = 0;      // matrix rows per chunk
  std::size_t slots = 2;      // sets of a chunk's values: 2 double-buffered, 1 chunk after chunk
};

// The program for VMEM rows [vmem_base, vmem_base + vmem_rows). std::invalid_argument naming
// the operand and the rule for what cannot run.
VpuMapPlan plan_vpu_map(const VpuMap& m, const ChipShape& s, uint32_t vmem_base,
                        uint32_t vmem_rows);

}  // namespace tpu
