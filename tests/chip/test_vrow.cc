// The VROW command (docs/isa.md "VROW") on the 4x4 chip: row reductions (red_sum, red_max) of
// logical rows of several memory rows into packed per-row results, and elementwise ops with a
// per-row y, bit for bit against tpu::vrow_golden over random f32 with special values, several
// row lengths, row counts and layouts; an independent check of the maxima (order-free) and of
// the sums (f64 bound); a softmax and a layer norm composed of chip commands against the GPT
// golden's bits; throughput and latency; bad fields; the SVA RedDstApart_A firing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "lone_chip.h"
#include "tpu/bf16.h"
#include "tpu/gpt.h"
#include "tpu/transcend.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

constexpr uint32_t kSpecials[] = {0x7FC00000u, 0x7F800001u, 0xFFC01234u, 0x7F800000u,
                                  0xFF800000u, 0x00000000u, 0x80000000u, 0x00000001u,
                                  0x807FFFFFu, 0x00400000u, 0x7F7FFFFFu, 0xFF7FFFFFu};

// A random f32: mostly ordinary values of mixed scale, with `special` in 1000 a special value.
uint32_t rand_f32(std::mt19937_64& rng, unsigned special) {
  if (rng() % 1000 < special) return kSpecials[rng() % std::size(kSpecials)];
  const uint32_t sign = static_cast<uint32_t>(rng() & 1u) << 31;
  const uint32_t e = 127 - 12 + static_cast<uint32_t>(rng() % 25);
  return sign | (e << 23) | static_cast<uint32_t>(rng() & 0x7FFFFFu);
}

// The 4x4 chip with a host image of its VMEM rows [0, rows): load() copies the image in,
// run() runs commands and copies the rows back out.
struct Rig {
  LoneChip drv{"4x4"};
  uint32_t lanes = drv.shape().cols;
  uint32_t rows;  // a multiple of 64 bytes of rows
  std::vector<uint32_t> vmem, amem;
  uint64_t hbm;

  explicit Rig(uint32_t n)
      : rows((n + 64 / (4 * lanes) - 1) / (64 / (4 * lanes)) * (64 / (4 * lanes))),
        vmem(static_cast<std::size_t>(rows) * lanes, 0u),
        hbm(drv.alloc(static_cast<uint64_t>(rows) * lanes * 4)) {}
  uint32_t segs() const { return rows * lanes * 4 / 64; }
  void load() {
    drv.write(hbm, vmem.data(), vmem.size() * 4);
    const ProgramResult r =
        drv.run({cmd_dma(DmaDir::kHbmToVmem, false, 0, segs(), 64, static_cast<uint32_t>(hbm), 64),
                 cmd_halt()});
    ASSERT_EQ(r.err, 0u);
  }
  // Runs `prog`, then stores VMEM rows [0, rows) into the image's place (`got`).
  ProgramResult run(std::vector<ChipCmd> prog, std::vector<uint32_t>& got) {
    prog.push_back(
        cmd_dma(DmaDir::kVmemToHbm, false, 0, segs(), 64, static_cast<uint32_t>(hbm), 64));
    prog.push_back(cmd_halt());
    const ProgramResult r = drv.run(prog);
    got.assign(vmem.size(), 0u);
    drv.read(hbm, got.data(), got.size() * 4);
    return r;
  }
};

std::size_t mismatches(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                       std::size_t* first) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && n++ == 0) *first = i;
  return n;
}

// IEEE maximum over a row without any order: NaN if any, else the largest (-0 < +0).
uint32_t order_free_max(const std::vector<uint32_t>& v) {
  uint32_t best = 0xFF800000u;
  for (const uint32_t x : v) {
    if (std::isnan(f32_from_bits(x))) return 0x7FC00000u;
    const float a = f32_from_bits(x), b = f32_from_bits(best);
    if (a > b || (a == b && !(x >> 31) && (best >> 31))) best = x;
  }
  return best;
}

struct Shape {
  uint32_t rows, beats;
  bool tiles;  // column tiles: beat j of row r at j * rows + r; else row r's beats contiguous
};

const Shape kShapes[] = {{1, 1, true},  {5, 1, true},   {4, 3, true},  {9, 8, true},
                         {17, 2, true}, {3, 16, false}, {8, 5, false}, {33, 4, true}};

