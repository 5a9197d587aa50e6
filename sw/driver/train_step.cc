#include "train_step.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>

#include "tpu/perf.h"
#include "scheduler.h"
#include "train_images.h"
#include "vpu_map.h"

namespace tpu {

namespace {

constexpr uint64_t kBurst = 64;


}  // namespace

struct DataParallelTrainer::Impl {
  struct Layer {
    HbmMatrix w;    // (in + 1) x out f32: W, then b in row `in`
    HbmMatrix wb;   // (in + 1) x out bf16: W rounded (row `in` unused)
    HbmMatrix at;   // (in + 1) x B bf16: A^T, then a row of ones
    HbmMatrix g;    // (in + 1) x out f32: this chip's gradient (dW, then db)
    HbmMatrix gs;   // (in + 1) x out f32: summed over the chips (g itself on one chip)
    HbmMatrix out;  // B x out: the layer's output (bf16; f32 for the last)
    HbmMatrix dy;   // B x out bf16: the loss's gradient with respect to `out`
    HbmMatrix da;   // B x in f32: dY W^T before the ReLU mask (layers > 0)
    std::vector<std::pair<std::size_t, std::size_t>> pieces;  // row ranges of g all-reduced apart
  };
  struct Coll {
    std::size_t layer = 0;
    std::size_t r0 = 0, r1 = 0;  // rows of g
    std::vector<CollectiveRound> rounds;
  };
  std::unique_ptr<Workload> wl;
  HbmMatrix x, t, consts, loss;
  HbmMatrix pred;  // B x out f32: the prediction (tensor parallel: the model all-reduce's output)
  std::vector<int> data_dims, model_dims;  // the mesh axes' torus dimensions (empty: the pod)
  std::vector<CollectiveRound> model_rounds;  // the model all-reduce of the prediction
  std::vector<Layer> layers;
  std::vector<Coll> colls;
  SpmdProgram program;
  VectorMapRefs loss_map;  // the loss (its chunk is the spec's loss_chunk)

  // The constructor's steps: the mesh's axes onto the spec, the buffers in HBM, the step's ops
  // (forward, loss, backward with the gradients' all-reduces, SGD) and their phases.
  void apply_mesh(const MachineInfo& mi, const Mesh& given, MlpSpec* spec);
  uint64_t layout(HostPort& host, const MlpSpec& spec, const TrainOptions& opt);
  BufferRef ref(const HbmMatrix& v) const { return wl->ref_of(v); }
  void declare_phases(const MlpSpec& spec);
  void add_all_reduce(const std::string& name, const MlpSpec& spec, std::size_t n,
                      const std::vector<int>& dims, const HbmMatrix& in, const HbmMatrix& out,
                      bool gradient);
  void add_forward_and_loss(const MlpSpec& spec);
  void add_backward(const MlpSpec& spec);
  void add_sgd(const MlpSpec& spec, std::size_t l);
};

void DataParallelTrainer::Impl::apply_mesh(const MachineInfo& mi, const Mesh& given,
                                           MlpSpec* spec) {
  const TrainMesh tm = train_mesh(mi, given);
  if (tm.model <= 1) return;
  model_dims = tm.model_dims;
  data_dims = tm.data_dims;
  spec->model = tm.model;
  spec->data_rank = tm.data_rank;
  spec->model_rank = tm.model_rank;
}

// The buffers, the same on every chip (the workload allocates each on every chip).
uint64_t DataParallelTrainer::Impl::layout(HostPort& host, const MlpSpec& spec,
                                           const TrainOptions& opt) {
  const ChipShape& s = host.info().shape;
  const std::size_t L = spec.layers(), B = spec.batch, lanes = s.cols;
  const bool grad_ar = spec.data() > 1, model_ar = spec.model > 1;
  wl = std::make_unique<Workload>(host);
  auto buf = [&](const std::string& name, std::size_t rows, std::size_t cols, Dtype dt) {
    return wl->matrix(wl->add_buffer(Buffer{name, rows, cols, dt}));
  };
  try {
    consts = buf("consts", kConstRows, lanes, Dtype::kF32);
    loss = buf("loss", std::max<std::size_t>(1, kBurst / (4 * lanes)), lanes, Dtype::kF32);
    x = buf("X", B, spec.widths.front(), Dtype::kBf16);
    t = buf("T", B, spec.widths.back(), Dtype::kF32);
    layers.assign(L, Layer{});
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t in = spec.in_width(l), out = spec.out_width(l);
      const std::string n = std::to_string(l);
      Layer& y = layers[l];
      y.w = buf("W" + n, in + 1, out, Dtype::kF32);
      y.wb = buf("Wb" + n, in + 1, out, Dtype::kBf16);
      y.at = buf("AT" + n, in + 1, B, Dtype::kBf16);
      y.g = buf("dW" + n, in + 1, out, Dtype::kF32);
      y.gs = grad_ar ? buf("dW" + n + " summed", in + 1, out, Dtype::kF32) : y.g;
      y.out = buf("A" + std::to_string(l + 1), B, out, l + 1 < L ? Dtype::kBf16 : Dtype::kF32);
      y.dy = buf("dY" + n, B, out, Dtype::kBf16);
      if (l > 0) y.da = buf("dA" + n, B, in, Dtype::kF32);
      const std::size_t np = (l == 0 && grad_ar) ? std::min(opt.grad_pieces, in + 1) : 1;
      for (std::size_t q = 0; q < np; ++q)
        y.pieces.push_back({(in + 1) * q / np, (in + 1) * (q + 1) / np});
    }
    pred = model_ar ? buf("P", B, spec.widths.back(), Dtype::kF32) : layers[L - 1].out;
  } catch (const BufferDoesNotFit& e) {
    throw std::invalid_argument("train: the step's buffers do not fit in a chip's HBM (" +
                                std::to_string(s.hbm_bytes) + " bytes): " + e.what());
  }
  return wl->hbm_used();
}

