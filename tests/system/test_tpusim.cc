// The user's first command: `tpusim matmul`, from random inputs and from .npy files, its report,
// and the errors it gives for inputs that do not fit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "npy.h"
#include "tpu/bf16.h"
#include "tpu/matmul.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "tpusim_" + name; }

// n bf16 bit patterns of N(0, 1) values from a generator seeded with `seed`.
std::vector<uint16_t> normal_bf16(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(nd(rng));
  return v;
}

const std::string kConfig4 = std::string("--config ") + TPU_SOURCE_DIR + "/configs/chip_4x4.yaml";

TEST(Tpusim, RandomMatmulPassesAndReports) {
  const std::string json = tmp("rand.json");
  const CliRun r = tpusim("matmul " + kConfig4 + " --m 21 --k 9 --n 6 --seed 3 --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("golden check: PASS (0 of 126 outputs differ)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("21x9x6"), std::string::npos) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"cycles\"", "\"ideal_cycles\": 126", "\"utilization\"", "\"mfu\"",
                          "\"mismatches\": 0", "\"verdict\": \"pass\"", "\"variant\": \"4x4\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
}

TEST(Tpusim, NpyInputsAndOutputAreBitExact) {
  const std::size_t M = 5, K = 7, N = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> a32(M * K);
  for (auto& x : a32) x = nd(rng);
  std::vector<uint16_t> w16(K * N);
  for (auto& x : w16) x = f32_to_bf16(nd(rng));
  write_npy_f32(tmp("A.npy"), a32, {M, K});  // float32: rounded to bf16 by the tool
  write_npy_u16(tmp("W.npy"), w16, {K, N});  // uint16: bf16 bits as they are
  const CliRun r = tpusim("matmul " + kConfig4 + " --quiet --a " + tmp("A.npy") + " --w " +
                       tmp("W.npy") + " --out " + tmp("C.npy"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<bf16_t> a16(M * K);
  for (std::size_t i = 0; i < a16.size(); ++i) a16[i] = f32_to_bf16(a32[i]);
  const auto want = golden_matmul(a16, w16, M, K, N);
  std::size_t rows = 0, cols = 0;
  const auto got = load_f32_matrix(tmp("C.npy"), &rows, &cols);
  ASSERT_EQ(rows, M);
  ASSERT_EQ(cols, N);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(f32_bits(got[i]), f32_bits(want[i]));
}

TEST(Tpusim, WavesAreWritten) {
  const std::string fst = tmp("m.fst");
  std::remove(fst.c_str());
  const CliRun r = tpusim("matmul " + kConfig4 + " --m 3 --k 4 --n 4 --quiet --waves " + fst);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f(fst, std::ios::binary | std::ios::ate);
  EXPECT_GT(static_cast<long>(f.tellg()), 100L);
}

// Each bad input is a non-zero exit with a message naming the file (or flag) and the rule.
struct BadCase {
  const char* name;
  std::string args;
  std::string expect;
};

TEST(Tpusim, BadInputsAreClearErrors) {
  std::vector<float> m23(6, 1.0f), m33(9, 1.0f), r3(8, 1.0f);
  write_npy_f32(tmp("A23.npy"), m23, {2, 3});
  write_npy_f32(tmp("W33.npy"), m33, {3, 3});
  write_npy_f32(tmp("W23.npy"), m23, {2, 3});
  write_npy_f32(tmp("R3.npy"), r3, {2, 2, 2});
  write_npy_f32(tmp("B25.npy"), std::vector<float>(10, 1.0f), {2, 5});  // 10 values, not a row
  {
    std::ofstream f(tmp("F8.npy"), std::ios::binary);
    const std::string hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }";
    std::string h = hdr + std::string(128 - 10 - hdr.size() - 1, ' ') + "\n";
    f << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(h.size()) << '\x00' << h
      << std::string(8, '\0');
  }
  {
    std::ofstream f(tmp("bad.yaml"));
    f << "chip:\n  variant: 4x4\n  lanes: 3\n";
  }
  {
    std::ofstream f(tmp("big.yaml"));
    f << "chip:\n  variant: 128x128\n";
  }
  const std::vector<BadCase> cases = {
      {"k mismatch", "--a " + tmp("A23.npy") + " --w " + tmp("W23.npy"),
       "W23.npy: W has 2 rows but " + tmp("A23.npy") + " has K = 3 columns"},
      {"dtype", "--a " + tmp("F8.npy") + " --w " + tmp("W33.npy"), "F8.npy"},
      {"rank", "--a " + tmp("R3.npy") + " --w " + tmp("W33.npy"), "rank 2"},
      {"missing file", "--a " + tmp("nope.npy") + " --w " + tmp("W33.npy"), "nope.npy"},
      {"a without w", "--a " + tmp("A23.npy"), "--a requires --w"},
      {"files and a shape", "--a " + tmp("A23.npy") + " --w " + tmp("W33.npy") + " --m 4",
       "--m excludes --a"},
      {"zero m", "--m 0", "--m: 0 is not an integer in [1, 65536]"},
      {"not a number", "--k 12x", "--k: 12x is not an integer"},
      {"octal", "--n 010", "--n: 010 is not an integer"},
      {"negative", "--seed -1", "--seed: -1 is not an integer"},
      {"no value", "--m", "--m needs a value"},
      {"twice", "--m 4 --m 5", "--m is given twice"},
      {"flag twice", "--quiet --quiet", "--quiet is given twice"},
      {"unknown option", "--frobnicate 1", "unknown option '--frobnicate'"},
      {"stray argument", "64", "unexpected argument '64'"},
      {"bad dist", "--dist flat", "--dist: flat not in {narrow,wide}"},
      {"window without trace", "--trace-cycles 0:10", "--trace-cycles requires --trace"},
      {"unknown variant", "--variant 3x3", "unknown chip variant '3x3'"},
      {"unknown key", "--config " + tmp("bad.yaml"), "bad.yaml: key 'chip.lanes': unknown key"},
      {"unbuilt variant", "--config " + tmp("big.yaml"), "TPU_BUILD_MXU128=ON"},
      {"missing config", "--config " + tmp("none.yaml"), "none.yaml: cannot open"},
      {"no output dir", "--out " + tmp("nodir/C.npy"), "nodir' does not exist"},
      {"beyond HBM, refused before inputs", "--m 65536 --k 65536 --n 64",
       "matmul 65536x65536x64: A, W and C need"},
      {"beyond host memory, MXU alone", "--m 65536 --k 65536 --n 64 --mxu-only",
       "bytes of host memory (limit 2 GiB)"},
      {"bias not a row", "--m 3 --k 4 --n 10 --bias " + tmp("B25.npy"),
       "B25.npy: the bias must have shape (10,) or (1, 10) for N = 10 (it has shape (2, 5))"},
  };
  for (const auto& c : cases) {
    const std::string args = c.args.find("--config") == 0 ? c.args : kConfig4 + " " + c.args;
    const CliRun r = tpusim("matmul " + args);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
  }
}

TEST(Tpusim, TrafficDeliversEveryPacketAndReports) {
  const std::string json = tmp("traffic.json");
  const CliRun r = tpusim("traffic --topology 4 --pattern tornado --rate 0.2 --length 4 "
                          "--cycles 500 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("delivery check: PASS"), std::string::npos) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"accepted\"", "\"avg_latency\"", "\"verdict\": \"pass\"",
                          "\"topology\": \"4 ring\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
}

TEST(Tpusim, TrafficBadOptionsAreClearErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--topology 4x4x4x2", "at most 3 dimensions"},
      {"--topology 17x17", "--topology: 17x17"},
      {"--link-latency 5", "rebuild with -DTPU_ICI_MAX_LAT"},
      {"--rate 1.5", "--rate: 1.5 is not a number in (0, 1]"},
      {"--rate 0", "--rate: 0 is not a number in (0, 1]"},
      {"--rate nan", "--rate: nan is not a number"},
      {"--pattern zigzag", "--pattern: zigzag not in {uniform,transpose,neighbor,tornado}"},
      {"--length 3", "--length: 3 not in {1,4,mixed}"},
      {"--topology 4x4x4 --twist", "twist on a 4x4x4 pod: a twist needs a k x k x 2k"},
      {"--topology 4x4x8 --twist --mesh", "twist with dimension x a line (mesh)"},
      {"--local-ports 3", "--local-ports: 3 not in {1,2}"},
  };
  for (const auto& [args, expect] : cases) {
    const CliRun r = tpusim("traffic " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(expect), std::string::npos) << args << ": " << r.out;
  }
}

TEST(Tpusim, UnknownCommandIsAnError) {
  const CliRun r = tpusim("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown command 'frobnicate'"), std::string::npos) << r.out;
}

