#include "tpu/train.h"

#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "tpu/matmul.h"
#include "tpu/splitmix.h"
#include "tpu/vector.h"

namespace tpu {

void MlpSpec::validate() const {
  if (widths.size() < 2)
    throw std::invalid_argument("layers: need at least two widths (inputs and outputs)");
  if (lanes == 0) throw std::invalid_argument("lanes: must be > 0");
  const std::size_t q = width_multiple();
  for (std::size_t w : widths)
    if (w == 0 || w % q != 0)
      throw std::invalid_argument("layers: width " + std::to_string(w) + " must be a positive "
                                  "multiple of " + std::to_string(q) +
                                  " (whole 64-byte bursts per matrix row on this chip)");
  if (batch == 0) throw std::invalid_argument("batch: every chip needs at least one example");
  if (chips < 1) throw std::invalid_argument("chips: at least one");
  if (model < 1 || chips % model != 0)
    throw std::invalid_argument("model: " + std::to_string(model) + " ways must divide the " +
                                std::to_string(chips) + " chips");
  if (model > 1) {
    if (layers() != 2)
      throw std::invalid_argument("model: tensor parallelism splits the hidden layer of a "
                                  "two-layer network (got " + std::to_string(layers()) +
                                  " layers)");
    if (widths[1] % (q * static_cast<std::size_t>(model)) != 0)
      throw std::invalid_argument("layers: the hidden width " + std::to_string(widths[1]) +
                                  " must be a multiple of " +
                                  std::to_string(q * static_cast<std::size_t>(model)) + " (" +
                                  std::to_string(model) + " model shards of a multiple of " +
                                  std::to_string(q) + ")");
  }
  const std::size_t P = static_cast<std::size_t>(chips);
  if ((!data_rank.empty() && data_rank.size() != P) || (!model_rank.empty() && model_rank.size() != P) ||
      (model > 1 && model_rank.empty()))
    throw std::invalid_argument("ranks: one data and one model rank per chip");
  std::vector<int> seen(P, 0);
  for (int c = 0; c < chips; ++c) {
    const int d = data_rank_of(c), m = model_rank_of(c);
    if (d < 0 || d >= data() || m < 0 || m >= model)
      throw std::invalid_argument("ranks: chip " + std::to_string(c) + " has data rank " +
                                  std::to_string(d) + ", model rank " + std::to_string(m));
    if (seen[static_cast<std::size_t>(d * model + m)]++)
      throw std::invalid_argument("ranks: two chips have data rank " + std::to_string(d) +
                                  " and model rank " + std::to_string(m));
  }
  if (!std::isfinite(lr) || lr <= 0) throw std::invalid_argument("lr: must be finite and > 0");
  if (loss_chunk == 0) throw std::invalid_argument("loss_chunk: must be > 0");
  if (microbatches == 0 || batch % microbatches != 0)
    throw std::invalid_argument("microbatches: " + std::to_string(microbatches) +
                                " must divide the " + std::to_string(batch) +
                                " examples of a replica's batch");
  if (microbatches > 1 && model > 1)
    throw std::invalid_argument("microbatches: tensor parallelism runs the batch at once (got " +
                                std::to_string(microbatches) + " micro-batches with model=" +
                                std::to_string(model) + ")");
}

std::size_t MlpSpec::in_width(std::size_t l) const {
  return (model > 1 && l == 1) ? widths[1] / static_cast<std::size_t>(model) : widths[l];
}

std::size_t MlpSpec::out_width(std::size_t l) const {
  return (model > 1 && l == 0) ? widths[1] / static_cast<std::size_t>(model) : widths[l + 1];
}

std::size_t MlpSpec::width_multiple() const { return std::lcm<std::size_t>(lanes, 32); }

namespace {

// A seed per use (teacher, data batch, initial weights) from the run's seed.
uint64_t mix(uint64_t seed, uint64_t salt) { return splitmix64(seed + 0x9E3779B97F4A7C15ull * salt); }

// The teacher: He-normal hidden layers, N(0, 1/in) output layer, biases N(0, 0.1^2), in f64.
struct Teacher {
  std::vector<std::vector<double>> w, b;
};

Teacher make_teacher(const MlpSpec& spec, uint64_t seed) {
  Teacher t;
  std::mt19937_64 rng(mix(seed, 1));
  for (std::size_t l = 0; l < spec.layers(); ++l) {
    const std::size_t in = spec.widths[l], out = spec.widths[l + 1];
    const double sd = std::sqrt((l + 1 < spec.layers() ? 2.0 : 1.0) / static_cast<double>(in));
    std::normal_distribution<double> nw(0.0, sd), nb(0.0, l + 1 < spec.layers() ? 0.1 : 1.0);
    std::vector<double> w(in * out), b(out);
    for (double& v : w) v = nw(rng);
    for (double& v : b) v = nb(rng);
    t.w.push_back(std::move(w));
    t.b.push_back(std::move(b));
  }
  return t;
}

std::vector<bf16_t> transpose_bits(const std::vector<bf16_t>& m, std::size_t rows,
                                   std::size_t cols) {
  std::vector<bf16_t> t(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + i] = m[i * cols + j];
  return t;
}

}  // namespace

MlpData make_mlp_data(const MlpSpec& spec, uint64_t seed, uint64_t batch_index) {
  spec.validate();
  const std::size_t n = spec.global_batch(), d_in = spec.widths.front();
  MlpData d;
  std::mt19937_64 rng(mix(seed, 100 + batch_index));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  d.x.resize(n * d_in);
  for (bf16_t& v : d.x) v = f32_to_bf16(static_cast<float>(u(rng)));
  const Teacher t = make_teacher(spec, seed);
  std::vector<double> a(d.x.size());
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = bf16_to_f32(d.x[i]);
  for (std::size_t l = 0; l < spec.layers(); ++l) {
    const std::size_t in = spec.widths[l], out = spec.widths[l + 1];
    std::vector<double> z(n * out);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t j = 0; j < out; ++j) {
        double s = t.b[l][j];
        for (std::size_t k = 0; k < in; ++k) s += a[r * in + k] * t.w[l][k * out + j];
        z[r * out + j] = (l + 1 < spec.layers()) ? std::max(s, 0.0) : s;
      }
    a = std::move(z);
  }
  d.t.resize(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d.t[i] = static_cast<float>(a[i]);
  return d;
}

MlpParams init_mlp_params(const MlpSpec& spec, uint64_t seed) {
  spec.validate();
  MlpParams p;
  std::mt19937_64 rng(mix(seed, 2));
  for (std::size_t l = 0; l < spec.layers(); ++l) {
    const std::size_t in = spec.widths[l], out = spec.widths[l + 1];
    const double r = 1.0 / std::sqrt(static_cast<double>(in));
    std::uniform_real_distribution<double> u(-r, r);
    MlpLayer layer;
    layer.w.resize(in * out);
    for (float& v : layer.w) v = static_cast<float>(u(rng));
    layer.b.assign(out, 0.0f);
    p.push_back(std::move(layer));
  }
  return p;
}

MlpConsts mlp_consts(const MlpSpec& spec) {
  MlpConsts c;
  c.grad_scale = static_cast<float>(2.0 / (static_cast<double>(spec.global_batch()) *
                                           static_cast<double>(spec.widths.back())));
  c.neg_lr = -spec.lr;
  c.mask_big = std::ldexp(1.0f, 127);
  c.one = 1.0f;
  return c;
}

std::vector<float> mlp_loss_partial(const std::vector<float>& d, std::size_t rows,
                                    std::size_t cols, std::size_t lanes, std::size_t chunk) {
  if (d.size() != rows * cols || cols % lanes != 0 || chunk == 0)
    throw std::invalid_argument("mlp_loss_partial: sizes do not match");
  const std::size_t pr = cols / lanes;  // memory rows per matrix row
  const std::size_t n0 = std::min(chunk, rows) * pr;
  std::vector<float> acc(n0 * lanes, -0.0f);
  for (std::size_t r0 = 0; r0 < rows; r0 += chunk) {
    const std::size_t n = std::min(chunk, rows - r0) * pr * lanes;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = d[r0 * cols + i];
      acc[i] = f32_add(f32_mul(v, v), acc[i]);
    }
  }
  for (std::size_t n = n0; n > 1;) {
    const std::size_t h = n / 2;
    for (std::size_t i = 0; i < h * lanes; ++i) acc[i] = f32_add(acc[i], acc[(n - h) * lanes + i]);
    n -= h;
  }
  acc.resize(lanes);
  return acc;
}

