#include "gpt_train.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "embedding_plan.h"
#include "gpt_layout.h"
#include "gpt_maps.h"
#include "pipeline_train.h"
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
  // A parameter on the chip: f32 master, Adam moments, gradient, and (matmul weights) bf16; gt
  // a micro-batch's gradient before it is added (micro-batches only).
  struct Tensor {
    std::size_t rows = 0, cols = 0;  // the chip's layout (heads padded)
    HbmMatrix w, m, v, g, wb, gt;
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
  // What a micro-batch keeps from its forward to its backward, per activation slot: its layers'
  // (per place), the final layer norm's and the head's gradient.
  struct Slot {
    std::vector<Layer> layers;
    HbmMatrix xfb, xhatf, rstdf, dlogb;
  };
  std::unique_ptr<Workload> wl;
  TrainMesh mesh;
  int P = 1;
  // Per pod chip: data and model rank, stage; the pod chip of (golden chip, stage).
  std::vector<int> dr, mr, st;
  std::vector<std::vector<int>> pod_of;
  // The pipeline: NS stages, M micro-batches, nv chunks per stage, R activation slots, K send
  // regions per direction; per virtual stage its layers; per stage its slots.
  int NS = 1, M = 1, nv = 1, R = 1, K = 1;
  bool piped = false;
  std::size_t per = 1, nq = 1;  // layers per chunk (places per chunk), places
  std::vector<std::pair<std::size_t, std::size_t>> chunk;
  std::vector<std::vector<PipeSlot>> table;
  std::vector<std::map<std::pair<int, int>, int>> slot_of;
  std::vector<int> region;                              // per op: its send or collective region
  std::map<std::tuple<int, int, bool, int>, int> sent;  // (mb, virtual, backward, golden chip)
  std::map<std::pair<int, int>, int> seq;               // (from, to) chips -> sends so far
  std::vector<int> stage_colls;                         // per stage: collectives so far
  // The slot being added: its stage, micro-batch, activation slot and phase.
  int cur_s = 0, cur_mb = 0;
  std::size_t cur_r = 0;
  std::string cur_phase, cur_tag;
  int spec_data_rank(int chip) const { return dr[static_cast<std::size_t>(chip)]; }
  std::size_t B = 0, S = 0, T = 0, d = 0, Hm = 0, dh = 0, dhp = 0, fm = 0, V = 0, Q = 0;
  std::vector<Tensor> t;  // per place (docs: local index), local(k) of parameter k
  GptParams shard_shape;  // the golden's shapes of a chip's tensors (zeros)
  std::vector<Slot> act;  // per activation slot
  HbmMatrix consts, zeros, mask, sel, h0, h1, logits, loss, parts;
  std::vector<HbmMatrix> lists_f, lists_b;  // per micro-batch
  HbmMatrix yp, dxs;  // model > 1: a block's partial output, and the summed input gradient
  HbmMatrix z, yo, dx, dres, dresb, dln, da, dub, datt, dp, dsb, blk_t, dqkv, dqkvb, trans;
  std::vector<std::vector<CollectiveRound>> grad_rounds;  // per tensor: its data all-reduce
  std::vector<int> grad_coll;  // per tensor: its all-reduce's index among the collectives (-1)
  // The model all-reduces by site (GptModelReduce's; micro-batch k's from 4 L k on):
  // their index among the collectives and their stage; then their rounds.
  std::vector<int> model_coll, model_stage;
  std::vector<std::vector<CollectiveRound>> model_rounds;
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

  // Places: layer l sits at place q_of(l) of its stage (the same buffers on every stage);
  // parameter k's tensor is t[local(k)], held by stage stage_of_tensor(k).
  int virt_of(std::size_t l) const {
    for (std::size_t j = 0; j < chunk.size(); ++j)
      if (l >= chunk[j].first && l <= chunk[j].second) return static_cast<int>(j);
    throw std::logic_error("gpt train: layer " + std::to_string(l) + " in no stage");
  }
  std::size_t q_of(std::size_t l) const {
    const int j = virt_of(l);
    return static_cast<std::size_t>(j / NS) * per + (l - chunk[static_cast<std::size_t>(j)].first);
  }
  std::size_t layers_total() const { return (shard_shape.size() - 5) / kGptLayerSlots; }
  std::size_t local(std::size_t k) const {
    const std::size_t f = gpt_index_lnf_g(layers_total());
    if (k < 2) return k;
    if (k >= f) return 2 + nq * kGptLayerSlots + (k - f);
    return 2 + q_of((k - 2) / kGptLayerSlots) * kGptLayerSlots + (k - 2) % kGptLayerSlots;
  }
  int stage_of_tensor(std::size_t k) const {
    const std::size_t f = gpt_index_lnf_g(layers_total());
    if (k < 2) return 0;
    if (k >= f) return NS - 1;
    return virt_of((k - 2) / kGptLayerSlots) % NS;
  }
  Tensor& T_(std::size_t k) { return t[local(k)]; }
  const Layer& A(std::size_t l) const { return act[cur_r].layers[q_of(l)]; }
  std::vector<int> chips_of(int s) const {
    std::vector<int> c;
    for (int x = 0; x < P; ++x)
      if (st[static_cast<std::size_t>(x)] == s) c.push_back(x);
    return c;
  }
  // An op of the slot being added: its phase (the op kind, or the slot when pipelined), its
  // chips (the stage's), its region (-1: the rotation's).
  int add(Op op, int r = -1) {
    if (NS > 1) op.chips = chips_of(cur_s);
    const int i = wl->add_op(std::move(op));
    region.resize(static_cast<std::size_t>(i) + 1, -1);
    region[static_cast<std::size_t>(i)] = r;
    return i;
  }
  std::string ph(const char* kind) const { return piped ? cur_phase : kind; }

  void apply_mesh(const MachineInfo& mi, const Mesh& given);
  void plan_slots(const GptSpec& spec, const GptTrainOptions& opt);
  void lay_out(const GptSpec& spec, const ChipShape& s);
  std::size_t rep(std::size_t lk) const;
  void lay_out_tensors();
  void lay_out_slot(std::size_t r, bool layers_part);
  // The step's ops.
  void add_map(const char* phase, VpuMap m);
  GptParams read(HostPort& host, const GptSpec& spec, HbmMatrix Tensor::*field, int chip) const;
  void add_embedding(const std::vector<EmbeddingPlan>& ef);
  void add_layer_forward(std::size_t l);
  void add_head_forward();
  void add_attention(std::size_t l);
  void add_head_backward();
  void add_layer_backward(std::size_t l);
  void add_embedding_backward(const std::vector<EmbeddingPlan>& eb);
  void add_attention_back(std::size_t l);
  void add_linear_back(const HbmMatrix& xb, const HbmMatrix& dyb, std::size_t k,
                       const HbmMatrix* dx_out);
  void add_slot(const std::vector<std::vector<EmbeddingPlan>>& ef,
                const std::vector<std::vector<EmbeddingPlan>>& eb, int s, const PipeSlot& x);
  void add_p2p(const char* what, int s_to, int j_from, bool backward, const HbmMatrix& src);
  void add_recv(const char* what, int j_from, bool backward, const HbmMatrix& dst);
  void add_optimizer();
  // An f32 all-reduce of `in` into `out` over the data or the model axis.
  void add_all_reduce(const HbmMatrix& in, const HbmMatrix& out, bool data_axis, int site = -1);
  // Parameter k's gradient buffer for the micro-batch being added (its own for micro-batch 0).
  const HbmMatrix& grad(std::size_t k) { return cur_mb == 0 ? T_(k).g : T_(k).gt; }
  // The micro-batch's gradient of parameter k is written: added to the sum (micro-batch > 0),
  // and after the last its data all-reduce (data > 1).
  void grad_done(std::size_t k);
  // The block's output: y = sum over model ranks of the partial (model > 1) or the partial, then
  // out = h + (y + bias).
  void add_block_out(const HbmMatrix& partial, const HbmMatrix& bias, const HbmMatrix& h,
                     const HbmMatrix& out, int site);
  // An input gradient summed over the model axis (model > 1), else itself.
  const HbmMatrix& model_sum(const HbmMatrix& partial, int site);
};

