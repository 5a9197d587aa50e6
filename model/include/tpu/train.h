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
// the last; `chips` replicas, each with `batch` examples (the global batch is chips x batch);
// `lanes`: the chip's vector width (memory rows of `lanes` elements); `loss_chunk`: matrix rows
// per chunk of the on-chip loss sum (its order depends on it). DataParallelTrainer fills in
// chips, lanes and loss_chunk where they are 0 (the machine's, its plan's).
struct MlpSpec {
  std::vector<std::size_t> widths;
  std::size_t batch = 0;
  int chips = 0;
  float lr = 0.05f;
  std::size_t lanes = 0;
  std::size_t loss_chunk = 0;
  std::size_t layers() const { return widths.size() - 1; }
  std::size_t global_batch() const { return batch * static_cast<std::size_t>(chips); }
  // std::invalid_argument naming the rule: at least one layer, widths multiples of
  // width_multiple(), batch > 0, chips > 0, lanes > 0, lr finite and > 0, loss_chunk > 0.
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

// Sums one layer's gradient over the chips, as the pod does: in[chip] is that chip's
// (in + 1) x out f32 gradient (row `in`: the bias's), as bits; returns every chip's sum.
using GradAllReduce = std::function<std::vector<std::vector<uint32_t>>(
    std::size_t layer, const std::vector<std::vector<uint32_t>>& in)>;

struct MlpStepResult {
  double loss = 0;                             // before the update
  std::vector<std::vector<float>> loss_parts;  // per chip: the `lanes` partial sums it sent up
};

// The golden trainer: one replica of the parameters per chip.
class MlpGolden {
 public:
  MlpGolden(const MlpSpec& spec, const MlpParams& init);
  const MlpSpec& spec() const { return spec_; }
  const MlpParams& params(int chip) const { return p_[static_cast<std::size_t>(chip)]; }
  // One step on the global batch (chip c takes rows [c x batch, (c + 1) x batch)).
  MlpStepResult step(const MlpData& data, const GradAllReduce& all_reduce);

 private:
  MlpSpec spec_;
  std::vector<MlpParams> p_;
};

// The loss the host computes from the chips' partial sums: sum over chips, then lanes, in f64,
// divided by global batch x outputs.
double mlp_loss(const MlpSpec& spec, const std::vector<std::vector<float>>& parts);

// The chip's loss partial sum of a chip's P - T (rows x cols f32), in the VPU's order: the
// matrix is cut into chunks of `chunk` rows; row r of a chunk is memory rows r x (cols / lanes)
// + j (column block j); acc[i] = (d_i x d_i) + acc[i] over the chunks in order, from -0; then
// the accumulator rows are folded: while n > 1, h = n / 2, rows [0, h) += rows [n - h, n),
// n -= h. Returns the `lanes` values of row 0.
std::vector<float> mlp_loss_partial(const std::vector<float>& d, std::size_t rows,
                                    std::size_t cols, std::size_t lanes, std::size_t chunk);

}  // namespace tpu
