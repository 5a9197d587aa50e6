#include "pod_job.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "profile.h"
#include "scheduler.h"
#include "tpu/bf16.h"
#include "tpu/perf.h"

namespace tpu {

PodJob::PodJob(PodConfig cfg, const PodJobOptions& o) : cfg_(std::move(cfg)), o_(o) {
  const Topology& topo = cfg_.params.topo;
  spec_.algorithm = !o.algorithm.empty()             ? o.algorithm
                    : topo.active_dims().size() >= 2 ? "torus"
                                                     : "biring";
}

void PodJob::run(const EngineOptions& eng, const std::function<void(uint64_t)>& progress) {
  const int P = cfg_.params.topo.num_chips();
  const std::size_t chips = static_cast<std::size_t>(P);
  const auto t0 = std::chrono::steady_clock::now();
  with_engine(eng, cfg_.params, cfg_.chip.clock_ghz, [&](HostPort& h) { run_on(h, progress); });
  wall_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  mm_bad_ = 0;
  for (std::size_t c = 0; c < chips; ++c) mm_bad_ += c_bits_[c] != want_c_[c];
  // The all-reduce's golden: the rounds the driver ran, on the C buffers as they are in HBM;
  // and the sum of the golden matmuls for the M x N elements that are results.
  const auto want = golden_collective(ar_.rounds, c_whole_);
  ar_bad_ = 0;
  for (std::size_t c = 0; c < chips; ++c)
    for (std::size_t i = 0; i < spec_.n; ++i) ar_bad_ += ar_out_[c][i] != want[c][i];
  f64_ = f64_check(ar_.plan, {}, c_whole_, ar_out_);
}

// The job as op lists on named buffers (A, W, C, and the sum), run through the scheduler in two
// programs, each alone and each with its own cycles in the report: the matmul on every chip
// (ending with plan_matmul's HALT), then the all-reduce of C where the matmuls left it, with the
// whole VMEM and every ICI counter (what PodDriver::run gives a collective).
void PodJob::run_on(HostPort& h, const std::function<void(uint64_t)>& progress) {
  const std::size_t M = o_.m, K = o_.k, N = o_.n;
  const int P = cfg_.params.topo.num_chips();
  const std::size_t chips = static_cast<std::size_t>(P);
  mm_.assign(chips, {});
  want_c_.assign(chips, {});
  c_bits_.assign(chips, {});
  c_whole_.assign(chips, {});
  ar_out_.assign(chips, {});
  mi_ = h.info();
  h.progress = cycles_since_now(h, progress);
  Workload wl(h);
  const int a = wl.add_buffer(Buffer{"A", M, K, Dtype::kBf16});
  const int w = wl.add_buffer(Buffer{"W", K, N, Dtype::kBf16});
  const int cb = wl.add_buffer(Buffer{"C", M, N, Dtype::kF32});
  // The all-reduce reads every C where the matmul left it (rows x pitch f32, padding included)
  // and writes the sum into a buffer of the same size.
  const HbmMatrix cm = wl.matrix(cb);
  spec_.n = cm.rows * cm.pitch;
  const int sum =
      wl.add_buffer(Buffer{"C summed", cm.rows, cm.cols, Dtype::kF32, cm.pitch, cm.bytes()});
  // Every chip's operands, copied in through every host port at once.
  std::vector<std::vector<uint8_t>> a_img(chips), w_img(chips);
  for (std::size_t i = 0; i < chips; ++i) {
    std::mt19937_64 rng(o_.seed * 1000 + static_cast<uint64_t>(i));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<bf16_t> av(M * K), wv(K * N);
    for (auto& v : av) v = f32_to_bf16(nd(rng));
    for (auto& v : wv) v = f32_to_bf16(nd(rng));
    a_img[i] = wl.driver(static_cast<int>(i)).matrix_image(wl.matrix(a), av);
    w_img[i] = wl.driver(static_cast<int>(i)).matrix_image(wl.matrix(w), wv);
    want_c_[i] = golden_chip_matmul(av, wv, M, K, N, MatmulOptions{});
  }
  wl.add_op(host_copy_op("A in", whole(a), true, &a_img));
  wl.add_op(host_copy_op("W in", whole(w), true, &w_img));
  in_cycles_ = run_host_copies(wl, true);
  // One SPMD program: every chip's matmul at once.
  const int mm_op = wl.add_op(matmul_op("matmul", whole(cb), whole(a), whole(w)));
  ScheduleOptions mo;
  mo.halt = true;
  const Schedule ms = schedule(wl, mo);
  PodDriver pd(h);
  mm_run_ = pd.run_programs(ms.program);
  for (int c = 0; c < P; ++c) {
    const std::size_t i = static_cast<std::size_t>(c);
    mm_[i] = ms.matmuls[static_cast<std::size_t>(mm_op)][i];
    ProgramResult pr;
    pr.cycles = mm_run_.run.chip_cycles[i];
    pr.delta = mm_run_.chip_delta[i];
    wl.driver(c).finish_matmul(&mm_[i], pr);
    if (h.status(c).halted) h.clear(c);  // the program's final HALT
  }
  run_all_reduce(wl, cb, sum);
  // Results checked through the backdoor (no simulated time).
  for (int c = 0; c < P; ++c) {
    const std::size_t i = static_cast<std::size_t>(c);
    std::vector<uint8_t> b(cm.bytes());
    h.backdoor_read(c, cm.addr, b.data(), b.size());
    c_bits_[i] = ChipDriver::matrix_from_image(cm, b);
    c_whole_[i].resize(spec_.n);
    std::memcpy(c_whole_[i].data(), b.data(), spec_.n * 4);
    h.backdoor_read(c, wl.matrix(sum).addr, b.data(), b.size());
    ar_out_[i].resize(spec_.n);
    std::memcpy(ar_out_[i].data(), b.data(), spec_.n * 4);
  }
  backdoor_bytes_ = h.backdoor_bytes();
  h.progress = nullptr;
}

// The all-reduce of buffer `in` into `out` on every chip, a program alone (the collective's
// plan, rounds and run into ar_, as PodDriver::run gives them).
void PodJob::run_all_reduce(Workload& wl, int in, int out) {
  CollectiveOp co;
  co.spec = spec_;
  co.in = whole(in);
  co.out = whole(out);
  ScheduleOptions ao;
  ao.first_op = wl.ops().size();
  ao.alone = true;
  wl.add_op(collective_op(collective_phase(spec_).name, co));
  const Schedule as = schedule(wl, ao);
  const PodProgram& pp = as.collectives.at(0);
  PodDriver pd(wl.host());
  ar_ = PodCollectiveRun{};
  ar_.plan = pd.plan(spec_);
  ar_.commands = as.program.commands();
  ar_.vmem_rows_used = pp.vmem_rows_used;
  ar_.block_rows = pp.block_rows;
  ar_.row_bytes = uint64_t{mi_.shape.cols} * 4;
  ar_.link_bytes_per_cycle = mi_.link_bytes_per_cycle;
  ar_.prog = pd.run_programs(as.program);
  ar_.collective_cycles = ar_.prog.run.cycles;
  ar_.rounds = pp.rounds;
}

Report PodJob::report(const EngineOptions& eng) const {
  const Topology& topo = cfg_.params.topo;
  const std::size_t M = o_.m, K = o_.k, N = o_.n;
  const int P = topo.num_chips();
  uint64_t pod_cycles = mm_run_.run.cycles, sum_cycles = 0, ideal = 0;
  Json chips = Json::array();
  for (int c = 0; c < P; ++c) {
    const MatmulRun& m = mm_[static_cast<std::size_t>(c)];
    sum_cycles += m.prog.cycles;
    ideal = std::max(ideal, m.compute_cycles);
    chips.push_back(Json::object({{"chip", c},
                                  {"cycles", m.prog.cycles},
                                  {"ideal_cycles", m.compute_cycles},
                                  {"hbm_bytes", m.hbm_bytes},
                                  {"mxu_busy_cycles", m.prog.delta[kStatMxuBusy]}}));
  }
  const CollectiveBound bound = collective_bound(
      Collective::kAllReduce, P, static_cast<double>(spec_.n) * 4.0, topology_links_per_chip(topo),
      mi_.link_bytes_per_cycle,
      collective_hbm_bytes(Collective::kAllReduce, P, static_cast<double>(spec_.n) * 4.0),
      mi_.shape.hbm_channels * 32.0);
  const uint64_t macs = matmul_useful_macs(M, K, N) * static_cast<uint64_t>(P);
  const uint64_t peak = peak_macs_per_cycle(mi_.shape.rows, mi_.shape.cols);
  const uint64_t ar_cycles = ar_.collective_cycles;

  Report rep("pod job on " + topo.name() + " (" + std::to_string(P) + " chips " +
             cfg_.params.variant + "): matmul " + std::to_string(M) + "x" + std::to_string(K) +
             "x" + std::to_string(N) + " on every chip at once, then an all-reduce (" +
             spec_.algorithm + ") of the results in HBM");
  rep.field("command", "pod");
  add_pod(rep, cfg_, mi_, eng);
  rep.metric("cycles", pod_cycles + ar_cycles, "cycles",
             "the job's programs: matmuls, then the all-reduce", true);
  ReportGroup& mg = rep.group("matmul");
  mg.metric("m", M, "", "").metric("k", K, "", "").metric("n", N, "", "");
  mg.metric("pod_cycles", pod_cycles, "cycles", "the slowest chip: the chips run at once", true);
  mg.metric("ideal_cycles", ideal, "cycles", "M x ceil(K/R) x ceil(N/C) activation beats", true);
  mg.metric("sum_of_chip_cycles", sum_cycles, "cycles", "what one chip after another would take");
  mg.set_mfu(pod_cycles ? mfu(macs, P, peak, pod_cycles) : 0.0);
  mg.metric("host_copy_cycles", in_cycles_, "cycles", "A and W into every chip's HBM at once");
  mg.field("chips", chips);
  mg.metric("mismatching_chips", mm_bad_, "", "chips whose C differs from the golden", true);
  ReportGroup& ag = rep.group("all_reduce");
  ag.field("algorithm", spec_.algorithm);
  ag.metric("elements", spec_.n, "", "f32 elements per chip (C with its row padding)");
  ag.set_cycles(ar_cycles, bound.ici_cycles);
  ag.metric("hbm_bound_cycles", bound.hbm_cycles, "cycles",
            "the C buffers read and the sums written at the chip's peak HBM bandwidth");
  ag.metric("fraction_of_hardware_bound",
            ar_cycles ? bound.ideal_cycles / static_cast<double>(ar_cycles) : 0.0, "fraction",
            "max(ici, hbm) / cycles", true);
  ag.metric("rounds", ar_.rounds.size(), "", "rounds through VMEM");
  ag.set_mismatches(ar_bad_);
  add_links(rep, ar_.prog.link_flits, ar_.row_bytes, topo);
  // Where the job's cycles went (RTL counters over the matmuls and the all-reduce).
  std::vector<ChipCounters> job_delta;
  for (int c = 0; c < P; ++c) {
    ChipCounters d = mm_run_.chip_delta[static_cast<std::size_t>(c)];
    const ChipCounters& a = ar_.prog.chip_delta[static_cast<std::size_t>(c)];
    for (unsigned k = 0; k < kNumChipStats; ++k) d.v[k] += a.v[k];
    job_delta.push_back(d);
  }
  report_profile(rep, job_delta, pod_cycles + ar_cycles, macs, peak);
  if (!eng.trace.empty()) rep.field("trace", eng.trace);
  rep.metric("backdoor_bytes", backdoor_bytes_, "bytes",
             "results read by the backdoor for the check");
  rep.set_golden(pass(), static_cast<uint64_t>(P) * (M * N + spec_.n), mm_bad_ + ar_bad_);
  rep.metric("wall_seconds", wall_, "s", "host time of the simulation");
  return rep;
}

}  // namespace tpu