// The mesh: data and model as train_mesh has them, or with a stage axis each chip's three ranks
// (the golden's chips are then data x model: chip d x model + m).
void GptTrainer::Impl::apply_mesh(const MachineInfo& mi, const Mesh& given) {
  const Mesh m0 = mesh_without_unit_axes(given);
  bool has_stage = false;
  for (const MeshAxis& a : m0.axes) has_stage = has_stage || a.name == "stage";
  dr.assign(static_cast<std::size_t>(P), 0);
  mr.assign(static_cast<std::size_t>(P), 0);
  st.assign(static_cast<std::size_t>(P), 0);
  if (!has_stage) {
    mesh = train_mesh(mi, given);
    pod_of.clear();
    for (int c = 0; c < P; ++c) {
      const std::size_t i = static_cast<std::size_t>(c);
      dr[i] = mesh.data_rank.empty() ? c : mesh.data_rank[i];
      mr[i] = mesh.model_rank.empty() ? 0 : mesh.model_rank[i];
      pod_of.push_back({c});
    }
    return;
  }
  for (const MeshAxis& a : m0.axes)
    if (a.name != "data" && a.name != "model" && a.name != "stage")
      throw std::invalid_argument("gpt train: mesh axis '" + a.name +
                                  "': the axes are 'data', 'model' and 'stage'");
  if (m0.num_chips() != P)
    throw std::invalid_argument("gpt train: the mesh " + m0.text() + " has " +
                                std::to_string(m0.num_chips()) + " chips, the pod " +
                                std::to_string(P));
  auto has = [&](const char* n) {
    for (const MeshAxis& a : m0.axes)
      if (a.name == n) return true;
    return false;
  };
  NS = m0.axis_size("stage");
  const std::vector<int> stage_dims = mesh_axis_dims(mi.topo, m0, "stage");
  mesh = TrainMesh{};
  if (has("model")) {
    mesh.model = m0.axis_size("model");
    mesh.model_dims = mesh_axis_dims(mi.topo, m0, "model");
  }
  mesh.data = P / (NS * mesh.model);
  if (has("data")) mesh.data_dims = mesh_axis_dims(mi.topo, m0, "data");
  pod_of.assign(static_cast<std::size_t>(mesh.data * mesh.model),
                std::vector<int>(static_cast<std::size_t>(NS), -1));
  for (int c = 0; c < P; ++c) {
    const std::size_t i = static_cast<std::size_t>(c);
    st[i] = group_rank(mi.topo, stage_dims, c);
    mr[i] = has("model") ? group_rank(mi.topo, mesh.model_dims, c) : 0;
    dr[i] = has("data") ? group_rank(mi.topo, mesh.data_dims, c) : 0;
    const std::size_t g = static_cast<std::size_t>(dr[i] * mesh.model + mr[i]);
    pod_of.at(g).at(static_cast<std::size_t>(st[i])) = c;
  }
}

// The chunks of layers per virtual stage, the table of slots and the activation slots.
void GptTrainer::Impl::plan_slots(const GptSpec& spec, const GptTrainOptions& opt) {
  M = static_cast<int>(opt.microbatches);
  piped = NS > 1 || M > 1;
  const PipeSchedule sched = piped ? opt.schedule : PipeSchedule{};
  if (piped) check_pipeline(spec.layers, NS, M, sched, opt.stages_text);
  nv = sched.kind == PipeKind::kInterleaved ? sched.v : 1;
  chunk = pipeline_chunks(spec.layers, NS, sched, opt.stages_text);
  table = pipeline_slots(sched, NS, M);
  per = 0;
  for (const auto& [f, l] : chunk) per = std::max(per, l - f + 1);
  nq = static_cast<std::size_t>(nv) * per;
  slot_of = pipeline_activation_slots(table, &R);
}

// The places' tensors: the embedding's, nq layers', the final layer norm's and the head's (one
// per parameter without a stage axis); rep(lk) is the parameter that gives place lk its shape and
// name.
std::size_t GptTrainer::Impl::rep(std::size_t lk) const {
  const std::size_t f = gpt_index_lnf_g(layers_total());
  if (lk < 2) return lk;
  if (lk >= 2 + nq * kGptLayerSlots) return f + (lk - 2 - nq * kGptLayerSlots);
  return lk;  // place q's slot: layer q's name and shape (nq <= layers)
}

void GptTrainer::Impl::lay_out_tensors() {
  const GptParams& shapes = shard_shape;
  t.assign(2 + nq * kGptLayerSlots + 3, Tensor{});
  for (std::size_t lk = 0; lk < t.size(); ++lk) {
    const std::size_t k = rep(lk);
    const auto [rows, cols] = layout.shape(shapes[k], k);
    Tensor& x = t[lk];
    x.rows = rows;
    x.cols = cols;
    x.matrix = shapes[k].matrix();
    const std::string& n = shapes[k].name;
    x.w = buf(n, rows, cols, Dtype::kF32);
    x.m = buf(n + ".m", rows, cols, Dtype::kF32);
    x.v = buf(n + ".v", rows, cols, Dtype::kF32);
    x.g = buf(n + ".grad", rows, cols, Dtype::kF32);
    const std::size_t sl = layout.slot(k);
    const bool mm = sl == kWqkv || sl == kWo || sl == kW1 || sl == kW2 || k == shapes.size() - 1;
    if (mm) x.wb = buf(n + ".bf16", rows, cols, Dtype::kBf16);
  }
}

// Activation slot r's buffers: its layers' and the final layer norm's (first), or dlogits.
void GptTrainer::Impl::lay_out_slot(std::size_t r, bool layers_part) {
  Slot& a = act[r];
  const std::size_t BH = B * Hm * S;
  const std::string pre = r == 0 ? "" : "slot " + std::to_string(r) + " ";
  if (!layers_part) {
    a.dlogb = buf(pre + "dlogits", T, V, Dtype::kBf16);
    return;
  }
  a.layers.assign(nq, Layer{});
  for (std::size_t q = 0; q < nq; ++q) {
    Layer& y = a.layers[q];
    const std::string n = pre + "h" + std::to_string(q) + ".";
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
  a.xfb = buf(pre + "xf", T, d, Dtype::kBf16);
  a.xhatf = buf(pre + "xhatf", T, d, Dtype::kF32);
  a.rstdf = vec(pre + "rstdf", T);
}

void GptTrainer::Impl::lay_out(const GptSpec& spec, const ChipShape& s) {
  B = spec.batch / static_cast<std::size_t>(M);  // windows per micro-batch
  S = spec.seq;
  T = B * S;
  d = spec.d_model;
  Hm = spec.heads / static_cast<std::size_t>(spec.model);
  dh = spec.head_dim();
  layout = GptChipLayout(spec);
  dhp = layout.dhp;
  fm = 4 * d / static_cast<std::size_t>(spec.model);
  V = spec.vocab;
  Q = std::max<std::size_t>(16, s.cols);
  const std::size_t BH = B * Hm * S;
  shard_shape = gpt_zero_shard(spec);
  consts = buf("consts", kGcCount, s.cols, Dtype::kF32);
  zeros = buf("zeros", 1, std::max(d, V), Dtype::kF32);
  lay_out_tensors();
  mask = buf("mask", S, S, Dtype::kBf16);  // one window's; -0 and -Inf: exact in bf16
  sel = buf("sel", T * static_cast<std::size_t>(M), V, Dtype::kBf16);
  // The residual stream in two buffers: a block reads one and writes the other (nothing of it is
  // needed by the backward pass).
  h0 = buf("h0", T, d, Dtype::kF32);
  h1 = buf("h1", T, d, Dtype::kF32);
  act.assign(static_cast<std::size_t>(R), Slot{});
  lay_out_slot(0, true);
  // One scratch for what is never live at once: the scores (and the backward's dP), the
  // logits, da.
  const HbmMatrix scratch =
      buf("scratch", std::max(BH, T), std::max({S, V, fm}), Dtype::kF32);
  logits = hbm_view(scratch, 0, T, 0, V);
  loss = buf("loss", B * static_cast<std::size_t>(M), S, Dtype::kF32);  // a window a row
  lay_out_slot(0, false);
  parts = buf("loss parts", static_cast<std::size_t>(M), round_up(B, Q), Dtype::kF32);
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
  lists_f.clear();
  lists_b.clear();
  for (int k = 0; k < M; ++k) {
    const std::string n = k == 0 ? "" : " mb" + std::to_string(k);
    // The forward's lists: each window's tokens in whole rows of lanes (on a 128-lane chip a
    // window of 32 takes a row of 128); at least the T + 64 words the layout has always had.
    lists_f.push_back(buf(
        "ids (embedding)" + n, 1,
        std::max(round_up(T, 16) + 64, embedding_forward_list_words(T, S, s.cols)), Dtype::kF32));
    lists_b.push_back(buf("ids (embedding backward)" + n, 1,
                          embedding_backward_list_words(T, V, s.cols), Dtype::kF32));
  }
  // The pipeline's: the other activation slots, each micro-batch's gradient apart.
  for (std::size_t r = 1; r < act.size(); ++r) {
    lay_out_slot(r, true);
    lay_out_slot(r, false);
  }
  if (M > 1)
    for (std::size_t lk = 0; lk < t.size(); ++lk)
      t[lk].gt = buf(shard_shape[rep(lk)].name + ".grad mb", t[lk].rows, t[lk].cols, Dtype::kF32);
}

void GptTrainer::Impl::add_map(const char* phase, VpuMap m) {
  add(vector_map_op(*wl, ph(phase), std::move(m)));
}

// Per window b and local head j: z = q k^T, the softmax over all blocks at once, att = p v.
void GptTrainer::Impl::add_attention(std::size_t l) {
  const Layer& c = A(l);
  auto head = [&](const HbmMatrix& m, std::size_t part, std::size_t b, std::size_t j) {
    return hbm_view(m, b * S, S, (part * Hm + j) * dhp, dhp);
  };
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j)
      add(matmul_op(ph("matmul"), ref(hbm_view(z, (b * Hm + j) * S, S, 0, S)),
                    ref(head(c.qkv, 0, b, j)), ref(head(c.qkv, 1, b, j)), {}, false, true));
  for (std::size_t blk = 0; blk < B * Hm; ++blk)  // a map per window and head: one S x S mask
    add_map("attention softmax",
            gpt_softmax_map(consts, hbm_view(z, blk * S, S, 0, S), mask,
                            hbm_view(c.p, blk * S, S, 0, S), hbm_view(c.pb, blk * S, S, 0, S)));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j)
      add(matmul_op(ph("matmul"), ref(hbm_view(c.att, b * S, S, j * dhp, dhp)),
                    ref(hbm_view(c.pb, (b * Hm + j) * S, S, 0, S)), ref(head(c.qkv, 2, b, j))));
}

