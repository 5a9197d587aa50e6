// The drivers' scheduling without RTL: a fake host port (no chips, no cycles) that records what
// the drivers push, and checks of the programs they compile: every remote write is waited for
// exactly, every token lent is taken, every memory access stays inside its memory and the
// collective's VMEM area, every DMA inside its HBM buffers.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <set>
#include <tuple>

#include "chip_driver.h"
#include "pod_driver.h"

namespace tpu {
namespace {

// A machine with no chips behind its ports: copies land in a byte map, programs are recorded,
// runs take no time. What the drivers' scheduling can be tested against.
class FakeHostPort final : public HostPort {
 public:
  FakeHostPort(Topology topo, const std::string& variant) {
    info_.topo = std::move(topo);
    info_.variant = variant;
    info_.shape = chip_shape(variant);
    info_.link_bytes_per_cycle = 16;
    pushed.resize(static_cast<std::size_t>(info_.num_chips()));
  }
  const MachineInfo& info() const override { return info_; }
  uint64_t copy(const std::vector<HostCopy>& ops) override {
    for (const HostCopy& o : ops) {
      auto* b = static_cast<uint8_t*>(o.data);
      for (std::size_t i = 0; i < o.n; ++i) {
        auto& m = hbm[{o.chip, o.addr + i}];
        if (o.write)
          m = b[i];
        else
          b[i] = m;
      }
    }
    return 0;
  }
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override {
    copy({HostCopy{chip, true, addr, const_cast<void*>(data), n}});
  }
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override {
    copy({HostCopy{chip, false, addr, data, n}});
  }
  void push(int chip, const std::vector<ChipCmd>& cmds) override {
    auto& v = pushed[static_cast<std::size_t>(chip)];
    v.insert(v.end(), cmds.begin(), cmds.end());
  }
  RunStats run_until_idle(uint64_t, bool) override {
    ++runs;
    RunStats r;
    r.chip_cycles.assign(pushed.size(), 0);
    return r;
  }
  ChipStatus status(int) override { return ChipStatus{}; }
  ChipCounters counters(int) override { return ChipCounters{}; }
  std::vector<LinkStat> link_stats() override { return {}; }
  void clear(int) override {}
  uint64_t cycle() const override { return 0; }

  std::vector<std::vector<ChipCmd>> pushed;
  std::map<std::pair<int, uint64_t>, uint8_t> hbm;
  int runs = 0;

