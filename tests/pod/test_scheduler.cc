// The scheduler alone (no RTL, the fake host port): buffers in declaration order, the VMEM and
// ICI counter windows of collectives that may run together, the order the ops' buffers give,
// the steps (a collective beside the independent compute after it), errors naming the op and
// the buffer, a point-to-point send and its receive, and a workload run as programs one after
// another (first_op), a collective alone with the whole machine (alone) and a final HALT.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_host_port.h"
#include "scheduler.h"

namespace tpu {
namespace {

CollectiveOp all_reduce(int in, int out, std::size_t n) {
  CollectiveOp co;
  co.spec.collective = Collective::kAllReduce;
  co.spec.dtype = DType::kF32;
  co.spec.n = n;
  co.spec.algorithm = "torus";
  co.in = whole(in);
  co.out = whole(out);
  return co;
}

TEST(Scheduler, BuffersInDeclarationOrderAsTheChipDriverLaysThemOut) {
  FakeHostPort port(Topology::torus({2, 2}), "4x4");
  Workload w(port);
  const int a = w.add_buffer(Buffer{"A", 8, 32, Dtype::kBf16});
  const int b = w.add_buffer(Buffer{"B", 3, 20, Dtype::kF32});
  const int c = w.add_buffer(Buffer{"flat", 1, 40, Dtype::kF32, 40});
  ChipDriver d(port, 0);  // a fresh allocator, the same sequence
  const HbmMatrix ma = d.alloc_matrix(8, 32, Dtype::kBf16), mb = d.alloc_matrix(3, 20, Dtype::kF32);
  const uint64_t mc = d.alloc(160);
  EXPECT_EQ(w.matrix(a).addr, ma.addr);
  EXPECT_EQ(w.matrix(b).addr, mb.addr);
  EXPECT_EQ(w.matrix(b).pitch, mb.pitch);
  EXPECT_EQ(w.matrix(c).addr, mc);
  EXPECT_EQ(w.hbm_used(), d.allocated());
  EXPECT_LT(w.matrix(a).addr, w.matrix(b).addr);
  // A view maps back onto its buffer's block.
  const BufferRef r = w.ref_of(hbm_view(w.matrix(b), 1, 2, 0, 20));
  EXPECT_EQ(r.buffer, b);
  EXPECT_EQ(r.row0, 1u);
  EXPECT_EQ(r.rows, 2u);
  EXPECT_EQ(w.view(r).addr, hbm_view(w.matrix(b), 1, 2, 0, 20).addr);
  const BufferRef s = w.ref_span(w.matrix(b).addr + mb.pitch * 4, mb.pitch * 4 + 1);
  EXPECT_EQ(s.row0, 1u);
  EXPECT_EQ(s.rows, 2u);
}

TEST(Scheduler, BufferThatDoesNotFitIsNamed) {
  FakeHostPort port(Topology::torus({2}), "4x4");
  Workload w(port);
  const std::size_t rows = port.info().shape.hbm_bytes / 64 + 1;
  try {
    w.add_buffer(Buffer{"huge activations", rows, 16, Dtype::kF32});
    FAIL() << "no error";
  } catch (const BufferDoesNotFit& e) {
    EXPECT_NE(std::string(e.what()).find("huge activations"), std::string::npos) << e.what();
  }
}

// Two all-reduces that may run at once beside a matmul: windows above the compute area, apart.
TEST(Scheduler, OverlappingCollectivesGetDisjointWindowsAndCounters) {
  FakeHostPort port(Topology::torus({2, 2}), "4x4");
  const ChipShape& s = port.info().shape;
  Workload w(port);
  const int x = w.add_buffer(Buffer{"X", 16, 16, Dtype::kBf16});
  const int wt = w.add_buffer(Buffer{"W", 16, 32, Dtype::kBf16});
  const int y = w.add_buffer(Buffer{"Y", 16, 32, Dtype::kF32});
  const int g1 = w.add_buffer(Buffer{"G1", 16, 16, Dtype::kF32});
  const int g2 = w.add_buffer(Buffer{"G2", 16, 16, Dtype::kF32});
  const int s1 = w.add_buffer(Buffer{"S1", 16, 16, Dtype::kF32});
  const int s2 = w.add_buffer(Buffer{"S2", 16, 16, Dtype::kF32});
  w.add_op(collective_op("ar 1", all_reduce(g1, s1, 256)));
  w.add_op(collective_op("ar 2", all_reduce(g2, s2, 256)));
  w.add_op(matmul_op("mm", whole(y), whole(x), whole(wt)));
  uint32_t compute = 0;
  const std::vector<CommWindow> win = comm_windows(w, s, {}, &compute);
  ASSERT_EQ(win.size(), 2u);
  EXPECT_EQ(compute, s.vmem_rows / 2);
  for (const CommWindow& c : win) {
    EXPECT_GE(c.vmem_base, compute);
    EXPECT_LE(c.vmem_base + c.vmem_rows, s.vmem_rows);
    EXPECT_LE(c.counter_base + c.counter_count, kIciCounters);
    EXPECT_GT(c.counter_count, 0u);
  }
  EXPECT_LE(win[0].vmem_base + win[0].vmem_rows, win[1].vmem_base);
  EXPECT_LE(win[0].counter_base + win[0].counter_count, win[1].counter_base);
  // The compiled programs stay in them: every ICI_WAIT on the collective's counters, and the
  // matmul below the compute area.
  const Schedule sch = schedule(w);
  ASSERT_EQ(sch.collectives.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k)
    for (int c = 0; c < 4; ++c)
      for (const ChipCmd& cmd : sch.collectives[k].program.cmds(c)) {
        if (cmd.op() != ChipOp::kIciWait) continue;
        const uint32_t ctr = CmdIciWait::decode(cmd).counter;
        EXPECT_GE(ctr, win[k].counter_base);
        EXPECT_LT(ctr, win[k].counter_base + win[k].counter_count);
      }
  EXPECT_EQ(w.driver(0).vmem_rows_limit, compute);
  // Three regions in rotation: the fourth collective shares the first one's.
  Workload r(port);
  std::vector<int> bufs;
  for (int i = 0; i < 8; ++i) bufs.push_back(r.add_buffer(Buffer{"B" + std::to_string(i), 16, 16}));
  for (int i = 0; i < 4; ++i)
    r.add_op(
        collective_op("ar " + std::to_string(i), all_reduce(bufs[2 * i], bufs[2 * i + 1], 256)));
  ScheduleOptions three;
  three.collective_regions = 3;
  const std::vector<CommWindow> rot = comm_windows(r, s, three, &compute);
  ASSERT_EQ(rot.size(), 4u);
  EXPECT_EQ(rot[3].vmem_base, rot[0].vmem_base);
  EXPECT_EQ(rot[3].counter_base, rot[0].counter_base);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = i + 1; j < 3; ++j) {
      EXPECT_TRUE(rot[i].vmem_base + rot[i].vmem_rows <= rot[j].vmem_base ||
                  rot[j].vmem_base + rot[j].vmem_rows <= rot[i].vmem_base);
      EXPECT_TRUE(rot[i].counter_base + rot[i].counter_count <= rot[j].counter_base ||
                  rot[j].counter_base + rot[j].counter_count <= rot[i].counter_base);
    }
}

// A gradient's pieces: the all-reduce of piece 0 runs beside the matmul of piece 1 (rows apart),
// not beside the update that reads its result; explicit dependencies count too.
TEST(Scheduler, DependenciesAndStepsFollowTheBuffers) {
  FakeHostPort port(Topology::torus({2, 2}), "4x4");
  Workload w(port);
  const int a = w.add_buffer(Buffer{"AT", 32, 16, Dtype::kBf16});
  const int dy = w.add_buffer(Buffer{"dY", 16, 16, Dtype::kBf16});
  const int g = w.add_buffer(Buffer{"G", 32, 16, Dtype::kF32});
  const int gs = w.add_buffer(Buffer{"Gs", 32, 16, Dtype::kF32});
  const int o = w.add_buffer(Buffer{"other", 16, 16, Dtype::kF32});
  CollectiveOp ar0 = all_reduce(g, gs, 16 * 16);
  ar0.in = rows_of(g, 0, 16);
  ar0.out = rows_of(gs, 0, 16);
  const int mm0 =
      w.add_op(matmul_op("dW piece 0", rows_of(g, 0, 16), rows_of(a, 0, 16), whole(dy)));
  const int c0 = w.add_op(collective_op("ar piece 0", ar0));
  const int mm1 =
      w.add_op(matmul_op("dW piece 1", rows_of(g, 16, 16), rows_of(a, 16, 16), whole(dy)));
  const int upd = w.add_op(epilogue_op("update", rows_of(gs, 0, 16), {}, true));
  Op late = matmul_op("late", whole(o), rows_of(a, 16, 16), whole(dy));
  late.after = {c0};
  const int lt = w.add_op(late);
  const std::vector<std::vector<int>> deps = op_dependencies(w);
  EXPECT_EQ(deps[static_cast<std::size_t>(c0)], std::vector<int>{mm0});  // reads piece 0
  EXPECT_TRUE(deps[static_cast<std::size_t>(mm1)].empty());              // rows apart
  EXPECT_EQ(deps[static_cast<std::size_t>(upd)], std::vector<int>{c0});  // reads its result
  EXPECT_EQ(deps[static_cast<std::size_t>(lt)], std::vector<int>{c0});   // after it
  const std::vector<std::vector<int>> steps = schedule_steps(w);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0], std::vector<int>{mm0});
  EXPECT_EQ(steps[1], (std::vector<int>{c0, mm1}));
  EXPECT_EQ(steps[2], (std::vector<int>{upd, lt}));
  // The program: the collective merged with the matmul beside it, by command count, the
  // collective's first command first.
  const Schedule sch = schedule(w);
  const ChipProgram& p = sch.program.chip(0);
  const int cph = sch.phase_of_op[static_cast<std::size_t>(c0)];
  const int mph = sch.phase_of_op[static_cast<std::size_t>(mm0)];
  std::size_t first_coll = p.size();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p.labels[i].phase == cph) first_coll = std::min(first_coll, i);
  ASSERT_LT(first_coll, p.size());
  for (std::size_t i = 0; i < first_coll; ++i) EXPECT_EQ(p.labels[i].phase, mph) << i;
  EXPECT_TRUE(sch.program.phase(cph).collective);
  EXPECT_EQ(sch.program.phase(cph).bytes, 16u * 16u * 4u);
}

