// tpu_vpu (rtl/tpu_vpu.sv) against the golden tpu::VpuModel, bit for bit: every op at every
// built lane count with random and special operands and random stalls on both handshakes,
// multi-beat reductions of odd lengths, the documented numerics written out as constants, and
// the interface's latency, throughput and protocol checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "tpu/vector.h"
#include "vpu_tb.h"
#include "vpu_test_util.h"

namespace tpu {
namespace {

using vputest::hex;
using vputest::reduction_beats;
using vputest::tb_options;
using vputest::ValueGen;

// Runs `beats` through a harness and through the golden model and compares every output beat.
// Returns the number of output beats compared.
std::size_t run_and_compare(VpuTb& tb, const std::vector<VpuBeat>& beats) {
  VpuModel model(tb.lanes());
  std::vector<VpuResult> want;
  std::vector<std::string> what;
  for (std::size_t i = 0; i < beats.size(); ++i) {
    tb.push(beats[i]);
    if (auto r = model.step(beats[i])) {
      want.push_back(*r);
      what.push_back(std::string(vpu_op_name(beats[i].op)) + " beat " + std::to_string(i) + " x=[" +
                     hex(beats[i].x) + "]");
    }
  }
  tb.drain();
  const std::vector<VpuResult>& got = tb.outputs();
  EXPECT_EQ(got.size(), want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (!(got[i] == want[i]) && ++bad <= 5) {
      ADD_FAILURE() << what[i] << "\n  rtl    " << hex(got[i].data) << " scalar=" << got[i].scalar
                    << "\n  golden " << hex(want[i].data) << " scalar=" << want[i].scalar;
    }
  }
  EXPECT_EQ(bad, 0u);
  return std::min(got.size(), want.size());
}

std::string lanes_name(std::size_t lanes) { return "lanes" + std::to_string(lanes); }

// ------------------------------------------------------------------------------------------------
// Elementwise ops x lane counts: random and special operands, random flags, random stalls.
// ------------------------------------------------------------------------------------------------
using OpLanes = std::tuple<VpuOp, std::size_t>;

class VpuElementwiseTest : public ::testing::TestWithParam<OpLanes> {};

TEST_P(VpuElementwiseTest, MatchesGoldenUnderBackPressure) {
  const auto [op, lanes] = GetParam();
  ValueGen gen(1000 + static_cast<uint64_t>(op) * 16 + lanes);
  VpuTb tb(tb_options(lanes, 0.8, 0.6, 7 + lanes));
  std::vector<VpuBeat> beats;
  constexpr std::size_t kBeats = 4000;
  for (std::size_t b = 0; b < kBeats; ++b) {
    VpuBeat beat;
    beat.op = op;
    // Mostly f32 operands; some beats read bf16 operands or write bf16 results.
    beat.src_bf16 = gen.below(4) == 0 ? static_cast<uint8_t>(gen.below(8)) : 0;
    beat.dst_bf16 = gen.below(5) == 0;
    beat.first = gen.below(2) == 0;  // ignored by elementwise ops
    beat.last = gen.below(2) == 0;
    beat.mask.assign(lanes, gen.below(2) == 0);  // ignored by elementwise ops
    for (std::size_t l = 0; l < lanes; ++l) {
      const uint32_t x = gen.value();
      beat.x.push_back(x);
      beat.y.push_back(gen.near(x));
      beat.z.push_back(gen.below(3) == 0 ? gen.near(x) : gen.value());
    }
    beats.push_back(beat);
  }
  EXPECT_EQ(run_and_compare(tb, beats), kBeats);
  EXPECT_EQ(tb.stats().in_beats, kBeats);
  EXPECT_GT(tb.stats().out_stall_cycles, 0u);  // the sink really pushed back
}

// Every special against every special, lane by lane.
TEST_P(VpuElementwiseTest, AllSpecialPairs) {
  const auto [op, lanes] = GetParam();
  const std::vector<uint32_t>& s = vputest::special_values();
  VpuTb tb(tb_options(lanes));
  std::vector<VpuBeat> beats;
  std::vector<uint32_t> xs, ys;
  for (uint32_t x : s) {
    for (uint32_t y : s) {
      xs.push_back(x);
      ys.push_back(y);
    }
  }
  for (std::size_t i = 0; i < xs.size(); i += lanes) {
    VpuBeat beat;
    beat.op = op;
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::size_t k = (i + l) % xs.size();
      beat.x.push_back(xs[k]);
      beat.y.push_back(ys[k]);
      beat.z.push_back(ys[(k * 7 + 3) % ys.size()]);
    }
    beats.push_back(beat);
  }
  EXPECT_EQ(run_and_compare(tb, beats), beats.size());
}

const VpuOp kElementwiseOps[] = {
    VpuOp::kAdd,        VpuOp::kSub,        VpuOp::kMul,       VpuOp::kFma,
    VpuOp::kMax,        VpuOp::kMin,        VpuOp::kRelu,      VpuOp::kCvtF32Bf16,
    VpuOp::kCvtBf16F32, VpuOp::kPackBf16,   VpuOp::kCvtBf16HiF32};

INSTANTIATE_TEST_SUITE_P(Ops, VpuElementwiseTest,
                         ::testing::Combine(::testing::ValuesIn(kElementwiseOps),
                                            ::testing::ValuesIn(VpuTb::built_lanes())),
                         [](const ::testing::TestParamInfo<OpLanes>& i) {
                           return std::string(vpu_op_name(std::get<0>(i.param))) + "_" +
                                  lanes_name(std::get<1>(i.param));
                         });

// ------------------------------------------------------------------------------------------------
// Reductions x lane counts: groups of odd lengths, specials, interleaved elementwise beats.
// ------------------------------------------------------------------------------------------------
class VpuReductionTest : public ::testing::TestWithParam<OpLanes> {};

TEST_P(VpuReductionTest, GroupsOfManyLengthsMatchGolden) {
  const auto [op, lanes] = GetParam();
  ValueGen gen(2000 + static_cast<uint64_t>(op) * 16 + lanes);
  VpuTb tb(tb_options(lanes, 0.7, 0.5, 11 + lanes));
  const std::size_t lengths[] = {
      0, 1, 2, 3, lanes - 1, lanes, lanes + 1, 2 * lanes + 3, 7 * lanes + 5, 33, 101};
  std::vector<VpuBeat> beats;
  std::size_t groups = 0;
  for (int round = 0; round < 20; ++round) {
    for (std::size_t n : lengths) {
      std::vector<uint32_t> v(n);
      for (uint32_t& x : v) {
        // Round 0: ordinary values only; later rounds mix in specials and subnormals.
        x = round == 0 ? gen.ordinary()
                       : (round == 1 ? gen.near(v.empty() ? 0 : v[0]) : gen.value());
      }
      const bool dst_bf16 = round == 3;
      std::vector<VpuBeat> g = reduction_beats(op, v, lanes, gen.value(), dst_bf16);
      ++groups;
      for (std::size_t b = 0; b < g.size(); ++b) {
        beats.push_back(g[b]);
        if (gen.below(4) == 0) {  // an elementwise beat inside the open group
          VpuBeat e;
          e.op = VpuOp::kAdd;
          for (std::size_t l = 0; l < lanes; ++l) {
            e.x.push_back(gen.value());
            e.y.push_back(gen.value());
          }
          beats.push_back(e);
        }
      }
    }
  }
  const std::size_t outputs = run_and_compare(tb, beats);
  EXPECT_GE(outputs, groups);
  std::size_t scalars = 0;
  for (const VpuResult& r : tb.outputs()) scalars += r.scalar ? 1 : 0;
  EXPECT_EQ(scalars, groups);
}

// The beat-level model, the RTL and the whole-vector golden function agree on long vectors.
TEST_P(VpuReductionTest, WholeVectorGoldenAgrees) {
  const auto [op, lanes] = GetParam();
  ValueGen gen(3000 + lanes);
  VpuTb tb(tb_options(lanes));
  std::vector<float> want;
  for (std::size_t n :
       {std::size_t{1}, std::size_t{5}, std::size_t{31}, 3 * lanes + 1, std::size_t{257}}) {
    std::vector<uint32_t> v(n);
    std::vector<float> vf(n);
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = gen.ordinary();
      vf[i] = f32_from_bits(v[i]);
    }
    for (const VpuBeat& b : reduction_beats(op, v, lanes)) tb.push(b);
    want.push_back(vector_reduce(op, vf, lanes));
  }
  tb.drain();
  ASSERT_EQ(tb.outputs().size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(tb.outputs()[i].scalar);
    EXPECT_EQ(hex(tb.outputs()[i].data[0]), hex(f32_bits(want[i]))) << "vector " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, VpuReductionTest,
                         ::testing::Combine(::testing::Values(VpuOp::kRedSum, VpuOp::kRedMax),
                                            ::testing::ValuesIn(VpuTb::built_lanes())),
                         [](const ::testing::TestParamInfo<OpLanes>& i) {
                           return std::string(vpu_op_name(std::get<0>(i.param))) + "_" +
                                  lanes_name(std::get<1>(i.param));
                         });

// ------------------------------------------------------------------------------------------------
// The documented numerics, as constants (not only "RTL == golden"), at every lane count.
// ------------------------------------------------------------------------------------------------
class VpuNumericsTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  // One elementwise op on up to lanes() (x, y) pairs; returns the first results.
  std::vector<uint32_t> lanes_of(VpuOp op, const std::vector<uint32_t>& x,
                                 const std::vector<uint32_t>& y, uint8_t src_bf16 = 0,
                                 bool dst_bf16 = false) {
    const std::size_t lanes = GetParam();
    VpuTb tb(tb_options(lanes));
    std::vector<uint32_t> out;
    for (std::size_t i = 0; i < x.size(); i += lanes) {
      VpuBeat b;
      b.op = op;
      b.src_bf16 = src_bf16;
      b.dst_bf16 = dst_bf16;
      for (std::size_t l = 0; l < lanes; ++l) {
        b.x.push_back(i + l < x.size() ? x[i + l] : 0u);
        b.y.push_back(i + l < y.size() ? y[i + l] : 0u);
      }
      tb.push(b);
    }
    tb.drain();
    for (const VpuResult& r : tb.outputs()) out.insert(out.end(), r.data.begin(), r.data.end());
    out.resize(x.size());
    return out;
  }
  uint32_t reduce(VpuOp op, const std::vector<uint32_t>& v, bool dst_bf16 = false) {
    VpuTb tb(tb_options(GetParam()));
    for (const VpuBeat& b : reduction_beats(op, v, GetParam(), 0x7F800000u, dst_bf16)) tb.push(b);
    tb.drain();
    EXPECT_EQ(tb.outputs().size(), 1u);
    return tb.outputs().empty() ? 0xDEADBEEFu : tb.outputs()[0].data[0];
  }
};

constexpr uint32_t kPZ = 0x00000000, kNZ = 0x80000000, kPInf = 0x7F800000, kNInf = 0xFF800000;
constexpr uint32_t kQNan = 0x7FC00000, kSNan = 0x7F800001, kNNan = 0xFFC00123;
constexpr uint32_t kOne = 0x3F800000, kMinSub = 0x00000001;

TEST_P(VpuNumericsTest, MaxMinSignedZerosAndNaN) {
  // maximum / minimum: -0 < +0; NaN in either operand -> canonical NaN.
  EXPECT_EQ(lanes_of(VpuOp::kMax, {kNZ, kPZ, kNZ, kOne, kSNan, kNNan, kNInf},
                     {kPZ, kNZ, kNZ, kQNan, kOne, kPInf, kNZ}),
            (std::vector<uint32_t>{kPZ, kPZ, kNZ, kQNan, kQNan, kQNan, kNZ}));
  EXPECT_EQ(lanes_of(VpuOp::kMin, {kNZ, kPZ, kPZ, kOne, kSNan, kNNan, kPInf},
                     {kPZ, kNZ, kPZ, kQNan, kOne, kPInf, kNZ}),
            (std::vector<uint32_t>{kNZ, kNZ, kPZ, kQNan, kQNan, kQNan, kNZ}));
}

