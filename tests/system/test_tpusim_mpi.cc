// The pod split across MPI ranks (docs/scale.md): `mpirun -np R tpusim ...` gives the reports,
// bits and cycles of the single-process run, stops every rank with exit 3 on a chip error or a
// hang, and refuses what it cannot do with exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_run.h"

namespace tpu {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "tpusim_mpi_" + name; }

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// mpirun with np ranks on this machine (as root, as CI runs, it needs --allow-run-as-root; the
// ranks may outnumber the cores). Debian's Open MPI 4.1 launcher can deadlock in its own
// shutdown (PMIx_server_finalize) after every rank has exited, seen on a loaded 2-core machine,
// or crash there (a segfault, seen after rank 0's MPI_Abort of a bad input): the launcher runs
// under a 300 s timeout, and once more if it hung (124; 137 when it ignored the TERM and was
// killed) or crashed (139), so the launcher's bug neither hangs the suite nor fails it; a run
// that ends so twice fails.
CliRun mpirun(int np, const std::string& args, const std::string& cwd = "") {
  std::string launcher = (cwd.empty() ? "" : "cd '" + cwd + "' && ") + "timeout -k 10 300 " +
                         std::string(MPIRUN) + " -np " + std::to_string(np) +
                         " --oversubscribe --bind-to none";
  if (::geteuid() == 0) launcher += " --allow-run-as-root";
  CliRun r = tpusim_with(launcher, args);
  if (r.code == 124 || r.code == 137 || r.code == 139) {
    std::fprintf(stderr, "mpirun -np %d %s: the launcher hung or crashed (exit %d); once more\n",
                 np, args.c_str(), r.code);
    r = tpusim_with(launcher, args);
  }
  return r;
}

// A report without what depends on the host (wall time, speed, threads, the mpi group): the rest
// (cycles, counters, link bytes, golden verdicts, losses) must be the same text.
std::string strip(std::string rep) {
  for (const char* key : {"\"wall_seconds\": ", "\"sim_cycles_per_second\": ", "\"threads\": ",
                          "\"mpi\": ", "\"run_seconds\": ", "\"save\": "}) {
    for (std::size_t at; (at = rep.find(key)) != std::string::npos;) {
      std::size_t end = at + std::string(key).size();
      if (rep[end] == '{' || rep[end] == '[') {  // skip to the matching bracket
        int depth = 0;
        for (; end < rep.size(); ++end) {
          if (rep[end] == '{' || rep[end] == '[') ++depth;
          if (rep[end] == '}' || rep[end] == ']') {
            if (--depth == 0) break;
          }
        }
        ++end;
      } else {
        end = rep.find_first_of(",\n}", end);
      }
      if (end < rep.size() && rep[end] == ',') ++end;
      rep.erase(at, end - at);
    }
  }
  std::string out;  // no layout: what is left of a removed member is whitespace
  for (char ch : rep)
    if (ch != ' ' && ch != '\n') out += ch;
  return out;
}

// "" if equal, else where the two texts first differ.
std::string first_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from = i > 200 ? i - 200 : 0;
  return "at " + std::to_string(i) + ":\n  one process: ..." + a.substr(from, 300) +
         "\n  MPI ranks:   ..." + b.substr(from, 300);
}

const std::string kSrc = TPU_SOURCE_DIR;

// The integer after "key": at its first occurrence in a report; -1 if there is none.
long long report_int(const std::string& rep, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const std::size_t at = rep.find(k);
  return at == std::string::npos ? -1 : std::atoll(rep.c_str() + at + k.size());
}

// A pod of 4x4 chips: shape, latency.
std::string pod_config(const std::string& name, const std::string& shape, int latency) {
  const std::string path = tmp(name + ".yaml");
  put(path, "pod:\n  shape: " + shape + "\n  link_latency: " + std::to_string(latency) +
                "\nchip:\n  variant: 4x4\n");
  return path;
}

// One process (plain C++, one thread) against R ranks: the same report, bits and cycles.
void expect_same(const std::string& what, const std::string& args, int np,
                 const std::string& mpi_extra = "--threads 1", const std::string& one_extra = "") {
  const std::string one = tmp(what + "_1.json"), many = tmp(what + "_n.json");
  const CliRun a =
      tpusim(args + " " + one_extra + " --engine cpp --threads 1 --quiet --json " + one);
  ASSERT_EQ(a.code, 0) << a.out;
  const CliRun b = mpirun(np, args + " --engine cpp " + mpi_extra + " --quiet --json " + many);
  ASSERT_EQ(b.code, 0) << b.out;
  const std::string ra = slurp(one), rb = slurp(many);
  ASSERT_NE(rb.find("\"mpi\""), std::string::npos) << "not run across ranks: " << rb;
  // Each rank built the models of its own chips alone (these pods split evenly): every chip
  // once over the ranks, rank 0 its share.
  const long long chips = report_int(rb, "chips");
  ASSERT_GT(chips, 0) << rb;
  EXPECT_EQ(report_int(rb, "chip_models_total"), chips);
  EXPECT_EQ(report_int(rb, "chip_models"), chips / np);
  ASSERT_NE(ra.find("\"verdict\": \"pass\""), std::string::npos) << ra;
  EXPECT_EQ(first_difference(strip(ra), strip(rb)), "");
  // Rank 0 alone prints: one summary.
  const std::string head = b.out.substr(0, b.out.find('\n'));
  EXPECT_EQ(b.out.find(head, 1), std::string::npos) << b.out;
}

TEST(TpusimMpi, AllReduce2x2OnTwoRanksIsTheSingleProcessRun) {
  expect_same("ar22", "allreduce --config " + pod_config("p22", "[2, 2]", 2) + " --bytes 4096", 2);
}

TEST(TpusimMpi, AllReduce2x2OnFourRanksLatency3) {
  expect_same(
      "ar22_4",
      "allreduce --config " + pod_config("p22l3", "[2, 2]", 3) + " --bytes 8192 --dtype bf16", 4);
}

TEST(TpusimMpi, AllReduce2x2x2OnFourRanksLatency1) {
  expect_same(
      "ar222",
      "allreduce --config " + pod_config("p222", "[2, 2, 2]", 1) + " --bytes 4096 --load backdoor",
      4);
}

TEST(TpusimMpi, AllGather4x4OnTwoRanksWithTwoThreadsEach) {
  expect_same(
      "ag44",
      "collective --kind all_gather --config " + pod_config("p44", "[4, 4]", 2) + " --bytes 4096",
      2, "--threads 2");
}

TEST(TpusimMpi, PodJobOnTwoRanks) {
  expect_same("pod", "pod --config " + pod_config("pod22", "[2, 2]", 2) + " --m 32 --k 32 --n 24",
              2);
}

// A training step (its golden checked bit for bit inside), with the saved weights compared.
TEST(TpusimMpi, TrainingStepOnTwoRanks) {
  const std::string d1 = tmp("train_1"), dn = tmp("train_n");
  const std::string args = "train --config " + kSrc + "/configs/pod_2x2.yaml --layers 32,64,32 " +
                           "--batch 32 --steps 1";
  expect_same("train", args, 2, "--threads 1 --save " + dn, "--save " + d1);
  for (const char* f : {"/final_w0.npy", "/final_w1.npy", "/final_b0.npy", "/loss.npy"})
    EXPECT_EQ(slurp(d1 + f), slurp(dn + f)) << f;
  EXPECT_FALSE(slurp(dn + "/final_w0.npy").empty());
}

// The 3D-parallel GPT (data=2, model=2, stage=2; 1F1B) on two ranks, one stage each: the
// stages' sends and the model and data all-reduces cross the process boundary, and the report
// (the pipeline's bubbles and slots among it) is the single process's.
TEST(TpusimMpi, PipelinedGptOnTwoRanks) {
  expect_same("gpt3d", "train --config " + kSrc + "/configs/pod_2x2x2.yaml --steps 1", 2);
}

// A chip error on one rank's chip stops every rank: exit 3, the single-process message.
// Link faults on the cut links: the corrupted words, the replays and every link's counters
// cross the window exchange as the sender's process made them (the same report as one process).
TEST(TpusimMpi, AllReduceUnderLinkFaultsOnTwoRanks) {
  expect_same("ar22_faults",
              "allreduce --config " + pod_config("p22f", "[2, 2]", 2) +
                  " --bytes 16384 --fault seed=3 --fault link_bit_error_rate=1e-4",
              2);
}

// A link taken down stops every rank with the single-process message: exit 3.
TEST(TpusimMpi, LinkDownStopsEveryRankWithExitThree) {
  const std::string args = "allreduce --config " + pod_config("pdown", "[2, 2]", 2) +
                           " --bytes 4096 --fault link_down=1:+X@0 --quiet";
  const CliRun a = tpusim(args + " --engine cpp --threads 1");
  ASSERT_EQ(a.code, 3) << a.out;
  const CliRun b = mpirun(2, args + " --engine cpp --threads 1");
  EXPECT_EQ(b.code, 3) << b.out;
  EXPECT_NE(a.out.find("is down"), std::string::npos) << a.out;
  EXPECT_EQ(b.out.substr(0, a.out.size()), a.out);
}

