// The configuration module (sw/config): its one table of keys covers every key the checked-in
// configurations use, each with a type, a range, a description and a default that is the typed
// struct's; the loaders check the table's ranges; a faults: key and its --fault give the same
// settings; the help text lists every key.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "chip_config.h"
#include "config_keys.h"

#ifndef TPU_SOURCE_DIR
#error "TPU_SOURCE_DIR must point at the project root"
#endif

namespace tpu {
namespace {

const std::string kConfigs = std::string(TPU_SOURCE_DIR) + "/configs";

std::string write_tmp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "config_test_" + name + ".yaml";
  std::ofstream(path) << text;
  return path;
}

// Every mapping key of `n` as a dotted name ("pod.shape"); list items are not walked (their
// entries, as faults.link_down's, are the list key's own).
void key_names(const YAML::Node& n, const std::string& where, std::vector<std::string>* out) {
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    const std::string name = (where.empty() ? "" : where + ".") + kv.first.as<std::string>();
    out->push_back(name);
    key_names(kv.second, name, out);
  }
}

TEST(ConfigKeys, EveryKeyOfTheCheckedInConfigsIsInTheTable) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(kConfigs)) {
    const std::string file = e.path().filename().string();
    if (e.path().extension() != ".yaml" || file == "tpu_contract.yaml") continue;
    std::vector<std::string> names;
    key_names(YAML::LoadFile(e.path().string()), "", &names);
    EXPECT_FALSE(names.empty()) << file;
    for (const std::string& n : names)
      EXPECT_NO_THROW((void)config_keys().at(n)) << file << ": " << n;
    ++files;
  }
  EXPECT_GE(files, 8);
}

TEST(ConfigKeys, EveryKeyHasADescriptionAndARange) {
  for (const ConfigKey& k : config_keys().all()) {
    EXPECT_FALSE(k.doc.empty()) << k.name;
    if (k.type == KeyType::kUint) {
      EXPECT_LE(k.lo, k.hi) << k.name;
      EXPECT_GT(k.hi, 0u) << k.name;
      if (!k.def.empty() && k.def.find_first_not_of("0123456789") == std::string::npos) {
        EXPECT_TRUE(k.holds(std::stoull(k.def))) << k.name << " default " << k.def;
      }
    }
    if (k.type == KeyType::kReal) {
      EXPECT_LT(k.real_lo, k.real_hi) << k.name;
      EXPECT_TRUE(k.holds_real(std::stod(k.def))) << k.name << " default " << k.def;
    }
  }
  EXPECT_THROW((void)config_keys().at("pod.no_such_key"), std::logic_error);
}

TEST(ConfigKeys, DefaultsAreTheTypedStructs) {
  const ConfigKeys& t = config_keys();
  const TrainSettings d;
  EXPECT_EQ(t.at("train.batch").def, std::to_string(d.batch));
  EXPECT_EQ(t.at("train.steps").def, std::to_string(d.steps));
  EXPECT_EQ(std::stod(t.at("train.lr").def), d.lr);
  EXPECT_EQ(t.at("train.layers").def, "64,128,32");
  EXPECT_EQ(t.at("chip.variant").def, ChipConfig{}.variant);
  EXPECT_EQ(t.at("chip.watchdog_cycles").def, std::to_string(kDefaultWatchdogCycles));
  EXPECT_EQ(t.at("hbm.timing.tRCD").def, std::to_string(HbmTiming{}.rcd));
  // A pod file without a train: section loads the defaults (4x4 chips: built in every preset).
  const PodConfig pc =
      load_pod_config(write_tmp("no_train", "pod:\n  shape: [4, 4]\nchip:\n  variant: 4x4\n"));
  EXPECT_EQ(pc.train.layers, d.layers);
  EXPECT_EQ(pc.train.grad_pieces, d.grad_pieces);
}

TEST(ConfigKeys, TheTrainSectionIsTyped) {
  const std::string path =
      write_tmp("train",
                "pod:\n  shape: [2, 2]\nchip:\n  variant: 4x4\ntrain:\n  layers: [32, 64, 32]\n"
                "  batch: 8\n  lr: 0.25\n  seed: 0x10\n  fresh_batches: true\n");
  const TrainSettings t = load_pod_config(path).train;
  EXPECT_EQ(t.layers, (std::vector<std::size_t>{32, 64, 32}));
  EXPECT_EQ(t.batch, 8u);
  EXPECT_EQ(t.lr, 0.25);
  EXPECT_EQ(t.seed, 16u);
  EXPECT_TRUE(t.fresh_batches);
  EXPECT_EQ(t.steps, TrainSettings{}.steps);
}

