#include "gpt_decode.h"

#include <stdexcept>
#include <string>

#include "embedding_plan.h"
#include "gpt_layout.h"
#include "gpt_maps.h"
#include "gpt_train.h"
#include "scheduler.h"
#include "train_images.h"

namespace tpu {
namespace {

// The first n rows of a buffer sized for the whole context.
HbmMatrix first_rows(const HbmMatrix& v, std::size_t n) { return hbm_view(v, 0, n, 0, v.cols); }

}  // namespace

struct GptDecoder::Impl {
  struct Tensor {
    HbmMatrix w, wb;  // f32 (layer norms, biases, embeddings), bf16 (matmul weights)
  };
  std::unique_ptr<Workload> wl;
  GptChipLayout layout;
  std::size_t S = 0, d = 0, Hm = 0, dhp = 0, fm = 0, V = 0;
  std::vector<Tensor> t;
  std::vector<HbmMatrix> kcache, vcache;  // per layer: S x Hm dhp bf16
  bool clear_cache = false;               // restart(): the next program zeroes the caches
  HbmMatrix consts, cache_zeros, mask, h[2], xb, xhat, rstd, qkv, z, pb, att, y, u, ab, logits, lists;

  BufferRef ref(const HbmMatrix& v) const { return wl->ref_of(v); }
  HbmMatrix buf(const std::string& name, std::size_t rows, std::size_t cols, Dtype dt) {
    return wl->matrix(wl->add_buffer(Buffer{name, rows, cols, dt}));
  }
  void map(const char* phase, VpuMap m, int chip) {
    Op op = vector_map_op(*wl, phase, std::move(m));
    op.chips = {chip};
    wl->add_op(std::move(op));
  }
  void mm(const HbmMatrix& out, const HbmMatrix& a, const HbmMatrix& w, const HbmMatrix* bias,
          bool wt, int chip) {
    Op op = matmul_op("matmul", ref(out), ref(a), ref(w), bias ? ref(*bias) : BufferRef{}, false,
                      wt);
    op.chips = {chip};
    wl->add_op(std::move(op));
  }
  // The ops of layer l for n tokens at positions p .. p + n - 1 (the residual stream in h[0]
  // before and after).
  void add_layer(std::size_t l, std::size_t p, std::size_t n, int chip);
};

GptDecoder::GptDecoder(HostPort& host, GptSpec spec, const GptParams& params, int chip)
    : host_(host), spec_(std::move(spec)), chip_(chip), impl_(std::make_unique<Impl>()) {
  const ChipShape& s = host_.info().shape;
  if (chip < 0 || chip >= host_.info().num_chips())
    throw std::invalid_argument("gpt decode: chip " + std::to_string(chip) + " is not the pod's");
  spec_.lanes = s.cols;
  spec_.batch = 1;
  spec_.data = spec_.model = 1;
  spec_.data_rank.clear();
  spec_.model_rank.clear();
  check_gpt_chip_spec(spec_);
  Impl& m = *impl_;
  m.layout = GptChipLayout(spec_);
  m.S = spec_.seq;
  m.d = spec_.d_model;
  m.Hm = spec_.heads;
  m.dhp = m.layout.dhp;
  m.fm = 4 * m.d;
  m.V = spec_.vocab;
  const GptParams shapes = gpt_zero_params(spec_);
  if (params.size() != shapes.size())
    throw std::invalid_argument("gpt decode: " + std::to_string(params.size()) +
                                " parameters, the model has " + std::to_string(shapes.size()));
  m.wl = std::make_unique<Workload>(host_);
  const std::size_t Q = std::max<std::size_t>(16, s.cols), HD = m.Hm * m.dhp;
  const std::size_t S = m.S, RQ = (S + Q - 1) / Q * Q;  // a per-row vector of up to S rows
  try {
    m.consts = m.buf("consts", kGcCount, s.cols, Dtype::kF32);
    m.mask = m.buf("mask", m.S, m.S, Dtype::kBf16);
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      if (params[k].v.size() != shapes[k].v.size())
        throw std::invalid_argument("gpt decode: parameter " + shapes[k].name + " has " +
                                    std::to_string(params[k].v.size()) + " values, the model " +
                                    std::to_string(shapes[k].v.size()));
      const auto [rows, cols] = m.layout.shape(shapes[k], k);
      Impl::Tensor x;
      x.w = m.buf(shapes[k].name, rows, cols, Dtype::kF32);
      if (rows > 1) x.wb = m.buf(shapes[k].name + ".bf16", rows, cols, Dtype::kBf16);
      m.t.push_back(x);
    }
    for (std::size_t l = 0; l < spec_.layers; ++l) {
      m.kcache.push_back(m.buf("k cache " + std::to_string(l), m.S, HD, Dtype::kBf16));
      m.vcache.push_back(m.buf("v cache " + std::to_string(l), m.S, HD, Dtype::kBf16));
    }
    m.cache_zeros = m.buf("cache zeros", m.S, HD, Dtype::kBf16);
    m.h[0] = m.buf("h0", S, m.d, Dtype::kF32);
    m.h[1] = m.buf("h1", S, m.d, Dtype::kF32);
    m.xb = m.buf("x", S, m.d, Dtype::kBf16);
    m.xhat = m.buf("xhat", S, m.d, Dtype::kF32);
    m.rstd = m.buf("rstd", 1, RQ, Dtype::kF32);
    m.qkv = m.buf("qkv", S, 3 * HD, Dtype::kBf16);
    m.z = m.buf("scores", m.Hm * S, S, Dtype::kF32);  // head j: rows j n .. j n + n - 1
    m.pb = m.buf("p", m.Hm * S, S, Dtype::kBf16);
    m.att = m.buf("att", S, HD, Dtype::kBf16);
    m.y = m.buf("y", S, m.d, Dtype::kF32);
    m.u = m.buf("u", S, m.fm, Dtype::kF32);
    m.ab = m.buf("a", S, m.fm, Dtype::kBf16);
    m.logits = m.buf("logits", S, m.V, Dtype::kF32);
    m.lists = m.buf("ids", 1, std::max<std::size_t>(64, RQ), Dtype::kF32);
  } catch (const BufferDoesNotFit& e) {
    throw std::invalid_argument("gpt decode: the buffers do not fit in a chip's HBM: " +
                                std::string(e.what()));
  }
  // Parameters (chip layout), the constants, the mask, the caches' zeros: by the backdoor.
  const ChipDriver& dr = m.wl->driver(chip);
  std::vector<HbmImage> img;
  img.push_back(HbmImage{chip, m.consts.addr,
                         dr.matrix_image(m.consts, gpt_const_image(spec_, gpt_adam_consts(spec_, 1),
                                                                   s.cols))});
  img.push_back(HbmImage{chip, m.mask.addr,
                         dr.matrix_image(m.mask, vector_to_bf16(gpt_causal_mask(m.S, m.S)))});
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<float> w = m.layout.to_chip(params[k], k);
    img.push_back(HbmImage{chip, m.t[k].w.addr, dr.matrix_image(m.t[k].w, w)});
    if (m.t[k].wb.rows)
      img.push_back(HbmImage{chip, m.t[k].wb.addr, dr.matrix_image(m.t[k].wb, vector_to_bf16(w))});
  }
  for (std::size_t l = 0; l < spec_.layers; ++l)
    for (const HbmMatrix& c : {m.kcache[l], m.vcache[l], m.cache_zeros})
      img.push_back(HbmImage{chip, c.addr,
                             dr.matrix_image(c, std::vector<bf16_t>(c.rows * c.cols, 0))});
  put_images(host_, img, true);
}

