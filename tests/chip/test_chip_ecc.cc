// HBM ECC and fault injection on the whole chip (docs/hbm.md): single-bit flips at a rate
// during a matmul leave it bit-exact and are counted; a double-bit flip read by a DMA stops the
// program with hbm_uncorrectable (its command index, the word's address) and the driver's
// error names chip, address and code; a host-port read of one is an error too; no faults: the
// cycles recorded before ECC existed; the backdoor writes check bits that the DMA accepts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "lone_chip.h"
#include "chip_test_util.h"
#include "pod.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

MatmulRun run_matmul(ChipDriver& drv, std::size_t m, std::size_t k, std::size_t n,
                     uint64_t seed, std::vector<uint32_t>* want) {
  std::mt19937_64 rng(seed);
  const auto a = random_bf16(m * k, rng);
  const auto w = random_bf16(k * n, rng);
  *want = golden_chip_matmul(a, w, m, k, n, MatmulOptions{});
  return drv.matmul(a, w, m, k, n);
}

// Cycles of `tpusim matmul --variant 4x4 --m 48 --k 40 --n 36`, recorded on main before the
// ECC existed (commit cd6fc2a: 4772; 16x16: 772). ECC adds no cycle. Re-recorded when the DMA
// engine let a read start beside the previous one: 4772 -> 4661, when it let four reads run at
// once: 4661 -> 4626, when a store could start beside stores to other bytes: 4626 -> 4612, and
// when it held 16 commands in flight rather than 4: 4612 -> 4610 (ECC still adds none).
constexpr uint64_t kNoFaultCycles = 4610;

TEST(ChipEcc, NoFaultsSameCyclesAsBeforeEcc) {
  LoneChip drv("4x4");
  std::vector<uint32_t> want;
  const MatmulRun r = run_matmul(drv, 48, 40, 36, 1, &want);
  EXPECT_EQ(r.c_bits, want);
  EXPECT_EQ(r.prog.cycles, kNoFaultCycles);
  EXPECT_EQ(r.prog.delta[kStatEccCorrected], 0u);
  EXPECT_EQ(r.prog.delta[kStatEccUncorr], 0u);
}

TEST(ChipEcc, SingleBitFlipsDuringAMatmulAreCorrected) {
  FaultConfig f;
  f.seed = 3;
  f.hbm_single_bit_rate = 2e-3;
  LoneChip drv("4x4", HbmConfig{}, "", f);
  std::vector<uint32_t> want;
  const MatmulRun r = run_matmul(drv, 48, 40, 36, 1, &want);
  EXPECT_EQ(r.c_bits, want) << "a corrected word must give the same bits";
  const ChipCounters c = drv.counters();
  EXPECT_GT(c[kStatEccCorrected], 0u);
  EXPECT_EQ(c[kStatEccUncorr], 0u);
  EXPECT_EQ(r.prog.cycles, kNoFaultCycles) << "correction adds no cycle";
}

// Every flip the device injects on a read is counted by the chip: host-port reads at a rate.
TEST(ChipEcc, EveryInjectedFlipIsCounted) {
  PodParams p;
  p.topo = Topology::mesh({1});
  p.variant = "4x4";
  p.faults.seed = 4;
  p.faults.hbm_single_bit_rate = 0.01;
  CppPodHost h(p);
  std::vector<uint8_t> in(65536), out(65536);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 13 + 1);
  h.write(0, 0, in.data(), in.size());
  h.read(0, 0, out.data(), out.size());
  EXPECT_EQ(out, in);
  const uint32_t injected = h.core().chip(0).hbm_injected_single();
  EXPECT_GT(injected, 20u);
  EXPECT_EQ(h.counters(0)[kStatEccCorrected], injected);
}

// The same seed gives the same flips; another seed others.
TEST(ChipEcc, FaultsAreReproducible) {
  auto corrected = [](uint64_t seed) {
    FaultConfig f;
    f.seed = seed;
    f.hbm_single_bit_rate = 5e-3;
    LoneChip drv("4x4", HbmConfig{}, "", f);
    std::vector<uint32_t> want;
    run_matmul(drv, 32, 32, 32, 2, &want);
    return drv.counters()[kStatEccCorrected];
  };
  const uint64_t a = corrected(9);
  EXPECT_GT(a, 0u);
  EXPECT_EQ(corrected(9), a);
}

TEST(ChipEcc, DoubleBitFlipReadByADmaIsAChipError) {
  LoneChip probe("4x4");
  const uint64_t src = probe.alloc(4096);
  const uint64_t bad = src + 2 * 64 + 3 * 8;  // word 3 of the third burst
  FaultConfig f;
  f.hbm_flip_at.push_back(HbmFlip{0, bad, (uint64_t{1} << 5) | (uint64_t{1} << 40), 0, 0});
  LoneChip drv("4x4", HbmConfig{}, "", f);
  ASSERT_EQ(drv.alloc(4096), src);
  std::vector<uint8_t> in(4096, 0x3C);
  drv.write(src, in.data(), in.size());  // writes re-encode; the flip waits for the next read
  const std::vector<ChipCmd> prog = {
      cmd_nop(), cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 4096, static_cast<uint32_t>(src), 0),
      cmd_nop(), cmd_halt()};
  const ProgramResult r = drv.run(prog, false);
  EXPECT_EQ(r.err, static_cast<unsigned>(ChipErr::kHbmUncorr));
  EXPECT_EQ(r.err_cmd, 1u) << "the DMA's command index";
  EXPECT_EQ(r.err_addr, bad);
  EXPECT_EQ(r.delta[kStatEccUncorr], 1u);
  // Thrown by the driver: chip, code and address named.
  FaultConfig f2 = f;
  LoneChip drv2("4x4", HbmConfig{}, "", f2);
  drv2.write(src, in.data(), in.size());
  try {
    drv2.run(prog);
    FAIL() << "no error";
  } catch (const ChipError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), static_cast<unsigned>(ChipErr::kHbmUncorr));
    EXPECT_EQ(e.cmd(), 1u);
    EXPECT_NE(m.find("chip 0"), std::string::npos) << m;
    EXPECT_NE(m.find("hbm_uncorrectable"), std::string::npos) << m;
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(bad));
    EXPECT_NE(m.find(hex), std::string::npos) << m;
  }
}

