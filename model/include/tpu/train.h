// Golden data-parallel training step of a multilayer perceptron (docs/training.md): the same
// operations, in the same order and with the same roundings, as the chips run them
// (sw/driver/train_step.h). Every chip holds a replica of the weights and a shard of the batch;
// after every step each chip's weights equal this model's bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {

// The network and the run: widths[0] inputs, widths.back() outputs, ReLU after every layer but
// the last; `chips` chips, each with `batch` examples; `lanes`: the chip's vector width (memory
// rows of `lanes` elements); `loss_chunk`: matrix rows per chunk of the on-chip loss sum (its
// order depends on it). DataParallelTrainer fills in chips, lanes, loss_chunk and the ranks
// where they are 0 or empty (the machine's, its plan's).
// Parallelism: `model` ways of tensor parallelism (Megatron's MLP: exactly two layers, the
// hidden width split over the model axis, layer 0's columns and layer 1's rows), chips / model
// ways of data parallelism. data_rank[c], model_rank[c]: chip c's place (empty: chip c is data
// rank c, model rank 0). Chip c takes examples [d x batch, (d + 1) x batch) of the global batch
// (batch x data ways), d its data rank.
struct MlpSpec {
  std::vector<std::size_t> widths;
  std::size_t batch = 0;
  int chips = 0;
  int model = 1;
  std::vector<int> data_rank, model_rank;
  float lr = 0.05f;
  std::size_t lanes = 0;
  std::size_t loss_chunk = 0;
  // Micro-batches per step (pipeline parallelism, docs/training.md "Pipeline"): each chip's batch
  // runs as `microbatches` equal row blocks, forward and backward one at a time; every layer's
  // gradient is accumulated over them in f32, micro-batch 0 first (g = g0, then g = g + gk, one
  // rounding each), before the all-reduce. 1: the whole batch at once (no accumulation).
  std::size_t microbatches = 1;
  std::size_t layers() const { return widths.size() - 1; }
  int data() const { return model > 0 ? chips / model : 0; }
  std::size_t global_batch() const { return batch * static_cast<std::size_t>(data()); }
  int data_rank_of(int chip) const { return data_rank.empty() ? chip : data_rank.at(static_cast<std::size_t>(chip)); }
  int model_rank_of(int chip) const { return model_rank.empty() ? 0 : model_rank.at(static_cast<std::size_t>(chip)); }
  // Layer l's input and output widths on one chip (the hidden width divided by the model ways).
  std::size_t in_width(std::size_t l) const;
  std::size_t out_width(std::size_t l) const;
  // std::invalid_argument naming the rule: at least one layer, widths multiples of
  // width_multiple(), batch > 0, chips > 0, lanes > 0, lr finite and > 0, loss_chunk > 0; with
  // model > 1: two layers, the hidden width a multiple of model x width_multiple(), chips a
  // multiple of model, ranks given for every chip, each (data, model) pair once; microbatches
  // >= 1 dividing batch, 1 with model > 1.
  void validate() const;
  // Every width a multiple of lcm(lanes, 32): whole 64-byte bursts per matrix row in f32 and
  // bf16, so no matrix has padding columns.
  std::size_t width_multiple() const;
};

// One layer's parameters: W in x out (row-major, f32 master weights) and b (out, f32).
struct MlpLayer {
  std::vector<float> w, b;
};
using MlpParams = std::vector<MlpLayer>;

// The data of a run, made from a seed (so C++, numpy and the golden agree): X (global batch x
// widths[0], bf16, uniform in [-1, 1)), the targets T = teacher(X) (global batch x widths.back(),
// f32) of a fixed random teacher network of the same widths (computed in f64, rounded once), and
// the student's initial parameters: W uniform in [-1/sqrt(in), 1/sqrt(in)), b = 0.
struct MlpData {
  std::vector<bf16_t> x;
  std::vector<float> t;
};
MlpData make_mlp_data(const MlpSpec& spec, uint64_t seed, uint64_t batch_index = 0);
MlpParams init_mlp_params(const MlpSpec& spec, uint64_t seed);

// The constants of the step, as f32: the loss gradient scale 2 / (global batch x outputs), the
// SGD factor -lr, and the ReLU mask's 2^127 and 1.
struct MlpConsts {
  float grad_scale, neg_lr, mask_big, one;
};
MlpConsts mlp_consts(const MlpSpec& spec);

// Sums one layer's gradient over the data axis, as the pod does: in[chip] is that chip's
// (in + 1) x out f32 gradient (row `in`: the bias's), as bits; returns every chip's sum.
using GradAllReduce = std::function<std::vector<std::vector<uint32_t>>(
    std::size_t layer, const std::vector<std::vector<uint32_t>>& in)>;
// Sums the last layer's partial outputs over the model axis (tensor parallel only): in[chip]
// is that chip's batch x out f32 partial product, as bits.
using ModelAllReduce = std::function<std::vector<std::vector<uint32_t>>(
    const std::vector<std::vector<uint32_t>>& in)>;

struct MlpStepResult {
  double loss = 0;  // before the update
  // Per chip (then per micro-batch: chip c's micro-batch k at c x microbatches + k): the `lanes`
  // partial sums of its loss.
  std::vector<std::vector<float>> loss_parts;
};

// A chip's shard of the parameters (tensor parallel: layer 0's columns and b0 slice, layer 1's
// rows and all of b1, for its model rank; otherwise all of them), and the whole from the shards
// of model ranks 0 .. model-1 (shards[m]).
MlpParams mlp_shard(const MlpSpec& spec, const MlpParams& full, int model_rank);
MlpParams mlp_unshard(const MlpSpec& spec, const std::vector<MlpParams>& shards);

// The golden trainer: each chip's shard of the parameters.
class MlpGolden {
 public:
  MlpGolden(const MlpSpec& spec, const MlpParams& init);
  const MlpSpec& spec() const { return spec_; }
  const MlpParams& params(int chip) const { return p_[static_cast<std::size_t>(chip)]; }
  // One step on the global batch. Tensor parallel: the last layer's bias is added on model
  // rank 0 only, before the model all-reduce sums the partial products.
  MlpStepResult step(const MlpData& data, const GradAllReduce& all_reduce,
                     const ModelAllReduce& model_all_reduce = nullptr);

 private:
  // One micro-batch on every chip (forward, loss, backward): per layer, per chip its gradient.
  std::vector<std::vector<std::vector<uint32_t>>> micro_step(
      const MlpData& data, std::size_t k, const ModelAllReduce& model_all_reduce,
      MlpStepResult* res) const;
  MlpSpec spec_;
  std::vector<MlpParams> p_;
};

// The loss the host computes from the chips' partial sums: sum over the chips of model rank 0
// (in chip order), then micro-batches, then lanes, in f64, divided by global batch x outputs.
// parts: per chip, or per chip and micro-batch (MlpStepResult::loss_parts).
double mlp_loss(const MlpSpec& spec, const std::vector<std::vector<float>>& parts);

// The chip's loss partial sum of a chip's P - T (rows x cols f32), in the VPU's order: the
// matrix is cut into chunks of `chunk` rows; row r of a chunk is memory rows r x (cols / lanes)
// + j (column block j); acc[i] = (d_i x d_i) + acc[i] over the chunks in order, from -0; then
// the accumulator rows are folded: while n > 1, h = n / 2, rows [0, h) += rows [n - h, n),
// n -= h. Returns the `lanes` values of row 0.
std::vector<float> mlp_loss_partial(const std::vector<float>& d, std::size_t rows,
                                    std::size_t cols, std::size_t lanes, std::size_t chunk);

}  // namespace tpu
