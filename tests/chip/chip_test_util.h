// What the chip tests share: random bf16 operands of moderate magnitude.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {

// n bf16 values with a random sign, exponent within 2^-4 .. 2^4 and mantissa: products and
// sums stay far from overflow and underflow, so the tests exercise rounding, not specials.
inline std::vector<bf16_t> random_bf16(std::size_t n, std::mt19937_64& rng) {
  std::vector<bf16_t> v(n);
  for (auto& x : v) {
    const auto sign = static_cast<uint16_t>((rng() & 1u) << 15);
    const auto e = static_cast<uint16_t>(127 - 4 + rng() % 9);
    x = static_cast<bf16_t>(sign | (e << 7) | (rng() & 0x7Fu));
  }
  return v;
}

}  // namespace tpu
