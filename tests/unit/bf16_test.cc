// f32 <-> bf16 conversions against hand-derived edge cases, a value-based reference written here,
// and Eigen's independent Eigen::bfloat16.
#include "tpu/bf16.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>

namespace tpu {
namespace {

// Value of a bf16 bit pattern, decoded field by field (not by shifting into an f32).
double bf16_value(uint32_t b) {
  const int e = static_cast<int>((b >> 7) & 0xFF);
  const double m = static_cast<double>(b & 0x7F);
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 0xFF) return m == 0 ? sign * HUGE_VAL : std::nan("");
  if (e == 0) return sign * std::ldexp(m, -133);  // subnormal: m * 2^-126 * 2^-7
  return sign * std::ldexp(128.0 + m, e - 134);   // (1 + m/128) * 2^(e-127)
}

// Reference f32 -> bf16 by value: of the two bf16 neighbours of |x|, pick the nearer, and on a
// tie the one with an even last mantissa bit. Past the largest finite bf16 the upper neighbour
// is Inf, which rounding treats as 2^128 (IEEE overflow rule).
uint16_t ref_f32_to_bf16(uint32_t u) {
  const float f = f32_from_bits(u);
  if (std::isnan(f)) return 0x7FC0;
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t mag = u & 0x7FFFFFFF;
  if (mag == 0x7F800000) return static_cast<uint16_t>(sign | 0x7F80);
  const double x = std::fabs(static_cast<double>(f));
  const uint32_t lo = mag >> 16;  // the bf16 at or below |x|
  const uint32_t hi = lo + 1;     // the next one up (0x7F80 = Inf)
  const double lo_v = bf16_value(lo);
  const double hi_v = hi == 0x7F80 ? std::ldexp(1.0, 128) : bf16_value(hi);
  EXPECT_LE(lo_v, x);
  EXPECT_LT(x, hi_v);
  const double d_lo = x - lo_v, d_hi = hi_v - x;  // both exact in double
  uint32_t r;
  if (d_lo < d_hi) {
    r = lo;
  } else if (d_hi < d_lo) {
    r = hi;
  } else {
    r = (lo & 1) ? hi : lo;
  }
  return static_cast<uint16_t>(sign | r);
}

uint16_t eigen_f32_to_bf16(float f) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f));
}