// lag_gradients: a gradient all-reduce's step runs on over the next one and the compute among
// and after them, the updates that read their sums too; every op's commands still come after
// those of the ops of the other program it depends on, and the program holds the same commands.
TEST(Scheduler, GradientAllReducesLagBehindTheCompute) {
  FakeHostPort port(Topology::torus({2, 2}), "4x4");
  Workload w(port);
  const int a = w.add_buffer(Buffer{"AT", 64, 16, Dtype::kBf16});
  const int dy = w.add_buffer(Buffer{"dY", 16, 16, Dtype::kBf16});
  const int g0 = w.add_buffer(Buffer{"G0", 16, 16, Dtype::kF32});
  const int g1 = w.add_buffer(Buffer{"G1", 16, 16, Dtype::kF32});
  const int o = w.add_buffer(Buffer{"other", 64, 16, Dtype::kF32});
  CollectiveOp ar0 = all_reduce(g0, g0, 16 * 16), ar1 = all_reduce(g1, g1, 16 * 16);
  ar0.gradient = ar1.gradient = true;
  const int mm0 = w.add_op(matmul_op("dW0", whole(g0), rows_of(a, 0, 16), whole(dy)));
  const int c0 = w.add_op(collective_op("ar0", ar0));
  const int mm1 = w.add_op(matmul_op("dW1", whole(g1), rows_of(a, 16, 16), whole(dy)));
  const int c1 = w.add_op(collective_op("ar1", ar1));
  const int mm2 = w.add_op(matmul_op("more", whole(o), whole(a), whole(dy)));
  const int u0 = w.add_op(epilogue_op("update0", whole(g0), {}, true));
  const int u1 = w.add_op(epilogue_op("update1", whole(g1), {}, true));
  EXPECT_EQ(schedule_steps(w),
            (std::vector<std::vector<int>>{{mm0}, {c0, mm1}, {c1, mm2, u0}, {u1}}));
  EXPECT_EQ(schedule_steps(w, 0, true),
            (std::vector<std::vector<int>>{{mm0}, {c0, mm1, c1, mm2, u0, u1}}));
  ScheduleOptions lag;
  lag.lag_gradients = true;
  const Schedule plain = schedule(w), lagged = schedule(w, lag);
  for (int c = 0; c < 4; ++c) {
    const ChipProgram& p = lagged.program.chip(c);
    std::vector<std::size_t> first(w.ops().size(), p.size()), last(w.ops().size(), 0);
    for (std::size_t i = 0; i < p.size(); ++i)
      for (std::size_t k = 0; k < w.ops().size(); ++k)
        if (p.labels[i].phase == lagged.phase_of_op[k]) {
          first[k] = std::min(first[k], i);
          last[k] = i;
        }
    const auto at = [](int k) { return static_cast<std::size_t>(k); };
    EXPECT_LT(last[at(mm1)], first[at(c1)]) << c;  // ar1 reads dW1's gradient
    EXPECT_LT(last[at(c0)], first[at(u0)]) << c;   // each update reads its sum
    EXPECT_LT(last[at(c1)], first[at(u1)]) << c;
    EXPECT_LT(first[at(c1)], last[at(mm2)]) << c;  // ar1 beside the compute after it
    // The same commands as the plain schedule's, in another order.
    std::vector<std::array<uint32_t, 4>> x, y;
    for (const ChipCmd& cmd : p.cmds) x.push_back(cmd.w);
    for (const ChipCmd& cmd : plain.program.chip(c).cmds) y.push_back(cmd.w);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    EXPECT_EQ(x, y) << c;
  }
}