// The phase table: the collectives (the prediction's all-reduce, then the gradients' in the
// order they become ready), the forward, the loss, per layer (last first) the transpose, the
// gradient pieces, dA and the ReLU mask, the SGD.
void DataParallelTrainer::Impl::declare_phases(const MlpSpec& spec) {
  const std::size_t L = spec.layers();
  auto pieces = [&](std::size_t l, std::size_t k) {
    return layers[l].pieces.size() > 1 ? " piece " + std::to_string(k) : std::string();
  };
  if (spec.model > 1) wl->declare_phase("all_reduce P over model");
  if (spec.data() > 1)
    for (std::size_t l = L; l-- > 0;)
      for (std::size_t k = 0; k < layers[l].pieces.size(); ++k)
        wl->declare_phase("all_reduce dW" + std::to_string(l) + pieces(l, k));
  for (std::size_t l = 0; l < L; ++l) wl->declare_phase("forward " + std::to_string(l));
  wl->declare_phase("loss");
  for (std::size_t l = L; l-- > 0;) {
    wl->declare_phase("transpose A" + std::to_string(l));
    for (std::size_t k = 0; k < layers[l].pieces.size(); ++k)
      wl->declare_phase("dW" + std::to_string(l) + pieces(l, k));
    if (l > 0) {
      wl->declare_phase("dA" + std::to_string(l));
      wl->declare_phase("relu mask " + std::to_string(l));
    }
  }
  for (std::size_t l = L; l-- > 0;) wl->declare_phase("sgd " + std::to_string(l));
}

// An f32 all-reduce: the torus algorithm over a group of two dimensions or more, else the
// bidirectional ring, or the slower ones after it that fit the collective's third of the ICI
// counters (the torus of a 4x4x4 group needs more). The golden replays the rounds that ran.
void DataParallelTrainer::Impl::add_all_reduce(const std::string& name, const MlpSpec& spec,
                                               std::size_t n, const std::vector<int>& dims,
                                               const HbmMatrix& in, const HbmMatrix& out,
                                               bool gradient) {
  const CollectiveOp co = train_all_reduce(wl->host().info().topo, n, dims, ref(in), ref(out),
                                           gradient, spec.model > 1);
  wl->add_op(collective_op(name, co));
}

// The forward (matmul, bias, ReLU; tensor parallel: the last bias once, on model rank 0, then
// the prediction's all-reduce over the model axis), and the loss: D = P - T, sum of D^2,
// dY = bf16(D x scale).
void DataParallelTrainer::Impl::add_forward_and_loss(const MlpSpec& spec) {
  const std::size_t L = spec.layers(), B = spec.batch;
  const int P = wl->num_chips();
  for (std::size_t l = 0; l < L; ++l) {
    const Layer& y = layers[l];
    const std::size_t in = spec.in_width(l), out = spec.out_width(l);
    const std::string name = "forward " + std::to_string(l);
    const BufferRef a = ref(l == 0 ? x : layers[l - 1].out), w = ref(hbm_view(y.wb, 0, in, 0, out));
    const BufferRef bias = ref(hbm_view(y.w, in, 1, 0, out));
    if (l + 1 < L || spec.model == 1) {
      wl->add_op(matmul_op(name, ref(y.out), a, w, bias, l + 1 < L));
      continue;
    }
    for (int c = 0; c < P; ++c) {
      Op op = matmul_op(name, ref(y.out), a, w, spec.model_rank_of(c) == 0 ? bias : BufferRef{});
      op.chips = {c};
      wl->add_op(std::move(op));
    }
  }
  if (spec.model > 1)
    add_all_reduce("all_reduce P over model", spec, B * spec.widths.back(), model_dims,
                   layers[L - 1].out, pred, false);
  loss_map.map.rows = B;
  loss_map.map.cols = spec.widths.back();
  loss_map.map.const_rows = {kScaleRow};
  loss_map.map.ops = {{VpuOp::kSub, 0, 1, false}, {VpuOp::kMul, 3, 3, false},
                      {VpuOp::kMul, 3, 2, true}};
  loss_map.map.out = {{5, HbmMatrix{}}};
  loss_map.map.sum = 4;
  loss_map.in = {ref(pred), ref(t)};
  loss_map.consts = ref(consts);
  loss_map.out = {ref(layers[L - 1].dy)};
  loss_map.sum_out = ref(loss);
  wl->add_op(vector_map_op("loss", loss_map));
}

