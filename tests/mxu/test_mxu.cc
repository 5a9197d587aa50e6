// MXU: every output bit-exact against the golden matmul, over array variants, shapes, value
// distributions, accumulate mode, back-to-back tiles, back-pressure and reset in mid-stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>

#include "mxu_dut.h"
#include "mxu_runner.h"
#include "tpu/matmul.h"

namespace tpu {
namespace {

enum class Dist { kNarrow, kWide, kSpecials, kCancel };

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kNarrow: return "narrow";
    case Dist::kWide: return "wide";
    case Dist::kSpecials: return "specials";
    case Dist::kCancel: return "cancel";
  }
  return "?";
}

// Draws bf16 bit patterns. narrow: exponents within 2^-4..2^4; wide: any finite exponent,
// subnormals included; specials: wide plus zeros of both signs, infinities, NaNs, subnormals and
// the largest finite values; cancel: a few magnitudes of both signs so sums cancel often.
class ValueGen {
 public:
  ValueGen(Dist d, uint64_t seed) : d_(d), rng_(seed) {}

  bf16_t next() {
    const auto sign = static_cast<uint16_t>((rng_() & 1u) << 15);
    const auto mant = static_cast<uint16_t>(rng_() & 0x7Fu);
    switch (d_) {
      case Dist::kNarrow: {
        const auto e = static_cast<uint16_t>(127 - 4 + rng_() % 9);
        return static_cast<bf16_t>(sign | (e << 7) | mant);
      }
      case Dist::kWide: {
        const auto e = static_cast<uint16_t>(rng_() % 255);  // 0 (subnormal) .. 254
        return static_cast<bf16_t>(sign | (e << 7) | mant);
      }
      case Dist::kSpecials: {
        switch (rng_() % 12) {
          case 0: return sign;                                           // +-0
          case 1: return static_cast<bf16_t>(sign | 0x7F80);             // +-Inf
          case 2: return static_cast<bf16_t>(0x7F81 | (rng_() & 0x3F));  // NaN
          case 3: return static_cast<bf16_t>(sign | (mant ? mant : 1));  // subnormal
          case 4: return static_cast<bf16_t>(sign | 0x7F7F);             // max finite
          case 5: return static_cast<bf16_t>(sign | 0x0080);             // min normal
          default: {
            const auto e = static_cast<uint16_t>(rng_() % 255);
            return static_cast<bf16_t>(sign | (e << 7) | mant);
          }
        }
      }
      case Dist::kCancel: {
        const auto e = static_cast<uint16_t>(127 + rng_() % 2);
        return static_cast<bf16_t>(sign | (e << 7) | (mant & 0x70));
      }
    }
    return 0;
  }

 private:
  Dist d_;
  std::mt19937_64 rng_;
};

std::vector<bf16_t> random_bf16(std::size_t count, Dist d, uint64_t seed) {
  ValueGen g(d, seed);
  std::vector<bf16_t> v(count);
  for (auto& x : v) x = g.next();
  return v;
}

// Compares bit patterns; reports the first few mismatches with their coordinates.
::testing::AssertionResult bits_equal(const std::vector<float>& got, const std::vector<float>& want,
                                      std::size_t n) {
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (i >= got.size() || f32_bits(got[i]) != f32_bits(want[i])) {
      if (bad < 5) {
        char buf[128];
        std::snprintf(buf, sizeof buf, " [%zu,%zu] got %08x want %08x;", i / n, i % n,
                      i < got.size() ? f32_bits(got[i]) : 0u, f32_bits(want[i]));
        first += buf;
      }
      ++bad;
    }
  }
  if (bad == 0 && got.size() == want.size()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " outputs differ:" << first;
}

class MxuTest : public ::testing::TestWithParam<std::tuple<std::string, Dist>> {};

