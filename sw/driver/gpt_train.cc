#include "gpt_train.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "embedding_plan.h"
#include "gpt_maps.h"
#include "scheduler.h"
#include "train_images.h"

namespace tpu {

namespace {

constexpr std::size_t kHeadPad = 32;  // a head's columns in bf16 64-byte bursts

std::size_t round_up(std::size_t n, std::size_t q) { return (n + q - 1) / q * q; }

// The phases: the op kinds of the per-op table, in the report's order.
const char* const kPhases[] = {"embedding",        "layer norm",   "matmul",
                               "attention softmax", "residual",    "gelu",
                               "cross-entropy",     "transpose",   "bias gradient",
                               "embedding backward", "optimizer"};

}  // namespace

struct GptTrainer::Impl {
  // A parameter on the chip: f32 master, Adam moments, gradient, and (matmul weights) bf16.
  struct Tensor {
    std::size_t rows = 0, cols = 0;  // the chip's layout (heads padded)
    HbmMatrix w, m, v, g, wb;
    bool matrix = false;
  };
  struct Layer {
    HbmMatrix h_mid, h_out;                // the residual stream after attention and after the MLP
    HbmMatrix x1b, xhat1, rstd1, x2b, xhat2, rstd2;
    HbmMatrix qkv;                         // T x 3 Hm dhp bf16 (q | k | v, head blocks)
    HbmMatrix p, pb;                       // B Hm S x S softmax rows, f32 and bf16
    HbmMatrix att;                         // T x Hm dhp bf16
    HbmMatrix u, ab;                       // T x fm: x2 w1 + b1 (f32), gelu(u) (bf16)
  };
  std::unique_ptr<Workload> wl;
  std::size_t B = 0, S = 0, T = 0, d = 0, Hm = 0, dh = 0, dhp = 0, fm = 0, V = 0, Q = 0;
  std::vector<Tensor> t;
  std::vector<Layer> layers;
  HbmMatrix consts, zeros, mask, sel, onehot, h0, xfb, xhatf, rstdf, logits, loss, dlogb, parts;
  HbmMatrix z, yo, dx, dres, dresb, dln, da, dub, datt, dp, dsb, blk_t, dqkv, dqkvb, trans, lists_f,
      lists_b;
  SpmdProgram program;

  BufferRef ref(const HbmMatrix& v) const { return wl->ref_of(v); }
  HbmMatrix buf(const std::string& name, std::size_t rows, std::size_t cols, Dtype dt) {
    return wl->matrix(wl->add_buffer(Buffer{name, rows, cols, dt}));
  }
  HbmMatrix vec(const std::string& name, std::size_t n) {
    return buf(name, 1, round_up(n, Q), Dtype::kF32);
  }
  // The chip layout of parameter k: {rows, cols}.
  std::pair<std::size_t, std::size_t> chip_shape(const GptTensor& g, std::size_t k) const;
  std::size_t chip_at(std::size_t k, std::size_t cols, std::size_t r, std::size_t col) const;
  std::vector<float> to_chip(const GptTensor& g, std::size_t k) const;
  std::vector<float> from_chip(const std::vector<float>& c, const GptTensor& g,
                               std::size_t k) const;
  std::size_t slot(std::size_t k) const { return k < 2 ? kGptLayerSlots : (k - 2) % kGptLayerSlots; }
  bool in_layers(std::size_t k, std::size_t L) const { return k >= 2 && k < 2 + L * kGptLayerSlots; }

