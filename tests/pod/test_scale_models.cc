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
#include <fstream>
#include <random>
#include <sstream>
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
  unsigned gap;             // pod.link_cycles_per_flit
  double real_hbm_per_256;  // the real chip's HBM bytes per cycle per 256 MACs
  double real_ici_per_256;  // the real chip's ICI bytes per cycle per link per 256 MACs
  double real_onchip_per_mac;  // the real chip's on-chip memory bytes per MAC
};

// v4: 1.2 TB/s of HBM at 1.05 GHz over 131072 MACs a cycle; v5e: 819 GB/s at 1.5 GHz over
// 65536. Both: 50 GB/s per ICI link each way.
constexpr double kV4Hbm = 1.2e12 / 1.05e9 * 256 / 131072, kV4Ici = 50e9 / 1.05e9 * 256 / 131072;
constexpr double kV5eHbm = 819e9 / 1.5e9 * 256 / 65536, kV5eIci = 50e9 / 1.5e9 * 256 / 65536;
// On-chip memory: v4 16 MiB VMEM + 128 MiB CMEM over 131072 MACs; v5e 128 MiB over 65536.
constexpr double kV4Mem = 144.0 * (1 << 20) / 131072, kV5eMem = 128.0 * (1 << 20) / 65536;
const ScaleFile kFiles[] = {
    {"pod_v4_2x2x2.yaml", {2, 2, 2}, 115, 688, kV4Hbm, kV4Ici, kV4Mem},
    {"pod_v4_4x4x4.yaml", {4, 4, 4}, 115, 688, kV4Hbm, kV4Ici, kV4Mem},
    {"pod_v5e_2x2.yaml", {2, 2}, 120, 492, kV5eHbm, kV5eIci, kV5eMem},
    {"pod_v5e_4x4.yaml", {4, 4}, 120, 492, kV5eHbm, kV5eIci, kV5eMem},
};