// Random shapes: M from 1 to 300, K and N both multiples and non-multiples of the array.
TEST_P(MxuTest, RandomShapesBitExact) {
  const auto& [variant, dist] = GetParam();
  auto dut = make_mxu(variant);
  const std::size_t R = dut->rows(), C = dut->cols();
  std::mt19937_64 rng(std::hash<std::string>{}(variant) ^ static_cast<uint64_t>(dist));
  const std::size_t kShapes[][3] = {
      {1, R, C},      {300, 1, 1},         {7, 2 * R, C + 1}, {37, R + 3, 2 * C},
      {130, 3 * R - 1, C - 1}, {0, 0, 0},  {0, 0, 0},        {0, 0, 0},
  };
  for (int s = 0; s < 8; ++s) {
    MatmulShape sh{kShapes[s][0], kShapes[s][1], kShapes[s][2]};
    if (sh.m == 0) sh = {1 + rng() % 300, 1 + rng() % (3 * R), 1 + rng() % (3 * C)};
    const auto a = random_bf16(sh.m * sh.k, dist, rng());
    const auto w = random_bf16(sh.k * sh.n, dist, rng());
    const auto want = golden_matmul(a, w, sh.m, sh.k, sh.n);
    const auto got = run_matmul(*dut, sh, a, w, nullptr);
    ASSERT_TRUE(got.completed);
    EXPECT_TRUE(bits_equal(got.c, want, sh.n))
        << "shape " << sh.m << "x" << sh.k << "x" << sh.n;
  }
}

// Accumulate mode: the columns start from a given C0 instead of +0.0.
TEST_P(MxuTest, AccumulateBitExact) {
  const auto& [variant, dist] = GetParam();
  auto dut = make_mxu(variant);
  std::mt19937_64 rng(99 + static_cast<uint64_t>(dist));
  const MatmulShape sh{45, 2 * dut->rows() + 1, dut->cols() + 2};
  const auto a = random_bf16(sh.m * sh.k, dist, rng());
  const auto w = random_bf16(sh.k * sh.n, dist, rng());
  std::vector<float> acc(sh.m * sh.n);
  ValueGen g(dist, rng());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    // f32 accumulators with full mantissas, including -0.0 (which K padding must keep).
    acc[i] = i % 17 == 0 ? -0.0f
                         : bf16_to_f32(g.next()) * (1.0f + static_cast<float>(rng() % 1000) / 997.0f);
  }
  const auto want = golden_matmul(a, w, sh.m, sh.k, sh.n, &acc);
  const auto got = run_matmul(*dut, sh, a, w, &acc);
  ASSERT_TRUE(got.completed);
  EXPECT_TRUE(bits_equal(got.c, want, sh.n));
}

// Random input bubbles and output back-pressure change the timing, never the bits.
TEST_P(MxuTest, BackPressureBitExact) {
  const auto& [variant, dist] = GetParam();
  auto dut = make_mxu(variant);
  std::mt19937_64 rng(7 + static_cast<uint64_t>(dist));
  const MatmulShape sh{60, 2 * dut->rows() + 2, 2 * dut->cols() - 1};
  const auto a = random_bf16(sh.m * sh.k, dist, rng());
  const auto w = random_bf16(sh.k * sh.n, dist, rng());
  const auto want = golden_matmul(a, w, sh.m, sh.k, sh.n);
  MxuRunOptions opt;
  opt.in_gap_prob = 0.3;
  opt.out_stall_prob = 0.4;
  opt.seed = rng();
  const auto got = run_matmul(*dut, sh, a, w, nullptr, opt);
  ASSERT_TRUE(got.completed);
  EXPECT_GT(got.stats.out_stalls, 0u);
  EXPECT_TRUE(bits_equal(got.c, want, sh.n));
}

std::string name_of(const ::testing::TestParamInfo<MxuTest::ParamType>& info) {
  return "v" + std::get<0>(info.param) + "_" + dist_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Variants, MxuTest,
                         ::testing::Combine(::testing::ValuesIn(built_mxu_variants()),
                                            ::testing::Values(Dist::kNarrow, Dist::kWide,
                                                              Dist::kSpecials, Dist::kCancel)),
                         name_of);

class MxuVariantTest : public ::testing::TestWithParam<std::string> {};