  void lay_out(const GptSpec& spec, const ChipShape& s);
  // The step's ops.
  void add_map(const char* phase, VpuMap m);
  GptParams read(HostPort& host, const GptSpec& spec, HbmMatrix Tensor::*field, int chip) const;
  void add_forward(const GptSpec& spec, const EmbeddingPlan& ef);
  void add_attention(std::size_t l);
  void add_backward(const GptSpec& spec, const EmbeddingPlan& eb);
  void add_attention_back(std::size_t l);
  void add_linear_back(const HbmMatrix& xb, const HbmMatrix& dyb, std::size_t k,
                       const HbmMatrix* dx_out);
  void add_optimizer();
};

std::pair<std::size_t, std::size_t> GptTrainer::Impl::chip_shape(const GptTensor& g,
                                                                 std::size_t k) const {
  if (k >= 2 && k + 3 < t.size()) {  // a layer's tensor
    const std::size_t sl = slot(k);
    if (sl == kWqkv) return {g.rows, 3 * Hm * dhp};
    if (sl == kBqkv) return {1, 3 * Hm * dhp};
    if (sl == kWo) return {Hm * dhp, g.cols};
  }
  return {g.rows, g.cols};
}

// Where element (r, col) of parameter k (a layer's wqkv, bqkv or wo) lies in its chip layout.
std::size_t GptTrainer::Impl::chip_at(std::size_t k, std::size_t cols, std::size_t r,
                                      std::size_t col) const {
  if (slot(k) == kWo) return ((r / dh) * dhp + r % dh) * cols + col;
  const std::size_t dm = Hm * dh, part = col / dm, within = col % dm;  // q, k or v; its column
  return r * cols + part * Hm * dhp + (within / dh) * dhp + within % dh;
}

std::vector<float> GptTrainer::Impl::to_chip(const GptTensor& g, std::size_t k) const {
  const auto [rows, cols] = chip_shape(g, k);
  if (rows == g.rows && cols == g.cols) return g.v;
  std::vector<float> c(rows * cols, 0.0f);
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t col = 0; col < g.cols; ++col) c[chip_at(k, cols, r, col)] = g.v[r * g.cols + col];
  return c;
}

std::vector<float> GptTrainer::Impl::from_chip(const std::vector<float>& c, const GptTensor& g,
                                               std::size_t k) const {
  const auto [rows, cols] = chip_shape(g, k);
  if (rows == g.rows && cols == g.cols) return c;
  std::vector<float> v(g.rows * g.cols);
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t col = 0; col < g.cols; ++col) v[r * g.cols + col] = c[chip_at(k, cols, r, col)];
  return v;
}

