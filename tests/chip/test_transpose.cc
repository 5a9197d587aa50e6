// Transposed weight loads (LOADW.transpose) on the whole chip: raw LOADW/MATMUL programs against
// golden_matmul with the transposed tile, the loader's timing, the driver's transposed matmul
// (ChipDriver::matmul(..., w_transposed)) and its on-chip transpose (plan_transpose) bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "chip_driver.h"
#include "lone_chip.h"
#include "tpu/bf16.h"
#include "tpu/matmul.h"

namespace tpu {
namespace {

bool built(const std::string& variant) {
  const auto b = built_chip_variants();
  return std::find(b.begin(), b.end(), variant) != b.end();
}

// Random normal-ish bf16 (exponents near 1), with some -0 when zeros is set.
std::vector<bf16_t> rand_bf16(std::size_t n, std::mt19937_64& rng, bool zeros = false) {
  std::vector<bf16_t> v(n);
  for (auto& x : v) {
    const auto sign = static_cast<uint16_t>((rng() & 1u) << 15);
    const auto e = static_cast<uint16_t>(127 - 4 + rng() % 9);
    x = static_cast<bf16_t>(sign | (e << 7) | (rng() & 0x7Fu));
    if (zeros && rng() % 10 == 0) x = (rng() & 1) ? 0x8000 : 0x0000;
  }
  return v;
}

std::vector<bf16_t> transposed(const std::vector<bf16_t>& v, std::size_t rows, std::size_t cols) {
  std::vector<bf16_t> t(v.size());
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + i] = v[i * cols + j];
  return t;
}

class ChipLoadWTranspose : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!built(GetParam())) GTEST_SKIP() << "chip variant " << GetParam() << " not built";
  }
};

// Tiles at different VMEM rows and strides, loaded plain or transposed, back to back (the weight
// banks rotate; several loads ahead of their MATMULs), each multiplied by the same A: every
// result is golden_matmul(A, tile) or golden_matmul(A, transpose(tile)), bit for bit.
TEST_P(ChipLoadWTranspose, MatmulSeesTheTransposedTile) {
  LoneChip drv(GetParam());
  const uint32_t L = drv.shape().cols, banks = drv.shape().wbanks;
  std::mt19937_64 rng(L * 31 + 5);
  const uint32_t M = 12;
  // VMEM image: rows [0, V) of L bf16 lanes; A at rows [0, M), tiles above.
  struct Tile { uint32_t row, stride; bool t; };
  std::vector<Tile> tiles;
  uint32_t next = M;
  const bool pattern[] = {true, false, true, true, false, false, true, true, true, false};
  for (unsigned i = 0; i < 10; ++i) {
    const uint32_t stride = 1 + (i % 3);
    tiles.push_back({next + (i % 2), stride, pattern[i]});
    next += (i % 2) + stride * (L - 1) + 1;
  }
  const uint32_t V = next;
  const std::vector<bf16_t> image = rand_bf16(static_cast<std::size_t>(V) * L, rng, true);
  const HbmMatrix img = drv.alloc_matrix(V, L, Dtype::kBf16);
  drv.write_matrix(img, image);
  const uint64_t out = drv.alloc(static_cast<uint64_t>(tiles.size()) * M * L * 4);

  std::vector<ChipCmd> prog = {cmd_dma(DmaDir::kHbmToVmem, true, 0, V, L * 2,
                                       static_cast<uint32_t>(img.addr),
                                       static_cast<uint32_t>(img.pitch * 2))};
  // Loads run `ahead` tiles before their MATMULs (within the weight banks).
  const uint32_t ahead = std::min<uint32_t>(3, banks);
  std::size_t loaded = 0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    while (loaded < tiles.size() && loaded < i + ahead) {
      prog.push_back(cmd_loadw(tiles[loaded].row, tiles[loaded].stride, tiles[loaded].t));
      ++loaded;
    }
    prog.push_back(cmd_matmul(0, M, static_cast<uint32_t>(i * M), false));
  }
  prog.push_back(cmd_dma(DmaDir::kAmemToHbm, false, 0, 1,
                         static_cast<uint32_t>(tiles.size() * M * L * 4),
                         static_cast<uint32_t>(out), 0));
  prog.push_back(cmd_halt());
  const ProgramResult r = drv.run(prog);
  ASSERT_EQ(r.err, 0u);
  EXPECT_EQ(r.delta[kStatWeightBeats], tiles.size() * L / drv.shape().wrows);

  const std::vector<bf16_t> a(image.begin(), image.begin() + M * L);
  std::vector<float> got(tiles.size() * M * L);
  drv.read(out, got.data(), got.size() * 4);
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    std::vector<bf16_t> tile(L * L);
    for (uint32_t r0 = 0; r0 < L; ++r0)
      for (uint32_t j = 0; j < L; ++j)
        tile[r0 * L + j] = image[(tiles[i].row + r0 * tiles[i].stride) * L + j];
    const std::vector<float> want =
        golden_matmul(a, tiles[i].t ? transposed(tile, L, L) : tile, M, L, L);
    for (std::size_t e = 0; e < want.size(); ++e)
      ASSERT_EQ(f32_bits(got[i * M * L + e]), f32_bits(want[e]))
          << "tile " << i << (tiles[i].t ? " (transposed)" : " (plain)") << " stride "
          << tiles[i].stride << " element " << e;
  }
}

// A transposed LOADW is in flight Rows / WRows cycles longer than a plain one (the staging
// register's fill), moves the same weight beats, and keeps the MXU busy meanwhile.
TEST_P(ChipLoadWTranspose, CostsRowsOverWRowsExtraCycles) {
  LoneChip drv(GetParam());
  const uint32_t L = drv.shape().cols, beats = L / drv.shape().wrows;
  std::vector<uint64_t> flight, busy;
  for (bool t : {false, true}) {
    const ProgramResult r = drv.run({cmd_loadw(0, 1, t), cmd_matmul(0, 1, 0, false), cmd_halt()});
    ASSERT_EQ(r.err, 0u);
    EXPECT_EQ(r.delta[kStatWeightBeats], beats);
    flight.push_back(r.delta[kStatLoadWFlight]);
    busy.push_back(r.delta[kStatMxuBusy]);
  }
  EXPECT_EQ(flight[1], flight[0] + beats);
  EXPECT_EQ(busy[1], busy[0] + beats);
}

INSTANTIATE_TEST_SUITE_P(Variants, ChipLoadWTranspose, ::testing::Values("4x4", "16x16"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = "v" + i.param;
                           for (auto& c : s)
                             if (c == 'x') c = 'X';
                           return s;
                         });

// ---- plan_transpose ----

// (variant, R, C)
using TrParam = std::tuple<std::string, int, int>;
class ChipTranspose : public ::testing::TestWithParam<TrParam> {};

std::string TrName(const ::testing::TestParamInfo<TrParam>& i) {
  std::string s = "v" + std::get<0>(i.param) + "_" + std::to_string(std::get<1>(i.param)) + "by" +
                  std::to_string(std::get<2>(i.param));
  for (auto& c : s)
    if (c == 'x') c = 'X';
  return s;
}

TEST_P(ChipTranspose, BitExactAgainstTheGolden) {
  const auto& [variant, R, C] = GetParam();
  if (!built(variant)) GTEST_SKIP() << "chip variant " << variant << " not built";
  LoneChip drv(variant);
  const std::size_t rows = static_cast<std::size_t>(R), cols = static_cast<std::size_t>(C);
  std::mt19937_64 rng(rows * 977 + cols);
  const std::vector<bf16_t> src = rand_bf16(rows * cols, rng, true);
  const HbmMatrix sm = drv.alloc_matrix(rows, cols, Dtype::kBf16);
  const HbmMatrix dm = drv.alloc_matrix(cols, rows, Dtype::kBf16);
  drv.write_matrix(sm, src);
  std::vector<ChipCmd> prog = drv.plan_transpose(dm, sm);
  prog.push_back(cmd_halt());
  const ProgramResult r = drv.run(prog);
  ASSERT_EQ(r.err, 0u);
  const std::vector<bf16_t> want = golden_transpose(src, rows, cols, drv.shape().cols);
  const std::vector<uint32_t> got = drv.read_matrix(dm);
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << "first at " << first / rows << ", " << first % rows << ": got " << std::hex
                     << got[first] << " want " << want[first];
  // Finite input: the exact transpose, but -0 -> +0.
  EXPECT_EQ(want, golden_transpose(src, rows, cols));
  std::printf("[ transpose ] %s %zu x %zu: %llu cycles, %zu commands\n", variant.c_str(), rows,
              cols, static_cast<unsigned long long>(r.cycles), prog.size());
}

INSTANTIATE_TEST_SUITE_P(Shapes, ChipTranspose,
                         ::testing::Values(TrParam{"4x4", 16, 16}, TrParam{"4x4", 37, 53},
                                           TrParam{"4x4", 1, 5}, TrParam{"4x4", 256, 256},
                                           TrParam{"16x16", 16, 16}, TrParam{"16x16", 37, 53},
                                           TrParam{"16x16", 130, 300},
                                           TrParam{"16x16", 256, 256}),
                         TrName);

// Inf and NaN: what the identity product makes of them (golden_transpose with the array width),
// and the padding of src, whatever it holds, changes nothing.
TEST(ChipTransposeSpecials, InfAndNanSpreadWithinTheirTileRow) {
  for (const std::string variant : {"4x4", "16x16"}) {
    if (!built(variant)) continue;
    LoneChip drv(variant);
    std::mt19937_64 rng(99);
    const std::size_t rows = 21, cols = 45;
    std::vector<bf16_t> src = rand_bf16(rows * cols, rng, true);
    const bf16_t specials[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x8005};
    for (int s = 0; s < 12; ++s) src[rng() % src.size()] = specials[rng() % 7];
    const HbmMatrix sm = drv.alloc_matrix(rows, cols, Dtype::kBf16);
    const HbmMatrix dm = drv.alloc_matrix(cols, rows, Dtype::kBf16);
    std::vector<bf16_t> buf(rows * sm.pitch);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < sm.pitch; ++j)
        buf[i * sm.pitch + j] = j < cols ? src[i * cols + j] : ((i + j) % 2 ? 0x7F80 : 0xFFC1);
    drv.write(sm.addr, buf.data(), buf.size() * 2);
    std::vector<ChipCmd> prog = drv.plan_transpose(dm, sm);
    prog.push_back(cmd_halt());
    ASSERT_EQ(drv.run(prog).err, 0u);
    const std::vector<bf16_t> want = golden_transpose(src, rows, cols, drv.shape().cols);
    const std::vector<uint32_t> got = drv.read_matrix(dm);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << variant << " dst " << i / rows << ", " << i % rows;
  }
}

TEST(ChipTransposeSpecials, BadOperandsAreClearErrors) {
  LoneChip drv("4x4");
  const HbmMatrix s = drv.alloc_matrix(8, 12, Dtype::kBf16);
  const HbmMatrix d_bad = drv.alloc_matrix(8, 12, Dtype::kBf16);
  const HbmMatrix d_f32 = drv.alloc_matrix(12, 8, Dtype::kF32);
  EXPECT_THROW(drv.plan_transpose(d_bad, s), std::invalid_argument);
  EXPECT_THROW(drv.plan_transpose(d_f32, s), std::invalid_argument);
  EXPECT_THROW(drv.plan_transpose(s, s), std::invalid_argument);
}

// ---- matmul with a transposed W ----

// (variant, M, K, N, bias, relu, bf16 out)
using MtParam = std::tuple<std::string, int, int, int, bool, bool, bool>;
class ChipMatmulTransposed : public ::testing::TestWithParam<MtParam> {};

std::string MtName(const ::testing::TestParamInfo<MtParam>& info) {
  const auto& [v, m, k, n, bias, relu, bf16] = info.param;
  std::string s = "v" + v + "_m" + std::to_string(m) + "k" + std::to_string(k) + "n" +
                  std::to_string(n) + (bias ? "_bias" : "") + (relu ? "_relu" : "") +
                  (bf16 ? "_bf16" : "_f32");
  for (auto& c : s)
    if (c == 'x') c = 'X';
  return s;
}

TEST_P(ChipMatmulTransposed, BitExactAgainstThePlainGolden) {
  const auto& [variant, m, k, n, bias, relu, bf16] = GetParam();
  if (!built(variant)) GTEST_SKIP() << "chip variant " << variant << " not built";
  LoneChip drv(variant);
  const std::size_t M = static_cast<std::size_t>(m), K = static_cast<std::size_t>(k),
                    N = static_cast<std::size_t>(n);
  std::mt19937_64 rng(M * 7919 + K * 31 + N);
  const auto a = rand_bf16(M * K, rng), wt = rand_bf16(N * K, rng);  // wt: N x K = W transposed
  std::vector<float> b(N);
  for (auto& x : b) x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 64.0f;
  const HbmMatrix am = drv.alloc_matrix(M, K, Dtype::kBf16);
  const HbmMatrix wm = drv.alloc_matrix(N, K, Dtype::kBf16);
  const HbmMatrix cm = drv.alloc_matrix(M, N, bf16 ? Dtype::kBf16 : Dtype::kF32);
  const HbmMatrix bm = drv.alloc_matrix(1, N, Dtype::kF32);
  drv.write_matrix(am, a);
  drv.write_matrix(wm, wt);
  drv.write_matrix(bm, b);
  MatmulEpilogue ep;
  ep.bias = bias ? &bm : nullptr;
  ep.relu = relu;
  const MatmulRun r = drv.matmul(cm, am, wm, ep, /*w_transposed=*/true);
  MatmulOptions opt;
  opt.bias = bias ? &b : nullptr;
  opt.relu = relu;
  opt.out_bf16 = bf16;
  const auto want = golden_chip_matmul(a, transposed(wt, N, K), M, K, N, opt);
  const auto got = drv.read_matrix(cm);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(r.prog.delta[kStatMxuBeats], r.compute_cycles);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ChipMatmulTransposed,
    ::testing::Values(MtParam{"4x4", 1, 5, 3, false, false, false},
                      MtParam{"4x4", 7, 9, 11, true, false, false},
                      MtParam{"4x4", 33, 20, 9, true, true, true},
                      MtParam{"4x4", 100, 24, 72, false, false, false},
                      MtParam{"4x4", 90, 66, 250, true, true, true},
                      MtParam{"16x16", 20, 40, 33, true, true, true},
                      MtParam{"16x16", 70, 100, 45, false, true, false},
                      MtParam{"16x16", 1, 16, 16, false, false, false},
                      // W resident, N tiles not a multiple of the panel groups
                      MtParam{"16x16", 40, 24, 80, true, false, false}),
    MtName);

