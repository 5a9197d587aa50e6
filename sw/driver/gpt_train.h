// GptTrainer: a GPT training step as one chip program on the op/scheduler layer (docs/training.md
// "The GPT step on the chip"): the token embedding (DMA_IDX gather), per layer layer norm (VPU
// maps with row reductions), the qkv, attention, output and MLP matmuls on the MXU with the
// softmax and GELU maps between them, the final layer norm, the head and the cross-entropy; then
// the backward pass in reverse (the weight gradients as transposed activations times the output
// gradients, the input gradients with transposed weight loads, the softmax, GELU and layer norm
// backward maps, the bias and gain gradients as column sums, the embedding's scatter-add), and
// AdamW on every tensor. Every op is the golden's (model/, GptGolden) in the golden's order, so
// after each step every parameter and Adam moment equals the golden's bit for bit. Heads whose
// width is not a multiple of 32 sit in 32-column blocks padded with zeros (a bf16 row of a head
// is then one 64-byte burst); the zeros add nothing to any sum and stay zero under AdamW.
// The embedding's backward depends on the tokens, so the program is planned again each step.
// On a pod (--mesh data=D,model=M): data parallel over `data` (each data rank its windows, every
// gradient all-reduced over the axis as soon as it is ready, beside the backward work after it),
// tensor parallel over `model` as Megatron splits it (heads, w1's columns, w2's rows: the four
// model all-reduces per layer of tpu/gpt.h). With a `stage` axis or micro-batches (issue 35,
// docs/training.md "Pipeline") the step runs as the slots of a pipeline schedule (tpu/pipeline.h):
// stage s's chips hold only its layers (stage 0 the embedding, the last the final layer norm and
// the head); a forward slot receives the residual stream of its micro-batch from the stage
// before over ICI, runs its layers and sends the stream on; a backward slot receives the stream's
// gradient, runs its layers' backward and sends the gradient back; every gradient is accumulated
// over the micro-batches in f32 (micro-batch 0 first) as GptGolden does, then AdamW.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host_port.h"
#include "pod_driver.h"
#include "spmd_program.h"
#include "tpu/gpt.h"
#include "tpu/mesh.h"
#include "tpu/pipeline.h"
#include "train_step.h"

namespace tpu {

struct GptStepRun {
  PodProgramRun prog;      // pod and chip cycles, counters
  SpmdProgram program;     // the step's program: its phases are the op kinds
  std::size_t commands = 0;
  double loss = 0;                             // before this step's update (gpt_loss)
  // Per golden chip (GptSpec's chips: data x model; the last stage's chip of each): per window,
  // the sum of its losses.
  std::vector<std::vector<float>> loss_parts;
};

struct GptTrainOptions {
  Mesh mesh;  // axes `data`, `model` and `stage` (none: data parallel over every chip)
  std::string stages_text;       // --stages "0-1,2-3" ("": equal stages)
  std::size_t microbatches = 1;  // per step and data rank
  PipeSchedule schedule;         // the slots' order (with stages or micro-batches)
  bool backdoor = false;         // parameters and each step's inputs through the backdoor
};

// What the chip program needs of a spec beyond GptSpec::validate (data, model and the widths
// set): d_model, seq, vocab and 4 d_model / model multiples of 32, model at most 2.
// std::invalid_argument naming the value and the rule.
void check_gpt_chip_spec(const GptSpec& spec);

class GptTrainer {
 public:
  // spec.batch: windows per data rank; spec.data, model, the ranks and lanes are set from the
  // mesh and the chip (with a stage axis the golden's chips are data x model, chip d x model + m),
  // microbatches from the options. std::invalid_argument naming the value and the rule for what
  // cannot run (widths or a sequence not multiples of 32, a schedule's rules, buffers beyond the
  // HBM).
  GptTrainer(HostPort& host, GptSpec spec, GptTrainOptions opt = {});
  ~GptTrainer();
  const GptSpec& spec() const { return spec_; }
  uint64_t hbm_bytes_per_chip() const { return hbm_used_; }
  // Multiply-adds of one step on a chip: the forward's matmuls and twice them for the backward
  // (the attention's included, the causal half too), as the golden does them; the head, which
  // every model rank computes whole, counted once per data rank (the model's MACs, not the
  // chips'), so the sum over the chips is the model's MACs of the global batch.
  uint64_t step_macs_per_chip() const;

  // The parameters (gpt_init's, unsharded) into every chip; returns the simulated cycles.
  uint64_t load_params(const GptParams& params);
  // One step on the global batch's windows (gpt_windows: global batch x (seq + 1) tokens).
  GptStepRun step(const std::vector<int32_t>& windows);

  // The data all-reduce as the programs ran it (each tensor's collective rounds), for the golden.
  GptDataReduce golden_data_reduce() const;
  // The model all-reduces as the programs ran them (their rounds, in order), for the golden;
  // nullptr when the mesh has no model axis.
  GptModelReduce golden_model_reduce() const;

  // The pipeline: a stage axis or micro-batches.
  bool pipelined() const;
  int stages() const;
  int stage_of(int chip) const;  // a pod chip's stage
  const std::vector<std::vector<PipeSlot>>& slots() const;
  // The bubbles of a step from its timeline, each stage's layers and peak activation bytes (the
  // buffers its micro-batches in flight hold from their forward to their backward).
  PipelineStats measure(const std::vector<TraceEvent>& events) const;

  // Golden chip g's parameters and Adam moments (each tensor from the stage's chip that holds
  // it), read through the backdoor, in the golden's shapes.
  GptParams read_params(int chip);
  GptParams read_moment1(int chip);
  GptParams read_moment2(int chip);

 private:
  struct Impl;
  HostPort& host_;
  GptSpec spec_;
  GptTrainOptions opt_;
  uint64_t hbm_used_ = 0;
  uint64_t t_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu
