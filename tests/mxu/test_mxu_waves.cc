// waves/mxu.gtkw opens on a real dump: every signal it names is in the FST the harness writes,
// with its bit range on the 4x4 variant the file is written for, by name on the others (their
// vectors are wider).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "mxu_dut.h"
#include "mxu_runner.h"
#include "wave_check.h"

#ifndef TPU_SOURCE_DIR
#error "TPU_SOURCE_DIR must point at the project root"
#endif

namespace tpu {
namespace {

class MxuWaves : public ::testing::TestWithParam<std::string> {};

TEST_P(MxuWaves, GtkwSignalsArePresentInADump) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (package gtkwave) is not installed: scripts/deps.sh installs gtkwave";
  const std::string fst = ::testing::TempDir() + "mxu_" + GetParam() + ".fst";
  {
    auto dut = make_mxu(GetParam());
    dut->open_waves(fst, 1.0);
    const MatmulShape sh{6, dut->rows() + 1, dut->cols()};
    std::vector<bf16_t> a(sh.m * sh.k, 0x3F80), w(sh.k * sh.n, 0x4000);
    ASSERT_TRUE(run_matmul(*dut, sh, a, w, nullptr).completed);
  }  // the dump is closed here
  auto wanted = gtkw_signals(std::string(TPU_SOURCE_DIR) + "/waves/mxu.gtkw");
  ASSERT_GT(wanted.size(), 30u);
  auto present = fst_signals(fst);
  if (GetParam() != "4x4") {
    for (auto& w : wanted) w = without_range(w);
    for (auto& p : present) p = without_range(p);
  }
  const auto miss = missing_signals(wanted, present);
  std::string list;
  for (const auto& m : miss) list += "\n  " + m;
  EXPECT_TRUE(miss.empty()) << miss.size() << " signals of waves/mxu.gtkw are not in the dump:"
                            << list;
  std::remove(fst.c_str());
}

// Every traced variant (128x128 is built without waves).
std::vector<std::string> traced_variants() {
  std::vector<std::string> v;
  for (const auto& name : built_mxu_variants())
    if (name != "128x128") v.push_back(name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Variants, MxuWaves, ::testing::ValuesIn(traced_variants()),
                         [](const auto& p) { return "v" + p.param; });

}  // namespace
}  // namespace tpu
