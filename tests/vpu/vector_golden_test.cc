// The golden vector ops (model/src/vector.cc) on their own: the documented semantics written
// out as constants, the reduction order, and the beat-level model's protocol checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tpu/vector.h"

namespace tpu {
namespace {

uint32_t bits(float f) { return f32_bits(f); }
const float kNZ = f32_from_bits(0x80000000u);
const float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kSNanNeg = f32_from_bits(0xFF800001u);

TEST(VectorGolden, MaximumMinimumSignedZerosAndNaN) {
  EXPECT_EQ(bits(f32_maximum(kNZ, 0.0f)), 0x00000000u);
  EXPECT_EQ(bits(f32_maximum(0.0f, kNZ)), 0x00000000u);
  EXPECT_EQ(bits(f32_minimum(kNZ, 0.0f)), 0x80000000u);
  EXPECT_EQ(bits(f32_minimum(0.0f, kNZ)), 0x80000000u);
  EXPECT_EQ(bits(f32_maximum(kSNanNeg, 1.0f)), kF32CanonNan);
  EXPECT_EQ(bits(f32_minimum(1.0f, kNan)), kF32CanonNan);
  EXPECT_EQ(f32_maximum(-kInf, -3.0f), -3.0f);
  EXPECT_EQ(f32_minimum(kInf, 3.0f), 3.0f);
}

TEST(VectorGolden, Relu) {
  EXPECT_EQ(bits(f32_relu(kNZ)), 0x00000000u);
  EXPECT_EQ(bits(f32_relu(-1e-45f)), 0x00000000u);
  EXPECT_EQ(bits(f32_relu(f32_from_bits(1))), 1u);
  EXPECT_EQ(bits(f32_relu(kSNanNeg)), kF32CanonNan);
  EXPECT_EQ(f32_relu(2.5f), 2.5f);
}

TEST(VectorGolden, ArithmeticCanonicalisesNaN) {
  EXPECT_EQ(bits(f32_add(kInf, -kInf)), kF32CanonNan);
  EXPECT_EQ(bits(f32_mul(0.0f, kInf)), kF32CanonNan);
  EXPECT_EQ(bits(f32_sub(kSNanNeg, 1.0f)), kF32CanonNan);
  EXPECT_EQ(bits(f32_fma(1.0f + 0x1p-12f, 1.0f + 0x1p-12f, -(1.0f + 0x1p-11f))), bits(0x1p-24f));
}

TEST(VectorGolden, LaneFlags) {
  // bf16 sources read bits [15:0] only; dst_bf16 rounds the f32 result to bf16 in [15:0].
  EXPECT_EQ(vpu_lane(VpuOp::kAdd, 0xFFFF3F80u, 0x12343F80u, 0, kVpuSrcBf16X | kVpuSrcBf16Y),
            0x40000000u);
  EXPECT_EQ(vpu_lane(VpuOp::kMul, 0x3F808000u, 0x3F800000u, 0, 0, true), 0x3F80u);  // tie: even
  EXPECT_EQ(vpu_lane(VpuOp::kCvtF32Bf16, 0x3F818000u, 0, 0), 0x3F82u);  // tie: up to even
  EXPECT_EQ(vpu_lane(VpuOp::kCvtBf16F32, 0xABCD7F81u, 0, 0), kF32CanonNan);
  EXPECT_EQ(vpu_lane(VpuOp::kFma, 0x40000000u, 0x40400000u, 0x3F800000u), 0x40E00000u);  // 7
  EXPECT_THROW(vpu_lane(VpuOp::kRedSum, 0, 0, 0), std::invalid_argument);
}

// vpu_op_operands says which operands an op reads (tpusim vpu asks for --y by it): the lane
// result of a 1-operand op ignores y and z, of a 2-operand op ignores z, and each declared
// operand changes the result somewhere. Reductions are whole-vector ops and count x alone.
TEST(VectorGolden, OperandCountsMatchWhatTheLaneReads) {
  const uint32_t xs[] = {bits(1.5f), bits(-2.0f), bits(5.0f), 0x3F818000u};
  const uint32_t ys[] = {bits(2.0f), bits(3.0f), bits(-0.25f)};
  const uint32_t zs[] = {bits(0.0f), bits(7.0f)};
  int named = 0;
  for (uint32_t v = 0; v < kVpuOpCount; ++v) {
    const auto op = static_cast<VpuOp>(v);
    if (std::string(vpu_op_name(op)) == "unknown") continue;
    ++named;
    const int n = vpu_op_operands(op);
    ASSERT_GE(n, 1) << vpu_op_name(op);
    ASSERT_LE(n, 3) << vpu_op_name(op);
    if (vpu_op_is_reduction(op)) {
      EXPECT_EQ(n, 1) << vpu_op_name(op);
      continue;
    }
    bool y_matters = false, z_matters = false;
    for (const uint32_t x : xs)
      for (const uint32_t y : ys)
        for (const uint32_t z : zs) {
          const uint32_t r = vpu_lane(op, x, y, z);
          y_matters = y_matters || r != vpu_lane(op, x, ys[0], z);
          z_matters = z_matters || r != vpu_lane(op, x, y, zs[0]);
        }
    EXPECT_EQ(y_matters, n >= 2) << vpu_op_name(op);
    EXPECT_EQ(z_matters, n >= 3) << vpu_op_name(op);
  }
  EXPECT_GE(named, 13);
}

TEST(VectorGolden, PackTwoBf16AndReadTheUpperOneBack) {
  // x rounded into [15:0], y into [31:16]; dst_bf16 changes nothing; NaN canonical.
  EXPECT_EQ(vpu_lane(VpuOp::kPackBf16, 0x3F818000u, 0xC0000001u, 0), 0xC0003F82u);
  EXPECT_EQ(vpu_lane(VpuOp::kPackBf16, 0x3F818000u, 0xC0000001u, 0, 0, true), 0xC0003F82u);
  EXPECT_EQ(vpu_lane(VpuOp::kPackBf16, 0x7F800001u, 0x7F7FFFFFu, 0), 0x7F807FC0u);
  // bf16 sources are widened first (exact), so they pack unchanged.
  EXPECT_EQ(vpu_lane(VpuOp::kPackBf16, 0xFFFF1234u, 0xEEEE8001u, 0, kVpuSrcBf16X | kVpuSrcBf16Y),
            0x80011234u);
  // The upper bf16 back: widened exactly, or with dst_bf16 the bf16 itself in [15:0].
  EXPECT_EQ(vpu_lane(VpuOp::kCvtBf16HiF32, 0xC0003F82u, 0, 0), 0xC0000000u);
  EXPECT_EQ(vpu_lane(VpuOp::kCvtBf16HiF32, 0xC0003F82u, 0, 0, 0, true), 0xC000u);
  EXPECT_EQ(vpu_lane(VpuOp::kCvtBf16HiF32, 0x7F811234u, 0, 0), kF32CanonNan);
  // Every bf16 pair survives pack -> (lower: cvt_bf16_f32, upper: cvt_bf16hi_f32) -> bf16.
  for (uint32_t lo = 0; lo < 0x10000; lo += 251)
    for (uint32_t hi = 0; hi < 0x10000; hi += 257) {
      const uint32_t w = vpu_lane(VpuOp::kPackBf16, lo << 16, hi << 16, 0);
      const bool lo_nan = (lo & 0x7FFF) > 0x7F80, hi_nan = (hi & 0x7FFF) > 0x7F80;
      EXPECT_EQ(vpu_lane(VpuOp::kCvtBf16F32, w, 0, 0, 0, true), lo_nan ? 0x7FC0u : lo);
      EXPECT_EQ(vpu_lane(VpuOp::kCvtBf16HiF32, w, 0, 0, 0, true), hi_nan ? 0x7FC0u : hi);
    }
}

TEST(VectorGolden, WholeVectorOps) {
  EXPECT_EQ(vector_elementwise(VpuOp::kSub, {3.0f, 1.0f}, {1.0f, 4.0f}),
            (std::vector<float>{2.0f, -3.0f}));
  EXPECT_EQ(vector_elementwise(VpuOp::kRelu, {-3.0f, 1.0f}), (std::vector<float>{0.0f, 1.0f}));
  EXPECT_THROW(vector_elementwise(VpuOp::kAdd, {1.0f}, {}), std::invalid_argument);
  EXPECT_THROW(vector_elementwise(VpuOp::kRedMax, {1.0f}), std::invalid_argument);
  EXPECT_EQ(vector_to_bf16({1.0f, 3.4028235e38f}), (std::vector<bf16_t>{0x3F80, 0x7F80}));
  EXPECT_EQ(bits(vector_from_bf16({0x7F81})[0]), kF32CanonNan);
}

TEST(VectorGolden, ReductionOrder) {
  // Pairwise tree over lanes: [2^24, 1, 1, 1] on 4 lanes = (2^24 + 1) + (1 + 1) = 2^24 + 2,
  // where a left-to-right sum gives 2^24.
  EXPECT_EQ(vector_reduce(VpuOp::kRedSum, {16777216.0f, 1.0f, 1.0f, 1.0f}, 4), 16777218.0f);
  // Lane-wise across beats first: lane 1 holds 1 + 1 + 1 = 3, then 2^24 + 3 -> 2^24 + 4.
  std::vector<float> v(10, 0.0f);
  v[0] = 16777216.0f;
  v[1] = v[5] = v[9] = 1.0f;
  EXPECT_EQ(vector_reduce(VpuOp::kRedSum, v, 4), 16777220.0f);
  // Identities of empty reductions.
  EXPECT_EQ(bits(vector_reduce(VpuOp::kRedSum, {}, 8)), 0x80000000u);
  EXPECT_EQ(bits(vector_reduce(VpuOp::kRedMax, {}, 8)), 0xFF800000u);
  EXPECT_EQ(vector_reduce(VpuOp::kRedMax, {1.0f, 7.0f, -2.0f}, 2), 7.0f);
  EXPECT_THROW(vector_reduce(VpuOp::kRedSum, {1.0f}, 3), std::invalid_argument);
  EXPECT_THROW(vector_reduce(VpuOp::kAdd, {1.0f}, 4), std::invalid_argument);
}

TEST(VectorGolden, ModelMatchesWholeVectorReduceAndChecksGroups) {
  VpuModel m(4);
  const std::vector<float> v = {1.5f, -2.25f, 1e-40f, 3.0f, 1e30f, -1e30f, 0.125f};
  VpuBeat b0, b1;
  b0.op = b1.op = VpuOp::kRedSum;
  b0.first = true;
  b0.last = false;
  b1.first = false;
  b1.last = true;
  for (std::size_t l = 0; l < 4; ++l) {
    b0.x.push_back(bits(v[l]));
    b1.x.push_back(l + 4 < v.size() ? bits(v[l + 4]) : 0x7FC00000u);  // masked filler
    b1.mask.push_back(l + 4 < v.size());
  }
  EXPECT_FALSE(m.step(b0).has_value());
  const auto r = m.step(b1);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->scalar);
  EXPECT_EQ(r->data[0], bits(vector_reduce(VpuOp::kRedSum, v, 4)));
  EXPECT_EQ(r->data[1], 0u);
  // A continuing beat with no open group, and a group opened twice, are protocol errors.
  EXPECT_THROW(m.step(b1), std::invalid_argument);
  EXPECT_FALSE(m.step(b0).has_value());
  EXPECT_THROW(m.step(b0), std::invalid_argument);
  EXPECT_THROW(VpuModel(6), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
