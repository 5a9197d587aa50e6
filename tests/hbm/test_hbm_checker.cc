// The HBM device model's checker: driven directly with command sequences that each break one
// rule, it must flag that rule (mask bit, count, and an assertion message naming it); a legal
// sequence must pass clean and move data.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "hbm_harness.h"

namespace tpu {
namespace {

// Commands on the directly driven channel; each call is one bus cycle.
class Seq {
 public:
  explicit Seq(HbmHarness& h) : h_(h) {}
  void nop(unsigned n = 1) {
    for (unsigned i = 0; i < n; ++i) h_.direct_cycle(HbmDirect{});
  }
  // `gap` cycles after the previous command (gap >= 1): gap - 1 NOPs, then the command.
  void cmd(unsigned gap, HbmCmd c, unsigned bg, unsigned ba, unsigned row = 0, unsigned col = 0) {
    if (gap > 1) nop(gap - 1);
    HbmDirect d;
    d.cmd = c;
    d.bg = bg;
    d.ba = ba;
    d.row = row;
    d.col = col;
    h_.direct_cycle(d);
  }
  void act(unsigned gap, unsigned bg, unsigned ba, unsigned row) {
    cmd(gap, HbmCmd::kAct, bg, ba, row);
  }
  void pre(unsigned gap, unsigned bg, unsigned ba) { cmd(gap, HbmCmd::kPre, bg, ba); }
  void rd(unsigned gap, unsigned bg, unsigned ba, unsigned col = 0) {
    cmd(gap, HbmCmd::kRd, bg, ba, 0, col);
  }
  // WR followed by its two data cycles at CWL (unless `with_data` is false).
  void wr(unsigned gap, unsigned bg, unsigned ba, unsigned col = 0, bool with_data = true,
          uint8_t fill = 0xA5) {
    cmd(gap, HbmCmd::kWr, bg, ba, 0, col);
    const unsigned cwl = h_.config().timing.cwl;
    nop(cwl - 1);
    for (unsigned beat = 0; beat < 2; ++beat) {
      HbmDirect d;
      d.wvalid = with_data;
      for (unsigned i = 0; i < 32; ++i) d.wdata[i] = static_cast<uint8_t>(fill + beat * 32 + i);
      h_.direct_cycle(d);
    }
    since_ = cwl + 1;  // cycles of the WR's data already spent after the WR
  }
  void ref(unsigned gap) { cmd(gap, HbmCmd::kRef, 0, 0); }
  void prea(unsigned gap) { cmd(gap, HbmCmd::kPrea, 0, 0); }
  // A cycle of write data that no WR asked for.
  void stray_data() {
    HbmDirect d;
    d.wvalid = true;
    h_.direct_cycle(d);
  }
  // Cycles already elapsed since the last command by wr()'s data phase.
  unsigned since() const { return since_; }

 private:
  HbmHarness& h_;
  unsigned since_ = 0;
};

struct Scenario {
  std::string name;
  HbmRule rule;
  std::function<void(HbmConfig&)> tweak;  // timing for this scenario (nullptr: defaults)
  std::function<void(Seq&, const HbmTiming&)> run;
};

std::vector<Scenario> scenarios() {
  std::vector<Scenario> v;
  v.push_back({"tRCD", HbmRule::kTRCD, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.rd(t.rcd - 1, 0, 0);
               }});
  v.push_back({"tRP", HbmRule::kTRP, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.pre(t.ras + 10, 0, 0);
                 s.act(t.rp - 1, 0, 0, 2);
               }});
  v.push_back({"tRAS", HbmRule::kTRAS, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 1, 1, 3);
                 s.pre(t.ras - 1, 1, 1);
               }});
  v.push_back({"tRAS_by_PREA", HbmRule::kTRAS, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 3);
                 s.act(t.rrd_s, 2, 1, 3);
                 s.prea(t.ras - 1);  // bank (0,0) may close, bank (2,1) may not
               }});
  v.push_back({"tRC", HbmRule::kTRC, [](HbmConfig& c) { c.timing.rc = 60; },
               [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 2, 1);
                 s.pre(t.ras, 0, 2);
                 s.act(t.rp, 0, 2, 2);  // tRAS + tRP = 48 < tRC = 60
               }});
  v.push_back({"tCCD_S", HbmRule::kTCCDS, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.act(t.rrd_s, 1, 0, 1);
                 s.rd(t.rcd, 0, 0);
                 s.rd(t.ccd_s - 1, 1, 0);
               }});
  v.push_back({"tCCD_L", HbmRule::kTCCDL, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 2, 0, 1);
                 s.act(t.rrd_l, 2, 1, 1);
                 s.rd(t.rcd, 2, 0);
                 s.rd(t.ccd_l - 1, 2, 1);
               }});
  v.push_back({"tRRD_S", HbmRule::kTRRDS, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.act(t.rrd_s - 1, 3, 0, 1);
               }});
  v.push_back({"tRRD_L", HbmRule::kTRRDL, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.act(t.rrd_l - 1, 0, 3, 1);
               }});
  v.push_back({"tFAW", HbmRule::kTFAW, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.act(t.rrd_l, 1, 0, 1);
                 s.act(t.rrd_l, 2, 0, 1);
                 s.act(t.rrd_l, 3, 0, 1);
                 s.act(t.rrd_l, 0, 1, 1);  // 4 * tRRD_L = 24 < tFAW = 30
               }});
  v.push_back({"tWR", HbmRule::kTWR, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.wr(t.rcd, 0, 0);
                 s.pre(t.cwl + 2 + t.wr - 1 - s.since(), 0, 0);
               }});
  v.push_back({"tWTR_S", HbmRule::kTWTRS, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.act(t.rrd_s, 1, 0, 1);
                 s.wr(t.rcd, 0, 0);
                 s.rd(t.cwl + 2 + t.wtr_s - 1 - s.since(), 1, 0);
               }});
  v.push_back({"tWTR_L", HbmRule::kTWTRL, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.wr(t.rcd, 0, 0);
                 s.rd(t.cwl + 2 + t.wtr_l - 1 - s.since(), 0, 0);
               }});
  v.push_back({"tRTP", HbmRule::kTRTP, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.rd(t.ras - 3, 0, 0);
                 s.pre(t.rtp - 1 > 3 ? t.rtp - 1 : 3, 0, 0);  // tRAS met, tRTP not
               }});
  v.push_back({"tRFC", HbmRule::kTRFC, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.ref(1);
                 s.act(t.rfc - 1, 0, 0, 1);
               }});
  v.push_back({"tREFI", HbmRule::kTREFI, [](HbmConfig& c) { c.timing.refi = 1000; },
               [](Seq& s, const HbmTiming& t) { s.nop(t.refi + 5); }});
  v.push_back({"CL", HbmRule::kCL, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.act(t.rrd_s, 1, 0, 1);
                 s.rd(t.rcd, 0, 0);
                 s.rd(1, 1, 0);  // its data overlaps the first burst's second cycle
               }});
  v.push_back({"CWL", HbmRule::kCWL, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.wr(t.rcd, 0, 0, 0, /*with_data=*/false);
               }});
  v.push_back({"BL", HbmRule::kBL, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.wr(t.rcd, 0, 0);
                 s.stray_data();  // a fifth and sixth beat: the burst is BL4
               }});
  v.push_back({"tRTW", HbmRule::kTRTW, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 0, 0, 1);
                 s.rd(t.rcd, 0, 0);
                 s.wr(t.cl + 2 + 2 - t.cwl - 1, 0, 0);
               }});
  v.push_back({"RD-to-closed-bank", HbmRule::kRdClosed, nullptr,
               [](Seq& s, const HbmTiming&) { s.rd(1, 2, 2); }});
  v.push_back({"WR-to-closed-bank", HbmRule::kWrClosed, nullptr,
               [](Seq& s, const HbmTiming&) { s.wr(1, 2, 2); }});
  v.push_back({"ACT-to-open-bank", HbmRule::kActOpen, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 1, 2, 1);
                 s.act(t.rc, 1, 2, 2);
               }});
  v.push_back({"REF-with-open-bank", HbmRule::kRefOpen, nullptr, [](Seq& s, const HbmTiming& t) {
                 s.act(1, 3, 3, 1);
                 s.ref(t.rc);
               }});
  v.push_back({"row-range", HbmRule::kRowRange, nullptr,
               [](Seq& s, const HbmTiming&) { s.act(1, 0, 0, kHbmRowsPerBank); }});
  return v;
}

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

