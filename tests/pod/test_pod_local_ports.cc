// The chip's router has two local ports (docs/ici.md "Second local port", docs/chip.md): the ICI
// engine's +X +Y +Z send contexts inject on the first, its -X -Y -Z contexts on the second, and
// packets eject on the second when they arrive on a - link (-X -Y -Z). So the two links of a
// dimension carry rows in and out at once, each at a row a cycle: with one local port the 2R
// rows of two R-row transfers need at least 2R cycles. On a 3x3x3 torus of 4x4 chips, links a
// row wide (a row a cycle): the transfers take well under 2R cycles and land bit-exact. A
// count_only ICI_SEND (a token) adds 1 to the destination's counter and writes no row. A
// forwarding send with early_head sends its head before its rows come (23 cycles around a ring
// of 3 against 25). And a forwarding send lets later readers of its rows go once they have
// landed, not when it is done.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "pod.h"

namespace tpu {
namespace {

constexpr uint32_t kRows = 256;        // rows per transfer
constexpr uint32_t kSrcRow = 0, kDstRow = 1000;
constexpr uint64_t kSrcAddr = 0, kDstAddr = 0x40000;

PodParams params() {
  PodParams p;
  p.topo = Topology::torus({3, 3, 3});
  p.variant = "4x4";
  p.link_latency = 1;
  return p;  // link_width 0: a whole row a cycle
}

struct Transfer {
  int src, dst;
  uint32_t counter;
};

// Each transfer: `src` DMAs kRows random rows into VMEM (before the clock starts), sends them to
// `dst` (rows kDstRow..), which waits for them on `counter`. Returns the cycles from the sends
// to the last wait; then checks the rows, DMAd back out, bit for bit.
uint64_t run(const std::vector<Transfer>& ts) {
  CppPodHost host(params());
  const uint32_t row_bytes = host.core().shape().cols * 4;
  const uint32_t seg_bytes = 4 * row_bytes;
  const uint32_t segs = kRows / 4;
  const std::size_t n = std::size_t{kRows} * row_bytes;
  std::vector<std::vector<uint8_t>> in(ts.size(), std::vector<uint8_t>(n));
  // Transfer i: its rows at src_row(i) and dst_row(i), its HBM bytes at src_addr(i), dst_addr(i).
  const auto src_row = [](std::size_t i) { return kSrcRow + static_cast<uint32_t>(i) * kRows; };
  const auto dst_row = [](std::size_t i) { return kDstRow + static_cast<uint32_t>(i) * kRows; };
  const auto src_addr = [n](std::size_t i) { return static_cast<uint32_t>(kSrcAddr + i * n); };
  const auto dst_addr = [n](std::size_t i) { return static_cast<uint32_t>(kDstAddr + i * n); };
  const auto dma = [&](int chip, DmaDir dir, uint32_t row, uint32_t addr) {
    host.push(chip, {cmd_dma(dir, false, row, segs, seg_bytes, addr, seg_bytes)});
  };
  std::mt19937 rng(77);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    for (auto& b : in[i]) b = static_cast<uint8_t>(rng());
    host.backdoor_write(ts[i].src, src_addr(i), in[i].data(), n);
  }
  for (std::size_t i = 0; i < ts.size(); ++i)
    dma(ts[i].src, DmaDir::kHbmToVmem, src_row(i), src_addr(i));
  host.run_until_idle();
  const uint64_t start = host.cycle();
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const PodCoord c = params().topo.coord(ts[i].dst);
    host.push(ts[i].src, {cmd_ici_send(Mem::kVmem, src_row(i), kRows, {c[0], c[1], c[2]},
                                       Mem::kVmem, dst_row(i), ts[i].counter)});
    host.push(ts[i].dst, {cmd_ici_wait(ts[i].counter, kRows)});
  }
  host.run_until_idle();
  const uint64_t cycles = host.cycle() - start;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    dma(ts[i].dst, DmaDir::kVmemToHbm, dst_row(i), dst_addr(i));
    host.run_until_idle();
    std::vector<uint8_t> out(n);
    host.backdoor_read(ts[i].dst, dst_addr(i), out.data(), n);
    EXPECT_EQ(std::memcmp(in[i].data(), out.data(), n), 0) << "transfer " << i;
  }
  for (int c = 0; c < host.num_chips(); ++c) EXPECT_EQ(host.status(c).err, 0u) << "chip " << c;
  return cycles;
}