TEST(Scheduler, WhatDoesNotFitNamesTheOpAndTheBuffer) {
  FakeHostPort port(Topology::torus({2}), "4x4");
  Workload w(port);
  const std::size_t big = port.info().shape.vmem_rows;  // far beyond a send's window
  const int b = w.add_buffer(Buffer{"stage activations", big, 16, Dtype::kF32});
  const int snd = w.add_op(send_op("send to stage 1", 0, 1, whole(b)));
  w.add_op(recv_op("receive from stage 0", snd, 0, 1, whole(b)));
  try {
    schedule(w);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("send to stage 1"), std::string::npos) << m;
    EXPECT_NE(m.find("stage activations"), std::string::npos) << m;
  }
  // A planner's rule, with the op that broke it.
  Workload m(port);
  const int f = m.add_buffer(Buffer{"f32 weights", 16, 16, Dtype::kF32});
  const int x = m.add_buffer(Buffer{"x", 16, 16, Dtype::kBf16});
  m.add_op(matmul_op("bad mm", whole(f), whole(x), whole(f)));
  try {
    schedule(m);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'bad mm'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
  // An op on a buffer nobody declared.
  try {
    w.add_op(matmul_op("mm", whole(b), whole(7), whole(b)));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'mm'"), std::string::npos) << e.what();
  }
}

