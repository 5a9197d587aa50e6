// `tpusim vpu`: every op the chip's VPU command takes, run over arrays of special values (+-0,
// +-Inf, NaNs, subnormals, bf16 ties) on both built chips, each output compared bit for bit with
// a computation of its own here (the host's IEEE arithmetic, the bf16 rounding written out), the
// report, and every error (exit 2, one line, nothing written). The transcendental ops against
// transcend.h's functions: the specials on both chips, and every bf16 pattern (as f32) and 10^5
// random f32 per op on the 4x4 chip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli_run.h"
#include "npy.h"
#include "tpu/transcend.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "tpusim_vpu_" + name; }

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr uint32_t kNan = 0x7FC00000u;

// The values every op sees: zeros, infinities, NaNs (quiet, signalling, negative, payload),
// subnormals, the normal edges, bf16 rounding ties (even down, odd up), overflow on rounding.
const std::vector<uint32_t> kSpecials = {
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
    0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000,
    0x3FC00000, 0x40400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F808000, 0x3F818000, 0x3F80C000,
    0x7F7F8000, 0x00008000, 0x00018000, 0xC0490FDB, 0x42F6E979, 0x3EAAAAAB};

// n values: the specials in two orders, so that x and y pair them differently.
std::vector<float> values(std::size_t n, std::size_t step, std::size_t offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = from(kSpecials[(i * step + offset) % kSpecials.size()]);
  return v;
}

uint32_t canon(float r) { return std::isnan(r) ? kNan : bits(r); }
// f32 -> bf16 bits: round to nearest even on the 16 dropped bits, NaN 0x7FC0.
uint32_t bf16_rne(uint32_t x) {
  if (std::isnan(from(x))) return 0x7FC0u;
  return (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
}
uint32_t widen(uint32_t b16) {
  const uint32_t w = (b16 & 0xFFFFu) << 16;
  return std::isnan(from(w)) ? kNan : w;
}
// IEEE 754-2019 maximum / minimum.
uint32_t maximum(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return kNan;
  if (x == 0 && y == 0) return std::signbit(x) ? bits(y) : bits(x);
  return bits(x < y ? y : x);
}
uint32_t minimum(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return kNan;
  if (x == 0 && y == 0) return std::signbit(x) ? bits(x) : bits(y);
  return bits(y < x ? y : x);
}

struct OpCase {
  bool reads_y;
  std::function<uint32_t(float, float)> want;  // the output .npy's bits
};

// Every op the command runs, computed here.
const std::map<std::string, OpCase>& op_cases() {
  static const std::map<std::string, OpCase> m = {
      {"add", {true, [](float x, float y) { return canon(x + y); }}},
      {"sub", {true, [](float x, float y) { return canon(x - y); }}},
      {"mul", {true, [](float x, float y) { return canon(x * y); }}},
      {"max", {true, maximum}},
      {"min", {true, minimum}},
      {"relu", {false, [](float x, float) { return maximum(x, 0.0f); }}},
      // The bf16 result widened exactly into the output's f32.
      {"cvt_f32_bf16", {false, [](float x, float) { return bf16_rne(bits(x)) << 16; }}},
      {"cvt_bf16_f32", {false, [](float x, float) { return widen(bits(x)); }}},
      {"cvt_bf16hi_f32", {false, [](float x, float) { return widen(bits(x) >> 16); }}},
      {"pack_bf16",
       {true, [](float x, float y) { return bf16_rne(bits(y)) << 16 | bf16_rne(bits(x)); }}},
      // The transcendental lanes: transcend.h's functions.
      {"exp2", {false, [](float x, float) { return bits(xcend_exp2(x)); }}},
      {"log2", {false, [](float x, float) { return bits(xcend_log2(x)); }}},
      {"rcp", {false, [](float x, float) { return bits(xcend_rcp(x)); }}},
      {"rsqrt", {false, [](float x, float) { return bits(xcend_rsqrt(x)); }}},
      {"tanh", {false, [](float x, float) { return bits(xcend_tanh(x)); }}},
      {"exp", {false, [](float x, float) { return bits(xcend_exp(x)); }}},
      // A program of nine commands: transcend.h's GELU, step for step.
      {"gelu", {false, [](float x, float) { return bits(xcend_gelu(x)); }}},
  };
  return m;
}

const std::string kConfig4 = std::string("--config ") + TPU_SOURCE_DIR + "/configs/chip_4x4.yaml";

// Runs `op` over x (and y) of `shape` on the chip of `config`; the output checked bit for bit.
void run_op(const std::string& op, const std::string& config, const std::vector<std::size_t>& shape,
            const std::string& tag) {
  SCOPED_TRACE(op + " " + config + " " + tag);
  const OpCase& c = op_cases().at(op);
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;
  const std::vector<float> x = values(n, 1, 0), y = values(n, 7, 3);
  const std::string px = tmp(tag + "x.npy"), py = tmp(tag + "y.npy"), pz = tmp(tag + op + ".npy");
  const std::string json = tmp(tag + op + ".json");
  write_npy_f32(px, x, shape);
  write_npy_f32(py, y, shape);
  std::remove(pz.c_str());
  const CliRun r =
      tpusim("vpu --op " + op + " " + config + " --x " + px + (c.reads_y ? " --y " + py : "") +
             " --out " + pz + " --json " + json + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("golden check: PASS (0 of " + std::to_string(n) + " outputs differ)"),
            std::string::npos)
      << r.out;
  const NpyArray got = read_npy(pz);
  ASSERT_EQ(got.dtype, "<f4");
  ASSERT_EQ(got.shape, shape);
  const std::vector<float> z = got.as_f32();
  int bad = 0;
  for (std::size_t i = 0; i < n && bad < 5; ++i) {
    const uint32_t want = c.want(x[i], y[i]);
    if (bits(z[i]) != want) {
      ++bad;
      ADD_FAILURE() << op << " element " << i << ": x=" << std::hex << bits(x[i])
                    << " y=" << bits(y[i]) << " got " << bits(z[i]) << " want " << want;
    }
  }
  const std::string rep = slurp(json);
  for (const std::string& key :
       {"\"op\": \"" + op + "\"", "\"elements\": " + std::to_string(n), std::string("\"cycles\""),
        std::string("\"verdict\": \"pass\""), std::string("\"mismatches\": 0")})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
}

TEST(TpusimVpu, EveryOpOnTheDefaultChipMatchesTheHostBitForBit) {
  for (const auto& [op, c] : op_cases()) run_op(op, "", {37}, "d16_");
}

TEST(TpusimVpu, EveryOpOn4x4In2DMatchesTheHostBitForBit) {
  for (const auto& [op, c] : op_cases()) run_op(op, kConfig4, {3, 29}, "d4_");
}

// Each transcendental op through the 4x4 chip's VPU command over every bf16 pattern (as f32: the
// pattern << 16) and 10^5 random f32 (half raw bits, half in [-20, 20); fixed seed), in one run
// of 165,536 values per op, every output bit for bit against transcend.h.
TEST(TpusimVpu, TranscendentalOpsEveryBf16And1e5RandomOn4x4) {
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x10000u; ++h) x.push_back(from(h << 16));
  std::mt19937_64 rng(0x34);
  std::uniform_real_distribution<float> dense(-20.0f, 20.0f);
  for (int i = 0; i < 100000; ++i)
    x.push_back((i & 1) != 0 ? from(static_cast<uint32_t>(rng())) : dense(rng));
  const std::string px = tmp("xc_x.npy");
  write_npy_f32(px, x, {x.size()});
  for (const char* op : {"exp2", "log2", "rcp", "rsqrt", "tanh", "exp"}) {
    SCOPED_TRACE(op);
    const std::string pz = tmp(std::string("xc_") + op + ".npy");
    std::remove(pz.c_str());
    const CliRun r = tpusim(std::string("vpu --quiet --op ") + op + " " + kConfig4 + " --x " + px +
                            " --out " + pz);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("golden check: PASS (0 of 165536 outputs differ)"), std::string::npos)
        << r.out;
    const std::vector<float> z = read_npy(pz).as_f32();
    ASSERT_EQ(z.size(), x.size());
    const auto& want = op_cases().at(op).want;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (bits(z[i]) != want(x[i], 0.0f) && ++bad <= 5)
        ADD_FAILURE() << op << "(0x" << std::hex << bits(x[i]) << "): chip 0x" << bits(z[i])
                      << ", transcend.h 0x" << want(x[i], 0.0f);
    EXPECT_EQ(bad, 0u);
  }
}

// A hand-checked value or two, apart from the computations above.
TEST(TpusimVpu, HandCheckedValues) {
  write_npy_f32(tmp("hx.npy"), {1.0f, 0.1f, -3.0f}, {3});
  write_npy_f32(tmp("hy.npy"), {2.0f, 0.2f, 0.5f}, {3});
  ASSERT_EQ(tpusim("vpu --quiet --op add --x " + tmp("hx.npy") + " --y " + tmp("hy.npy") +
                   " --out " + tmp("hz.npy"))
                .code,
            0);
  std::vector<float> z = read_npy(tmp("hz.npy")).as_f32();
  EXPECT_EQ(bits(z[0]), 0x40400000u);  // 3
  EXPECT_EQ(bits(z[1]), 0x3E99999Au);  // 0.1f + 0.2f = 0.3000000119...
  EXPECT_EQ(bits(z[2]), 0xC0200000u);  // -2.5
  ASSERT_EQ(
      tpusim("vpu --quiet --op cvt_f32_bf16 --x " + tmp("hx.npy") + " --out " + tmp("hz.npy")).code,
      0);
  z = read_npy(tmp("hz.npy")).as_f32();
  EXPECT_EQ(bits(z[1]), 0x3DCD0000u);  // 0.1f = 0x3DCCCCCD rounds up to bf16 0x3DCD
  ASSERT_EQ(tpusim("vpu --quiet --op rcp --x " + tmp("hy.npy") + " --out " + tmp("hz.npy")).code,
            0);
  z = read_npy(tmp("hz.npy")).as_f32();
  EXPECT_EQ(bits(z[0]), 0x3F000000u);  // 1/2
  EXPECT_EQ(bits(z[1]), 0x40A00000u);  // 1/0.2f = 4.99999993, correctly rounded: 5
  EXPECT_EQ(bits(z[2]), 0x40000000u);  // 2
}

