// The whole chip through the driver: HBM integrity over the host port, DMA round trips, matmul
// end to end (bit-exact against model/), concurrency, dependencies, errors, waves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "chip_driver.h"
#include "lone_chip.h"
#include "chip_dut.h"
#include "chip_test_util.h"
#include "tpu/bf16.h"
#include "tpu/vector.h"
#include "wave_check.h"

namespace tpu {
namespace {

// The chip variants among `wanted` this build has (TPU_CHIP_VARIANTS), in order.
std::vector<std::string> built_among(std::initializer_list<const char*> wanted) {
  const auto built = built_chip_variants();
  std::vector<std::string> v;
  for (const char* w : wanted)
    if (std::find(built.begin(), built.end(), w) != built.end()) v.emplace_back(w);
  return v;
}

TEST(ChipHbm, HostPortDataIntegrity) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(7);
  std::vector<uint8_t> data(8192 + 37);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint64_t at = drv.alloc(data.size() + 64) + 5;  // unaligned start and end
  drv.write(at, data.data(), data.size());
  std::vector<uint8_t> back(data.size());
  drv.read(at, back.data(), back.size());
  EXPECT_EQ(data, back);
}

TEST(ChipDma, RoundTripBf16AndF32) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(3);
  for (bool bf16 : {true, false}) {
    drv.free_all();
    const uint32_t rows = 24, seg = 64, pitch = 192;  // 2D: 24 segments of 64 bytes, stride 192
    const uint64_t src = drv.alloc(rows * pitch), dst = drv.alloc(rows * seg);
    std::vector<uint8_t> in(rows * pitch);
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    drv.write(src, in.data(), in.size());
    const uint32_t piece = bf16 ? 8 : 16;
    const std::vector<ChipCmd> prog = {
        cmd_dma(DmaDir::kHbmToVmem, bf16, 100, rows, seg, static_cast<uint32_t>(src), pitch),
        cmd_dma(DmaDir::kVmemToHbm, bf16, 100, 1, rows * seg, static_cast<uint32_t>(dst), 0),
        cmd_halt()};
    const ProgramResult r = drv.run(prog);
    EXPECT_EQ(r.err, 0u);
    EXPECT_EQ(r.delta[kStatDmaWrBytes], rows * seg);
    std::vector<uint8_t> out(rows * seg);
    drv.read(dst, out.data(), out.size());
    for (uint32_t i = 0; i < rows; ++i)
      for (uint32_t b = 0; b < seg; ++b)
        ASSERT_EQ(out[i * seg + b], in[i * pitch + b]) << "bf16=" << bf16 << " row " << i;
    (void)piece;
  }
}

// bf16 to HBM keeps each lane's bits [15:0], or with hi its bits [31:16]: the two halves of
// f32 rows go out as two bf16 arrays.
TEST(ChipDma, Bf16OutTakesTheLowerOrTheUpperHalfOfEachLane) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(5);
  const uint32_t rows = 16, lanes = 4;
  const uint64_t src = drv.alloc(rows * lanes * 4), lo = drv.alloc(rows * lanes * 2),
                 hi = drv.alloc(rows * lanes * 2);
  std::vector<uint32_t> in(rows * lanes);
  for (auto& w : in) w = static_cast<uint32_t>(rng());
  drv.write(src, in.data(), in.size() * 4);
  const uint32_t bytes = rows * lanes * 2;
  const ProgramResult r = drv.run({
      cmd_dma(DmaDir::kHbmToVmem, false, 40, 1, rows * lanes * 4, static_cast<uint32_t>(src), 0),
      cmd_dma(DmaDir::kVmemToHbm, true, 40, 1, bytes, static_cast<uint32_t>(lo), 0),
      cmd_dma(DmaDir::kVmemToHbm, true, 40, 1, bytes, static_cast<uint32_t>(hi), 0, 0, true),
      cmd_halt()});
  EXPECT_EQ(r.err, 0u);
  std::vector<uint16_t> got_lo(rows * lanes), got_hi(rows * lanes);
  drv.read(lo, got_lo.data(), bytes);
  drv.read(hi, got_hi.data(), bytes);
  for (std::size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(got_lo[i], in[i] & 0xFFFFu) << i;
    ASSERT_EQ(got_hi[i], in[i] >> 16) << i;
  }
}

// tail != 0: the last piece of every segment keeps its first `tail` lanes, the others become -0;
// dense segments (pieces of two segments merged into one burst) and strided ones.
TEST(ChipDma, TailFillsEdgeLanesWithNegativeZero) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(5);
  for (bool bf16 : {true, false}) {
    for (uint32_t stride_pieces : {3u, 8u}) {
      drv.free_all();
      const uint32_t esz = bf16 ? 2 : 4, piece = 4 * esz, segs = 10, per = 3, tail = bf16 ? 1 : 3;
      const uint32_t seg = per * piece, stride = stride_pieces * piece, rows = segs * per;
      const uint64_t src = drv.alloc(segs * stride), dst = drv.alloc(32 * piece);
      std::vector<uint8_t> in(segs * stride);
      for (auto& b : in) b = static_cast<uint8_t>(rng());
      drv.write(src, in.data(), in.size());
      const ProgramResult r = drv.run(
          {cmd_dma(DmaDir::kHbmToVmem, bf16, 200, segs, seg, static_cast<uint32_t>(src), stride,
                   tail),
           cmd_dma(DmaDir::kVmemToHbm, bf16, 200, 1, 32 * piece, static_cast<uint32_t>(dst), 0),
           cmd_halt()});
      ASSERT_EQ(r.err, 0u);
      std::vector<uint8_t> out(rows * piece);
      drv.read(dst, out.data(), out.size());
      for (uint32_t row = 0; row < rows; ++row)
        for (uint32_t lane = 0; lane < 4; ++lane) {
          const bool fill = row % per == per - 1 && lane >= tail;
          for (uint32_t b = 0; b < esz; ++b) {
            const uint8_t want = fill ? (b + 1 == esz ? 0x80 : 0x00)
                                      : in[(row / per) * stride + (row % per) * piece +
                                           lane * esz + b];
            ASSERT_EQ(out[row * piece + lane * esz + b], want)
                << "bf16=" << bf16 << " stride " << stride << " row " << row << " lane " << lane;
          }
        }
    }
  }
}

// Random 2D reads (segment length, stride, start offset in pieces; with and without a tail),
// each followed by a dense write-back of the rows: every byte against a reference. Covers one
// and two pieces per cycle, segments ending inside a burst, merges across segments.
TEST(ChipDma, RandomStridedReadsAndWriteBacks) {
  for (const std::string& variant : built_among({"4x4", "16x16"})) {
    LoneChip drv(variant);
    const uint32_t lanes = static_cast<uint32_t>(drv.shape().cols);
    std::mt19937_64 rng(variant.size() * 77 + 1);
    const uint64_t src = drv.alloc(1 << 16), dst = drv.alloc(1 << 16);
    std::vector<uint8_t> hbm(1 << 16);
    for (auto& b : hbm) b = static_cast<uint8_t>(rng());
    drv.write(src, hbm.data(), hbm.size());
    for (int it = 0; it < 40; ++it) {
      const bool bf16 = rng() % 2;
      const uint32_t esz = bf16 ? 2 : 4, piece = lanes * esz;
      const uint32_t per = 1 + static_cast<uint32_t>(rng() % 5);
      const uint32_t stride = (per + static_cast<uint32_t>(rng() % 3)) * piece;
      const uint32_t segs = 1 + static_cast<uint32_t>(rng() % 12);
      const uint32_t off = static_cast<uint32_t>(rng() % 8) * piece;
      const uint32_t tail = rng() % 2 ? static_cast<uint32_t>(rng() % lanes) : 0;
      const uint32_t rows = segs * per, out_bytes = (rows * piece + 63) / 64 * 64;
      const ProgramResult r = drv.run(
          {cmd_dma(DmaDir::kHbmToVmem, bf16, 64, segs, per * piece,
                   static_cast<uint32_t>(src + off), stride, tail),
           cmd_dma(DmaDir::kVmemToHbm, bf16, 64, 1, out_bytes, static_cast<uint32_t>(dst), 0),
           cmd_halt()});
      ASSERT_EQ(r.err, 0u);
      std::vector<uint8_t> out(rows * piece);
      drv.read(dst, out.data(), out.size());
      for (uint32_t row = 0; row < rows; ++row)
        for (uint32_t b = 0; b < piece; ++b) {
          const uint32_t lane = b / esz;
          const bool fill = tail != 0 && row % per == per - 1 && lane >= tail;
          const uint8_t want =
              fill ? (b % esz + 1 == esz ? 0x80 : 0x00)
                   : hbm[off + (row / per) * stride + (row % per) * piece + b];
          ASSERT_EQ(out[row * piece + b], want)
              << variant << " iteration " << it << " bf16=" << bf16 << " per " << per
              << " stride " << stride << " segs " << segs << " off " << off << " tail " << tail
              << " row " << row << " byte " << b;
        }
    }
  }
}