 private:
  MachineInfo info_;
};

uint32_t op_of(const ChipCmd& c) { return static_cast<uint32_t>(c.op()); }
uint32_t flags(const ChipCmd& c) { return (c.w[0] >> 4) & 0xFFFu; }
uint32_t f1(const ChipCmd& c) { return c.w[0] >> 16; }
uint32_t f2(const ChipCmd& c) { return c.w[1] & 0xFFFFu; }
uint32_t f3(const ChipCmd& c) { return c.w[1] >> 16; }

// The checks of one compiled collective.
void check_programs(const PodProgram& pp, const Topology& topo, const ChipShape& shape,
                    const CollectiveBuffers& bufs, uint32_t vmem_lo, uint32_t vmem_hi) {
  const int P = topo.num_chips();
  // rows sent to (dst, counter) and rows waited for there
  // (a VPU's sig rows count as sent to its own chip; a reduction's x_wait and a send's wait_rows
  // take rows one by one, as a wait of their rows would)
  std::map<std::pair<int, uint32_t>, uint64_t> sent, waited;
  std::size_t chained = 0;  // commands that take their rows as they come
  const std::size_t esz = pp.spec.dtype == DType::kBf16 ? 2 : 4;
  for (int c = 0; c < P; ++c) {
    const auto& prog = pp.progs[static_cast<std::size_t>(c)];
    ASSERT_FALSE(prog.empty()) << "chip " << c;
    uint64_t in_len = 0, out_len = 0;
    for (const CollectiveRound& r : pp.rounds) {
      for (const RoundPiece& x : r.in[static_cast<std::size_t>(c)])
        in_len = std::max<uint64_t>(in_len, x.offset + x.count);
      for (const RoundPiece& x : r.out[static_cast<std::size_t>(c)])
        out_len = std::max<uint64_t>(out_len, x.offset + x.count);
    }
    const auto rup = [](uint64_t b) { return (b + 63) / 64 * 64; };
    for (const ChipCmd& k : prog) {
      switch (op_of(k)) {
        case static_cast<uint32_t>(ChipOp::kIciSend): {
          const CmdIciSend send = CmdIciSend::decode(k);  // the contract's own field layout
          const int dst = topo.id({static_cast<int>(send.dst_x), static_cast<int>(send.dst_y),
                                   static_cast<int>(send.dst_z)});
          sent[{dst, send.counter}] += send.count_only ? 1 : f2(k);  // a token adds 1
          if (send.wait_rows) {
            waited[{c, send.wait_counter}] += send.rows;
            ++chained;
          }
          EXPECT_GE(f1(k), vmem_lo) << "chip " << c << " sends from below its VMEM area";
          EXPECT_LE(f1(k) + f2(k), vmem_hi) << "chip " << c;
          if (!send.count_only) {  // a token writes no row there
            EXPECT_GE(f3(k), vmem_lo) << "chip " << c << " writes below chip " << dst << "'s area";
            EXPECT_LE(f3(k) + f2(k), vmem_hi) << "chip " << c;
          }
          break;
        }
        case static_cast<uint32_t>(ChipOp::kIciWait):
          waited[{c, f1(k)}] += k.w[2];
          break;
        case static_cast<uint32_t>(ChipOp::kDma): {
          const uint32_t dir = flags(k) & 3u, rows = f2(k), seg = f3(k);
          const uint64_t addr = k.w[2];
          const uint32_t mem_rows =
              seg / static_cast<uint32_t>(shape.cols * ((flags(k) & 4u) ? 2 : 4));
          EXPECT_GE(f1(k), vmem_lo) << "chip " << c;
          EXPECT_LE(f1(k) + rows * mem_rows, vmem_hi) << "chip " << c;
          if (dir == 0) {  // HBM -> VMEM: inside the input buffer (its last granule whole)
            EXPECT_GE(addr, bufs.in[static_cast<std::size_t>(c)]);
            EXPECT_LE(addr + uint64_t{rows} * seg,
                      bufs.in[static_cast<std::size_t>(c)] + rup(in_len * esz))
                << c;
          } else {
            EXPECT_GE(addr, bufs.out[static_cast<std::size_t>(c)]);
            EXPECT_LE(addr + uint64_t{rows} * seg,
                      bufs.out[static_cast<std::size_t>(c)] + rup(out_len * esz))
                << c;
          }
          break;
        }
        case static_cast<uint32_t>(ChipOp::kVpu): {
          const uint32_t dst = k.w[2] & 0xFFFFu, stride = std::max<uint32_t>(1, k.w[2] >> 16);
          const CmdVpu v = CmdVpu::decode(k);
          if (v.x_wait) {
            waited[{c, v.x_counter}] += v.rows;
            ++chained;
          }
          if (v.sig) {
            EXPECT_LE(stride, 1u) << "chip " << c << ": sig rows are written in order";
            sent[{c, v.sig_counter}] += v.rows;
          }
          EXPECT_GE(f1(k), vmem_lo);
          EXPECT_GE(dst, vmem_lo);
          EXPECT_LE(dst + (f2(k) - 1) * stride + 1, vmem_hi);
          break;
        }
        case static_cast<uint32_t>(ChipOp::kFence):
          ADD_FAILURE() << "chip " << c << ": a fence (the pipeline must not drain)";
          break;
        default:
          break;
      }
    }
  }
  // Every row sent to a chip's counter is waited for there, exactly (tokens included).
  EXPECT_FALSE(sent.empty());
  EXPECT_EQ(sent, waited);
  // Reductions and forwarding sends take their rows as they land, in one round and in rounds
  // (the driver's chaining; an all-to-all stages its blocks and forwards none as it received
  // them).
  if (pp.spec.collective != Collective::kAllToAll) {
    EXPECT_GT(chained, 0u);
  }
}

struct Case {
  const char* name;
  Topology topo;
  Collective coll;
  DType dtype;
  std::size_t n;
  std::size_t rounds;
  bool overlap = true;  // PodCollectiveOptions::overlap_rounds
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PodPrograms : public ::testing::TestWithParam<Case> {};

TEST_P(PodPrograms, EveryRemoteWriteIsWaitedForAndEveryAccessStaysInside) {
  const Case& c = GetParam();
  FakeHostPort port(c.topo, "16x16");
  PodDriver drv(port);
  CollectiveSpec s;
  s.collective = c.coll;
  s.dtype = c.dtype;
  s.n = c.n;
  s.algorithm =
      c.coll == Collective::kAllReduce && c.topo.active_dims().size() >= 2 ? "torus" : "ring";
  const int P = c.topo.num_chips();
  CollectiveBuffers b;
  for (int i = 0; i < P; ++i) {
    b.in.push_back(1 << 20);
    b.out.push_back(8 << 20);
  }
  PodCollectiveOptions o;
  o.rounds = c.rounds;
  o.overlap_rounds = c.overlap;
  o.vmem_base = 1000;  // beside a matmul's rows, as in the overlap bench
  o.vmem_rows = 6000;
  const PodProgram pp = drv.compile(s, b, o);
  EXPECT_EQ(pp.rounds.size(), c.rounds);
  check_programs(pp, c.topo, port.info().shape, b, 1000, 7000);
  // run_programs pushes each chip its program and runs the machine once.
  drv.run_programs(pp.progs);
  ASSERT_EQ(port.pushed.size(), pp.progs.size());
  for (std::size_t k = 0; k < pp.progs.size(); ++k) {
    ASSERT_EQ(port.pushed[k].size(), pp.progs[k].size()) << k;
    for (std::size_t i = 0; i < pp.progs[k].size(); ++i)
      ASSERT_EQ(port.pushed[k][i].w, pp.progs[k][i].w) << k << " " << i;
  }
  EXPECT_EQ(port.runs, 1);
}

INSTANTIATE_TEST_SUITE_P(Fake, PodPrograms,
                         ::testing::Values(Case{"t22_ar_f32_r5", Topology::torus({2, 2}),
                                                Collective::kAllReduce, DType::kF32, 40000, 5},
                                           Case{"t22_ar_f32_r5_serial", Topology::torus({2, 2}),
                                                Collective::kAllReduce, DType::kF32, 40000, 5,
                                                false},
                                           Case{"t44_ar_bf16_r4", Topology::torus({4, 4}),
                                                Collective::kAllReduce, DType::kBf16, 30011, 4},
                                           Case{"ring8_rs_f32_r3", Topology::torus({8}),
                                                Collective::kReduceScatter, DType::kF32, 20000, 3},
                                           Case{"m33_ag_bf16_r4", Topology::mesh({3, 3}),
                                                Collective::kAllGather, DType::kBf16, 9001, 4},
                                           Case{"t222_a2a_f32_r3", Topology::torus({2, 2, 2}),
                                                Collective::kAllToAll, DType::kF32, 8 * 16 * 9, 3},
                                           Case{"ring4_bc_f32_r6", Topology::torus({4}),
                                                Collective::kBroadcast, DType::kF32, 50000, 6},
                                           Case{"t44_ar_f32_r1", Topology::torus({4, 4}),
                                                Collective::kAllReduce, DType::kF32, 3001, 1},
                                           Case{"ring8_rs_bf16_r1", Topology::torus({8}),
                                                Collective::kReduceScatter, DType::kBf16, 5003,
                                                1},
                                           Case{"m33_ag_f32_r1", Topology::mesh({3, 3}),
                                                Collective::kAllGather, DType::kF32, 9001, 1},
                                           Case{"ring4_bc_f32_r1", Topology::torus({4}),
                                                Collective::kBroadcast, DType::kF32, 7001, 1}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.name);
                         });

// early_head (a forwarding send's head before its first row) only where no other packet crosses
// the links: every transfer to a neighbour (a 4x4 torus), never on a 3x3 mesh (a ring's wrap
// crosses the chips between), never when turned off, and never in two merged programs that
// both send. Counts the early heads of a compiled all-reduce.
std::size_t early_heads(const std::vector<std::vector<ChipCmd>>& progs) {
  std::size_t n = 0;
  for (const auto& prog : progs)
    for (const ChipCmd& k : prog) {
      if (k.op() != ChipOp::kIciSend) continue;
      const CmdIciSend s = CmdIciSend::decode(k);
      EXPECT_TRUE(!s.early_head || s.wait_rows) << "early_head without wait_rows";
      n += s.early_head;
    }
  return n;
}

PodProgram compile_all_reduce(const Topology& topo, bool early) {
  FakeHostPort port(topo, "16x16");
  PodDriver drv(port);
  CollectiveSpec s;
  s.collective = Collective::kAllReduce;
  s.n = 1024;
  s.algorithm = "torus";
  CollectiveBuffers b;
  for (int i = 0; i < topo.num_chips(); ++i) {
    b.in.push_back(1 << 20);
    b.out.push_back(2 << 20);
  }
  PodCollectiveOptions o;
  o.early_heads = early;
  return drv.compile(s, b, o);
}

TEST(EarlyHeads, OnlyWhereNoOtherPacketCrossesTheLinks) {
  const PodProgram t44 = compile_all_reduce(Topology::torus({4, 4}), true);
  EXPECT_GT(early_heads(t44.progs), 0u);
  EXPECT_EQ(early_heads(compile_all_reduce(Topology::torus({4, 4}), false).progs), 0u);
  const PodProgram m33 = compile_all_reduce(Topology::mesh({3, 3}), true);
  bool far = false;  // the mesh's plan does send past a neighbour
  for (const CollectiveRound& r : m33.rounds)
    for (const Step& st : r.plan.steps)
      for (const Transfer& t : st.transfers) far = far || t.route.hops > 1;
  EXPECT_TRUE(far);
  EXPECT_EQ(early_heads(m33.progs), 0u);
  // Merged with a program that does not send (a matmul's), the heads stay early; with one that
  // sends, none is.
  const std::vector<ChipCmd> quiet{cmd_ici_wait(0, 0)};
  EXPECT_EQ(early_heads({merge_programs(t44.progs[0], quiet)}), early_heads({t44.progs[0]}));
  EXPECT_EQ(early_heads({merge_programs(t44.progs[0], t44.progs[1])}), 0u);
}

// The matmul's program on a fake port: built without RTL, it reads and writes only its matrices
// and stays below vmem_rows_limit.
TEST(ChipPrograms, MatmulStaysInItsMatricesAndItsVmemRows) {
  FakeHostPort port(Topology::mesh({1}), "16x16");
  ChipDriver drv(port, 0);
  drv.vmem_rows_limit = 3000;
  const HbmMatrix a = drv.alloc_matrix(100, 70, Dtype::kBf16);
  const HbmMatrix w = drv.alloc_matrix(70, 40, Dtype::kBf16);
  const HbmMatrix c = drv.alloc_matrix(100, 40, Dtype::kF32);
  const MatmulRun r = drv.plan_matmul(c, a, w);
  ASSERT_FALSE(r.program.empty());
  EXPECT_EQ(op_of(r.program.back()), static_cast<uint32_t>(ChipOp::kHalt));
  EXPECT_EQ(r.compute_cycles, 100u * 5 * 3);
  for (const ChipCmd& k : r.program) {
    if (op_of(k) != static_cast<uint32_t>(ChipOp::kDma)) continue;
    const uint32_t dir = flags(k) & 3u, rows = f2(k), seg = f3(k), stride = k.w[3];
    const uint64_t first = k.w[2], last = first + uint64_t{rows - 1} * stride + seg;
    EXPECT_LE(last, drv.allocated()) << "DMA beyond the matrices";
    const uint32_t mem_rows = seg / (16 * ((flags(k) & 4u) ? 2u : 4u));
    if (dir != 0) {
      EXPECT_GE(first, c.addr) << "a write outside C";
    } else {
      EXPECT_LE(f1(k) + rows * mem_rows, 3000u) << "VMEM beyond the limit";
    }
  }
}

}  // namespace
}  // namespace tpu
