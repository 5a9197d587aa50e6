// tpu_fma32 (rtl/tpu_fma32.sv) against the host's correctly rounded std::fmaf, NaN canonicalised:
// directed specials in every combination, and millions of random triples drawn from uniform bit
// patterns and from distributions aimed at cancellation, alignment / sticky bits, ties,
// subnormal inputs and results, and overflow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "Vfma32.h"
#include "tpu/bf16.h"
#include "verilated.h"

namespace tpu {
namespace {

class Fma32Dut {
 public:
  Fma32Dut()
      : ctx_(std::make_unique<VerilatedContext>()), top_(std::make_unique<Vfma32>(ctx_.get())) {}
  ~Fma32Dut() { top_->final(); }
  uint32_t operator()(uint32_t a, uint32_t b, uint32_t c, bool en = true) {
    top_->en_i = en;
    top_->a_i = a;
    top_->b_i = b;
    top_->c_i = c;
    top_->eval();
    return top_->r_o;
  }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vfma32> top_;
};

uint32_t ref_fma(uint32_t a, uint32_t b, uint32_t c) {
  return f32_bits(canonicalize(std::fmaf(f32_from_bits(a), f32_from_bits(b), f32_from_bits(c))));
}

uint32_t make(uint32_t sign, uint32_t exp, uint32_t frac) {
  return (sign & 1u) << 31 | (exp & 0xFFu) << 23 | (frac & 0x7FFFFFu);
}

struct Triple {
  uint32_t a, b, c;
};

// What a batch of triples exercised, by the class of the reference result.
struct Outcome {
  uint64_t mismatches = 0;
  uint64_t subnormal = 0, zero = 0, inf = 0, nan = 0;
};

// Runs `n` triples from `gen` through the RTL and the reference; prints the first mismatches.
Outcome check(Fma32Dut& dut, uint64_t n, const std::function<Triple()>& gen) {
  Outcome o;
  for (uint64_t i = 0; i < n; ++i) {
    const Triple t = gen();
    const uint32_t got = dut(t.a, t.b, t.c);
    const uint32_t want = ref_fma(t.a, t.b, t.c);
    const uint32_t mag = want & 0x7FFFFFFFu;
    o.zero += mag == 0 ? 1 : 0;
    o.subnormal += (mag != 0 && mag < 0x00800000u) ? 1 : 0;
    o.inf += mag == 0x7F800000u ? 1 : 0;
    o.nan += mag > 0x7F800000u ? 1 : 0;
    if (got != want && ++o.mismatches <= 10) {
      std::printf("fma(%08x, %08x, %08x): rtl %08x, fmaf %08x\n", t.a, t.b, t.c, got, want);
    }
  }
  return o;
}

class Fma32Test : public ::testing::Test {
 protected:
  Fma32Dut dut_;
  std::mt19937_64 rng_{0x5eed};
  uint32_t u32() { return static_cast<uint32_t>(rng_()); }
  uint32_t uni(uint32_t lo, uint32_t hi) {  // inclusive
    if (hi < lo) throw std::logic_error("uni: empty range");
    return lo + static_cast<uint32_t>(rng_() % (static_cast<uint64_t>(hi) - lo + 1));
  }
  uint32_t frac() { return u32() & 0x7FFFFFu; }
  // A fraction with a random number of trailing zeros: short significands make exact ties.
  uint32_t short_frac() { return frac() & ~((1u << uni(0, 23)) - 1u); }
  // Biased exponent of the exact product of a and b (normal operands), with its carry.
  static int prod_exp(uint32_t a, uint32_t b) {
    const double p = std::fabs(static_cast<double>(f32_from_bits(a)) * f32_from_bits(b));
    return std::ilogb(p) + 127;
  }
};

constexpr uint64_t kRandomN = 1000000;

// Values where the datapath's corner cases live.
std::vector<uint32_t> specials() {
  std::vector<uint32_t> mags = {
      0x00000000, 0x00000001, 0x00000002, 0x00000003, 0x003FFFFF, 0x00400000, 0x007FFFFE,
      0x007FFFFF, 0x00800000, 0x00800001, 0x00FFFFFF, 0x01000000, 0x0C000000, 0x33800000,
      0x33FFFFFF, 0x34000000, 0x3EFFFFFF, 0x3F000000, 0x3F7FFFFF, 0x3F800000, 0x3F800001,
      0x3FC00000, 0x3FFFFFFF, 0x40000000, 0x40400000, 0x4B000000, 0x4B800000, 0x5F000000,
      0x7E800000, 0x7EFFFFFF, 0x7F000000, 0x7F7FFFFE, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
      0x7FC00000, 0x7FFFFFFF};
  std::vector<uint32_t> v;
  for (uint32_t m : mags) {
    v.push_back(m);
    v.push_back(m | 0x80000000u);
  }
  return v;
}

TEST_F(Fma32Test, DirectedSpecialsAllTriples) {
  const std::vector<uint32_t> s = specials();
  uint64_t bad = 0, n = 0;
  for (uint32_t a : s) {
    for (uint32_t b : s) {
      for (uint32_t c : s) {
        const uint32_t got = dut_(a, b, c);
        const uint32_t want = ref_fma(a, b, c);
        ++n;
        if (got != want && ++bad <= 10) {
          std::printf("fma(%08x, %08x, %08x): rtl %08x, fmaf %08x\n", a, b, c, got, want);
        }
      }
    }
  }
  EXPECT_EQ(n, s.size() * s.size() * s.size());
  EXPECT_EQ(bad, 0u);
}

TEST_F(Fma32Test, NamedCases) {
  const uint32_t nan = kF32CanonNan, inf = 0x7F800000, ninf = 0xFF800000;
  EXPECT_EQ(dut_(0x3F800000, 0x3F800000, 0x3F800000), 0x40000000u);  // 1*1+1 = 2
  EXPECT_EQ(dut_(inf, 0x00000000, 0x3F800000), nan);                 // Inf*0 -> NaN
  EXPECT_EQ(dut_(inf, 0x3F800000, ninf), nan);                       // Inf - Inf -> NaN
  EXPECT_EQ(dut_(0xFFC12345, 0x3F800000, 0x3F800000), nan);          // any NaN -> canonical
  EXPECT_EQ(dut_(0x7F800001, 0x3F800000, 0x3F800000), nan);          // sNaN -> canonical
  EXPECT_EQ(dut_(0x80000000, 0x3F800000, 0x80000000), 0x80000000u);  // -0*1 + -0 = -0
  EXPECT_EQ(dut_(0x00000000, 0xBF800000, 0x00000000), 0x00000000u);  // -0 + +0 = +0
  EXPECT_EQ(dut_(0x3F800000, 0x3F800000, 0xBF800000), 0x00000000u);  // 1 - 1 = +0
  EXPECT_EQ(dut_(0x7F7FFFFF, 0x40000000, 0x00000000), inf);          // overflow -> Inf
  EXPECT_EQ(dut_(0x00000001, 0x3F000000, 0x00000000), 0x00000000u);  // 2^-150: tie to even 0
  EXPECT_EQ(dut_(0x00000003, 0x3F000000, 0x00000000), 0x00000002u);  // 1.5 ulp: tie to 2
  EXPECT_EQ(dut_(0x00800000, 0x3F000000, 0x80000000), 0x00400000u);  // exact subnormal result
  // 1 + 2^-24 ties to 1, 1 + 2^-24 + 2^-47 (sticky from the product) rounds up.
  EXPECT_EQ(dut_(0x33800000, 0x3F800000, 0x3F800000), 0x3F800000u);
  EXPECT_EQ(dut_(0x33800001, 0x3F800000, 0x3F800000), 0x3F800001u);
}

TEST_F(Fma32Test, RandomUniformBits) {
  const Outcome o = check(dut_, 2 * kRandomN, [&] { return Triple{u32(), u32(), u32()}; });
  EXPECT_EQ(o.mismatches, 0u);
  EXPECT_GT(o.nan, 0u);
  EXPECT_GT(o.inf, 0u);
}

TEST_F(Fma32Test, RandomOrdinaryRange) {
  auto v = [&] { return make(u32(), uni(100, 154), frac()); };
  EXPECT_EQ(check(dut_, kRandomN, [&] { return Triple{v(), v(), v()}; }).mismatches, 0u);
}

// c close to -(a*b): massive cancellation, long normalisation shifts, exact zeros.
TEST_F(Fma32Test, RandomCancellation) {
  const Outcome o = check(dut_, kRandomN, [&] {
    const uint32_t a = make(u32(), uni(60, 190), short_frac());  // short significands:
    const uint32_t b = make(u32(), uni(60, 190), short_frac());  // exact products happen
    const float p = f32_from_bits(a) * f32_from_bits(b);
    const uint32_t c = f32_bits(-p) + uni(0, 8) - 4u;  // a few ulps either side
    return Triple{a, b, c};
  });
  EXPECT_EQ(o.mismatches, 0u);
  EXPECT_GT(o.zero, kRandomN / 50);  // exact cancellations (+0) do happen
}

// c at every exponent distance from the product, with short significands for exact ties.
TEST_F(Fma32Test, RandomAlignmentAndTies) {
  const Outcome o = check(dut_, kRandomN, [&] {
    const bool shortm = (u32() & 1u) != 0;
    const uint32_t a = make(u32(), uni(80, 170), shortm ? short_frac() : frac());
    const uint32_t b = make(u32(), uni(80, 170), shortm ? short_frac() : frac());
    const int ec = prod_exp(a, b) + static_cast<int>(uni(0, 130)) - 65;
    const uint32_t c =
        make(u32(), static_cast<uint32_t>(std::clamp(ec, 0, 254)), shortm ? short_frac() : frac());
    return Triple{a, b, c};
  });
  EXPECT_EQ(o.mismatches, 0u);
}

// Products and sums around the subnormal range, with zero, subnormal and small addends.
TEST_F(Fma32Test, RandomSubnormalResults) {
  const Outcome o = check(dut_, kRandomN, [&] {
    const uint32_t ea = uni(1, 140);
    const int eb_lo = std::max(1, 97 - static_cast<int>(ea));
    const int eb_hi = std::max(eb_lo, 132 - static_cast<int>(ea));
    const uint32_t eb = uni(static_cast<uint32_t>(eb_lo), static_cast<uint32_t>(eb_hi));
    const uint32_t a = make(u32(), ea, short_frac());
    const uint32_t b = make(u32(), eb, frac());
    uint32_t c = 0;
    switch (u32() % 4) {
      case 0:
        c = make(u32(), 0, 0);
        break;  // +-0
      case 1:
        c = make(u32(), 0, frac());
        break;  // subnormal
      case 2:
        c = make(u32(), uni(1, 30), frac());
        break;  // small normal
      default:
        c = make(u32(), 0, u32() & 0xFFu);
        break;  // tiny subnormal
    }
    return Triple{a, b, c};
  });
  EXPECT_EQ(o.mismatches, 0u);
  EXPECT_GT(o.subnormal, kRandomN / 5);
  EXPECT_GT(o.zero, 0u);
}

// One operand subnormal (normalised inside the unit) times anything, plus anything nearby.
TEST_F(Fma32Test, RandomSubnormalInputs) {
  const Outcome o = check(dut_, kRandomN, [&] {
    const uint32_t a = make(u32(), 0, u32() >> uni(9, 31));
    const uint32_t b = make(u32(), uni(0, 254), frac());
    const uint32_t c = make(u32(), uni(0, 254) & (u32() % 3 ? 0xFFu : 0x0Fu), frac());
    return (u32() & 1u) ? Triple{a, b, c} : Triple{b, a, c};
  });
  EXPECT_EQ(o.mismatches, 0u);
  EXPECT_GT(o.subnormal, 0u);
}

// Products and addends near the top of the range: overflow to Inf and just-not-overflow.
TEST_F(Fma32Test, RandomOverflow) {
  const Outcome o = check(dut_, kRandomN, [&] {
    const uint32_t ea = uni(124, 254);
    const uint32_t eb = uni(378 - ea, std::min(254u, 384 - ea));
    const uint32_t a = make(u32(), ea, frac() | ((u32() & 1u) ? 0x7FFF00u : 0u));
    const uint32_t b = make(u32(), eb, frac());
    const uint32_t c = make(u32(), uni(240, 254), frac() | 0x7FFFF0u);
    return Triple{a, b, c};
  });
  EXPECT_EQ(o.mismatches, 0u);
  EXPECT_GT(o.inf, kRandomN / 10);
  EXPECT_LT(o.inf, kRandomN - kRandomN / 10);  // and finite results near the top too
}

// The VPU's derived ops: add is x * 1 + y and mul is x * y + (-0); both must equal the host's
// own + and * exactly.
TEST_F(Fma32Test, DerivedAddAndMulMatchHost) {
  uint64_t bad = 0;
  for (uint64_t i = 0; i < kRandomN; ++i) {
    const uint32_t x = (i & 1) ? u32() : make(u32(), uni(100, 154), frac());
    const uint32_t y = (i & 2) ? u32() : make(u32(), (x >> 23 & 0xFF) + uni(0, 50) - 25, frac());
    const uint32_t add = dut_(x, 0x3F800000, y);
    const uint32_t mul = dut_(x, y, 0x80000000);
    const uint32_t want_add = f32_bits(canonicalize(f32_from_bits(x) + f32_from_bits(y)));
    const uint32_t want_mul = f32_bits(canonicalize(f32_from_bits(x) * f32_from_bits(y)));
    if ((add != want_add || mul != want_mul) && ++bad <= 10) {
      std::printf("x %08x y %08x: add %08x/%08x mul %08x/%08x\n", x, y, add, want_add, mul,
                  want_mul);
    }
  }
  EXPECT_EQ(bad, 0u);
}

// en_i low: the unit computes nothing and shows 0 (the VPU's idle lanes); high again, the
// result of the same operands.
TEST_F(Fma32Test, DisabledShowsZeroThenComputes) {
  const uint32_t a = 0x40400000, b = 0x40000000, c = 0x3F800000;  // 3 * 2 + 1
  EXPECT_EQ(dut_(a, b, c, false), 0u);
  EXPECT_EQ(dut_(0x7FC00000, b, c, false), 0u);
  EXPECT_EQ(dut_(a, b, c), 0x40E00000u);  // 7.0
}

}  // namespace
}  // namespace tpu