// Reads back to back overlap in the engine (tpu_dma: the next read starts walking while the
// previous one's responses are still coming): a run of random reads, each with its own element
// size, tail and region, lands byte for byte as if each had run alone, and eight one-burst reads
// take about two times one (four at a time pay a read's latency together).
TEST(ChipDma, BackToBackReadsOverlapAndKeepTheirOwnFormat) {
  for (const std::string& variant : built_among({"4x4", "16x16"})) {
    LoneChip drv(variant);
    const uint32_t lanes = static_cast<uint32_t>(drv.shape().cols), row_bytes = 4 * lanes;
    std::mt19937_64 rng(23 + lanes);
    const uint64_t src = drv.alloc(1 << 16), dst = drv.alloc(1 << 16);
    std::vector<uint8_t> hbm(1 << 16);
    for (auto& b : hbm) b = static_cast<uint8_t>(rng());
    drv.write(src, hbm.data(), hbm.size());
    struct Read {
      bool bf16;
      uint32_t segs, per, stride, tail, off, mem_row;
    };
    std::vector<Read> reads;
    std::vector<ChipCmd> prog;
    uint32_t mem_row = 8;
    for (int i = 0; i < 16; ++i) {  // 2D reads: segs segments of per pieces, stride apart
      Read r{};
      r.bf16 = rng() % 2 == 0;
      const uint32_t piece = lanes * (r.bf16 ? 2 : 4);
      r.segs = 1 + static_cast<uint32_t>(rng() % 4);
      r.per = 1 + static_cast<uint32_t>(rng() % 6);
      r.stride = (r.per + static_cast<uint32_t>(rng() % 3)) * piece;
      r.tail = rng() % 2 ? static_cast<uint32_t>(rng() % lanes) : 0u;
      r.off = static_cast<uint32_t>(rng() % 64) * 64;
      r.mem_row = mem_row;
      prog.push_back(cmd_dma(DmaDir::kHbmToVmem, r.bf16, r.mem_row, r.segs, r.per * piece,
                             static_cast<uint32_t>(src + r.off), r.stride, r.tail));
      reads.push_back(r);
      mem_row += r.segs * r.per;
    }
    // Every read's rows back as f32 (the lanes as the DMA wrote them), after all the reads, in
    // whole bursts.
    const uint32_t burst_rows = std::max(1u, 64 / row_bytes);
    const uint32_t wb_rows = (mem_row - 8 + burst_rows - 1) / burst_rows * burst_rows;
    prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, 8, 1, wb_rows * row_bytes,
                           static_cast<uint32_t>(dst), 0));
    prog.push_back(cmd_halt());
    const ProgramResult res = drv.run(prog);
    ASSERT_EQ(res.err, 0u) << variant;
    std::vector<uint8_t> out(wb_rows * row_bytes);
    drv.read(dst, out.data(), out.size());
    for (std::size_t i = 0; i < reads.size(); ++i) {
      const Read& r = reads[i];
      const uint32_t esz = r.bf16 ? 2 : 4, piece = lanes * esz;
      for (uint32_t row = 0; row < r.segs * r.per; ++row) {
        for (uint32_t lane = 0; lane < lanes; ++lane) {
          uint32_t want = 0;
          if (r.tail != 0 && row % r.per == r.per - 1 && lane >= r.tail) {
            want = r.bf16 ? 0x8000u : 0x80000000u;
          } else {
            const uint32_t at = r.off + (row / r.per) * r.stride + (row % r.per) * piece;
            std::memcpy(&want, &hbm[at + lane * esz], esz);
          }
          uint32_t got = 0;
          std::memcpy(&got, &out[(r.mem_row - 8 + row) * row_bytes + lane * 4], 4);
          ASSERT_EQ(got, want) << variant << " read " << i << " (bf16=" << r.bf16 << ", tail "
                               << r.tail << ") row " << row << " lane " << lane;
        }
      }
    }
  }
  LoneChip drv("4x4");
  const uint64_t src = drv.alloc(1 << 16);
  // Eight one-burst reads against one.
  const auto reads_of = [&](int n) {
    std::vector<ChipCmd> p;
    for (int i = 0; i < n; ++i) {
      p.push_back(cmd_dma(DmaDir::kHbmToVmem, false, 8 + 4 * static_cast<uint32_t>(i), 1, 64,
                          static_cast<uint32_t>(src) + 4096 * static_cast<uint32_t>(i), 0));
    }
    p.push_back(cmd_halt());
    const ProgramResult r = drv.run(p);
    EXPECT_EQ(r.err, 0u);
    return r.cycles;
  };
  const uint64_t one = reads_of(1), eight = reads_of(8);
  EXPECT_GT(one, 20u) << "a read's latency";
  // Four reads in flight at once: eight cost about two latencies (two batches of four).
  EXPECT_LT(eight, 2 * one + 4) << "one: " << one << ", eight: " << eight;
}

// Stores back to back: one to HBM bytes no store in flight touches starts beside them (eight
// one-burst stores to other bytes cost less than half of eight alone), one that
// touches bytes of a store in flight waits for it, and so do a load and a store that touch the
// same bytes. Random 1D and 2D stores into a 2 KiB window and loads from it (many overlap) land
// as if each had run alone, in program order, byte for byte.
TEST(ChipDma, AccessesToOtherBytesOverlapAndAccessesToTheSameBytesKeepTheirOrder) {
  for (const std::string& variant : built_among({"4x4", "16x16"})) {
    LoneChip drv(variant);
    const uint32_t lanes = static_cast<uint32_t>(drv.shape().cols), rb = 4 * lanes;
    const uint32_t burst_rows = std::max(1u, 64 / rb);
    std::mt19937_64 rng(41 + lanes);
    const uint32_t vrows = 512;
    std::vector<uint8_t> vmem(vrows * rb);
    for (auto& b : vmem) b = static_cast<uint8_t>(rng());
    const uint64_t src = drv.alloc(vmem.size()), far = drv.alloc(8 * 4096),
                   win = drv.alloc(2048);
    drv.write(src, vmem.data(), vmem.size());
    ASSERT_EQ(drv.run({cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, vrows * rb,
                               static_cast<uint32_t>(src), 0),
                       cmd_halt()})
                  .err,
              0u);
    const auto stores_of = [&](int n) {
      std::vector<ChipCmd> p;
      for (int i = 0; i < n; ++i)
        p.push_back(cmd_dma(DmaDir::kVmemToHbm, false, burst_rows * static_cast<uint32_t>(i), 1,
                            64, static_cast<uint32_t>(far) + 4096 * static_cast<uint32_t>(i),
                            0));
      p.push_back(cmd_halt());
      const ProgramResult r = drv.run(p);
      EXPECT_EQ(r.err, 0u);
      return r.cycles;
    };
    const uint64_t one = stores_of(1), eight = stores_of(8);
    // Less than half of eight one after the other (4x4: 13 and 55; 16x16: 26 and 40).
    EXPECT_LT(eight, 4 * one + 8) << variant << " one: " << one << ", eight: " << eight;
    std::vector<uint8_t> got(64);
    for (uint32_t i = 0; i < 8; ++i) {
      drv.read(far + 4096 * i, got.data(), 64);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), vmem.begin() + i * burst_rows * rb))
          << variant << " store " << i;
    }
    // Random stores into the window and loads from it (into VMEM rows from 512 on, each to rows
    // of its own), applied in program order to the expected bytes: a load sees every store
    // before it and none after.
    std::vector<uint8_t> want(2048, 0), loaded;
    drv.write(win, want.data(), want.size());
    std::vector<ChipCmd> prog;
    uint32_t next_row = vrows;
    for (int i = 0; i < 48; ++i) {
      const uint32_t segs = 1 + static_cast<uint32_t>(rng() % 3);
      const uint32_t seg = 64 * (1 + static_cast<uint32_t>(rng() % 2));
      const uint32_t stride = segs == 1 ? 0 : seg + 64 * static_cast<uint32_t>(rng() % 2);
      const uint32_t span = (segs - 1) * stride + seg;
      const uint32_t off = 64 * static_cast<uint32_t>(rng() % ((2048 - span) / 64 + 1));
      const uint32_t rows = segs * seg / rb;
      const uint32_t hbm = static_cast<uint32_t>(win) + off;
      if (rng() % 3 == 0) {  // a load
        prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, next_row, segs, seg, hbm, stride));
        for (uint32_t k = 0; k < segs; ++k)
          loaded.insert(loaded.end(), want.begin() + off + k * stride,
                        want.begin() + off + k * stride + seg);
        next_row += rows;
        continue;
      }
      const uint32_t row = static_cast<uint32_t>(rng() % (vrows - rows + 1));
      prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, row, segs, seg, hbm, stride));
      for (uint32_t k = 0; k < segs; ++k)
        std::copy_n(vmem.begin() + row * rb + k * seg, seg, want.begin() + off + k * stride);
    }
    const uint64_t back = drv.alloc(loaded.size() + 64);
    if (!loaded.empty())
      prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, vrows, 1,
                             static_cast<uint32_t>(loaded.size()), static_cast<uint32_t>(back),
                             0));
    prog.push_back(cmd_halt());
    ASSERT_EQ(drv.run(prog).err, 0u) << variant;
    std::vector<uint8_t> out(2048);
    drv.read(win, out.data(), out.size());
    for (std::size_t b = 0; b < out.size(); ++b)
      ASSERT_EQ(out[b], want[b]) << variant << " window byte " << b;
    ASSERT_FALSE(loaded.empty());
    std::vector<uint8_t> lout(loaded.size());
    drv.read(back, lout.data(), lout.size());
    for (std::size_t b = 0; b < lout.size(); ++b)
      ASSERT_EQ(lout[b], loaded[b]) << variant << " loaded byte " << b;
  }
}

