// tpu_vpu_xcend (rtl/tpu_vpu_xcend.sv, 4 lanes), the VPU's transcendental lanes, against the
// golden tpu::vpu_lane: every transcendental op with random operand and result formats (bf16 x,
// bf16 result) changing beat by beat, the tag riding beside each beat, the latency and pend_o,
// and its SVA: a beat of an op that is not transcendental makes XcendOpOnly_A fire; and
// waves/vpu_xcend.gtkw against a real dump of it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "Vvpux.h"
#include "tpu/bf16.h"
#include "tpu/vector.h"
#include "verilated.h"
#include "verilated_fst_c.h"
#include "wave_clock.h"
#include "wave_check.h"

namespace tpu {
namespace {

namespace fs = std::filesystem;

std::string g_waves;  // --waves FILE (main below); "" for none

constexpr int kLanes = 4;    // -GLanes=4 (tb/vpu/CMakeLists.txt)
constexpr int kLatency = 5;  // rtl/tpu_vpu_xcend.sv's header

class VpuXcendDut {
 public:
  explicit VpuXcendDut(const std::string& fst = "") : ctx_(std::make_unique<VerilatedContext>()) {
    ctx_->fatalOnError(false);
    ctx_->errorLimit(std::numeric_limits<int>::max());
    if (!fst.empty()) ctx_->traceEverOn(true);
    top_ = std::make_unique<Vvpux>(ctx_.get());
    if (!fst.empty()) {
      fst_ = std::make_unique<VerilatedFstC>();
      top_->trace(fst_.get(), 99);
      fst_->open(fst.c_str());
    }
    top_->clk_i = 0;
    top_->rst_ni = 0;
    top_->in_valid_i = 0;
    top_->eval();
    Tick();
    top_->rst_ni = 1;
    top_->eval();
  }
  ~VpuXcendDut() {
    top_->final();
    if (fst_) fst_->close();
  }
  // One cycle; the dump on a 1 GHz clock like every other (tb/common/wave_clock.h).
  void Tick() {
    top_->clk_i = 1;
    top_->eval();
    if (fst_) fst_->dump(wave_.rise(cycle_));
    top_->clk_i = 0;
    top_->eval();
    if (fst_) fst_->dump(wave_.fall(cycle_));
    ++cycle_;
  }
  void Drive(bool valid, VpuOp op, bool src_bf16, bool dst_bf16, uint16_t tag,
             const uint32_t (&x)[kLanes]) {
    top_->in_valid_i = valid;
    top_->in_op_i = static_cast<uint8_t>(op);
    top_->in_src_bf16_x_i = src_bf16;
    top_->in_dst_bf16_i = dst_bf16;
    top_->in_tag_i = tag;
    for (int l = 0; l < kLanes; ++l) top_->in_x_i[l] = x[l];
    top_->eval();
  }
  bool out_valid() const { return top_->out_valid_o != 0; }
  bool pend() const { return top_->pend_o != 0; }
  uint16_t out_tag() const { return top_->out_tag_o; }
  uint32_t out(int l) const { return top_->out_data_o[l]; }
  int assertion_failures() const { return ctx_->errorCount(); }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vvpux> top_;
  std::unique_ptr<VerilatedFstC> fst_;
  WaveClock wave_ = WaveClock::at(1.0);
  uint64_t cycle_ = 0;
};

struct Beat {
  VpuOp op;
  bool src_bf16, dst_bf16;
  uint16_t tag;
  uint32_t x[kLanes];
};

constexpr VpuOp kOps[] = {VpuOp::kExp2,  VpuOp::kLog2, VpuOp::kRcp,
                          VpuOp::kRsqrt, VpuOp::kTanh, VpuOp::kExp};

TEST(RtlVpuXcend, RandomOpsAndFormatsMatchTheGolden) {
  VpuXcendDut dut;
  std::mt19937_64 rng(0x5EED);
  std::uniform_real_distribution<float> dense(-20.0f, 20.0f);
  std::deque<Beat> inflight;
  uint64_t checked = 0, bad = 0;
  for (int cycle = 0; cycle < 40000 || !inflight.empty(); ++cycle) {
    Beat b{};
    const bool valid = cycle < 40000 && rng() % 5 != 0;  // bubbles
    if (valid) {
      b.op = kOps[rng() % 6];
      b.src_bf16 = rng() % 3 == 0;
      b.dst_bf16 = rng() % 3 == 0;
      b.tag = static_cast<uint16_t>(rng());
      for (uint32_t& x : b.x) {
        x = rng() % 2 != 0 ? static_cast<uint32_t>(rng()) : f32_bits(dense(rng));
        if (b.src_bf16) x = (x & 0xFFFF0000u) | (x >> 16);  // junk above the bf16
      }
      inflight.push_back(b);
    }
    dut.Drive(valid, b.op, b.src_bf16, b.dst_bf16, b.tag, b.x);
    dut.Tick();
    if (!dut.out_valid()) continue;
    ASSERT_FALSE(inflight.empty()) << "out_valid_o without a beat";
    const Beat w = inflight.front();
    inflight.pop_front();
    EXPECT_EQ(dut.out_tag(), w.tag);
    for (int l = 0; l < kLanes; ++l) {
      const uint32_t want = vpu_lane(w.op, w.x[l], 0, 0, w.src_bf16 ? kVpuSrcBf16X : 0, w.dst_bf16);
      ++checked;
      if (dut.out(l) != want && ++bad <= 5)
        ADD_FAILURE() << vpu_op_name(w.op) << "(0x" << std::hex << w.x[l] << ", src_bf16 "
                      << w.src_bf16 << ", dst_bf16 " << w.dst_bf16 << "): rtl 0x" << dut.out(l)
                      << ", golden 0x" << want;
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(checked, 100000u);
  EXPECT_EQ(dut.assertion_failures(), 0);
}

TEST(RtlVpuXcend, LatencyFiveCyclesPendInTheFirstFour) {
  VpuXcendDut dut;
  const uint32_t x[kLanes] = {f32_bits(4.0f), f32_bits(-2.0f), f32_bits(0.5f), 0x7F800000u};
  dut.Drive(true, VpuOp::kRcp, false, false, 0x1234, x);
  dut.Tick();
  dut.Drive(false, VpuOp::kRcp, false, false, 0, x);
  for (int c = 1; c < kLatency; ++c) {
    EXPECT_FALSE(dut.out_valid()) << "cycle " << c;
    EXPECT_TRUE(dut.pend()) << "cycle " << c;
    dut.Tick();
  }
  ASSERT_TRUE(dut.out_valid());
  EXPECT_FALSE(dut.pend());
  EXPECT_EQ(dut.out_tag(), 0x1234);
  EXPECT_EQ(dut.out(0), f32_bits(0.25f));
  EXPECT_EQ(dut.out(1), f32_bits(-0.5f));
  EXPECT_EQ(dut.out(2), f32_bits(2.0f));
  EXPECT_EQ(dut.out(3), 0u);
  dut.Tick();
  EXPECT_FALSE(dut.out_valid());
  EXPECT_EQ(dut.assertion_failures(), 0);
}

TEST(RtlVpuXcend, OpNotTranscendentalFiresAssertion) {
  VpuXcendDut dut;
  const uint32_t x[kLanes] = {};
  dut.Drive(true, VpuOp::kAdd, false, false, 0, x);  // tpu_vpu's op, not the lanes'
  dut.Tick();
  dut.Drive(false, VpuOp::kAdd, false, false, 0, x);
  dut.Tick();
  EXPECT_GE(dut.assertion_failures(), 1);
}

// waves/vpu_xcend.gtkw names only signals that a dump of tpu_vpu_xcend declares (same ranges).
TEST(RtlVpuXcend, GtkwSignalsExistInARealDump) {
  ASSERT_TRUE(have_fst2vcd())
      << "fst2vcd (GTKWave) is not installed: scripts/deps.sh installs gtkwave";
  // --waves FILE keeps the dump there (waves/vpu_xcend.gtkw's Dump line).
  const bool keep = !g_waves.empty();
  const std::string fst = keep ? g_waves : ::testing::TempDir() + "vpu_xcend_waves_test.fst";
  if (keep && fs::path(fst).has_parent_path()) fs::create_directories(fs::path(fst).parent_path());
  {
    VpuXcendDut dut(fst);
    const uint32_t x[kLanes] = {f32_bits(1.0f), f32_bits(-0.5f), f32_bits(3.0f), f32_bits(0.25f)};
    for (int i = 0; i < 12; ++i) {
      dut.Drive(i % 4 != 3, kOps[i % 6], false, i % 5 == 0, static_cast<uint16_t>(i), x);
      dut.Tick();
    }
  }
  const std::vector<std::string> sigs = gtkw_signals(TPU_WAVES_DIR "/vpu_xcend.gtkw");
  EXPECT_GE(sigs.size(), 10u);  // the save file was found and parsed
  EXPECT_EQ(missing_signals(sigs, fst_signals(fst)), std::vector<std::string>{})
      << "signals of waves/vpu_xcend.gtkw that are not in the dump (name and bit range)";
  if (!keep) std::remove(fst.c_str());
}

}  // namespace
}  // namespace tpu

// GoogleTest's flags, plus --waves FILE: RtlVpuXcend.GtkwSignalsExistInARealDump keeps its dump
// there (waves/vpu_xcend.gtkw's Dump line); --check, as every command the docs show takes: the
// arguments are read and nothing runs (tests/system/test_docs.cc).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--waves") == 0 && i + 1 < argc) tpu::g_waves = argv[++i];
    else if (std::strcmp(argv[i], "--check") == 0) check = true;
  }
  if (check) {
    std::printf("rtl_vpu_xcend_lanes: check passed (no test run)\n");
    return 0;
  }
  return RUN_ALL_TESTS();
}