// Back-to-back weight tiles: after the one-time fill (first weight tile) and drain (the array's
// latency), every cycle accepts an activation row.
TEST_P(MxuVariantTest, BackToBackTilesHaveNoBubble) {
  auto dut = make_mxu(GetParam());
  const std::size_t R = dut->rows(), C = dut->cols(), WR = dut->w_rows();
  const MatmulShape sh{2 * (R + C) + 8, 3 * R, 3 * C};  // 9 tiles, M long enough to hide loads
  const auto a = random_bf16(sh.m * sh.k, Dist::kNarrow, 1);
  const auto w = random_bf16(sh.k * sh.n, Dist::kNarrow, 2);
  const auto got = run_matmul(*dut, sh, a, w, nullptr);
  ASSERT_TRUE(got.completed);
  EXPECT_EQ(got.stats.ideal_cycles, sh.m * 9);
  // fill: R / WR weight beats; drain: R + C latency; plus the edge the last result is taken on.
  EXPECT_LE(got.stats.cycles, got.stats.ideal_cycles + R / WR + R + C + 1);
  EXPECT_EQ(got.stats.w_beats, 9 * R / WR);
  EXPECT_TRUE(bits_equal(got.c, golden_matmul(a, w, sh.m, sh.k, sh.n), sh.n));
}

// Reset in mid-stream: the array drops everything in flight and the next matmul is exact.
TEST_P(MxuVariantTest, ResetInMidStream) {
  auto dut = make_mxu(GetParam());
  const MatmulShape sh{50, 2 * dut->rows() + 1, dut->cols() + 1};
  const auto a = random_bf16(sh.m * sh.k, Dist::kWide, 3);
  const auto w = random_bf16(sh.k * sh.n, Dist::kWide, 4);
  for (uint64_t stop : {3u, 17u, 61u}) {
    MxuRunOptions opt;
    opt.stop_after = stop;
    EXPECT_FALSE(run_matmul(*dut, sh, a, w, nullptr, opt).completed);
    dut->reset(static_cast<unsigned>(1 + stop % 3));
    dut->eval();
    EXPECT_TRUE(dut->idle());
    EXPECT_FALSE(dut->out_valid());
    const auto got = run_matmul(*dut, sh, a, w, nullptr);
    ASSERT_TRUE(got.completed);
    EXPECT_TRUE(bits_equal(got.c, golden_matmul(a, w, sh.m, sh.k, sh.n), sh.n));
  }
}

// Skinny tiles (M < R + C): a bank is busy for about M + R + C cycles (its rows, then the drain
// of its last row through the array), so with WB banks a tile can start every
// max(M, (M + R + C) / WB, R / WR) cycles (docs/mxu.md), not every (M + R + C) / 2 as with two.
TEST_P(MxuVariantTest, SkinnyTilesFollowAtTheBankPeriod) {
  auto dut = make_mxu(GetParam());
  const std::size_t R = dut->rows(), C = dut->cols(), WB = dut->w_banks(), WR = dut->w_rows();
  for (const std::size_t M : {R / 2, R}) {
    const MatmulShape sh{M, R, 16 * C};  // 16 tiles, one K step
    const auto a = random_bf16(sh.m * sh.k, Dist::kNarrow, 5);
    const auto w = random_bf16(sh.k * sh.n, Dist::kNarrow, 6);
    const auto got = run_matmul(*dut, sh, a, w, nullptr);
    ASSERT_TRUE(got.completed);
    EXPECT_TRUE(bits_equal(got.c, golden_matmul(a, w, sh.m, sh.k, sh.n), sh.n));
    // Every WB tiles take M + R + C cycles (the bank of tile t is full again M + R + C cycles
    // after tile t started), or M each when that is longer; plus the first fill and the drain.
    const uint64_t groups = 16 / WB;
    const uint64_t period = std::max<uint64_t>({WB * M, M + R + C, WB * (R / WR)});
    const uint64_t bound = groups * period + R / WR + R + C + 1;
    EXPECT_LE(got.stats.cycles, bound) << "M = " << M;
    // Two banks would need (M + R + C) per two tiles: the bound above is below that.
    EXPECT_LT(got.stats.cycles, 8 * (M + R + C)) << "M = " << M;
  }
}