// Reads in flight at once (tpu_dma runs up to four: each starts once the one before has sent
// its last request): an uncorrectable word in a younger one names that DMA, not an older one
// still draining. A long read first, then three one-KiB reads; the flip goes into the second,
// third or fourth read, into each of its first four bursts in turn (whether the bad burst returns
// before the older reads' last ones depends on the HBM's channels); each must name its own DMA.
TEST(ChipEcc, DoubleBitFlipInAYoungerOfOverlappingReadsNamesIt) {
  LoneChip probe("4x4");
  const uint64_t a = probe.alloc(8192);
  const uint64_t b = probe.alloc(3 * 1024);
  std::vector<uint8_t> in(8192, 0x5A);
  for (uint32_t which = 1; which < 4; ++which) {
    for (uint64_t burst = 0; burst < 4; ++burst) {
      const uint64_t bad = b + (which - 1) * 1024 + burst * 64 + 5 * 8;  // word 5 of the burst
      FaultConfig f;
      f.hbm_flip_at.push_back(HbmFlip{0, bad, (uint64_t{1} << 2) | (uint64_t{1} << 50), 0, 0});
      LoneChip drv("4x4", HbmConfig{}, "", f);
      ASSERT_EQ(drv.alloc(8192), a);
      ASSERT_EQ(drv.alloc(3 * 1024), b);
      drv.write(a, in.data(), 8192);
      drv.write(b, in.data(), 3 * 1024);
      std::vector<ChipCmd> prog = {
          cmd_nop(), cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 8192, static_cast<uint32_t>(a), 0)};
      for (uint32_t k = 0; k < 3; ++k)
        prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, 600 + 64 * k, 1, 1024,
                               static_cast<uint32_t>(b + 1024 * k), 0));
      prog.push_back(cmd_halt());
      const ProgramResult r = drv.run(prog, false);
      EXPECT_EQ(r.err, static_cast<unsigned>(ChipErr::kHbmUncorr))
          << "read " << which << " burst " << burst;
      EXPECT_EQ(r.err_cmd, 1 + which) << "read " << which << " burst " << burst
                                      << ": that DMA's command index";
      EXPECT_EQ(r.err_addr, bad) << "read " << which << " burst " << burst;
    }
  }
}

TEST(ChipEcc, DoubleBitFlipReadByTheHostPortIsAnError) {
  FaultConfig f;
  f.hbm_flip_at.push_back(HbmFlip{0, 1024 + 8, 0, 0x03, 0});  // two check bits of word 1
  LoneChip drv("4x4", HbmConfig{}, "", f);
  std::vector<uint8_t> in(2048, 0x11), out(2048);
  drv.write(0, in.data(), in.size());
  try {
    drv.read(0, out.data(), out.size());
    FAIL() << "no error";
  } catch (const ChipError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("chip 0"), std::string::npos) << m;
    EXPECT_NE(m.find("0x408"), std::string::npos) << m;
    EXPECT_NE(m.find("hbm_uncorrectable"), std::string::npos) << m;
  }
}

TEST(ChipEcc, SingleBitFlipAtAnAddressIsCorrectedOnce) {
  FaultConfig f;
  f.hbm_flip_at.push_back(HbmFlip{0, 512, 0, 0, 1});  // one bit, chosen by the seed
  LoneChip drv("4x4", HbmConfig{}, "", f);
  // 8 KiB written, so the first KiB has left the controller's write buffer (a read of a buffered
  // block is answered from the buffer and never reaches the device).
  std::vector<uint8_t> in(8192), out(8192);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  drv.write(0, in.data(), in.size());
  in.resize(1024);
  out.resize(1024);
  drv.read(0, out.data(), out.size());
  EXPECT_EQ(out, in);
  EXPECT_EQ(drv.counters()[kStatEccCorrected], 1u);
  drv.read(0, out.data(), out.size());
  EXPECT_EQ(drv.counters()[kStatEccCorrected], 1u) << "a one-time flip";
}

// The backdoor stores the check bits of what it writes: a DMA reads it without an ECC event,
// and a backdoor read returns it.
TEST(ChipEcc, BackdoorWritesCheckBits) {
  LoneChip drv("4x4");
  std::vector<uint8_t> in(4096), out(4096);
  std::mt19937_64 rng(5);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  drv.port().backdoor_write(0, 0, in.data(), in.size());
  const ProgramResult r = drv.run(
      {cmd_dma(DmaDir::kHbmToVmem, false, 0, 1, 4096, 0, 0),
       cmd_dma(DmaDir::kVmemToHbm, false, 0, 1, 4096, 8192, 0), cmd_halt()});
  EXPECT_EQ(r.err, 0u);
  EXPECT_EQ(r.delta[kStatEccCorrected] + r.delta[kStatEccUncorr], 0u);
  drv.port().backdoor_read(0, 8192, out.data(), out.size());
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace tpu
