#include "tpu/vector.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tpu {

namespace {

const float kNegZero = f32_from_bits(0x80000000u);
const float kNegInf = f32_from_bits(0xFF800000u);

bool is_power_of_two_lanes(std::size_t n) { return n >= 2 && (n & (n - 1)) == 0; }

// The identity of a reduction: op(acc, identity) == acc bit for bit.
float reduction_identity(VpuOp op) { return op == VpuOp::kRedMax ? kNegInf : kNegZero; }

float reduction_step(VpuOp op, float acc, float x) {
  return op == VpuOp::kRedMax ? f32_maximum(acc, x) : f32_add(x, acc);
}

// The fixed cross-lane tree: level k+1 value i = op(level k value 2i, level k value 2i+1).
float reduce_tree(VpuOp op, std::vector<float> level) {
  while (level.size() > 1) {
    std::vector<float> next(level.size() / 2);
    for (std::size_t i = 0; i < next.size(); ++i) {
      next[i] = op == VpuOp::kRedMax ? f32_maximum(level[2 * i], level[2 * i + 1])
                                     : f32_add(level[2 * i], level[2 * i + 1]);
    }
    level = std::move(next);
  }
  return level[0];
}

float widen(uint32_t bits, bool is_bf16) {
  return is_bf16 ? bf16_to_f32(static_cast<bf16_t>(bits & 0xFFFFu)) : f32_from_bits(bits);
}

}  // namespace

const char* vpu_op_name(VpuOp op) {
  switch (op) {
    case VpuOp::kAdd:
      return "add";
    case VpuOp::kSub:
      return "sub";
    case VpuOp::kMul:
      return "mul";
    case VpuOp::kFma:
      return "fma";
    case VpuOp::kMax:
      return "max";
    case VpuOp::kMin:
      return "min";
    case VpuOp::kRelu:
      return "relu";
    case VpuOp::kCvtF32Bf16:
      return "cvt_f32_bf16";
    case VpuOp::kCvtBf16F32:
      return "cvt_bf16_f32";
    case VpuOp::kRedSum:
      return "red_sum";
    case VpuOp::kRedMax:
      return "red_max";
    case VpuOp::kPackBf16:
      return "pack_bf16";
    case VpuOp::kCvtBf16HiF32:
      return "cvt_bf16hi_f32";
    case VpuOp::kExp2:
    case VpuOp::kLog2:
    case VpuOp::kRcp:
    case VpuOp::kRsqrt:
    case VpuOp::kTanh:
    case VpuOp::kExp:
      return xcend_fn_name(vpu_op_xcend_fn(op));
  }
  return "unknown";
}

bool vpu_op_is_reduction(VpuOp op) { return op == VpuOp::kRedSum || op == VpuOp::kRedMax; }

bool vpu_op_is_xcend(VpuOp op) {
  return static_cast<unsigned>(op) >= static_cast<unsigned>(VpuOp::kExp2) &&
         static_cast<unsigned>(op) < static_cast<unsigned>(VpuOp::kExp2) + kXcendFnCount;
}

XcendFn vpu_op_xcend_fn(VpuOp op) {
  if (!vpu_op_is_xcend(op)) {
    throw std::invalid_argument(std::string("vpu_op_xcend_fn: not a transcendental op: ") +
                                vpu_op_name(op));
  }
  return static_cast<XcendFn>(static_cast<unsigned>(op) - static_cast<unsigned>(VpuOp::kExp2));
}

bool vpu_op_result_bf16(VpuOp op) { return op == VpuOp::kCvtF32Bf16; }

int vpu_op_operands(VpuOp op) {
  switch (op) {
    case VpuOp::kAdd:
    case VpuOp::kSub:
    case VpuOp::kMul:
    case VpuOp::kMax:
    case VpuOp::kMin:
    case VpuOp::kPackBf16:
      return 2;
    case VpuOp::kFma:
      return 3;
    case VpuOp::kRelu:
    case VpuOp::kCvtF32Bf16:
    case VpuOp::kCvtBf16F32:
    case VpuOp::kRedSum:
    case VpuOp::kRedMax:
    case VpuOp::kCvtBf16HiF32:
    case VpuOp::kExp2:
    case VpuOp::kLog2:
    case VpuOp::kRcp:
    case VpuOp::kRsqrt:
    case VpuOp::kTanh:
    case VpuOp::kExp:
      return 1;
  }
  return 0;
}

float f32_add(float x, float y) { return canonicalize(x + y); }
float f32_sub(float x, float y) { return canonicalize(x - y); }
float f32_mul(float x, float y) { return canonicalize(x * y); }
float f32_fma(float x, float y, float z) { return canonicalize(std::fmaf(x, y, z)); }

float f32_maximum(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return f32_from_bits(kF32CanonNan);
  if (x == 0.0f && y == 0.0f) return std::signbit(x) ? y : x;  // -0 < +0
  return x < y ? y : x;
}

float f32_minimum(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return f32_from_bits(kF32CanonNan);
  if (x == 0.0f && y == 0.0f) return std::signbit(x) ? x : y;  // -0 < +0
  return y < x ? y : x;
}

float f32_relu(float x) { return f32_maximum(x, 0.0f); }

uint32_t vpu_lane(VpuOp op, uint32_t x, uint32_t y, uint32_t z, uint8_t src_bf16, bool dst_bf16) {
  if (op == VpuOp::kCvtBf16HiF32) x >>= 16;  // the upper bf16, widened like kCvtBf16F32's
  const float xf = widen(x, (src_bf16 & kVpuSrcBf16X) != 0 || op == VpuOp::kCvtBf16F32 ||
                                op == VpuOp::kCvtBf16HiF32);
  const float yf = widen(y, (src_bf16 & kVpuSrcBf16Y) != 0);
  const float zf = widen(z, (src_bf16 & kVpuSrcBf16Z) != 0);
  float r = 0.0f;
  switch (op) {
    case VpuOp::kAdd:
      r = f32_add(xf, yf);
      break;
    case VpuOp::kSub:
      r = f32_sub(xf, yf);
      break;
    case VpuOp::kMul:
      r = f32_mul(xf, yf);
      break;
    case VpuOp::kFma:
      r = f32_fma(xf, yf, zf);
      break;
    case VpuOp::kMax:
      r = f32_maximum(xf, yf);
      break;
    case VpuOp::kMin:
      r = f32_minimum(xf, yf);
      break;
    case VpuOp::kRelu:
      r = f32_relu(xf);
      break;
    case VpuOp::kCvtF32Bf16:
    case VpuOp::kCvtBf16F32:
    case VpuOp::kCvtBf16HiF32:
      r = canonicalize(xf);
      break;
    case VpuOp::kPackBf16:
      return uint32_t{f32_to_bf16(yf)} << 16 | f32_to_bf16(xf);
    case VpuOp::kExp2:
    case VpuOp::kLog2:
    case VpuOp::kRcp:
    case VpuOp::kRsqrt:
    case VpuOp::kTanh:
    case VpuOp::kExp:
      r = f32_from_bits(xcend_bits(vpu_op_xcend_fn(op), f32_bits(xf)));
      break;
    case VpuOp::kRedSum:
    case VpuOp::kRedMax:
      throw std::invalid_argument("vpu_lane: reductions are not elementwise");
  }
  if (dst_bf16 || op == VpuOp::kCvtF32Bf16) return f32_to_bf16(r);
  return f32_bits(r);
}

std::vector<float> vector_elementwise(VpuOp op, const std::vector<float>& x,
                                      const std::vector<float>& y, const std::vector<float>& z) {
  const bool reads_y = op == VpuOp::kAdd || op == VpuOp::kSub || op == VpuOp::kMul ||
                       op == VpuOp::kFma || op == VpuOp::kMax || op == VpuOp::kMin;
  const bool reads_z = op == VpuOp::kFma;
  if (static_cast<unsigned>(op) > static_cast<unsigned>(VpuOp::kRelu)) {
    throw std::invalid_argument(std::string("vector_elementwise: not an f32 elementwise op: ") +
                                vpu_op_name(op));
  }
  if ((reads_y && y.size() != x.size()) || (reads_z && z.size() != x.size())) {
    throw std::invalid_argument("vector_elementwise: operand lengths differ");
  }
  std::vector<float> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const uint32_t yb = reads_y ? f32_bits(y[i]) : 0u;
    const uint32_t zb = reads_z ? f32_bits(z[i]) : 0u;
    r[i] = f32_from_bits(vpu_lane(op, f32_bits(x[i]), yb, zb));
  }
  return r;
}

std::vector<bf16_t> vector_to_bf16(const std::vector<float>& x) {
  std::vector<bf16_t> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = f32_to_bf16(x[i]);
  return r;
}

std::vector<float> vector_from_bf16(const std::vector<bf16_t>& x) {
  std::vector<float> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = canonicalize(bf16_to_f32(x[i]));
  return r;
}

float vector_reduce(VpuOp op, const std::vector<float>& v, std::size_t lanes) {
  if (!vpu_op_is_reduction(op)) throw std::invalid_argument("vector_reduce: not a reduction");
  if (!is_power_of_two_lanes(lanes)) {
    throw std::invalid_argument("vector_reduce: lanes must be a power of two, at least 2");
  }
  std::vector<float> acc(lanes, reduction_identity(op));
  for (std::size_t i = 0; i < v.size(); ++i) {
    acc[i % lanes] = reduction_step(op, acc[i % lanes], v[i]);
  }
  return reduce_tree(op, std::move(acc));
}

