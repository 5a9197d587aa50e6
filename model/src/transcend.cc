#include "tpu/transcend.h"

#include <array>

#include "tpu/bf16.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#include "transcend_tables.inc"

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kInfBits = 0x7F800000u;
constexpr uint32_t kOneBits = 0x3F800000u;

bool is_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > kInfBits; }
bool is_inf(uint32_t u) { return (u & 0x7FFFFFFFu) == kInfBits; }
bool is_zero(uint32_t u) { return (u & 0x7FFFFFFFu) == 0; }

// A finite nonzero f32 as |x| = m * 2^(exp - 23), m in [2^23, 2^24): subnormals are normalised
// (a leading-zero count), so exp runs from -149 to 127.
struct Unpacked {
  uint32_t sign;
  int exp;
  uint32_t m;
};

Unpacked unpack(uint32_t u) {
  const uint32_t be = (u >> 23) & 0xFFu;
  const uint32_t frac = u & 0x7FFFFFu;
  if (be == 0) {
    const int lz = __builtin_clz(frac) - 8;  // shift that brings the leading one to bit 23
    return {u & kSignBit, -126 - lz, frac << lz};
  }
  return {u & kSignBit, static_cast<int>(be) - 127, frac | 0x800000u};
}

int msb128(u128 v) {
  const auto hi = static_cast<uint64_t>(v >> 64);
  if (hi != 0) return 127 - __builtin_clzll(hi);
  return 63 - __builtin_clzll(static_cast<uint64_t>(v));
}

// The one final rounding of every function: sign * sig * 2^scale (sig >= 0, any width) to f32,
// round to nearest even on all the bits of sig, subnormal results kept, overflow to Inf. The bits
// of sig below the result's last place are the guard and sticky bits.
uint32_t round_pack(uint32_t sign, u128 sig, int scale) {
  if (sig == 0) return sign;
  const int exp = msb128(sig) + scale;  // |value| in [2^exp, 2^(exp+1))
  if (exp > 127) return sign | kInfBits;
  const bool normal = exp >= -126;
  const int lsb = normal ? exp - 23 : -149;  // weight of the result's last significand bit
  const int shift = lsb - scale;             // bits of sig below that place
  u128 mant = 0;
  if (shift <= 0) {
    mant = sig << -shift;  // exact: sig has at most 24 significant bits here
  } else if (shift < 128) {
    mant = sig >> shift;
    const u128 rem = sig & ((u128{1} << shift) - 1);
    const u128 half = u128{1} << (shift - 1);
    if (rem > half || (rem == half && (mant & 1) != 0)) ++mant;
  }  // else below half the smallest subnormal: mant = 0
  // mant holds the hidden bit (2^23) when normal; a rounding carry moves into the exponent.
  uint32_t bits = static_cast<uint32_t>(mant);
  if (normal) bits += static_cast<uint32_t>(exp + 126) << 23;
  if (bits > kInfBits) bits = kInfBits;
  return sign | bits;
}

// ---- seeds (integer rules, ROMs in the RTL) ----

uint32_t rcp_seed(unsigned j) {
  const uint32_t d = 257 + 2 * j;  // 256 * the midpoint of [1 + j/128, 1 + (j+1)/128)
  return ((1u << 25) + d) / (2 * d);
}

uint64_t isqrt(uint64_t v) {  // floor(sqrt(v)), bit by bit
  uint64_t r = 0;
  for (int b = 31; b >= 0; --b) {
    const uint64_t t = r | (uint64_t{1} << b);
    if (t * t <= v) r = t;
  }
  return r;
}

// j = 64 * odd + k: 1/sqrt of the midpoint c = (129 + 2k)/128 * 2^odd of m' in [1, 4).
// round(2^16 / sqrt(c)) = (isqrt(floor(2^41 / ((129 + 2k) 2^odd))) + 1) / 2.
uint32_t rsqrt_seed_rule(unsigned j) {
  const uint64_t den = (129 + 2 * uint64_t{j & 63}) << (j >> 6);
  return static_cast<uint32_t>((isqrt((uint64_t{1} << 41) / den) + 1) >> 1);
}

const std::array<uint32_t, 128>& rsqrt_seeds() {
  static const std::array<uint32_t, 128> t = [] {
    std::array<uint32_t, 128> a{};
    for (unsigned j = 0; j < 128; ++j) a[j] = rsqrt_seed_rule(j);
    return a;
  }();
  return t;
}

