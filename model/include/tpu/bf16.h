// Golden bf16/f32 numerics, exactly as docs/numerics.md (and DESIGN.md) define them.
// Every RTL result is compared bit for bit against these functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tpu {

using bf16_t = uint16_t;  // bfloat16 (1-8-7) held as raw bits

constexpr bf16_t kBf16CanonNan = 0x7FC0;
constexpr uint32_t kF32CanonNan = 0x7FC00000u;

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// f32 -> bf16: round to nearest, ties to even; overflow gives Inf; any NaN becomes 0x7FC0.
bf16_t f32_to_bf16(float f);

// bf16 -> f32: exact.
inline float bf16_to_f32(bf16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// Any NaN becomes the canonical quiet NaN 0x7FC00000; every other value passes unchanged.
float canonicalize(float f);

// One MXU step: fmaf(a, w, acc) with a single rounding (RNE), subnormals honoured, NaN canonical.
float mac(bf16_t a, bf16_t w, float acc);

// n values drawn from N(0, sigma^2) by `rng` (std::normal_distribution on std::mt19937_64),
// rounded to bf16: the random operands of tools, benches and tests.
std::vector<bf16_t> random_bf16(std::mt19937_64& rng, std::size_t n, float sigma = 1.0f);

}  // namespace tpu