void GptTrainer::Impl::lay_out(const GptSpec& spec, const ChipShape& s) {
  B = spec.batch;
  S = spec.seq;
  T = spec.tokens();
  d = spec.d_model;
  Hm = spec.heads / static_cast<std::size_t>(spec.model);
  dh = spec.head_dim();
  dhp = round_up(dh, kHeadPad);
  fm = 4 * d / static_cast<std::size_t>(spec.model);
  V = spec.vocab;
  Q = std::max<std::size_t>(16, s.cols);
  const std::size_t L = spec.layers, BH = B * Hm * S;
  const GptParams shapes = gpt_zero_shard(spec);
  t.assign(shapes.size(), Tensor{});
  consts = buf("consts", kGcCount, s.cols, Dtype::kF32);
  zeros = buf("zeros", 1, std::max(d, V), Dtype::kF32);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto [rows, cols] = chip_shape(shapes[k], k);
    Tensor& x = t[k];
    x.rows = rows;
    x.cols = cols;
    x.matrix = shapes[k].matrix();
    const std::string& n = shapes[k].name;
    x.w = buf(n, rows, cols, Dtype::kF32);
    x.m = buf(n + ".m", rows, cols, Dtype::kF32);
    x.v = buf(n + ".v", rows, cols, Dtype::kF32);
    x.g = buf(n + ".grad", rows, cols, Dtype::kF32);
    const std::size_t sl = slot(k);
    const bool mm = (in_layers(k, L) && (sl == kWqkv || sl == kWo || sl == kW1 || sl == kW2)) ||
                    k == shapes.size() - 1;
    if (mm) x.wb = buf(n + ".bf16", rows, cols, Dtype::kBf16);
  }
  mask = buf("mask", BH, S, Dtype::kF32);
  sel = buf("sel", T, V, Dtype::kF32);
  onehot = buf("onehot", T, V, Dtype::kF32);
  h0 = buf("h0", T, d, Dtype::kF32);
  layers.assign(L, Layer{});
  for (std::size_t l = 0; l < L; ++l) {
    Layer& y = layers[l];
    const std::string n = "h" + std::to_string(l) + ".";
    y.h_mid = buf(n + "h_mid", T, d, Dtype::kF32);
    y.h_out = buf(n + "h_out", T, d, Dtype::kF32);
    y.x1b = buf(n + "x1", T, d, Dtype::kBf16);
    y.xhat1 = buf(n + "xhat1", T, d, Dtype::kF32);
    y.rstd1 = vec(n + "rstd1", T);
    y.x2b = buf(n + "x2", T, d, Dtype::kBf16);
    y.xhat2 = buf(n + "xhat2", T, d, Dtype::kF32);
    y.rstd2 = vec(n + "rstd2", T);
    y.qkv = buf(n + "qkv", T, 3 * Hm * dhp, Dtype::kBf16);
    y.p = buf(n + "p", BH, S, Dtype::kF32);
    y.pb = buf(n + "p.bf16", BH, S, Dtype::kBf16);
    y.att = buf(n + "att", T, Hm * dhp, Dtype::kBf16);
    y.u = buf(n + "u", T, fm, Dtype::kF32);
    y.ab = buf(n + "a", T, fm, Dtype::kBf16);
  }
  xfb = buf("xf", T, d, Dtype::kBf16);
  xhatf = buf("xhatf", T, d, Dtype::kF32);
  rstdf = vec("rstdf", T);
  logits = buf("logits", T, V, Dtype::kF32);
  loss = buf("loss", B, S, Dtype::kF32);  // per token; a window a row (T is whole bursts)
  dlogb = buf("dlogits", T, V, Dtype::kBf16);
  parts = vec("loss parts", B);
  z = buf("scores", BH, S, Dtype::kF32);
  yo = buf("y", T, d, Dtype::kF32);
  dx = buf("dx", T, d, Dtype::kF32);
  dres = buf("dh", T, d, Dtype::kF32);
  dresb = buf("dh.bf16", T, d, Dtype::kBf16);
  dln = buf("dln", T, d, Dtype::kF32);
  da = buf("da", T, fm, Dtype::kF32);
  dub = buf("du", T, fm, Dtype::kBf16);
  datt = buf("datt", T, Hm * dhp, Dtype::kBf16);
  dp = buf("dp", BH, S, Dtype::kF32);
  dsb = buf("ds", BH, S, Dtype::kBf16);
  blk_t = buf("block^T", BH, S, Dtype::kBf16);
  dqkv = buf("dqkv", T, 3 * Hm * dhp, Dtype::kF32);
  dqkvb = buf("dqkv.bf16", T, 3 * Hm * dhp, Dtype::kBf16);
  trans = buf("x^T", std::max({d, fm, Hm * dhp}), T, Dtype::kBf16);
  lists_f = buf("ids (embedding)", 1, round_up(T, 16) + 64, Dtype::kF32);
  lists_b = buf("ids (embedding backward)", 1, 8 * T + 256, Dtype::kF32);
}

void GptTrainer::Impl::add_map(const char* phase, VpuMap m) {
  VectorMapRefs r;
  for (const HbmMatrix& x : m.in) r.in.push_back(ref(x));
  if (!m.const_rows.empty()) r.consts = ref(m.consts);
  for (const auto& o : m.out) r.out.push_back(ref(o.second));
  for (const auto& o : m.col_sums) r.col_sum_out.push_back(ref(o.second));
  r.map = std::move(m);
  wl->add_op(vector_map_op(phase, r));
}

// Per window b and local head j: z = q k^T, the softmax over all blocks at once, att = p v.
void GptTrainer::Impl::add_attention(std::size_t l) {
  const Layer& c = layers[l];
  auto head = [&](const HbmMatrix& m, std::size_t part, std::size_t b, std::size_t j) {
    return hbm_view(m, b * S, S, (part * Hm + j) * dhp, dhp);
  };
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j)
      wl->add_op(matmul_op("matmul", ref(hbm_view(z, (b * Hm + j) * S, S, 0, S)),
                           ref(head(c.qkv, 0, b, j)), ref(head(c.qkv, 1, b, j)), {}, false,
                           true));
  add_map("attention softmax", gpt_softmax_map(consts, z, mask, c.p, c.pb));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j)
      wl->add_op(matmul_op("matmul", ref(hbm_view(c.att, b * S, S, j * dhp, dhp)),
                           ref(hbm_view(c.pb, (b * Hm + j) * S, S, 0, S)),
                           ref(head(c.qkv, 2, b, j))));
}

void GptTrainer::Impl::add_forward(const GptSpec& spec, const EmbeddingPlan& ef) {
  wl->add_op(commands_op("embedding", {without_halt(ef.cmds)},
                         static_cast<uint32_t>(ef.vmem_rows),
                         {ref(t[0].w), ref(t[1].w), ref(lists_f)}, {ref(h0)}));
  HbmMatrix h = h0;
  for (std::size_t l = 0; l < spec.layers; ++l) {
    const Layer& c = layers[l];
    auto P = [&](GptLayerSlot sl) -> const Tensor& { return t[gpt_index(l, sl)]; };
    add_map("layer norm", gpt_ln_forward_map(consts, h, P(kLn1G).w, P(kLn1B).w, c.x1b, c.xhat1,
                                             c.rstd1));
    wl->add_op(matmul_op("matmul", ref(c.qkv), ref(c.x1b), ref(P(kWqkv).wb), ref(P(kBqkv).w)));
    add_attention(l);
    wl->add_op(matmul_op("matmul", ref(yo), ref(c.att), ref(P(kWo).wb), ref(P(kBo).w)));
    add_map("residual", gpt_add_map(h, yo, c.h_mid));
    add_map("layer norm", gpt_ln_forward_map(consts, c.h_mid, P(kLn2G).w, P(kLn2B).w, c.x2b,
                                             c.xhat2, c.rstd2));
    wl->add_op(matmul_op("matmul", ref(c.u), ref(c.x2b), ref(P(kW1).wb), ref(P(kB1).w)));
    add_map("gelu", gpt_gelu_map(consts, c.u, c.ab));
    wl->add_op(matmul_op("matmul", ref(yo), ref(c.ab), ref(P(kW2).wb), ref(P(kB2).w)));
    add_map("residual", gpt_add_map(c.h_mid, yo, c.h_out));
    h = c.h_out;
  }
  const std::size_t f = gpt_index_lnf_g(spec.layers);
  add_map("layer norm", gpt_ln_forward_map(consts, h, t[f].w, t[f + 1].w, xfb, xhatf, rstdf));
  wl->add_op(matmul_op("matmul", ref(logits), ref(xfb), ref(t[f + 2].wb)));
  add_map("cross-entropy", gpt_cross_entropy_map(consts, logits, sel, onehot, loss, dlogb));
  add_map("cross-entropy", gpt_window_loss_map(loss, parts));
}

// dY (bf16, T x n) through y = x W + b: dW = x^T dY (x^T by the MXU's transpose) into tensor
// k's gradient, and dx = dY W^T (transposed weight loads) when dx_out is given.
void GptTrainer::Impl::add_linear_back(const HbmMatrix& xb, const HbmMatrix& dyb, std::size_t k,
                                       const HbmMatrix* dx_out) {
  const HbmMatrix xt = hbm_view(trans, 0, xb.cols, 0, T);
  wl->add_op(transpose_op("transpose", ref(xt), ref(xb)));
  wl->add_op(matmul_op("matmul", ref(t[k].g), ref(xt), ref(dyb)));
  if (dx_out)
    wl->add_op(matmul_op("matmul", ref(*dx_out), ref(dyb), ref(t[k].wb), {}, false, true));
}

