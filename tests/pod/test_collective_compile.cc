// The pieces of the collective compiler alone (collective_compile.h), without RTL: the ICI
// counter assignment and its window, the VMEM regions, how rounds are issued, the cutting of a
// round into pieces, the round layout (inside the VMEM rows and counters it was given, the fewest
// rounds that fit), the chaining pass of the scheduler, and two collectives compiled to run at
// once on disjoint counters and rows (FakeHostPort).
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "collective_compile.h"
#include "fake_host_port.h"
#include "pod_driver.h"

namespace tpu {
namespace {

using pod_compile::Counters;

TEST(CollectiveCounters, TakenInOrderPerChipFromTheirWindow) {
  Counters ctr(2, 10, 3);
  EXPECT_EQ(ctr.get(0, 1, pod_compile::kData), 10);
  EXPECT_EQ(ctr.get(0, 2, pod_compile::kData), 11);
  EXPECT_EQ(ctr.get(0, 1, pod_compile::kData), 10);  // the same key: the same counter
  EXPECT_EQ(ctr.get(1, 0, pod_compile::kData), 10);  // each chip has its own
  EXPECT_EQ(ctr.get(0, 1, pod_compile::kToken), 12);
  EXPECT_EQ(ctr.used(0), 3u);
  EXPECT_EQ(ctr.try_get(0, 3, pod_compile::kData), -1);  // full: only a faster path is lost
  try {
    ctr.get(0, 3, pod_compile::kData);
    ADD_FAILURE() << "a fourth counter from a window of three";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs more than the 3 ICI counters"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ctr.try_get(1, 1, pod_compile::kData), 11);
}

TEST(CollectiveCounters, WindowInsideTheChip) {
  PodCollectiveOptions o;
  o.counter_base = 7;
  const pod_compile::CounterWindow rest = pod_compile::counter_window(o);
  EXPECT_EQ(rest.base, 7);
  EXPECT_EQ(rest.count, static_cast<int>(kIciCounters) - 7);
  o.counter_count = 5;
  EXPECT_EQ(pod_compile::counter_window(o).count, 5);
  o.counter_count = kIciCounters;
  EXPECT_THROW(pod_compile::counter_window(o), std::invalid_argument);
  o.counter_base = kIciCounters;
  o.counter_count = 0;
  EXPECT_THROW(pod_compile::counter_window(o), std::invalid_argument);
}

TEST(CollectiveVmem, RegionsInsideTheirWindowAndAligned) {
  PodCollectiveOptions o;
  o.vmem_base = 1000;
  o.vmem_rows = 6001;
  pod_compile::VmemRegions v = pod_compile::vmem_regions(o, 8192, 4, 2);
  EXPECT_EQ(v.count, 4u);
  EXPECT_EQ(v.rows, 1500u);  // 6001 / 4, rounded down to the alignment
  for (std::size_t r = 0; r < 9; ++r) {
    EXPECT_GE(v.region(r), 1000u);
    EXPECT_LE(v.region(r) + v.rows, 7001u);
    EXPECT_EQ((v.region(r) - 1000) % 2, 0u);
  }
  EXPECT_EQ(v.region(5), v.region(1));
  v.use(2);  // two rounds: two regions of twice the rows
  EXPECT_EQ(v.count, 2u);
  EXPECT_EQ(v.rows, 3000u);
  v.use(0);
  EXPECT_EQ(v.count, 1u);
  o.vmem_rows = 0;  // the rest of the chip's rows
  EXPECT_EQ(pod_compile::vmem_regions(o, 8192, 3, 1).avail, 7192u);
  o.vmem_rows = 7193;  // past the chip's rows
  EXPECT_THROW(pod_compile::vmem_regions(o, 8192, 3, 1), std::invalid_argument);
  o.vmem_rows = 31;  // fewer than 8 rows a region
  EXPECT_THROW(pod_compile::vmem_regions(o, 8192, 4, 1), std::invalid_argument);
}

CollectiveSpec spec_of(Collective k, DType d, std::size_t n, const std::string& algo) {
  CollectiveSpec s;
  s.collective = k;
  s.dtype = d;
  s.n = n;
  s.algorithm = algo;
  return s;
}

TEST(CollectiveRoundIssue, OverlapOnlyForTwoHalvesTheVpuCannotKeepUpWith) {
  FakeHostPort port(Topology::torus({4, 4}), "16x16");
  PodDriver drv(port);
  const CollectivePlan ar = drv.plan(spec_of(Collective::kAllReduce, DType::kF32, 4096, "torus"));
  ASSERT_TRUE(pod_compile::halves(ar));
  PodCollectiveOptions o;
  pod_compile::RoundIssue ri = pod_compile::plan_round_issue(ar, o, 1.0);
  EXPECT_EQ(ri.lag, 2u);
  EXPECT_EQ(ri.max_regions, 4u);
  EXPECT_TRUE(ri.early);                           // a torus's transfers go to neighbours
  ri = pod_compile::plan_round_issue(ar, o, 0.5);  // the VPU keeps up: one round at a time
  EXPECT_EQ(ri.lag, 1u);
  EXPECT_EQ(ri.offset, 0u);
  EXPECT_EQ(ri.max_regions, 3u);
  o.overlap_rounds = false;
  o.early_heads = false;
  ri = pod_compile::plan_round_issue(ar, o, 2.0);
  EXPECT_EQ(ri.lag, 1u);
  EXPECT_FALSE(ri.early);
  const CollectivePlan rs =
      drv.plan(spec_of(Collective::kReduceScatter, DType::kF32, 4096, "ring"));
  EXPECT_FALSE(pod_compile::halves(rs));
  EXPECT_EQ(pod_compile::plan_round_issue(rs, {}, 2.0).lag, 1u);
  FakeHostPort mesh(Topology::mesh({3, 3}), "16x16");
  const CollectivePlan m33 =
      PodDriver(mesh).plan(spec_of(Collective::kAllReduce, DType::kF32, 4096, "torus"));
  EXPECT_FALSE(pod_compile::plan_round_issue(m33, {}, 1.0).early);  // rings wrap past chips
}

TEST(CollectivePieces, WholeRowsCoveringTheBuffer) {
  FakeHostPort port(Topology::torus({2, 2}), "16x16");
  PodDriver drv(port);
  const CollectivePlan p = drv.plan(spec_of(Collective::kAllReduce, DType::kBf16, 3001, "torus"));
  const pod_compile::Pieces pc = pod_compile::cut_pieces(p, 16, 2, true);
  ASSERT_FALSE(pc.start.empty());
  std::size_t at = 0;
  uint32_t row = 0;
  for (std::size_t j = 0; j < pc.start.size(); ++j) {
    EXPECT_EQ(pc.start[j], at);
    EXPECT_EQ(pc.first_row[j], row);
    EXPECT_GE(pc.rows[j] * 16u, pc.len[j]);
    EXPECT_EQ(pc.rows[j] % 2, 0u);  // pairs: packs into half the rows
    at += pc.len[j];
    row += pc.rows[j];
  }
  EXPECT_EQ(at, p.buffer_len);
  EXPECT_EQ(row, pc.total_rows);
  const pod_compile::Pieces pk = pod_compile::packed_pieces(pc);
  for (std::size_t j = 0; j < pc.rows.size(); ++j) EXPECT_EQ(2 * pk.rows[j], pc.rows[j]);
  // Every transfer starts and ends on a cut.
  for (const Step& st : p.steps)
    for (const Transfer& t : st.transfers) {
      const auto cov = pc.cover(t.src_offset, t.count);
      ASSERT_FALSE(cov.empty());
      EXPECT_EQ(pc.start[cov.front()], t.src_offset);
      EXPECT_EQ(pc.start[cov.back()] + pc.len[cov.back()], t.src_offset + t.count);
    }
}

// The layout of a bf16 all-reduce in rounds: every chip's rows of every round inside the VMEM
// window it was given, every counter its transfers count on inside its counter window, and the
// fewest rounds that fit (one fewer does not).
TEST(CollectiveLayout, StaysInsideTheRowsAndCountersItWasGiven) {
  FakeHostPort port(Topology::torus({4, 4}), "16x16");
  PodDriver drv(port);
  const CollectivePlan whole =
      drv.plan(spec_of(Collective::kAllReduce, DType::kBf16, 30011, "torus"));
  CollectiveBuffers b;
  for (int i = 0; i < 16; ++i) {
    b.in.push_back(1 << 20);
    b.out.push_back(8 << 20);
  }
  PodCollectiveOptions o;
  o.vmem_base = 1000;
  o.vmem_rows = 1500;
  o.counter_base = 7;
  o.counter_count = 20;
  const pod_compile::CompileSetup s = pod_compile::compile_setup(port.info(), whole, b, o);
  const pod_compile::RoundLayout lay = pod_compile::fit_rounds(s);
  const std::size_t R = lay.rounds.size();
  ASSERT_GT(R, 1u);
  EXPECT_EQ(lay.vmem.count, std::min<uint32_t>(s.issue.max_regions, static_cast<uint32_t>(R)));
  for (std::size_t r = 0; r < R; ++r)
    for (int c = 0; c < 16; ++c) {
      const pod_compile::ChipRound& cr = lay.at(r, c);
      EXPECT_EQ(cr.region_end, lay.vmem.region(r) + lay.vmem.rows);
      EXPECT_LE(cr.next_row, cr.region_end);
      EXPECT_LE(cr.region_end, 2500u);
      for (uint32_t loc : cr.loc) EXPECT_GE(loc, lay.vmem.region(r));
      for (const pod_compile::Op& op : cr.ops) {
        for (const auto* v : {&op.reads, &op.writes})
          for (const pod_compile::Range& x : *v) {
            EXPECT_GE(x.lo, 1000u);
            EXPECT_LE(x.hi, 2500u);
          }
        if (op.kind == pod_compile::Op::kWait) {
          EXPECT_GE(op.peer, 7);
          EXPECT_LT(op.peer, 27);
        }
      }
    }
  for (int c = 0; c < 16; ++c) EXPECT_LE(lay.rows_used(c), 1500u);
  pod_compile::RoundLayout fewer;
  EXPECT_FALSE(pod_compile::lay_out_rounds(s, R - 1, fewer));
  pod_compile::RoundLayout again;
  EXPECT_TRUE(pod_compile::lay_out_rounds(s, R, again));
  EXPECT_EQ(again.st.size(), lay.st.size());
  // Too few counters for the transfers: refused by name.
  o.counter_count = 2;
  const pod_compile::CompileSetup s2 = pod_compile::compile_setup(port.info(), whole, b, o);
  EXPECT_THROW(pod_compile::fit_rounds(s2), std::invalid_argument);
}

// The counters a program's commands name (waits, sends' destination counters, chained waits and
// signals), and the VMEM rows they start at.
void counters_of(const std::vector<ChipCmd>& prog, std::set<uint32_t>* ctr) {
  for (const ChipCmd& k : prog) {
    if (k.op() == ChipOp::kIciWait) ctr->insert(CmdIciWait::decode(k).counter);
    if (k.op() == ChipOp::kIciSend) {
      const CmdIciSend s = CmdIciSend::decode(k);
      ctr->insert(s.counter);
      if (s.wait_rows) ctr->insert(s.wait_counter);
    }
    if (k.op() == ChipOp::kVpu) {
      const CmdVpu v = CmdVpu::decode(k);
      if (v.x_wait) ctr->insert(v.x_counter);
      if (v.sig) ctr->insert(v.sig_counter);
    }
  }
}

// Two collectives compiled to run at once (as a sharded matmul's stream merges them): each
// names only the counters of its window, so the two are disjoint on every chip.
TEST(CollectiveCounters, DisjointForProgramsThatRunAtOnce) {
  FakeHostPort port(Topology::torus({2, 2}), "16x16");
  PodDriver drv(port);
  CollectiveBuffers b;
  for (int i = 0; i < 4; ++i) {
    b.in.push_back(1 << 20);
    b.out.push_back(4 << 20);
  }
  PodCollectiveOptions oa, ob;
  oa.counter_count = 24;
  oa.vmem_rows = 3000;
  ob.counter_base = 24;
  ob.counter_count = 24;
  ob.vmem_base = 3000;
  ob.vmem_rows = 3000;
  oa.early_heads = ob.early_heads = false;
  const PodProgram a =
      drv.compile(spec_of(Collective::kAllReduce, DType::kF32, 20000, "torus"), b, oa);
  const PodProgram g =
      drv.compile(spec_of(Collective::kAllGather, DType::kBf16, 9000, "ring"), b, ob);
  for (int c = 0; c < 4; ++c) {
    std::set<uint32_t> ca, cg;
    counters_of(a.program.cmds(c), &ca);
    counters_of(g.program.cmds(c), &cg);
    ASSERT_FALSE(ca.empty());
    ASSERT_FALSE(cg.empty());
    EXPECT_LT(*ca.rbegin(), 24u) << "chip " << c;
    EXPECT_GE(*cg.begin(), 24u) << "chip " << c;
    EXPECT_LT(*cg.rbegin(), 48u) << "chip " << c;
  }
  EXPECT_LE(a.vmem_rows_used, 3000u);
  EXPECT_LE(g.vmem_rows_used, 3000u);
}

// The chaining pass: a wait whose rows the next op reduces, exactly, goes into that reduction
// (x_wait on the wait's counter) and leaves the program; a wait whose rows are read by another
// op as well stays.
TEST(CollectiveSchedule, ChainsAWaitIntoTheReductionThatTakesItsRows) {
  pod_compile::Op w;
  w.kind = pod_compile::Op::kWait;
  w.step = 0;
  w.plan_step = 0;
  w.phase = 1;
  w.peer = 5;
  w.cmd = cmd_ici_wait(5, 4);
  w.writes = {{100, 104}};
  VpuCmdArgs a;
  a.op = static_cast<unsigned>(VpuOp::kAdd);
  a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
  a.x_row = 100;
  a.y_row = a.dst_row = 200;
  a.rows = 4;
  pod_compile::Op v = pod_compile::vpu_op(a, 4);
  v.step = 0;
  v.plan_step = 0;
  v.phase = 1;
  Counters ctr(1, 0, 8);
  std::vector<int> steps;
  const std::vector<ChipCmd> prog = pod_compile::schedule({w, v}, 0, ctr, &steps, true);
  ASSERT_EQ(prog.size(), 1u);
  ASSERT_EQ(prog[0].op(), ChipOp::kVpu);
  const CmdVpu got = CmdVpu::decode(prog[0]);
  EXPECT_EQ(got.x_wait, 1u);
  EXPECT_EQ(got.x_counter, 5u);
  EXPECT_EQ(steps, std::vector<int>{0});
  // Half the rows reduced: not exactly the wait's rows, so the wait stays in front.
  a.rows = 2;
  const pod_compile::Op half = pod_compile::vpu_op(a, 2);
  const std::vector<ChipCmd> kept = pod_compile::schedule({w, half}, 0, ctr, &steps, true);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].op(), ChipOp::kIciWait);
  EXPECT_EQ(CmdVpu::decode(kept[1]).x_wait, 0u);
}

// DMA pieces spread over a slot's transfers: the first before them, the rest after evenly
// spaced waits, order kept.
TEST(CollectiveSchedule, InterleavesDmaAfterEvenlySpacedWaits) {
  std::vector<pod_compile::Op> ops(6), dma(3);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ops[i].kind = i % 2 ? pod_compile::Op::kWait : pod_compile::Op::kSend;
    ops[i].peer = static_cast<int>(i);
  }
  for (std::size_t i = 0; i < dma.size(); ++i) {
    dma[i].kind = pod_compile::Op::kDma;
    dma[i].peer = 100 + static_cast<int>(i);
  }
  const std::vector<pod_compile::Op> out = pod_compile::interleave_ops(ops, dma);
  std::vector<int> order;
  for (const pod_compile::Op& op : out) order.push_back(op.peer);
  EXPECT_EQ(order, (std::vector<int>{100, 0, 1, 101, 2, 3, 102, 4, 5}));
  EXPECT_EQ(pod_compile::interleave_ops(ops, {}).size(), ops.size());
}

}  // namespace
}  // namespace tpu
