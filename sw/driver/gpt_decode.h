// GptDecoder: a trained GPT run forward on one chip of the pod, the keys and values of every
// position cached in HBM (docs/training.md, "Generating text"). Each feed is one program on the
// op/scheduler layer over n new tokens at positions p .. p + n - 1 (n = 1 while generating; a
// prompt or a restarted window at once, a prefill): their embedding (DMA_IDX), per layer the layer
// norm, their q, k and v (k and v written into the layer's cache rows p ..), per head z = q K^T
// over the cache (each query's later positions masked), the softmax, p V, the output projection
// and the MLP, then the final layer norm and the head: each token's logits, the row of the
// full-window forward (gpt_logits) at its position, bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host_port.h"
#include "tpu/gpt.h"

namespace tpu {

// The bytes a window keeps when the cache is full and the text goes on: the last half of the
// context (S / 2, at least 1), fed again at positions 0 .. keep - 1 after GptDecoder::restart().
inline std::size_t gpt_decode_keep(std::size_t seq) { return seq / 2 > 0 ? seq / 2 : 1; }

class GptDecoder {
 public:
  // The whole model's parameters (model = 1: the golden's full shapes) on chip `chip`; spec.seq
  // is the context (the positions the cache holds). std::invalid_argument for what the chip
  // cannot run (gpt_train.h's rules).
  GptDecoder(HostPort& host, GptSpec spec, const GptParams& params, int chip = 0);
  ~GptDecoder();

  struct Step {
    std::vector<float> logits;  // n x V: row i the next token's after token i of the feed
    uint64_t cycles = 0;        // the program's pod cycles
    std::size_t commands = 0;
  };
  // Feeds tokens at the next positions (0, 1, ...) in one program; std::invalid_argument for none,
  // past the context or for a token outside the vocabulary.
  Step feed(const std::vector<int32_t>& tokens);
  Step feed(int32_t token) { return feed(std::vector<int32_t>{token}); }
  // Empties the cache: the next tokens are fed from position 0, and their program first sets every
  // cache row to zeros on the chip (a copy from a zero buffer), so that a window fed after a
  // restart runs exactly as the first one did (docs/training.md, "Generating text").
  void restart();
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
