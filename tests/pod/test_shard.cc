// Sharded matmuls on verilated pods (plain C++ stepping, 4x4 chips): every layout of
// docs/sharding.md bit-exact against its golden (K not split: the single-chip golden of the whole
// matmul; K split: the plan's partial sums and the collective's rounds), within the f64 bound,
// replicas equal, and ICI traffic exactly where the plan has collectives.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <random>
#include <string>

#include "mesh_text.h"
#include "pod.h"
#include "sharded_matmul.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

struct ShardCase {
  std::string name;
  std::vector<int> shape;
  std::string mesh;
  std::size_t m, k, n;
  std::string x, w, y;  // y "": the default
  bool bias = false, relu = false;
  std::size_t pieces = 1;  // the pipeline depth the layout gets
};
void PrintTo(const ShardCase& c, std::ostream* os) { *os << c.name; }

std::vector<ShardCase> cases() {
  return {
      {"DataParallel", {2, 2}, "data=4", 64, 48, 40, "data,-", "-,-", "", true, true},
      {"TensorParallelColumns", {2, 2}, "model=4", 40, 48, 128, "-,-", "-,model", "", true, false},
      {"RowsAllReduce", {2, 2}, "model=4", 40, 128, 48, "-,model", "model,-", "", true, true, 2},
      {"RowsAllReduceOnePiece", {2, 2}, "model=4", 24, 128, 48, "-,model", "model,-", ""},
      {"RowsReduceScatterRows", {2, 2}, "model=4", 128, 128, 48, "-,model", "model,-", "model,-",
       false, true, 2},
      {"RowsReduceScatterRowsOnePiece", {2, 2}, "model=4", 36, 128, 48, "-,model", "model,-",
       "model,-", false, false, 1},
      {"RowsReduceScatterColumns", {2, 2}, "model=4", 40, 128, 128, "-,model", "model,-",
       "-,model", true, false},
      {"FullySharded", {2, 2}, "data=4", 64, 100, 40, "data,-", "data,-", "", false, true},
      {"FullyShardedPipelined", {2, 2}, "data=4", 64, 100, 128, "data,-", "data,-", "", true,
       true, 4},
      {"TwoD", {2, 2}, "data=2,model=2", 48, 40, 64, "data,-", "-,model", "", true, true},
      {"TwoDRowsAndColumns", {2, 2}, "data=2,model=2", 48, 64, 64, "data,model", "model,-",
       "-,model"},
      {"SameAxisGathersWOnN", {2, 2}, "data=4", 64, 40, 128, "data,-", "-,data", ""},
      {"XSplitOnKWSplitOnN", {2, 2}, "data=2,model=2", 24, 64, 64, "-,data", "-,data", ""},
      {"GatherYRows", {2, 2}, "data=4", 36, 40, 24, "data,-", "-,-", "-,-"},
      {"SliceReplicated", {2, 2}, "data=2,model=2", 30, 40, 64, "-,-", "-,-", "data,model"},
      {"Ring4", {4}, "x=4", 33, 40, 24, "x,-", "x,-", ""},
      {"Pod4x4TwoD", {4, 4}, "data=4,model=4", 64, 64, 128, "data,-", "-,model", ""},
      // Axes over two torus dimensions: data on x and y, then model on y and z.
      {"Torus2x2x2DataOverXY", {2, 2, 2}, "data=4,model=2", 32, 64, 64, "data,-", "-,model", ""},
      {"Torus2x2x2KSplitOverYZ", {2, 2, 2}, "data=2,model=4", 32, 128, 32, "-,model", "model,-",
       "model,-"},
  };
}

class Shard : public ::testing::TestWithParam<ShardCase> {};

TEST_P(Shard, BitExactAndWithinTheF64Bound) {
  const ShardCase& c = GetParam();
  PodParams pp;
  pp.topo = Topology::torus(c.shape);
  pp.variant = "4x4";
  pp.link_latency = 2;
  CppPodHost host(pp);
  const PSpec ys = c.y.empty() ? PSpec{} : parse_pspec(c.y, "--y-spec");
  const ShardPlan plan =
      plan_sharding(pp.topo, parse_mesh(c.mesh), c.m, c.k, c.n, parse_pspec(c.x, "--x-spec"),
                    parse_pspec(c.w, "--w-spec"), c.y.empty() ? nullptr : &ys);
  std::mt19937_64 rng(7);
  const std::vector<bf16_t> x = random_bf16(rng, c.m * c.k), w = random_bf16(rng, c.k * c.n);
  ShardedMatmulOptions so;
  if (c.bias) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    so.bias.resize(c.n);
    for (auto& v : so.bias) v = nd(rng);
  }
  so.relu = c.relu;
  ShardedMatmul sm(host, plan, so);
  EXPECT_GT(sm.load(x, w), 0u);  // through the host ports: simulated time
  ShardedRun run = sm.run();
  const auto got = sm.read_y(&run);
  EXPECT_GT(run.store_cycles, 0u);
  const auto want = sm.golden(x, w);
  EXPECT_EQ(sm.mismatches(want, got), 0u) << plan.describe();

  EXPECT_GT(sm.real_elements(), 0u);
  std::size_t replica = 0;
  const auto y = sm.assemble(got, &replica);
  EXPECT_EQ(replica, 0u);
  const ShardF64Check f = shard_f64_check(sm, x, w, so.bias, so.relu, got);
  EXPECT_EQ(f.outside, 0u) << "worst " << f.worst;
  EXPECT_GT(f.checked, 0u);
  // Every chip ran; traffic on the links only when the plan has collectives.
  uint64_t flits = 0;
  for (const LinkStat& l : run.prog.link_flits) flits += l.flits;
  EXPECT_EQ(flits > 0, !plan.pre.empty() || !plan.post.empty()) << plan.describe();
  for (uint64_t cyc : run.prog.run.chip_cycles) EXPECT_GT(cyc, 0u);
  const bool epilogue = !plan.k_axis.empty() && (c.bias || c.relu);
  const std::vector<SpmdPhase>& phases = run.program.phases();
  EXPECT_EQ(phases.size(), 1 + (run.pieces > 1 ? run.pieces : plan.pre.size() + plan.post.size()) +
                               (epilogue ? 1 : 0));
  EXPECT_EQ(run.pieces, c.pieces);
  // Every command carries its phase, and every phase has commands on every chip.
  ASSERT_EQ(run.program.num_chips(), pp.topo.num_chips());
  for (int chip = 0; chip < run.program.num_chips(); ++chip) {
    const std::vector<CmdLabel>& tags = run.program.chip(chip).labels;
    for (std::size_t ph = 0; ph < phases.size(); ++ph)
      EXPECT_NE(std::count_if(tags.begin(), tags.end(),
                              [&](const CmdLabel& l) { return l.phase == static_cast<int>(ph); }),
                0)
          << ph;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Shard, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ShardCase>& i) { return i.param.name; });

// Bad input that the layout discovers: a bias of the wrong size, too little
// HBM; each a clear std::invalid_argument, before anything runs.
TEST(ShardErrors, RefusedBeforeRunning) {
  PodParams pp;
  pp.variant = "4x4";
  CppPodHost host(pp);
  const Mesh mesh = parse_mesh("model=4");
  ShardedMatmulOptions so;
  const ShardPlan cols = plan_sharding(pp.topo, mesh, 32, 64, 32, parse_pspec("-,-", "x"),
                                       parse_pspec("-,model", "w"));
  so.bias.assign(31, 0.0f);
  EXPECT_THROW(ShardedMatmul(host, cols, so), std::invalid_argument);
  const ShardPlan big = plan_sharding(pp.topo, mesh, 4096, 4096, 4096, parse_pspec("-,-", "x"),
                                      parse_pspec("-,model", "w"));
  try {
    ShardedMatmul sm(host, big, {});
    ADD_FAILURE() << "no error for a plan that does not fit HBM";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not enough HBM"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu
