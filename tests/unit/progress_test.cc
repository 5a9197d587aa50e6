// The progress line of long runs (sw/common/progress.h) with a fake clock and a fake terminal:
// when it prints (a terminal, not quiet, after two seconds, at most every half second), what it
// says (phase, counts, cycles, cycles per second, elapsed, what is left) and how it goes away.
#include "progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tpu {
namespace {

// A terminal (or not) whose clock the test sets and whose writes it keeps.
struct FakeTerm {
  double t = 100.0;  // the clock's origin is arbitrary
  std::vector<std::string> writes;
  ProgressEnv env(bool terminal, unsigned columns = 200) {
    ProgressEnv e;
    e.terminal = terminal;
    e.columns = columns;
    e.now = [this] { return t; };
    e.write = [this](const std::string& s) { writes.push_back(s); };
    return e;
  }
  std::string all() const {
    std::string s;
    for (const std::string& w : writes) s += w;
    return s;
  }
};

TEST(ProgressLine, NothingWhenStderrIsNotATerminal) {
  FakeTerm f;
  {
    ProgressLine line("matmul", false, f.env(false));
    EXPECT_FALSE(line.active());
    for (int i = 0; i < 100; ++i) {
      f.t += 1.0;
      line.update(static_cast<uint64_t>(i) * 1000, 0);
    }
    EXPECT_FALSE(line.shown());
    clear_progress_line();
  }
  EXPECT_TRUE(f.writes.empty());
}

TEST(ProgressLine, NothingWhenQuiet) {
  FakeTerm f;
  {
    ProgressLine line("matmul", true, f.env(true));
    EXPECT_FALSE(line.active());
    f.t += 10;
    line.update(5000);
    f.t += 10;
    line.update(9000);
  }
  EXPECT_TRUE(f.writes.empty());
}

TEST(ProgressLine, FirstLineAfterTwoSecondsThenAtMostEveryHalfSecond) {
  FakeTerm f;
  ProgressLine line("allreduce on torus4x4", false, f.env(true));
  EXPECT_TRUE(line.active());
  f.t += 1.0;
  line.update(1000);
  f.t += 0.99;  // 1.99 s: still nothing
  line.update(2000);
  EXPECT_TRUE(f.writes.empty());
  EXPECT_FALSE(line.shown());
  f.t += 0.01;  // 2.0 s
  line.update(3000);
  ASSERT_EQ(f.writes.size(), 1u);
  EXPECT_TRUE(line.shown());
  // Rewritten in place: a carriage return first, the rest of the old line cleared last.
  EXPECT_EQ(f.writes[0].substr(0, 10), "\r[tpusim] ");
  EXPECT_EQ(f.writes[0].substr(f.writes[0].size() - 3), "\033[K");
  EXPECT_EQ(f.writes[0].find('\n'), std::string::npos);
  f.t += 0.4;  // 2.4 s: too soon
  line.update(4000);
  EXPECT_EQ(f.writes.size(), 1u);
  f.t += 0.1;  // 2.5 s
  line.update(5000);
  ASSERT_EQ(f.writes.size(), 2u);
  EXPECT_NE(f.writes[1].find(" 5000 cycles"), std::string::npos) << f.writes[1];
}

TEST(ProgressLine, TheLineSaysPhaseCountsCyclesRateElapsedAndWhatIsLeft) {
  FakeTerm f;
  ProgressLine line("train 64-128-32 on torus2x2", false, f.env(true));
  line.set_total(10);
  f.t += 0.5;
  line.update(0, 0);  // the first report: the rates are counted from here
  f.t += 2.0;         // 2.5 s elapsed, 2 s since the first report
  line.set_phase("step 5/10");
  line.update(8000, 4);
  // 8000 cycles in 2 s; 4 steps in 2 s: 6 left at 2 a second.
  EXPECT_EQ(line.text(f.t),
            "[tpusim] train 64-128-32 on torus2x2: step 5/10, 8000 cycles, 4.0k cycles/s, "
            "elapsed 2.5 s, left 3.0 s");
  EXPECT_DOUBLE_EQ(line.seconds_left(f.t), 3.0);
  ASSERT_EQ(f.writes.size(), 1u);
  EXPECT_EQ(f.writes[0], "\r" + line.text(f.t) + "\033[K");
  // The fifth step runs: what is left goes down with it, not up.
  f.t += 1.0;
  line.update(12000, 4);
  EXPECT_DOUBLE_EQ(line.seconds_left(f.t), 2.0);
  f.t += 5.0;  // slower than the steps before: no less than nothing
  line.update(22000, 4);
  EXPECT_DOUBLE_EQ(line.seconds_left(f.t), 0.0);
  line.update(23000, 5);  // done: 5 steps in 8 s, 5 left
  EXPECT_DOUBLE_EQ(line.seconds_left(f.t), 8.0);
}

TEST(ProgressLine, DoneOfTotalWithItsUnit) {
  FakeTerm f;
  ProgressLine line("matmul 4096x4096x4096 on MXU 16x16", false, f.env(true));
  line.update(RunProgress{0, 0, 4096, "result rows", ""});
  f.t += 200;  // 200 s: 1024 rows, 3072 left at 5.12 a second
  line.update(RunProgress{3'000'000, 1024, 4096, "result rows", ""});
  EXPECT_EQ(line.text(f.t),
            "[tpusim] matmul 4096x4096x4096 on MXU 16x16: 1024/4096 result rows, 3000000 "
            "cycles, 15.0k cycles/s, elapsed 3m20s, left 10m00s");
  f.t += 3600;
  line.update(RunProgress{40'000'000, 4095, 4096, "result rows", ""});
  // 40 M cycles and 4095 rows in 3800 s: one row left, 0.93 s.
  EXPECT_EQ(line.text(f.t),
            "[tpusim] matmul 4096x4096x4096 on MXU 16x16: 4095/4096 result rows, 40000000 "
            "cycles, 10.5k cycles/s, elapsed 1h03m, left 0.9 s");
}

TEST(ProgressLine, NoTotalNoEstimate) {
  FakeTerm f;
  ProgressLine line("all_reduce on torus4x4", false, f.env(true));
  line.update(1000);
  f.t += 4;
  line.update(2'001'000);
  EXPECT_EQ(line.text(f.t),
            "[tpusim] all_reduce on torus4x4: 2001000 cycles, 500.0k cycles/s, elapsed 4.0 s, "
            "left ?");
  EXPECT_LT(line.seconds_left(f.t), 0);
}

TEST(ProgressLine, NoEstimateUntilSomethingIsDone) {
  FakeTerm f;
  ProgressLine line("train", false, f.env(true));
  line.set_total(10);
  line.update(0, 0);
  f.t += 5;
  line.update(50'000, 0);  // the first step still runs: no rate of steps yet
  EXPECT_LT(line.seconds_left(f.t), 0);
  EXPECT_NE(line.text(f.t).find("left ?"), std::string::npos);
  line.update(60'000, 10);  // all done
  EXPECT_DOUBLE_EQ(line.seconds_left(f.t), 0.0);
  EXPECT_NE(line.text(f.t).find("left 0.0 s"), std::string::npos);
}

TEST(ProgressLine, MillionsOfCyclesASecond) {
  FakeTerm f;
  ProgressLine line("matmul", false, f.env(true));
  line.update(0);
  f.t += 2;
  line.update(6'500'000);
  EXPECT_NE(line.text(f.t).find("3.25M cycles/s"), std::string::npos) << line.text(f.t);
}

TEST(ProgressLine, CutToTheTerminalsWidthSoItNeverWraps) {
  FakeTerm f;
  ProgressLine line("a label long enough to need cutting on a narrow terminal", false,
                    f.env(true, 40));
  f.t += 3;
  line.update(123456);
  ASSERT_EQ(f.writes.size(), 1u);
  const std::string& w = f.writes[0];
  ASSERT_EQ(w.substr(w.size() - 3), "\033[K");
  EXPECT_EQ(w.size() - 1 - 3, 39u);  // \r, 39 columns, the erase
}

TEST(ProgressLine, ErasedWhenItGoesAndBeforeOtherOutput) {
  FakeTerm f;
  {
    ProgressLine line("pod job on torus2x2", false, f.env(true));
    f.t += 3;
    line.update(1000);
    ASSERT_EQ(f.writes.size(), 1u);
    clear_progress_line();  // a table row is about to print
    ASSERT_EQ(f.writes.size(), 2u);
    EXPECT_EQ(f.writes[1], "\r\033[K");
    EXPECT_FALSE(line.shown());
    clear_progress_line();  // nothing shown: nothing written
    EXPECT_EQ(f.writes.size(), 2u);
    f.t += 0.1;  // redrawn at the next report, even within the half second
    line.update(2000);
    ASSERT_EQ(f.writes.size(), 3u);
    EXPECT_NE(f.writes[2].find(" 2000 cycles"), std::string::npos);
  }
  ASSERT_EQ(f.writes.size(), 4u);  // the destructor erased it
  EXPECT_EQ(f.writes[3], "\r\033[K");
  EXPECT_EQ(f.all().find('\n'), std::string::npos);
  clear_progress_line();  // the line is gone: nothing to erase, nothing dangling
  EXPECT_EQ(f.writes.size(), 4u);
}

TEST(ProgressLine, NeverShownNeverErased) {
  FakeTerm f;
  {
    ProgressLine line("short run", false, f.env(true));
    f.t += 1.5;
    line.update(100);
  }
  EXPECT_TRUE(f.writes.empty());
}

}  // namespace
}  // namespace tpu
