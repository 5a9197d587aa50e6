// PipelineTrainer: the MLP training step with pipeline parallelism over a `stage` mesh axis
// (docs/training.md, "Pipeline"). The layers are split into P contiguous stages (or P x v chunks
// for interleaved); the chips of stage s hold only its layers' parameters, gradients and
// optimizer state, in buffers shaped alike on every stage. Each data replica's batch runs as M
// micro-batches in the order of a schedule's table of slots (tpu/pipeline.h): a forward slot
// receives the activation from the stage before over ICI (a receive op: an ICI_WAIT on its
// window's counter), runs its layers and sends its output on (a send op); a backward slot
// receives the gradient, runs its layers' backward with the gradient accumulated over the
// micro-batches in f32 (micro-batch 0 first, a VPU add after each) and sends the input's
// gradient back. Then the gradients are all-reduced over the `data` axis and SGD runs. Every
// command is labelled with its slot ("F mb3", "B mb3", "send act mb3", ...), which is how the
// timeline shows the pipeline and how the bubble is measured.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host_port.h"
#include "tpu/mesh.h"
#include "tpu/pipeline.h"
#include "tpu/train.h"
#include "train_step.h"

namespace tpu {

struct PipelineOptions {
  // Axes `data` and `stage` over the pod's dimensions (their product the pod's chips); no stage
  // axis: one stage (micro-batches and gradient accumulation only).
  Mesh mesh;
  std::string stages_text;       // --stages "0-1,2-3" ("": equal stages)
  std::size_t microbatches = 1;  // per step and data replica
  PipeSchedule schedule;
  bool backdoor = false;  // data and parameters in through the backdoor
};

class PipelineTrainer {
 public:
  // spec.widths, spec.batch (examples per data replica), spec.lr; the rest is set here: chips =
  // the data replicas (the golden's chips), microbatches, lanes and loss_chunk. The widths after
  // the first must be equal (the stages share buffer shapes). std::invalid_argument naming the
  // rule when it cannot run.
  PipelineTrainer(HostPort& host, MlpSpec spec, PipelineOptions opt);
  ~PipelineTrainer();

  const MlpSpec& spec() const { return spec_; }  // the golden's (chips = data replicas)
  int stages() const;
  int stage_of(int chip) const;
  int data_rank_of(int chip) const;
  const std::vector<std::vector<PipeSlot>>& slots() const;
  std::vector<std::size_t> layers_of_stage(int stage) const;
  uint64_t hbm_bytes_per_chip() const { return hbm_used_; }
  uint64_t step_macs() const;  // useful multiply-adds of a step, all chips

  uint64_t load_data(const MlpData& data);
  uint64_t load_params(const MlpParams& params);
  // One step: every chip at once until idle, then the last stage's loss partials read (per data
  // rank, per micro-batch: MlpStepResult::loss_parts' order).
  TrainStepRun step();
  // A chip's parameters (its stage's layers; the others' left empty), through the backdoor.
  MlpParams read_params(int chip);
  GradAllReduce golden_all_reduce() const;
  // The bubbles and peak activation memory of a step from its timeline.
  PipelineStats measure(const std::vector<TraceEvent>& events) const;

 private:
  struct Impl;
  HostPort& host_;
  MlpSpec spec_;
  PipelineOptions opt_;
  uint64_t hbm_used_ = 0;
  std::unique_ptr<Impl> impl_;
};

// The bubbles of a step from its timeline, for any pipelined trainer: per stage (stage_of_chip:
// each chip's), the fraction of the span (the step's first command to the last F or B command's
// end) in which none of its chips' F or B commands was in flight on a compute unit (mean over its
// chips), the busy cycles, and the F and B slots of its chip shown[stage] in time order; then the
// hop and gap those slots show and the bubbles the table (v chunks) gives with them
// (pipeline_timed_bubbles). The layers and activations are the trainer's to fill in.
PipelineStats pipeline_timeline_stats(const std::vector<TraceEvent>& events,
                                      const std::vector<int>& stage_of_chip,
                                      const std::vector<int>& shown,
                                      const std::vector<std::vector<PipeSlot>>& table, int v);
// A run's measurements as the mean over its steps: add each step's, divide by the steps.
void add_pipeline_stats(PipelineStats* sum, const PipelineStats& s);
void divide_pipeline_stats(PipelineStats* s, std::size_t n);

// Every chip's layers against the golden replica of its data rank, bit for bit; replicas of
// one stage equal to data rank 0's.
TrainCheck check_pipeline_params(const PipelineTrainer& tr, const std::vector<MlpParams>& got,
                                 const MlpGolden& golden);

// A whole pipelined run, each step checked against the golden (what `tpusim train` with a stage
// axis or micro-batches and bench_train --pipeline do); the pipeline's measurements are the
// mean over the steps (TrainRunResult::pipeline).
TrainRunResult run_pipeline_training(HostPort& host, const MlpSpec& spec,
                                     const PipelineOptions& opt, const TrainRunOptions& ro);

}  // namespace tpu
