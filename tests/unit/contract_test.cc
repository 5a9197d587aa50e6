// The generated hardware contract (configs/tpu_contract.yaml -> tpu_contract.h): every field of
// every opcode round-trips at its documented bit position, fields never overlap the opcode or
// each other, and the encoders of tb/pod/chip_contract.h give the words they gave before the
// contract was generated (the shifts below are the hand-written encoders they replaced).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "chip_contract.h"

namespace tpu {
namespace {

// The hand-written encoders as they were, kept here only as the reference for word identity.
namespace legacy {
ChipCmd make(uint32_t op, uint32_t flags, uint32_t f1, uint32_t f2, uint32_t f3, uint32_t w2,
             uint32_t w3) {
  ChipCmd c;
  c.w[0] = (op & 0xFu) | ((flags & 0xFFFu) << 4) | ((f1 & 0xFFFFu) << 16);
  c.w[1] = (f2 & 0xFFFFu) | ((f3 & 0xFFFFu) << 16);
  c.w[2] = w2;
  c.w[3] = w3;
  return c;
}
}  // namespace legacy

bool bit(const ChipCmd& c, unsigned b) { return ((c.w[b / 32] >> (b % 32)) & 1u) != 0; }

template <class Cmd>
void check_fields(std::mt19937& rng) {
  SCOPED_TRACE(Cmd::kName);
  // An empty struct encodes to its opcode alone.
  const ChipCmd empty = Cmd{}.encode();
  EXPECT_EQ(empty.op(), Cmd::kOp);
  for (unsigned b = 4; b < 128; ++b) EXPECT_FALSE(bit(empty, b)) << "bit " << b;
  unsigned prev_end = 4;
  for (unsigned i = 0; i < Cmd::kFields.size(); ++i) {
    const CmdField& f = Cmd::kFields[i];
    SCOPED_TRACE(f.name);
    ASSERT_GE(f.lsb, prev_end) << "fields overlap, overlap the opcode or are out of order";
    ASSERT_LE(f.lsb + f.width, 128u);
    ASSERT_STRNE(f.doc, "");
    prev_end = f.lsb + f.width;
    const uint32_t mask = f.width == 32 ? 0xFFFFFFFFu : (1u << f.width) - 1u;
    // All ones (and more): exactly the documented bits are set, the opcode is kept.
    Cmd all;
    all.field(i) = 0xFFFFFFFFu;
    const ChipCmd c = all.encode();
    EXPECT_EQ(c.op(), Cmd::kOp);
    for (unsigned b = 4; b < 128; ++b)
      EXPECT_EQ(bit(c, b), b >= f.lsb && b < f.lsb + f.width) << "bit " << b;
    EXPECT_EQ(Cmd::decode(c).field(i), mask);
    EXPECT_EQ(c.get(f.lsb, f.width), mask);
    // Random values in every field at once come back unchanged.
    for (int n = 0; n < 16; ++n) {
      Cmd r;
      for (unsigned j = 0; j < Cmd::kFields.size(); ++j) {
        const unsigned w = Cmd::kFields[j].width;
        r.field(j) = static_cast<uint32_t>(rng()) & (w == 32 ? 0xFFFFFFFFu : (1u << w) - 1u);
      }
      Cmd back = Cmd::decode(r.encode());
      for (unsigned j = 0; j < Cmd::kFields.size(); ++j)
        EXPECT_EQ(back.field(j), r.field(j)) << Cmd::kFields[j].name;
      EXPECT_EQ(r.encode().get(f.lsb, f.width), r.field(i));
    }
  }
}

TEST(Contract, EveryFieldOfEveryOpcodeRoundTripsAtItsBits) {
  std::mt19937 rng(7);
  std::set<uint32_t> codes;
  std::apply(
      [&](auto... cmd) {
        (check_fields<decltype(cmd)>(rng), ...);
        (codes.insert(static_cast<uint32_t>(decltype(cmd)::kOp)), ...);
      },
      ChipCmdTypes{});
  EXPECT_EQ(codes.size(), std::tuple_size<ChipCmdTypes>::value) << "an opcode is used twice";
}

TEST(Contract, GenericViewMatchesTheWordLayout) {
  const ChipCmd c = ChipCmd::make(ChipOp::kVpu, 0xABC, 0x1234, 0x5678, 0x9ABC, 0xDEADBEEF,
                                  0xCAFEF00D);
  EXPECT_EQ(c.w[0], 0x1234ABC4u);
  EXPECT_EQ(c.w[1], 0x9ABC5678u);
  EXPECT_EQ(c.w[2], 0xDEADBEEFu);
  EXPECT_EQ(c.w[3], 0xCAFEF00Du);
}

TEST(Contract, EncodersGiveTheWordsTheyAlwaysGave) {
  std::mt19937 rng(11);
  auto u = [&](uint32_t mask) { return static_cast<uint32_t>(rng()) & mask; };
  EXPECT_EQ(cmd_nop().w, legacy::make(0, 0, 0, 0, 0, 0, 0).w);
  EXPECT_EQ(cmd_fence().w, legacy::make(5, 0, 0, 0, 0, 0, 0).w);
  EXPECT_EQ(cmd_halt().w, legacy::make(6, 0, 0, 0, 0, 0, 0).w);
  for (int n = 0; n < 200; ++n) {
    const uint32_t dir = u(3), bf = u(1), tail = u(0x1FF), a = u(0x1FFFF), b = u(0x1FFFF),
                   c = u(0x1FFFF), d = u(~0u), e = u(~0u);
    EXPECT_EQ(cmd_dma(static_cast<DmaDir>(dir), bf != 0, a, b, c, d, e, tail).w,
              legacy::make(1, dir | (bf ? 4u : 0u) | ((tail & 0xFFu) << 4), a, b, c, d, e).w);
    EXPECT_EQ(cmd_loadw(a, d).w, legacy::make(2, 0, a, 0, 0, d, 0).w);
    EXPECT_EQ(cmd_matmul(a, b, c, bf != 0, d).w, legacy::make(3, bf, a, b, c, d, 0).w);
    VpuCmdArgs v;
    v.op = u(0xF);
    v.dst_bf16 = u(1) != 0;
    v.src_bf16 = u(7);
    v.x_mem = static_cast<Mem>(u(1));
    v.y_mem = static_cast<Mem>(u(1));
    v.y_bcast = u(1) != 0;
    v.dst_mem = static_cast<Mem>(u(1));
    v.x_row = a;
    v.rows = b;
    v.y_row = c;
    v.dst_row = u(0x1FFFF);
    v.dst_stride = u(0x1FFFF);
    const uint32_t vflags = v.op | (v.dst_bf16 ? 0x10u : 0u) | (v.src_bf16 << 5) |
                            (static_cast<uint32_t>(v.x_mem) << 8) |
                            (static_cast<uint32_t>(v.y_mem) << 9) | (v.y_bcast ? 0x400u : 0u) |
                            (static_cast<uint32_t>(v.dst_mem) << 11);
    // The op left w0[7:4] for w3[28:24] when it grew to 5 bits (the transcendental ops, issue
    // 34); every other bit is where it always was.
    EXPECT_EQ(cmd_vpu(v).w, legacy::make(4, vflags & ~0xFu, v.x_row, v.rows, v.y_row,
                                         (v.dst_row & 0xFFFFu) | ((v.dst_stride & 0xFFFFu) << 16),
                                         v.op << 24)
                                .w);
    // The destination's coordinates: 4 bits each since the pod grew to 16 per dimension (3
    // before; the counter stayed at w2[23:16]).
    const std::array<int, 3> dst{static_cast<int>(u(15)), static_cast<int>(u(15)),
                                 static_cast<int>(u(15))};
    const int tie = static_cast<int>(u(3)) - 1;
    const uint32_t sm = u(1), dm = u(1), cnt = u(0x1FF);
    const uint32_t coord = static_cast<uint32_t>(dst[0]) | (static_cast<uint32_t>(dst[1]) << 4) |
                           (static_cast<uint32_t>(dst[2]) << 8);
    const uint32_t hint = tie > 0 ? 0x4u : tie < 0 ? 0xCu : 0u;
    EXPECT_EQ(cmd_ici_send(static_cast<Mem>(sm), a, b, dst, static_cast<Mem>(dm), c, cnt, tie).w,
              legacy::make(7, sm | (dm << 1) | hint, a, b, c, coord | ((cnt & 0xFFu) << 16), 0).w);
    EXPECT_EQ(cmd_ici_wait(a, d).w, legacy::make(8, 0, a, 0, 0, d, 0).w);
  }
}

// VROW (op 9): its fields where docs/isa.md's table puts them, and the VPU command's fields that it
// shares (memories, rows, op) at the VPU's bits, so the chip feeds one unit from either.
TEST(Contract, VrowFieldsSitAtTheDocumentedBits) {
  std::mt19937 rng(13);
  auto u = [&](uint32_t mask) { return static_cast<uint32_t>(rng()) & mask; };
  for (int n = 0; n < 200; ++n) {
    const uint32_t op = u(0x1F), mem = u(1), x = u(0xFFFF), rows = u(0xFFFF), y = u(0xFFFF),
                   dst = u(0xFFFF), beats = u(0xFF), bs = u(0xFFFF), rs = u(0xFFFF);
    const ChipCmd c =
        cmd_vrow(static_cast<VpuOp>(op), static_cast<Mem>(mem), x, rows, beats, bs, rs, y, dst);
    EXPECT_EQ(c.w, legacy::make(9, (mem << 8) | (mem << 9) | (mem << 11), x, rows, y,
                                dst | (beats << 16) | ((bs & 0xFFu) << 24),
                                (bs >> 8) | (rs << 8) | (op << 24))
                       .w);
    const CmdVpu v = CmdVpu::decode(c);
    EXPECT_EQ(v.vop, op);
    EXPECT_EQ(v.x_mem, mem);
    EXPECT_EQ(v.dst_mem, mem);
    EXPECT_EQ(v.x_row, x);
    EXPECT_EQ(v.rows, rows);
    EXPECT_EQ(v.y_row, y);
    EXPECT_EQ(v.dst_row, dst);
  }
  EXPECT_EQ(static_cast<uint32_t>(ChipOp::kVrow), 9u);
}

TEST(Contract, DecodeReadsTheEncodersFields) {
  const CmdIciSend s =
      CmdIciSend::decode(cmd_ici_send(Mem::kAmem, 10, 32, {1, 2, 3}, Mem::kVmem, 40, 5, -1));
  EXPECT_EQ(s.src_mem, 1u);
  EXPECT_EQ(s.dst_mem, 0u);
  EXPECT_EQ(s.tie, 3u);
  EXPECT_EQ(s.src_row, 10u);
  EXPECT_EQ(s.rows, 32u);
  EXPECT_EQ(s.dst_row, 40u);
  EXPECT_EQ(s.dst_x, 1u);
  EXPECT_EQ(s.dst_y, 2u);
  EXPECT_EQ(s.dst_z, 3u);
  EXPECT_EQ(s.counter, 5u);
  // The destination's coordinates take 4 bits each (16 chips per dimension).
  const CmdIciSend far =
      CmdIciSend::decode(cmd_ici_send(Mem::kVmem, 0, 1, {15, 14, 13}, Mem::kVmem, 0, 63));
  EXPECT_EQ(far.dst_x, 15u);
  EXPECT_EQ(far.dst_y, 14u);
  EXPECT_EQ(far.dst_z, 13u);
  EXPECT_EQ(far.counter, 63u);
  const CmdDma d = CmdDma::decode(cmd_dma(DmaDir::kAmemToHbm, true, 7, 3, 128, 4096, 256, 5));
  EXPECT_EQ(d.dir, static_cast<uint32_t>(DmaDir::kAmemToHbm));
  EXPECT_EQ(d.bf16, 1u);
  EXPECT_EQ(d.tail, 5u);
  EXPECT_EQ(d.mem_row, 7u);
  EXPECT_EQ(d.rows, 3u);
  EXPECT_EQ(d.seg_bytes, 128u);
  EXPECT_EQ(d.hbm_addr, 4096u);
  EXPECT_EQ(d.stride, 256u);
  // DMA_IDX (opcode 10): every field at its bits.
  const ChipCmd xw = cmd_dma_idx(true, true, 0x1234, 0x0567, 0x0080, 0x89ABCDEFu, 0x0FED, 0xBEEF);
  EXPECT_EQ(xw.op(), ChipOp::kDmaIdx);
  EXPECT_EQ(xw.w[0], 0x1234003Au);  // op 10, scatter [4], bf16 [5]
  EXPECT_EQ(xw.w[1], 0x00800567u);
  EXPECT_EQ(xw.w[2], 0x89ABCDEFu);
  EXPECT_EQ(xw.w[3], 0xBEEF0FEDu);
  const CmdDmaIdx x = CmdDmaIdx::decode(xw);
  EXPECT_EQ(x.scatter, 1u);
  EXPECT_EQ(x.table_rows, 0xBEEFu);
  EXPECT_EQ(x.idx_row, 0x0FEDu);
}

TEST(Contract, ErrorAndStatisticNamesAreTheReportNames) {
  EXPECT_STREQ(chip_err_name(static_cast<unsigned>(ChipErr::kIllegalOp)), "illegal_opcode");
  EXPECT_STREQ(chip_err_name(static_cast<unsigned>(ChipErr::kWeightsFull)), "weights_overflow");
  EXPECT_STREQ(chip_err_name(200), "unknown");
  EXPECT_STREQ(chip_err_name(static_cast<unsigned>(ChipErr::kHbmUncorr)), "hbm_uncorrectable");
  EXPECT_STREQ(chip_err_name(static_cast<unsigned>(ChipErr::kIciLinkDown)), "ici_link_down");
  EXPECT_STREQ(chip_err_name(static_cast<unsigned>(ChipErr::kIdxRange)), "index_out_of_range");
  EXPECT_EQ(static_cast<unsigned>(kNumChipStats), 32u);
  EXPECT_STREQ(chip_stat_name(kStatEccCorrected), "ecc_corrected");
  EXPECT_STREQ(chip_stat_name(kStatEccUncorr), "ecc_uncorrectable");
  EXPECT_STREQ(chip_stat_name(kStatOverlap), "dma_mxu_overlap");
  EXPECT_STREQ(chip_stat_name(kStatHostRdBytes), "host_rd_bytes");
  EXPECT_STREQ(chip_stat_name(kStatClsIdle), "cls_idle");
  EXPECT_STREQ(chip_stat_name(kNumChipStats), "unknown");
  std::set<std::string> names;
  for (unsigned i = 0; i < kNumChipStats; ++i) names.insert(chip_stat_name(i));
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumChipStats)) << "a statistic is named twice";
}

TEST(Contract, VariantTableHasTheNamedShapes) {
  std::set<unsigned> ids;
  for (const auto& v : kChipVariants) {
    SCOPED_TRACE(v.name);
    EXPECT_TRUE(ids.insert(v.id).second) << "variant id used twice";
    EXPECT_EQ(std::to_string(v.mxu_rows) + "x" + std::to_string(v.mxu_cols), v.name);
    EXPECT_GE(v.mxu_wbanks, 2u);
    EXPECT_EQ(v.mxu_rows % v.mxu_wrows, 0u);
    // tb/mxu/mxu_variants.cc builds every MXU bench with the first variant's banks and rows.
    EXPECT_EQ(v.mxu_wbanks, kChipVariants[0].mxu_wbanks);
    EXPECT_EQ(v.mxu_wrows, kChipVariants[0].mxu_wrows);
  }
  ASSERT_NE(find_chip_variant("16x16"), nullptr);
  EXPECT_EQ(find_chip_variant("16x16")->id, 2u);
  EXPECT_EQ(find_chip_variant("16x16")->vmem_rows, 8192u);
  EXPECT_EQ(find_chip_variant("3x3"), nullptr);
}

}  // namespace
}  // namespace tpu
