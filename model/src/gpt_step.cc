// The GPT golden's training step (tpu/gpt.h): forward, cross-entropy, backward and AdamW on every
// chip of the data x model mesh, in the order docs/training.md ("The GPT step") defines.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "gpt_ops.h"
#include "tpu/gpt.h"
#include "tpu/transcend.h"

namespace tpu {

using namespace gpt_detail;

namespace {

// What one layer keeps for the backward pass (one chip; dm = d / model, fm = 4d / model).
struct LayerCache {
  std::vector<float> xhat1, rstd1, x1;  // LN1: normalised rows, 1/std, output [T x d]
  std::vector<float> qkv;               // [T x 3dm]: q | k | v of the chip's heads
  std::vector<float> probs;             // [B x Hm x S x S] softmax rows
  std::vector<float> att;               // [T x dm] heads concatenated
  std::vector<float> xhat2, rstd2, x2;  // LN2
  std::vector<float> u, a;              // [T x fm]: x2 w1 + b1 and gelu(u)
};

// One chip's step.
struct Run {
  const GptParams* p = nullptr;
  GptParams* g = nullptr;
  std::vector<int32_t> in, tgt;  // [T] tokens and next tokens
  std::vector<float> h;          // [T x d] residual stream
  std::vector<LayerCache> lc;
  std::vector<float> xhatf, rstdf, xf, dlogits;
  std::vector<float> loss_parts;  // [B]
};

struct Dims {
  std::size_t B, S, T, d, dm, fm, Hm, dh, V, lanes;
  float scale;  // rsqrt(dh)
};

Dims dims_of(const GptSpec& s) {
  const std::size_t M = static_cast<std::size_t>(s.model);
  return Dims{s.batch,
              s.seq,
              s.tokens(),
              s.d_model,
              s.d_model / M,
              4 * s.d_model / M,
              s.heads / M,
              s.head_dim(),
              s.vocab,
              s.lanes,
              xcend_rsqrt(static_cast<float>(s.head_dim()))};
}

const std::vector<float>& par(const Run& r, std::size_t l, GptLayerSlot s) {
  return (*r.p)[gpt_index(l, s)].v;
}
std::vector<float>& grad(Run& r, std::size_t l, GptLayerSlot s) {
  return (*r.g)[gpt_index(l, s)].v;
}

// The model all-reduce: the partial sums of the chips of one data rank, folded in model-rank
// order, ((p0 + p1) + p2) + ..., the same bits on every chip.
std::vector<float> model_fold(const std::vector<std::vector<float>>& parts) {
  std::vector<float> s = parts[0];
  for (std::size_t m = 1; m < parts.size(); ++m) add_into(s, parts[m]);
  return s;
}

// The model sums of one data rank's step, in order (GptModelReduce's sites).
struct ModelSums {
  const GptModelReduce* reduce = nullptr;
  std::size_t data_rank = 0, site = 0;
  std::vector<float> operator()(const std::vector<std::vector<float>>& parts) {
    const std::size_t at = site++;
    return reduce && *reduce ? (*reduce)(at, data_rank, parts) : model_fold(parts);
  }
};

// x [rows x n] + bias[j] per row (f32_add).
void add_bias(std::vector<float>& x, const std::vector<float>& b) {
  const std::size_t n = b.size();
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = f32_add(x[i], b[i % n]);
}

// h = wte[token] + wpe[position].
void embed(Run& r, const Dims& D) { r.h = gpt_embed((*r.p)[0].v, (*r.p)[1].v, r.in, D.S, D.d); }

// Head j of window b in a [T x width] matrix: the S x dh block whose columns start at col0 + j dh
// (q, k and v of the qkv matrix at col0 = 0, dm, 2 dm; the attention output at 0).
std::vector<float> head_block(const std::vector<float>& m, std::size_t width, std::size_t col0,
                              std::size_t b, std::size_t j, const Dims& D) {
  std::vector<float> blk(D.S * D.dh);
  for (std::size_t i = 0; i < D.S; ++i)
    for (std::size_t x = 0; x < D.dh; ++x)
      blk[i * D.dh + x] = m[(b * D.S + i) * width + col0 + j * D.dh + x];
  return blk;
}

// The inverse of head_block: writes the S x dh block back in place.
void put_head_block(std::vector<float>& m, std::size_t width, std::size_t col0, std::size_t b,
                    std::size_t j, const std::vector<float>& blk, const Dims& D) {
  for (std::size_t i = 0; i < D.S; ++i)
    for (std::size_t x = 0; x < D.dh; ++x)
      m[(b * D.S + i) * width + col0 + j * D.dh + x] = blk[i * D.dh + x];
}

// Causal softmax attention of the chip's heads: c.qkv -> c.att, c.probs.
void attention(LayerCache& c, const Dims& D) {
  const std::size_t S = D.S, dh = D.dh, w = 3 * D.dm;
  c.att.assign(D.T * D.dm, 0.0f);
  c.probs.assign(D.B * D.Hm * S * S, 0.0f);
  for (std::size_t b = 0; b < D.B; ++b)
    for (std::size_t j = 0; j < D.Hm; ++j) {
      const std::vector<float> q = head_block(c.qkv, w, 0, b, j, D);
      const std::vector<float> kt = transpose(head_block(c.qkv, w, D.dm, b, j, D), S, dh);
      const std::vector<float> v = head_block(c.qkv, w, 2 * D.dm, b, j, D);
      const std::vector<float> p =
          gpt_causal_softmax(mm(q, kt, S, dh, S), S, S, D.scale, D.lanes);
      std::copy(p.begin(), p.end(),
                c.probs.begin() + static_cast<std::ptrdiff_t>((b * D.Hm + j) * S * S));
      put_head_block(c.att, D.dm, 0, b, j, mm(p, v, S, S, dh), D);
    }
}

// One layer's forward on the chips of one data rank (model ranks in order).
void layer_forward(std::vector<Run>& g, std::size_t l, const Dims& D, ModelSums& sum) {
  std::vector<std::vector<float>> part(g.size());
  for (std::size_t m = 0; m < g.size(); ++m) {
    Run& r = g[m];
    LayerCache& c = r.lc[l];
    c.x1 =
        gpt_layernorm(r.h, D.T, D.d, par(r, l, kLn1G), par(r, l, kLn1B), D.lanes, c.xhat1, c.rstd1);
    c.qkv = mm(c.x1, par(r, l, kWqkv), D.T, D.d, 3 * D.dm);
    add_bias(c.qkv, par(r, l, kBqkv));
    attention(c, D);
    part[m] = mm(c.att, par(r, l, kWo), D.T, D.dm, D.d);
  }
  std::vector<float> y = sum(part);
  for (Run& r : g) {
    std::vector<float> yb = y;
    add_bias(yb, par(r, l, kBo));
    add_into(r.h, yb);
  }
  for (std::size_t m = 0; m < g.size(); ++m) {
    Run& r = g[m];
    LayerCache& c = r.lc[l];
    c.x2 =
        gpt_layernorm(r.h, D.T, D.d, par(r, l, kLn2G), par(r, l, kLn2B), D.lanes, c.xhat2, c.rstd2);
    c.u = mm(c.x2, par(r, l, kW1), D.T, D.d, D.fm);
    add_bias(c.u, par(r, l, kB1));
    c.a.resize(c.u.size());
    for (std::size_t i = 0; i < c.u.size(); ++i) c.a[i] = xcend_gelu(c.u[i]);
    part[m] = mm(c.a, par(r, l, kW2), D.T, D.fm, D.d);
  }
  y = sum(part);
  for (Run& r : g) {
    std::vector<float> yb = y;
    add_bias(yb, par(r, l, kB2));
    add_into(r.h, yb);
  }
}

// Final LN, head, cross-entropy and its gradient (every model rank alike).
void loss_head(Run& r, const Dims& D, std::size_t layers, float inv_n) {
  const std::size_t f = gpt_index_lnf_g(layers), V = D.V;
  r.xf = gpt_layernorm(r.h, D.T, D.d, (*r.p)[f].v, (*r.p)[f + 1].v, D.lanes, r.xhatf, r.rstdf);
  const std::vector<float> logits = mm(r.xf, (*r.p)[f + 2].v, D.T, D.d, V);
  std::vector<float> loss;
  gpt_cross_entropy(logits, r.tgt, V, inv_n, D.lanes, loss, r.dlogits);
  r.loss_parts.resize(D.B);
  for (std::size_t b = 0; b < D.B; ++b)
    r.loss_parts[b] = row_reduce(VpuOp::kRedSum, loss, b * D.S, D.S, D.lanes);
}

// Backward of the causal softmax attention: datt [T x dm] -> dqkv [T x 3dm].
std::vector<float> attention_back(const LayerCache& c, const std::vector<float>& datt,
                                  const Dims& D) {
  const std::size_t S = D.S, dh = D.dh, w = 3 * D.dm;
  std::vector<float> dqkv(D.T * w, 0.0f);
  for (std::size_t b = 0; b < D.B; ++b)
    for (std::size_t j = 0; j < D.Hm; ++j) {
      const std::vector<float> q = head_block(c.qkv, w, 0, b, j, D);
      const std::vector<float> k = head_block(c.qkv, w, D.dm, b, j, D);
      const std::vector<float> v = head_block(c.qkv, w, 2 * D.dm, b, j, D);
      const std::vector<float> dout = head_block(datt, D.dm, 0, b, j, D);
      const float* pr = &c.probs[(b * D.Hm + j) * S * S];
      const std::vector<float> pm(pr, pr + S * S);
      const std::vector<float> dp = mm(dout, transpose(v, S, dh), S, dh, S);
      const std::vector<float> dv = mm(transpose(pm, S, S), dout, S, S, dh);
      const std::vector<float> ds = gpt_softmax_back(pm, dp, S, S, D.scale, D.lanes);
      put_head_block(dqkv, w, 0, b, j, mm(ds, k, S, S, dh), D);
      put_head_block(dqkv, w, D.dm, b, j, mm(transpose(ds, S, S), q, S, S, dh), D);
      put_head_block(dqkv, w, 2 * D.dm, b, j, dv, D);
    }
  return dqkv;
}

// dY [T x n] through y = x W + b with x [T x in] on every chip: dW = x^T dY, db = column sums,
// returns the chip's partial dX = dY W^T.
std::vector<float> linear_back(const std::vector<float>& x, const std::vector<float>& dy,
                               const std::vector<float>& w, std::size_t T, std::size_t in,
                               std::size_t n, std::vector<float>& dw, std::vector<float>* db) {
  dw = mm(transpose(x, T, in), dy, in, T, n);
  if (db) col_sum(*db, dy, T, n);
  return mm(dy, transpose(w, in, n), T, n, in);
}

// One layer's backward on the chips of one data rank: each r.h holds dL/dh on entry and exit.
void layer_backward(std::vector<Run>& g, std::size_t l, const Dims& D, ModelSums& sum) {
  std::vector<std::vector<float>> part(g.size());
  for (std::size_t m = 0; m < g.size(); ++m) {  // MLP block
    Run& r = g[m];
    const LayerCache& c = r.lc[l];
    col_sum(grad(r, l, kB2), r.h, D.T, D.d);
    std::vector<float> du =
        linear_back(c.a, r.h, par(r, l, kW2), D.T, D.fm, D.d, grad(r, l, kW2), nullptr);
    for (std::size_t i = 0; i < du.size(); ++i) du[i] = f32_mul(du[i], gpt_gelu_grad(c.u[i]));
    part[m] =
        linear_back(c.x2, du, par(r, l, kW1), D.T, D.d, D.fm, grad(r, l, kW1), &grad(r, l, kB1));
  }
  std::vector<float> dx = sum(part);
  for (Run& r : g) {
    const LayerCache& c = r.lc[l];
    add_into(r.h, gpt_layernorm_back(dx, c.xhat2, c.rstd2, D.T, D.d, par(r, l, kLn2G), D.lanes,
                                     grad(r, l, kLn2G), grad(r, l, kLn2B)));
  }
  for (std::size_t m = 0; m < g.size(); ++m) {  // attention block
    Run& r = g[m];
    const LayerCache& c = r.lc[l];
    col_sum(grad(r, l, kBo), r.h, D.T, D.d);
    const std::vector<float> datt =
        linear_back(c.att, r.h, par(r, l, kWo), D.T, D.dm, D.d, grad(r, l, kWo), nullptr);
    const std::vector<float> dqkv = attention_back(c, datt, D);
    part[m] = linear_back(c.x1, dqkv, par(r, l, kWqkv), D.T, D.d, 3 * D.dm, grad(r, l, kWqkv),
                          &grad(r, l, kBqkv));
  }
  dx = sum(part);
  for (Run& r : g) {
    const LayerCache& c = r.lc[l];
    add_into(r.h, gpt_layernorm_back(dx, c.xhat1, c.rstd1, D.T, D.d, par(r, l, kLn1G), D.lanes,
                                     grad(r, l, kLn1G), grad(r, l, kLn1B)));
  }
}

// Head, final LN and embedding gradients; leaves dL/dh in r.h for the layers.
void head_backward(Run& r, const Dims& D, std::size_t layers) {
  const std::size_t f = gpt_index_lnf_g(layers);
  GptParams& g = *r.g;
  const std::vector<float> dxf =
      linear_back(r.xf, r.dlogits, (*r.p)[f + 2].v, D.T, D.d, D.V, g[f + 2].v, nullptr);
  r.h =
      gpt_layernorm_back(dxf, r.xhatf, r.rstdf, D.T, D.d, (*r.p)[f].v, D.lanes, g[f].v, g[f + 1].v);
}

// Embedding gradients: rows of wte and wpe += dh rows in token order (a scatter-add).
void embed_backward(Run& r, const Dims& D) {
  gpt_embed_backward(r.h, r.in, D.S, D.d, (*r.g)[0].v, (*r.g)[1].v);
}

}  // namespace

std::vector<float> gpt_logits(const GptSpec& spec, const GptParams& params,
                              const std::vector<int32_t>& tokens) {
  GptSpec s = spec;
  s.n_ctx = spec.ctx();
  s.seq = tokens.size();
  s.batch = 1;
  s.data = s.model = 1;
  s.data_rank.clear();
  s.model_rank.clear();
  s.validate();
  for (int32_t tok : tokens)
    if (tok < 0 || static_cast<std::size_t>(tok) >= s.vocab)
      throw std::invalid_argument("tokens: id " + std::to_string(tok) + " is outside [0, " +
                                  std::to_string(s.vocab) + ")");
  const Dims D = dims_of(s);
  std::vector<Run> g(1);
  Run& r = g[0];
  r.p = &params;
  r.in = tokens;
  r.lc.resize(s.layers);
  embed(r, D);
  ModelSums sum;  // model = 1: no sums
  for (std::size_t l = 0; l < s.layers; ++l) layer_forward(g, l, D, sum);
  const std::size_t f = gpt_index_lnf_g(s.layers);
  r.xf = gpt_layernorm(r.h, D.T, D.d, params[f].v, params[f + 1].v, D.lanes, r.xhatf, r.rstdf);
  return mm(r.xf, params[f + 2].v, D.T, D.d, D.V);
}

std::vector<float> gpt_embed(const std::vector<float>& wte, const std::vector<float>& wpe,
                             const std::vector<int32_t>& tokens, std::size_t seq, std::size_t d) {
  std::vector<float> h(tokens.size() * d, 0.0f);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::size_t tok = static_cast<std::size_t>(tokens[t]), pos = t % seq;
    for (std::size_t j = 0; j < d; ++j)
      h[t * d + j] = f32_add(wte[tok * d + j], wpe[pos * d + j]);
  }
  return h;
}