// The HBM-resident API: whatever the padding of A and W holds (here Inf and NaN), the result is
// exact; a bf16 C feeds the next matmul as its A (its padding is whatever the first wrote).
TEST(ChipMatmulHbm, PaddingContentsDoNotMatterAndOutputsChain) {
  for (const std::string& variant : built_among({"4x4", "16x16"})) {
    LoneChip drv(variant);
    std::mt19937_64 rng(21);
    const std::size_t m = 37, k = 13, n = 10, n2 = 7;
    const auto a = random_bf16(m * k, rng), w = random_bf16(k * n, rng);
    const auto w2 = random_bf16(n * n2, rng);
    std::vector<float> bias(n);
    for (auto& x : bias) x = static_cast<float>(static_cast<int>(rng() % 201) - 100) / 8.0f;
    const uint64_t keep = drv.alloc(64);
    const std::vector<uint8_t> keep_bytes(64, 0x5A);
    drv.write(keep, keep_bytes.data(), keep_bytes.size());
    const HbmMatrix am = drv.alloc_matrix(m, k, Dtype::kBf16);
    const HbmMatrix wm = drv.alloc_matrix(k, n, Dtype::kBf16);
    const HbmMatrix w2m = drv.alloc_matrix(n, n2, Dtype::kBf16);
    const HbmMatrix cm = drv.alloc_matrix(m, n, Dtype::kBf16);
    const HbmMatrix dm = drv.alloc_matrix(m, n2, Dtype::kF32);
    const HbmMatrix bm = drv.alloc_matrix(1, n, Dtype::kF32);
    auto write_with_junk = [&](const HbmMatrix& x, const std::vector<bf16_t>& v) {
      std::vector<bf16_t> buf(x.rows * x.pitch);
      for (std::size_t i = 0; i < x.rows; ++i)
        for (std::size_t j = 0; j < x.pitch; ++j)
          buf[i * x.pitch + j] = j < x.cols ? v[i * x.cols + j] : ((i + j) % 2 ? 0x7F80 : 0xFFC1);
      drv.write(x.addr, buf.data(), buf.size() * 2);
    };
    write_with_junk(am, a);
    write_with_junk(wm, w);
    write_with_junk(w2m, w2);
    write_with_junk(cm, std::vector<bf16_t>(m * n, 0x7F80));
    drv.write_matrix(bm, bias);

    MatmulEpilogue ep;
    ep.bias = &bm;
    ep.relu = true;
    const MatmulRun r1 = drv.matmul(cm, am, wm, ep);
    MatmulOptions opt;
    opt.bias = &bias;
    opt.relu = true;
    opt.out_bf16 = true;
    const auto c_want = golden_chip_matmul(a, w, m, k, n, opt);
    EXPECT_EQ(drv.read_matrix(cm), c_want) << variant;
    EXPECT_EQ(r1.prog.delta[kStatMxuBeats], r1.compute_cycles);

    drv.matmul(dm, cm, w2m);
    std::vector<bf16_t> c16(c_want.begin(), c_want.end());
    EXPECT_EQ(drv.read_matrix(dm), golden_chip_matmul(c16, w2, m, n, n2, {})) << variant;

    // The host-vector form frees only its own temporaries.
    const uint64_t mark = drv.allocated();
    EXPECT_EQ(drv.matmul(a, w, m, k, n, opt).c_bits, c_want);
    EXPECT_EQ(drv.allocated(), mark);
    std::vector<uint8_t> back(64);
    drv.read(keep, back.data(), back.size());
    EXPECT_EQ(back, keep_bytes);
  }
}

