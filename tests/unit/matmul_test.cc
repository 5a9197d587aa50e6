// tpu::golden_matmul: layout, accumulate mode, the increasing-k summation order, signed zeros,
// K padding, NaN and size checks.
#include "tpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {
namespace {

// bf16 bits of a value that bf16 holds exactly (the test's inputs are chosen so).
bf16_t bf(float f) {
  const bf16_t b = f32_to_bf16(f);
  EXPECT_EQ(bf16_to_f32(b), f) << f << " is not a bf16 value";
  return b;
}

std::vector<bf16_t> bfv(std::initializer_list<float> v) {
  std::vector<bf16_t> out;
  for (float f : v) out.push_back(bf(f));
  return out;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float f : v) out.push_back(f32_bits(f));
  return out;
}

TEST(GoldenMatmul, HandComputed2x3x2) {
  const auto a = bfv({1, 2, 3, 4, 5, 6});       // 2 x 3, row-major
  const auto w = bfv({7, 8, 9, 10, 11, 12});    // 3 x 2
  const auto c = golden_matmul(a, w, 2, 3, 2);  // [[58, 64], [139, 154]]
  EXPECT_EQ(c, (std::vector<float>{58, 64, 139, 154}));
}

TEST(GoldenMatmul, NonSquareLayoutMatchesIntegerProduct) {
  // Small integers keep every partial sum exact, so an int64 product is the exact answer and any
  // mix-up of rows, columns or strides shows.
  const size_t m = 7, k = 13, n = 5;
  std::mt19937 rng(5);
  std::vector<int> ai(m * k), wi(k * n);
  std::vector<bf16_t> a(m * k), w(k * n);
  for (size_t i = 0; i < m * k; ++i) {
    ai[i] = static_cast<int>(rng() % 17) - 8;
    a[i] = bf(static_cast<float>(ai[i]));
  }
  for (size_t i = 0; i < k * n; ++i) {
    wi[i] = static_cast<int>(rng() % 17) - 8;
    w[i] = bf(static_cast<float>(wi[i]));
  }
  const auto c = golden_matmul(a, w, m, k, n);
  ASSERT_EQ(c.size(), m * n);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (size_t kk = 0; kk < k; ++kk) s += ai[i * k + kk] * wi[kk * n + j];
      EXPECT_EQ(c[i * n + j], static_cast<float>(s)) << i << "," << j;
    }
  }
}

TEST(GoldenMatmul, AccumulateStartsFromTheAccumulator) {
  const auto a = bfv({1, 2, 3, 4});  // 2 x 2
  const auto w = bfv({1, 0, 0, 1});  // identity
  const std::vector<float> acc = {0.5f, -1.0f, 100.0f, -4.0f};
  EXPECT_EQ(golden_matmul(a, w, 2, 2, 2, &acc), (std::vector<float>{1.5f, 1.0f, 103.0f, 0.0f}));
  // The accumulator enters before the first step, not after the last: 2^24 + 1 + 1 one step at
  // a time stays 2^24 (each +1 is a tie to even), whereas 2^24 + (1 + 1) would be 2^24 + 2.
  const float big = 16777216.0f;
  const std::vector<float> acc1 = {big};
  EXPECT_EQ(golden_matmul(bfv({1, 1}), bfv({1, 1}), 1, 2, 1, &acc1)[0], big);
  const std::vector<float> acc_empty;
  EXPECT_EQ(golden_matmul({}, {}, 0, 2, 0, &acc_empty).size(), 0u);
}

TEST(GoldenMatmul, KZero) {
  const auto c = golden_matmul({}, {}, 2, 0, 3);
  EXPECT_EQ(bits(c), std::vector<uint32_t>(6, 0u));  // +0.0, not -0.0
  const std::vector<float> acc = {1, -0.0f, 3, 4, 5, 6};
  EXPECT_EQ(bits(golden_matmul({}, {}, 2, 0, 3, &acc)), bits(acc));
}

TEST(GoldenMatmul, SumsInIncreasingKOrder) {
  // From +0: 2^24, + 1 (tie -> 2^24), - 2^24 -> 0. Decreasing order gives -2^24 + 1 + 2^24 = 1.
  const float big = 16777216.0f;
  EXPECT_EQ(golden_matmul(bfv({1, 1, 1}), bfv({big, 1, -big}), 1, 3, 1)[0], 0.0f);
  // Pairwise (tree) order would give (2^24 + 1) + (1 - 2^24) = 2^24 + -16777215 = 1.
  EXPECT_EQ(golden_matmul(bfv({1, 1, 1, 1}), bfv({big, 1, 1, -big}), 1, 4, 1)[0], 0.0f);

  // A case where each of the 24 orders of four terms after an accumulator gives a different
  // answer, so only k = 0, 1, 2, 3 yields the expected one. By hand, from acc = -5:
  //   -5 + 48 = 43; 43 - 2^26 = -67108821 -> -67108820 (ulp 4); + 5*2^24 = 16777260 (exact);
  //   - 11*2^19 = 11010092. The exact sum is 11010091.
  const std::vector<float> terms = {48.0f, -67108864.0f, 83886080.0f, -5767168.0f};
  const std::vector<float> acc = {-5.0f};
  const auto c = golden_matmul(bfv({1, 1, 1, 1}),
                               bfv({48.0f, -67108864.0f, 83886080.0f, -5767168.0f}), 1, 4, 1, &acc);
  EXPECT_EQ(c[0], 11010092.0f);
  // Every other order (computed here one rounding per step) gives something else.
  std::vector<int> idx = {0, 1, 2, 3};
  int orders = 0;
  while (std::next_permutation(idx.begin(), idx.end())) {
    float s = -5.0f;
    for (int i : idx) s = std::fmaf(1.0f, terms[static_cast<size_t>(i)], s);
    EXPECT_NE(s, c[0]) << "order " << idx[0] << idx[1] << idx[2] << idx[3];
    ++orders;
  }
  EXPECT_EQ(orders, 23);
}

TEST(GoldenMatmul, SignedZeros) {
  // All products -0 from the +0 start: +0 + -0 = +0 under round-to-nearest.
  const auto c = golden_matmul(bfv({-0.0f, 1}), bfv({1, -0.0f}), 1, 2, 1);
  EXPECT_EQ(f32_bits(c[0]), 0x00000000u);
  // From a -0 accumulator the same products keep -0.
  const std::vector<float> acc = {-0.0f};
  EXPECT_EQ(f32_bits(golden_matmul(bfv({-0.0f, 1}), bfv({1, -0.0f}), 1, 2, 1, &acc)[0]),
            0x80000000u);
}

// Padding K with A = +0 and W = -0 (docs/numerics.md) leaves every output bit pattern unchanged,
// including -0 accumulators; padding both with +0 does not.
TEST(GoldenMatmul, KPaddingWithPlusZeroTimesMinusZeroIsExact) {
  const size_t m = 4, k = 5, n = 3, kp = 8;
  std::mt19937 rng(11);
  std::vector<bf16_t> a(m * k), w(k * n);
  for (auto& x : a) x = static_cast<bf16_t>(rng());
  for (auto& x : w) x = static_cast<bf16_t>(rng());
  for (auto& x : a) x = (x & 0x7F80) == 0x7F80 ? bf16_t{0x3F80} : x;  // keep NaN/Inf out
  for (auto& x : w) x = (x & 0x7F80) == 0x7F80 ? bf16_t{0xBF80} : x;
  for (size_t kk = 0; kk < k; ++kk) {  // row 0 x column 0: all products are -0
    a[kk] = 0x0000;
    w[kk * n] = 0x8000;
  }
  std::vector<float> acc(m * n);
  for (auto& x : acc) x = f32_from_bits(static_cast<uint32_t>(rng()) & 0xBFFFFFFFu);  // finite
  acc[0] = -0.0f;

  auto pad = [&](bf16_t a_pad, bf16_t w_pad, std::vector<bf16_t>* ap, std::vector<bf16_t>* wp) {
    ap->assign(m * kp, a_pad);
    wp->assign(kp * n, w_pad);
    for (size_t i = 0; i < m; ++i) std::copy_n(&a[i * k], k, &(*ap)[i * kp]);
    std::copy(w.begin(), w.end(), wp->begin());
  };
  std::vector<bf16_t> ap, wp;
  pad(0x0000, 0x8000, &ap, &wp);
  EXPECT_EQ(bits(golden_matmul(ap, wp, m, kp, n, &acc)), bits(golden_matmul(a, w, m, k, n, &acc)));
  EXPECT_EQ(bits(golden_matmul(ap, wp, m, kp, n)), bits(golden_matmul(a, w, m, k, n)));
  EXPECT_EQ(f32_bits(golden_matmul(a, w, m, k, n, &acc)[0]), 0x80000000u);

  pad(0x0000, 0x0000, &ap, &wp);  // the wrong way: -0 becomes +0
  EXPECT_EQ(f32_bits(golden_matmul(ap, wp, m, kp, n, &acc)[0]), 0x00000000u);
}

TEST(GoldenMatmul, SubnormalsAndCanonicalNaN) {
  const bf16_t tiny = bf(std::ldexp(1.0f, -70));
  EXPECT_EQ(f32_bits(golden_matmul({tiny, tiny}, {tiny, tiny}, 1, 2, 1)[0]),
            0x00000400u);  // 2^-139
  // Inf * 0 at k = 0 gives NaN; later steps keep it NaN and canonical.
  const auto c = golden_matmul(bfv({INFINITY, 1, 2}), bfv({0, 3, 4}), 1, 3, 1);
  EXPECT_EQ(f32_bits(c[0]), kF32CanonNan);
  const std::vector<float> acc = {f32_from_bits(0xFFC12345)};  // non-canonical NaN accumulator
  EXPECT_EQ(f32_bits(golden_matmul(bfv({1}), bfv({1}), 1, 1, 1, &acc)[0]), kF32CanonNan);
}

TEST(GoldenMatmul, SizeMismatchThrows) {
  const std::vector<bf16_t> a(6), w(6);
  const std::vector<float> acc(4), acc_bad(3);
  EXPECT_NO_THROW(golden_matmul(a, w, 2, 3, 2));
  EXPECT_THROW(golden_matmul(a, w, 2, 2, 2), std::invalid_argument);  // A is not M x K
  EXPECT_THROW(golden_matmul(a, w, 3, 2, 2), std::invalid_argument);  // W is not K x N
  EXPECT_THROW(golden_matmul(a, w, 2, 3, 3), std::invalid_argument);
  EXPECT_THROW(golden_matmul(a, w, 2, 3, 2, &acc_bad), std::invalid_argument);
  EXPECT_NO_THROW(golden_matmul(a, w, 2, 3, 2, &acc));
}

// golden_transpose is the identity product the chip runs, tile by tile: I x transpose(tile) through
// golden_matmul and f32 -> bf16, on random data salted with +-0, +-Inf, NaNs and subnormals.
TEST(GoldenTranspose, EqualsTheIdentityProductPerTile) {
  std::mt19937_64 rng(11);
  const bf16_t specials[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0,
                             0xFFC1, 0x7F81, 0x0001, 0x8005};
  for (const auto& [rows, cols, lanes, salt] :
       std::vector<std::tuple<std::size_t, std::size_t, std::size_t, unsigned>>{
           {16, 16, 4, 0}, {37, 53, 16, 0}, {37, 53, 16, 40}, {9, 30, 4, 8}, {5, 7, 0, 6},
           {64, 64, 16, 200}}) {
    std::vector<bf16_t> src = random_bf16(rng, rows * cols);
    for (auto& v : src)  // some -0 and +0 everywhere
      if (rng() % 8 == 0) v = (rng() & 1) ? 0x8000 : 0x0000;
    for (unsigned s = 0; s < salt; ++s) src[rng() % src.size()] = specials[rng() % 9];
    const std::size_t tile = lanes == 0 ? cols : lanes;
    std::vector<bf16_t> want(rows * cols);
    for (std::size_t t0 = 0; t0 < cols; t0 += tile) {
      const std::size_t w = std::min(tile, cols - t0);
      // W = transpose of the tile (w x rows), A = I (w x w): C = I x W = W.
      std::vector<bf16_t> wt(w * rows), eye(w * w, 0x0000);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < w; ++j) wt[j * rows + i] = src[i * cols + t0 + j];
      for (std::size_t j = 0; j < w; ++j) eye[j * w + j] = 0x3F80;
      const std::vector<float> c = golden_matmul(eye, wt, w, w, rows);
      for (std::size_t j = 0; j < w; ++j)
        for (std::size_t i = 0; i < rows; ++i)
          want[(t0 + j) * rows + i] = f32_to_bf16(c[j * rows + i]);
    }
    const std::vector<bf16_t> got = golden_transpose(src, rows, cols, lanes);
    ASSERT_EQ(got, want) << rows << " x " << cols << " lanes " << lanes << " salt " << salt;
    if (salt == 0) {  // finite: the exact transpose but -0 -> +0, whatever the tile width
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          const bf16_t v = src[i * cols + j];
          ASSERT_EQ(got[j * rows + i], v == 0x8000 ? 0x0000 : v);
        }
      EXPECT_EQ(golden_transpose(src, rows, cols, 0), got);
    }
  }
  // A lone Inf survives; a second non-finite value in its tile row turns the others NaN.
  EXPECT_EQ(golden_transpose({0x3F80, 0x7F80}, 1, 2), (std::vector<bf16_t>{kBf16CanonNan, 0x7F80}));
  EXPECT_EQ(golden_transpose({0x3F80, 0x7F80}, 1, 2, 1), (std::vector<bf16_t>{0x3F80, 0x7F80}));
  EXPECT_THROW(golden_transpose({1, 2, 3}, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
