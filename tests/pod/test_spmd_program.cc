// The SPMD program type (sw/driver/spmd_program.h) without RTL: appending under phases, the two
// merge orders, merging whole programs (phase tables joined), without_halt, the timeline's
// labels, the command cost estimates, and run_programs against a fake host port.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_host_port.h"
#include "pod_driver.h"
#include "spmd_program.h"

namespace tpu {
namespace {

ChipCmd vpu(uint32_t rows) {
  VpuCmdArgs a = vpu_rows(VpuOp::kAdd, Mem::kVmem, 0, 0, 0, rows);
  return cmd_vpu(a);
}

uint32_t rows_of(const ChipCmd& c) { return CmdVpu::decode(c).rows; }

std::vector<uint32_t> rows_of(const std::vector<ChipCmd>& v) {
  std::vector<uint32_t> r;
  for (const ChipCmd& c : v) r.push_back(rows_of(c));
  return r;
}

MachineInfo machine() {
  MachineInfo mi;
  mi.topo = Topology::torus({2, 2});
  mi.shape.rows = 16;
  mi.shape.cols = 16;
  mi.shape.wrows = 4;
  mi.shape.hbm_channels = 2;  // 64 bytes a cycle
  mi.link_gap = 2;
  return mi;
}

TEST(SpmdProgram, AppendKeepsOneLabelPerCommand) {
  SpmdProgram p(2);
  const int mm = p.add_phase("matmul");
  SpmdPhase ar;
  ar.name = "all_reduce (torus)";
  ar.collective = true;
  ar.kind = Collective::kAllReduce;
  ar.bytes = 4096;
  const int coll = p.add_phase(ar);
  EXPECT_EQ(mm, 0);
  EXPECT_EQ(coll, 1);
  p.append_all({{vpu(1), vpu(2)}, {vpu(3)}}, mm, 0);
  ChipProgram part;
  part.append({vpu(4)}, CmdLabel{coll, 7, -1});
  p.append(1, part);
  EXPECT_EQ(p.commands(), 4u);
  EXPECT_EQ(rows_of(p.cmds(0)), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(rows_of(p.cmds(1)), (std::vector<uint32_t>{3, 4}));
  ASSERT_EQ(p.chip(1).labels.size(), 2u);
  EXPECT_EQ(p.chip(1).labels[0], (CmdLabel{mm, -1, 0}));
  EXPECT_EQ(p.chip(1).labels[1], (CmdLabel{coll, 7, -1}));
  EXPECT_TRUE(p.phase(coll).collective);
  EXPECT_EQ(p.phase(coll).bytes, 4096u);
  EXPECT_FALSE(p.phase(mm).collective);
  // A part with fewer labels than commands is refused; so are per-chip lists of the wrong size.
  ChipProgram broken;
  broken.cmds = {vpu(1)};
  EXPECT_THROW(p.append(0, broken), std::logic_error);
  EXPECT_THROW(p.append_all({{vpu(1)}}, mm), std::logic_error);
}

TEST(SpmdProgram, MergeByCountSpreadsEachByItsCommands) {
  // i / |a| <= j / |b|: a's command i goes before b's j.
  EXPECT_EQ(merge_order(2, 4), (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_EQ(merge_order(0, 2), (std::vector<bool>{false, false}));
  EXPECT_EQ(merge_order(3, 0), (std::vector<bool>{true, true, true}));
  ChipProgram a, b;
  a.append({vpu(300), vpu(100)}, CmdLabel{0, -1, -1});
  b.append({vpu(1), vpu(2), vpu(3), vpu(4)}, CmdLabel{1, 5, -1});
  const ChipProgram m = merge(a, b);
  EXPECT_EQ(rows_of(m.cmds), (std::vector<uint32_t>{300, 1, 2, 100, 3, 4}));
  ASSERT_EQ(m.labels.size(), 6u);
  for (std::size_t i = 0; i < m.size(); ++i)  // each label stays with its command
    EXPECT_EQ(m.labels[i].phase, rows_of(m.cmds[i]) >= 100 ? 0 : 1) << i;
}

TEST(SpmdProgram, MergeWithNeedsWaitsThenSpreadsWhatIsLeft) {
  // No needs: the merge by count.
  for (std::size_t na : {0u, 1u, 2u, 5u})
    for (std::size_t nb : {0u, 1u, 3u, 4u})
      EXPECT_EQ(merge_order(na, nb, {}, {}), merge_order(na, nb)) << na << " " << nb;
  // a's first command needs b's first three: b goes first though a leads, then a's four are
  // spread over b's three left (from where a had to give way), a first.
  EXPECT_EQ(merge_order(4, 6, {3, 3, 3, 3}, {}),
            (std::vector<bool>{false, false, false, true, false, true, false, true, false, true}));
  // b's last two need all of a: they wait at the end.
  EXPECT_EQ(merge_order(2, 4, {}, {0, 0, 2, 2}),
            (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_EQ(merge_order(1, 4, {}, {0, 0, 1, 1}),
            (std::vector<bool>{true, false, false, false, false}));
  EXPECT_EQ(merge_order(1, 4, {2}, {0, 0, 1, 1}),
            (std::vector<bool>{false, false, true, false, false}));
  // Every command lands after what it needs, on a larger case.
  const std::vector<std::size_t> an{0, 0, 5, 5, 5, 9, 9, 12},
      bn{0, 0, 0, 2, 2, 2, 2, 3, 3, 6, 6, 6, 8, 8};
  const std::vector<bool> ord = merge_order(an.size(), bn.size(), an, bn);
  std::size_t i = 0, j = 0;
  for (bool from_a : ord) {
    if (from_a)
      EXPECT_LE(an[i++], j);
    else
      EXPECT_LE(bn[j++], i);
  }
  EXPECT_EQ(i, an.size());
  EXPECT_EQ(j, bn.size());
  // Needs that no order meets (each next command waits on the other) are a logic error.
  EXPECT_THROW(merge_order(2, 2, {1, 1}, {1, 1}), std::logic_error);
  // The programs follow the order, each label with its command.
  ChipProgram a, b;
  a.append({vpu(300), vpu(100)}, CmdLabel{0, -1, -1});
  b.append({vpu(1), vpu(2), vpu(3), vpu(4)}, CmdLabel{1, 5, -1});
  const ChipProgram m = merge(a, b, std::vector<std::size_t>{3, 3}, {});
  EXPECT_EQ(rows_of(m.cmds), (std::vector<uint32_t>{1, 2, 3, 300, 4, 100}));
  for (std::size_t k = 0; k < m.size(); ++k)
    EXPECT_EQ(m.labels[k].phase, rows_of(m.cmds[k]) >= 100 ? 0 : 1) << k;
}

TEST(SpmdProgram, MergeByTimeSpreadsEachByItsEstimatedCycles) {
  const MachineInfo mi = machine();
  // a: 300 then 100 VPU rows (its second command starts 3/4 of the way); b: 1, 2, 3 and 4 rows
  // (starting at 0, 1/10, 3/10 and 6/10 of its time).
  const std::vector<ChipCmd> a{vpu(300), vpu(100)}, b{vpu(1), vpu(2), vpu(3), vpu(4)};
  EXPECT_EQ(rows_of(merge(a, b, MergeOrder::kByTime, &mi)),
            (std::vector<uint32_t>{300, 1, 2, 3, 4, 100}));
  // By count the same two programs interleave differently.
  EXPECT_EQ(rows_of(merge(a, b)), (std::vector<uint32_t>{300, 1, 2, 100, 3, 4}));
  // Commands that take no time (waits) fall back to their count: the second at 1/2.
  const std::vector<ChipCmd> waits{cmd_ici_wait(0, 1), cmd_ici_wait(1, 1)};
  EXPECT_EQ(merge_order(waits, b, MergeOrder::kByTime, &mi),
            (std::vector<bool>{true, false, false, false, true, false}));
  EXPECT_THROW(merge(a, b, MergeOrder::kByTime, nullptr), std::logic_error);
}

TEST(SpmdProgram, EstimatesEachUnitFromItsRows) {
  const MachineInfo mi = machine();
  // DMA: 10 rows of 256 bytes at 64 bytes a cycle; 10 rows of 32 bytes at least a row a cycle.
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_dma(DmaDir::kHbmToVmem, false, 0, 10, 256, 0, 256), mi),
                   40.0);
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_dma(DmaDir::kHbmToVmem, false, 0, 10, 32, 0, 32), mi),
                   10.0);
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_loadw(0), mi), 4.0);  // 16 rows, 4 a cycle
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_matmul(0, 24, 0, false), mi), 24.0);
  EXPECT_DOUBLE_EQ(estimate_cycles(vpu(7), mi), 7.0);
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_ici_send(Mem::kVmem, 0, 8, {1, 0, 0}, Mem::kVmem, 0, 0),
                                   mi),
                   16.0);  // 8 flits, 2 cycles each
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_ici_count(Mem::kVmem, 0, {1, 0, 0}, 0), mi), 2.0);
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_ici_wait(0, 5), mi), 0.0);
  EXPECT_DOUBLE_EQ(estimate_cycles(cmd_halt(), mi), 0.0);
}