// Weights offered with no activation never deadlock the loader: WB tiles fill every bank, the
// next one waits until the first is released by its last activation row.
TEST_P(MxuVariantTest, WeightTileBeyondTheBanksWaitsForARelease) {
  auto dut = make_mxu(GetParam());
  std::vector<bf16_t> rows(dut->w_rows() * dut->cols(), 0x3F80);
  unsigned accepted = 0;
  for (unsigned c = 0; c < (dut->w_banks() + 2) * dut->rows() + 10; ++c) {
    dut->set_weights(true, rows.data());
    dut->set_activations(false, nullptr, nullptr, false, false);
    dut->set_out_ready(true);
    dut->eval();
    accepted += dut->w_ready();
    dut->tick();
  }
  EXPECT_EQ(accepted, dut->w_banks() * dut->rows() / dut->w_rows());
  EXPECT_FALSE(dut->idle());
}

// Fills every weight bank, then offers one more weight beat of `rows`, which the full array does
// not take: the beat waits, as the assertions below need.
static void offer_a_waiting_weight_beat(MxuDut& dut, const std::vector<bf16_t>& rows) {
  dut.set_activations(false, nullptr, nullptr, false, false);
  dut.set_out_ready(true);
  for (unsigned c = 0; c < dut.w_banks() * dut.rows() / dut.w_rows(); ++c) {
    dut.set_weights(true, rows.data());
    dut.eval();
    ASSERT_TRUE(dut.w_ready());
    dut.tick();
  }
  dut.set_weights(true, rows.data());
  dut.eval();
  ASSERT_FALSE(dut.w_ready());
  dut.tick();  // offered, not taken
}

// The assertions are live: a weight beat withdrawn while the array is not ready (every bank
// full) breaks valid/ready, and the next clock edge reports it.
TEST_P(MxuVariantTest, WithdrawnWeightBeatFailsAnAssertion) {
  auto dut = make_mxu(GetParam());
  std::vector<bf16_t> rows(dut->w_rows() * dut->cols(), 0x3F80);
  ASSERT_NO_FATAL_FAILURE(offer_a_waiting_weight_beat(*dut, rows));
  dut->set_weights(false, nullptr);
  dut->eval();
  EXPECT_THROW(dut->tick(), RtlError);
}

// The payload check is live too (an immediate assertion at the clock edge since issue 33's
// fourth round): a waiting weight beat that keeps its valid but changes its data fails
// WPayloadStable_A at the next clock edge.
TEST_P(MxuVariantTest, ChangedWaitingWeightBeatFailsAnAssertion) {
  auto dut = make_mxu(GetParam());
  std::vector<bf16_t> rows(dut->w_rows() * dut->cols(), 0x3F80);
  ASSERT_NO_FATAL_FAILURE(offer_a_waiting_weight_beat(*dut, rows));
  dut->set_weights(true, rows.data());
  dut->eval();
  ASSERT_NO_THROW(dut->tick());  // still offered, unchanged: fine
  std::vector<bf16_t> other(rows.size(), 0x4000);
  dut->set_weights(true, other.data());
  dut->eval();
  EXPECT_THROW(dut->tick(), RtlError);
}

INSTANTIATE_TEST_SUITE_P(Variants, MxuVariantTest, ::testing::ValuesIn(built_mxu_variants()),
                         [](const auto& p) { return "v" + p.param; });

TEST(MxuRegistry, UnbuiltVariantSaysHowToBuildIt) {
  const auto built = built_mxu_variants();
  if (std::find(built.begin(), built.end(), "128x128") != built.end())
    GTEST_SKIP() << "128x128 is built in this configuration";
  try {
    make_mxu("128x128");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TPU_BUILD_MXU128=ON"), std::string::npos) << e.what();
  }
}

TEST(MxuRegistry, UnknownVariantIsAnError) {
  EXPECT_THROW(make_mxu("3x3"), std::invalid_argument);
}

TEST(MxuRunner, BadShapesAreErrors) {
  auto dut = make_mxu(built_mxu_variants().front());
  std::vector<bf16_t> a(6), w(6);
  EXPECT_THROW(run_matmul(*dut, {2, 3, 2}, a, std::vector<bf16_t>(5), nullptr),
               std::invalid_argument);
  EXPECT_THROW(run_matmul(*dut, {0, 3, 2}, a, w, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