TEST(ChipMatmulHbm, BadOperandsAreClearErrors) {
  LoneChip drv("4x4");
  const HbmMatrix a = drv.alloc_matrix(8, 12, Dtype::kBf16);
  const HbmMatrix w = drv.alloc_matrix(12, 5, Dtype::kBf16);
  const HbmMatrix c = drv.alloc_matrix(8, 5, Dtype::kF32);
  const HbmMatrix b = drv.alloc_matrix(1, 5, Dtype::kF32);
  const HbmMatrix a_f32 = drv.alloc_matrix(8, 12, Dtype::kF32);
  const HbmMatrix w_k = drv.alloc_matrix(11, 5, Dtype::kBf16);
  HbmMatrix c_bad_pitch = c;
  c_bad_pitch.pitch = 6;
  HbmMatrix a_misaligned = a;
  a_misaligned.addr += 32;
  HbmMatrix c_over_a = c;
  c_over_a.addr = a.addr;
  HbmMatrix c_beyond = c;
  c_beyond.addr = drv.shape().hbm_bytes - 64;
  const HbmMatrix b_wrong = drv.alloc_matrix(1, 4, Dtype::kF32);
  auto msg = [&](const HbmMatrix& cc, const HbmMatrix& aa, const HbmMatrix& ww,
                 const HbmMatrix* bias) -> std::string {
    MatmulEpilogue ep;
    ep.bias = bias;
    try {
      drv.matmul(cc, aa, ww, ep);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(msg(c, a, w_k, nullptr).find("K must agree"), std::string::npos);
  EXPECT_NE(msg(c, a_f32, w, nullptr).find("A must be bf16"), std::string::npos);
  EXPECT_NE(msg(c_bad_pitch, a, w, nullptr).find("C: pitch 6"), std::string::npos);
  EXPECT_NE(msg(c, a_misaligned, w, nullptr).find("not 64-byte aligned"), std::string::npos);
  EXPECT_NE(msg(c_over_a, a, w, nullptr).find("overlaps"), std::string::npos);
  EXPECT_NE(msg(c_beyond, a, w, nullptr).find("beyond the HBM"), std::string::npos);
  EXPECT_NE(msg(c, a, w, &b_wrong).find("bias must be 1 x 5"), std::string::npos);
  EXPECT_NE(msg(c, a, w, &a).find("bias must be f32"), std::string::npos);
  EXPECT_EQ(msg(c, a, w, &b), "no error");
  EXPECT_THROW(drv.write_matrix(a, std::vector<float>(96)), std::invalid_argument);
  EXPECT_THROW(drv.write_matrix(a, std::vector<bf16_t>(95)), std::invalid_argument);
}

// (variant, M, K, N, bias, relu, bf16 out)
using MmParam = std::tuple<std::string, int, int, int, bool, bool, bool>;
class ChipMatmul : public ::testing::TestWithParam<MmParam> {};

TEST_P(ChipMatmul, BitExactThroughHbm) {
  const auto& [variant, m, k, n, bias, relu, bf16] = GetParam();
  const auto built = built_chip_variants();
  if (std::find(built.begin(), built.end(), variant) == built.end())
    GTEST_SKIP() << "chip variant " << variant << " not built (TPU_CHIP_VARIANTS)";
  LoneChip drv(variant);
  std::mt19937_64 rng(static_cast<uint64_t>(m * 1000003 + k * 1009 + n));
  const auto a = random_bf16(static_cast<std::size_t>(m * k), rng);
  const auto w = random_bf16(static_cast<std::size_t>(k * n), rng);
  std::vector<float> b(static_cast<std::size_t>(n));
  for (auto& x : b) x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 64.0f;
  MatmulOptions opt;
  opt.bias = bias ? &b : nullptr;
  opt.relu = relu;
  opt.out_bf16 = bf16;
  const MatmulRun r = drv.matmul(a, w, static_cast<std::size_t>(m), static_cast<std::size_t>(k),
                                 static_cast<std::size_t>(n), opt);
  const auto want = golden_chip_matmul(a, w, static_cast<std::size_t>(m),
                                       static_cast<std::size_t>(k), static_cast<std::size_t>(n),
                                       opt);
  ASSERT_EQ(r.c_bits.size(), want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += r.c_bits[i] != want[i];
  EXPECT_EQ(bad, 0u) << "first: got " << std::hex << r.c_bits[0] << " want " << want[0];
  EXPECT_EQ(r.prog.delta[kStatMxuBeats], r.compute_cycles);
}

std::string MmName(const ::testing::TestParamInfo<MmParam>& info) {
  const auto& [v, m, k, n, bias, relu, bf16] = info.param;
  std::string s = "v" + v + "_m" + std::to_string(m) + "k" + std::to_string(k) + "n" +
                  std::to_string(n) + (bias ? "_bias" : "") + (relu ? "_relu" : "") +
                  (bf16 ? "_bf16" : "_f32");
  for (auto& c : s)
    if (c == 'x') c = 'X';
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ChipMatmul,
    ::testing::Values(MmParam{"4x4", 1, 5, 3, false, false, false},
                      MmParam{"4x4", 7, 9, 11, true, false, false},
                      MmParam{"4x4", 16, 16, 16, false, true, false},
                      MmParam{"4x4", 33, 20, 9, true, true, true},
                      MmParam{"4x4", 1, 64, 40, false, false, true},
                      MmParam{"4x4", 130, 12, 8, true, true, false},
                      // several chunks (a short first one), pieces of A and of the output
                      // groups (G = 4 N tiles per burst, the last group padded), W panels
                      // streamed across chunk boundaries
                      MmParam{"4x4", 100, 24, 72, false, false, false},
                      MmParam{"4x4", 90, 64, 256, true, true, true},
                      MmParam{"16x16", 20, 40, 33, true, true, true},
                      MmParam{"16x16", 1, 16, 16, false, false, false}),
    MmName);

TEST(ChipConcurrency, DmaOverlapsMxu) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(11);
  const std::size_t m = 64, k = 64, n = 64;
  const auto a = random_bf16(m * k, rng), w = random_bf16(k * n, rng);
  const MatmulRun r = drv.matmul(a, w, m, k, n);
  EXPECT_GT(r.prog.delta[kStatOverlap], 0u);
  EXPECT_GT(r.prog.delta[kStatDmaBusy], 0u);
  EXPECT_EQ(r.c_bits, golden_chip_matmul(a, w, m, k, n, {}));
  // Double buffering keeps the array busy: most cycles carry an activation row.
  EXPECT_GT(static_cast<double>(r.compute_cycles) / static_cast<double>(r.prog.cycles), 0.5);
}

TEST(ChipSequencer, WarAndRawDependenciesHold) {
  // DMA X -> VMEM[0..); VPU copies VMEM[0..) -> AMEM; DMA Y -> VMEM[0..) (must wait for the
  // VPU: WAR); DMA AMEM -> HBM (must wait for the VPU: RAW). Reordering would write Y out.
  LoneChip drv("4x4");
  const uint32_t rows = 64, bytes = rows * 16;
  std::vector<float> x(rows * 4), y(rows * 4, -1.0f), out(rows * 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
  const uint64_t ax = drv.alloc(bytes), ay = drv.alloc(bytes), ao = drv.alloc(bytes);
  drv.write(ax, x.data(), bytes);
  drv.write(ay, y.data(), bytes);
  VpuCmdArgs v;
  v.op = 4;  // maximum(x, x): a copy
  v.x_mem = v.y_mem = Mem::kVmem;
  v.dst_mem = Mem::kAmem;
  v.dst_row = 10;
  v.rows = rows;
  const ProgramResult r = drv.run({cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, bytes,
                                           static_cast<uint32_t>(ax), 0),
                                   cmd_vpu(v),
                                   cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, bytes,
                                           static_cast<uint32_t>(ay), 0),
                                   cmd_dma(DmaDir::kAmemToHbm, false, 10, 1, bytes,
                                           static_cast<uint32_t>(ao), 0),
                                   cmd_halt()});
  EXPECT_EQ(r.err, 0u);
  drv.read(ao, out.data(), bytes);
  EXPECT_EQ(out, x);
}

// Sixteen independent 4-row VPU commands back to back: the unit takes the next one while one
// runs, so the rows follow each other every cycle (busy 64 rows + the last one's write, where
// one command at a time took 5 cycles each plus a gap); then a command that reads two earlier
// results (RAW) and one that overwrites what it reads (WAR) behind it. Every row checked against
// the golden lane op.
TEST(ChipVpu, BackToBackCommandsFeedARowEveryCycle) {
  for (const std::string& variant : built_among({"4x4", "16x16"})) {
    LoneChip drv(variant);
    const uint32_t lanes = static_cast<uint32_t>(drv.shape().cols), rb = 4 * lanes;
    std::mt19937_64 rng(31 + lanes);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<uint32_t> in(128 * lanes);
    for (auto& v : in) v = f32_bits(nd(rng));
    const uint64_t src = drv.alloc(in.size() * 4), dst = drv.alloc(256 * rb);
    drv.write(src, in.data(), in.size() * 4);
    ASSERT_EQ(drv.run({cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 128 * rb,
                               static_cast<uint32_t>(src), 0),
                       cmd_halt()})
                  .err,
              0u);
    // VMEM rows [0, 64) are x, [64, 128) y; command i writes 4 rows from 256 + 8 i (stride 1
    // or 2), into VMEM or AMEM.
    const VpuOp ops[] = {VpuOp::kAdd, VpuOp::kMul, VpuOp::kMax, VpuOp::kSub};
    std::vector<VpuCmdArgs> cmds;
    std::vector<ChipCmd> prog;
    for (uint32_t i = 0; i < 16; ++i) {
      VpuCmdArgs v;
      v.op = static_cast<unsigned>(ops[i % 4]);
      v.x_mem = v.y_mem = Mem::kVmem;
      v.dst_mem = i % 3 == 2 ? Mem::kAmem : Mem::kVmem;
      v.x_row = 4 * i;
      v.y_row = 64 + 4 * i;
      v.dst_row = 256 + 8 * i;
      v.dst_stride = i % 2 + 1;
      v.rows = 4;
      cmds.push_back(v);
      prog.push_back(cmd_vpu(v));
    }
    prog.push_back(cmd_halt());
    const ProgramResult r = drv.run(prog);
    ASSERT_EQ(r.err, 0u) << variant;
    EXPECT_LE(r.delta[kStatVpuBusy], 16u * 4 + 2) << variant;
    // Golden of the sixteen: the rows each command wrote, by (memory, row).
    std::map<std::pair<Mem, uint32_t>, std::vector<uint32_t>> want;
    for (const VpuCmdArgs& v : cmds)
      for (uint32_t k = 0; k < v.rows; ++k) {
        std::vector<uint32_t> row(lanes);
        for (uint32_t l = 0; l < lanes; ++l)
          row[l] = vpu_lane(static_cast<VpuOp>(v.op), in[(v.x_row + k) * lanes + l],
                            in[(v.y_row + k) * lanes + l], 0x80000000u);
        want[{v.dst_mem, v.dst_row + k * v.dst_stride}] = row;
      }
    // RAW: x = command 0's rows (VMEM 256..259), y = command 4's (VMEM 288..291, stride 1),
    // into VMEM 400; WAR: command 0's rows overwritten with max(400.., 400..) right behind.
    VpuCmdArgs raw;
    raw.op = static_cast<unsigned>(VpuOp::kAdd);
    raw.x_mem = raw.y_mem = raw.dst_mem = Mem::kVmem;
    raw.x_row = 256;
    raw.y_row = 288;
    raw.dst_row = 400;
    raw.rows = 4;
    VpuCmdArgs war = raw;
    war.op = static_cast<unsigned>(VpuOp::kMul);
    war.x_row = war.y_row = 400;
    war.dst_row = 256;
    const ProgramResult r2 = drv.run({cmd_vpu(raw), cmd_vpu(war),
                                      cmd_dma(DmaDir::kVmemToHbm, false, 256, 1, 256 * rb,
                                              static_cast<uint32_t>(dst), 0),
                                      cmd_halt()});
    ASSERT_EQ(r2.err, 0u) << variant;
    for (uint32_t k = 0; k < 4; ++k) {
      std::vector<uint32_t> sum(lanes), sq(lanes);
      for (uint32_t l = 0; l < lanes; ++l) {
        sum[l] = vpu_lane(VpuOp::kAdd, want[{Mem::kVmem, 256 + k}][l],
                          want[{Mem::kVmem, 288 + k}][l], 0x80000000u);
        sq[l] = vpu_lane(VpuOp::kMul, sum[l], sum[l], 0x80000000u);
      }
      want[{Mem::kVmem, 400 + k}] = sum;
      want[{Mem::kVmem, 256 + k}] = sq;
    }
    std::vector<uint32_t> out(256 * lanes);
    drv.read(dst, out.data(), out.size() * 4);
    std::size_t checked = 0;
    for (const auto& [at, row] : want) {
      if (at.first != Mem::kVmem) continue;
      for (uint32_t l = 0; l < lanes; ++l)
        ASSERT_EQ(out[(at.second - 256) * lanes + l], row[l])
            << variant << " VMEM row " << at.second << " lane " << l;
      ++checked;
    }
    EXPECT_EQ(checked, 16u * 4 - 5 * 4 + 4) << variant;  // 11 commands into VMEM, plus RAW's
  }
}