void GptTrainer::Impl::add_embedding(const std::vector<EmbeddingPlan>& ef) {
  add(commands_op(ph("embedding"), chip_cmds(ef), vmem_of(ef),
                  {ref(t[0].w), ref(t[1].w), ref(lists_f[static_cast<std::size_t>(cur_mb)])},
                  {ref(h0)}));
}

// The model sums' sites (GptModelReduce): micro-batch k's forward of layer l the attention's at
// 2 l, the MLP's at 2 l + 1; its backward the MLP's at 2 L + 2 (L - 1 - l), the attention's
// after it; micro-batch k's from 4 L k on.
// The residual stream: a block reads h0 and writes h1, the MLP reads h1 and writes h0.
void GptTrainer::Impl::add_layer_forward(std::size_t l) {
  const Layer& c = A(l);
  const int site = static_cast<int>(4 * layers_total()) * cur_mb + 2 * static_cast<int>(l);
  auto W = [&](GptLayerSlot sl) -> const Tensor& { return T_(gpt_index(l, sl)); };
  add_map("layer norm", gpt_ln_forward_map(consts, h0, W(kLn1G).w, W(kLn1B).w, c.x1b, c.xhat1,
                                           c.rstd1));
  add(matmul_op(ph("matmul"), ref(c.qkv), ref(c.x1b), ref(W(kWqkv).wb), ref(W(kBqkv).w)));
  add_attention(l);
  add(matmul_op(ph("matmul"), ref(mesh.model > 1 ? yp : yo), ref(c.att), ref(W(kWo).wb)));
  add_block_out(yp, W(kBo).w, h0, h1, site);
  add_map("layer norm", gpt_ln_forward_map(consts, h1, W(kLn2G).w, W(kLn2B).w, c.x2b, c.xhat2,
                                           c.rstd2));
  add(matmul_op(ph("matmul"), ref(c.u), ref(c.x2b), ref(W(kW1).wb), ref(W(kB1).w)));
  add_map("gelu", gpt_gelu_map(consts, c.u, c.ab, &c.gelu_s));
  add(matmul_op(ph("matmul"), ref(mesh.model > 1 ? yp : yo), ref(c.ab), ref(W(kW2).wb)));
  add_block_out(yp, W(kB2).w, h1, h0, site + 1);
}

void GptTrainer::Impl::add_head_forward() {
  const std::size_t f = local(gpt_index_lnf_g(layers_total()));
  const Slot& a = act[cur_r];
  const std::size_t mb = static_cast<std::size_t>(cur_mb);
  add_map("layer norm", gpt_ln_forward_map(consts, h0, t[f].w, t[f + 1].w, a.xfb, a.xhatf,
                                           a.rstdf));
  add(matmul_op(ph("matmul"), ref(logits), ref(a.xfb), ref(t[f + 2].wb)));
  const HbmMatrix lo = hbm_view(loss, mb * B, B, 0, S);
  add_map("cross-entropy", gpt_cross_entropy_map(consts, logits, hbm_view(sel, mb * T, T, 0, V),
                                                 lo, a.dlogb));
  add_map("cross-entropy", gpt_window_loss_map(lo, hbm_view(parts, mb, 1, 0, parts.cols)));
}

// dY (bf16, T x n) through y = x W + b: dW = x^T dY (x^T by the MXU's transpose) into parameter
// k's gradient, and dx = dY W^T (transposed weight loads) when dx_out is given.
void GptTrainer::Impl::add_linear_back(const HbmMatrix& xb, const HbmMatrix& dyb, std::size_t k,
                                       const HbmMatrix* dx_out) {
  const HbmMatrix xt = hbm_view(trans, 0, xb.cols, 0, T);
  add(transpose_op(ph("transpose"), ref(xt), ref(xb)));
  add(matmul_op(ph("matmul"), ref(grad(k)), ref(xt), ref(dyb)));
  if (dx_out)
    add(matmul_op(ph("matmul"), ref(*dx_out), ref(dyb), ref(T_(k).wb), {}, false, true));
}

void GptTrainer::Impl::add_attention_back(std::size_t l) {
  const Layer& c = A(l);
  auto head = [&](const HbmMatrix& m, std::size_t part, std::size_t b, std::size_t j) {
    return hbm_view(m, b * S, S, (part * Hm + j) * dhp, dhp);
  };
  auto block = [&](const HbmMatrix& m, std::size_t b, std::size_t j) {
    return hbm_view(m, (b * Hm + j) * S, S, 0, S);
  };
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j) {
      const HbmMatrix dout = hbm_view(datt, b * S, S, j * dhp, dhp);
      add(matmul_op(ph("matmul"), ref(block(dp, b, j)), ref(dout), ref(head(c.qkv, 2, b, j)), {},
                    false, true));
      add(transpose_op(ph("transpose"), ref(block(blk_t, b, j)), ref(block(c.pb, b, j))));
      add(matmul_op(ph("matmul"), ref(head(dqkv, 2, b, j)), ref(block(blk_t, b, j)), ref(dout)));
    }
  add_map("attention softmax", gpt_softmax_back_map(consts, c.p, dp, dsb));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < Hm; ++j) {
      add(matmul_op(ph("matmul"), ref(head(dqkv, 0, b, j)), ref(block(dsb, b, j)),
                    ref(head(c.qkv, 1, b, j))));
      add(transpose_op(ph("transpose"), ref(block(blk_t, b, j)), ref(block(dsb, b, j))));
      add(matmul_op(ph("matmul"), ref(head(dqkv, 1, b, j)), ref(block(blk_t, b, j)),
                    ref(head(c.qkv, 0, b, j))));
    }
}

