// HbmConfig: the checked-in YAML gives the documented defaults; bad files are rejected with an
// error that names the file, the key and the rule.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>

#include "hbm_config.h"

#ifndef TPU_SOURCE_DIR
#error "TPU_SOURCE_DIR must point at the project root"
#endif

namespace tpu {
namespace {

const std::string kDefaultYaml = std::string(TPU_SOURCE_DIR) + "/configs/hbm2_default.yaml";

TEST(HbmConfig, CheckedInFileHoldsTheDefaults) {
  const HbmConfig c = load_hbm_config(kDefaultYaml);
  const HbmConfig d;
  EXPECT_EQ(c.source, kDefaultYaml);
  EXPECT_DOUBLE_EQ(c.tck_ns, 1.0);
  EXPECT_EQ(c.burst_length, 4u);
  EXPECT_EQ(c.timing.cl, 14u);
  EXPECT_EQ(c.timing.cwl, 4u);
  EXPECT_EQ(c.timing.rcd, 14u);
  EXPECT_EQ(c.timing.rp, 14u);
  EXPECT_EQ(c.timing.ras, 34u);
  EXPECT_EQ(c.timing.rc, 48u);
  EXPECT_EQ(c.timing.ccd_s, 2u);
  EXPECT_EQ(c.timing.ccd_l, 4u);
  EXPECT_EQ(c.timing.rrd_s, 4u);
  EXPECT_EQ(c.timing.rrd_l, 6u);
  EXPECT_EQ(c.timing.faw, 30u);
  EXPECT_EQ(c.timing.wr, 16u);
  EXPECT_EQ(c.timing.wtr_s, 6u);
  EXPECT_EQ(c.timing.wtr_l, 8u);
  EXPECT_EQ(c.timing.rtp, 5u);
  EXPECT_EQ(c.timing.rfc, 260u);
  EXPECT_EQ(c.timing.refi, 3900u);
  EXPECT_EQ(c.ctrl.addr_map, d.ctrl.addr_map);
  EXPECT_EQ(c.ctrl.starve_cap, d.ctrl.starve_cap);
  EXPECT_EQ(c.ctrl.wr_hi, d.ctrl.wr_hi);
  EXPECT_EQ(c.ctrl.wr_lo, d.ctrl.wr_lo);
}

TEST(HbmConfig, EveryParameterIsDescribed) {
  const auto info = hbm_param_info();
  EXPECT_EQ(info.size(), 2u + 17u + 4u);
  for (const auto& p : info) {
    EXPECT_FALSE(p.desc.empty()) << p.key;
    EXPECT_FALSE(p.default_value.empty()) << p.key;
  }
}

TEST(HbmConfig, MissingKeysKeepDefaultsAndMapsParse) {
  const HbmConfig c = parse_hbm_config(
      "hbm:\n  timing:\n    CL: 20\n  controller:\n    address_map: ch_co_bg_ba\n", "t.yaml");
  EXPECT_EQ(c.timing.cl, 20u);
  EXPECT_EQ(c.timing.rcd, 14u);
  EXPECT_EQ(c.ctrl.addr_map, HbmAddrMap::kChCoBgBa);
  for (HbmAddrMap m : hbm_all_maps()) {
    HbmAddrMap back;
    ASSERT_TRUE(hbm_map_from_name(hbm_map_name(m), &back));
    EXPECT_EQ(back, m);
  }
}

struct BadCase {
  std::string name;
  std::string yaml;
  std::string key;   // must appear in the message
  std::string rule;  // must appear in the message
};

void PrintTo(const BadCase& b, std::ostream* os) { *os << b.name; }

class HbmConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(HbmConfigErrors, NameFileKeyAndRule) {
  const BadCase& b = GetParam();
  const std::string path = ::testing::TempDir() + "hbm_bad_" + b.name + ".yaml";
  {
    std::ofstream out(path);
    out << b.yaml;
  }
  try {
    load_hbm_config(path);
    FAIL() << "accepted:\n" << b.yaml;
  } catch (const HbmConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.key), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.rule), std::string::npos) << msg;
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HbmConfigErrors,
    ::testing::Values(
        BadCase{"unknown_timing_key", "hbm:\n  timing:\n    tFOO: 3\n", "hbm.timing.tFOO",
                "unknown key"},
        BadCase{"unknown_top_key", "hbm:\n  speed: 3\n", "hbm.speed", "unknown key"},
        BadCase{"unknown_ctrl_key", "hbm:\n  controller:\n    policy: fcfs\n",
                "hbm.controller.policy", "unknown key"},
        BadCase{"wrong_type", "hbm:\n  timing:\n    tRCD: fast\n", "hbm.timing.tRCD",
                "must be an integer"},
        BadCase{"fraction", "hbm:\n  timing:\n    CL: 14.5\n", "hbm.timing.CL",
                "must be an integer"},
        BadCase{"list_not_int", "hbm:\n  timing:\n    tRP: [1, 2]\n", "hbm.timing.tRP",
                "must be an integer"},
        BadCase{"negative", "hbm:\n  timing:\n    tRP: -1\n", "hbm.timing.tRP", "must be in"},
        BadCase{"timing_not_map", "hbm:\n  timing: 5\n", "hbm.timing", "must be a map"},
        BadCase{"rc_below_ras_rp", "hbm:\n  timing:\n    tRC: 40\n", "hbm.timing.tRC",
                "tRC must be >= tRAS + tRP"},
        BadCase{"ccd_l_below_s", "hbm:\n  timing:\n    tCCD_L: 1\n    tCCD_S: 2\n",
                "hbm.timing.tCCD_L", "tCCD_L must be >= tCCD_S"},
        BadCase{"ccd_s_below_burst", "hbm:\n  timing:\n    tCCD_S: 1\n", "hbm.timing.tCCD_S",
                "BL/2"},
        BadCase{"rrd_l_below_s", "hbm:\n  timing:\n    tRRD_L: 3\n", "hbm.timing.tRRD_L",
                "tRRD_L must be >= tRRD_S"},
        BadCase{"wtr_l_below_s", "hbm:\n  timing:\n    tWTR_L: 5\n", "hbm.timing.tWTR_L",
                "tWTR_L must be >= tWTR_S"},
        BadCase{"refi_too_short", "hbm:\n  timing:\n    tREFI: 350\n", "hbm.timing.tREFI",
                "tREFI must exceed tRFC"},
        BadCase{"cwl_too_late", "hbm:\n  timing:\n    CWL: 30\n", "hbm.timing.CWL",
                "CWL must be <= CL"},
        BadCase{"bl8", "hbm:\n  burst_length: 8\n", "hbm.burst_length", "must be 4"},
        BadCase{"bad_map", "hbm:\n  controller:\n    address_map: random\n",
                "hbm.controller.address_map", "unknown map"},
        BadCase{"watermarks", "hbm:\n  controller:\n    write_low_watermark: 12\n",
                "hbm.controller.write_low_watermark", "must be < write_high_watermark"},
        BadCase{"watermark_range", "hbm:\n  controller:\n    write_high_watermark: 40\n",
                "hbm.controller.write_high_watermark", "must be in [1, 16]"},
        BadCase{"tck", "hbm:\n  tck_ns: 0\n", "hbm.tck_ns", "must be > 0"},
        BadCase{"no_section", "chip:\n  variant: 4x4\n", "hbm", "no 'hbm' section"},
        BadCase{"not_yaml", "hbm: [unclosed\n", "hbm", "not valid YAML"}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return p.param.name; });

TEST(HbmConfig, MissingFileIsAnError) {
  try {
    load_hbm_config("/nonexistent/hbm.yaml");
    FAIL();
  } catch (const HbmConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/hbm.yaml: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpu
