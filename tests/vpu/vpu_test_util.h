// Shared helpers of the VPU tests: operand generators aimed at the numerics corner cases, beat
// builders for whole vectors, and the --waves switch.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tpu/vector.h"
#include "vpu_tb.h"

namespace tpu {
// GoogleTest prints VpuOp parameters by name.
inline void PrintTo(VpuOp op, std::ostream* os) { *os << vpu_op_name(op); }
}  // namespace tpu

namespace tpu::vputest {

// Set by main() from --waves[=DIR]: every harness of a test then dumps DIR/vpu_<test>.fst.
extern std::string g_wave_dir;

// Harness options for the running test (waves when asked for).
VpuTbOptions tb_options(std::size_t lanes, double in_valid_prob = 1.0, double out_ready_prob = 1.0,
                        uint64_t seed = 1);

// f32 bit patterns where results are hard: signed zeros, subnormals, min/max normal, max finite,
// Inf, quiet / signalling / negative NaNs, and bf16 rounding ties on either parity.
const std::vector<uint32_t>& special_values();

class ValueGen {
 public:
  explicit ValueGen(uint64_t seed) : rng_(seed) {}
  uint32_t u32() { return static_cast<uint32_t>(rng_()); }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  // A mix: specials, subnormals, uniform bits, bf16 ties / near-ties, clustered normals.
  uint32_t value();
  // Like value(), but often a near neighbour of `x` (cancellation in sub, ties in max/min).
  uint32_t near(uint32_t x);
  // Ordinary finite values in a moderate range (no specials).
  uint32_t ordinary();

 private:
  std::mt19937_64 rng_;
};

// The beats of a reduction over vector v on `lanes` lanes: element i in beat i / lanes, lane
// i % lanes; the last beat's tail is masked off (its x lanes hold filler that must not count).
// An empty v gives one fully masked beat.
std::vector<VpuBeat> reduction_beats(VpuOp op, const std::vector<uint32_t>& v, std::size_t lanes,
                                     uint32_t filler = 0x7FC00001u, bool dst_bf16 = false);

std::string hex(uint32_t v);
std::string hex(const std::vector<uint32_t>& v);

}  // namespace tpu::vputest
