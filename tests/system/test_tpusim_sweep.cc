// `tpusim sweep allreduce|collective|matmul`: each row equals the single run of the same size
// or shape in cycles, the table and the JSON rows agree, the nccl-tests busbw factors, and bad
// ranges and shapes exit 2 naming the flag and the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "json.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "sweep_" + name; }

Json read_json(const std::string& path) { return Json::parse(slurp(path)); }

// The cells of the table's line (not a '#' line) whose first cell is `first`; empty if none.
std::vector<std::string> table_row(const std::string& out, const std::string& first) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cells(line);
    std::vector<std::string> v;
    for (std::string c; cells >> c;) v.push_back(c);
    if (!v.empty() && v[0] == first) return v;
  }
  return {};
}

const std::string kChip4 = std::string("--config ") + TPU_SOURCE_DIR + "/configs/chip_4x4.yaml";

TEST(TpusimSweep, AllreduceRowsMatchSingleRunsInCycles) {
  const std::string json = tmp("ar.json");
  const CliRun r = tpusim("sweep allreduce --bytes 1K:4K:x2 --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* col : {"size(B)", "count", "type", "cycles", "time(us)", "algbw(GB/s)",
                          "busbw(GB/s)", "bound", "golden"})
    EXPECT_NE(r.out.find(col), std::string::npos) << col << " not in " << r.out;
  const Json rep = read_json(json);
  EXPECT_EQ(rep.at("command"), "sweep");
  EXPECT_EQ(rep.at("sweep"), "allreduce");
  EXPECT_EQ(rep.at("golden").at("verdict"), "pass");
  const Json& rows = rep.at("rows");
  ASSERT_EQ(rows.size(), 3u);
  const uint64_t sizes[] = {1024, 2048, 4096};
  for (std::size_t i = 0; i < 3; ++i) {
    const Json& row = rows[i];
    EXPECT_EQ(row.at("bytes").get<uint64_t>(), sizes[i]);
    EXPECT_EQ(row.at("count").get<uint64_t>(), sizes[i] / 4);
    const std::string one = tmp("ar_one.json");
    const CliRun s =
        tpusim("allreduce --bytes " + std::to_string(sizes[i]) + " --quiet --json " + one);
    ASSERT_EQ(s.code, 0) << s.out;
    const Json single = read_json(one);
    EXPECT_EQ(row.at("cycles").get<uint64_t>(), single.at("cycles").get<uint64_t>()) << sizes[i];
    // The single run's bound and bandwidths, at the config's 1 GHz clock.
    EXPECT_DOUBLE_EQ(row.at("fraction_of_bound").get<double>(),
                     single.at("fraction_of_bound").get<double>());
    EXPECT_DOUBLE_EQ(row.at("busbw_gbps").get<double>(),
                     single.at("bus_bytes_per_cycle").get<double>());
    EXPECT_DOUBLE_EQ(row.at("algbw_gbps").get<double>(),
                     single.at("alg_bytes_per_cycle").get<double>());
    EXPECT_DOUBLE_EQ(row.at("time_us").get<double>(),
                     static_cast<double>(row.at("cycles").get<uint64_t>()) / 1000.0);
    // The table's row: size, count, type, redop, cycles, ..., golden.
    const std::vector<std::string> cells = table_row(r.out, std::to_string(sizes[i]));
    ASSERT_EQ(cells.size(), 10u) << r.out;
    EXPECT_EQ(cells[1], std::to_string(sizes[i] / 4));
    EXPECT_EQ(cells[2], "f32");
    EXPECT_EQ(cells[4], std::to_string(row.at("cycles").get<uint64_t>()));
    EXPECT_EQ(cells[9], "pass");
  }
}

TEST(TpusimSweep, CollectiveOnTheCppEngineMatchesAndUsesTheBusbwFactor) {
  const std::string json = tmp("ag.json");
  const CliRun r = tpusim(
      "sweep collective --kind all_gather --bytes 4K:8K:+4K --engine cpp "
      "--threads 2 --quiet --json " +
      json);
  ASSERT_EQ(r.code, 0) << r.out;
  const Json rep = read_json(json);
  ASSERT_EQ(rep.at("rows").size(), 2u);
  EXPECT_EQ(rep.at("kind"), "all_gather");
  for (const Json& row : rep.at("rows")) {
    // all_gather: busbw = algbw x (n-1)/n, n = 4 chips.
    EXPECT_NEAR(row.at("busbw_gbps").get<double>(), row.at("algbw_gbps").get<double>() * 0.75,
                1e-9);
    const CliRun s = tpusim("collective --kind all_gather --bytes " +
                            std::to_string(row.at("bytes").get<uint64_t>()) + " --quiet --json " +
                            tmp("ag_one.json"));
    ASSERT_EQ(s.code, 0) << s.out;
    EXPECT_EQ(row.at("cycles").get<uint64_t>(),
              read_json(tmp("ag_one.json")).at("cycles").get<uint64_t>());
    EXPECT_EQ(row.at("golden"), "pass");
  }
}

