// tpu_vpu's input-payload assertion at its ports, on every built lane count (vpu_variants.h):
// InPayloadStable_A (an immediate assertion at the clock edge against a copy taken while a beat
// waits, docs/scale.md "One core") stays quiet while a waiting beat is unchanged and fires when
// it changes.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>

#include "verilated.h"
#include "vpu_variants.h"

namespace {

template <class V, int kLanes>
class Vpu {
 public:
  Vpu() : ctx_(std::make_unique<VerilatedContext>()) {
    ctx_->fatalOnError(false);
    ctx_->errorLimit(std::numeric_limits<int>::max());
    top_ = std::make_unique<V>(ctx_.get());
    top_->clk_i = 0;
    top_->rst_ni = 0;
    top_->in_valid_i = 0;
    top_->out_ready_i = 0;
    top_->eval();
    tick();
    top_->rst_ni = 1;
    top_->eval();
  }
  ~Vpu() { top_->final(); }
  bool in_ready() const { return top_->in_ready_o; }
  // One add beat (op 0): x = `x` in every lane, y = 0.
  void present(uint32_t x) {
    top_->in_valid_i = 1;
    top_->in_op_i = 0;
    top_->in_src_bf16_i = 0;
    top_->in_dst_bf16_i = 0;
    top_->in_first_i = 0;
    top_->in_last_i = 0;
    top_->in_mask_i = (1u << kLanes) - 1;
    for (int w = 0; w < kLanes; ++w) {
      top_->in_x_i[w] = x;
      top_->in_y_i[w] = 0;
      top_->in_z_i[w] = 0;
    }
    top_->eval();
  }
  void tick() {
    top_->clk_i = 1;
    top_->eval();
    top_->clk_i = 0;
    top_->eval();
  }
  int failures() const { return ctx_->errorCount(); }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<V> top_;
};

template <class V, int kLanes>
void changed_waiting_beat_fails() {
  SCOPED_TRACE(kLanes);
  Vpu<V, kLanes> dut;
  dut.present(0x3F800000u);  // 1.0: taken (the output register is empty)
  ASSERT_TRUE(dut.in_ready());
  dut.tick();
  dut.present(0x40000000u);  // 2.0: the result of 1.0 is not taken, so this beat waits
  ASSERT_FALSE(dut.in_ready());
  dut.tick();
  dut.tick();  // still waiting, unchanged: fine
  EXPECT_EQ(dut.failures(), 0);
  dut.present(0x40400000u);  // 3.0 in place of the waiting 2.0
  dut.tick();
  EXPECT_GE(dut.failures(), 1);
}

TEST(VpuSva, ChangedWaitingBeatFailsInPayloadStable) {
#define TPU_VPU_CASE(lanes, V) changed_waiting_beat_fails<V, lanes>();
  TPU_VPU_VARIANTS(TPU_VPU_CASE)
#undef TPU_VPU_CASE
}

}  // namespace