TEST(Scheduler, SendAndReceiveMoveABufferBetweenTwoChips) {
  FakeHostPort port(Topology::torus({4}), "4x4");
  const unsigned lanes = port.info().shape.cols;
  Workload w(port);
  const int src = w.add_buffer(Buffer{"h", 8, 16, Dtype::kF32});
  const int dst = w.add_buffer(Buffer{"h in", 8, 16, Dtype::kF32});
  const int snd = w.add_op(send_op("send h", 1, 2, whole(src)));
  w.add_op(recv_op("receive h", snd, 1, 2, whole(dst)));
  const Schedule sch = schedule(w);
  ASSERT_EQ(sch.windows.size(), 1u);
  const CommWindow& cw = sch.windows[0];
  const uint32_t rows = 8 * static_cast<uint32_t>(w.matrix(src).pitch) / lanes;
  // Chip 1: the rows into its window, then sent into chip 2's at the window's second half.
  const std::vector<ChipCmd>& s = sch.program.cmds(1);
  ASSERT_EQ(s.size(), 2u);
  ASSERT_EQ(s[0].op(), ChipOp::kDma);
  const CmdDma in = CmdDma::decode(s[0]);
  EXPECT_EQ(in.dir, static_cast<uint32_t>(DmaDir::kHbmToVmem));
  EXPECT_EQ(in.mem_row, cw.vmem_base);
  EXPECT_EQ(in.hbm_addr, w.matrix(src).addr);
  ASSERT_EQ(s[1].op(), ChipOp::kIciSend);
  const CmdIciSend is = CmdIciSend::decode(s[1]);
  EXPECT_EQ(is.src_row, cw.vmem_base);
  EXPECT_EQ(is.rows, rows);
  EXPECT_EQ(is.dst_row, cw.vmem_base + rows);
  EXPECT_EQ(is.dst_x, 2u);
  EXPECT_EQ(is.counter, cw.counter_base);
  // Chip 2: waits for every row, then writes them to its buffer.
  const std::vector<ChipCmd>& r = sch.program.cmds(2);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].op(), ChipOp::kIciWait);
  EXPECT_EQ(CmdIciWait::decode(r[0]).counter, cw.counter_base);
  EXPECT_EQ(CmdIciWait::decode(r[0]).value, rows);
  const CmdDma out = CmdDma::decode(r[1]);
  EXPECT_EQ(out.dir, static_cast<uint32_t>(DmaDir::kVmemToHbm));
  EXPECT_EQ(out.mem_row, cw.vmem_base + rows);
  EXPECT_EQ(out.hbm_addr, w.matrix(dst).addr);
  EXPECT_TRUE(sch.program.cmds(0).empty());
  EXPECT_TRUE(sch.program.cmds(3).empty());
}