struct BadCase {
  const char* name;
  ChipCmd cmd;
  unsigned err;
};

// Commands built from the generated per-opcode structs (configs/tpu_contract.yaml): each case
// puts one field out of range, so the chip's error says its sequencer read that field from the
// bits the contract gives it (the RTL reads the same fields through the generated packed structs).
struct StructCase {
  const char* name;
  ChipCmd cmd;
  ChipErr err;
};

TEST(ChipErrors, PerOpcodeStructFieldsReachTheSequencer) {
  LoneChip drv("4x4");  // 4 lanes, 4096 VMEM rows, 2048 AMEM rows, a 1x1x1 pod
  auto dma = [](auto set) {
    CmdDma c;
    c.dir = static_cast<uint32_t>(DmaDir::kHbmToVmem);
    c.rows = 1;
    c.seg_bytes = 64;
    set(c);
    return c.encode();
  };
  auto matmul = [](auto set) {
    CmdMatmul c;
    c.rows = 4;
    set(c);
    return c.encode();
  };
  auto vpu = [](auto set) {
    CmdVpu c;
    c.rows = 2;
    set(c);
    return c.encode();
  };
  auto send = [](auto set) {
    CmdIciSend c;
    c.rows = 1;
    c.dst_row = 8;
    set(c);
    return c.encode();
  };
  const std::vector<StructCase> cases = {
      {"dma dir reserved", dma([](CmdDma& c) { c.dir = 3; }), ChipErr::kBadField},
      {"dma rows 0", dma([](CmdDma& c) { c.rows = 0; }), ChipErr::kBadField},
      {"dma seg_bytes 0", dma([](CmdDma& c) { c.seg_bytes = 0; }), ChipErr::kBadField},
      {"dma tail = lanes", dma([](CmdDma& c) { c.tail = 4; }), ChipErr::kBadField},
      {"dma mem_row", dma([](CmdDma& c) { c.mem_row = 4093; }), ChipErr::kVmemRange},
      {"dma hbm_addr", dma([](CmdDma& c) { c.hbm_addr = 8; }), ChipErr::kAlign},
      {"dma stride", dma([](CmdDma& c) { c.stride = 8; }), ChipErr::kAlign},
      {"dma bf16 amem", dma([](CmdDma& c) { c.bf16 = 1; c.dir = 2; c.mem_row = 2047; c.rows = 2; }),
       ChipErr::kAmemRange},
      {"loadw vmem_row", CmdLoadW{0, 4093, 1}.encode(), ChipErr::kVmemRange},
      {"loadw stride", CmdLoadW{0, 0, 2000}.encode(), ChipErr::kVmemRange},
      {"matmul rows 0", matmul([](CmdMatmul& c) { c.rows = 0; }), ChipErr::kBadField},
      {"matmul a_row", matmul([](CmdMatmul& c) { c.a_row = 4093; }), ChipErr::kVmemRange},
      {"matmul a_stride", matmul([](CmdMatmul& c) { c.a_stride = 2000; }), ChipErr::kVmemRange},
      {"matmul c_row", matmul([](CmdMatmul& c) { c.c_row = 2045; }), ChipErr::kAmemRange},
      {"matmul acc, no weights", matmul([](CmdMatmul& c) { c.acc = 1; }), ChipErr::kNoWeights},
      {"dma hi f32", dma([](CmdDma& c) { c.dir = 1; c.hi = 1; }), ChipErr::kBadField},
      {"dma hi in", dma([](CmdDma& c) { c.bf16 = 1; c.hi = 1; }), ChipErr::kBadField},
      {"vpu vop 9", vpu([](CmdVpu& c) { c.vop = 9; }), ChipErr::kBadField},   // red_sum
      {"vpu vop 10", vpu([](CmdVpu& c) { c.vop = 10; }), ChipErr::kBadField},  // red_max
      {"vpu vop 19", vpu([](CmdVpu& c) { c.vop = 19; }), ChipErr::kBadField},  // none
      {"vpu vop 31", vpu([](CmdVpu& c) { c.vop = 31; }), ChipErr::kBadField},  // none
      {"vpu x amem", vpu([](CmdVpu& c) { c.x_mem = 1; c.x_row = 2047; }), ChipErr::kAmemRange},
      {"vpu y vmem", vpu([](CmdVpu& c) { c.y_row = 4095; }), ChipErr::kVmemRange},
      {"vpu y amem", vpu([](CmdVpu& c) { c.y_mem = 1; c.y_row = 2047; }), ChipErr::kAmemRange},
      {"vpu dst_stride", vpu([](CmdVpu& c) { c.dst_stride = 5000; }), ChipErr::kVmemRange},
      {"vpu dst amem", vpu([](CmdVpu& c) { c.dst_mem = 1; c.dst_row = 2047; }),
       ChipErr::kAmemRange},
      {"send counter 64", send([](CmdIciSend& c) { c.counter = 64; }), ChipErr::kBadField},
      {"send dst_x", send([](CmdIciSend& c) { c.dst_x = 1; }), ChipErr::kBadField},
      {"send dst_y", send([](CmdIciSend& c) { c.dst_y = 1; }), ChipErr::kBadField},
      {"send dst_z", send([](CmdIciSend& c) { c.dst_z = 1; }), ChipErr::kBadField},
      {"send count_only with wait_rows",
       send([](CmdIciSend& c) { c.count_only = 1; c.wait_rows = 1; }), ChipErr::kBadField},
      {"send src amem", send([](CmdIciSend& c) { c.src_mem = 1; c.src_row = 2047; c.rows = 2; }),
       ChipErr::kAmemRange},
      {"send dst amem", send([](CmdIciSend& c) { c.dst_mem = 1; c.dst_row = 2047; c.rows = 2; }),
       ChipErr::kAmemRange},
      {"wait counter 64", CmdIciWait{64, 1}.encode(), ChipErr::kBadField},
  };
  for (const auto& c : cases) {
    const ProgramResult r = drv.run({cmd_nop(), c.cmd, cmd_nop(), cmd_halt()}, false, 10000);
    EXPECT_EQ(r.err, static_cast<unsigned>(c.err))
        << c.name << ": got " << chip_err_name(r.err) << ", want "
        << chip_err_name(static_cast<unsigned>(c.err));
    EXPECT_EQ(r.err_cmd, 1u) << c.name;
  }
  // The same structs, each field in range: no error (a DMA and a VPU op that do run).
  const ProgramResult ok = drv.run({dma([](CmdDma& c) { c.tail = 3; }),
                                    vpu([](CmdVpu& c) { c.vop = 0; c.dst_row = 8; }), cmd_halt()},
                                   false, 10000);
  EXPECT_EQ(ok.err, 0u) << chip_err_name(ok.err);
}

