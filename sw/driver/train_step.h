// DataParallelTrainer: the data-parallel training step of a multilayer perceptron on a machine
// of chips (docs/training.md). Every chip holds a replica of the parameters in its HBM and a
// shard of the global batch; one SPMD program per chip runs the step: forward (matmul, bias,
// ReLU), the loss and its gradient (VPU), backward (dW = [A^T; 1] dY with A^T transposed
// through the MXU, dA = dY W^T with transposed weight loads, the ReLU mask on the VPU), the
// gradients' all-reduce over ICI (each piece overlapped with the backward work after it), and
// the SGD update (VPU). The host loads the data once and reads the loss partials each step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chip_driver.h"
#include "host_port.h"
#include "pod_driver.h"
#include "profile.h"
#include "report.h"
#include "spmd_program.h"
#include "tpu/mesh.h"
#include "tpu/train.h"

namespace tpu {

struct TrainOptions {
  // The first layer's gradient is all-reduced in this many row pieces, each overlapped with the
  // gradient matmul of the next (1: one all-reduce per layer).
  std::size_t grad_pieces = 4;
  bool backdoor = false;  // data and parameters in through the backdoor (no simulated time)
  // The mesh over the pod's dimensions: axes `data` and `model`; a model axis of size M > 1
  // splits the hidden width of a two-layer network over M chips (tensor parallel). No axes:
  // data parallel over every chip.
  Mesh mesh;
};

struct TrainStepRun {
  PodProgramRun prog;                           // pod and chip cycles, counters, links
  // The step's program: its phases (compute parts and collectives, a gradient all-reduce
  // flagged `gradient`), each command labelled with its phase (the timeline's labels).
  SpmdProgram program;
  std::size_t commands = 0;                     // all chips
  double loss = 0;                              // before this step's update
  std::vector<std::vector<float>> loss_parts;   // per chip: its partial sums
  uint64_t loss_read_cycles = 0;                // the host reading them (all chips at once)
};

class DataParallelTrainer {
 public:
  // spec.batch: examples per chip; spec.chips must be the machine's chip count, spec.lanes its
  // lane count (both set here if 0). Lays the buffers out in every chip's HBM and plans the step
  // (spec().loss_chunk is then known). std::invalid_argument when it cannot run.
  DataParallelTrainer(HostPort& host, MlpSpec spec, TrainOptions opt = {});
  ~DataParallelTrainer();

  const MlpSpec& spec() const { return spec_; }
  uint64_t hbm_bytes_per_chip() const { return hbm_used_; }
  // Useful multiply-adds of one step on one chip: forward, dW and dA of every layer (no dA for
  // the first), without the transposes and the bias rows.
  uint64_t step_macs_per_chip() const;

  // The global batch (chip c takes rows [c x batch, (c + 1) x batch)) and the parameters into
  // every chip's HBM; returns the simulated cycles (0 through the backdoor).
  uint64_t load_data(const MlpData& data);
  uint64_t load_params(const MlpParams& params);

  // One step: every chip at once until every chip is idle, then the loss partials read.
  TrainStepRun step();

  // A chip's parameters, read through the backdoor (no simulated time).
  MlpParams read_params(int chip);
  // The gradient all-reduce as the programs run it (their plans' rounds, in pieces), and the
  // prediction's all-reduce over the model axis (tensor parallel; else the identity).
  GradAllReduce golden_all_reduce() const;
  ModelAllReduce golden_model_all_reduce() const;