// --check: what a run checks before its first simulated cycle, and nothing more: no report, no
// dump, no trace written; a job that cannot fit still fails (exit 2) as the run would.
TEST(Tpusim, CheckStopsBeforeTheFirstCycleAndWritesNothing) {
  const std::string json = tmp("check.json"), waves = tmp("check.fst"), trace = tmp("check.tr");
  for (const std::string& f : {json, waves, trace}) std::remove(f.c_str());
  const std::string pod = std::string("--config ") + TPU_SOURCE_DIR + "/configs/pod_2x2.yaml";
  for (const std::string& args :
       {"matmul --m 40 --k 24 --n 16 --json " + json + " --waves " + waves + " --check",
        std::string("matmul --mxu-only --m 8 --k 8 --n 8 --variant 4x4 --check"),
        "allreduce " + pod + " --bytes 65536 --json " + json + " --trace " + trace +
            " --waves-chips 0 --check",
        "pod " + pod + " --check", "train " + pod + " --steps 2 --check",
        std::string("traffic --topology 4x4 --check")}) {
    const CliRun r = tpusim(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("check passed (stopped "), std::string::npos) << args << "\n" << r.out;
    for (const std::string& f : {json, waves, trace}) {
      std::ifstream in(f);
      EXPECT_FALSE(in.good()) << args << " wrote " << f;
    }
  }
  // What a run would refuse, --check refuses the same way.
  const CliRun big = tpusim("allreduce " + pod + " --bytes 1073741824 --check");
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("--bytes 1073741824"), std::string::npos) << big.out;
  const CliRun chip = tpusim("allreduce " + pod + " --waves-chips 4 --check");
  EXPECT_EQ(chip.code, 2) << chip.out;
  EXPECT_NE(chip.out.find("--waves-chips: chip 4"), std::string::npos) << chip.out;
  // A collective whose rounds cannot be laid out in VMEM (the ring all-to-all of 128 chips on
  // 4x4 chips: a landing area per incoming transfer) is refused by --check too, not after it;
  // the direct one (the default) lands every block in place and fits.
  const std::string a2a = std::string("collective --kind all_to_all --config ") + TPU_SOURCE_DIR +
                          "/configs/pod_4x4x8.yaml --bytes 8192 --check";
  const CliRun lay = tpusim(a2a + " --algo ring");
  EXPECT_EQ(lay.code, 2) << lay.out;
  EXPECT_NE(lay.out.find("does not fit a VMEM region"), std::string::npos) << lay.out;
  EXPECT_EQ(lay.out.find("check passed"), std::string::npos) << lay.out;
  const CliRun fits = tpusim(a2a);
  EXPECT_EQ(fits.code, 0) << fits.out;
  EXPECT_NE(fits.out.find("check passed"), std::string::npos) << fits.out;
  // The GPT plans its step's program after the parameters load (the embedding's with the step's
  // tokens): the check loads them (host copies as backdoor writes) and plans it, so a map that
  // cannot fit the chip's VMEM is refused here, not minutes into the run.
  const std::string v4 = TPU_SOURCE_DIR + std::string("/configs/pod_v4_2x2x2.yaml");
  std::ifstream in(v4);
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = yaml.find("vmem_rows: 3072");
  ASSERT_NE(at, std::string::npos) << v4;
  const std::string small = tmp("v4_vmem2048.yaml");
  std::ofstream(small) << yaml.replace(at, 15, "vmem_rows: 2048");
  const std::string gpt = "train --model gpt --batch 8 --steps 1 --engine cpp --check --config ";
  const CliRun refused = tpusim(gpt + small);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("vector map 'cross-entropy'"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("[the compute area: 1024 of the chip's 2048 VMEM rows; the rest "
                             "holds the collectives]"),
            std::string::npos)
      << refused.out;
  const CliRun planned = tpusim(gpt + v4);
  EXPECT_EQ(planned.code, 0) << planned.out;
  EXPECT_NE(planned.out.find("check passed (stopped before running"), std::string::npos)
      << planned.out;
}

// The pod job: every chip's matmul at once (the pod's cycles are the slowest chip's, not the
// sum), the all-reduce reading the results in HBM, one report.
std::uint64_t json_uint(const std::string& rep, const std::string& key) {
  const std::size_t at = rep.find("\"" + key + "\": ");
  if (at == std::string::npos) return ~0ull;
  return std::stoull(rep.substr(at + key.size() + 4));
}

const std::string kPod22 = std::string("--config ") + TPU_SOURCE_DIR + "/configs/pod_2x2.yaml";