// Per layer, last first: A^T (the MXU's transpose), the gradient dW = [A^T; 1] dY in pieces,
// each piece's all-reduce as soon as it is ready; dA = dY W^T (W's tiles loaded transposed) and
// dY(l-1) = bf16(dA x min(H x 2^127 x 2^127, 1)), the ReLU's derivative.
void DataParallelTrainer::Impl::add_backward(const MlpSpec& spec) {
  const std::size_t L = spec.layers(), B = spec.batch;
  for (std::size_t l = L; l-- > 0;) {
    const Layer& y = layers[l];
    const std::size_t in = spec.in_width(l), out = spec.out_width(l);
    const std::string n = std::to_string(l);
    const HbmMatrix act = l == 0 ? x : layers[l - 1].out;
    wl->add_op(transpose_op("transpose A" + n, ref(hbm_view(y.at, 0, in, 0, B)), ref(act)));
    for (std::size_t k = 0; k < y.pieces.size(); ++k) {
      const auto [r0, r1] = y.pieces[k];
      const std::string piece = y.pieces.size() > 1 ? " piece " + std::to_string(k) : "";
      wl->add_op(matmul_op("dW" + n + piece, ref(hbm_view(y.g, r0, r1 - r0, 0, out)),
                           ref(hbm_view(y.at, r0, r1 - r0, 0, B)), ref(y.dy)));
      if (spec.data() == 1) continue;
      add_all_reduce("all_reduce dW" + n + piece, spec, (r1 - r0) * out, data_dims,
                     hbm_view(y.g, r0, r1 - r0, 0, out), hbm_view(y.gs, r0, r1 - r0, 0, out),
                     true);
      colls.push_back(Coll{l, r0, r1, {}});
    }
    if (l == 0) break;
    wl->add_op(matmul_op("dA" + n, ref(y.da), ref(y.dy), ref(hbm_view(y.wb, 0, in, 0, out)), {},
                         false, true));
    VectorMapRefs vm;
    vm.map.rows = B;
    vm.map.cols = in;
    vm.map.const_rows = {kBigRow, kOneRow};
    vm.map.ops = {{VpuOp::kMul, 1, 2, false}, {VpuOp::kMul, 4, 2, false},
                  {VpuOp::kMin, 5, 3, false}, {VpuOp::kMul, 0, 6, true}};
    vm.map.out = {{7, HbmMatrix{}}};
    vm.in = {ref(y.da), ref(layers[l - 1].out)};
    vm.consts = ref(consts);
    vm.out = {ref(layers[l - 1].dy)};
    wl->add_op(vector_map_op("relu mask " + n, vm));
  }
}

// Layer l's update: w = w + g x (-lr); wb = bf16(w).
void DataParallelTrainer::Impl::add_sgd(const MlpSpec& spec, std::size_t l) {
  const Layer& y = layers[l];
  VectorMapRefs vm;
  vm.map.rows = spec.in_width(l) + 1;
  vm.map.cols = spec.out_width(l);
  vm.map.const_rows = {kNegLrRow};
  vm.map.ops = {{VpuOp::kMul, 0, 2, false}, {VpuOp::kAdd, 1, 3, false},
                {VpuOp::kCvtF32Bf16, 4, -1, true}};
  vm.map.out = {{4, HbmMatrix{}}, {5, HbmMatrix{}}};
  vm.in = {ref(y.gs), ref(y.w)};
  vm.consts = ref(consts);
  vm.out = {ref(y.w), ref(y.wb)};
  wl->add_op(vector_map_op("sgd " + std::to_string(l), vm));
}

