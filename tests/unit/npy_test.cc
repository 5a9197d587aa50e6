// .npy reading and writing: round trips, the byte layout numpy writes, format versions 1.0 to
// 3.0, and every error path (each message must name the file and the broken rule).
#include "npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {
namespace {

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "tpu_npy_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << "cannot create a temp dir from " << tmpl;
    dir_ = tmpl + "/";
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return dir_ + name; }

  static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }

  // Writes an .npy file by hand: magic, version, header length (2 bytes for 1.0, 4 otherwise),
  // the header text padded as numpy pads it, then data.
  std::string make(const std::string& name, int major, const std::string& dict,
                   const std::string& data) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    std::string header = dict;
    const size_t unpadded = 6 + 2 + len_bytes + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < len_bytes; ++i)
      out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    return write_raw(name, out + header + data);
  }

  std::string write_raw(const std::string& name, const std::string& bytes) {
    const std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(f.good()) << p;
    return p;
  }

  // Runs fn, which must throw NpyError whose message starts with "<file>: " and contains rule.
  static void expect_error(const std::function<void()>& fn, const std::string& file,
                           const std::string& rule) {
    try {
      fn();
      ADD_FAILURE() << "no NpyError for " << file << " (expected: " << rule << ")";
    } catch (const NpyError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(file + ": ", 0), 0u) << "message does not start with the file: " << msg;
      EXPECT_NE(msg.find(rule), std::string::npos) << "message lacks \"" << rule << "\": " << msg;
    }
  }

  std::string dir_;
};

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
std::string u16_bytes(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

constexpr char kF4x23[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

TEST_F(NpyTest, RoundTripF32KeepsEveryBit) {
  const std::vector<uint32_t> raw = {0x3F800000, 0x80000000, 0x7F800000,
                                     0x7FA12345, 0x00000001, 0xFF7FFFFF};
  std::vector<float> v;
  for (uint32_t u : raw) v.push_back(f32_from_bits(u));
  const std::string p = path("a.npy");
  write_npy_f32(p, v, {2, 3});
  const NpyArray a = read_npy(p);
  EXPECT_EQ(a.dtype, "<f4");
  EXPECT_EQ(a.shape, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(a.elements(), 6u);
  const auto back = a.as_f32();
  ASSERT_EQ(back.size(), raw.size());
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(f32_bits(back[i]), raw[i]) << i;
  EXPECT_THROW(a.as_u16(), NpyError);
}

TEST_F(NpyTest, RoundTripU16ShapesOfEveryRank) {
  const std::vector<uint16_t> v = {0x3F80, 0x7FC1, 0x8000, 0xFFFF};
  write_npy_u16(path("v.npy"), v, {4});
  NpyArray a = read_npy(path("v.npy"));
  EXPECT_EQ(a.dtype, "<u2");
  EXPECT_EQ(a.shape, (std::vector<size_t>{4}));
  EXPECT_EQ(a.as_u16(), v);
  EXPECT_NE(slurp(path("v.npy")).find("'shape': (4,)"), std::string::npos);  // Python 1-tuple

  write_npy_u16(path("s.npy"), {0x1234}, {});  // a scalar
  a = read_npy(path("s.npy"));
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.as_u16(), (std::vector<uint16_t>{0x1234}));

  write_npy_u16(path("e.npy"), {}, {0, 3});  // no elements
  a = read_npy(path("e.npy"));
  EXPECT_EQ(a.shape, (std::vector<size_t>{0, 3}));
  EXPECT_TRUE(a.data.empty());

  write_npy_u16(path("r4.npy"), std::vector<uint16_t>(24, 7), {2, 1, 3, 4});
  EXPECT_EQ(read_npy(path("r4.npy")).shape, (std::vector<size_t>{2, 1, 3, 4}));
}

TEST_F(NpyTest, WriterUsesNumpysLayout) {
  // np.save of a (2, 3) float32 array: 10-byte preamble, a 118-byte header padded with spaces
  // and ending in '\n' (so the data starts at byte 128), then 24 data bytes.
  write_npy_f32(path("a.npy"), std::vector<float>(6, 1.0f), {2, 3});
  const std::string b = slurp(path("a.npy"));
  ASSERT_EQ(b.size(), 128u + 24u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8, 118);
  EXPECT_EQ(b.substr(10, std::strlen(kF4x23)), kF4x23);
  EXPECT_EQ(b[127], '\n');
  EXPECT_EQ(b.find_first_not_of(' ', 10 + std::strlen(kF4x23)), 127u);
  float first;
  std::memcpy(&first, &b[128], 4);
  EXPECT_EQ(first, 1.0f);
}

TEST_F(NpyTest, ReadsFormatVersions2And3) {
  const std::vector<uint16_t> v = {1, 2, 3, 4};
  for (int major : {1, 2, 3}) {
    const std::string p =
        make("v" + std::to_string(major) + ".npy", major,
             "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 2), }", u16_bytes(v));
    const NpyArray a = read_npy(p);
    EXPECT_EQ(a.shape, (std::vector<size_t>{2, 2})) << major;
    EXPECT_EQ(a.as_u16(), v) << major;
  }
  // Version 2.0 header lengths use four bytes: a value above 65535 must be read as such.
  std::string big_dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 2), }";
  big_dict.append(70000, ' ');
  EXPECT_EQ(read_npy(make("big.npy", 2, big_dict, u16_bytes(v))).as_u16(), v);
}

