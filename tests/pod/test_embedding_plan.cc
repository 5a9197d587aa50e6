// The embedding plans (sw/driver/embedding_plan.h) without RTL: the grouping of the backward,
// the checks of the inputs, and both programs run by a small interpreter of the commands they
// use (DMA, DMA_IDX, VPU add, HALT: docs/isa.md) over a byte image of HBM and VMEM rows, whose
// results equal the golden's gpt_embed / gpt_embed_backward bit for bit. The same plans run on
// the RTL chip in tests/chip/test_gather.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "embedding_plan.h"
#include "tpu/bf16.h"
#include "tpu/gpt.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

// The commands of the plans, f32 rows of L lanes, as docs/isa.md defines them.
class Interp {
 public:
  Interp(std::size_t lanes, std::size_t vmem_rows, std::size_t hbm_bytes)
      : L_(lanes), vmem_(vmem_rows * lanes, 0), hbm_(hbm_bytes, 0) {}
  std::vector<uint8_t>& hbm() { return hbm_; }

  void run(const std::vector<ChipCmd>& prog) {
    for (const ChipCmd& c : prog) {
      if (c.op() == ChipOp::kDma)
        dma(CmdDma::decode(c));
      else if (c.op() == ChipOp::kDmaIdx)
        dma_idx(CmdDmaIdx::decode(c));
      else if (c.op() == ChipOp::kVpu)
        vpu(CmdVpu::decode(c));
      else
        ASSERT_EQ(c.op(), ChipOp::kHalt) << "a command the plans do not use";
    }
  }

 private:
  // seg bytes at addr <-> memory rows from row (f32 elements).
  void move(bool to_vmem, uint64_t addr, uint32_t seg, uint32_t row) {
    ASSERT_EQ(seg % (4 * L_), 0u);
    ASSERT_LE(addr + seg, hbm_.size());
    ASSERT_LE((row + seg / (4 * L_)) * L_, vmem_.size());
    if (to_vmem)
      std::memcpy(&vmem_[row * L_], &hbm_[addr], seg);
    else
      std::memcpy(&hbm_[addr], &vmem_[row * L_], seg);
  }
  void dma(const CmdDma& d) {
    ASSERT_EQ(d.bf16, 0u);
    const uint32_t per = d.seg_bytes / (4 * static_cast<uint32_t>(L_));
    for (uint32_t i = 0; i < d.rows; ++i)
      move(d.dir == static_cast<uint32_t>(DmaDir::kHbmToVmem),
           uint64_t{d.hbm_addr} + uint64_t{i} * d.stride, d.seg_bytes, d.mem_row + i * per);
  }
  void dma_idx(const CmdDmaIdx& d) {
    const uint32_t per = d.seg_bytes / (4 * static_cast<uint32_t>(L_));
    for (uint32_t j = 0; j < d.rows; ++j) {
      const auto id = static_cast<int32_t>(vmem_[(d.idx_row + j / L_) * L_ + j % L_]);
      ASSERT_GE(id, 0);
      ASSERT_LT(static_cast<uint32_t>(id), d.table_rows) << "id at " << j;
      move(d.scatter == 0, uint64_t{d.hbm_addr} + uint64_t{static_cast<uint32_t>(id)} * d.seg_bytes,
           d.seg_bytes, d.mem_row + j * per);
    }
  }
  void vpu(const CmdVpu& v) {
    ASSERT_EQ(v.vop, static_cast<uint32_t>(VpuOp::kAdd));
    ASSERT_EQ(v.x_mem | v.y_mem | v.dst_mem, 0u);
    for (uint32_t r = 0; r < v.rows; ++r)
      for (std::size_t l = 0; l < L_; ++l) {
        const uint32_t x = vmem_[(v.x_row + r) * L_ + l];
        const uint32_t y = vmem_[(v.y_row + (v.y_bcast ? 0 : r)) * L_ + l];
        vmem_[(v.dst_row + r) * L_ + l] = vpu_lane(VpuOp::kAdd, x, y, 0x80000000u);
      }
  }

  std::size_t L_;
  std::vector<uint32_t> vmem_;
  std::vector<uint8_t> hbm_;
};

EmbeddingDims dims(std::size_t v, std::size_t s, std::size_t d, std::size_t t) {
  EmbeddingDims x;
  x.vocab = v;
  x.seq = s;
  x.d = d;
  x.tokens = t;
  return x;
}

std::vector<float> rnd(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

void put(std::vector<uint8_t>& hbm, uint64_t at, const void* p, std::size_t n) {
  std::memcpy(&hbm[at], p, n);
}
std::vector<float> get(const std::vector<uint8_t>& hbm, uint64_t at, std::size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), &hbm[at], n * 4);
  return v;
}
void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const char* w) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << w << "[" << i << "]";
}

TEST(EmbeddingPlan, GroupsAreMostFrequentFirstWithPositionsInOrder) {
  const EmbeddingGroups g = embedding_groups({5, 7, 5, 9, 7, 5, 1});
  ASSERT_EQ(g.ids, (std::vector<int32_t>{5, 7, 9, 1}));
  EXPECT_EQ(g.positions[0], (std::vector<uint32_t>{0, 2, 5}));
  EXPECT_EQ(g.positions[1], (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(g.positions[2], (std::vector<uint32_t>{3}));
  EXPECT_EQ(g.positions[3], (std::vector<uint32_t>{6}));
}

TEST(EmbeddingPlan, ForwardAndBackwardRunToTheGoldensBits) {
  for (const char* variant : {"4x4", "16x16"}) {
    const ChipShape s = chip_shape(variant);
    const std::size_t V = 50, S = 6, d = 32, T = 27;  // a last window of 3 tokens
    std::mt19937_64 rng(21);
    std::vector<int32_t> tok(T);
    for (auto& t : tok) t = static_cast<int32_t>(rng() % 7 == 0 ? V - 1 : rng() % 5);
    const std::vector<float> wte = rnd(V * d, rng), wpe = rnd(S * d, rng);
    std::vector<float> dh = rnd(T * d, rng);
    dh[3] = -0.0f;
    EmbeddingBuffers b;
    b.wte = 0;
    b.wpe = b.wte + V * d * 4;
    b.h = b.wpe + S * d * 4;
    b.dh = b.h + T * d * 4;
    b.dwte = b.dh + T * d * 4;
    b.dwpe = b.dwte + V * d * 4;
    b.lists = b.dwpe + S * d * 4;
    Interp m(s.cols, s.vmem_rows, b.lists + 64 * 1024);
    put(m.hbm(), b.wte, wte.data(), wte.size() * 4);
    put(m.hbm(), b.wpe, wpe.data(), wpe.size() * 4);
    put(m.hbm(), b.dh, dh.data(), dh.size() * 4);
    const EmbeddingPlan f = plan_embedding_forward(s, dims(V, S, d, T), tok, b);
    put(m.hbm(), b.lists, f.lists.data(), f.lists.size() * 4);
    m.run(f.cmds);
    expect_bits(get(m.hbm(), b.h, T * d), gpt_embed(wte, wpe, tok, S, d), "h");
    const EmbeddingPlan k = plan_embedding_backward(s, dims(V, S, d, T), tok, b);
    EXPECT_EQ(k.groups, embedding_groups(tok).ids.size());
    put(m.hbm(), b.lists, k.lists.data(), k.lists.size() * 4);
    m.run(k.cmds);
    std::vector<float> gw(V * d, 0.0f), gp(S * d, 0.0f);
    gpt_embed_backward(dh, tok, S, d, gw, gp);
    expect_bits(get(m.hbm(), b.dwte, V * d), gw, "dwte");
    expect_bits(get(m.hbm(), b.dwpe, S * d), gp, "dwpe");
  }
}

// The lists' sizes the trainers allocate are the plans' own: the forward's a row of lanes per
// window (on a 128-lane chip four times the tokens of 32-token windows), the backward's at most
// its bound.
TEST(EmbeddingPlan, ListWordsAreThePlansOwn) {
  for (const char* variant : {"4x4", "16x16", "128x128"}) {
    const ChipShape s = chip_shape(variant);
    for (const auto& [S, T] :
         {std::pair<std::size_t, std::size_t>{32, 32}, {32, 96}, {6, 27}, {32, 40}, {8, 8}}) {
      const std::size_t V = 50, d = std::max<std::size_t>(s.cols, 16) * 2;
      std::vector<int32_t> tok(T);
      for (std::size_t i = 0; i < T; ++i) tok[i] = static_cast<int32_t>(i % 3 == 0 ? 7 : i % V);
      EmbeddingBuffers b;
      b.wpe = V * d * 4;
      b.h = b.wpe + S * d * 4;
      b.dh = b.h + T * d * 4;
      b.dwte = b.dh + T * d * 4;
      b.dwpe = b.dwte + V * d * 4;
      b.lists = (b.dwpe + S * d * 4 + 63) / 64 * 64;
      const EmbeddingPlan f = plan_embedding_forward(s, dims(V, S, d, T), tok, b);
      EXPECT_EQ(f.lists.size(), embedding_forward_list_words(T, S, s.cols))
          << variant << " S " << S << " T " << T;
      const EmbeddingPlan k = plan_embedding_backward(s, dims(V, S, d, T), tok, b);
      EXPECT_LE(k.lists.size(), embedding_backward_list_words(T, V, s.cols))
          << variant << " S " << S << " T " << T;
    }
  }
  EXPECT_EQ(embedding_forward_list_words(96, 32, 128), 384u);  // three rows of 128
  EXPECT_EQ(embedding_forward_list_words(40, 32, 16), 48u);    // 32 + 8 padded to 16
}

TEST(EmbeddingPlan, BadInputsNameTheValueAndTheRule) {
  const ChipShape s = chip_shape("4x4");
  EmbeddingBuffers b;
  b.lists = 1 << 20;
  const std::vector<int32_t> tok = {1, 2, 3, 4};
  auto msg = [&](const EmbeddingDims& dm, const std::vector<int32_t>& t) {
    try {
      plan_embedding_forward(s, dm, t, b);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(dims(8, 2, 20, 4), tok).find("d 20 must be"), std::string::npos);
  EXPECT_NE(msg(dims(4, 2, 16, 4), tok).find("token 4 at 3 is outside 0..3"), std::string::npos);
  EXPECT_NE(msg(dims(8, 2, 16, 5), tok).find("tokens: 4 given, 5 expected"), std::string::npos);
  EXPECT_NE(msg(dims(8, 2, 16 * 256, 4), std::vector<int32_t>(4, 1)).find("VMEM rows"),
            std::string::npos);
}

}  // namespace
}  // namespace tpu