TEST(ChipErrors, IllegalCommandsSetTheErrorRegister) {
  LoneChip drv("4x4");
  const uint32_t hbm = static_cast<uint32_t>(drv.shape().hbm_bytes);
  const std::vector<BadCase> cases = {
      {"opcode 12", ChipCmd::make(static_cast<ChipOp>(12), 0, 0, 0, 0, 0, 0), 1},
      {"ici send zero rows", cmd_ici_send(Mem::kVmem, 0, 0, {0, 0, 0}, Mem::kVmem, 8, 0), 3},
      {"ici send counter 64", cmd_ici_send(Mem::kVmem, 0, 1, {0, 0, 0}, Mem::kVmem, 8, 64), 3},
      {"ici send outside the pod", cmd_ici_send(Mem::kVmem, 0, 1, {1, 0, 0}, Mem::kVmem, 8, 0),
       3},
      {"ici send src range", cmd_ici_send(Mem::kAmem, 2047, 2, {0, 0, 0}, Mem::kVmem, 8, 0), 5},
      {"ici send dst range", cmd_ici_send(Mem::kVmem, 0, 2, {0, 0, 0}, Mem::kVmem, 4095, 0), 4},
      {"ici wait counter 64", cmd_ici_wait(64, 1), 3},
      {"ici send wait counter 64",
       cmd_ici_send(Mem::kVmem, 0, 1, {0, 0, 0}, Mem::kVmem, 8, 0, 0, 64), 3},
      {"vpu x counter 64", cmd_vpu(VpuCmdArgs{0, false, 0, Mem::kVmem, 0, Mem::kVmem, 0, false,
                                              Mem::kVmem, 8, 1, 1, 64}),
       3},
      {"vpu sig counter 64", cmd_vpu(VpuCmdArgs{0, false, 0, Mem::kVmem, 0, Mem::kVmem, 0,
                                                false, Mem::kVmem, 8, 1, 1, -1, 64}),
       3},
      {"dma dir 3", ChipCmd::make(ChipOp::kDma, 3, 0, 1, 64, 0, 0), 3},
      {"vmem range", cmd_dma(DmaDir::kHbmToVmem, false, 4095, 2, 32, 0, 32), 4},
      {"amem range", cmd_dma(DmaDir::kAmemToHbm, false, 2047, 1, 64, 0, 0), 5},
      {"hbm range", cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 64, hbm - 32, 0), 6},
      {"misaligned write", cmd_dma(DmaDir::kVmemToHbm, false, 0, 1, 16, 16, 0), 7},
      {"matmul no weights", cmd_matmul(0, 4, 0, false), 8},
      {"vpu reduction", cmd_vpu(VpuCmdArgs{9}), 3},
      {"dma tail on a write", cmd_dma(DmaDir::kVmemToHbm, false, 0, 1, 64, 0, 0, 1), 3},
      {"dma tail = lanes", cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 64, 0, 0, 4), 3},
  };
  for (const auto& c : cases) {
    const ProgramResult r = drv.run({cmd_nop(), c.cmd, cmd_nop(), cmd_halt()}, false, 10000);
    EXPECT_EQ(r.err, c.err) << c.name;
    EXPECT_EQ(r.err_cmd, 1u) << c.name;
  }
  // A LOADW with every weight bank loaded and waiting would hang: it is an error instead. One
  // LOADW fewer is legal (every bank holds a tile; a fresh chip, as loaded tiles stay loaded).
  std::vector<ChipCmd> prog(drv.shape().wbanks + 1, cmd_loadw(0));
  prog.push_back(cmd_halt());
  const ProgramResult r = drv.run(prog, false, 10000);
  EXPECT_EQ(r.err, 9u);
  EXPECT_EQ(r.err_cmd, drv.shape().wbanks);
  {
    LoneChip fresh("4x4");
    prog.erase(prog.begin());
    EXPECT_EQ(fresh.run(prog, false, 10000).err, 0u);
  }
  EXPECT_THROW(drv.run({ChipCmd::make(static_cast<ChipOp>(15), 0, 0, 0, 0, 0, 0)}), ChipError);
}

// A chip alone is a 1x1x1 pod: ICI_SEND to itself goes through its router's local port. The
// counter gates the DMA that reads the rows back; the rows cross as whole f32 rows, bit for bit.
TEST(ChipIci, SendToSelfWritesRowsAndBumpsTheCounter) {
  for (const std::string variant : {"4x4", "16x16"}) {
    LoneChip drv(variant);
    const unsigned L = drv.shape().cols;
    const uint32_t rows = 2 * kIciPacketRows + 12;  // three packets, the last of 12 rows
    const uint32_t heads = 3;
    std::mt19937 rng(11);
    std::vector<uint32_t> x(rows * L);
    for (auto& v : x) v = static_cast<uint32_t>(rng());
    const uint64_t ax = drv.alloc(x.size() * 4), ao = drv.alloc(x.size() * 4);
    drv.write(ax, x.data(), x.size() * 4);
    const uint32_t bytes = rows * L * 4;
    const ProgramResult r = drv.run(
        {cmd_dma(DmaDir::kHbmToVmem, false, 100, 1, bytes, static_cast<uint32_t>(ax), 0),
         cmd_ici_send(Mem::kVmem, 100, rows, {0, 0, 0}, Mem::kAmem, 300, 5),
         cmd_ici_wait(5, rows),
         cmd_dma(DmaDir::kAmemToHbm, false, 300, 1, bytes, static_cast<uint32_t>(ao), 0),
         cmd_halt()});
    EXPECT_EQ(r.err, 0u) << variant;
    EXPECT_EQ(r.delta[kStatIciTxFlits], rows + heads) << variant;
    EXPECT_EQ(r.delta[kStatIciRxFlits], rows + heads) << variant;
    EXPECT_GE(r.delta[kStatIciBusy], rows + heads) << variant;
    std::vector<uint32_t> out(x.size());
    drv.read(ao, out.data(), bytes);
    EXPECT_EQ(out, x) << variant;
  }
}

// ICI_WAIT is a semaphore: it takes its value off the counter, so a second wait for rows that
// were already consumed would block; the program then hangs and the driver says so.
TEST(ChipIci, WaitConsumesTheCounter) {
  LoneChip drv("4x4");
  const ProgramResult r = drv.run({cmd_ici_send(Mem::kVmem, 0, 8, {0, 0, 0}, Mem::kVmem, 64, 3),
                                   cmd_ici_wait(3, 5), cmd_ici_wait(3, 3), cmd_halt()});
  EXPECT_EQ(r.err, 0u);
  EXPECT_GE(r.delta[kStatIciWait], 1u);  // the first wait issued before the rows were there
  EXPECT_THROW(drv.run({cmd_ici_wait(3, 1), cmd_halt()}, true, 2000), ChipError);
}