GptDecoder::~GptDecoder() = default;

void GptDecoder::Impl::add_layer(std::size_t l, std::size_t p, std::size_t n, int chip) {
  auto W = [&](GptLayerSlot sl) -> const Tensor& { return t[gpt_index(l, sl)]; };
  auto rows = [n](const HbmMatrix& v) { return first_rows(v, n); };
  const std::size_t HD = Hm * dhp;
  const HbmMatrix h0 = rows(h[0]), h1 = rows(h[1]), x = rows(xb), xh = rows(xhat), q = rows(qkv);
  map("layer norm", gpt_ln_forward_map(consts, h0, W(kLn1G).w, W(kLn1B).w, x, xh, rstd), chip);
  mm(q, x, W(kWqkv).wb, &W(kBqkv).w, false, chip);
  map("kv cache", gpt_copy_map(hbm_view(qkv, 0, n, HD, HD), hbm_view(kcache[l], p, n, 0, HD)),
      chip);
  map("kv cache", gpt_copy_map(hbm_view(qkv, 0, n, 2 * HD, HD), hbm_view(vcache[l], p, n, 0, HD)),
      chip);
  for (std::size_t j = 0; j < Hm; ++j)
    mm(hbm_view(z, j * n, n, 0, S), hbm_view(qkv, 0, n, j * dhp, dhp),
       hbm_view(kcache[l], 0, S, j * dhp, dhp), nullptr, true, chip);
  if (n == 1) {  // every head's one row under the position's mask row
    map("attention softmax", gpt_softmax_row_map(consts, hbm_view(z, 0, Hm, 0, S),
                                                 hbm_view(mask, p, 1, 0, S),
                                                 hbm_view(pb, 0, Hm, 0, S)),
        chip);
  } else {
    for (std::size_t j = 0; j < Hm; ++j)
      map("attention softmax", gpt_softmax_row_map(consts, hbm_view(z, j * n, n, 0, S),
                                                   hbm_view(mask, p, n, 0, S),
                                                   hbm_view(pb, j * n, n, 0, S)),
          chip);
  }
  for (std::size_t j = 0; j < Hm; ++j)
    mm(hbm_view(att, 0, n, j * dhp, dhp), hbm_view(pb, j * n, n, 0, S),
       hbm_view(vcache[l], 0, S, j * dhp, dhp), nullptr, false, chip);
  mm(rows(y), rows(att), W(kWo).wb, nullptr, false, chip);
  map("residual", gpt_bias_residual_map(rows(y), W(kBo).w, h0, h1), chip);
  map("layer norm", gpt_ln_forward_map(consts, h1, W(kLn2G).w, W(kLn2B).w, x, xh, rstd), chip);
  mm(rows(u), x, W(kW1).wb, &W(kB1).w, false, chip);
  map("gelu", gpt_gelu_map(consts, rows(u), rows(ab)), chip);
  mm(rows(y), rows(ab), W(kW2).wb, nullptr, false, chip);
  map("residual", gpt_bias_residual_map(rows(y), W(kB2).w, h1, h0), chip);
}

