#include "matmul_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "check_port.h"
#include "lone_chip.h"
#include "mxu_dut.h"
#include "mxu_runner.h"
#include "npy.h"
#include "profile.h"
#include "tpu/matmul.h"
#include "tpu/perf.h"
#include "trace.h"

namespace tpu {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string shape_text(std::size_t m, std::size_t k, std::size_t n) {
  return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
}

}  // namespace

MatmulJob::MatmulJob(const std::string& config_path, const MatmulJobOptions& o)
    : MatmulJob(load_chip_config(config_path), config_path, o) {}

MatmulJob::MatmulJob(ChipConfig cfg, const std::string& config_path, const MatmulJobOptions& o)
    : cfg_(std::move(cfg)), config_path_(config_path), o_(o) {
  if (o.variant) cfg_.variant = *o.variant;
  if (!o.faults.empty()) {
    apply_fault_flags(cfg_.faults, o.faults);
    check_fault_flags(cfg_.faults, chip_shape(cfg_.variant).hbm_bytes, 1);
  }
  make_inputs();
}

std::string MatmulJob::chose_variant() const {
  // The flag that chose the variant, or the config's key, is the one blamed.
  return o_.variant ? "--variant " + *o_.variant : config_path_ + ": key 'chip.variant'";
}

void MatmulJob::make_inputs() {
  if (!o_.a_file.empty()) {  // --a and --w come together, without the random options (CLI)
    std::size_t ar = 0, ac = 0, wr = 0, wc = 0;
    a_ = load_bf16_matrix(o_.a_file, &ar, &ac);
    w_ = load_bf16_matrix(o_.w_file, &wr, &wc);
    if (ar == 0 || ac == 0)
      throw std::invalid_argument(o_.a_file + ": A must have at least one row and column");
    if (wc == 0) throw std::invalid_argument(o_.w_file + ": W must have at least one column");
    if (wr != ac)
      throw std::invalid_argument(o_.w_file + ": W has " + std::to_string(wr) + " rows but " +
                                  o_.a_file + " has K = " + std::to_string(ac) +
                                  " columns (rule: A is M x K and W is K x N)");
    std::tie(m_, k_, n_) = std::make_tuple(ar, ac, wc);
    inputs_ = "files: A=" + o_.a_file + " W=" + o_.w_file;
    return;
  }
  std::tie(m_, k_, n_) = std::make_tuple(o_.m, o_.k, o_.n);
  if (!o_.a.empty()) {
    if (o_.a.size() != m_ * k_ || o_.w.size() != k_ * n_)
      throw std::invalid_argument("matmul " + shape_text(m_, k_, n_) +
                                  ": the given A and W do not have that shape");
    a_ = o_.a;
    w_ = o_.w;
    inputs_ = "given";
    return;
  }
  // Capacity first: a shape the chip's HBM cannot hold is refused before gigabytes of inputs
  // are generated (the variant's own errors come later, with their wording).
  check_capacity();
  std::mt19937_64 rng(o_.seed);
  const bool narrow = o_.dist == "narrow";
  auto draw = [&]() -> bf16_t {
    const auto sign = static_cast<uint16_t>((rng() & 1u) << 15);
    const auto mant = static_cast<uint16_t>(rng() & 0x7Fu);
    const auto e = static_cast<uint16_t>(narrow ? 127 - 4 + rng() % 9 : rng() % 255);
    return static_cast<bf16_t>(sign | (e << 7) | mant);
  };
  a_.resize(m_ * k_);
  w_.resize(k_ * n_);
  for (auto& x : a_) x = draw();
  for (auto& x : w_) x = draw();
  inputs_ = "random: seed=" + std::to_string(o_.seed) + " dist=" + o_.dist;
}

void MatmulJob::check_capacity() const {
  if (o_.mxu_only) {
    // The MXU alone has no HBM: the operands and the result live in host memory.
    const uint64_t host = 2 * (uint64_t{m_} * k_ + uint64_t{k_} * n_) + 8 * uint64_t{m_} * n_;
    if (host > (uint64_t{1} << 31))
      throw std::invalid_argument("matmul " + shape_text(m_, k_, n_) +
                                  " --mxu-only: the operands and results need " +
                                  std::to_string(host) + " bytes of host memory (limit 2 GiB)");
    return;
  }
  ChipShape cs;
  try {
    cs = cfg_.shape();
  } catch (const std::invalid_argument&) {
    return;  // an unknown variant is named later, with its own words
  }
  MatmulOptions need;
  need.out_bf16 = o_.out_dtype == "bf16";
  std::vector<float> no_bias;
  if (!o_.bias_file.empty()) need.bias = &no_bias;
  check_matmul_fits(cs, m_, k_, n_, need);
}

std::string MatmulJob::label() const {
  return "matmul " + shape_text(m_, k_, n_) + (o_.mxu_only ? " on MXU " : " on chip ") +
         cfg_.variant;
}

void MatmulJob::run(const std::function<void(uint64_t, uint64_t, const char*)>& progress) {
  if (o_.mxu_only)
    run_mxu(progress);
  else
    run_chip(progress);
  mismatches_ = 0;
  first_bad_ = -1;
  for (std::size_t i = 0; i < want_.size(); ++i)
    if (got_[i] != want_[i]) {
      if (first_bad_ < 0) first_bad_ = static_cast<long>(i);
      ++mismatches_;
    }
}

