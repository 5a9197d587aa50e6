// waves/vpu.gtkw against a real dump: run the 4-lane VPU through the harness with FST tracing
// and check that every signal the save file names is declared in the dump with the same range
// (tb/common/wave_check.h, as for every save file). fst2vcd (GTKWave) must be installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "vpu_tb.h"
#include "vpu_test_util.h"
#include "wave_check.h"

namespace tpu {
namespace {

TEST(VpuWaves, GtkwSignalsExistInARealDump) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (GTKWave) is not installed: scripts/deps.sh installs gtkwave";
  bool have4 = false;
  for (std::size_t l : VpuTb::built_lanes()) have4 = have4 || l == 4;
  if (!have4) GTEST_SKIP() << "waves/vpu.gtkw describes the 4-lane variant, which was not built";

  const std::string dir = ::testing::TempDir();
  const std::string fst = dir + "vpu_waves_test.fst";
  {
    VpuTbOptions o = vputest::tb_options(4, 0.7, 0.6, 5);
    o.wave_path = fst;
    VpuTb tb(o);
    vputest::ValueGen gen(1);
    for (int i = 0; i < 20; ++i) {
      VpuBeat b;
      b.op = static_cast<VpuOp>(i % 9);
      for (int l = 0; l < 4; ++l) {
        b.x.push_back(gen.value());
        b.y.push_back(gen.value());
        b.z.push_back(gen.value());
      }
      tb.push(b);
    }
    for (const VpuBeat& b : vputest::reduction_beats(VpuOp::kRedSum, {1, 2, 3, 4, 5, 6}, 4)) {
      tb.push(b);
    }
    tb.drain();
    ASSERT_EQ(tb.outputs().size(), 21u);
    tb.close_waves();
  }
  const std::vector<std::string> sigs = gtkw_signals(TPU_WAVES_DIR "/vpu.gtkw");
  EXPECT_GE(sigs.size(), 20u);  // the save file was found and parsed
  EXPECT_EQ(missing_signals(sigs, fst_signals(fst)), std::vector<std::string>{})
      << "signals of waves/vpu.gtkw that are not in the dump (name and bit range)";
  std::remove(fst.c_str());
}

}  // namespace
}  // namespace tpu