TEST(TpusimPod, ChipsRunAtOnceAndTheAllReduceReadsHbm) {
  const std::string json = tmp("pod.json");
  const CliRun r = tpusim("pod " + kPod22 + " --engine cpp --quiet --m 32 --k 32 --n 48 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"pod_cycles\"", "\"sum_of_chip_cycles\"", "\"mfu\"",
                          "\"fraction_of_bound\"", "\"verdict\": \"pass\"", "\"chips\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
  const uint64_t pod = json_uint(rep, "pod_cycles"), sum = json_uint(rep, "sum_of_chip_cycles");
  EXPECT_LT(pod, sum / 3) << rep;  // four chips at once
}

// --trace: a Chrome trace-event file with every chip a process; the report's breakdown.
TEST(TpusimPod, TraceAndBreakdownAreWritten) {
  const std::string json = tmp("trace_rep.json"), trace = tmp("trace.json");
  const CliRun r = tpusim("pod " + kPod22 + " --engine cpp --quiet --m 16 --k 16 --n 16 --json " +
                          json + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json), tr = slurp(trace);
  for (const char* key : {"\"breakdown\"", "\"compute\"", "\"communication\"",
                          "\"memory\"", "\"idle\"", "\"counters\"", "\"mxu_macs\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in the report";
  for (const char* key : {"\"traceEvents\"", "\"chip 3 (1,1,0)\"", "\"ph\":\"X\"",
                          "\"MATMUL\"", "\"ICI_SEND\"", "\"host write\"",
                          "all_reduce (torus) | step 0", "all_reduce (torus) | step 1"})
    EXPECT_NE(tr.find(key), std::string::npos) << key << " not in the trace";
}

TEST(TpusimPod, CollectiveOverAMeshAxisReports) {
  const std::string json = tmp("axis.json");
  const CliRun r = tpusim("collective --kind reduce_scatter " + kPod22 +
                          " --engine cpp --quiet --mesh x=2,y=2 --axis y --bytes 8192 --rounds 2"
                          " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"axis\": \"y\"", "\"group_chips\": 2", "\"rounds\": 2",
                          "\"ideal_cycles\"", "\"bus_bytes_per_cycle\"", "\"links\"",
                          "\"mismatches\": 0", "\"verdict\": \"pass\"", "\"outside_bound\": 0"})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
}

// --algo is honoured by every collective it applies to (a bidirectional ring for a
// reduce-scatter, an all-gather, a broadcast), not silently replaced by a ring.
TEST(TpusimPod, AlgoIsHonouredBeyondAllReduce) {
  for (const char* kind : {"reduce_scatter", "all_gather", "broadcast"}) {
    const std::string json = tmp(std::string("algo_") + kind + ".json");
    const CliRun r = tpusim(std::string("collective --kind ") + kind + " --algo biring --bytes 8192 " +
                            kPod22 + " --engine cpp --quiet --json " + json);
    ASSERT_EQ(r.code, 0) << kind << ": " << r.out;
    const std::string rep = slurp(json);
    for (const char* key : {"\"algorithm\": \"biring\"", "\"verdict\": \"pass\""})
      EXPECT_NE(rep.find(key), std::string::npos) << kind << ": " << key << " not in " << rep;
  }
}

TEST(TpusimPod, BadInputIsAClearErrorWithExitCode2) {
  struct Bad {
    const char* name;
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"axis not in the mesh", "allreduce --mesh x=2,y=2 --axis z", "axis 'z' is not in the mesh"},
      {"mesh not the pod", "allreduce --mesh x=8 --axis x", "the pod has 4"},
      {"axis without mesh", "allreduce --axis x", "--axis requires --mesh"},
      {"not whole elements", "allreduce --bytes 10", "multiple of 4"},
      {"beyond HBM", "allreduce --bytes 16777216", "HBM"},
      {"bad load", "allreduce --load disk", "--load: disk not in {host,backdoor}"},
      {"bad kind", "collective --kind gather", "--kind: gather not in"},
      {"no kind", "collective", "--kind is required"},
      {"bad engine", "allreduce --engine gpu", "--engine: gpu not in {systemc,cpp}"},
      {"bad waves chips", "allreduce --waves-chips 0,,3", "--waves-chips: 0,,3"},
      {"bad threads", "allreduce --threads 0", "--threads: 0 is not an integer in [1, 256]"},
      {"all_to_all blocks", "collective --kind all_to_all --bytes 4100", "all_to_all"},
      {"empty trace window", "allreduce --trace x.json --trace-cycles 5:3",
       "--trace-cycles: 5:3 is not FROM:TO"},
      {"window without trace", "allreduce --trace-cycles 0:10", "--trace-cycles requires --trace"},
      {"algo that does not apply", "collective --kind reduce_scatter --algo torus",
       "'torus' is defined for all_reduce only, not reduce_scatter"},
      {"unknown algo", "collective --kind all_gather --algo bogus",
       "--algo: bogus not in {ring,biring,torus,direct}"},
      {"unknown pod algo", "pod --algo bogus", "--algo: bogus not in"},
      {"twist on a 2x2", "collective --kind all_to_all --twist",
       "--twist: twist on a 2x2x1 pod: a twist needs a k x k x 2k or k x 2k x 2k torus"},
  };
  for (const Bad& c : cases) {
    const std::string json = tmp("bad_pod.json");
    std::remove(json.c_str());
    const CliRun r = tpusim(c.args + " " + kPod22 + " --engine cpp --quiet --json " + json);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
    EXPECT_FALSE(std::ifstream(json).good()) << c.name << ": a report was written";
  }
}


// tpusim shard: a sharded matmul over the mesh of the config, its report, the trace of its
// phases, Y written as .npy and equal to the single-chip golden (K not split).
TEST(TpusimShard, ReportTraceAndGatheredY) {
  const std::string json = tmp("shard.json"), trace = tmp("shard_trace.json"),
                    out = tmp("shard_y.npy"), a = tmp("shard_a.npy"), w = tmp("shard_w.npy");
  const std::size_t M = 24, K = 40, N = 64;
  const std::vector<uint16_t> av = normal_bf16(M * K, 3), wv = normal_bf16(K * N, 4);
  write_npy_u16(a, av, {M, K});
  write_npy_u16(w, wv, {K, N});
  const CliRun r = tpusim("shard " + kPod22 + " --engine cpp --quiet --mesh data=4 "
                          "--x-spec data,- --w-spec data,- --a " + a + " --w " + w +
                          " --out " + out + " --json " + json + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json), tr = slurp(trace);
  for (const char* key : {"\"mfu\"", "\"breakdown\"", "\"collectives\"", "\"all_gather\"",
                          "\"ideal_cycles\"", "\"links\"", "\"y_blocks\"",
                          "\"verdict\": \"pass\"", "\"outside_bound\": 0"})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
  EXPECT_NE(tr.find("all_gather of W over 'data'"), std::string::npos) << "phase labels";
  EXPECT_NE(tr.find("\"matmul\""), std::string::npos);
  std::size_t rows = 0, cols = 0;
  const std::vector<float> y = load_f32_matrix(out, &rows, &cols);
  ASSERT_EQ(rows, M);
  ASSERT_EQ(cols, N);
  const std::vector<float> want = golden_matmul(av, wv, M, K, N);
  for (std::size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(f32_bits(y[i]), f32_bits(want[i])) << "element " << i;
}

// NaN and Inf among the inputs, K split over the mesh (a reduction on the links): the result
// equals the golden bit for bit, so the run passes (exit 0); the non-finite elements are left to
// the golden (f64_check.non_finite), the finite ones are still bounded.
TEST(TpusimShard, NonFiniteInputsAreCheckedByTheGoldenAlone) {
  const std::string json = tmp("shard_nf.json"), a = tmp("shard_nf_a.npy"),
                    w = tmp("shard_nf_w.npy");
  const std::size_t M = 16, K = 64, N = 32;
  std::vector<uint16_t> av = normal_bf16(M * K, 5), wv = normal_bf16(K * N, 6);
  av[3 * K + 5] = 0x7FC0;   // NaN: row 3 of Y is NaN
  wv[7 * N + 9] = 0x7F80;   // +Inf: column 9 of Y is +-Inf (or NaN where it meets row 3)
  write_npy_u16(a, av, {M, K});
  write_npy_u16(w, wv, {K, N});
  const CliRun r = tpusim("shard " + kPod22 + " --engine cpp --quiet --mesh model=4 "
                          "--x-spec -,model --w-spec model,- --a " + a + " --w " + w +
                          " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"verdict\": \"pass\"", "\"outside_bound\": 0",
                          // Y whole on each of the 4 chips: row 3 (32) and column 9 (16),
                          // which share one element, 47 a chip
                          "\"non_finite\": 188"})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
}

TEST(TpusimShard, HelpPrintsTheUsage) {
  // --help anywhere on the line, for every command, next to a bad value or an unknown option
  // too.
  for (const char* cmd : {"shard --help", "pod -h", "allreduce --help", "allreduce --bytes 64 -h",
                          "collective --kind all_gather --help", "collective --help",
                          "train --help", "matmul --help", "matmul --m abc --help",
                          "traffic --bogus -h", "traffic --help", "hang --help", "--help", "-h"}) {
    const CliRun r = tpusim(cmd);
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("usage: tpusim"), std::string::npos) << cmd << ": " << r.out;
    EXPECT_EQ(r.out.find("error:"), std::string::npos) << cmd << ": " << r.out;
  }
  // Each command's help is its own, with its options.
  for (const char* cmd :
       {"matmul", "traffic", "allreduce", "collective", "pod", "shard", "train"}) {
    const CliRun r = tpusim(std::string(cmd) + " --help");
    EXPECT_EQ(r.out.find(std::string("usage: tpusim ") + cmd + " [options]"), 0u) << r.out;
    EXPECT_NE(r.out.find("  --"), std::string::npos) << cmd << ": " << r.out;
  }
  // tpusim --help: the list of commands comes first, then each command's help.
  const CliRun r = tpusim("--help");
  ASSERT_NE(r.out.find("commands:"), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("commands:"), r.out.find("usage: tpusim matmul")) << r.out;
  EXPECT_EQ(r.out.find("usage: tpusim hang"), std::string::npos) << "hang is hidden: " << r.out;
  // No command: the same help, as an error.
  const CliRun none = tpusim("");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("commands:"), std::string::npos) << none.out;
}

TEST(TpusimShard, BadInputIsAClearErrorWithExitCode2) {
  struct Bad {
    const char* name;
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"axis not in the mesh", "--mesh data=4 --x-spec batch,-", "axis 'batch' is not in the mesh"},
      {"axis twice", "--mesh data=2,model=2 --w-spec model,model", "used twice"},
      {"mesh not the pod", "--mesh data=8", "the pod has 4"},
      {"one entry", "--x-spec data", "two entries"},
      {"resharding", "--mesh data=2,model=2 --x-spec data,- --w-spec -,model --y-spec model,data",
       "resharding"},
      {"beyond HBM", "--mesh data=4 --x-spec -,- --w-spec -,- --m 4096 --k 4096 --n 4096",
       "not enough HBM"},
      {"bad size", "--m 0", "--m: 0"},
      {"files and a shape", "--a x.npy --w w.npy --k 4", "--k excludes --a"},
  };
  for (const Bad& c : cases) {
    const std::string json = tmp("bad_shard.json");
    std::remove(json.c_str());
    const CliRun r = tpusim("shard " + c.args + " " + kPod22 + " --engine cpp --quiet --json " + json);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
    EXPECT_FALSE(std::ifstream(json).good()) << c.name << ": a report was written";
  }
}

}  // namespace
}  // namespace tpu

namespace tpu {
namespace {

// The number after "key": in a JSON text (the first occurrence).
double json_number(const std::string& text, const std::string& key) {
  const std::size_t at = text.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() + 3));
}

TEST(TpusimTrain, DefaultSizesHalveTheLossIn20StepsGoldenEveryStep) {
  const std::string json = tmp("train_default.json");
  const CliRun r = tpusim("train " + kPod22 + " --engine cpp --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  EXPECT_NE(rep.find("\"verdict\": \"pass\""), std::string::npos) << rep;
  EXPECT_EQ(json_number(rep, "steps"), 20) << "train.steps";
  const double first = json_number(rep, "loss_first"), last = json_number(rep, "loss_last");
  EXPECT_GT(first, 0);
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
  EXPECT_EQ(rep.find("\"golden\": \"fail\""), std::string::npos);
}

TEST(TpusimTrain, ReportSaveAndTraceOnBothEngines) {
  const std::string dir = tmp("train_save"), trace = tmp("train_trace.json");
  double cycles[2] = {0, 0};
  int e = 0;
  for (const char* engine : {"cpp", "systemc"}) {
    const std::string json = tmp(std::string("train_") + engine + ".json");
    const CliRun r = tpusim("train " + kPod22 + " --engine " + engine + " --quiet --layers 32,64,32"
                            " --batch 32 --steps 2 --fresh-batches --save " + dir + " --json " +
                            json + " --trace " + trace + " --trace-steps 1:2");
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string rep = slurp(json);
    for (const char* key : {"\"steps\"", "\"loss\"", "\"mfu\"", "\"breakdown\"", "\"compute\"",
                            "\"allreduce_hidden_fraction\"", "\"cycles_per_step\"",
                            "\"verdict\": \"pass\"", "\"mismatches\": 0", "\"layers\""})
      EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
    cycles[e++] = json_number(rep, "cycles_per_step");
  }
  // The same program on both engines; each starts at its own machine cycle (HBM refresh phase),
  // so the counts may differ by a few cycles (test_pod_systemc aligns them and asks for equality).
  EXPECT_GT(cycles[0], 0);
  EXPECT_NEAR(cycles[0], cycles[1], 0.01 * cycles[0]);
  const std::string tr = slurp(trace);
  for (const char* label : {"forward 0", "loss", "transpose A1", "dW0 piece 0", "relu mask 1",
                            "all_reduce dW1", "sgd 0"})
    EXPECT_NE(tr.find(label), std::string::npos) << label << " not on the timeline";
  // The saved run: shapes as documented, x and y per step (fresh batches), the loss per step.
  const NpyArray x = read_npy(dir + "/x.npy"), y = read_npy(dir + "/y.npy");
  EXPECT_EQ(x.shape, (std::vector<size_t>{2, 32, 32}));
  EXPECT_EQ(y.shape, (std::vector<size_t>{2, 32, 32}));
  EXPECT_EQ(read_npy(dir + "/init_w0.npy").shape, (std::vector<size_t>{32, 64}));
  EXPECT_EQ(read_npy(dir + "/final_w1.npy").shape, (std::vector<size_t>{64, 32}));
  EXPECT_EQ(read_npy(dir + "/final_b0.npy").shape, (std::vector<size_t>{64}));
  const NpyArray loss = read_npy(dir + "/loss.npy");
  ASSERT_EQ(loss.shape, (std::vector<size_t>{2}));
  EXPECT_NE(read_npy(dir + "/init_w0.npy").as_f32(), read_npy(dir + "/final_w0.npy").as_f32());
  const std::string hyper = slurp(dir + "/train.json");
  for (const char* key : {"\"lr\"", "\"seed\"", "\"global_batch\"", "\"layers\"", "\"steps\""})
    EXPECT_NE(hyper.find(key), std::string::npos) << key << " not in " << hyper;
}

TEST(TpusimTrain, DataByTensorParallelOnAMesh) {
  const std::string json = tmp("train_tp.json");
  const CliRun r = tpusim("train " + kPod22 + " --engine cpp --quiet --mesh data=2,model=2 "
                          "--layers 32,64,32 --batch 16 --steps 2 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"mesh\": \"data=2,model=2\"", "\"verdict\": \"pass\"",
                          "\"replica_mismatches\": 0", "\"global_batch\": 16"})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
}

TEST(TpusimTrain, BadInputIsAClearErrorWithExitCode2) {
  struct Bad {
    const char* name;
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"width rule", "--layers 32,48,32", "multiple of 32"},
      {"one width", "--layers 64", "at least two widths"},
      {"batch split", "--batch 6", "split evenly"},
      {"tensor parallel deep", "--mesh data=2,model=2 --layers 32,64,64,32", "two-layer"},
      {"mesh axis", "--mesh batch=4", "the axes are 'data', 'model' and 'stage'"},
      {"mesh size", "--mesh data=8", "--mesh data=8"},
      {"lr", "--lr -1", "--lr: -1 is not a number in [1.17549e-38, 1e+06]"},
      {"lr below f32", "--lr 1e-46", "--lr: 1e-46 is not a number in [1.17549e-38, 1e+06]"},
      {"lr not a number", "--lr fast", "--lr: fast"},
      {"steps", "--steps 0", "--steps"},
      {"trace steps", "--trace-steps 0:1", "--trace-steps requires --trace"},
      {"trace steps beyond", "--steps 2 --trace t.json --trace-steps 1:3",
       "--trace-steps 1:3: the run has 2 steps"},
      {"layers item", "--layers 64,,32", "--layers: 64,,32 is not a comma-separated list"},
      {"flag value", "--fresh-batches=1", "--fresh-batches"},
      {"too big", "--layers 8192,8192 --batch 4096", "HBM"},
      {"unknown", "--widths 3", "unknown option"},
      {"twice", "--steps 2 --steps 3", "given twice"},
      {"save into a file", "--save " + std::string(TPUSIM), "is not a directory"},
      {"trace dir", "--trace /nonexistent/t.json", "does not exist"},
  };
  for (const Bad& c : cases) {
    const std::string json = tmp("bad_train.json");
    std::remove(json.c_str());
    const CliRun r = tpusim("train " + c.args + " " + kPod22 + " --engine cpp --quiet --json " + json);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
    EXPECT_FALSE(std::ifstream(json).good()) << c.name << ": a report was written";
  }
  // The config's train: section: its keys are checked (file, key, rule), flags override them.
  int files = 0;
  auto config = [&](const std::string& train) {  // a config file of its own per call
    const std::string yaml = tmp("train" + std::to_string(files++) + ".yaml");
    std::ofstream(yaml) << "pod:\n  shape: [2, 2]\nchip:\n  variant: 16x16\ntrain:\n" << train;
    return "--config " + yaml;
  };
  const std::vector<Bad> yaml_cases = {
      {"layers not ints", config("  layers: [64, x]\n"), "key 'train.layers': must be an integer"},
      {"lr", config("  lr: -2\n"), "key 'train.lr'"},
      {"lr rounds to 0 in f32", config("  lr: 1e-46\n"),
       "key 'train.lr': must be a number from 1.18e-38 (the least normal f32"},
      {"unknown key", config("  epochs: 3\n"), "key 'train.epochs': unknown key"},
      {"width rule", config("  layers: [32, 40]\n"), "multiple of 32"},
  };
  for (const Bad& c : yaml_cases) {
    const CliRun r = tpusim("train " + c.args + " --engine cpp --quiet");
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
  }
  const std::string json = tmp("train_yaml.json");
  const CliRun ok = tpusim("train " + config("  layers: [32, 32]\n  batch: 8\n  steps: 3\n") +
                           " --steps 1 --engine cpp --quiet --json " + json);
  ASSERT_EQ(ok.code, 0) << ok.out;
  const std::string rep = slurp(json);
  EXPECT_EQ(json_number(rep, "global_batch"), 8) << rep;  // from the config
  EXPECT_EQ(json_number(rep, "steps"), 1) << rep;         // the flag wins
  const CliRun h = tpusim("train --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("usage: tpusim train"), std::string::npos) << h.out;
}

// Pipeline parallelism (docs/training.md, "Pipeline") on a ring of four 4x4 chips: the stage
// axis from the flag or the config's train: section, the report's pipeline keys, the slots on
// the timeline; bad settings exit 2 at --check naming the value and the rule.
// `tpusim train --model gpt`: the report (the GPT's keys, the op table, the golden), the saved
// run's layout (tokens, init/ and final/ by parameter name, the losses) and the timeline's op
// kinds, on the 2x2 pod with data=2 x model=2.
TEST(TpusimTrainGpt, ReportSaveAndTimeline) {
  const std::string dir = tmp("gpt_save"), trace = tmp("gpt_trace.json"), json = tmp("gpt.json");
  const CliRun r = tpusim("train --model gpt " + kPod22 + " --engine cpp --quiet --mesh "
                          "data=2,model=2 --layers 1 --steps 2 --save " + dir + " --json " + json +
                          " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"model\": \"gpt\"", "\"d_model\": 32", "\"heads\": 2",
                          "\"seq\": 32", "\"global_batch\": 8", "\"mesh\": \"data=2,model=2\"",
                          "\"ops\"", "\"attention softmax\"", "\"optimizer\"",
                          "\"all_reduce gradients\"", "\"verdict\": \"pass\"",
                          "\"mismatches\": 0", "\"mfu\"", "\"breakdown\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
  const NpyArray tokens = read_npy(dir + "/tokens.npy", true);
  EXPECT_EQ(tokens.shape, (std::vector<size_t>{2, 8, 33}));
  EXPECT_EQ(read_npy(dir + "/init/wte.npy").shape, (std::vector<size_t>{256, 32}));
  EXPECT_EQ(read_npy(dir + "/final/h0.attn.wqkv.npy").shape, (std::vector<size_t>{32, 96}));
  EXPECT_EQ(read_npy(dir + "/final/lnf.g.npy").shape, (std::vector<size_t>{32}));
  EXPECT_NE(read_npy(dir + "/init/head.w.npy").as_f32(), read_npy(dir + "/final/head.w.npy").as_f32());
  EXPECT_EQ(read_npy(dir + "/loss.npy").shape, (std::vector<size_t>{2}));
  const std::string hyper = slurp(dir + "/train.json");
  for (const char* key : {"\"adamw\"", "\"d_model\"", "\"mesh\"", "\"steps\""})
    EXPECT_NE(hyper.find(key), std::string::npos) << key << " not in " << hyper;
  const std::string tr = slurp(trace);
  for (const char* label : {"embedding", "layer norm", "matmul", "attention softmax", "gelu",
                            "cross-entropy", "optimizer", "all_reduce over model"})
    EXPECT_NE(tr.find(label), std::string::npos) << label << " not on the timeline";
}

// `tpusim generate` from the run the test above saved (or one it saves itself): the text, the
// report's golden verdict, and the refused inputs.
TEST(TpusimGenerate, GreedyBytesFromASavedRunGoldenEveryToken) {
  const std::string dir = tmp("gpt_gen_save"), json = tmp("gen.json");
  CliRun r = tpusim("train --model gpt " + kPod22 + " --engine cpp --quiet --layers 1 --steps 1 "
                    "--save " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  r = tpusim("generate " + kPod22 + " --engine cpp --load " + dir +
             " --prompt 'The ' --tokens 40 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("The ", 0), 0u) << r.out;  // the prompt, then the bytes
  const std::string rep = slurp(json);
  // 4 + 39 bytes fed in a context of 32: one restart with the last 16, 15 of them fed again.
  for (const char* key : {"\"command\": \"generate\"", "\"verdict\": \"pass\"",
                          "\"mismatches\": 0", "\"cycles_per_token\"", "\"text\"",
                          "\"restarts\": 1", "\"tokens_fed\": 58"})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
  struct Bad {
    const char* name;
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"no run", "--load " + tmp("nowhere") + " --prompt a", "no train.json"},
      {"empty prompt", "--load " + dir + " --prompt ''", "--prompt"},
  };
  for (const Bad& c : cases) {
    const CliRun b = tpusim("generate " + kPod22 + " --quiet " + c.args);
    EXPECT_EQ(b.code, 2) << c.name << ": " << b.out;
    EXPECT_NE(b.out.find(c.expect), std::string::npos) << c.name << ": " << b.out;
  }
}

TEST(TpusimTrainGpt, BadInputIsAClearErrorWithExitCode2) {
  std::ofstream(tmp("gpt_short.txt")) << "ten bytes!";
  struct Bad {
    const char* name;
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"width", "--model gpt --d-model 48", "d_model 48 must be a multiple of 32"},
      {"heads", "--model gpt --heads 3", "heads"},
      {"seq", "--model gpt --seq 48", "seq 48 must be a multiple of 32"},
      {"heads over model", "--model gpt --mesh model=4 --heads 2", "heads"},
      {"batch split", "--model gpt --batch 3", "split evenly"},
      {"layers list", "--model gpt --layers 2,3", "one value"},
      {"no data", "--model gpt --data /nonexistent/text", "cannot read"},
      {"short data", "--model gpt --data " + tmp("gpt_short.txt"), "shorter than one window"},
      {"gpt flag on mlp", "--d-model 64", "a GPT setting"},
      // The pipeline's rules (issue 35), as the MLP's.
      {"gpt stages do not divide", "--model gpt --mesh data=2,stage=2 --layers 3",
       "--mesh stage=2: 2 stages do not divide the 3 layers"},
      {"gpt 1f1b few micro-batches", "--model gpt --mesh stage=4 --layers 4 --microbatches 2 "
       "--schedule 1f1b", "--microbatches 2: 1F1B needs at least as many micro-batches"},
      {"gpt micro-batches split", "--model gpt --mesh data=2,stage=2 --microbatches 3",
       "--microbatches 3: must divide the 4 windows"},
      {"gpt axis", "--model gpt --mesh data=2,pipe=2", "the axes are 'data', 'model' and 'stage'"},
  };
  for (const Bad& c : cases) {
    const CliRun r = tpusim("train " + kPod22 + " --quiet --check " + c.args);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.name << ": " << r.out;
  }
}

// The GPT pipelined over two 16x16 chips (stage=2, 1F1B, 2 micro-batches, a block per stage):
// the report's pipeline group beside the GPT's keys, the slots and the sends on the timeline.
TEST(TpusimTrainGpt, PipelineStagesReportAndTimeline) {
  const std::string cfg = tmp("gpt_pipe_ring2.yaml"), json = tmp("gpt_pipe.json"),
                    trace = tmp("gpt_pipe_t.json");
  std::ofstream(cfg) << "pod:\n  shape: [2]\nchip:\n  variant: 16x16\ntrain:\n  model: gpt\n"
                        "  mesh: stage=2\n  layers: 2\n  batch: 2\n  microbatches: 2\n"
                        "  schedule: 1f1b\n";
  const CliRun r = tpusim("train --config " + cfg + " --steps 1 --engine cpp --quiet --json " +
                          json + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key : {"\"model\": \"gpt\"", "\"pipeline\"", "\"schedule\": \"1f1b\"",
                          "\"microbatches\": 2", "\"stage_count\": 2", "\"bubble_formula\"",
                          "\"peak_activation_bytes\"", "\"slots\"", "\"verdict\": \"pass\"",
                          "\"mismatches\": 0", "\"mesh\": \"stage=2\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
  EXPECT_NEAR(json_number(rep, "bubble_formula"), 1.0 / 3.0, 1e-9);  // (p-1)/(m+p-1)
  const std::string tr = slurp(trace);
  for (const char* label : {"F mb0", "F mb1", "B mb0", "B mb1", "send act mb0", "recv act mb1",
                            "send grad mb1", "recv grad mb0", "optimizer"})
    EXPECT_NE(tr.find(label), std::string::npos) << label << " not on the timeline";
}

TEST(TpusimTrain, PipelineStagesReportAndTimeline) {
  const std::string cfg = tmp("pipe_ring4.yaml"), json = tmp("pipe.json"), trace = tmp("pipe_t.json");
  std::ofstream(cfg) << "pod:\n  shape: [4]\nchip:\n  variant: 4x4\ntrain:\n"
                        "  mesh: stage=4\n  layers: [32, 32, 32, 32, 32]\n  batch: 16\n"
                        "  microbatches: 4\n";
  const CliRun r = tpusim("train --config " + cfg + " --schedule 1f1b --steps 2 --engine cpp "
                          "--quiet --json " + json + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  for (const char* key :
       {"\"pipeline\"", "\"schedule\": \"1f1b\"", "\"microbatches\": 4", "\"bubble_formula\"",
        "\"stages\"", "\"bubble\"", "\"peak_activation_bytes\"", "\"verdict\": \"pass\"",
        "\"mesh\": \"stage=4\"", "\"bubble_of_ideal\"", "\"heaviest_stage_bubble\""})
    EXPECT_NE(rep.find(key), std::string::npos) << key << " not in " << rep;
  EXPECT_NEAR(json_number(rep, "bubble_formula"), 3.0 / 7.0, 1e-9);  // (p-1)/(m+p-1)
  EXPECT_NEAR(json_number(rep, "bubble_formula_of_ideal"), 3.0 / 4.0, 1e-9);  // (p-1)/m
  const std::string tr = slurp(trace);
  for (const char* label : {"F mb0", "F mb3", "B mb0", "B mb3", "send act mb1", "recv grad mb2",
                            "sgd 3"})
    EXPECT_NE(tr.find(label), std::string::npos) << label << " not on the timeline";
}

TEST(TpusimTrain, PipelineBadInputExit2AtCheck) {
  const std::string cfg = tmp("pipe_bad_ring4.yaml");
  std::ofstream(cfg) << "pod:\n  shape: [4]\nchip:\n  variant: 4x4\n";
  struct Bad {
    const char* name;
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"stages do not divide", "--mesh stage=4 --layers 32,32,32",
       "--mesh stage=4: 4 stages do not divide the 2 layers"},
      {"1f1b few micro-batches", "--mesh stage=4 --layers 32,32,32,32,32 --microbatches 2 "
       "--schedule 1f1b", "--microbatches 2: 1F1B needs at least as many micro-batches as stages"},
      {"mesh product", "--mesh data=2,stage=4", "the axes multiply to 8 chips"},
      {"v divides", "--mesh stage=4 --layers 32,32,32,32,32 --microbatches 4 "
       "--schedule interleaved:2", "v=2 does not divide the 1 layers per stage"},
      {"stages text", "--mesh stage=4 --layers 32,32,32,32,32 --stages 0-1,2", "--stages 0-1,2"},
      {"schedule name", "--layers 32,32 --microbatches 2 --schedule zigzag", "--schedule zigzag"},
      {"micro-batches split", "--mesh stage=4 --layers 32,32,32,32,32 --batch 12 "
       "--microbatches 8", "--microbatches 8: must divide the 12 examples"},
  };
  for (const Bad& c : cases) {
    const CliRun r = tpusim("train --config " + cfg + " " + c.args + " --engine cpp --check");
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
  }
  const CliRun ok = tpusim("train --config " + cfg + " --mesh stage=4 --layers 32,32,32,32,32 "
                           "--batch 16 --microbatches 4 --schedule interleaved:1 --check");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

// ------------------------------------------------------------------------------------------
// Exit codes (docs/errors.md): 3 for a hang the watchdog stopped, 2 for a failed output write
// or a bad input file; never a signal.
// ------------------------------------------------------------------------------------------
void put(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// `tpusim hang` is the deliberate deadlock (chip 1 waits on an ICI counter nobody sends to),
// on both engines; watchdog_cycles from the config, or --watchdog.
TEST(TpusimWatchdog, AHangExitsThreeNamingTheChipAndTheCounter) {
  const std::string cfg = tmp("hang_pod.yaml");
  put(cfg, "pod: {shape: [2, 2], watchdog_cycles: 2500}\nchip: {variant: 4x4}\n");
  for (const char* engine : {"cpp", "systemc"}) {
    const CliRun r = tpusim(std::string("hang --config ") + cfg + " --engine " + engine);
    EXPECT_EQ(r.code, 3) << engine << ": " << r.out;
    for (const char* want : {"tpusim: hang: watchdog: no progress for ", "(watchdog_cycles 2500)",
                             "chip 1 (1,0,0): busy", "ici_wait counter=5 value=1",
                             "ICI counter 5 is short of 1 rows", "idle: chips 0, 2, 3"})
      EXPECT_NE(r.out.find(want), std::string::npos) << engine << ": " << want << "\n" << r.out;
  }
  const CliRun f = tpusim("hang --config " + cfg + " --engine cpp --watchdog 1000");
  EXPECT_EQ(f.code, 3) << f.out;
  EXPECT_NE(f.out.find("(watchdog_cycles 1000)"), std::string::npos) << f.out;
  const CliRun bad = tpusim("hang --config " + cfg + " --watchdog soon");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--watchdog: soon is not an integer"), std::string::npos) << bad.out;
  std::remove(cfg.c_str());
}

// A write that fails (ENOSPC on /dev/full) is exit 2 naming the path, after the summary; a path
// that cannot be written is refused before the run.
TEST(TpusimOutputs, FailedWritesExitTwoNamingThePath) {
  const std::string run = "matmul " + kConfig4 + " --m 8 --k 8 --n 8 --quiet ";
  for (const char* flag : {"--json", "--out", "--trace"}) {
    const CliRun r = tpusim(run + flag + " /dev/full");
    EXPECT_EQ(r.code, 2) << flag << ": " << r.out;
    EXPECT_NE(r.out.find("/dev/full"), std::string::npos) << flag << ": " << r.out;
    EXPECT_NE(r.out.find("golden check: PASS"), std::string::npos) << flag << ": " << r.out;
  }
  for (const std::string& path : {std::string("/proc/tpusim_no/r.json"),
                                  std::string("/proc/tpusim_r.json"), ::testing::TempDir()}) {
    const CliRun r = tpusim(run + "--json " + path);
    EXPECT_EQ(r.code, 2) << path << ": " << r.out;
    EXPECT_NE(r.out.find("--json: " + path), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("golden check"), std::string::npos) << "ran first: " << r.out;
  }
  const CliRun t = tpusim("traffic --topology 2x2 --cycles 200 --json /dev/full");
  EXPECT_EQ(t.code, 2) << t.out;
  EXPECT_NE(t.out.find("/dev/full"), std::string::npos) << t.out;
  const CliRun t2 = tpusim("traffic --topology 2x2 --cycles 200 --json /proc/tpusim_t.json");
  EXPECT_EQ(t2.code, 2) << t2.out;
  const CliRun p = tpusim("allreduce --config " + std::string(TPU_SOURCE_DIR) +
                          "/configs/pod_2x2.yaml --engine cpp --bytes 4096 --quiet --json /dev/full");
  EXPECT_EQ(p.code, 2) << p.out;
  EXPECT_NE(p.out.find("/dev/full"), std::string::npos) << p.out;
}

// Mutated input files: exit 2 with the path in the message, never a signal or another code.
TEST(TpusimInputs, MutatedFilesExitTwo) {
  const std::string src = std::string(TPU_SOURCE_DIR) + "/configs/";
  std::ifstream in(src + "chip_4x4.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string chip = ss.str();
  struct Case {
    std::string name, text, cmd;
  };
  std::vector<Case> cases = {
      {"dup.yaml", chip + "chip:\n  variant: 4x4\n", "matmul --m 4 --k 4 --n 4 --config "},
      {"cut.yaml", chip.substr(0, chip.size() / 3) + "\n  : [\n", "matmul --config "},
      {"huge.yaml", "chip: {variant: 4x4, watchdog_cycles: 1e999}\n", "matmul --config "},
      {"deep.yaml", "chip: " + std::string(3000, '[') + std::string(3000, ']') + "\n",
       "matmul --config "},
      {"podbad.yaml", "pod: {shape: [2, 2], link_latency: {a: 1}}\nchip: {variant: 4x4}\n",
       "allreduce --engine cpp --config "},
      {"poddup.yaml", "pod: {shape: [2]}\nchip: {variant: 4x4}\npod: {shape: [4]}\n",
       "allreduce --engine cpp --config "}};
  const std::string pre = "\x93NUMPY\x01\x00";
  auto npy = [&](const std::string& header, std::size_t data) {
    std::string h = header;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::string s = pre;
    s += static_cast<char>(h.size() & 0xFF);
    s += static_cast<char>(h.size() >> 8);
    return s + h + std::string(data, '\0');
  };
  const std::string a_ok = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
  put(tmp("ok_w.npy"), a_ok);
  const std::string wflag = " --w " + tmp("ok_w.npy") + " --quiet --a ";
  cases.push_back({"lie.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999, 99999), }", 16),
                   "matmul" + wflag});
  cases.push_back({"magic.npy", "\x93NUMPX" + a_ok.substr(6), "matmul" + wflag});
  cases.push_back({"dtype.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", 32),
                   "matmul" + wflag});
  cases.push_back({"short.npy", a_ok.substr(0, a_ok.size() - 5), "matmul" + wflag});
  cases.push_back({"ver.npy", "\x93NUMPY\x09\x00" + a_ok.substr(8), "matmul" + wflag});
  for (const Case& c : cases) {
    const std::string path = tmp(c.name);
    put(path, c.text);
    const CliRun r = tpusim(c.cmd + path);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(path), std::string::npos) << c.name << ": " << r.out;
    std::remove(path.c_str());
  }
}

// The rules every command line keeps (docs/errors.md "Command lines"), on the tool itself: each
// broken line is exit 2 with one error line naming the flag, and nothing runs or is written.
class TpusimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = tmp("cli_" + std::string(info->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // tpusim run in the test's own directory.
  CliRun here(const std::string& args) const {
    return run_command("cd " + dir_ + " && " + std::string(TPUSIM) + " " + args);
  }
  // The names in the test's directory.
  std::vector<std::string> files() const {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  std::string dir_;
};

void expect_usage_error(const CliRun& r, const std::string& line, const std::string& args) {
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  EXPECT_EQ(r.out, "tpusim: error: " + line + "\n") << args;
}

TEST_F(TpusimCli, AValueThatIsAnOptionIsAnErrorAndNothingIsWritten) {
  const std::string dash = "; a path that starts with a dash is written ./";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul " + kConfig4 + " --m 4 --k 4 --n 4 --json --quiet",
       "--json needs a value ('--quiet' is an option" + dash + "--quiet)"},
      {"pod " + kPod22 + " --json --check",
       "--json needs a value ('--check' is an option" + dash + "--check)"},
      {"train " + kPod22 + " --save --check",
       "--save needs a value ('--check' is an option" + dash + "--check)"},
      {"shard " + kPod22 + " --out=--quiet --check",
       "--out needs a value ('--quiet' is an option" + dash + "--quiet)"},
      {"matmul --m --k 4", "--m needs a value ('--k' is an option)"},
      {"train --lr --steps 2", "--lr needs a value ('--steps' is an option)"},
      {"traffic --json --nope", "--json needs a value ('--nope' looks like an option" + dash +
                                    "--nope)"},
  };
  for (const auto& [args, line] : cases) expect_usage_error(here(args), line, args);
  EXPECT_EQ(files(), std::vector<std::string>{}) << "a file was written";
  // Written as ./--quiet it is a path.
  const CliRun ok = here("matmul " + kConfig4 + " --m 4 --k 4 --n 4 --quiet --json ./--quiet");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(files(), std::vector<std::string>{"--quiet"});
}

TEST_F(TpusimCli, AnOutputThatIsAnInputOrAnotherOutputIsAnError) {
  std::vector<float> m(16, 1.0f);
  write_npy_f32(dir_ + "/A.npy", m, {4, 4});
  write_npy_f32(dir_ + "/W.npy", m, {4, 4});
  const std::string w_before = slurp(dir_ + "/W.npy");
  std::filesystem::create_directory(dir_ + "/d");
  const std::string over = " (an output must not overwrite an input)";
  const std::string own = " (each output needs a path of its own)";
  const std::string files_in = kConfig4 + " --quiet --a A.npy --w W.npy";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul " + files_in + " --out W.npy", "--out: W.npy is the file of --w W.npy" + over},
      {"matmul " + files_in + " --out ./d/../A.npy",
       "--out: ./d/../A.npy is the file of --a A.npy" + over},
      {"matmul " + files_in + " --out C.npy --json ./C.npy",
       "--json: ./C.npy is the file of --out C.npy" + own},
      {"matmul " + kConfig4 + " --json x --trace d/../x",
       "--trace: d/../x is the file of --json x" + own},
      {"matmul --config cfg.yaml --json ./cfg.yaml",
       "--json: ./cfg.yaml is the file of --config cfg.yaml" + over},
      {"shard " + kPod22 + " --a A.npy --w W.npy --out A.npy",
       "--out: A.npy is the file of --a A.npy" + over},
      {"pod " + kPod22 + " --json t.json --trace t.json",
       "--trace: t.json is the file of --json t.json" + own},
      {"train " + kPod22 + " --save run --json ./run", "--json: ./run is the file of --save run" +
                                                           own},
  };
  std::ofstream(dir_ + "/cfg.yaml") << "chip:\n  variant: 4x4\n";
  for (const auto& [args, line] : cases) expect_usage_error(here(args), line, args);
  EXPECT_EQ(slurp(dir_ + "/W.npy"), w_before) << "W.npy was overwritten";
  EXPECT_EQ(files(), (std::vector<std::string>{"A.npy", "W.npy", "cfg.yaml", "d"}));
}

TEST_F(TpusimCli, AnEmptyValueIsAnErrorNotTheDefault) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"shard " + kPod22 + " --mesh '' --check", "--mesh: the value is empty"},
      {"shard " + kPod22 + " --x-spec '' --check", "--x-spec: the value is empty"},
      {"train " + kPod22 + " --mesh '' --check", "--mesh: the value is empty"},
      {"matmul --m ''", "--m: the value is empty"},
      {"matmul --json ''", "--json: the value is empty"},
      {"allreduce --fault ''", "--fault: the value is empty"},
      {"shard --mesh=", "--mesh needs a value"},
  };
  for (const auto& [args, line] : cases) expect_usage_error(here(args), line, args);
}