TEST_P(VpuNumericsTest, ReluDefinition) {
  // relu(x) = maximum(x, +0): -0 -> +0, negatives -> +0, NaN -> canonical NaN.
  EXPECT_EQ(lanes_of(VpuOp::kRelu,
                     {kNZ, kPZ, 0x80000001, kMinSub, kNInf, kPInf, kSNan, 0xBF800000, kOne}, {}),
            (std::vector<uint32_t>{kPZ, kPZ, kPZ, kMinSub, kPZ, kPInf, kQNan, kPZ, kOne}));
}

TEST_P(VpuNumericsTest, ArithmeticSpecials) {
  EXPECT_EQ(lanes_of(VpuOp::kAdd, {kNZ, kNZ, kPInf, kOne, 0x7F7FFFFF, kMinSub},
                     {kNZ, kPZ, kNInf, 0xBF800000, 0x7F7FFFFF, kMinSub}),
            (std::vector<uint32_t>{kNZ, kPZ, kQNan, kPZ, kPInf, 0x00000002}));
  EXPECT_EQ(lanes_of(VpuOp::kSub, {kNZ, kPZ, kPInf, kOne}, {kPZ, kPZ, kPInf, kOne}),
            (std::vector<uint32_t>{kNZ, kPZ, kQNan, kPZ}));
  // 2^-149 * 0.5 ties to even (0); 3 * 2^-149 * 0.5 ties to 2 * 2^-149; 0 * -1 = -0.
  EXPECT_EQ(lanes_of(VpuOp::kMul, {kMinSub, 0x00000003, kPZ, kPInf},
                     {0x3F000000, 0x3F000000, 0xBF800000, kPZ}),
            (std::vector<uint32_t>{kPZ, 0x00000002, kNZ, kQNan}));
}

