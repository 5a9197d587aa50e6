// The JSON writer: escaping, nesting and layout, key order, number formatting, non-finite.
#include "json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace tpu {
namespace {

TEST(Json, Scalars) {
  EXPECT_EQ(Json().dump(), "null");
  EXPECT_EQ(Json(nullptr).dump(), "null");
  EXPECT_EQ(Json(true).dump(), "true");
  EXPECT_EQ(Json(false).dump(), "false");
  EXPECT_EQ(Json("hi").dump(), "\"hi\"");
  EXPECT_EQ(Json(std::string("s")).dump(), "\"s\"");
  EXPECT_EQ(Json(std::numeric_limits<int64_t>::min()).dump(), "-9223372036854775808");
  EXPECT_EQ(Json(std::numeric_limits<int64_t>::max()).dump(), "9223372036854775807");
  EXPECT_EQ(Json(std::numeric_limits<uint64_t>::max()).dump(), "18446744073709551615");
  EXPECT_EQ(Json(-7).dump(), "-7");
  EXPECT_EQ(Json(size_t{42}).dump(), "42");
  EXPECT_EQ(Json(uint16_t{65535}).dump(), "65535");
  EXPECT_EQ(Json(42).kind(), Json::Kind::kInt);
  EXPECT_EQ(Json(42u).kind(), Json::Kind::kUint);
  EXPECT_EQ(Json(true).kind(), Json::Kind::kBool);   // not an integer
  EXPECT_EQ(Json("x").kind(), Json::Kind::kString);  // not a bool
}

TEST(Json, StringEscaping) {
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f\x00z", 4)), "\"\\u0001\\u001f\\u0000z\"");
  EXPECT_EQ(json_quote("/ \x7f"), "\"/ \x7f\"");  // not required to escape
  EXPECT_EQ(json_quote("\xc2\xb5s \xe2\x86\x92"), "\"\xc2\xb5s \xe2\x86\x92\"");  // UTF-8 as is
  Json o = Json::object();
  o["k\"ey\n"] = "v\\";
  EXPECT_EQ(o.dump(0), "{\"k\\\"ey\\n\":\"v\\\\\"}");  // keys are escaped too
}

TEST(Json, NumberFormatting) {
  EXPECT_EQ(json_number(0.1), "0.1");
  EXPECT_EQ(json_number(1.0), "1.0");
  EXPECT_EQ(json_number(-0.0), "-0.0");
  EXPECT_EQ(json_number(0.0), "0.0");
  EXPECT_EQ(json_number(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(json_number(1e300), "1e+300");
  EXPECT_EQ(json_number(123456789012.0), "123456789012.0");
  EXPECT_EQ(json_number(5e-324), "5e-324");  // smallest subnormal
  EXPECT_EQ(json_number(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(Json(0.1f).dump(), "0.10000000149011612");  // the float's exact value
  EXPECT_EQ(Json(2.5).kind(), Json::Kind::kDouble);
}

TEST(Json, NonFiniteIsNull) {
  EXPECT_EQ(json_number(std::nan("")), "null");
  EXPECT_EQ(json_number(HUGE_VAL), "null");
  EXPECT_EQ(json_number(-HUGE_VAL), "null");
  Json a = Json::array();
  a.push_back(std::nanf("")).push_back(-HUGE_VALF).push_back(1.5);
  EXPECT_EQ(a.dump(0), "[null,null,1.5]");
}

TEST(Json, DoublesReadBackExactly) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t u = rng();
    double d;
    std::memcpy(&d, &u, sizeof d);
    if (!std::isfinite(d)) continue;
    const std::string s = json_number(d);
    const double back = std::strtod(s.c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&back, &d, sizeof d), 0) << s;
    ASSERT_LE(s.size(), 25u) << s;  // shortest form, not %.17g padding
  }
}

TEST(Json, NestingCompactAndPretty) {
  Json r = Json::object();
  r["name"] = "matmul";
  r["cycles"] = uint64_t{1234};
  r["ok"] = true;
  r["util"] = 0.5;
  r["shape"] = Json::array().push_back(2).push_back(3);
  r["hbm"]["bytes"] = 64;  // a null member becomes an object on first use
  r["links"].push_back(Json::object().set("x", 1)).push_back(Json::array());
  r["empty"] = Json::object();
  EXPECT_EQ(r.dump(0),
            "{\"name\":\"matmul\",\"cycles\":1234,\"ok\":true,\"util\":0.5,\"shape\":[2,3],"
            "\"hbm\":{\"bytes\":64},\"links\":[{\"x\":1},[]],\"empty\":{}}");
  EXPECT_EQ(r.dump(2),
            "{\n"
            "  \"name\": \"matmul\",\n"
            "  \"cycles\": 1234,\n"
            "  \"ok\": true,\n"
            "  \"util\": 0.5,\n"
            "  \"shape\": [\n"
            "    2,\n"
            "    3\n"
            "  ],\n"
            "  \"hbm\": {\n"
            "    \"bytes\": 64\n"
            "  },\n"
            "  \"links\": [\n"
            "    {\n"
            "      \"x\": 1\n"
            "    },\n"
            "    []\n"
            "  ],\n"
            "  \"empty\": {}\n"
            "}");
  EXPECT_EQ(r.size(), 8u);
  EXPECT_EQ(r["shape"].size(), 2u);
}

TEST(Json, KeysKeepInsertionOrderAndReplaceInPlace) {
  Json o;
  o.set("z", 1).set("a", 2).set("m", 3);
  o.set("a", "two");  // replacing keeps the position
  o["z"] = Json();
  EXPECT_EQ(o.dump(0), "{\"z\":null,\"a\":\"two\",\"m\":3}");
  EXPECT_EQ(o.size(), 3u);
}

TEST(Json, TypeMisuseThrows) {
  Json n = 5;
  EXPECT_THROW(n["k"], std::logic_error);
  EXPECT_THROW(n.push_back(1), std::logic_error);
  Json a = Json::array();
  EXPECT_THROW(a["k"], std::logic_error);
  Json o = Json::object();
  EXPECT_THROW(o.push_back(1), std::logic_error);
  EXPECT_EQ(Json(3).size(), 0u);
}

}  // namespace
}  // namespace tpu