// x: the logical rows at VMEM rows [0, rows * beats); the packed results after them.
TEST(ChipVrow, ReductionsMatchTheGoldenBitForBit) {
  for (const VpuOp op : {VpuOp::kRedSum, VpuOp::kRedMax}) {
    for (const unsigned special : {0u, 100u}) {
      for (const Shape& s : kShapes) {
        const uint32_t n = s.rows * s.beats, packed = (s.rows + 3) / 4;
        Rig rig(n + packed + 1);
        std::mt19937_64 rng(n * 31 + special + static_cast<unsigned>(op));
        for (uint32_t i = 0; i < n * rig.lanes; ++i) rig.vmem[i] = rand_f32(rng, special);
        for (uint32_t i = n * rig.lanes; i < rig.vmem.size(); ++i) rig.vmem[i] = 0x12345678u;
        rig.load();
        const uint32_t bs = s.tiles ? s.rows : 1, rs = s.tiles ? 1 : s.beats;
        const ChipCmd c = cmd_vrow(op, Mem::kVmem, 0, s.rows, s.beats, bs, rs, 0, n);
        std::vector<uint32_t> got;
        const ProgramResult r = rig.run({c}, got);
        ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
        std::vector<uint32_t> want = rig.vmem;
        vrow_golden(CmdVrow::decode(c), rig.lanes, want, rig.amem);
        std::size_t first = 0;
        const std::string what = std::string(vpu_op_name(op)) + " rows " + std::to_string(s.rows) +
                                 " beats " + std::to_string(s.beats);
        EXPECT_EQ(mismatches(got, want, &first), 0u)
            << what << ": first at word " << first << " got " << std::hex << got[first] << " want "
            << want[first];
        // Independent: the maxima without any order; the sums of finite rows within an f64 bound.
        for (uint32_t row = 0; row < s.rows; ++row) {
          std::vector<uint32_t> v;
          double sum = 0, mag = 0;
          bool finite = true;
          for (uint32_t j = 0; j < s.beats; ++j)
            for (uint32_t l = 0; l < rig.lanes; ++l) {
              const uint32_t x = rig.vmem[(row * rs + j * bs) * rig.lanes + l];
              v.push_back(x);
              finite = finite && std::isfinite(f32_from_bits(x));
              sum += f32_from_bits(x);
              mag += std::fabs(f32_from_bits(x));
            }
          const uint32_t res = got[(n + row / 4) * rig.lanes + row % 4];
          if (op == VpuOp::kRedMax) {
            EXPECT_EQ(res, order_free_max(v)) << what << " row " << row;
          } else if (finite) {
            EXPECT_LE(std::fabs(f32_from_bits(res) - sum),
                      static_cast<double>(v.size()) * 0x1p-24 * mag + 1e-44)
                << what << " row " << row;
          }
        }
        // The lanes past the last row are +0; the row past the packed rows is untouched.
        for (uint32_t l = s.rows % 4 ? s.rows % 4 : 4; l < 4; ++l)
          EXPECT_EQ(got[(n + packed - 1) * rig.lanes + l], 0u) << what;
        EXPECT_EQ(got[(n + packed) * rig.lanes], 0x12345678u) << what;
      }
    }
  }
}

// x - y_r, x * y_r, max(x, y_r): y per logical row from a packed row, results at x's layout.
TEST(ChipVrow, PerRowOperandMatchesTheGoldenBitForBit) {
  for (const VpuOp op : {VpuOp::kSub, VpuOp::kMul, VpuOp::kMax, VpuOp::kAdd}) {
    for (const Shape& s : kShapes) {
      const uint32_t n = s.rows * s.beats, packed = (s.rows + 3) / 4;
      Rig rig(2 * n + packed);
      std::mt19937_64 rng(n * 7 + static_cast<unsigned>(op));
      for (uint32_t i = 0; i < (n + packed) * rig.lanes; ++i) rig.vmem[i] = rand_f32(rng, 60);
      rig.load();
      const uint32_t bs = s.tiles ? s.rows : 1, rs = s.tiles ? 1 : s.beats;
      const ChipCmd c = cmd_vrow(op, Mem::kVmem, 0, s.rows, s.beats, bs, rs, n, n + packed);
      std::vector<uint32_t> got;
      ASSERT_EQ(rig.run({c}, got).err, 0u);
      std::vector<uint32_t> want = rig.vmem;
      vrow_golden(CmdVrow::decode(c), rig.lanes, want, rig.amem);
      std::size_t first = 0;
      EXPECT_EQ(mismatches(got, want, &first), 0u)
          << vpu_op_name(op) << " rows " << s.rows << " beats " << s.beats << " first " << first;
      // Independent of the golden's walk: element (r, j, l) against vpu_lane with y_r.
      for (uint32_t r = 0; r < s.rows; ++r)
        for (uint32_t j = 0; j < s.beats; ++j)
          for (uint32_t l = 0; l < 4; ++l) {
            const uint32_t at = (r * rs + j * bs) * 4 + l;
            const uint32_t y = rig.vmem[(n + r / 4) * 4 + r % 4];
            ASSERT_EQ(got[(n + packed) * 4 + at], vpu_lane(op, rig.vmem[at], y, 0x80000000u))
                << vpu_op_name(op) << " r " << r << " j " << j << " l " << l;
          }
    }
  }
}

// A softmax of T rows of n = k L values in column tiles, six chip commands: red_max, x - max,
// exp, red_sum, rcp, e * rcp; every probability equals the GPT golden's (gpt_step.cc attention:
// mx = red_max, e = xcend_exp(f32_sub(z, mx)), p = f32_mul(e, xcend_rcp(red_sum(e)))), with
// -Inf entries (the causal mask) in the rows.
TEST(ChipVrow, SoftmaxOfChipCommandsEqualsTheGolden) {
  const uint32_t T = 13, k = 6, n = T * k, pk = (T + 3) / 4;
  const uint32_t D = n + pk, E = 2 * n + pk, S = 3 * n + pk, RS = S + pk, P = RS + pk;
  Rig rig(P + n);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> z(T * k * 4);  // [T x 4k] row-major
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t c = 0; c < 4 * k; ++c) z[t * 4 * k + c] = c > 2 * t + 1 ? -INFINITY : nd(rng);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t c = 0; c < 4 * k; ++c)
      rig.vmem[((c / 4) * T + t) * 4 + c % 4] = f32_bits(z[t * 4 * k + c]);
  rig.load();
  VpuCmdArgs ex = vpu_rows(VpuOp::kExp, Mem::kVmem, D, 0, E, n);
  VpuCmdArgs rc = vpu_rows(VpuOp::kRcp, Mem::kVmem, S, 0, RS, pk);
  std::vector<uint32_t> got;
  const ProgramResult r =
      rig.run({cmd_vrow(VpuOp::kRedMax, Mem::kVmem, 0, T, k, T, 1, 0, n),
               cmd_vrow(VpuOp::kSub, Mem::kVmem, 0, T, k, T, 1, n, D), cmd_vpu(ex),
               cmd_vrow(VpuOp::kRedSum, Mem::kVmem, E, T, k, T, 1, 0, S), cmd_vpu(rc),
               cmd_vrow(VpuOp::kMul, Mem::kVmem, E, T, k, T, 1, RS, P)},
              got);
  ASSERT_EQ(r.err, 0u);
  std::size_t bad = 0;
  std::vector<float> e(4 * k);
  for (uint32_t t = 0; t < T; ++t) {
    const std::vector<float> row(z.begin() + t * 4 * k, z.begin() + (t + 1) * 4 * k);
    const float mx = vector_reduce(VpuOp::kRedMax, row, 4);
    for (uint32_t c = 0; c < 4 * k; ++c) e[c] = xcend_exp(f32_sub(z[t * 4 * k + c], mx));
    const float rs = xcend_rcp(vector_reduce(VpuOp::kRedSum, e, 4));
    double total = 0;
    for (uint32_t c = 0; c < 4 * k; ++c) {
      const uint32_t p = got[(P + (c / 4) * T + t) * 4 + c % 4];
      bad += p != f32_bits(f32_mul(e[c], rs));
      total += f32_from_bits(p);
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << "row " << t;  // independent: a distribution
  }
  EXPECT_EQ(bad, 0u);
}

