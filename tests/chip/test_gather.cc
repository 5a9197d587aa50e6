// DMA_IDX on the 4x4 chip: the gather and the scatter by an id list against the table's bytes,
// the error of an id out of range, the checks of the command's fields, rows per cycle, the
// list-stability assertion, and the token embedding (forward and backward plans,
// sw/driver/embedding_plan.h) bit for bit against the GPT golden's gpt_embed /
// gpt_embed_backward, with an f64 sum as the independent check of the gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "embedding_plan.h"
#include "lone_chip.h"
#include "tpu/bf16.h"
#include "tpu/gpt.h"

namespace tpu {
namespace {

constexpr uint32_t kL = 4;  // lanes of the 4x4 chip

// ids as VMEM rows: written to HBM at `at`, loaded by a plain DMA to VMEM row `row`.
ChipCmd load_ids(ChipDriver& drv, const std::vector<int32_t>& ids, uint64_t at, uint32_t row) {
  std::vector<int32_t> w(ids);
  w.resize((w.size() + kL - 1) / kL * kL, 0);
  drv.write(at, w.data(), w.size() * 4);
  return cmd_dma(DmaDir::kHbmToVmem, false, row, static_cast<uint32_t>(w.size() / kL), kL * 4,
                 static_cast<uint32_t>(at), kL * 4);
}

// n ids in 0..v-1 with repeats, the first and the last row among them.
std::vector<int32_t> random_ids(std::size_t n, uint32_t v, std::mt19937_64& rng) {
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % v);
  ids[1] = 0;
  ids[n / 2] = static_cast<int32_t>(v - 1);
  ids[n - 1] = ids[3];  // a repeat, whatever the draw
  ids[5] = ids[4];      // back to back
  return ids;
}

TEST(ChipGather, F32AndBf16RowsByRandomIdsWithRepeatsAndEnds) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(11);
  for (bool bf16 : {false, true}) {
    drv.free_all();
    const uint32_t v = 37, n = 48, esz = bf16 ? 2 : 4, seg = 8 * esz;  // rows of 8 elements
    std::vector<uint8_t> table(v * seg);
    for (auto& b : table) b = static_cast<uint8_t>(rng());
    const uint64_t tbl = drv.alloc(table.size()), ids_at = drv.alloc(n * 4),
                   out = drv.alloc(n * seg);
    drv.write(tbl, table.data(), table.size());
    const std::vector<int32_t> ids = random_ids(n, v, rng);
    const uint32_t pieces = seg / (kL * esz);
    const ProgramResult r =
        drv.run({load_ids(drv, ids, ids_at, 0),
                 cmd_dma_idx(false, bf16, 100, n, seg, static_cast<uint32_t>(tbl), 0, v),
                 cmd_dma(DmaDir::kVmemToHbm, bf16, 100, 1, n * seg, static_cast<uint32_t>(out), 0),
                 cmd_halt()});
    ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
    EXPECT_EQ(r.delta[kStatDmaRdBytes] % 64, 0u);
    std::vector<uint8_t> got(n * seg);
    drv.read(out, got.data(), got.size());
    for (uint32_t j = 0; j < n; ++j)
      ASSERT_EQ(0, std::memcmp(&got[j * seg], &table[static_cast<uint32_t>(ids[j]) * seg], seg))
          << "bf16=" << bf16 << " id " << j << " = " << ids[j] << " (" << pieces << " rows)";
  }
}

TEST(ChipGather, ScatterWritesTheRowsOfItsIdsAndTheLastRepeatWins) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(12);
  const uint32_t v = 20, n = 9, seg = 64;  // f32 rows of 16: one burst, 4 memory rows each
  const std::vector<int32_t> ids = {19, 0, 7, 3, 7, 12, 1, 18, 0};
  std::vector<uint8_t> table(v * seg), src(n * seg);
  for (auto& b : table) b = static_cast<uint8_t>(rng());
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  const uint64_t tbl = drv.alloc(table.size()), ids_at = drv.alloc(64), in = drv.alloc(n * seg);
  drv.write(tbl, table.data(), table.size());
  drv.write(in, src.data(), src.size());
  const ProgramResult r =
      drv.run({load_ids(drv, ids, ids_at, 0),
               cmd_dma(DmaDir::kHbmToVmem, false, 10, 1, n * seg, static_cast<uint32_t>(in), 0),
               cmd_dma_idx(true, false, 10, n, seg, static_cast<uint32_t>(tbl), 0, v), cmd_halt()});
  ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
  EXPECT_EQ(r.delta[kStatDmaWrBytes], n * seg);
  std::vector<uint8_t> want(table);
  for (uint32_t j = 0; j < n; ++j)
    std::memcpy(&want[static_cast<uint32_t>(ids[j]) * seg], &src[j * seg], seg);
  std::vector<uint8_t> got(table.size());
  drv.read(tbl, got.data(), got.size());
  for (uint32_t i = 0; i < v; ++i)
    ASSERT_EQ(0, std::memcmp(&got[i * seg], &want[i * seg], seg)) << "table row " << i;
}

