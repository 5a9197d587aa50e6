// tpu::mac (one MXU step) against an exact reference that does not use fmaf: the bf16 x bf16
// product is exact in double, two-sum gives the exact sum as double + error, and a careful final
// rounding to f32 resolves the ties that a plain double -> float conversion would double-round.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>

#include "tpu/bf16.h"

namespace tpu {
namespace {

std::string hex(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Round the exact value s + e (|e| <= half an ulp of s in double, as two-sum guarantees) to f32,
// nearest-even, with IEEE overflow to Inf.
float round_to_f32(double s, double e) {
  const double kOverflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);  // FLT_MAX + half ulp
  const double mag = std::fabs(s);
  if (mag > kOverflow || (mag == kOverflow && (e == 0 || std::signbit(e) == std::signbit(s)))) {
    return std::copysign(HUGE_VALF, static_cast<float>(s));
  }
  if (mag == kOverflow) return std::copysign(FLT_MAX, static_cast<float>(s));  // e pulls it back
  const float f = static_cast<float>(s);
  if (static_cast<double>(f) == s) return f;  // s is an f32; |e| is far below half its ulp
  const float g = std::nextafter(f, s > static_cast<double>(f) ? HUGE_VALF : -HUGE_VALF);
  const double d_f = std::fabs(s - static_cast<double>(f));  // exact: s lies between f and g
  const double d_g = std::fabs(static_cast<double>(g) - s);
  if (d_f != d_g) return d_f < d_g ? f : g;       // not a midpoint, and e cannot make it one
  if (e != 0) return (e > 0) == (g > f) ? g : f;  // past the midpoint, towards e
  return (f32_bits(f) & 1) ? g : f;               // exact tie: even mantissa
}

// The exact fused a*w + acc, rounded once, with the contract's NaN rule.
float ref_mac(bf16_t a, bf16_t w, float acc) {
  const double da = static_cast<double>(bf16_to_f32(a));
  const double dw = static_cast<double>(bf16_to_f32(w));
  const double p = da * dw;  // 8-bit x 8-bit significands, exponents within double range: exact
  const double c = static_cast<double>(acc);
  const double s = p + c;
  if (std::isnan(s)) return f32_from_bits(kF32CanonNan);
  if (std::isinf(p) || std::isinf(c)) return static_cast<float>(s);  // Inf +/- finite, same sign
  // Two-sum (Knuth): s + e == p + c exactly.
  const double bb = s - p;
  const double e = (p - (s - bb)) + (c - bb);
  return round_to_f32(s, e);
}

bool same_bits(float x, float y) { return f32_bits(x) == f32_bits(y); }

// bf16 with a random sign and mantissa and an exponent field in [lo, hi].
bf16_t rand_bf16(std::mt19937& rng, int lo, int hi) {
  const uint32_t e = static_cast<uint32_t>(lo + static_cast<int>(rng() % (hi - lo + 1)));
  return static_cast<bf16_t>((rng() & 0x8000) | (e << 7) | (rng() & 0x7F));
}

float rand_f32(std::mt19937& rng, int lo, int hi) {
  const uint32_t e = static_cast<uint32_t>(lo + static_cast<int>(rng() % (hi - lo + 1)));
  return f32_from_bits((rng() & 0x80000000u) | (e << 23) | (rng() & 0x7FFFFF));
}

TEST(MacReference, HandCases) {
  // The reference must get ties and overflow right on its own before it judges mac().
  EXPECT_EQ(round_to_f32(1.0 + std::ldexp(1.0, -24), 0.0), 1.0f);  // tie -> even (down)
  EXPECT_EQ(round_to_f32(1.0 + std::ldexp(1.0, -24), 1e-300), 1.0f + FLT_EPSILON);
  EXPECT_EQ(round_to_f32(1.0 + 3 * std::ldexp(1.0, -24), 0.0), 1.0f + 2 * FLT_EPSILON);
  EXPECT_EQ(round_to_f32(1.0 + 3 * std::ldexp(1.0, -24), -1e-300), 1.0f + FLT_EPSILON);
  const double ovf = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  EXPECT_EQ(round_to_f32(ovf, 0.0), HUGE_VALF);
  EXPECT_EQ(round_to_f32(ovf, -1.0), FLT_MAX);
  EXPECT_EQ(round_to_f32(-ovf, 1.0), -FLT_MAX);
  EXPECT_EQ(round_to_f32(std::ldexp(1.0, -150), 0.0), 0.0f);  // tie with zero (even)
  EXPECT_EQ(round_to_f32(std::ldexp(1.0, -150), 1e-310), std::ldexp(1.0f, -149));
}

TEST(Mac, SingleRoundingNotMultiplyThenAdd) {
  // a*w = 2^-150 is half the smallest f32 subnormal. Fused: 2^-149 + 2^-150 is a tie between
  // 2^-149 (odd) and 2^-148 (even) -> 2^-148. Rounding the product first would give 0 (tie to
  // even) and then 2^-149. This also fails under flush-to-zero.
  const bf16_t a = f32_to_bf16(std::ldexp(1.0f, -75));
  const float acc = std::ldexp(1.0f, -149);
  EXPECT_EQ(mac(a, a, acc), std::ldexp(1.0f, -148));
  EXPECT_EQ(ref_mac(a, a, acc), std::ldexp(1.0f, -148));
}

TEST(Mac, SubnormalsAreHonoured) {
  const bf16_t a = f32_to_bf16(std::ldexp(1.0f, -70));
  EXPECT_EQ(f32_bits(mac(a, a, 0.0f)), 0x00000200u);  // 2^-140
  const bf16_t sub = 0x0001;                          // 2^-133, a bf16 subnormal input
  EXPECT_EQ(mac(sub, 0x3F80, 0.0f), std::ldexp(1.0f, -133));
  EXPECT_EQ(mac(sub, sub, std::ldexp(1.0f, -149)), std::ldexp(1.0f, -149));  // 2^-266 vanishes
  // An exact result too small for f32 rounds to a zero of its own sign, whatever acc's zero is.
  EXPECT_EQ(f32_bits(mac(0x8001, sub, 0.0f)), 0x80000000u);   // -2^-266 + +0 -> -0
  EXPECT_EQ(f32_bits(mac(0x0001, sub, -0.0f)), 0x00000000u);  // +2^-266 + -0 -> +0
  EXPECT_EQ(f32_bits(mac(0x8000, sub, 0.0f)), 0x00000000u);   // exact -0 + +0 -> +0
}

TEST(Mac, NaNResultsAreCanonical) {
  const bf16_t inf = 0x7F80, ninf = 0xFF80, one = 0x3F80, zero = 0x0000;
  EXPECT_EQ(f32_bits(mac(inf, zero, 1.0f)), kF32CanonNan);       // Inf * 0
  EXPECT_EQ(f32_bits(mac(zero, ninf, 1.0f)), kF32CanonNan);      // 0 * -Inf
  EXPECT_EQ(f32_bits(mac(inf, one, -HUGE_VALF)), kF32CanonNan);  // Inf - Inf
  EXPECT_EQ(f32_bits(mac(one, one, f32_from_bits(0xFFFFFFFF))), kF32CanonNan);
  EXPECT_EQ(f32_bits(mac(one, one, f32_from_bits(0x7F800001))), kF32CanonNan);
  EXPECT_EQ(mac(inf, one, HUGE_VALF), HUGE_VALF);  // Inf + Inf is not NaN
  EXPECT_EQ(mac(ninf, one, 1.0f), -HUGE_VALF);
  for (uint32_t m = 1; m < 0x80; ++m) {  // every bf16 NaN, both signs, as either operand
    for (uint32_t s : {0u, 0x8000u}) {
      const bf16_t nan = static_cast<bf16_t>(s | 0x7F80 | m);
      ASSERT_EQ(f32_bits(mac(nan, one, 0.0f)), kF32CanonNan) << hex(nan);
      ASSERT_EQ(f32_bits(mac(one, nan, -1.0f)), kF32CanonNan) << hex(nan);
      ASSERT_EQ(f32_bits(mac(nan, zero, HUGE_VALF)), kF32CanonNan) << hex(nan);
    }
  }
}

TEST(Mac, OverflowGivesInfinity) {
  const bf16_t big = 0x7F7F;                     // largest finite bf16
  EXPECT_EQ(mac(big, 0x4000, 0.0f), HUGE_VALF);  // * 2
  EXPECT_EQ(mac(big, 0xC000, 0.0f), -HUGE_VALF);
  EXPECT_EQ(mac(big, 0x3F80, FLT_MAX), HUGE_VALF);
  EXPECT_EQ(mac(big, 0xBF80, FLT_MAX), FLT_MAX - bf16_to_f32(big));
}

// The K-padding rule in docs/numerics.md: a step with a = +0, w = -0 (or a = -0, w = +0) adds
// -0, which leaves every accumulator bit pattern unchanged, signed zeros included. Padding with
// +0 x +0 does not: it turns a -0 accumulator into +0.
TEST(Mac, NegativeZeroProductIsAnExactIdentity) {
  std::vector<uint32_t> accs = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x7F7FFFFF,
                                0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x3F800000, 0x807FFFFF};
  std::mt19937 rng(99);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    if (!std::isnan(f32_from_bits(u))) accs.push_back(u);
  }
  for (uint32_t u : accs) {
    const float x = f32_from_bits(u);
    ASSERT_EQ(f32_bits(mac(0x0000, 0x8000, x)), u) << hex(u);
    ASSERT_EQ(f32_bits(mac(0x8000, 0x0000, x)), u) << hex(u);
  }
  EXPECT_EQ(f32_bits(mac(0x0000, 0x0000, -0.0f)), 0x00000000u);  // +0 padding loses the sign
  EXPECT_EQ(f32_bits(mac(0x8000, 0x8000, -0.0f)), 0x00000000u);  // so does -0 x -0
}

