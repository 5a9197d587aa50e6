// `tpusim gather`: rows of a float32 table gathered by an id list on the 4x4 chip (DMA_IDX),
// the output compared bit for bit with the table's rows taken here, the report's cycles, and
// every bad input (exit 2, one line naming the flag and the rule, nothing written).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cli_run.h"
#include "npy.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "tpusim_gather_" + name; }

const std::string kConfig4 = std::string("--config ") + TPU_SOURCE_DIR + "/configs/chip_4x4.yaml";

// A 1-D integer .npy (format 1.0): dtype "<i4" or "<i8".
template <class T>
void write_ids(const std::string& path, const std::vector<T>& v) {
  const std::string dt = sizeof(T) == 4 ? "<i4" : "<i8";
  std::string h = "{'descr': '" + dt + "', 'fortran_order': False, 'shape': (" +
                  std::to_string(v.size()) + ",), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::ofstream f(path, std::ios::binary);
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  const uint16_t n = static_cast<uint16_t>(h.size());
  f.write(reinterpret_cast<const char*>(&n), 2);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(T)));
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(TpusimGather, RowsComeOutAsTheTablesRowsInTheIdsOrder) {
  const std::size_t v = 300, d = 20, n = 700;  // d pads to 32 columns in HBM; several chunks
  std::mt19937_64 rng(5);
  std::vector<float> table(v * d);
  for (auto& x : table) {
    const uint32_t u = static_cast<uint32_t>(rng());
    std::memcpy(&x, &u, 4);  // any bits: NaNs and subnormals move as they are
  }
  std::vector<int64_t> ids(n);
  for (auto& i : ids) i = static_cast<int64_t>(rng() % v);
  ids[0] = 0;
  ids[n - 1] = static_cast<int64_t>(v - 1);
  write_npy_f32(tmp("t.npy"), table, {v, d});
  write_ids(tmp("i.npy"), ids);
  const CliRun r = tpusim("gather --quiet " + kConfig4 + " --table " + tmp("t.npy") + " --ids " +
                          tmp("i.npy") + " --out " + tmp("o.npy") + " --json " + tmp("r.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("golden check: PASS (0 of 14000 outputs differ)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rows_per_cycle"), std::string::npos) << r.out;
  const NpyArray o = read_npy(tmp("o.npy"));
  ASSERT_EQ(o.shape, (std::vector<std::size_t>{n, d}));
  const std::vector<float> got = o.as_f32();
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t c = 0; c < d; ++c)
      ASSERT_EQ(bits(got[j * d + c]), bits(table[static_cast<std::size_t>(ids[j]) * d + c]))
          << j << ", " << c;
  std::ifstream js(tmp("r.json"));
  const std::string json((std::istreambuf_iterator<char>(js)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"cycles\""), std::string::npos);
}

TEST(TpusimGather, BadInputsAreOneErrorLineAndExit2) {
  const std::string t = tmp("bt.npy"), i = tmp("bi.npy"), out = tmp("bo.npy");
  write_npy_f32(t, std::vector<float>(8 * 4, 1.0f), {8, 4});
  write_ids(i, std::vector<int32_t>{1, 2, 8});
  write_ids(tmp("ok.npy"), std::vector<int32_t>{1, 2, 7});
  write_npy_f32(tmp("f1.npy"), std::vector<float>(8, 1.0f), {8});
  write_ids(tmp("neg.npy"), std::vector<int64_t>{-1});
  const std::string o = " --out " + out + " " + kConfig4;
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"--table " + t + " --ids " + i + o, {"--ids " + i, "id 8 at 2", "0..7"}},
      {"--table " + t + " --ids " + tmp("neg.npy") + o, {"id -1 at 0"}},
      {"--table " + tmp("f1.npy") + " --ids " + tmp("ok.npy") + o, {"--table", "2-D"}},
      {"--table " + t + " --ids " + tmp("f1.npy") + o, {"--ids", "dtype '<f4'", "int32"}},
      {"--table " + t + " --ids " + tmp("ok.npy") + " --variant 3x3" + o, {"--variant 3x3"}},
      {"--table " + t + " --ids " + tmp("none.npy") + o, {"none.npy"}},
  };
  for (const auto& [args, words] : cases) {
    std::remove(out.c_str());
    const CliRun r = tpusim("gather --quiet " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("tpusim: error: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << "\n" << r.out;
    for (const std::string& w : words)
      EXPECT_NE(r.out.find(w), std::string::npos) << w << " in " << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

}  // namespace
}  // namespace tpu