DataParallelTrainer::DataParallelTrainer(HostPort& host, MlpSpec spec, TrainOptions opt)
    : host_(host), spec_(std::move(spec)), opt_(opt), impl_(std::make_unique<Impl>()) {
  const MachineInfo& mi = host_.info();
  const int P = mi.num_chips();
  const ChipShape& s = mi.shape;
  if (spec_.chips == 0) spec_.chips = P;
  if (spec_.lanes == 0) spec_.lanes = s.cols;
  if (spec_.chips != P)
    throw std::invalid_argument("train: the spec has " + std::to_string(spec_.chips) +
                                " chips, the machine " + std::to_string(P));
  if (spec_.lanes != s.cols)
    throw std::invalid_argument("train: the spec's lanes must be the chip's (" +
                                std::to_string(s.cols) + ")");
  if (opt_.grad_pieces == 0) throw std::invalid_argument("train: grad_pieces must be >= 1");
  if (spec_.loss_chunk == 0) spec_.loss_chunk = 1;  // set from the plan below
  Impl& m = *impl_;
  if (!opt_.mesh.axes.empty()) m.apply_mesh(mi, opt_.mesh, &spec_);  // data and model axes
  spec_.validate();
  if (spec_.batch > 0xFFFF) throw std::invalid_argument("train: batch per chip above 65535");
  hbm_used_ = m.layout(host_, spec_, opt_);
  // The ops in stream order; the scheduler runs each gradient all-reduce beside the backward
  // work after it, and the last beside the SGD of the layers whose gradients are complete.
  m.declare_phases(spec_);
  m.add_forward_and_loss(spec_);
  m.add_backward(spec_);
  for (std::size_t l = spec_.layers(); l-- > 0;) m.add_sgd(spec_, l);
  ScheduleOptions so;
  so.collective_regions = 3;  // a chip starts collective i + 3 once i + 2, and so i, finished
  Schedule sch = schedule(*m.wl, so);
  m.program = std::move(sch.program);
  const std::size_t first_grad = spec_.model > 1 ? 1 : 0;
  if (spec_.model > 1) m.model_rounds = sch.collectives[0].rounds;
  for (std::size_t i = 0; i < m.colls.size(); ++i)
    m.colls[i].rounds = sch.collectives.at(first_grad + i).rounds;
  VpuMap lm = m.loss_map.map;  // the loss's chunk, as the scheduler planned it
  lm.in = {m.pred, m.t};
  lm.consts = m.consts;
  lm.out[0].second = m.layers.back().dy;
  lm.sum_out = m.loss;
  spec_.loss_chunk = plan_vpu_map(lm, s, 0, sch.vmem_compute).chunk;
  // Planning may have written the drivers' constant rows (identity, zeros) through the host
  // ports: let those writes land, so that the backdoor may be used next.
  host_.run_until_idle();
}

DataParallelTrainer::~DataParallelTrainer() = default;

uint64_t DataParallelTrainer::step_macs_per_chip() const {
  uint64_t macs = 0;
  for (std::size_t l = 0; l < spec_.layers(); ++l) {
    const uint64_t io = static_cast<uint64_t>(spec_.in_width(l)) * spec_.out_width(l) * spec_.batch;
    macs += (l > 0 ? 3 : 2) * io;
  }
  return macs;
}

uint64_t DataParallelTrainer::load_data(const MlpData& data) {
  const Impl& m = *impl_;
  const std::size_t B = spec_.batch, din = spec_.widths.front(), dout = spec_.widths.back();
  if (data.x.size() != spec_.global_batch() * din || data.t.size() != spec_.global_batch() * dout)
    throw std::invalid_argument("train: the batch must be " + std::to_string(spec_.global_batch()) +
                                " examples of " + std::to_string(din) + " inputs and " +
                                std::to_string(dout) + " targets");
  std::vector<HbmImage> img;
  for (int c = 0; c < spec_.chips; ++c) {
    const ChipDriver& d = m.wl->driver(c);
    const std::size_t ci = static_cast<std::size_t>(spec_.data_rank_of(c));  // its batch shard
    const std::vector<bf16_t> x(data.x.begin() + static_cast<std::ptrdiff_t>(ci * B * din),
                                data.x.begin() + static_cast<std::ptrdiff_t>((ci + 1) * B * din));
    const std::vector<float> t(data.t.begin() + static_cast<std::ptrdiff_t>(ci * B * dout),
                               data.t.begin() + static_cast<std::ptrdiff_t>((ci + 1) * B * dout));
    img.push_back(HbmImage{c, m.x.addr, d.matrix_image(m.x, x)});
    img.push_back(HbmImage{c, m.t.addr, d.matrix_image(m.t, t)});
  }
  return put_images(host_, img, opt_.backdoor);
}

