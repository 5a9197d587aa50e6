// The TPU v4- and v5e-shaped scale models (configs/pod_v4_*.yaml, configs/pod_v5e_*.yaml;
// docs/scale_models.md): the files load with the documented link pacing and HBM timing, whose
// ratios match the real chips' HBM bytes per MAC; bad values of the new knobs are refused naming
// the file, the key and the rule; on 4x4 chips (the same links and HBM channels, fast to
// simulate) each runs an all-reduce and a training step bit-exact against the golden; a DMA's
// HBM bytes per cycle and an all-reduce's busiest link measure as configured.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "chip_config.h"
#include "collective_job.h"
#include "lone_chip.h"
#include "train_job.h"

namespace tpu {
namespace {

struct ScaleFile {
  std::string file;
  std::vector<int> shape;
  uint32_t ccd;             // tCCD_S = tCCD_L
  double real_hbm_per_256;  // the real chip's HBM bytes per cycle per 256 MACs
};

// v4: 1.2 TB/s at 1.05 GHz over 131072 MACs a cycle; v5e: 819 GB/s at 1.5 GHz over 65536.
const ScaleFile kFiles[] = {
    {"pod_v4_2x2x2.yaml", {2, 2, 2}, 115, 1.2e12 / 1.05e9 * 256 / 131072},
    {"pod_v4_4x4x4.yaml", {4, 4, 4}, 115, 1.2e12 / 1.05e9 * 256 / 131072},
    {"pod_v5e_2x2.yaml", {2, 2}, 120, 819e9 / 1.5e9 * 256 / 65536},
    {"pod_v5e_4x4.yaml", {4, 4}, 120, 819e9 / 1.5e9 * 256 / 65536},
};

PodConfig load(const std::string& file) {
  return load_pod_config(std::string(TPU_SOURCE_DIR) + "/configs/" + file);
}

// The file's pod on 4x4 chips: the same links (cycles per flit) and HBM timing per channel.
PodConfig on_small_chips(const std::string& file) {
  PodConfig c = load(file);
  c.chip.variant = "4x4";
  c.params.variant = "4x4";
  return c;
}

TEST(ScaleModels, ConfigsLoadWithTheDocumentedRatios) {
  for (const ScaleFile& f : kFiles) {
    SCOPED_TRACE(f.file);
    const PodConfig c = load(f.file);
    EXPECT_EQ(c.params.topo.num_chips(),
              f.shape.size() == 3 ? f.shape[0] * f.shape[1] * f.shape[2] : f.shape[0] * f.shape[1]);
    for (std::size_t d = 0; d < f.shape.size(); ++d) {
      EXPECT_EQ(c.params.topo.extent(static_cast<int>(d)), f.shape[d]);
      EXPECT_TRUE(c.params.topo.wraps(static_cast<int>(d)));
    }
    EXPECT_EQ(c.params.variant, "16x16");
    EXPECT_EQ(c.params.link_gap, 15u);
    EXPECT_EQ(c.params.link_width, 0u);
    EXPECT_EQ(c.params.hbm.timing.ccd_s, f.ccd);
    EXPECT_EQ(c.params.hbm.timing.ccd_l, f.ccd);
    // A read after a write waits as long as two bursts: mixing does not double the rate.
    EXPECT_GE(c.params.hbm.timing.cwl + 2 + c.params.hbm.timing.wtr_s + 14, 2 * f.ccd);
    const ChipShape s = chip_shape(c.params.variant);
    const double hbm = s.hbm_channels * 64.0 / f.ccd;  // B/cycle at most
    EXPECT_NEAR(hbm / f.real_hbm_per_256, 1.0, 0.01) << hbm << " B/cycle";
  }
}

TEST(ScaleModels, BadKnobValuesNameTheFileKeyAndRule) {
  const std::string tmp =
      (std::filesystem::temp_directory_path() / "tpu_scale_cfg_test.yaml").string();
  auto bad = [&](const std::string& text, const std::string& key, const std::string& rule) {
    FILE* f = std::fopen(tmp.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    try {
      load_pod_config(tmp);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(tmp), std::string::npos) << w;
      EXPECT_NE(w.find(key), std::string::npos) << w;
      EXPECT_NE(w.find(rule), std::string::npos) << w;
    }
  };
  const std::string chip = "chip: {variant: 4x4}\n";
  bad("pod: {shape: [2], link_cycles_per_flit: 16}\n" + chip, "pod.link_cycles_per_flit",
      "from 1 to 15");
  bad("pod: {shape: [2], link_cycles_per_flit: 0}\n" + chip, "pod.link_cycles_per_flit",
      "from 1 to 15");
  bad("pod: {shape: [2], link_cycles_per_flit: slow}\n" + chip, "pod.link_cycles_per_flit", "");
  bad("pod: {shape: [2], link_width_bytes: 4, link_cycles_per_flit: 4}\n" + chip,
      "pod.link_cycles_per_flit", "not both");
  bad("pod: {shape: [2]}\n" + chip + "hbm: {timing: {tCCD_S: 256, tCCD_L: 256}}\n",
      "hbm.timing.tCCD_S", "must be in [1, 255]");
  bad("pod: {shape: [2]}\n" + chip + "hbm: {timing: {tCCD_S: 120, tCCD_L: 100}}\n",
      "hbm.timing.tCCD_L", "tCCD_L must be >= tCCD_S");
  std::remove(tmp.c_str());
  // The pod refuses a gap the link's counter cannot hold, and a gap beside a width.
  PodParams p;
  p.link_gap = 16;
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  p.link_gap = 4;
  p.link_width = 4;
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
}

// An all-reduce and one training step on each model's pod of 4x4 chips, bit-exact.
TEST(ScaleModels, AllReduceAndTrainStepAreBitExactOnSmallChips) {
  for (const char* file : {"pod_v4_2x2x2.yaml", "pod_v5e_2x2.yaml"}) {
    SCOPED_TRACE(file);
    const PodConfig c = on_small_chips(file);
    EngineOptions eng;
    eng.engine = "cpp";
    CollectiveJobOptions co;
    co.bytes = 4096;
    co.backdoor = true;
    CollectiveJob ar(c, co);
    ar.run(eng);
    EXPECT_TRUE(ar.pass()) << ar.mismatches() << " mismatches";
    EXPECT_GT(ar.outputs(), 0u);
    TrainJobOptions to;
    to.widths = {32, 64, 32};
    to.global_batch = 16 * static_cast<std::size_t>(c.params.topo.num_chips());
    to.steps = 1;
    to.backdoor = true;
    to.pod_sections = false;
    to.table = false;
    TrainJob tj(c, to);
    Report rep("scale model train step");
    tj.run(eng, rep);
    const TrainRunResult& r = tj.result();
    EXPECT_TRUE(r.pass()) << r.check.mismatches << " mismatches";
    EXPECT_GT(r.check.compared, 0u);
    ASSERT_EQ(r.steps.size(), 1u);
    EXPECT_TRUE(r.steps[0].golden_pass);
  }
}

// One DMA of 64 KiB from HBM into VMEM on a chip with the v4 model's HBM timing: its bytes per
// cycle are the channels' 64 bytes per tCCD, within a few percent (the first burst's latency).
TEST(ScaleModels, DmaMovesTheConfiguredHbmBytesPerCycle) {
  for (const char* file : {"pod_v4_2x2x2.yaml", "pod_v5e_2x2.yaml"}) {
    SCOPED_TRACE(file);
    const PodConfig c = on_small_chips(file);
    LoneChip drv("4x4", c.params.hbm);
    const ChipShape& cs = drv.shape();
    const uint64_t piece = 2 * cs.cols, rows = 2048, seg = 64 * piece;  // bf16 rows
    const uint64_t bytes = rows * piece, at = drv.alloc(bytes);
    std::vector<uint8_t> data(bytes);
    std::mt19937_64 rng(5);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    drv.write(at, data.data(), bytes);
    const ProgramResult r = drv.run(
        {cmd_dma(DmaDir::kHbmToVmem, true, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(seg), static_cast<uint32_t>(at), static_cast<uint32_t>(seg)),
         cmd_halt()});
    const double got = static_cast<double>(bytes) / static_cast<double>(r.cycles);
    const double want = cs.hbm_channels * 64.0 / c.params.hbm.timing.ccd_s;
    EXPECT_LE(got, want * 1.001) << got << " B/cycle";
    EXPECT_GE(got, want * 0.95) << got << " B/cycle";
  }
}

// An all-reduce with the HBM left fast (so that the links are the limit): its busiest link moves
// a flit per 15 cycles, no faster, and close to it.
TEST(ScaleModels, AllReduceLinksMoveAFlitPerFifteenCycles) {
  PodConfig c = on_small_chips("pod_v5e_2x2.yaml");
  c.params.hbm = HbmConfig{};
  CollectiveJobOptions co;
  co.bytes = 64 * 1024;
  co.backdoor = true;
  CollectiveJob ar(c, co);
  EngineOptions eng;
  eng.engine = "cpp";
  ar.run(eng);
  ASSERT_TRUE(ar.pass());
  uint64_t busiest = 0;
  for (const LinkStat& l : ar.result().prog.link_flits) busiest = std::max(busiest, l.flits);
  const double per_cycle =
      static_cast<double>(busiest) / static_cast<double>(ar.result().collective_cycles);
  EXPECT_LE(per_cycle, 1.0 / 15.0) << per_cycle;
  EXPECT_GE(per_cycle, 0.80 / 15.0) << per_cycle;
}

}  // namespace
}  // namespace tpu
