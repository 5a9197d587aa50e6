// The HBM controller against the device model: data integrity under random traffic, no timing
// violation, refresh cadence, back-pressure, address maps, row-buffer behaviour and latency,
// forwarding/merging, starvation cap, write drain watermarks, statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "hbm_harness.h"
#include "hbm_test_util.h"

namespace tpu {
namespace {

enum class Footprint { kHot, kWide };

// A random 64-byte aligned address. kHot: few rows, banks and columns of every channel, so that
// row hits, conflicts and same-block hazards are frequent; kWide: anywhere in the device.
uint32_t random_addr(Footprint f, HbmAddrMap map, std::mt19937_64& rng) {
  if (f == Footprint::kWide) return static_cast<uint32_t>(rng() % (kHbmCapacity / 64)) * 64;
  HbmLoc l;
  l.ch = static_cast<unsigned>(rng() % kHbmChannels);
  l.bg = static_cast<unsigned>(rng() % 4);
  l.ba = static_cast<unsigned>(rng() % 2);
  l.row = static_cast<unsigned>(rng() % 3);
  l.col = static_cast<unsigned>(rng() % 4);
  return hbm_encode(l, map);
}

// Keeps the request queue fed with random traffic for `cycles`, then drains.
void run_random(HbmHarness& h, HbmRefDriver& d, Footprint f, unsigned write_pct, uint64_t cycles,
                std::mt19937_64& rng) {
  const uint64_t end = h.cycle() + cycles;
  while (h.cycle() < end) {
    if (h.pending() < 2) {
      const bool w = (rng() % 100) < write_pct;
      d.issue(w, random_addr(f, h.config().ctrl.addr_map, rng), rng);
    }
    h.tick();
  }
  ASSERT_TRUE(h.drain(20000)) << "controller did not drain";
}

// ---------------------------------------------------------------------------------------------
// Data integrity: every read returns the last write, for every map and footprint.
// ---------------------------------------------------------------------------------------------
using IntegrityParam = std::tuple<HbmAddrMap, Footprint, unsigned /*seed*/>;
class HbmIntegrity : public ::testing::TestWithParam<IntegrityParam> {};

TEST_P(HbmIntegrity, ReadsReturnTheLastWrite) {
  const auto [map, fp, seed] = GetParam();
  HbmConfig cfg;
  cfg.ctrl.addr_map = map;
  HbmHarness h(cfg);
  HbmRefDriver d(h);
  std::mt19937_64 rng(seed);
  run_random(h, d, fp, 50, 5000, rng);
  EXPECT_EQ(d.completed(), d.issued());
  EXPECT_GT(d.reads_checked(), 250u);
  EXPECT_EQ(d.errors(), 0u);
  EXPECT_EQ(h.stat_total(HbmStat::kRdReqs) + h.stat_total(HbmStat::kWrReqs), d.issued());
  expect_clean(h);
}

INSTANTIATE_TEST_SUITE_P(Maps, HbmIntegrity,
                         ::testing::Combine(::testing::ValuesIn(hbm_all_maps()),
                                            ::testing::Values(Footprint::kHot, Footprint::kWide),
                                            ::testing::Values(1u, 2u)),
                         [](const ::testing::TestParamInfo<IntegrityParam>& p) {
                           return std::string(hbm_map_name(std::get<0>(p.param))) +
                                  (std::get<1>(p.param) == Footprint::kHot ? "_hot" : "_wide") +
                                  "_seed" + std::to_string(std::get<2>(p.param));
                         });

// Streams in every direction keep every rule and every byte.
TEST(HbmTiming, SequentialStreamsAreCleanOnEveryMap) {
  for (HbmAddrMap map : hbm_all_maps()) {
    SCOPED_TRACE(hbm_map_name(map));
    HbmConfig cfg;
    cfg.ctrl.addr_map = map;
    HbmHarness h(cfg);
    HbmRefDriver d(h);
    std::mt19937_64 rng(7);
    uint32_t a = 0;
    for (int phase = 0; phase < 3; ++phase) {  // writes, reads, then both interleaved
      for (int i = 0; i < 600; ++i) {
        while (h.pending() >= 2 || d.outstanding() >= 200) h.tick();
        const bool w = phase == 0 || (phase == 2 && (i & 1));
        d.issue(w, a, rng);
        a = static_cast<uint32_t>((a + 64) % (64 * 1024 * 4));
      }
    }
    ASSERT_TRUE(h.drain(20000));
    EXPECT_EQ(d.errors(), 0u);
    expect_clean(h);
  }
}

// Random (valid) timing, policy and traffic: the run-time timing inputs really drive the
// scheduler, so no combination may break a rule or lose a byte.
class HbmRandomTiming : public ::testing::TestWithParam<unsigned> {};

uint32_t pick(std::mt19937_64& r, uint32_t lo, uint32_t hi) {
  return lo + static_cast<uint32_t>(r() % (hi - lo + 1));
}

TEST_P(HbmRandomTiming, CleanAndCorrect) {
  std::mt19937_64 r(GetParam());
  HbmConfig c;
  HbmTiming& t = c.timing;
  for (bool ok = false; !ok;) {
    t.cl = pick(r, 2, 30);
    t.cwl = pick(r, 1, std::min(30u, t.cl + 3));
    t.rcd = pick(r, 1, 30);
    t.rp = pick(r, 1, 30);
    t.ras = pick(r, t.rcd, 60);
    t.rc = t.ras + t.rp + pick(r, 0, 10);
    t.ccd_s = pick(r, 2, 6);
    t.ccd_l = pick(r, t.ccd_s, 10);
    t.rrd_s = pick(r, 1, 8);
    t.rrd_l = pick(r, t.rrd_s, 12);
    t.faw = pick(r, 1, 60);
    t.wr = pick(r, 1, 30);
    t.wtr_s = pick(r, 1, 10);
    t.wtr_l = pick(r, t.wtr_s, 14);
    t.rtp = pick(r, 1, 12);
    t.rfc = pick(r, 1, 300);
    t.refi = pick(r, 200, 3000);
    c.ctrl.addr_map = static_cast<HbmAddrMap>(r() % 4);
    c.ctrl.starve_cap = pick(r, 1, 600);
    c.ctrl.wr_hi = pick(r, 1, 16);
    c.ctrl.wr_lo = pick(r, 0, c.ctrl.wr_hi - 1);
    try {
      validate_hbm_config(c);
      ok = true;
    } catch (const HbmConfigError&) {
    }
  }
  HbmHarness h(c);
  HbmRefDriver d(h);
  const bool stall = r() % 2;
  h.set_rsp_ready([&](uint64_t cyc) { return !stall || (cyc / 37) % 3 != 0; });
  run_random(h, d, r() % 2 ? Footprint::kHot : Footprint::kWide, pick(r, 0, 100), 4000, r);
  EXPECT_EQ(d.completed(), d.issued());
  EXPECT_EQ(d.errors(), 0u);
  expect_clean(h);
}

INSTANTIATE_TEST_SUITE_P(Seeds, HbmRandomTiming, ::testing::Range(1u, 9u));

// ---------------------------------------------------------------------------------------------
// Refresh
// ---------------------------------------------------------------------------------------------
// Watches channel `ch`'s command bus and records the cycle of every REF.
std::vector<uint64_t> run_watching_refs(HbmHarness& h, unsigned ch, uint64_t cycles,
                                        const std::function<void()>& each_cycle) {
  std::vector<uint64_t> refs;
  h.set_monitor_channel(ch);
  for (uint64_t i = 0; i < cycles; ++i) {
    if (each_cycle) each_cycle();
    h.tick();
    if (h.monitor().cmd == HbmCmd::kRef) refs.push_back(h.cycle() - 1);
  }
  return refs;
}

void expect_cadence(const std::vector<uint64_t>& refs, uint64_t cycles, const HbmTiming& t) {
  const uint64_t due = cycles / t.refi;
  ASSERT_GE(refs.size(), due) << "fewer refreshes than cycles / tREFI";
  EXPECT_LE(refs.size(), due + 1) << "more refreshes than needed";
  for (size_t k = 0; k < refs.size(); ++k) {
    // REF number k+1 is due by cycle (k+1)*tREFI - 1 and is issued within the lead window.
    EXPECT_LT(refs[k], (k + 1) * t.refi) << "refresh " << k + 1 << " late";
    EXPECT_GT(refs[k] + 200, (k + 1) * t.refi) << "refresh " << k + 1 << " far too early";
  }
}

TEST(HbmRefresh, CadenceWhenIdle) {
  HbmHarness h;
  const HbmTiming t = h.config().timing;
  const uint64_t cycles = 4 * t.refi + 50;
  const auto refs = run_watching_refs(h, 1, cycles, nullptr);
  expect_cadence(refs, cycles, t);
  for (unsigned c = 0; c < kHbmChannels; ++c)
    EXPECT_EQ(h.stat(c, HbmStat::kRefreshes), cycles / t.refi) << "channel " << c;
  expect_clean(h);
}

TEST(HbmRefresh, CadenceUnderLoadWithShortInterval) {
  HbmConfig cfg;
  cfg.timing.refi = 1200;
  HbmHarness h(cfg);
  HbmRefDriver d(h);
  std::mt19937_64 rng(11);
  const uint64_t cycles = 8 * cfg.timing.refi + 10;
  const auto refs = run_watching_refs(h, 0, cycles, [&] {
    if (h.pending() < 2)
      d.issue(rng() % 3 == 0, random_addr(Footprint::kWide, cfg.ctrl.addr_map, rng), rng);
  });
  expect_cadence(refs, cycles, cfg.timing);
  ASSERT_TRUE(h.drain(20000));
  EXPECT_EQ(d.errors(), 0u);
  EXPECT_GT(d.completed(), 600u);
  expect_clean(h);
}

// ---------------------------------------------------------------------------------------------
// Back-pressure on the response stream: nothing lost, nothing mixed up between tags.
// ---------------------------------------------------------------------------------------------
TEST(HbmBackpressure, ResponsesSurviveLongStalls) {
  HbmHarness h;
  HbmRefDriver d(h);
  std::mt19937_64 rng(5);
  // Ready low for stretches of 20..300 cycles, high for 10..200.
  std::vector<std::pair<uint64_t, bool>> pattern;
  uint64_t at = 0;
  bool ready = false;
  while (at < 20000) {
    const uint64_t len = ready ? 10 + rng() % 190 : 20 + rng() % 280;
    pattern.push_back({at, ready});
    at += len;
    ready = !ready;
  }
  uint64_t low_cycles = 0;
  h.set_rsp_ready([&](uint64_t cyc) {
    auto it = std::upper_bound(pattern.begin(), pattern.end(), std::make_pair(cyc, true));
    const bool r = (it == pattern.begin()) ? true : std::prev(it)->second;
    low_cycles += !r;
    return r;
  });
  run_random(h, d, Footprint::kHot, 40, 12000, rng);
  EXPECT_GT(low_cycles, 3000u);
  EXPECT_EQ(d.completed(), d.issued());
  EXPECT_EQ(d.errors(), 0u);
  expect_clean(h);
}

// ---------------------------------------------------------------------------------------------
// Address map: the controller sends each block where the documented map says.
// ---------------------------------------------------------------------------------------------
class HbmAddressMap : public ::testing::TestWithParam<HbmAddrMap> {};

TEST_P(HbmAddressMap, CommandsGoWhereTheMapSays) {
  const HbmAddrMap map = GetParam();
  HbmConfig cfg;
  cfg.ctrl.addr_map = map;
  HbmHarness h(cfg);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 40; ++i) {
    const uint32_t a = static_cast<uint32_t>(rng() % (kHbmCapacity / 64)) * 64;
    const HbmLoc want = hbm_decode(a, map);
    EXPECT_EQ(hbm_encode(want, map), a);
    h.set_monitor_channel(want.ch);
    HbmRequest r;
    r.addr = a;
    r.tag = static_cast<uint8_t>(i);
    h.push(r);
    bool seen = false;
    for (int c = 0; c < 200 && !seen; ++c) {
      h.tick();
      if (h.monitor().cmd == HbmCmd::kRd) {
        seen = true;
        EXPECT_EQ(h.monitor().bg, want.bg) << std::hex << a;
        EXPECT_EQ(h.monitor().ba, want.ba) << std::hex << a;
        EXPECT_EQ(h.monitor().row, want.row) << std::hex << a;
        EXPECT_EQ(h.monitor().col, want.col) << std::hex << a;
      }
    }
    EXPECT_TRUE(seen) << "no RD for 0x" << std::hex << a;
    ASSERT_TRUE(h.drain(500));
  }
  expect_clean(h);
}

TEST_P(HbmAddressMap, SequentialBlocksSpreadAsDocumented) {
  const HbmAddrMap map = GetParam();
  const HbmLoc l0 = hbm_decode(0, map), l1 = hbm_decode(64, map);
  if (map == HbmAddrMap::kCoBgBaRoCh) {
    EXPECT_EQ(l1.col, 1u);  // within a channel's own region
  } else {
    EXPECT_EQ(l1.ch, 1u);  // channel first
  }
  const HbmLoc l2 = hbm_decode(64 * kHbmChannels, map);
  if (map == HbmAddrMap::kChBgCoBa || map == HbmAddrMap::kChBgBaCo) {
    EXPECT_EQ(l2.bg, 1u);  // then bank group
    EXPECT_EQ(l2.ch, 0u);
  }
  (void)l0;
}

INSTANTIATE_TEST_SUITE_P(Maps, HbmAddressMap, ::testing::ValuesIn(hbm_all_maps()),
                         [](const ::testing::TestParamInfo<HbmAddrMap>& p) {
                           return std::string(hbm_map_name(p.param));
                         });

// ---------------------------------------------------------------------------------------------
// Row buffer: unloaded latency of a row hit, a closed row and a row conflict; their counters.
// ---------------------------------------------------------------------------------------------
uint64_t one_read_latency(HbmHarness& h, uint32_t addr, uint8_t tag) {
  HbmRequest r;
  r.addr = addr;
  r.tag = tag;
  h.push(r);
  h.clear_accept_log();
  const size_t before = h.responses().size();
  for (int i = 0; i < 500 && h.responses().size() == before; ++i) h.tick();
  EXPECT_EQ(h.responses().size(), before + 1);
  EXPECT_EQ(h.accept_cycles().size(), 1u);
  if (h.responses().size() != before + 1 || h.accept_cycles().empty()) return 0;
  const uint64_t lat = h.responses().back().cycle - h.accept_cycles().front();
  h.tick(100);  // let every timer expire
  return lat;
}

TEST(HbmRowBuffer, UnloadedLatencyOfHitMissConflict) {
  HbmHarness h;
  const HbmTiming t = h.config().timing;
  const HbmAddrMap map = h.config().ctrl.addr_map;
  const uint32_t a = hbm_encode({1, 2, 3, 5, 0}, map);
  const uint32_t hit = hbm_encode({1, 2, 3, 5, 9}, map);
  const uint32_t conflict = hbm_encode({1, 2, 3, 6, 0}, map);
  const uint64_t miss_lat = one_read_latency(h, a, 1);
  const uint64_t hit_lat = one_read_latency(h, hit, 2);
  const uint64_t conflict_lat = one_read_latency(h, conflict, 3);
  // Handshake to handshake: queue, issue, CL + the two data cycles, out: CL + 4 (docs/hbm.md);
  // a closed row adds the ACT and tRCD, a conflict the PRE and tRP as well.
  EXPECT_EQ(hit_lat, t.cl + 4u);
  EXPECT_EQ(miss_lat, hit_lat + t.rcd);
  EXPECT_EQ(conflict_lat, miss_lat + t.rp);
  EXPECT_EQ(h.stat(1, HbmStat::kRowHits), 1u);
  EXPECT_EQ(h.stat(1, HbmStat::kRowMisses), 1u);
  EXPECT_EQ(h.stat(1, HbmStat::kRowConflicts), 1u);
  EXPECT_EQ(h.stat(1, HbmStat::kLatCount), 3u);
  EXPECT_EQ(h.stat(1, HbmStat::kLatSum), hit_lat + miss_lat + conflict_lat);
  expect_clean(h);
}

// ---------------------------------------------------------------------------------------------
// Write buffer: forwarding, merging, drain watermarks; starvation cap.
// ---------------------------------------------------------------------------------------------
TEST(HbmWriteBuffer, ReadAfterBufferedWriteIsForwardedAndWritesMerge) {
  HbmHarness h;
  HbmRefDriver d(h);
  std::mt19937_64 rng(9);
  const uint32_t a = 64 * 40;
  d.issue(true, a, rng);
  d.issue(true, a, rng);   // merges into the first
  d.issue(false, a, rng);  // forwarded from the buffer
  ASSERT_TRUE(h.drain(2000));
  EXPECT_EQ(d.errors(), 0u);
  const unsigned ch = hbm_decode(a, h.config().ctrl.addr_map).ch;
  EXPECT_EQ(h.stat(ch, HbmStat::kWrMerged), 1u);
  EXPECT_EQ(h.stat(ch, HbmStat::kRdForwarded), 1u);
  EXPECT_EQ(h.stat(ch, HbmStat::kWrBytes), 64u);  // one burst reached the device
  d.issue(false, a, rng);                         // now from the device
  ASSERT_TRUE(h.drain(2000));
  EXPECT_EQ(h.stat(ch, HbmStat::kRdBytes), 64u);
  EXPECT_EQ(d.errors(), 0u);
  expect_clean(h);
}

TEST(HbmWriteBuffer, WritesWaitForTheHighWatermarkWhileReadsFlow) {
  HbmConfig cfg;
  cfg.ctrl.wr_hi = 8;
  cfg.ctrl.wr_lo = 2;
  cfg.ctrl.starve_cap = 4000;
  HbmHarness h(cfg);
  HbmRefDriver d(h);
  std::mt19937_64 rng(4);
  // Channel 0 only; writes to bank group 1, reads to bank group 0.
  auto addr = [&](unsigned bg, unsigned col, unsigned row) {
    return hbm_encode({0, bg, 0, row, col}, cfg.ctrl.addr_map);
  };
  unsigned rcol = 0;
  auto feed_reads = [&](int cycles) {
    for (int i = 0; i < cycles; ++i) {
      if (h.pending() < 1) d.issue(false, addr(0, rcol++ % 32, 0), rng);
      h.tick();
    }
  };
  for (unsigned i = 0; i < cfg.ctrl.wr_hi - 1; ++i) d.issue(true, addr(1, i, 1), rng);
  feed_reads(600);
  EXPECT_EQ(h.stat(0, HbmStat::kWrBytes), 0u) << "writes went out below the high watermark";
  EXPECT_EQ(h.stat(0, HbmStat::kWrDrains), 0u);
  d.issue(true, addr(1, 20, 1), rng);
  feed_reads(300);
  EXPECT_EQ(h.stat(0, HbmStat::kWrDrains), 1u);
  // The drain stops at the low watermark: exactly wr_hi - wr_lo writes went out.
  EXPECT_EQ(h.stat(0, HbmStat::kWrBytes), 64u * (cfg.ctrl.wr_hi - cfg.ctrl.wr_lo));
  ASSERT_TRUE(h.drain(10000));  // the rest go when the reads stop
  EXPECT_EQ(h.stat(0, HbmStat::kWrBytes), 64u * cfg.ctrl.wr_hi);
  EXPECT_EQ(d.errors(), 0u);
  expect_clean(h);
}

TEST(HbmScheduler, StarvationCapBoundsTheWaitOfAConflictingRead) {
  for (uint32_t cap : {150u, 400u}) {
    SCOPED_TRACE(cap);
    HbmConfig cfg;
    cfg.ctrl.starve_cap = static_cast<uint16_t>(cap);
    HbmHarness h(cfg);
    HbmRefDriver d(h);
    std::mt19937_64 rng(8);
    const HbmAddrMap map = cfg.ctrl.addr_map;
    // Open row 0 of bank (0,0,0); then one read to row 1 of the same bank, and a steady stream
    // of row-0 hits behind it that FR-FCFS would otherwise always prefer.
    d.issue(false, hbm_encode({0, 0, 0, 0, 0}, map), rng);
    h.tick(60);
    unsigned col = 1;
    for (int i = 0; i < 3; ++i) d.issue(false, hbm_encode({0, 0, 0, 0, col++}, map), rng);
    d.issue(false, hbm_encode({0, 0, 0, 1, 0}, map), rng);
    const size_t victim = d.read_latencies().size();
    uint64_t victim_lat = 0;
    for (int i = 0; i < 3000 && d.read_latencies().size() <= victim + 400; ++i) {
      if (h.pending() < 2) d.issue(false, hbm_encode({0, 0, 0, 0, col++ % 32}, map), rng);
      h.tick();
    }
    ASSERT_TRUE(h.drain(5000));
    // The victim is the one read whose latency is far above the others.
    for (uint64_t l : d.read_latencies()) victim_lat = std::max(victim_lat, l);
    EXPECT_GE(victim_lat, cap) << "the conflicting read was not held back by the hits";
    EXPECT_LE(victim_lat, cap + 120) << "the starvation cap did not bound the wait";
    EXPECT_EQ(d.errors(), 0u);
    expect_clean(h);
  }
}

// ---------------------------------------------------------------------------------------------
// Statistics add up.
// ---------------------------------------------------------------------------------------------
TEST(HbmStats, CountersAreConsistent) {
  HbmHarness h;
  HbmRefDriver d(h);
  std::mt19937_64 rng(12);
  run_random(h, d, Footprint::kWide, 30, 6000, rng);
  uint64_t hist = 0;
  for (unsigned b = 0; b < kHbmLatBuckets; ++b)
    hist += h.stat_total(static_cast<HbmStat>(static_cast<unsigned>(HbmStat::kLatHist0) + b));
  const uint64_t rd_bursts = h.stat_total(HbmStat::kRdBytes) / 64;
  const uint64_t wr_bursts = h.stat_total(HbmStat::kWrBytes) / 64;
  EXPECT_EQ(hist, h.stat_total(HbmStat::kLatCount));
  EXPECT_EQ(h.stat_total(HbmStat::kLatCount), rd_bursts);
  EXPECT_EQ(rd_bursts + h.stat_total(HbmStat::kRdForwarded), h.stat_total(HbmStat::kRdReqs));
  EXPECT_EQ(wr_bursts + h.stat_total(HbmStat::kWrMerged), h.stat_total(HbmStat::kWrReqs));
  EXPECT_EQ(h.stat_total(HbmStat::kRowHits) + h.stat_total(HbmStat::kRowMisses) +
                h.stat_total(HbmStat::kRowConflicts),
            rd_bursts + wr_bursts);
  EXPECT_EQ(h.stat_total(HbmStat::kBusBusy), 2 * (rd_bursts + wr_bursts));
  EXPECT_GE(h.stat_total(HbmStat::kActs),
            h.stat_total(HbmStat::kRowMisses) + h.stat_total(HbmStat::kRowConflicts));
  EXPECT_GT(h.stat_total(HbmStat::kLatSum), 0u);
  EXPECT_STREQ(hbm_stat_name(HbmStat::kBusBusy), "bus_busy_cycles");
  EXPECT_EQ(d.errors(), 0u);
  expect_clean(h);
}

}  // namespace
}  // namespace tpu