// log2's reduction factor R_j ~ 1/c (16 fraction bits), c the midpoint of the interval of m' (in
// [1, 1.5) for j < 64, [0.75, 1) for j >= 64); exactly 1 on the two intervals beside 1.
uint32_t log2_r(unsigned j) {
  if (j == 0 || j == 127) return 1u << 16;
  const uint32_t d = 257 + 2 * j;
  const uint32_t num = j < 64 ? (1u << 24) : (1u << 25);
  return (2 * num + d) / (2 * d);
}

// ---- cores ----

// y ~ 1/d: d at 40 fraction bits in [2^40, 2^41), y at 40 fraction bits. Seed from the top 7
// fraction bits, then two Newton steps y = y (2 - d y), each product truncated to 40 bits.
uint64_t recip40(uint64_t d) {
  uint64_t y = uint64_t{rcp_seed(static_cast<unsigned>(d >> 33) & 0x7Fu)} << 24;
  for (int i = 0; i < 2; ++i) {
    const auto dy = static_cast<uint64_t>((u128{d} * y) >> 40);
    y = static_cast<uint64_t>((u128{y} * ((uint64_t{1} << 41) - dy)) >> 40);
  }
  return y;
}

// 2^(X / 2^48) ~ s * 2^(n - 124): n = floor, f the 48 fraction bits, j their top 6 bits,
// r the other 42; s = T_j * P(r), P the degree-4 Taylor polynomial of 2^r (62 fraction bits,
// Horner, truncating).
struct Exp2Out {
  u128 s;
  int n;
};

Exp2Out exp2_core(int64_t x) {
  const auto n = static_cast<int>(x >> 48);  // arithmetic shift: floor
  const uint64_t f = static_cast<uint64_t>(x) & ((uint64_t{1} << 48) - 1);
  const uint64_t r = f & ((uint64_t{1} << 42) - 1);
  uint64_t p = kExp2Poly[3];
  for (int k = 2; k >= 0; --k) p = kExp2Poly[k] + static_cast<uint64_t>((u128{p} * r) >> 48);
  p = (uint64_t{1} << 62) + static_cast<uint64_t>((u128{p} * r) >> 48);
  return {u128{kExp2Table[f >> 42]} * p, n};
}

// ---- the functions ----

uint32_t exp_common(uint32_t u, bool natural) {
  if (is_nan(u)) return kF32CanonNan;
  if (is_inf(u)) return (u & kSignBit) != 0 ? 0u : kInfBits;
  if (is_zero(u)) return kOneBits;
  const Unpacked a = unpack(u);
  if (a.exp >= 8) return a.sign != 0 ? 0u : kInfBits;  // |x| >= 256: far past both ends
  // |x| (times log2(e) for exp) at 48 fraction bits, truncated toward zero.
  uint64_t mag = 0;
  if (natural) {
    const int sh = 37 - a.exp;  // m * log2e * 2^(exp - 23 - 62 + 48); sh >= 30
    mag = sh < 128 ? static_cast<uint64_t>((u128{a.m} * kLog2E) >> sh) : 0;
  } else {
    const int sh = a.exp + 25;  // m * 2^(exp - 23 + 48)
    mag = sh >= 0 ? uint64_t{a.m} << sh : (-sh < 64 ? uint64_t{a.m} >> -sh : 0);
  }
  const int64_t x = a.sign != 0 ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
  const Exp2Out e = exp2_core(x);
  return round_pack(0, e.s, e.n - 124);
}

uint32_t log2_bits(uint32_t u) {
  if (is_nan(u)) return kF32CanonNan;
  if (is_zero(u)) return kSignBit | kInfBits;
  if ((u & kSignBit) != 0) return kF32CanonNan;
  if (is_inf(u)) return kInfBits;
  const Unpacked a = unpack(u);
  const unsigned j = (a.m >> 16) & 0x7Fu;  // top 7 fraction bits
  // m' = m in [1, 1.5), or m / 2 in [0.75, 1) with exp + 1: 24 fraction bits.
  int e = a.exp;
  uint64_t mp = uint64_t{a.m} << 1;
  if (j >= 64) {
    mp = a.m;
    ++e;
  }
  // r = m' R_j - 1, exact at 40 fraction bits, |r| < 2^-7.
  const int64_t r = static_cast<int64_t>(mp * log2_r(j)) - (int64_t{1} << 40);
  // q = sum_k a_k r^(k-1), a_k = (-1)^(k+1) / (k ln2), k = 1..5 (62 fraction bits, floor).
  int64_t q = kLog2Poly[4];
  for (int k = 3; k >= 0; --k) q = kLog2Poly[k] + static_cast<int64_t>((i128{q} * r) >> 40);
  // log2 x = e + L_j + r q, at 102 fraction bits (r q exact).
  // (Scaled by multiplying: a left shift of a negative value is undefined in C++17.)
  const i128 v = i128{e} * (i128{1} << 102) + i128{kLog2Table[j]} * (i128{1} << 42) + i128{q} * r;
  return v < 0 ? round_pack(kSignBit, static_cast<u128>(-v), -102)
               : round_pack(0, static_cast<u128>(v), -102);
}

uint32_t rcp_bits(uint32_t u) {
  if (is_nan(u)) return kF32CanonNan;
  if (is_inf(u)) return u & kSignBit;
  if (is_zero(u)) return (u & kSignBit) | kInfBits;
  const Unpacked a = unpack(u);
  uint64_t q = recip40(uint64_t{a.m} << 17) >> 13;  // ~ 2^50 / m, off by at most one
  // One correction step makes q = floor(2^50 / m) exactly; rem != 0 is the sticky bit.
  int64_t rem = (int64_t{1} << 50) - static_cast<int64_t>(q * a.m);
  if (rem < 0) {
    --q;
    rem += a.m;
  } else if (rem >= static_cast<int64_t>(a.m)) {
    ++q;
    rem -= a.m;
  }
  // 1/|x| = (q + rem/m) * 2^(-27 - exp).
  return round_pack(a.sign, (u128{q} << 1) | (rem != 0 ? 1u : 0u), -28 - a.exp);
}

uint32_t rsqrt_bits(uint32_t u) {
  if (is_nan(u)) return kF32CanonNan;
  if (is_zero(u)) return (u & kSignBit) | kInfBits;
  if ((u & kSignBit) != 0) return kF32CanonNan;
  if (is_inf(u)) return 0;
  const Unpacked a = unpack(u);
  // m' = m or 2m (23 fraction bits) so that |x| = m' 2^e with e even.
  const unsigned odd = static_cast<unsigned>(a.exp) & 1u;
  const uint64_t mp = uint64_t{a.m} << odd;
  const int e = a.exp - static_cast<int>(odd);
  uint64_t y = uint64_t{rsqrt_seeds()[64 * odd + ((a.m >> 17) & 63u)]} << 24;
  const uint64_t d = mp << 17;   // m' at 40 fraction bits
  for (int i = 0; i < 2; ++i) {  // y = y (3 - m' y^2) / 2, truncating to 40 fraction bits
    const auto yy = static_cast<uint64_t>((u128{y} * y) >> 40);
    const auto myy = static_cast<uint64_t>((u128{d} * yy) >> 40);
    y = static_cast<uint64_t>((u128{y} * ((uint64_t{3} << 40) - myy)) >> 41);
  }
  uint64_t q = y >> 13;  // ~ 2^27 / sqrt(m'), off by at most one
  // One correction step: q = max{q : q^2 m' <= 2^77} (m' has 23 fraction bits).
  const u128 one = u128{1} << 77;
  const auto sq = [mp](uint64_t v) { return u128{v} * v * mp; };
  if (sq(q) > one) {
    --q;
  } else if (sq(q + 1) <= one) {
    ++q;
  }
  // 1/sqrt|x| = q' * 2^(-27 - e/2), q' = q plus a sticky bit below it.
  return round_pack(0, (u128{q} << 1) | (sq(q) != one ? 1u : 0u), -28 - e / 2);
}

uint32_t tanh_bits(uint32_t u) {
  if (is_nan(u)) return kF32CanonNan;
  if (is_inf(u)) return (u & kSignBit) | kOneBits;
  if (is_zero(u)) return u;
  const Unpacked a = unpack(u);
  if (a.exp >= 4) return a.sign | kOneBits;  // |x| >= 16: tanh rounds to 1
  if (a.exp <= -5) {
    // |x| < 2^-4: x (1 + b1 z + b2 z^2 + b3 z^3), z = x^2 at 62 fraction bits (truncated).
    const u128 m2 = u128{a.m} * a.m;  // x^2 = m2 * 2^(2 exp - 46)
    const int sh = 2 * a.exp + 16;
    const uint64_t z = sh >= 0 ? static_cast<uint64_t>(m2 << sh)
                               : (-sh < 128 ? static_cast<uint64_t>(m2 >> -sh) : 0);
    int64_t p = kTanhPoly[2];
    for (int k = 1; k >= 0; --k) p = kTanhPoly[k] + static_cast<int64_t>((i128{p} * z) >> 62);
    p = (int64_t{1} << 62) + static_cast<int64_t>((i128{p} * z) >> 62);
    return round_pack(a.sign, u128{a.m} * static_cast<uint64_t>(p), a.exp - 23 - 62);
  }
  // 2^-4 <= |x| < 16: E = e^(-2|x|) = 2^-(2|x| log2 e) from the exp2 core, then (1 - E) / (1 + E).
  const auto y = static_cast<int64_t>((u128{a.m} * kLog2E) >> (36 - a.exp));  // 48 frac bits
  const Exp2Out ex = exp2_core(-y);                                           // n <= -1
  const auto e = static_cast<uint64_t>(ex.s >> (62 - ex.n));  // E at 62 fraction bits
  const uint64_t num = (uint64_t{1} << 62) - e;
  const uint64_t den = ((uint64_t{1} << 62) + e) >> 22;  // 40 fraction bits, in [1, 2)
  return round_pack(a.sign, u128{num} * recip40(den), -102);
}

}  // namespace

const char* xcend_fn_name(XcendFn fn) {
  switch (fn) {
    case XcendFn::kExp2:
      return "exp2";
    case XcendFn::kLog2:
      return "log2";
    case XcendFn::kRcp:
      return "rcp";
    case XcendFn::kRsqrt:
      return "rsqrt";
    case XcendFn::kTanh:
      return "tanh";
    case XcendFn::kExp:
      return "exp";
  }
  return "?";
}

uint32_t xcend_bits(XcendFn fn, uint32_t x) {
  switch (fn) {
    case XcendFn::kExp2:
      return exp_common(x, false);
    case XcendFn::kLog2:
      return log2_bits(x);
    case XcendFn::kRcp:
      return rcp_bits(x);
    case XcendFn::kRsqrt:
      return rsqrt_bits(x);
    case XcendFn::kTanh:
      return tanh_bits(x);
    case XcendFn::kExp:
      return exp_common(x, true);
  }
  return kF32CanonNan;
}

float xcend_exp2(float x) { return f32_from_bits(xcend_bits(XcendFn::kExp2, f32_bits(x))); }
float xcend_log2(float x) { return f32_from_bits(xcend_bits(XcendFn::kLog2, f32_bits(x))); }
float xcend_rcp(float x) { return f32_from_bits(xcend_bits(XcendFn::kRcp, f32_bits(x))); }
float xcend_rsqrt(float x) { return f32_from_bits(xcend_bits(XcendFn::kRsqrt, f32_bits(x))); }
float xcend_tanh(float x) { return f32_from_bits(xcend_bits(XcendFn::kTanh, f32_bits(x))); }
float xcend_exp(float x) { return f32_from_bits(xcend_bits(XcendFn::kExp, f32_bits(x))); }

float xcend_gelu(float x) {
  // 0.5 x (1 + tanh(z)) = x / (1 + e^(-2z)): the same function, evaluated without the
  // cancellation of 1 + tanh(z) for negative x (docs/transcendentals.md measures both). Only
  // the VPU command's two-operand ops (constants as broadcast rows): x + 0.044715 x^3 is
  // x (1 + 0.044715 x^2), not an fma of x^3, which would need a third operand row.
  const float x2 = f32_mul(x, x);
  const float u = f32_add(f32_mul(x2, kGeluCubic), 1.0f);  // 1 + 0.044715 x^2
  const float inner = f32_mul(x, u);                       // x + 0.044715 x^3
  const float w = f32_mul(inner, kGeluMinus2Sqrt2OverPi);  // -2z
  const float d = f32_add(1.0f, xcend_exp(w));             // 1 + e^(-2z)
  return f32_mul(x, xcend_rcp(d));
}

uint64_t xcend_exp2_table(int j) { return kExp2Table[j]; }
uint64_t xcend_exp2_poly(int k) { return kExp2Poly[k - 1]; }
uint64_t xcend_log2e() { return kLog2E; }
uint32_t xcend_log2_r(int j) { return log2_r(static_cast<unsigned>(j)); }
int64_t xcend_log2_table(int j) { return kLog2Table[j]; }
uint32_t xcend_rcp_seed(int j) { return rcp_seed(static_cast<unsigned>(j)); }
uint32_t xcend_rsqrt_seed(int j) { return rsqrt_seeds()[static_cast<size_t>(j)]; }

}  // namespace tpu