// Chips 1 = (1,0,0) and 2 = (2,0,0) both send to chip 0: rows arrive on its +X and -X links,
// which eject on different local ports.
TEST(PodLocalPorts, AChipTakesRowsFromBothLinksOfADimensionAtOnce) {
  const uint64_t one = run({{1, 0, 3}});
  const uint64_t two = run({{1, 0, 3}, {2, 0, 4}});
  EXPECT_LT(two, kRows + kRows / 4) << "one transfer " << one;
  EXPECT_LE(two, one + 8);
}

// Chip 0 sends to chips 1 and 2: its +X and -X send contexts inject on the two local ports.
TEST(PodLocalPorts, AChipSendsOnBothLinksOfADimensionAtOnce) {
  const uint64_t one = run({{0, 1, 3}});
  const uint64_t two = run({{0, 1, 3}, {0, 2, 4}});
  EXPECT_LT(two, kRows + kRows / 4) << "one transfer " << one;
  EXPECT_LE(two, one + 8);
}

// Chips 9 = (0,0,1) and 18 = (0,0,2) send to chip 0 too: its +Z and -Z links, the same.
TEST(PodLocalPorts, AChipTakesRowsFromBothZLinksAtOnce) {
  const uint64_t two = run({{9, 0, 3}, {18, 0, 4}});
  EXPECT_LT(two, kRows + kRows / 4);
}

// The + links share the first local port: two transfers arriving on +X and +Y (from chips 1 and
// 3 = (0,1,0)) take twice one's rows.
TEST(PodLocalPorts, ThePlusLinksShareTheFirstPort) {
  const uint64_t two = run({{1, 0, 3}, {3, 0, 4}});
  EXPECT_GE(two, 2 * kRows);
}

// A token (count_only) from chip 1 to chip 0: chip 0's wait passes, one flit crossed the link,
// and the destination row it names is not written.
TEST(PodLocalPorts, ACountOnlySendAddsOneAndWritesNothing) {
  CppPodHost host(params());
  const uint32_t row_bytes = host.core().shape().cols * 4;
  std::vector<uint8_t> before(4 * row_bytes), after(4 * row_bytes, 0);
  for (std::size_t i = 0; i < before.size(); ++i) before[i] = static_cast<uint8_t>(i * 7 + 1);
  host.backdoor_write(0, kSrcAddr, before.data(), before.size());
  host.push(0, {cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 4 * row_bytes, kSrcAddr, 4 * row_bytes)});
  host.run_until_idle();
  uint64_t flits_before = 0;
  for (const LinkStat& l : host.link_stats()) flits_before += l.flits;
  host.push(1, {cmd_ici_count(Mem::kVmem, 0, {0, 0, 0}, 6)});
  host.push(0, {cmd_ici_wait(6, 1),
                cmd_dma(DmaDir::kVmemToHbm, false, 0, 1, 4 * row_bytes, kDstAddr, 4 * row_bytes)});
  host.run_until_idle(5000);
  uint64_t flits = 0;
  for (const LinkStat& l : host.link_stats()) flits += l.flits;
  EXPECT_EQ(flits - flits_before, 1u);
  host.backdoor_read(0, kDstAddr, after.data(), after.size());
  EXPECT_EQ(before, after);
  for (int c = 0; c < host.num_chips(); ++c) EXPECT_EQ(host.status(c).err, 0u) << "chip " << c;
}

// Four rows forwarded around the ring of 3 along x: chip 0 sends them to chip 1, which forwards
// them (wait_rows) to chip 2, which forwards them to chip 0. With early_head the forwarding
// sends' heads go before the rows come, so each forward saves at least the head's cycle; the
// rows land bit-exact either way.
uint64_t forward_ring(bool early) {
  CppPodHost host(params());
  const uint32_t rows = 4, bytes = rows * host.core().shape().cols * 4;
  std::vector<uint8_t> in(bytes), out(bytes, 0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 13 + 5);
  host.backdoor_write(0, kSrcAddr, in.data(), in.size());
  host.push(0, {cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, bytes, kSrcAddr, bytes)});
  host.run_until_idle();
  const auto fwd = [&](uint32_t from_counter, int to, uint32_t counter) {
    CmdIciSend c = CmdIciSend::decode(cmd_ici_send(Mem::kVmem, 10, rows, {to, 0, 0}, Mem::kVmem,
                                                   10, counter, 0, static_cast<int>(from_counter)));
    c.early_head = early ? 1u : 0u;
    return c.encode();
  };
  const uint64_t start = host.cycle();
  host.push(1, {fwd(3, 2, 4)});
  host.push(2, {fwd(4, 0, 5)});
  host.push(0, {cmd_ici_send(Mem::kVmem, 0, rows, {1, 0, 0}, Mem::kVmem, 10, 3),
                cmd_ici_wait(5, rows)});
  host.run_until_idle(5000);
  const uint64_t cycles = host.cycle() - start;
  host.push(0, {cmd_dma(DmaDir::kVmemToHbm, false, 10, 1, bytes, kDstAddr, bytes)});
  host.run_until_idle();
  host.backdoor_read(0, kDstAddr, out.data(), out.size());
  EXPECT_EQ(in, out) << (early ? "early heads" : "heads with their rows");
  for (int c = 0; c < host.num_chips(); ++c) EXPECT_EQ(host.status(c).err, 0u) << "chip " << c;
  return cycles;
}