// The whole chip: data in HBM, DMA, sequencer, MXU and the VPU epilogue (sw/driver).
void MatmulJob::run_chip(const std::function<void(uint64_t, uint64_t, const char*)>& progress) {
  MatmulOptions mo;
  if (!o_.bias_file.empty()) {
    const NpyArray arr = read_npy(o_.bias_file);  // shape (N,) or (1, N), float32
    if (arr.dtype != "<f4")
      throw std::invalid_argument(o_.bias_file + ": the bias must be float32");
    const bool row = arr.shape.size() == 1
                         ? arr.shape[0] == n_
                         : arr.shape.size() == 2 && arr.shape[0] == 1 && arr.shape[1] == n_;
    if (!row) {
      std::string got;
      for (const size_t d : arr.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      throw std::invalid_argument(
          o_.bias_file + ": the bias must have shape (" + std::to_string(n_) + ",) or (1, " +
          std::to_string(n_) + ") for N = " + std::to_string(n_) + " (it has shape (" + got + "))");
    }
    bias_ = arr.as_f32();
    mo.bias = &bias_;
  }
  mo.relu = o_.relu;
  mo.out_bf16 = o_.out_dtype == "bf16";
  try {
    (void)cfg_.shape();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(chose_variant() + ": " + e.what());
  }
  // A check plans over a CheckPort of the chip, which stops it before the first simulated
  // cycle (no waves are opened).
  std::unique_ptr<LoneChip> machine;
  std::unique_ptr<CheckPort> check;
  std::unique_ptr<ChipDriver> checked;
  try {
    machine =
        std::make_unique<LoneChip>(cfg_.variant, cfg_.hbm, o_.check ? "" : o_.waves, cfg_.faults,
                                   cfg_.clock_ghz, cfg_.vmem_rows, cfg_.amem_rows);
  } catch (const std::invalid_argument& e) {
    const auto mxus = built_mxu_variants();
    const bool mxu = std::find(mxus.begin(), mxus.end(), cfg_.variant) != mxus.end();
    throw std::invalid_argument(chose_variant() + ": " + e.what() +
                                (mxu ? " (its MXU alone is built: add --mxu-only)" : ""));
  }
  ChipDriver* drv = machine.get();
  if (o_.check) {
    check = std::make_unique<CheckPort>(machine->port());
    checked = std::make_unique<ChipDriver>(*check, 0);
    drv = checked.get();
  }
  TraceOptions topt;
  topt.enabled = !o_.trace.empty();
  if (o_.trace_cycles) std::tie(topt.from, topt.to) = *o_.trace_cycles;
  if (topt.enabled) drv->port().set_trace(topt);
  drv->port().set_watchdog(o_.watchdog ? *o_.watchdog : cfg_.watchdog_cycles);
  const auto t0 = std::chrono::steady_clock::now();
  if (progress || detail_) {
    // The driver tells the program's length; the commands its host port still holds are those
    // the chip has not taken (a plain read of the lone chip's state: no cycle passes).
    const uint64_t c0 = drv->port().cycle();
    drv->progress = [&, c0](uint64_t, uint64_t cmds) {
      const uint64_t issued = cmds - std::min(cmds, drv->port().status(drv->chip()).cmds_waiting);
      if (progress) progress(issued, cmds, "commands issued");
      if (detail_) detail_({drv->port().cycle() - c0, issued, cmds, "commands issued", ""});
    };
  }
  r_ = drv->matmul(a_, w_, m_, k_, n_, mo);
  drv->progress = nullptr;
  wall_ = seconds_since(t0);
  if (topt.enabled) events_ = drv->port().take_trace();
  const std::string late = trace_window_warning(topt.from, topt.to, drv->port().cycle());
  if (o_.trace_cycles && !late.empty()) {
    clear_progress_line();
    std::cerr << "tpusim: warning: " << late << "\n";
  }
  want_ = golden_chip_matmul(a_, w_, m_, k_, n_, mo);
  got_ = r_.c_bits;
  c_.resize(r_.c_bits.size());
  for (std::size_t i = 0; i < c_.size(); ++i)
    c_[i] =
        mo.out_bf16 ? bf16_to_f32(static_cast<bf16_t>(r_.c_bits[i])) : f32_from_bits(r_.c_bits[i]);
  shape_ = drv->shape();
  mi_ = drv->port().info();
  cycles_ = r_.prog.cycles;
  const uint64_t tiles =
      ((k_ + shape_.rows - 1) / shape_.rows) * ((n_ + shape_.cols - 1) / shape_.cols);
  rep_.emplace("matmul " + shape_text(m_, k_, n_) + " (M x K x N) on chip " + cfg_.variant + ": " +
               std::to_string(tiles) + " tiles, " + std::to_string(r_.commands) + " commands");
  chip_report(*rep_);
}

void MatmulJob::chip_report(Report& rep) const {
  const ChipShape& s = shape_;
  const ProgramResult& p = r_.prog;
  const uint64_t cycles = p.cycles;
  const double util =
      cycles ? static_cast<double>(p.delta[kStatMxuBeats]) / static_cast<double>(cycles) : 0.0;
  const double bw = cycles ? static_cast<double>(r_.hbm_bytes) / static_cast<double>(cycles) : 0.0;
  const double frac =
      cycles ? static_cast<double>(r_.roofline_cycles) / static_cast<double>(cycles) : 0.0;
  const uint64_t tiles = ((k_ + s.rows - 1) / s.rows) * ((n_ + s.cols - 1) / s.cols);
  const uint64_t macs = static_cast<uint64_t>(m_ * k_ * n_);
  rep.field("tool", "tpusim").field("command", "matmul").field("mode", "chip");
  rep.field("config", cfg_.source).field("variant", cfg_.variant);
  rep.metric("array_rows", s.rows, "", "MXU rows").metric("array_cols", s.cols, "", "MXU columns");
  rep.group("shape").metric("m", m_, "", "rows of A").metric("k", k_, "", "the contraction");
  rep.group("shape").metric("n", n_, "", "columns of W");
  rep.group("epilogue")
      .field("bias", !o_.bias_file.empty())
      .field("relu", o_.relu)
      .field("out_dtype", o_.out_dtype ? *o_.out_dtype : std::string("f32"));
  rep.field("inputs", inputs_).metric("tiles", tiles, "", "K tiles x N tiles of the array");
  rep.metric("cycles", cycles, "cycles", "the on-chip program", true);
  rep.metric("ideal_cycles", r_.compute_cycles, "cycles", "M x ceil(K/R) x ceil(N/C) beats", true);
  rep.metric("utilization", util, "fraction", "MXU activation beats / cycles", true);
  // mfu (useful MACs / (peak MACs x cycles)) and where the cycles went, from the RTL counters.
  report_profile(rep, {p.delta}, cycles, macs, peak_macs_per_cycle(s.rows, s.cols));
  rep.metric("useful_macs", macs, "", "M x K x N");
  rep.metric("commands", r_.commands, "", "commands of the program");
  rep.metric("m_chunk", r_.m_chunk, "rows", "rows of A per on-chip chunk");
  ReportGroup& hbm = rep.group("hbm");
  hbm.metric("bytes", r_.hbm_bytes, "bytes", "the DMA's HBM traffic", true);
  hbm.metric("read_bytes", p.delta[kStatDmaRdBytes], "bytes", "read by the DMA");
  hbm.metric("write_bytes", p.delta[kStatDmaWrBytes], "bytes", "written by the DMA");
  hbm.metric("bytes_per_cycle", bw, "B/cycle", "achieved HBM bandwidth", true);
  hbm.metric("gb_per_s", bw / cfg_.hbm.tck_ns, "GB/s", "at the HBM clock");
  hbm.metric("peak_bytes_per_cycle", r_.peak_bytes_per_cycle, "B/cycle", "channels x 32 B");
  ReportGroup& busy = rep.group("busy_cycles");
  busy.metric("dma", p.delta[kStatDmaBusy], "cycles", "the DMA engine busy", true);
  busy.metric("mxu", p.delta[kStatMxuBusy], "cycles", "the MXU unit busy", true);
  busy.metric("vpu", p.delta[kStatVpuBusy], "cycles", "the VPU busy", true);
  busy.metric("dma_and_mxu", p.delta[kStatOverlap], "cycles", "both at once", true);
  ReportGroup& roof = rep.group("roofline");
  roof.metric("compute_cycles", r_.compute_cycles, "cycles", "the MXU's beats");
  roof.metric(
      "memory_cycles",
      static_cast<uint64_t>(static_cast<double>(r_.hbm_bytes) / r_.peak_bytes_per_cycle + 0.5),
      "cycles", "the HBM traffic at peak");
  roof.metric("bound_cycles", r_.roofline_cycles, "cycles", "the larger of the two", true);
  roof.metric("achieved_fraction", frac, "fraction", "bound / cycles", true);
}

// The bare MXU array: the operands stream in from the host, no HBM.
void MatmulJob::run_mxu(const std::function<void(uint64_t, uint64_t, const char*)>& progress) {
  const bool given_dtype = o_.out_dtype.has_value();
  const std::pair<const char*, bool> whole_chip[] = {
      {"--bias", !o_.bias_file.empty()},
      {"--relu", o_.relu},
      {"--out-dtype", given_dtype},
      {"--trace", !o_.trace.empty()},
      {"--trace-cycles", o_.trace_cycles.has_value()}};
  for (const auto& [flag, given] : whole_chip)
    if (given)
      throw std::invalid_argument(std::string(flag) + " needs the whole chip (drop --mxu-only)");
  std::unique_ptr<MxuDut> dut;
  try {
    dut = make_mxu(cfg_.variant);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(chose_variant() + ": " + e.what());
  }
  if (o_.check) throw CheckStop("after the array was built, before its first cycle");
  if (!o_.waves.empty()) dut->open_waves(o_.waves, cfg_.clock_ghz);
  MxuRunOptions ro;
  const MatmulShape sh{m_, k_, n_};
  const auto t0 = std::chrono::steady_clock::now();
  ro.progress_every = 4096;
  if (progress || detail_) {
    const uint64_t c0 = dut->cycle();
    ro.progress = [&, c0](uint64_t done, uint64_t total) {
      if (progress) progress(done, total, "result rows");
      if (detail_) detail_({dut->cycle() - c0, done, total, "result rows", ""});
    };
  }
  const MxuRunResult res = run_matmul(*dut, sh, a_, w_, nullptr, ro);
  wall_ = seconds_since(t0);
  const auto want = golden_matmul(a_, w_, m_, k_, n_);
  const MxuRunStats& st = res.stats;
  cycles_ = st.cycles;
  c_ = res.c;
  got_.resize(res.c.size());
  want_.resize(want.size());
  for (std::size_t i = 0; i < got_.size(); ++i) got_[i] = f32_bits(res.c[i]);
  for (std::size_t i = 0; i < want_.size(); ++i) want_[i] = f32_bits(want[i]);
  rep_.emplace("matmul " + shape_text(m_, k_, n_) + " (M x K x N) on MXU " + cfg_.variant + ": " +
               std::to_string(st.tiles) + " tiles");
  Report& rep = *rep_;
  rep.field("tool", "tpusim").field("command", "matmul").field("config", cfg_.source);
  rep.field("variant", cfg_.variant);
  rep.metric("array_rows", dut->rows(), "", "MXU rows")
      .metric("array_cols", dut->cols(), "", "MXU columns");
  rep.group("shape").metric("m", m_, "", "rows of A").metric("k", k_, "", "the contraction");
  rep.group("shape").metric("n", n_, "", "columns of W");
  rep.field("inputs", inputs_).metric("tiles", st.tiles, "", "K tiles x N tiles of the array");
  rep.metric("cycles", st.cycles, "cycles", "the array's run", true);
  rep.metric("ideal_cycles", st.ideal_cycles, "cycles", "activation beats of the work", true);
  rep.metric("utilization", st.utilization, "fraction", "busy beats / cycles", true);
  rep.metric("mfu", st.mfu, "fraction", "useful MACs / (peak MACs x cycles)", true);
  rep.metric("useful_macs", st.macs_useful, "", "M x K x N");
  rep.metric("activation_beats", st.a_beats, "", "activation rows into the array");
  rep.metric("weight_beats", st.w_beats, "", "weight rows into the array");
}

Report MatmulJob::take_report() {
  Report rep = std::move(*rep_);
  rep_.reset();
  rep.set_golden(pass(), want_.size(), mismatches_);
  rep.metric("wall_seconds", wall_, "s", "host time");
  rep.metric("sim_cycles_per_second", wall_ > 0 ? static_cast<double>(cycles_) / wall_ : 0.0,
             "cycles/s", "simulated cycles per host second");
  if (!o_.out.empty()) rep.field("out", o_.out);
  if (!o_.waves.empty()) rep.field("waves", o_.waves);
  if (!o_.trace.empty()) rep.field("trace", o_.trace);
  return rep;
}

void MatmulJob::print_check() const {
  std::printf("  golden check: %s (%zu of %zu outputs differ)\n", pass() ? "PASS" : "FAIL",
              mismatches_, want_.size());
  if (!pass() && first_bad_ >= 0) {
    const auto i = static_cast<std::size_t>(first_bad_);
    std::printf("  first mismatch at [%zu,%zu]: got %08x, golden %08x\n", i / n_, i % n_, got_[i],
                want_[i]);
  }
}

void MatmulJob::write_outputs() const {
  if (!o_.out.empty()) write_npy_f32(o_.out, c_, {m_, n_});
  if (!o_.trace.empty() && !o_.mxu_only) write_trace(o_.trace, events_, mi_, cfg_.clock_ghz);
}

}  // namespace tpu
