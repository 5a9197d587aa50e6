// Parser fuzzing (docs/errors.md): mutated YAML configurations (from configs/*.yaml) and mutated
// .npy files, generated here with fixed seeds. Every case either parses or throws the project's
// error type with a message (ConfigError, HbmConfigError, std::invalid_argument, NpyError): no
// crash, no abort, no other exception, no hang, no allocation of gigabytes (the address space is
// capped while the cases run, where no sanitizer needs it). The *Soak* tests run many more cases
// (label soak).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chip_config.h"
#include "hbm_config.h"
#include "npy.h"

#if defined(__SANITIZE_ADDRESS__)
#define TPU_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPU_FUZZ_ASAN 1
#endif
#endif

namespace tpu {
namespace {

// Caps the address space for the life of the object (not under ASan, which reserves terabytes
// of shadow): a case that tried to allocate gigabytes gets std::bad_alloc, which fails the test.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(uint64_t extra_bytes) {
#ifndef TPU_FUZZ_ASAN
    if (getrlimit(RLIMIT_AS, &old_) != 0) return;
    uint64_t vm = 0;  // current virtual size
    std::ifstream st("/proc/self/statm");
    st >> vm;
    rlimit r = old_;
    r.rlim_cur = static_cast<rlim_t>(vm * 4096 + extra_bytes);
    if (old_.rlim_cur == RLIM_INFINITY || r.rlim_cur < old_.rlim_cur)
      set_ = setrlimit(RLIMIT_AS, &r) == 0;
#else
    (void)extra_bytes;
#endif
  }
  ~AddressSpaceCap() {
    if (set_) setrlimit(RLIMIT_AS, &old_);
  }

 private:
  rlimit old_{};
  bool set_ = false;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) v.push_back(l);
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += l + "\n";
  return s;
}

// ------------------------------------------------------------------------------------------
// YAML
// ------------------------------------------------------------------------------------------
enum class Kind { kChip, kPod, kHbm };
struct Seed {
  std::string name, text;
  Kind kind;
};

std::vector<Seed> yaml_seeds() {
  std::vector<Seed> v;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TPU_SOURCE_DIR) + "/configs")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".yaml" || name == "tpu_contract.yaml") continue;
    const Kind k = name.rfind("pod_", 0) == 0 ? Kind::kPod
                   : name.rfind("hbm", 0) == 0 ? Kind::kHbm
                                               : Kind::kChip;
    v.push_back({name, slurp(e.path().string()), k});
  }
  std::sort(v.begin(), v.end(), [](const Seed& a, const Seed& b) { return a.name < b.name; });
  return v;
}

const char* const kValues[] = {"[1, 2]", "{a: 1}", "~", "true", "-1", "0",
                               "99999999999999999999999", "1e400", ".nan", "-.inf", "\"x\"",
                               "0x10", "-0", "4294967296", "18446744073709551616", "''", "[]",
                               "{}", "&x 3", "*x", "!!binary aGk=", "2.5", "|\n  text", "16x16",
                               "[[[[1]]]]", "[1, [2, {b: [3]}]]", "\"\\u0000\"", "1_000"};
const char kBytes[] = ":{}[]-&*!|>'\"#%@`,? \t\n\r0123456789abcxyz\x01\x7f\xc3\xff";