// The head's and the final layer norm's backward: dres holds the stream's gradient after it.
void GptTrainer::Impl::add_head_backward() {
  const std::size_t f = gpt_index_lnf_g(layers_total());
  const Slot& a = act[cur_r];
  add_linear_back(a.xfb, a.dlogb, f + 2, &dx);
  grad_done(f + 2);
  add_map("layer norm", gpt_ln_backward_map(consts, dx, a.xhatf, a.rstdf, T_(f).w, dres,
                                            grad(f), grad(f + 1)));
  grad_done(f);
  grad_done(f + 1);
}

void GptTrainer::Impl::add_layer_backward(std::size_t l) {
  const Layer& c = A(l);
  const std::size_t L = layers_total();
  const int site = static_cast<int>(4 * L) * cur_mb + static_cast<int>(2 * L + 2 * (L - 1 - l));
  auto k = [&](GptLayerSlot sl) { return gpt_index(l, sl); };
  // MLP block.
  add_map("bias gradient", gpt_col_sum_map(consts, dres, grad(k(kB2)), &dresb));
  grad_done(k(kB2));
  add_linear_back(c.ab, dresb, k(kW2), &da);
  grad_done(k(kW2));
  add_map("gelu", gpt_gelu_back_map(consts, da, c.u, dub, grad(k(kB1)), &c.gelu_s));
  grad_done(k(kB1));
  add_linear_back(c.x2b, dub, k(kW1), &dx);
  grad_done(k(kW1));
  add_map("layer norm", gpt_ln_backward_map(consts, model_sum(dx, site), c.xhat2, c.rstd2,
                                            T_(k(kLn2G)).w, dln, grad(k(kLn2G)),
                                            grad(k(kLn2B))));
  grad_done(k(kLn2G));
  grad_done(k(kLn2B));
  add_map("residual", gpt_add_map(dres, dln, dres));
  // Attention block.
  add_map("bias gradient", gpt_col_sum_map(consts, dres, grad(k(kBo)), &dresb));
  grad_done(k(kBo));
  add_linear_back(c.att, dresb, k(kWo), nullptr);
  grad_done(k(kWo));
  add(matmul_op(ph("matmul"), ref(datt), ref(dresb), ref(T_(k(kWo)).wb), {}, false, true));
  add_attention_back(l);
  add_map("bias gradient", gpt_col_sum_map(consts, dqkv, grad(k(kBqkv)), &dqkvb));
  grad_done(k(kBqkv));
  add_linear_back(c.x1b, dqkvb, k(kWqkv), &dx);
  grad_done(k(kWqkv));
  add_map("layer norm", gpt_ln_backward_map(consts, model_sum(dx, site + 1), c.xhat1, c.rstd1,
                                            T_(k(kLn1G)).w, dln, grad(k(kLn1G)),
                                            grad(k(kLn1B))));
  grad_done(k(kLn1G));
  grad_done(k(kLn1B));
  add_map("residual", gpt_add_map(dres, dln, dres));
}

void GptTrainer::Impl::add_embedding_backward(const std::vector<EmbeddingPlan>& eb) {
  add_map("embedding backward", gpt_fill_map(hbm_view(zeros, 0, 1, 0, d), grad(0)));
  add(commands_op(ph("embedding backward"), chip_cmds(eb), vmem_of(eb),
                  {ref(dres), ref(lists_b[static_cast<std::size_t>(cur_mb)])},
                  {ref(grad(0)), ref(grad(1))}));
  grad_done(0);
  grad_done(1);
}

// A send of `src` from each golden chip's chip of the current stage to its chip of stage s_to
// (the block of virtual stage j_from), in its direction's regions in turn per pair of chips.
void GptTrainer::Impl::add_p2p(const char* what, int s_to, int j_from, bool backward,
                               const HbmMatrix& src) {
  for (std::size_t g = 0; g < pod_of.size(); ++g) {
    const int from = pod_of[g][static_cast<std::size_t>(cur_s)];
    const int to = pod_of[g][static_cast<std::size_t>(s_to)];
    const int k = seq[{from, to}]++;
    const int r = (backward ? K : 0) + k % K;
    const int i = wl->add_op(send_op(std::string(what) + cur_tag, from, to,
                                     whole(wl->ref_of(src).buffer)));
    region.resize(static_cast<std::size_t>(i) + 1, -1);
    region[static_cast<std::size_t>(i)] = r;
    sent[{cur_mb, j_from, backward, static_cast<int>(g)}] = i;
  }
}

// Each golden chip's chip of the current stage receives the block virtual stage j_from sent.
void GptTrainer::Impl::add_recv(const char* what, int j_from, bool backward,
                                const HbmMatrix& dst) {
  const int s_from = j_from % NS;
  for (std::size_t g = 0; g < pod_of.size(); ++g) {
    const int from = pod_of[g][static_cast<std::size_t>(s_from)];
    const int to = pod_of[g][static_cast<std::size_t>(cur_s)];
    const int snd = sent.at({cur_mb, j_from, backward, static_cast<int>(g)});
    const int i = wl->add_op(recv_op(std::string(what) + cur_tag, snd, from, to,
                                     whole(wl->ref_of(dst).buffer)));
    region.resize(static_cast<std::size_t>(i) + 1, -1);
  }
}