void gpt_embed_backward(const std::vector<float>& dh, const std::vector<int32_t>& tokens,
                        std::size_t seq, std::size_t d, std::vector<float>& dwte,
                        std::vector<float>& dwpe) {
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::size_t tok = static_cast<std::size_t>(tokens[t]), pos = t % seq;
    for (std::size_t j = 0; j < d; ++j) {
      dwte[tok * d + j] = f32_add(dwte[tok * d + j], dh[t * d + j]);
      dwpe[pos * d + j] = f32_add(dwpe[pos * d + j], dh[t * d + j]);
    }
  }
}

GptGolden::GptGolden(const GptSpec& spec, const GptParams& init) : spec_(spec) {
  spec_.validate();
  const GptParams shape = gpt_zero_params(spec_);
  if (init.size() != shape.size())
    throw std::invalid_argument("GptGolden: " + std::to_string(init.size()) +
                                " parameters, the spec has " + std::to_string(shape.size()));
  for (std::size_t k = 0; k < init.size(); ++k)
    if (init[k].name != shape[k].name || init[k].v.size() != shape[k].v.size())
      throw std::invalid_argument("GptGolden: parameter " + std::to_string(k) + " is " +
                                  init[k].name + ", expected " + shape[k].name + " of " +
                                  std::to_string(shape[k].v.size()) + " values");
  for (int c = 0; c < spec_.chips(); ++c) {
    Chip ch;
    ch.p = gpt_shard(spec_, init, spec_.model_rank_of(c));
    ch.m = ch.v = ch.g = gpt_zero_shard(spec_);
    chip_.push_back(std::move(ch));
  }
}

GptStepResult GptGolden::step(const std::vector<int32_t>& windows, const GptDataReduce& reduce,
                              const GptModelReduce& model_reduce) {
  const Dims D = dims_of(spec_);
  const std::size_t W = spec_.seq + 1, P = chip_.size();
  if (windows.size() != spec_.global_batch() * W)
    throw std::invalid_argument(
        "GptGolden::step: " + std::to_string(windows.size()) +
        " tokens, expected global batch x (seq + 1) = " + std::to_string(spec_.global_batch() * W));
  for (int32_t tok : windows)
    if (tok < 0 || static_cast<std::size_t>(tok) >= spec_.vocab)
      throw std::invalid_argument("tokens: id " + std::to_string(tok) + " is outside [0, " +
                                  std::to_string(spec_.vocab) + ")");
  const float inv_n = xcend_rcp(static_cast<float>(spec_.global_batch() * spec_.seq));
  // Micro-batch k of data rank d: its windows [d B + k Bm, d B + (k + 1) Bm).
  const std::size_t M = spec_.microbatches, Bm = D.B / M;
  GptSpec mspec = spec_;
  mspec.batch = Bm;
  const Dims Dm = dims_of(mspec);
  std::vector<std::vector<std::size_t>> chip_at(
      static_cast<std::size_t>(spec_.data), std::vector<std::size_t>(static_cast<std::size_t>(spec_.model)));
  for (std::size_t c = 0; c < P; ++c) {
    chip_at[static_cast<std::size_t>(spec_.data_rank_of(static_cast<int>(c)))]
           [static_cast<std::size_t>(spec_.model_rank_of(static_cast<int>(c)))] = c;
    chip_[c].g = gpt_zero_shard(spec_);
  }
  GptStepResult res;
  res.loss_parts.assign(P, {});
  for (std::size_t d = 0; d < chip_at.size(); ++d) {
    ModelSums sum{&model_reduce, d};
    for (std::size_t k = 0; k < M; ++k) {
      std::vector<Run> g(static_cast<std::size_t>(spec_.model));
      std::vector<GptParams> gk(g.size());
      for (std::size_t m = 0; m < g.size(); ++m) {
        Run& r = g[m];
        Chip& ch = chip_[chip_at[d][m]];
        r.p = &ch.p;
        if (M > 1) gk[m] = gpt_zero_shard(spec_);
        r.g = M > 1 ? &gk[m] : &ch.g;
        r.lc.resize(spec_.layers);
        for (std::size_t b = d * D.B + k * Bm; b < d * D.B + (k + 1) * Bm; ++b)
          for (std::size_t s = 0; s < D.S; ++s) {
            r.in.push_back(windows[b * W + s]);
            r.tgt.push_back(windows[b * W + s + 1]);
          }
      }
      for (Run& r : g) embed(r, Dm);
      for (std::size_t l = 0; l < spec_.layers; ++l) layer_forward(g, l, Dm, sum);
      for (Run& r : g) loss_head(r, Dm, spec_.layers, inv_n);
      for (Run& r : g) head_backward(r, Dm, spec_.layers);
      for (std::size_t l = spec_.layers; l-- > 0;) layer_backward(g, l, Dm, sum);
      for (Run& r : g) embed_backward(r, Dm);
      for (std::size_t m = 0; m < g.size(); ++m) {
        const std::size_t c = chip_at[d][m];
        std::vector<float>& lp = res.loss_parts[c];
        lp.insert(lp.end(), g[m].loss_parts.begin(), g[m].loss_parts.end());
        if (M == 1) continue;  // the gradients went straight in
        GptParams& acc = chip_[c].g;
        for (std::size_t t = 0; t < acc.size(); ++t) {
          if (k == 0)
            acc[t].v = gk[m][t].v;  // g = g0
          else
            add_into(acc[t].v, gk[m][t].v);  // g = g + gk
        }
      }
    }
  }
  res.loss = gpt_loss(spec_, res.loss_parts);
  // The data all-reduce of every gradient tensor, then AdamW on every chip.
  const std::size_t n_t = chip_[0].g.size();
  for (std::size_t m = 0; m < static_cast<std::size_t>(spec_.model); ++m)
    for (std::size_t k = 0; k < n_t; ++k) {
      std::vector<std::vector<float>> parts;
      for (const std::vector<std::size_t>& at : chip_at) parts.push_back(chip_[at[m]].g[k].v);
      const std::vector<float> s = reduce ? reduce(k, parts) : model_fold(parts);
      for (const std::vector<std::size_t>& at : chip_at) chip_[at[m]].g[k].v = s;
    }
  ++t_;
  const AdamConsts ak = gpt_adam_consts(spec_, t_);
  for (Chip& ch : chip_)
    for (std::size_t k = 0; k < n_t; ++k) {
      GptTensor& w = ch.p[k];
      for (std::size_t i = 0; i < w.v.size(); ++i)
        gpt_adam_element(ak, w.matrix(), ch.g[k].v[i], w.v[i], ch.m[k].v[i], ch.v[k].v[i]);
    }
  return res;
}

}  // namespace tpu