// A receive waits after what needs nothing it receives: the compute op before the first reader
// of the block, and that reader's leading loads that read other bytes (its weights), run while
// the wait holds the stream; the reader's load of the block comes after the receive's DMA.
TEST(Scheduler, AReceiveWaitsAfterTheLoadsThatNeedNothingReceived) {
  FakeHostPort port(Topology::torus({2}), "4x4");
  Workload w(port);
  const int h = w.add_buffer(Buffer{"h", 8, 32, Dtype::kBf16});
  const int h_in = w.add_buffer(Buffer{"h in", 8, 32, Dtype::kBf16});
  const int u = w.add_buffer(Buffer{"u", 8, 32, Dtype::kBf16});
  const int wt = w.add_buffer(Buffer{"w", 32, 32, Dtype::kBf16});
  const int z = w.add_buffer(Buffer{"z", 8, 32, Dtype::kBf16});
  const int y = w.add_buffer(Buffer{"y", 8, 32, Dtype::kBf16});
  const int snd = w.add_op(send_op("send h", 0, 1, whole(h)));
  const int rcv = w.add_op(recv_op("receive h", snd, 0, 1, whole(h_in)));
  Op free_mm = matmul_op("free mm", whole(z), whole(u), whole(wt));
  free_mm.chips = {1};
  const int fm = w.add_op(std::move(free_mm));
  const int bias = w.add_buffer(Buffer{"bias", 1, 32, Dtype::kF32});
  Op reader = matmul_op("reader", whole(y), whole(h_in), whole(wt), whole(bias));
  reader.chips = {1};
  const int rd = w.add_op(std::move(reader));
  const Schedule sch = schedule(w);
  const ChipProgram& p = sch.program.chip(1);
  const SpmdProgram& sp = sch.program;
  const auto op_of = [&](std::size_t i) {
    const std::string& n = sp.phase(p.labels[i].phase).name;
    return n == "receive h" ? rcv : n == "free mm" ? fm : n == "reader" ? rd : -1;
  };
  const HbmMatrix in = w.matrix(h_in);
  const auto reads_in = [&](const CmdDma& d) {
    return d.dir == static_cast<uint32_t>(DmaDir::kHbmToVmem) &&
           d.hbm_addr < in.addr + in.bytes() &&
           in.addr < d.hbm_addr + (d.rows - 1) * d.stride + d.seg_bytes;
  };
  std::size_t wait = p.size(), recv_dma = p.size(), first_read = p.size(), last_free = 0;
  std::size_t reader_before_wait = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const ChipCmd& c = p.cmds[i];
    ASSERT_NE(op_of(i), -1) << i;
    if (op_of(i) == fm) last_free = i;
    if (c.op() == ChipOp::kIciWait) wait = i;
    if (op_of(i) == rcv && c.op() == ChipOp::kDma) recv_dma = i;
    if (op_of(i) == rd && wait == p.size()) {
      // Before the wait: only loads of other bytes than the block's.
      ASSERT_EQ(c.op(), ChipOp::kDma) << i;
      EXPECT_FALSE(reads_in(CmdDma::decode(c))) << i;
      ++reader_before_wait;
    }
    if (op_of(i) == rd && c.op() == ChipOp::kDma && reads_in(CmdDma::decode(c)) &&
        first_read == p.size())
      first_read = i;
  }
  ASSERT_LT(wait, p.size());
  EXPECT_LT(last_free, wait);         // the op that needs nothing received: before the wait
  EXPECT_GE(reader_before_wait, 1u);  // the reader's weights load: before it too
  EXPECT_EQ(recv_dma, wait + 1);      // the receive's two commands together
  ASSERT_LT(first_read, p.size());
  EXPECT_GT(first_read, recv_dma);  // the block read after it lands
  // Nothing else moved: the sender's program, and the same commands on chip 1 as each op's own.
  EXPECT_EQ(sp.cmds(0).size(), 2u);
  std::size_t n = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    n += op_of(i) == rd ? 1 : 0;
    if (i <= last_free) {
      EXPECT_EQ(op_of(i), fm) << i;
    }
  }
  EXPECT_EQ(last_free + 1 + n + 2, p.size());
}