GptDecoder::Step GptDecoder::feed(const std::vector<int32_t>& tokens) {
  Impl& m = *impl_;
  const std::size_t n = tokens.size();
  if (n == 0) throw std::invalid_argument("gpt decode: no token to feed");
  if (pos_ + n > m.S)
    throw std::invalid_argument("gpt decode: positions " + std::to_string(pos_) + " .. " +
                                std::to_string(pos_ + n - 1) + ": the context holds " +
                                std::to_string(m.S) + " tokens");
  for (int32_t token : tokens)
    if (token < 0 || static_cast<std::size_t>(token) >= m.V)
      throw std::invalid_argument("gpt decode: token id " + std::to_string(token) +
                                  " is outside the vocabulary [0, " + std::to_string(m.V) + ")");
  const ChipShape& s = host_.info().shape;
  // The embedding of the tokens at positions pos_ ..: wpe's row pos_ is the plan's row 0.
  EmbeddingBuffers eb;
  eb.wte = m.t[0].w.addr;
  eb.wpe = m.t[1].w.addr + pos_ * m.d * 4;
  eb.h = m.h[0].addr;
  eb.lists = m.lists.addr;
  const EmbeddingPlan ef = plan_embedding_forward(s, EmbeddingDims{m.V, n, m.d, n}, tokens, eb);
  std::vector<HbmImage> img{HbmImage{chip_, m.lists.addr, ef.list_bytes()}};
  put_images(host_, img, true);
  m.wl->truncate_ops(0);
  Op emb = commands_op("embedding", {without_halt(ef.cmds)}, static_cast<uint32_t>(ef.vmem_rows),
                       {m.ref(m.t[0].w), m.ref(m.t[1].w), m.ref(m.lists)}, {m.ref(m.h[0])});
  emb.chips = {chip_};
  m.wl->add_op(std::move(emb));
  if (m.clear_cache)
    for (std::size_t l = 0; l < spec_.layers; ++l)
      for (const HbmMatrix& c : {m.kcache[l], m.vcache[l]})
        m.map("kv cache", gpt_copy_map(m.cache_zeros, c), chip_);
  m.clear_cache = false;
  for (std::size_t l = 0; l < spec_.layers; ++l) m.add_layer(l, pos_, n, chip_);
  const std::size_t f = gpt_index_lnf_g(spec_.layers);
  const HbmMatrix xb = first_rows(m.xb, n);
  m.map("layer norm", gpt_ln_forward_map(m.consts, first_rows(m.h[0], n), m.t[f].w, m.t[f + 1].w,
                                         xb, first_rows(m.xhat, n), m.rstd),
        chip_);
  m.mm(first_rows(m.logits, n), xb, m.t[f + 2].wb, nullptr, false, chip_);
  Schedule sch = schedule(*m.wl);
  PodDriver pd(host_);
  const PodProgramRun run = pd.run_programs(sch.program);
  Step st;
  st.cycles = run.run.cycles;
  st.commands = sch.program.commands();
  st.logits.resize(n * m.V);
  host_.backdoor_read(chip_, m.logits.addr, st.logits.data(), n * m.V * 4);
  pos_ += n;
  return st;
}

void GptDecoder::restart() {
  pos_ = 0;
  impl_->clear_cache = true;
}

}  // namespace tpu