TEST_F(TpusimCli, RealsAreDecimalAndFaultKeysAreGivenOnce) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --lr 0x1p-1", "--lr: 0x1p-1 is not a number in [1.17549e-38, 1e+06]"},
      {"train --lr inf", "--lr: inf is not a number in [1.17549e-38, 1e+06]"},
      {"traffic --rate 0x1p-1", "--rate: 0x1p-1 is not a number in (0, 1]"},
      {"traffic --rate +0.5", "--rate: +0.5 is not a number in (0, 1]"},
      {"matmul --fault hbm_single_bit_rate=0x1p-4",
       "--fault hbm_single_bit_rate=0x1p-4: must be a probability per 64-bit word read, from 0 "
       "to 1"},
      {"matmul " + kConfig4 + " --fault seed=1 --fault seed=2",
       "--fault seed=2: key 'seed' is given twice (seed=1 before it; only hbm_flip_at and "
       "link_down take one item per flag)"},
      {"allreduce " + kPod22 + " --fault link_drop_rate=0 --fault seed=1 --fault "
       "link_drop_rate=0.5 --check",
       "--fault link_drop_rate=0.5: key 'link_drop_rate' is given twice (link_drop_rate=0 before "
       "it; only hbm_flip_at and link_down take one item per flag)"},
  };
  for (const auto& [args, line] : cases) expect_usage_error(here(args), line, args);
  // The keys that add an item per flag may repeat.
  const CliRun two = here("matmul " + kConfig4 + " --m 8 --k 8 --n 8 --quiet --check "
                          "--fault hbm_flip_at=0 --fault hbm_flip_at=64:2");
  EXPECT_EQ(two.code, 0) << two.out;
}