// LayerNorm's normalisation on the chip: mean = red_sum(x) * rcp(n), c = x - mean (per row),
// var = red_sum(c c) * rcp(n), rstd = rsqrt(var + 1e-5), xhat = c * rstd (per row): xhat and
// rstd equal gpt_layernorm's bits.
TEST(ChipVrow, LayerNormOfChipCommandsEqualsTheGolden) {
  const uint32_t T = 10, k = 8, n = T * k, pk = (T + 3) / 4, width = 4 * k;
  const uint32_t K = n, SUM = K + 2, MEAN = SUM + pk, C = MEAN + pk, SQ = C + n, VS = SQ + n,
                 VAR = VS + pk, VE = VAR + pk, RSTD = VE + pk, XH = RSTD + pk;
  Rig rig(XH + n);
  std::mt19937_64 rng(9);
  std::normal_distribution<float> nd(0.5f, 2.0f);
  std::vector<float> x(T * width);
  for (auto& v : x) v = nd(rng);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t c = 0; c < width; ++c)
      rig.vmem[((c / 4) * T + t) * 4 + c % 4] = f32_bits(x[t * width + c]);
  for (uint32_t l = 0; l < 4; ++l) {  // the constants rcp(n) and 1e-5 as broadcast y rows
    rig.vmem[K * 4 + l] = f32_bits(xcend_rcp(static_cast<float>(width)));
    rig.vmem[(K + 1) * 4 + l] = f32_bits(1e-5f);
  }
  rig.load();
  auto bcast = [&](VpuOp op, uint32_t xr, uint32_t yr, uint32_t dr, uint32_t rows) {
    VpuCmdArgs a = vpu_rows(op, Mem::kVmem, xr, yr, dr, rows);
    a.y_bcast = true;
    return cmd_vpu(a);
  };
  std::vector<uint32_t> got;
  const ProgramResult r =
      rig.run({cmd_vrow(VpuOp::kRedSum, Mem::kVmem, 0, T, k, T, 1, 0, SUM),
               bcast(VpuOp::kMul, SUM, K, MEAN, pk),
               cmd_vrow(VpuOp::kSub, Mem::kVmem, 0, T, k, T, 1, MEAN, C),
               cmd_vpu(vpu_rows(VpuOp::kMul, Mem::kVmem, C, C, SQ, n)),
               cmd_vrow(VpuOp::kRedSum, Mem::kVmem, SQ, T, k, T, 1, 0, VS),
               bcast(VpuOp::kMul, VS, K, VAR, pk), bcast(VpuOp::kAdd, VAR, K + 1, VE, pk),
               cmd_vpu(vpu_rows(VpuOp::kRsqrt, Mem::kVmem, VE, 0, RSTD, pk)),
               cmd_vrow(VpuOp::kMul, Mem::kVmem, C, T, k, T, 1, RSTD, XH)},
              got);
  ASSERT_EQ(r.err, 0u);
  std::vector<float> xhat, rstd;
  gpt_layernorm(x, T, width, std::vector<float>(width, 1.0f), std::vector<float>(width, 0.0f), 4,
                xhat, rstd);
  std::size_t bad = 0;
  for (uint32_t t = 0; t < T; ++t) {
    bad += got[RSTD * 4 + t] != f32_bits(rstd[t]);
    for (uint32_t c = 0; c < width; ++c)
      bad += got[(XH + (c / 4) * T + t) * 4 + c % 4] != f32_bits(xhat[t * width + c]);
  }
  EXPECT_EQ(bad, 0u);
}