// An id >= table_rows stops the program with index_out_of_range: the command index is the
// DMA_IDX's, err_addr its position; the rows before it were gathered.
TEST(ChipGather, IdOutOfRangeStopsWithIndexOutOfRange) {
  LoneChip drv("4x4");
  const uint32_t v = 16, seg = 16;
  std::vector<uint8_t> table(v * seg);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint8_t>(i * 7 + 1);
  const uint64_t tbl = drv.alloc(table.size()), ids_at = drv.alloc(64), out = drv.alloc(64);
  drv.write(tbl, table.data(), table.size());
  for (int32_t bad : {16, -1}) {
    const std::vector<int32_t> ids = {3, 4, 5, 6, 2, bad, 1, 0};
    const ProgramResult r = drv.run(
        {load_ids(drv, ids, ids_at, 0),
         cmd_dma_idx(false, false, 40, 8, seg, static_cast<uint32_t>(tbl), 0, v),
         cmd_dma(DmaDir::kVmemToHbm, false, 40, 1, 64, static_cast<uint32_t>(out), 0), cmd_halt()},
        false);
    EXPECT_EQ(r.err, static_cast<unsigned>(ChipErr::kIdxRange)) << chip_err_name(r.err);
    EXPECT_STREQ(chip_err_name(r.err), "index_out_of_range");
    EXPECT_EQ(r.err_cmd, 1u);
    EXPECT_EQ(r.err_addr, 5u) << "bad id " << bad;
  }
}

TEST(ChipGather, FieldsAreChecked) {
  LoneChip drv("4x4");
  const auto base = [] { return CmdDmaIdx::decode(cmd_dma_idx(false, false, 64, 8, 16, 0, 0, 4)); };
  struct Case {
    const char* what;
    CmdDmaIdx c;
    ChipErr err;
  };
  std::vector<Case> cases;
  auto add = [&](const char* what, auto f, ChipErr e) {
    CmdDmaIdx c = base();
    f(c);
    cases.push_back({what, c, e});
  };
  add(
      "rows 0", [](CmdDmaIdx& c) { c.rows = 0; }, ChipErr::kBadField);
  add(
      "seg_bytes 0", [](CmdDmaIdx& c) { c.seg_bytes = 0; }, ChipErr::kBadField);
  add(
      "table_rows 0", [](CmdDmaIdx& c) { c.table_rows = 0; }, ChipErr::kBadField);
  add(
      "gather over its list", [](CmdDmaIdx& c) { c.mem_row = 1; }, ChipErr::kBadField);
  add(
      "seg not a piece", [](CmdDmaIdx& c) { c.seg_bytes = 24; }, ChipErr::kAlign);
  add(
      "scatter not a burst", [](CmdDmaIdx& c) { c.scatter = 1; }, ChipErr::kAlign);
  add(
      "table beyond hbm",
      [](CmdDmaIdx& c) {
        c.table_rows = 0xFFFF;
        c.seg_bytes = 0xFFF0;
      },
      ChipErr::kHbmRange);
  add(
      "rows beyond vmem", [](CmdDmaIdx& c) { c.mem_row = 4090; }, ChipErr::kVmemRange);
  add(
      "list beyond vmem", [](CmdDmaIdx& c) { c.idx_row = 4095; }, ChipErr::kVmemRange);
  for (const Case& k : cases) {
    const ProgramResult r = drv.run({cmd_nop(), k.c.encode(), cmd_halt()}, false);
    EXPECT_EQ(r.err, static_cast<unsigned>(k.err)) << k.what << ": " << chip_err_name(r.err);
    EXPECT_EQ(r.err_cmd, 1u) << k.what;
  }
}