double mlp_loss(const MlpSpec& spec, const std::vector<std::vector<float>>& parts) {
  double s = 0;
  const std::size_t per = spec.chips > 0 && parts.size() > static_cast<std::size_t>(spec.chips)
                              ? parts.size() / static_cast<std::size_t>(spec.chips)
                              : 1;  // micro-batches per chip
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (spec.model_rank_of(static_cast<int>(i / per)) != 0) continue;
    for (float v : parts[i]) s += static_cast<double>(v);
  }
  return s / (static_cast<double>(spec.global_batch()) * static_cast<double>(spec.widths.back()));
}

MlpParams mlp_shard(const MlpSpec& spec, const MlpParams& full, int m) {
  if (spec.model <= 1) return full;
  const std::size_t in = spec.widths[0], h = spec.widths[1], out = spec.widths[2];
  const std::size_t hm = h / static_cast<std::size_t>(spec.model), h0 = hm * static_cast<std::size_t>(m);
  MlpParams p(2);
  for (std::size_t i = 0; i < in; ++i)  // layer 0: columns [h0, h0 + hm)
    p[0].w.insert(p[0].w.end(), full[0].w.begin() + static_cast<std::ptrdiff_t>(i * h + h0),
                  full[0].w.begin() + static_cast<std::ptrdiff_t>(i * h + h0 + hm));
  p[0].b.assign(full[0].b.begin() + static_cast<std::ptrdiff_t>(h0),
                full[0].b.begin() + static_cast<std::ptrdiff_t>(h0 + hm));
  p[1].w.assign(full[1].w.begin() + static_cast<std::ptrdiff_t>(h0 * out),  // rows [h0, h0 + hm)
                full[1].w.begin() + static_cast<std::ptrdiff_t>((h0 + hm) * out));
  p[1].b = full[1].b;
  return p;
}