TEST_P(VpuNumericsTest, FmaIsFused) {
  // x * y + z with one rounding: (1 + 2^-12)^2 - (1 + 2^-11) = 2^-24 exactly, which two
  // roundings (product first) would lose.
  const std::size_t lanes = GetParam();
  VpuTb tb(tb_options(lanes));
  VpuBeat b;
  b.op = VpuOp::kFma;
  b.x.assign(lanes, 0x3F800800);  // 1 + 2^-12
  b.y.assign(lanes, 0x3F800800);
  b.z.assign(lanes, 0xBF801000);  // -(1 + 2^-11)
  tb.push(b);
  tb.drain();
  ASSERT_EQ(tb.outputs().size(), 1u);
  for (uint32_t r : tb.outputs()[0].data) EXPECT_EQ(hex(r), hex(0x33800000u));  // 2^-24
}

TEST_P(VpuNumericsTest, ToBf16RoundsToNearestEven) {
  EXPECT_EQ(lanes_of(VpuOp::kCvtF32Bf16,
                     {0x3F808000,  // tie, kept mantissa even: down
                      0x3F818000,  // tie, odd: up
                      0x3F808001,  // above the tie: up
                      0x3F807FFF,  // below: down
                      0x7F7FFFFF,  // max finite: overflows to Inf
                      0x7F7F8000,  // tie at the top, odd: Inf
                      0xFF7F8000,  // same, negative
                      0x7F800001,  // signalling NaN -> 0x7FC0
                      0xFFFFFFFF,  // negative NaN -> 0x7FC0
                      0x00008000,  // subnormal tie, even: down to +0
                      0x00018000,  // subnormal tie, odd: up
                      kNZ, kNInf},
                     {}),
            (std::vector<uint32_t>{0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x7F80, 0x7F80, 0xFF80, 0x7FC0,
                                   0x7FC0, 0x0000, 0x0002, 0x8000, 0xFF80}));
}