std::string mutate_yaml(std::string text, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1)); };
  const int steps = 1 + static_cast<int>(rng() % 3);
  for (int s = 0; s < steps; ++s) {
    std::vector<std::string> lines = lines_of(text);
    switch (rng() % 10) {
      case 0:  // a byte replaced
        if (!text.empty()) text[pick(text.size())] = kBytes[pick(sizeof kBytes - 1)];
        break;
      case 1:  // a byte inserted
        text.insert(pick(text.size() + 1), 1, kBytes[pick(sizeof kBytes - 1)]);
        break;
      case 2:  // truncated
        text.resize(pick(text.size() + 1));
        break;
      case 3:  // a line dropped, duplicated or two swapped
        if (lines.empty()) break;
        if (rng() % 3 == 0) lines.erase(lines.begin() + static_cast<long>(pick(lines.size())));
        else if (rng() % 2) lines.insert(lines.begin() + static_cast<long>(pick(lines.size())),
                                         lines[pick(lines.size())]);
        else std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
        text = join(lines);
        break;
      case 4:
      case 5: {  // a value swapped for another type or size
        if (lines.empty()) break;
        std::string& l = lines[pick(lines.size())];
        const auto colon = l.find(": ");
        if (colon != std::string::npos) l = l.substr(0, colon + 2) + kValues[pick(std::size(kValues))];
        text = join(lines);
        break;
      }
      case 6: {  // numbers made huge or negative
        for (char& c : text)
          if (c >= '0' && c <= '9' && rng() % 4 == 0) c = static_cast<char>('0' + rng() % 10);
        const auto d = text.find_first_of("0123456789");
        if (d != std::string::npos) text.insert(d, rng() % 2 ? "-" : "987654321987654321");
        break;
      }
      case 7: {  // deep nesting
        const std::size_t depth = 1 + pick(4000);
        const bool flow = rng() % 2;
        std::string nest = flow ? std::string(depth, '[') + "1" + std::string(depth, ']') : "";
        if (!flow)
          for (std::size_t i = 0; i < std::min<std::size_t>(depth, 300); ++i)
            nest += "\n" + std::string(2 * (i + 1), ' ') + "k:";
        if (!lines.empty()) {
          std::string& l = lines[pick(lines.size())];
          const auto colon = l.find(':');
          if (colon != std::string::npos) l = l.substr(0, colon + 1) + " " + nest;
        }
        text = join(lines);
        break;
      }
      case 8: {  // indentation changed
        if (lines.empty()) break;
        std::string& l = lines[pick(lines.size())];
        if (rng() % 2) l.insert(0, 1 + pick(4), ' ');
        else l.erase(0, std::min(l.size(), 1 + pick(4)));
        text = join(lines);
        break;
      }
      case 9: {  // aliases that expand (a "billion laughs"), or a key given twice
        if (rng() % 2) {
          std::string b = "bomb0: &b0 [x, x, x, x, x, x, x, x, x, x]\n";
          for (int i = 1; i < 9; ++i)
            b += "bomb" + std::to_string(i) + ": &b" + std::to_string(i) + " [*b" +
                 std::to_string(i - 1) + ", *b" + std::to_string(i - 1) + ", *b" +
                 std::to_string(i - 1) + ", *b" + std::to_string(i - 1) + ", *b" +
                 std::to_string(i - 1) + ", *b" + std::to_string(i - 1) + "]\n";
          text = b + text;
        } else if (!lines.empty()) {
          const std::size_t i = pick(lines.size());
          lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
          text = join(lines);
        }
        break;
      }
    }
  }
  return text;
}

// One case: parsed, or the project's error type with a message. Anything else is returned as
// a description of what went wrong.
std::string yaml_case(const Seed& seed, const std::string& path) {
  try {
    if (seed.kind == Kind::kPod) (void)load_pod_config(path);
    else if (seed.kind == Kind::kChip) (void)load_chip_config(path);
    else (void)load_hbm_config(path);
    return "";
  } catch (const ConfigError& e) {
    return std::string(e.what()).empty() ? "ConfigError without a message" : "";
  } catch (const HbmConfigError& e) {
    return std::string(e.what()).empty() ? "HbmConfigError without a message" : "";
  } catch (const std::invalid_argument& e) {
    return std::string(e.what()).empty() ? "invalid_argument without a message" : "";
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + typeid(e).name() + ": " + e.what();
  }
}

void fuzz_yaml(int cases, uint64_t seed) {
  const auto seeds = yaml_seeds();
  ASSERT_GE(seeds.size(), 5u);
  const std::string path = ::testing::TempDir() + "tpu_fuzz_" + std::to_string(seed) + ".yaml";
  std::mt19937_64 rng(seed);
  int failures = 0;
  AddressSpaceCap cap(uint64_t{2} << 30);
  for (int i = 0; i < cases; ++i) {
    const Seed& s = seeds[rng() % seeds.size()];
    const std::string text = mutate_yaml(s.text, rng);
    spit(path, text);
    const std::string bad = yaml_case(s, path);
    if (!bad.empty() && ++failures <= 5)
      ADD_FAILURE() << "case " << i << " (from " << s.name << "): " << bad << "\n---\n"
                    << text.substr(0, 2000);
  }
  std::remove(path.c_str());
}

TEST(ParserFuzz, MutatedYamlConfigs) { fuzz_yaml(3000, 1); }
TEST(ParserFuzz, MutatedYamlConfigsSoak) { fuzz_yaml(100000, 2); }

// Found by the soak: a key that is a list or a mapping, in any section of any loader.
TEST(ParserFuzz, NonScalarKeysAreConfigErrors) {
  const std::string path = ::testing::TempDir() + "tpu_keys.yaml";
  const Seed chip{"c", "", Kind::kChip}, pod{"p", "", Kind::kPod}, hbm{"h", "", Kind::kHbm};
  const std::pair<const Seed*, const char*> cases[] = {
      {&hbm, "hbm:\n  timing:\n    [a]: 3\n"},
      {&hbm, "hbm:\n  {x: 1}: 3\n"},
      {&hbm, "hbm:\n  controller:\n    [b, c]: 1\n"},
      {&chip, "chip: {variant: 4x4}\nhbm:\n  timing:\n    [a]: 3\n"},
      {&chip, "chip: {[variant]: 4x4}\n"},
      {&pod, "pod: {shape: [2], [x]: 1}\nchip: {variant: 4x4}\n"},
      {&pod, "pod: {shape: [2]}\nchip: {variant: 4x4}\ntrain: {[lr]: 1}\n"},
      {&pod, "[pod]: {shape: [2]}\nchip: {variant: 4x4}\n"}};
  for (const auto& [seed, text] : cases) {
    spit(path, text);
    EXPECT_EQ(yaml_case(*seed, path), "") << text;
  }
  std::remove(path.c_str());
}

// The shipped files parse (the mutations start from good inputs).
TEST(ParserFuzz, SeedsParse) {
  for (const Seed& s : yaml_seeds()) {
    const std::string path = std::string(TPU_SOURCE_DIR) + "/configs/" + s.name;
    if (s.name == "chip_8x8.yaml" || s.name == "chip_128x128.yaml") continue;  // maybe not built
    EXPECT_EQ(yaml_case(s, path), "") << s.name;
    if (s.kind == Kind::kChip) {
      EXPECT_NO_THROW(load_chip_config(path)) << s.name;
    }
  }
}

