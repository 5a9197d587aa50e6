// tpu_mac (rtl/tpu_mac.sv), the bf16 x bf16 + f32 fused multiply-add of every PE, checked bit for
// bit against two references: the golden tpu::mac (canonicalised std::fmaf), and an independent
// one written here that never calls fmaf (exact double product, TwoSum, round to odd, then one
// double -> float rounding). Directed cases also carry a hand-derived expected encoding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>

#include "Vtpu_mac.h"
#include "tpu/bf16.h"
#include "verilated.h"

namespace {

constexpr uint32_t kNan = tpu::kF32CanonNan;
constexpr uint32_t kPosInf = 0x7F800000u;
constexpr uint32_t kNegInf = 0xFF800000u;

// ------------------------------------------------------------------------------------------------
// Device under test and references.
// ------------------------------------------------------------------------------------------------

// The verilated MAC: combinational, so set the inputs, eval() and read the output. Its SVA
// (built with --assert) count errors instead of aborting, so a failing assertion becomes a test
// failure that names the operands; one MacDut per test (one VerilatedContext per thread).
class MacDut {
 public:
  MacDut()
      : ctx_(std::make_unique<VerilatedContext>()), top_(std::make_unique<Vtpu_mac>(ctx_.get())) {
    ctx_->fatalOnError(false);
    ctx_->errorLimit(std::numeric_limits<int>::max());
  }
  ~MacDut() { top_->final(); }
  uint32_t Eval(uint16_t a, uint16_t w, uint32_t acc) {
    top_->a_i = a;
    top_->w_i = w;
    top_->acc_i = acc;
    top_->eval();
    return top_->acc_o;
  }
  // Number of RTL assertion failures so far.
  int assertion_failures() const { return ctx_->errorCount(); }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vtpu_mac> top_;
};

uint32_t GoldenMac(uint16_t a, uint16_t w, uint32_t acc) {
  return tpu::f32_bits(tpu::mac(a, w, tpu::f32_from_bits(acc)));
}

uint64_t F64Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

double F64FromBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

// Independent reference. The bf16 product has at most 16 significant bits and lies in
// [2^-266, 2^256], so it is exact in double. p + c is then rounded to odd at 53 bits (TwoSum gives
// the exact error), and rounding that to float to nearest-even is the correctly rounded p + c:
// round-to-odd at precision p+2 or more never causes a double-rounding error (Boldo, Melquiond).
uint32_t IndependentMac(uint16_t a, uint16_t w, uint32_t acc) {
  const double p = static_cast<double>(tpu::bf16_to_f32(a)) * tpu::bf16_to_f32(w);
  const double c = tpu::f32_from_bits(acc);
  const double s = p + c;
  if (std::isnan(s)) return kNan;  // NaN operand, Inf * 0, Inf - Inf
  if (std::isinf(p) || std::isinf(c)) return tpu::f32_bits(static_cast<float>(s));
  const double v = s - p;  // TwoSum (Knuth): s + e == p + c exactly, no overflow possible here
  const double e = (p - (s - v)) + (c - v);
  double r = s;
  if (e != 0.0) {
    if ((e < 0.0) != (s < 0.0)) r = std::nextafter(s, 0.0);  // truncate toward zero...
    r = F64FromBits(F64Bits(r) | 1u);                        // ...and make the last bit odd
  }
  return tpu::f32_bits(static_cast<float>(r));
}

// How often a stream reached the corners it aims at (so a generator that drifts fails its test).
struct Coverage {
  uint64_t ties = 0;             // exact sum halfway between two adjacent floats
  uint64_t exact_zero = 0;       // non-zero addends cancelling exactly (result +0)
  uint64_t deep_cancel = 0;      // non-zero result 2^8 or more below the larger addend
  uint64_t subnormal = 0;        // subnormal result
  uint64_t rounded_to_zero = 0;  // non-zero exact sum that rounds to +-0
  uint64_t overflow = 0;         // finite operands, infinite result
  uint64_t tiny_product = 0;     // 0 < |a*w| < 2^-149: the product alone is below every subnormal

  std::string Summary() const {
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "ties=%llu exact_zero=%llu deep_cancel=%llu subnormal=%llu "
        "rounded_to_zero=%llu overflow=%llu tiny_product=%llu",
        static_cast<unsigned long long>(ties), static_cast<unsigned long long>(exact_zero),
        static_cast<unsigned long long>(deep_cancel), static_cast<unsigned long long>(subnormal),
        static_cast<unsigned long long>(rounded_to_zero), static_cast<unsigned long long>(overflow),
        static_cast<unsigned long long>(tiny_product));
    return buf;
  }

  // Classifies one case from the exact sum (the same exact TwoSum as IndependentMac).
  void Add(uint16_t a, uint16_t w, uint32_t acc, uint32_t want) {
    const double p = static_cast<double>(tpu::bf16_to_f32(a)) * tpu::bf16_to_f32(w);
    const double c = tpu::f32_from_bits(acc);
    if (!std::isfinite(p) || !std::isfinite(c)) return;
    const double s = p + c;
    const double v = s - p;
    const double e = (p - (s - v)) + (c - v);
    const bool exact_sum_zero = (s == 0.0 && e == 0.0);
    const float r = tpu::f32_from_bits(want);
    if (p != 0.0 && std::fabs(p) < std::ldexp(1.0, -149)) ++tiny_product;
    if (p != 0.0 && c != 0.0 && exact_sum_zero) ++exact_zero;
    if (std::isinf(r)) {
      ++overflow;
      return;
    }
    if (r == 0.0f && !exact_sum_zero) ++rounded_to_zero;
    if (std::fpclassify(r) == FP_SUBNORMAL) ++subnormal;
    if (r != 0.0f &&
        std::ldexp(std::fabs(static_cast<double>(r)), 8) <= std::max(std::fabs(p), std::fabs(c))) {
      ++deep_cancel;
    }
    // A tie: the exact sum (here exact in double, e == 0) is the midpoint of r and its neighbour.
    if (e == 0.0 && static_cast<double>(r) != s) {
      const float other = std::nextafter(r, s > static_cast<double>(r) ? INFINITY : -INFINITY);
      if (std::isfinite(other) && static_cast<double>(r) + static_cast<double>(other) == 2.0 * s) {
        ++ties;
      }
    }
  }
};

// Runs triples through the DUT and both references, counts mismatches and keeps the first few.
class Checker {
 public:
  void Check(uint16_t a, uint16_t w, uint32_t acc) {
    ++count_;
    const int errors_before = dut_.assertion_failures();
    const uint32_t got = dut_.Eval(a, w, acc);
    if (dut_.assertion_failures() != errors_before) {
      Record(&sva_bad_, "RTL assertion failed", a, w, acc, got, 0);
    }
    const uint32_t want = GoldenMac(a, w, acc);
    const uint32_t indep = IndependentMac(a, w, acc);
    if (got != want) Record(&rtl_bad_, "rtl != golden", a, w, acc, got, want);
    if (indep != want) Record(&ref_bad_, "independent != golden", a, w, acc, indep, want);
    cov_.Add(a, w, acc, want);
  }
  // Expects no mismatch; `what` names the stream in the failure message.
  void ExpectClean(const std::string& what) const {
    std::printf("[ coverage ] %s: %llu cases, %s\n", what.c_str(),
                static_cast<unsigned long long>(count_), cov_.Summary().c_str());
    EXPECT_GT(count_, 0u) << what;
    EXPECT_EQ(sva_bad_, 0u) << what << ": RTL assertions failed\n" << log_;
    EXPECT_EQ(rtl_bad_, 0u) << what << ": " << rtl_bad_ << " of " << count_ << " RTL results differ"
                            << "\n"
                            << log_;
    EXPECT_EQ(ref_bad_, 0u) << what << ": the golden model and the independent reference differ "
                            << ref_bad_ << " times\n"
                            << log_;
  }
  uint64_t count() const { return count_; }
  const Coverage& coverage() const { return cov_; }

 private:
  void Record(uint64_t* n, const char* kind, uint16_t a, uint16_t w, uint32_t acc, uint32_t got,
              uint32_t want) {
    if ((*n)++ >= 8) return;
    char line[160];
    std::snprintf(line, sizeof line, "  %s: a=0x%04x w=0x%04x acc=0x%08x got=0x%08x want=0x%08x\n",
                  kind, a, w, acc, got, want);
    log_ += line;
  }

  MacDut dut_;
  Coverage cov_;
  uint64_t count_ = 0;
  uint64_t sva_bad_ = 0;
  uint64_t rtl_bad_ = 0;
  uint64_t ref_bad_ = 0;
  std::string log_;
};

// ------------------------------------------------------------------------------------------------
// Encoding helpers and biased operand generators.
// ------------------------------------------------------------------------------------------------

uint16_t Bf16(uint32_t sign, uint32_t exp, uint32_t man) {
  return static_cast<uint16_t>(((sign & 1u) << 15) | ((exp & 0xFFu) << 7) | (man & 0x7Fu));
}

