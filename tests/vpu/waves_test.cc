// waves/vpu.gtkw against a real dump: run the 4-lane VPU through the harness with FST tracing,
// convert the dump with fst2vcd, and check that every signal the save file names is declared in
// the dump with the same range. Skipped when fst2vcd (GTKWave) is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "vpu_tb.h"
#include "vpu_test_util.h"

namespace tpu {
namespace {

// Full names of the variables a VCD header declares, as GTKWave writes them in a save file:
// "TOP.scope.name" for one bit, "TOP.scope.name[msb:lsb]" for vectors. Also counts timestamps.
struct VcdInfo {
  std::set<std::string> names;
  std::size_t timestamps = 0;
};

VcdInfo read_vcd(const std::string& path) {
  VcdInfo info;
  std::ifstream in(path);
  std::vector<std::string> scope;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kw;
    ls >> kw;
    if (kw == "$scope") {
      std::string type, name;
      ls >> type >> name;
      scope.push_back(name);
    } else if (kw == "$upscope") {
      if (!scope.empty()) scope.pop_back();
    } else if (kw == "$var") {
      std::string type, width, id, name, range;
      ls >> type >> width >> id >> name >> range;
      std::string full;
      for (const std::string& s : scope) full += s + ".";
      full += name;
      if (!range.empty() && range[0] == '[') full += range;
      info.names.insert(full);
    } else if (!kw.empty() && kw[0] == '#') {
      ++info.timestamps;
    }
  }
  return info;
}

// Signal lines of a .gtkw file: everything that is not a comment, setting, flag, label or marker.
std::vector<std::string> gtkw_signals(const std::string& path) {
  std::vector<std::string> sigs;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    const char c = line[0];
    if (c == '[' || c == '@' || c == '-' || c == '*' || c == '^') continue;
    sigs.push_back(line);
  }
  return sigs;
}

bool have_fst2vcd() { return std::system("command -v fst2vcd > /dev/null 2>&1") == 0; }

TEST(VpuWaves, GtkwSignalsExistInARealDump) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (GTKWave) is not installed: scripts/deps.sh installs gtkwave";
  bool have4 = false;
  for (std::size_t l : VpuTb::built_lanes()) have4 = have4 || l == 4;
  if (!have4) GTEST_SKIP() << "waves/vpu.gtkw describes the 4-lane variant, which was not built";

  const std::string dir = ::testing::TempDir();
  const std::string fst = dir + "vpu_waves_test.fst";
  const std::string vcd = dir + "vpu_waves_test.vcd";
  {
    VpuTbOptions o = vputest::tb_options(4, 0.7, 0.6, 5);
    o.wave_path = fst;
    VpuTb tb(o);
    vputest::ValueGen gen(1);
    for (int i = 0; i < 20; ++i) {
      VpuBeat b;
      b.op = static_cast<VpuOp>(i % 9);
      for (int l = 0; l < 4; ++l) {
        b.x.push_back(gen.value());
        b.y.push_back(gen.value());
        b.z.push_back(gen.value());
      }
      tb.push(b);
    }
    for (const VpuBeat& b : vputest::reduction_beats(VpuOp::kRedSum, {1, 2, 3, 4, 5, 6}, 4)) {
      tb.push(b);
    }
    tb.drain();
    ASSERT_EQ(tb.outputs().size(), 21u);
    tb.close_waves();
  }
  ASSERT_EQ(std::system(("fst2vcd " + fst + " > " + vcd).c_str()), 0);
  const VcdInfo dump = read_vcd(vcd);
  EXPECT_GT(dump.timestamps, 40u);  // the run really was recorded

  const std::vector<std::string> sigs = gtkw_signals(TPU_WAVES_DIR "/vpu.gtkw");
  EXPECT_GE(sigs.size(), 20u);  // the save file was found and parsed
  for (const std::string& s : sigs) {
    EXPECT_TRUE(dump.names.count(s)) << "waves/vpu.gtkw names " << s << ", not in the dump";
  }
  std::remove(vcd.c_str());
  std::remove(fst.c_str());
}

}  // namespace
}  // namespace tpu