TEST_F(NpyTest, AcceptsOtherHeaderSpellings) {
  // Key order is free, double quotes, no trailing comma, Python 2 longs, extra spaces.
  const std::string p =
      make("o.npy", 1, "{\"shape\": (2L,3L), \"fortran_order\": False, \"descr\": \"<f4\"}",
           f32_bytes({1, 2, 3, 4, 5, 6}));
  size_t r = 0, c = 0;
  EXPECT_EQ(load_f32_matrix(p, &r, &c), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(r, 2u);
  EXPECT_EQ(c, 3u);
}

TEST_F(NpyTest, LoadBf16MatrixFromF32RoundsNearestEven) {
  const std::vector<float> v = {1.0f,
                                f32_from_bits(0x3F808000),  // tie -> 1.0 (even)
                                f32_from_bits(0x3F818000),  // tie -> 0x3F82 (even)
                                f32_from_bits(0xFFC12345),  // NaN -> canonical
                                FLT_MAX,                    // overflow -> Inf
                                -0.0f};
  write_npy_f32(path("a.npy"), v, {3, 2});
  size_t r = 0, c = 0;
  const auto b = load_bf16_matrix(path("a.npy"), &r, &c);
  EXPECT_EQ(r, 3u);
  EXPECT_EQ(c, 2u);
  EXPECT_EQ(b, (std::vector<uint16_t>{0x3F80, 0x3F80, 0x3F82, 0x7FC0, 0x7F80, 0x8000}));
}

TEST_F(NpyTest, LoadBf16MatrixFromU16KeepsBits) {
  const std::vector<uint16_t> v = {0x3F80, 0x7F81, 0x0001, 0xFF80};
  write_npy_u16(path("w.npy"), v, {1, 4});
  size_t r = 0, c = 0;
  EXPECT_EQ(load_bf16_matrix(path("w.npy"), &r, &c), v);
  EXPECT_EQ(r, 1u);
  EXPECT_EQ(c, 4u);
  EXPECT_EQ(load_bf16_matrix(path("w.npy"), nullptr, nullptr), v);
}

TEST_F(NpyTest, LoadF32MatrixWidensBf16Exactly) {
  const std::vector<uint16_t> v = {0x3F80, 0xC049, 0x0001, 0x7F80, 0x8000, 0x7F7F};
  write_npy_u16(path("w.npy"), v, {2, 3});
  const auto f = load_f32_matrix(path("w.npy"), nullptr, nullptr);
  ASSERT_EQ(f.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(f32_bits(f[i]), uint32_t{v[i]} << 16) << i;
  EXPECT_EQ(f[1], -3.140625f);
}

TEST_F(NpyTest, ErrorMissingFile) {
  const std::string p = path("nope.npy");
  expect_error([&] { read_npy(p); }, p, "cannot open for reading (No such file or directory)");
}

TEST_F(NpyTest, ErrorBadMagic) {
  const std::string p = write_raw("text.npy", "this is not numpy data at all");
  expect_error([&] { read_npy(p); }, p, "not an .npy file (bad magic)");
  const std::string e = write_raw("empty.npy", "");
  expect_error([&] { read_npy(e); }, e, "not an .npy file (bad magic)");
  const std::string s = write_raw("short.npy", "\x93NUM");
  expect_error([&] { read_npy(s); }, s, "not an .npy file (bad magic)");
}

TEST_F(NpyTest, ErrorUnsupportedVersion) {
  const std::string p = make("v4.npy", 4, kF4x23, f32_bytes(std::vector<float>(6)));
  expect_error([&] { read_npy(p); }, p,
               ".npy format version 4.0 is not supported (expected 1.0, 2.0 or 3.0)");
}

TEST_F(NpyTest, ErrorTruncatedHeader) {
  std::string full = "\x93NUMPY";
  full += std::string("\x01\x00\x76\x00", 4);  // header length 118
  full += "{'descr': '<f4'";
  const std::string p = write_raw("th.npy", full);
  expect_error([&] { read_npy(p); }, p, "truncated: header length says 118 bytes, file holds 15");
  const std::string q = write_raw("tl.npy", std::string("\x93NUMPY\x02\x00\x10\x00", 10));
  expect_error([&] { read_npy(q); }, q, "truncated: file ends inside the header length field");
}

TEST_F(NpyTest, ErrorTruncatedData) {
  const std::string p =
      make("t.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
           f32_bytes(std::vector<float>(7)) + "ab");
  expect_error([&] { read_npy(p); }, p, "truncated: header says 12 elements, file holds 7");
}

TEST_F(NpyTest, ErrorTrailingData) {
  const std::string p = make("x.npy", 1, kF4x23, f32_bytes(std::vector<float>(7)));
  expect_error([&] { read_npy(p); }, p, "header says 6 elements (24 bytes), but 28 data bytes");
}

TEST_F(NpyTest, ErrorUnsupportedDtype) {
  const std::string p =
      make("W.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
           std::string(48, '\0'));
  expect_error([&] { read_npy(p); }, p,
               "dtype '<f8' is not supported (expected uint16 '<u2' holding bf16 bits or float32 "
               "'<f4')");
  const std::string q =
      make("u1.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }",
           std::string(6, '\0'));
  expect_error([&] { load_bf16_matrix(q, nullptr, nullptr); }, q, "dtype '|u1' is not supported");
  const std::string s =
      make("st.npy", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }",
           std::string(24, '\0'));
  expect_error([&] { read_npy(s); }, s, "structured dtypes are not supported");
}

TEST_F(NpyTest, ErrorBigEndian) {
  const std::string p =
      make("be.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
           std::string(24, '\0'));
  expect_error([&] { read_npy(p); }, p, "dtype '>f4' is big-endian, which is not supported");
  expect_error([&] { read_npy(p); }, p, "arr.astype('<f4')");
}

TEST_F(NpyTest, ErrorFortranOrder) {
  const std::string p =
      make("A.npy", 1, "{'descr': '<u2', 'fortran_order': True, 'shape': (2, 3), }",
           std::string(12, '\0'));
  expect_error([&] { load_bf16_matrix(p, nullptr, nullptr); }, p,
               "fortran_order arrays are not supported");
}

TEST_F(NpyTest, ErrorMalformedHeaders) {
  const std::string d = std::string(24, '\0');
  const std::string a = make("k.npy", 1, "{'descr': '<f4', 'fortran_order': False, }", d);
  expect_error([&] { read_npy(a); }, a, "header has no 'shape' key");
  const std::string b =
      make("u.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", d);
  expect_error([&] { read_npy(b); }, b, "malformed header: unexpected key 'x'");
  const std::string c = make("c.npy", 1, "{'descr': '<f4', 'fortran_order': False", d);
  expect_error([&] { read_npy(c); }, c, "malformed header: expected ',' or '}'");
  const std::string e =
      make("s.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", d);
  expect_error([&] { read_npy(e); }, e, "malformed header: expected a non-negative integer");
  const std::string f =
      make("b.npy", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (6,), }", d);
  expect_error([&] { read_npy(f); }, f, "malformed header: expected True or False");
  const std::string g = make(
      "o.npy", 1,
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
      d);
  expect_error([&] { read_npy(g); }, g, "is too large");
}

TEST_F(NpyTest, ErrorWrongRankForMatrix) {
  write_npy_u16(path("r3.npy"), std::vector<uint16_t>(24), {2, 3, 4});
  expect_error([&] { load_bf16_matrix(path("r3.npy"), nullptr, nullptr); }, path("r3.npy"),
               "must be rank 2 (rows x cols), got rank 3");
  write_npy_f32(path("r1.npy"), std::vector<float>(5), {5});
  expect_error([&] { load_bf16_matrix(path("r1.npy"), nullptr, nullptr); }, path("r1.npy"),
               "must be rank 2 (rows x cols), got rank 1");
  write_npy_f32(path("r0.npy"), {1.0f}, {});
  expect_error([&] { load_f32_matrix(path("r0.npy"), nullptr, nullptr); }, path("r0.npy"),
               "must be rank 2 (rows x cols), got rank 0");
}

TEST_F(NpyTest, ErrorsOnWrite) {
  const std::string p = path("w.npy");
  expect_error(
      [&] {
        write_npy_f32(p, std::vector<float>(5), {2, 3});
      },
      p, "data has 5 elements but shape (2, 3) needs 6");
  const std::string q = path("no/such/dir/w.npy");
  expect_error([&] { write_npy_u16(q, {1}, {1}); }, q, "cannot open for writing");
  EXPECT_FALSE(std::filesystem::exists(p));  // a rejected write leaves no file behind
}

}  // namespace
}  // namespace tpu
