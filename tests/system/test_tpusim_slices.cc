// tpusim slices (docs/topology.md "Cubes and slices"): each slice's job runs at once on its
// slice and reports what it reports on a torus of the slice's shape alone; a cube whose link
// fails is replaced by a spare and the job runs again; bad configs and job lines are exit 2
// naming the key or the slice and the rule.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "json.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "slices_" + name; }

const std::string kCubes =
    std::string("--config ") + TPU_SOURCE_DIR + "/configs/pod_ocs_cubes.yaml";

// A pod of four 2x2x2 cubes of 4x4 chips: `slices` is the ocs.slices list, `faults` a faults:
// section ("" for none).
std::string cubes_yaml(const std::string& slices, const std::string& faults = "") {
  return "pod:\n  cube: [2, 2, 2]\n  cubes: 4\nchip:\n  variant: 4x4\n" + faults +
         "ocs:\n  slices:\n" + slices;
}

std::string write(const std::string& name, const std::string& text) {
  const std::string p = tmp(name);
  std::ofstream(p) << text;
  return p;
}

// The report without what a run's wall clock, its config file's and its trace file's names
// change.
Json comparable(Json j) {
  for (const char* k : {"wall_seconds", "run_seconds", "sim_cycles_per_second", "config", "trace"})
    j.erase(k);
  return j;
}

// Both slices' jobs at once; each report equals the same command's on a torus of the slice's
// shape alone (cycles, bits, breakdown, every key but the wall clock's and the config's name),
// and so does the all-reduce's timeline.
TEST(TpusimSlices, EachSliceReportsAsOnItsOwnTorus) {
  const std::string json = tmp("both.json"), trace = tmp("slice_trace.json");
  const CliRun r = tpusim("slices " + kCubes +
                          " --job \"train=train --steps 1\" --job "
                          "\"allreduce=allreduce --bytes 16384 --dtype bf16 --trace " +
                          trace + "\" --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("== slice 'train' (cubes 0, 1; torus2x2x4): train --steps 1"),
            std::string::npos)
      << r.out;
  const Json rep = Json::parse(slurp(json));
  EXPECT_EQ(rep["pod"]["spares"], Json::array({3}));
  EXPECT_EQ(rep["ocs_map"].size(), 9u);  // the train slice's 6 circuits, the one cube's 3
  const std::string t224 = write("t224.yaml", "pod:\n  shape: [2, 2, 4]\nchip:\n  variant: 4x4\n");
  const std::string t222 = write("t222.yaml", "pod:\n  shape: [2, 2, 2]\nchip:\n  variant: 4x4\n");
  const std::string a = tmp("alone_train.json"), b = tmp("alone_ar.json");
  ASSERT_EQ(
      tpusim("train --steps 1 --engine cpp --threads 1 --quiet --config " + t224 + " --json " + a)
          .code,
      0);
  const std::string alone_trace = tmp("alone_trace.json");
  ASSERT_EQ(
      tpusim("allreduce --bytes 16384 --dtype bf16 --engine cpp --threads 1 --quiet --config " +
             t222 + " --json " + b + " --trace " + alone_trace)
          .code,
      0);
  // The slice's timeline (its chips by slice id, its clock) is the lone torus's, byte for byte.
  EXPECT_EQ(slurp(trace), slurp(alone_trace));
  EXPECT_GT(slurp(trace).size(), 1000u);
  ASSERT_EQ(rep["slices"].size(), 2u);
  EXPECT_EQ(comparable(rep["slices"][0]["report"]), comparable(Json::parse(slurp(a))));
  EXPECT_EQ(comparable(rep["slices"][1]["report"]), comparable(Json::parse(slurp(b))));
  EXPECT_EQ(rep["slices"][0]["report"]["golden"]["verdict"], "pass");
  EXPECT_EQ(rep["slices"][1]["attempts"], 1);
}

// A chip of cube 0 loses its +Z link: the training slice stops with the link's error, cube 0 is
// swapped for the spare cube 3 in the switch map, and the job runs again and passes; the other
// slice ran once.
TEST(TpusimSlices, AFailedCubeIsReplacedByASpareAndTheJobRunsAgain) {
  const std::string cfg = write(
      "fail.yaml",
      cubes_yaml(
          "    - {name: a, shape: [2, 2, 4], cubes: [0, 1], job: \"allreduce --bytes 16384\"}\n"
          "    - {name: b, shape: [2, 2, 2], cubes: [2], job: \"allreduce --bytes 4096\"}\n",
          "faults:\n  link_down: [{chip: 1, port: +X, cycle: 0}, {chip: 1, port: -X, "
          "cycle: 0}]\n"));
  const std::string json = tmp("fail.json");
  const CliRun r = tpusim("slices --config " + cfg + " --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("re-formed: cube 0 out, spare cube 3 in"), std::string::npos) << r.out;
  const Json rep = Json::parse(slurp(json));
  const Json& a = rep["slices"][0];
  EXPECT_EQ(a["attempts"], 2);
  EXPECT_EQ(a["cubes"], Json::array({3, 1}));
  ASSERT_EQ(a["remapped"].size(), 1u);
  EXPECT_EQ(a["remapped"][0]["from"], 0);
  EXPECT_EQ(a["remapped"][0]["to"], 3);
  ASSERT_EQ(a["failures"].size(), 1u);
  EXPECT_NE(a["failures"][0].get<std::string>().find("is down"), std::string::npos);
  EXPECT_EQ(a["report"]["golden"]["verdict"], "pass");
  EXPECT_EQ(rep["slices"][1]["attempts"], 1);
  EXPECT_EQ(rep["slices"][1]["report"]["golden"]["verdict"], "pass");
  EXPECT_NE(rep["ocs_map"], rep["ocs_map_after"]);
}

// --check on both configs (the v4 one: 256 chips, a twisted 4x4x8 slice) plans every job and
// stops it before its first cycle, writing nothing.
TEST(TpusimSlices, CheckStopsEveryJobBeforeItsFirstCycle) {
  const std::string json = tmp("check.json");
  std::remove(json.c_str());
  for (const std::string& cfg :
       {kCubes, std::string("--config ") + TPU_SOURCE_DIR + "/configs/pod_ocs_v4.yaml"}) {
    const CliRun r = tpusim("slices " + cfg + " --check --quiet --json " + json);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("check passed"), std::string::npos) << r.out;
    EXPECT_FALSE(std::ifstream(json).good()) << "--check wrote " << json;
  }
}