// Rows per cycle: a gather of n scattered rows against a plain strided DMA of the same rows in
// order (one HBM request per row both ways); the gather pays one cycle for its first id.
TEST(ChipGather, RowsPerCycleMatchAStridedDma) {
  LoneChip drv("4x4");
  std::mt19937_64 rng(13);
  const uint32_t v = 1024, n = 512, seg = 64, stride = 64 * 3;
  const uint64_t tbl = drv.alloc(v * stride), ids_at = drv.alloc(n * 4);
  std::vector<int32_t> ids(n), seq(n);
  for (uint32_t j = 0; j < n; ++j) ids[j] = static_cast<int32_t>(rng() % (v * 3));
  for (uint32_t j = 0; j < n; ++j) seq[j] = static_cast<int32_t>(3 * j);
  const ChipCmd ld = load_ids(drv, ids, ids_at, 0);
  drv.run({ld, cmd_halt()});
  const ProgramResult g = drv.run(
      {cmd_dma_idx(false, false, 200, n, seg, static_cast<uint32_t>(tbl), 0, v * 3), cmd_halt()});
  drv.run({load_ids(drv, seq, ids_at, 0), cmd_halt()});
  const ProgramResult gs = drv.run(
      {cmd_dma_idx(false, false, 200, n, seg, static_cast<uint32_t>(tbl), 0, v * 3), cmd_halt()});
  const ProgramResult p =
      drv.run({cmd_dma(DmaDir::kHbmToVmem, false, 200, n, seg, static_cast<uint32_t>(tbl), stride),
               cmd_halt()});
  std::printf(
      "[gather] %u rows of %u B: random ids %llu cycles, ids 0,3,6.. %llu cycles, "
      "strided DMA %llu cycles\n",
      n, seg, static_cast<unsigned long long>(g.cycles), static_cast<unsigned long long>(gs.cycles),
      static_cast<unsigned long long>(p.cycles));
  EXPECT_LE(gs.cycles, p.cycles + 2);     // the same requests: within the first id's cycle or two
  EXPECT_LT(g.cycles, p.cycles * 3 / 2);  // random rows: other banks and pages, not a lost cycle
}

// A remote write into the rows of a list that a DMA_IDX still reads races it: the sequencer
// does not order ICI arrivals, so IdxListStable_A catches it (an ICI_SEND to the chip itself).
TEST(ChipGather, RemoteWriteIntoAWalkingListTripsTheAssertion) {
  LoneChip drv("4x4");
  const uint32_t n = 1024, v = 4096;
  const uint64_t tbl = drv.alloc(v * 16), ids_at = drv.alloc(n * 4);
  std::vector<int32_t> ids(n);
  for (uint32_t j = 0; j < n; ++j) ids[j] = static_cast<int32_t>((j * 37) % v);
  std::string what;
  try {
    drv.run({load_ids(drv, ids, ids_at, 0),
             cmd_dma_idx(false, false, 1000, n, 16, static_cast<uint32_t>(tbl), 0, v),
             cmd_ici_send(Mem::kVmem, 600, 1, {0, 0, 0}, Mem::kVmem, 200, 3), cmd_ici_wait(3, 1),
             cmd_halt()});
  } catch (const ChipError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("RTL assertion failed"), std::string::npos) << what;
}

// The embedding of a small GPT (d 16, S 8, 4 windows, V 256) on the chip, forward and backward,
// against the golden's functions, bit for bit.
struct EmbedCase {
  GptSpec spec;
  std::vector<int32_t> tokens;
  GptParams params;
  EmbeddingDims dims;
};

EmbedCase embed_case(uint64_t seed) {
  EmbedCase c;
  c.spec.layers = 1;
  c.spec.d_model = 16;
  c.spec.heads = 2;
  c.spec.seq = 8;
  c.spec.batch = 4;
  c.spec.lanes = kL;
  c.params = gpt_init(c.spec, seed);
  std::mt19937_64 rng(seed);
  c.tokens.resize(c.spec.tokens());
  for (auto& t : c.tokens) t = static_cast<int32_t>(rng() % 12 == 0 ? 255 : rng() % 9);
  c.tokens[0] = 0;
  c.dims = {c.spec.vocab, c.spec.seq, c.spec.d_model, c.spec.tokens()};
  return c;
}

std::vector<float> read_f32(ChipDriver& drv, uint64_t at, std::size_t n) {
  std::vector<float> v(n);
  drv.read(at, v.data(), n * 4);
  return v;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << what << "[" << i << "]";
}

TEST(ChipEmbedding, ForwardMatchesTheGolden) {
  LoneChip drv("4x4");
  const EmbedCase c = embed_case(3);
  const std::size_t V = c.dims.vocab, S = c.dims.seq, d = c.dims.d, T = c.dims.tokens;
  EmbeddingBuffers b;
  b.wte = drv.alloc(V * d * 4);
  b.wpe = drv.alloc(S * d * 4);
  b.h = drv.alloc(T * d * 4);
  b.lists = drv.alloc(T * 4 + 64);
  drv.write(b.wte, c.params[0].v.data(), V * d * 4);
  drv.write(b.wpe, c.params[1].v.data(), S * d * 4);
  const EmbeddingPlan p = plan_embedding_forward(drv.shape(), c.dims, c.tokens, b);
  drv.write(b.lists, p.lists.data(), p.lists.size() * 4);
  const ProgramResult r = drv.run(p.cmds);
  ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
  std::printf("[embedding] forward T=%zu d=%zu: %llu cycles, %zu commands\n", T, d,
              static_cast<unsigned long long>(r.cycles), p.cmds.size());
  expect_bits(read_f32(drv, b.h, T * d), gpt_embed(c.params[0].v, c.params[1].v, c.tokens, S, d),
              "h");
}

TEST(ChipEmbedding, BackwardMatchesTheGoldenAndAnF64Sum) {
  LoneChip drv("4x4");
  const EmbedCase c = embed_case(4);
  const std::size_t V = c.dims.vocab, S = c.dims.seq, d = c.dims.d, T = c.dims.tokens;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> dh(T * d);
  for (auto& x : dh) x = nd(rng);
  dh[5] = -0.0f;  // a sum starts from +0: +0 + -0 is +0
  for (std::size_t j = 0; j < d; ++j) dh[1 * d + j] = -0.0f;
  EmbeddingBuffers b;
  b.dh = drv.alloc(T * d * 4);
  b.dwte = drv.alloc(V * d * 4);
  b.dwpe = drv.alloc(S * d * 4);
  b.lists = drv.alloc(8 * T * 4 + 256);
  drv.write(b.dh, dh.data(), dh.size() * 4);
  const std::vector<float> zeros(V * d, 0.0f);
  drv.write(b.dwte, zeros.data(), V * d * 4);
  const EmbeddingPlan p = plan_embedding_backward(drv.shape(), c.dims, c.tokens, b);
  drv.write(b.lists, p.lists.data(), p.lists.size() * 4);
  const ProgramResult r = drv.run(p.cmds);
  ASSERT_EQ(r.err, 0u) << chip_err_name(r.err);
  std::printf("[embedding] backward T=%zu d=%zu: %zu groups, %zu rounds, %llu cycles\n", T, d,
              p.groups, p.rounds, static_cast<unsigned long long>(r.cycles));
  std::vector<float> gw(V * d, 0.0f), gp(S * d, 0.0f);
  gpt_embed_backward(dh, c.tokens, S, d, gw, gp);
  const std::vector<float> dwte = read_f32(drv, b.dwte, V * d), dwpe = read_f32(drv, b.dwpe, S * d);
  expect_bits(dwte, gw, "dwte");
  expect_bits(dwpe, gp, "dwpe");
  // Independent: each row against its f64 sum, within the rounding of its adds.
  std::vector<double> f(V * d, 0.0), a(V * d, 0.0);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < d; ++j) {
      const std::size_t k = static_cast<std::size_t>(c.tokens[t]) * d + j;
      f[k] += dh[t * d + j];
      a[k] += std::fabs(dh[t * d + j]);
    }
  for (std::size_t i = 0; i < V * d; ++i)
    ASSERT_LE(std::fabs(dwte[i] - f[i]), static_cast<double>(T) * 0x1p-24 * a[i])
        << "dwte[" << i << "]";
}

}  // namespace
}  // namespace tpu