// gelu (a program of nine commands per chunk of rows) over a range where it bends, bit for bit
// against transcend.h.
TEST(TpusimVpu, GeluProgramMatchesTranscendH) {
  std::vector<float> x;
  for (int i = -400; i < 400; ++i) x.push_back(static_cast<float>(i) / 37.0f);
  write_npy_f32(tmp("gx.npy"), x, {x.size()});
  const CliRun r = tpusim("vpu --op gelu " + kConfig4 + " --x " + tmp("gx.npy") + " --out " +
                          tmp("gz.npy") + " --json " + tmp("gz.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("golden check: PASS (0 of 800 outputs differ)"), std::string::npos) << r.out;
  const std::vector<float> z = read_npy(tmp("gz.npy")).as_f32();
  ASSERT_EQ(z.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(bits(z[i]), bits(xcend_gelu(x[i]))) << "gelu(" << x[i] << ")";
  EXPECT_EQ(bits(z[437]), bits(xcend_gelu(1.0f)));  // x = 37 / 37
  EXPECT_NEAR(z[437], 0.8411920f, 1e-6f);           // GELU(1), tanh form
  const std::string rep = slurp(tmp("gz.json"));
  EXPECT_NE(rep.find("\"op\": \"gelu\""), std::string::npos) << rep;
}

// A row reduced as the VPU does it, computed here with the host's arithmetic: lane l of `lanes`
// takes elements l, l + lanes, ... in order from the identity (-0, -Inf), then the lanes pairwise.
uint32_t host_row_reduce(bool sum, const float* v, std::size_t n, std::size_t lanes) {
  auto op = [&](uint32_t a, uint32_t b) {
    return sum ? canon(from(a) + from(b)) : maximum(from(a), from(b));
  };
  std::vector<uint32_t> acc(lanes, sum ? 0x80000000u : 0xFF800000u);
  for (std::size_t i = 0; i < n; ++i) acc[i % lanes] = op(acc[i % lanes], bits(v[i]));
  for (std::size_t w = lanes / 2; w >= 1; w /= 2) {
    for (std::size_t i = 0; i < w; ++i) acc[i] = op(acc[2 * i], acc[2 * i + 1]);
    if (w == 1) break;
  }
  return acc[0];
}

// red_sum and red_max: each row of x to one value (the VROW command), for rows of one beat, of
// several with a partial last one, 1-D x (one row), special values among random ones; the
// output's shape is x's rows, every value bit for bit against the host's computation.
TEST(TpusimVpu, ReductionsOfRowsMatchTheHostBitForBit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 100.0f);
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> runs = {
      {kConfig4, {5, 37}},  {kConfig4, {1, 4}},    {kConfig4, {9}},
      {kConfig4, {40, 64}}, {kConfig4, {3, 1020}}, {kConfig4, {70, 9}}};
  for (const std::string op : {"red_sum", "red_max"}) {
    for (const auto& [config, shape] : runs) {
      const std::size_t n = shape.size() == 2 ? shape[0] * shape[1] : shape[0];
      const std::size_t cols = shape.back(), rows = n / cols, lanes = 4;
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i)
        x[i] = rng() % 8 == 0 ? from(kSpecials[rng() % kSpecials.size()]) : nd(rng);
      if (n > 60) std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(cols), 1.5f);
      write_npy_f32(tmp("rx.npy"), x, shape);
      std::remove(tmp("rz.npy").c_str());
      const CliRun r = tpusim("vpu --quiet --op " + op + " " + config + " --x " + tmp("rx.npy") +
                              " --out " + tmp("rz.npy"));
      ASSERT_EQ(r.code, 0) << op << " " << r.out;
      EXPECT_NE(r.out.find("golden check: PASS"), std::string::npos) << r.out;
      const NpyArray z = read_npy(tmp("rz.npy"));
      ASSERT_EQ(z.shape, std::vector<std::size_t>{rows}) << op;
      const std::vector<float> zv = z.as_f32();
      for (std::size_t row = 0; row < rows; ++row)
        EXPECT_EQ(bits(zv[row]), host_row_reduce(op == "red_sum", &x[row * cols], cols, lanes))
            << op << " " << config << " row " << row << " of " << rows << " x " << cols;
    }
  }
}

TEST(TpusimVpu, HelpListsTheOps) {
  const CliRun r = tpusim("help vpu");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const auto& [op, c] : op_cases()) EXPECT_NE(r.out.find(op), std::string::npos) << op;
  EXPECT_NE(r.out.find("--x"), std::string::npos) << r.out;
  EXPECT_NE(tpusim("--help").out.find("vpu"), std::string::npos);
}

// The unknown-op error lists exactly the ops computed here: an op added to the contract and the
// golden shows up in the command, and this test asks for its own computation of it.
TEST(TpusimVpu, TheOpsAreExactlyThoseTestedHere) {
  write_npy_f32(tmp("ox.npy"), {1.0f}, {1});
  const CliRun r = tpusim("vpu --op bogus --x " + tmp("ox.npy"));
  ASSERT_EQ(r.code, 2) << r.out;
  const auto a = r.out.find("(tpusim vpu runs: ");
  ASSERT_NE(a, std::string::npos) << r.out;
  const auto b = r.out.find(')', a);
  std::string list = r.out.substr(a + 18, b - a - 18) + ", ";
  std::vector<std::string> got;
  for (std::size_t p = 0; (p = list.find(", ")) != std::string::npos; list.erase(0, p + 2))
    got.push_back(list.substr(0, p));
  std::vector<std::string> want = {"red_max", "red_sum"};  // ReductionsOfRows...
  for (const auto& [op, c] : op_cases()) want.push_back(op);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(TpusimVpu, CheckStopsBeforeTheFirstCycle) {
  write_npy_f32(tmp("cx.npy"), values(40, 1, 0), {40});
  std::remove(tmp("cz.npy").c_str());
  const CliRun r =
      tpusim("vpu --op relu --x " + tmp("cx.npy") + " --out " + tmp("cz.npy") + " --check");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("check passed"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tmp("cz.npy")));
}

// Each error: exit 2, one line "tpusim: error: ..." naming the flag or file and the rule, no
// output written.
TEST(TpusimVpu, ErrorsAreOneLineExitTwoAndWriteNothing) {
  const std::string x = tmp("ex.npy"), y = tmp("ey.npy"), y2 = tmp("ey2.npy"), u = tmp("eu.npy");
  const std::string t = tmp("et.npy"), d3 = tmp("e3.npy"), e0 = tmp("e0.npy"), out = tmp("eo.npy");
  write_npy_f32(x, values(10, 1, 0), {10});
  write_npy_f32(y, values(10, 3, 0), {10});
  write_npy_f32(y2, values(10, 3, 0), {2, 5});
  write_npy_u16(u, std::vector<uint16_t>(10, 0x3F80), {10});
  std::ofstream(t) << "not an npy file\n";
  write_npy_f32(d3, values(8, 1, 0), {2, 2, 2});
  write_npy_f32(e0, {}, {0});
  const std::string wide = tmp("ewide.npy");  // a row of 1021 elements: 256 memory rows on 4x4
  write_npy_f32(wide, values(2 * 1021, 1, 0), {2, 1021});
  const std::string o = " --out " + out;
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"--op bogus --x " + x + o, {"--op bogus", "unknown op", "add, sub"}},
      {"--op red_sum --x " + x + " --y " + y + o, {"--y " + y, "takes x alone"}},
      {"--op red_max --x " + wide + " " + kConfig4 + o,
       {"--x " + wide, "1021 elements", "255 memory rows"}},
      {"--op fma --x " + x + " --y " + y + o, {"--op fma", "z operand", "-0"}},
      {"--op add --x " + x + o, {"--y", "takes x and y"}},
      {"--op relu --x " + x + " --y " + y + o, {"--y " + y, "takes x alone"}},
      {"--op add --x " + x + " --y " + y + " --z " + y + o, {"--z", "takes no z"}},
      {"--op add --x " + x + " --y " + y2 + o, {"--y " + y2, "(2, 5)", "(10,)", "shape"}},
      {"--op relu --x " + u + o, {"--x " + u, "float32"}},
      {"--op relu --x " + t + o, {t}},
      {"--op relu --x " + d3 + o, {"--x " + d3, "1-D or 2-D"}},
      {"--op relu --x " + e0 + o, {"--x " + e0, "no element"}},
      {"--op relu --x " + tmp("missing.npy") + o, {"missing.npy"}},
      {"--op relu --x " + x + " --variant 3x3" + o, {"--variant 3x3"}},
      {"--x " + x + o, {"--op"}},
  };
  for (const auto& [args, words] : cases) {
    std::remove(out.c_str());
    const CliRun r = tpusim("vpu " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("tpusim: error: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << "\n" << r.out;
    for (const std::string& w : words)
      EXPECT_NE(r.out.find(w), std::string::npos) << w << " in " << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

// An array the chip's HBM cannot hold (operands and result) is refused before the first cycle.
// Chip 4x4 has 16 MiB of HBM: three arrays of 6 MB do not fit.
constexpr std::size_t kBigElements = 1500000;

TEST(TpusimVpu, AnArrayLargerThanTheHbmIsAnError) {
  const std::string x = tmp("big.npy");
  write_npy_f32(x, std::vector<float>(kBigElements, 1.0f), {kBigElements});
  const CliRun r = tpusim("vpu --op add --x " + x + " --y " + x + " " + kConfig4);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bytes of HBM"), std::string::npos) << r.out;
  std::remove(x.c_str());
}

}  // namespace
}  // namespace tpu