void GptTrainer::Impl::add_optimizer() {
  // Which stages hold a parameter at each place (a place no stage uses is left alone).
  std::vector<std::vector<bool>> held(t.size(), std::vector<bool>(static_cast<std::size_t>(NS)));
  // The maps in the order their gradients' all-reduces were issued (a place with none first,
  // in place order): the last all-reduce, the embeddings', then runs beside the other places'
  // updates instead of alone before them (the scheduler takes the compute after a collective up
  // to the first op that needs its result). Each map reads and writes only its own place, so
  // the order changes no bit.
  std::vector<int> issued(t.size(), -1);
  for (std::size_t k = 0; k < shard_shape.size(); ++k) {
    held[local(k)][static_cast<std::size_t>(stage_of_tensor(k))] = true;
    issued[local(k)] = std::max(issued[local(k)], grad_coll[k]);
  }
  std::vector<std::size_t> order(t.size());
  for (std::size_t lk = 0; lk < t.size(); ++lk) order[lk] = lk;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return issued[a] < issued[b]; });
  for (std::size_t lk : order) {
    const Tensor& x = t[lk];
    Op op = vector_map_op(*wl, "optimizer", gpt_adam_map(consts, x.w, x.g, x.m, x.v, x.matrix,
                                                          x.wb));
    if (NS > 1) {  // on the chips of the stages that hold it
      for (int c = 0; c < P; ++c)
        if (held[lk][static_cast<std::size_t>(st[static_cast<std::size_t>(c)])])
          op.chips.push_back(c);
      if (op.chips.empty()) continue;
    }
    const int i = wl->add_op(std::move(op));
    region.resize(static_cast<std::size_t>(i) + 1, -1);
  }
}

void GptTrainer::Impl::add_all_reduce(const HbmMatrix& in, const HbmMatrix& out, bool data_axis,
                                      int site) {
  const CollectiveOp co = train_all_reduce(wl->host().info().topo, in.rows * in.cols,
                                           data_axis ? mesh.data_dims : mesh.model_dims, ref(in),
                                           ref(out), data_axis, mesh.model > 1);
  // A gradient's all-reduce is no slot's work; the model's is its slot's.
  const std::string name = data_axis ? "all_reduce gradients"
                                     : (piped ? cur_phase : "all_reduce over model");
  const int r = piped ? 2 * (NS > 1 ? K : 0) + stage_colls[static_cast<std::size_t>(cur_s)]++ % 3
                      : -1;
  add(collective_op(name, co), r);
  if (!data_axis) {
    model_coll.at(static_cast<std::size_t>(site)) = colls;
    model_stage.at(static_cast<std::size_t>(site)) = cur_s;
  }
  ++colls;
}

void GptTrainer::Impl::grad_done(std::size_t k) {
  if (cur_mb > 0)  // g = g + g_mb: f32, one rounding, micro-batch 0 first
    add_map("gradient accumulation", gpt_add_map(T_(k).g, T_(k).gt, T_(k).g));
  if (cur_mb + 1 < M || mesh.data <= 1) return;
  grad_coll[k] = colls;
  // In place: each round of the all-reduce loads its slice of the gradient before it stores
  // the sum there (docs/pod.md, "How a collective runs").
  add_all_reduce(T_(k).g, T_(k).g, true);
}

void GptTrainer::Impl::add_block_out(const HbmMatrix& partial, const HbmMatrix& bias,
                                     const HbmMatrix& h, const HbmMatrix& out, int site) {
  if (mesh.model > 1) add_all_reduce(partial, yo, false, site);
  add_map("residual", gpt_bias_residual_map(yo, bias, h, out));
}

const HbmMatrix& GptTrainer::Impl::model_sum(const HbmMatrix& partial, int site) {
  if (mesh.model <= 1) return partial;
  add_all_reduce(partial, dxs, false, site);
  return dxs;
}

// One slot of stage s: a forward receives the stream (or embeds the tokens on virtual stage 0),
// runs its layers, then the head (the last virtual stage) or sends the stream on; a backward
// receives the stream's gradient (or starts from the head's), runs its layers' backward, then
// the embedding's (virtual stage 0) or sends the gradient back.
void GptTrainer::Impl::add_slot(const std::vector<std::vector<EmbeddingPlan>>& ef,
                                const std::vector<std::vector<EmbeddingPlan>>& eb, int s,
                                const PipeSlot& x) {
  const int j = x.chunk * NS + s, last = NS * nv - 1;
  const auto [l0, l1] = chunk[static_cast<std::size_t>(j)];
  cur_s = s;
  cur_mb = x.mb;
  cur_r = static_cast<std::size_t>(slot_of[static_cast<std::size_t>(s)].at({x.mb, x.chunk}));
  cur_tag = " mb" + std::to_string(x.mb) + (nv > 1 ? " c" + std::to_string(x.chunk) : "");
  cur_phase = (x.backward ? "B" : "F") + cur_tag;
  const std::size_t mb = static_cast<std::size_t>(x.mb);
  if (!x.backward) {
    if (j == 0)
      add_embedding(ef[mb]);
    else
      add_recv("recv act", j - 1, false, h0);
    for (std::size_t l = l0; l <= l1; ++l) add_layer_forward(l);
    if (j == last)
      add_head_forward();
    else
      add_p2p("send act", (j + 1) % NS, j, false, h0);
    return;
  }
  if (j == last)
    add_head_backward();
  else
    add_recv("recv grad", j + 1, true, dres);
  for (std::size_t l = l1 + 1; l-- > l0;) add_layer_backward(l);
  if (j == 0)
    add_embedding_backward(eb[mb]);
  else
    add_p2p("send grad", (j - 1) % NS, j, true, dres);
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
  m.apply_mesh(mi, opt_.mesh);
  spec_.lanes = s.cols;
  spec_.data = m.mesh.data;
  spec_.model = m.mesh.model;
  spec_.data_rank = m.mesh.data_rank;
  spec_.model_rank = m.mesh.model_rank;
  spec_.microbatches = opt_.microbatches;
  check_gpt_chip_spec(spec_);
  m.plan_slots(spec_, opt_);
  m.wl = std::make_unique<Workload>(host_);
  try {
    m.lay_out(spec_, s);
  } catch (const BufferDoesNotFit& e) {
    throw std::invalid_argument("gpt train: the step's buffers do not fit in a chip's HBM (" +
                                std::to_string(s.hbm_bytes) + " bytes): " + e.what());
  }
  if (m.piped) {  // the slots' phases, each stage's in its order, then what follows them
    for (const std::vector<PipeSlot>& tab : m.table)
      for (const PipeSlot& x : tab)
        m.wl->declare_phase(std::string(x.backward ? "B" : "F") + " mb" + std::to_string(x.mb) +
                            (m.nv > 1 ? " c" + std::to_string(x.chunk) : ""));
    m.wl->declare_phase("all_reduce gradients");
    m.wl->declare_phase("optimizer");
  } else {
    for (const char* p : kPhases) m.wl->declare_phase(p);
  }
  if (m.NS > 1) {
    // The sends' regions: K per direction (as many as the micro-batches, as VMEM and the
    // counters allow), three more for the collectives.
    const uint32_t send_rows = static_cast<uint32_t>(m.T * m.d / s.cols);
    m.K = std::min(m.M * m.nv, 4);
    while (m.K > 1 && (s.vmem_rows / 2) / static_cast<uint32_t>(2 * m.K + 3) < 2 * send_rows)
      --m.K;
  }
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
  // Micro-batches: every window of the batch; stages: each chip holds a stage's share (the mean
  // over them).
  return gpt_window_macs(spec_) * spec_.batch / static_cast<uint64_t>(impl_->NS);
}