 private:
  struct Impl;
  HostPort& host_;
  MlpSpec spec_;
  TrainOptions opt_;
  uint64_t hbm_used_ = 0;
  std::unique_ptr<Impl> impl_;
};

// The checks of a step: every chip's parameters against the golden's bit for bit, and every
// replica equal to the first chip's of its model rank.
struct TrainCheck {
  std::size_t compared = 0, mismatches = 0, replica_mismatches = 0;
  bool pass() const { return mismatches == 0 && replica_mismatches == 0; }
};
TrainCheck check_params(const std::vector<MlpParams>& got, const MlpGolden& golden);

// The cycles a set of [begin, end) spans covers (their union's length); sorts `spans`.
uint64_t covered_cycles(std::vector<std::pair<uint64_t, uint64_t>>& spans);

// The fraction of the gradient all-reduces' time hidden behind other work, from the timeline:
// per chip, the cycles in which a command of a gradient all-reduce was in flight, and of those
// the cycles in which a command of a phase that is no collective was in flight too; summed over
// the chips. 1 when there was no gradient all-reduce.
double allreduce_hidden_fraction(const TrainStepRun& run, const std::vector<TraceEvent>& events);

// One F or B slot on the timeline: its phase ("F mb3", "B mb0 c1") and the cycles from the step's
// first command to its start (its first command's issue, or its receive's wait's end if later:
// loads that need nothing received may run beside the wait) and its last one's end (compute
// units only).
struct PipelineSlotSpan {
  std::string slot;
  uint64_t start = 0, end = 0;
  // Cycles of its commands before `start` that needed nothing received (they ran beside the wait,
  // from their first issue to the last one's end, up to `start`); 0 when it did not wait.
  uint64_t pre = 0;
};

// One pipeline stage's measurements over a step (PipelineTrainer::measure, pipeline_train.h).
struct PipelineStageStats {
  std::size_t first_layer = 0, last_layer = 0;  // the layers it holds (interleaved: the span)
  double bubble = 0;      // idle fraction of the pipeline's span, mean over its chips
  // The same idle cycles over its busy ones: the bubble relative to its ideal time (its own
  // work), the frame of Megatron's (1/v)(p - 1)/m; mean over its chips.
  double bubble_of_ideal = 0;
  // The same from the table run with the measured slots, gap and hop (pipeline_timed_bubbles):
  // what the schedule gives with these slot lengths and this stage-to-stage cost.
  double bubble_model = 0;
  double bubble_no_hop = 0;  // the same with no gap and no hop: the slot lengths' own bubble
  uint64_t busy = 0;      // cycles a command of an F or B slot was in flight (mean of its chips)
  int peak_in_flight = 0;  // micro-batches (x chunks) whose activations it holds at once
  uint64_t peak_activation_bytes = 0;  // their bytes in HBM (the inputs the backward needs)
  std::vector<PipelineSlotSpan> slots;  // data rank 0's chip, in time order (the first step's)
};
struct PipelineStats {
  uint64_t span = 0;  // pod cycles from the step's first command to the last F or B command's end
  // Medians over the shown chips' slots: a slot that waited for another stage's slot starts
  // hop_cycles after that one's end (its send, the wire, its receive); one that did not, gap_cycles
  // after its stage's slot before it.
  uint64_t hop_cycles = 0, gap_cycles = 0;
  std::vector<PipelineStageStats> stages;
  // 1 - (the most busy cycles of a stage) / span: the bubble of the stage with the most work,
  // the one the formulas (equal stages) describe; a lighter stage idles that and its imbalance.
  double heaviest_stage_bubble() const;
};

// A pipelined run's settings and measurements (pipeline_train.h), for the report.
struct TrainPipelineResult {
  bool on = false;  // the run was pipelined (else the rest is unset)
  std::string schedule;
  std::size_t microbatches = 1;
  int stages = 1;
  double bubble_formula = 0;
  double bubble_formula_of_ideal = 0;  // (1/v)(p - 1)/m: relative to the ideal time
  std::string bubble_formula_text;
  PipelineStats stats;  // mean over the steps
};

// A whole training run, each step checked against the golden: what `tpusim train` and
// bench_train do.
struct TrainStepRecord {
  double loss = 0;
  uint64_t cycles = 0;
  PodProfile profile;     // mfu, breakdown, per chip
  double hidden = 0;      // allreduce_hidden_fraction
  bool golden_pass = false;
};

struct TrainRunOptions {
  std::size_t steps = 1;
  uint64_t seed = 1;
  bool fresh_batches = false;          // a new batch every step (else the same one)
  std::size_t trace_from = 0, trace_to = 0;  // keep the timeline of steps [from, to)
  // Called with (step from 0, the pod's cycles since the step began) while a step runs.
  std::function<void(std::size_t, uint64_t)> progress;
  // Called after each step with its record.
  std::function<void(std::size_t, const TrainStepRecord&)> on_step;
};

struct TrainRunResult {
  MlpSpec spec;                      // as run (chips, lanes, loss_chunk set)
  TrainOptions options;
  TrainRunOptions run;
  MlpParams init, final_params;      // final: chip 0's, read back
  std::vector<MlpData> batches;      // one, or one per step with fresh batches
  std::vector<TrainStepRecord> steps;
  std::vector<ChipCounters> total;   // per chip, summed over the steps
  uint64_t cycles = 0, load_cycles = 0, loss_read_cycles = 0;
  uint64_t macs_per_step = 0;        // useful, all chips
  uint64_t hbm_bytes_per_chip = 0;
  TrainCheck check;                  // summed over the steps
  std::size_t loss_mismatches = 0;   // loss partial sums that differ from the golden
  std::vector<TraceEvent> trace;     // the kept steps' timeline
  TrainPipelineResult pipeline;      // a pipelined run's (pipeline_train.h)
  bool pass() const { return check.pass() && loss_mismatches == 0; }
};

// Lays out, loads (host ports or the backdoor, per `opt`), runs `ro.steps` steps with the
// timeline recorded, and after each step compares every chip's parameters and loss with the
// golden. std::invalid_argument for what cannot run.
// A step's program run on the pod, then its loss partials read: a 64-byte burst from each
// (chip, HBM address) of loss_at, all at once, the first `lanes` f32 of each; the loss from them.
// (This trainer's step and the pipelined one's.)
TrainStepRun run_step_program(HostPort& host, const SpmdProgram& program, const MlpSpec& spec,
                              const std::vector<std::pair<int, uint64_t>>& loss_at);

// Step s of a run (this trainer's or the pipelined one's, pipeline_train.h) into r: the chips'
// parameters' check `chk`, their loss partials against the golden's (a count that differs is a
// mismatch), cycles, profile and counters; calls ro.on_step. Returns the record kept in r.
const TrainStepRecord& record_step(TrainRunResult& r, const TrainRunOptions& ro, std::size_t s,
                                   const TrainStepRun& run, const MlpStepResult& g,
                                   const TrainCheck& chk, double hidden, uint64_t peak);

TrainRunResult run_training(HostPort& host, const MlpSpec& spec, const TrainOptions& opt,
                            const TrainRunOptions& ro);

// The report of a run (docs/training.md): group "train" (the network and the run), `steps`
// (per step: loss, cycles, mfu, breakdown, allreduce_hidden_fraction, golden), cycles,
// cycles_per_step, load and loss-read cycles, allreduce_hidden_fraction, mfu and breakdown over
// all steps (report_profile), golden.
void fill_train_report(Report& rep, const TrainRunResult& r, const MachineInfo& mi);
// Group `pipeline` of a pipelined run (its keys: docs/training.md, "Pipeline").
void fill_pipeline_report(Report& rep, const TrainPipelineResult& p);
// The report's `steps`: per step loss, cycles, mfu, breakdown, allreduce_hidden_fraction, golden.
Json train_steps_json(const std::vector<TrainStepRecord>& steps);

}  // namespace tpu
