// Every bench parses its command line like tpusim (CLI11, sw/common/cli.h): a bad flag or value
// is exit 2 with a message naming the flag and the rule (never an abort, a silent default or
// JSON with inf/nan), --help or -h anywhere on the line prints the usage and exits 0 without
// running anything.
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
    // -h too, and next to an unknown option or a bad value: the help wins, nothing runs.
    for (const char* args : {"--help", "-h", "--bogus --help", "--cycles abc -h"}) {
      const CliRun r = run_command(b.path + " " + args);
      EXPECT_EQ(r.code, 0) << b.name << " " << args << ": " << r.out;
      EXPECT_EQ(r.out.find(std::string("usage: ") + b.name), 0u) << b.name << ": " << r.out;
      EXPECT_NE(r.out.find("--help"), std::string::npos) << b.name << ": " << r.out;
      EXPECT_EQ(r.out.find('{'), std::string::npos) << b.name << " ran something: " << r.out;
      EXPECT_EQ(r.out.find("error"), std::string::npos) << b.name << " " << args << ": " << r.out;
    }
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
      {std::string(BENCH_MXU) + " --m abc", "bench_mxu: error: --m: abc is not an integer"},
      {std::string(BENCH_MXU) + " --m 010", "--m: 010 is not an integer in [1, 1048576]"},
      {std::string(BENCH_MXU) + " --m -1", "--m: -1 is not an integer"},
      {std::string(BENCH_MXU) + " --m", "--m needs a value"},
      {std::string(BENCH_MXU) + " --variants 3x3", "3x3"},
      {std::string(BENCH_CHIP) + " --variant 8x8", "8x8"},
      {std::string(BENCH_CHIP) + " --shapes square,,wide",
       "--shapes: square,,wide is not a comma-separated list"},
      {std::string(BENCH_CHIP) + " --shapes round", "--shapes: round not in {dma,square,"},
      {std::string(BENCH_CHIP) + " --small --small", "--small is given twice"},
      {std::string(BENCH_CHIP) + " --small=0", "--small"},
      {std::string(BENCH_ICI) + " --cycles abc", "--cycles: abc is not an integer"},
      {std::string(BENCH_ICI) + " --model nodes", "--model"},
      {std::string(BENCH_ICI) + " --waves /nonexistent_dir/x.fst", "does not exist"},
      {std::string(BENCH_ICI) + " --topology 17x17", "--topology: 17x17"},
      {std::string(BENCH_HBM) + " --cycles abc", "--cycles: abc is not an integer"},
      {std::string(BENCH_HBM) + " --cycles 5 --cycles 6", "--cycles is given twice"},
      {std::string(BENCH_HBM) + " --waves /nonexistent_dir/x.fst", "does not exist"},
      {std::string(BENCH_HBM) + " 5", "unexpected argument '5'"},
      {std::string(BENCH_TRAIN) + " --threads 0", "--threads: 0 is not an integer in [1, 256]"},
      {std::string(BENCH_TRAIN) + " --threads x", "--threads: x is not an integer"},
      {std::string(BENCH_TRAIN) + " --max-windows 0",
       "--max-windows: 0 is not an integer in [1, 4096]"},
      // The configuration is read when the line is parsed: a usage error, --check included.
      {std::string(BENCH_HBM) + " --config /nonexistent/hbm.yaml",
       "--config: /nonexistent/hbm.yaml: cannot open the HBM configuration file"},
      {std::string(BENCH_HBM) + " --config /nonexistent/hbm.yaml --check", "cannot open"},
      {std::string(BENCH_HBM) + " --config " + TPU_SOURCE_DIR + "/configs",
       "configs: is a directory, not an HBM configuration file"},
      {std::string(BENCH_HBM) + " --config " + TPU_SOURCE_DIR + "/configs/pod_2x2.yaml",
       "pod_2x2.yaml"},
      {std::string(BENCH_POD) + " --only nope", "--only: nope is not a case"},
      {std::string(BENCH_TRAIN) + " --only ,", "--only: , is not a comma-separated list"},
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
