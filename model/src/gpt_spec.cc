// The GPT's spec, parameters, init, tensor-parallel shards and data windows (tpu/gpt.h).
#include <cmath>
#include <stdexcept>
#include <string>

#include "tpu/gpt.h"
#include "tpu/splitmix.h"

namespace tpu {

namespace {

std::string str(std::size_t v) { return std::to_string(v); }

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// (name suffix, rows, cols) of layer slot s, full (m = 1) or one of `m` shards.
GptTensor layer_tensor(const GptSpec& s, std::size_t l, std::size_t slot, std::size_t m) {
  static const char* const kNames[kGptLayerSlots] = {"ln1.g",   "ln1.b",   "attn.wqkv", "attn.bqkv",
                                                     "attn.wo", "attn.bo", "ln2.g",     "ln2.b",
                                                     "mlp.w1",  "mlp.b1",  "mlp.w2",    "mlp.b2"};
  const std::size_t d = s.d_model, dm = d / m, fm = 4 * d / m;
  std::size_t r = 1, c = d;
  switch (slot) {
    case kWqkv:
      r = d;
      c = 3 * dm;
      break;
    case kBqkv:
      c = 3 * dm;
      break;
    case kWo:
      r = dm;
      break;
    case kW1:
      r = d;
      c = fm;
      break;
    case kB1:
      c = fm;
      break;
    case kW2:
      r = fm;
      break;
    default:
      break;
  }
  GptTensor t{"h" + std::to_string(l) + "." + kNames[slot], r, c, {}};
  t.v.assign(r * c, 0.0f);
  return t;
}

GptParams zero_params(const GptSpec& s, std::size_t m) {
  GptParams p;
  auto add = [&](const std::string& n, std::size_t r, std::size_t c) {
    p.push_back(GptTensor{n, r, c, std::vector<float>(r * c, 0.0f)});
  };
  add("wte", s.vocab, s.d_model);
  add("wpe", s.ctx(), s.d_model);
  for (std::size_t l = 0; l < s.layers; ++l)
    for (std::size_t k = 0; k < kGptLayerSlots; ++k) p.push_back(layer_tensor(s, l, k, m));
  add("lnf.g", 1, s.d_model);
  add("lnf.b", 1, s.d_model);
  add("head.w", s.d_model, s.vocab);
  return p;
}

// Column blocks of a [rows x cols] matrix: the shard's columns are, for each of `parts`
// sections of width cols / parts, the m-th of M slices of that section.
std::vector<float> take_cols(const std::vector<float>& v, std::size_t rows, std::size_t cols,
                             std::size_t parts, std::size_t m, std::size_t M) {
  const std::size_t sec = cols / parts, w = sec / M;
  std::vector<float> out;
  out.reserve(rows * parts * w);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t p = 0; p < parts; ++p)
      for (std::size_t j = 0; j < w; ++j) out.push_back(v[i * cols + p * sec + m * w + j]);
  return out;
}

void put_cols(std::vector<float>& v, const std::vector<float>& s, std::size_t rows,
              std::size_t cols, std::size_t parts, std::size_t m, std::size_t M) {
  const std::size_t sec = cols / parts, w = sec / M;
  std::size_t k = 0;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t p = 0; p < parts; ++p)
      for (std::size_t j = 0; j < w; ++j) v[i * cols + p * sec + m * w + j] = s[k++];
}

}  // namespace

int GptSpec::data_rank_of(int chip) const {
  return data_rank.empty() ? chip / model : data_rank.at(static_cast<std::size_t>(chip));
}

int GptSpec::model_rank_of(int chip) const {
  return model_rank.empty() ? chip % model : model_rank.at(static_cast<std::size_t>(chip));
}