TEST_P(VpuNumericsTest, FromBf16IsExactAndUpperBitsIgnored) {
  EXPECT_EQ(lanes_of(VpuOp::kCvtBf16F32,
                     {0xABCD3F80, 0x00000001, 0xFFFF8000, 0x12347F81, 0x0000FF80}, {}),
            (std::vector<uint32_t>{0x3F800000, 0x00010000, 0x80000000, kQNan, kNInf}));
  // The bf16 source flags: bf16 x + bf16 y, result rounded back to bf16.
  EXPECT_EQ(lanes_of(VpuOp::kAdd, {0xFFFF3F80}, {0xEEEE3F80}, kVpuSrcBf16X | kVpuSrcBf16Y, true),
            (std::vector<uint32_t>{0x4000}));
}

TEST_P(VpuNumericsTest, PackTwoBf16InALaneAndReadTheUpperOneBack) {
  // pack: x rounded into [15:0], y into [31:16], NaN canonical, dst_bf16 ignored.
  EXPECT_EQ(lanes_of(VpuOp::kPackBf16, {0x3F818000, 0x7F800001, 0xFFFF1234},
                     {0xC0000001, 0x7F7FFFFF, 0x80018000}, 0, true),
            (std::vector<uint32_t>{0xC0003F82, 0x7F807FC0, 0x80027FC0}));
  // The upper bf16 widened exactly (NaN canonical), or kept as bf16 with dst_bf16.
  EXPECT_EQ(lanes_of(VpuOp::kCvtBf16HiF32, {0xC0003F82, 0x7F811234, 0x00010000}, {}),
            (std::vector<uint32_t>{0xC0000000, kQNan, 0x00010000}));
  EXPECT_EQ(lanes_of(VpuOp::kCvtBf16HiF32, {0xC0003F82, 0x7F811234}, {}, 0, true),
            (std::vector<uint32_t>{0xC000, 0x7FC0}));
}

TEST_P(VpuNumericsTest, ReductionOrderIsLanewiseThenPairwiseTree) {
  const std::size_t lanes = GetParam();
  // One beat [2^24, 1, 1, ..., 1]: the tree's first level gives 2^24 + 1 -> 2^24 (tie to even)
  // and 1 + 1 = 2 elsewhere, which then add exactly: 2^24 + lanes - 2. A left-to-right sum
  // would stay at 2^24.
  std::vector<uint32_t> v(lanes, kOne);
  v[0] = 0x4B800000;  // 2^24
  const float want = 16777216.0f + static_cast<float>(lanes - 2);
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, v)), hex(f32_bits(want)));
  // Across beats, lane-wise first: 2^24 in lane 0 of beat 0, and 1 in lane 1 of beats 0, 1, 2.
  // Lane 1 accumulates 3, then 2^24 + 3 ties to 2^24 + 4. Reducing each beat first and then
  // summing beats would give 2^24 (every + 1 ties back to 2^24).
  std::vector<uint32_t> w(2 * lanes + 2, kPZ);
  w[0] = 0x4B800000;
  w[1] = w[lanes + 1] = w[2 * lanes + 1] = kOne;
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, w)), hex(0x4B800002u));
  // Adjacent pairs, not strided ones: [2^24, 1, 0, 1, 0...] pairs 2^24 with the first 1 (tie
  // back to 2^24), then adds the other 1 to 2^24 (again a tie): 2^24. Pairing lane i with lane
  // i + lanes / 2 would add the two ones first and give 2^24 + 2.
  if (lanes < 4) GTEST_SKIP() << "the pairing example needs 4 lanes";
  std::vector<uint32_t> u(lanes, kPZ);
  u[0] = 0x4B800000;
  u[1] = u[3] = kOne;
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, u)), hex(0x4B800000u));
}

