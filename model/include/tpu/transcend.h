// Golden transcendental functions of the VPU's transcendental unit, exactly as
// docs/transcendentals.md defines them: exp2, log2, rcp (1/x), rsqrt (1/sqrt(x)) and tanh, each one
// fixed-point algorithm (range reduction on the bits, a small table, a short polynomial or Newton
// steps, one final rounding) that the RTL copies operation for operation, so both give the same
// bits; exp (the exp2 core on x * log2(e) in fixed point) and GELU (GPT-2's tanh form in f32 ops)
// are composed on top. No libm and no double arithmetic: only integer code.
#pragma once

#include <cstdint>

namespace tpu {

// The unit's function select (the RTL's input; kExp is the exp2 core behind a fixed-point
// multiply by log2(e)).
enum class XcendFn : uint8_t { kExp2 = 0, kLog2 = 1, kRcp = 2, kRsqrt = 3, kTanh = 4, kExp = 5 };
constexpr int kXcendFnCount = 6;
const char* xcend_fn_name(XcendFn fn);  // "exp2", "log2", "rcp", "rsqrt", "tanh", "exp"

// One lane of the unit on raw f32 bits. Every NaN result is the canonical 0x7FC00000; subnormal
// inputs and outputs are honoured (never flushed); overflow gives Inf, underflow rounds (RNE).
uint32_t xcend_bits(XcendFn fn, uint32_t x);

float xcend_exp2(float x);   // 2^x
float xcend_log2(float x);   // log2(x); log2(+-0) = -Inf, x < 0 gives NaN
float xcend_rcp(float x);    // 1/x, correctly rounded
float xcend_rsqrt(float x);  // 1/sqrt(x), correctly rounded; rsqrt(-0) = -Inf, x < 0 gives NaN
float xcend_tanh(float x);
float xcend_exp(float x);  // e^x
// GPT-2's GELU, 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3), evaluated as
// x * rcp(1 + exp(-2z)) in the f32 ops of tpu/vector.h (two operands each: the VPU command's)
// and the unit's exp and rcp, in the order docs/transcendentals.md gives. gelu(-Inf) is NaN
// (-Inf * 0), as the formula gives.
float xcend_gelu(float x);

// GELU's f32 constants: sqrt(2/pi) and 0.044715 (each the nearest f32), and -2 sqrt(2/pi) (the
// first times -2, exact).
constexpr float kGeluSqrt2OverPi = 0.797884560802865355879892119868763737f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kGeluMinus2Sqrt2OverPi = -2.0f * kGeluSqrt2OverPi;

// The tables, for tests that check them against an independent computation.
uint64_t xcend_exp2_table(int j);  // round(2^(j/64) * 2^62), j in [0, 64)
uint64_t xcend_exp2_poly(int k);   // round(ln2^k / k! * 2^62), k in [1, 4]
uint64_t xcend_log2e();            // round(log2(e) * 2^62)
uint32_t xcend_log2_r(int j);      // log2's reduction factor, 16 fraction bits, j in [0, 128)
int64_t xcend_log2_table(int j);   // round(-log2(xcend_log2_r(j) / 2^16) * 2^60)
uint32_t xcend_rcp_seed(int j);    // round(2^16 / (1 + (j + 0.5) / 128)), j in [0, 128)
uint32_t xcend_rsqrt_seed(int j);  // round(2^16 / sqrt(midpoint)), j = 64 * odd + 6 bits

}  // namespace tpu
