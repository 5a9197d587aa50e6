// bench_chip: matmul on the whole chip (HBM, DMA, sequencer, MXU, VPU): cycles, roofline bound
// (max of compute cycles and HBM bytes / peak bytes per cycle) and the achieved fraction, as JSON.
//   bench_chip [--variant 16x16] [--shapes square,wide,skinny] [--small]
// square 512^3, wide 1024 x 256 x 1024, skinny 8 x 512 x 512 (--small divides every size by 4).
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "chip_driver.h"

int main(int argc, char** argv) {
  using namespace tpu;
  std::string variant = "16x16", shapes = "square,wide,skinny";
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
  const Shape all[] = {{"square", 512 / d, 512 / d, 512 / d},
                       {"wide", 1024 / d, 256 / d, 1024 / d},
                       {"skinny", 8, 512 / d, 512 / d}};
  std::printf("[\n");
  bool first = true;
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
                "\"mxu_busy\": %llu, \"vpu_busy\": %llu, \"overlap\": %llu, \"golden\": \"%s\", "
                "\"wall_seconds\": %.1f}",
                first ? "" : ",\n", s.name, variant.c_str(), s.m, s.k, s.n,
                static_cast<unsigned long long>(r.prog.cycles),
                static_cast<unsigned long long>(r.compute_cycles),
                static_cast<unsigned long long>(r.hbm_bytes),
                static_cast<unsigned long long>(r.roofline_cycles), frac,
                static_cast<unsigned long long>(r.prog.delta[kStatDmaBusy]),
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
