#include "tpu/bf16.h"

#include <cmath>

namespace tpu {

bf16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) return kBf16CanonNan;
  // Round to nearest even on the 16 dropped bits. A carry out of the mantissa bumps the
  // exponent, which is exactly right, and turns the largest finite values into Inf on overflow.
  const uint32_t lsb = (u >> 16) & 1u;
  const uint32_t rounded = u + 0x7FFFu + lsb;
  return static_cast<bf16_t>(rounded >> 16);
}

float canonicalize(float f) { return std::isnan(f) ? f32_from_bits(kF32CanonNan) : f; }

float mac(bf16_t a, bf16_t w, float acc) {
  // fmaf rounds a * w + acc once, with the exact product (a bf16 x bf16 product needs 16
  // significand bits), which is the MAC's definition; only NaN needs canonicalising.
  return canonicalize(std::fmaf(bf16_to_f32(a), bf16_to_f32(w), acc));
}

std::vector<bf16_t> random_bf16(std::mt19937_64& rng, std::size_t n, float sigma) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<bf16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(nd(rng));
  return v;
}

}  // namespace tpu
