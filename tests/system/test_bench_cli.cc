// Every bench parses its command line with tpusim's code (sw/common/cli.h): a bad flag or value
// is exit 2 with a message naming the flag and the rule (never an abort, a silent default or
// JSON with inf/nan), --help prints the usage and exits 0 without running anything.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_run.h"

namespace tpu {
namespace {

struct Bench {
  const char* name;
  std::string path;
};

const std::vector<Bench>& benches() {
  static const std::vector<Bench> b = {
      {"bench_mxu", BENCH_MXU},     {"bench_chip", BENCH_CHIP},   {"bench_hbm", BENCH_HBM},
      {"bench_ici", BENCH_ICI},     {"bench_pod", BENCH_POD},     {"bench_shard", BENCH_SHARD},
      {"bench_train", BENCH_TRAIN}};
  return b;
}

TEST(BenchCli, HelpPrintsTheUsageAndRunsNothing) {
  for (const Bench& b : benches()) {
    const CliRun r = run_command(b.path + " --help");
    EXPECT_EQ(r.code, 0) << b.name << ": " << r.out;
    EXPECT_EQ(r.out.find(std::string("usage: ") + b.name), 0u) << b.name << ": " << r.out;
    EXPECT_EQ(r.out.find('{'), std::string::npos) << b.name << " ran something: " << r.out;
  }
}

TEST(BenchCli, UnknownOptionsAndMissingValuesExitTwo) {
  for (const Bench& b : benches()) {
    for (const char* args : {"--bogus", "--bogus 1"}) {
      const CliRun r = run_command(b.path + " " + args);
      EXPECT_EQ(r.code, 2) << b.name << " " << args << ": " << r.out;
      EXPECT_NE(r.out.find(std::string(b.name) + ": error: unknown option '--bogus'"),
                std::string::npos)
          << b.name << " " << args << ": " << r.out;
    }
  }
}

TEST(BenchCli, BadValuesNameTheFlagAndTheRule) {
  struct Bad {
    std::string line, expect;
  };
  const std::vector<Bad> cases = {
      {std::string(BENCH_MXU) + " --m abc", "bench_mxu: error: --m abc: must be an integer"},
      {std::string(BENCH_MXU) + " --m", "--m needs a value"},
      {std::string(BENCH_MXU) + " --variants 3x3", "3x3"},
      {std::string(BENCH_CHIP) + " --variant 8x8", "8x8"},
      {std::string(BENCH_CHIP) + " --shapes square,,wide", "--shapes square,,wide: must be"},
      {std::string(BENCH_CHIP) + " --shapes round", "--shapes: unknown shape 'round'"},
      {std::string(BENCH_ICI) + " --cycles abc", "--cycles abc: must be an integer"},
      {std::string(BENCH_ICI) + " --model mesh", "--model mesh: must be auto, grid or nodes"},
      {std::string(BENCH_ICI) + " --topology 9x9", "--topology 9x9"},
      {std::string(BENCH_HBM) + " --cycles abc", "--cycles abc: must be an integer"},
      {std::string(BENCH_HBM) + " --cycles 5 --cycles 6", "--cycles is given twice"},
      {std::string(BENCH_HBM) + " --waves /nonexistent_dir/x.fst", "does not exist"},
      {std::string(BENCH_POD) + " --only nope", "--only nope: not a case"},
      {std::string(BENCH_TRAIN) + " --only ,", "--only ,: must be a comma-separated list"},
  };
  for (const Bad& c : cases) {
    const CliRun r = run_command(c.line);
    EXPECT_EQ(r.code, 2) << c.line << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.line << ": expected '" << c.expect << "' in:\n" << r.out;
    EXPECT_EQ(r.out.find("inf"), std::string::npos) << c.line << ": " << r.out;
  }
}

}  // namespace
}  // namespace tpu
