// The sharding planner alone (no RTL): which collectives each layout gets, what each chip holds
// and computes, padding, and the errors for bad specs (docs/sharding.md).
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "../unit/expect_invalid.h"
#include "mesh_text.h"
#include "shard_plan.h"

namespace tpu {
namespace {

ShardPlan plan(const Topology& t, const std::string& mesh, std::size_t m, std::size_t k,
               std::size_t n, const std::string& x, const std::string& w,
               const std::string& y = "") {
  const PSpec ys = y.empty() ? PSpec{} : parse_pspec(y, "--y-spec");
  return plan_sharding(t, parse_mesh(mesh), m, k, n, parse_pspec(x, "--x-spec"),
                       parse_pspec(w, "--w-spec"), y.empty() ? nullptr : &ys);
}

std::string kinds(const std::vector<ShardCollective>& v) {
  std::string s;
  for (const ShardCollective& c : v)
    s += std::string(s.empty() ? "" : " ") + collective_name(c.kind) + ":" + c.tensor +
         std::to_string(c.dim) + "@" + c.axis;
  return s;
}

// Every element of the padded Y is held by exactly chips / (Y's split factors) chips, and every
// chip's product block lies inside what it stores or gathers.
void expect_tiles(const ShardPlan& p) {
  const int P = p.topo.num_chips();
  const std::size_t copies = static_cast<std::size_t>(P / p.axis_size(p.y.d[0]) /
                                                      p.axis_size(p.y.d[1]));
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> held;
  for (int c = 0; c < P; ++c) {
    const Range r = p.y_rows(c), cl = p.y_cols(c);
    EXPECT_EQ(r.size(), p.mp / static_cast<std::size_t>(p.axis_size(p.y.d[0])));
    EXPECT_EQ(cl.size(), p.np / static_cast<std::size_t>(p.axis_size(p.y.d[1])));
    ++held[{r.lo, cl.lo}];
    EXPECT_GE(p.mm_rows(c).lo, p.x_rows(c).lo);
    EXPECT_LE(p.mm_rows(c).hi, p.x_rows(c).hi);
    EXPECT_GE(p.mm_k(c).lo, p.x_cols(c).lo);
    EXPECT_LE(p.mm_k(c).hi, p.x_cols(c).hi);
  }
  EXPECT_EQ(held.size() * copies, static_cast<std::size_t>(P));
  for (const auto& [at, n] : held) EXPECT_EQ(n, copies) << at.first << "," << at.second;
}

const Topology k2x2 = Topology::torus({2, 2});

TEST(ShardPlan, DataParallelNeedsNoCollective) {
  const ShardPlan p = plan(k2x2, "data=4", 512, 512, 512, "data,-", "-,-");
  EXPECT_TRUE(p.pre.empty());
  EXPECT_TRUE(p.post.empty());
  EXPECT_EQ(p.y.text(), "data,-");
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(p.mm_rows(c), (Range{static_cast<std::size_t>(c) * 128,
                                   static_cast<std::size_t>(c + 1) * 128}));
    EXPECT_EQ(p.mm_k(c), (Range{0, 512}));
    EXPECT_EQ(p.mm_cols(c), (Range{0, 512}));
  }
  EXPECT_EQ(p.chip_macs(), 512u * 512 * 512);
  expect_tiles(p);
}

TEST(ShardPlan, TensorParallelColumnsAnd2D) {
  ShardPlan p = plan(k2x2, "model=4", 512, 512, 512, "-,-", "-,model");
  EXPECT_TRUE(p.pre.empty() && p.post.empty());
  EXPECT_EQ(p.y.text(), "-,model");
  expect_tiles(p);
  p = plan(k2x2, "data=2,model=2", 512, 512, 512, "data,-", "-,model");
  EXPECT_TRUE(p.pre.empty() && p.post.empty());
  EXPECT_EQ(p.y.text(), "data,model");
  expect_tiles(p);
}

TEST(ShardPlan, RowParallelReducesOverK) {
  ShardPlan p = plan(k2x2, "model=4", 512, 512, 512, "-,model", "model,-");
  EXPECT_EQ(p.k_axis, "model");
  EXPECT_EQ(kinds(p.post), "all_reduce:Y-1@model");
  EXPECT_EQ(p.y.text(), "-,-");
  p = plan(k2x2, "model=4", 512, 512, 512, "-,model", "model,-", "model,-");
  EXPECT_EQ(kinds(p.post), "reduce_scatter:Y0@model");
  EXPECT_FALSE(p.c_col_blocks);
  expect_tiles(p);
  p = plan(k2x2, "model=4", 512, 512, 512, "-,model", "model,-", "-,model");
  EXPECT_EQ(kinds(p.post), "reduce_scatter:Y1@model");
  EXPECT_TRUE(p.c_col_blocks);
  expect_tiles(p);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(p.mm_k(c).size(), 128u);
}

TEST(ShardPlan, FullyShardedGathersW) {
  const ShardPlan p = plan(k2x2, "data=4", 512, 512, 512, "data,-", "data,-");
  EXPECT_EQ(kinds(p.pre), "all_gather:W0@data");
  EXPECT_TRUE(p.w_gathered_k);
  EXPECT_TRUE(p.k_axis.empty());
  EXPECT_TRUE(p.post.empty());
  expect_tiles(p);
}

TEST(ShardPlan, SameAxisOnRowsAndColumnsGathersWOnN) {
  const ShardPlan p = plan(k2x2, "data=4", 256, 256, 256, "data,-", "-,data");
  EXPECT_EQ(kinds(p.pre), "all_gather:W1@data");
  EXPECT_TRUE(p.w_gathered_n);
  EXPECT_EQ(p.y.text(), "data,-");
  expect_tiles(p);
}

TEST(ShardPlan, XSplitOnKWithWSplitOnNOverTheSameAxis) {
  const ShardPlan p = plan(k2x2, "data=2,model=2", 256, 256, 256, "-,data", "-,data");
  EXPECT_EQ(kinds(p.pre), "all_gather:W1@data");
  EXPECT_EQ(p.k_axis, "data");
  EXPECT_EQ(kinds(p.post), "all_reduce:Y-1@data");
  expect_tiles(p);
}

TEST(ShardPlan, WSplitOnKSlicesAReplicatedX) {
  const ShardPlan p = plan(k2x2, "data=2,model=2", 256, 256, 256, "data,-", "model,-");
  EXPECT_TRUE(p.pre.empty());
  EXPECT_EQ(p.k_axis, "model");
  EXPECT_EQ(kinds(p.post), "all_reduce:Y-1@model");
  expect_tiles(p);
}

TEST(ShardPlan, YSpecGathersOrSlices) {
  ShardPlan p = plan(k2x2, "data=4", 256, 256, 256, "data,-", "-,-", "-,-");
  EXPECT_EQ(kinds(p.post), "all_gather:Y0@data");
  expect_tiles(p);
  p = plan(k2x2, "data=2,model=2", 256, 256, 256, "-,-", "-,-", "data,model");
  EXPECT_TRUE(p.pre.empty() && p.post.empty());
  EXPECT_EQ(p.xm_used, "data");
  EXPECT_EQ(p.wn_used, "model");
  expect_tiles(p);
  p = plan(k2x2, "model=4", 256, 256, 256, "-,-", "-,model", "-,-");
  EXPECT_EQ(kinds(p.pre), "all_gather:W1@model");
  expect_tiles(p);
  p = plan(k2x2, "data=2,model=2", 256, 256, 256, "data,model", "model,-", "-,model");
  EXPECT_EQ(kinds(p.post), "reduce_scatter:Y1@model all_gather:Y0@data");
  expect_tiles(p);
}

TEST(ShardPlan, PadsShapesThatDoNotDivide) {
  ShardPlan p = plan(k2x2, "data=4", 101, 100, 30, "data,-", "-,-");
  EXPECT_EQ(p.mp, 104u);
  EXPECT_EQ(p.kp, 100u);  // K not split: not padded
  EXPECT_EQ(p.np, 30u);
  expect_tiles(p);
  p = plan(k2x2, "model=4", 20, 100, 30, "-,model", "model,-");
  EXPECT_EQ(p.kp, 128u);  // 4 blocks of 32
  for (int c = 0; c < 4; ++c) EXPECT_EQ(p.mm_k(c).size(), 32u);
  p = plan(k2x2, "model=4", 20, 100, 30, "-,-", "-,model");
  EXPECT_EQ(p.np, 128u);
  p = plan(k2x2, "data=4", 20, 100, 30, "data,-", "data,-");  // K padded, summed unpadded
  EXPECT_EQ(p.kp, 128u);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(p.mm_k(c), (Range{0, 100}));
}

TEST(ShardPlan, AnAxisOverTwoTorusDimensions) {
  const Topology t = Topology::torus({4, 4, 4});
  const ShardPlan p = plan(t, "data=16,model=4", 1024, 512, 512, "data,-", "-,model");
  EXPECT_EQ(p.axis_size("data"), 16);
  std::map<int, int> ranks;
  for (int c = 0; c < 64; ++c) ++ranks[p.axis_rank("data", c)];
  EXPECT_EQ(ranks.size(), 16u);
  for (const auto& [r, n] : ranks) EXPECT_EQ(n, 4) << r;
  expect_tiles(p);
}

TEST(ShardPlan, BadSpecsNameTheFlagAndTheRule) {
  expect_invalid([] { plan(k2x2, "data=4", 64, 64, 64, "batch,-", "-,-"); },
                 {"--x-spec", "'batch'", "not in the mesh", "data=4"});
  expect_invalid([] { plan(k2x2, "data=2,model=2", 64, 64, 64, "-,-", "model,model"); },
                 {"--w-spec", "'model'", "used twice"});
  expect_invalid([] { plan(k2x2, "data=8", 64, 64, 64, "data,-", "-,-"); },
                 {"data=8", "4"});
  expect_invalid([] { plan(k2x2, "data=2,model=2", 64, 64, 64, "data,-", "-,model",
                           "model,data"); },
                 {"--y-spec", "resharding"});
  expect_invalid([] { plan(k2x2, "data=4", 0, 64, 64, "data,-", "-,-"); }, {"--m", ">= 1"});
  expect_invalid([] { parse_pspec("data", "--x-spec"); }, {"--x-spec", "two entries"});
  expect_invalid([] { parse_pspec("data,", "--x-spec"); }, {"--x-spec", "empty"});
  expect_invalid([] { parse_pspec("da-ta,-", "--w-spec"); }, {"--w-spec", "da-ta"});
}

}  // namespace
}  // namespace tpu
