#include "fault_config.h"

#include "tpu/splitmix.h"

namespace tpu {

uint64_t hbm_fault_seed(const FaultConfig& f, int chip) {
  const uint64_t s = splitmix64(f.seed ^ splitmix64(static_cast<uint64_t>(chip) + 1));
  return s != 0 ? s : 1;
}

int link_dir_from_name(const std::string& name) {
  static const char* const n[6] = {"+x", "-x", "+y", "-y", "+z", "-z"};
  std::string l = name;
  for (char& c : l) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (int d = 0; d < 6; ++d)
    if (l == n[d]) return d;
  return -1;
}

const char* link_dir_name(int dir) {
  static const char* const n[6] = {"+X", "-X", "+Y", "-Y", "+Z", "-Z"};
  return dir >= 0 && dir < 6 ? n[dir] : "?";
}

uint64_t link_fault_seed(const FaultConfig& f, int chip, int dir, int which) {
  const uint64_t id = 0x4C494E4B00000000ull + static_cast<uint64_t>(chip) * 16 +
                      static_cast<uint64_t>(dir) * 2 + static_cast<uint64_t>(which);
  const uint64_t s = splitmix64(f.seed ^ splitmix64(id));
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
