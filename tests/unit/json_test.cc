// The JSON the reports are written in (sw/common/json.h, nlohmann::ordered_json): what the
// readers of a report file rely on. A report written by Report::write parses back with its keys in
// insertion order, integers as integers (all 64 bits), doubles to the same double, NaN and Inf as
// the strings "nan", "inf", "-inf" (as the text summaries write them); numbers print as the old writer printed them; bytes that are not UTF-8 become U+FFFD
// (json_text).
#include "json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "report.h"

namespace tpu {
namespace {

// A report with what the files carry: nested groups, an unsigned counter above 2^53 (a double
// would round it), a signed value, a double that needs all 17 digits, a non-finite metric, a
// table field and a string with characters that must be escaped. Keys deliberately not sorted.
Report mixed_report() {
  Report rep("json");
  rep.metric("zeta", uint64_t{(1ull << 53) + 1}, "", "above 2^53");
  rep.metric("alpha", int64_t{-3}, "", "negative");
  rep.metric("mid", 0.1 + 0.2, "", "0.30000000000000004");
  rep.metric("nan", std::nan(""), "", "NaN");
  rep.metric("inf", -HUGE_VAL, "", "-Inf");
  rep.group("golden").metric("verdict", "pass", "", "").metric("mismatches", uint64_t{0}, "", "");
  rep.field("label", "tab\there \"quoted\" \xc2\xb5s");
  rep.field("chips", Json::array({Json::object({{"chip", 1}, {"cycles", uint64_t{7}}}),
                                  Json::object({{"chip", 0}, {"cycles", 2.5}})}));
  return rep;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> keys(const Json& o) {
  std::vector<std::string> k;
  for (auto it = o.begin(); it != o.end(); ++it) k.push_back(it.key());
  return k;
}

TEST(Json, AWrittenReportParsesBackInOrderWithExactNumbers) {
  const std::string path = ::testing::TempDir() + "json_test_" + std::to_string(getpid()) + ".json";
  mixed_report().write(path);
  const std::string text = slurp(path);
  std::remove(path.c_str());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.substr(0, 30), "{\n  \"zeta\": 9007199254740993,\n");  // indent 2, ": "

  ASSERT_TRUE(Json::accept(text)) << text;
  const Json j = Json::parse(text);
  EXPECT_EQ(keys(j), (std::vector<std::string>{"zeta", "alpha", "mid", "nan", "inf", "golden",
                                               "label", "chips"}));
  EXPECT_EQ(keys(j["golden"]), (std::vector<std::string>{"verdict", "mismatches"}));
  EXPECT_EQ(keys(j["chips"][0]), (std::vector<std::string>{"chip", "cycles"}));

  ASSERT_TRUE(j["zeta"].is_number_unsigned());
  EXPECT_EQ(j["zeta"].get<uint64_t>(), (1ull << 53) + 1);
  ASSERT_TRUE(j["alpha"].is_number_integer());
  EXPECT_EQ(j["alpha"].get<int64_t>(), -3);
  ASSERT_TRUE(j["mid"].is_number_float());
  EXPECT_EQ(j["mid"].get<double>(), 0.1 + 0.2);  // exactly: the shortest text that reads back
  EXPECT_EQ(j["nan"], "nan");
  EXPECT_EQ(j["inf"], "-inf");
  EXPECT_EQ(j["golden"]["verdict"], "pass");
  ASSERT_TRUE(j["golden"]["mismatches"].is_number_integer());
  EXPECT_EQ(j["label"], "tab\there \"quoted\" \xc2\xb5s");
  ASSERT_TRUE(j["chips"][0]["cycles"].is_number_integer());
  ASSERT_TRUE(j["chips"][1]["cycles"].is_number_float());
  EXPECT_EQ(j["chips"][1]["cycles"].get<double>(), 2.5);
}

TEST(Json, NumbersPrintAsBefore) {
  // Integers exactly, at both ends of 64 bits.
  EXPECT_EQ(Json(std::numeric_limits<int64_t>::min()).dump(), "-9223372036854775808");
  EXPECT_EQ(Json(std::numeric_limits<uint64_t>::max()).dump(), "18446744073709551615");
  EXPECT_EQ(Json(uint16_t{65535}).dump(), "65535");
  EXPECT_EQ(Json(true).dump(), "true");  // a bool is not an integer
  // Doubles keep a '.' or an exponent, so Python reads a float back.
  EXPECT_EQ(Json(1.0).dump(), "1.0");
  EXPECT_EQ(Json(0.0).dump(), "0.0");
  EXPECT_EQ(Json(-0.0).dump(), "-0.0");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(1.0 / 3.0).dump(), "0.3333333333333333");
  EXPECT_EQ(Json(123456789012.0).dump(), "123456789012.0");
  EXPECT_EQ(Json(1e300).dump(), "1e+300");
  EXPECT_EQ(Json(5e-324).dump(), "5e-324");             // smallest subnormal
  EXPECT_EQ(Json(0.1f).dump(), "0.10000000149011612");  // a float widens to its exact value
  // nlohmann alone writes null for a non-finite double; json_text names it, nested or not, and
  // leaves a finite one a number.
  EXPECT_EQ(Json::array({std::nanf(""), HUGE_VAL, -HUGE_VALF, 1.5}).dump(), "[null,null,null,1.5]");
  EXPECT_EQ(json_text(Json::array({std::nanf(""), HUGE_VAL, -HUGE_VALF, 1.5}), -1),
            R"(["nan","inf","-inf",1.5])");
  EXPECT_EQ(json_text(Json::object({{"loss", Json::array({0.5, HUGE_VAL})}}), -1),
            R"({"loss":[0.5,"inf"]})");
}

TEST(Json, DoublesReadBackExactly) {
  std::mt19937_64 rng(3);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t u = rng();
    double d;
    std::memcpy(&d, &u, sizeof d);
    if (!std::isfinite(d)) continue;
    const std::string s = Json(d).dump();
    const double back = std::strtod(s.c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&back, &d, sizeof d), 0) << s;
    ASSERT_LE(s.size(), 25u) << s;  // a short form, not %.17g padding
    ++checked;
  }
  EXPECT_GT(checked, 190000);
}

TEST(Json, KeysKeepInsertionOrderAndReplaceInPlace) {
  Json o = Json::object({{"z", 1}, {"a", 2}, {"m", 3}});
  o["a"] = "two";  // replacing keeps the position
  o["z"] = nullptr;
  o["b"]["c"] = 4;  // a new member is appended; a null one becomes an object on first use
  EXPECT_EQ(o.dump(), R"({"z":null,"a":"two","m":3,"b":{"c":4}})");
}

TEST(Json, StringsAreEscapedAndBadUtf8IsReplaced) {
  Json o = Json::object({{"k\"ey\n", std::string("v\\\x01", 3)}});
  EXPECT_EQ(json_text(o, -1), R"({"k\"ey\n":"v\\\u0001"})");
  // A path in Latin-1 does not stop a report: its bad byte becomes U+FFFD, and the text parses.
  const std::string t = json_text(Json::object({{"path", "/tmp/r\xe9sum\xe9.json"}}), -1);
  EXPECT_EQ(t, "{\"path\":\"/tmp/r\xef\xbf\xbdsum\xef\xbf\xbd.json\"}");
  EXPECT_EQ(Json::parse(t)["path"], "/tmp/r\xef\xbf\xbdsum\xef\xbf\xbd.json");
  EXPECT_THROW(Json("\xff latin-1").dump(), nlohmann::json::type_error);  // plain dump() refuses
}

}  // namespace
}  // namespace tpu
