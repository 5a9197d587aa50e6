// The chip matmul planner without RTL (sw/driver/matmul_plan.h): the tiler's choices, the
// VMEM/AMEM layout's bounds, the emitter's commands decoded for a small case, and the whole
// planner's command words pinned for a sweep of shapes on 4x4, 8x8 and 16x16 chips.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "chip_driver.h"
#include "fake_host_port.h"
#include "matmul_plan.h"
#include "pinned_words.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

// FNV-1a over 32-bit words.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  }
  void add(const std::string& s) {
    for (char c : s) add(static_cast<uint64_t>(static_cast<unsigned char>(c)));
  }
  void add(const std::vector<ChipCmd>& prog) {
    add(prog.size());
    for (const ChipCmd& c : prog)
      for (uint32_t w : pinned_words(c)) add(w);
  }
};

// The sweep's shapes: every M x K x N of these on every variant.
const std::vector<std::size_t> kSweepM = {1, 45, 300, 700};
const std::vector<std::size_t> kSweepK = {16, 100, 300};
const std::vector<std::size_t> kSweepN = {8, 130, 520};

// The planner's output for one shape on one variant, in four modes (plain f32; plain bf16 with
// bias and ReLU; W transposed f32 with a bias; W transposed bf16 with ReLU in a VMEM limit of
// half the rows), and the transpose of A: the words of every command, m_chunk and the command
// count hashed (a shape that does not fit hashes its error message instead).
uint64_t sweep_hash(const std::string& variant, std::size_t m, std::size_t k, std::size_t n) {
  FakeHostPort port(Topology::mesh({1}), variant);
  ChipDriver drv(port, 0);
  Fnv f;
  for (int mode = 0; mode < 4; ++mode) {
    const bool wt = mode >= 2, bf16 = mode % 2 == 1;
    const uint64_t mark = drv.allocated();
    drv.vmem_rows_limit = mode == 3 ? drv.shape().vmem_rows / 2 : 0;
    try {
      const HbmMatrix a = drv.alloc_matrix(m, k, Dtype::kBf16);
      const HbmMatrix w =
          wt ? drv.alloc_matrix(n, k, Dtype::kBf16) : drv.alloc_matrix(k, n, Dtype::kBf16);
      const HbmMatrix c = drv.alloc_matrix(m, n, bf16 ? Dtype::kBf16 : Dtype::kF32);
      const HbmMatrix bias = drv.alloc_matrix(1, n, Dtype::kF32);
      MatmulEpilogue ep;
      ep.bias = mode == 1 || mode == 2 ? &bias : nullptr;
      ep.relu = mode == 1 || mode == 3;
      const MatmulRun r = drv.plan_matmul(c, a, w, ep, wt);
      f.add(r.program);
      f.add(r.m_chunk);
      f.add(r.commands);
      f.add(r.compute_cycles);
      if (mode == 0 && m <= 300) {
        const HbmMatrix at = drv.alloc_matrix(k, m, Dtype::kBf16);
        f.add(drv.plan_transpose(at, a));
      }
    } catch (const std::invalid_argument& e) {
      f.add(std::string(e.what()));
    }
    drv.release(mark);
  }
  return f.h;
}

MatmulProblem problem(std::size_t m, std::size_t k, std::size_t n, bool wt, bool bf16,
                      uint64_t vmem_rows) {
  MatmulProblem p;
  p.m = m;
  p.k = k;
  p.n = n;
  p.w_transposed = wt;
  p.out_bf16 = bf16;
  p.vmem_rows = vmem_rows;
  return p;
}

// The chunks cover M in order, none larger than mt.
void expect_chunks_cover(const MatmulTiling& t) {
  ASSERT_EQ(t.c_rows.size(), t.c_m0.size());
  uint64_t m0 = 0;
  for (std::size_t c = 0; c < t.c_rows.size(); ++c) {
    EXPECT_EQ(t.c_m0[c], m0);
    EXPECT_GE(t.c_rows[c], 1u);
    EXPECT_LE(t.c_rows[c], t.mt);
    m0 += t.c_rows[c];
  }
  EXPECT_EQ(m0, t.p.m);
}

TEST(MatmulTiler, SmallPlainProductKeepsWResidentWithAShortFirstChunk) {
  const ChipShape s = chip_shape("16x16");  // L = 16, VMEM 8192 rows, AMEM 4096
  const MatmulTiling t = tile_matmul(problem(64, 64, 64, false, false, s.vmem_rows), s);
  EXPECT_EQ(t.lanes, 16u);
  EXPECT_EQ(t.kt, 4u);
  EXPECT_EQ(t.nt, 4u);
  EXPECT_EQ(t.nto, 4u);
  EXPECT_EQ(t.k_tail, 0u);
  EXPECT_EQ(t.n_tail, 0u);
  EXPECT_FALSE(t.t_mask);
  EXPECT_EQ(t.gn, 1u);
  EXPECT_EQ(t.pt, 4u);  // a panel per K tile
  EXPECT_EQ(t.qt, 4u);  // of NT tiles
  EXPECT_TRUE(t.w_resident);
  EXPECT_EQ(t.w_bufs, 4u);
  EXPECT_EQ(t.mt, 64u);
  EXPECT_EQ(t.gg, 4u);                                   // 256 bytes of f32: 4 tiles of 16 lanes
  EXPECT_EQ(t.c_rows, (std::vector<uint64_t>{32, 32}));  // 2L first, then the rest
  EXPECT_EQ(t.panels(), 4u);
  EXPECT_EQ(t.tile_cycles(32), 32u);  // a row per cycle beats the banks and the loader
  EXPECT_EQ(t.tile_cycles(4), 9u);    // the loader (8 + 1) and the banks ((4 + 32) / 4)
  expect_chunks_cover(t);
}

TEST(MatmulTiler, TransposedWithKEdgeMasksAndGroupsFourNTiles) {
  const ChipShape s = chip_shape("16x16");
  const MatmulTiling t = tile_matmul(problem(50, 40, 100, true, true, s.vmem_rows), s);
  EXPECT_EQ(t.kt, 3u);
  EXPECT_EQ(t.nt, 7u);
  EXPECT_EQ(t.k_tail, 8u);
  EXPECT_EQ(t.n_tail, 4u);
  EXPECT_TRUE(t.t_mask);
  EXPECT_EQ(t.ktm, 2u);
  EXPECT_EQ(t.gn, 4u);
  EXPECT_EQ(t.pt, 2u);   // ceil(7 / 4) panels
  EXPECT_EQ(t.qt, 12u);  // GN x KT tiles each
  EXPECT_EQ(t.nto, 8u);  // 112 bf16 rounded up to 64-byte bursts: 128
  EXPECT_EQ(t.gg, 8u);
  EXPECT_EQ(t.load_cycles, 16u);  // twice L / wrows
  EXPECT_EQ(t.mt, 50u);
  expect_chunks_cover(t);
}

TEST(MatmulTiler, WideWStreamsInTwoPanelBuffers) {
  const ChipShape s = chip_shape("4x4");  // L = 4, VMEM 4096 rows, AMEM 2048
  // W is 512 x 512: 65536 VMEM rows, never resident. Streamed: 2 panels of 4 x 128 rows; per
  // row of A 128 rows of A, 128 of the output, twice: 5 rows of A per chunk.
  const MatmulTiling t = tile_matmul(problem(20, 512, 512, false, false, s.vmem_rows), s);
  EXPECT_FALSE(t.w_resident);
  EXPECT_EQ(t.w_bufs, 2u);
  EXPECT_EQ(t.mt, 5u);
  EXPECT_EQ(t.c_rows, (std::vector<uint64_t>{5, 5, 5, 5}));
  EXPECT_EQ(t.panels(), 4u * 128u);  // every K tile reloaded per chunk
  expect_chunks_cover(t);
}

TEST(MatmulTiler, LongTransposedKShrinksThePanels) {
  const ChipShape s = chip_shape("16x16");
  // K = 1024: 64 K tiles a panel row. Four N tiles a panel leave no room for A; one leaves 45
  // rows (streamed beats resident's 30).
  const MatmulTiling t = tile_matmul(problem(64, 1024, 64, true, false, s.vmem_rows), s);
  EXPECT_EQ(t.gn, 1u);
  EXPECT_EQ(t.pt, 4u);
  EXPECT_EQ(t.qt, 64u);
  EXPECT_FALSE(t.w_resident);
  EXPECT_EQ(t.mt, 45u);
  EXPECT_EQ(t.c_rows, (std::vector<uint64_t>{32, 32}));
  expect_chunks_cover(t);
}

TEST(MatmulTiler, WhatDoesNotFitIsNoChunkOrAnError) {
  const ChipShape s4 = chip_shape("4x4"), s16 = chip_shape("16x16");
  const MatmulTiling none = tile_matmul(problem(8, 2048, 2048, false, false, s4.vmem_rows), s4);
  EXPECT_EQ(none.mt, 0u);
  EXPECT_TRUE(none.c_rows.empty());
  EXPECT_THROW(tile_matmul(problem(8, 16, 16400, false, false, s16.vmem_rows), s16),
               std::invalid_argument);  // a W row of more than 64 KiB of f32 lanes
  EXPECT_THROW(tile_matmul(problem(70000, 16, 16, false, false, s16.vmem_rows), s16),
               std::invalid_argument);
}

// A scale model's slow HBM (docs/scale_models.md): the 256^3 f32 product that streams W in
// three chunks at the built rate keeps W resident when streaming would make it HBM-bound, and
// the plan moves fewer bytes; at the built peak (or with no rate given) nothing changes.
TEST(MatmulTiler, SlowHbmKeepsWResidentWhereStreamingIsHbmBound) {
  const ChipShape s = chip_shape("16x16");
  MatmulProblem p = problem(256, 256, 256, false, false, s.vmem_rows);
  const MatmulTiling built = tile_matmul(p, s);
  EXPECT_FALSE(built.w_resident);
  EXPECT_EQ(built.c_rows.size(), 3u);
  p.hbm_bytes_per_cycle = s.hbm_channels * 32.0;  // the built peak: the same plan
  const MatmulTiling peak = tile_matmul(p, s);
  EXPECT_EQ(peak.w_resident, built.w_resident);
  EXPECT_EQ(peak.mt, built.mt);
  EXPECT_EQ(peak.c_rows, built.c_rows);
  p.hbm_bytes_per_cycle = 4 * 64.0 / 115;  // the v4 model
  const MatmulTiling slow = tile_matmul(p, s);
  EXPECT_TRUE(slow.w_resident);
  expect_chunks_cover(slow);
  const uint64_t w_bytes = 256 * 256 * 2;
  EXPECT_EQ(slow.panels() * 16 * 16 * slow.qt * 2, w_bytes);  // W once
  EXPECT_EQ(built.panels() * 16 * 16 * built.qt * 2, 3 * w_bytes);
}

// A row range [lo, hi) of VMEM (mem 0) or AMEM (mem 1), named.
struct Region {
  const char* name;
  uint32_t mem;
  uint64_t lo, hi;
};

std::vector<Region> regions_of(const MatmulTiling& t, const MatmulLayout& l) {
  std::vector<Region> r = {{"A0", 0, l.a[0], l.a[0] + t.mt * t.kt},
                           {"A1", 0, l.a[1], l.a[1] + t.mt * t.kt},
                           {"out0", 0, l.out[0], l.out[0] + t.mt * t.nto},
                           {"out1", 0, l.out[1], l.out[1] + t.mt * t.nto},
                           {"bias", 0, l.bias, l.bias + t.nt},
                           {"C0", 1, l.c[0], l.c[0] + t.mt * t.nt},
                           {"C1", 1, l.c[1], l.c[1] + t.mt * t.nt}};
  if (t.t_mask) r.push_back({"mask", 0, l.mask, l.mask + 1});
  for (uint64_t b = 0; b < l.w_bufs; ++b) r.push_back({"W", 0, l.w(b), l.w(b) + l.w_panel_rows});
  return r;
}

// Every access of a command, as (memory, [lo, hi)).
struct Access {
  uint32_t mem;
  uint64_t lo, hi;
};

std::vector<Access> accesses(const ChipCmd& k, uint64_t lanes) {
  std::vector<Access> a;
  switch (k.op()) {
    case ChipOp::kDma: {
      const CmdDma d = CmdDma::decode(k);
      const uint64_t rows = uint64_t{d.rows} * (d.seg_bytes / (lanes * (d.bf16 ? 2 : 4)));
      a.push_back({0, d.mem_row, d.mem_row + rows});
      break;
    }
    case ChipOp::kLoadW: {
      const CmdLoadW w = CmdLoadW::decode(k);
      a.push_back({0, w.vmem_row, w.vmem_row + (lanes - 1) * std::max(1u, w.stride) + 1});
      break;
    }
    case ChipOp::kMatmul: {
      const CmdMatmul m = CmdMatmul::decode(k);
      a.push_back({0, m.a_row, m.a_row + uint64_t{m.rows - 1} * std::max(1u, m.a_stride) + 1});
      a.push_back({1, m.c_row, uint64_t{m.c_row} + m.rows});
      break;
    }
    case ChipOp::kVpu: {
      const CmdVpu v = CmdVpu::decode(k);
      a.push_back({v.x_mem, v.x_row, uint64_t{v.x_row} + v.rows});
      a.push_back({v.y_mem, v.y_row, uint64_t{v.y_row} + (v.y_bcast ? 1 : v.rows)});
      a.push_back({v.dst_mem, v.dst_row,
                   v.dst_row + uint64_t{v.rows - 1} * std::max(1u, v.dst_stride) + 1});
      break;
    }
    default:
      break;
  }
  return a;
}

