#include "fault_config.h"

#include "tpu/splitmix.h"

namespace tpu {

const std::vector<std::string>& FaultConfig::keys() {
  static const std::vector<std::string> k = {"seed", "hbm_single_bit_rate",
                                             "hbm_double_bit_rate", "hbm_flip_at"};
  return k;
}

uint64_t hbm_fault_seed(const FaultConfig& f, int chip) {
  const uint64_t s = splitmix64(f.seed ^ splitmix64(static_cast<uint64_t>(chip) + 1));
  return s != 0 ? s : 1;
}

uint32_t fault_rate_threshold(double p) {
  if (!(p > 0)) return 0;
  const double t = p * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

void hbm_flip_bits(const FaultConfig& f, std::size_t index, uint64_t* mask, uint8_t* check_mask) {
  const HbmFlip& e = f.hbm_flip_at.at(index);
  if (e.mask != 0 || e.check_mask != 0 || e.count == 0) {
    *mask = e.mask;
    *check_mask = e.check_mask;
    return;
  }
  hbm_flip_pick(e.count, splitmix64(hbm_fault_seed(f, e.chip) + index), mask, check_mask);
}

void hbm_flip_pick(unsigned bits, uint64_t seed, uint64_t* mask, uint8_t* check_mask) {
  *mask = 0;
  *check_mask = 0;
  uint64_t s = seed;
  unsigned n = 0;
  while (n < bits && n < 72) {
    s = splitmix64(s);
    const unsigned b = static_cast<unsigned>(s % 72);
    if (b < 64) {
      if (*mask >> b & 1u) continue;
      *mask |= uint64_t{1} << b;
    } else {
      if (*check_mask >> (b - 64) & 1u) continue;
      *check_mask = static_cast<uint8_t>(*check_mask | (1u << (b - 64)));
    }
    ++n;
  }
}

}  // namespace tpu
