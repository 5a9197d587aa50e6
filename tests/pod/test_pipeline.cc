// Pipeline parallelism on verilated pods of 4x4 chips (docs/training.md, "Pipeline"): for each
// schedule every step's parameters of every stage and every loss partial sum equal the golden's
// (model/train.h with micro-batches) bit for bit, the sends moved data over ICI, and the
// timeline carries the slots; a pipelined run equals the same run without stages (one chip, the
// same micro-batches) bit for bit; each stage holds only its layers; bad settings are refused
// naming the rule.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "mesh_text.h"
#include "pipeline_train.h"
#include "pod.h"

namespace tpu {
namespace {

struct PipeCase {
  std::string name;
  std::vector<int> shape;
  std::string mesh;
  std::vector<std::size_t> widths;
  std::size_t batch;  // per data replica
  std::size_t microbatches;
  std::string schedule;
  std::string stages = "";
  std::size_t steps = 2;
};
void PrintTo(const PipeCase& c, std::ostream* os) { *os << c.name; }

PodParams pod(const std::vector<int>& shape) {
  PodParams pp;
  pp.topo = Topology::torus(shape);
  pp.variant = "4x4";
  pp.link_latency = 2;
  return pp;
}

TrainRunResult run(const PipeCase& c, TrainRunOptions ro = {}) {
  CppPodHost host(pod(c.shape));
  MlpSpec spec;
  spec.widths = c.widths;
  spec.batch = c.batch;
  spec.lr = 0.5f;
  PipelineOptions po;
  if (!c.mesh.empty()) po.mesh = parse_mesh(c.mesh);
  po.microbatches = c.microbatches;
  po.schedule = parse_pipe_schedule(c.schedule);
  po.stages_text = c.stages;
  ro.steps = c.steps;
  ro.seed = 3;
  return run_pipeline_training(host, spec, po, ro);
}

class Pipeline : public ::testing::TestWithParam<PipeCase> {};

TEST_P(Pipeline, EveryStepBitExactToTheGoldenSlotsOnTheTimeline) {
  const PipeCase& c = GetParam();
  TrainRunOptions ro;
  ro.trace_to = 1;
  const TrainRunResult r = run(c, ro);
  EXPECT_GT(r.check.compared, 0u);
  EXPECT_EQ(r.check.mismatches, 0u);
  EXPECT_EQ(r.check.replica_mismatches, 0u);
  EXPECT_EQ(r.loss_mismatches, 0u);
  ASSERT_TRUE(r.pass());
  for (const TrainStepRecord& s : r.steps) EXPECT_TRUE(s.golden_pass);
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
  // Every layer came back from some stage, moved by the training.
  ASSERT_EQ(r.final_params.size(), c.widths.size() - 1);
  for (std::size_t l = 0; l < r.final_params.size(); ++l) {
    ASSERT_EQ(r.final_params[l].w.size(), r.init[l].w.size()) << "layer " << l;
    EXPECT_NE(r.final_params[l].w, r.init[l].w) << "layer " << l;
  }
  // The timeline: the slots labelled per micro-batch, and the sends between the stages.
  const std::size_t P = r.pipeline.stats.stages.size();
  bool f_last = false, b0 = false, sends = false;
  const std::string last_mb = " mb" + std::to_string(c.microbatches - 1);
  for (const TraceEvent& e : r.trace) {
    f_last = f_last || e.label.rfind("F" + last_mb, 0) == 0;
    b0 = b0 || e.label.rfind("B mb0", 0) == 0;
    sends = sends || (e.unit == TraceUnit::kIciSend && e.label.rfind("send act", 0) == 0);
  }
  EXPECT_TRUE(f_last);
  EXPECT_TRUE(b0);
  EXPECT_EQ(sends, P > 1);
  // The measurements: a bubble per stage in [0, 1), peak activations as the table holds them.
  EXPECT_EQ(r.pipeline.schedule, c.schedule);
  EXPECT_GT(r.pipeline.stats.span, 0u);
  uint64_t most = 0;
  for (const PipelineStageStats& s : r.pipeline.stats.stages) {
    EXPECT_GE(s.bubble, 0.0);
    EXPECT_LT(s.bubble, 1.0);
    EXPECT_GT(s.busy, 0u);
    most = std::max(most, s.busy);
    // Relative to the ideal time: the same idle cycles over the busy ones, b / (1 - b) for a
    // stage of one chip; over several steps the mean of b / (1 - b), at least that of the mean
    // b (convex: Jensen) and near it (steps a few hundred cycles apart).
    if (c.mesh.find("data") == std::string::npos) {
      EXPECT_GE(s.bubble_of_ideal, s.bubble / (1.0 - s.bubble) - 1e-12);
      EXPECT_NEAR(s.bubble_of_ideal, s.bubble / (1.0 - s.bubble), 1e-2);
    }
    EXPECT_GE(s.bubble_of_ideal, s.bubble);
  }
  // The heaviest stage's bubble: its idle fraction, at most every stage's (means over steps).
  const double heaviest = r.pipeline.stats.heaviest_stage_bubble();
  EXPECT_NEAR(heaviest,
              1.0 - static_cast<double>(most) / static_cast<double>(r.pipeline.stats.span), 1e-12);
  for (const PipelineStageStats& s : r.pipeline.stats.stages) EXPECT_LE(heaviest, s.bubble + 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Pods, Pipeline,
    ::testing::Values(
        PipeCase{"GpipeRing4", {4}, "stage=4", {32, 32, 32, 32, 32}, 8, 4, "gpipe"},
        PipeCase{"OneFOneBRing4", {4}, "stage=4", {32, 32, 32, 32, 32}, 8, 4, "1f1b"},
        PipeCase{"InterleavedRing2", {2}, "stage=2", {32, 32, 32, 32, 32}, 8, 4, "interleaved:2"},
        PipeCase{"UnevenStagesRing2", {2}, "stage=2", {64, 32, 32, 32}, 6, 3, "1f1b", "0-1,2"},
        PipeCase{"DataByStage2x2", {2, 2}, "data=2,stage=2", {32, 32, 32}, 4, 2, "1f1b"},
        PipeCase{"MicrobatchesOneChip", {1}, "", {32, 32, 32}, 8, 4, "gpipe"}),
    [](const ::testing::TestParamInfo<PipeCase>& i) { return i.param.name; });

// A pipelined run (2 stages, 1F1B) and the same network, batch and micro-batches on one chip
// (no stages): the same accumulation order, so the same loss partial sums and the same weights,
// bit for bit, every step.
TEST(PipelineEquivalence, TwoStagesEqualOneChipWithTheSameMicrobatches) {
  const PipeCase staged{"", {2}, "stage=2", {32, 32, 32, 32, 32}, 8, 4, "1f1b", "", 3};
  PipeCase flat = staged;
  flat.shape = {1};
  flat.mesh = "";
  const TrainRunResult a = run(staged), b = run(flat);
  ASSERT_TRUE(a.pass());
  ASSERT_TRUE(b.pass());
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t s = 0; s < a.steps.size(); ++s) EXPECT_EQ(a.steps[s].loss, b.steps[s].loss);
  for (std::size_t l = 0; l < a.final_params.size(); ++l) {
    EXPECT_EQ(a.final_params[l].w, b.final_params[l].w) << "layer " << l;
    EXPECT_EQ(a.final_params[l].b, b.final_params[l].b) << "layer " << l;
  }
}

// Each stage's chips hold its layers only: a chip's parameters read back for its layers, the
// others absent; the tables are the schedule's.
TEST(PipelineLayout, StagesHoldTheirLayers) {
  CppPodHost host(pod({4}));
  MlpSpec spec;
  spec.widths = {32, 32, 32, 32, 32, 32, 32, 32, 32};
  spec.batch = 4;
  PipelineOptions po;
  po.mesh = parse_mesh("stage=4");
  po.microbatches = 4;
  po.schedule = parse_pipe_schedule("1f1b");
  PipelineTrainer tr(host, spec, po);
  EXPECT_EQ(tr.stages(), 4);
  EXPECT_EQ(tr.spec().chips, 1);  // one data replica
  for (int c = 0; c < 4; ++c) {
    const std::vector<std::size_t> ls = tr.layers_of_stage(tr.stage_of(c));
    EXPECT_EQ(ls, (std::vector<std::size_t>{2 * static_cast<std::size_t>(tr.stage_of(c)),
                                            2 * static_cast<std::size_t>(tr.stage_of(c)) + 1}));
  }
  EXPECT_EQ(tr.slots(), pipeline_slots(po.schedule, 4, 4));
}

TEST(PipelineSpec, RefusesWhatCannotRun) {
  CppPodHost host(pod({4}));
  MlpSpec spec;
  spec.widths = {32, 32, 32, 32, 32};
  spec.batch = 8;
  auto refuse = [&](const std::string& mesh, std::size_t m, const std::string& sched,
                    const std::string& stages, const std::string& want) {
    PipelineOptions po;
    po.mesh = parse_mesh(mesh);
    po.microbatches = m;
    po.schedule = parse_pipe_schedule(sched);
    po.stages_text = stages;
    try {
      PipelineTrainer tr(host, spec, po);
      ADD_FAILURE() << "no error for " << mesh << " " << sched;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refuse("stage=4", 2, "1f1b", "", "at least as many micro-batches as stages (4)");
  refuse("stage=4", 4, "interleaved:2", "", "does not divide the 1 layers per stage");
  refuse("stage=2,data=4", 4, "gpipe", "", "has 8 chips, the pod 4");
  refuse("stage=4", 3, "gpipe", "", "microbatches: 3 must divide the 8 examples");
  refuse("stage=4", 4, "gpipe", "0-1,2,3", "3 stages");
  spec.widths = {32, 32, 64, 32, 32};
  refuse("stage=4", 4, "gpipe", "", "every width after the inputs equal");
}

}  // namespace
}  // namespace tpu