void GptTrainer::Impl::add_attention_back(std::size_t l) {
  const Layer& c = layers[l];
  auto head = [&](const HbmMatrix& m, std::size_t part, std::size_t b, std::size_t j) {
    return hbm_view(m, b * S, S, (part * Hm + j) * dhp, dhp);
  };
  auto block = [&](const HbmMatrix& m, std::size_t b, std::size_t j) {
    return hbm_view(m, (b * Hm + j) * S, S, 0, S);
  };
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j) {
      const HbmMatrix dout = hbm_view(datt, b * S, S, j * dhp, dhp);
      wl->add_op(matmul_op("matmul", ref(block(dp, b, j)), ref(dout), ref(head(c.qkv, 2, b, j)),
                           {}, false, true));
      wl->add_op(transpose_op("transpose", ref(block(blk_t, b, j)), ref(block(c.pb, b, j))));
      wl->add_op(matmul_op("matmul", ref(head(dqkv, 2, b, j)), ref(block(blk_t, b, j)),
                           ref(dout)));
    }
  add_map("attention softmax", gpt_softmax_back_map(consts, c.p, dp, dsb));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j) {
      wl->add_op(matmul_op("matmul", ref(head(dqkv, 0, b, j)), ref(block(dsb, b, j)),
                           ref(head(c.qkv, 1, b, j))));
      wl->add_op(transpose_op("transpose", ref(block(blk_t, b, j)), ref(block(dsb, b, j))));
      wl->add_op(matmul_op("matmul", ref(head(dqkv, 1, b, j)), ref(block(blk_t, b, j)),
                           ref(head(c.qkv, 0, b, j))));
    }
}

void GptTrainer::Impl::add_backward(const GptSpec& spec, const EmbeddingPlan& eb) {
  const std::size_t f = gpt_index_lnf_g(spec.layers);
  add_linear_back(xfb, dlogb, f + 2, &dx);
  add_map("layer norm", gpt_ln_backward_map(consts, dx, xhatf, rstdf, t[f].w, dres, t[f].g,
                                            t[f + 1].g));
  for (std::size_t l = spec.layers; l-- > 0;) {
    const Layer& c = layers[l];
    auto k = [&](GptLayerSlot sl) { return gpt_index(l, sl); };
    // MLP block.
    add_map("bias gradient", gpt_col_sum_map(consts, dres, t[k(kB2)].g, &dresb));
    add_linear_back(c.ab, dresb, k(kW2), &da);
    add_map("gelu", gpt_gelu_back_map(consts, da, c.u, dub, t[k(kB1)].g));
    add_linear_back(c.x2b, dub, k(kW1), &dx);
    add_map("layer norm", gpt_ln_backward_map(consts, dx, c.xhat2, c.rstd2, t[k(kLn2G)].w, dln,
                                              t[k(kLn2G)].g, t[k(kLn2B)].g));
    add_map("residual", gpt_add_map(dres, dln, dres));
    // Attention block.
    add_map("bias gradient", gpt_col_sum_map(consts, dres, t[k(kBo)].g, &dresb));
    add_linear_back(c.att, dresb, k(kWo), nullptr);
    wl->add_op(matmul_op("matmul", ref(datt), ref(dresb), ref(t[k(kWo)].wb), {}, false, true));
    add_attention_back(l);
    add_map("bias gradient", gpt_col_sum_map(consts, dqkv, t[k(kBqkv)].g, &dqkvb));
    add_linear_back(c.x1b, dqkvb, k(kWqkv), &dx);
    add_map("layer norm", gpt_ln_backward_map(consts, dx, c.xhat1, c.rstd1, t[k(kLn1G)].w, dln,
                                              t[k(kLn1G)].g, t[k(kLn1B)].g));
    add_map("residual", gpt_add_map(dres, dln, dres));
  }
  add_map("embedding backward", gpt_fill_map(hbm_view(zeros, 0, 1, 0, d), t[0].g));
  wl->add_op(commands_op("embedding backward", {without_halt(eb.cmds)},
                         static_cast<uint32_t>(eb.vmem_rows), {ref(dres), ref(lists_b)},
                         {ref(t[0].g), ref(t[1].g)}));
}

void GptTrainer::Impl::add_optimizer() {
  for (const Tensor& x : t)
    add_map("optimizer",
            gpt_adam_map(consts, x.w, x.g, x.m, x.v, x.matrix, x.wb));
}