uint64_t DataParallelTrainer::load_params(const MlpParams& params) {
  const Impl& m = *impl_;
  const std::size_t L = spec_.layers(), B = spec_.batch;
  if (params.size() != L)
    throw std::invalid_argument("train: parameters for " + std::to_string(params.size()) +
                                " layers, the network has " + std::to_string(L));
  for (std::size_t l = 0; l < L; ++l)
    if (params[l].w.size() != spec_.widths[l] * spec_.widths[l + 1] ||
        params[l].b.size() != spec_.widths[l + 1])
      throw std::invalid_argument("train: layer " + std::to_string(l) + " needs W " +
                                  std::to_string(spec_.widths[l]) + "x" +
                                  std::to_string(spec_.widths[l + 1]) + " and b " +
                                  std::to_string(spec_.widths[l + 1]));
  const std::vector<float> consts = mlp_const_rows(spec_);
  std::vector<HbmImage> img;
  for (int c = 0; c < spec_.chips; ++c) {
    const ChipDriver& d = m.wl->driver(c);
    img.push_back(HbmImage{c, m.consts.addr, d.matrix_image(m.consts, consts)});
    const MlpParams shard = mlp_shard(spec_, params, spec_.model_rank_of(c));
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t in = spec_.in_width(l);
      const MlpLayer& p = shard[l];
      std::vector<float> w(p.w);
      w.insert(w.end(), p.b.begin(), p.b.end());
      const Impl::Layer& y = m.layers[l];
      push_layer_images(d, c, y.w, y.wb, y.at, w, in, in + 1, B, img);
    }
  }
  return put_images(host_, img, opt_.backdoor);
}

TrainStepRun run_step_program(HostPort& host, const SpmdProgram& program, const MlpSpec& spec,
                              const std::vector<std::pair<int, uint64_t>>& loss_at) {
  TrainStepRun r;
  r.program = program;
  r.commands = program.commands();
  PodDriver pd(host);
  r.prog = pd.run_programs(program);
  std::vector<std::vector<uint8_t>> raw(loss_at.size(), std::vector<uint8_t>(kBurst));
  std::vector<HostCopy> ops;
  for (std::size_t i = 0; i < loss_at.size(); ++i)
    ops.push_back(HostCopy{loss_at[i].first, false, loss_at[i].second, raw[i].data(), kBurst});
  r.loss_read_cycles = host.copy(ops);
  r.loss_parts = loss_parts_of(raw, spec.lanes);
  r.loss = mlp_loss(spec, r.loss_parts);
  return r;
}

TrainStepRun DataParallelTrainer::step() {
  // The loss partials: one burst from every chip, all at once.
  std::vector<std::pair<int, uint64_t>> loss_at;
  for (int c = 0; c < spec_.chips; ++c) loss_at.emplace_back(c, impl_->loss.addr);
  return run_step_program(host_, impl_->program, spec_, loss_at);
}

MlpParams DataParallelTrainer::read_params(int chip) {
  const Impl& m = *impl_;
  MlpParams p(spec_.layers());
  for (std::size_t l = 0; l < spec_.layers(); ++l) {
    p[l] = read_layer(host_, chip, m.layers[l].w, spec_.in_width(l), spec_.out_width(l));
  }
  return p;
}

GradAllReduce DataParallelTrainer::golden_all_reduce() const {
  const Impl* m = impl_.get();
  const MlpSpec spec = spec_;
  return [m, spec](std::size_t layer, const std::vector<std::vector<uint32_t>>& in) {
    if (spec.data() == 1) return in;
    const std::size_t out = spec.out_width(layer);
    std::vector<std::vector<uint32_t>> res(in.size());
    for (auto& v : res) v.resize(in.at(0).size());
    for (const Impl::Coll& c : m->colls) {
      if (c.layer != layer) continue;
      std::vector<std::vector<uint32_t>> part;
      for (const auto& v : in)
        part.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(c.r0 * out),
                          v.begin() + static_cast<std::ptrdiff_t>(c.r1 * out));
      const auto sum = golden_collective(c.rounds, part);
      for (std::size_t k = 0; k < res.size(); ++k)
        std::copy(sum[k].begin(), sum[k].end(), res[k].begin() + static_cast<std::ptrdiff_t>(c.r0 * out));
    }
    return res;
  };
}

ModelAllReduce DataParallelTrainer::golden_model_all_reduce() const {
  const Impl* m = impl_.get();
  return [m](const std::vector<std::vector<uint32_t>>& in) {
    return m->model_rounds.empty() ? in : golden_collective(m->model_rounds, in);
  };
}

TrainCheck check_params(const std::vector<MlpParams>& got, const MlpGolden& golden) {
  TrainCheck k;
  const MlpSpec& sp = golden.spec();
  for (std::size_t c = 0; c < got.size(); ++c) {
    const MlpParams& want = golden.params(static_cast<int>(c));
    // Its replica: the first chip of the same model rank.
    std::size_t r = 0;
    while (sp.model_rank_of(static_cast<int>(r)) != sp.model_rank_of(static_cast<int>(c))) ++r;
    for (std::size_t l = 0; l < want.size(); ++l) {
      auto cmp = [&](const std::vector<float>& a, const std::vector<float>& b,
                     const std::vector<float>& first) {
        for (std::size_t i = 0; i < a.size(); ++i) {
          ++k.compared;
          if (f32_bits(a[i]) != f32_bits(b[i])) ++k.mismatches;
          if (c != r && f32_bits(a[i]) != f32_bits(first[i])) ++k.replica_mismatches;
        }
      };
      cmp(got[c][l].w, want[l].w, got[r][l].w);
      cmp(got[c][l].b, want[l].b, got[r][l].b);
    }
  }
  return k;
}

uint64_t covered_cycles(std::vector<std::pair<uint64_t, uint64_t>>& spans) {
  std::sort(spans.begin(), spans.end());
  uint64_t covered = 0, end = 0;
  for (const auto& [a, z] : spans) {
    const uint64_t from = std::max(a, end);
    if (z > from) covered += z - from;
    end = std::max(end, z);
  }
  return covered;
}

double allreduce_hidden_fraction(const TrainStepRun& run, const std::vector<TraceEvent>& events) {
  // A command's phase from its label ("<phase>" or "<phase> | step s"): 0 no collective, 1 a
  // gradient all-reduce, 2 another collective.
  auto kind = [&](const std::string& label) {
    const int p = run.program.phase_of_label(label);
    if (p < 0 || !run.program.phase(p).collective) return 0;
    return run.program.phase(p).gradient ? 1 : 2;
  };
  const int P = run.program.num_chips();
  uint64_t total = 0, hidden = 0;
  for (int c = 0; c < P; ++c) {
    // Edges (cycle, 0 gradient / 1 other work, +1 issue / -1 done), swept in order.
    std::vector<std::tuple<uint64_t, int, int>> ev;
    for (const TraceEvent& e : events) {
      if (e.chip != c || e.unit == TraceUnit::kHost || e.done <= e.issue) continue;
      const int k = kind(e.label);
      if (k == 2) continue;
      ev.emplace_back(e.issue, k == 1 ? 0 : 1, +1);
      ev.emplace_back(e.done, k == 1 ? 0 : 1, -1);
    }
    std::sort(ev.begin(), ev.end());
    int ng = 0, no = 0;
    uint64_t last = 0;
    for (const auto& [t, which, d] : ev) {
      if (ng > 0) {
        total += t - last;
        if (no > 0) hidden += t - last;
      }
      last = t;
      (which == 0 ? ng : no) += d;
    }
  }
  return total ? static_cast<double>(hidden) / static_cast<double>(total) : 1.0;
}

const TrainStepRecord& record_step(TrainRunResult& r, const TrainRunOptions& ro, std::size_t s,
                                   const TrainStepRun& run, const MlpStepResult& g,
                                   const TrainCheck& chk, double hidden, uint64_t peak) {
  TrainStepRecord rec;
  rec.hidden = hidden;
  std::size_t lm = g.loss_parts.size() == run.loss_parts.size() ? 0 : 1;
  for (std::size_t c = 0; lm == 0 && c < g.loss_parts.size(); ++c)
    for (std::size_t i = 0; i < g.loss_parts[c].size(); ++i)
      lm += f32_bits(g.loss_parts[c][i]) != f32_bits(run.loss_parts[c].at(i));
  r.check.compared += chk.compared;
  r.check.mismatches += chk.mismatches;
  r.check.replica_mismatches += chk.replica_mismatches;
  r.loss_mismatches += lm;
  rec.golden_pass = chk.pass() && lm == 0;
  rec.loss = run.loss;
  rec.cycles = run.prog.run.cycles;
  rec.profile = make_profile(run.prog.chip_delta, run.prog.run.cycles, r.macs_per_step, peak);
  for (std::size_t c = 0; c < r.total.size(); ++c)
    for (unsigned i = 0; i < kNumChipStats; ++i) r.total[c].v[i] += run.prog.chip_delta[c].v[i];
  r.cycles += rec.cycles;
  r.loss_read_cycles += run.loss_read_cycles;
  r.steps.push_back(rec);
  if (ro.on_step) ro.on_step(s, r.steps.back());
  return r.steps.back();
}

