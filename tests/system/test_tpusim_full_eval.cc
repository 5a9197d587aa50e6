// The evaluations the chip harness leaves out (tb/chip/chip_dut.cc: a falling edge whose inputs
// did not change, the input region of a rising edge whose inputs did not change, the assertion
// sampling of a falling edge) change nothing: the jobs of issue 33's speed bench, made small,
// report the same bits, cycles and counters, and write the same timeline, as with
// TPUSIM_FULL_EVAL=1, where every evaluation runs as Verilator wrote it (the slow path).
#include <gtest/gtest.h>

#include <string>

#include "cli_run.h"
#include "json.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "full_eval_" + name; }

// The report without what the host's clock changes.
Json comparable(Json j) {
  for (const char* k : {"wall_seconds", "run_seconds", "sim_cycles_per_second", "trace", "json"})
    j.erase(k);
  return j;
}

// Runs `args` (which write --json <tag>.json and, when `trace`, --trace <tag>.trace.json) fast
// and slow; the two reports and timelines must be equal.
void same_both_ways(const std::string& tag, const std::string& args, bool trace) {
  std::string out[2];
  for (int slow = 0; slow < 2; ++slow) {
    const std::string base = tmp(tag + (slow ? "_slow" : "_fast"));
    const std::string line = std::string(slow ? "env TPUSIM_FULL_EVAL=1 " : "env -u TPUSIM_FULL_EVAL ") +
                             TPUSIM + " " + args + " --quiet --json " + base + ".json" +
                             (trace ? " --trace " + base + ".trace.json" : "");
    const CliRun r = run_command(line);
    ASSERT_EQ(r.code, 0) << line << "\n" << r.out;
    out[slow] = comparable(Json::parse(slurp(base + ".json"))).dump(1);
    if (trace) {
      const std::string t = slurp(base + ".trace.json");
      EXPECT_GT(t.size(), 1000u);
      out[slow] += t;
    }
  }
  EXPECT_GT(out[0].size(), 200u);
  EXPECT_EQ(out[0], out[1]) << tag << ": the fast path's report or timeline differs";
}

TEST(TpusimFullEval, MatmulReportsTheSameAsTheSlowPath) {
  same_both_ways("matmul", "matmul --variant 16x16 --m 96 --k 64 --n 80 --seed 3", false);
}

TEST(TpusimFullEval, AllReduceReportsTheSameAsTheSlowPath) {
  same_both_ways("allreduce", "allreduce --bytes 16384 --engine cpp --threads 1", true);
}

TEST(TpusimFullEval, TrainingReportsTheSameAsTheSlowPath) {
  same_both_ways("train",
                 std::string("train --config ") + TPU_SOURCE_DIR +
                     "/configs/pod_2x2.yaml --steps 2 --seed 1 --threads 1",
                 true);
}

TEST(TpusimFullEval, AnotherValueIsAClearError) {
  const CliRun r = run_command(std::string("env TPUSIM_FULL_EVAL=2 ") + TPUSIM +
                               " allreduce --bytes 4096 --quiet");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("TPUSIM_FULL_EVAL='2': must be 0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tpu