MlpParams mlp_unshard(const MlpSpec& spec, const std::vector<MlpParams>& shards) {
  if (spec.model <= 1) return shards.at(0);
  if (shards.size() != static_cast<std::size_t>(spec.model))
    throw std::invalid_argument("mlp_unshard: one shard per model rank");
  const std::size_t in = spec.widths[0], h = spec.widths[1];
  const std::size_t hm = h / static_cast<std::size_t>(spec.model);
  MlpParams p(2);
  p[0].w.resize(in * h);
  for (std::size_t m = 0; m < shards.size(); ++m) {
    for (std::size_t i = 0; i < in; ++i)
      for (std::size_t j = 0; j < hm; ++j) p[0].w[i * h + m * hm + j] = shards[m][0].w[i * hm + j];
    p[0].b.insert(p[0].b.end(), shards[m][0].b.begin(), shards[m][0].b.end());
    p[1].w.insert(p[1].w.end(), shards[m][1].w.begin(), shards[m][1].w.end());
  }
  p[1].b = shards[0][1].b;
  return p;
}

MlpGolden::MlpGolden(const MlpSpec& spec, const MlpParams& init) : spec_(spec) {
  spec_.validate();
  if (init.size() != spec_.layers())
    throw std::invalid_argument("MlpGolden: parameters for " + std::to_string(init.size()) +
                                " layers, the spec has " + std::to_string(spec_.layers()));
  for (int c = 0; c < spec_.chips; ++c) p_.push_back(mlp_shard(spec_, init, spec_.model_rank_of(c)));
}

