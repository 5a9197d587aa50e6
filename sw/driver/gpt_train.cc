#include "gpt_train.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "embedding_plan.h"
#include "gpt_layout.h"
#include "gpt_maps.h"
#include "scheduler.h"
#include "train_images.h"
#include "tpu/vector.h"

namespace tpu {

namespace {

std::size_t round_up(std::size_t n, std::size_t q) { return (n + q - 1) / q * q; }

// The phases: the op kinds of the per-op table, in the report's order.
const char* const kPhases[] = {"embedding",        "layer norm",   "matmul",
                               "attention softmax", "residual",    "gelu",
                               "cross-entropy",     "transpose",   "bias gradient",
                               "embedding backward", "optimizer"};

// Each chip's commands of its plan (no HALT), and the VMEM rows the plans use.
std::vector<std::vector<ChipCmd>> chip_cmds(const std::vector<EmbeddingPlan>& plans) {
  std::vector<std::vector<ChipCmd>> c;
  for (const EmbeddingPlan& p : plans) c.push_back(without_halt(p.cmds));
  return c;
}
uint32_t vmem_of(const std::vector<EmbeddingPlan>& plans) {
  std::size_t rows = 0;
  for (const EmbeddingPlan& p : plans) rows = std::max(rows, p.vmem_rows);
  return static_cast<uint32_t>(rows);
}


}  // namespace

struct GptTrainer::Impl {
  // A parameter on the chip: f32 master, Adam moments, gradient, and (matmul weights) bf16.
  struct Tensor {
    std::size_t rows = 0, cols = 0;  // the chip's layout (heads padded)
    HbmMatrix w, m, v, g, wb;
    bool matrix = false;
  };
  struct Layer {
    HbmMatrix x1b, xhat1, rstd1, x2b, xhat2, rstd2;
    HbmMatrix qkv;                         // T x 3 Hm dhp bf16 (q | k | v, head blocks)
    HbmMatrix p, pb;                       // B Hm S x S softmax rows, f32 and bf16
    HbmMatrix att;                         // T x Hm dhp bf16
    HbmMatrix u, ab;                       // T x fm: x2 w1 + b1 (f32), gelu(u) (bf16)
    HbmMatrix gelu_s;                      // T x fm f32: GELU's s = rcp(1 + exp(-2z)), for the backward
  };
  std::unique_ptr<Workload> wl;
  TrainMesh mesh;
  int P = 1;
  int spec_data_rank(int chip) const {
    return mesh.data_rank.empty() ? chip : mesh.data_rank[static_cast<std::size_t>(chip)];
  }
  std::size_t B = 0, S = 0, T = 0, d = 0, Hm = 0, dh = 0, dhp = 0, fm = 0, V = 0, Q = 0;
  std::vector<Tensor> t;
  GptParams shard_shape;  // the golden's shapes of a chip's tensors (zeros)
  std::vector<Layer> layers;
  HbmMatrix consts, zeros, mask, sel, h0, h1, xfb, xhatf, rstdf, logits, loss, dlogb, parts;
  HbmMatrix yp, dxs;  // model > 1: a block's partial output, and the summed input gradient
  HbmMatrix z, yo, dx, dres, dresb, dln, da, dub, datt, dp, dsb, blk_t, dqkv, dqkvb, trans, lists_f,
      lists_b;
  std::vector<std::vector<CollectiveRound>> grad_rounds;  // per tensor: its data all-reduce
  std::vector<int> grad_coll;  // per tensor: its all-reduce's index among the collectives (-1)
  std::vector<int> model_coll;  // the model all-reduces' indices, in order (GptModelReduce's sites)
  std::vector<std::vector<CollectiveRound>> model_rounds;  // their rounds, in the same order
  int colls = 0;               // collectives added to this step's ops

  BufferRef ref(const HbmMatrix& v) const { return wl->ref_of(v); }
  HbmMatrix buf(const std::string& name, std::size_t rows, std::size_t cols, Dtype dt) {
    return wl->matrix(wl->add_buffer(Buffer{name, rows, cols, dt}));
  }
  HbmMatrix vec(const std::string& name, std::size_t n) {
    return buf(name, 1, round_up(n, Q), Dtype::kF32);
  }
  // The chip layout of parameter k: {rows, cols}.
  GptChipLayout layout;  // heads padded to 32 columns

  void lay_out(const GptSpec& spec, const ChipShape& s);
  // The step's ops.
  void add_map(const char* phase, VpuMap m);
  GptParams read(HostPort& host, const GptSpec& spec, HbmMatrix Tensor::*field, int chip) const;
  void add_forward(const GptSpec& spec, const std::vector<EmbeddingPlan>& ef);
  void add_attention(std::size_t l);
  void add_backward(const GptSpec& spec, const std::vector<EmbeddingPlan>& eb);
  void add_attention_back(std::size_t l);
  void add_linear_back(const HbmMatrix& xb, const HbmMatrix& dyb, std::size_t k,
                       const HbmMatrix* dx_out);
  void add_optimizer();
  // An f32 all-reduce of `in` into `out` over the data or the model axis.
  void add_all_reduce(const HbmMatrix& in, const HbmMatrix& out, bool data_axis);
  // Tensor k's gradient is complete: its data all-reduce (data > 1).
  void grad_ready(std::size_t k);
  // The block's output: y = sum over model ranks of the partial (model > 1) or the partial, then
  // out = h + (y + bias).
  void add_block_out(const HbmMatrix& partial, const HbmMatrix& bias, const HbmMatrix& h,
                     const HbmMatrix& out);
  // An input gradient summed over the model axis (model > 1), else itself.
  const HbmMatrix& model_sum(const HbmMatrix& partial);
};

void GptTrainer::Impl::lay_out(const GptSpec& spec, const ChipShape& s) {
  B = spec.batch;
  S = spec.seq;
  T = spec.tokens();
  d = spec.d_model;
  Hm = spec.heads / static_cast<std::size_t>(spec.model);
  dh = spec.head_dim();
  layout = GptChipLayout(spec);
  dhp = layout.dhp;
  fm = 4 * d / static_cast<std::size_t>(spec.model);
  V = spec.vocab;
  Q = std::max<std::size_t>(16, s.cols);
  const std::size_t L = spec.layers, BH = B * Hm * S;
  shard_shape = gpt_zero_shard(spec);
  const GptParams& shapes = shard_shape;
  t.assign(shapes.size(), Tensor{});
  consts = buf("consts", kGcCount, s.cols, Dtype::kF32);
  zeros = buf("zeros", 1, std::max(d, V), Dtype::kF32);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto [rows, cols] = layout.shape(shapes[k], k);
    Tensor& x = t[k];
    x.rows = rows;
    x.cols = cols;
    x.matrix = shapes[k].matrix();
    const std::string& n = shapes[k].name;
    x.w = buf(n, rows, cols, Dtype::kF32);
    x.m = buf(n + ".m", rows, cols, Dtype::kF32);
    x.v = buf(n + ".v", rows, cols, Dtype::kF32);
    x.g = buf(n + ".grad", rows, cols, Dtype::kF32);
    const std::size_t sl = layout.slot(k);
    const bool mm = sl == kWqkv || sl == kWo || sl == kW1 || sl == kW2 ||
                    k == shapes.size() - 1;
    if (mm) x.wb = buf(n + ".bf16", rows, cols, Dtype::kBf16);
  }
  mask = buf("mask", S, S, Dtype::kBf16);  // one window's; -0 and -Inf: exact in bf16
  sel = buf("sel", T, V, Dtype::kBf16);
  // The residual stream in two buffers: a block reads one and writes the other (nothing of it is
  // needed by the backward pass).
  h0 = buf("h0", T, d, Dtype::kF32);
  h1 = buf("h1", T, d, Dtype::kF32);
  layers.assign(L, Layer{});
  for (std::size_t l = 0; l < L; ++l) {
    Layer& y = layers[l];
    const std::string n = "h" + std::to_string(l) + ".";
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
    y.gelu_s = buf(n + "gelu s", T, fm, Dtype::kF32);
  }
  xfb = buf("xf", T, d, Dtype::kBf16);
  xhatf = buf("xhatf", T, d, Dtype::kF32);
  rstdf = vec("rstdf", T);
  // One scratch for what is never live at once: the scores (and the backward's dP), the
  // logits, da.
  const HbmMatrix scratch =
      buf("scratch", std::max(BH, T), std::max({S, V, fm}), Dtype::kF32);
  logits = hbm_view(scratch, 0, T, 0, V);
  loss = buf("loss", B, S, Dtype::kF32);  // per token; a window a row (T is whole bursts)
  dlogb = buf("dlogits", T, V, Dtype::kBf16);
  parts = vec("loss parts", B);
  z = hbm_view(scratch, 0, BH, 0, S);
  yo = buf("y", T, d, Dtype::kF32);
  dx = yo;  // the forward's block output and the backward's input gradient
  if (spec.model > 1) {
    yp = buf("y partial", T, d, Dtype::kF32);
    dxs = yp;
  }
  dres = buf("dh", T, d, Dtype::kF32);
  dresb = buf("dh.bf16", T, d, Dtype::kBf16);
  dln = yo;  // the LN backward's output over its input (dx, or dx summed: in place, row by row)
  da = hbm_view(scratch, 0, T, 0, fm);
  dub = buf("du", T, fm, Dtype::kBf16);
  datt = buf("datt", T, Hm * dhp, Dtype::kBf16);
  dp = z;  // the forward's scores and the backward's dP are never live at once
  dsb = buf("ds", BH, S, Dtype::kBf16);
  blk_t = buf("block^T", BH, S, Dtype::kBf16);
  dqkv = buf("dqkv", T, 3 * Hm * dhp, Dtype::kF32);
  dqkvb = buf("dqkv.bf16", T, 3 * Hm * dhp, Dtype::kBf16);
  trans = buf("x^T", std::max({d, fm, Hm * dhp}), T, Dtype::kBf16);
  lists_f = buf("ids (embedding)", 1, round_up(T, 16) + 64, Dtype::kF32);
  lists_b = buf("ids (embedding backward)", 1, 8 * T + 256, Dtype::kF32);
}

