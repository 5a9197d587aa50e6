// FaultConfig: what faults a simulated machine suffers (the `faults:` section of a chip or pod
// configuration, and tpusim's --fault KEY=VALUE, both read by sw/config against its one table of
// keys), seeded and reproducible. Sim only: the HBM device model flips bits on their way out
// (rtl/sim/hbm_device.sv). Empty (the default) means no fault at all: the same bits and cycles as
// a machine without fault injection. Link faults (link_* keys) act on the ICI link channels of
// the pod (tb/pod/pod.h IciLink), where the wire is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu {

// One word whose bits flip once, the next time it is read from the device.
struct HbmFlip {
  int chip = 0;        // which chip of the pod (0 for a chip alone)
  uint64_t addr = 0;   // byte address in HBM; the flip hits its 64-bit word (addr / 8)
  uint64_t mask = 0;   // data bits to flip (bit i of the word)
  uint8_t check_mask = 0;  // check bits to flip (of the word's 8 SECDED bits)
  unsigned count = 0;  // when mask and check_mask are empty: flip this many bits, chosen by seed
};

// One link that goes down: from `cycle` on, the link from `chip` out of direction `dir` (its flit
// words and the control words that come back for them) carries nothing.
struct LinkDown {
  int chip = 0;
  int dir = 0;          // 0..5: +X -X +Y -Y +Z -Z
  uint64_t cycle = 0;
};

struct FaultConfig {
  uint64_t seed = 1;                 // seed: every random fault derives from it (and the chip)
  double hbm_single_bit_rate = 0;    // hbm_single_bit_rate: P(one bit flips) per word read
  double hbm_double_bit_rate = 0;    // hbm_double_bit_rate: P(two bits flip) per word read
  std::vector<HbmFlip> hbm_flip_at;  // hbm_flip_at: one-time flips at given addresses
  double link_bit_error_rate = 0;    // link_bit_error_rate: P(a bit flips) per bit on a link
  double link_burst_rate = 0;        // link_burst_rate: P(a burst starts) per word on a link
  double link_drop_rate = 0;         // link_drop_rate: P(a word vanishes) per word on a link
  std::vector<LinkDown> link_down;   // link_down: links that stop carrying anything
  bool any() const { return any_hbm() || any_link(); }
  bool any_hbm() const {
    return hbm_single_bit_rate > 0 || hbm_double_bit_rate > 0 || !hbm_flip_at.empty();
  }
  bool any_link() const {
    return link_bit_error_rate > 0 || link_burst_rate > 0 || link_drop_rate > 0 ||
           !link_down.empty();
  }
};

// The seed of chip `chip`'s HBM fault generator (never 0).
uint64_t hbm_fault_seed(const FaultConfig& f, int chip);
// A probability as the device's 32-bit threshold (p x 2^32, saturated).
uint32_t fault_rate_threshold(double p);

// The bits flip `index` of f.hbm_flip_at flips: its own, or `count` chosen from the seed.
void hbm_flip_bits(const FaultConfig& f, std::size_t index, uint64_t* mask, uint8_t* check_mask);

// `bits` distinct bit positions of a 72-bit word (0..63 data, 64..71 check), chosen by `seed`:
// the flip of an hbm_flip_at entry that gives a bit count instead of positions.
void hbm_flip_pick(unsigned bits, uint64_t seed, uint64_t* mask, uint8_t* check_mask);

// Link directions by name: "+X" "-X" "+Y" "-Y" "+Z" "-Z" (either case) <-> 0..5; -1 if unknown.
int link_dir_from_name(const std::string& name);
const char* link_dir_name(int dir);  // "+X" ...

// The seed of the fault generator of one direction of the link from `chip` out of `dir`:
// `which` 0 for its flit words, 1 for the control words that come back (never 0).
uint64_t link_fault_seed(const FaultConfig& f, int chip, int dir, int which);

// Words per burst (link_burst_rate): a burst corrupts this many consecutive words of a link
// direction, each with kLinkBurstBits consecutive bits inverted at a random place.
constexpr unsigned kLinkBurstWords = 4;
constexpr unsigned kLinkBurstBits = 8;

}  // namespace tpu
