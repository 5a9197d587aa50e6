// Collectives on a pod of verilated chips (plain C++ stepping), streamed from HBM through VMEM
// in rounds: every output bit-exact against the golden of the driver's rounds (model/), the
// pure data movements also equal to the whole one-round plan, and every sum within the f64
// bound (an independent check that catches a plan that is wrong but agrees with itself).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <random>
#include <stdexcept>

#include "chip_config.h"
#include "mesh_text.h"
#include "pod.h"
#include "pod_driver.h"
#include "pod_mpi.h"
#include "size_sweep.h"
#include "tpu/bf16.h"
#include "tpu/twisted_torus.h"
#include "wave_check.h"

namespace tpu {
namespace {

PodParams params(Topology topo, unsigned latency = 1) {
  PodParams p;
  p.topo = std::move(topo);
  p.variant = "4x4";
  p.link_latency = latency;
  return p;
}

// The spec as the driver runs it (chunks of whole granules) and random inputs for it.
CollectivePlan driver_plan(PodDriver& drv, CollectiveSpec s) {
  s.granule = drv.granule(s.dtype);
  return make_plan(drv.host().info().topo, s);
}

std::vector<std::vector<uint32_t>> random_inputs(const CollectivePlan& plan, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const bool bf16 = plan.spec.dtype == DType::kBf16;
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c) {
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i) {
      const float v = nd(rng) * 8.0f;
      in[c].push_back(bf16 ? f32_to_bf16(v) : f32_bits(v));
    }
  }
  return in;
}

double value(uint32_t bits, DType t) {
  return t == DType::kBf16 ? bf16_to_f32(static_cast<bf16_t>(bits)) : f32_from_bits(bits);
}

// Independent of the plan: a sum's every output within (p - 1) u sum |x| of the f64 sum of its
// group's inputs (bf16: plus the final rounding); a max exactly the largest input.
void check_independently(const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& in,
                         const std::vector<std::vector<uint32_t>>& out) {
  const Collective k = plan.spec.collective;
  if (k != Collective::kAllReduce && k != Collective::kReduceScatter) return;
  const DType t = plan.spec.dtype;
  const Topology& topo = plan.topo;
  const auto& dims = plan.spec.group_dims;
  for (int c = 0; c < topo.num_chips(); ++c) {
    std::vector<int> grp;
    for (int g = 0; g < topo.num_chips(); ++g)
      if (group_index(topo, dims, g) == group_index(topo, dims, c)) grp.push_back(g);
    const double p = static_cast<double>(grp.size());
    std::size_t o = 0;
    for (const Segment& s : plan.chips[static_cast<std::size_t>(c)].output) {
      for (std::size_t i = 0; i < s.count; ++i, ++o) {
        double sum = 0, abs = 0, mx = -INFINITY;
        for (int g : grp) {
          const double x = value(in[static_cast<std::size_t>(g)][s.offset + i], t);
          sum += x;
          abs += std::fabs(x);
          mx = std::max(mx, x);
        }
        const double got = value(out[static_cast<std::size_t>(c)][o], t);
        if (plan.spec.op == ReduceOp::kMax) {
          ASSERT_EQ(got, mx) << "chip " << c << " element " << o;
          continue;
        }
        double bound = (p - 1) * 0x1p-24 * abs;
        if (t == DType::kBf16) bound = bound * (1 + 0x1p-8) + 0x1p-8 * std::fabs(sum) + 0x1p-133;
        ASSERT_LE(std::fabs(got - sum), bound) << "chip " << c << " element " << o;
      }
    }
  }
}

// Runs spec on the pod and checks every chip's output bit for bit, and independently.
PodCollectiveRun check(PodDriver& drv, const CollectiveSpec& spec, uint64_t seed,
                       PodCollectiveOptions opt = {}) {
  const CollectivePlan plan = driver_plan(drv, spec);
  const auto in = random_inputs(plan, seed);
  PodCollectiveRun r = drv.run(spec, in, opt);
  const auto want = golden_collective(r.rounds, in);
  const std::string what = std::string(collective_name(spec.collective)) + " " + spec.algorithm +
                           " " + dtype_name(spec.dtype) + " n=" + std::to_string(spec.n) +
                           " rounds=" + std::to_string(r.rounds.size());
  EXPECT_EQ(r.out.size(), want.size());
  for (std::size_t c = 0; c < want.size(); ++c) {
    EXPECT_EQ(r.out[c], want[c]) << what << " chip " << c;
  }
  // Data movement does not depend on the rounds: the whole plan's golden gives the same bits.
  if (!collective_reduces(spec.collective)) {
    const auto once = golden_collective(make_rounds(plan.topo, plan.spec, 1), in);
    EXPECT_EQ(r.out, once) << what;
  }
  check_independently(plan, in, r.out);
  return r;
}

