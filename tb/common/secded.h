// The HBM's SECDED (72,64) code in C++: the golden of rtl/tpu_hbm_pkg.sv's hbm_secded_enc /
// hbm_secded_dec (a Hsiao code after lowRISC/OpenTitan prim_secded_72_64, with our own matrix),
// for tests and for fault injection that must know which bits a check covers (docs/hbm.md).
#pragma once

#include <array>
#include <bitset>
#include <cstdint>

namespace tpu {

// Check bit j is the parity of the data bits in kSecdedMask[j]. Data bit i's column (its
// syndrome) is an odd-weight byte (56 of weight 3, 8 of weight 5); check bit j's is 1 << j.
constexpr std::array<uint64_t, 8> kSecdedMask = {
    0x5B000000001FFFFFull, 0x6B00000FFFE0003Full, 0x6D003FF003E007C1ull, 0xAD0FC0F03C207842ull,
    0xB571C711C4438884ull, 0xB6B65926488C9108ull, 0xD6DAAA4A91152210ull, 0xDAED348D221A4420ull,
};

inline uint8_t secded_encode(uint64_t data) {
  uint8_t c = 0;
  for (unsigned j = 0; j < 8; ++j)
    c |= static_cast<uint8_t>((std::bitset<64>(data & kSecdedMask[j]).count() & 1u) << j);
  return c;
}

// The syndrome (column) of data bit i.
inline uint8_t secded_column(unsigned i) {
  uint8_t s = 0;
  for (unsigned j = 0; j < 8; ++j) s |= static_cast<uint8_t>(((kSecdedMask[j] >> i) & 1u) << j);
  return s;
}

struct SecdedResult {
  uint64_t data = 0;     // corrected when `corrected`, else as read
  uint8_t syndrome = 0;
  bool corrected = false;      // one bit (data or check) was wrong and is fixed
  bool uncorrectable = false;  // two bits (or a syndrome no single bit gives)
};

inline SecdedResult secded_decode(uint64_t data, uint8_t check) {
  SecdedResult r;
  r.data = data;
  r.syndrome = static_cast<uint8_t>(check ^ secded_encode(data));
  if (r.syndrome == 0) return r;
  for (unsigned i = 0; i < 64; ++i) {
    if (secded_column(i) == r.syndrome) {
      r.data ^= uint64_t{1} << i;
      r.corrected = true;
      return r;
    }
  }
  r.corrected = std::bitset<8>(r.syndrome).count() == 1;  // a check bit
  r.uncorrectable = !r.corrected;
  return r;
}

}  // namespace tpu