// A key given twice is an error naming the file, the key and both lines, in every section and
// every loader (yaml-cpp keeps both and would take one of them silently).
TEST(ConfigDuplicateKeys, NameTheFileTheKeyAndBothLines) {
  const std::string path = ::testing::TempDir() + "tpu_dup.yaml";
  auto expect_dup = [&](const std::string& text, Kind kind, const std::string& key, int l1,
                        int l2) {
    spit(path, text);
    const std::string want =
        path + ": key '" + key + "' is given twice: line " + std::to_string(l1) + " and line " +
        std::to_string(l2);
    try {
      if (kind == Kind::kPod) (void)load_pod_config(path);
      else if (kind == Kind::kChip) (void)load_chip_config(path);
      else (void)load_hbm_config(path);
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const std::exception& e) {
      EXPECT_EQ(std::string(e.what()), want) << text;
    }
  };
  expect_dup("chip:\n  variant: 4x4\n  variant: 16x16\n", Kind::kChip, "chip.variant", 2, 3);
  expect_dup("chip:\n  variant: 4x4\nhbm:\n  timing:\n    CL: 14\n    tRCD: 14\n    CL: 20\n",
             Kind::kChip, "hbm.timing.CL", 5, 7);
  expect_dup("hbm:\n  timing:\n    CL: 14\n    CL: 20\n", Kind::kHbm, "hbm.timing.CL", 3, 4);
  expect_dup("pod:\n  shape: [2, 2]\n  link_latency: 2\n  link_latency: 3\nchip: {variant: 4x4}\n",
             Kind::kPod, "pod.link_latency", 3, 4);
  expect_dup("pod:\n  shape: [2, 2]\nchip: {variant: 4x4}\npod:\n  shape: [4]\n", Kind::kPod,
             "pod", 1, 4);
  expect_dup("pod: {shape: [2]}\nchip: {variant: 4x4}\ntrain:\n  lr: 0.5\n  lr: 0.1\n",
             Kind::kPod, "train.lr", 4, 5);
  expect_dup("pod: {shape: [2]}\nchip: {variant: 4x4}\nmesh: \"x=2\"\nmesh: \"y=2\"\n", Kind::kPod,
             "mesh", 3, 4);
  expect_dup("pod: {shape: [2], shape: [4]}\nchip: {variant: 4x4}\n", Kind::kPod, "pod.shape", 1, 1);
  std::remove(path.c_str());
}

// watchdog_cycles: in the chip section, the pod section (which wins), checked.
TEST(ConfigWatchdog, ReadFromChipAndPodSections) {
  const std::string path = ::testing::TempDir() + "tpu_wd.yaml";
  spit(path, "chip: {variant: 4x4, watchdog_cycles: 5000}\n");
  EXPECT_EQ(load_chip_config(path).watchdog_cycles, 5000u);
  spit(path, "chip: {variant: 4x4}\n");
  EXPECT_EQ(load_chip_config(path).watchdog_cycles, kDefaultWatchdogCycles);
  spit(path, "pod: {shape: [2]}\nchip: {variant: 4x4, watchdog_cycles: 7}\n");
  EXPECT_EQ(load_pod_config(path).params.watchdog_cycles, 7u);
  spit(path, "pod: {shape: [2], watchdog_cycles: 0}\nchip: {variant: 4x4, watchdog_cycles: 7}\n");
  EXPECT_EQ(load_pod_config(path).params.watchdog_cycles, 0u);
  for (const char* v : {"-1", "lots", "[1]", "1.5", "99999999999999999999"}) {
    spit(path, std::string("pod: {shape: [2], watchdog_cycles: ") + v + "}\nchip: {variant: 4x4}\n");
    try {
      (void)load_pod_config(path);
      ADD_FAILURE() << "accepted " << v;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("pod.watchdog_cycles"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
}

// ------------------------------------------------------------------------------------------
// .npy
// ------------------------------------------------------------------------------------------
std::string npy_bytes(int major, const std::string& header, const std::string& data) {
  std::string h = header;
  const std::size_t lenb = major == 1 ? 2 : 4;
  const std::size_t unpadded = 6 + 2 + lenb + h.size() + 1;
  h.append((64 - unpadded % 64) % 64, ' ');
  h += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  for (std::size_t i = 0; i < lenb; ++i) s += static_cast<char>((h.size() >> (8 * i)) & 0xFF);
  return s + h + data;
}

const char* const kDtypes[] = {"<f4", "<u2", "<f8", ">f4", "|u1", "<U10", "O", "<i4", "", "f4",
                               "<f4<f4", "<\xff"};
const char* const kShapes[] = {"()", "(0,)", "(1,)", "(3, 5)", "(99999999999, 99999999999)",
                               "(18446744073709551615,)", "(4294967296, 4294967296, 16)",
                               "(-1, 4)", "(2, 3, 4, 5, 6, 7, 8, 9)", "(1e9,)", "(3 5)", "(3,,)",
                               "((3,),)", "(99999999999999999999999999,)", "(1L, 2L)",
                               "(65536, 65536)"};

std::string mutate_npy(std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1)); };
  const std::size_t rows = 1 + pick(6), cols = 1 + pick(6);
  const bool f4 = rng() % 2;
  std::string descr = f4 ? "<f4" : "<u2";
  std::string shape = "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
  std::string fortran = "False";
  std::string data(rows * cols * (f4 ? 4 : 2), '\0');
  for (char& c : data) c = static_cast<char>(rng());
  int major = 1 + static_cast<int>(pick(3));
  switch (rng() % 6) {
    case 0: shape = kShapes[pick(std::size(kShapes))]; break;  // a lying or bad shape
    case 1: descr = kDtypes[pick(std::size(kDtypes))]; break;
    case 2: fortran = rng() % 2 ? "True" : "Maybe"; break;
    case 3: data.resize(pick(data.size() * 2 + 2)); break;  // short or long data
    case 4: major = static_cast<int>(pick(256)); break;
    default: break;
  }
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + fortran +
                       ", 'shape': " + shape + ", }";
  if (rng() % 8 == 0) header = header.substr(0, pick(header.size()));  // a header cut short
  if (rng() % 8 == 0) header += ", 'extra': 1}";
  std::string file = npy_bytes(major, header, data);
  const int flips = static_cast<int>(rng() % 3);
  for (int f = 0; f < flips; ++f) {  // bytes anywhere: magic, version, header length, header
    const std::size_t at = rng() % 4 == 0 ? pick(12) : pick(file.size());
    if (at < file.size()) file[at] = static_cast<char>(rng());
  }
  if (rng() % 6 == 0) file.resize(pick(file.size() + 1));  // the file cut short anywhere
  if (rng() % 10 == 0 && file.size() > 10) {               // a header length that lies
    file[8] = '\xff';
    file[9] = '\xff';
  }
  return file;
}

