// ICI_SEND's tie hint (docs/isa.md flags[3:2], docs/ici.md "Routing"): on a ring of k chips a
// destination at distance k/2 is a tie, and on a 2-ring every hop is one, so without a hint every
// send to the neighbour takes the link the parity rule picks and the other link sits idle. These
// tests send from chip 0 with hint +1, -1 and none on a 2-ring, a 2x2 torus and a 4-ring, and
// check which links carried the flits (PodCore's per-link counters), that the data lands
// bit-exact, that every router on the path routes by the hint carried in the header (a diagonal
// send turns at chip 1), that a hint changes nothing but ties, and that splitting one transfer
// over both links of a 2-ring runs it in about half the time when the links are the bottleneck.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "pod.h"

namespace tpu {
namespace {

constexpr int kXp = 0, kXm = 1, kYp = 2, kYm = 3;  // LinkStat::dir
constexpr uint64_t kSrcAddr = 0, kDstAddr = 0x10000;
constexpr uint32_t kSrcRow = 0, kDstRow = 200, kCounter = 5;

PodParams params(Topology topo, unsigned link_width = 0) {
  PodParams p;
  p.topo = std::move(topo);
  p.variant = "4x4";
  p.link_latency = 1;
  p.link_width = link_width;
  return p;
}

struct SendResult {
  std::map<std::pair<int, int>, uint64_t> flits;  // (chip, dir) -> flits sent on that link
  uint64_t cycles = 0;                            // ICI_SEND .. data back in HBM
  bool data_ok = false;
};

// Chip 0 DMAs `rows` random rows into VMEM and sends them to chip `dst` in pieces, piece i with
// hint tie_dirs[i]; chip `dst` waits for them all on one counter and DMAs them out to HBM.
SendResult send(const PodParams& p, int dst, uint32_t rows, const std::vector<int>& tie_dirs) {
  CppPodHost host(p);
  const uint32_t row_bytes = host.core().shape().cols * 4;
  const uint32_t seg_bytes = 4 * row_bytes;  // a multiple of the 64-byte burst for 16-byte rows
  EXPECT_EQ(seg_bytes % 64, 0u);
  EXPECT_EQ(rows % 4, 0u);
  const uint32_t segs = rows / 4;
  const std::size_t n = std::size_t{rows} * row_bytes;

  std::vector<uint8_t> in(n), out(n, 0xEE);
  std::mt19937 rng(1234 + dst * 7 + static_cast<int>(rows));
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  host.backdoor_write(0, kSrcAddr, in.data(), n);
  host.backdoor_write(dst, kDstAddr, out.data(), n);

  const PodCoord c = p.topo.coord(dst);
  const std::array<int, 3> coord{c[0], c[1], c[2]};
  host.push(0, {cmd_dma(DmaDir::kHbmToVmem, false, kSrcRow, segs, seg_bytes, kSrcAddr, seg_bytes)});
  host.run_until_idle();
  const uint64_t start = host.cycle();

  std::vector<ChipCmd> sends;
  const uint32_t piece = rows / static_cast<uint32_t>(tie_dirs.size());
  for (std::size_t i = 0; i < tie_dirs.size(); ++i) {
    const uint32_t off = static_cast<uint32_t>(i) * piece;
    sends.push_back(cmd_ici_send(Mem::kVmem, kSrcRow + off, piece, coord, Mem::kVmem, kDstRow + off,
                                 kCounter, tie_dirs[i]));
  }
  host.push(0, sends);
  host.push(dst, {cmd_ici_wait(kCounter, rows), cmd_dma(DmaDir::kVmemToHbm, false, kDstRow, segs,
                                                        seg_bytes, kDstAddr, seg_bytes)});
  host.run_until_idle();

  SendResult r;
  r.cycles = host.cycle() - start;
  host.backdoor_read(dst, kDstAddr, out.data(), n);
  r.data_ok = std::memcmp(in.data(), out.data(), n) == 0;
  for (const LinkStat& l : host.link_stats()) r.flits[{l.chip, l.dir}] = l.flits;
  for (int i = 0; i < host.num_chips(); ++i) {
    EXPECT_EQ(host.status(i).err, 0u) << "chip " << i;
  }
  return r;
}

// Every link carried `want` flits ((chip, dir) -> flits), every other link none.
void expect_links(const SendResult& r, const std::map<std::pair<int, int>, uint64_t>& want) {
  for (const auto& [link, flits] : r.flits) {
    const auto it = want.find(link);
    EXPECT_EQ(flits, it == want.end() ? 0u : it->second)
        << "chip " << link.first << " dir " << link.second;
  }
  for (const auto& [link, flits] : want) {
    EXPECT_TRUE(r.flits.count(link)) << "no link chip " << link.first << " dir " << link.second;
  }
}

struct PodCase {
  const char* name;
  Topology topo;
};

const std::vector<PodCase>& pods() {
  static const std::vector<PodCase> v = {{"Ring2", Topology::torus({2})},
                                         {"Torus2x2", Topology::torus({2, 2})}};
  return v;
}

std::string tie_name(int tie) { return tie > 0 ? "Plus" : tie < 0 ? "Minus" : "NoHint"; }

class PodTieHint : public ::testing::TestWithParam<std::tuple<std::size_t, int>> {};

// Chip 0 -> chip 1 ((1, 0, 0): one hop, a tie in X): hint +1 leaves on +X, -1 on -X, no hint
// by parity (x = 1 is odd: -X, as before the hint existed); one packet: a head and 8 rows.
TEST_P(PodTieHint, NeighbourSendLeavesOnTheHintedLink) {
  const auto [pod, tie] = GetParam();
  const SendResult r = send(params(pods()[pod].topo), 1, 8, {tie});
  EXPECT_TRUE(r.data_ok);
  expect_links(r, {{{0, tie > 0 ? kXp : kXm}, 9}});
}

INSTANTIATE_TEST_SUITE_P(Pods, PodTieHint,
                         ::testing::Combine(::testing::Range<std::size_t>(0, 2),
                                            ::testing::Values(1, -1, 0)),
                         [](const ::testing::TestParamInfo<std::tuple<std::size_t, int>>& i) {
                           return std::string(pods()[std::get<0>(i.param)].name) + "_" +
                                  tie_name(std::get<1>(i.param));
                         });

class PodTieHintDiagonal : public ::testing::TestWithParam<int> {};

// Chip 0 (0,0) -> chip 3 (1,1) on the 2x2 torus: X then Y, a tie in both. The Y hop is routed by
// chip 1's router from the header, so +1 goes +X then +Y, -1 goes -X then -Y, none by parity
// (both coordinates odd: -X, -Y).
TEST_P(PodTieHintDiagonal, TurnsTheHintedWayAtEveryRouter) {
  const int tie = GetParam();
  const SendResult r = send(params(Topology::torus({2, 2})), 3, 8, {tie});
  EXPECT_TRUE(r.data_ok);
  expect_links(r, {{{0, tie > 0 ? kXp : kXm}, 9}, {{1, tie > 0 ? kYp : kYm}, 9}});
}

INSTANTIATE_TEST_SUITE_P(Torus2x2, PodTieHintDiagonal, ::testing::Values(1, -1, 0),
                         [](const ::testing::TestParamInfo<int>& i) { return tie_name(i.param); });

class PodTieHintRing4 : public ::testing::TestWithParam<int> {};

// A 4-ring: chip 0 -> chip 2 is a tie (distance 2) over two hops, the second routed by chip 1
// (going +) or chip 3 (going -, across the dateline 0 -> 3): +1 via chip 1, -1 via chip 3, none
// by parity (x = 2 even: +). Chip 0 -> chip 1 is no tie: every hint goes the short way, +X.
TEST_P(PodTieHintRing4, OnlyTiesFollowTheHint) {
  const int tie = GetParam();
  const PodParams p = params(Topology::torus({4}));
  const SendResult far = send(p, 2, 8, {tie});
  EXPECT_TRUE(far.data_ok);
  if (tie >= 0) {
    expect_links(far, {{{0, kXp}, 9}, {{1, kXp}, 9}});
  } else {
    expect_links(far, {{{0, kXm}, 9}, {{3, kXm}, 9}});
  }
  const SendResult near = send(p, 1, 8, {tie});
  EXPECT_TRUE(near.data_ok);
  expect_links(near, {{{0, kXp}, 9}});
}

INSTANTIATE_TEST_SUITE_P(Ring4, PodTieHintRing4, ::testing::Values(1, -1, 0),
                         [](const ::testing::TestParamInfo<int>& i) { return tie_name(i.param); });

// The point of the hint: one 64-row transfer to the neighbour of a 2-ring, split in two halves
// hinted +1 and -1, uses both links (33 flits each: a head and 32 rows); with 4-byte links (4
// cycles per 16-byte row) the links are the bottleneck and the split send takes about half the
// cycles of the same transfer in two unhinted halves (both on -X).
TEST(PodTieHintBandwidth, BothLinksOfATwoRingCarryHalfEach) {
  const PodParams p = params(Topology::torus({2}), 4);
  const SendResult split = send(p, 1, 64, {1, -1});
  const SendResult one = send(p, 1, 64, {0, 0});
  EXPECT_TRUE(split.data_ok);
  EXPECT_TRUE(one.data_ok);
  expect_links(split, {{{0, kXp}, 33}, {{0, kXm}, 33}});
  expect_links(one, {{{0, kXm}, 66}});
  EXPECT_LT(split.cycles * 10, one.cycles * 6) << split.cycles << " vs " << one.cycles;
  RecordProperty("cycles_split", std::to_string(split.cycles));
  RecordProperty("cycles_one_link", std::to_string(one.cycles));
  std::printf(
      "64 rows chip 0 -> 1 on a 2-ring, 4-byte links: %llu cycles on both links, %llu on "
      "one\n",
      static_cast<unsigned long long>(split.cycles), static_cast<unsigned long long>(one.cycles));
}

}  // namespace
}  // namespace tpu
