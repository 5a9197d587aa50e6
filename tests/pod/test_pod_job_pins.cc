// The pod job's programs pinned (no RTL: the fake host port): per case, one hash over every
// command word each chip was sent (the matmuls' program, then the all-reduce's), the number of
// runs and the HBM the job allocated. The hashes below were computed by the hand-written
// programs (pod_job.cc's plan_matmul per chip and PodDriver::run, before the job became op lists
// run through the scheduler, issue 31) and are held here so that the scheduler's programs must
// give the same commands, bit for bit. TPU_PRINT_PINS=1 prints each case's hash.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "fake_host_port.h"
#include "pinned_words.h"
#include "pod_job.h"

namespace tpu {
namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  }
};

struct PodPin {
  const char* name;
  std::vector<int> shape;
  std::size_t m, k, n;
  const char* algorithm;  // "": the job's default
  uint64_t hash;
};

void PrintTo(const PodPin& c, std::ostream* os) { *os << c.name; }

class PodJobPins : public ::testing::TestWithParam<PodPin> {};

TEST_P(PodJobPins, ProgramsAreTheHandWrittenOnes) {
  const PodPin& c = GetParam();
  PodConfig cfg;
  cfg.params.topo = Topology::torus(c.shape);
  cfg.params.variant = "4x4";
  FakeHostPort port(cfg.params.topo, cfg.params.variant);
  PodJobOptions o;
  o.m = c.m;
  o.k = c.k;
  o.n = c.n;
  o.algorithm = c.algorithm;
  PodJob job(cfg, o);
  job.run_on(port);
  Fnv f;
  f.add(static_cast<uint64_t>(port.runs));
  f.add(port.pushed.size());
  for (const std::vector<ChipCmd>& p : port.pushed) {
    f.add(p.size());
    for (const ChipCmd& cmd : p)
      for (uint32_t w : pinned_words(cmd)) f.add(w);
  }
  if (const char* e = std::getenv("TPU_PRINT_PINS"); e != nullptr && std::string(e) == "1")
    std::printf("PIN pod %s 0x%016llxull\n", c.name, static_cast<unsigned long long>(f.h));
  EXPECT_EQ(port.runs, 2) << "the matmuls and the all-reduce, each run alone";
  EXPECT_EQ(f.h, c.hash) << c.name;
}

// Torus and ring pods, square and ragged shapes (padded rows and columns), every algorithm.
INSTANTIATE_TEST_SUITE_P(
    Jobs, PodJobPins,
    ::testing::Values(PodPin{"Torus2x2", {2, 2}, 64, 64, 64, "", 0x96f87dc1e1c80e8cull},
                      PodPin{"Torus2x2Ragged", {2, 2}, 40, 72, 24, "", 0x718b1ed0a1ccec4dull},
                      PodPin{"Torus4x4", {4, 4}, 32, 48, 64, "", 0x4030ec3b49980071ull},
                      PodPin{"Ring4Biring", {4}, 64, 32, 48, "", 0x3a7ffa3e0bab1d74ull},
                      PodPin{"Torus2x2Ring", {2, 2}, 48, 64, 40, "ring", 0x89e554b0e4d59b40ull},
                      PodPin{"Torus2x2x2Big", {2, 2, 2}, 128, 96, 160, "", 0x10a230e6e82615ebull}),
    [](const ::testing::TestParamInfo<PodPin>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace tpu