// One memory row a cycle: a VROW of R rows of k beats runs R k cycles plus a fixed latency,
// whatever R, k and the op (the VPU's busy cycles grow by R k too).
TEST(ChipVrow, OneMemoryRowPerCycle) {
  Rig rig(1024);
  rig.load();
  auto cycles = [&](VpuOp op, uint32_t rows, uint32_t beats, uint64_t* busy) {
    const uint32_t y = op == VpuOp::kSub ? 600 : 0, dst = 700;
    const ProgramResult r =
        rig.drv.run({cmd_vrow(op, Mem::kVmem, 0, rows, beats, rows, 1, y, dst), cmd_halt()});
    EXPECT_EQ(r.err, 0u);
    *busy = r.delta[kStatVpuBusy];
    return r.cycles;
  };
  uint64_t b1 = 0, b2 = 0, b3 = 0;
  const uint64_t c1 = cycles(VpuOp::kRedSum, 16, 4, &b1);
  const uint64_t c2 = cycles(VpuOp::kRedSum, 32, 4, &b2);
  const uint64_t c3 = cycles(VpuOp::kRedMax, 16, 16, &b3);
  EXPECT_EQ(c2 - c1, 64u);
  EXPECT_EQ(c3 - c1, 16u * 12u);
  EXPECT_EQ(b2 - b1, 64u);
  uint64_t e1 = 0, e2 = 0;
  const uint64_t d1 = cycles(VpuOp::kSub, 16, 4, &e1);
  const uint64_t d2 = cycles(VpuOp::kSub, 32, 8, &e2);
  EXPECT_EQ(d2 - d1, 256u - 64u);
  EXPECT_EQ(d1, c1);  // the same latency for a reduction and a per-row op
  std::printf("VROW 16 rows x 4 beats: %llu cycles (program), VPU busy %llu\n",
              static_cast<unsigned long long>(c1), static_cast<unsigned long long>(b1));
}

TEST(ChipVrow, BadFieldsAreRefused) {
  LoneChip drv("4x4");  // 4096 VMEM rows, 2048 AMEM rows
  struct Case {
    const char* name;
    ChipCmd cmd;
    ChipErr err;
  };
  const std::vector<Case> cases = {
      {"no rows", cmd_vrow(VpuOp::kRedSum, Mem::kVmem, 0, 0, 1, 1, 1, 0, 100), ChipErr::kBadField},
      {"no beats", cmd_vrow(VpuOp::kRedSum, Mem::kVmem, 0, 4, 0, 1, 1, 0, 100), ChipErr::kBadField},
      {"transcendental op", cmd_vrow(VpuOp::kExp2, Mem::kVmem, 0, 4, 1, 1, 1, 0, 100),
       ChipErr::kBadField},
      {"op 19", cmd_vrow(static_cast<VpuOp>(19), Mem::kVmem, 0, 4, 1, 1, 1, 0, 100),
       ChipErr::kBadField},
      {"x span", cmd_vrow(VpuOp::kRedMax, Mem::kVmem, 0, 4, 200, 100, 1, 0, 100),
       ChipErr::kVmemRange},
      {"x span amem", cmd_vrow(VpuOp::kRedMax, Mem::kAmem, 2000, 49, 1, 1, 1, 0, 0),
       ChipErr::kAmemRange},
      {"packed dst", cmd_vrow(VpuOp::kRedSum, Mem::kVmem, 0, 9, 1, 1, 1, 0, 4094),
       ChipErr::kVmemRange},
      {"per-row y", cmd_vrow(VpuOp::kSub, Mem::kVmem, 0, 9, 1, 1, 1, 4094, 100),
       ChipErr::kVmemRange},
      {"per-row dst", cmd_vrow(VpuOp::kSub, Mem::kVmem, 0, 9, 2, 9, 1, 50, 4080),
       ChipErr::kVmemRange},
  };
  for (const auto& c : cases) {
    const ProgramResult r = drv.run({cmd_nop(), c.cmd, cmd_nop(), cmd_halt()}, false, 10000);
    EXPECT_EQ(r.err, static_cast<unsigned>(c.err)) << c.name << ": got " << chip_err_name(r.err);
    EXPECT_EQ(r.err_cmd, 1u) << c.name;
  }
  const ProgramResult ok = drv.run(
      {cmd_vrow(VpuOp::kRedSum, Mem::kVmem, 0, 9, 2, 9, 1, 0, 4093), cmd_halt()}, false, 10000);
  EXPECT_EQ(ok.err, 0u) << chip_err_name(ok.err);
}

// A reduction whose packed rows lie among the rows it still reads: RedDstApart_A fires.
TEST(ChipVrow, PackedRowsAmongTheXRowsTripTheAssertion) {
  LoneChip drv("4x4");
  std::string what;
  try {
    drv.run({cmd_vrow(VpuOp::kRedSum, Mem::kVmem, 0, 8, 2, 8, 1, 0, 10), cmd_halt()});
  } catch (const ChipError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("RTL assertion failed"), std::string::npos) << what;
}

}  // namespace
}  // namespace tpu
