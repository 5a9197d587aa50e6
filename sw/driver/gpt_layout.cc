#include "gpt_layout.h"

namespace tpu {

GptChipLayout::GptChipLayout(const GptSpec& spec)
    : layers(spec.layers),
      Hm(spec.heads / static_cast<std::size_t>(spec.model)),
      dh(spec.head_dim()),
      dhp((spec.head_dim() + kHeadPad - 1) / kHeadPad * kHeadPad) {}

std::size_t GptChipLayout::slot(std::size_t k) const {
  return k >= 2 && k < 2 + layers * kGptLayerSlots ? (k - 2) % kGptLayerSlots : kGptLayerSlots;
}

std::pair<std::size_t, std::size_t> GptChipLayout::shape(const GptTensor& g, std::size_t k) const {
  const std::size_t sl = slot(k);
  if (sl == kWqkv) return {g.rows, 3 * Hm * dhp};
  if (sl == kBqkv) return {1, 3 * Hm * dhp};
  if (sl == kWo) return {Hm * dhp, g.cols};
  return {g.rows, g.cols};
}

// Where element (r, col) of parameter k (a layer's wqkv, bqkv or wo) lies in its chip layout.
std::size_t GptChipLayout::at(std::size_t k, std::size_t cols, std::size_t r,
                              std::size_t col) const {
  if (slot(k) == kWo) return ((r / dh) * dhp + r % dh) * cols + col;
  const std::size_t dm = Hm * dh, part = col / dm, within = col % dm;  // q, k or v; its column
  return r * cols + part * Hm * dhp + (within / dh) * dhp + within % dh;
}

std::vector<float> GptChipLayout::to_chip(const GptTensor& g, std::size_t k) const {
  const auto [rows, cols] = shape(g, k);
  if (rows == g.rows && cols == g.cols) return g.v;
  std::vector<float> c(rows * cols, 0.0f);
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t col = 0; col < g.cols; ++col) c[at(k, cols, r, col)] = g.v[r * g.cols + col];
  return c;
}

std::vector<float> GptChipLayout::from_chip(const std::vector<float>& c, const GptTensor& g,
                                            std::size_t k) const {
  const auto [rows, cols] = shape(g, k);
  if (rows == g.rows && cols == g.cols) return c;
  std::vector<float> v(g.rows * g.cols);
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t col = 0; col < g.cols; ++col) v[r * g.cols + col] = c[at(k, cols, r, col)];
  return v;
}

}  // namespace tpu
