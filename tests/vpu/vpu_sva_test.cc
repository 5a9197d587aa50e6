// tpu_vpu's input-payload assertion at its ports, on every built lane count (vpu_variants.h),
// through the project's VerilatedModel (tb/common/verilated_model.h): InPayloadStable_A (an
// immediate assertion at the clock edge against a copy taken while a beat waits, docs/scale.md
// "One core") stays quiet while a waiting beat is unchanged and fires when it changes.
#include <gtest/gtest.h>

#include <cstdint>

#include "verilated_model.h"
#include "vpu_variants.h"

namespace {

// One add beat (op 0) on the input port: x = `x` in every lane, y = 0.
template <class V, int kLanes>
void present(tpu::VerilatedModel<V, false>& m, uint32_t x) {
  m->in_valid_i = 1;
  m->in_op_i = 0;
  m->in_src_bf16_i = 0;
  m->in_dst_bf16_i = 0;
  m->in_first_i = 0;
  m->in_last_i = 0;
  m->in_mask_i = (1u << kLanes) - 1;
  for (int w = 0; w < kLanes; ++w) {
    m->in_x_i[w] = x;
    m->in_y_i[w] = 0;
    m->in_z_i[w] = 0;
  }
  m.eval();
}

template <class V, int kLanes>
void changed_waiting_beat_fails() {
  SCOPED_TRACE(kLanes);
  tpu::VerilatedModel<V, false> m;
  m->in_valid_i = 0;
  m->out_ready_i = 0;  // results stay: the second beat has to wait
  ASSERT_TRUE(m.reset(1));
  present<V, kLanes>(m, 0x3F800000u);  // 1.0: taken (the output register is empty)
  ASSERT_TRUE(m->in_ready_o);
  ASSERT_TRUE(m.tick());
  present<V, kLanes>(m, 0x40000000u);  // 2.0: waits behind the result of 1.0
  ASSERT_FALSE(m->in_ready_o);
  EXPECT_TRUE(m.tick());
  m.eval();
  EXPECT_TRUE(m.tick());               // still waiting, unchanged: fine
  present<V, kLanes>(m, 0x40400000u);  // 3.0 in place of the waiting 2.0
  EXPECT_FALSE(m.tick());              // InPayloadStable_A
}

TEST(VpuSva, ChangedWaitingBeatFailsInPayloadStable) {
#define TPU_VPU_CASE(lanes, V) changed_waiting_beat_fails<V, lanes>();
  TPU_VPU_VARIANTS(TPU_VPU_CASE)
#undef TPU_VPU_CASE
}

}  // namespace