// The loader checks the range the table gives: its ends pass, one past them fails naming it.
TEST(ConfigKeys, TheLoadersCheckTheTablesRanges) {
  for (const char* key : {"link_latency", "host_bytes_per_cycle"}) {
    const ConfigKey& k = config_keys().at(std::string("pod.") + key);
    for (uint64_t v : {k.lo, k.hi, k.hi + 1}) {
      const std::string path =
          write_tmp(key, "pod:\n  shape: [2, 2]\n  " + std::string(key) + ": " + std::to_string(v) +
                             "\nchip:\n  variant: 4x4\n");
      if (v <= k.hi) {
        EXPECT_NO_THROW(load_pod_config(path)) << key << " " << v;
        continue;
      }
      try {
        load_pod_config(path);
        ADD_FAILURE() << key << " " << v << " was taken";
      } catch (const ConfigError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("key 'pod." + std::string(key) + "'"), std::string::npos) << m;
        EXPECT_NE(m.find("from " + std::to_string(k.lo) + " to " + std::to_string(k.hi)),
                  std::string::npos)
            << m;
      }
    }
  }
}

// pod.twist: taken on a twistable torus (the shipped 4x4x8 and 4x8x8 configs), refused with the
// file, the key, the shape and the rule on any other shape or on a mesh (docs/topology.md).
TEST(ConfigKeys, TwistOnlyOnTwistableTori) {
  for (const char* f : {"pod_4x4x8.yaml", "pod_4x8x8.yaml"})
    EXPECT_TRUE(load_pod_config(std::string(TPU_SOURCE_DIR) + "/configs/" + f).params.twist) << f;
  const std::string ok =
      write_tmp("twist_off", "pod:\n  shape: [4, 4, 8]\n  twist: false\nchip:\n  variant: 4x4\n");
  EXPECT_FALSE(load_pod_config(ok).params.twist);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"shape: [4, 4, 4]\n  twist: true", "twist on a 4x4x4 pod: a twist needs a k x k x 2k"},
      {"shape: [8, 4, 4]\n  twist: true", "twist on a 8x4x4 pod"},
      {"shape: [4, 4, 8]\n  wrap: [true, false, true]\n  twist: true", "(dimension y a line)"},
      {"shape: [4, 4, 8]\n  twist: 3", "must be true (a twisted torus) or false"},
  };
  for (const auto& [pod, expect] : bad) {
    const std::string path = write_tmp("twist_bad", "pod:\n  " + pod + "\nchip:\n  variant: 4x4\n");
    try {
      load_pod_config(path);
      ADD_FAILURE() << pod << " was taken";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("key 'pod.twist'"), std::string::npos) << m;
      EXPECT_NE(m.find(expect), std::string::npos) << m;
    }
  }
}

// A faults: section and the same keys as --fault give the same settings.
TEST(ConfigKeys, FaultSectionAndFlagsAgree) {
  const std::string path =
      write_tmp("faults",
                "chip:\n  variant: 4x4\nfaults:\n  seed: 7\n  hbm_single_bit_rate: 0.25\n"
                "  link_drop_rate: 0.5\n  hbm_flip_at: [{addr: 0x40, bits: 2}]\n");
  const FaultConfig y = load_chip_config(path).faults;
  FaultConfig f;
  apply_fault_flags(
      f, {"seed=7", "hbm_single_bit_rate=0.25", "link_drop_rate=0.5", "hbm_flip_at=0x40:2"});
  EXPECT_EQ(y.seed, f.seed);
  EXPECT_EQ(y.hbm_single_bit_rate, f.hbm_single_bit_rate);
  EXPECT_EQ(y.link_drop_rate, f.link_drop_rate);
  ASSERT_EQ(y.hbm_flip_at.size(), 1u);
  ASSERT_EQ(f.hbm_flip_at.size(), 1u);
  EXPECT_EQ(y.hbm_flip_at[0].addr, f.hbm_flip_at[0].addr);
  EXPECT_EQ(y.hbm_flip_at[0].count, f.hbm_flip_at[0].count);
  // Every faults: key of the table is a --fault key (an unknown one lists the table's keys).
  try {
    apply_fault_flag(f, "no_such=1");
    ADD_FAILURE() << "an unknown --fault key was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(keys: " + config_keys().listed("faults") + ")"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConfigKeys, TheHelpListsEveryKey) {
  const std::string h = config_keys().help();
  for (const ConfigKey& k : config_keys().all())
    EXPECT_NE(h.find(k.name), std::string::npos) << k.name;
  EXPECT_NE(h.find("integer 1..64 cycles, default 1"), std::string::npos) << h;
  const std::string train = config_keys().help("train");
  EXPECT_NE(train.find("train.batch"), std::string::npos) << train;
  EXPECT_EQ(train.find("pod.shape"), std::string::npos) << train;
}

TEST(ConfigKeys, RealsAreWrittenShortest) {
  EXPECT_EQ(real_text(0.5), "0.5");
  EXPECT_EQ(real_text(1.0), "1");
  EXPECT_EQ(real_text(0.1), "0.1");
  EXPECT_EQ(std::stod(real_text(1.0 / 3)), 1.0 / 3);
}

}  // namespace
}  // namespace tpu