std::string hex(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Checks one f32 pattern against both references; returns false (after one failure message) on a
// mismatch so sweeps can stop early instead of flooding the log.
bool check_one(uint32_t u, bool with_value_ref) {
  const float f = f32_from_bits(u);
  const uint16_t got = f32_to_bf16(f);
  const uint16_t eig = eigen_f32_to_bf16(f);
  if (std::isnan(f)) {
    // Eigen keeps the NaN's sign (0xFFC0 for negative NaNs); the contract is always 0x7FC0.
    if (got != kBf16CanonNan || !std::isnan(bf16_to_f32(eig))) {
      ADD_FAILURE() << "NaN input " << hex(u) << ": got " << hex(got) << ", Eigen " << hex(eig);
      return false;
    }
    return true;
  }
  if (got != eig) {
    ADD_FAILURE() << "input " << hex(u) << ": got " << hex(got) << ", Eigen " << hex(eig);
    return false;
  }
  if (with_value_ref) {
    const uint16_t ref = ref_f32_to_bf16(u);
    if (got != ref) {
      ADD_FAILURE() << "input " << hex(u) << ": got " << hex(got) << ", value reference "
                    << hex(ref);
      return false;
    }
  }
  return true;
}

uint16_t conv(uint32_t u) { return f32_to_bf16(f32_from_bits(u)); }

TEST(Bf16Convert, SignedZerosAndInfinities) {
  EXPECT_EQ(conv(0x00000000), 0x0000);
  EXPECT_EQ(conv(0x80000000), 0x8000);
  EXPECT_EQ(conv(0x7F800000), 0x7F80);
  EXPECT_EQ(conv(0xFF800000), 0xFF80);
}

TEST(Bf16Convert, ExactValuesPassUnchanged) {
  EXPECT_EQ(conv(0x3F800000), 0x3F80);  // 1.0
  EXPECT_EQ(conv(0xC0490000), 0xC049);  // -3.140625
  EXPECT_EQ(conv(0x7F7F0000), 0x7F7F);  // largest finite bf16
  EXPECT_EQ(conv(0x00800000), 0x0080);  // smallest normal
}

TEST(Bf16Convert, TiesRoundToEvenBothWays) {
  // 1 + 2^-8 lies halfway between 1.0 (0x3F80, even) and 1 + 2^-7 (0x3F81, odd): down.
  EXPECT_EQ(conv(0x3F808000), 0x3F80);
  // 1 + 3*2^-8 lies halfway between 0x3F81 (odd) and 0x3F82 (even): up.
  EXPECT_EQ(conv(0x3F818000), 0x3F82);
  EXPECT_EQ(conv(0xBF808000), 0xBF80);  // the same with the sign set
  EXPECT_EQ(conv(0xBF818000), 0xBF82);
  // One unit either side of a tie decides it regardless of evenness.
  EXPECT_EQ(conv(0x3F808001), 0x3F81);
  EXPECT_EQ(conv(0x3F807FFF), 0x3F80);
  EXPECT_EQ(conv(0x3F818001), 0x3F82);
  EXPECT_EQ(conv(0x3F817FFF), 0x3F81);
}

TEST(Bf16Convert, MantissaCarryBumpsExponent) {
  EXPECT_EQ(conv(0x3FFF8000), 0x4000);  // 1.99609375 + half ulp (odd, tie) -> 2.0
  EXPECT_EQ(conv(0x3FFFFFFF), 0x4000);  // just below 2.0 -> 2.0
  EXPECT_EQ(conv(0xBFFFC000), 0xC000);
  EXPECT_EQ(bf16_to_f32(conv(0x3FFFFFFF)), 2.0f);
}

TEST(Bf16Convert, OverflowGivesInfinity) {
  EXPECT_EQ(conv(0x7F7FFFFF), 0x7F80);  // FLT_MAX rounds up past the largest bf16
  EXPECT_EQ(conv(0xFF7FFFFF), 0xFF80);
  // The largest bf16 (odd mantissa) plus half an ulp is a tie: to even, which is Inf.
  EXPECT_EQ(conv(0x7F7F8000), 0x7F80);
  EXPECT_EQ(conv(0xFF7F8000), 0xFF80);
}

TEST(Bf16Convert, JustBelowOverflowRoundsToLargestFinite) {
  EXPECT_EQ(conv(0x7F7F7FFF), 0x7F7F);
  EXPECT_EQ(conv(0xFF7F7FFF), 0xFF7F);
  EXPECT_EQ(conv(0x7F7F0001), 0x7F7F);
  EXPECT_EQ(bf16_to_f32(0x7F7F), std::ldexp(255.0f, 120));  // (2 - 2^-7) * 2^127
}

TEST(Bf16Convert, EveryNaNBecomesCanonical) {
  const uint32_t nans[] = {0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7F810000, 0x7F808000,
                           0xFFC00000, 0xFF800001, 0xFFFFFFFF, 0x7FA00000, 0xFFBFFFFF};
  for (uint32_t u : nans) EXPECT_EQ(conv(u), kBf16CanonNan) << hex(u);
  // Every NaN payload that survives into the upper 16 bits, both signs, plus low-bit payloads.
  for (uint32_t hi = 0x7F81; hi <= 0x7FFF; ++hi) {
    for (uint32_t s : {0u, 0x80000000u}) {
      ASSERT_EQ(conv(s | hi << 16), kBf16CanonNan) << hex(s | hi << 16);
      ASSERT_EQ(conv(s | hi << 16 | 0xFFFF), kBf16CanonNan);
    }
  }
  for (uint32_t lo = 1; lo <= 0xFFFF; ++lo) ASSERT_EQ(conv(0x7F800000 | lo), kBf16CanonNan);
}

TEST(Bf16Convert, SubnormalsRoundIntoBf16SubnormalsOrZero) {
  EXPECT_EQ(conv(0x00000001), 0x0000);  // 2^-149: far below half the smallest bf16 subnormal
  EXPECT_EQ(conv(0x80000001), 0x8000);  // ... keeps its sign
  EXPECT_EQ(conv(0x00008000), 0x0000);  // exactly half of 2^-133: tie to even (zero)
  EXPECT_EQ(conv(0x00008001), 0x0001);  // just over half: the smallest bf16 subnormal
  EXPECT_EQ(conv(0x00010000), 0x0001);  // exactly 2^-133
  EXPECT_EQ(conv(0x00018000), 0x0002);  // 1.5 * 2^-133: tie, 0x0001 is odd -> up
  EXPECT_EQ(conv(0x00028000), 0x0002);  // 2.5 * 2^-133: tie, 0x0002 is even -> down
  EXPECT_EQ(conv(0x007FFFFF), 0x0080);  // largest f32 subnormal carries into the smallest normal
  EXPECT_EQ(conv(0x807F7FFF), 0x807F);  // largest bf16 subnormal, negative
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_to_f32(0x8001), -std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_to_f32(0x007F), std::ldexp(127.0f, -133));
}

TEST(Bf16Convert, EigenReferenceIsRoundToNearestEven) {
  // The cross-checks below lean on Eigen; make sure it rounds the way the contract says.
  EXPECT_EQ(eigen_f32_to_bf16(f32_from_bits(0x3F808000)), 0x3F80);
  EXPECT_EQ(eigen_f32_to_bf16(f32_from_bits(0x3F818000)), 0x3F82);
  EXPECT_EQ(eigen_f32_to_bf16(f32_from_bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(eigen_f32_to_bf16(f32_from_bits(0x7F7FFFFF)), 0x7F80);
  EXPECT_EQ(eigen_f32_to_bf16(f32_from_bits(0x00008001)), 0x0001);
  EXPECT_TRUE(std::isnan(static_cast<float>(Eigen::bfloat16(std::nanf("")))));
}

TEST(Bf16Convert, ValueReferenceAgreesWithHandCases) {
  // The value-based reference must itself get the hand-derived cases right.
  EXPECT_EQ(ref_f32_to_bf16(0x3F808000), 0x3F80);
  EXPECT_EQ(ref_f32_to_bf16(0x3F818000), 0x3F82);
  EXPECT_EQ(ref_f32_to_bf16(0x7F7F8000), 0x7F80);
  EXPECT_EQ(ref_f32_to_bf16(0x7F7F7FFF), 0x7F7F);
  EXPECT_EQ(ref_f32_to_bf16(0x00008000), 0x0000);
  EXPECT_EQ(ref_f32_to_bf16(0x807FFFFF), 0x8080);
}

// Every bf16 high half, each with the low halves that decide rounding (zero, one, either side of
// the halfway point, all ones) plus random ones: ~2.6 M patterns against both references.
TEST(Bf16Convert, AllHighHalvesWithStructuredLowHalves) {
  std::vector<uint32_t> lows = {0x0000, 0x0001, 0x0002, 0x3FFF, 0x4000, 0x7FFE, 0x7FFF,
                                0x8000, 0x8001, 0x8002, 0xBFFF, 0xC000, 0xFFFE, 0xFFFF};
  std::mt19937 rng(12345);
  while (lows.size() < 40) lows.push_back(rng() & 0xFFFF);
  for (uint32_t hi = 0; hi <= 0xFFFF; ++hi) {
    for (uint32_t lo : lows) {
      if (!check_one(hi << 16 | lo, true)) return;
    }
  }
}

// A stride through the whole 2^32 space (the stride is odd, so low halves of every value appear)
// plus random patterns, against both references. Unoptimised (sanitizer) builds take a sparser
// stride to stay within the unit suite's time budget.
TEST(Bf16Convert, StrideAndRandomSweep) {
#ifdef NDEBUG
  constexpr uint64_t kStride = 127;  // ~34 M patterns
#else
  constexpr uint64_t kStride = 1021;  // ~4 M patterns
#endif
  for (uint64_t i = 0; i < (uint64_t{1} << 32); i += kStride) {
    if (!check_one(static_cast<uint32_t>(i), true)) return;
  }
  std::mt19937 rng(777);
  for (int i = 0; i < 8'000'000; ++i) {
    if (!check_one(static_cast<uint32_t>(rng()), true)) return;
  }
}

// All 2^32 patterns against Eigen. Takes a while: label soak (ctest -L soak, or
// scripts/test.sh --soak), not in the default run.
TEST(Bf16Convert, ExhaustiveAgainstEigen) {
  for (uint64_t i = 0; i < (uint64_t{1} << 32); ++i) {
    if (!check_one(static_cast<uint32_t>(i), false)) return;
  }
}

// bf16 -> f32 for all 2^16 patterns: the same bits in the upper half of the f32, matching both
// the field-by-field value and Eigen's widening; and f32 -> bf16 brings every non-NaN back.
TEST(Bf16Widen, AllPatternsExact) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = bf16_to_f32(h);
    ASSERT_EQ(f32_bits(f), b << 16) << hex(b);
    const float eig = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(h));
    const double v = bf16_value(b);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(f)) << hex(b);
      ASSERT_TRUE(std::isnan(eig)) << hex(b);
      ASSERT_EQ(f32_to_bf16(f), kBf16CanonNan) << hex(b);
    } else {
      ASSERT_EQ(static_cast<double>(f), v) << hex(b);
      ASSERT_EQ(f32_bits(eig), f32_bits(f)) << hex(b);
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << hex(b);  // distinguishes -0 from +0
      ASSERT_EQ(f32_to_bf16(f), h) << hex(b);
    }
  }
}

TEST(Bf16Canonicalize, OnlyNaNsChange) {
  EXPECT_EQ(f32_bits(canonicalize(f32_from_bits(0xFFFFFFFF))), kF32CanonNan);
  EXPECT_EQ(f32_bits(canonicalize(f32_from_bits(0x7F800001))), kF32CanonNan);
  EXPECT_EQ(f32_bits(canonicalize(f32_from_bits(0xFFC00000))), kF32CanonNan);
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x00000001u, 0x7F7FFFFFu,
                     0x3F800000u, 0x807FFFFFu}) {
    EXPECT_EQ(f32_bits(canonicalize(f32_from_bits(u))), u) << hex(u);
  }
}

}  // namespace
}  // namespace tpu
