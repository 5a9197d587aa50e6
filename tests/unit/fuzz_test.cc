// Parser fuzzing (docs/errors.md): mutated YAML configurations (from configs/*.yaml), mutated
// .npy files and random command lines of every tpusim command, generated here with fixed seeds.
// Every file case either parses or throws the project's error type with a message (ConfigError,
// HbmConfigError, std::invalid_argument, NpyError): no crash, no abort, no other exception, no
// hang, no allocation of gigabytes (the address space is capped while the cases run, where no
// sanitizer needs it). Every command line either parses or is one `tpusim: error:` line with
// exit 2, and nothing runs. The *Soak* tests run many more cases (label soak).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chip_config.h"
#include "cli.h"
#include "hbm_config.h"
#include "npy.h"
#include "tpusim_cmds.h"

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

// ------------------------------------------------------------------------------------------
// Command lines
// ------------------------------------------------------------------------------------------
// Words that may stand anywhere on a line: values of every kind, good and bad (numbers in
// other notations, lists, spans, specs, fault keys), values that look like options, empty ones,
// command names and paths (in the fuzz's own directory: in.npy exists, d/ is a directory).
const char* const kWords[] = {
    "1", "4", "64", "0", "-1", "010", "0x10", "1e3", ".5", "0.5", "0x1p-1", "inf", "nan", "+1",
    "18446744073709551616", "x", "a,b", "0,3", "1,,2", "0:10", "10:0", "5000:6000",
    "data=2,model=2", "x=2,y=2", "model=4", "-,model", "data,-", "ring", "torus", "systemc", "cpp",
    "host", "backdoor", "bf16", "f32", "all_reduce", "broadcast", "64,128,32", "4x4", "2x2",
    "uniform", "seed=1", "seed=2", "hbm_flip_at=0:2", "link_down=1:-X@0", "matmul", "pod", "",
    " ", "=", "--", "-", "--quiet", "--check", "--bogus", "--m", "--json", "--json=x", "-x",
    "in.npy", "./in.npy", "d/../in.npy", "out.json", "./out.json", "d/out.json", "d/../out.json",
    "d", "nodir/x.json", "/dev/null"};

struct CommandOptions {
  std::vector<std::string> valued, flags, required;
  std::map<std::string, std::string> good;  // a value each option takes: its default
};

// The options of every tpusim command, as tpusim_commands declares them (--help left out).
std::map<std::string, CommandOptions> tpusim_options() {
  CLI::App tool("", "tpusim");
  std::map<std::string, CommandOptions> out;
  const auto commands = tpusim_commands(tool);
  // A command with commands of its own (sweep allreduce|collective|matmul): each of them, named
  // by both words.
  std::vector<std::pair<std::string, const CLI::App*>> apps;
  for (const auto& c : commands) {
    const CLI::App* app = tool.get_subcommand(c.first);
    if (app->get_subcommands({}).empty()) apps.push_back({c.first, app});
    for (const CLI::App* sub : app->get_subcommands({}))
      apps.push_back({c.first + " " + sub->get_name(), sub});
  }
  for (const auto& c : apps) {
    CommandOptions& o = out[c.first];
    for (const CLI::Option* opt : c.second->get_options()) {
      const std::string n = opt->get_name();
      if (n == "--help" || n == "-h") continue;
      (opt->get_expected_max() != 0 ? o.valued : o.flags).push_back(n);
      if (opt->get_required()) o.required.push_back(n);
      if (!opt->get_default_str().empty()) o.good[n] = opt->get_default_str();
    }
    if (o.good.count("--kind") == 0) o.good["--kind"] = "all_reduce";  // required, no default
    if (c.first == "vpu") {  // vpu's required --op and --x: an op and an input file
      o.good["--op"] = "relu";
      o.good["--x"] = "in.npy";
    }
    if (c.first == "gather") {  // gather's required --table and --ids: input files
      o.good["--table"] = "in.npy";
      o.good["--ids"] = "in.npy";
    }
    if (c.first == "generate") {  // generate's required --load and --prompt
      o.good["--load"] = "d";
      o.good["--prompt"] = "The";
    }
  }
  return out;
}

// One random line for `cmd`: the command first (nearly always), then options with values
// (attached with = or not), flags, repeats, stray words and unknown options, in random order.
std::vector<std::string> random_line(std::mt19937_64& rng, const std::string& cmd,
                                     const CommandOptions& o) {
  auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
  auto word = [&] { return std::string(kWords[rng() % (sizeof kWords / sizeof *kWords)]); };
  // A value for option `n`: a good one a third of the time (so that some lines parse).
  auto value = [&](const std::string& n) {
    const auto g = o.good.find(n);
    return g != o.good.end() && rng() % 3 == 0 ? g->second : word();
  };
  std::vector<std::vector<std::string>> items;
  for (const std::string& r : o.required)
    if (rng() % 8 != 0) items.push_back({r, value(r)});
  const std::size_t count = rng() % 9;
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned r = static_cast<unsigned>(rng() % 100);
    if (r < 45 && !o.valued.empty()) {
      const std::string n = pick(o.valued);
      items.push_back({n, value(n)});
    } else if (r < 55 && !o.valued.empty()) {
      const std::string n = pick(o.valued);
      items.push_back({n + "=" + value(n)});
    } else if (r < 70 && !o.flags.empty()) {
      items.push_back({pick(o.flags)});
    } else if (r < 80 && !items.empty()) {
      items.push_back(pick(items));  // given again
    } else if (r < 85 && !o.valued.empty()) {
      items.push_back({pick(o.valued)});  // the value missing, or the next item taken as one
    } else if (r < 93) {
      items.push_back({word()});
    } else {
      items.push_back({"--no-such-option"});
    }
  }
  std::vector<std::string> line;
  if (rng() % 20 != 0) {  // the command's words ("sweep matmul": two)
    std::istringstream words(cmd);
    for (std::string w; words >> w;) line.push_back(w);
  }
  for (const auto& it : items) line.insert(line.end(), it.begin(), it.end());
  if (line.empty()) line.push_back(word());
  if (rng() % 10 == 0) std::shuffle(line.begin(), line.end(), rng);
  return line;
}

