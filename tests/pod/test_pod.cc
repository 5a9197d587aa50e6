// Collectives on a pod of verilated chips (plain C++ stepping): every output bit-exact against
// the golden executor of the same plan (model/collective.h), and within an f64 bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "chip_config.h"
#include "wave_check.h"
#include "pod_driver.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

std::vector<std::vector<uint32_t>> random_inputs(const CollectivePlan& plan, bool bf16,
                                                 std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c) {
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i) {
      const float v = nd(rng) * 8.0f;
      in[c].push_back(bf16 ? f32_to_bf16(v) : f32_bits(v));
    }
  }
  return in;
}

std::vector<std::vector<uint32_t>> golden(const CollectivePlan& plan,
                                          const std::vector<std::vector<uint32_t>>& in) {
  if (plan.spec.dtype == DType::kF32) return execute_plan_f32(plan, in);
  std::vector<std::vector<bf16_t>> b(in.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (uint32_t v : in[c]) b[c].push_back(static_cast<bf16_t>(v));
  const auto r = execute_plan_bf16(plan, b);
  std::vector<std::vector<uint32_t>> out(r.size());
  for (std::size_t c = 0; c < r.size(); ++c)
    for (bf16_t v : r[c]) out[c].push_back(v);
  return out;
}

PodParams params(Topology topo, unsigned latency = 1) {
  PodParams p;
  p.topo = std::move(topo);
  p.variant = "4x4";
  p.link_latency = latency;
  return p;
}

// Runs spec on the pod and checks every chip's output bit for bit.
PodCollectiveRun check(PodDriver& drv, const CollectiveSpec& spec, uint64_t seed,
                       unsigned block_rows = 64) {
  std::mt19937_64 rng(seed);
  const CollectivePlan plan = make_plan(drv.host().core().params().topo, spec);
  const auto in = random_inputs(plan, spec.dtype == DType::kBf16, rng);
  PodCollectiveOptions opt;
  opt.block_rows = block_rows;
  PodCollectiveRun r = drv.run(spec, in, opt);
  const auto want = golden(plan, in);
  EXPECT_EQ(r.out.size(), want.size());
  for (std::size_t c = 0; c < want.size(); ++c) {
    EXPECT_EQ(r.out[c], want[c]) << collective_name(spec.collective) << " " << spec.algorithm
                                 << " n=" << spec.n << " chip " << c;
  }
  return r;
}

TEST(PodAllReduce, RingOfFourF32SumIsBitExact) {
  CppPodHost host(params(Topology::torus({4})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.n = 1000;  // not a multiple of the chip count nor of the lanes
  const PodCollectiveRun r = check(drv, s, 1);
  EXPECT_GT(r.collective_cycles, 0u);
  uint64_t flits = 0;
  for (const auto& l : r.link_flits) flits += l.flits;
  EXPECT_GT(flits, 0u);
}

// Chips couple only through their links (>= 1 cycle) and host ports: stepping them in the
// opposite order within each cycle changes neither a bit nor a cycle.
TEST(PodCore, ChipOrderWithinACycleDoesNotMatter) {
  CollectiveSpec s;
  s.n = 901;
  s.algorithm = "torus";
  std::mt19937_64 rng(3);
  const CollectivePlan plan = make_plan(Topology::torus({2, 2}), s);
  const auto in = random_inputs(plan, false, rng);
  CppPodHost fwd(params(Topology::torus({2, 2}), 3)), rev(params(Topology::torus({2, 2}), 3));
  rev.reverse_step_order = true;
  const PodCollectiveRun a = PodDriver(fwd).run(s, in), b = PodDriver(rev).run(s, in);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.load_cycles, b.load_cycles);
  EXPECT_EQ(a.collective_cycles, b.collective_cycles);
  EXPECT_EQ(a.store_cycles, b.store_cycles);
}

// Sum all-reduce in f32 is also within the f64 bound: |out - sum| <= (p - 1) u sum |x_i|.
TEST(PodAllReduce, F32SumIsWithinTheF64Bound) {
  CppPodHost host(params(Topology::torus({4, 2})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.n = 333;
  s.algorithm = "torus";
  std::mt19937_64 rng(9);
  const CollectivePlan plan = make_plan(host.core().params().topo, s);
  const auto in = random_inputs(plan, false, rng);
  const PodCollectiveRun r = drv.run(s, in);
  const int p = 8;
  for (std::size_t i = 0; i < s.n; ++i) {
    double sum = 0, abs = 0;
    for (int c = 0; c < p; ++c) {
      sum += f32_from_bits(in[c][i]);
      abs += std::fabs(f32_from_bits(in[c][i]));
    }
    for (int c = 0; c < p; ++c)
      ASSERT_LE(std::fabs(f32_from_bits(r.out[c][i]) - sum), (p - 1) * 0x1p-24 * abs) << i;
  }
}

// --waves-chips: the chosen chips dump FST, and waves/pod_chip.gtkw names only signals they hold.
TEST(PodWaves, ChosenChipsDumpAndTheGtkwOpens) {
  if (!have_fst2vcd()) GTEST_SKIP() << "fst2vcd not found";
  const std::string dir = std::string(TPU_SOURCE_DIR) + "/waves/pod_test";
  {
    PodParams p = params(Topology::torus({2, 2}));
    p.wave_chips = {0, 3};
    p.wave_dir = dir;
    CppPodHost host(p);
    PodDriver drv(host);
    CollectiveSpec s;
    s.n = 256;
    check(drv, s, 4);
  }
  const auto wanted = gtkw_signals(std::string(TPU_SOURCE_DIR) + "/waves/pod_chip.gtkw");
  ASSERT_GT(wanted.size(), 20u);
  for (int c : {0, 3}) {
    const std::string fst = dir + "/pod_chip" + std::to_string(c) + ".fst";
    const auto missing = missing_signals(wanted, fst_signals(fst));
    EXPECT_TRUE(missing.empty()) << "first missing: " << (missing.empty() ? "" : missing[0]);
    std::remove(fst.c_str());
  }
  std::remove((dir + "/pod_chip1.fst").c_str());  // must not exist: not asked for
  std::filesystem::remove(dir);
}

// Bad input is a clear error, not a hang or a crash.
TEST(PodErrors, ClearMessages) {
  EXPECT_THROW(CppPodHost(params(Topology::torus({2, 9}))), std::invalid_argument);
  PodParams p = params(Topology::torus({2}));
  p.link_width = 3;  // does not divide the 16-byte row of a 4x4 chip
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  p.link_width = 0;
  p.wave_chips = {5};
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  CppPodHost host(params(Topology::torus({4})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.n = 1 << 20;  // far beyond a 4x4 chip's 64 KiB of VMEM
  try {
    drv.run(s, std::vector<std::vector<uint32_t>>(4, std::vector<uint32_t>(s.n)));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("VMEM rows"), std::string::npos) << e.what();
  }
  s.n = 10;
  EXPECT_THROW(drv.run(s, {{1, 2}}), std::invalid_argument);  // wrong number of inputs
  // A chip that never gets its data hangs; the pod says which chip waits on what.
  host.push(1, {cmd_ici_wait(0, 1)});
  try {
    host.run_until_idle(5000);
    FAIL() << "no error";
  } catch (const PodError& e) {
    EXPECT_NE(std::string(e.what()).find("chip 1 (1,0,0): busy"), std::string::npos) << e.what();
  }
}

// A pod configuration file: every field read, and errors name the file, key and rule.
TEST(PodConfig, ReadsTheShippedFilesAndRejectsBadOnes) {
  const PodConfig c = load_pod_config(std::string(TPU_SOURCE_DIR) + "/configs/pod_4x4.yaml");
  EXPECT_EQ(c.params.topo.name(), "torus4x4");
  EXPECT_EQ(c.params.link_latency, 2u);
  EXPECT_EQ(c.params.link_width, 16u);
  EXPECT_EQ(c.params.variant, "16x16");
  const std::string tmp = (std::filesystem::temp_directory_path() / "tpu_pod_cfg_test.yaml").string();
  auto bad = [&](const std::string& text, const std::string& needle) {
    FILE* f = std::fopen(tmp.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    try {
      load_pod_config(tmp);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad("pod: {shape: [2, 2], wrap: [true]}\nchip: {variant: 4x4}\n", "pod.wrap");
  bad("pod: {shape: [2, 2, 2, 2]}\nchip: {variant: 4x4}\n", "pod.shape");
  bad("pod: {shape: [9]}\nchip: {variant: 4x4}\n", "pod.shape");
  bad("pod: {shape: [2], link_latency: 0}\nchip: {variant: 4x4}\n", "pod.link_latency");
  bad("pod: {shape: [2], link_width_bytes: 5}\nchip: {variant: 4x4}\n", "pod.link_width_bytes");
  bad("pod: {shape: [2], speed: 3}\nchip: {variant: 4x4}\n", "pod.speed");
  bad("pod: {shape: [2]}\nchip: {variant: 8x8}\n", "chip.variant");
  bad("chip: {variant: 4x4}\n", "pod");
  std::remove(tmp.c_str());
}

struct PodCase {
  const char* name;
  Topology topo;
  Collective coll;
  const char* algo;
  DType dtype;
  ReduceOp op;
  std::size_t n;
};

class PodCollectives : public ::testing::TestWithParam<PodCase> {};

TEST_P(PodCollectives, BitExactAgainstThePlan) {
  const PodCase& c = GetParam();
  CppPodHost host(params(c.topo, 2));
  PodDriver drv(host);
  CollectiveSpec s;
  s.collective = c.coll;
  s.algorithm = c.algo;
  s.dtype = c.dtype;
  s.op = c.op;
  s.n = c.n;
  s.root = c.topo.num_chips() - 1;
  check(drv, s, c.n * 7 + 1, 16);  // small blocks: many pipelined blocks per transfer
}

const Topology kRing4 = Topology::torus({4});
const Topology kT22 = Topology::torus({2, 2});
const Topology kT44 = Topology::torus({4, 4});
const Topology kT222 = Topology::torus({2, 2, 2});
const Topology kT33 = Topology::torus({3, 3});
const Topology kM33 = Topology::mesh({3, 3});
const Topology kLine5 = Topology::mesh({5});
constexpr auto kAR = Collective::kAllReduce;
constexpr auto kRS = Collective::kReduceScatter;
constexpr auto kAG = Collective::kAllGather;
constexpr auto kA2A = Collective::kAllToAll;
constexpr auto kBC = Collective::kBroadcast;
constexpr auto kF32 = DType::kF32;
constexpr auto kBf = DType::kBf16;
constexpr auto kSum = ReduceOp::kSum;
constexpr auto kMax = ReduceOp::kMax;

INSTANTIATE_TEST_SUITE_P(
    Pods, PodCollectives,
    ::testing::Values(
        PodCase{"ring4_ar_ring_f32", kRing4, kAR, "ring", kF32, kSum, 1237},
        PodCase{"ring4_ar_biring_bf16", kRing4, kAR, "biring", kBf, kSum, 999},
        PodCase{"ring4_ar_ring_max", kRing4, kAR, "ring", kF32, kMax, 301},
        PodCase{"t22_ar_torus_f32", kT22, kAR, "torus", kF32, kSum, 777},
        PodCase{"t22_ar_biring_bf16_max", kT22, kAR, "biring", kBf, kMax, 130},
        PodCase{"t44_ar_torus_f32", kT44, kAR, "torus", kF32, kSum, 2000},
        PodCase{"t44_ar_ring_bf16", kT44, kAR, "ring", kBf, kSum, 555},
        PodCase{"t222_ar_torus_f32", kT222, kAR, "torus", kF32, kSum, 1001},
        PodCase{"t33_ar_torus_bf16", kT33, kAR, "torus", kBf, kSum, 700},
        PodCase{"m33_ar_torus_f32", kM33, kAR, "torus", kF32, kSum, 450},
        PodCase{"m33_ar_ring_f32", kM33, kAR, "ring", kF32, kSum, 300},
        PodCase{"line5_ar_biring_f32", kLine5, kAR, "biring", kF32, kMax, 211},
        PodCase{"ring4_rs_f32", kRing4, kRS, "ring", kF32, kSum, 1003},
        PodCase{"t33_rs_bf16", kT33, kRS, "ring", kBf, kSum, 500},
        PodCase{"ring4_ag_f32", kRing4, kAG, "ring", kF32, kSum, 1002},
        PodCase{"t222_ag_bf16", kT222, kAG, "ring", kBf, kSum, 333},
        PodCase{"t44_a2a_f32", kT44, kA2A, "ring", kF32, kSum, 16 * 37},
        PodCase{"m33_a2a_f32", kM33, kA2A, "ring", kF32, kSum, 9 * 11},
        PodCase{"t22_bc_f32", kT22, kBC, "ring", kF32, kSum, 640},
        PodCase{"ring4_tiny_ar", kRing4, kAR, "ring", kF32, kSum, 3}),
    [](const ::testing::TestParamInfo<PodCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace tpu