TEST(PodAllReduce, RingOfFourF32SumIsBitExact) {
  CppPodHost host(params(Topology::torus({4})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.n = 1000;  // not a multiple of the chip count nor of the lanes
  const PodCollectiveRun r = check(drv, s, 1);
  EXPECT_GT(r.collective_cycles, 0u);
  EXPECT_GT(r.load_cycles, 0u);  // the inputs came in through the host ports
  uint64_t flits = 0;
  for (const auto& l : r.prog.link_flits) flits += l.flits;
  EXPECT_GT(flits, 0u);
}

// An all-reduce in rounds issues round r's all-gather beside round r + 1's reduce-scatter
// (docs/pod.md "Overlapped rounds"), or, asked not to, one round after the other: the same bits
// either way (the rounds' plans are the same), and the order of the waits shows which ran.
TEST(PodAllReduce, OverlappedRoundsGiveTheSameBits) {
  for (const Topology& t : {Topology::torus({2, 2}), Topology::torus({4})}) {
    for (DType d : {DType::kF32, DType::kBf16}) {
      CppPodHost host(params(t));
      PodDriver drv(host);
      CollectiveSpec s;
      s.algorithm = t.active_dims().size() >= 2 ? "torus" : "biring";
      s.dtype = d;
      s.n = 40 * drv.granule(d) * static_cast<std::size_t>(t.num_chips()) + 3;
      for (bool overlap : {true, false}) {
        SCOPED_TRACE(t.name() + " " + dtype_name(d) + (overlap ? " overlapped" : " serial"));
        PodCollectiveOptions o;
        o.rounds = 5;
        o.block_rows = 16;
        o.overlap_rounds = overlap;
        const PodCollectiveRun r = check(drv, s, 11, o);
        ASSERT_EQ(r.rounds.size(), 5u);
        // Chip 0's waits (ICI_WAITs, and reductions that take their rows as they land):
        // overlapped, some wait of round 1's first step comes before the last wait of round 0;
        // serial, never.
        CollectiveBuffers b;
        for (int c = 0; c < t.num_chips(); ++c) {
          b.in.push_back(0);
          b.out.push_back(1 << 20);
        }
        const PodProgram pp = drv.compile(s, b, o);
        const std::size_t S = pp.rounds[0].plan.steps.size();
        std::size_t first_r1 = SIZE_MAX, last_r0 = 0;
        for (std::size_t i = 0; i < pp.program.cmds(0).size(); ++i) {
          const ChipCmd& k = pp.program.cmds(0)[i];
          if (k.op() != ChipOp::kIciWait && !(k.op() == ChipOp::kVpu && CmdVpu::decode(k).x_wait))
            continue;
          const int st = pp.program.chip(0).labels[i].step;
          if (st >= 0 && static_cast<std::size_t>(st) < S) last_r0 = i;
          if (static_cast<std::size_t>(st) == S) first_r1 = std::min(first_r1, i);
        }
        ASSERT_NE(first_r1, SIZE_MAX);
        EXPECT_EQ(first_r1 < last_r0, overlap) << first_r1 << " " << last_r0;
      }
    }
  }
}

// A bf16 all-reduce reduces f32 partials but gathers the rounded bf16, two to a lane
// (docs/collectives.md, Numerics): its links carry half the all-gather's rows of the f32
// all-reduce of as many elements, so about 3/4 of its flits (1/2 + 1/4; head flits and tokens
// the same), where sending f32 all the way gave 1. The bits are the golden's either way.
TEST(PodAllReduce, Bf16GathersBf16OnTheWire) {
  for (const Topology& t : {Topology::torus({4}), Topology::torus({2, 2})}) {
    CppPodHost host(params(t));
    PodDriver drv(host);
    std::map<DType, uint64_t> flits;
    for (DType d : {DType::kF32, DType::kBf16}) {
      SCOPED_TRACE(t.name() + " " + dtype_name(d));
      CollectiveSpec s;
      s.algorithm = t.active_dims().size() >= 2 ? "torus" : "biring";
      s.dtype = d;
      s.n = 24 * drv.granule(DType::kBf16) * static_cast<std::size_t>(t.num_chips());
      PodCollectiveOptions o;
      o.rounds = 1;
      const PodCollectiveRun r = check(drv, s, 5, o);
      for (const auto& l : r.prog.link_flits) flits[d] += l.flits;
    }
    const double ratio =
        static_cast<double>(flits[DType::kBf16]) / static_cast<double>(flits[DType::kF32]);
    EXPECT_GT(ratio, 0.72) << t.name();
    EXPECT_LT(ratio, 0.80) << t.name();
  }
}

// A buffer far larger than VMEM (a 4x4 chip has 64 KiB) streams through it in rounds.
TEST(PodAllReduce, BufferLargerThanVmemRunsInRounds) {
  CppPodHost host(params(Topology::torus({2, 2})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.algorithm = "torus";
  s.n = 50'001;  // 200 KB per chip
  PodCollectiveOptions o;
  o.backdoor = true;
  const PodCollectiveRun r = check(drv, s, 2, o);
  EXPECT_GT(r.rounds.size(), 3u);
  EXPECT_EQ(r.load_cycles, 0u);  // the backdoor takes no simulated time
  EXPECT_LE(r.vmem_rows_used, host.info().shape.vmem_rows);
}

// Chips couple only through their links (>= 1 cycle) and host ports: stepping them in the
// opposite order within each cycle changes neither a bit nor a cycle.
TEST(PodCore, ChipOrderWithinACycleDoesNotMatter) {
  CollectiveSpec s;
  s.n = 901;
  s.algorithm = "torus";
  CppPodHost fwd(params(Topology::torus({2, 2}), 3)), rev(params(Topology::torus({2, 2}), 3));
  rev.reverse_step_order = true;
  PodDriver df(fwd), dr(rev);
  const auto in = random_inputs(driver_plan(df, s), 3);
  PodCollectiveOptions o;
  o.rounds = 2;
  const PodCollectiveRun a = df.run(s, in, o), b = dr.run(s, in, o);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.load_cycles, b.load_cycles);
  EXPECT_EQ(a.collective_cycles, b.collective_cycles);
  EXPECT_EQ(a.store_cycles, b.store_cycles);
}

// Several threads stepping the chips of a cycle give the same bits, cycles and counters as
// one, on a 2D and a 3D torus (and the threads' slabs of uneven size); a chip error raised on a
// worker thread reaches the caller.
TEST(PodCore, ThreadsGiveTheSameBitsAndCycles) {
  for (const Topology& topo : {Topology::torus({2, 2}), Topology::torus({2, 2, 2})}) {
    CollectiveSpec s;
    s.n = 901;
    s.algorithm = "torus";
    PodCollectiveOptions o;
    o.rounds = 2;
    PodParams p1 = params(topo, 3), p3 = params(topo, 3);
    p3.threads = 3;
    CppPodHost one(p1), three(p3);
    EXPECT_EQ(one.core().threads(), 1u);
    EXPECT_EQ(three.core().threads(), 3u);
    PodDriver d1(one), d3(three);
    const auto in = random_inputs(driver_plan(d1, s), 5);
    const PodCollectiveRun a = d1.run(s, in, o), b = d3.run(s, in, o);
    EXPECT_EQ(a.out, b.out) << topo.name();
    EXPECT_EQ(a.load_cycles, b.load_cycles) << topo.name();
    EXPECT_EQ(a.collective_cycles, b.collective_cycles) << topo.name();
    EXPECT_EQ(a.prog.run.chip_cycles, b.prog.run.chip_cycles) << topo.name();
    for (int c = 0; c < topo.num_chips(); ++c)
      for (unsigned i = 0; i < kNumChipStats; ++i)
        EXPECT_EQ(one.counters(c)[i], three.counters(c)[i]) << topo.name() << " chip " << c;
    EXPECT_EQ(one.link_stats().size(), three.link_stats().size());
    for (std::size_t l = 0; l < one.link_stats().size(); ++l)
      EXPECT_EQ(one.link_stats()[l].flits, three.link_stats()[l].flits);
  }
  PodParams p = params(Topology::torus({2, 2}), 3);
  p.threads = 2;
  CppPodHost host(p);
  host.push(3, {ChipCmd::make(static_cast<ChipOp>(12), 0, 0, 0, 0, 0, 0)});  // chip 3: slab 1
  try {
    host.run_until_idle(100000);
    FAIL() << "no error";
  } catch (const ChipError& e) {
    EXPECT_EQ(e.chip(), 3);
  }
}

// The host ports of every chip copy at once: four chips take about as long as one.
TEST(PodHostPort, CopiesToEveryChipRunAtOnceAtThePortBandwidth) {
  PodParams p = params(Topology::torus({2, 2}));
  p.host_bytes_per_cycle = 16;
  CppPodHost host(p);
  std::vector<std::vector<uint8_t>> data(4, std::vector<uint8_t>(64 * 256));
  for (std::size_t c = 0; c < 4; ++c)
    for (std::size_t i = 0; i < data[c].size(); ++i) data[c][i] = static_cast<uint8_t>(i * 7 + c);
  const uint64_t one = host.write(0, 4096, data[0].data(), data[0].size());
  std::vector<HostCopy> all;
  for (int c = 0; c < 4; ++c)
    all.push_back(
        HostCopy{c, true, 4096, data[static_cast<std::size_t>(c)].data(), data[0].size()});
  const uint64_t four = host.copy(all);
  EXPECT_GE(one, 256u * 4 - 4);  // 16 bytes per cycle: a burst every 4 cycles
  EXPECT_LE(four, one + one / 4);
  for (int c = 0; c < 4; ++c) {
    std::vector<uint8_t> a(data[0].size()), b(data[0].size());
    host.read(c, 4096, a.data(), a.size());
    host.backdoor_read(c, 4096, b.data(), b.size());
    EXPECT_EQ(a, data[static_cast<std::size_t>(c)]) << c;
    EXPECT_EQ(b, data[static_cast<std::size_t>(c)]) << c;
  }
  // Backdoor writes are seen by the host port (and so by the chip), in no simulated time.
  const uint64_t t = host.cycle();
  host.backdoor_write(3, 1 << 20, data[1].data(), data[1].size());
  EXPECT_EQ(host.cycle(), t);
  std::vector<uint8_t> back(data[1].size());
  host.read(3, 1 << 20, back.data(), back.size());
  EXPECT_EQ(back, data[1]);
  EXPECT_THROW(host.write(0, 32, data[0].data(), 64), std::invalid_argument);          // misaligned
  EXPECT_THROW(host.backdoor_write(4, 0, data[0].data(), 64), std::invalid_argument);  // no chip
  p.host_bytes_per_cycle = 65;
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
}

// A chip that stops with an error inside a pod program stops the run with that chip's error
// code and command index, not a hang of the chips that wait for it.
TEST(PodPrograms, AChipErrorStopsTheRunWithItsCodeAndCommand) {
  CppPodHost host(params(Topology::torus({2, 2})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.n = 300;
  CollectiveBuffers b{{0, 0, 0, 0}, {4096, 4096, 4096, 4096}};
  PodProgram pp = drv.compile(s, b);
  ChipProgram& p2 = pp.program.chip(2);
  p2.cmds.insert(p2.cmds.begin() + 3, ChipCmd::make(static_cast<ChipOp>(12), 0, 0, 0, 0, 0, 0));
  p2.labels.insert(p2.labels.begin() + 3, CmdLabel{});
  try {
    drv.run_programs(pp.program);
    FAIL() << "no error";
  } catch (const ChipError& e) {
    EXPECT_EQ(e.chip(), 2);
    EXPECT_EQ(e.code(), 1u);  // illegal_opcode
    EXPECT_EQ(e.cmd(), 3u);
    EXPECT_NE(std::string(e.what()).find("chip 2 (0,1,0)"), std::string::npos) << e.what();
  }
}

// --waves-chips: the chosen chips dump FST, and waves/pod_chip.gtkw names only signals they hold.
TEST(PodWaves, ChosenChipsDumpAndTheGtkwOpens) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (gtkwave) is needed: scripts/deps.sh installs it";
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
  EXPECT_FALSE(std::filesystem::exists(dir + "/pod_chip1.fst"));  // not asked for
  std::filesystem::remove(dir);
}

// 16 chips per dimension (4-bit coordinates in the ICI header and in ICI_SEND, room for a
// 16x16x16 pod): a ring of 16 and a 16x2 torus all-reduce bit-exact, the chips at coordinate 15
// included; 17 is refused by the topology's rule.
TEST(PodScale, SixteenChipsPerDimension) {
  for (const Topology& t : {Topology::torus({16}), Topology::torus({16, 2})}) {
    CppPodHost host(params(t));
    PodDriver drv(host);
    CollectiveSpec s;
    s.n = 16 * 64;
    s.algorithm = t.active_dims().size() >= 2 ? "torus" : "biring";
    check(drv, s, 16);
  }
  EXPECT_THROW(Topology::torus({17}).validate(), std::invalid_argument);
}

// Bad input is a clear error, not a hang or a crash.
TEST(PodErrors, ClearMessages) {
  EXPECT_THROW(CppPodHost(params(Topology::torus({2, 17}))), std::invalid_argument);
  PodParams p = params(Topology::torus({2}));
  p.link_width = 3;  // does not divide the 16-byte row of a 4x4 chip
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  p.link_width = 0;
  p.wave_chips = {5};
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  CppPodHost host(params(Topology::torus({4})));
  PodDriver drv(host);
  CollectiveSpec s;
  s.n = 3 << 20;  // 12 MiB in and 12 MiB out: more than a chip's 16 MiB of HBM
  try {
    drv.run(s, std::vector<std::vector<uint32_t>>(4, std::vector<uint32_t>(s.n)));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit in the chip's 16777216 bytes of HBM"),
              std::string::npos)
        << e.what();
  }
  s.n = 10;
  EXPECT_THROW(drv.run(s, std::vector<std::vector<uint32_t>>{{1, 2}}),
               std::invalid_argument);                        // wrong number of inputs
  CollectiveBuffers b{{0, 0, 0, 0}, {32, 4096, 4096, 4096}};  // misaligned output
  EXPECT_THROW(drv.compile(s, b), std::invalid_argument);
  // A chip that never gets its data hangs; the pod says which chip waits on what.
  host.push(1, {cmd_ici_wait(0, 1)});
  try {
    host.run_until_idle(5000);
    FAIL() << "no error";
  } catch (const PodError& e) {
    EXPECT_NE(std::string(e.what()).find("chip 1 (1,0,0): busy"), std::string::npos) << e.what();
  }
}

// A reduction that takes its rows as they land (x_wait) is in flight while they cross the
// link, but computes only as each comes: the breakdown counts its waiting as communication.
// Two 4x4 chips on 4-byte links (a 16-byte row every 4 cycles): chip 1 reduces 64 rows.
TEST(PodBreakdown, AReductionWaitingForItsRowsIsCommunication) {
  PodParams p = params(Topology::torus({2}));
  p.link_width = 4;
  CppPodHost host(p);
  const uint32_t rows = 64;
  VpuCmdArgs red = vpu_rows(VpuOp::kAdd, Mem::kVmem, 1000, 2000, 2000, rows);
  red.x_counter = 3;
  const ChipCounters before = host.counters(1);
  host.push(0, {cmd_ici_send(Mem::kVmem, 0, rows, {1, 0, 0}, Mem::kVmem, 1000, 3)});
  host.push(1, {cmd_vpu(red)});
  host.run_until_idle(100000);
  const ChipCounters d = host.counters(1) - before;
  EXPECT_GE(d[kStatVpuFlight], 3 * rows);  // the rows come a row every 4 cycles
  EXPECT_LE(d[kStatClsCompute], rows + 8);  // a row a cycle as each lands
  EXPECT_GE(d[kStatClsComm], 2 * rows);
}

// A pod configuration file: every field read, and errors name the file, key and rule.
TEST(PodConfig, ReadsTheShippedFilesAndRejectsBadOnes) {
  const PodConfig c = load_pod_config(std::string(TPU_SOURCE_DIR) + "/configs/pod_4x4.yaml");
  EXPECT_EQ(c.params.topo.name(), "torus4x4");
  EXPECT_EQ(c.params.link_latency, 2u);
  EXPECT_EQ(c.params.link_width, 16u);
  EXPECT_EQ(c.params.variant, "16x16");
  EXPECT_EQ(c.params.host_bytes_per_cycle, 64u);
  const std::string tmp =
      (std::filesystem::temp_directory_path() / "tpu_pod_cfg_test.yaml").string();
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
  bad("pod: {shape: [17]}\nchip: {variant: 4x4}\n", "pod.shape");
  bad("pod: {shape: [2], link_latency: 0}\nchip: {variant: 4x4}\n", "pod.link_latency");
  bad("pod: {shape: [2], link_width_bytes: 5}\nchip: {variant: 4x4}\n", "pod.link_width_bytes");
  bad("pod: {shape: [2], host_bytes_per_cycle: 0}\nchip: {variant: 4x4}\n",
      "pod.host_bytes_per_cycle");
  bad("pod: {shape: [2], host_bytes_per_cycle: 128}\nchip: {variant: 4x4}\n",
      "pod.host_bytes_per_cycle");
  bad("pod: {shape: [2], speed: 3}\nchip: {variant: 4x4}\n", "pod.speed");
  bad("pod: {shape: [2]}\nchip: {variant: 8x8}\n", "chip.variant");
  bad("pod: {shape: [2]}\nchip: {variant: 4x4, clock_ghz: 0}\n", "chip.clock_ghz");
  bad("pod: {shape: [2]}\nchip: {variant: 4x4, clock_ghz: fast}\n", "chip.clock_ghz");
  bad("chip: {variant: 4x4}\n", "pod");
  std::remove(tmp.c_str());
}

// Every collective on every topology, at three sizes: within one round, several rounds, and an
// odd size in two rounds; f32 and bf16.
struct PodCase {
  std::string name;
  Topology topo;
  Collective coll;
  DType dtype;
  int size;  // 0: one round, 1: several rounds, 2: odd
  std::string algo;  // empty: algo_for
};

std::string algo_for(const Topology& t, Collective c) {
  if (c != Collective::kAllReduce) return "ring";
  return t.active_dims().size() >= 2 ? "torus" : "biring";
}

void PrintTo(const PodCase& c, std::ostream* os) { *os << c.name; }

class PodCollectives : public ::testing::TestWithParam<PodCase> {};

TEST_P(PodCollectives, BitExactInRounds) {
  const PodCase& c = GetParam();
  PodParams pp = params(c.topo, 2);
  // A bf16 all-to-all of 16 chips needs more rows than a 4x4 chip's VMEM region holds even at
  // one 64-byte granule per block (docs/pod.md: limits): it runs on 16x16 chips.
  if (c.coll == Collective::kAllToAll && c.dtype == DType::kBf16 && c.topo.num_chips() > 9)
    pp.variant = "16x16";
  CppPodHost host(pp);
  PodDriver drv(host);
  CollectiveSpec s;
  s.collective = c.coll;
  s.algorithm = c.algo.empty() ? algo_for(c.topo, c.coll) : c.algo;
  s.dtype = c.dtype;
  s.op = c.coll == Collective::kReduceScatter && c.size == 2 ? ReduceOp::kMax : ReduceOp::kSum;
  s.root = c.topo.num_chips() - 1;
  const std::size_t p = static_cast<std::size_t>(c.topo.num_chips());
  const std::size_t g = drv.granule(c.dtype);
  PodCollectiveOptions o;
  o.block_rows = 16;  // small blocks: many pipelined blocks per transfer
  if (c.coll == Collective::kAllToAll) {
    s.n = p * g * (c.size == 0 ? 1 : c.size == 1 ? 3 : 2);
  } else {
    s.n = c.size == 0 ? 61 : c.size == 1 ? 64 * p + 17 : 37 * p + 5;
  }
  o.rounds = c.size == 0 ? 1 : c.size == 1 ? 3 : 2;
  const PodCollectiveRun r = check(drv, s, s.n * 7 + 1, o);
  // As many rounds as asked, but no more than the buffer has granules (an all-reduce's rounds
  // cut the whole buffer: 81 bf16 on one chip are two 64-element granules).
  const std::size_t units = (s.n + drv.granule(s) - 1) / drv.granule(s);
  EXPECT_EQ(r.rounds.size(),
            c.coll == Collective::kAllReduce ? std::min(o.rounds, units) : o.rounds);
}

std::vector<PodCase> pod_cases() {
  const std::vector<std::pair<std::string, Topology>> topos = {
      {"ring4", Topology::torus({4})},  {"t22", Topology::torus({2, 2})},
      {"t44", Topology::torus({4, 4})}, {"t222", Topology::torus({2, 2, 2})},
      {"t33", Topology::torus({3, 3})}, {"m33", Topology::mesh({3, 3})},
      {"line5", Topology::mesh({5})},   {"one", Topology::torus({1})}};
  std::vector<PodCase> v;
  for (const auto& [tn, t] : topos)
    for (Collective k : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                         Collective::kAllToAll, Collective::kBroadcast})
      for (DType d : {DType::kF32, DType::kBf16})
        for (int size = 0; size < 3; ++size)
          for (std::string algo : {"", "direct"}) {
            if (!algo.empty() && k != Collective::kAllToAll) continue;
            v.push_back(PodCase{tn + "_" + collective_name(k) + (algo.empty() ? "" : "_direct") +
                                    "_" + dtype_name(d) + "_" +
                                    (size == 0   ? "one_round"
                                     : size == 1 ? "rounds3"
                                                 : "odd"),
                                t, k, d, size, algo});
          }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Pods, PodCollectives, ::testing::ValuesIn(pod_cases()),
                         [](const ::testing::TestParamInfo<PodCase>& i) { return i.param.name; });

// Small sizes on the RTL, a sample of test_pod_programs' sweep (PodProgramsSweep: every
// collective, dtype and size from 2 to 520 bytes, no RTL): the default 2x2 pod (16x16 chips,
// 16-byte links of 2 cycles) runs a bf16 and an f32 all-reduce at every size, where a bf16
// all-reduce of 34..64 bytes mod 128 once read a packed row before it landed, and the other
// collectives at every 14th; a 4x4x4 of 4x4 chips the all-reduces in that size class. Every
// chip's output bit for bit against the golden, sums within the f64 bound.
void small_sizes(const PodParams& pp, const std::vector<Collective>& kinds, std::size_t from,
                 std::size_t step) {
  CppPodHost host(pp);
  PodDriver drv(host);
  for (Collective k : kinds)
    for (DType d : {DType::kBf16, DType::kF32})
      for (std::size_t bytes = from; bytes <= 520; bytes += step) {
        CollectiveSpec s;
        if (!sweep_spec(k, d, bytes, pp.topo.num_chips(), &s)) continue;
        if (k == Collective::kAllToAll &&
            s.n % (static_cast<std::size_t>(pp.topo.num_chips()) * drv.granule(d)) != 0)
          continue;  // refused by name (PodProgramsSweep)
        SCOPED_TRACE(sweep_name(s, bytes));
        (void)check(drv, s, bytes);
        if (::testing::Test::HasFailure()) return;
      }
}

TEST(PodSizes, AllReduceEverySizeTo520BytesOnTheDefault2x2) {
  PodParams pp = params(Topology::torus({2, 2}), 2);
  pp.variant = "16x16";
  pp.link_width = 16;
  small_sizes(pp, {Collective::kAllReduce}, 2, 2);
}

TEST(PodSizes, OtherCollectivesSampledOnTheDefault2x2) {
  PodParams pp = params(Topology::torus({2, 2}), 2);
  pp.variant = "16x16";
  pp.link_width = 16;
  small_sizes(pp,
              {Collective::kReduceScatter, Collective::kAllGather, Collective::kAllToAll,
               Collective::kBroadcast},
              4, 14);
}

TEST(PodSizes, AllReduceOnA4x4x4InTheOddPackedClass) {
  PodParams pp = params(Topology::torus({4, 4, 4}), 2);
  for (std::size_t bytes : {34, 64, 98, 130, 290, 520}) {
    CppPodHost host(pp);
    PodDriver drv(host);
    CollectiveSpec s;
    s.dtype = DType::kBf16;
    s.n = bytes / 2;
    s.algorithm = "torus";
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    (void)check(drv, s, bytes);
  }
}

// A twisted pod (docs/topology.md): the direct all-to-all's blocks take the twisted torus's
// shortest ways. In all, the links carry every block's rows and head flit over its distance by
// breadth-first search over the twisted wiring (torus_distances, not the routers' route
// function): fewer flits than the plain torus of the same shape, in fewer cycles; the output is
// bit-exact. The other collectives run bit-exact on it too.
TEST(PodTwist, DirectAllToAllTakesTheTwistedShortestWays) {
  const Topology topo = Topology::torus({2, 4, 4});
  uint64_t cycles[2] = {0, 0}, flits[2] = {0, 0};
  for (int tw : {0, 1}) {
    SCOPED_TRACE(tw ? "twisted" : "plain");
    PodParams pp = params(topo, 2);
    pp.twist = tw == 1;
    CppPodHost host(pp);
    PodDriver drv(host);
    CollectiveSpec s;
    s.collective = Collective::kAllToAll;
    s.algorithm = "direct";
    s.n = 32 * drv.granule(DType::kF32);  // a granule (4 rows of a 4x4 chip) per block
    const PodCollectiveRun r = check(drv, s, 5);
    ASSERT_EQ(r.rounds.size(), 1u);
    cycles[tw] = r.collective_cycles;
    for (const LinkStat& l : r.prog.link_flits) flits[tw] += l.flits;
    TorusShape shape;
    shape.k = {2, 4, 4};
    shape.twist = tw ? twist_bits(topo) : 0u;
    const uint64_t packet = 64 / r.row_bytes + 1;  // the rows and the head
    uint64_t want = 0;
    for (int c = 0; c < topo.num_chips(); ++c)
      for (int d : torus_distances(shape, c)) want += static_cast<uint64_t>(d) * packet;
    EXPECT_EQ(flits[tw], want);
    if (tw == 1) {
      for (Collective k : {Collective::kAllReduce, Collective::kReduceScatter,
                           Collective::kAllGather, Collective::kBroadcast}) {
        CollectiveSpec o;
        o.collective = k;
        o.algorithm = k == Collective::kAllReduce ? "torus" : "ring";
        o.n = 32 * 37;
        (void)check(drv, o, 11);
      }
    }
  }
  EXPECT_LT(flits[1], flits[0]);
  EXPECT_LT(cycles[1], cycles[0]);
}

// Collectives over mesh axes: every group at once, each on its own links.
TEST(PodMeshAxes, EveryGroupAtOnce) {
  CppPodHost host(params(Topology::torus({4, 4}), 2));
  PodDriver drv(host);
  const Mesh mesh = parse_mesh("x=4,y=4");
  for (const char* axis : {"x", "y"}) {
    CollectiveSpec s;
    s.group_dims = mesh_axis_dims(host.info().topo, mesh, axis);
    s.algorithm = "biring";
    s.n = 333;
    PodCollectiveOptions o;
    o.rounds = 2;
    const PodCollectiveRun r = check(drv, s, 11, o);
    // Only links of the axis' dimension carry data.
    const int dim = s.group_dims[0];
    for (const LinkStat& l : r.prog.link_flits) {
      if (l.dir / 2 != dim) {
        EXPECT_EQ(l.flits, 0u) << axis << " dir " << l.dir;
      }
    }
  }
  CollectiveSpec rs;
  rs.collective = Collective::kReduceScatter;
  rs.group_dims = {1};
  rs.n = 1000;
  check(drv, rs, 12);
  CppPodHost h3(params(Topology::torus({2, 2, 2})));
  PodDriver d3(h3);
  CollectiveSpec ag;
  ag.collective = Collective::kAllGather;
  ag.dtype = DType::kBf16;
  ag.group_dims = mesh_axis_dims(h3.info().topo, parse_mesh("xy=4,z=2"), "xy");
  ag.n = 500;
  check(d3, ag, 13);
}

// The partition of a pod across MPI ranks (docs/scale.md): slabs along the longest dimension
// (ties: the outermost, whose slabs are whole blocks of chip ids), the links it cuts.
TEST(PodPartition, SlabsAlongTheLongestDimensionCutTheFewestLinks) {
  const PodPartition a = PodPartition::slabs(Topology::torus({2, 2, 4}), 2);
  EXPECT_EQ(a.dim, 2);
  EXPECT_EQ(a.chips[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  const PodPartition b = PodPartition::slabs(Topology::torus({4, 2}), 2);
  EXPECT_EQ(b.dim, 0);
  EXPECT_EQ(b.chips[1], (std::vector<int>{2, 3, 6, 7}));
  const PodPartition c = PodPartition::slabs(Topology::torus({2, 2}), 4);  // more than an extent
  EXPECT_EQ(c.dim, -1);
  EXPECT_EQ(c.chips[3], (std::vector<int>{3}));
  const PodPartition d = PodPartition::slabs(Topology::torus({3, 4, 3}), 3);
  EXPECT_EQ(d.dim, 1);
  EXPECT_EQ(d.chips[0].size(), 18u);  // 4 planes in 3 slabs: 2, 1, 1
  EXPECT_EQ(d.chips[2].size(), 9u);
  try {
    (void)PodPartition::slabs(Topology::torus({2, 2}), 5);
    FAIL() << "5 ranks for 4 chips";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("use at most 4 ranks"), std::string::npos) << e.what();
  }
  // A 2x2x4 torus in two slabs along z: two planes of 4 chips cut, each pair both ways.
  PodCore core(params(Topology::torus({2, 2, 4})));
  PodPartition p = a;
  p.find_cuts(core);
  EXPECT_EQ(p.cut.size(), 16u);
  for (const PodPartition::Cut& k : p.cut) {
    EXPECT_NE(k.sender, k.receiver);
    EXPECT_EQ(k.sender, p.owner[static_cast<std::size_t>(core.link_sender(k.link))]);
  }
}

// A rank of the multi-process pod builds only the chips it owns (docs/scale.md): their models,
// host agents and the links that leave or enter them. Every other chip is refused with a
// logic_error that says why; what it reports of the pod counts only its own chips.
TEST(PodPartition, ARankBuildsOnlyTheChipsItOwns) {
  const Topology topo = Topology::torus({2, 2, 4});
  const PodPartition part = PodPartition::slabs(topo, 2);
  PodCore whole(params(topo, 2));
  EXPECT_EQ(whole.built_chips(), 16);
  PodCore core(params(topo, 2), part.chips[1]);  // z = 2, 3: chips 8..15
  EXPECT_EQ(core.built_chips(), 8);
  EXPECT_EQ(core.num_chips(), 16);
  EXPECT_EQ(core.owned(), part.chips[1]);
  EXPECT_EQ(core.num_links(), whole.num_links());
  EXPECT_EQ(core.info().shape.cols, whole.info().shape.cols);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(core.owns(c), c >= 8) << c;
  auto refused = [](const char* what, const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const std::logic_error& e) {
      if (dynamic_cast<const std::invalid_argument*>(&e)) {
        ADD_FAILURE() << what << ": " << e.what();
        return;
      }
      EXPECT_NE(std::string(e.what()).find("chip 3 (1,1,0) is not built in this process"),
                std::string::npos)
          << what << ": " << e.what();
    }
  };
  refused("chip", [&] { (void)core.chip(3); });
  refused("agent", [&] { core.agent(3).push({}); });
  refused("status", [&] { (void)core.status(3); });
  refused("counters", [&] { (void)core.counters(3); });
  refused("link counter", [&] { (void)core.link_counter(3, 0, kLinkStReplays); });
  refused("describe", [&] { (void)core.describe_chip(3); });
  refused("trace label", [&] { core.trace_label(3, "x"); });
  std::vector<uint8_t> buf(64);
  refused("backdoor", [&] { core.backdoor(3, false, 0, buf.data(), buf.size()); });
  EXPECT_THROW((void)core.chip(16), std::invalid_argument);
  // Links: those with an owned end (the cut ones too), not the others.
  PodPartition cuts = part;
  cuts.find_cuts(core);
  for (const PodPartition::Cut& k : cuts.cut) EXPECT_NO_THROW((void)core.link(k.link));
  int built = 0;
  for (int l = 0; l < core.num_links(); ++l) {
    const bool mine = core.owns(core.link_sender(l)) || core.owns(core.link_receiver(l));
    if (mine) {
      ++built;
      EXPECT_NO_THROW((void)core.link(l));
    } else {
      EXPECT_THROW((void)core.link(l), std::logic_error) << l;
    }
  }
  EXPECT_EQ(built, 48 + 8);  // its own chips' links out, and the cut links into them
  // Its own chips step, report and read back; the pod-wide reports cover them alone.
  std::vector<uint8_t> in(256), out(256);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7 + 1);
  core.backdoor(9, true, 4096, in.data(), in.size());
  for (int t = 0; t < 20; ++t) core.step();
  core.backdoor(9, false, 4096, out.data(), out.size());
  EXPECT_EQ(in, out);
  EXPECT_TRUE(core.idle());
  EXPECT_NO_THROW(core.check_errors());
  EXPECT_EQ(core.counters(9)[kStatCmdsDone], 0u);
  EXPECT_EQ(core.link_stats().size(), whole.link_stats().size());
  const std::string stall = core.describe_stall(0);
  EXPECT_NE(stall.find("idle: chips 8, 9, 10, 11, 12, 13, 14, 15"), std::string::npos) << stall;
  EXPECT_EQ(core.describe_hang(1).find("chip 3 "), std::string::npos);
  // The owned set is checked.
  EXPECT_THROW((void)PodCore(params(topo), std::vector<int>({3, 16})), std::invalid_argument);
  EXPECT_THROW((void)PodCore(params(topo), std::vector<int>({3, 3})), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