TEST(TpusimMpi, ChipErrorStopsEveryRankWithExitThree) {
  const std::string args = "allreduce --config " + pod_config("perr", "[2, 2]", 2) +
                           " --bytes 4096 --load host --fault hbm_flip_at=0:2@3 --quiet";
  const CliRun a = tpusim(args + " --engine cpp --threads 1");
  ASSERT_EQ(a.code, 3) << a.out;
  const CliRun b = mpirun(2, args + " --engine cpp --threads 1");
  EXPECT_EQ(b.code, 3) << b.out;
  EXPECT_NE(a.out.find("chip 3"), std::string::npos) << a.out;
  EXPECT_EQ(b.out.substr(0, a.out.size()), a.out);  // then mpirun's own note on the exit code
}

// A hang (chip 1 waits on a counter nobody sends to) is found on every rank: exit 3.
TEST(TpusimMpi, HangStopsEveryRankWithExitThree) {
  const std::string cfg = tmp("hang.yaml");
  put(cfg, "pod: {shape: [2, 2], watchdog_cycles: 2500}\nchip: {variant: 4x4}\n");
  const CliRun r = mpirun(2, "hang --config " + cfg + " --engine cpp");
  EXPECT_EQ(r.code, 3) << r.out;
  for (const char* want : {"tpusim: hang: watchdog: no progress for ", "(watchdog_cycles 2500)",
                           "chip 1 (1,0,0): busy", "ici_wait counter=5 value=1",
                           "ICI counter 5 is short of 1 rows", "idle: chips 0, 2, 3"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

// A rank that cannot build its chips while the others can (here the wave file of chip 3, which
// only its owner, rank 1, opens, is a directory) stops every rank with that rank's error, from
// rank 0, exit 2: the others used to wait for it in their first collective.
TEST(TpusimMpi, AFailureOnOneRankAloneStopsEveryRank) {
  const std::string dir = tmp("one_rank_fails");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/waves/pod_chip3.fst");
  const CliRun r = mpirun(2,
                          "allreduce --config " + pod_config("fail1", "[2, 2]", 2) +
                              " --engine cpp --waves-chips 3 --quiet",
                          dir);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("tpusim: error: waves/pod_chip3.fst: cannot open the wave file for writing"),
            std::string::npos)
      << r.out;
}

TEST(TpusimMpi, BadInputsExitTwoWithTheRule) {
  struct Case {
    int np;
    std::string args, want;
  };
  const std::string p22 = pod_config("bad22", "[2, 2]", 2);
  const std::vector<Case> cases = {
      {5, "allreduce --config " + p22 + " --engine cpp", "5 MPI ranks for 4 chips"},
      {2, "allreduce --config " + p22 + " --engine systemc", "--engine cpp only"},
      {2, "allreduce --config " + p22, "--engine cpp only"},
      {2, "allreduce --config " + pod_config("bad_l0", "[2, 2]", 0) + " --engine cpp",
       "link_latency"},
      {2, "matmul --config " + kSrc + "/configs/chip_4x4.yaml", "runs in one process"},
  };
  for (const Case& c : cases) {
    const CliRun r = mpirun(c.np, c.args + " --quiet");
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.want << "\n" << r.out;
  }
}

// An error found before the pod runs ends every rank cleanly: the message once (rank 0), every
// rank through MPI_Finalize with exit 2, none of Open MPI's abort banners; also when rank 0
// alone found it (an output only rank 0 checks), the others waiting for the pod.
TEST(TpusimMpi, ErrorsBeforeThePodEndEveryRankCleanly) {
  const std::string p22 = pod_config("clean22", "[2, 2]", 2);
  const std::string dir = tmp("clean_ro");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"allreduce --config " + p22 + " --engine cpp --bytes 3", "--bytes 3: must be a multiple"},
      {"train --config " + p22 + " --engine cpp --lr 1e-46", "--lr: 1e-46"},
      {"allreduce --config " + kSrc + "/configs --engine cpp", "is a directory"},
      {"allreduce --config " + p22 + " --engine cpp --json /proc/tpusim.json",
       "/proc/tpusim.json: cannot be written"},
  };
  for (const auto& [args, want] : cases) {
    const CliRun r = mpirun(2, args + " --quiet");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    const std::size_t at = r.out.find(want);
    EXPECT_NE(at, std::string::npos) << want << "\n" << r.out;
    EXPECT_EQ(r.out.find(want, at + 1), std::string::npos) << "printed twice:\n" << r.out;
    for (const char* noise : {"MPI_ABORT", "ORTE_ERROR_LOG", "MPI_Abort"})
      EXPECT_EQ(r.out.find(noise), std::string::npos) << noise << "\n" << r.out;
  }
}

}  // namespace
}  // namespace tpu
