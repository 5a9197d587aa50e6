// The command words the pins of tests/pod hash: a chip command's four words, with a VPU
// command's op put back where it was when the pins were taken. The op moved from w0[7:4] (4
// bits) to w3[28:24] (5 bits) when the transcendental ops came (issue 34,
// configs/tpu_contract.yaml); the pins were computed by the hand-written programs before that,
// so hashing the words with the op at its old place keeps them naming those programs. An op
// above 15 has no old place and is hashed where it is (no pinned program has one).
#pragma once

#include <array>
#include <cstdint>

#include "tpu_contract.h"

namespace tpu {

inline std::array<uint32_t, 4> pinned_words(const ChipCmd& c) {
  std::array<uint32_t, 4> w = c.w;
  const uint32_t op = (w[3] >> 24) & 0x1Fu;
  if ((w[0] & 0xFu) == static_cast<uint32_t>(ChipOp::kVpu) && op < 16 &&
      ((w[0] >> 4) & 0xFu) == 0) {
    w[0] |= op << 4;
    w[3] &= ~(0x1Fu << 24);
  }
  return w;
}

}  // namespace tpu