// One micro-batch (rows [k b, (k + 1) b) of each chip's batch, b = batch / microbatches) on
// every chip: forward, loss (its partial sums into res->loss_parts), backward; returns per layer,
// per chip its (in + 1) x out f32 gradient.
std::vector<std::vector<std::vector<uint32_t>>> MlpGolden::micro_step(
    const MlpData& data, std::size_t k, const ModelAllReduce& model_all_reduce,
    MlpStepResult* res) const {
  const std::size_t L = spec_.layers(), P = static_cast<std::size_t>(spec_.chips);
  const std::size_t B = spec_.batch / spec_.microbatches, full = spec_.batch;
  const std::size_t d_in = spec_.widths.front(), d_out = spec_.widths.back();
  const MlpConsts kc = mlp_consts(spec_);
  const uint32_t s_bits = f32_bits(kc.grad_scale), big = f32_bits(kc.mask_big),
                 one = f32_bits(kc.one);
  std::vector<std::vector<std::vector<uint32_t>>> grads(L, std::vector<std::vector<uint32_t>>(P));
  std::vector<std::vector<std::vector<bf16_t>>> wb(P), act(P);
  std::vector<std::vector<uint32_t>> pred(P);
  // Forward on every chip: bf16 activations between layers, the last layer's output in f32 (a
  // partial product with tensor parallelism: its bias on model rank 0 only).
  for (std::size_t c = 0; c < P; ++c) {
    const MlpParams& p = p_[c];
    wb[c].resize(L);
    act[c].resize(L);
    for (std::size_t l = 0; l < L; ++l) {
      wb[c][l].resize(p[l].w.size());
      for (std::size_t i = 0; i < wb[c][l].size(); ++i) wb[c][l][i] = f32_to_bf16(p[l].w[i]);
    }
    const std::size_t d = static_cast<std::size_t>(spec_.data_rank_of(static_cast<int>(c)));
    const std::size_t r0 = d * full + k * B;  // the micro-batch's first row in the global batch
    act[c][0].assign(data.x.begin() + static_cast<std::ptrdiff_t>(r0 * d_in),
                     data.x.begin() + static_cast<std::ptrdiff_t>((r0 + B) * d_in));
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t in = spec_.in_width(l), out = spec_.out_width(l);
      const bool last = l + 1 == L;
      const bool bias = !last || spec_.model_rank_of(static_cast<int>(c)) == 0;
      const auto y = golden_matmul_epilogue(golden_matmul(act[c][l], wb[c][l], B, in, out), B, out,
                                            bias ? &p[l].b : nullptr, !last, !last);
      if (last) {
        pred[c] = y;
      } else {
        act[c][l + 1].resize(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) act[c][l + 1][i] = static_cast<bf16_t>(y[i]);
      }
    }
  }
  if (spec_.model > 1) pred = model_all_reduce(pred);
  for (std::size_t c = 0; c < P; ++c) {
    const std::size_t d = static_cast<std::size_t>(spec_.data_rank_of(static_cast<int>(c)));
    // Loss and its gradient: D = P - T, the partial sum of D^2, dY = bf16(D x scale).
    std::vector<float> dd(B * d_out);
    std::vector<bf16_t> dy(B * d_out);
    for (std::size_t i = 0; i < dd.size(); ++i) {
      const uint32_t t = f32_bits(data.t[(d * full + k * B) * d_out + i]);
      const uint32_t di = vpu_lane(VpuOp::kSub, pred[c].at(i), t, 0);
      dd[i] = f32_from_bits(di);
      dy[i] = static_cast<bf16_t>(vpu_lane(VpuOp::kMul, di, s_bits, 0, 0, true));
    }
    res->loss_parts[c * spec_.microbatches + k] =
        mlp_loss_partial(dd, B, d_out, spec_.lanes, spec_.loss_chunk);
    // Backward, last layer first.
    for (std::size_t l = L; l-- > 0;) {
      const std::size_t in = spec_.in_width(l), out = spec_.out_width(l);
      // [A^T; 1] (in + 1) x B: the transpose through the MXU, then a row of ones (the bias).
      std::vector<bf16_t> at = golden_transpose(act[c][l], B, in, spec_.lanes);
      at.resize((in + 1) * B, f32_to_bf16(1.0f));
      const std::vector<float> g = golden_matmul(at, dy, in + 1, B, out);
      grads[l][c] = golden_matmul_epilogue(g, in + 1, out, nullptr, false, false);
      if (l == 0) break;
      // dA = dY W^T (a transposed weight load: the bits move unchanged), then the ReLU mask.
      const std::vector<float> da =
          golden_matmul(dy, transpose_bits(wb[c][l], in, out), B, out, in);
      std::vector<bf16_t> dyn(B * in);
      for (std::size_t i = 0; i < dyn.size(); ++i) {
        const uint32_t m1 = vpu_lane(VpuOp::kMul, act[c][l][i], big, 0, kVpuSrcBf16X);
        const uint32_t m2 = vpu_lane(VpuOp::kMul, m1, big, 0);
        const uint32_t m3 = vpu_lane(VpuOp::kMin, m2, one, 0);
        dyn[i] = static_cast<bf16_t>(vpu_lane(VpuOp::kMul, f32_bits(da[i]), m3, 0, 0, true));
      }
      dy = std::move(dyn);
    }
  }
  return grads;
}