// Chaining (docs/isa.md): a reduction whose x rows arrive over ICI reads each as it lands
// (x_wait), and a send forwards a reduction's rows as the VPU writes them (sig + wait_rows). A
// chip alone sends to itself: x (three packets of rows) goes out on counter 5 and is reduced
// into y as it lands; the sums go back out on counter 7 as they are written (sig on counter 6)
// and are stored after an ICI_WAIT. The same program with an ICI_WAIT before the reduction and
// the send held by the VPU (the unchained way) gives the same bits, a row at a time later.
TEST(ChipIci, ReductionsAndSendsTakeTheirRowsAsTheyCome) {
  for (const std::string& variant : built_among({"4x4", "16x16"})) {
    const uint32_t rows = 2 * kIciPacketRows + 8;  // three packets; whole 64-byte bursts
    std::map<bool, uint64_t> cycles;
    for (bool chained : {true, false}) {
      SCOPED_TRACE(variant + (chained ? " chained" : " unchained"));
      LoneChip drv(variant);  // a fresh chip each: the hang checks below leave a wait queued
      const uint32_t L = static_cast<uint32_t>(drv.shape().cols), rb = 4 * L;
      std::mt19937_64 rng(77 + L);
      std::normal_distribution<float> nd(0.0f, 3.0f);
      std::vector<uint32_t> in(2 * rows * L);
      for (auto& v : in) v = f32_bits(nd(rng));
      const uint64_t src = drv.alloc(in.size() * 4), out = drv.alloc(rows * rb);
      drv.write(src, in.data(), in.size() * 4);
      std::vector<uint32_t> want(rows * L);
      for (uint32_t i = 0; i < rows * L; ++i)
        want[i] = vpu_lane(VpuOp::kAdd, in[i], in[rows * L + i], 0x80000000u);
      // VMEM: x at 0, y at 1000 (the sums in place), x lands at 2000, the sums at 3000.
      VpuCmdArgs red = vpu_rows(VpuOp::kAdd, Mem::kVmem, 2000, 1000, 1000, rows);
      std::vector<ChipCmd> prog = {
          cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, rows * rb, static_cast<uint32_t>(src), 0),
          cmd_dma(DmaDir::kHbmToVmem, false, 1000, 1, rows * rb,
                  static_cast<uint32_t>(src + rows * rb), 0),
          cmd_fence(),
          cmd_ici_send(Mem::kVmem, 0, rows, {0, 0, 0}, Mem::kVmem, 2000, 5)};
      if (chained) {
        red.x_counter = 5;
        red.sig_counter = 6;
        prog.push_back(cmd_vpu(red));
        prog.push_back(
            cmd_ici_send(Mem::kVmem, 1000, rows, {0, 0, 0}, Mem::kVmem, 3000, 7, 0, 6));
      } else {
        prog.push_back(cmd_ici_wait(5, rows));
        prog.push_back(cmd_vpu(red));
        prog.push_back(cmd_ici_send(Mem::kVmem, 1000, rows, {0, 0, 0}, Mem::kVmem, 3000, 7));
      }
      prog.push_back(cmd_ici_wait(7, rows));
      prog.push_back(
          cmd_dma(DmaDir::kVmemToHbm, false, 3000, 1, rows * rb, static_cast<uint32_t>(out), 0));
      prog.push_back(cmd_halt());
      const ProgramResult r = drv.run(prog);
      ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
      cycles[chained] = r.cycles;
      std::vector<uint32_t> got(rows * L);
      drv.read(out, got.data(), got.size() * 4);
      EXPECT_EQ(got, want);
      // The reduction took every row it was sent (the ICI_WAIT's counter 7 unchained): a wait
      // for one more hangs (and stays queued: one check per chip).
      EXPECT_THROW(drv.run({cmd_ici_wait(chained ? 5 : 7, 1), cmd_halt()}, true, 2000),
                   ChipError);
    }
    // Unchained, the reduction starts after the last row landed and the send after the last
    // sum: about `rows` cycles of the VPU more (the link, a row per cycle here, is the same).
    EXPECT_LT(cycles[true] + rows / 2, cycles[false]) << variant;
  }
}

// The VPU holds four commands and feeds the rows of a younger reduction while an older one waits
// for its x rows (tpu_vpu_unit): here a chip alone sends itself the x rows of two reductions,
// those of the second first, so the first reduction waits for rows that land after all of the
// second's. The second runs ahead (and finishes first; the unit still reports it second) when
// the two signal different counters; signalling one counter, a send waiting on it would take
// their rows in order, so they run one after the other. Taking x from one counter they also run in order (each
// counter's rows in order). The bits are the same every way.
TEST(ChipVpu, AYoungerReductionRunsAheadOfAnOlderOneWaitingForItsRows) {
  const uint32_t rows = kIciPacketRows + 8;
  enum Way { kAhead, kOneSigCounter, kOneXCounter };
  std::map<int, uint64_t> cycles;
  for (int way : {kAhead, kOneSigCounter, kOneXCounter}) {
    SCOPED_TRACE(way);
    LoneChip drv("4x4");
    const uint32_t L = static_cast<uint32_t>(drv.shape().cols), rb = 4 * L;
    std::mt19937_64 rng(91);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<uint32_t> in(4 * rows * L);  // x1, y1, x2, y2
    for (auto& v : in) v = f32_bits(nd(rng));
    const uint64_t src = drv.alloc(in.size() * 4), out = drv.alloc(2 * rows * rb);
    drv.write(src, in.data(), in.size() * 4);
    // VMEM: x1 at 0, y1 at 500, x2 at 1000, y2 at 1500; x1 lands at 2000, x2 at 2500; the sums
    // in place of y1 and y2.
    VpuCmdArgs red1 = vpu_rows(VpuOp::kAdd, Mem::kVmem, 2000, 500, 500, rows);
    VpuCmdArgs red2 = vpu_rows(VpuOp::kAdd, Mem::kVmem, 2500, 1500, 1500, rows);
    red1.x_counter = 5;
    red2.x_counter = way == kOneXCounter ? 5 : 8;
    red1.sig_counter = 6;
    red2.sig_counter = way == kOneSigCounter ? 6 : 9;
    std::vector<ChipCmd> prog;
    for (uint32_t b = 0; b < 4; ++b)
      prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, 500 * b, 1, rows * rb,
                             static_cast<uint32_t>(src + b * rows * rb), 0));
    prog.push_back(cmd_fence());
    if (way == kOneXCounter) {  // x1 first: the counter's rows in the order they are taken
      prog.push_back(cmd_ici_send(Mem::kVmem, 0, rows, {0, 0, 0}, Mem::kVmem, 2000, 5));
      prog.push_back(cmd_ici_send(Mem::kVmem, 1000, rows, {0, 0, 0}, Mem::kVmem, 2500, 5));
    } else {
      prog.push_back(cmd_ici_send(Mem::kVmem, 1000, rows, {0, 0, 0}, Mem::kVmem, 2500, 8));
      prog.push_back(cmd_ici_send(Mem::kVmem, 0, rows, {0, 0, 0}, Mem::kVmem, 2000, 5));
    }
    prog.push_back(cmd_vpu(red1));
    prog.push_back(cmd_vpu(red2));
    prog.push_back(
        cmd_dma(DmaDir::kVmemToHbm, false, 500, 1, rows * rb, static_cast<uint32_t>(out), 0));
    prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, 1500, 1, rows * rb,
                           static_cast<uint32_t>(out + rows * rb), 0));
    prog.push_back(cmd_halt());
    const ProgramResult r = drv.run(prog);
    ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
    cycles[way] = r.cycles;
    std::vector<uint32_t> got(2 * rows * L);
    drv.read(out, got.data(), got.size() * 4);
    for (uint32_t i = 0; i < rows * L; ++i) {
      ASSERT_EQ(got[i], vpu_lane(VpuOp::kAdd, in[i], in[rows * L + i], 0x80000000u)) << i;
      ASSERT_EQ(got[rows * L + i],
                vpu_lane(VpuOp::kAdd, in[2 * rows * L + i], in[3 * rows * L + i], 0x80000000u))
          << i;
    }
  }
  // Ahead, the second reduction's rows go in while the first waits, so its sums are done about
  // `rows` cycles sooner; the program ends about half that sooner (418 vs 452 cycles), as the
  // two stores then go out together and share the DMA engine.
  EXPECT_LT(cycles[kAhead] + rows / 4, cycles[kOneSigCounter])
      << cycles[kAhead] << " vs " << cycles[kOneSigCounter];
}

