// Golden training step of a small GPT-2-style transformer (docs/training.md, "The GPT step"):
// the spec, the named parameters and their seeded init, the byte windows of a text, and one
// AdamW step over a data x model mesh with Megatron's tensor-parallel split, every matmul through
// golden_matmul and every other op an f32 VPU op in a defined order, so chip programs can match
// every chip's parameters, Adam moments and loss partials bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tpu/transcend.h"

namespace tpu {

// The model, the run and the mesh. Chips: data x model; chip c has data rank data_rank[c] and
// model rank model_rank[c] (empty: c / model and c % model). Each data rank takes `batch`
// windows of seq + 1 bytes; the global batch is batch x data.
struct GptSpec {
  std::size_t layers = 2, d_model = 32, heads = 2, seq = 32;
  std::size_t n_ctx = 0;  // rows of wpe (0: seq)
  std::size_t vocab = 256;
  std::size_t batch = 4;  // windows per data rank
  // The batch runs as `microbatches` equal blocks of windows, forward and backward one at a time:
  // every gradient is micro-batch k's from +0, accumulated g = g0, then g = g + gk (f32, one
  // rounding per add, micro-batch 0 first); the loss scale stays the global batch's.
  std::size_t microbatches = 1;
  int data = 1, model = 1;
  std::vector<int> data_rank, model_rank;
  std::size_t lanes = 8;  // the VPU's lanes: the order of every row reduction
  float lr = 1e-3f;
  std::size_t warmup = 0;  // steps of linear warmup (0: none)
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;

  int chips() const { return data * model; }
  std::size_t ctx() const { return n_ctx ? n_ctx : seq; }
  std::size_t head_dim() const { return d_model / heads; }
  std::size_t global_batch() const { return batch * static_cast<std::size_t>(data); }
  std::size_t tokens() const { return batch * seq; }  // per chip
  int data_rank_of(int chip) const;
  int model_rank_of(int chip) const;
  // std::invalid_argument naming the value and the rule.
  void validate() const;
};

// One named parameter (row-major rows x cols; vectors have rows = 1).
struct GptTensor {
  std::string name;
  std::size_t rows = 0, cols = 0;
  std::vector<float> v;
  bool matrix() const { return rows > 1; }  // weight decay applies to matrices only
};
// Parameters in a fixed order: wte, wpe, per layer l the twelve h{l}.* tensors (ln1.g, ln1.b,
// attn.wqkv, attn.bqkv, attn.wo, attn.bo, ln2.g, ln2.b, mlp.w1, mlp.b1, mlp.w2, mlp.b2), lnf.g,
// lnf.b, head.w. The same layout holds gradients and Adam moments.
using GptParams = std::vector<GptTensor>;

// Index of a parameter in the order above.
enum GptLayerSlot : std::size_t {
  kLn1G,
  kLn1B,
  kWqkv,
  kBqkv,
  kWo,
  kBo,
  kLn2G,
  kLn2B,
  kW1,
  kB1,
  kW2,
  kB2,
  kGptLayerSlots
};
inline std::size_t gpt_index(std::size_t layer, GptLayerSlot s) {
  return 2 + layer * kGptLayerSlots + s;
}
inline std::size_t gpt_index_lnf_g(std::size_t layers) { return 2 + layers * kGptLayerSlots; }

// Zero tensors of the full (model = 1) shapes, or of model rank m's shard.
GptParams gpt_zero_params(const GptSpec& spec);
GptParams gpt_zero_shard(const GptSpec& spec);
// Multiply-adds of one window's training step on one chip of the spec's `model` split: the
// forward's matmuls (qkv, the attention's scores and values, the causal half included, the
// output, the MLP's two, the head) and twice them for the backward, a model rank's share of the
// heads and of w1 / w2; the head, which every model rank computes whole, counts 1 / model, so
// the ranks sum to the model's MACs.
uint64_t gpt_window_macs(const GptSpec& spec);
// The init: matrices N(0, 0.02^2) (wo and w2: N(0, (0.02 / sqrt(2L))^2)), gains 1,
// biases 0. A normal is the Irwin-Hall sum of 12 uniforms minus 6 (exact in f64), uniform j of
// element i of parameter p = (splitmix64(base_p + 12 i + j) >> 15) x 2^-49 with base_p =
// splitmix64(seed + 0x9E3779B97F4A7C15 x (p + 1)); times sigma in f64, rounded once to f32.
GptParams gpt_init(const GptSpec& spec, uint64_t seed);
double gpt_normal(uint64_t base, uint64_t i);  // the generator above, one N(0, 1) value

// Model rank m's shard (heads [m H/M, (m+1) H/M) of q, k and v: wqkv and bqkv by columns, wo by
// rows; w1 and b1 by columns, w2 by rows; every other tensor whole), and the inverse.
GptParams gpt_shard(const GptSpec& spec, const GptParams& full, int m);
GptParams gpt_unshard(const GptSpec& spec, const std::vector<GptParams>& shards);

// The byte windows of step `step`: global batch x (seq + 1) tokens; window b starts at
// splitmix64(splitmix64(seed ^ 0x6A09E667F3BCC909) + step x global_batch + b) mod (len - seq).
// Throws std::invalid_argument when the text is shorter than one window.
std::vector<int32_t> gpt_windows(const GptSpec& spec, const std::vector<uint8_t>& text,
                                 uint64_t seed, uint64_t step);

// Sums gradients over the data axis: parts[d] is data rank d's part of parameter `tensor` (its
// index in the parameter order); returns the sum every rank holds. The default (nullptr) folds in
// data-rank order: ((p0 + p1) + p2) + ...; a pod's all-reduce gives its own order.
using GptDataReduce = std::function<std::vector<float>(
    std::size_t tensor, const std::vector<std::vector<float>>& parts)>;

// Sums a block's partial outputs (forward) or its input gradient's partials (backward) over the
// model axis: parts[m] is model rank m's T x d partial in data rank `data_rank`; `site` counts the
// model sums of one data rank's step in order (forward: per layer the attention's, then the
// MLP's; backward: per layer from the last, the MLP's, then the attention's). The default
// (nullptr) folds in model-rank order ((p0 + p1) + p2) + ..., which is what any all-reduce of two
// chips gives; a pod's all-reduce of more chips gives its own order. With micro-batches the sites
// of micro-batch k follow those of k - 1 (gpt_model_sites per micro-batch).
using GptModelReduce = std::function<std::vector<float>(
    std::size_t site, std::size_t data_rank, const std::vector<std::vector<float>>& parts)>;

// The model sums of one micro-batch of a data rank's step: 4 per layer.
inline std::size_t gpt_model_sites(std::size_t layers) { return 4 * layers; }

// The embedding, as the step runs it: h[t] = f32_add(wte[tokens[t]], wpe[t mod seq]) (rows of
// d), and its gradient: for t = 0 .. T-1 in order, dwte[tokens[t]] += dh[t] and
// dwpe[t mod seq] += dh[t] (f32_add onto what dwte and dwpe hold: +0 in a step).
std::vector<float> gpt_embed(const std::vector<float>& wte, const std::vector<float>& wpe,
                             const std::vector<int32_t>& tokens, std::size_t seq, std::size_t d);
void gpt_embed_backward(const std::vector<float>& dh, const std::vector<int32_t>& tokens,
                        std::size_t seq, std::size_t d, std::vector<float>& dwte,
                        std::vector<float>& dwpe);

struct GptStepResult {
  double loss = 0;                             // mean cross-entropy, before the update
  std::vector<std::vector<float>> loss_parts;  // per chip: per window, the sum of its seq losses
};

// The golden trainer: every chip's parameters, Adam moments and last summed gradients.
class GptGolden {
 public:
  GptGolden(const GptSpec& spec, const GptParams& init);
  const GptSpec& spec() const { return spec_; }
  const GptParams& params(int chip) const { return chip_[static_cast<std::size_t>(chip)].p; }
  const GptParams& moment1(int chip) const { return chip_[static_cast<std::size_t>(chip)].m; }
  const GptParams& moment2(int chip) const { return chip_[static_cast<std::size_t>(chip)].v; }
  const GptParams& grads(int chip) const { return chip_[static_cast<std::size_t>(chip)].g; }
  uint64_t steps() const { return t_; }
  // One step on the global batch (gpt_windows' layout: data rank d takes windows
  // [d x batch, (d + 1) x batch)).
  GptStepResult step(const std::vector<int32_t>& windows, const GptDataReduce& reduce = nullptr,
                     const GptModelReduce& model_reduce = nullptr);

 private:
  struct Chip {
    GptParams p, m, v, g;
  };
  GptSpec spec_;
  std::vector<Chip> chip_;
  uint64_t t_ = 0;
};

// The logits (T x V) of one window of T tokens (T at most the spec's context) under the whole
// model's parameters (model = 1), by the step's forward ops: what greedy decoding reads (row t
// is the next token's distribution after tokens 0..t; it does not depend on the tokens after
// t). std::invalid_argument for a token outside the vocabulary or too many tokens.
std::vector<float> gpt_logits(const GptSpec& spec, const GptParams& params,
                              const std::vector<int32_t>& tokens);

// The loss the host computes from the partials: the f64 sum over model-rank-0 chips in data-rank
// order, each chip's windows in order, divided by global batch x seq.
double gpt_loss(const GptSpec& spec, const std::vector<std::vector<float>>& parts);

// ---- The step's f32 ops (model/src/gpt_ops.cc), exposed for tests and chip programs. ----

// The constants of step t (1-based), from the spec in f64, each rounded once to f32:
// lr_t = lr x min(1, t / warmup); bc1 = 1 / (1 - beta1^t), bc2 = 1 / (1 - beta2^t) (powers as
// t - 1 f64 products, left to right); decay = 1 - lr_t x weight_decay.
struct AdamConsts {
  float lr, bc1, bc2, decay, beta1, one_m_beta1, beta2, one_m_beta2, eps;
};
AdamConsts gpt_adam_consts(const GptSpec& spec, uint64_t t);
// One element: m = b1 m + (1-b1) g; v = b2 v + (1-b2) (g g); u = (m bc1) x rcp(rcp(rsqrt(v bc2))
// + eps); w = w x decay (matrices only); w = w - lr u. Each op one f32 rounding.
void gpt_adam_element(const AdamConsts& k, bool decay, float g, float& w, float& m, float& v);

// LayerNorm of each row of x (rows x n): mean = red_sum(x) x rcp(n); c = x - mean; var =
// red_sum(c c) x rcp(n); rstd = rsqrt(var + 1e-5); xhat = c x rstd; y = (xhat x g) + b.
// red_sum: vector_reduce(kRedSum, row, lanes). Returns y; xhat and rstd for the backward pass.
std::vector<float> gpt_layernorm(const std::vector<float>& x, std::size_t rows, std::size_t n,
                                 const std::vector<float>& g, const std::vector<float>& b,
                                 std::size_t lanes, std::vector<float>& xhat,
                                 std::vector<float>& rstd);
// Its backward: dxh = dy g; a = red_sum(dxh) rcp(n); c = red_sum(dxh xhat) rcp(n);
// dx = ((dxh - a) - xhat c) rstd. dg += dy xhat and db += dy (gpt_col_sum).
std::vector<float> gpt_layernorm_back(const std::vector<float>& dy, const std::vector<float>& xhat,
                                      const std::vector<float>& rstd, std::size_t rows,
                                      std::size_t n, const std::vector<float>& g, std::size_t lanes,
                                      std::vector<float>& dg, std::vector<float>& db);
// GELU's derivative in f32 ops (gpt_ops.cc gives the order), with its constant f32(3 x
// 0.044715).
constexpr float kGeluCubic3 = 3.0f * kGeluCubic;
float gpt_gelu_grad(float x);

// Column sums in the chip's order (docs/training.md "Numerics"): 16 partial rows from +0, row t
// added onto partial t mod 16 for t = 0 .. rows-1 in order, the partials folded in halves
// (p[i] += p[i + h] for h = 8, 4, 2, 1), then acc[j] = f32_add(acc[j], p[0][j]).
void gpt_col_sum(std::vector<float>& acc, const std::vector<float>& x, std::size_t rows,
                 std::size_t cols);

// The causal softmax of rows x S scores z, row i of each block of S rows the query at position
// i mod S: t = f32_add(f32_mul(z, scale), mask) with mask -0 for k <= i, -Inf for k > i; mx =
// red_max(t); e = xcend_exp(f32_sub(t, mx)); p = f32_mul(e, xcend_rcp(red_sum(e))).
std::vector<float> gpt_causal_softmax(const std::vector<float>& z, std::size_t rows, std::size_t S,
                                      float scale, std::size_t lanes);
// Its backward for rows of n: dot = red_sum(f32_mul(p, dp)); ds = f32_mul(f32_mul(p,
// f32_sub(dp, dot)), scale).
std::vector<float> gpt_softmax_back(const std::vector<float>& p, const std::vector<float>& dp,
                                    std::size_t rows, std::size_t n, float scale,
                                    std::size_t lanes);
// The cross-entropy of rows of V logits against their targets: mx = red_max(logit); e =
// xcend_exp(logit - mx); s = red_sum(e); lse = f32_add(mx, f32_mul(xcend_log2(s), ln2));
// picked = red_max(f32_add(logit, sel)) with sel -0 at the target, -Inf elsewhere; loss =
// f32_sub(lse, picked); dlogit = f32_mul(f32_sub(f32_mul(e, xcend_rcp(s)), onehot), inv_n).
void gpt_cross_entropy(const std::vector<float>& logits, const std::vector<int32_t>& targets,
                       std::size_t V, float inv_n, std::size_t lanes, std::vector<float>& loss,
                       std::vector<float>& dlogits);
constexpr float kGptLn2 = 0.693147180559945309417232121458176568f;

}  // namespace tpu
