// The data-parallel training step on verilated pods (plain C++ stepping, 4x4 chips): after every
// step every chip's parameters and loss partial sums equal the golden (model/train.h) bit for
// bit, replicas are equal, and the loss falls; the VPU maps on a chip alone against their
// golden; bad specs are refused naming the rule.
#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>

#include "chip_driver.h"
#include "lone_chip.h"
#include "mesh_text.h"
#include "pod.h"
#include "train_step.h"
#include "tpu/vector.h"
#include "vpu_map.h"

namespace tpu {
namespace {

struct TrainCase {
  std::string name;
  std::vector<int> shape;
  std::vector<std::size_t> widths;
  std::size_t batch;  // per chip
  std::size_t pieces;
  std::size_t steps;
  std::string mesh = "";  // "": data parallel over every chip
};
void PrintTo(const TrainCase& c, std::ostream* os) { *os << c.name; }

class Train : public ::testing::TestWithParam<TrainCase> {};

TEST_P(Train, EveryStepBitExactReplicasEqualLossFalls) {
  const TrainCase& c = GetParam();
  PodParams pp;
  pp.topo = Topology::torus(c.shape);
  pp.variant = "4x4";
  pp.link_latency = 2;
  CppPodHost host(pp);
  MlpSpec spec;
  spec.widths = c.widths;
  spec.batch = c.batch;
  spec.lr = 0.5f;
  TrainOptions to;
  to.grad_pieces = c.pieces;
  if (!std::string(c.mesh).empty()) to.mesh = parse_mesh(c.mesh);
  DataParallelTrainer tr(host, spec, to);
  const MlpSpec& sp = tr.spec();
  EXPECT_EQ(sp.chips, pp.topo.num_chips());
  EXPECT_EQ(sp.model * sp.data(), sp.chips);
  EXPECT_GT(sp.loss_chunk, 0u);
  const MlpParams init = init_mlp_params(sp, 3);
  const MlpData data = make_mlp_data(sp, 3);
  MlpGolden golden(sp, init);
  EXPECT_GT(tr.load_params(init), 0u);  // through the host ports: simulated time
  EXPECT_GT(tr.load_data(data), 0u);
  double first = 0, last = 0;
  for (std::size_t s = 0; s < c.steps; ++s) {
    const TrainStepRun run = tr.step();
    const MlpStepResult g =
        golden.step(data, tr.golden_all_reduce(), tr.golden_model_all_reduce());
    ASSERT_EQ(run.loss_parts.size(), g.loss_parts.size());
    for (std::size_t k = 0; k < g.loss_parts.size(); ++k)
      for (std::size_t i = 0; i < g.loss_parts[k].size(); ++i)
        ASSERT_EQ(f32_bits(run.loss_parts[k][i]), f32_bits(g.loss_parts[k][i]))
            << "step " << s << " chip " << k << " lane " << i;
    EXPECT_EQ(run.loss, g.loss);
    std::vector<MlpParams> got;
    for (int k = 0; k < sp.chips; ++k) got.push_back(tr.read_params(k));
    const TrainCheck chk = check_params(got, golden);
    EXPECT_GT(chk.compared, 0u);
    ASSERT_EQ(chk.mismatches, 0u) << "step " << s;
    ASSERT_EQ(chk.replica_mismatches, 0u) << "step " << s;
    EXPECT_GT(run.prog.run.cycles, 0u);
    if (sp.chips > 1) {  // the gradients travelled
      uint64_t flits = 0;
      for (const LinkStat& l : run.prog.link_flits) flits += l.flits;
      EXPECT_GT(flits, 0u);
    }
    if (s == 0) first = run.loss;
    last = run.loss;
  }
  EXPECT_LT(last, first);
  // An independent look at the parameters: they moved, and stayed finite.
  const MlpParams now = tr.read_params(0);
  std::size_t moved = 0;
  for (std::size_t l = 0; l < now.size(); ++l)
    for (std::size_t i = 0; i < now[l].w.size(); ++i) {
      ASSERT_TRUE(std::isfinite(now[l].w[i]));
      moved += now[l].w[i] != init[l].w[i];
    }
  EXPECT_GT(moved, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Pods, Train,
    ::testing::Values(
        TrainCase{"Torus2x2", {2, 2}, {32, 64, 32}, 8, 4, 3},
        TrainCase{"Torus2x2OnePiece", {2, 2}, {32, 32}, 12, 1, 2},
        TrainCase{"Torus2x2ThreeLayersOddBatch", {2, 2}, {32, 32, 64, 32}, 5, 3, 2},
        TrainCase{"Ring4", {4}, {64, 32, 32}, 6, 2, 2},
        TrainCase{"Torus2x2x2", {2, 2, 2}, {32, 32, 32}, 4, 4, 2},
        TrainCase{"OneChip", {1}, {32, 64, 32}, 16, 4, 3},
        // Tensor parallel: the hidden layer split over the model axis, the prediction's partial
        // products all-reduced over it, the gradients over the data axis.
        TrainCase{"DataByModel2x2", {2, 2}, {32, 64, 32}, 8, 2, 3, "data=2,model=2"},
        TrainCase{"ModelOnlyRing4", {4}, {32, 128, 32}, 12, 1, 2, "model=4"},
        TrainCase{"DataByModel2x2x2", {2, 2, 2}, {64, 64, 32}, 4, 4, 2, "data=4,model=2"}),
    [](const ::testing::TestParamInfo<TrainCase>& i) { return i.param.name; });

// The step's VPU maps on a chip alone: several chunks (a small VMEM budget), bf16 and f32
// operands, a constant, and the chunked sum, against vpu_lane and mlp_loss_partial.
TEST(VpuMap, ChunksBf16ConstantsAndTheSumMatchTheGolden) {
  LoneChip d("4x4");
  const std::size_t R = 37, C = 64, L = d.shape().cols;
  const HbmMatrix a = d.alloc_matrix(R, C, Dtype::kF32), b = d.alloc_matrix(R, C, Dtype::kBf16);
  const HbmMatrix consts = d.alloc_matrix(2, L, Dtype::kF32);
  const HbmMatrix o1 = d.alloc_matrix(R, C, Dtype::kBf16), o2 = d.alloc_matrix(R, C, Dtype::kF32);
  const HbmMatrix sum = d.alloc_matrix(64 / (4 * L), L, Dtype::kF32);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> av(R * C), cv(2 * L);
  for (float& v : av) v = nd(rng);
  const std::vector<bf16_t> bv = random_bf16(rng, R * C);
  for (std::size_t i = 0; i < L; ++i) {
    cv[i] = 0.375f;
    cv[L + i] = -1.5f;
  }
  d.write_matrix(a, av);
  d.write_matrix(b, bv);
  d.write_matrix(consts, cv);
  VpuMap m;
  m.rows = R;
  m.cols = C;
  m.in = {a, b};
  m.consts = consts;
  m.const_rows = {1, 0};  // value 2 = -1.5, value 3 = 0.375
  // v4 = a - b; v5 = bf16(v4 x 0.375); v6 = max(v4, -1.5); v7 = v6 x v6 (summed)
  m.ops = {{VpuOp::kSub, 0, 1, false}, {VpuOp::kMul, 4, 3, true}, {VpuOp::kMax, 4, 2, false},
           {VpuOp::kMul, 6, 6, false}};
  m.out = {{5, o1}, {6, o2}};
  m.sum = 7;
  m.sum_out = sum;
  const VpuMapPlan plan = plan_vpu_map(m, d.shape(), 0, 400);
  ASSERT_LT(plan.chunk, R);  // several chunks
  auto prog = plan.prog;
  prog.push_back(cmd_halt());
  d.run(prog);
  const auto g1 = d.read_matrix(o1), g2 = d.read_matrix(o2), gs = d.read_matrix(sum);
  std::vector<float> sq(R * C);
  for (std::size_t i = 0; i < R * C; ++i) {
    const uint32_t v4 = vpu_lane(VpuOp::kSub, f32_bits(av[i]), bv[i], 0, kVpuSrcBf16Y);
    ASSERT_EQ(g1[i], vpu_lane(VpuOp::kMul, v4, f32_bits(0.375f), 0, 0, true)) << i;
    const uint32_t v6 = vpu_lane(VpuOp::kMax, v4, f32_bits(-1.5f), 0);
    ASSERT_EQ(g2[i], v6) << i;
    sq[i] = f32_from_bits(v6);  // mlp_loss_partial squares it
  }
  const std::vector<float> want = mlp_loss_partial(sq, R, C, L, plan.chunk);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(gs[l], f32_bits(want[l])) << l;
}

TEST(VpuMap, RefusesWhatCannotRun) {
  LoneChip d("4x4");
  const HbmMatrix a = d.alloc_matrix(8, 64, Dtype::kF32), n = d.alloc_matrix(8, 4, Dtype::kF32);
  VpuMap m;
  m.rows = 8;
  m.cols = 64;
  m.in = {a};
  m.ops = {{VpuOp::kFma, 0, 0, false}};
  EXPECT_THROW(plan_vpu_map(m, d.shape(), 0, 1000), std::invalid_argument);
  m.ops = {{VpuOp::kAdd, 0, 0, false}};
  m.out = {{1, n}};  // wrong shape
  EXPECT_THROW(plan_vpu_map(m, d.shape(), 0, 1000), std::invalid_argument);
  m.out = {{1, a}};
  EXPECT_THROW(plan_vpu_map(m, d.shape(), 0, 10), std::invalid_argument);  // too few rows
  EXPECT_NO_THROW(plan_vpu_map(m, d.shape(), 0, 1000));
}

TEST(TrainSpec, RefusesWhatCannotRun) {
  PodParams pp;
  pp.topo = Topology::torus({2, 2});
  pp.variant = "4x4";
  CppPodHost host(pp);
  MlpSpec s;
  s.widths = {32, 48, 32};
  s.batch = 4;
  try {
    DataParallelTrainer tr(host, s);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
  s.widths = {32, 32};
  s.chips = 2;
  EXPECT_THROW(DataParallelTrainer(host, s), std::invalid_argument);
  s.chips = 0;
  s.widths = {4096, 4096};
  s.batch = 64;
  try {
    DataParallelTrainer tr(host, s);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("HBM"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu
