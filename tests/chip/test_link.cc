// The ICI link layer (docs/ici.md "Link layer", rtl/tpu_ici_link_tx.sv, tpu_ici_link_rx.sv):
// its CRC-32C against known vectors and an independent software CRC, on its own and on every word
// a pod's links carry; collectives bit-exact under bit errors, bursts and drops, with the
// counters to show it; a link that goes down ends the run with an error naming chip and link,
// never a hang; a forged control word makes an assertion fire.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "Vici_crc_tb_top.h"
#include "chip_dut.h"
#include "pod.h"
#include "pod_driver.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

// ---- An independent software CRC-32C (reflected 0x82F63B78, init and final XOR all ones) ----
uint32_t crc32c_bytes(const uint8_t* p, std::size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

// The same over a bit string taken LSB first (what the RTL defines for any width).
uint32_t crc32c_bits(const std::vector<bool>& bits) {
  uint32_t c = 0xFFFFFFFFu;
  for (bool b : bits) {
    const bool fb = ((c & 1u) != 0) != b;
    c = (c >> 1) ^ (fb ? 0x82F63B78u : 0u);
  }
  return ~c;
}

void push_bits(std::vector<bool>& v, uint64_t x, unsigned n) {
  for (unsigned i = 0; i < n; ++i) v.push_back(((x >> i) & 1u) != 0);
}

TEST(LinkCrc, SoftwareCrcGivesTheStandardCheckValues) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c_bytes(reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF);
  EXPECT_EQ(crc32c_bytes(zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(crc32c_bytes(ones.data(), 32), 0x62A8AB43u);
  std::vector<bool> bits;
  for (int i = 0; i < 9; ++i) push_bits(bits, static_cast<uint8_t>(s[i]), 8);
  EXPECT_EQ(crc32c_bits(bits), 0xE3069283u);
}

TEST(LinkCrc, RtlMatchesKnownVectorsAndSoftwareCrc) {
  Vici_crc_tb_top m;
  const char* s = "123456789";
  for (int w = 0; w < 3; ++w) m.d72_i[w] = 0;
  for (int i = 0; i < 9; ++i)
    m.d72_i[i / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(s[i])) << (8 * (i % 4));
  m.eval();
  EXPECT_EQ(m.crc72_o, 0xE3069283u);
  std::mt19937_64 rng(11);
  for (int n = 0; n < 2000; ++n) {
    std::vector<bool> bits;
    for (int w = 0; w < 5; ++w) {
      const uint32_t r = static_cast<uint32_t>(rng());
      const uint32_t x = w < 4 ? r : r & 0xFFFu;
      m.d140_i[w] = x;
      push_bits(bits, x, w < 4 ? 32 : 12);
    }
    if (n == 0)
      for (int w = 0; w < 5; ++w) m.d140_i[w] = 0;  // all zero once
    if (n == 0) bits.assign(140, false);
    m.eval();
    ASSERT_EQ(m.crc140_o, crc32c_bits(bits)) << "vector " << n;
  }
}

// The bits a flit word's CRC covers, LSB first: {seq, vc, head, tail, row} (docs/ici.md).
uint32_t flit_word_crc(const uint32_t* w, unsigned vc, unsigned row_words) {
  std::vector<bool> bits;
  for (unsigned i = 0; i < row_words; ++i) push_bits(bits, w[i], 32);
  push_bits(bits, w[row_words] & 3u, 2);  // tail, head
  push_bits(bits, vc, 2);
  push_bits(bits, (w[row_words] >> 8) & 0xFFu, 8);  // seq
  return crc32c_bits(bits);
}

uint32_t ctl_word_crc(uint32_t payload) {
  std::vector<bool> bits;
  push_bits(bits, payload, ChipDut::kIciCtlBits);
  return crc32c_bits(bits);
}

PodParams params(Topology topo) {
  PodParams p;
  p.topo = std::move(topo);
  p.variant = "4x4";
  p.link_latency = 2;
  return p;
}

CollectiveSpec allreduce(std::size_t n) {
  CollectiveSpec s;
  s.collective = Collective::kAllReduce;
  s.algorithm = "torus";
  s.n = n;
  return s;
}

std::vector<std::vector<uint32_t>> inputs(int chips, std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(static_cast<std::size_t>(chips));
  for (auto& v : in)
    for (std::size_t i = 0; i < n; ++i) v.push_back(f32_bits(nd(rng)));
  return in;
}

// Every word that arrives on every link of a 2x2 all-reduce carries the CRC-32C of its fields.
TEST(LinkCrc, EveryWordOnThePodsLinksCarriesItsCrc) {
  CppPodHost host(params(Topology::torus({2, 2})));
  PodCore& core = host.core();
  const unsigned row_words = core.flit_words() - 2;
  uint64_t flits = 0, ctls = 0, bad = 0;
  host.progress_every = 1;
  host.progress = [&](uint64_t) {
    const uint64_t t = core.cycle();
    for (int c = 0; c < core.num_chips(); ++c)
      for (int d = 0; d < 6; ++d) {
        const IciLink* l = core.link(c, d);
        if (!l) continue;
        unsigned vc = 0;
        const uint32_t* w = nullptr;
        if (l->flit_at(t, &vc, &w)) {
          ++flits;
          bad += flit_word_crc(w, vc, row_words) != w[row_words + 1];
        }
        const uint32_t* k = nullptr;
        if (l->ctl_at(t, &k)) {
          ++ctls;
          bad += (k[0] >> ChipDut::kIciCtlBits) != 0 || ctl_word_crc(k[0]) != k[1];
        }
      }
  };
  const auto in = inputs(4, 2048, 5);
  const PodCollectiveRun r = PodDriver(host).run(allreduce(2048), in, PodCollectiveOptions{});
  EXPECT_EQ(r.out, golden_collective(r.rounds, in));
  EXPECT_GT(flits, 100u);
  EXPECT_GT(ctls, 100u);
  EXPECT_EQ(bad, 0u);
}

struct FaultRun {
  PodCollectiveRun run;
  std::vector<LinkStat> links;
  uint64_t crc = 0, replays = 0, replayed = 0, down = 0, flits = 0;
  uint64_t injected_words = 0, dropped_words = 0;
  uint64_t uncredited = 0;
  bool idle = false;
};

FaultRun run_with(const FaultConfig& f, std::size_t n, unsigned latency = 2, unsigned width = 0) {
  PodParams p = params(Topology::torus({2, 2}));
  p.faults = f;
  p.link_latency = latency;
  p.link_width = width;
  CppPodHost host(p);
  const auto in = inputs(4, n, 7);
  FaultRun r;
  r.run = PodDriver(host).run(allreduce(n), in, PodCollectiveOptions{});
  EXPECT_EQ(r.run.out, golden_collective(r.run.rounds, in)) << "not bit-exact";
  r.links = host.link_stats();
  for (const LinkStat& l : r.links) {
    r.crc += l.crc_errors;
    r.replays += l.replays;
    r.replayed += l.replayed_flits;
    r.down += l.link_down;
    r.flits += l.flits;
    const IciLink* k = host.core().link(l.chip, l.dir);
    r.injected_words += k->flit_faults().corrupted + k->ctl_faults().corrupted;
    r.dropped_words += k->flit_faults().dropped + k->ctl_faults().dropped;
  }
  r.uncredited = host.core().uncredited_flits();
  r.idle = host.core().idle();
  return r;
}

// No faults: no error, no replay; with bit errors, the same bits, more cycles and counters that
// say why: every corrupted flit word was caught (the CRC), every replay resent flits.
TEST(LinkFaults, BitErrorsAreRetransmittedAndTheResultStaysBitExact) {
  const FaultRun clean = run_with(FaultConfig{}, 4096);
  EXPECT_EQ(clean.crc, 0u);
  EXPECT_EQ(clean.replays, 0u);
  EXPECT_EQ(clean.replayed, 0u);
  FaultConfig f;
  f.seed = 3;
  // Per bit: about 16% of the 172-bit flit words of a 4x4 chip. At 1e-4 (about 100 replays) the
  // cost hides in the schedule's slack, and a delayed flit can even let the chips' in-order
  // queues run better (seeds 1..5: 2305..2367 cycles against 2360 clean); at 1e-3 every seed
  // costs 69..195 cycles.
  f.link_bit_error_rate = 1e-3;
  const FaultRun bad = run_with(f, 4096);
  EXPECT_GT(bad.injected_words, 0u);
  EXPECT_GT(bad.crc, 0u);
  EXPECT_EQ(bad.crc, bad.injected_words) << "every corrupted word is caught (and only those)";
  EXPECT_GT(bad.replays, 0u);
  EXPECT_GE(bad.replayed, bad.replays);
  EXPECT_EQ(bad.down, 0u);
  EXPECT_GT(bad.run.collective_cycles, clean.run.collective_cycles);
  EXPECT_EQ(bad.flits, clean.flits + bad.replayed);
  EXPECT_EQ(bad.uncredited, 0u) << "credits conserved";
  EXPECT_TRUE(bad.idle);
  // Reproducible: the same seed gives the same cycles and counters.
  const FaultRun again = run_with(f, 4096);
  EXPECT_EQ(again.run.collective_cycles, bad.run.collective_cycles);
  EXPECT_EQ(again.crc, bad.crc);
  EXPECT_EQ(again.replayed, bad.replayed);
}

// Words that vanish (flits and control words: lost ACKs, NAKs, credits) and bursts that corrupt
// several words in a row, on links of latency 1 and of 3 with a link 4 cycles per flit.
TEST(LinkFaults, DropsAndBurstsAreRecovered) {
  FaultConfig f;
  f.seed = 9;
  f.link_drop_rate = 0.01;
  f.link_burst_rate = 0.003;
  for (const auto& [lat, width] : {std::pair<unsigned, unsigned>{1, 0}, {3, 4}}) {
    const FaultRun r = run_with(f, 4096, lat, width);
    EXPECT_GT(r.dropped_words, 0u) << "latency " << lat;
    EXPECT_GT(r.injected_words, 0u) << "latency " << lat;
    EXPECT_GT(r.replays, 0u) << "latency " << lat;
    EXPECT_EQ(r.down, 0u) << "latency " << lat;
    EXPECT_EQ(r.uncredited, 0u) << "latency " << lat;
    EXPECT_TRUE(r.idle);
  }
}

// A link that stops carrying anything in the middle of an all-reduce: the sender's replays time
// out, 8 in a row, the link is declared down, the chip's error register says so and the run
// ends with a ChipError naming the chip and the link, long before the watchdog.
TEST(LinkFaults, ALinkDownIsAnErrorNamingChipAndLinkNotAHang) {
  // The busiest link of a clean run (inputs by the backdoor: the collective starts at once),
  // taken down half-way through it.
  PodParams p = params(Topology::torus({2, 2}));
  p.watchdog_cycles = 100000;
  PodCollectiveOptions o;
  o.backdoor = true;
  const auto in = inputs(4, 8192, 7);
  LinkStat busiest;
  uint64_t clean_cycles = 0;
  {
    CppPodHost host(p);
    clean_cycles = PodDriver(host).run(allreduce(8192), in, o).collective_cycles;
    for (const LinkStat& l : host.link_stats())
      if (l.flits > busiest.flits) busiest = l;
  }
  ASSERT_GT(busiest.flits, 0u);
  const uint64_t down_at = clean_cycles / 2;
  p.faults.link_down.push_back(LinkDown{busiest.chip, busiest.dir, down_at});
  CppPodHost faulty(p);
  try {
    PodDriver(faulty).run(allreduce(8192), in, o);
    FAIL() << "no error";
  } catch (const ChipError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), static_cast<unsigned>(ChipErr::kIciLinkDown));
    EXPECT_EQ(e.chip(), busiest.chip);
    const std::string want =
        chip_name(p.topo, busiest.chip) + ": ICI link " + link_dir_name(busiest.dir) + " to ";
    EXPECT_NE(m.find(want), std::string::npos) << m;
    EXPECT_NE(m.find("is down"), std::string::npos) << m;
    EXPECT_NE(m.find("ici_link_down"), std::string::npos) << m;
    // 9 time-outs of 2L + gap + 8 = 13 cycles, plus the flits in flight: well under 1000.
    EXPECT_LT(faulty.cycle(), down_at + 1000) << "not within the link layer's bound";
    EXPECT_EQ(faulty.core().link_counter(busiest.chip, busiest.dir, kLinkStDown), 1u);
  }
}

