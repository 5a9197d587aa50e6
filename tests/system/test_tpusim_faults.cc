// tpusim with HBM faults (docs/hbm.md): the faults: section of a config and --fault KEY=VALUE,
// the report's hbm.ecc_corrected / hbm.ecc_uncorrectable, an uncorrectable word read by a DMA
// (exit 3, chip, address and code named), and bad faults: keys and values (exit 2, file/flag
// and key named).
#include <gtest/gtest.h>

#include "cli_run.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using tpu::CliRun;
using tpu::slurp;
using tpu::tpusim;

std::string tmp(const std::string& name) { return ::testing::TempDir() + "tpusim_faults_" + name; }

const std::string kSrc = TPU_SOURCE_DIR;
const std::string kChip4 = "--config " + kSrc + "/configs/chip_4x4.yaml";

// The checked-in example: single-bit flips at a rate, corrected, reported.
TEST(TpusimFaults, ExampleConfigIsCorrectedAndReported) {
  const std::string json = tmp("example.json");
  const CliRun r = tpusim("matmul --config " + kSrc +
                          "/configs/faults_example.yaml --m 48 --k 40 --n 36 --quiet --json " +
                          json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("golden check: PASS"), std::string::npos) << r.out;
  const std::string rep = slurp(json);
  EXPECT_NE(rep.find("\"ecc_corrected\""), std::string::npos) << rep;
  EXPECT_EQ(rep.find("\"ecc_corrected\": 0,"), std::string::npos) << "nothing corrected: " << rep;
  EXPECT_NE(rep.find("\"ecc_uncorrectable\": 0"), std::string::npos) << rep;
}

