// Golden vector-unit (VPU) operations, exactly as docs/vpu.md defines them: elementwise f32 ops,
// bf16 conversions and reductions in the VPU's fixed order. Every RTL result of rtl/tpu_vpu.sv
// is compared bit for bit against these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tpu/bf16.h"
#include "tpu/transcend.h"
#include "tpu_contract.h"

namespace tpu {

// VPU operations (tpu::VpuOp, kVpuOpCount): the ISA's encoding, written once in
// configs/tpu_contract.yaml and generated into tpu_contract.h (the RTL's vpu_op_e alike).

const char* vpu_op_name(VpuOp op);  // "add", "red_sum", ...
bool vpu_op_is_reduction(VpuOp op);
// The transcendental ops kExp2 .. kExp (the VPU's tpu_xcend lanes, docs/transcendentals.md): one
// operand, the lane result tpu::xcend_bits of the widened x (bf16 with dst_bf16). Their names
// are xcend_fn_name's ("exp2", "log2", "rcp", "rsqrt", "tanh", "exp").
bool vpu_op_is_xcend(VpuOp op);
XcendFn vpu_op_xcend_fn(VpuOp op);  // the unit's function select; throws for other ops
// The operand vectors whose values the op's result depends on: 1 (x), 2 (x, y) or 3 (x, y, z).
int vpu_op_operands(VpuOp op);
// Whether the op's lane result is bf16 bits in [15:0] whatever dst_bf16 says (cvt_f32_bf16).
bool vpu_op_result_bf16(VpuOp op);

// Scalar f32 ops: IEEE-754 binary32, round to nearest even, subnormals honoured, any NaN result
// canonical (0x7FC00000).
float f32_add(float x, float y);
float f32_sub(float x, float y);
float f32_mul(float x, float y);
float f32_fma(float x, float y, float z);  // x * y + z with one rounding
// IEEE 754-2019 maximum / minimum: NaN if either is NaN (canonical); -0 < +0.
float f32_maximum(float x, float y);
float f32_minimum(float x, float y);
// ReLU = f32_maximum(x, +0): negatives and -0 give +0, NaN gives the canonical NaN.
float f32_relu(float x);

// Flags of a beat: operand lanes that hold bf16 (in bits [15:0]), widened exactly before the op.
constexpr uint8_t kVpuSrcBf16X = 1u << 0;
constexpr uint8_t kVpuSrcBf16Y = 1u << 1;
constexpr uint8_t kVpuSrcBf16Z = 1u << 2;

// One lane of an elementwise op (any op but the reductions) on raw lane bits, with the beat's
// flags; the result is f32 bits, or with dst_bf16 (or kCvtF32Bf16) bf16 bits in [15:0];
// kPackBf16 gives two bf16 (x in [15:0], y in [31:16]) whatever dst_bf16 says.
uint32_t vpu_lane(VpuOp op, uint32_t x, uint32_t y, uint32_t z, uint8_t src_bf16 = 0,
                  bool dst_bf16 = false);

// Whole-vector elementwise f32 op (kAdd .. kRelu); y and z may be empty where the op does not
// read them. Throws std::invalid_argument for other ops or mismatched lengths.
std::vector<float> vector_elementwise(VpuOp op, const std::vector<float>& x,
                                      const std::vector<float>& y = {},
                                      const std::vector<float>& z = {});
// Whole-vector conversions (kCvtF32Bf16, kCvtBf16F32; the latter canonicalises NaN). kPackBf16
// and kCvtBf16HiF32 are lane formats, only through vpu_lane.
std::vector<bf16_t> vector_to_bf16(const std::vector<float>& x);
std::vector<float> vector_from_bf16(const std::vector<bf16_t>& x);

// Reduction (kRedSum or kRedMax) of a vector of any length on a VPU of `lanes` lanes, in the
// VPU's order: v is cut into beats of `lanes` elements (element i in beat i / lanes, lane
// i % lanes; the last beat padded with the identity, -0 for sums and -Inf for maxima). Each lane
// accumulates its beats in order from the identity, acc = op(acc, x); then the lanes are
// reduced pairwise, level k+1 value i = op(level k value 2i, level k value 2i+1), down to one.
// An empty vector gives the identity. `lanes` must be a power of two, at least 2.
float vector_reduce(VpuOp op, const std::vector<float>& v, std::size_t lanes);

// The chip's VROW command (docs/isa.md "VROW") on its two memories, rows of `lanes` lanes of raw
// bits, row-major (vmem, amem; the one a field names must hold every row the command touches).
// Logical row r's beat j is memory row x_row + r * row_stride + j * beat_stride (strides 0 read
// as 1). red_sum / red_max: vector_reduce of the row's beats * lanes values, packed: lane
// r % lanes of row dst_row + r / lanes, the lanes past the last row +0. Any other op of tpu_vpu:
// the same offset from dst_row gets vpu_lane(op, x, y_r, -0) lane by lane, y_r being lane
// r % lanes of row y_row + r / lanes. Row after row, beat after beat, as the chip runs it;
// std::invalid_argument for a field the chip refuses (bad_field) or a row outside a memory.
void vrow_golden(const CmdVrow& c, std::size_t lanes, std::vector<uint32_t>& vmem,
                 std::vector<uint32_t>& amem);

// One input beat of the VPU, as the RTL sees it.
struct VpuBeat {
  VpuOp op = VpuOp::kAdd;
  std::vector<uint32_t> x, y, z;  // raw lane bits, `lanes` each (y, z: empty reads as zeros)
  uint8_t src_bf16 = 0;           // kVpuSrcBf16X | kVpuSrcBf16Y | kVpuSrcBf16Z
  bool dst_bf16 = false;          // results rounded to bf16, in bits [15:0]
  bool first = true;              // reductions: first beat of a group
  bool last = true;               // reductions: last beat of a group
  std::vector<bool> mask;         // reductions: lanes whose x takes part (empty: all)
};

// One output beat: `lanes` results, or a reduction's scalar in data[0] (other lanes +0).
struct VpuResult {
  std::vector<uint32_t> data;
  bool scalar = false;
  bool operator==(const VpuResult& o) const { return data == o.data && scalar == o.scalar; }
};

// Beat-level golden model of the VPU: feed input beats in order, get the output beats.
class VpuModel {
 public:
  explicit VpuModel(std::size_t lanes);  // throws std::invalid_argument unless a power of 2 >= 2
  std::size_t lanes() const { return lanes_; }
  // Elementwise beats and the last beat of a reduction group give a result. Throws
  // std::invalid_argument on a malformed beat (a transcendental op too: tpu_vpu does not take
  // them, docs/vpu.md) or a reduction group that breaks the protocol.
  std::optional<VpuResult> step(const VpuBeat& beat);

 private:
  std::size_t lanes_;
  std::vector<float> acc_;
  bool red_active_ = false;
  VpuOp red_op_ = VpuOp::kRedSum;
};

}  // namespace tpu