// A head flit carries only its 8-byte header, so it takes ceil(8 / width) cycles of a link,
// not a row's: chip 0 sends `packets` one-row packets back to back to chip 1 over its +X link
// (one send context, the tie hint +) and chip 1 waits for all of them. In steady state each
// packet costs its head's cycles plus its row's, so 32 more packets take exactly 32 x that
// longer: 16x16 chips on 16-byte links 1 + 4 cycles (a whole flit per head would be 4 + 4), 4x4
// chips on 4-byte links 2 + 4.
uint64_t one_row_packets(const std::string& variant, unsigned width, uint32_t packets) {
  PodParams p = params(Topology::torus({2}));
  p.variant = variant;
  p.link_width = width;
  CppPodHost host(p);
  PodDriver drv(host);
  std::vector<std::vector<ChipCmd>> progs(2);
  for (uint32_t i = 0; i < packets; ++i) {
    progs[0].push_back(cmd_ici_send(Mem::kVmem, i, 1, {1, 0, 0}, Mem::kVmem, 256 + i, 0, +1));
  }
  progs[0].push_back(cmd_halt());
  progs[1] = {cmd_ici_wait(0, packets), cmd_halt()};
  const PodProgramRun r = drv.run_programs(progs);
  EXPECT_EQ(r.link_flits.empty(), false);
  uint64_t plus_x = 0;
  for (const LinkStat& l : r.link_flits) {
    if (l.chip == 0 && l.dir == 0) plus_x = l.flits;
  }
  EXPECT_EQ(plus_x, 2u * packets) << variant << ": a head and a row per packet, all on +X";
  return r.run.chip_cycles[1];
}