void fuzz_npy(int cases, uint64_t seed) {
  const std::string path = ::testing::TempDir() + "tpu_fuzz_" + std::to_string(seed) + ".npy";
  std::mt19937_64 rng(seed);
  int failures = 0, parsed = 0;
  AddressSpaceCap cap(uint64_t{2} << 30);
  for (int i = 0; i < cases; ++i) {
    const std::string file = mutate_npy(rng);
    spit(path, file);
    std::string bad;
    try {
      const NpyArray a = read_npy(path);
      const std::size_t item = a.dtype == "<f4" ? 4 : 2;
      if (a.data.size() != a.elements() * item) bad = "data size disagrees with the shape";
      if (a.data.size() > file.size()) bad = "more data than the file holds";
      ++parsed;
      if (a.shape.size() == 2) (void)load_bf16_matrix(path, nullptr, nullptr);
    } catch (const NpyError& e) {
      if (std::string(e.what()).rfind(path, 0) != 0) bad = std::string("message without the path: ") + e.what();
    } catch (const std::exception& e) {
      bad = std::string("unexpected exception: ") + e.what();
    }
    if (!bad.empty() && ++failures <= 5) ADD_FAILURE() << "case " << i << ": " << bad;
  }
  EXPECT_GT(parsed, cases / 50);  // the mutations leave some files good
  std::remove(path.c_str());
}

TEST(ParserFuzz, MutatedNpyFiles) { fuzz_npy(3000, 1); }
TEST(ParserFuzz, MutatedNpyFilesSoak) { fuzz_npy(300000, 2); }

// A device without an end is refused, not read until memory runs out.
TEST(ParserFuzz, NpyFromADeviceIsRefused) {
  EXPECT_THROW(read_npy("/dev/zero"), NpyError);
}

}  // namespace
}  // namespace tpu