// Random triples from several distributions, mac() against the exact reference, bit for bit
// (NaN by canonical bits), and against std::fmaf on the widened operands.
TEST(Mac, RandomTriplesMatchExactReference) {
  std::mt19937 rng(2024);
  int checked = 0, ties = 0, subnormal_results = 0;
  auto check = [&](bf16_t a, bf16_t w, float acc) {
    const float got = mac(a, w, acc);
    const float want = ref_mac(a, w, acc);
    ++checked;
    if (std::fpclassify(got) == FP_SUBNORMAL) ++subnormal_results;
    if (!same_bits(got, want)) {
      ADD_FAILURE() << "mac(" << hex(a) << ", " << hex(w) << ", " << hex(f32_bits(acc))
                    << ") = " << hex(f32_bits(got)) << ", exact reference " << hex(f32_bits(want));
      return false;
    }
    const float fm = std::fmaf(bf16_to_f32(a), bf16_to_f32(w), acc);
    if (!std::isnan(fm) && !same_bits(got, fm)) {
      ADD_FAILURE() << "differs from std::fmaf at " << hex(a) << " " << hex(w);
      return false;
    }
    return true;
  };
  // 1. Raw random bits: every class (NaN, Inf, zero, subnormal, normal) appears.
  for (int i = 0; i < 600000; ++i) {
    if (!check(static_cast<bf16_t>(rng()), static_cast<bf16_t>(rng()),
               f32_from_bits(static_cast<uint32_t>(rng())))) {
      return;
    }
  }
  // 2. Moderate magnitudes, acc within 2^+-30 of the product: every alignment of the addends.
  for (int i = 0; i < 800000; ++i) {
    const bf16_t a = rand_bf16(rng, 107, 147), w = rand_bf16(rng, 107, 147);
    const double p = static_cast<double>(bf16_to_f32(a)) * bf16_to_f32(w);
    int e;
    std::frexp(p, &e);
    if (!check(a, w, rand_f32(rng, std::max(1, e + 126 - 30), std::min(254, e + 126 + 30)))) return;
  }
  // 3. Cancellation: acc = -p (rounded) nudged by a few ulps, so the result has few bits left.
  for (int i = 0; i < 600000; ++i) {
    const bf16_t a = rand_bf16(rng, 60, 190), w = rand_bf16(rng, 60, 190);
    const float p = static_cast<float>(static_cast<double>(bf16_to_f32(a)) * bf16_to_f32(w));
    if (std::isinf(p)) continue;
    uint32_t u = f32_bits(-p);
    u += static_cast<uint32_t>(static_cast<int>(rng() % 9) - 4);
    if (!check(a, w, f32_from_bits(u))) return;
  }
  // 4. Near and below the subnormal range: products from 2^-170 to 2^-110 and tiny accumulators.
  for (int i = 0; i < 600000; ++i) {
    const bf16_t a = rand_bf16(rng, 1, 100), w = rand_bf16(rng, 1, 100);
    const float acc = (rng() & 1) ? f32_from_bits((rng() & 0x80000000u) | (rng() & 0x00FFFFFF))
                                  : rand_f32(rng, 0, 20);
    if (!check(a, w, acc)) return;
  }
  // 5. Exact ties: the product is a power of two equal to half an ulp of acc (or of the final
  //    result when acc's last bit is odd or the binade changes), or off it by a tiny amount.
  for (int i = 0; i < 600000; ++i) {
    const float acc = rand_f32(rng, 30, 220);
    int e;
    std::frexp(acc, &e);  // |acc| in [2^(e-1), 2^e); its ulp is 2^(e-24)
    const int half_ulp_exp = e - 25 + static_cast<int>(rng() % 3) - 1;
    const int ea = half_ulp_exp / 2;
    const int ew = half_ulp_exp - ea;
    const bf16_t a = static_cast<bf16_t>((rng() & 0x8000) | static_cast<uint32_t>(ea + 127) << 7);
    bf16_t w = static_cast<bf16_t>(static_cast<uint32_t>(ew + 127) << 7);
    if (rng() % 4 == 0) w = static_cast<bf16_t>(w | (rng() & 0x7F));  // near, not at, the tie
    const double p = static_cast<double>(bf16_to_f32(a)) * bf16_to_f32(w);
    const double s = p + acc;
    const float r = static_cast<float>(s);
    if (std::fabs(s - static_cast<double>(r)) == std::ldexp(1.0, half_ulp_exp)) ++ties;
    if (!check(a, w, acc)) return;
  }
  // 6. Overflow boundary: acc near FLT_MAX, products up to 2^128.
  for (int i = 0; i < 200000; ++i) {
    const bf16_t a = rand_bf16(rng, 200, 254), w = rand_bf16(rng, 100, 127);
    if (!check(a, w, rand_f32(rng, 250, 254))) return;
  }
  EXPECT_GT(ties, 20000) << "the tie distribution should hit real ties";
  EXPECT_GT(subnormal_results, 20000) << "the subnormal distribution should give subnormals";
  EXPECT_GT(checked, 3000000);
}

}  // namespace
}  // namespace tpu