void GptTrainer::Impl::add_map(const char* phase, VpuMap m) {
  wl->add_op(vector_map_op(*wl, phase, std::move(m)));
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
  for (std::size_t blk = 0; blk < B * Hm; ++blk)  // a map per window and head: one S x S mask
    add_map("attention softmax",
            gpt_softmax_map(consts, hbm_view(z, blk * S, S, 0, S), mask,
                            hbm_view(c.p, blk * S, S, 0, S), hbm_view(c.pb, blk * S, S, 0, S)));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j)
      wl->add_op(matmul_op("matmul", ref(hbm_view(c.att, b * S, S, j * dhp, dhp)),
                           ref(hbm_view(c.pb, (b * Hm + j) * S, S, 0, S)),
                           ref(head(c.qkv, 2, b, j))));
}

void GptTrainer::Impl::add_forward(const GptSpec& spec, const std::vector<EmbeddingPlan>& ef) {
  wl->add_op(commands_op("embedding", chip_cmds(ef), vmem_of(ef),
                         {ref(t[0].w), ref(t[1].w), ref(lists_f)}, {ref(h0)}));
  // The residual stream: a block reads h0 and writes h1, the MLP reads h1 and writes h0.
  for (std::size_t l = 0; l < spec.layers; ++l) {
    const Layer& c = layers[l];
    auto W = [&](GptLayerSlot sl) -> const Tensor& { return t[gpt_index(l, sl)]; };
    add_map("layer norm", gpt_ln_forward_map(consts, h0, W(kLn1G).w, W(kLn1B).w, c.x1b, c.xhat1,
                                             c.rstd1));
    wl->add_op(matmul_op("matmul", ref(c.qkv), ref(c.x1b), ref(W(kWqkv).wb), ref(W(kBqkv).w)));
    add_attention(l);
    wl->add_op(matmul_op("matmul", ref(mesh.model > 1 ? yp : yo), ref(c.att), ref(W(kWo).wb)));
    add_block_out(yp, W(kBo).w, h0, h1);
    add_map("layer norm", gpt_ln_forward_map(consts, h1, W(kLn2G).w, W(kLn2B).w, c.x2b,
                                             c.xhat2, c.rstd2));
    wl->add_op(matmul_op("matmul", ref(c.u), ref(c.x2b), ref(W(kW1).wb), ref(W(kB1).w)));
    add_map("gelu", gpt_gelu_map(consts, c.u, c.ab, &c.gelu_s));
    wl->add_op(matmul_op("matmul", ref(mesh.model > 1 ? yp : yo), ref(c.ab), ref(W(kW2).wb)));
    add_block_out(yp, W(kB2).w, h1, h0);
  }
  const std::size_t f = gpt_index_lnf_g(spec.layers);
  add_map("layer norm", gpt_ln_forward_map(consts, h0, t[f].w, t[f + 1].w, xfb, xhatf, rstdf));
  wl->add_op(matmul_op("matmul", ref(logits), ref(xfb), ref(t[f + 2].wb)));
  add_map("cross-entropy", gpt_cross_entropy_map(consts, logits, sel, loss, dlogb));
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

void GptTrainer::Impl::add_backward(const GptSpec& spec, const std::vector<EmbeddingPlan>& eb) {
  const std::size_t f = gpt_index_lnf_g(spec.layers);
  add_linear_back(xfb, dlogb, f + 2, &dx);
  grad_ready(f + 2);
  add_map("layer norm", gpt_ln_backward_map(consts, dx, xhatf, rstdf, t[f].w, dres, t[f].g,
                                            t[f + 1].g));
  grad_ready(f);
  grad_ready(f + 1);
  for (std::size_t l = spec.layers; l-- > 0;) {
    const Layer& c = layers[l];
    auto k = [&](GptLayerSlot sl) { return gpt_index(l, sl); };
    // MLP block.
    add_map("bias gradient", gpt_col_sum_map(consts, dres, t[k(kB2)].g, &dresb));
    grad_ready(k(kB2));
    add_linear_back(c.ab, dresb, k(kW2), &da);
    grad_ready(k(kW2));
    add_map("gelu", gpt_gelu_back_map(consts, da, c.u, dub, t[k(kB1)].g, &c.gelu_s));
    grad_ready(k(kB1));
    add_linear_back(c.x2b, dub, k(kW1), &dx);
    grad_ready(k(kW1));
    add_map("layer norm", gpt_ln_backward_map(consts, model_sum(dx), c.xhat2, c.rstd2,
                                              t[k(kLn2G)].w, dln, t[k(kLn2G)].g, t[k(kLn2B)].g));
    grad_ready(k(kLn2G));
    grad_ready(k(kLn2B));
    add_map("residual", gpt_add_map(dres, dln, dres));
    // Attention block.
    add_map("bias gradient", gpt_col_sum_map(consts, dres, t[k(kBo)].g, &dresb));
    grad_ready(k(kBo));
    add_linear_back(c.att, dresb, k(kWo), nullptr);
    grad_ready(k(kWo));
    wl->add_op(matmul_op("matmul", ref(datt), ref(dresb), ref(t[k(kWo)].wb), {}, false, true));
    add_attention_back(l);
    add_map("bias gradient", gpt_col_sum_map(consts, dqkv, t[k(kBqkv)].g, &dqkvb));
    grad_ready(k(kBqkv));
    add_linear_back(c.x1b, dqkvb, k(kWqkv), &dx);
    grad_ready(k(kWqkv));
    add_map("layer norm", gpt_ln_backward_map(consts, model_sum(dx), c.xhat1, c.rstd1,
                                              t[k(kLn1G)].w, dln, t[k(kLn1G)].g, t[k(kLn1B)].g));
    grad_ready(k(kLn1G));
    grad_ready(k(kLn1B));
    add_map("residual", gpt_add_map(dres, dln, dres));
  }
  add_map("embedding backward", gpt_fill_map(hbm_view(zeros, 0, 1, 0, d), t[0].g));
  wl->add_op(commands_op("embedding backward", chip_cmds(eb), vmem_of(eb),
                         {ref(dres), ref(lists_b)}, {ref(t[0].g), ref(t[1].g)}));
  grad_ready(0);
  grad_ready(1);
}

void GptTrainer::Impl::add_optimizer() {
  for (const Tensor& x : t)
    add_map("optimizer", gpt_adam_map(consts, x.w, x.g, x.m, x.v, x.matrix, x.wb));
}

void GptTrainer::Impl::add_all_reduce(const HbmMatrix& in, const HbmMatrix& out, bool data_axis) {
  const CollectiveOp co = train_all_reduce(wl->host().info().topo, in.rows * in.cols,
                                           data_axis ? mesh.data_dims : mesh.model_dims, ref(in),
                                           ref(out), data_axis, mesh.model > 1);
  wl->add_op(collective_op(data_axis ? "all_reduce gradients" : "all_reduce over model", co));
  if (!data_axis) model_coll.push_back(colls);
  ++colls;
}

void GptTrainer::Impl::grad_ready(std::size_t k) {
  if (mesh.data <= 1) return;
  grad_coll[k] = colls;
  // In place: each round of the all-reduce loads its slice of the gradient before it stores
  // the sum there (docs/pod.md, "How a collective runs").
  add_all_reduce(t[k].g, t[k].g, true);
}

void GptTrainer::Impl::add_block_out(const HbmMatrix& partial, const HbmMatrix& bias,
                                     const HbmMatrix& h, const HbmMatrix& out) {
  if (mesh.model > 1) add_all_reduce(partial, yo, false);
  add_map("residual", gpt_bias_residual_map(yo, bias, h, out));
}

const HbmMatrix& GptTrainer::Impl::model_sum(const HbmMatrix& partial) {
  if (mesh.model <= 1) return partial;
  add_all_reduce(partial, dxs, false);
  return dxs;
}

void check_gpt_chip_spec(const GptSpec& spec) {
  spec.validate();
  auto need32 = [](std::size_t v, const std::string& what) {
    if (v % 32 != 0)
      throw std::invalid_argument("gpt train: " + what + " " + std::to_string(v) +
                                  " must be a multiple of 32 (a bf16 row in whole 64-byte "
                                  "bursts)");
  };
  need32(spec.d_model, "d_model");
  need32(spec.seq, "seq");
  need32(spec.vocab, "vocab");
  need32(4 * spec.d_model / static_cast<std::size_t>(spec.model), "4 d_model / model");
}

GptTrainer::GptTrainer(HostPort& host, GptSpec spec, GptTrainOptions opt)
    : host_(host), spec_(std::move(spec)), opt_(std::move(opt)), impl_(std::make_unique<Impl>()) {
  const MachineInfo& mi = host_.info();
  const ChipShape& s = mi.shape;
  Impl& m = *impl_;
  m.P = mi.num_chips();
  m.mesh = train_mesh(mi, opt_.mesh);
  spec_.lanes = s.cols;
  spec_.data = m.mesh.data;
  spec_.model = m.mesh.model;
  spec_.data_rank = m.mesh.data_rank;
  spec_.model_rank = m.mesh.model_rank;
  check_gpt_chip_spec(spec_);
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
  for (int c = 0; c < m.P; ++c) {
    const ChipDriver& d = m.wl->driver(c);
    img.push_back(
        HbmImage{c, m.mask.addr,
                 d.matrix_image(m.mask, vector_to_bf16(gpt_causal_mask(m.mask.rows, m.S)))});
    img.push_back(HbmImage{c, m.zeros.addr,
                           d.matrix_image(m.zeros, std::vector<float>(m.zeros.cols, 0.0f))});
  }
  put_images(host_, img, true);
}

GptTrainer::~GptTrainer() = default;

uint64_t GptTrainer::step_macs_per_chip() const {
  const Impl& m = *impl_;
  const uint64_t T = m.T, d = m.d, S = m.S, dh = m.dh, H = m.Hm, fm = m.fm, V = m.V;
  const uint64_t layer = T * d * 3 * H * dh + 2 * m.B * H * S * S * dh + T * H * dh * d +
                         2 * T * d * fm;
  // The head is computed whole on every model rank: a model's MACs count it once per data rank.
  return 3 * (spec_.layers * layer + T * d * V / static_cast<uint64_t>(spec_.model));
}

uint64_t GptTrainer::load_params(const GptParams& params) {
  Impl& m = *impl_;
  std::vector<HbmImage> img;
  for (int c = 0; c < m.P; ++c) {
    const GptParams shard = gpt_shard(spec_, params, spec_.model_rank_of(c));
    if (shard.size() != m.t.size())
      throw std::invalid_argument("gpt train: " + std::to_string(params.size()) +
                                  " parameters, the model has " + std::to_string(m.t.size()));
    const ChipDriver& d = m.wl->driver(c);
    for (std::size_t k = 0; k < shard.size(); ++k) {
      const Impl::Tensor& x = m.t[k];
      const std::vector<float> w = m.layout.to_chip(shard[k], k), zero(w.size(), 0.0f);
      img.push_back(HbmImage{c, x.w.addr, d.matrix_image(x.w, w)});
      img.push_back(HbmImage{c, x.m.addr, d.matrix_image(x.m, zero)});
      img.push_back(HbmImage{c, x.v.addr, d.matrix_image(x.v, zero)});
      if (x.wb.rows != 0) img.push_back(HbmImage{c, x.wb.addr, d.matrix_image(x.wb, vector_to_bf16(w))});
    }
  }
  return put_images(host_, img, opt_.backdoor);
}

GptStepRun GptTrainer::step(const std::vector<int32_t>& windows) {
  Impl& m = *impl_;
  const std::size_t W = spec_.seq + 1;
  if (windows.size() != spec_.global_batch() * W)
    throw std::invalid_argument("gpt train: " + std::to_string(windows.size()) +
                                " tokens, the step takes global batch x (seq + 1) = " +
                                std::to_string(spec_.global_batch() * W));
  for (int32_t x : windows)
    if (x < 0 || static_cast<std::size_t>(x) >= m.V)
      throw std::invalid_argument("gpt train: token id " + std::to_string(x) +
                                  " is outside the vocabulary [0, " + std::to_string(m.V) + ")");
  ++t_;
  const ChipShape& s = host_.info().shape;
  const std::vector<float> consts = gpt_const_image(spec_, gpt_adam_consts(spec_, t_), s.cols);
  const EmbeddingDims dims{m.V, m.S, m.d, m.T};
  std::vector<EmbeddingPlan> ef, eb;
  std::vector<HbmImage> img;
  for (int c = 0; c < m.P; ++c) {  // chip c: its data rank's windows
    const std::size_t dr = static_cast<std::size_t>(spec_.data_rank_of(c));
    std::vector<int32_t> in, tgt;
    for (std::size_t b = 0; b < m.B; ++b)
      for (std::size_t i = 0; i < m.S; ++i) {
        in.push_back(windows[(dr * m.B + b) * W + i]);
        tgt.push_back(windows[(dr * m.B + b) * W + i + 1]);
      }
    EmbeddingBuffers bf;
    bf.wte = m.t[0].w.addr;
    bf.wpe = m.t[1].w.addr;
    bf.h = m.h0.addr;
    bf.lists = m.lists_f.addr;
    ef.push_back(plan_embedding_forward(s, dims, in, bf));
    bf.dh = m.dres.addr;
    bf.dwte = m.t[0].g.addr;
    bf.dwpe = m.t[1].g.addr;
    bf.lists = m.lists_b.addr;
    eb.push_back(plan_embedding_backward(s, dims, in, bf));
    if (ef.back().lists.size() > m.lists_f.cols || eb.back().lists.size() > m.lists_b.cols)
      throw std::logic_error("gpt train: the embedding's id lists outgrew their buffers");
    // This step's inputs: the constants (AdamW's of step t), the id lists and sel.
    const ChipDriver& d = m.wl->driver(c);
    img.push_back(HbmImage{c, m.consts.addr, d.matrix_image(m.consts, consts)});
    img.push_back(HbmImage{c, m.lists_f.addr, ef.back().list_bytes()});
    img.push_back(HbmImage{c, m.lists_b.addr, eb.back().list_bytes()});
    img.push_back(HbmImage{c, m.sel.addr,
                           d.matrix_image(m.sel, vector_to_bf16(gpt_target_sel(tgt, m.V)))});
  }
  put_images(host_, img, opt_.backdoor);
  // The program: planned again, the embedding's with this step's tokens.
  m.wl->truncate_ops(0);
  m.colls = 0;
  m.grad_coll.assign(m.t.size(), -1);
  m.model_coll.clear();
  m.add_forward(spec_, ef);
  m.add_backward(spec_, eb);
  m.add_optimizer();
  ScheduleOptions so;
  so.collective_regions = 3;  // a chip starts collective i + 3 once i + 2, and so i, finished
  Schedule sch = schedule(*m.wl, so);
  m.grad_rounds.assign(m.t.size(), {});
  for (std::size_t k = 0; k < m.t.size(); ++k)
    if (m.grad_coll[k] >= 0)
      m.grad_rounds[k] = sch.collectives.at(static_cast<std::size_t>(m.grad_coll[k])).rounds;
  m.model_rounds.clear();
  for (int i : m.model_coll)
    m.model_rounds.push_back(sch.collectives.at(static_cast<std::size_t>(i)).rounds);
  GptStepRun r;
  r.program = std::move(sch.program);
  r.commands = r.program.commands();
  PodDriver pd(host_);
  r.prog = pd.run_programs(r.program);
  for (int c = 0; c < m.P; ++c) {
    std::vector<float> parts(m.parts.cols);
    host_.backdoor_read(c, m.parts.addr, parts.data(), parts.size() * 4);
    parts.resize(m.B);
    r.loss_parts.push_back(parts);
  }
  r.loss = gpt_loss(spec_, r.loss_parts);
  return r;
}

namespace {

// A collective's rounds replayed on f32 vectors, one per chip (golden_collective on their bits):
// what chip `at` holds after them.
std::vector<float> replay_f32(const std::vector<CollectiveRound>& rounds,
                              const std::vector<std::vector<float>>& per_chip, int at) {
  std::vector<std::vector<uint32_t>> bits;
  for (const std::vector<float>& v : per_chip) {
    bits.emplace_back(v.size());
    std::memcpy(bits.back().data(), v.data(), v.size() * 4);
  }
  const std::vector<std::vector<uint32_t>> all = golden_collective(rounds, bits);
  const std::vector<uint32_t>& sum = all.at(static_cast<std::size_t>(at));
  std::vector<float> out(sum.size());
  std::memcpy(out.data(), sum.data(), out.size() * 4);
  return out;
}

}  // namespace

GptDataReduce GptTrainer::golden_data_reduce() const {
  const Impl* m = impl_.get();
  return [m](std::size_t k, const std::vector<std::vector<float>>& parts) {
    if (m->grad_rounds.at(k).empty()) return parts.at(0);
    // The rounds ran over the chip layout (heads padded with zeros) of the whole pod (one group
    // per model rank): every chip gets its data rank's part there, reduced as the chips reduced
    // it, and back.
    GptTensor g = m->shard_shape.at(k);
    std::vector<std::vector<float>> chips;
    for (int chip = 0; chip < m->P; ++chip) {
      g.v = parts.at(static_cast<std::size_t>(m->spec_data_rank(chip)));
      chips.push_back(m->layout.to_chip(g, k));
    }
    const std::vector<float> c = replay_f32(m->grad_rounds[k], chips, 0);
    return m->layout.from_chip(c, g, k);
  };
}

GptModelReduce GptTrainer::golden_model_reduce() const {
  const Impl* m = impl_.get();
  if (m->mesh.model <= 1) return nullptr;
  return [m](std::size_t site, std::size_t data_rank, const std::vector<std::vector<float>>& parts) {
    // Every chip gets its model rank's part (the other data ranks' groups sum the same parts
    // beside it, apart); the sum is read at a chip of this data rank.
    std::vector<std::vector<float>> chips;
    int at = -1;
    for (int chip = 0; chip < m->P; ++chip) {
      chips.push_back(
          parts.at(static_cast<std::size_t>(m->mesh.model_rank.at(static_cast<std::size_t>(chip)))));
      if (at < 0 && static_cast<std::size_t>(m->spec_data_rank(chip)) == data_rank) at = chip;
    }
    return replay_f32(m->model_rounds.at(site), chips, at);
  };
}

GptParams GptTrainer::Impl::read(HostPort& host, const GptSpec& spec, HbmMatrix Tensor::*field,
                                  int chip) const {
  GptParams p = gpt_zero_shard(spec);
  for (std::size_t k = 0; k < p.size(); ++k) {
    const HbmMatrix& at = t[k].*field;
    std::vector<float> c(at.rows * at.cols);
    host.backdoor_read(chip, at.addr, c.data(), c.size() * 4);
    p[k].v = layout.from_chip(c, p[k], k);
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
