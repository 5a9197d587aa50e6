// The drivers' scheduling without RTL: a fake host port (no chips, no cycles) that records what
// the drivers push, and checks of the programs they compile: every remote write is waited for
// exactly, every token lent is taken, every memory access stays inside its memory and the
// collective's VMEM area, every DMA inside its HBM buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <ostream>
#include <set>
#include <random>
#include <tuple>

#include "chip_driver.h"
#include "fake_host_port.h"
#include "pod_driver.h"
#include "size_sweep.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

uint32_t op_of(const ChipCmd& c) { return static_cast<uint32_t>(c.op()); }
uint32_t flags(const ChipCmd& c) { return (c.w[0] >> 4) & 0xFFFu; }
uint32_t f1(const ChipCmd& c) { return c.w[0] >> 16; }
uint32_t f2(const ChipCmd& c) { return c.w[1] & 0xFFFFu; }
uint32_t f3(const ChipCmd& c) { return c.w[1] >> 16; }

// A command's rows as the sequencer's scoreboard holds them (docs/isa.md, "Ordering"): read
// and write ranges, AMEM rows past kAmem so the two memories never overlap. Only the commands a
// collective's program holds (DMA, VPU, ICI_SEND); a FENCE or HALT orders everything anyway.
struct CmdRanges {
  std::vector<std::pair<uint32_t, uint32_t>> rd, wr;  // [lo, hi)
};
constexpr uint32_t kAmemRows = 1u << 20;

CmdRanges ranges_of(const ChipCmd& k, unsigned lanes) {
  CmdRanges r;
  auto at = [](uint32_t mem, uint32_t row, uint32_t n) {
    const uint32_t b = row + (mem ? kAmemRows : 0u);
    return std::make_pair(b, b + n);
  };
  switch (k.op()) {
    case ChipOp::kDma: {
      const CmdDma d = CmdDma::decode(k);
      const uint32_t rows = d.rows * (d.seg_bytes / (lanes * (d.bf16 ? 2u : 4u)));
      if (d.dir == static_cast<uint32_t>(DmaDir::kHbmToVmem))
        r.wr.push_back(at(0, d.mem_row, rows));
      else
        r.rd.push_back(at(d.dir == static_cast<uint32_t>(DmaDir::kAmemToHbm), d.mem_row, rows));
      break;
    }
    case ChipOp::kVpu: {
      const CmdVpu v = CmdVpu::decode(k);
      r.rd.push_back(at(v.x_mem, v.x_row, v.rows));
      r.rd.push_back(at(v.y_mem, v.y_row, v.y_bcast ? 1u : v.rows));  // read by every op
      const uint32_t stride = std::max<uint32_t>(1, v.dst_stride);
      r.wr.push_back(at(v.dst_mem, v.dst_row, (v.rows - 1) * stride + 1));
      break;
    }
    case ChipOp::kIciSend: {
      const CmdIciSend s = CmdIciSend::decode(k);
      r.rd.push_back(at(s.src_mem, s.src_row, s.rows));
      if (s.wait_rows && !s.wait_local) r.wr.push_back(r.rd.back());  // until they have landed
      break;
    }
    default:
      break;
  }
  return r;
}

bool overlap(const std::vector<std::pair<uint32_t, uint32_t>>& a,
             const std::vector<std::pair<uint32_t, uint32_t>>& b) {
  for (const auto& x : a)
    for (const auto& y : b)
      if (x.first < y.second && y.first < x.second) return true;
  return false;
}