TEST(SpmdProgram, UnitsRunSideBySideInTheEstimate) {
  const MachineInfo mi = machine();
  // A 40-cycle DMA, then two VPU commands: the VPU starts beside the DMA, its second command
  // behind its first; the span is the DMA's.
  const std::vector<ChipCmd> p{cmd_dma(DmaDir::kHbmToVmem, false, 0, 10, 256, 0, 256), vpu(7),
                               vpu(3), cmd_ici_wait(0, 1), vpu(1)};
  EXPECT_EQ(estimate_starts(p, mi), (std::vector<double>{0, 0, 7, 7, 10}));
  EXPECT_DOUBLE_EQ(estimate_span(p, mi), 40.0);
  EXPECT_DOUBLE_EQ(estimate_span({}, mi), 0.0);
}

TEST(SpmdProgram, MergeOfProgramsJoinsThePhaseTables) {
  SpmdProgram a(2), b(2);
  const int mm = a.add_phase("matmul");
  a.append_all({{vpu(1), vpu(2)}, {vpu(3)}}, mm);
  const int g = b.add_phase("gather");
  const int r = b.add_phase("reduce");
  b.append(0, {vpu(10)}, g);
  b.append(1, {vpu(20)}, r);
  const SpmdProgram m = merge(a, b);
  ASSERT_EQ(m.phases().size(), 3u);
  EXPECT_EQ(m.phase(0).name, "matmul");
  EXPECT_EQ(m.phase(1).name, "gather");
  EXPECT_EQ(m.phase(2).name, "reduce");
  EXPECT_EQ(rows_of(m.cmds(0)), (std::vector<uint32_t>{1, 10, 2}));
  EXPECT_EQ(rows_of(m.cmds(1)), (std::vector<uint32_t>{3, 20}));
  EXPECT_EQ(m.chip(0).labels[1].phase, 1);  // b's phases moved past a's
  EXPECT_EQ(m.chip(1).labels[1].phase, 2);
  EXPECT_THROW(merge(a, SpmdProgram(3)), std::logic_error);
}

