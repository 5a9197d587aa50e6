// bench_mxu: MXU utilization on back-to-back weight tiles, as a JSON array on stdout holding one
// report (sw/common/report.h) whose "runs" are the cases' reports; each case's summary on stderr.
//
// For each variant: M rows streamed over T >= 16 back-to-back weight tiles with K and N multiples
// of the array (utilization = ideal / measured cycles, where ideal = M x tiles), and the same
// with K and N that are not multiples (the true MFU, padding waste included, is what a user
// sees). Every run is checked bit for bit against the golden model.
//
//   bench_mxu [--variants 8x8,16x16] [--m 1024]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "bench_main.h"
#include "json.h"
#include "mxu_dut.h"
#include "mxu_runner.h"
#include "report.h"
#include "tpu/matmul.h"

namespace {

using namespace tpu;

std::vector<bf16_t> random_bf16(std::size_t n, std::mt19937_64& rng) {
  std::vector<bf16_t> v(n);
  for (auto& x : v) {
    const auto e = static_cast<uint16_t>(127 - 4 + rng() % 9);
    x = static_cast<bf16_t>(((rng() & 1u) << 15) | (e << 7) | (rng() & 0x7Fu));
  }
  return v;
}

Report run_case(const std::string& variant, const std::string& name, const MatmulShape& sh,
                uint64_t seed, bool& ok) {
  auto dut = make_mxu(variant);
  std::mt19937_64 rng(seed);
  const auto a = random_bf16(sh.m * sh.k, rng);
  const auto w = random_bf16(sh.k * sh.n, rng);
  const auto t0 = std::chrono::steady_clock::now();
  const auto res = run_matmul(*dut, sh, a, w, nullptr);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto want = golden_matmul(a, w, sh.m, sh.k, sh.n);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    mismatches += f32_bits(res.c[i]) != f32_bits(want[i]);
  ok = ok && mismatches == 0;
  const auto& st = res.stats;
  Report rep(variant + " " + name + " " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" +
             std::to_string(sh.n));
  rep.field("variant", variant).field("case", name);
  rep.group("shape")
      .metric("m", sh.m, "", "activation rows")
      .metric("k", sh.k, "", "reduction depth")
      .metric("n", sh.n, "", "output columns");
  rep.metric("tiles", st.tiles, "", "weight tiles: ceil(K / rows) x ceil(N / cols)");
  rep.metric(report_key::kCycles, st.cycles, "cycles", "measured cycles of the matmul", true);
  rep.metric(report_key::kIdealCycles, st.ideal_cycles, "cycles",
             "one cycle per activation beat: M x tiles", true);
  rep.metric("utilization", st.utilization, "fraction",
             "ideal_cycles / cycles: how busy the array was kept", true);
  rep.metric(report_key::kMfu, st.mfu, "fraction",
             "useful MACs / (cycles x rows x cols): padding waste included", true);
  rep.set_mismatches(mismatches);
  rep.metric("wall_seconds", wall, "s", "host time of the matmul");
  rep.metric("sim_cycles_per_second", wall > 0 ? static_cast<double>(st.cycles) / wall : 0.0,
             "cycles/s", "simulated cycles per host second");
  return rep;
}

}  // namespace

static int run(const std::vector<std::string>& variants, std::size_t m) {
  for (const std::string& v : variants) make_mxu(v);  // an unknown or unbuilt variant: exit 2
  Report out("bench_mxu: back-to-back weight tiles");
  out.field("benchmark", "mxu_back_to_back_tiles");
  out.metric("target_utilization", 0.98, "fraction", "what utilization should reach", true);
  Json runs = Json::array();
  bool ok = true;
  try {
    for (const auto& v : variants) {
      auto probe = make_mxu(v);
      const std::size_t R = probe->rows(), C = probe->cols();
      // 4 x 4 = 16 tiles; the ragged case pads the last K and N tile of each.
      for (const auto& [name, sh] :
           {std::pair<std::string, MatmulShape>{"aligned", {m, 4 * R, 4 * C}},
            std::pair<std::string, MatmulShape>{"ragged", {m, 4 * R - R / 2 + 1, 4 * C - C / 4}}}) {
        const Report r = run_case(v, name, sh, 42, ok);
        std::cerr << r.summary();
        runs.push_back(r.json());
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_mxu: error: " << e.what() << "\n";
    return 2;
  }
  out.field("runs", std::move(runs));
  std::cerr << out.summary();
  std::cout << json_text(Json::array({out.json()})) << "\n";
  return ok ? 0 : 1;  // any mismatch fails the benchmark
}

int main(int argc, char** argv) {
  CLI::App app("MXU utilization on back-to-back weight tiles (aligned and ragged K, N), every run\n"
               "checked against the golden; a JSON array on stdout",
               "bench_mxu");
  std::string variants = "8x8,16x16";
  std::size_t m = 1024;
  app.add_option("--variants", variants, "MXU variants (RxC), comma-separated")
      ->type_name("LIST")
      ->check(tpu::cli::list_of())
      ->capture_default_str();
  app.add_option("--m", m, "rows of A streamed over each run's 16 tiles")
      ->type_name("M")
      ->check(tpu::cli::uint_in(1, 1u << 20))
      ->capture_default_str();
  return tpu::bench_cli(app, argc, argv, [&] { return run(tpu::cli::split_list(variants), m); });
}