std::string text_of(const std::string& file) {
  std::ifstream in(std::string(TPU_SOURCE_DIR) + "/configs/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file's pod on 4x4 chips (loadable in a build of the 4x4 chip alone): the same links
// (cycles per flit) and HBM timing per channel, and the same fraction of each on-chip memory
// (the 4x4 chip has half the 16x16's VMEM and AMEM rows); the file itself names the 16x16 chip.
PodConfig on_small_chips(const std::string& file) {
  std::string t = text_of(file);
  const std::string v = "variant: 16x16";
  const auto at = t.find(v);
  EXPECT_NE(at, std::string::npos) << file;
  if (at != std::string::npos) t.replace(at, v.size(), "variant: 4x4");
  for (const std::string key : {"vmem_rows: ", "amem_rows: "}) {
    const auto k = t.find(key);
    EXPECT_NE(k, std::string::npos) << file << ": " << key;
    if (k == std::string::npos) continue;
    const std::size_t from = k + key.size(), to = t.find('\n', from);
    const unsigned rows = static_cast<unsigned>(std::stoul(t.substr(from, to - from)));
    t.replace(from, to - from, std::to_string(rows / 2));
  }
  return load_pod_config_text(t, file);
}

TEST(ScaleModels, ConfigsLoadWithTheDocumentedRatios) {
  for (const ScaleFile& f : kFiles) {
    SCOPED_TRACE(f.file);
    const PodConfig c = on_small_chips(f.file);  // every knob but the variant: any chip
    EXPECT_EQ(c.params.topo.num_chips(),
              f.shape.size() == 3 ? f.shape[0] * f.shape[1] * f.shape[2] : f.shape[0] * f.shape[1]);
    for (std::size_t d = 0; d < f.shape.size(); ++d) {
      EXPECT_EQ(c.params.topo.extent(static_cast<int>(d)), f.shape[d]);
      EXPECT_TRUE(c.params.topo.wraps(static_cast<int>(d)));
    }
    EXPECT_NE(text_of(f.file).find("variant: 16x16"), std::string::npos);
    EXPECT_EQ(c.params.link_gap, f.gap);
    EXPECT_EQ(c.params.link_width, 0u);
    EXPECT_EQ(c.params.hbm.timing.ccd_s, f.ccd);
    EXPECT_EQ(c.params.hbm.timing.ccd_l, f.ccd);
    // A read after a write waits as long as two bursts: mixing does not double the rate.
    EXPECT_GE(c.params.hbm.timing.cwl + 2 + c.params.hbm.timing.wtr_s + 14, 2 * f.ccd);
    const ChipShape s = chip_shape("16x16");
    const double hbm = s.hbm_channels * 64.0 / f.ccd;  // B/cycle at most
    EXPECT_NEAR(hbm / f.real_hbm_per_256, 1.0, 0.01) << hbm << " B/cycle";
    const double ici = s.cols * 4.0 / f.gap;  // a 64-byte flit per gap cycles, each way
    EXPECT_NEAR(ici / f.real_ici_per_256, 1.0, 0.01) << ici << " B/cycle per link";
    // The file's rows (twice the small chips'), 64-byte rows over 256 MACs.
    const unsigned vrows = 2 * c.chip.vmem_rows, arows = 2 * c.chip.amem_rows;
    EXPECT_EQ(c.params.vmem_rows, c.chip.vmem_rows);
    EXPECT_EQ(c.params.amem_rows, c.chip.amem_rows);
    EXPECT_LT(vrows, s.vmem_rows);
    EXPECT_LT(arows, s.amem_rows);
    const double mem = (vrows + arows) * s.cols * 4.0 / (s.rows * s.cols);
    EXPECT_NEAR(mem / f.real_onchip_per_mac, 1.0, 0.01) << mem << " B per MAC";
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
  bad("pod: {shape: [2], link_cycles_per_flit: 1024}\n" + chip, "pod.link_cycles_per_flit",
      "from 1 to 1023");
  bad("pod: {shape: [2], link_cycles_per_flit: 0}\n" + chip, "pod.link_cycles_per_flit",
      "from 1 to 1023");
  bad("pod: {shape: [2], link_cycles_per_flit: slow}\n" + chip, "pod.link_cycles_per_flit", "");
  bad("pod: {shape: [2], link_width_bytes: 4, link_cycles_per_flit: 4}\n" + chip,
      "pod.link_cycles_per_flit", "not both");
  bad("pod: {shape: [2]}\n" + chip + "hbm: {timing: {tCCD_S: 256, tCCD_L: 256}}\n",
      "hbm.timing.tCCD_S", "must be in [1, 255]");
  bad("pod: {shape: [2]}\n" + chip + "hbm: {timing: {tCCD_S: 120, tCCD_L: 100}}\n",
      "hbm.timing.tCCD_L", "tCCD_L must be >= tCCD_S");
  bad("pod: {shape: [2]}\nchip: {variant: 4x4, vmem_rows: 4097}\n", "chip.vmem_rows",
      "at most the 4x4 chip's 4096 VMEM rows (got 4097)");
  bad("pod: {shape: [2]}\nchip: {variant: 4x4, amem_rows: 3000}\n", "chip.amem_rows",
      "at most the 4x4 chip's 2048 AMEM rows (got 3000)");
  bad("pod: {shape: [2]}\nchip: {variant: 4x4, vmem_rows: 255}\n", "chip.vmem_rows",
      "a number of memory rows (an integer from 256 to 65535)");
  bad("pod: {shape: [2]}\nchip: {variant: 4x4, amem_rows: many}\n", "chip.amem_rows",
      "a number of memory rows");
  std::remove(tmp.c_str());
  // The pod refuses a gap the link's counter cannot hold, and a gap beside a width.
  PodParams p;
  p.link_gap = 1024;
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  p.link_gap = 4;
  p.link_width = 4;
  EXPECT_THROW(CppPodHost{p}, std::invalid_argument);
  // And memory rows its chips do not have.
  PodParams q;
  q.vmem_rows = 4097;
  EXPECT_THROW(CppPodHost{q}, std::invalid_argument);
}

// The exposed rows reach the machine's shape (what every driver plans with) and the chips' range
// checks: a DMA ending at the last exposed row runs, one row further is a range error, though
// the memories have more rows.
TEST(ScaleModels, ChipsExposeTheConfiguredMemoryRows) {
  PodParams p;
  p.topo = Topology::torus({2});
  p.vmem_rows = 1024;
  p.amem_rows = 512;
  CppPodHost pod(p);
  EXPECT_EQ(pod.info().shape.vmem_rows, 1024u);
  EXPECT_EQ(pod.info().shape.amem_rows, 512u);
  EXPECT_EQ(chip_shape("4x4").vmem_rows, 4096u);
  LoneChip chip("4x4", HbmConfig{}, "", FaultConfig{}, 1.0, 1024, 512);
  EXPECT_EQ(chip.shape().vmem_rows, 1024u);
  EXPECT_EQ(chip.shape().amem_rows, 512u);
  struct Case {
    const char* name;
    ChipCmd ok, bad;
    ChipErr err;
  };
  // 4x4 chip: a 16-byte row; 32 bytes per HBM row x 2 rows = 4 VMEM rows.
  const Case cases[] = {
      {"dma into VMEM", cmd_dma(DmaDir::kHbmToVmem, false, 1020, 2, 32, 0, 32),
       cmd_dma(DmaDir::kHbmToVmem, false, 1021, 2, 32, 0, 32), ChipErr::kVmemRange},
      {"dma out of VMEM", cmd_dma(DmaDir::kVmemToHbm, false, 1020, 1, 64, 0, 0),
       cmd_dma(DmaDir::kVmemToHbm, false, 1021, 1, 64, 0, 0), ChipErr::kVmemRange},
      {"dma out of AMEM", cmd_dma(DmaDir::kAmemToHbm, false, 508, 1, 64, 0, 0),
       cmd_dma(DmaDir::kAmemToHbm, false, 509, 1, 64, 0, 0), ChipErr::kAmemRange},
      {"loadw", cmd_loadw(1020), cmd_loadw(1021), ChipErr::kVmemRange},
  };
  for (const Case& c : cases) {
    const ProgramResult good = chip.run({c.ok, cmd_halt()}, false, 100000);
    EXPECT_EQ(good.err, 0u) << c.name << ": " << chip_err_name(good.err);
    const ProgramResult r = chip.run({cmd_nop(), c.bad, cmd_halt()}, false, 100000);
    EXPECT_EQ(r.err, static_cast<unsigned>(c.err))
        << c.name << ": got " << chip_err_name(r.err) << ", want "
        << chip_err_name(static_cast<unsigned>(c.err));
    EXPECT_EQ(r.err_cmd, 1u) << c.name;
  }
}

// An all-reduce on each model's pod of 4x4 chips, bit-exact against the golden.
TEST(ScaleModels, AllReduceIsBitExactOnSmallChips) {
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
  }
}

// One training step on each model's pod of 4x4 chips, every chip's parameters and loss
// bit-exact against the golden.
TEST(ScaleModels, TrainStepIsBitExactOnSmallChips) {
  for (const char* file : {"pod_v4_2x2x2.yaml", "pod_v5e_2x2.yaml"}) {
    SCOPED_TRACE(file);
    const PodConfig c = on_small_chips(file);
    EngineOptions eng;
    eng.engine = "cpp";
    TrainJobOptions to;
    to.widths = {32, 32, 32};
    to.global_batch = 8 * static_cast<std::size_t>(c.params.topo.num_chips());
    to.steps = 1;
    to.grad_pieces = 1;
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

// One DMA of 16 KiB from HBM into VMEM on a chip with each model's HBM timing: its bytes per
// cycle are the channels' 64 bytes per tCCD less refresh, within 3% (the first burst's latency).
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
    // Every channel's burst per tCCD, less the refresh's share (tRFC of every tREFI cycles).
    const HbmTiming& tm = c.params.hbm.timing;
    const double want = cs.hbm_channels * 64.0 / tm.ccd_s * (1.0 - double(tm.rfc) / tm.refi);
    std::printf("%s: DMA %.4f B/cycle, configured %.4f (%llu cycles)\n", file, got, want,
                static_cast<unsigned long long>(r.cycles));
    EXPECT_LE(got, want * 1.01) << got << " B/cycle";
    EXPECT_GE(got, want * 0.97) << got << " B/cycle";
  }
}

// An all-reduce with the HBM left fast (so that the links are the limit): its busiest link moves
// a flit per 492 cycles (v5e's), within 5%.
TEST(ScaleModels, AllReduceLinksMoveAFlitPerConfiguredGap) {
  PodConfig c = on_small_chips("pod_v5e_2x2.yaml");
  c.params.hbm = HbmConfig{};
  const double gap = static_cast<double>(c.params.link_gap);
  ASSERT_EQ(c.params.link_gap, 492u);
  CollectiveJobOptions co;
  co.bytes = 16 * 1024;
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
  std::printf("busiest link: %.6f flits/cycle (1/%.0f = %.6f), %llu cycles\n", per_cycle, gap,
              1.0 / gap, static_cast<unsigned long long>(ar.result().collective_cycles));
  // A head flit (its 8-byte header only) takes ceil(2 x gap / lanes) cycles, not gap: a
  // saturated link counts a little over 1/gap flits a cycle.
  EXPECT_LE(per_cycle, 1.03 / gap) << per_cycle;
  EXPECT_GE(per_cycle, 0.95 / gap) << per_cycle;
}

}  // namespace
}  // namespace tpu
