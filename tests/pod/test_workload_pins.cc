// The sharded matmul's and the training step's SPMD programs pinned (no RTL: the fake host port):
// per case, one hash over every chip's command words and labels, the phase table and the HBM the
// layout uses. The hashes below were computed by the hand-written programs (sharded_matmul.cc
// and train_step.cc before they became op lists run through the scheduler, issue 31) and are
// held here so that the scheduler's programs must give the same commands, bit for bit.
// TPU_PRINT_PINS=1 prints each case's hash (to pin a new case).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "fake_host_port.h"
#include "mesh_text.h"
#include "pinned_words.h"
#include "sharded_matmul.h"
#include "train_step.h"

namespace tpu {
namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  }
  void add(const std::string& s) {
    add(s.size());
    for (char ch : s) add(static_cast<uint64_t>(static_cast<unsigned char>(ch)));
  }
};

uint64_t program_hash(const SpmdProgram& p, uint64_t hbm_bytes) {
  Fnv f;
  f.add(hbm_bytes);
  f.add(p.phases().size());
  for (const SpmdPhase& ph : p.phases()) {
    f.add(ph.name);
    f.add((ph.collective ? 1u : 0u) | (ph.gradient ? 2u : 0u));
    f.add(static_cast<uint64_t>(ph.kind));
    f.add(ph.axis);
    f.add(ph.bytes);
  }
  f.add(static_cast<uint64_t>(p.num_chips()));
  for (int c = 0; c < p.num_chips(); ++c) {
    const ChipProgram& cp = p.chip(c);
    f.add(cp.size());
    for (std::size_t i = 0; i < cp.size(); ++i) {
      for (uint32_t w : pinned_words(cp.cmds[i])) f.add(w);
      f.add(static_cast<uint64_t>(static_cast<int64_t>(cp.labels[i].phase)));
      f.add(static_cast<uint64_t>(static_cast<int64_t>(cp.labels[i].step)));
      f.add(static_cast<uint64_t>(static_cast<int64_t>(cp.labels[i].piece)));
    }
  }
  return f.h;
}

bool print_pins() {
  const char* e = std::getenv("TPU_PRINT_PINS");
  return e != nullptr && std::string(e) == "1";
}

struct ShardPin {
  const char* name;
  std::vector<int> shape;
  const char* variant;
  const char* mesh;
  std::size_t m, k, n;
  const char* x;
  const char* w;
  const char* y;  // "": the default
  bool bias, relu;
  uint64_t hash;
};

void PrintTo(const ShardPin& c, std::ostream* os) { *os << c.name; }

class ShardPins : public ::testing::TestWithParam<ShardPin> {};

TEST_P(ShardPins, ProgramIsTheHandWrittenOne) {
  const ShardPin& c = GetParam();
  const Topology topo = Topology::torus(c.shape);
  FakeHostPort port(topo, c.variant);
  const std::string ytext = c.y;
  const PSpec ys = ytext.empty() ? PSpec{} : parse_pspec(ytext, "--y-spec");
  const ShardPlan plan =
      plan_sharding(topo, parse_mesh(c.mesh), c.m, c.k, c.n, parse_pspec(c.x, "--x-spec"),
                    parse_pspec(c.w, "--w-spec"), ytext.empty() ? nullptr : &ys);
  ShardedMatmulOptions so;
  if (c.bias)
    for (std::size_t j = 0; j < c.n; ++j) so.bias.push_back(0.25f * static_cast<float>(j % 7));
  so.relu = c.relu;
  ShardedMatmul sm(port, plan, so);
  const uint64_t h = program_hash(sm.programs(), sm.hbm_bytes_per_chip());
  if (print_pins()) std::printf("PIN shard %s 0x%016llxull\n", c.name, (unsigned long long)h);
  EXPECT_EQ(h, c.hash) << c.name;
}