GptTrainer::GptTrainer(HostPort& host, GptSpec spec, bool backdoor)
    : host_(host), spec_(std::move(spec)), backdoor_(backdoor), impl_(std::make_unique<Impl>()) {
  const MachineInfo& mi = host_.info();
  const ChipShape& s = mi.shape;
  spec_.lanes = s.cols;
  if (mi.num_chips() != 1 || spec_.data != 1 || spec_.model != 1)
    throw std::invalid_argument("gpt train: the chip program runs on one chip (data=1, "
                                "model=1); the pod has " + std::to_string(mi.num_chips()));
  spec_.validate();
  auto need32 = [](std::size_t v, const char* what) {
    if (v % 32 != 0)
      throw std::invalid_argument(std::string("gpt train: ") + what + " " + std::to_string(v) +
                                  " must be a multiple of 32 (a bf16 row in whole 64-byte "
                                  "bursts)");
  };
  need32(spec_.d_model, "d_model");
  need32(spec_.seq, "seq");
  need32(spec_.vocab, "vocab");
  Impl& m = *impl_;
  m.wl = std::make_unique<Workload>(host_);
  try {
    m.lay_out(spec_, s);
  } catch (const BufferDoesNotFit& e) {
    throw std::invalid_argument("gpt train: the step's buffers do not fit in a chip's HBM (" +
                                std::to_string(s.hbm_bytes) + " bytes): " + e.what());
  }
  for (const char* p : kPhases) m.wl->declare_phase(p);
  hbm_used_ = m.wl->hbm_used();
  // The constant inputs: the causal mask and a row of zeros.
  std::vector<HbmImage> img;
  const ChipDriver& d = m.wl->driver(0);
  img.push_back(HbmImage{0, m.mask.addr, d.matrix_image(m.mask, gpt_causal_mask(m.mask.rows, m.S))});
  img.push_back(HbmImage{0, m.zeros.addr,
                         d.matrix_image(m.zeros, std::vector<float>(m.zeros.cols, 0.0f))});
  put_images(host_, img, true);
}

GptTrainer::~GptTrainer() = default;

uint64_t GptTrainer::step_macs_per_chip() const {
  const Impl& m = *impl_;
  const uint64_t T = m.T, d = m.d, S = m.S, dh = m.dh, H = m.Hm, fm = m.fm, V = m.V;
  const uint64_t layer = T * d * 3 * H * dh + 2 * m.B * H * S * S * dh + T * H * dh * d +
                         2 * T * d * fm;
  return 3 * (spec_.layers * layer + T * d * V);
}

uint64_t GptTrainer::load_params(const GptParams& params) {
  Impl& m = *impl_;
  const GptParams shard = gpt_shard(spec_, params, 0);
  if (shard.size() != m.t.size())
    throw std::invalid_argument("gpt train: " + std::to_string(params.size()) +
                                " parameters, the model has " + std::to_string(m.t.size()));
  const ChipDriver& d = m.wl->driver(0);
  std::vector<HbmImage> img;
  for (std::size_t k = 0; k < shard.size(); ++k) {
    const Impl::Tensor& x = m.t[k];
    const std::vector<float> w = m.to_chip(shard[k], k), zero(w.size(), 0.0f);
    img.push_back(HbmImage{0, x.w.addr, d.matrix_image(x.w, w)});
    img.push_back(HbmImage{0, x.m.addr, d.matrix_image(x.m, zero)});
    img.push_back(HbmImage{0, x.v.addr, d.matrix_image(x.v, zero)});
    if (x.wb.rows != 0)
      img.push_back(HbmImage{0, x.wb.addr, d.matrix_image(x.wb, vector_to_bf16(w))});
  }
  return put_images(host_, img, backdoor_);
}