std::filesystem::path resolved(const std::string& p) {
  std::error_code ec;
  return std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
}

// What a parsed line must satisfy (docs/errors.md "Command lines"): every value is non-empty and
// no option; no output path is an input's or another output's. "" or what broke.
std::string parsed_line_breaks_a_rule(const CLI::App& tool) {
  const auto cmds = tool.get_subcommands();
  if (cmds.size() != 1) return "parsed without a command";
  const CLI::App* cmd = cmds.front();  // the innermost command parsed (sweep matmul: matmul)
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  std::vector<std::string> inputs, outputs;
  for (const CLI::Option* o : cmd->get_options()) {
    if (o->count() == 0 || o->get_expected_max() == 0) continue;
    const std::string n = o->get_name();
    for (const std::string& v : o->results()) {
      if (v.empty() || v.rfind("--", 0) == 0) return n + " took the value '" + v + "'";
      const bool in = n == "--config" || n == "--a" || n == "--w" || n == "--bias" || n == "--x" ||
                      n == "--y" || n == "--z";
      const bool out = n == "--out" || n == "--json" || n == "--trace" || n == "--waves" ||
                       n == "--save";
      if (in) inputs.push_back(v);
      if (out && v != "/dev/null") {
        for (const std::string& p : inputs)
          if (resolved(p) == resolved(v)) return n + " " + v + " overwrites an input " + p;
        for (const std::string& p : outputs)
          if (resolved(p) == resolved(v)) return n + " " + v + " overwrites an output " + p;
        outputs.push_back(v);
      }
    }
  }
  return "";
}

std::string shown(const std::vector<std::string>& line) {
  std::string s = "tpusim";
  for (const std::string& w : line) s += " '" + w + "'";
  return s;
}

// `per_command` random lines for each tpusim command, parsed in a directory of their own: each
// parses (and then keeps the rules) or is one error line with exit 2; never an exception, never
// a run, never a file left behind.
void fuzz_command_lines(int per_command, uint64_t seed) {
  const std::string dir = ::testing::TempDir() + "cli_fuzz_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/d");
  const std::filesystem::path old = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  std::ofstream("in.npy") << "x";
  std::mt19937_64 rng(seed);
  int failures = 0;
  for (const auto& c : tpusim_options()) {
    int parsed = 0, errors = 0;
    for (int i = 0; i < per_command; ++i) {
      const std::vector<std::string> line = random_line(rng, c.first, c.second);
      std::ostringstream out, err;
      std::streambuf* const old_out = std::cout.rdbuf(out.rdbuf());
      std::streambuf* const old_err = std::cerr.rdbuf(err.rdbuf());
      std::string bad;
      try {
        CLI::App tool("", "tpusim");
        const auto commands = tpusim_commands(tool);  // declared, never run (they hold the
                                                      // options' variables: kept while parsing)
        const int rc = cli::parse(tool, line);
        const std::string e = err.str();
        if (rc == -1) {
          ++parsed;
          if (!e.empty() || !out.str().empty()) bad = "parsed, but printed " + e + out.str();
          if (bad.empty()) bad = parsed_line_breaks_a_rule(tool);
        } else if (rc == 2) {
          ++errors;
          if (e.rfind("tpusim: error: ", 0) != 0 || e.find('\n') != e.size() - 1 ||
              !out.str().empty())
            bad = "exit 2 without one error line: " + e + out.str();
        } else {
          bad = "exit " + std::to_string(rc);
        }
      } catch (const std::exception& ex) {
        bad = std::string("exception: ") + ex.what();
      } catch (...) {
        bad = "an exception of no known type";
      }
      std::cout.rdbuf(old_out);
      std::cerr.rdbuf(old_err);
      if (!bad.empty() && ++failures <= 10) ADD_FAILURE() << shown(line) << ": " << bad;
    }
    // The lines are neither all good nor all bad: both paths are exercised.
    EXPECT_GT(parsed, per_command / 50) << c.first;
    EXPECT_GT(errors, per_command / 2) << c.first;
  }
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::recursive_directory_iterator("."))
    left.push_back(e.path().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"./d", "./in.npy"})) << "a parse left a file";
  EXPECT_EQ(slurp("in.npy"), "x");
  std::filesystem::current_path(old);
  std::filesystem::remove_all(dir);
}

TEST(CommandLineFuzz, EveryTpusimCommandParsesOrIsOneErrorLine) {
  // matmul traffic allreduce ... vpu example-inputs gather generate slices, and sweep
  // allreduce|collective|matmul
  EXPECT_EQ(tpusim_options().size(), 16u);
  fuzz_command_lines(300, 1);
}
TEST(CommandLineFuzz, EveryTpusimCommandSoak) { fuzz_command_lines(20000, 2); }

}  // namespace
}  // namespace tpu