TEST(TpusimSlices, BadInputIsAClearErrorWithExitCode2) {
  const std::string one = "    - {name: a, shape: [2, 2, 2], cubes: [0], job: \"allreduce\"}\n";
  struct Bad {
    const char* name;
    std::string yaml, args, expect;
  };
  const std::vector<Bad> cases = {
      {"not whole cubes", cubes_yaml("    - {name: a, shape: [2, 2, 3], cubes: [0]}\n"), "",
       "ocs.slices': slice 'a': shape 2x2x3 is not whole 2x2x2 cubes"},
      {"too few cubes listed", cubes_yaml("    - {name: a, shape: [2, 2, 4], cubes: [0]}\n"), "",
       "holds 2 cubes of 2x2x2 but 1 are listed"},
      {"a cube twice", cubes_yaml("    - {name: a, shape: [2, 2, 4], cubes: [1, 1]}\n"), "",
       "cube 1 is listed twice"},
      {"shared cube", cubes_yaml(one + "    - {name: b, shape: [2, 2, 4], cubes: [1, 0]}\n"), "",
       "slices 'a' and 'b' share cube 0"},
      {"cube out of the pod", cubes_yaml("    - {name: a, shape: [2, 2, 2], cubes: [4]}\n"), "",
       "cube 4 is not in the pod (cubes 0..3)"},
      {"twist", cubes_yaml("    - {name: a, shape: [2, 2, 2], cubes: [0], twist: true}\n"), "",
       "a twist needs a k x k x 2k"},
      {"shape and cube",
       "pod:\n  shape: [2, 2]\n  cube: [2, 2, 2]\n  cubes: 2\nchip:\n  variant: 4x4\n", "",
       "key 'pod.shape': give pod.shape (one torus) or pod.cube and pod.cubes"},
      {"no slices", "pod:\n  cube: [2, 2, 2]\n  cubes: 2\nchip:\n  variant: 4x4\n", "",
       "key 'ocs': missing"},
      {"unknown slice key", cubes_yaml("    - {name: a, shape: [2, 2, 2], cubes: [0], size: 2}\n"),
       "", "key 'ocs.slices[0].size': unknown key"},
      {"job takes the pod's flag", cubes_yaml(one), "--job 'a=allreduce --threads 2'",
       "slice 'a' job: --threads belongs to tpusim slices"},
      {"job not a pod job", cubes_yaml(one), "--job 'a=matmul --m 4'",
       "slice 'a' job: 'matmul' cannot run on a slice"},
      {"no such slice", cubes_yaml(one), "--job 'z=allreduce'",
       "--job z=allreduce: give NAME=LINE with NAME a slice of"},
      {"quote", cubes_yaml(one), "--job \"a=allreduce --mesh 'data=8\"", "an unterminated '"},
      {"no job", cubes_yaml("    - {name: a, shape: [2, 2, 2], cubes: [0]}\n"), "",
       "no slice has a job"},
  };
  for (const Bad& c : cases) {
    const std::string cfg = write("bad.yaml", c.yaml);
    const CliRun r = tpusim("slices --config " + cfg + " --quiet " + c.args);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.name << ": " << r.out;
  }
  // A job whose own input is bad: every job is checked first (as --check does), so the run stops
  // before any slice runs, with the job's message.
  const CliRun r = tpusim("slices " + kCubes + " --quiet --job 'allreduce=allreduce --bytes 3'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("slice 'allreduce' job 'allreduce --bytes 3': --bytes 3: must be a "
                       "multiple of 4"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("== slice"), std::string::npos) << r.out;
  // The other commands refuse a pod of cubes, naming tpusim slices; slices a plain pod.
  const CliRun plain = tpusim("allreduce " + kCubes + " --quiet");
  EXPECT_EQ(plain.code, 2) << plain.out;
  EXPECT_NE(plain.out.find("tpusim slices --config"), std::string::npos) << plain.out;
  const CliRun torus =
      tpusim(std::string("slices --config ") + TPU_SOURCE_DIR + "/configs/pod_2x2.yaml --quiet");
  EXPECT_EQ(torus.code, 2) << torus.out;
  EXPECT_NE(torus.out.find("key 'pod.cube': missing"), std::string::npos) << torus.out;
}

}  // namespace
}  // namespace tpu