void GptSpec::validate() const {
  require(layers >= 1, "layers: " + str(layers) + " must be at least 1");
  require(vocab == 256, "vocab: " + str(vocab) + " must be 256 (one token per byte)");
  require(heads >= 1 && d_model % heads == 0,
          "d_model: " + str(d_model) + " must be a multiple of heads (" + str(heads) + ")");
  require(lanes >= 2 && (lanes & (lanes - 1)) == 0,
          "lanes: " + str(lanes) + " must be a power of two, at least 2");
  require(data >= 1, "data: " + std::to_string(data) + " must be at least 1");
  require(model >= 1 && heads % static_cast<std::size_t>(model) == 0,
          "model: " + std::to_string(model) + " must divide heads (" + str(heads) + ")");
  const std::size_t q = lanes * static_cast<std::size_t>(model);
  require(d_model > 0 && d_model % q == 0, "d_model: " + str(d_model) +
                                               " must be a multiple of model x lanes (" + str(q) +
                                               "): whole lane rows in every shard");
  require(seq >= 1, "seq: must be at least 1");
  require(seq <= ctx(), "seq: " + str(seq) + " is longer than wpe's " + str(ctx()) + " rows");
  require(batch >= 1, "batch: every data rank needs at least one window");
  require(microbatches >= 1 && batch % microbatches == 0,
          "microbatches: " + str(microbatches) + " must divide the windows per data rank (" +
              str(batch) + ")");
  require(std::isfinite(lr) && lr > 0, "lr: must be finite and > 0");
  require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay: must be >= 0");
  require(beta1 >= 0 && beta1 < 1, "beta1: must be in [0, 1)");
  require(beta2 >= 0 && beta2 < 1, "beta2: must be in [0, 1)");
  require(std::isfinite(eps) && eps > 0, "eps: must be finite and > 0");
  const std::size_t P = static_cast<std::size_t>(chips());
  require((data_rank.empty() || data_rank.size() == P) &&
              (model_rank.empty() || model_rank.size() == P) &&
              data_rank.empty() == model_rank.empty(),
          "ranks: one data and one model rank per chip, or none");
  std::vector<int> seen(P, 0);
  for (int c = 0; c < chips(); ++c) {
    const int d = data_rank_of(c), m = model_rank_of(c);
    require(d >= 0 && d < data && m >= 0 && m < model, "ranks: chip " + std::to_string(c) +
                                                           " has data rank " + std::to_string(d) +
                                                           ", model rank " + std::to_string(m));
    require(seen[static_cast<std::size_t>(d * model + m)]++ == 0,
            "ranks: two chips have data rank " + std::to_string(d) + " and model rank " +
                std::to_string(m));
  }
}

GptParams gpt_zero_params(const GptSpec& spec) { return zero_params(spec, 1); }

GptParams gpt_zero_shard(const GptSpec& spec) {
  return zero_params(spec, static_cast<std::size_t>(spec.model));
}

uint64_t gpt_window_macs(const GptSpec& spec) {
  const uint64_t M = static_cast<uint64_t>(spec.model), S = spec.seq, d = spec.d_model,
                 dh = spec.head_dim(), H = spec.heads / M, f = 4 * d / M, V = spec.vocab;
  const uint64_t layer = S * d * 3 * H * dh + 2 * H * S * S * dh + S * H * dh * d + 2 * S * d * f;
  return 3 * (spec.layers * layer + S * d * V / M);
}

double gpt_normal(uint64_t base, uint64_t i) {
  double s = 0;  // twelve multiples of 2^-49 below 1: the sum is exact in f64
  for (uint64_t j = 0; j < 12; ++j)
    s += static_cast<double>(splitmix64(base + 12 * i + j) >> 15) * 0x1p-49;
  return s - 6.0;
}

GptParams gpt_init(const GptSpec& spec, uint64_t seed) {
  spec.validate();
  GptParams p = gpt_zero_params(spec);
  const double sd = 0.02, sd_out = 0.02 / std::sqrt(2.0 * static_cast<double>(spec.layers));
  for (std::size_t k = 0; k < p.size(); ++k) {
    GptTensor& t = p[k];
    const std::string& n = t.name;
    const bool gain = n.size() > 2 && n.compare(n.size() - 2, 2, ".g") == 0;
    if (gain) t.v.assign(t.v.size(), 1.0f);
    if (!t.matrix()) continue;  // biases stay 0
    const bool out =
        n.find("attn.wo") != std::string::npos || n.find("mlp.w2") != std::string::npos;
    const uint64_t base = splitmix64(seed + 0x9E3779B97F4A7C15ull * (k + 1));
    for (std::size_t i = 0; i < t.v.size(); ++i)
      t.v[i] = static_cast<float>(gpt_normal(base, i) * (out ? sd_out : sd));
  }
  return p;
}

GptParams gpt_shard(const GptSpec& spec, const GptParams& full, int m) {
  const std::size_t M = static_cast<std::size_t>(spec.model), mm = static_cast<std::size_t>(m);
  GptParams s = gpt_zero_shard(spec);
  if (full.size() != s.size()) throw std::invalid_argument("gpt_shard: wrong parameter count");
  const std::size_t d = spec.d_model, f = 4 * d;
  for (std::size_t k = 0; k < s.size(); ++k) s[k].v = full[k].v;
  for (std::size_t l = 0; l < spec.layers; ++l) {
    auto at = [&](GptLayerSlot x) -> std::pair<GptTensor&, const GptTensor&> {
      return {s[gpt_index(l, x)], full[gpt_index(l, x)]};
    };
    at(kWqkv).first.v = take_cols(at(kWqkv).second.v, d, 3 * d, 3, mm, M);
    at(kBqkv).first.v = take_cols(at(kBqkv).second.v, 1, 3 * d, 3, mm, M);
    at(kW1).first.v = take_cols(at(kW1).second.v, d, f, 1, mm, M);
    at(kB1).first.v = take_cols(at(kB1).second.v, 1, f, 1, mm, M);
    const std::vector<float>& wo = full[gpt_index(l, kWo)].v;  // rows
    s[gpt_index(l, kWo)].v.assign(wo.begin() + static_cast<std::ptrdiff_t>(mm * d / M * d),
                                  wo.begin() + static_cast<std::ptrdiff_t>((mm + 1) * d / M * d));
    const std::vector<float>& w2 = full[gpt_index(l, kW2)].v;
    s[gpt_index(l, kW2)].v.assign(w2.begin() + static_cast<std::ptrdiff_t>(mm * f / M * d),
                                  w2.begin() + static_cast<std::ptrdiff_t>((mm + 1) * f / M * d));
  }
  return s;
}

GptParams gpt_unshard(const GptSpec& spec, const std::vector<GptParams>& shards) {
  const std::size_t M = static_cast<std::size_t>(spec.model);
  if (shards.size() != M) throw std::invalid_argument("gpt_unshard: one shard per model rank");
  GptParams p = gpt_zero_params(spec);
  const std::size_t d = spec.d_model, f = 4 * d;
  for (std::size_t k = 0; k < p.size(); ++k)
    if (p[k].v.size() == shards[0][k].v.size()) p[k].v = shards[0][k].v;
  for (std::size_t l = 0; l < spec.layers; ++l)
    for (std::size_t m = 0; m < M; ++m) {
      const GptParams& s = shards[m];
      put_cols(p[gpt_index(l, kWqkv)].v, s[gpt_index(l, kWqkv)].v, d, 3 * d, 3, m, M);
      put_cols(p[gpt_index(l, kBqkv)].v, s[gpt_index(l, kBqkv)].v, 1, 3 * d, 3, m, M);
      put_cols(p[gpt_index(l, kW1)].v, s[gpt_index(l, kW1)].v, d, f, 1, m, M);
      put_cols(p[gpt_index(l, kB1)].v, s[gpt_index(l, kB1)].v, 1, f, 1, m, M);
      const std::vector<float>& wo = s[gpt_index(l, kWo)].v;
      std::copy(wo.begin(), wo.end(),
                p[gpt_index(l, kWo)].v.begin() + static_cast<std::ptrdiff_t>(m * d / M * d));
      const std::vector<float>& w2 = s[gpt_index(l, kW2)].v;
      std::copy(w2.begin(), w2.end(),
                p[gpt_index(l, kW2)].v.begin() + static_cast<std::ptrdiff_t>(m * f / M * d));
    }
  return p;
}

std::vector<int32_t> gpt_windows(const GptSpec& spec, const std::vector<uint8_t>& text,
                                 uint64_t seed, uint64_t step) {
  spec.validate();
  const std::size_t w = spec.seq + 1, n = spec.global_batch();
  if (text.size() < w)
    throw std::invalid_argument("data: the text has " + str(text.size()) +
                                " bytes, shorter than one window of seq + 1 = " + str(w));
  const uint64_t base = splitmix64(seed ^ 0x6A09E667F3BCC909ull);
  const uint64_t starts = text.size() - spec.seq;  // start in [0, len - seq - 1]
  std::vector<int32_t> out;
  out.reserve(n * w);
  for (std::size_t b = 0; b < n; ++b) {
    const uint64_t s0 = splitmix64(base + step * n + b) % starts;
    for (std::size_t i = 0; i < w; ++i) out.push_back(text[s0 + i]);
  }
  return out;
}

double gpt_loss(const GptSpec& spec, const std::vector<std::vector<float>>& parts) {
  std::vector<const std::vector<float>*> by_rank(static_cast<std::size_t>(spec.data), nullptr);
  for (std::size_t c = 0; c < parts.size(); ++c)
    if (spec.model_rank_of(static_cast<int>(c)) == 0)
      by_rank.at(static_cast<std::size_t>(spec.data_rank_of(static_cast<int>(c)))) = &parts[c];
  double s = 0;
  for (const auto* p : by_rank)
    if (p)
      for (float v : *p) s += static_cast<double>(v);
  return s / static_cast<double>(spec.global_batch() * spec.seq);
}

}  // namespace tpu
