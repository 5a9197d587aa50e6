// The controller's two request / response ports (NumPorts = 2, as the chip's DMA uses them):
// data integrity with traffic on both, two requests for one channel in one cycle (one waits,
// both are served), the streaming bandwidth of both ports against one, and the port assertions
// (a payload changed while waiting for ready must fail one).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "hbm_harness.h"
#include "hbm_test_util.h"

namespace tpu {
namespace {

// The port the chip's DMA uses for a burst: address bit 6 (even bursts on 0, odd on 1).
unsigned lane(uint32_t addr) { return (addr >> 6) & 1; }

class HbmTwoPorts : public ::testing::TestWithParam<HbmAddrMap> {};

TEST_P(HbmTwoPorts, ReadsReturnTheLastWrite) {
  HbmConfig cfg;
  cfg.ctrl.addr_map = GetParam();
  HbmHarness h(cfg);
  HbmRefDriver d(h);
  std::mt19937_64 rng(3);
  // A few rows of every channel, so that both ports often want one channel, hit the same bank
  // and read blocks still in the write buffer.
  for (int i = 0; i < 4000; ++i) {
    while (h.pending() >= 4 || d.outstanding() >= 200) h.tick();
    HbmLoc l;
    l.ch = static_cast<unsigned>(rng() % kHbmChannels);
    l.bg = static_cast<unsigned>(rng() % 4);
    l.ba = static_cast<unsigned>(rng() % 2);
    l.row = static_cast<unsigned>(rng() % 3);
    l.col = static_cast<unsigned>(rng() % 4);
    const uint32_t a = hbm_encode(l, GetParam());
    d.issue(rng() % 100 < 40, a, rng, lane(a));
  }
  ASSERT_TRUE(h.drain(20000));
  EXPECT_EQ(d.completed(), d.issued());
  EXPECT_GT(d.reads_checked(), 2000u);
  EXPECT_EQ(d.errors(), 0u);
  EXPECT_EQ(h.stat_total(HbmStat::kRdReqs) + h.stat_total(HbmStat::kWrReqs), d.issued());
  expect_clean(h);
}

INSTANTIATE_TEST_SUITE_P(Maps, HbmTwoPorts, ::testing::ValuesIn(hbm_all_maps()),
                         [](const ::testing::TestParamInfo<HbmAddrMap>& p) {
                           return std::string(hbm_map_name(p.param));
                         });

// Both ports ask for channel 0 in the same cycle: one request a cycle enters it, both are
// answered, with the right data.
TEST(HbmPorts, TwoRequestsForOneChannelTakeTurns) {
  HbmHarness h;
  HbmRequest w0, w1;
  w0.write = w1.write = true;
  w0.addr = hbm_encode({0, 0, 0, 0, 0}, HbmAddrMap::kChBgCoBa);
  w1.addr = hbm_encode({0, 1, 0, 0, 0}, HbmAddrMap::kChBgCoBa);
  w0.tag = 1;
  w1.tag = 2;
  for (unsigned i = 0; i < kHbmBurstBytes; ++i) {
    w0.data[i] = static_cast<uint8_t>(i);
    w1.data[i] = static_cast<uint8_t>(100 + i);
  }
  h.push(w0, 0);
  h.push(w1, 1);
  h.tick();
  EXPECT_EQ(h.accepted(), 1u) << "a channel takes one request a cycle";
  h.tick();
  EXPECT_EQ(h.accepted(), 2u) << "the other port's request goes next";
  HbmRequest r0 = w0, r1 = w1;
  r0.write = r1.write = false;
  r0.tag = 3;
  r1.tag = 4;
  h.push(r0, 1);  // the other way round: no port owns a channel
  h.push(r1, 0);
  ASSERT_TRUE(h.drain(2000));
  ASSERT_EQ(h.responses().size(), 4u);
  for (const HbmResponse& r : h.responses()) {
    if (r.write) continue;
    EXPECT_EQ(r.data, r.tag == 3 ? w0.data : w1.data) << "tag " << int{r.tag};
  }
  expect_clean(h);
}

// A sequential read stream: both ports (by address bit 6) move twice what port 0 alone does,
// up to the channels' peak.
uint64_t stream_cycles(unsigned ports, unsigned n) {
  HbmHarness h;
  h.keep_responses(false);
  uint32_t a = 0;
  unsigned sent = 0;
  while (h.response_count() < n) {
    while (sent < n) {
      const unsigned p = ports > 1 ? lane(a) : 0;
      if (h.pending_on(p) >= 2) break;
      HbmRequest r;
      r.addr = a;
      r.tag = static_cast<uint8_t>(sent);
      h.push(r, p);
      a += 64;
      ++sent;
    }
    h.tick();
  }
  EXPECT_EQ(h.assertion_failures(), 0u);
  EXPECT_EQ(h.violations(), 0u);
  return h.cycle();
}

TEST(HbmPorts, TwoPortsStreamTwiceAsFast) {
  const unsigned n = 2000;  // within one refresh interval
  const uint64_t one = stream_cycles(1, n), two = stream_cycles(2, n);
  // One port: one burst a cycle at most.
  EXPECT_GE(one, n);
  const double peak_bursts = kHbmChannels >= 4 ? 2.0 : kHbmChannels / 2.0;
  EXPECT_LE(double(two), 1.15 * n / peak_bursts + 100) << "one port " << one << " cycles";
  if (kHbmChannels >= 4) {
    EXPECT_LT(double(two), 0.6 * double(one));
  }
}

// The payload of a waiting request must not change: port 1's assertion catches it.
TEST(HbmPorts, PayloadChangedWhileWaitingFailsAnAssertion) {
  HbmHarness h;
  // Both ports on channel 0, so one of them waits every cycle.
  for (unsigned i = 0; i < 8; ++i) {
    HbmRequest r;
    r.write = true;
    r.addr = hbm_encode({0, i % 4, 0, 0, i / 4}, HbmAddrMap::kChBgCoBa);
    r.tag = static_cast<uint8_t>(i);
    h.push(r, i % 2);
  }
  h.tick();
  ASSERT_EQ(h.assertion_failures(), 0u);
  bool corrupted = false;
  for (int i = 0; i < 8 && !corrupted; ++i) {
    const size_t before = h.pending_on(1);
    h.tick();
    if (h.pending_on(1) == before && before > 0) {  // port 1 waited this cycle
      h.corrupt_pending(1);
      corrupted = true;
      h.tick();
    }
  }
  ASSERT_TRUE(corrupted) << "port 1 never waited";
  EXPECT_GE(h.assertion_failures(), 1u);
}

}  // namespace
}  // namespace tpu