TEST_F(TpusimCli, ATraceWindowPastTheRunWarnsAndTheTraceIsWritten) {
  const CliRun r = here("matmul " + kConfig4 + " --m 4 --k 4 --n 4 --quiet --trace t.json "
                        "--trace-cycles 5000000:6000000");
  EXPECT_EQ(r.code, 0) << r.out;
  const std::size_t at = r.out.find("tpusim: warning: --trace-cycles 5000000:6000000 is past the "
                                    "run's end (cycle ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("); the trace has no events\n", at), std::string::npos) << r.out;
  EXPECT_EQ(slurp(dir_ + "/t.json").find("{\"traceEvents\""), 0u);
  // A window within the run: no warning.
  const CliRun in = here("matmul " + kConfig4 + " --m 4 --k 4 --n 4 --quiet --trace t.json "
                         "--trace-cycles 0:100");
  EXPECT_EQ(in.code, 0) << in.out;
  EXPECT_EQ(in.out.find("warning"), std::string::npos) << in.out;
  const CliRun pod = here("allreduce " + kPod22 + " --engine cpp --bytes 4096 --quiet --trace "
                          "p.json --trace-cycles 90000000:90000001");
  EXPECT_EQ(pod.code, 0) << pod.out;
  EXPECT_NE(pod.out.find("tpusim: warning: --trace-cycles 90000000:90000001 is past the run's "
                         "end"),
            std::string::npos)
      << pod.out;
}

// ------------------------------------------------------------------------------------------
// What a new user meets first (issue 32): every error names the flag, file or key and the rule,
// exits 2 before the first simulated cycle and writes nothing.
// ------------------------------------------------------------------------------------------
const std::string kSrc = TPU_SOURCE_DIR;

TEST(TpusimNewUser, ErrorsNameTheFlagFileOrKeyAndWriteNothing) {
  const std::string json = tmp("newuser.json");
  std::vector<float> w33(9, 1.0f);
  write_npy_f32(tmp("NW.npy"), w33, {3, 3});
  const std::string pod = "--config " + kSrc + "/configs/pod_2x2.yaml --engine cpp --quiet ";
  const std::vector<BadCase> cases = {
      {"lr below the least normal f32", "train " + pod + "--lr 1e-46",
       "--lr: 1e-46 is not a number in [1.17549e-38, 1e+06]"},
      {"shard beyond HBM, before the operands", "shard " + pod + "--m 65536 --k 65536 --n 65536",
       "not enough HBM"},
      {"config is a directory (chip)", "matmul --config " + kSrc + "/configs/",
       "configs/: is a directory, not a configuration file"},
      {"config is a directory (pod)", "train --config " + kSrc + "/configs --quiet",
       "configs: is a directory, not a configuration file"},
      {"save where no directory can be made", "train " + pod + "--save /proc/tpusim_run",
       "--save: /proc/tpusim_run: cannot make the directory"},
      {"a value that is a flag", "matmul --a --w " + tmp("NW.npy"), "--a needs a value"},
      {"json took --steps", "train " + pod + "--json --steps 1", "--json needs a value"},
      {"a command's option before it", "--quiet matmul",
       "--quiet is an option of the commands: give it after the command, tpusim matmul --quiet"},
      {"an option no command has first", "--frob matmul", "unknown option '--frob'"},
      {"help of an unknown command", "help frob", "unknown command 'frob'"},
  };
  for (const BadCase& c : cases) {
    std::remove(json.c_str());
    const bool has_json =
        c.args.find("--json") != std::string::npos || c.args.rfind("help ", 0) == 0;
    const CliRun r = tpusim(c.args + (has_json ? "" : " --json " + json));
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
    EXPECT_EQ(r.out.find("stof"), std::string::npos) << c.name << ": " << r.out;
    EXPECT_EQ(r.out.find("bad_alloc"), std::string::npos) << c.name << ": " << r.out;
    EXPECT_FALSE(std::ifstream(json).good()) << c.name << ": a report was written";
  }
  EXPECT_FALSE(std::filesystem::exists("/proc/tpusim_run"));
}

