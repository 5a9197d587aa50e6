// The ranges that several options and configuration keys share, each written once: tpusim's and
// the benches' options (sw/tpusim/cli_util.h in_range) and the configuration loaders
// (sw/config/chip_config.cc) read them from here, so a flag and its YAML key never disagree on
// what a seed, a watchdog or a bit count may be. Header only; the model owns it because every
// layer may include the model.
#pragma once

#include <cfloat>
#include <cstdint>
#include <string>

namespace tpu {

// An integer setting: lo..hi, and what it is in a few words (for the messages).
struct UintRange {
  uint64_t lo;
  uint64_t hi;
  const char* what;
  bool holds(uint64_t v) const { return v >= lo && v <= hi; }
  // "an integer from LO to HI" (hi 2^64 - 1 written as such).
  std::string text() const {
    const std::string h = hi == ~uint64_t{0} ? "2^64 - 1" : std::to_string(hi);
    return "an integer from " + std::to_string(lo) + " to " + h;
  }
};

// Every random-number generator of the project is seeded with 64 bits (std::mt19937_64,
// splitmix64): the inputs of matmul, pod, shard and the collectives, training, traffic, faults.
inline constexpr UintRange kSeedRange{0, ~uint64_t{0}, "a seed"};
// Cycles without progress before a run stops as hung; 0 turns the watchdog off (chip, pod and
// the bare ICI network alike).
inline constexpr UintRange kWatchdogRange{0, uint64_t{1} << 40,
                                          "cycles without progress (0: off)"};
// Bits a one-time HBM flip flips in a 72-bit word (64 data + 8 check bits).
inline constexpr UintRange kFlipBitsRange{1, 72, "a bit count"};
// A chip id in a fault (chip coordinates reach 16x16x16).
inline constexpr UintRange kChipIdRange{0, 4095, "a chip id"};

// The learning rate (tpusim train --lr, a config's train.lr): an f32 in the chips, so a positive
// normal f32 (a smaller value rounds to a subnormal or to 0, which would train nothing) up to
// 1e6.
inline constexpr double kLrMin = FLT_MIN;  // 2^-126, about 1.18e-38
inline constexpr double kLrMax = 1e6;
inline bool lr_in_range(double v) { return v >= kLrMin && v <= kLrMax; }
inline const char* lr_rule() {
  return "must be a number from 1.18e-38 (the least normal f32: the chips compute in f32) to 1e6";
}

}  // namespace tpu