// Meshes, specs, shapes, bias and ReLU on 2x2, 4x4 (and 2x2x2, ring) pods: every pipeline kind
// (W gathered in pieces, reduce-scatter and all-reduce in pieces, none), K split with the epilogue
// after the reduction.
INSTANTIATE_TEST_SUITE_P(Plans, ShardPins,
                         ::testing::Values(ShardPin{"DataParallel",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=4",
                                                    64,
                                                    48,
                                                    40,
                                                    "data,-",
                                                    "-,-",
                                                    "",
                                                    true,
                                                    true,
                                                    0xfc10eb402ab1cb02ull},
                                           ShardPin{"TensorParallelColumns",
                                                    {2, 2},
                                                    "4x4",
                                                    "model=4",
                                                    40,
                                                    48,
                                                    128,
                                                    "-,-",
                                                    "-,model",
                                                    "",
                                                    true,
                                                    false,
                                                    0x85ca42ed1bc24e40ull},
                                           ShardPin{"RowsAllReduce",
                                                    {2, 2},
                                                    "4x4",
                                                    "model=4",
                                                    40,
                                                    128,
                                                    48,
                                                    "-,model",
                                                    "model,-",
                                                    "",
                                                    true,
                                                    true,
                                                    0xb067232a12e3f4faull},
                                           ShardPin{"RowsAllReduceOnePiece",
                                                    {2, 2},
                                                    "4x4",
                                                    "model=4",
                                                    24,
                                                    128,
                                                    48,
                                                    "-,model",
                                                    "model,-",
                                                    "",
                                                    false,
                                                    false,
                                                    0x840b346ff4a687aaull},
                                           ShardPin{"RowsReduceScatterRows",
                                                    {2, 2},
                                                    "4x4",
                                                    "model=4",
                                                    128,
                                                    128,
                                                    48,
                                                    "-,model",
                                                    "model,-",
                                                    "model,-",
                                                    false,
                                                    true,
                                                    0xd73773640f713bb8ull},
                                           ShardPin{"RowsReduceScatterColumns",
                                                    {2, 2},
                                                    "4x4",
                                                    "model=4",
                                                    40,
                                                    128,
                                                    128,
                                                    "-,model",
                                                    "model,-",
                                                    "-,model",
                                                    true,
                                                    false,
                                                    0x004020b90d1be183ull},
                                           ShardPin{"FullySharded",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=4",
                                                    64,
                                                    100,
                                                    40,
                                                    "data,-",
                                                    "data,-",
                                                    "",
                                                    false,
                                                    true,
                                                    0x8913ebbb8baf1f58ull},
                                           ShardPin{"FullyShardedPipelined",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=4",
                                                    64,
                                                    100,
                                                    128,
                                                    "data,-",
                                                    "data,-",
                                                    "",
                                                    true,
                                                    true,
                                                    0xf0518d9ee26ccb08ull},
                                           ShardPin{"TwoD",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=2,model=2",
                                                    48,
                                                    40,
                                                    64,
                                                    "data,-",
                                                    "-,model",
                                                    "",
                                                    true,
                                                    true,
                                                    0x70c05a7f116c1833ull},
                                           ShardPin{"TwoDRowsAndColumns",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=2,model=2",
                                                    48,
                                                    64,
                                                    64,
                                                    "data,model",
                                                    "model,-",
                                                    "-,model",
                                                    false,
                                                    false,
                                                    0x60f7bd479863351full},
                                           ShardPin{"SameAxisGathersWOnN",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=4",
                                                    64,
                                                    40,
                                                    128,
                                                    "data,-",
                                                    "-,data",
                                                    "",
                                                    false,
                                                    false,
                                                    0x71dcc34248ae6b9eull},
                                           ShardPin{"XSplitOnKWSplitOnN",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=2,model=2",
                                                    24,
                                                    64,
                                                    64,
                                                    "-,data",
                                                    "-,data",
                                                    "",
                                                    false,
                                                    false,
                                                    0xc5ce92397742fa47ull},
                                           ShardPin{"GatherYRows",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=4",
                                                    36,
                                                    40,
                                                    24,
                                                    "data,-",
                                                    "-,-",
                                                    "-,-",
                                                    false,
                                                    false,
                                                    0x1190571b036ef5bbull},
                                           ShardPin{"SliceReplicated",
                                                    {2, 2},
                                                    "4x4",
                                                    "data=2,model=2",
                                                    30,
                                                    40,
                                                    64,
                                                    "-,-",
                                                    "-,-",
                                                    "data,model",
                                                    false,
                                                    false,
                                                    0x9c44eeaad0a836ccull},
                                           ShardPin{"Ring4",
                                                    {4},
                                                    "4x4",
                                                    "x=4",
                                                    33,
                                                    40,
                                                    24,
                                                    "x,-",
                                                    "x,-",
                                                    "",
                                                    false,
                                                    false,
                                                    0xf00f3c75b1c71d37ull},
                                           ShardPin{"Torus2x2x2KSplitOverYZ",
                                                    {2, 2, 2},
                                                    "4x4",
                                                    "data=2,model=4",
                                                    32,
                                                    128,
                                                    32,
                                                    "-,model",
                                                    "model,-",
                                                    "model,-",
                                                    true,
                                                    true,
                                                    0x2eaea2aa7a03324cull},
                                           ShardPin{"Pod4x4TwoD",
                                                    {4, 4},
                                                    "4x4",
                                                    "data=4,model=4",
                                                    64,
                                                    64,
                                                    128,
                                                    "data,-",
                                                    "-,model",
                                                    "",
                                                    true,
                                                    true,
                                                    0x0a8f436261902220ull},
                                           ShardPin{"Pod4x4FullyShardedPipelined",
                                                    {4, 4},
                                                    "16x16",
                                                    "data=16",
                                                    256,
                                                    256,
                                                    512,
                                                    "data,-",
                                                    "data,-",
                                                    "",
                                                    false,
                                                    false,
                                                    0xbad851dd868f00c3ull},
                                           ShardPin{"Pod4x4ReduceScatterPieces",
                                                    {4, 4},
                                                    "16x16",
                                                    "data=4,model=4",
                                                    256,
                                                    256,
                                                    128,
                                                    "-,model",
                                                    "model,-",
                                                    "model,-",
                                                    true,
                                                    true,
                                                    0xa5d16d3d9d3b709bull},
                                           ShardPin{"Pod4x4AllReducePieces",
                                                    {4, 4},
                                                    "16x16",
                                                    "model=16",
                                                    128,
                                                    512,
                                                    64,
                                                    "-,model",
                                                    "model,-",
                                                    "",
                                                    false,
                                                    true,
                                                    0x3524d3e1c6daa0f8ull},
                                           ShardPin{"Bench2x2FullySharded512",
                                                    {2, 2},
                                                    "16x16",
                                                    "data=4",
                                                    512,
                                                    512,
                                                    512,
                                                    "data,-",
                                                    "data,-",
                                                    "",
                                                    false,
                                                    false,
                                                    0x24bbd0ade57de3aeull},
                                           ShardPin{"Bench2x2KSplit512",
                                                    {2, 2},
                                                    "16x16",
                                                    "model=4",
                                                    512,
                                                    512,
                                                    512,
                                                    "-,model",
                                                    "model,-",
                                                    "model,-",
                                                    true,
                                                    false,
                                                    0x42bf9487053e03f4ull}),
                         [](const ::testing::TestParamInfo<ShardPin>& i) {
                           return std::string(i.param.name);
                         });

struct TrainPin {
  const char* name;
  std::vector<int> shape;
  std::vector<std::size_t> widths;
  std::size_t batch, pieces;
  const char* mesh;
  uint64_t hash;
};

void PrintTo(const TrainPin& c, std::ostream* os) { *os << c.name; }

class TrainPins : public ::testing::TestWithParam<TrainPin> {};

TEST_P(TrainPins, ProgramIsTheHandWrittenOne) {
  const TrainPin& c = GetParam();
  FakeHostPort port(Topology::torus(c.shape), "4x4");
  MlpSpec spec;
  spec.widths = c.widths;
  spec.batch = c.batch;
  spec.lr = 0.5f;
  TrainOptions to;
  to.grad_pieces = c.pieces;
  if (!std::string(c.mesh).empty()) to.mesh = parse_mesh(c.mesh);
  DataParallelTrainer tr(port, spec, to);
  const TrainStepRun run = tr.step();
  Fnv f;
  f.add(program_hash(run.program, tr.hbm_bytes_per_chip()));
  f.add(tr.spec().loss_chunk);
  if (print_pins()) std::printf("PIN train %s 0x%016llxull\n", c.name, (unsigned long long)f.h);
  EXPECT_EQ(f.h, c.hash) << c.name;
}

// Widths, batch, data and model axes, gradient pieces on 2x2 and 4x4 pods (and a ring, a 2x2x2
// torus and one chip).
INSTANTIATE_TEST_SUITE_P(
    Specs, TrainPins,
    ::testing::Values(
        TrainPin{"Torus2x2", {2, 2}, {32, 64, 32}, 8, 4, "", 0x897e1c9eb1a48372ull},
        TrainPin{"Torus2x2OnePiece", {2, 2}, {32, 32}, 12, 1, "", 0x61ba7c44c94cb24aull},
        TrainPin{"Torus2x2ThreeLayersOddBatch",
                 {2, 2},
                 {32, 32, 64, 32},
                 5,
                 3,
                 "",
                 0x310567c21f9e7281ull},
        TrainPin{"Ring4", {4}, {64, 32, 32}, 6, 2, "", 0x3daf2864163657e3ull},
        TrainPin{"Torus2x2x2", {2, 2, 2}, {32, 32, 32}, 4, 4, "", 0x049bbc0e91cbafd4ull},
        TrainPin{"OneChip", {1}, {32, 64, 32}, 16, 4, "", 0x8b0cbc6ac591d439ull},
        TrainPin{
            "DataByModel2x2", {2, 2}, {32, 64, 32}, 8, 2, "data=2,model=2", 0xcfb9b0755c14d391ull},
        TrainPin{"ModelOnlyRing4", {4}, {32, 128, 32}, 12, 1, "model=4", 0xf4910994a31acd98ull},
        TrainPin{"DataByModel2x2x2",
                 {2, 2, 2},
                 {64, 64, 32},
                 4,
                 4,
                 "data=4,model=2",
                 0x2695fb389a7f2928ull},
        TrainPin{"Pod4x4", {4, 4}, {64, 128, 64}, 16, 4, "", 0xfe53714db118ed51ull},
        TrainPin{"Pod4x4ThreeLayers", {4, 4}, {32, 64, 64, 32}, 8, 2, "", 0xfd70d6941c92dcbaull},
        TrainPin{"Pod4x4DataByModel",
                 {4, 4},
                 {64, 128, 32},
                 8,
                 4,
                 "data=4,model=4",
                 0xa62d6cc33d36329full},
        TrainPin{
            "Pod4x4ModelOnly", {4, 4}, {32, 512, 32}, 8, 1, "model=16", 0x57d63eb7c28b6374ull}),
    [](const ::testing::TestParamInfo<TrainPin>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace tpu