TEST_P(VpuNumericsTest, ReductionIdentitiesAndSpecials) {
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {})), hex(kNZ));    // empty sum: -0
  EXPECT_EQ(hex(reduce(VpuOp::kRedMax, {})), hex(kNInf));  // empty max: -Inf
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {kNZ, kNZ, kNZ})), hex(kNZ));
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {kNZ, kPZ, kNZ})), hex(kPZ));
  EXPECT_EQ(hex(reduce(VpuOp::kRedMax, {kNZ, kPZ, kNZ})), hex(kPZ));
  EXPECT_EQ(hex(reduce(VpuOp::kRedMax, {kNInf, kNZ})), hex(kNZ));
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {kOne, kSNan, kOne})), hex(kQNan));
  EXPECT_EQ(hex(reduce(VpuOp::kRedMax, {kOne, kNNan, kPInf})), hex(kQNan));
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {kPInf, kNInf})), hex(kQNan));
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {0x7F7FFFFF, 0x7F7FFFFF})), hex(kPInf));
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {kMinSub, kMinSub, kMinSub})), hex(0x00000003u));
  // Masked-off lanes hold Inf filler (see reduce()): it must not leak in.
  EXPECT_EQ(hex(reduce(VpuOp::kRedMax, {kOne, 0x40000000})), hex(0x40000000u));
  // A bf16 result: 1 + 2^-8 + 2^-9 rounds to 1 + 2^-7 in bf16.
  EXPECT_EQ(hex(reduce(VpuOp::kRedSum, {kOne, 0x3BC00000}, true)), hex(0x3F81u));
}

INSTANTIATE_TEST_SUITE_P(Lanes, VpuNumericsTest, ::testing::ValuesIn(VpuTb::built_lanes()),
                         [](const ::testing::TestParamInfo<std::size_t>& i) {
                           return lanes_name(i.param);
                         });

// ------------------------------------------------------------------------------------------------
// Interface: latency, throughput, back-pressure, protocol checks, variant errors.
// ------------------------------------------------------------------------------------------------
class VpuInterfaceTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(VpuInterfaceTest, OneCycleLatencyOneBeatPerCycle) {
  const std::size_t lanes = GetParam();
  VpuTb tb(tb_options(lanes));
  ValueGen gen(5);
  constexpr std::size_t kBeats = 50;
  for (std::size_t i = 0; i < kBeats; ++i) {
    VpuBeat b;
    b.op = VpuOp::kMul;
    for (std::size_t l = 0; l < lanes; ++l) {
      b.x.push_back(gen.ordinary());
      b.y.push_back(gen.ordinary());
    }
    tb.push(b);
  }
  tb.drain();
  ASSERT_EQ(tb.in_cycles().size(), kBeats);
  ASSERT_EQ(tb.out_cycles().size(), kBeats);
  for (std::size_t i = 0; i < kBeats; ++i) {
    EXPECT_EQ(tb.in_cycles()[i], i);                       // one beat taken every cycle
    EXPECT_EQ(tb.out_cycles()[i], tb.in_cycles()[i] + 1);  // its result the next cycle
  }
  EXPECT_EQ(tb.stats().in_stall_cycles, 0u);
}

