// SplitMix64 (Steele, Lea, Flood 2014): the one 64-bit mixing function of the project, for
// seeds derived from seeds (per chip, per batch) and hash-like picks that must be reproducible.
#pragma once

#include <cstdint>

namespace tpu {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace tpu