TrainRunResult run_training(HostPort& host, const MlpSpec& spec, const TrainOptions& opt,
                            const TrainRunOptions& ro) {
  TrainRunResult r;
  r.options = opt;
  r.run = ro;
  DataParallelTrainer tr(host, spec, opt);
  const MlpSpec& sp = tr.spec();
  r.spec = sp;
  const MachineInfo& mi = host.info();
  const int P = mi.num_chips();
  r.init = init_mlp_params(sp, ro.seed);
  r.batches.push_back(make_mlp_data(sp, ro.seed, 0));
  r.hbm_bytes_per_chip = tr.hbm_bytes_per_chip();
  MlpGolden golden(sp, r.init);
  r.load_cycles = tr.load_params(r.init) + tr.load_data(r.batches[0]);
  TraceOptions topt;
  topt.enabled = true;  // the hidden fraction comes from the timeline
  host.set_trace(topt);
  r.macs_per_step = tr.step_macs_per_chip() * static_cast<uint64_t>(P);
  const uint64_t peak = peak_macs_per_cycle(mi.shape.rows, mi.shape.cols);
  r.total.assign(static_cast<std::size_t>(P), ChipCounters{});
  for (std::size_t s = 0; s < ro.steps; ++s) {
    if (ro.fresh_batches && s > 0) {
      r.batches.push_back(make_mlp_data(sp, ro.seed, s));
      r.load_cycles += tr.load_data(r.batches.back());
    }
    const MlpData& data = r.batches.back();
    if (ro.progress) {  // the step's cycles so far, not the current copy's or program's
      const uint64_t c0 = host.cycle();
      host.progress = [&, c0](uint64_t) { ro.progress(s, host.cycle() - c0); };
    }
    const TrainStepRun run = tr.step();
    host.progress = nullptr;
    std::vector<TraceEvent> ev = host.take_trace();
    const double hidden = allreduce_hidden_fraction(run, ev);
    if (s >= ro.trace_from && s < ro.trace_to) r.trace.insert(r.trace.end(), ev.begin(), ev.end());
    // The golden step on the host; every chip's parameters and loss partials compared.
    const MlpStepResult g =
        golden.step(data, tr.golden_all_reduce(), tr.golden_model_all_reduce());
    std::vector<MlpParams> got;
    for (int c = 0; c < P; ++c) got.push_back(tr.read_params(c));
    record_step(r, ro, s, run, g, check_params(got, golden), hidden, peak);
    if (s + 1 == ro.steps) {  // the whole network, from the shards of data rank 0
      std::vector<MlpParams> shards(static_cast<std::size_t>(sp.model));
      for (int c = 0; c < P; ++c)
        if (sp.data_rank_of(c) == 0) shards[static_cast<std::size_t>(sp.model_rank_of(c))] = got[static_cast<std::size_t>(c)];
      r.final_params = mlp_unshard(sp, shards);
    }
  }
  host.set_trace(TraceOptions{});
  return r;
}

// Group `pipeline` of a pipelined run: the schedule, the micro-batches, the bubble formula and
// per stage its layers, measured bubble and peak activation memory (docs/training.md).
void fill_pipeline_report(Report& rep, const TrainPipelineResult& p) {
  ReportGroup& g = rep.group("pipeline");
  g.metric("schedule", p.schedule, "", "gpipe, 1f1b or interleaved:v", true);
  g.metric("microbatches", static_cast<uint64_t>(p.microbatches), "",
           "per step and data replica", true);
  g.metric("stage_count", static_cast<uint64_t>(p.stages), "", "stages (the mesh's stage axis)");
  g.metric("bubble_formula", p.bubble_formula, "fraction", p.bubble_formula_text, true);
  g.metric("bubble_formula_of_ideal", p.bubble_formula_of_ideal, "fraction",
           "(1/v)(p-1)/m: the bubble relative to the ideal time (v = 1: GPipe, 1F1B)", true);
  g.metric("heaviest_stage_bubble", p.stats.heaviest_stage_bubble(), "fraction",
           "1 - the most busy cycles of a stage / span: the bubble of the stage with the most "
           "work, which the formula (equal stages) describes; a lighter stage idles its "
           "imbalance too",
           true);
  g.metric("span_cycles", p.stats.span, "cycles",
           "the step's first command to its last F or B command's end (mean over the steps)");
  g.metric("hop_cycles", p.stats.hop_cycles, "cycles",
           "a slot that waited on another stage: from that stage's slot's end to its start "
           "(median)");
  g.metric("gap_cycles", p.stats.gap_cycles, "cycles",
           "a slot that did not: from its stage's slot before to its start (median)");
  Json stages = Json::array();
  for (std::size_t i = 0; i < p.stats.stages.size(); ++i) {
    const PipelineStageStats& s = p.stats.stages[i];
    Json slots = Json::array();
    for (const PipelineSlotSpan& x : s.slots)
      slots.push_back(
          Json::object({{"slot", x.slot}, {"start", x.start}, {"end", x.end}, {"pre", x.pre}}));
    stages.push_back(Json::object({{"stage", static_cast<uint64_t>(i)},
                                   {"first_layer", static_cast<uint64_t>(s.first_layer)},
                                   {"last_layer", static_cast<uint64_t>(s.last_layer)},
                                   {"bubble", s.bubble},
                                   {"bubble_of_ideal", s.bubble_of_ideal},
                                   {"bubble_model", s.bubble_model},
                                   {"bubble_no_hop", s.bubble_no_hop},
                                   {"busy_cycles", s.busy},
                                   {"peak_in_flight", static_cast<uint64_t>(s.peak_in_flight)},
                                   {"peak_activation_bytes", s.peak_activation_bytes},
                                   {"slots", slots}}));
  }
  g.field("stages", stages);
}