// A bf16 block whose rows fill whole memory rows of 4-byte words moves as those words (half the
// rows of a bf16 DMA, which puts one element in each lane's low half); one whose rows do not
// keeps the bf16 DMAs. Both ends agree on the rows.
TEST(Scheduler, Bf16BlocksMoveAsWordsWhereTheirRowsFillMemoryRows) {
  // A row of 32 bf16 is four memory rows of a 4x4 chip's words; one of 128 is half a 128x128's
  // memory row of words (it keeps the bf16 DMAs), one of 256 a whole one.
  struct Case {
    const char* variant;
    std::size_t cols;
    bool as_words;
  };
  for (const Case& c :
       {Case{"4x4", 32, true}, Case{"128x128", 128, false}, Case{"128x128", 256, true}}) {
    const char* variant = c.variant;
    FakeHostPort port(Topology::torus({2}), variant);
    const unsigned lanes = port.info().shape.cols;
    Workload w(port);
    const int src = w.add_buffer(Buffer{"a", 8, c.cols, Dtype::kBf16});
    const int dst = w.add_buffer(Buffer{"a in", 8, c.cols, Dtype::kBf16});
    const int snd = w.add_op(send_op("send a", 0, 1, whole(src)));
    w.add_op(recv_op("receive a", snd, 0, 1, whole(dst)));
    const Schedule sch = schedule(w);
    const HbmMatrix v = w.matrix(src);
    const bool as_words = c.as_words;
    const uint32_t rows = static_cast<uint32_t>(as_words ? v.rows * v.pitch * 2 / (4 * lanes)
                                                         : v.rows * v.pitch / lanes);
    const std::vector<ChipCmd>& s = sch.program.cmds(0);
    const std::vector<ChipCmd>& r = sch.program.cmds(1);
    ASSERT_EQ(s.size(), 2u) << variant;
    ASSERT_EQ(r.size(), 2u) << variant;
    EXPECT_EQ(CmdDma::decode(s[0]).bf16, as_words ? 0u : 1u) << variant;
    EXPECT_EQ(CmdDma::decode(s[0]).seg_bytes, v.pitch * 2) << variant;
    EXPECT_EQ(CmdIciSend::decode(s[1]).rows, rows) << variant;
    EXPECT_EQ(CmdIciWait::decode(r[0]).value, rows) << variant;
    EXPECT_EQ(CmdDma::decode(r[1]).bf16, as_words ? 0u : 1u) << variant;
    EXPECT_EQ(CmdDma::decode(r[1]).mem_row, sch.windows[0].vmem_base + rows) << variant;
  }
}

