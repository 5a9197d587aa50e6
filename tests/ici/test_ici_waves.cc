// waves/router.gtkw opens on a real dump: every signal it names is in the FST the harness writes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ici_net.h"
#include "ici_test_util.h"
#include "ici_traffic.h"
#include "wave_check.h"

#ifndef TPU_SOURCE_DIR
#error "TPU_SOURCE_DIR must point at the project root"
#endif

namespace tpu {
namespace {

TEST(IciWaves, GtkwSignalsArePresentInADump) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (package gtkwave) is not installed: scripts/deps.sh installs gtkwave";
  const std::string fst = ::testing::TempDir() + "ici_waves.fst";
  {
    IciNet net(ici_ring(4), fst);
    IciScoreboard sb(net);
    IciTrafficConfig cfg;
    cfg.rate = 0.5;
    cfg.length = IciLength::kMixed;
    const IciRunStats st = ici_run(net, sb, cfg, 0, 200, 2000);
    ASSERT_TRUE(st.completed) << st.error;
    expect_clean(net, sb);
  }  // the dump is closed here
  const auto wanted = gtkw_signals(std::string(TPU_SOURCE_DIR) + "/waves/router.gtkw");
  ASSERT_GT(wanted.size(), 20u);
  const auto present = fst_signals(fst);
  const auto miss = missing_signals(wanted, present);
  std::string list;
  for (const auto& m : miss) list += "\n  " + m;
  EXPECT_TRUE(miss.empty()) << miss.size()
                            << " signals of waves/router.gtkw are not in the dump:" << list;
  std::remove(fst.c_str());
}

}  // namespace
}  // namespace tpu