TEST(TpusimSweep, MatmulRowsMatchSingleRunsInCycles) {
  const std::string json = tmp("mm.json");
  const CliRun r =
      tpusim("sweep matmul " + kChip4 + " --shapes 21x9x6,32x48x16 --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const Json rep = read_json(json);
  ASSERT_EQ(rep.at("rows").size(), 2u);
  EXPECT_EQ(rep.at("variant"), "4x4");
  EXPECT_DOUBLE_EQ(rep.at("peak_gflops").get<double>(), 2.0 * 16 * 1.0);
  const char* single[] = {"--m 21 --k 9 --n 6", "--m 32 --k 48 --n 16"};
  for (std::size_t i = 0; i < 2; ++i) {
    const Json& row = rep.at("rows")[i];
    const CliRun s =
        tpusim("matmul " + kChip4 + " " + single[i] + " --quiet --json " + tmp("mm_one.json"));
    ASSERT_EQ(s.code, 0) << s.out;
    const Json one = read_json(tmp("mm_one.json"));
    EXPECT_EQ(row.at("cycles").get<uint64_t>(), one.at("cycles").get<uint64_t>());
    EXPECT_DOUBLE_EQ(row.at("mfu").get<double>(), one.at("mfu").get<double>());
    const double flops =
        2.0 * row.at("m").get<double>() * row.at("k").get<double>() * row.at("n").get<double>();
    EXPECT_DOUBLE_EQ(row.at("arithmetic_intensity").get<double>(),
                     flops / static_cast<double>(one.at("hbm").at("bytes").get<uint64_t>()));
    EXPECT_EQ(row.at("golden"), "pass");
  }
  EXPECT_NE(r.out.find("21x9x6"), std::string::npos) << r.out;
  // --sizes: cubes.
  const CliRun c = tpusim("sweep matmul " + kChip4 + " --sizes 8:16:x2 --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("8x8x8"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("16x16x16"), std::string::npos) << c.out;
}

struct BadLine {
  const char* args;
  const char* says;  // in the message
};

TEST(TpusimSweep, BadRangesAndShapesExit2NamingTheFlagAndTheRule) {
  const BadLine bad[] = {
      {"sweep allreduce --bytes 4K:1K:x2", "--bytes 4K:1K:x2: STOP (1024) is below START (4096)"},
      {"sweep allreduce --bytes 1K:4K:x1", "FACTOR must be at least 2"},
      {"sweep allreduce --bytes 1K:4K", "must be START:STOP:xFACTOR, START:STOP:+STEP"},
      {"sweep allreduce --bytes 1K:4K:*2", "must be xFACTOR"},
      {"sweep allreduce --bytes 1Q", "unknown unit"},
      {"sweep allreduce --bytes 0:4K:x2", "must be at least 1"},
      {"sweep allreduce --bytes 1:100000:+1", "more than 256 sizes"},
      {"sweep allreduce --bytes 6:10:+4", "--bytes 6: must be a multiple of 4"},
      {"sweep collective --kind all_reduce --bytes 1K:4K:+0", "'0' must be at least 1"},
      {"sweep matmul --shapes 1x2", "--shapes 1x2: '1x2' is not MxKxN"},
      {"sweep matmul --shapes 8x0x8", "not a whole number from 1"},
      {"sweep matmul --sizes 64:32:x2", "--sizes 64:32:x2: STOP (32) is below START (64)"},
      {"sweep matmul --sizes 8 --shapes 8x8x8", "excludes"},
      {"sweep", "A subcommand is required"},
  };
  for (const BadLine& b : bad) {
    const CliRun r = tpusim(b.args);
    EXPECT_EQ(r.code, 2) << b.args << ": " << r.out;
    EXPECT_NE(r.out.find(b.says), std::string::npos) << b.args << ": " << r.out;
  }
}

// A row that hangs ends the sweep with the watchdog's diagnosis and exit 3 on either engine
// (on SystemC the row ran in a child process: its error crosses back to the tool).
TEST(TpusimSweep, AHangingRowExits3) {
  for (const char* engine : {"systemc", "cpp"}) {
    const CliRun r =
        tpusim(std::string("sweep allreduce --bytes 1K --watchdog 1 --quiet --engine ") + engine);
    EXPECT_EQ(r.code, 3) << engine << ": " << r.out;
    EXPECT_NE(r.out.find("tpusim: hang: watchdog: no progress"), std::string::npos) << r.out;
  }
}

TEST(TpusimSweep, HelpOfEachSweep) {
  for (const char* sweep : {"allreduce", "collective", "matmul"}) {
    const CliRun help = tpusim(std::string("help sweep ") + sweep);
    EXPECT_EQ(help.code, 0) << help.out;
    EXPECT_EQ(help.out, tpusim(std::string("sweep ") + sweep + " --help").out);
    EXPECT_NE(help.out.find(std::string("usage: tpusim sweep ") + sweep), std::string::npos)
        << help.out;
  }
  EXPECT_EQ(tpusim("help sweep").out, tpusim("sweep --help").out);
  const CliRun bad = tpusim("help sweep nope");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("unexpected argument 'nope'"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace tpu