TEST_P(VpuInterfaceTest, ReductionProducesOneBeatAfterItsLast) {
  const std::size_t lanes = GetParam();
  VpuTb tb(tb_options(lanes));
  std::vector<uint32_t> v(5 * lanes - 1, 0x3F800000);
  for (const VpuBeat& b : reduction_beats(VpuOp::kRedSum, v, lanes)) tb.push(b);
  tb.drain();
  ASSERT_EQ(tb.in_cycles().size(), 5u);
  ASSERT_EQ(tb.out_cycles().size(), 1u);
  EXPECT_EQ(tb.in_cycles()[4], 4u);
  EXPECT_EQ(tb.out_cycles()[0], 5u);
  EXPECT_EQ(hex(tb.outputs()[0].data[0]), hex(f32_bits(static_cast<float>(5 * lanes - 1))));
  for (std::size_t l = 1; l < lanes; ++l) EXPECT_EQ(tb.outputs()[0].data[l], 0u);
  EXPECT_TRUE(tb.idle());
}

TEST_P(VpuInterfaceTest, IdleOnlyWithNoGroupOpenAndNoOutputPending) {
  const std::size_t lanes = GetParam();
  VpuTb tb(tb_options(lanes));
  EXPECT_TRUE(tb.idle());
  std::vector<uint32_t> v(2 * lanes + 1);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint32_t>(i);
  const std::vector<VpuBeat> beats = reduction_beats(VpuOp::kRedMax, v, lanes);  // 3 beats
  tb.push(beats[0]);
  tb.tick();
  EXPECT_FALSE(tb.idle());  // group open
  for (std::size_t i = 1; i < beats.size(); ++i) tb.push(beats[i]);
  tb.drain();
  EXPECT_TRUE(tb.idle());  // result taken, group closed
  VpuBeat e;
  e.op = VpuOp::kRelu;
  e.x.assign(lanes, 0u);
  VpuTb stalled(tb_options(lanes, 1.0, 0.0));  // sink never ready
  stalled.push(e);
  stalled.tick();
  stalled.tick();
  EXPECT_FALSE(stalled.idle());  // output pending
}

TEST_P(VpuInterfaceTest, StalledSinkStallsSourceWithoutLoss) {
  const std::size_t lanes = GetParam();
  VpuTb tb(tb_options(lanes, 1.0, 0.15, 3));  // the sink is rarely ready
  ValueGen gen(9);
  std::vector<VpuBeat> beats;
  for (std::size_t i = 0; i < 60; ++i) {
    VpuBeat b;
    b.op = VpuOp::kAdd;
    for (std::size_t l = 0; l < lanes; ++l) {
      b.x.push_back(static_cast<uint32_t>(i));  // distinct payloads: loss or repeat shows
      b.y.push_back(gen.value());
    }
    beats.push_back(b);
  }
  EXPECT_EQ(run_and_compare(tb, beats), beats.size());
  EXPECT_GT(tb.stats().in_stall_cycles, 0u);
  EXPECT_GT(tb.stats().out_stall_cycles, 0u);
  EXPECT_EQ(tb.stats().out_beats, beats.size());
}

TEST_P(VpuInterfaceTest, ReductionOutsideAGroupTripsTheAssertion) {
  const std::size_t lanes = GetParam();
  VpuTb tb(tb_options(lanes));
  VpuBeat b;
  b.op = VpuOp::kRedSum;
  b.first = false;  // continues a group that was never opened
  b.x.assign(lanes, 0u);
  tb.push(b);
  EXPECT_THROW(tb.drain(10), std::runtime_error);
}

INSTANTIATE_TEST_SUITE_P(Lanes, VpuInterfaceTest, ::testing::ValuesIn(VpuTb::built_lanes()),
                         [](const ::testing::TestParamInfo<std::size_t>& i) {
                           return lanes_name(i.param);
                         });

TEST(VpuVariants, UnbuiltLaneCountIsAClearError) {
  VpuTbOptions o;
  o.lanes = 3;
  try {
    VpuTb tb(o);
    FAIL() << "a 3-lane VPU does not exist";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TPU_VPU_LANES"), std::string::npos) << e.what();
  }
}

TEST(VpuVariants, BuiltAtLeastTwoLaneCounts) { EXPECT_GE(VpuTb::built_lanes().size(), 2u); }

}  // namespace
}  // namespace tpu
