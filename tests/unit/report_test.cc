// tpu::Report (sw/common/report.h): the exact JSON and summary of a small report, nested groups,
// the common metric helpers, the naming rules, and write() to good and bad paths.
#include "report.h"

#include <gtest/gtest.h>

#include "expect_invalid.h"
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {
namespace {

// The report of a 10x9x5 matmul on a 4x4 array (60 ideal cycles) that took 100 cycles.
Report small_report() {
  Report rep("tpusim matmul 10x9x5");
  rep.field("tool", "tpusim");
  rep.set_cycles(100, uint64_t{60});
  rep.set_mfu(0.46875);
  rep.group("hbm")
      .metric("bytes", uint64_t{470}, "bytes", "bytes moved to and from HBM")
      .metric("bytes_per_cycle", 4.7, "B/cycle", "achieved HBM bandwidth");
  rep.set_golden(true, 50, 0);
  rep.field("chips", Json::array({Json::object({{"id", 0}, {"cycles", 100}})}));
  return rep;
}

TEST(Report, JsonIsValuesAtTheirKeysInInsertionOrder) {
  const std::string expected = R"({
  "tool": "tpusim",
  "cycles": 100,
  "ideal_cycles": 60,
  "fraction_of_bound": 0.6,
  "mfu": 0.46875,
  "hbm": {
    "bytes": 470,
    "bytes_per_cycle": 4.7
  },
  "golden": {
    "verdict": "pass",
    "outputs": 50,
    "mismatches": 0
  },
  "chips": [
    {
      "id": 0,
      "cycles": 100
    }
  ]
})";
  EXPECT_EQ(small_report().json().dump(2), expected);
}

TEST(Report, SummaryShowsTheMarkedMetricsAligned) {
  const std::string expected =
      "tpusim matmul 10x9x5\n"
      "  cycles               100 cycles\n"
      "  ideal_cycles          60 cycles\n"
      "  fraction_of_bound    0.6 fraction\n"
      "  mfu                0.469 fraction\n"
      "  golden.verdict      pass\n"
      "  golden.mismatches      0\n";
  const std::string s = small_report().summary();
  EXPECT_EQ(s, expected);
  // Unmarked metrics and fields stay out of the summary.
  EXPECT_EQ(s.find("hbm"), std::string::npos);
  EXPECT_EQ(s.find("outputs"), std::string::npos);
  EXPECT_EQ(s.find("tool"), std::string::npos);
}

TEST(Report, UnitsAndDescriptionsLiveOutsideTheJson) {
  const Report rep = small_report();
  EXPECT_EQ(rep.units().dump(),
            R"({"cycles":"cycles","ideal_cycles":"cycles","fraction_of_bound":"fraction",)"
            R"("mfu":"fraction","hbm.bytes":"bytes","hbm.bytes_per_cycle":"B/cycle",)"
            R"("golden.verdict":"","golden.outputs":"","golden.mismatches":""})");
  const std::string d = rep.describe();
  EXPECT_NE(d.find("cycles [cycles]: measured cycles of the run\n"), std::string::npos) << d;
  EXPECT_NE(d.find("hbm.bytes_per_cycle [B/cycle]: achieved HBM bandwidth\n"), std::string::npos);
  EXPECT_NE(d.find("golden.outputs: output elements compared\n"), std::string::npos);
  EXPECT_EQ(rep.json().dump().find("measured"), std::string::npos);
}

TEST(Report, NestedGroups) {
  Report rep("train step");
  ReportGroup& step = rep.group("step");
  step.group("allreduce").set_cycles(200, 150.5).set_bandwidth(2.0, 3.5);
  step.metric("chips", 4, "", "chips in the pod", true);
  // group() returns the existing group: a second call adds to it.
  rep.group("step").group("allreduce").set_mismatches(0);
  EXPECT_EQ(rep.json().dump(),
            R"({"step":{"allreduce":{"cycles":200,"ideal_cycles":150.5,)"
            R"("fraction_of_bound":0.7525,"alg_bytes_per_cycle":2.0,"bus_bytes_per_cycle":3.5,)"
            R"("mismatches":0},"chips":4}})");
  const Metric* frac = rep.find("step.allreduce.fraction_of_bound");
  ASSERT_NE(frac, nullptr);
  EXPECT_DOUBLE_EQ(frac->value.as_double(), 0.7525);
  EXPECT_EQ(frac->unit, "fraction");
  EXPECT_EQ(rep.find("step.allreduce"), nullptr);  // a group, not a metric
  EXPECT_EQ(rep.find("step.missing"), nullptr);
  EXPECT_EQ(rep.find("step.chips.x"), nullptr);
  const std::string s = rep.summary();
  EXPECT_NE(s.find("  step.allreduce.bus_bytes_per_cycle    3.5 B/cycle\n"), std::string::npos)
      << s;
  EXPECT_NE(s.find("  step.chips                              4\n"), std::string::npos) << s;
}

TEST(Report, CommonKeys) {
  Report rep("collective");
  rep.set_cycles(0, 10).set_bandwidth(1.0, 1.75).set_mfu(0.25).set_mismatches(3);
  rep.set_golden(false, 64, 3);
  EXPECT_EQ(rep.json().dump(),
            R"({"cycles":0,"ideal_cycles":10,"fraction_of_bound":0.0,"alg_bytes_per_cycle":1.0,)"
            R"("bus_bytes_per_cycle":1.75,"mfu":0.25,"mismatches":3,)"
            R"("golden":{"verdict":"fail","outputs":64,"mismatches":3}})");
  EXPECT_EQ(rep.find("golden.verdict")->value.as_string(), "fail");
  EXPECT_EQ(std::string(report_key::kBusBytesPerCycle), "bus_bytes_per_cycle");
}

TEST(Report, MetricValueText) {
  EXPECT_EQ(MetricValue(2.0).text(), "2");
  EXPECT_EQ(MetricValue(1234.5678).text(), "1234.568");
  EXPECT_EQ(MetricValue(0.000123456).text(), "0.000123");
  EXPECT_EQ(MetricValue(1e13).text(), "1e+13");
  EXPECT_EQ(MetricValue(std::nan("")).text(), "nan");
  EXPECT_EQ(MetricValue(-7).text(), "-7");
  EXPECT_EQ(MetricValue(uint64_t{18446744073709551615u}).text(), "18446744073709551615");
  EXPECT_EQ(MetricValue(true).text(), "true");
  EXPECT_THROW(MetricValue("pass").as_double(), std::logic_error);
}


TEST(Report, NamesAreUniqueAndWellFormed) {
  Report rep("r");
  rep.metric("cycles", 1, "cycles", "first");
  expect_invalid([&] { rep.metric("cycles", 2, "cycles", "again"); }, {"duplicate", "'cycles'"});
  expect_invalid([&] { rep.field("cycles", "x"); }, {"duplicate", "'cycles'"});
  expect_invalid([&] { rep.group("cycles"); }, {"duplicate", "'cycles'"});
  expect_invalid([&] { rep.set_cycles(5, 5); }, {"duplicate", "'cycles'"});
  ReportGroup& g = rep.group("golden");
  g.metric("verdict", "pass", "", "");
  expect_invalid([&] { rep.set_golden(true, 1, 0); }, {"report group 'golden'", "'verdict'"});
  expect_invalid([&] { rep.metric("", 1, "", ""); }, {"empty name"});
  expect_invalid([&] { rep.metric("a.b", 1, "", ""); }, {"'a.b'", "'.'"});
  expect_invalid([&] { rep.set_cycles(5, "slow"); }, {"ideal_cycles", "number"});
  // The same name in different groups is fine.
  rep.group("other").metric("cycles", 3, "cycles", "");
  EXPECT_EQ(rep.find("other.cycles")->value.as_double(), 3);
}

TEST(Report, WriteWritesTheJson) {
  const Report rep = small_report();
  const std::string path = testing::TempDir() + "report_test_" + std::to_string(getpid()) + ".json";
  rep.write(path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), rep.json().dump(2) + "\n");
  std::remove(path.c_str());
}

TEST(Report, WriteToAnUnwritablePathNamesIt) {
  const std::string path = "/nonexistent-dir-for-report-test/sub/report.json";
  try {
    small_report().write(path);
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu
