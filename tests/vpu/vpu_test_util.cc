#include "vpu_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace tpu::vputest {

std::string g_wave_dir;

VpuTbOptions tb_options(std::size_t lanes, double in_valid_prob, double out_ready_prob,
                        uint64_t seed) {
  VpuTbOptions o;
  o.lanes = lanes;
  o.in_valid_prob = in_valid_prob;
  o.out_ready_prob = out_ready_prob;
  o.seed = seed;
  if (!g_wave_dir.empty()) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    o.wave_path = g_wave_dir + "/vpu_" + name + ".fst";
  }
  return o;
}

const std::vector<uint32_t>& special_values() {
  static const std::vector<uint32_t> v = [] {
    const std::vector<uint32_t> mags = {
        0x00000000,  // zero
        0x00000001,  // min subnormal
        0x00000002, 0x00400000,
        0x007FFFFF,  // max subnormal
        0x00800000,  // min normal
        0x00800001, 0x3F800000, 0x3F800001, 0x3FFFFFFF, 0x4B800000,
        0x7F7FFFFF,  // max finite
        0x7F7F8000,  // bf16 tie on an odd bf16 mantissa at the top: rounds to Inf
        0x7F7F7FFF,  // just below that tie: stays finite
        0x7F800000,  // Inf
        0x7F800001,  // signalling NaN
        0x7FC00000,  // canonical NaN
        0x7FFFFFFF,  // NaN with every payload bit
        0x3F808000,  // bf16 tie, even kept mantissa: rounds down
        0x3F818000,  // bf16 tie, odd kept mantissa: rounds up
        0x3F807FFF, 0x3F808001,
        0x00008000,              // bf16 tie in the subnormal range
        0x00018000, 0x007F8000,  // tie rounding up into the smallest normal
        0x7F7FFFFF};
    std::vector<uint32_t> out;
    for (uint32_t m : mags) {
      out.push_back(m);
      out.push_back(m | 0x80000000u);
    }
    return out;
  }();
  return v;
}

uint32_t ValueGen::value() {
  const uint32_t r = below(100);
  const uint32_t sign = u32() & 0x80000000u;
  if (r < 20) return special_values()[below(static_cast<uint32_t>(special_values().size()))];
  if (r < 32) return sign | ((u32() >> below(24)) & 0x007FFFFFu);  // subnormal (or zero)
  if (r < 42) return u32();                                        // any bit pattern
  if (r < 55) {
    // bf16 ties and near-ties on random normals.
    static const uint32_t low[] = {0x8000, 0x7FFF, 0x8001, 0x0000, 0xFFFF};
    return sign | (below(254) + 1) << 23 | (u32() & 0x7F0000u) | low[below(5)];
  }
  return ordinary();
}

uint32_t ValueGen::near(uint32_t x) {
  const uint32_t r = below(100);
  if (r < 15) return x;                  // equal
  if (r < 25) return x ^ 0x80000000u;    // negated (exact cancellation, +-0 pairs)
  if (r < 40) return x + below(5) - 2u;  // a few ulps away
  return value();
}

uint32_t ValueGen::ordinary() {
  return (u32() & 0x80000000u) | (below(40) + 108) << 23 | (u32() & 0x007FFFFFu);
}

std::vector<VpuBeat> reduction_beats(VpuOp op, const std::vector<uint32_t>& v, std::size_t lanes,
                                     uint32_t filler, bool dst_bf16) {
  const std::size_t n_beats = v.empty() ? 1 : (v.size() + lanes - 1) / lanes;
  std::vector<VpuBeat> beats(n_beats);
  for (std::size_t b = 0; b < n_beats; ++b) {
    VpuBeat& beat = beats[b];
    beat.op = op;
    beat.first = b == 0;
    beat.last = b + 1 == n_beats;
    beat.dst_bf16 = dst_bf16;
    beat.x.assign(lanes, filler);
    beat.mask.assign(lanes, false);
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::size_t i = b * lanes + l;
      if (i < v.size()) {
        beat.x[l] = v[i];
        beat.mask[l] = true;
      }
    }
  }
  return beats;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string hex(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t x : v) s += (s.empty() ? "" : " ") + hex(x);
  return s;
}

}  // namespace tpu::vputest