GptStepRun GptTrainer::step(const std::vector<int32_t>& windows) {
  Impl& m = *impl_;
  const std::size_t W = spec_.seq + 1;
  if (windows.size() != spec_.global_batch() * W)
    throw std::invalid_argument("gpt train: " + std::to_string(windows.size()) +
                                " tokens, the step takes global batch x (seq + 1) = " +
                                std::to_string(spec_.global_batch() * W));
  std::vector<int32_t> in, tgt;
  for (std::size_t b = 0; b < m.B; ++b)
    for (std::size_t s = 0; s < m.S; ++s) {
      in.push_back(windows[b * W + s]);
      tgt.push_back(windows[b * W + s + 1]);
    }
  for (int32_t x : windows)
    if (x < 0 || static_cast<std::size_t>(x) >= m.V)
      throw std::invalid_argument("gpt train: token id " + std::to_string(x) +
                                  " is outside the vocabulary [0, " + std::to_string(m.V) + ")");
  ++t_;
  const ChipShape& s = host_.info().shape;
  EmbeddingBuffers eb;
  eb.wte = m.t[0].w.addr;
  eb.wpe = m.t[1].w.addr;
  eb.h = m.h0.addr;
  eb.lists = m.lists_f.addr;
  const EmbeddingDims dims{m.V, m.S, m.d, m.T};
  const EmbeddingPlan ef = plan_embedding_forward(s, dims, in, eb);
  eb.dh = m.dres.addr;
  eb.dwte = m.t[0].g.addr;
  eb.dwpe = m.t[1].g.addr;
  eb.lists = m.lists_b.addr;
  const EmbeddingPlan ebk = plan_embedding_backward(s, dims, in, eb);
  if (ef.lists.size() > m.lists_f.cols || ebk.lists.size() > m.lists_b.cols)
    throw std::logic_error("gpt train: the embedding's id lists outgrew their buffers");
  // This step's inputs: the constants (AdamW's of step t), the id lists, sel and one-hot.
  const ChipDriver& d = m.wl->driver(0);
  std::vector<HbmImage> img;
  img.push_back(HbmImage{0, m.consts.addr,
                         d.matrix_image(m.consts, gpt_const_image(spec_, gpt_adam_consts(spec_, t_),
                                                                  s.cols))});
  auto ids = [](const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  img.push_back(HbmImage{0, m.lists_f.addr, ids(ef.lists)});
  img.push_back(HbmImage{0, m.lists_b.addr, ids(ebk.lists)});
  img.push_back(HbmImage{0, m.sel.addr, d.matrix_image(m.sel, gpt_target_sel(tgt, m.V))});
  img.push_back(HbmImage{0, m.onehot.addr, d.matrix_image(m.onehot, gpt_target_onehot(tgt, m.V))});
  put_images(host_, img, backdoor_);
  // The program: planned again, the embedding's with this step's tokens.
  m.wl->truncate_ops(0);
  m.add_forward(spec_, ef);
  m.add_backward(spec_, ebk);
  m.add_optimizer();
  Schedule sch = schedule(*m.wl);
  GptStepRun r;
  r.program = std::move(sch.program);
  r.commands = r.program.commands();
  PodDriver pd(host_);
  r.prog = pd.run_programs(r.program);
  std::vector<float> parts(m.parts.cols);
  host_.backdoor_read(0, m.parts.addr, parts.data(), parts.size() * 4);
  parts.resize(m.B);
  r.loss_parts = {parts};
  r.loss = gpt_loss(spec_, r.loss_parts);
  return r;
}

GptParams GptTrainer::Impl::read(HostPort& host, const GptSpec& spec, HbmMatrix Tensor::*field,
                                  int chip) const {
  GptParams p = gpt_zero_shard(spec);
  for (std::size_t k = 0; k < p.size(); ++k) {
    const HbmMatrix& at = t[k].*field;
    std::vector<float> c(at.rows * at.cols);
    host.backdoor_read(chip, at.addr, c.data(), c.size() * 4);
    p[k].v = from_chip(c, p[k], k);
  }
  return p;
}

GptParams GptTrainer::read_params(int chip) {
  return impl_->read(host_, spec_, &Impl::Tensor::w, chip);
}
GptParams GptTrainer::read_moment1(int chip) {
  return impl_->read(host_, spec_, &Impl::Tensor::m, chip);
}
GptParams GptTrainer::read_moment2(int chip) {
  return impl_->read(host_, spec_, &Impl::Tensor::v, chip);
}

}  // namespace tpu