TEST(SpmdProgram, MergeClearsEarlyHeadsOnlyWhereBothSend) {
  const ChipCmd early = [] {
    CmdIciSend s = CmdIciSend::decode(
        cmd_ici_send(Mem::kVmem, 0, 4, {1, 0, 0}, Mem::kVmem, 0, 0, 0, /*wait_counter=*/3));
    s.early_head = 1;
    return s.encode();
  }();
  auto heads = [](const std::vector<ChipCmd>& v) {
    int n = 0;
    for (const ChipCmd& c : v) n += c.op() == ChipOp::kIciSend && CmdIciSend::decode(c).early_head;
    return n;
  };
  EXPECT_EQ(heads(merge({early, early}, {vpu(1)})), 2);
  EXPECT_EQ(heads(merge({early}, {cmd_ici_send(Mem::kVmem, 0, 1, {0, 1, 0}, Mem::kVmem, 0, 1)})),
            0);
}

TEST(SpmdProgram, WithoutHaltDropsOnlyHaltsAndKeepsTheLabels) {
  EXPECT_EQ(rows_of(without_halt({vpu(1), cmd_halt(), vpu(2), cmd_halt()})),
            (std::vector<uint32_t>{1, 2}));
  SpmdProgram p(1);
  const int x = p.add_phase("x"), y = p.add_phase("y");
  p.append(0, {vpu(1), cmd_halt()}, x);
  p.append(0, {vpu(2), cmd_halt()}, y);
  const SpmdProgram q = p.without_halt();
  EXPECT_EQ(rows_of(q.cmds(0)), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(q.chip(0).labels[0].phase, x);
  EXPECT_EQ(q.chip(0).labels[1].phase, y);
  EXPECT_EQ(q.phases().size(), 2u);
  EXPECT_EQ(p.commands(), 4u);  // the original keeps its HALTs
}

TEST(SpmdProgram, TraceLabelsNameEachRunOfPhaseAndStep) {
  SpmdProgram p(1);
  const int mm = p.add_phase("matmul");
  const int ar = p.add_phase("all_reduce (torus)");
  p.append(0, {vpu(1), vpu(2)}, mm);
  ChipProgram c;
  c.append({vpu(3)}, CmdLabel{ar, -1, -1});
  c.append({vpu(4), vpu(5)}, CmdLabel{ar, 2, -1});
  c.append({vpu(6)}, CmdLabel{ar, 3, -1});
  p.append(0, c);
  p.append(0, {vpu(7)}, -1);  // no phase: keeps the label before it
  using L = std::vector<std::pair<std::size_t, std::string>>;
  EXPECT_EQ(p.trace_labels(0), (L{{0, "matmul"},
                                  {2, "all_reduce (torus)"},
                                  {3, "all_reduce (torus) | step 2"},
                                  {5, "all_reduce (torus) | step 3"}}));
  EXPECT_EQ(p.label_text(CmdLabel{ar, 9, 1}), "all_reduce (torus) | step 9");
  EXPECT_EQ(p.phase_of_label("all_reduce (torus) | step 2"), ar);
  EXPECT_EQ(p.phase_of_label("matmul"), mm);
  EXPECT_EQ(p.phase_of_label("matmul2"), -1);
  EXPECT_EQ(p.phase_of_label(""), -1);
}

TEST(SpmdProgram, RunProgramsPushesEveryChipItsCommands) {
  FakeHostPort port(Topology::torus({2, 2}), "16x16");
  PodDriver drv(port);
  SpmdProgram p(4);
  const int a = p.add_phase("a"), b = p.add_phase("b");
  for (int c = 0; c < 4; ++c) {
    p.append(c, std::vector<ChipCmd>(static_cast<std::size_t>(c + 1), vpu(1)), a);
    p.append(c, {vpu(static_cast<uint32_t>(c + 2))}, b);
  }
  drv.run_programs(p);
  EXPECT_EQ(port.runs, 1);
  // A workload's program is bounded by the watchdog, not by the port's default 50 million
  // cycles, which a scale model's training step outlasts.
  EXPECT_EQ(port.last_max_cycles, uint64_t{1} << 40);
  EXPECT_GT(port.last_max_cycles, uint64_t{50'000'000});
  for (int c = 0; c < 4; ++c) {
    ASSERT_EQ(port.pushed[static_cast<std::size_t>(c)].size(), p.cmds(c).size());
    EXPECT_EQ(rows_of(port.pushed[static_cast<std::size_t>(c)]), rows_of(p.cmds(c)));
  }
  EXPECT_THROW(drv.run_programs(SpmdProgram(2)), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
