// HBM ECC, SECDED (72,64) (docs/hbm.md): the RTL encoder/checker of tpu_hbm_pkg against the C++
// golden (tb/common/secded.h), every single-bit flip corrected and every double-bit flip
// detected; through the controller with the device's fault injection (random flips on read):
// data still right, every injected flip counted, uncorrectable words flagged in the response;
// and the device's write-ECC rule (check bits that do not match their data) fires.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "Vhbm_secded_tb_top.h"
#include "hbm_harness.h"
#include "hbm_test_util.h"
#include "secded.h"

namespace tpu {
namespace {

class SecdedRtl {
 public:
  uint8_t encode(uint64_t d) {
    m_.enc_data_i = d;
    m_.eval();
    return m_.enc_check_o;
  }
  SecdedResult decode(uint64_t d, uint8_t c) {
    m_.dec_data_i = d;
    m_.dec_check_i = c;
    m_.eval();
    SecdedResult r;
    r.data = m_.dec_data_o;
    r.syndrome = m_.dec_syndrome_o;
    r.corrected = m_.dec_ce_o;
    r.uncorrectable = m_.dec_ue_o;
    return r;
  }

 private:
  VerilatedContext ctx_;
  Vhbm_secded_tb_top m_{&ctx_};
};

// The flip of bit b (0..63 data, 64..71 check) of a stored word.
void flip(uint64_t* d, uint8_t* c, unsigned b) {
  if (b < 64) *d ^= uint64_t{1} << b;
  else *c = static_cast<uint8_t>(*c ^ (1u << (b - 64)));
}

TEST(Secded, GoldenIsAHsiaoCode) {
  // Every data column distinct, odd weight, not a check bit's one-hot column.
  for (unsigned i = 0; i < 64; ++i) {
    const unsigned w = static_cast<unsigned>(__builtin_popcount(secded_column(i)));
    EXPECT_TRUE(w == 3 || w == 5) << "column " << i;
    for (unsigned j = 0; j < i; ++j) EXPECT_NE(secded_column(i), secded_column(j)) << i << " " << j;
  }
  EXPECT_EQ(secded_encode(0), 0u);
}

TEST(Secded, RtlEncoderMatchesTheGolden) {
  SecdedRtl rtl;
  std::mt19937_64 rng(11);
  for (int n = 0; n < 5000; ++n) {
    const uint64_t d = n < 64 ? uint64_t{1} << n : rng();
    ASSERT_EQ(rtl.encode(d), secded_encode(d)) << std::hex << d;
  }
}

TEST(Secded, EverySingleBitFlipIsCorrected) {
  SecdedRtl rtl;
  std::mt19937_64 rng(12);
  for (int n = 0; n < 40; ++n) {
    const uint64_t d = rng();
    const uint8_t c = secded_encode(d);
    const SecdedResult clean = rtl.decode(d, c);
    EXPECT_FALSE(clean.corrected || clean.uncorrectable);
    EXPECT_EQ(clean.data, d);
    for (unsigned b = 0; b < 72; ++b) {
      uint64_t fd = d;
      uint8_t fc = c;
      flip(&fd, &fc, b);
      const SecdedResult r = rtl.decode(fd, fc);
      ASSERT_TRUE(r.corrected && !r.uncorrectable) << "bit " << b;
      ASSERT_EQ(r.data, d) << "bit " << b;
      const SecdedResult g = secded_decode(fd, fc);
      ASSERT_EQ(g.data, r.data);
      ASSERT_EQ(g.syndrome, r.syndrome);
      ASSERT_TRUE(g.corrected && !g.uncorrectable);
    }
  }
}

TEST(Secded, EveryDoubleBitFlipIsDetected) {
  SecdedRtl rtl;
  std::mt19937_64 rng(13);
  for (int n = 0; n < 3; ++n) {
    const uint64_t d = rng();
    const uint8_t c = secded_encode(d);
    for (unsigned b1 = 0; b1 < 72; ++b1) {
      for (unsigned b2 = b1 + 1; b2 < 72; ++b2) {
        uint64_t fd = d;
        uint8_t fc = c;
        flip(&fd, &fc, b1);
        flip(&fd, &fc, b2);
        const SecdedResult r = rtl.decode(fd, fc);
        ASSERT_TRUE(r.uncorrectable && !r.corrected) << "bits " << b1 << ", " << b2;
        ASSERT_EQ(r.data, fd) << "an uncorrectable word is returned as read";
        const SecdedResult g = secded_decode(fd, fc);
        ASSERT_TRUE(g.uncorrectable && !g.corrected);
        ASSERT_EQ(g.syndrome, r.syndrome);
      }
    }
  }
}

// Mixed random traffic through the controller with single-bit flips on 2% of the words read:
// every read returns the data written, and every flip is counted as corrected.
TEST(HbmEcc, SingleBitFlipsAreCorrectedThroughTheController) {
  HbmHarness h;
  h.set_faults(5, 0.02, 0);
  h.reset();
  HbmRefDriver drv(h);
  std::mt19937_64 rng(21);
  for (int i = 0; i < 3000; ++i) {
    const uint32_t addr = static_cast<uint32_t>(rng() % 256) * 64;
    while (!drv.issue(rng() % 3 == 0, addr, rng)) h.tick();
    h.tick();
  }
  ASSERT_TRUE(h.drain(100000));
  EXPECT_EQ(drv.errors(), 0u);
  EXPECT_GT(drv.reads_checked(), 1000u);
  EXPECT_GT(h.injected_single(), 50u);
  EXPECT_EQ(h.injected_double(), 0u);
  EXPECT_EQ(h.stat_total(HbmStat::kEccCorrected), h.injected_single());
  EXPECT_EQ(h.stat_total(HbmStat::kEccUncorrectable), 0u);
  expect_clean(h);
}

// Double-bit flips: the response flags the word (never silent), the counter matches.
TEST(HbmEcc, DoubleBitFlipsAreFlaggedInTheResponse) {
  HbmHarness h;
  h.set_faults(6, 0, 0.01);
  h.reset();
  std::mt19937_64 rng(22);
  for (uint32_t b = 0; b < 64; ++b) {
    HbmRequest w;
    w.write = true;
    w.addr = b * 64;
    w.tag = static_cast<uint8_t>(b);
    for (auto& x : w.data) x = static_cast<uint8_t>(rng());
    h.push(w);
  }
  ASSERT_TRUE(h.drain(10000));
  uint64_t flagged = 0;
  for (int round = 0; round < 20; ++round) {
    h.responses().clear();
    for (uint32_t b = 0; b < 64; ++b) h.push(HbmRequest{false, b * 64, static_cast<uint8_t>(b)});
    ASSERT_TRUE(h.drain(20000));
    for (const HbmResponse& r : h.responses()) flagged += __builtin_popcount(r.ue);
  }
  EXPECT_GT(h.injected_double(), 0u);
  EXPECT_EQ(flagged, h.injected_double());
  EXPECT_EQ(h.stat_total(HbmStat::kEccUncorrectable), h.injected_double());
  expect_clean(h);
}

// Without faults the same traffic sees no ECC event and the same timing (cycle of every
// response) as with the generator seeded but off.
TEST(HbmEcc, NoFaultsNoEvents) {
  HbmHarness h;
  HbmRefDriver drv(h);
  std::mt19937_64 rng(23);
  for (int i = 0; i < 500; ++i) {
    while (!drv.issue(rng() % 2 == 0, static_cast<uint32_t>(rng() % 128) * 64, rng)) h.tick();
  }
  ASSERT_TRUE(h.drain(100000));
  EXPECT_EQ(drv.errors(), 0u);
  EXPECT_EQ(h.stat_total(HbmStat::kEccCorrected), 0u);
  EXPECT_EQ(h.stat_total(HbmStat::kEccUncorrectable), 0u);
  EXPECT_EQ(h.injected_single() + h.injected_double(), 0u);
  expect_clean(h);
}

// The device's write-ECC rule: a write whose check bits do not match its data (a controller
// bug) fails an assertion naming the rule.
TEST(HbmEcc, WriteEccRuleFires) {
  HbmHarness h;
  const HbmTiming t = h.config().timing;
  h.set_direct(true, 0);
  ::testing::internal::CaptureStdout();
  HbmDirect act;
  act.cmd = HbmCmd::kAct;
  act.row = 3;
  h.direct_cycle(act);
  for (unsigned i = 1; i < t.rcd; ++i) h.direct_cycle(HbmDirect{});
  HbmDirect wr;
  wr.cmd = HbmCmd::kWr;
  h.direct_cycle(wr);
  for (unsigned i = 1; i < t.cwl; ++i) h.direct_cycle(HbmDirect{});
  for (unsigned beat = 0; beat < 2; ++beat) {
    HbmDirect d;
    d.wvalid = true;
    d.wdata[0] = 0x5A;
    d.wcheck_flip = beat == 1 ? 0x100u : 0u;  // one check bit of word 1 of the second cycle
    h.direct_cycle(d);
  }
  for (int i = 0; i < 4; ++i) h.direct_cycle(HbmDirect{});
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(h.violation_mask() & (1u << static_cast<unsigned>(HbmRule::kWrEcc)), 0u);
  EXPECT_EQ(h.violations(), 1u);
  EXPECT_GE(h.assertion_failures(), 1u);
  EXPECT_NE(out.find("HBM rule write-ECC violated"), std::string::npos) << out;
}

}  // namespace
}  // namespace tpu