uint32_t F32(uint32_t sign, uint32_t exp, uint32_t man) {
  return ((sign & 1u) << 31) | ((exp & 0xFFu) << 23) | (man & 0x7FFFFFu);
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  uint32_t U32() { return static_cast<uint32_t>(rng_()); }
  uint16_t U16() { return static_cast<uint16_t>(rng_()); }
  uint32_t Bit() { return static_cast<uint32_t>(rng_() & 1u); }
  // Uniform integer in [lo, hi].
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // A finite bf16 whose biased exponent is `exp` (0 gives a subnormal or zero).
  uint16_t Bf16WithExp(int exp) { return Bf16(Bit(), static_cast<uint32_t>(exp), U32()); }
  // A finite bf16: normal most of the time, sometimes subnormal.
  uint16_t FiniteBf16() { return Bf16WithExp(Int(0, 7) == 0 ? 0 : Int(1, 254)); }
  // A pair of normal bf16 whose exponents add up to `pexp` (so |a*w| lies in [2^pexp, 2^(pexp+2)));
  // false when no such pair exists.
  bool PairWithProductExp(int pexp, uint16_t* a, uint16_t* w) {
    const int ea = Int(std::max(1, pexp + 127 - 126), std::min(254, pexp + 127 + 127));
    const int ew = pexp + 254 - ea;
    if (ea < 1 || ea > 254 || ew < 1 || ew > 254) return false;
    *a = Bf16WithExp(ea);
    *w = Bf16WithExp(ew);
    if (Int(0, 1) == 0) std::swap(*a, *w);
    return true;
  }
  // `f` with a random sign and its lowest `k` mantissa bits (0..23) replaced at random.
  uint32_t Scramble(uint32_t f, int k) {
    const uint32_t mask = (k >= 23) ? 0x7FFFFFu : ((1u << k) - 1u);
    return ((f & ~mask) ^ (Bit() << 31)) | (U32() & mask);
  }

 private:
  std::mt19937_64 rng_;
};

double ProductOf(uint16_t a, uint16_t w) {
  return static_cast<double>(tpu::bf16_to_f32(a)) * tpu::bf16_to_f32(w);
}

// The biased streams: each aims at a corner of the datapath that uniform encodings rarely reach.
enum class Stream {
  kAlignedAcc,     // acc within 2^-40..2^40 of the product: every alignment shift and sticky path
  kCancellation,   // acc = -(a*w) rounded, nudged by a few ulps: massive and total cancellation
  kTies,           // product's last bit exactly at half an ulp of acc: round-half-even both ways
  kSubnormalAcc,   // subnormal or smallest-normal acc against products of similar size
  kTinyProduct,    // products far below the f32 range (down to 2^-266) into 0/tiny accumulators
  kBf16Subnormal,  // subnormal bf16 operands (unnormalised significands) against nearby acc
  kNearOverflow,   // sums near 2^128: rounding to max finite or to Inf
};

std::string StreamName(Stream s);
void PrintTo(Stream s, std::ostream* os) { *os << StreamName(s); }

std::string StreamName(Stream s) {
  switch (s) {
    case Stream::kAlignedAcc:
      return "AlignedAcc";
    case Stream::kCancellation:
      return "Cancellation";
    case Stream::kTies:
      return "Ties";
    case Stream::kSubnormalAcc:
      return "SubnormalAcc";
    case Stream::kTinyProduct:
      return "TinyProduct";
    case Stream::kBf16Subnormal:
      return "Bf16Subnormal";
    case Stream::kNearOverflow:
      return "NearOverflow";
  }
  return "Unknown";
}

// acc as f32 bits near p * 2^shift, with the low `k` bits and sign randomised.
uint32_t AccNear(Gen& g, double p, int shift, int k) {
  const float f = static_cast<float>(std::ldexp(p, shift));
  if (p == 0.0 || !std::isfinite(f)) return g.U32() & 0xBFFFFFFFu;  // finite, exp < 128
  return g.Scramble(tpu::f32_bits(f), k);
}

void Draw(Stream s, Gen& g, uint16_t* a, uint16_t* w, uint32_t* acc) {
  switch (s) {
    case Stream::kAlignedAcc: {
      *a = g.FiniteBf16();
      *w = g.FiniteBf16();
      *acc = AccNear(g, ProductOf(*a, *w), g.Int(-40, 40), g.Int(0, 23));
      return;
    }
    case Stream::kCancellation: {
      while (!g.PairWithProductExp(g.Int(-160, 127), a, w)) {
      }
      const float p = static_cast<float>(ProductOf(*a, *w));
      uint32_t bits = tpu::f32_bits(-p);
      const int nudge = g.Int(-3, 3);
      if ((bits & 0x7FFFFFFFu) > 4u && (bits & 0x7F800000u) != 0x7F800000u) {
        bits = static_cast<uint32_t>(static_cast<int64_t>(bits) + nudge);
      }
      *acc = bits;
      return;
    }
    case Stream::kTies: {
      // Odd significands put the product's last set bit at 2^(max(ea,1) + max(ew,1) - 268); make
      // that the half-ulp position of acc, 2^(max(ec,1) - 151), so a * w + acc sits exactly
      // halfway between two floats (when the product reaches above acc the sum's ulp moves, and
      // the case is an ordinary rounding instead). Exponent field 0 (subnormal) counts as 1.
      const int ec = g.Int(0, 254);
      const int sum = std::max(ec, 1) + 117;
      const int ea = g.Int(std::max(0, sum - 254), std::min(254, sum - 1));
      const int ew = sum - std::max(ea, 1);
      *a = Bf16(g.Bit(), static_cast<uint32_t>(ea), g.U32() | 1u);
      *w = Bf16(g.Bit(), static_cast<uint32_t>(ew), g.U32() | 1u);
      *acc = F32(g.Bit(), static_cast<uint32_t>(ec), g.U32());
      return;
    }
    case Stream::kSubnormalAcc: {
      *acc = F32(g.Bit(), static_cast<uint32_t>(g.Int(0, 3) == 0 ? g.Int(1, 3) : 0),
                 g.U32() >> g.Int(0, 23));
      while (!g.PairWithProductExp(g.Int(-175, -115), a, w)) {
      }
      return;
    }
    case Stream::kTinyProduct: {
      const int pexp = g.Int(-266, -120);
      if (pexp < -252) {  // only reachable with subnormal operands
        *a = Bf16(g.Bit(), 0, g.U32());
        *w = (g.Int(0, 1) == 0) ? Bf16(g.Bit(), 0, g.U32()) : g.Bf16WithExp(g.Int(1, 20));
      } else {
        while (!g.PairWithProductExp(pexp, a, w)) {
        }
      }
      const int kind = g.Int(0, 3);
      *acc = kind == 0   ? F32(g.Bit(), 0, 0)                         // +-0
             : kind == 1 ? F32(g.Bit(), 0, g.U32() >> g.Int(16, 23))  // a few subnormal ulps
             : kind == 2 ? F32(g.Bit(), 0, g.U32())                   // any subnormal
                         : F32(g.Bit(), static_cast<uint32_t>(g.Int(1, 30)), g.U32());
      return;
    }
    case Stream::kBf16Subnormal: {
      *a = Bf16(g.Bit(), 0, g.U32());
      *w = (g.Int(0, 3) == 0) ? Bf16(g.Bit(), 0, g.U32()) : g.FiniteBf16();
      if (g.Int(0, 1) == 0) std::swap(*a, *w);
      *acc = AccNear(g, ProductOf(*a, *w), g.Int(-30, 30), g.Int(0, 23));
      return;
    }
    case Stream::kNearOverflow: {
      while (!g.PairWithProductExp(g.Int(100, 128), a, w)) {
      }
      *acc = (g.Int(0, 3) == 0) ? g.Scramble(0x7F7FFFFFu, g.Int(0, 3))
                                : F32(g.Bit(), static_cast<uint32_t>(g.Int(220, 254)), g.U32());
      return;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Random and structured sweeps.
// ------------------------------------------------------------------------------------------------

// Uniform 16/16/32-bit encodings: every class (NaN, Inf, zero, subnormal, normal) appears.
TEST(TpuMac, UniformEncodings) {
  Checker c;
  Gen g(0x5EED0001u);
  constexpr int kSamples = 4'000'000;
  for (int i = 0; i < kSamples; ++i) c.Check(g.U16(), g.U16(), g.U32());
  EXPECT_EQ(c.count(), static_cast<uint64_t>(kSamples));
  c.ExpectClean("uniform encodings");
  EXPECT_GE(c.coverage().overflow, 100'000u);
}

class TpuMacStream : public ::testing::TestWithParam<Stream> {};

TEST_P(TpuMacStream, MatchesReferences) {
  Checker c;
  Gen g(0xB1A5ED00u + static_cast<uint64_t>(GetParam()));
  constexpr int kSamples = 300'000;
  for (int i = 0; i < kSamples; ++i) {
    uint16_t a = 0;
    uint16_t w = 0;
    uint32_t acc = 0;
    Draw(GetParam(), g, &a, &w, &acc);
    c.Check(a, w, acc);
  }
  c.ExpectClean(StreamName(GetParam()));
  // Each stream must keep reaching the corner it exists for.
  const Coverage& k = c.coverage();
  switch (GetParam()) {
    case Stream::kAlignedAcc:
      EXPECT_GE(k.ties, 1'000u);
      EXPECT_GE(k.deep_cancel, 100u);
      break;
    case Stream::kCancellation:
      EXPECT_GE(k.exact_zero, 10'000u);
      EXPECT_GE(k.deep_cancel, 100'000u);
      break;
    case Stream::kTies:
      EXPECT_GE(k.ties, 250'000u);
      break;
    case Stream::kSubnormalAcc:
      EXPECT_GE(k.subnormal, 100'000u);
      EXPECT_GE(k.tiny_product, 50'000u);
      break;
    case Stream::kTinyProduct:
      EXPECT_GE(k.tiny_product, 150'000u);
      EXPECT_GE(k.subnormal, 100'000u);
      EXPECT_GE(k.rounded_to_zero, 20'000u);
      break;
    case Stream::kBf16Subnormal:
      EXPECT_GE(k.subnormal, 100'000u);
      EXPECT_GE(k.rounded_to_zero, 5'000u);
      break;
    case Stream::kNearOverflow:
      EXPECT_GE(k.overflow, 20'000u);
      EXPECT_GE(k.ties, 5'000u);
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Biased, TpuMacStream,
                         ::testing::Values(Stream::kAlignedAcc, Stream::kCancellation,
                                           Stream::kTies, Stream::kSubnormalAcc,
                                           Stream::kTinyProduct, Stream::kBf16Subnormal,
                                           Stream::kNearOverflow),
                         [](const ::testing::TestParamInfo<Stream>& p) {
                           return StreamName(p.param);
                         });

// Every pair of bf16 significands (128 x 128 mantissas, both signs of the product) against an
// accumulator at every alignment from 30 bits above to 30 bits below the product, with random
// mantissas: each product bit pattern crosses the whole aligner and sticky logic.
TEST(TpuMac, AllSignificandPairsAllAlignments) {
  Checker c;
  Gen g(0xA11A11u);
  for (uint32_t ma = 0; ma < 128; ++ma) {
    for (uint32_t mw = 0; mw < 128; ++mw) {
      const uint16_t a = Bf16(g.Bit(), 127, ma);
      const uint16_t w = Bf16(g.Bit(), 127, mw);
      for (int d = -30; d <= 30; ++d) {
        c.Check(a, w, F32(g.Bit(), static_cast<uint32_t>(127 + d), g.U32()));
      }
    }
  }
  c.ExpectClean("all significand pairs x alignments");
}

// Every bf16 encoding on each multiplier port, against random finite operands and a zero, a
// subnormal or a nearby accumulator: no encoding of a_i or w_i is left out.
TEST(TpuMac, EveryBf16OnEachPort) {
  Checker c;
  Gen g(0xEEEEu);
  for (uint32_t x = 0; x < 0x10000u; ++x) {
    const auto v = static_cast<uint16_t>(x);
    for (int k = 0; k < 8; ++k) {
      const uint16_t other = g.FiniteBf16();
      const double p = ProductOf(v, other);
      const uint32_t acc = (k < 2) ? F32(g.Bit(), 0, (k == 0) ? 0 : g.U32())
                                   : AccNear(g, p, g.Int(-26, 26), g.Int(0, 23));
      c.Check(v, other, acc);
      c.Check(other, v, acc);
    }
  }
  c.ExpectClean("every bf16 encoding on a_i and w_i");
}

// Every product significand pattern (128 x 128 mantissas) at every product exponent from 2^-157
// to 2^-119, alone (acc = +-0) and against the smallest subnormals: every denormalisation shift,
// with its guard and sticky bits, for every product, and the -0 of a product that rounds to zero.
TEST(TpuMac, AllSignificandPairsIntoSubnormals) {
  Checker c;
  Gen g(0x5AB5AB5u);
  for (uint32_t ma = 0; ma < 128; ++ma) {
    for (uint32_t mw = 0; mw < 128; ++mw) {
      for (int pexp = -157; pexp <= -119; ++pexp) {
        // Unbiased exponents ua + uw = pexp with both in the normal bf16 range.
        const int ua = g.Int(std::max(-126, pexp - 127), std::min(127, pexp + 126));
        const uint16_t a = Bf16(g.Bit(), static_cast<uint32_t>(ua + 127), ma);
        const uint16_t w = Bf16(g.Bit(), static_cast<uint32_t>(pexp - ua + 127), mw);
        c.Check(a, w, F32(g.Bit(), 0, 0));
        c.Check(a, w, F32(g.Bit(), 0, g.U32() & 0x7u));
      }
    }
  }
  c.ExpectClean("all significand pairs into the subnormal range");
  EXPECT_GE(c.coverage().ties, 20'000u);
  EXPECT_GE(c.coverage().rounded_to_zero, 50'000u);
}

// Every subnormal bf16 (unnormalised significand, both signs) times every bf16 encoding, against
// an accumulator near the product: the product normaliser sees every leading-zero count.
TEST(TpuMac, EverySubnormalBf16TimesEveryBf16) {
  Checker c;
  Gen g(0x0DD0u);
  for (uint32_t m = 0; m < 128; ++m) {
    for (uint32_t x = 0; x < 0x10000u; ++x) {
      const uint16_t sub = Bf16(g.Bit(), 0, m);
      const auto w = static_cast<uint16_t>(x);
      c.Check(sub, w, AccNear(g, ProductOf(sub, w), g.Int(-26, 26), g.Int(0, 23)));
    }
  }
  c.ExpectClean("every subnormal bf16 x every bf16");
}

// ------------------------------------------------------------------------------------------------
// Directed cases, with hand-derived results.
// ------------------------------------------------------------------------------------------------

struct Directed {
  const char* what;
  uint16_t a;
  uint16_t w;
  uint32_t acc;
  uint32_t want;
};

// bf16 constants used below.
constexpr uint16_t kOne = 0x3F80, kTwo = 0x4000, kOneHalf = 0x3FC0;  // 1.0, 2.0, 1.5
constexpr uint16_t kBfInf = 0x7F80, kBfMax = 0x7F7F, kBfMinSub = 0x0001;

void CheckDirected(MacDut& dut, const Directed* cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const Directed& d = cases[i];
    char ctx[160];
    std::snprintf(ctx, sizeof ctx, "%s: a=0x%04x w=0x%04x acc=0x%08x", d.what, d.a, d.w, d.acc);
    EXPECT_EQ(dut.Eval(d.a, d.w, d.acc), d.want) << ctx << " (rtl)";
    EXPECT_EQ(GoldenMac(d.a, d.w, d.acc), d.want) << ctx << " (golden)";
    EXPECT_EQ(IndependentMac(d.a, d.w, d.acc), d.want) << ctx << " (independent)";
  }
}

// Signed zeros: every sign of the zero factor, the other factor and a zero accumulator. An exact
// zero sum is -0 only when both the product and acc are -0.
TEST(TpuMacDirected, SignedZeros) {
  MacDut dut;
  for (uint32_t sa = 0; sa < 2; ++sa) {
    for (uint32_t sw = 0; sw < 2; ++sw) {
      for (uint32_t sc = 0; sc < 2; ++sc) {
        for (uint16_t other : {uint16_t{0}, kOne, kBfMinSub, kBfMax}) {
          const uint16_t zero = Bf16(sa, 0, 0);
          const uint16_t o = static_cast<uint16_t>(other | (sw << 15));
          const uint32_t acc = sc << 31;
          const uint32_t want = ((sa ^ sw) & sc) << 31;
          EXPECT_EQ(dut.Eval(zero, o, acc), want) << std::hex << zero << " " << o << " " << acc;
          EXPECT_EQ(dut.Eval(o, zero, acc), want) << std::hex << o << " " << zero << " " << acc;
          EXPECT_EQ(GoldenMac(zero, o, acc), want);
        }
      }
    }
  }
  const Directed cases[] = {
      {"x + (-0) = x", kOneHalf, kTwo, 0x80000000u, 0x40400000u},
      {"-x + (+0) = -x", kOneHalf, 0xC000, 0x00000000u, 0xC0400000u},
      {"0 * w + subnormal", 0x0000, kOne, 0x00000001u, 0x00000001u},
      {"-0 * w + -subnormal", 0x8000, kOne, 0x80000001u, 0x80000001u},
      {"0 * max + -max finite", 0x0000, kBfMax, 0xFF7FFFFFu, 0xFF7FFFFFu},
      {"tiny negative product + +0 rounds to -0", 0x8001, 0x0001, 0x00000000u, 0x80000000u},
      {"tiny positive product + -0 rounds to +0", 0x0001, 0x0001, 0x80000000u, 0x00000000u},
      {"-2^-150 + +0 ties to -0", 0x9A00, 0x1A00, 0x00000000u, 0x80000000u},
  };
  CheckDirected(dut, cases, std::size(cases));
}

TEST(TpuMacDirected, Infinities) {
  MacDut dut;
  const Directed cases[] = {
      {"Inf * 0", kBfInf, 0x0000, 0x3F800000u, kNan},
      {"0 * -Inf", 0x0000, 0xFF80, 0x00000000u, kNan},
      {"-0 * Inf + Inf", 0x8000, kBfInf, kPosInf, kNan},
      {"Inf * subnormal is Inf", kBfInf, kBfMinSub, 0x00000000u, kPosInf},
      {"Inf * 2 + -Inf", kBfInf, kTwo, kNegInf, kNan},
      {"-Inf * 2 + Inf", 0xFF80, kTwo, kPosInf, kNan},
      {"Inf * 2 + Inf", kBfInf, kTwo, kPosInf, kPosInf},
      {"Inf * -2 + -Inf", kBfInf, 0xC000, kNegInf, kNegInf},
      {"Inf * -2 + max finite", kBfInf, 0xC000, 0x7F7FFFFFu, kNegInf},
      {"-Inf * -Inf + 1", 0xFF80, 0xFF80, 0x3F800000u, kPosInf},
      {"finite + Inf", kOneHalf, kTwo, kPosInf, kPosInf},
      {"finite + -Inf", kBfMax, kBfMax, kNegInf, kNegInf},
      {"0 * 0 + -Inf", 0x0000, 0x8000, kNegInf, kNegInf},
      // The exact product 2^254 is finite: adding -Inf gives -Inf, not NaN.
      {"2^127 * 2^127 + -Inf", 0x7F00, 0x7F00, kNegInf, kNegInf},
  };
  CheckDirected(dut, cases, std::size(cases));
}

TEST(TpuMacDirected, NaNsAreCanonical) {
  const uint16_t bf_nans[] = {0x7F81, 0x7FC0, 0x7FFF, 0xFF81, 0xFFC0, 0xFFFF, 0x7FA5};
  const uint32_t f_nans[] = {0x7F800001u, 0x7FC00000u, 0x7FC00001u, 0x7FFFFFFFu,
                             0xFF800001u, 0xFFC00000u, 0xFFFFFFFFu, 0x7FA5A5A5u};
  const uint16_t bf_others[] = {0x0000, 0x8000, kOne, kBfInf, 0xFF80, kBfMinSub, kBfMax};
  const uint32_t f_others[] = {0x0u, 0x80000000u, 0x3F800000u, kPosInf, kNegInf, 0x1u, 0x7F7FFFFFu};
  MacDut dut;
  int checked = 0;
  for (uint16_t n : bf_nans) {
    for (uint16_t o : bf_others) {
      for (uint32_t acc : f_others) {
        EXPECT_EQ(dut.Eval(n, o, acc), kNan) << std::hex << n << " " << o << " " << acc;
        EXPECT_EQ(dut.Eval(o, n, acc), kNan) << std::hex << o << " " << n << " " << acc;
        checked += 2;
      }
    }
  }
  for (uint32_t n : f_nans) {
    for (uint16_t o1 : bf_others) {
      for (uint16_t o2 : bf_others) {
        EXPECT_EQ(dut.Eval(o1, o2, n), kNan) << std::hex << o1 << " " << o2 << " " << n;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 7 * 7 * 7 * 2 + 8 * 7 * 7);
}

TEST(TpuMacDirected, SubnormalsAndUnderflow) {
  MacDut dut;
  const Directed cases[] = {
      // bf16 subnormal operands are exact: 2^-133 * 2^127 = 2^-6.
      {"min subnormal bf16 * 2^127", kBfMinSub, 0x7F00, 0x0u, 0x3C800000u},
      {"0x007F bf16 * 2^127", 0x007F, 0x7F00, 0x0u, 0x3FFE0000u},
      {"subnormal * subnormal + 0", kBfMinSub, kBfMinSub, 0x0u, 0x0u},
      {"subnormal * subnormal + min subnormal", 0x007F, 0x807F, 0x1u, 0x1u},
      {"2^-149 product exactly", 0x1A00, 0x1A80, 0x0u, 0x1u},
      {"2^-149 + 2^-149", 0x1A00, 0x1A80, 0x1u, 0x2u},
      {"2^-150: tie to even gives 0", 0x1A00, 0x1A00, 0x0u, 0x0u},
      {"just above 2^-150 rounds to min subnormal", 0x1A01, 0x1A00, 0x0u, 0x1u},
      {"0.75 * 2^-149 rounds up", 0x1A40, 0x1A00, 0x0u, 0x1u},
      {"1.5 * 2^-149 ties up to 2 (even)", 0x1A40, 0x1A80, 0x0u, 0x2u},
      {"2.5 * 2^-149 ties down to 2 (even)", 0x1A20, 0x1B00, 0x0u, 0x2u},
      {"-2.5 * 2^-149 ties down to -2", 0x9A20, 0x1B00, 0x0u, 0x80000002u},
      {"3 * 2^-149 - 2^-150 = 2.5: ties to 2", 0x9A00, 0x1A00, 0x3u, 0x2u},
      {"3 * 2^-149 + 2^-150 = 3.5: ties to 4", 0x1A00, 0x1A00, 0x3u, 0x4u},
      {"max subnormal + 2^-150 ties up into min normal", 0x1A00, 0x1A00, 0x007FFFFFu, 0x00800000u},
      {"0x7FFFFE + 2^-150 ties to even, stays", 0x1A00, 0x1A00, 0x007FFFFEu, 0x007FFFFEu},
      {"max subnormal + min subnormal = min normal", 0x1A00, 0x1A80, 0x007FFFFFu, 0x00800000u},
      {"min normal - min subnormal = max subnormal", 0x9A00, 0x1A80, 0x00800000u, 0x007FFFFFu},
      {"min normal - 2^-150 ties to min normal", 0x9A00, 0x1A00, 0x00800000u, 0x00800000u},
      {"2^-126 product lands on min normal", 0x2000, 0x2000, 0x0u, 0x00800000u},
      {"subnormal acc, big product", kOne, kOne, 0x00000001u, 0x3F800000u},
      {"product below subnormal acc, sticky", 0x0001, 0x3080, 0x00400000u, 0x00400000u},
      {"2^-149 - (2^-150 + eps) rounds to 0 with +sign", 0x9A01, 0x1A00, 0x1u, 0x0u},
      {"2^-149 - 2^-150 ties to 0 with +sign", 0x9A00, 0x1A00, 0x1u, 0x0u},
  };
  CheckDirected(dut, cases, std::size(cases));
}

TEST(TpuMacDirected, OverflowAndMaxFinite) {
  MacDut dut;
  const Directed cases[] = {
      {"bf16 max * 1 is exact", kBfMax, kOne, 0x0u, 0x7F7F0000u},
      {"2^127 * 2 overflows", 0x7F00, kTwo, 0x0u, kPosInf},
      {"-2^127 * 2 overflows to -Inf", 0xFF00, kTwo, 0x0u, kNegInf},
      {"max + 2^103 (half ulp) ties to Inf", 0x5980, 0x5900, 0x7F7FFFFFu, kPosInf},
      {"max + just under half ulp stays max", 0x597F, 0x5900, 0x7F7FFFFFu, 0x7F7FFFFFu},
      {"-max - 2^103 ties to -Inf", 0xD980, 0x5900, 0xFF7FFFFFu, kNegInf},
      {"max - 2^103 ties to even, below max", 0xD980, 0x5900, 0x7F7FFFFFu, 0x7F7FFFFEu},
      {"bf16 max * bf16 max overflows", kBfMax, kBfMax, 0x0u, kPosInf},
      {"2^254 product minus max finite still overflows", 0x7F00, 0x7F00, 0xFF7FFFFFu, kPosInf},
      {"max - 2^127 * 1.5 is finite", 0xFF00, kOneHalf, 0x7F7FFFFFu, 0x7E7FFFFCu},
      {"2^127 + 2^127 overflows", 0x7F00, kOne, 0x7F000000u, kPosInf},
      {"2^127 + (2^127 - 2^104) is max", 0x7F00, kOne, 0x7EFFFFFEu, 0x7F7FFFFFu},
      {"2^127 + (2^127 - 2^103) ties to Inf", 0x7F00, kOne, 0x7EFFFFFFu, kPosInf},
  };
  CheckDirected(dut, cases, std::size(cases));
}

TEST(TpuMacDirected, TiesAndCancellation) {
  MacDut dut;
  const Directed cases[] = {
      {"1 + 2^-24 ties to even (1)", 0x3980, 0x3980, 0x3F800000u, 0x3F800000u},
      {"(1 + 2^-23) + 2^-24 ties up", 0x3980, 0x3980, 0x3F800001u, 0x3F800002u},
      {"-1 - 2^-24 ties to even (-1)", 0xB980, 0x3980, 0xBF800000u, 0xBF800000u},
      {"1 - 2^-25 ties up to 1 across the binade", 0xB980, 0x3900, 0x3F800000u, 0x3F800000u},
      {"1 - (2^-25 + 2^-32) rounds down", 0xB901, 0x3980, 0x3F800000u, 0x3F7FFFFFu},
      {"1 - 2^-24 is exact", 0xB980, 0x3980, 0x3F800000u, 0x3F7FFFFFu},
      {"1 - 0.75 * 2^-24 rounds to 1 - 2^-24", 0xB9C0, 0x3900, 0x3F800000u, 0x3F7FFFFFu},
      {"1.5 - 2^-60 (sticky only)", 0xA180, 0x3F80, 0x3FC00000u, 0x3FC00000u},
      {"1 - 2^-60 (sticky only)", 0xA180, 0x3F80, 0x3F800000u, 0x3F800000u},
      {"1 + 2^-149 product far below", 0x1A00, 0x1A80, 0x3F800000u, 0x3F800000u},
      {"product 1 + acc 2^-149", kOne, kOne, 0x00000001u, 0x3F800000u},
      {"1.5 * 2 - 3 = +0", kOneHalf, kTwo, 0xC0400000u, 0x0u},
      {"-1.5 * 2 + 3 = +0", 0xBFC0, kTwo, 0x40400000u, 0x0u},
      {"2^-149 - 2^-149 = +0", 0x9A00, 0x1A80, 0x1u, 0x0u},
      {"2^-149 + -(2^-149) = +0", 0x1A00, 0x1A80, 0x80000001u, 0x0u},
      {"bf16 max * 1 - the same = +0", kBfMax, 0x3F80, 0xFF7F0000u, 0x0u},
      {"(1 + 2^-7)^2 - (1 + 2^-6) = 2^-14", 0x3F81, 0x3F81, 0xBF820000u, 0x38800000u},
      {"(1 + 2^-7)^2 - (1 + 2^-6 + 2^-23)", 0x3F81, 0x3F81, 0xBF820001u, 0x387F8000u},
      {"exact cancellation just above min normal = +0", 0x0081, 0x3F80, 0x80810000u, 0x0u},
      {"cancellation into the subnormal range", 0x2001, 0x2001, 0x80820000u, 0x00000200u},
  };
  CheckDirected(dut, cases, std::size(cases));
}

}  // namespace