class HbmChecker : public ::testing::TestWithParam<Scenario> {};

TEST_P(HbmChecker, FlagsTheBrokenRule) {
  const Scenario& sc = GetParam();
  HbmConfig cfg;
  if (sc.tweak) sc.tweak(cfg);
  HbmHarness h(cfg);
  h.set_direct(true, 1);
  Seq s(h);
  ::testing::internal::CaptureStdout();
  sc.run(s, h.config().timing);
  s.nop(4);
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const uint32_t bit = 1u << static_cast<unsigned>(sc.rule);
  EXPECT_NE(h.violation_mask() & bit, 0u)
      << "rule " << sc.name << " not flagged; mask 0x" << std::hex << h.violation_mask();
  EXPECT_GE(h.violations(), 1u);
  EXPECT_GE(h.assertion_failures(), 1u) << "the checker's assertion did not fail";
  const std::string needle = std::string("HBM rule ") + hbm_rule_name(sc.rule) + " violated";
  EXPECT_NE(out.find(needle), std::string::npos) << "no message naming the rule; got:\n" << out;
}

INSTANTIATE_TEST_SUITE_P(Rules, HbmChecker, ::testing::ValuesIn(scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& p) {
                           std::string n;
                           for (char c : p.param.name) n += std::isalnum(c) ? c : '_';
                           return n;
                         });

// The same kinds of commands with every rule met: no violation, and data written comes back.
TEST(HbmCheckerLegal, LegalSequenceIsCleanAndMovesData) {
  HbmHarness h;
  const HbmTiming t = h.config().timing;
  h.set_direct(true, 0);
  Seq s(h);
  s.act(1, 0, 0, 5);
  s.act(t.rrd_s, 1, 0, 6);
  s.wr(t.rcd, 0, 0, 3, true, 0x10);
  s.wr(t.ccd_s > s.since() ? t.ccd_s - s.since() : 1, 1, 0, 4, true, 0x40);
  s.nop(t.cwl + 2 + t.wtr_l);
  // Read column 3 of bank 0 and watch the data come back CL cycles later.
  s.rd(1, 0, 0, 3);
  std::vector<uint8_t> got;
  for (unsigned i = 0; i < t.cl + 4; ++i) {
    s.nop();
    if (h.monitor().rvalid)
      got.insert(got.end(), h.monitor().rdata.begin(), h.monitor().rdata.end());
  }
  ASSERT_EQ(got.size(), 64u);
  for (unsigned i = 0; i < 64; ++i) EXPECT_EQ(got[i], static_cast<uint8_t>(0x10 + i)) << i;
  s.pre(t.ras, 0, 0);
  s.prea(t.wr + 8);
  s.ref(t.rp);
  s.act(t.rfc, 2, 2, 7);
  s.nop(t.ras);
  EXPECT_EQ(h.violations(), 0u) << "mask 0x" << std::hex << h.violation_mask();
  EXPECT_EQ(h.assertion_failures(), 0u);
}

}  // namespace
}  // namespace tpu
