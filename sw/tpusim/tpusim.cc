// tpusim: the command-line front door of the simulator (tpusim --help: the commands; each
// command's options are declared next to it, on CLI11: sw/common/cli.h).
//
//   tpusim allreduce | collective | pod | hang [options]   (sw/tpusim/pod_cmd.h)
//   tpusim shard [options]                                (sw/tpusim/shard_cmd.h)
//   tpusim train [options]                                (sw/tpusim/train_cmd.h)
//   tpusim traffic [options]                              (sw/tpusim/traffic.h)
//   tpusim matmul [--config FILE] [--variant RxC] [--m M --k K --n N --seed S | --a A.npy --w W.npy]
//                 [--dist narrow|wide] [--out C.npy] [--json REPORT.json] [--waves FILE.fst]
//
// matmul runs C = A x W on the MXU of the configured chip variant, checks every output bit for bit
// against the golden model, and reports cycles, ideal cycles, utilization and mismatches.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "chip_config.h"
#include "check_port.h"
#include "chip_driver.h"
#include "cli_util.h"
#include "example_cmd.h"
#include "json.h"
#include "pod_cli.h"
#include "pod_cmd.h"
#include "shard_cmd.h"
#include "tpusim_cmds.h"
#include "train_cmd.h"
#include "output.h"
#include "pod.h"
#include "pod_mpi.h"
#include "profile.h"
#include "report.h"
#include "trace.h"
#include "traffic.h"
#include "mxu_dut.h"
#include "mxu_runner.h"
#include "npy.h"
#include "tpu/matmul.h"
#include "tpu/perf.h"

namespace {

using namespace tpu;

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;  // the run finished but the golden check failed
constexpr int kExitUsage = 2;     // bad command line, file or configuration
constexpr int kExitSim = 3;       // the RTL reported an error or hung

// The options of `tpusim matmul`.
struct MatmulArgs {
  const CLI::App* cmd = nullptr;  // the command, to ask which options were given
  std::string config, variant, a, w, out, json, waves, trace, trace_cycles, bias;
  std::string dist = "narrow", out_dtype = "f32";
  std::size_t m = 64, k = 64, n = 64;
  uint64_t seed = 1, watchdog = 0;
  bool quiet = false, relu = false, mxu_only = false, check = false;
  std::vector<std::string> faults;

  bool given(const char* flag) const { return cmd->count(flag) > 0; }
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// FST waves (docs/errors.md): Verilator's FST writer neither reports a failed write nor
// survives a full disk (its memory-mapped temporary files raise SIGBUS). So: the file system
// must have room before the run starts, a SIGBUS ends the tool with exit 2 and a message naming
// the dump, and a disk found full after the dump is an error.
constexpr uint64_t kWavesMinFree = 64ull << 20;
char g_sigbus_msg[512] = "tpusim: error: SIGBUS: a memory-mapped file could not be written\n";

extern "C" void on_sigbus(int) {
  const ssize_t n = ::write(2, g_sigbus_msg, std::strlen(g_sigbus_msg));
  (void)n;
  ::_exit(kExitUsage);
}

uint64_t free_bytes(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return ~0ull;  // unknown: the write itself will tell
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

void prepare_waves(const std::string& path) {
  const uint64_t room = free_bytes(path);
  if (room < kWavesMinFree)
    throw UsageError("--waves " + path + ": only " + std::to_string(room >> 20) +
                     " MiB free on its file system (an FST dump needs at least " +
                     std::to_string(kWavesMinFree >> 20) + " MiB)");
  std::snprintf(g_sigbus_msg, sizeof g_sigbus_msg,
                "tpusim: error: --waves %s: writing the FST dump failed (SIGBUS: is the disk "
                "full?); the run's summary is lost\n",
                path.c_str());
}

// The end of both matmul commands: golden verdict, host time and speed, the files written, the
// JSON and the summary, the first mismatch; returns the exit code.
int finish_matmul_report(Report& rep, const MatmulArgs& opt, double wall,
                         uint64_t cycles, const MatmulShape& sh, const std::vector<uint32_t>& got,
                         const std::vector<uint32_t>& want, const std::function<void()>& files) {
  std::size_t mismatches = 0;
  long first_bad = -1;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      if (first_bad < 0) first_bad = static_cast<long>(i);
      ++mismatches;
    }
  const bool pass = mismatches == 0;
  rep.set_golden(pass, want.size(), mismatches);
  rep.metric("wall_seconds", wall, "s", "host time");
  rep.metric("sim_cycles_per_second", wall > 0 ? static_cast<double>(cycles) / wall : 0.0,
             "cycles/s", "simulated cycles per host second");
  if (!opt.out.empty()) rep.field("out", opt.out);
  if (!opt.waves.empty()) rep.field("waves", opt.waves);
  if (!opt.trace.empty()) rep.field("trace", opt.trace);
  std::fputs(rep.summary().c_str(), stdout);
  std::printf("  golden check: %s (%zu of %zu outputs differ)\n", pass ? "PASS" : "FAIL",
              mismatches, want.size());
  if (!pass && first_bad >= 0) {
    const auto i = static_cast<std::size_t>(first_bad);
    std::printf("  first mismatch at [%zu,%zu]: got %08x, golden %08x\n", i / sh.n, i % sh.n,
                got[i], want[i]);
  }
  std::fflush(stdout);  // the summary stays even if a file cannot be written
  files();              // --out, --trace: a failed write is an error naming the path (exit 2)
  if (!opt.json.empty()) rep.write(opt.json);
  return pass ? kExitOk : kExitMismatch;
}

// The whole chip: data in HBM, DMA, sequencer, MXU and the VPU epilogue (sw/driver).
int run_chip(const ChipConfig& cfg, const std::string& config_path, const MatmulShape& sh,
             const std::vector<bf16_t>& a, const std::vector<bf16_t>& w, const std::string& inputs,
             const MatmulArgs& opt) {
  auto has = [&](const char* k) { return opt.given(k); };
  MatmulOptions mo;
  std::vector<float> bias;
  if (has("--bias")) {
    const NpyArray arr = read_npy(opt.bias);  // shape (N,) or (1, N), float32
    if (arr.dtype != "<f4") throw UsageError(opt.bias + ": the bias must be float32");
    const bool row = arr.shape.size() == 1 ? arr.shape[0] == sh.n
                                           : arr.shape.size() == 2 && arr.shape[0] == 1 &&
                                                 arr.shape[1] == sh.n;
    if (!row) {
      std::string got;
      for (const size_t d : arr.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      throw UsageError(opt.bias + ": the bias must have shape (" + std::to_string(sh.n) +
                       ",) or (1, " + std::to_string(sh.n) + ") for N = " +
                       std::to_string(sh.n) + " (it has shape (" + got + "))");
    }
    bias = arr.as_f32();
    mo.bias = &bias;
  }
  mo.relu = has("--relu");
  const std::string& dtype = opt.out_dtype;
  mo.out_bf16 = dtype == "bf16";

  // The flag that chose the variant, or the config's key, is the one blamed.
  const std::string chose = has("--variant") ? "--variant " + opt.variant
                                             : config_path + ": key 'chip.variant'";
  try {
    chip_shape(cfg.variant);
  } catch (const std::invalid_argument& e) {
    throw UsageError(chose + ": " + e.what());
  }
  // --check: the driver plans over a CheckPort of the chip, which stops it before the first
  // simulated cycle (no waves are opened).
  std::unique_ptr<ChipDriver> machine, drv;
  std::unique_ptr<CheckPort> check;
  try {
    machine = std::make_unique<ChipDriver>(
        cfg.variant, cfg.hbm, has("--waves") && !opt.check ? opt.waves : "", cfg.faults);
  } catch (const std::invalid_argument& e) {
    const auto mxus = built_mxu_variants();
    const bool mxu = std::find(mxus.begin(), mxus.end(), cfg.variant) != mxus.end();
    throw UsageError(chose + ": " + e.what() +
                     (mxu ? " (its MXU alone is built: add --mxu-only)" : ""));
  }
  if (opt.check) {
    check = std::make_unique<CheckPort>(machine->port());
    drv = std::make_unique<ChipDriver>(*check, 0);
  } else {
    drv = std::move(machine);
  }
  TraceOptions topt;
  topt.enabled = has("--trace");
  if (has("--trace-cycles")) std::tie(topt.from, topt.to) = cli::split_span(opt.trace_cycles);
  if (topt.enabled) drv->port().set_trace(topt);
  drv->port().set_watchdog(has("--watchdog") ? opt.watchdog : cfg.watchdog_cycles);
  const auto t0 = std::chrono::steady_clock::now();
  MatmulRun r;
  {
    ProgressLine line("matmul " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" +
                          std::to_string(sh.n) + " on chip " + cfg.variant,
                      opt.quiet);
    drv->progress = [&](uint64_t done, uint64_t total) { line(done, total, "commands issued"); };
    r = drv->matmul(a, w, sh.m, sh.k, sh.n, mo);
    drv->progress = nullptr;  // `line` ends here
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<TraceEvent> events;
  if (topt.enabled) events = drv->port().take_trace();
  const std::string late = trace_window_warning(topt.from, topt.to, drv->port().cycle());
  if (has("--trace-cycles") && !late.empty()) std::cerr << "tpusim: warning: " << late << "\n";
  const auto want = golden_chip_matmul(a, w, sh.m, sh.k, sh.n, mo);
  std::vector<float> c(r.c_bits.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = mo.out_bf16 ? bf16_to_f32(static_cast<bf16_t>(r.c_bits[i])) : f32_from_bits(r.c_bits[i]);
  const ChipShape& s = drv->shape();
  const ProgramResult& p = r.prog;
  const uint64_t cycles = p.cycles;
  const double util = cycles ? static_cast<double>(p.delta[kStatMxuBeats]) / static_cast<double>(cycles) : 0.0;
  const double bw = cycles ? static_cast<double>(r.hbm_bytes) / static_cast<double>(cycles) : 0.0;
  const double frac = cycles ? static_cast<double>(r.roofline_cycles) / static_cast<double>(cycles) : 0.0;
  const uint64_t tiles = ((sh.k + s.rows - 1) / s.rows) * ((sh.n + s.cols - 1) / s.cols);

  Report rep("matmul " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" +
             std::to_string(sh.n) + " (M x K x N) on chip " + cfg.variant + ": " +
             std::to_string(tiles) + " tiles, " + std::to_string(r.commands) + " commands");
  rep.field("tool", "tpusim").field("command", "matmul").field("mode", "chip");
  rep.field("config", cfg.source).field("variant", cfg.variant);
  rep.metric("array_rows", s.rows, "", "MXU rows").metric("array_cols", s.cols, "", "MXU columns");
  rep.group("shape").metric("m", sh.m, "", "rows of A").metric("k", sh.k, "", "the contraction");
  rep.group("shape").metric("n", sh.n, "", "columns of W");
  rep.group("epilogue").field("bias", has("--bias")).field("relu", mo.relu).field("out_dtype", dtype);
  rep.field("inputs", inputs).metric("tiles", tiles, "", "K tiles x N tiles of the array");
  rep.metric("cycles", cycles, "cycles", "the on-chip program", true);
  rep.metric("ideal_cycles", r.compute_cycles, "cycles", "M x ceil(K/R) x ceil(N/C) beats", true);
  rep.metric("utilization", util, "fraction", "MXU activation beats / cycles", true);
  // mfu (useful MACs / (peak MACs x cycles)) and where the cycles went, from the RTL counters.
  report_profile(rep, {p.delta}, cycles, static_cast<uint64_t>(sh.m * sh.k * sh.n),
                 peak_macs_per_cycle(s.rows, s.cols));
  rep.metric("useful_macs", static_cast<uint64_t>(sh.m * sh.k * sh.n), "", "M x K x N");
  rep.metric("commands", r.commands, "", "commands of the program");
  rep.metric("m_chunk", r.m_chunk, "rows", "rows of A per on-chip chunk");
  ReportGroup& hbm = rep.group("hbm");
  hbm.metric("bytes", r.hbm_bytes, "bytes", "the DMA's HBM traffic", true);
  hbm.metric("read_bytes", p.delta[kStatDmaRdBytes], "bytes", "read by the DMA");
  hbm.metric("write_bytes", p.delta[kStatDmaWrBytes], "bytes", "written by the DMA");
  hbm.metric("bytes_per_cycle", bw, "B/cycle", "achieved HBM bandwidth", true);
  hbm.metric("gb_per_s", bw / cfg.hbm.tck_ns, "GB/s", "at the HBM clock");
  hbm.metric("peak_bytes_per_cycle", r.peak_bytes_per_cycle, "B/cycle", "channels x 32 B");
  ReportGroup& busy = rep.group("busy_cycles");
  busy.metric("dma", p.delta[kStatDmaBusy], "cycles", "the DMA engine busy", true);
  busy.metric("mxu", p.delta[kStatMxuBusy], "cycles", "the MXU unit busy", true);
  busy.metric("vpu", p.delta[kStatVpuBusy], "cycles", "the VPU busy", true);
  busy.metric("dma_and_mxu", p.delta[kStatOverlap], "cycles", "both at once", true);
  ReportGroup& roof = rep.group("roofline");
  roof.metric("compute_cycles", r.compute_cycles, "cycles", "the MXU's beats");
  roof.metric("memory_cycles",
              static_cast<uint64_t>(static_cast<double>(r.hbm_bytes) / r.peak_bytes_per_cycle + 0.5),
              "cycles", "the HBM traffic at peak");
  roof.metric("bound_cycles", r.roofline_cycles, "cycles", "the larger of the two", true);
  roof.metric("achieved_fraction", frac, "fraction", "bound / cycles", true);
  return finish_matmul_report(rep, opt, wall, cycles, sh, r.c_bits, want, [&] {
    if (has("--out")) write_npy_f32(opt.out, c, {sh.m, sh.n});
    if (topt.enabled) write_trace(opt.trace, events, drv->port().info(), cfg.clock_ghz);
  });
}

int run_matmul_cmd(const MatmulArgs& opt) {
  const bool quiet = opt.quiet;
  auto has = [&](const char* k) { return opt.given(k); };

  const std::string config_path =
      has("--config") ? opt.config : source_file("configs/default.yaml");
  ChipConfig cfg = load_chip_config(config_path);
  if (has("--variant")) cfg.variant = opt.variant;
  if (has("--fault")) {
    try {
      apply_fault_flags(cfg.faults, opt.faults);
      check_fault_flags(cfg.faults, chip_shape(cfg.variant).hbm_bytes, 1);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }

  MatmulShape sh{64, 64, 64};
  std::vector<bf16_t> a, w;
  std::string inputs;
  if (has("--a")) {  // --a and --w come together, without --m, --k, --n, --seed, --dist (CLI)
    std::size_t ar = 0, ac = 0, wr = 0, wc = 0;
    a = load_bf16_matrix(opt.a, &ar, &ac);
    w = load_bf16_matrix(opt.w, &wr, &wc);
    if (ar == 0 || ac == 0) throw UsageError(opt.a + ": A must have at least one row and column");
    if (wc == 0) throw UsageError(opt.w + ": W must have at least one column");
    if (wr != ac)
      throw UsageError(opt.w + ": W has " + std::to_string(wr) + " rows but " + opt.a +
                       " has K = " + std::to_string(ac) +
                       " columns (rule: A is M x K and W is K x N)");
    sh = {ar, ac, wc};
    inputs = "files: A=" + opt.a + " W=" + opt.w;
  } else {
    sh = {opt.m, opt.k, opt.n};
    const uint64_t seed = opt.seed;
    const std::string& dist = opt.dist;
    // Capacity first: a shape the chip's HBM cannot hold is refused before gigabytes of
    // inputs are generated (the variant's own errors come later, with their wording).
    if (!has("--mxu-only")) {
      bool known = true;
      ChipShape cs;
      try {
        cs = chip_shape(cfg.variant);
      } catch (const std::invalid_argument&) {
        known = false;
      }
      MatmulOptions need;
      need.out_bf16 = opt.out_dtype == "bf16";
      std::vector<float> no_bias;
      if (has("--bias")) need.bias = &no_bias;
      if (known) {
        try {
          check_matmul_fits(cs, sh.m, sh.k, sh.n, need);
        } catch (const std::invalid_argument& e) {
          throw UsageError(e.what());
        }
      }
    } else {
      // The MXU alone has no HBM: the operands and the result live in host memory.
      const uint64_t host = 2 * (uint64_t{sh.m} * sh.k + uint64_t{sh.k} * sh.n) +
                            8 * uint64_t{sh.m} * sh.n;
      if (host > (uint64_t{1} << 31))
        throw UsageError("matmul " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" +
                         std::to_string(sh.n) + " --mxu-only: the operands and results need " +
                         std::to_string(host) + " bytes of host memory (limit 2 GiB)");
    }
    std::mt19937_64 rng(seed);
    auto draw = [&]() -> bf16_t {
      const auto sign = static_cast<uint16_t>((rng() & 1u) << 15);
      const auto mant = static_cast<uint16_t>(rng() & 0x7Fu);
      const auto e = static_cast<uint16_t>(dist == "narrow" ? 127 - 4 + rng() % 9 : rng() % 255);
      return static_cast<bf16_t>(sign | (e << 7) | mant);
    };
    a.resize(sh.m * sh.k);
    w.resize(sh.k * sh.n);
    for (auto& x : a) x = draw();
    for (auto& x : w) x = draw();
    inputs = "random: seed=" + std::to_string(seed) + " dist=" + dist;
  }

  if (has("--waves") && !opt.check) prepare_waves(opt.waves);
  if (!has("--mxu-only")) {
    const int rc = run_chip(cfg, config_path, sh, a, w, inputs, opt);  // the dump is closed now
    if (has("--waves") && free_bytes(opt.waves) == 0)
      throw UsageError("--waves " + opt.waves +
                       ": the disk is full after the dump; the FST file may be cut short");
    return rc;
  }
  for (const char* k : {"--bias", "--relu", "--out-dtype", "--trace", "--trace-cycles"})
    if (has(k)) throw UsageError(std::string(k) + " needs the whole chip (drop --mxu-only)");

  std::unique_ptr<MxuDut> dut;
  try {
    dut = make_mxu(cfg.variant);
  } catch (const std::invalid_argument& e) {
    throw UsageError((has("--variant") ? "--variant " + opt.variant
                                       : config_path + ": key 'chip.variant'") +
                     ": " + e.what());
  }
  if (opt.check) throw CheckStop("after the array was built, before its first cycle");
  if (has("--waves")) dut->open_waves(opt.waves);

  MxuRunOptions ro;
  const auto t0 = std::chrono::steady_clock::now();
  MxuRunResult res;
  {
    ProgressLine line("matmul " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" +
                          std::to_string(sh.n) + " on MXU " + cfg.variant,
                      quiet);
    ro.progress_every = 4096;
    ro.progress = [&](uint64_t done, uint64_t total) { line(done, total, "result rows"); };
    res = run_matmul(*dut, sh, a, w, nullptr, ro);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto want = golden_matmul(a, w, sh.m, sh.k, sh.n);

  const MxuRunStats& st = res.stats;
  Report rep("matmul " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" +
             std::to_string(sh.n) + " (M x K x N) on MXU " + cfg.variant + ": " +
             std::to_string(st.tiles) + " tiles");
  rep.field("tool", "tpusim").field("command", "matmul").field("config", cfg.source);
  rep.field("variant", cfg.variant);
  rep.metric("array_rows", dut->rows(), "", "MXU rows").metric("array_cols", dut->cols(), "", "MXU columns");
  rep.group("shape").metric("m", sh.m, "", "rows of A").metric("k", sh.k, "", "the contraction");
  rep.group("shape").metric("n", sh.n, "", "columns of W");
  rep.field("inputs", inputs).metric("tiles", st.tiles, "", "K tiles x N tiles of the array");
  rep.metric("cycles", st.cycles, "cycles", "the array's run", true);
  rep.metric("ideal_cycles", st.ideal_cycles, "cycles", "activation beats of the work", true);
  rep.metric("utilization", st.utilization, "fraction", "busy beats / cycles", true);
  rep.metric("mfu", st.mfu, "fraction", "useful MACs / (peak MACs x cycles)", true);
  rep.metric("useful_macs", st.macs_useful, "", "M x K x N");
  rep.metric("activation_beats", st.a_beats, "", "activation rows into the array");
  rep.metric("weight_beats", st.w_beats, "", "weight rows into the array");
  std::vector<uint32_t> got(res.c.size()), want_bits(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = f32_bits(res.c[i]);
  for (std::size_t i = 0; i < want_bits.size(); ++i) want_bits[i] = f32_bits(want[i]);
  return finish_matmul_report(rep, opt, wall, st.cycles, sh, got, want_bits, [&] {
    if (has("--out")) write_npy_f32(opt.out, res.c, {sh.m, sh.n});
  });
}

// Declares `tpusim matmul` on tool; what it returns runs it once the line is parsed.
std::function<int()> matmul_command(CLI::App& tool) {
  auto a = std::make_shared<MatmulArgs>();
  CLI::App* cmd = tool.add_subcommand("matmul", "one bf16 matmul on one chip, golden-checked");
  a->cmd = cmd;
  cmd->add_option("--config", a->config, "chip configuration (default configs/default.yaml)")
      ->type_name("FILE")
      ->check(cli::input_path());
  cmd->add_option("--variant", a->variant, "override chip.variant (e.g. 8x8)")->type_name("RxC");
  std::vector<CLI::Option*> random = add_matmul_shape(
      cmd, a->m, a->k, a->n, a->seed, 1u << 16,
      {"rows of A (random inputs)", "the contraction (random inputs)",
       "columns of W (random inputs)"},
      "seed of the random inputs");
  random.push_back(cmd->add_option("--dist", a->dist, "value distribution of random inputs")
                       ->type_name("narrow|wide")
                       ->check(CLI::IsMember({"narrow", "wide"}))
                       ->capture_default_str());
  add_matmul_files(cmd, a->a, a->w,
                   "inputs from files (with --w): uint16 (bf16 bits) or float32\n"
                   "(rounded to bf16)",
                   "A.npy", random);
  // Output paths are checked before a long simulation, not after it.
  cmd->add_option("--out", a->out, "write the result as float32")
      ->type_name("C.npy")
      ->check(cli::output_path());
  cmd->add_option("--json", a->json, "write the JSON report")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_option("--waves", a->waves,
                  "dump every signal of the chip (or the MXU) to an FST file")
      ->type_name("FILE.fst")
      ->check(cli::output_path());
  CLI::Option* trace =
      cmd->add_option("--trace", a->trace,
                      "write the timeline (Chrome trace-event JSON: ui.perfetto.dev)")
          ->type_name("FILE")
          ->check(cli::output_path());
  cmd->add_option("--trace-cycles", a->trace_cycles,
                  "only the events that overlap cycles [A, B) of the chip")
      ->option_text("A:B")
      ->check(cli::span())
      ->needs(trace);
  cmd->add_option("--bias", a->bias, "add a bias row (N float32 values) on the VPU")
      ->type_name("B.npy")
      ->check(cli::input_path());
  cmd->add_flag("--relu", a->relu, "ReLU after the bias (VPU)");
  cmd->add_option("--out-dtype", a->out_dtype, "result type (bf16 rounds on the VPU)")
      ->type_name("bf16|f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  cmd->add_flag("--mxu-only", a->mxu_only,
                "run on the bare MXU array (no HBM, DMA, sequencer, VPU)");
  cmd->add_flag("--quiet", a->quiet, "no progress line");
  cmd->add_flag("--check", a->check,
                "check the line, the config, the inputs and the plan (capacities),\n"
                "then stop before the first simulated cycle: exit 0, no files written");
  cli::repeatable(cmd->add_option("--fault", a->faults,
                                  "fault injection, repeatable, over the config's faults:\n"
                                  "section: seed=S, hbm_single_bit_rate=P,\n"
                                  "hbm_double_bit_rate=P (per 64-bit word read),\n"
                                  "hbm_flip_at=ADDR[:BITS] (docs/hbm.md)"))
      ->type_name("KEY=VALUE");
  cmd->add_option("--watchdog", a->watchdog,
                  "stop as hung (exit 3) after this many cycles without progress\n"
                  "(default: the config's chip.watchdog_cycles, 1000000; 0: off)")
      ->type_name("CYCLES")
      ->check(in_range(kWatchdogRange));
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_matmul_cmd(*a); };
}

}  // namespace

namespace tpu {

std::map<std::string, std::function<int()>> tpusim_commands(CLI::App& tool) {
  tool.require_subcommand(0, 1);
  tool.footer("tpusim help COMMAND (or tpusim COMMAND --help): a command's options; "
              "tpusim --version\n"
              "exit codes: 0 ok, 1 golden mismatch, 2 bad input, 3 simulation error or hang");
  return {{"matmul", matmul_command(tool)},         {"traffic", traffic_command(tool)},
          {"allreduce", allreduce_command(tool)},   {"collective", collective_command(tool)},
          {"pod", pod_command(tool)},               {"shard", shard_command(tool)},
          {"train", train_command(tool)},           {"hang", hang_command(tool)},
          {"example-inputs", example_inputs_command(tool)}};
}

}  // namespace tpu

// tpusim links SystemC (the pod): main() (main.cc) starts SystemC, which calls sc_main (a C
// symbol).
extern "C" int sc_main(int argc, char** argv);

namespace {
int run_tool(std::vector<std::string> args);
std::string g_error;  // the error run_tool printed (for the other MPI ranks)
}  // namespace

// Under mpirun with several ranks (docs/scale.md) every rank runs the same command: the pod
// commands split the pod across the ranks (tb/pod/pod_mpi.h) and rank 0 alone prints and writes
// files; the other commands run in one process and refuse several ranks.
int sc_main(int argc, char** argv) {
  std::signal(SIGBUS, on_sigbus);
  const int ranks = mpi_launch_size();
  if (ranks > 1 && !mpi_built()) {
    std::cerr << "tpusim: error: launched with " << ranks
              << " MPI ranks (OMPI_COMM_WORLD_SIZE), but this tpusim was built without MPI, so "
                 "every rank would run the whole job alone; install Open MPI "
                 "(libopenmpi-dev openmpi-bin: scripts/deps.sh) and rebuild, or run it without "
                 "mpirun\n";
    return kExitUsage;
  }
  mpi_init(&argc, &argv);
  if (mpi_world().rank > 0) {  // rank 0 speaks for all
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
      return kExitUsage;
    set_files_muted(true);
  }
  const int rc = run_tool(std::vector<std::string>(argv + 1, argv + argc));
  std::fflush(stdout);
  if (rc >= kExitUsage && mpi_world().size > 1 && !mpi_started()) {
    // Failed before the pod ran: meet the others where a pod command meets them before its
    // first collective (each rank found the same bad input, or the others learn this one's
    // error there); then every rank finalizes and exits with the code, rank 0 having printed.
    mpi_agree_start(g_error.empty() ? "rank " + std::to_string(mpi_world().rank) +
                                          " failed before the pod ran (exit " +
                                          std::to_string(rc) + ")"
                                    : g_error);
  } else if (rc >= kExitUsage) {
    mpi_end_failed(rc);  // 1 (a golden mismatch) every rank computes alike
  }
  mpi_finalize();
  return rc;
}

namespace {

// The command of that name the help lists (hidden ones, group "", left out), or nullptr.
const CLI::App* listed_command(const CLI::App& tool, const std::string& name) {
  for (const CLI::App* c :
       tool.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
    if (c->get_name() == name) return c;
  return nullptr;
}

// An option given before the command (`tpusim --quiet matmul`): the tool itself has none but
// --help and --version, so one that a command takes is named with where it goes. "" when the
// line does not start that way (the parser then says what is wrong).
std::string option_before_command(const CLI::App& tool, const std::vector<std::string>& args) {
  if (args.empty() || args[0].size() < 2 || args[0][0] != '-') return "";
  const std::string flag = args[0].substr(0, args[0].find('='));
  if (flag == "-h" || flag == "--help") return "";
  std::string cmd;  // the command on the line, if any
  for (const std::string& x : args)
    if (listed_command(tool, x) != nullptr) {
      cmd = x;
      break;
    }
  std::string takers;
  for (const CLI::App* c : tool.get_subcommands([](const CLI::App* s) {
         return !s->get_group().empty();
       }))
    if (c->get_option_no_throw(flag) != nullptr) {
      if (c->get_name() == cmd)
        return flag + " is an option of the commands: give it after the command, tpusim " + cmd +
               " " + flag;
      takers += (takers.empty() ? "" : ", ") + c->get_name();
    }
  if (takers.empty()) return "";
  return flag + " is an option of the commands (" + takers + "), not of tpusim: tpusim " +
         (cmd.empty() ? "COMMAND" : cmd) + " " + flag +
         (cmd.empty() ? "" : " does not take it either");
}

int run_tool(std::vector<std::string> args) {
  CLI::App tool("", "tpusim");
  const std::map<std::string, std::function<int()>> commands = tpusim_commands(tool);
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << tpusim_version() << "\n";
    return kExitOk;
  }
  if (!args.empty() && args[0] == "help") {  // tpusim help [COMMAND]: the help, as --help gives it
    if (args.size() > 2) {
      std::cerr << "tpusim: error: unexpected argument '" << args[2]
                << "' (tpusim help COMMAND: one command's options)\n";
      return kExitUsage;
    }
    if (args.size() == 2 && listed_command(tool, args[1]) == nullptr) {
      std::cerr << "tpusim: error: unknown command '" << args[1]
                << "' (tpusim --help: the commands)\n";
      return kExitUsage;
    }
    args = args.size() == 2 ? std::vector<std::string>{args[1], "--help"}
                            : std::vector<std::string>{"--help"};
  }
  const std::string before = option_before_command(tool, args);
  if (!before.empty()) {
    std::cerr << "tpusim: error: " << before << "\n";
    return kExitUsage;
  }
  const int parsed = cli::parse(tool, args);
  if (parsed >= 0) return parsed;
  const std::string cmd = tool.get_subcommands().front()->get_name();
  auto fail = [](const char* kind, const char* what, int code) {
    std::cerr << "tpusim: " << kind << ": " << what << "\n";
    g_error = what;
    return code;
  };
  const bool pod_cmd = cmd == "allreduce" || cmd == "collective" || cmd == "pod" ||
                       cmd == "shard" || cmd == "train" || cmd == "hang";
  try {
    if (!pod_cmd && mpi_world().size > 1)
      throw UsageError("tpusim " + cmd + " runs in one process, not across " +
                       std::to_string(mpi_world().size) +
                       " MPI ranks (the pod commands allreduce, collective, pod, shard and "
                       "train do)");
    return commands.at(cmd)();
  } catch (const CheckStop& e) {  // --check: everything before the first cycle passed
    std::cout << "tpusim " << cmd << ": check passed (stopped " << e.what() << ")\n";
    return kExitOk;
  } catch (const HangError& e) {
    return fail("hang", e.what(), kExitSim);
  } catch (const PodError& e) {
    return fail("simulation error", e.what(), kExitSim);
  } catch (const ChipRtlError& e) {
    return fail("simulation error", e.what(), kExitSim);
  } catch (const RtlError& e) {
    return fail("simulation error", e.what(), kExitSim);
  } catch (const std::exception& e) {  // UsageError, ConfigError, NpyError, invalid_argument...
    return fail("error", e.what(), kExitUsage);
  }
}
}  // namespace
