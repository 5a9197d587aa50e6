#include "train_job.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "mesh_text.h"
#include "npy.h"
#include "output.h"
#include "pod_report.h"
#include "profile.h"
#include "shard_plan.h"
#include "trace.h"

namespace tpu {

namespace {

void save_run(const std::string& dir, const MlpSpec& spec, const std::vector<MlpData>& batches,
              const MlpParams& init, const MlpParams& final_p, const std::vector<float>& losses,
              const Json& hyper) {
  std::filesystem::create_directories(dir);
  const std::size_t N = spec.global_batch(), din = spec.widths.front(), dout = spec.widths.back();
  std::vector<float> x, y;
  for (const MlpData& d : batches) {
    for (bf16_t v : d.x) x.push_back(bf16_to_f32(v));
    y.insert(y.end(), d.t.begin(), d.t.end());
  }
  if (batches.size() == 1) {
    write_npy_f32(dir + "/x.npy", x, {N, din});
    write_npy_f32(dir + "/y.npy", y, {N, dout});
  } else {
    write_npy_f32(dir + "/x.npy", x, {batches.size(), N, din});
    write_npy_f32(dir + "/y.npy", y, {batches.size(), N, dout});
  }
  for (std::size_t l = 0; l < spec.layers(); ++l) {
    const std::size_t in = spec.widths[l], out = spec.widths[l + 1];
    const std::string i = std::to_string(l);
    write_npy_f32(dir + "/init_w" + i + ".npy", init[l].w, {in, out});
    write_npy_f32(dir + "/init_b" + i + ".npy", init[l].b, {out});
    write_npy_f32(dir + "/final_w" + i + ".npy", final_p[l].w, {in, out});
    write_npy_f32(dir + "/final_b" + i + ".npy", final_p[l].b, {out});
  }
  write_npy_f32(dir + "/loss.npy", losses, {losses.size()});
  write_json_file(dir + "/train.json", hyper);
}

// The hyper-parameters save_run writes next to the arrays (train.json).
Json hyper_parameters(const Report& rep, const TrainRunResult& r, int chips, std::size_t steps,
                      uint64_t seed, bool fresh) {
  Json hyper = Json::object();
  hyper["layers"] = rep.json()["train"]["layers"];
  hyper["global_batch"] = static_cast<uint64_t>(r.spec.global_batch());
  hyper["chips"] = static_cast<uint64_t>(chips);
  hyper["steps"] = static_cast<uint64_t>(steps);
  hyper["lr"] = static_cast<double>(r.spec.lr);
  hyper["seed"] = seed;
  hyper["fresh_batches"] = fresh;
  hyper["loss"] = "mean over the global batch and the outputs of (prediction - y)^2";
  hyper["activation"] = "relu on every layer but the last";
  hyper["optimizer"] = "sgd: w = w + g * (-lr), two f32 roundings";
  hyper["numerics"] = "docs/training.md";
  return hyper;
}

}  // namespace

// Each while the run goes on: the progress line is erased first (sw/common/progress.h).
void print_train_table_header() {
  clear_progress_line();
  std::printf("%5s %12s %10s %6s %8s %8s %8s %6s %7s %s\n", "step", "loss", "cycles", "mfu",
              "compute", "comm", "memory", "idle", "ar_hid", "golden");
}

void print_train_table_row(std::size_t s, const TrainStepRecord& st) {
  const Breakdown& b = st.profile.breakdown;
  clear_progress_line();
  std::printf("%5zu %12.6f %10llu %6.3f %8.3f %8.3f %8.3f %6.3f %7.3f %s\n", s, st.loss,
              static_cast<unsigned long long>(st.cycles), st.profile.mfu, b.compute,
              b.communication, b.memory, b.idle, st.hidden, st.golden_pass ? "pass" : "FAIL");
  std::fflush(stdout);
}

void write_json_file(const std::string& path, const Json& rep) {
  if (files_muted()) return;
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::invalid_argument(path + ": cannot open the report for writing");
  const std::string text = json_text(rep) + "\n";
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    throw std::invalid_argument(path + ": writing the report failed (" + std::strerror(errno) +
                                ")");
}

TrainJob::TrainJob(PodConfig cfg, const TrainJobOptions& o) : cfg_(std::move(cfg)), o_(o) {
  const Topology& topo = cfg_.params.topo;
  const int P = topo.num_chips();
  // Data parallel over every chip, or data x model axes (tensor parallel) from the mesh.
  mesh_text_ = "data=" + std::to_string(P);
  Mesh mesh;
  if (!o.mesh.empty()) {
    mesh = parse_train_mesh(o.mesh, topo, {"data", "model", "stage"});
    // An axis of size 1 splits nothing: data=4,model=1 is plain data parallel, data=1,model=4
    // is model=4 (the same programs, the same bits).
    mesh = mesh_without_unit_axes(mesh);
    int stages = 1;
    for (const MeshAxis& ax : mesh.axes) {
      if (ax.name == "model") model_ = ax.size;
      if (ax.name == "stage") stages = ax.size;
    }
    if (model_ > 1 && stages > 1)
      throw std::invalid_argument("--mesh " + o.mesh + ": model and stage axes together are not "
                                  "built for the MLP (tensor parallelism splits a 2-layer MLP)");
    if (model_ > 1 || stages > 1) mesh_text_ = mesh.text();  // else plain data parallel
    pipelined_ = stages > 1;
    stages_ = stages;
    po_.mesh = mesh;
  }
  pipelined_ = pipelined_ || o.microbatches > 1 || !o.stages.empty();
  const int data_ways = P / model_ / stages_;
  spec_.widths = o.widths;
  if (o.global_batch % static_cast<std::size_t>(data_ways) != 0)
    throw std::invalid_argument("--batch " + std::to_string(o.global_batch) +
                                ": the global batch must split evenly over the " +
                                std::to_string(data_ways) + " data-parallel ranks");
  spec_.batch = o.global_batch / static_cast<std::size_t>(data_ways);
  if (pipelined_) setup_pipeline(o);
  spec_.lr = o.lr;
  if (model_ > 1) to_.mesh = mesh;  // else plain data parallel: no axes
  to_.grad_pieces = o.grad_pieces;
  to_.backdoor = o.backdoor;
  if (o.trace_steps && o.trace_steps->second > o.steps)
    throw std::invalid_argument("--trace-steps " + std::to_string(o.trace_steps->first) + ":" +
                                std::to_string(o.trace_steps->second) + ": the run has " +
                                std::to_string(o.steps) + " steps");
}

// The pipeline's flags checked (each error names its flag, the value and the rule) and its
// options set: the schedule, the stages (equal, or --stages), the micro-batches.
void TrainJob::setup_pipeline(const TrainJobOptions& o) {
  const std::string widths = widths_text();
  if (model_ > 1)
    throw std::invalid_argument("--microbatches " + std::to_string(o.microbatches) +
                                ": tensor parallelism (model=" + std::to_string(model_) +
                                ") runs the batch at once");
  for (std::size_t i = 2; i < o.widths.size(); ++i)
    if (o.widths[i] != o.widths[1])
      throw std::invalid_argument("--layers " + widths + ": a pipelined MLP needs every width "
                                  "after the inputs equal (the stages share buffer shapes)");
  po_.schedule = parse_pipe_schedule(o.schedule);
  if (o.microbatches < 1 || spec_.batch % o.microbatches != 0)
    throw std::invalid_argument("--microbatches " + std::to_string(o.microbatches) +
                                ": must divide the " + std::to_string(spec_.batch) +
                                " examples of a data replica's batch");
  check_pipeline(o.widths.size() - 1, stages_, static_cast<int>(o.microbatches), po_.schedule,
                 o.stages);
  po_.stages_text = o.stages;
  po_.microbatches = o.microbatches;
  po_.backdoor = o.backdoor;
}

std::string TrainJob::widths_text() const {
  std::string widths;
  for (std::size_t w : spec_.widths) widths += (widths.empty() ? "" : "-") + std::to_string(w);
  return widths;
}

std::string TrainJob::title() const {
  const Topology& topo = cfg_.params.topo;
  const std::string widths = widths_text();
  const std::string kind = pipelined_  ? "pipeline-parallel (" + pipe_schedule_text(po_.schedule) +
                                             ", " + std::to_string(po_.microbatches) +
                                             " micro-batches)"
                           : model_ > 1 ? "data x tensor parallel"
                                        : "data-parallel";
  return kind + " training of an MLP " + widths + " on " + topo.name() + " (" +
         std::to_string(topo.num_chips()) + " chips " + cfg_.params.variant + ", mesh " +
         mesh_text_ + "), global batch " + std::to_string(o_.global_batch) + ", " +
         std::to_string(o_.steps) + " steps, lr " + o_.lr_text;
}

void TrainJob::run(const EngineOptions& eng, Report& rep,
                   const std::function<void(std::size_t, uint64_t)>& progress) {
  EngineOptions quiet_eng = eng;  // the job writes the timeline of its traced steps itself
  quiet_eng.trace.clear();
  with_engine(quiet_eng, cfg_.params, cfg_.chip.clock_ghz, [&](HostPort& h) {
    mi_ = h.info();
    TrainRunOptions ro;
    ro.steps = o_.steps;
    ro.seed = o_.seed;
    ro.fresh_batches = o_.fresh_batches;
    ro.trace_from = o_.trace_steps ? o_.trace_steps->first : 0;
    ro.trace_to = !eng.trace.empty() ? (o_.trace_steps ? o_.trace_steps->second : 1) : 0;
    if (progress || detail_) {
      const uint64_t c0 = h.cycle();
      ro.progress = [&, c0](std::size_t s, uint64_t cyc) {
        if (progress) progress(s, cyc);
        if (detail_)
          detail_({h.cycle() - c0, s, o_.steps, "",
                   "step " + std::to_string(s + 1) + "/" + std::to_string(o_.steps)});
      };
    }
    const bool table = o_.table && !eng.check;  // a check runs no step
    if (table) {
      print_train_table_header();
      ro.on_step = print_train_table_row;
    }
    const auto t0 = std::chrono::steady_clock::now();
    r_ = pipelined_ ? run_pipeline_training(h, spec_, po_, ro) : run_training(h, spec_, to_, ro);
    run_wall_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pass_ = r_.pass();
    if (!eng.trace.empty()) {
      write_trace(eng.trace, r_.trace, mi_, cfg_.chip.clock_ghz);
      rep.field("trace", eng.trace);
    }
    if (o_.pod_sections) add_pod(rep, cfg_, mi_, eng);
    fill_train_report(rep, r_, mi_);
    if (o_.pod_sections) rep.group("train").field("mesh", mesh_text_);
    if (!o_.save.empty()) {
      std::vector<float> losses;
      for (const TrainStepRecord& st : r_.steps) losses.push_back(static_cast<float>(st.loss));
      save_run(o_.save, r_.spec, r_.batches, r_.init, r_.final_params, losses,
               hyper_parameters(rep, r_, cfg_.params.topo.num_chips(), o_.steps, o_.seed,
                                o_.fresh_batches));
      rep.field("save", o_.save);
    }
  });
}

}  // namespace tpu