namespace {

// Memory row `row` of the memory a field names (0 VMEM, 1 AMEM), checked to lie inside it.
uint32_t* vrow_mem_row(std::vector<uint32_t>& vmem, std::vector<uint32_t>& amem, uint32_t mem,
                       uint64_t row, std::size_t lanes) {
  std::vector<uint32_t>& m = mem ? amem : vmem;
  if ((row + 1) * lanes > m.size())
    throw std::invalid_argument("vrow_golden: row " + std::to_string(row) + " is outside " +
                                (mem ? "AMEM" : "VMEM"));
  return m.data() + row * lanes;
}

}  // namespace

void vrow_golden(const CmdVrow& c, std::size_t lanes, std::vector<uint32_t>& vmem,
                 std::vector<uint32_t>& amem) {
  const auto op = static_cast<VpuOp>(c.vop);
  if (c.rows == 0 || c.beats == 0 || c.vop >= kVpuOpCount || vpu_op_is_xcend(op) ||
      !is_power_of_two_lanes(lanes))
    throw std::invalid_argument("vrow_golden: a field the chip refuses (bad_field)");
  const uint64_t bs = c.beat_stride ? c.beat_stride : 1, rs = c.row_stride ? c.row_stride : 1;
  auto row = [&](uint32_t mem, uint64_t r) { return vrow_mem_row(vmem, amem, mem, r, lanes); };
  if (vpu_op_is_reduction(op)) {
    std::vector<uint32_t> packed((c.rows + lanes - 1) / lanes * lanes, 0u);
    std::vector<float> v(c.beats * lanes);
    for (uint32_t r = 0; r < c.rows; ++r) {
      for (uint32_t j = 0; j < c.beats; ++j) {
        const uint32_t* x = row(c.x_mem, c.x_row + r * rs + j * bs);
        for (std::size_t l = 0; l < lanes; ++l) v[j * lanes + l] = f32_from_bits(x[l]);
      }
      packed[r] = f32_bits(vector_reduce(op, v, lanes));
    }
    for (std::size_t p = 0; p < packed.size() / lanes; ++p)
      std::copy_n(packed.data() + p * lanes, lanes, row(c.dst_mem, c.dst_row + p));
    return;
  }
  for (uint32_t r = 0; r < c.rows; ++r) {
    const uint32_t y = row(c.y_mem, c.y_row + r / lanes)[r % lanes];
    for (uint32_t j = 0; j < c.beats; ++j) {
      const uint64_t off = r * rs + j * bs;
      std::vector<uint32_t> x(row(c.x_mem, c.x_row + off), row(c.x_mem, c.x_row + off) + lanes);
      uint32_t* d = row(c.dst_mem, c.dst_row + off);
      for (std::size_t l = 0; l < lanes; ++l) d[l] = vpu_lane(op, x[l], y, 0x80000000u);
    }
  }
}

VpuModel::VpuModel(std::size_t lanes) : lanes_(lanes), acc_(lanes, 0.0f) {
  if (!is_power_of_two_lanes(lanes)) {
    throw std::invalid_argument("VpuModel: lanes must be a power of two, at least 2");
  }
}

std::optional<VpuResult> VpuModel::step(const VpuBeat& b) {
  const auto operand_ok = [&](const std::vector<uint32_t>& v) {
    return v.empty() || v.size() == lanes_;
  };
  if (b.x.size() != lanes_ || !operand_ok(b.y) || !operand_ok(b.z) ||
      !(b.mask.empty() || b.mask.size() == lanes_) || static_cast<unsigned>(b.op) >= kVpuOpCount ||
      vpu_op_is_xcend(b.op)) {  // the transcendental ops are tpu_vpu_xcend's, not tpu_vpu's
    throw std::invalid_argument("VpuModel::step: malformed beat");
  }
  const auto lane_of = [](const std::vector<uint32_t>& v, std::size_t l) {
    return v.empty() ? 0u : v[l];
  };

  if (!vpu_op_is_reduction(b.op)) {
    VpuResult r;
    r.data.resize(lanes_);
    for (std::size_t l = 0; l < lanes_; ++l) {
      r.data[l] = vpu_lane(b.op, b.x[l], lane_of(b.y, l), lane_of(b.z, l), b.src_bf16, b.dst_bf16);
    }
    return r;
  }

  if (b.first ? red_active_ : (!red_active_ || b.op != red_op_)) {
    throw std::invalid_argument("VpuModel::step: reduction beat outside its group");
  }
  const float id = reduction_identity(b.op);
  for (std::size_t l = 0; l < lanes_; ++l) {
    const bool on = b.mask.empty() || b.mask[l];
    const float x = on ? widen(b.x[l], (b.src_bf16 & kVpuSrcBf16X) != 0) : id;
    acc_[l] = reduction_step(b.op, b.first ? id : acc_[l], x);
  }
  red_active_ = !b.last;
  red_op_ = b.op;
  if (!b.last) return std::nullopt;

  const float root = reduce_tree(b.op, acc_);
  VpuResult r;
  r.scalar = true;
  r.data.assign(lanes_, 0u);
  r.data[0] = b.dst_bf16 ? f32_to_bf16(root) : f32_bits(canonicalize(root));
  return r;
}

}  // namespace tpu