Json train_steps_json(const std::vector<TrainStepRecord>& steps) {
  Json out = Json::array();
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const TrainStepRecord& st = steps[s];
    const Json b = Json::object({{"compute", st.profile.breakdown.compute},
                                 {"communication", st.profile.breakdown.communication},
                                 {"memory", st.profile.breakdown.memory},
                                 {"idle", st.profile.breakdown.idle}});
    out.push_back(Json::object({{"step", static_cast<uint64_t>(s)},
                                {"loss", st.loss},
                                {"cycles", st.cycles},
                                {"mfu", st.profile.mfu},
                                {"breakdown", b},
                                {"allreduce_hidden_fraction", st.hidden},
                                {"golden", st.golden_pass ? "pass" : "fail"}}));
  }
  return out;
}

void fill_train_report(Report& rep, const TrainRunResult& r, const MachineInfo& mi) {
  const MlpSpec& sp = r.spec;
  const std::size_t n = r.steps.size();
  ReportGroup& tg = rep.group("train");
  Json layers = Json::array();
  for (std::size_t w : sp.widths) layers.push_back(static_cast<uint64_t>(w));
  tg.field("layers", layers);
  tg.metric("global_batch", static_cast<uint64_t>(sp.global_batch()), "", "examples per step");
  tg.metric("batch_per_chip", static_cast<uint64_t>(sp.batch), "", "examples per chip");
  tg.metric("steps", static_cast<uint64_t>(n), "", "SGD steps");
  tg.metric("lr", static_cast<double>(sp.lr), "", "learning rate");
  tg.metric("seed", r.run.seed, "", "data, teacher and initial weights");
  tg.field("fresh_batches", Json(r.run.fresh_batches));
  tg.metric("grad_pieces", static_cast<uint64_t>(r.options.grad_pieces), "",
            "pieces of the first layer's gradient all-reduce");
  tg.metric("hbm_bytes_per_chip", r.hbm_bytes_per_chip, "bytes", "the step's buffers");
  tg.metric("macs_per_step", r.macs_per_step, "", "useful multiply-adds of a step, all chips");
  if (n) {
    tg.metric("loss_first", r.steps.front().loss, "", "loss of step 0", true);
    tg.metric("loss_last", r.steps.back().loss, "", "loss of the last step", true);
  }
  double hidden = 0;
  for (const TrainStepRecord& st : r.steps) hidden += st.hidden;
  rep.field("steps", train_steps_json(r.steps));
  rep.metric("cycles", r.cycles, "cycles", "all steps (the programs), pod cycles", true);
  rep.metric("cycles_per_step", n ? r.cycles / n : 0, "cycles", "mean over the steps", true);
  rep.metric("load_cycles", r.load_cycles, "cycles", "data and weights in (0: backdoor)");
  rep.metric("loss_read_cycles", r.loss_read_cycles, "cycles", "the host reading the loss partials");
  rep.metric("allreduce_hidden_fraction", n ? hidden / static_cast<double>(n) : 0.0, "fraction",
             "of the gradient all-reduces' time, other work in flight too (mean over steps)",
             true);
  report_profile(rep, r.total, r.cycles, r.macs_per_step * n,
                 peak_macs_per_cycle(mi.shape.rows, mi.shape.cols));
  if (r.pipeline.on) fill_pipeline_report(rep, r.pipeline);
  rep.group("golden")
      .metric("verdict", r.pass() ? "pass" : "fail", "", "every step: parameters and loss", true)
      .metric("outputs", static_cast<uint64_t>(r.check.compared), "",
              "parameters compared (all chips, all steps)")
      .metric("mismatches", static_cast<uint64_t>(r.check.mismatches), "",
              "parameters that differ from the golden", true)
      .metric("replica_mismatches", static_cast<uint64_t>(r.check.replica_mismatches), "",
              "parameters that differ from chip 0's")
      .metric("loss_mismatches", static_cast<uint64_t>(r.loss_mismatches), "",
              "loss partial sums that differ");
}

}  // namespace tpu
