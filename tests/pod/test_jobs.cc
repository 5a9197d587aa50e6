// The jobs (sw/jobs) on verilated pods of 4x4 chips, plain C++ stepping: a collective job gives
// the bits and cycles of the same collective run on the driver directly; the engine stops a
// checked job before its first cycle and refuses the SystemC pod in a program without it; a
// lone chip's matmul job matches its golden.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>

#include "check_port.h"
#include "collective_job.h"
#include "engine.h"
#include "matmul_job.h"
#include "pod.h"
#include "tpu/bf16.h"

namespace tpu {
namespace {

PodConfig pod_2x2() {
  PodConfig cfg;
  cfg.params.topo = Topology::torus({2, 2});
  cfg.params.variant = "4x4";
  return cfg;
}

EngineOptions cpp() {
  EngineOptions e;
  e.engine = "cpp";
  return e;
}

CollectiveJobOptions all_reduce(uint64_t bytes) {
  CollectiveJobOptions o;
  o.bytes = bytes;
  o.backdoor = true;
  o.seed = 5;
  return o;
}

TEST(Jobs, CollectiveJobIsTheDriversRun) {
  const PodConfig cfg = pod_2x2();
  CollectiveJob job(cfg, all_reduce(4096));
  job.run(cpp());
  ASSERT_TRUE(job.pass());
  EXPECT_EQ(job.mismatches(), 0u);
  EXPECT_EQ(job.outputs(), 4u * 1024);
  // The same all-reduce on the driver directly: the same inputs, outputs and cycles.
  CppPodHost host(cfg.params);
  PodDriver drv(host);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(4);
  for (auto& chip : in)
    for (int i = 0; i < 1024; ++i) chip.push_back(f32_bits(nd(rng)));
  CollectiveSpec s;
  s.n = 1024;
  s.algorithm = "torus";
  PodCollectiveOptions po;
  po.backdoor = true;
  const PodCollectiveRun r = drv.run(s, in, po);
  EXPECT_EQ(job.spec().algorithm, "torus");
  EXPECT_EQ(job.result().collective_cycles, r.collective_cycles);
  EXPECT_EQ(job.result().out, r.out);
  EXPECT_GT(job.bound().ici_cycles, 0.0);
  const Report rep = job.report(cpp());
  EXPECT_EQ(rep.find("cycles")->value.as_double(), static_cast<double>(r.collective_cycles));
}

TEST(Jobs, ABadByteCountIsRefusedBeforeTheRun) {
  EXPECT_THROW(CollectiveJob(pod_2x2(), all_reduce(4098)), std::invalid_argument);
}

TEST(Jobs, CheckStopsBeforeTheFirstCycle) {
  CollectiveJob job(pod_2x2(), all_reduce(4096));
  EngineOptions e = cpp();
  e.check = true;
  EXPECT_THROW(job.run(e), CheckStop);
}

TEST(Jobs, SystemcEngineNeedsItsLibrary) {
  CollectiveJob job(pod_2x2(), all_reduce(4096));
  EngineOptions e;  // --engine systemc; this test never calls use_systemc_engine()
  try {
    job.run(e);
    FAIL() << "ran without the SystemC pod";
  } catch (const std::logic_error& x) {
    EXPECT_NE(std::string(x.what()).find("built without the SystemC pod"), std::string::npos)
        << x.what();
  }
}

TEST(Jobs, MatmulJobOnALoneChip) {
  MatmulJobOptions o;
  o.variant = "4x4";
  o.m = 12;
  o.k = 20;
  o.n = 9;
  ChipConfig cfg;
  MatmulJob job(cfg, "<test>", o);
  job.run();
  EXPECT_TRUE(job.pass());
  EXPECT_EQ(job.result().c_bits.size(), 12u * 9);
  EXPECT_GT(job.result().prog.cycles, job.result().compute_cycles);
  EXPECT_EQ(job.shape().rows, 4u);
}

}  // namespace
}  // namespace tpu