uint64_t GptTrainer::load_params(const GptParams& params) {
  Impl& m = *impl_;
  if (params.size() != m.shard_shape.size())
    throw std::invalid_argument("gpt train: " + std::to_string(params.size()) +
                                " parameters, the model has " +
                                std::to_string(m.shard_shape.size()));
  std::vector<HbmImage> img;
  for (int c = 0; c < m.P; ++c) {
    const GptParams shard = gpt_shard(spec_, params, m.mr[static_cast<std::size_t>(c)]);
    const ChipDriver& d = m.wl->driver(c);
    for (std::size_t k = 0; k < shard.size(); ++k) {
      if (m.stage_of_tensor(k) != m.st[static_cast<std::size_t>(c)]) continue;
      const Impl::Tensor& x = m.t[m.local(k)];
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
  const std::size_t Mb = static_cast<std::size_t>(m.M);
  std::vector<std::vector<EmbeddingPlan>> ef(Mb), eb(Mb);  // per micro-batch, per chip
  std::vector<HbmImage> img;
  for (int c = 0; c < m.P; ++c) {  // chip c: its data rank's windows, micro-batch k's in turn
    const std::size_t dr = static_cast<std::size_t>(m.spec_data_rank(c));
    const int stage = m.st[static_cast<std::size_t>(c)];
    const ChipDriver& d = m.wl->driver(c);
    img.push_back(HbmImage{c, m.consts.addr, d.matrix_image(m.consts, consts)});
    std::vector<int32_t> tgt;
    for (std::size_t k = 0; k < Mb; ++k) {
      std::vector<int32_t> in;
      for (std::size_t b = k * m.B; b < (k + 1) * m.B; ++b)
        for (std::size_t i = 0; i < m.S; ++i) {
          in.push_back(windows[(dr * spec_.batch + b) * W + i]);
          tgt.push_back(windows[(dr * spec_.batch + b) * W + i + 1]);
        }
      EmbeddingBuffers bf;
      bf.wte = m.t[0].w.addr;
      bf.wpe = m.t[1].w.addr;
      bf.h = m.h0.addr;
      bf.lists = m.lists_f[k].addr;
      ef[k].push_back(plan_embedding_forward(s, dims, in, bf));
      bf.dh = m.dres.addr;
      bf.dwte = (k == 0 ? m.t[0].g : m.t[0].gt).addr;
      bf.dwpe = (k == 0 ? m.t[1].g : m.t[1].gt).addr;
      bf.lists = m.lists_b[k].addr;
      eb[k].push_back(plan_embedding_backward(s, dims, in, bf));
      if (ef[k].back().lists.size() > m.lists_f[k].cols ||
          eb[k].back().lists.size() > m.lists_b[k].cols)
        throw std::logic_error("gpt train: the embedding's id lists outgrew their buffers");
      if (stage != 0) continue;  // the id lists: the first stage's
      img.push_back(HbmImage{c, m.lists_f[k].addr, ef[k].back().list_bytes()});
      img.push_back(HbmImage{c, m.lists_b[k].addr, eb[k].back().list_bytes()});
    }
    if (stage == m.NS - 1)  // the targets: the last stage's
      img.push_back(HbmImage{c, m.sel.addr,
                             d.matrix_image(m.sel, vector_to_bf16(gpt_target_sel(tgt, m.V)))});
  }
  put_images(host_, img, opt_.backdoor);
  // The program: planned again, the embedding's with this step's tokens.
  m.wl->truncate_ops(0);
  m.region.clear();
  m.sent.clear();
  m.seq.clear();
  m.stage_colls.assign(static_cast<std::size_t>(m.NS), 0);
  m.colls = 0;
  m.grad_coll.assign(m.shard_shape.size(), -1);
  const std::size_t sites = gpt_model_sites(spec_.layers) * Mb;
  m.model_coll.assign(sites, -1);
  m.model_stage.assign(sites, 0);
  for (const auto& [stage, x] : pipeline_merged_order(m.table, m.nv)) m.add_slot(ef, eb, stage, x);
  m.add_optimizer();
  ScheduleOptions so;
  so.collective_regions = 3;  // a chip starts collective i + 3 once i + 2, and so i, finished
  // The gradients' all-reduces spread over the backward and the updates after them (the small
  // ones, a few hundred bytes each, beside little compute, held the backward behind their waits).
  so.lag_gradients = !m.piped;
  if (m.piped) {
    so.collective_regions = static_cast<std::size_t>(2 * (m.NS > 1 ? m.K : 0) + 3);
    so.comm_region = m.region;
  }
  Schedule sch = schedule(*m.wl, so);
  m.grad_rounds.assign(m.shard_shape.size(), {});
  for (std::size_t k = 0; k < m.grad_rounds.size(); ++k)
    if (m.grad_coll[k] >= 0)
      m.grad_rounds[k] = sch.collectives.at(static_cast<std::size_t>(m.grad_coll[k])).rounds;
  m.model_rounds.assign(sites, {});
  for (std::size_t i = 0; i < sites; ++i)
    if (m.model_coll[i] >= 0)
      m.model_rounds[i] = sch.collectives.at(static_cast<std::size_t>(m.model_coll[i])).rounds;
  GptStepRun r;
  r.program = std::move(sch.program);
  r.commands = r.program.commands();
  PodDriver pd(host_);
  r.prog = pd.run_programs(r.program);
  for (const std::vector<int>& at : m.pod_of) {  // each golden chip's last stage
    const int c = at.back();
    std::vector<float> parts(m.parts.rows * m.parts.cols), mine;
    host_.backdoor_read(c, m.parts.addr, parts.data(), parts.size() * 4);
    for (std::size_t k = 0; k < Mb; ++k)
      mine.insert(mine.end(), parts.begin() + static_cast<std::ptrdiff_t>(k * m.parts.cols),
                  parts.begin() + static_cast<std::ptrdiff_t>(k * m.parts.cols + m.B));
    r.loss_parts.push_back(mine);
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
    // The rounds ran over the chip layout (heads padded with zeros) of the stage's chips (one
    // group per model rank): every chip gets its data rank's part there, reduced as the chips
    // reduced it, and back, read at a chip of the stage.
    GptTensor g = m->shard_shape.at(k);
    std::vector<std::vector<float>> chips;
    int at = -1;
    for (int chip = 0; chip < m->P; ++chip) {
      g.v = parts.at(static_cast<std::size_t>(m->spec_data_rank(chip)));
      chips.push_back(m->layout.to_chip(g, k));
      if (at < 0 && m->st[static_cast<std::size_t>(chip)] == m->stage_of_tensor(k)) at = chip;
    }
    const std::vector<float> c = replay_f32(m->grad_rounds[k], chips, at);
    return m->layout.from_chip(c, g, k);
  };
}

GptModelReduce GptTrainer::golden_model_reduce() const {
  const Impl* m = impl_.get();
  if (m->mesh.model <= 1) return nullptr;
  return [m](std::size_t site, std::size_t data_rank, const std::vector<std::vector<float>>& parts) {
    // Every chip gets its model rank's part (the other data ranks' and stages' groups sum the
    // same parts beside it, apart); the sum is read at a chip of this data rank and stage.
    std::vector<std::vector<float>> chips;
    int at = -1;
    const int stage = m->model_stage.at(site);
    for (int chip = 0; chip < m->P; ++chip) {
      const std::size_t c = static_cast<std::size_t>(chip);
      chips.push_back(parts.at(static_cast<std::size_t>(m->mr[c])));
      if (at < 0 && static_cast<std::size_t>(m->dr[c]) == data_rank && m->st[c] == stage) at = chip;
    }
    return replay_f32(m->model_rounds.at(site), chips, at);
  };
}

GptParams GptTrainer::Impl::read(HostPort& host, const GptSpec& spec, HbmMatrix Tensor::*field,
                                  int chip) const {
  GptParams p = gpt_zero_shard(spec);
  for (std::size_t k = 0; k < p.size(); ++k) {
    const HbmMatrix& at = t[local(k)].*field;
    const int c = pod_of.at(static_cast<std::size_t>(chip))
                      .at(static_cast<std::size_t>(stage_of_tensor(k)));
    std::vector<float> v(at.rows * at.cols);
    host.backdoor_read(c, at.addr, v.data(), v.size() * 4);
    p[k].v = layout.from_chip(v, p[k], k);
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

bool GptTrainer::pipelined() const { return impl_->piped; }
int GptTrainer::stages() const { return impl_->NS; }
int GptTrainer::stage_of(int chip) const { return impl_->st.at(static_cast<std::size_t>(chip)); }
const std::vector<std::vector<PipeSlot>>& GptTrainer::slots() const { return impl_->table; }

PipelineStats GptTrainer::measure(const std::vector<TraceEvent>& events) const {
  const Impl& m = *impl_;
  std::vector<int> shown;  // golden chip 0's chip of each stage
  for (int c : m.pod_of.at(0)) shown.push_back(c);
  PipelineStats st = pipeline_timeline_stats(events, m.st, shown, m.table, m.nv);
  if (st.stages.empty()) return st;
  // A micro-batch's activations from its forward to its backward: per layer its Layer buffers,
  // on the last virtual stage the final layer norm's and the head's gradient (Slot).
  auto bytes = [](const HbmMatrix& h) {
    return static_cast<uint64_t>(h.rows) * h.cols * h.esize();
  };
  const Impl::Layer& y = m.act[0].layers[0];
  const uint64_t layer = bytes(y.x1b) + bytes(y.xhat1) + bytes(y.rstd1) + bytes(y.x2b) +
                         bytes(y.xhat2) + bytes(y.rstd2) + bytes(y.qkv) + bytes(y.p) +
                         bytes(y.pb) + bytes(y.att) + bytes(y.u) + bytes(y.ab) +
                         bytes(y.gelu_s);
  const Impl::Slot& a = m.act[0];
  const uint64_t head = bytes(a.xfb) + bytes(a.xhatf) + bytes(a.rstdf) + bytes(a.dlogb);
  const int last = m.NS * m.nv - 1;
  for (int s = 0; s < m.NS; ++s) {
    PipelineStageStats& x = st.stages[static_cast<std::size_t>(s)];
    x.first_layer = SIZE_MAX;
    for (int c = 0; c < m.nv; ++c) {
      const auto [l0, l1] = m.chunk[static_cast<std::size_t>(c * m.NS + s)];
      x.first_layer = std::min(x.first_layer, l0);
      x.last_layer = std::max(x.last_layer, l1);
    }
    const auto& tab = m.table[static_cast<std::size_t>(s)];
    x.peak_in_flight = pipeline_peak_in_flight(tab);
    x.peak_activation_bytes = pipeline_peak_bytes(tab, [&](const PipeSlot& p) {
      const int j = p.chunk * m.NS + s;
      const auto [l0, l1] = m.chunk[static_cast<std::size_t>(j)];
      return (l1 - l0 + 1) * layer + (j == last ? head : 0);
    });
  }
  return st;
}

}  // namespace tpu
