// GptDecoder: a trained GPT run forward on one chip of the pod, a token at a time, the keys and
// values of every position cached in HBM (docs/training.md, "Generating text"). Each token is one
// program on the op/scheduler layer: the embedding of the token at its position (DMA_IDX), per
// layer the layer norm, the token's q, k and v (k and v appended to the layer's cache rows), per
// head z = q K^T over the cache (the positions after this one masked), the softmax, p V, the
// output projection and the MLP, then the final layer norm and the head: the token's logits, the
// row of the full-window forward (gpt_logits) at its position, bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host_port.h"
#include "tpu/gpt.h"

namespace tpu {

class GptDecoder {
 public:
  // The whole model's parameters (model = 1: the golden's full shapes) on chip `chip`; spec.seq
  // is the context (the positions the cache holds). std::invalid_argument for what the chip
  // cannot run (gpt_train.h's rules).
  GptDecoder(HostPort& host, GptSpec spec, const GptParams& params, int chip = 0);
  ~GptDecoder();

  struct Step {
    std::vector<float> logits;  // V values: the next token's after this one
    uint64_t cycles = 0;        // the program's pod cycles
    std::size_t commands = 0;
  };
  // Feeds the token at the next position (0, 1, ...); std::invalid_argument past the context or
  // for a token outside the vocabulary.
  Step feed(int32_t token);
  std::size_t position() const { return pos_; }
  const GptSpec& spec() const { return spec_; }

 private:
  struct Impl;
  HostPort& host_;
  GptSpec spec_;
  int chip_ = 0;
  std::size_t pos_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu
