// Where a GPT's parameters lie on a chip (docs/training.md, "The GPT step on the chip"): a head
// whose width is not a multiple of 32 sits in a 32-column block padded with zeros (a bf16 row of
// a head is then one 64-byte burst), so a layer's wqkv and bqkv have 3 x Hm blocks of columns
// and its wo Hm blocks of rows; every other tensor keeps the golden's shape. The trainer and the
// decoder both store their tensors so; the golden's shapes come back for reading and saving.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "tpu/gpt.h"

namespace tpu {

struct GptChipLayout {
  static constexpr std::size_t kHeadPad = 32;
  std::size_t layers = 0, Hm = 0, dh = 0, dhp = 0;  // local heads, their width, padded

  GptChipLayout() = default;
  explicit GptChipLayout(const GptSpec& spec);  // a model rank's shard (Hm = heads / model)
  // The chip's {rows, cols} of parameter k (the golden's shape g, in its shard).
  std::pair<std::size_t, std::size_t> shape(const GptTensor& g, std::size_t k) const;
  // The golden's values in the chip's layout (zeros in the padding), and back.
  std::vector<float> to_chip(const GptTensor& g, std::size_t k) const;
  std::vector<float> from_chip(const std::vector<float>& c, const GptTensor& g,
                               std::size_t k) const;
  // Parameter k's slot in its layer (kGptLayerSlots: not a layer's).
  std::size_t slot(std::size_t k) const;

 private:
  std::size_t at(std::size_t k, std::size_t cols, std::size_t r, std::size_t col) const;
};

}  // namespace tpu