// Products that underflow to -0 in a K edge tile: the transposed W's padding must keep -0 sums
// (a padded product has to be -0, as in the plain layout), so the result is still -0.
TEST(ChipMatmulTransposedZeros, NegativeZeroSumsSurviveTheKPadding) {
  for (const std::string variant : {"4x4", "16x16"}) {
    if (!built(variant)) continue;
    LoneChip drv(variant);
    const std::size_t M = 3, K = 5, N = 6;
    const bf16_t tiny = 0x0D80, ntiny = 0x8D80;  // +-2^-100: products underflow to +-0
    std::vector<bf16_t> a(M * K, ntiny), wt(N * K, tiny);
    for (std::size_t j = 0; j < K; ++j) a[2 * K + j] = tiny;  // row 2: +0 sums
    const HbmMatrix am = drv.alloc_matrix(M, K, Dtype::kBf16);
    const HbmMatrix wm = drv.alloc_matrix(N, K, Dtype::kBf16);
    const HbmMatrix cm = drv.alloc_matrix(M, N, Dtype::kF32);
    drv.write_matrix(am, a);
    drv.write_matrix(wm, wt);
    drv.matmul(cm, am, wm, {}, true);
    const auto want = golden_chip_matmul(a, transposed(wt, N, K), M, K, N, {});
    EXPECT_EQ(want[0], 0x80000000u);
    EXPECT_EQ(drv.read_matrix(cm), want) << variant;
  }
}

// For large M the transposed matmul keeps the plain one's MXU utilization (the loader's extra
// Rows / WRows cycles per tile hide behind the MATMULs).
TEST(ChipMatmulTransposedPerf, SameUtilizationAsPlainForLargeM) {
  if (!built("16x16")) GTEST_SKIP() << "chip variant 16x16 not built";
  LoneChip drv("16x16");
  const std::size_t M = 256, K = 256, N = 256;
  std::mt19937_64 rng(3);
  const auto a = rand_bf16(M * K, rng), w = rand_bf16(K * N, rng);
  const HbmMatrix am = drv.alloc_matrix(M, K, Dtype::kBf16);
  const HbmMatrix wm = drv.alloc_matrix(K, N, Dtype::kBf16);
  const HbmMatrix wtm = drv.alloc_matrix(N, K, Dtype::kBf16);
  const HbmMatrix c1 = drv.alloc_matrix(M, N, Dtype::kF32);
  const HbmMatrix c2 = drv.alloc_matrix(M, N, Dtype::kF32);
  drv.write_matrix(am, a);
  drv.write_matrix(wm, w);
  drv.write_matrix(wtm, transposed(w, K, N));
  const MatmulRun plain = drv.matmul(c1, am, wm);
  const MatmulRun tr = drv.matmul(c2, am, wtm, {}, true);
  EXPECT_EQ(drv.read_matrix(c2), drv.read_matrix(c1));
  EXPECT_EQ(drv.read_matrix(c1), golden_chip_matmul(a, w, M, K, N, {}));
  std::printf("[ matmul ] 16x16 M=K=N=256: plain %llu cycles (MFU %.3f), transposed W %llu cycles "
              "(MFU %.3f)\n",
              static_cast<unsigned long long>(plain.prog.cycles),
              static_cast<double>(plain.compute_cycles) / static_cast<double>(plain.prog.cycles),
              static_cast<unsigned long long>(tr.prog.cycles),
              static_cast<double>(tr.compute_cycles) / static_cast<double>(tr.prog.cycles));
  EXPECT_EQ(tr.prog.delta[kStatMxuBeats], plain.prog.delta[kStatMxuBeats]);
  EXPECT_LT(static_cast<double>(tr.prog.cycles), 1.05 * static_cast<double>(plain.prog.cycles));
}

}  // namespace
}  // namespace tpu