MlpStepResult MlpGolden::step(const MlpData& data, const GradAllReduce& all_reduce,
                              const ModelAllReduce& model_all_reduce) {
  const std::size_t L = spec_.layers(), P = static_cast<std::size_t>(spec_.chips);
  const std::size_t d_in = spec_.widths.front(), d_out = spec_.widths.back();
  if (data.x.size() != spec_.global_batch() * d_in || data.t.size() != spec_.global_batch() * d_out)
    throw std::invalid_argument("MlpGolden::step: the batch does not match the spec");
  if (spec_.model > 1 && !model_all_reduce)
    throw std::invalid_argument("MlpGolden::step: tensor parallel needs the model all-reduce");
  const std::size_t M = spec_.microbatches;
  MlpStepResult res;
  res.loss_parts.assign(P * M, {});
  std::vector<std::vector<std::vector<uint32_t>>> grads(L, std::vector<std::vector<uint32_t>>(P));
  for (std::size_t k = 0; k < M; ++k) {
    const auto g = micro_step(data, k, model_all_reduce, &res);
    // Accumulated in f32, micro-batch 0 first: g = g0, then g = g + gk (one rounding each).
    for (std::size_t l = 0; l < L; ++l)
      for (std::size_t c = 0; c < P; ++c) {
        if (k == 0) {
          grads[l][c] = g[l][c];
          continue;
        }
        for (std::size_t i = 0; i < grads[l][c].size(); ++i)
          grads[l][c][i] = vpu_lane(VpuOp::kAdd, grads[l][c][i], g[l][c][i], 0);
      }
  }
  const uint32_t nlr = f32_bits(mlp_consts(spec_).neg_lr);
  // The gradients summed over the data axis, then SGD on every chip: w = w + (g x -lr), two
  // roundings (the chip's VPU commands have no third operand).
  for (std::size_t l = 0; l < L; ++l) {
    const auto sum = all_reduce(l, grads[l]);
    const std::size_t in = spec_.in_width(l), out = spec_.out_width(l);
    for (std::size_t c = 0; c < P; ++c) {
      MlpLayer& layer = p_[c][l];
      const std::vector<uint32_t>& g = sum.at(c);
      if (g.size() != (in + 1) * out)
        throw std::invalid_argument("MlpGolden::step: the all-reduce returned the wrong size");
      auto sgd = [&](float w, uint32_t gi) {
        return f32_from_bits(vpu_lane(VpuOp::kAdd, f32_bits(w), vpu_lane(VpuOp::kMul, gi, nlr, 0), 0));
      };
      for (std::size_t i = 0; i < in * out; ++i) layer.w[i] = sgd(layer.w[i], g[i]);
      for (std::size_t j = 0; j < out; ++j) layer.b[j] = sgd(layer.b[j], g[in * out + j]);
    }
  }
  res.loss = mlp_loss(spec_, res.loss_parts);
  return res;
}

}  // namespace tpu
