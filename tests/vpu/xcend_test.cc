// tpu_xcend (rtl/tpu_xcend.sv) bit for bit against the golden tpu::xcend_bits
// (model/src/transcend.cc): every bf16 input and 10^5 random f32 per function, streamed one beat
// per cycle with the function changing beat by beat; the latency; and the SVA: a reserved
// function select makes XcendFnKnown_A fire.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "Vxcend.h"
#include "tpu/bf16.h"
#include "tpu/transcend.h"
#include "verilated.h"

namespace tpu {
namespace {

constexpr int kLatency = 5;  // rtl/tpu_xcend.sv's header

class XcendDut {
 public:
  XcendDut()
      : ctx_(std::make_unique<VerilatedContext>()), top_(std::make_unique<Vxcend>(ctx_.get())) {
    ctx_->fatalOnError(false);
    ctx_->errorLimit(std::numeric_limits<int>::max());
    top_->clk_i = 0;
    top_->rst_ni = 0;
    top_->valid_i = 0;
    top_->eval();
    Tick();
    top_->rst_ni = 1;
    top_->eval();
  }
  ~XcendDut() { top_->final(); }
  // One clock: present (valid, fn, x) before the rising edge; outputs after it.
  void Tick() {
    top_->clk_i = 1;
    top_->eval();
    top_->clk_i = 0;
    top_->eval();
  }
  void Drive(bool valid, unsigned fn, uint32_t x) {
    top_->valid_i = valid;
    top_->fn_i = static_cast<uint8_t>(fn);
    top_->x_i = x;
  }
  bool valid_o() const { return top_->valid_o != 0; }
  uint32_t y_o() const { return top_->y_o; }
  int assertion_failures() const { return ctx_->errorCount(); }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vxcend> top_;
};

struct Beat {
  XcendFn fn;
  uint32_t x;
};

// Streams the beats one per cycle (with a bubble every 7th cycle) and compares every result,
// in order, with the golden. Returns the number of mismatches (the first few are reported).
uint64_t Stream(XcendDut& dut, const std::vector<Beat>& beats) {
  std::deque<Beat> inflight;
  uint64_t bad = 0, cycle = 0;
  size_t next = 0;
  while (next < beats.size() || !inflight.empty()) {
    const bool bubble = cycle++ % 7 == 6;
    if (next < beats.size() && !bubble) {
      dut.Drive(true, static_cast<unsigned>(beats[next].fn), beats[next].x);
      inflight.push_back(beats[next++]);
    } else {
      dut.Drive(false, 0, 0);
    }
    dut.Tick();
    if (dut.valid_o()) {
      if (inflight.empty()) {
        ADD_FAILURE() << "valid_o without a beat";
        return bad + 1;
      }
      const Beat b = inflight.front();
      inflight.pop_front();
      const uint32_t want = xcend_bits(b.fn, b.x);
      if (dut.y_o() != want && ++bad <= 5) {
        ADD_FAILURE() << xcend_fn_name(b.fn) << "(0x" << std::hex << b.x << "): rtl 0x" << dut.y_o()
                      << ", golden 0x" << want;
      }
    }
  }
  return bad;
}

constexpr XcendFn kFns[] = {XcendFn::kExp2,  XcendFn::kLog2, XcendFn::kRcp,
                            XcendFn::kRsqrt, XcendFn::kTanh, XcendFn::kExp};

TEST(RtlXcend, EveryBf16InputEveryFunction) {
  XcendDut dut;
  std::vector<Beat> beats;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    for (const XcendFn fn : kFns) beats.push_back({fn, h << 16});
  }
  EXPECT_EQ(Stream(dut, beats), 0u);
  EXPECT_EQ(dut.assertion_failures(), 0);
}

TEST(RtlXcend, RandomF32EveryFunction) {
  XcendDut dut;
  std::mt19937_64 rng(0xC0DE);
  std::uniform_real_distribution<float> dense(-20.0f, 20.0f);
  std::vector<Beat> beats;
  for (int i = 0; i < 100000; ++i) {
    for (const XcendFn fn : kFns) {
      // Half raw bit patterns (the whole range), half values where the functions bend.
      const uint32_t x = (i & 1) != 0 ? static_cast<uint32_t>(rng()) : f32_bits(dense(rng));
      beats.push_back({fn, x});
    }
  }
  EXPECT_EQ(Stream(dut, beats), 0u);
  EXPECT_EQ(dut.assertion_failures(), 0);
}

TEST(RtlXcend, LatencyIsFiveCycles) {
  XcendDut dut;
  dut.Drive(true, static_cast<unsigned>(XcendFn::kRcp), f32_bits(4.0f));
  dut.Tick();
  dut.Drive(false, 0, 0);
  for (int c = 1; c < kLatency; ++c) {
    EXPECT_FALSE(dut.valid_o()) << "cycle " << c;
    dut.Tick();
  }
  ASSERT_TRUE(dut.valid_o());
  EXPECT_EQ(dut.y_o(), f32_bits(0.25f));
  dut.Tick();
  EXPECT_FALSE(dut.valid_o());
}

TEST(RtlXcend, ReservedFunctionFiresAssertion) {
  XcendDut dut;
  dut.Drive(true, 6, f32_bits(1.0f));  // 6 and 7 are reserved
  dut.Tick();
  dut.Drive(false, 0, 0);
  for (int c = 0; c < kLatency; ++c) dut.Tick();
  EXPECT_GE(dut.assertion_failures(), 1);
}

}  // namespace
}  // namespace tpu
