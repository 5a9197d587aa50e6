// bench_chip: matmul on the whole chip (HBM, DMA, sequencer, MXU, VPU): cycles, roofline bound
// (max of compute cycles and HBM bytes / peak bytes per cycle) and the achieved fraction, as JSON.
//   bench_chip [--variant 16x16] [--shapes square,wide,skinny,dma] [--small]
// square 512^3, wide 1024 x 256 x 1024, skinny 8 x 512 x 512 (--small divides every size by 4).
// Each matmul also reports weight_load_cycles: the array takes a weight tile at one row per
// cycle, R cycles per tile, which bounds shapes with M < R (skinny) beside the roofline.
// dma: one DMA command filling (then emptying) the whole VMEM with bf16 rows from a contiguous
// HBM region: bytes per cycle against the HBM peak.
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "chip_driver.h"

int main(int argc, char** argv) {
  using namespace tpu;
  std::string variant = "16x16", shapes = "dma,square,wide,skinny";
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--variant" && i + 1 < argc) variant = argv[++i];
    else if (a == "--shapes" && i + 1 < argc) shapes = argv[++i];
    else if (a == "--small") small = true;
    else {
      std::fprintf(stderr, "usage: bench_chip [--variant V] [--shapes LIST] [--small]\n");
      return 2;
    }
  }
  struct Shape { const char* name; std::size_t m, k, n; };
  const std::size_t d = small ? 4 : 1;
  std::printf("[\n");
  bool first = true;
  if (shapes.find("dma") != std::string::npos) {
    ChipDriver drv(variant);
    const ChipShape& cs = drv.shape();
    const uint64_t piece = 2 * cs.cols, rows = cs.vmem_rows / 64 * 64, seg = 64 * piece;
    const uint64_t bytes = rows * piece, at = drv.alloc(bytes), back = drv.alloc(bytes);
    std::vector<uint8_t> data(bytes);
    std::mt19937_64 rng(2);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    drv.write(at, data.data(), bytes);
    const double peak = static_cast<double>(cs.hbm_channels) * 32.0;
    const struct { const char* name; ChipCmd cmd; } runs[] = {
        {"dma_hbm_to_vmem_bf16",
         cmd_dma(DmaDir::kHbmToVmem, true, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(seg), static_cast<uint32_t>(at), static_cast<uint32_t>(seg))},
        {"dma_vmem_to_hbm_bf16",
         cmd_dma(DmaDir::kVmemToHbm, true, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(seg), static_cast<uint32_t>(back),
                 static_cast<uint32_t>(seg))}};
    for (const auto& run : runs) {
      const ProgramResult r = drv.run({run.cmd, cmd_halt()});
      const double bpc = static_cast<double>(bytes) / static_cast<double>(r.cycles);
      std::printf("%s  {\"shape\": \"%s\", \"variant\": \"%s\", \"bytes\": %llu, "
                  "\"cycles\": %llu, \"bytes_per_cycle\": %.2f, \"peak_bytes_per_cycle\": %.0f, "
                  "\"fraction_of_peak\": %.4f}",
                  first ? "" : ",\n", run.name, variant.c_str(),
                  static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(r.cycles), bpc, peak, bpc / peak);
      first = false;
    }
    std::vector<uint8_t> out(bytes);
    drv.read(back, out.data(), bytes);
    if (out != data) {
      std::fprintf(stderr, "bench_chip: the DMA round trip changed the data\n");
      return 1;
    }
  }
  const Shape all[] = {{"square", 512 / d, 512 / d, 512 / d},
                       {"wide", 1024 / d, 256 / d, 1024 / d},
                       {"skinny", 8, 512 / d, 512 / d}};
  for (const Shape& s : all) {
    if (shapes.find(s.name) == std::string::npos) continue;
    ChipDriver drv(variant);
    std::mt19937_64 rng(1);
    std::vector<bf16_t> a(s.m * s.k), w(s.k * s.n);
    for (auto& x : a) x = static_cast<bf16_t>(0x3C00u + (rng() & 0x3FFu));
    for (auto& x : w) x = static_cast<bf16_t>(0x3C00u + (rng() & 0x3FFu));
    const auto t0 = std::chrono::steady_clock::now();
    const MatmulRun r = drv.matmul(a, w, s.m, s.k, s.n);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool ok = r.c_bits == golden_chip_matmul(a, w, s.m, s.k, s.n, {});
    const double frac = static_cast<double>(r.roofline_cycles) / static_cast<double>(r.prog.cycles);
    std::printf("%s  {\"shape\": \"%s\", \"variant\": \"%s\", \"m\": %zu, \"k\": %zu, \"n\": %zu, "
                "\"cycles\": %llu, \"compute_cycles\": %llu, \"hbm_bytes\": %llu, "
                "\"roofline_cycles\": %llu, \"achieved_fraction\": %.4f, \"dma_busy\": %llu, "
                "\"weight_load_cycles\": %llu, \"mxu_busy\": %llu, \"vpu_busy\": %llu, "
                "\"overlap\": %llu, \"golden\": \"%s\", \"wall_seconds\": %.1f}",
                first ? "" : ",\n", s.name, variant.c_str(), s.m, s.k, s.n,
                static_cast<unsigned long long>(r.prog.cycles),
                static_cast<unsigned long long>(r.compute_cycles),
                static_cast<unsigned long long>(r.hbm_bytes),
                static_cast<unsigned long long>(r.roofline_cycles), frac,
                static_cast<unsigned long long>(r.prog.delta[kStatDmaBusy]),
                static_cast<unsigned long long>(r.prog.delta[kStatWeightBeats]),
                static_cast<unsigned long long>(r.prog.delta[kStatMxuBusy]),
                static_cast<unsigned long long>(r.prog.delta[kStatVpuBusy]),
                static_cast<unsigned long long>(r.prog.delta[kStatOverlap]), ok ? "pass" : "fail",
                wall);
    std::fflush(stdout);
    first = false;
  }
  std::printf("\n]\n");
  return 0;
}
