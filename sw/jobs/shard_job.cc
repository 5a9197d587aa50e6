#include "shard_job.h"

#include <chrono>
#include <random>
#include <stdexcept>
#include <utility>

#include "mesh_text.h"
#include "npy.h"
#include "pod_report.h"
#include "trace.h"

namespace tpu {

ShardJob::ShardJob(PodConfig cfg, const ShardJobOptions& o, const std::string& config)
    : cfg_(std::move(cfg)), o_(o), M_(o.m), K_(o.k), N_(o.n) {
  const Topology& topo = cfg_.params.topo;
  if (o.mesh.empty() && cfg_.mesh.empty())
    throw std::invalid_argument(
        "no mesh: give --mesh (e.g. data=2,model=2) or a mesh: section "
        "in " +
        config);
  mesh_ = parse_mesh(!o.mesh.empty() ? o.mesh : cfg_.mesh);
  try {
    check_mesh(topo, mesh_);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(!o.mesh.empty() ? "--mesh: " : "") + e.what());
  }
  // Operands: from files, or random (made in run(), once the plan fits every chip's HBM).
  if (!o.a_file.empty()) {
    std::size_t kr = 0, kw = 0;
    x_ = load_bf16_matrix(o.a_file, &M_, &kr);
    w_ = load_bf16_matrix(o.w_file, &kw, &N_);
    K_ = kr;
    if (M_ == 0 || K_ == 0 || N_ == 0)
      throw std::invalid_argument(o.a_file + ", " + o.w_file +
                                  ": X and W need at least one row and column each");
    if (kw != kr)
      throw std::invalid_argument(o.a_file + " is " + std::to_string(M_) + "x" +
                                  std::to_string(kr) + " and " + o.w_file + " is " +
                                  std::to_string(kw) + "x" + std::to_string(N_) +
                                  ": X's columns must equal W's rows");
  } else if (!o.x.empty() || !o.w.empty()) {
    if (o.x.size() != M_ * K_ || o.w.size() != K_ * N_)
      throw std::invalid_argument("shard " + std::to_string(M_) + "x" + std::to_string(K_) + "x" +
                                  std::to_string(N_) +
                                  ": the given X and W do not have that shape");
    x_ = o.x;
    w_ = o.w;
  }
  if (!o.bias_file.empty()) {
    const NpyArray arr = read_npy(o.bias_file);
    if (arr.dtype != "<f4") throw std::invalid_argument(o.bias_file + ": the bias must be float32");
    so_.bias = arr.as_f32();
    if (so_.bias.size() != N_)
      throw std::invalid_argument(o.bias_file + ": the bias must hold N = " + std::to_string(N_) +
                                  " values (it holds " + std::to_string(so_.bias.size()) + ")");
  }
  so_.relu = o.relu;
  so_.backdoor = o.backdoor;
  const std::string a0 = mesh_.axes[0].name;
  const std::string a1 = mesh_.axes.size() > 1 ? mesh_.axes[1].name : "-";
  const PSpec xs = parse_pspec(!o.x_spec.empty() ? o.x_spec : a0 + ",-", "--x-spec");
  const PSpec ws = parse_pspec(!o.w_spec.empty() ? o.w_spec : "-," + a1, "--w-spec");
  PSpec ys;
  if (!o.y_spec.empty()) ys = parse_pspec(o.y_spec, "--y-spec");
  plan_ = plan_sharding(topo, mesh_, M_, K_, N_, xs, ws, !o.y_spec.empty() ? &ys : nullptr);
}

std::string ShardJob::title() const {
  const Topology& topo = cfg_.params.topo;
  return "sharded matmul " + std::to_string(M_) + "x" + std::to_string(K_) + "x" +
         std::to_string(N_) + " on " + topo.name() + " (" + std::to_string(topo.num_chips()) +
         " chips " + cfg_.params.variant + "), mesh " + mesh_.text() + ": X " + plan_.x.text() +
         ", W " + plan_.w.text() + ", Y " + plan_.y.text();
}

void ShardJob::run(const EngineOptions& eng, Report& rep,
                   const std::function<void(uint64_t)>& progress) {
  // The timeline is always recorded (each phase's cycles come from it); eng.trace writes it.
  TraceOptions topt = eng.trace_options();
  topt.enabled = true;
  EngineOptions quiet_eng = eng;
  quiet_eng.trace.clear();
  quiet_eng.trace_cycles.reset();
  with_engine(quiet_eng, cfg_.params, cfg_.chip.clock_ghz, [&](HostPort& h) {
    const MachineInfo& mi = h.info();
    h.progress = cycles_since_now(h, progress);
    ShardedMatmul sm(h, plan_, so_);
    if (o_.a_file.empty() && o_.x.empty()) {
      std::mt19937_64 rng(o_.seed);
      x_ = random_bf16(rng, M_ * K_);
      w_ = random_bf16(rng, K_ * N_);
    }
    h.set_trace(topt);
    const uint64_t load_cycles = sm.load(x_, w_);
    const auto t0 = std::chrono::steady_clock::now();
    ShardedRun run = sm.run();
    run_wall_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.load_cycles = load_cycles;
    const auto got = sm.read_y(&run);
    h.progress = nullptr;
    const std::vector<TraceEvent> events = h.take_trace();
    set_phase_cycles(&run, events);
    if (!eng.trace.empty()) {
      write_trace(eng.trace, events, mi, cfg_.chip.clock_ghz);
      rep.field("trace", eng.trace);
    }
    chk_ = check_sharded(sm, x_, w_, got);
    pod_cycles_ = run.prog.run.cycles;
    if (o_.pod_sections) add_pod(rep, cfg_, mi, eng);
    fill_shard_report(rep, sm, run, chk_, mi);
    if (!o_.pod_sections) return;
    rep.field("chips", chip_table(run.prog));
    add_links(rep, run.prog.link_flits, uint64_t{mi.shape.cols} * 4, cfg_.params.topo);
  });
}

std::vector<float> ShardJob::y() const {
  std::vector<float> y(chk_.y.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = f32_from_bits(chk_.y[i]);
  return y;
}

void ShardJob::write_y(const std::string& path) const { write_npy_f32(path, y(), {M_, N_}); }

}  // namespace tpu