TEST(PodLocalPorts, EarlyHeadsSaveACycleOnEachForward) {
  const uint64_t late = forward_ring(false);
  const uint64_t early = forward_ring(true);
  EXPECT_LE(early + 2, late) << "early " << early << ", late " << late;
}

// Chip 0 sends 32 rows to chip 1, which forwards them (wait_rows) to chip 2 behind a 64-row send
// on the same link (one send context), then stores them to HBM. The links carry a quarter row a
// cycle, so the rows have landed long before the forward starts. The store waits for them to
// land, not for the forward to be done: it is done before the forward is. Bits: chip 1's
// store and chip 2's rows are chip 0's.
TEST(PodLocalPorts, AStoreOfForwardedRowsGoesOnceTheyLand) {
  PodParams p = params();
  p.link_width = 4;
  CppPodHost host(p);
  const uint32_t row_bytes = host.core().shape().cols * 4;
  const uint32_t rows = 32, long_rows = 64;
  const uint32_t bytes = rows * row_bytes, long_bytes = long_rows * row_bytes;
  std::vector<uint8_t> in(bytes), filler(long_bytes, 0x5a);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 29 + 3);
  host.backdoor_write(0, kSrcAddr, in.data(), in.size());
  host.backdoor_write(1, kSrcAddr, filler.data(), filler.size());
  host.push(0, {cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, bytes, kSrcAddr, bytes)});
  host.push(1, {cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, long_bytes, kSrcAddr, long_bytes)});
  host.run_until_idle();
  TraceOptions on;
  on.enabled = true;
  host.set_trace(on);
  host.push(0, {cmd_ici_send(Mem::kVmem, 0, rows, {1, 0, 0}, Mem::kVmem, 100, 3)});
  host.push(1, {cmd_ici_send(Mem::kVmem, 0, long_rows, {2, 0, 0}, Mem::kVmem, 300, 5),
                cmd_ici_send(Mem::kVmem, 100, rows, {2, 0, 0}, Mem::kVmem, 100, 4, 0, 3),
                cmd_dma(DmaDir::kVmemToHbm, false, 100, 1, bytes, kDstAddr, bytes)});
  host.push(2, {cmd_ici_wait(5, long_rows), cmd_ici_wait(4, rows),
                cmd_dma(DmaDir::kVmemToHbm, false, 100, 1, bytes, kDstAddr, bytes)});
  host.run_until_idle(20000);
  uint64_t fwd_done = 0, store_issue = 0, store_done = 0, long_done = 0;
  for (const TraceEvent& e : host.take_trace()) {
    if (e.chip != 1) continue;
    if (e.unit == TraceUnit::kIciSend && e.index == 1) long_done = e.done;
    if (e.unit == TraceUnit::kIciSend && e.index == 2) fwd_done = e.done;
    if (e.unit == TraceUnit::kDma && e.index == 3) store_issue = e.issue, store_done = e.done;
  }
  ASSERT_GT(fwd_done, 0u);
  ASSERT_GT(store_done, 0u);
  // The forward runs after the long send (4 cycles a row each); the store starts as it starts.
  EXPECT_GE(fwd_done, long_done + 4 * rows);
  EXPECT_LE(store_issue, long_done + 4);
  EXPECT_LT(store_done, fwd_done);
  std::vector<uint8_t> out1(bytes), out2(bytes);
  host.backdoor_read(1, kDstAddr, out1.data(), bytes);
  host.backdoor_read(2, kDstAddr, out2.data(), bytes);
  EXPECT_EQ(in, out1);
  EXPECT_EQ(in, out2);
  for (int c = 0; c < host.num_chips(); ++c) EXPECT_EQ(host.status(c).err, 0u) << "chip " << c;
}

}  // namespace
}  // namespace tpu
