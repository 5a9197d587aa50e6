// bench_chip: matmul on the whole chip (HBM, DMA, sequencer, MXU, VPU): cycles, roofline bound
// (max of compute cycles and HBM bytes / peak bytes per cycle) and the achieved fraction, as a JSON
// array on stdout (one report per case, sw/common/report.h) and each case's summary on stderr.
//   bench_chip [--variant 16x16] [--shapes square,wide,skinny,skinny16,dma,speed] [--small]
// square 512^3, wide 1024 x 256 x 1024, skinny 8 x 512 x 512, skinny16 16 x 512 x 512 (--small
// divides K, N and the square/wide M by 4; the skinny M stays). Shapes are named exactly,
// separated by commas.
// Every matmul reports chip_cycles_per_second: the program's chip cycles over the host time of
// the whole matmul call (copies in and out included, so a little below the model's pure rate).
// speed (not in the default list): a fixed 256^3 matmul whose chip_cycles_per_second is the
// one-core simulation speed of the chip (docs/scale.md, "One core"); --small does not change it.
// Each matmul also reports weight_load_cycles: the cycles the array's weight port took a beat
// (docs/mxu.md: the rows of a tile load a few per beat), a bound beside the roofline for M < R.
// dma: one DMA command filling (then emptying) the whole VMEM with bf16 rows from a contiguous
// HBM region, then the same with f32 rows (a 16x16 chip's f32 row is one 64-byte burst, so two
// rows a cycle are the two HBM ports' 128 B; two bf16 rows are 64 B): bytes per cycle against
// the HBM peak.
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "chip_driver.h"
#include "lone_chip.h"
#include "matmul_job.h"
#include "profile.h"
#include "report.h"
#include "tpu/perf.h"

namespace {

// The reports go out one by one as the cases finish: "[", the reports, "]".
class ReportArray {
 public:
  ReportArray() { std::fputs("[\n", stdout); }
  ~ReportArray() { std::fputs("\n]\n", stdout); }
  ReportArray(const ReportArray&) = delete;
  ReportArray& operator=(const ReportArray&) = delete;
  void add(const tpu::Report& r) {
    std::fputs(r.summary().c_str(), stderr);
    std::printf("%s%s", first_ ? "" : ",\n", tpu::json_text(r.json()).c_str());
    std::fflush(stdout);
    first_ = false;
  }

 private:
  bool first_ = true;
};

}  // namespace

static int run(const std::string& variant, const std::string& shapes, bool small) {
  using namespace tpu;
  std::set<std::string> wanted;
  for (const std::string& sh : cli::split_list(shapes)) wanted.insert(sh);
  struct Shape { const char* name; std::size_t m, k, n; };
  const std::size_t d = small ? 4 : 1;
  ReportArray out;
  if (wanted.count("dma")) {
    LoneChip drv(variant);
    const ChipShape& cs = drv.shape();
    const uint64_t piece = 2 * cs.cols, rows = cs.vmem_rows / 64 * 64, seg = 64 * piece;
    const uint64_t bytes = rows * piece, at = drv.alloc(2 * bytes), back = drv.alloc(2 * bytes);
    std::vector<uint8_t> data(2 * bytes);
    std::mt19937_64 rng(2);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    drv.write(at, data.data(), 2 * bytes);
    const double peak = static_cast<double>(cs.hbm_channels) * 32.0;
    const struct { const char* name; ChipCmd cmd; } runs[] = {
        {"dma_hbm_to_vmem_bf16",
         cmd_dma(DmaDir::kHbmToVmem, true, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(seg), static_cast<uint32_t>(at), static_cast<uint32_t>(seg))},
        {"dma_vmem_to_hbm_bf16",
         cmd_dma(DmaDir::kVmemToHbm, true, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(seg), static_cast<uint32_t>(back),
                 static_cast<uint32_t>(seg))},
        {"dma_hbm_to_vmem_f32",
         cmd_dma(DmaDir::kHbmToVmem, false, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(2 * seg), static_cast<uint32_t>(at),
                 static_cast<uint32_t>(2 * seg))},
        {"dma_vmem_to_hbm_f32",
         cmd_dma(DmaDir::kVmemToHbm, false, 0, static_cast<uint32_t>(rows / 64),
                 static_cast<uint32_t>(2 * seg), static_cast<uint32_t>(back),
                 static_cast<uint32_t>(2 * seg))}};
    for (const auto& run : runs) {
      const bool f32 = std::string(run.name).find("f32") != std::string::npos;
      const uint64_t moved = f32 ? 2 * bytes : bytes;
      const ProgramResult r = drv.run({run.cmd, cmd_halt()});
      const double bpc = static_cast<double>(moved) / static_cast<double>(r.cycles);
      Report rep(std::string(run.name) + ", " + variant);
      rep.field("shape", run.name).field("variant", variant);
      rep.metric("bytes", moved, "bytes", "moved by the one DMA command");
      rep.metric(report_key::kCycles, r.cycles, "cycles", "the command, issue to halt", true);
      rep.metric("bytes_per_cycle", bpc, "B/cycle", "bytes / cycles", true);
      rep.metric("peak_bytes_per_cycle", static_cast<uint64_t>(cs.hbm_channels) * 32, "B/cycle",
                 "every HBM channel's data bus (32 B)");
      rep.metric("fraction_of_peak", bpc / peak, "fraction", "bytes_per_cycle / peak", true);
      out.add(rep);
    }
    std::vector<uint8_t> got(2 * bytes);
    drv.read(back, got.data(), 2 * bytes);
    if (got != data) {
      std::fprintf(stderr, "bench_chip: the DMA round trip changed the data\n");
      return 1;
    }
  }
  const Shape all[] = {{"square", 512 / d, 512 / d, 512 / d},
                       {"wide", 1024 / d, 256 / d, 1024 / d},
                       {"skinny", 8, 512 / d, 512 / d},
                       {"skinny16", 16, 512 / d, 512 / d},
                       {"speed", 256, 256, 256}};
  for (const Shape& s : all) {
    if (!wanted.count(s.name)) continue;
    MatmulJobOptions o;
    o.m = s.m;
    o.k = s.k;
    o.n = s.n;
    std::mt19937_64 rng(1);
    o.a.resize(s.m * s.k);
    o.w.resize(s.k * s.n);
    for (auto& x : o.a) x = static_cast<bf16_t>(0x3C00u + (rng() & 0x3FFu));
    for (auto& x : o.w) x = static_cast<bf16_t>(0x3C00u + (rng() & 0x3FFu));
    ChipConfig cfg;
    cfg.variant = variant;
    MatmulJob job(cfg, "bench_chip", o);
    job.run();
    const MatmulRun& r = job.result();
    const double wall = job.run_seconds();
    const bool ok = job.pass();
    const double frac = static_cast<double>(r.roofline_cycles) / static_cast<double>(r.prog.cycles);
    Report rep(std::string(s.name) + " matmul " + std::to_string(s.m) + "x" + std::to_string(s.k) +
               "x" + std::to_string(s.n) + ", " + variant);
    rep.field("shape", s.name).field("variant", variant);
    rep.metric("m", s.m, "", "rows of A and C");
    rep.metric("k", s.k, "", "columns of A, rows of W");
    rep.metric("n", s.n, "", "columns of W and C");
    rep.metric(report_key::kCycles, r.prog.cycles, "cycles", "the whole program", true);
    rep.metric("compute_cycles", r.compute_cycles, "cycles",
               "activation beats the MXU needs: M x ceil(K/R) x ceil(N/C)");
    rep.metric("hbm_bytes", r.hbm_bytes, "bytes", "bytes the DMA moved to and from HBM");
    rep.metric("roofline_cycles", r.roofline_cycles, "cycles",
               "max(compute_cycles, hbm_bytes / peak bytes per cycle)", true);
    rep.metric("achieved_fraction", frac, "fraction", "roofline_cycles / cycles", true);
    rep.metric("dma_busy", r.prog.delta[kStatDmaBusy], "cycles",
               "cycles the DMA engine had a command in flight");
    rep.metric("weight_load_cycles", r.prog.delta[kStatWeightBeats], "cycles",
               "beats of the array's weight port (docs/mxu.md): a bound of M < R shapes", true);
    rep.metric("mxu_busy", r.prog.delta[kStatMxuBusy], "cycles",
               "cycles the MXU had a LOADW or MATMUL in flight");
    rep.metric("vpu_busy", r.prog.delta[kStatVpuBusy], "cycles",
               "cycles the VPU had a command in flight");
    rep.metric("overlap", r.prog.delta[kStatOverlap], "cycles",
               "cycles with both the DMA and the MXU busy");
    rep.metric(report_key::kGolden, ok ? "pass" : "fail", "",
               "C bit for bit against golden_chip_matmul", true);
    // MFU, the breakdown and the HBM counters (ECC included), as tpusim reports them.
    report_profile(rep, {r.prog.delta}, r.prog.cycles, matmul_useful_macs(s.m, s.k, s.n),
                   peak_macs_per_cycle(job.shape().rows, job.shape().cols));
    rep.metric("wall_seconds", wall, "s", "host time of the matmul");
    rep.metric("chip_cycles_per_second",
               wall > 0 ? static_cast<double>(r.prog.cycles) / wall : 0.0, "cycles/s",
               "chip cycles of the program per host second of the matmul (one core)", true);
    out.add(rep);
  }
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app("matmuls on the whole chip against their roofline bound, and DMA bandwidth; a JSON\n"
               "array on stdout",
               "bench_chip");
  std::string variant = "16x16", shapes = "dma,square,wide,skinny,skinny16";
  bool small = false;
  // An unknown or unbuilt variant is refused with the model's own words (chip_shape).
  const CLI::Validator built_variant(
      [](std::string& v) {
        try {
          tpu::chip_shape(v);
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "");
  app.add_option("--variant", variant, "the chip variant (RxC)")
      ->type_name("RxC")
      ->check(built_variant)
      ->capture_default_str();
  app.add_option("--shapes", shapes,
                 "shapes to run, comma-separated, of dma, square, wide, skinny, skinny16,\n"
                 "speed")
      ->type_name("LIST")
      ->check(tpu::cli::list_of(
          CLI::IsMember({"dma", "square", "wide", "skinny", "skinny16", "speed"})))
      ->capture_default_str();
  app.add_flag("--small", small, "K, N and the square/wide M divided by 4");
  return tpu::bench_cli(app, argc, argv, [&] { return run(variant, shapes, small); });
}