// A shipped config with its defaults checks (the 3D torus's all-reduces fit the counters).
TEST(TpusimNewUser, ShippedConfigsPassTheirCheck) {
  for (const char* cfg : {"pod_2x2", "pod_4x4", "pod_4x4x4", "pod_ring8"}) {
    const CliRun r = tpusim("train --config " + kSrc + "/configs/" + cfg + ".yaml --check");
    EXPECT_EQ(r.code, 0) << cfg << ": " << r.out;
    EXPECT_NE(r.out.find("check passed"), std::string::npos) << cfg << ": " << r.out;
  }
}

// --variant blames the flag (not the config) and gives a build command that works as written,
// from the build's own variant list.
TEST(TpusimNewUser, AnUnbuiltChipVariantSaysHowToBuildIt) {
  const CliRun r = tpusim("matmul --variant 8x8 --m 8 --k 8 --n 8 --check");
  if (r.code == 0) GTEST_SKIP() << "this build has the 8x8 chip";
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("tpusim: error: --variant 8x8: chip variant '8x8' is not built in this "
                       "binary (chips built: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cmake --preset default -DTPU_CHIP_VARIANTS=\""), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("8x8:1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\" && cmake --build --preset default"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("add --mxu-only"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("default.yaml"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("<"), std::string::npos) << "a placeholder: " << r.out;
  const CliRun mxu = tpusim("matmul --mxu-only --variant 8x8 --m 8 --k 8 --n 8 --check");
  EXPECT_EQ(mxu.code, 0) << mxu.out;
}

// One range per meaning (model/include/tpu/limits.h): a seed is 0..2^64-1 everywhere, a watchdog
// of 0 is off everywhere, a flip's bit count is 1..72 in the flag and the key alike.
TEST(TpusimNewUser, SharedLimitsAgree) {
  const std::string top = "18446744073709551615";
  const std::string pod = "--config " + kSrc + "/configs/pod_2x2.yaml --engine cpp ";
  for (const std::string& ok : std::vector<std::string>{
           "matmul " + kConfig4 + " --seed " + top, "traffic --seed " + top,
        "train " + pod + "--seed " + top, "shard " + pod + "--mesh data=4 --seed " + top,
        "pod " + pod + "--seed " + top, "allreduce " + pod + "--seed " + top,
        "traffic --watchdog 0", "allreduce " + pod + "--watchdog 0",
        "matmul " + kConfig4 + " --fault hbm_flip_at=64:72"}) {
    const CliRun r = tpusim(ok + " --check");
    EXPECT_EQ(r.code, 0) << ok << ": " << r.out;
  }
  const std::string flips = tmp("flip0.yaml");
  std::ofstream(flips) << "chip: {variant: 4x4}\nfaults:\n  hbm_flip_at: [{addr: 64, bits: 0}]\n";
  const std::vector<BadCase> bad = {
      {"seed beyond 64 bits", "traffic --seed 18446744073709551616", "--seed"},
      {"link latency the routers cannot delay", "traffic --link-latency 5",
       "--link-latency: 5 is not an integer in [1, 4]"},
      {"flip of no bit (flag)", "matmul " + kConfig4 + " --fault hbm_flip_at=64:0",
       "the bit count must be an integer from 1 to 72"},
      {"flip of no bit (key)", "matmul --config " + flips,
       "key 'faults.hbm_flip_at[0].bits': must be a bit count, or a list of bits (an integer "
       "from 1 to 72)"},
  };
  for (const BadCase& c : bad) {
    const CliRun r = tpusim(c.args + " --check");
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
  }
}

// A mesh axis of size 1 is the same mesh: the same bits as the run without it.
TEST(TpusimNewUser, SizeOneMeshAxesGiveTheSameBits) {
  const std::string pod = "--config " + kSrc + "/configs/pod_2x2.yaml --engine cpp --quiet ";
  auto shard_y = [&](const std::string& mesh, const std::string& specs) {
    const std::string out = tmp("y_" + std::to_string(std::hash<std::string>()(mesh)) + ".npy");
    std::remove(out.c_str());
    const CliRun r = tpusim("shard " + pod + "--mesh " + mesh + specs +
                            " --m 40 --k 24 --n 40 --out " + out);
    EXPECT_EQ(r.code, 0) << mesh << ": " << r.out;
    return slurp(out);
  };
  const std::string y4 = shard_y("data=4", " --x-spec data,- --w-spec -,-");
  EXPECT_FALSE(y4.empty());
  EXPECT_EQ(shard_y("data=4,model=1", " --x-spec data,- --w-spec -,model"), y4);
  const std::string m4 = shard_y("model=4", " --x-spec -,- --w-spec -,model");
  EXPECT_EQ(shard_y("data=1,model=4", ""), m4);  // the default specs: data,- and -,model

  auto train_w = [&](const std::string& mesh) {
    const std::string dir = tmp("save_" + std::to_string(std::hash<std::string>()(mesh)));
    std::filesystem::remove_all(dir);
    const CliRun r = tpusim("train " + pod + (mesh.empty() ? "" : "--mesh " + mesh) +
                            " --layers 32,128,32 --batch 16 --steps 1 --save " + dir);
    EXPECT_EQ(r.code, 0) << mesh << ": " << r.out;
    return slurp(dir + "/final_w0.npy") + slurp(dir + "/final_w1.npy") + slurp(dir + "/loss.npy");
  };
  const std::string dp = train_w("");
  EXPECT_FALSE(dp.empty());
  EXPECT_EQ(train_w("data=4,model=1"), dp);
  EXPECT_EQ(train_w("data=1,model=4"), train_w("model=4"));

  const CliRun ar = tpusim("allreduce " + pod + "--mesh x=4,u=1 --axis x --bytes 4096");
  EXPECT_EQ(ar.code, 0) << ar.out;
  const CliRun unit = tpusim("allreduce " + pod + "--mesh x=4,u=1 --axis u --bytes 4096");
  EXPECT_EQ(unit.code, 2) << unit.out;
  EXPECT_NE(unit.out.find("--axis u: the axis has size 1"), std::string::npos) << unit.out;
}

// tpusim example-inputs writes the README's inputs, and the README's lines then run as written;
// --version and help.
TEST(TpusimNewUser, ExampleInputsVersionAndHelp) {
  const std::string dir = tmp("example");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const CliRun chk = tpusim("example-inputs --dir " + dir + " --check");
  EXPECT_EQ(chk.code, 0) << chk.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/A.npy")) << "--check wrote A.npy";
  const CliRun ex = tpusim("example-inputs --dir " + dir);
  ASSERT_EQ(ex.code, 0) << ex.out;
  const CliRun mm = tpusim("matmul " + kConfig4 + " --quiet --a " + dir + "/A.npy --w " + dir +
                           "/W.npy");
  EXPECT_EQ(mm.code, 0) << mm.out;
  EXPECT_NE(mm.out.find("300x70x80"), std::string::npos) << mm.out;
  const CliRun bias = tpusim("matmul " + kConfig4 + " --quiet --m 256 --k 96 --n 80 --bias " +
                             dir + "/B.npy --relu --out-dtype bf16");
  EXPECT_EQ(bias.code, 0) << bias.out;
  const CliRun nodir = tpusim("example-inputs --dir " + dir + "/none");
  EXPECT_EQ(nodir.code, 2) << nodir.out;
  EXPECT_NE(nodir.out.find("--dir " + dir + "/none"), std::string::npos) << nodir.out;

  const CliRun v = tpusim("--version");
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_EQ(v.out.rfind("tpusim 0.", 0), 0u) << v.out;
  EXPECT_EQ(tpusim("help matmul").out, tpusim("matmul --help").out);
  const CliRun h = tpusim("help");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(h.out, tpusim("--help").out);
  EXPECT_NE(h.out.find("example-inputs"), std::string::npos) << h.out;
}

}  // namespace
}  // namespace tpu
