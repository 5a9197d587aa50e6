// TrainJob: `tpusim train`, data-parallel (and tensor- or pipeline-parallel) SGD of a multilayer perceptron
// on the pod (docs/training.md): the mesh and batch split checked, the steps run with every one
// checked bit for bit against the golden, the per-step table, the timeline of the chosen steps,
// the report and the saved run (to replay in numpy or JAX). bench_train runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chip_config.h"
#include "engine.h"
#include "progress.h"
#include "report.h"
#include "pipeline_train.h"
#include "train_step.h"

namespace tpu {

struct TrainJobOptions {
  // Data parallel over every chip (""), or axes data=D,model=M over the torus dimensions: M > 1
  // splits the hidden layer of a 2-layer MLP over M chips.
  std::string mesh;
  std::vector<std::size_t> widths = {64, 128, 32};  // inputs first
  std::size_t global_batch = 256;                   // split evenly over the data-parallel ranks
  float lr = 0.5f;
  std::string lr_text = "0.5";  // as given, for the title
  std::size_t steps = 20;
  uint64_t seed = 1;  // data, teacher and initial weights
  bool fresh_batches = false;
  std::size_t grad_pieces = 4;
  // Pipeline parallelism (docs/training.md, "Pipeline"): a `stage` axis in the mesh, or more
  // than one micro-batch, runs the pipelined step (PipelineTrainer); else the step above.
  std::string stages;            // --stages "0-1,2-3" ("": equal stages)
  std::size_t microbatches = 1;  // per step and data replica
  std::string schedule = "gpipe";
  bool backdoor = false;  // data and weights in through the backdoor
  std::optional<std::pair<std::size_t, std::size_t>> trace_steps;  // [A, B), default 0:1
  std::string save;                                                // the run's directory ("": none)
  // tpusim's sections of the report: the pod (add_pod) and the train group's mesh.
  bool pod_sections = true;
  bool table = true;  // the per-step table on stdout
};

// The per-step table (header and a row), the progress line erased first: tpusim train's, for
// the MLP and the GPT alike.
void print_train_table_header();
void print_train_table_row(std::size_t s, const TrainStepRecord& st);
// Writes a JSON file (indented); std::invalid_argument if it cannot be opened or the write
// fails or is cut short (a full disk).
void write_json_file(const std::string& path, const Json& rep);

class TrainJob {
 public:
  // The mesh, the batch split and the traced steps checked (std::invalid_argument naming the
  // flag and the rule).
  TrainJob(PodConfig cfg, const TrainJobOptions& o);

  // "data-parallel training of an MLP 64-128-32 on 2x2 (...), global batch 256, 20 steps, lr 0.5".
  std::string title() const;
  // On the engine: the steps, the table (unless quiet or a check), the timeline written to
  // eng.trace, rep filled (fill_train_report), the run saved. progress: (step from 0, the pod's
  // cycles since that step began), now and then while a step runs.
  void run(const EngineOptions& eng, Report& rep,
           const std::function<void(std::size_t, uint64_t)>& progress = nullptr);
  // Beside run()'s progress (not instead): the pod's cycles since the run began (the load and
  // every step before), the steps done of the total and the phase "step S/N" (from 1).
  void set_progress(RunProgressFn f) { detail_ = std::move(f); }

  std::string widths_text() const;  // "64-128-32"
  bool pass() const { return pass_; }
  const TrainRunResult& result() const { return r_; }
  const MachineInfo& info() const { return mi_; }
  double run_seconds() const { return run_wall_; }  // host time of the steps, checks included

 private:
  void setup_pipeline(const TrainJobOptions& o);
  PodConfig cfg_;
  TrainJobOptions o_;
  MlpSpec spec_;
  TrainOptions to_;
  std::string mesh_text_;
  int model_ = 1;
  int stages_ = 1;
  bool pipelined_ = false;
  PipelineOptions po_;
  TrainRunResult r_;
  MachineInfo mi_;
  bool pass_ = true;
  double run_wall_ = 0;
  RunProgressFn detail_;
};

}  // namespace tpu