// A send that forwards its VPU's rows as they are written holds them against later writers, and
// with wait_local only against them: a later reader of those rows waits for the VPU command
// (which holds them until written), not for the send. Here the send queues behind a long send
// in its context, and a second reduction reads the sums: without wait_local it waits for the
// send, and its store goes out that much later; the bits are the same.
TEST(ChipIci, ASendOfItsVpusRowsHoldsLaterReadersOnlyWithoutWaitLocal) {
  const uint32_t big = 2 * kIciPacketRows + 8, rows = 8;
  std::map<bool, uint64_t> cycles;
  std::map<bool, std::vector<uint32_t>> got;
  for (bool local : {true, false}) {
    SCOPED_TRACE(local ? "wait_local" : "held");
    LoneChip drv("4x4");
    const uint32_t L = static_cast<uint32_t>(drv.shape().cols), rb = 4 * L;
    std::mt19937_64 rng(5);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<uint32_t> in(2 * big * L);
    for (auto& v : in) v = f32_bits(nd(rng));
    const uint64_t src = drv.alloc(in.size() * 4), out = drv.alloc(rows * rb);
    drv.write(src, in.data(), in.size() * 4);
    VpuCmdArgs sum = vpu_rows(VpuOp::kAdd, Mem::kVmem, 0, 200, 200, rows);
    sum.sig_counter = 6;
    const VpuCmdArgs again = vpu_rows(VpuOp::kAdd, Mem::kVmem, 0, 200, 700, rows);
    const ProgramResult r = drv.run({
        cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, big * rb, static_cast<uint32_t>(src), 0),
        cmd_dma(DmaDir::kHbmToVmem, false, 200, 1, big * rb,
                static_cast<uint32_t>(src + big * rb), 0),
        cmd_fence(),
        cmd_ici_send(Mem::kVmem, 0, big, {0, 0, 0}, Mem::kVmem, 400, 5),
        cmd_vpu(sum),
        cmd_ici_send(Mem::kVmem, 200, rows, {0, 0, 0}, Mem::kVmem, 600, 7, 0, 6, local),
        cmd_vpu(again),
        cmd_dma(DmaDir::kVmemToHbm, false, 700, 1, rows * rb, static_cast<uint32_t>(out), 0),
        cmd_ici_wait(7, rows), cmd_ici_wait(5, big), cmd_halt()});
    ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
    cycles[local] = r.cycles;
    got[local].resize(rows * L);
    drv.read(out, got[local].data(), rows * rb);
    for (uint32_t i = 0; i < rows * L; ++i) {
      const uint32_t s = vpu_lane(VpuOp::kAdd, in[i], in[big * L + i], 0x80000000u);
      ASSERT_EQ(got[local][i], vpu_lane(VpuOp::kAdd, in[i], s, 0x80000000u)) << i;
    }
  }
  EXPECT_EQ(got[true], got[false]);
  // Held, the second reduction and its store wait for the long send (about `big` flits).
  EXPECT_LT(cycles[true] + 10, cycles[false]) << cycles[true] << " vs " << cycles[false];
}

// Two consumers taking from one counter at once would race for its rows: CounterNoUnderflow_A
// fires (here a reduction waiting for its row, and an ICI_WAIT for the same row behind it).
TEST(ChipIci, TwoConsumersOfOneCounterTripTheUnderflowAssertion) {
  LoneChip drv("4x4");
  VpuCmdArgs red = vpu_rows(VpuOp::kAdd, Mem::kVmem, 300, 400, 400, 1);
  red.x_counter = 5;
  std::string what;
  try {
    drv.run({cmd_ici_send(Mem::kVmem, 0, 1, {0, 0, 0}, Mem::kVmem, 300, 5), cmd_vpu(red),
             cmd_ici_wait(5, 1), cmd_halt()});
  } catch (const ChipError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("RTL assertion failed"), std::string::npos) << what;
}

TEST(ChipWaves, GtkwSignalsAreInTheDump) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd not found: scripts/deps.sh installs gtkwave";
  const std::string fst = std::string(TPU_SOURCE_DIR) + "/waves/chip_test.fst";
  {
    LoneChip drv("4x4", HbmConfig{}, fst);
    std::mt19937_64 rng(5);
    const auto a = random_bf16(8 * 8, rng), w = random_bf16(8 * 8, rng);
    std::vector<float> b(8, 1.0f);
    MatmulOptions opt;
    opt.bias = &b;
    opt.relu = true;
    const MatmulRun r = drv.matmul(a, w, 8, 8, 8, opt);
    EXPECT_EQ(r.c_bits, golden_chip_matmul(a, w, 8, 8, 8, opt));
  }
  const auto wanted = gtkw_signals(std::string(TPU_SOURCE_DIR) + "/waves/chip.gtkw");
  ASSERT_GT(wanted.size(), 20u);
  const auto missing = missing_signals(wanted, fst_signals(fst));
  EXPECT_TRUE(missing.empty()) << "first missing: " << (missing.empty() ? "" : missing[0]);
  std::remove(fst.c_str());
}

// The harness leaves out only the evaluations that would change nothing (the proof atop
// ChipDutImpl, tb/chip/chip_dut.cc): while the inputs stand still, every falling edge goes
// unevaluated and every rising edge runs without the model's input region (the count reads the
// model, so a build whose Verilator output was not patched fails here); a cycle with a changed
// input is evaluated in full; TPUSIM_FULL_EVAL=1 leaves out nothing; another value is an error
// that names the variable.
TEST(ChipEvalSkips, OnlyWhileTheInputsStandStill) {
  const auto cycles = [](ChipDut& d, int n) {
    for (int c = 0; c < n; ++c) {
      d.eval();
      d.tick();
    }
  };
  unsetenv("TPUSIM_FULL_EVAL");
  auto d = make_chip("4x4");
  cycles(*d, 1);
  const ChipDut::EvalSkips s0 = d->eval_skips();
  cycles(*d, 10);
  const ChipDut::EvalSkips s1 = d->eval_skips();
  EXPECT_EQ(s1.falling_edges - s0.falling_edges, 10u);
  EXPECT_EQ(s1.input_regions - s0.input_regions, 10u);
  d->set_clear(true);  // the falling edge sees it, and the rising edge must too
  d->eval();
  d->tick();
  EXPECT_EQ(d->eval_skips().falling_edges, s1.falling_edges);
  EXPECT_EQ(d->eval_skips().input_regions, s1.input_regions + 1);  // unchanged since the fall
  d->set_clear(false);
  d->tick();  // changed after the last evaluation: the rising edge runs the input region
  EXPECT_EQ(d->eval_skips().input_regions, s1.input_regions + 1);
  EXPECT_FALSE(d->busy());

  setenv("TPUSIM_FULL_EVAL", "1", 1);
  auto full = make_chip("4x4");
  cycles(*full, 10);
  EXPECT_EQ(full->eval_skips().falling_edges, 0u);
  EXPECT_EQ(full->eval_skips().input_regions, 0u);

  setenv("TPUSIM_FULL_EVAL", "yes", 1);
  try {
    make_chip("4x4");
    ADD_FAILURE() << "TPUSIM_FULL_EVAL=yes was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TPUSIM_FULL_EVAL='yes': must be 0"), std::string::npos)
        << e.what();
  }
  unsetenv("TPUSIM_FULL_EVAL");
}

// plan_epilogue: relu(Y + bias) in place on an f32 matrix in HBM, per element as the VPU golden
// does it; the matrix's other rows and the data around it untouched.
TEST(ChipEpilogue, BiasAndReluInPlace) {
  for (const char* variant : {"4x4", "16x16"}) {
    for (int mode = 0; mode < 3; ++mode) {  // bias + relu, relu alone, bias alone
      LoneChip drv(variant);
      const std::size_t rows = 37, cols = 40;
      const HbmMatrix guard = drv.alloc_matrix(1, 64, Dtype::kF32);
      const HbmMatrix y = drv.alloc_matrix(rows, cols, Dtype::kF32);
      const HbmMatrix b = drv.alloc_matrix(1, cols, Dtype::kF32);
      std::mt19937 rng(static_cast<unsigned>(mode));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> yv(rows * cols), bv(cols), gv(64, 7.0f);
      for (auto& v : yv) v = nd(rng);
      for (auto& v : bv) v = nd(rng);
      drv.write_matrix(y, yv);
      drv.write_matrix(b, bv);
      drv.write_matrix(guard, gv);
      const bool bias = mode != 1, relu = mode != 2;
      std::vector<ChipCmd> prog = drv.plan_epilogue(y, bias ? &b : nullptr, relu);
      prog.push_back(cmd_halt());
      drv.run(prog);
      const auto got = drv.read_matrix(y);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          uint32_t e = f32_bits(yv[i * cols + j]);
          if (bias) e = vpu_lane(VpuOp::kAdd, e, f32_bits(bv[j]), 0);
          if (relu) e = vpu_lane(VpuOp::kRelu, e, e, 0);
          bad += got[i * cols + j] != e;
        }
      EXPECT_EQ(bad, 0u) << variant << " mode " << mode;
      EXPECT_EQ(drv.read_matrix(guard)[0], f32_bits(7.0f));
    }
  }
}

}  // namespace
}  // namespace tpu
