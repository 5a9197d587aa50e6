// waves/hbm.gtkw opens on a real dump: every signal it names is in the FST the harness writes.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "hbm_harness.h"
#include "hbm_test_util.h"
#include "wave_check.h"

#ifndef TPU_SOURCE_DIR
#error "TPU_SOURCE_DIR must point at the project root"
#endif

namespace tpu {
namespace {

TEST(HbmWaves, GtkwSignalsArePresentInADump) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (package gtkwave) is not installed: scripts/deps.sh installs gtkwave";
  const std::string fst = ::testing::TempDir() + "hbm_waves.fst";
  {
    HbmHarness h(HbmConfig(), fst);
    HbmRefDriver d(h);
    std::mt19937_64 rng(1);
    for (int i = 0; i < 300; ++i) {
      if (h.pending() < 2) d.issue(rng() % 2 == 0, static_cast<uint32_t>(rng() % 4096) * 64, rng);
      h.tick();
    }
    ASSERT_TRUE(h.drain(5000));
    EXPECT_EQ(d.errors(), 0u);
    expect_clean(h);
  }  // the dump is closed here
  const auto wanted = gtkw_signals(std::string(TPU_SOURCE_DIR) + "/waves/hbm.gtkw");
  ASSERT_GT(wanted.size(), 40u);
  const auto present = fst_signals(fst);
  const auto miss = missing_signals(wanted, present);
  std::string list;
  for (const auto& m : miss) list += "\n  " + m;
  EXPECT_TRUE(miss.empty()) << miss.size()
                            << " signals of waves/hbm.gtkw are not in the dump:" << list;
  std::remove(fst.c_str());
}

}  // namespace
}  // namespace tpu