// Host copies: into HBM before the program, out after it, every chip at once.
TEST(Scheduler, HostCopiesRunThroughTheHostPorts) {
  FakeHostPort port(Topology::torus({2}), "4x4");
  Workload w(port);
  const int b = w.add_buffer(Buffer{"B", 1, 16, Dtype::kF32});
  std::vector<std::vector<uint8_t>> in = {std::vector<uint8_t>(64, 3), std::vector<uint8_t>(64, 4)};
  std::vector<std::vector<uint8_t>> out(2);
  w.add_op(host_copy_op("load B", whole(b), true, &in));
  w.add_op(host_copy_op("read B", whole(b), false, &out));
  run_host_copies(w, true);
  run_host_copies(w, false);
  EXPECT_EQ(out[0], in[0]);
  EXPECT_EQ(out[1], in[1]);
}

std::vector<std::array<uint32_t, 4>> words(const std::vector<ChipCmd>& cmds) {
  std::vector<std::array<uint32_t, 4>> v;
  for (const ChipCmd& c : cmds) v.push_back(c.w);
  return v;
}

// A workload run as two programs: the matmul alone (its plan per chip, a HALT at the end), then
// from first_op on the collective alone (the whole VMEM and every counter, early heads).
TEST(Scheduler, ProgramsOneAfterAnotherAndACollectiveAlone) {
  FakeHostPort port(Topology::torus({2, 2}), "4x4");
  Workload w(port);
  const int a = w.add_buffer(Buffer{"A", 16, 32, Dtype::kBf16});
  const int wt = w.add_buffer(Buffer{"W", 32, 16, Dtype::kBf16});
  const int c = w.add_buffer(Buffer{"C", 16, 16, Dtype::kF32});
  const int sum = w.add_buffer(Buffer{"sum", 16, 16, Dtype::kF32});
  const int mm = w.add_op(matmul_op("matmul", whole(c), whole(a), whole(wt)));
  ScheduleOptions mo;
  mo.halt = true;
  const Schedule ms = schedule(w, mo);
  ASSERT_EQ(ms.matmuls.size(), 1u);
  ASSERT_EQ(ms.matmuls[static_cast<std::size_t>(mm)].size(), 4u);
  for (int ch = 0; ch < 4; ++ch) {
    const MatmulRun& r = ms.matmuls[static_cast<std::size_t>(mm)][static_cast<std::size_t>(ch)];
    EXPECT_EQ(words(ms.program.cmds(ch)), words(r.program)) << "the plan alone, its HALT kept";
    EXPECT_GT(r.compute_cycles, 0u);
  }
  const std::size_t first = w.ops().size();
  w.add_op(collective_op("all_reduce (torus)", all_reduce(c, sum, 16 * 16)));
  ScheduleOptions ao;
  ao.first_op = first;
  ao.alone = true;
  const Schedule as = schedule(w, ao);
  ASSERT_EQ(as.program.phases().size(), 1u) << "the earlier program's phase left out";
  EXPECT_EQ(as.program.phase(0).name, "all_reduce (torus)");
  EXPECT_EQ(as.phase_of_op[static_cast<std::size_t>(mm)], -1);
  ASSERT_EQ(as.windows.size(), 1u);
  EXPECT_EQ(as.windows[0].vmem_base, 0u);
  EXPECT_EQ(as.windows[0].vmem_rows, port.info().shape.vmem_rows);
  EXPECT_EQ(as.windows[0].counter_count, static_cast<uint32_t>(kIciCounters));
  // The same commands PodDriver::compile gives with its defaults (what PodDriver::run runs).
  PodDriver pd(port);
  CollectiveBuffers bufs;
  bufs.in.assign(4, w.matrix(c).addr);
  bufs.out.assign(4, w.matrix(sum).addr);
  const PodProgram pp = pd.compile(all_reduce(c, sum, 16 * 16).spec, bufs);
  for (int ch = 0; ch < 4; ++ch) EXPECT_EQ(words(as.program.cmds(ch)), words(pp.program.cmds(ch)));
  EXPECT_EQ(as.collectives.at(0).vmem_rows_used, pp.vmem_rows_used);
  // Alone means alone: compute beside it is refused, naming the op.
  w.add_op(matmul_op("matmul again", whole(c), whole(a), whole(wt)));
  EXPECT_THROW(schedule(w, ao), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