// Rows a VPU command takes as they land (x_wait) are in no range the scoreboard holds for them:
// every later command that reads them, before anything writes them again, must be held by a
// hazard with that command (its result, or a write of what it reads), else it may read them
// before they land. This caught a bf16 all-reduce's unpacking of a one-row packed piece, whose
// second conversion read the row as soon as the first one waited for it.
void check_chained_readers(const std::vector<ChipCmd>& prog, unsigned lanes, int chip) {
  for (std::size_t i = 0; i < prog.size(); ++i) {
    if (prog[i].op() != ChipOp::kVpu || !CmdVpu::decode(prog[i]).x_wait) continue;
    const CmdRanges c = ranges_of(prog[i], lanes);
    const std::vector<std::pair<uint32_t, uint32_t>> x = {c.rd[0]};
    for (std::size_t j = i + 1; j < prog.size(); ++j) {
      if (prog[j].op() == ChipOp::kFence || prog[j].op() == ChipOp::kHalt) break;
      const CmdRanges o = ranges_of(prog[j], lanes);
      const bool reads = overlap(o.rd, x), writes = overlap(o.wr, x);
      const bool held = overlap(o.rd, c.wr) || overlap(o.wr, c.rd) || overlap(o.wr, c.wr);
      EXPECT_TRUE(!reads || held) << "chip " << chip << ": command " << j
                                  << " reads the rows that command " << i
                                  << " takes as they land, and nothing holds it until then";
      if (writes) break;
    }
  }
}

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
    const auto& prog = pp.program.cmds(c);
    ASSERT_FALSE(prog.empty()) << "chip " << c;
    uint64_t in_len = 0, out_len = 0;
    for (const CollectiveRound& r : pp.rounds) {
      for (const RoundPiece& x : r.in[static_cast<std::size_t>(c)])
        in_len = std::max<uint64_t>(in_len, x.offset + x.count);
      for (const RoundPiece& x : r.out[static_cast<std::size_t>(c)])
        out_len = std::max<uint64_t>(out_len, x.offset + x.count);
    }
    const auto rup = [](uint64_t b) { return (b + 63) / 64 * 64; };
    check_chained_readers(prog, shape.cols, c);
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
  bool overlap = true;         // PodCollectiveOptions::overlap_rounds
  const char* algo = nullptr;  // null: torus for a 2D+ all-reduce, else ring
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
  s.algorithm = c.algo != nullptr                                                      ? c.algo
                : c.coll == Collective::kAllReduce && c.topo.active_dims().size() >= 2 ? "torus"
                                                                                       : "ring";
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
  drv.run_programs(pp.program);
  ASSERT_EQ(port.pushed.size(), static_cast<std::size_t>(pp.program.num_chips()));
  for (std::size_t k = 0; k < port.pushed.size(); ++k) {
    const std::vector<ChipCmd>& prog = pp.program.cmds(static_cast<int>(k));
    ASSERT_EQ(port.pushed[k].size(), prog.size()) << k;
    for (std::size_t i = 0; i < prog.size(); ++i)
      ASSERT_EQ(port.pushed[k][i].w, prog[i].w) << k << " " << i;
  }
  EXPECT_EQ(port.runs, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Fake, PodPrograms,
    ::testing::Values(Case{"t22_ar_f32_r5", Topology::torus({2, 2}), Collective::kAllReduce,
                           DType::kF32, 40000, 5},
                      Case{"t22_ar_f32_r5_serial", Topology::torus({2, 2}), Collective::kAllReduce,
                           DType::kF32, 40000, 5, false},
                      Case{"t44_ar_bf16_r4", Topology::torus({4, 4}), Collective::kAllReduce,
                           DType::kBf16, 30011, 4},
                      Case{"ring8_rs_f32_r3", Topology::torus({8}), Collective::kReduceScatter,
                           DType::kF32, 20000, 3},
                      Case{"m33_ag_bf16_r4", Topology::mesh({3, 3}), Collective::kAllGather,
                           DType::kBf16, 9001, 4},
                      Case{"t222_a2a_f32_r3", Topology::torus({2, 2, 2}), Collective::kAllToAll,
                           DType::kF32, 8 * 16 * 9, 3},
                      // More rounds than regions: the shared tokens.
                      Case{"t222_a2a_direct_f32_r5", Topology::torus({2, 2, 2}),
                           Collective::kAllToAll, DType::kF32, 8 * 16 * 10, 5, true, "direct"},
                      Case{"t44_a2a_direct_bf16_r4", Topology::torus({4, 4}), Collective::kAllToAll,
                           DType::kBf16, 16 * 32 * 8, 4, true, "direct"},
                      Case{"ring4_bc_f32_r6", Topology::torus({4}), Collective::kBroadcast,
                           DType::kF32, 50000, 6},
                      Case{"t44_ar_f32_r1", Topology::torus({4, 4}), Collective::kAllReduce,
                           DType::kF32, 3001, 1},
                      Case{"ring8_rs_bf16_r1", Topology::torus({8}), Collective::kReduceScatter,
                           DType::kBf16, 5003, 1},
                      Case{"m33_ag_f32_r1", Topology::mesh({3, 3}), Collective::kAllGather,
                           DType::kF32, 9001, 1},
                      Case{"ring4_bc_f32_r1", Topology::torus({4}), Collective::kBroadcast,
                           DType::kF32, 7001, 1}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// Every collective, both dtypes, every size from 2 to 520 bytes a chip in steps of 2 (f32: the
// multiples of 4; sum and max, and an all-reduce's torus, ring and biring, in turn), on a 2x2
// and a 4x4x4 torus of 16x16 chips: each program passes the checks
// above (a size class whose last piece packs into an odd number of rows, 34..64 bytes mod 128
// of a bf16 all-reduce on the 2x2, read rows before they landed), and the rounds' golden of
// random inputs is within the f64 bound of the plain sum (check_independently's rule: a max
// exact). Sizes an all_to_all cannot cut into whole granules per block are refused by name.
// The same sizes run on the RTL, sampled, in test_pod (PodSizes).
void check_golden(const PodProgram& pp, uint64_t seed) {
  CollectiveSpec whole = pp.spec;
  const CollectivePlan plan = make_plan(pp.rounds.front().plan.topo, whole);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  const bool bf16 = plan.spec.dtype == DType::kBf16;
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i)
      in[c].push_back(bf16 ? f32_to_bf16(nd(rng)) : f32_bits(nd(rng)));
  const auto out = golden_collective(pp.rounds, in);
  const auto val = [&](uint32_t b) {
    return bf16 ? double{bf16_to_f32(static_cast<bf16_t>(b))} : double{f32_from_bits(b)};
  };
  const int P = plan.topo.num_chips();
  for (int c = 0; c < P; ++c) {
    const auto& o = out[static_cast<std::size_t>(c)];
    ASSERT_EQ(o.size(), plan.output_len(c)) << "chip " << c;
    std::size_t k = 0;
    for (const Segment& g : plan.chips[static_cast<std::size_t>(c)].output)
      for (std::size_t i = 0; i < g.count; ++i, ++k) {
        if (!collective_reduces(plan.spec.collective)) continue;  // moved bits: the golden's
        double sum = 0, abs = 0, mx = -INFINITY;
        for (int q = 0; q < P; ++q) {
          const double x = val(in[static_cast<std::size_t>(q)][g.offset + i]);
          sum += x;
          abs += std::fabs(x);
          mx = std::max(mx, x);
        }
        if (plan.spec.op == ReduceOp::kMax) {
          ASSERT_EQ(val(o[k]), mx) << "chip " << c << " element " << k;
          continue;
        }
        double bound = (P - 1) * 0x1p-24 * abs;
        if (bf16) bound = bound * (1 + 0x1p-8) + 0x1p-8 * std::fabs(sum) + 0x1p-133;
        ASSERT_LE(std::fabs(val(o[k]) - sum), bound) << "chip " << c << " element " << k;
      }
  }
}

TEST(PodProgramsSweep, EveryCollectiveEverySizeFrom2To520Bytes) {
  std::size_t compiled = 0, refused = 0;
  for (const Topology& topo : {Topology::torus({2, 2}), Topology::torus({4, 4, 4})}) {
    FakeHostPort port(topo, "16x16");
    PodDriver drv(port);
    CollectiveBuffers b;
    for (int i = 0; i < topo.num_chips(); ++i) {
      b.in.push_back(1 << 20);
      b.out.push_back(2 << 20);
    }
    for (Collective k : {Collective::kAllReduce, Collective::kReduceScatter,
                         Collective::kAllGather, Collective::kAllToAll, Collective::kBroadcast})
      for (DType d : {DType::kF32, DType::kBf16})
        for (std::size_t bytes = 2; bytes <= 520; bytes += 2)
          for (const char* algo : {"", "direct"}) {  // all_to_all: ring and direct
            if (*algo != '\0' && k != Collective::kAllToAll) continue;
            CollectiveSpec s;
            if (!sweep_spec(k, d, bytes, topo.num_chips(), &s)) continue;
            if (*algo != '\0') s.algorithm = algo;
            const std::string what = topo.name() + " " + sweep_name(s, bytes);
            SCOPED_TRACE(what);
            const std::size_t block = static_cast<std::size_t>(topo.num_chips()) * drv.granule(d);
            if (k == Collective::kAllToAll && s.n % block != 0) {
              try {
                (void)drv.compile(s, b, {});
                ADD_FAILURE() << "an all_to_all of whole granules only";
              } catch (const std::invalid_argument& e) {
                EXPECT_NE(std::string(e.what()).find("whole number of granules"), std::string::npos)
                    << e.what();
                ++refused;
              }
              continue;
            }
            const PodProgram pp = drv.compile(s, b, {});
            check_programs(pp, topo, port.info().shape, b, 0, port.info().shape.vmem_rows);
            check_golden(pp, bytes);
            ++compiled;
            if (HasFailure()) return;  // one size class at a time
          }
  }
  EXPECT_EQ(compiled + refused, 2u * (6 * (260 + 130)));  // all_to_all twice
}

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
  EXPECT_GT(early_heads(t44.program.all_cmds()), 0u);
  EXPECT_EQ(early_heads(compile_all_reduce(Topology::torus({4, 4}), false).program.all_cmds()), 0u);
  const PodProgram m33 = compile_all_reduce(Topology::mesh({3, 3}), true);
  bool far = false;  // the mesh's plan does send past a neighbour
  for (const CollectiveRound& r : m33.rounds)
    for (const Step& st : r.plan.steps)
      for (const Transfer& t : st.transfers) far = far || t.route.hops > 1;
  EXPECT_TRUE(far);
  EXPECT_EQ(early_heads(m33.program.all_cmds()), 0u);
  // Merged with a program that does not send (a matmul's), the heads stay early; with one that
  // sends, none is.
  const std::vector<ChipCmd> quiet{cmd_ici_wait(0, 0)};
  EXPECT_EQ(early_heads({merge(t44.program.cmds(0), quiet)}), early_heads({t44.program.cmds(0)}));
  EXPECT_EQ(early_heads({merge(t44.program.cmds(0), t44.program.cmds(1))}), 0u);
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