TEST(LinkTiming, AHeadFlitTakesItsHeaderBytesOfTheLink) {
  for (const auto& [variant, width, per_packet] :
       {std::tuple<const char*, unsigned, uint64_t>{"16x16", 16, 1 + 4}, {"4x4", 4, 2 + 4}}) {
    const uint64_t a = one_row_packets(variant, width, 32);
    const uint64_t b = one_row_packets(variant, width, 64);
    EXPECT_EQ(b - a, 32 * per_packet) << variant << " on " << width << "-byte links";
  }
}

// A bad link_down entry (a chip or a direction that has no link) is refused up front.
TEST(LinkFaults, LinkDownOfAMissingLinkIsRefused) {
  PodParams p = params(Topology::torus({2, 2}));
  p.faults.link_down.push_back(LinkDown{0, 4, 10});  // +Z on a 2D torus
  EXPECT_THROW(CppPodHost h(p), std::invalid_argument);
  p.faults.link_down = {LinkDown{7, 0, 10}};
  EXPECT_THROW(CppPodHost h(p), std::invalid_argument);
}

// The control word's layout: {ack[7:0], nak, cnt[3..0][4:0]}, 29 bits.
uint32_t ctl_payload(unsigned ack, bool nak, unsigned cnt0 = 0) {
  return (ack & 0xFFu) << 21 | (nak ? 1u : 0u) << 20 | (cnt0 & 31u);
}

// A control word with a good CRC that acknowledges flits never sent makes AckInRange_A fire;
// the same word with a bad CRC is dropped and counted.
TEST(LinkSva, ForgedAckFiresAnAssertionBadCrcIsCounted) {
  {
    auto d = make_chip("4x4");
    const uint32_t bad[2] = {ctl_payload(5, false), ctl_word_crc(ctl_payload(5, false)) ^ 1u};
    d->set_ici_tx_ctl(0, true, bad);
    d->eval();
    EXPECT_NO_THROW(d->tick());
    d->set_ici_tx_ctl(0, false, nullptr);
    d->eval();
    d->tick();
    EXPECT_EQ(d->ici_link_stat(0, kLinkStCtlErr), 1u);
    EXPECT_EQ(d->ici_link_stat(1, kLinkStCtlErr), 0u);
  }
  auto d = make_chip("4x4");
  const uint32_t forged[2] = {ctl_payload(5, false), ctl_word_crc(ctl_payload(5, false))};
  d->set_ici_tx_ctl(0, true, forged);
  d->eval();
  EXPECT_THROW(d->tick(), ChipRtlError);
}

}  // namespace
}  // namespace tpu