// No faults: the counters are in the report, zero, and the cycles are those of before ECC
// (main at cd6fc2a: 4772 cycles for this shape on the 4x4 chip; 4661 since a DMA read may start
// beside the previous one, 4626 since four may, 4612 since stores to other bytes overlap too,
// 4610 since sixteen may be in flight, test_chip_ecc.cc).
TEST(TpusimFaults, NoFaultsZeroCountersSameCycles) {
  const std::string json = tmp("none.json");
  const CliRun r = tpusim("matmul " + kChip4 + " --m 48 --k 40 --n 36 --quiet --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string rep = slurp(json);
  EXPECT_NE(rep.find("\"cycles\": 4610,"), std::string::npos) << rep;
  EXPECT_NE(rep.find("\"ecc_corrected\": 0,"), std::string::npos) << rep;
  EXPECT_NE(rep.find("\"ecc_uncorrectable\": 0"), std::string::npos) << rep;
}

TEST(TpusimFaults, UncorrectableWordReadByADmaIsASimulationError) {
  const CliRun r = tpusim("matmul " + kChip4 + " --m 16 --k 16 --n 16 --quiet --fault seed=3 " +
                          "--fault hbm_flip_at=0:2");
  EXPECT_EQ(r.code, 3) << r.out;
  for (const char* s : {"chip 0", "hbm_uncorrectable", "HBM address 0x"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " not in:\n" << r.out;
}

TEST(TpusimFaults, PodCommandsTakeFaultFlags) {
  const CliRun r = tpusim("allreduce --config " + kSrc +
                          "/configs/pod_2x2.yaml --engine cpp --bytes 16384 --quiet " +
                          "--fault hbm_single_bit_rate=1e-3 --fault seed=5");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(TpusimFaults, BadFaultsAreClearErrorsWithExitCode2) {
  struct Bad {
    const char* name;
    std::string yaml;  // the faults: section, or "" for a flag case
    std::string flag;
    std::string expect;
  };
  const std::vector<Bad> cases = {
      {"unknown key", "faults:\n  link_jitter: 1e-6\n", "",
       "key 'faults.link_jitter': unknown key"},
      {"link rate above 1", "faults:\n  link_bit_error_rate: 1.5\n", "",
       "key 'faults.link_bit_error_rate': must be a probability per bit on a link, from 0 to 1"},
      {"link rate negative", "faults:\n  link_drop_rate: -0.1\n", "",
       "key 'faults.link_drop_rate': must be a probability per word"},
      {"link rate not a number", "faults:\n  link_burst_rate: often\n", "",
       "key 'faults.link_burst_rate': must be a probability per word"},
      {"link_down not a list", "faults:\n  link_down: 3\n", "",
       "key 'faults.link_down': must be a list"},
      {"link_down unknown port", "faults:\n  link_down:\n    - {chip: 0, port: +W, cycle: 5}\n",
       "", "key 'faults.link_down[0].port': must be one of +X -X +Y -Y +Z -Z"},
      {"link_down missing cycle", "faults:\n  link_down:\n    - {chip: 0, port: +X}\n", "",
       "key 'faults.link_down[0].cycle': missing"},
      {"link_down entry key", "faults:\n  link_down:\n    - {chip: 0, port: +X, cycle: 1, "
       "dir: 2}\n", "", "key 'faults.link_down[0].dir': unknown key"},
      {"flag link rate", "", "--fault link_bit_error_rate=2",
       "--fault link_bit_error_rate=2: must be a probability per bit on a link"},
      {"flag link_down form", "", "--fault link_down=1+X",
       "must be CHIP:PORT@CYCLE"},
      {"flag link_down port", "", "--fault link_down=0:+Q@10", "unknown port '+Q'"},
      {"flag link_down chip", "", "--fault link_down=3:+X@10",
       "--fault link_down: chip 3 is not in the machine"},
      {"rate not a number", "faults:\n  hbm_single_bit_rate: often\n", "",
       "key 'faults.hbm_single_bit_rate': must be a probability"},
      {"rate above 1", "faults:\n  hbm_double_bit_rate: 2\n", "",
       "key 'faults.hbm_double_bit_rate': must be a probability from 0 to 1"},
      {"sum above 1", "faults:\n  hbm_single_bit_rate: 0.7\n  hbm_double_bit_rate: 0.7\n", "",
       "at most 1"},
      {"negative seed", "faults:\n  seed: -3\n", "", "key 'faults.seed'"},
      {"not a list", "faults:\n  hbm_flip_at: 12\n", "",
       "key 'faults.hbm_flip_at': must be a list"},
      {"address beyond HBM", "faults:\n  hbm_flip_at: [0x40000000]\n", "",
       "key 'faults.hbm_flip_at[0]': must be a byte address inside the HBM"},
      {"bit out of range", "faults:\n  hbm_flip_at:\n    - {addr: 0, bits: [72]}\n", "",
       "key 'faults.hbm_flip_at[0].bits'"},
      {"zero bits", "faults:\n  hbm_flip_at:\n    - {addr: 0, bits: 0}\n", "",
       "key 'faults.hbm_flip_at[0].bits': must be a bit count, or a list of bits (an integer "
       "from 1 to 72)"},
      {"entry key", "faults:\n  hbm_flip_at:\n    - {address: 0}\n", "",
       "key 'faults.hbm_flip_at[0].address': unknown key"},
      {"chip of a chip", "faults:\n  hbm_flip_at:\n    - {addr: 0, chip: 1}\n", "",
       "key 'faults.hbm_flip_at[0].chip'"},
      {"not a mapping", "faults: 3\n", "", "key 'faults': must be a mapping"},
      {"flag unknown key", "", "--fault hbm_triple_bit_rate=1",
       "unknown key 'hbm_triple_bit_rate'"},
      {"flag no value", "", "--fault seed", "--fault seed: must be KEY=VALUE"},
      {"flag bad rate", "", "--fault hbm_single_bit_rate=x", "--fault hbm_single_bit_rate=x"},
      {"flag bad address", "", "--fault hbm_flip_at=0x7fffffff", "outside the HBM"},
  };
  for (const Bad& c : cases) {
    std::string config = kChip4;
    if (!c.yaml.empty()) {
      const std::string path = tmp("bad.yaml");
      std::ofstream(path) << "chip:\n  variant: 4x4\n" << c.yaml;
      config = "--config " + path;
    }
    const CliRun r = tpusim("matmul " + config + " --m 4 --k 4 --n 4 --quiet " + c.flag);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << c.name << ": expected '" << c.expect << "' in:\n" << r.out;
    if (!c.yaml.empty()) {
      EXPECT_NE(r.out.find("bad.yaml"), std::string::npos) << c.name << ": file not named";
    }
  }
  // A pod's flips name chips of the pod.
  const std::string pod = tmp("bad_pod.yaml");
  std::ofstream(pod) << slurp(kSrc + "/configs/pod_2x2.yaml")
                     << "\nfaults:\n  hbm_flip_at:\n    - {addr: 0, chip: 4}\n";
  const CliRun r = tpusim("allreduce --config " + pod + " --engine cpp --quiet");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("faults.hbm_flip_at[0].chip"), std::string::npos) << r.out;
  // A pod's link_down names a chip of the pod, and a link that chip has.
  std::ofstream(pod) << slurp(kSrc + "/configs/pod_2x2.yaml")
                     << "\nfaults:\n  link_down:\n    - {chip: 4, port: +X, cycle: 9}\n";
  const CliRun r2 = tpusim("allreduce --config " + pod + " --engine cpp --quiet");
  EXPECT_EQ(r2.code, 2) << r2.out;
  EXPECT_NE(r2.out.find("faults.link_down[0].chip"), std::string::npos) << r2.out;
  const CliRun r3 = tpusim("allreduce --config " + kSrc +
                           "/configs/pod_2x2.yaml --engine cpp --quiet --fault link_down=0:+Z@9");
  EXPECT_EQ(r3.code, 2) << r3.out;
  EXPECT_NE(r3.out.find("has no link +Z"), std::string::npos) << r3.out;
}

// Link bit errors on a pod collective: bit-exact, the report's per-link counters show the
// retransmissions, and cycles rise against the fault-free run.
TEST(TpusimFaults, LinkBitErrorsAreRetransmittedAndReported) {
  const std::string clean = tmp("link_clean.json"), noisy = tmp("link_noisy.json");
  const std::string base = "allreduce --config " + kSrc +
                           "/configs/pod_2x2.yaml --engine cpp --bytes 16384 --quiet --json ";
  const CliRun a = tpusim(base + clean);
  ASSERT_EQ(a.code, 0) << a.out;
  const CliRun b = tpusim(base + noisy + " --fault seed=4 --fault link_bit_error_rate=1e-4");
  ASSERT_EQ(b.code, 0) << b.out;  // 1 if the golden check failed
  // The summary pads its columns to its widest value, so match the key and value, not spaces.
  EXPECT_TRUE(std::regex_search(b.out, std::regex("\n  golden\\.verdict +pass\n"))) << b.out;
  const std::string rc = slurp(clean), rn = slurp(noisy);
  for (const char* k : {"\"crc_errors\": 0", "\"replays\": 0", "\"replayed_flits\": 0",
                        "\"link_down\": 0"})
    EXPECT_NE(rc.find(k), std::string::npos) << k << " not in " << rc;
  // The ici group's totals (4 spaces in: the per-link entries sit deeper).
  auto total = [&](const std::string& key) {
    const std::string k = "\n    \"" + key + "\": ";
    const auto at = rn.find(k);
    return at == std::string::npos ? -1L : std::stol(rn.substr(at + k.size()));
  };
  EXPECT_GT(total("crc_errors"), 0L) << rn;
  EXPECT_GT(total("replays"), 0L) << rn;
  EXPECT_GE(total("replayed_flits"), total("replays")) << rn;
  EXPECT_EQ(total("links_down"), 0L) << rn;
}

// No link faults: the link layer adds no cycle. Cycles and ICI bytes of pod runs first recorded
// on main at 7e5b331, before the link layer existed, and equal with it (the same commands, the
// same builds' defaults): 16x16 chips on 16-byte links of latency 2 (a flit every 4 cycles) and
// 4x4 chips on whole-row links of latency 1; both engines. Re-recorded when the 16x16 chip's HBM
// path went to 128 B/cycle (4 channels, two ports: 4115 -> 3352 and 4114 -> 3352 on the 2x2,
// 2537 -> 2199 for the pod job, 1318 -> 1040 on the 4x4; the 4x4x4 of 4x4 chips, which keep
// two channels, unchanged at 1227; the ICI bytes unchanged everywhere). Re-recorded again when
// packets grew to 64 rows and the pod driver's sends kept their order (docs/pod.md): 3352 ->
// 2669 on the 2x2 (ICI bytes 405504 -> 399360: fewer head flits), 2199 -> 2190, 1040 -> 1037,
// 1227 -> 1170. And when the last round's store went out in pieces of a 16th of the round
// rather than of 128 rows: 2669 -> 2577, 2190 -> 2072, 1037 -> 934, 1170 -> 1107 (bytes
// unchanged). And when a head flit (its 8-byte header) took one cycle of a 16-byte link instead
// of a row's four: 2577 -> 2571 (C++) and 2572 (SystemC: each engine starts at its own HBM
// refresh phase), 2072 -> 2065, 934 -> 917; the 4x4x4's whole-row links unchanged. And when
// the driver weighed the 3D torus's parts to balance the send contexts: the 4x4x4 1107 -> 1102
// cycles, 583680 -> 589440 bytes (its parts' chunks no longer all whole packets alike). And
// when a DMA read could start beside the previous one: the pod job 2065 -> 2044 (its matmuls'
// loads), the all-reduces unchanged (one load per round). And when the VPU took its next
// command while one ran and the driver put a reduction's send behind the next reduction: 4x4
// 917 -> 896, 4x4x4 1102 -> 1021; the 2x2 2571 -> 2598 (C++), 2572 -> 2599 (SystemC), the pod
// job 2044 -> 2050 (on two-chip rings a send now and then waits behind a wait it used to pass;
// the 1 MiB bench case still gains, 27 111 -> 27 016). And when the DMA engine ran four reads
// at once and the first round's load went in pieces in the order the sends need them: the 2x2
// 2598 -> 2232 (C++), 2599 -> 2237 (SystemC), the pod job 2050 -> 1975, 4x4 896 -> 808, 4x4x4
// 1021 -> 1012. And when a store could start beside other accesses to other bytes: 2232 ->
// 2226, 2237 -> 2231, 1975 -> 1970, 808 -> 802, 1012 -> 1008. And when reductions and
// forwarding sends took their rows as they came (x_wait, sig, wait_rows; docs/pod.md
// "Chaining"): 2226 -> 2154, 2231 -> 2158, 1970 -> 1946, 802 -> 714, 1008 -> 950. And when
// the DMA engine held 16 commands in flight (was 4) and the first round's load went in pieces
// of a 16th: 2154 -> 2042, 2158 -> 2038, 1946 -> 1902, 714 -> 682, 950 -> 885. And when a send
// forwarding its VPU's rows as they are written (wait_local) no longer held them against later
// readers, and rounds were chained too: 2042 -> 2041, 2038 -> 2036, 1902 -> 1900; the 4x4x4
// 885 -> 907 (a later send of those rows now issues earlier and, +X and +Z sharing a send
// context, queues in front of one that needed it sooner). And when the VPU held four commands
// and fed a younger one's rows while an older one waited for its ICI rows: 4x4 682 -> 670,
// 4x4x4 907 -> 896; the 2x2 and the pod job unchanged (a 2-chip ring's step has one reduction
// per direction, and they already ran as their rows came). And when the router got a second
// local port (three links each) and the engine six send contexts (one per link direction),
// tokens became one-flit CNT_INC sends (count_only) and the 3D torus's parts equal again: 2041
// -> 2032, 2036 -> 2032, 1900 -> 1896, 4x4 670 -> 629, 4x4x4 896 -> 740 (589440 -> 583680
// bytes: equal parts cut at other granules); then, waits placed as late as they may go, the
// 4x4 629 -> 630. And when a forwarding send's head went before its first row (early_head, on
// plans of neighbours only) and the last round's stores went behind the sends that follow them:
// 4x4 630 -> 627, 4x4x4 740 -> 731, the pod job 1896 -> 1898 (the early heads alone; not
// traced further), the 2x2 unchanged. And when the send contexts of the + links went to the
// first local port and those of the - links to the second (each dimension's two links on
// different ports; each link its own ejection VC there), and a forwarding send let later
// readers of its rows go once they had landed: 2032 -> 2031 (C++) and 2030 (SystemC), the pod
// job 1898 -> 1893, 4x4 627 -> 619, 4x4x4 731 -> 715.
struct Pinned {
  std::string args;
  const char* cycles;
  const char* bytes;
};

void expect_pinned(const std::vector<Pinned>& cases) {
  for (const Pinned& c : cases) {
    const std::string json = tmp("pinned.json");
    const CliRun r = tpusim(c.args + " --quiet --json " + json);
    ASSERT_EQ(r.code, 0) << c.args << ":\n" << r.out;
    const std::string rep = slurp(json);
    // the report's own cycles (a top-level key), not a chip's that happens to match
    EXPECT_NE(rep.find(std::string("\n  ") + c.cycles), std::string::npos)
        << c.args << ": want " << c.cycles;
    EXPECT_NE(rep.find(c.bytes), std::string::npos) << c.args << ": want " << c.bytes;
    EXPECT_NE(rep.find("\"replays\": 0"), std::string::npos) << c.args;
  }
}

TEST(TpusimFaults, NoLinkFaultsSameCyclesAsBeforeTheLinkLayer2x2) {
  const std::string k2x2 = kSrc + "/configs/pod_2x2.yaml";
  expect_pinned({
      {"allreduce --config " + k2x2 + " --engine cpp --bytes 65536", "\"cycles\": 2031,",
       "\"total_bytes\": 399360,"},
      {"allreduce --config " + k2x2 + " --bytes 65536", "\"cycles\": 2030,",
       "\"total_bytes\": 399360,"},
      {"pod --config " + k2x2 + " --engine cpp", "\"cycles\": 1893,", "\"total_bytes\": 104448,"},
  });
}

TEST(TpusimFaults, NoLinkFaultsSameCyclesAsBeforeTheLinkLayer4x4And4x4x4) {
  expect_pinned({
      {"allreduce --config " + kSrc + "/configs/pod_4x4.yaml --engine cpp --bytes 16384",
       "\"cycles\": 619,", "\"total_bytes\": 540672,"},
      {"allreduce --config " + kSrc + "/configs/pod_4x4x4.yaml --engine cpp --bytes 4096",
       "\"cycles\": 715,", "\"total_bytes\": 583680,"},
  });
}

// A link taken down: exit 3 (a simulation error), the chip and the link named, no hang.
TEST(TpusimFaults, LinkDownIsASimulationErrorNamingChipAndLink) {
  for (const char* engine : {"cpp", "systemc"}) {
    const CliRun r = tpusim("allreduce --config " + kSrc + "/configs/pod_2x2.yaml --engine " +
                            engine + " --bytes 65536 --quiet --fault link_down=1:+X@0");
    EXPECT_EQ(r.code, 3) << engine << ": " << r.out;
    for (const char* s :
         {"simulation error", "chip 1 (1,0,0): ICI link +X to chip 0 (0,0,0) is down",
          "ici_link_down"})
      EXPECT_NE(r.out.find(s), std::string::npos) << engine << ": " << s << " not in:\n" << r.out;
  }
}

}  // namespace