class MatmulLayoutSweep : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// The layout's regions lie inside VMEM (the rows the problem may use) and AMEM and are pairwise
// disjoint, and every row a command of the program reads or writes lies inside one region: no
// command touches a buffer other than its own (the live tiles of the other chunk, W panel or
// output group), whatever the shape.
TEST_P(MatmulLayoutSweep, RegionsStayInsideTheMemoriesAndEveryAccessInsideOne) {
  const std::string variant = std::get<0>(GetParam());
  const int mode = std::get<1>(GetParam());
  const ChipShape s = chip_shape(variant);
  const bool wt = mode >= 2, bf16 = mode % 2 == 1;
  const uint64_t vmem = mode == 3 ? s.vmem_rows / 2 : s.vmem_rows;
  MatmulOperands o;
  o.a_addr = 0x10000;
  o.w_addr = 0x200000;
  o.c_addr = 0x400000;
  o.bias_addr = 0x800000;
  o.zeros_addr = 0x900000;
  o.ones_addr = 0x910000;
  o.has_bias = mode == 1 || mode == 2;
  o.relu = mode == 1 || mode == 3;
  int planned = 0;
  for (std::size_t m : {3, 40, 170, 500})
    for (std::size_t k : {16, 72, 300})
      for (std::size_t n : {8, 100, 520}) {
        SCOPED_TRACE(variant + " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                     std::to_string(n) + " mode " + std::to_string(mode));
        const MatmulTiling t = tile_matmul(problem(m, k, n, wt, bf16, vmem), s);
        if (t.mt == 0) continue;
        ++planned;
        const MatmulLayout l = layout_matmul(t);
        const std::vector<Region> regs = regions_of(t, l);
        EXPECT_LE(l.vmem_end, vmem);
        EXPECT_LE(l.amem_end, s.amem_rows);
        for (std::size_t i = 0; i < regs.size(); ++i) {
          EXPECT_LE(regs[i].hi, regs[i].mem ? l.amem_end : l.vmem_end) << regs[i].name;
          for (std::size_t j = i + 1; j < regs.size(); ++j)
            if (regs[i].mem == regs[j].mem && regs[i].lo != regs[i].hi) {
              EXPECT_TRUE(regs[i].hi <= regs[j].lo || regs[j].hi <= regs[i].lo)
                  << regs[i].name << " overlaps " << regs[j].name;
            }
        }
        o.a_pitch = (k + 63) / 64 * 128;
        o.w_pitch = ((wt ? k : n) + 63) / 64 * 128;
        o.c_pitch = (n + 31) / 32 * (bf16 ? 64 : 128);
        const std::vector<ChipCmd> prog = emit_matmul(t, l, o);
        ASSERT_FALSE(prog.empty());
        EXPECT_EQ(prog.back().op(), ChipOp::kHalt);
        for (std::size_t i = 0; i < prog.size(); ++i)
          for (const Access& a : accesses(prog[i], t.lanes)) {
            bool inside = false;
            for (const Region& r : regs) inside |= r.mem == a.mem && r.lo <= a.lo && a.hi <= r.hi;
            ASSERT_TRUE(inside) << "command " << i << " " << (a.mem ? "AMEM" : "VMEM") << " ["
                                << a.lo << ", " << a.hi << ")";
          }
      }
  EXPECT_GT(planned, 20);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulLayoutSweep,
                         ::testing::Combine(::testing::Values("4x4", "8x8", "16x16"),
                                            ::testing::Values(0, 1, 2, 3)),
                         [](const auto& p) {
                           std::string v = std::get<0>(p.param);
                           for (char& c : v)
                             if (c == 'x') c = '_';
                           return "v" + v + "_mode" + std::to_string(std::get<1>(p.param));
                         });

// The emitter's program for one 16 x 16 tile (M = K = N = 16, f32, no epilogue) on a 16x16
// chip, decoded: W's panel and A in, the tile loaded and multiplied, the copy out of AMEM into
// the out buffer (maximum(x, x)), the DMA out, HALT.
TEST(MatmulEmitter, OneTileProgramDecoded) {
  const ChipShape s = chip_shape("16x16");
  const MatmulTiling t = tile_matmul(problem(16, 16, 16, false, false, s.vmem_rows), s);
  const MatmulLayout l = layout_matmul(t);
  EXPECT_EQ(l.a[0], 0u);
  EXPECT_EQ(l.a[1], 16u);
  EXPECT_EQ(l.w0, 32u);
  EXPECT_EQ(l.out[0], 48u);
  EXPECT_EQ(l.out[1], 64u);
  EXPECT_EQ(l.bias, 80u);
  EXPECT_EQ(l.c[1], 16u);
  MatmulOperands o;
  o.a_addr = 0x1000;
  o.a_pitch = 64;
  o.w_addr = 0x2000;
  o.w_pitch = 64;
  o.c_addr = 0x3000;
  o.c_pitch = 64;
  const std::vector<ChipCmd> prog = emit_matmul(t, l, o);
  ASSERT_EQ(prog.size(), 7u);
  const ChipOp ops[] = {ChipOp::kDma, ChipOp::kDma, ChipOp::kLoadW, ChipOp::kMatmul,
                        ChipOp::kVpu, ChipOp::kDma, ChipOp::kHalt};
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(prog[i].op(), ops[i]) << "command " << i;
  const CmdDma w = CmdDma::decode(prog[0]);
  EXPECT_EQ(w.dir, static_cast<uint32_t>(DmaDir::kHbmToVmem));
  EXPECT_EQ(w.bf16, 1u);
  EXPECT_EQ(w.mem_row, 32u);
  EXPECT_EQ(w.rows, 16u);
  EXPECT_EQ(w.seg_bytes, 32u);
  EXPECT_EQ(w.hbm_addr, 0x2000u);
  EXPECT_EQ(w.stride, 64u);
  const CmdDma a = CmdDma::decode(prog[1]);
  EXPECT_EQ(a.dir, static_cast<uint32_t>(DmaDir::kHbmToVmem));
  EXPECT_EQ(a.mem_row, 0u);
  EXPECT_EQ(a.rows, 16u);
  EXPECT_EQ(a.seg_bytes, 32u);
  EXPECT_EQ(a.hbm_addr, 0x1000u);
  EXPECT_EQ(a.tail, 0u);
  const CmdLoadW lw = CmdLoadW::decode(prog[2]);
  EXPECT_EQ(lw.vmem_row, 32u);
  EXPECT_EQ(lw.stride, 1u);
  EXPECT_EQ(lw.transpose, 0u);
  const CmdMatmul mm = CmdMatmul::decode(prog[3]);
  EXPECT_EQ(mm.a_row, 0u);
  EXPECT_EQ(mm.rows, 16u);
  EXPECT_EQ(mm.c_row, 0u);
  EXPECT_EQ(mm.acc, 0u);
  const CmdVpu v = CmdVpu::decode(prog[4]);
  EXPECT_EQ(v.vop, static_cast<uint32_t>(VpuOp::kMax));
  EXPECT_EQ(v.x_mem, 1u);
  EXPECT_EQ(v.y_mem, 1u);
  EXPECT_EQ(v.x_row, 0u);
  EXPECT_EQ(v.y_row, 0u);
  EXPECT_EQ(v.dst_mem, 0u);
  EXPECT_EQ(v.dst_row, 48u);
  EXPECT_EQ(v.rows, 16u);
  EXPECT_EQ(v.dst_bf16, 0u);
  const CmdDma out = CmdDma::decode(prog[5]);
  EXPECT_EQ(out.dir, static_cast<uint32_t>(DmaDir::kVmemToHbm));
  EXPECT_EQ(out.bf16, 0u);
  EXPECT_EQ(out.mem_row, 48u);
  EXPECT_EQ(out.rows, 16u);
  EXPECT_EQ(out.seg_bytes, 64u);  // 16 f32 lanes
  EXPECT_EQ(out.hbm_addr, 0x3000u);
  EXPECT_EQ(out.stride, 64u);
}

// With a bias and ReLU the tile's epilogue is two VPU ops (the bias added in AMEM, ReLU into
// the out buffer as bf16) after the bias row's DMA, which comes first.
TEST(MatmulEmitter, BiasAndReluEpilogueDecoded) {
  const ChipShape s = chip_shape("16x16");
  const MatmulTiling t = tile_matmul(problem(16, 16, 16, false, true, s.vmem_rows), s);
  const MatmulLayout l = layout_matmul(t);
  MatmulOperands o;
  o.a_pitch = o.w_pitch = 64;
  o.c_addr = 0x3000;
  o.c_pitch = 64;
  o.has_bias = true;
  o.bias_addr = 0x4000;
  o.relu = true;
  const std::vector<ChipCmd> prog = emit_matmul(t, l, o);
  ASSERT_EQ(prog.size(), 9u);
  const CmdDma b = CmdDma::decode(prog[0]);
  EXPECT_EQ(b.bf16, 0u);
  EXPECT_EQ(b.mem_row, l.bias);
  EXPECT_EQ(b.rows, 1u);
  EXPECT_EQ(b.seg_bytes, 64u);
  EXPECT_EQ(b.hbm_addr, 0x4000u);
  ASSERT_EQ(prog[5].op(), ChipOp::kVpu);
  ASSERT_EQ(prog[6].op(), ChipOp::kVpu);
  const CmdVpu add = CmdVpu::decode(prog[5]), relu = CmdVpu::decode(prog[6]);
  EXPECT_EQ(add.vop, static_cast<uint32_t>(VpuOp::kAdd));
  EXPECT_EQ(add.y_mem, 0u);
  EXPECT_EQ(add.y_row, l.bias);
  EXPECT_EQ(add.y_bcast, 1u);
  EXPECT_EQ(add.dst_mem, 1u);
  EXPECT_EQ(relu.vop, static_cast<uint32_t>(VpuOp::kRelu));
  EXPECT_EQ(relu.dst_mem, 0u);
  EXPECT_EQ(relu.dst_row, l.out[0]);
  EXPECT_EQ(relu.dst_bf16, 1u);
  EXPECT_EQ(relu.dst_stride, 2u);  // an output group of 2 tiles: the real one and the padding
  const CmdDma out = CmdDma::decode(prog[7]);
  EXPECT_EQ(out.bf16, 1u);
  EXPECT_EQ(out.seg_bytes, 64u);  // a C row of 16 bf16 and its padding: one whole burst
  EXPECT_EQ(prog[8].op(), ChipOp::kHalt);
}

struct Pinned {
  const char* variant;
  std::size_t m, k, n;
  uint64_t hash;
};

// The hashes of sweep_hash, computed by the planner before it was split into tiler, layout and
// emitter (ChipDriver::plan_matmul as one function, commit a798ad4; regenerate with
// TPU_PRINT_MATMUL_SWEEP=1 only for a change that means to alter the programs). The split must
// emit every command word the same, so each shape's hash must stay what it was.
const std::vector<Pinned> kPinned = {
    {"4x4", 1, 16, 8, 0x78c3d577e7a698ffull},
    {"4x4", 1, 16, 130, 0x597ed7d4395f8446ull},
    {"4x4", 1, 16, 520, 0x6ff24b2b89d13870ull},
    {"4x4", 1, 100, 8, 0xaea7c175e3b4d50bull},
    {"4x4", 1, 100, 130, 0x54bc71bd2ce595e0ull},
    {"4x4", 1, 100, 520, 0x14c6ad706aa46193ull},
    {"4x4", 1, 300, 8, 0x3c3eb935c0cdc8a0ull},
    {"4x4", 1, 300, 130, 0x3f7fa45cc9844583ull},
    {"4x4", 1, 300, 520, 0x008b9a0977472770ull},
    {"4x4", 45, 16, 8, 0xe27c27355664d7cfull},
    {"4x4", 45, 16, 130, 0x051b8391edd5737dull},
    {"4x4", 45, 16, 520, 0xfc2defdea9366cebull},
    {"4x4", 45, 100, 8, 0xc95cbc2af1562482ull},
    {"4x4", 45, 100, 130, 0x4694d111420cf7deull},
    {"4x4", 45, 100, 520, 0xa070a533c22a7904ull},
    {"4x4", 45, 300, 8, 0x488888d598c75f24ull},
    {"4x4", 45, 300, 130, 0xb4bc2552f251878cull},
    {"4x4", 45, 300, 520, 0x7288c189495904bbull},
    {"4x4", 300, 16, 8, 0x7f01333cf25dc031ull},
    {"4x4", 300, 16, 130, 0xb103a61a39e3dedeull},
    {"4x4", 300, 16, 520, 0x06b55ce24617ab05ull},
    {"4x4", 300, 100, 8, 0x6584288d913fdae0ull},
    {"4x4", 300, 100, 130, 0x660cf3c0c96dca9aull},
    {"4x4", 300, 100, 520, 0x0ec92e4cdefb8a4full},
    {"4x4", 300, 300, 8, 0x25c38b5990113580ull},
    {"4x4", 300, 300, 130, 0xa60cb4693fef1d6eull},
    {"4x4", 300, 300, 520, 0x0452261bf2c16866ull},
    {"4x4", 700, 16, 8, 0x3ae593ae30320d95ull},
    {"4x4", 700, 16, 130, 0xa76378c4ab704386ull},
    {"4x4", 700, 16, 520, 0x60a21fe244be51e4ull},
    {"4x4", 700, 100, 8, 0x0e653524e096e696ull},
    {"4x4", 700, 100, 130, 0x03236f73fa4d37eaull},
    {"4x4", 700, 100, 520, 0x54f22a823692cde6ull},
    {"4x4", 700, 300, 8, 0x29dcd4c74d2e068cull},
    {"4x4", 700, 300, 130, 0x53e895217eb81b68ull},
    {"4x4", 700, 300, 520, 0x3423ce34e1acba7aull},
    {"8x8", 1, 16, 8, 0xffce61b4a8c1e47dull},
    {"8x8", 1, 16, 130, 0xd87aa90e976a90cdull},
    {"8x8", 1, 16, 520, 0xc37688f770a6118eull},
    {"8x8", 1, 100, 8, 0xba254045b0c2fdfeull},
    {"8x8", 1, 100, 130, 0x7657111e9d74f17eull},
    {"8x8", 1, 100, 520, 0xb815fe0238bebe4full},
    {"8x8", 1, 300, 8, 0xab53539e3f9133a0ull},
    {"8x8", 1, 300, 130, 0x0c72d1d049ac6b25ull},
    {"8x8", 1, 300, 520, 0x3c6ec610c2809a7dull},
    {"8x8", 45, 16, 8, 0x9d45f74a08fd1d03ull},
    {"8x8", 45, 16, 130, 0x7964618758145d42ull},
    {"8x8", 45, 16, 520, 0x104ddd802a3f0f9eull},
    {"8x8", 45, 100, 8, 0x200384b06f04915cull},
    {"8x8", 45, 100, 130, 0x1e7f2ed06647b8c3ull},
    {"8x8", 45, 100, 520, 0x8287b530190e3368ull},
    {"8x8", 45, 300, 8, 0x9bcba9f2ae788684ull},
    {"8x8", 45, 300, 130, 0xa290bf8b6e7fe51aull},
    {"8x8", 45, 300, 520, 0x7273bdcf3a76eff3ull},
    {"8x8", 300, 16, 8, 0x48184068ea1fb856ull},
    {"8x8", 300, 16, 130, 0xc6f85898508108deull},
    {"8x8", 300, 16, 520, 0x8eb1204101d461cbull},
    {"8x8", 300, 100, 8, 0xdd6968a0ddf137caull},
    {"8x8", 300, 100, 130, 0x41b97f1d52453ae5ull},
    {"8x8", 300, 100, 520, 0x4acbd929a7705da2ull},
    {"8x8", 300, 300, 8, 0x2cbe1b31f8fc0331ull},
    {"8x8", 300, 300, 130, 0xb0b82786f1f7f864ull},
    {"8x8", 300, 300, 520, 0xf6763f4ffde08f07ull},
    {"8x8", 700, 16, 8, 0x530c2922a3aea86cull},
    {"8x8", 700, 16, 130, 0x9c560189b2d4108dull},
    {"8x8", 700, 16, 520, 0xfded046b72a7a331ull},
    {"8x8", 700, 100, 8, 0x5e72c4d88ccabc6aull},
    {"8x8", 700, 100, 130, 0xddbbdf29dcf7b4cfull},
    {"8x8", 700, 100, 520, 0xab5781c7b9bc0b47ull},
    {"8x8", 700, 300, 8, 0x0a46fcfe5bf30ed9ull},
    {"8x8", 700, 300, 130, 0x3ec97499d554a043ull},
    {"8x8", 700, 300, 520, 0xe2ab3d894e314723ull},
    {"16x16", 1, 16, 8, 0x165d270394ccaea7ull},
    {"16x16", 1, 16, 130, 0x51ec06cf1251adbbull},
    {"16x16", 1, 16, 520, 0xc6f1ad5142bf63a7ull},
    {"16x16", 1, 100, 8, 0x26460d8cd1ac78cdull},
    {"16x16", 1, 100, 130, 0x6f2ae683d4cb9ed2ull},
    {"16x16", 1, 100, 520, 0x425fa3940fb9e82cull},
    {"16x16", 1, 300, 8, 0x7c6d0d5821de680cull},
    {"16x16", 1, 300, 130, 0x8a027d5de86bc798ull},
    {"16x16", 1, 300, 520, 0x8367cf1c951a9529ull},
    {"16x16", 45, 16, 8, 0xaf0a727041aadbb7ull},
    {"16x16", 45, 16, 130, 0xfd776130fc993a6full},
    {"16x16", 45, 16, 520, 0xc86b90a23c36adcdull},
    {"16x16", 45, 100, 8, 0x06bf216b142ef6e1ull},
    {"16x16", 45, 100, 130, 0x6c69c8ed978eccb0ull},
    {"16x16", 45, 100, 520, 0x2ab09fb6c7f9e383ull},
    {"16x16", 45, 300, 8, 0xa37b037c8cce66c9ull},
    {"16x16", 45, 300, 130, 0xe60bdc34c9b3c464ull},
    {"16x16", 45, 300, 520, 0x6ec344bed0de9139ull},
    {"16x16", 300, 16, 8, 0x9b40c9c8c511bc2eull},
    {"16x16", 300, 16, 130, 0x0e1a3a675cd350b9ull},
    {"16x16", 300, 16, 520, 0x9950792365753d0aull},
    {"16x16", 300, 100, 8, 0x092215593e22a5d4ull},
    {"16x16", 300, 100, 130, 0xa0e3f9a2ebd9cabcull},
    {"16x16", 300, 100, 520, 0xedfa8b49b94dc76eull},
    {"16x16", 300, 300, 8, 0x0c7664d79d4e8dd8ull},
    {"16x16", 300, 300, 130, 0x1cba872763e1f92cull},
    {"16x16", 300, 300, 520, 0xc012c15ac486ecbfull},
    {"16x16", 700, 16, 8, 0x018f0609ca6138acull},
    {"16x16", 700, 16, 130, 0x73c7b48031a5127full},
    {"16x16", 700, 16, 520, 0x3ea42b7ca42fb4d2ull},
    {"16x16", 700, 100, 8, 0x06d7e18287090032ull},
    {"16x16", 700, 100, 130, 0x79f1cd2f43cb0aebull},
    {"16x16", 700, 100, 520, 0x09717ba3768e795cull},
    {"16x16", 700, 300, 8, 0x089f1fc9eb94896cull},
    {"16x16", 700, 300, 130, 0x748257aef22d3eafull},
    {"16x16", 700, 300, 520, 0xbf9224197e4835c5ull},
};

TEST(MatmulPlanSweep, CommandWordsAreThoseOfTheMonolithicPlanner) {
  if (std::getenv("TPU_PRINT_MATMUL_SWEEP")) {
    for (const char* v : {"4x4", "8x8", "16x16"})
      for (std::size_t m : kSweepM)
        for (std::size_t k : kSweepK)
          for (std::size_t n : kSweepN)
            std::printf("    {\"%s\", %zu, %zu, %zu, 0x%016llxull},\n", v, m, k, n,
                        static_cast<unsigned long long>(sweep_hash(v, m, k, n)));
    return;
  }
  ASSERT_EQ(kPinned.size(), 3 * kSweepM.size() * kSweepK.size() * kSweepN.size());
  for (const Pinned& p : kPinned)
    EXPECT_EQ(sweep_hash(p.variant, p.m, p.k, p.n), p.hash)
        << p.variant << " " << p.m << "x" << p.k << "x" << p.n;
}

}  // namespace
}  // namespace tpu
