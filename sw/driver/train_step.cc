#include "train_step.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>

#include "tpu/perf.h"
#include "vpu_map.h"

namespace tpu {

namespace {

constexpr uint64_t kBurst = 64;

// Constant rows of the step (MlpConsts), in the `consts` matrix.
enum ConstRow : std::size_t { kScaleRow = 0, kNegLrRow = 1, kBigRow = 2, kOneRow = 3, kConstRows = 4 };

// A part of the step's program: one phase's commands.
struct Part {
  int phase = 0;
  std::vector<ChipCmd> cmds;
};

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
  // The phases' indices in the program (the same on every chip).
  struct Phases {
    int model = -1;         // the prediction's all-reduce (tensor parallel)
    std::vector<int> coll;  // the gradient all-reduces, in their order
    std::vector<int> fwd, tr, da, mask, sgd;  // per layer
    std::vector<std::vector<int>> gw;         // per layer, per gradient piece
    int loss = -1;
  };
  std::vector<std::unique_ptr<ChipDriver>> drv;
  HbmMatrix x, t, consts, loss;
  HbmMatrix pred;  // B x out f32: the prediction (tensor parallel: the model all-reduce's output)
  std::vector<int> data_dims, model_dims;  // the mesh axes' torus dimensions (empty: the pod)
  std::vector<CollectiveRound> model_rounds;  // the model all-reduce of the prediction
  std::vector<Layer> layers;
  std::vector<Coll> colls;
  SpmdProgram program;
  Phases ph;
  uint32_t vmem_compute = 0;

  // The constructor's steps: the mesh's axes onto the spec, the buffers in HBM, the
  // collectives compiled (their phases), the compute phases, and each chip's compute units and
  // its stream.
  void apply_mesh(const MachineInfo& mi, const std::string& mesh_text, MlpSpec* spec);
  uint64_t layout(HostPort& host, const MlpSpec& spec, const TrainOptions& opt);
  std::vector<PodProgram> plan_collectives(HostPort& host, const MlpSpec& spec);
  void add_compute_phases(const MlpSpec& spec);
  std::vector<Part> compute_units(int c, const MlpSpec& spec, const ChipShape& s,
                                  std::vector<bool>* grad, std::size_t* loss_chunk);
  Part sgd(const MlpSpec& spec, std::size_t l, const ChipShape& s);
  void emit_chip(int c, const MlpSpec& spec, const ChipShape& s, std::vector<Part> units,
                 const std::vector<bool>& grad, const std::vector<PodProgram>& cp);
};

namespace {
// pd.compile with the fastest algorithm that fits the collective's share of the ICI counters (a
// third each): the torus all-reduce of a 3D group (4x4x4) needs more than that, the rings far
// fewer. The golden replays the rounds that ran, so the bits stay checked whichever it is.
PodProgram compile_fitting(PodDriver& pd, CollectiveSpec cs, const CollectiveBuffers& bufs,
                           const PodCollectiveOptions& o, const Topology& topo) {
  std::string first_error;
  bool from_here = false;  // the asked algorithm first, then the slower ones after it
  for (const char* algo : {"torus", "biring", "ring"}) {
    from_here = from_here || cs.algorithm == algo;
    if (!from_here) continue;
    cs.algorithm = algo;
    try {
      return pd.compile(cs, bufs, o);
    } catch (const std::invalid_argument& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  throw std::invalid_argument("train: the all-reduce over " +
                              std::to_string(group_size(topo, cs.group_dims)) +
                              " chips: " + first_error);
}
}  // namespace

void DataParallelTrainer::Impl::apply_mesh(const MachineInfo& mi, const std::string& mesh_text,
                                           MlpSpec* spec) {
  const int P = mi.num_chips();
  // Axes of size 1 split nothing: "data=4,model=1" is "data=4", "data=1,model=4" "model=4".
  const Mesh mesh = mesh_without_unit_axes(parse_mesh(mesh_text));
  for (const MeshAxis& a : mesh.axes)
    if (a.name != "data" && a.name != "model")
      throw std::invalid_argument("train: mesh axis '" + a.name + "': the axes are 'data' and "
                                  "'model'");
  if (mesh.num_chips() != P)
    throw std::invalid_argument("train: the mesh " + mesh.text() + " has " +
                                std::to_string(mesh.num_chips()) + " chips, the pod " +
                                std::to_string(P));
  const bool has_model = mesh.text().find("model=") != std::string::npos;
  const bool has_data = mesh.text().find("data=") != std::string::npos;
  if (!has_model || mesh.axis_size("model") <= 1) return;
  model_dims = mesh_axis_dims(mi.topo, mesh, "model");
  spec->model = mesh.axis_size("model");
  if (has_data) data_dims = mesh_axis_dims(mi.topo, mesh, "data");
  spec->data_rank.clear();
  spec->model_rank.clear();
  for (int c = 0; c < P; ++c) {
    spec->model_rank.push_back(group_rank(mi.topo, model_dims, c));
    spec->data_rank.push_back(has_data ? group_rank(mi.topo, data_dims, c) : 0);
  }
}

uint64_t DataParallelTrainer::Impl::layout(HostPort& host, const MlpSpec& spec,
                                           const TrainOptions& opt) {
  const MachineInfo& mi = host.info();
  const int P = mi.num_chips();
  const ChipShape& s = mi.shape;
  const std::size_t L = spec.layers(), B = spec.batch, lanes = s.cols;
  const bool grad_ar = spec.data() > 1, model_ar = spec.model > 1;
  // The same layout on every chip (every allocator runs the same sequence).
  for (int c = 0; c < P; ++c) drv.push_back(std::make_unique<ChipDriver>(host, c));
  for (int c = 0; c < P; ++c) try {
    ChipDriver& d = *drv[static_cast<std::size_t>(c)];
    const HbmMatrix k = d.alloc_matrix(kConstRows, lanes, Dtype::kF32);
    const HbmMatrix lo = d.alloc_matrix(std::max<std::size_t>(1, kBurst / (4 * lanes)), lanes,
                                        Dtype::kF32);
    const HbmMatrix xm = d.alloc_matrix(B, spec.widths.front(), Dtype::kBf16);
    const HbmMatrix tm = d.alloc_matrix(B, spec.widths.back(), Dtype::kF32);
    std::vector<Layer> ls(L);
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t in = spec.in_width(l), out = spec.out_width(l);
      Layer& y = ls[l];
      y.w = d.alloc_matrix(in + 1, out, Dtype::kF32);
      y.wb = d.alloc_matrix(in + 1, out, Dtype::kBf16);
      y.at = d.alloc_matrix(in + 1, B, Dtype::kBf16);
      y.g = d.alloc_matrix(in + 1, out, Dtype::kF32);
      y.gs = grad_ar ? d.alloc_matrix(in + 1, out, Dtype::kF32) : y.g;
      y.out = d.alloc_matrix(B, out, l + 1 < L ? Dtype::kBf16 : Dtype::kF32);
      y.dy = d.alloc_matrix(B, out, Dtype::kBf16);
      if (l > 0) y.da = d.alloc_matrix(B, in, Dtype::kF32);
      const std::size_t n = (l == 0 && grad_ar) ? std::min(opt.grad_pieces, in + 1) : 1;
      for (std::size_t q = 0; q < n; ++q)
        y.pieces.push_back({(in + 1) * q / n, (in + 1) * (q + 1) / n});
    }
    const HbmMatrix pr =
        model_ar ? d.alloc_matrix(B, spec.widths.back(), Dtype::kF32) : ls[L - 1].out;
    if (c == 0) {
      pred = pr;
      consts = k;
      loss = lo;
      x = xm;
      t = tm;
      layers = ls;
    }
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument("train: the step's buffers do not fit in a chip's HBM (" +
                                std::to_string(s.hbm_bytes) + " bytes): " + e.what());
  }
  return drv[0]->allocated();
}

// The collectives: the prediction's all-reduce over the model axis (tensor parallel), then one
// per piece of every layer's gradient, last layer first (the order they become ready in).
// Three VMEM regions and counter sets in rotation: a chip starts collective i + 3 only after
// collective i + 2 finished everywhere it depends on, and with it i.
std::vector<PodProgram> DataParallelTrainer::Impl::plan_collectives(HostPort& host,
                                                                    const MlpSpec& spec) {
  const MachineInfo& mi = host.info();
  const int P = mi.num_chips();
  const std::size_t L = spec.layers(), B = spec.batch;
  PodDriver pd(host);
  std::vector<PodProgram> cp;
  const uint32_t share = (mi.shape.vmem_rows - vmem_compute) / 3;
  auto compile = [&](CollectiveSpec cs, uint64_t in, uint64_t out) {
    cs.collective = Collective::kAllReduce;
    cs.dtype = DType::kF32;
    std::size_t dims = 0;  // the group's dimensions with more than one chip
    for (int dim : mi.topo.active_dims())
      dims += cs.group_dims.empty() ||
              std::find(cs.group_dims.begin(), cs.group_dims.end(), dim) != cs.group_dims.end();
    cs.algorithm = dims >= 2 ? "torus" : "biring";
    CollectiveBuffers bufs;
    bufs.in.assign(static_cast<std::size_t>(P), in);
    bufs.out.assign(static_cast<std::size_t>(P), out);
    PodCollectiveOptions o;
    const std::size_t slot = cp.size() % 3;
    o.vmem_base = vmem_compute + static_cast<uint32_t>(slot) * share;
    o.vmem_rows = share;
    o.counter_count = kIciCounters / 3;
    o.counter_base = static_cast<uint32_t>(slot) * o.counter_count;
    o.early_heads = false;  // several collectives in one stream (PodCollectiveOptions)
    cp.push_back(compile_fitting(pd, cs, bufs, o, mi.topo));
    SpmdPhase phase;
    phase.collective = true;
    phase.kind = Collective::kAllReduce;
    phase.bytes = static_cast<uint64_t>(cs.n) * 4;
    return phase;
  };
  if (spec.model > 1) {  // the prediction's partial products summed over the model axis
    CollectiveSpec cs;
    cs.n = B * spec.widths.back();
    cs.group_dims = model_dims;
    SpmdPhase phase = compile(cs, layers[L - 1].out.addr, pred.addr);
    model_rounds = cp.back().rounds;
    phase.name = "all_reduce P over model";
    phase.axis = "model";
    ph.model = program.add_phase(phase);
  }
  if (spec.data() == 1) return cp;
  for (std::size_t l = L; l-- > 0;) {
    const Layer& y = layers[l];
    const std::size_t out = spec.out_width(l);
    for (std::size_t k = 0; k < y.pieces.size(); ++k) {
      const auto [r0, r1] = y.pieces[k];
      CollectiveSpec cs;
      cs.n = (r1 - r0) * out;
      cs.group_dims = data_dims;
      SpmdPhase phase = compile(cs, hbm_view(y.g, r0, r1 - r0, 0, out).addr,
                                hbm_view(y.gs, r0, r1 - r0, 0, out).addr);
      colls.push_back(Coll{l, r0, r1, cp.back().rounds});
      phase.name = "all_reduce dW" + std::to_string(l) +
                   (y.pieces.size() > 1 ? " piece " + std::to_string(k) : "");
      phase.axis = spec.model > 1 ? "data" : "";
      phase.gradient = true;
      ph.coll.push_back(program.add_phase(phase));
    }
  }
  return cp;
}

void DataParallelTrainer::Impl::add_compute_phases(const MlpSpec& spec) {
  const std::size_t L = spec.layers();
  auto phase = [&](const std::string& name) { return program.add_phase(name); };
  ph.fwd.assign(L, -1);
  ph.tr.assign(L, -1);
  ph.da.assign(L, -1);
  ph.mask.assign(L, -1);
  ph.sgd.assign(L, -1);
  ph.gw.assign(L, {});
  for (std::size_t l = 0; l < L; ++l) ph.fwd[l] = phase("forward " + std::to_string(l));
  ph.loss = phase("loss");
  for (std::size_t l = L; l-- > 0;) {
    ph.tr[l] = phase("transpose A" + std::to_string(l));
    for (std::size_t k = 0; k < layers[l].pieces.size(); ++k)
      ph.gw[l].push_back(phase("dW" + std::to_string(l) +
                               (layers[l].pieces.size() > 1 ? " piece " + std::to_string(k) : "")));
    if (l > 0) {
      ph.da[l] = phase("dA" + std::to_string(l));
      ph.mask[l] = phase("relu mask " + std::to_string(l));
    }
  }
  for (std::size_t l = L; l-- > 0;) ph.sgd[l] = phase("sgd " + std::to_string(l));
}

// Chip c's compute units in order: the forward, the loss, and per layer (last first) the
// transpose, the gradient pieces (grad: a gradient piece is ready after it), dA and the ReLU
// mask.
std::vector<Part> DataParallelTrainer::Impl::compute_units(int c, const MlpSpec& spec,
                                                           const ChipShape& s,
                                                           std::vector<bool>* grad,
                                                           std::size_t* loss_chunk) {
  ChipDriver& d = *drv[static_cast<std::size_t>(c)];
  const std::size_t L = spec.layers(), B = spec.batch;
  const bool grad_ar = spec.data() > 1;
  auto map_plan = [&](const VpuMap& vm) { return plan_vpu_map(vm, s, 0, vmem_compute); };
  auto act = [&](std::size_t l) { return l == 0 ? x : layers[l - 1].out; };
  std::vector<Part> units;
  auto unit = [&](int phase, std::vector<ChipCmd> cmds, bool g = false) {
    units.push_back(Part{phase, std::move(cmds)});
    grad->push_back(g);
  };
  for (std::size_t l = 0; l < L; ++l) {
    const Layer& y = layers[l];
    const std::size_t in = spec.in_width(l), out = spec.out_width(l);
    const HbmMatrix bias = hbm_view(y.w, in, 1, 0, out);
    MatmulEpilogue ep;  // tensor parallel: the last bias once, on model rank 0
    ep.bias = (l + 1 < L || spec.model_rank_of(c) == 0) ? &bias : nullptr;
    ep.relu = l + 1 < L;
    unit(ph.fwd[l],
         without_halt(d.plan_matmul(y.out, act(l), hbm_view(y.wb, 0, in, 0, out), ep).program));
  }
  {  // loss: D = P - T, sum of D^2, dY = bf16(D x scale)
    VpuMap vm;
    vm.rows = B;
    vm.cols = spec.widths.back();
    vm.in = {pred, t};
    vm.consts = consts;
    vm.const_rows = {kScaleRow};
    vm.ops = {{VpuOp::kSub, 0, 1, false}, {VpuOp::kMul, 3, 3, false}, {VpuOp::kMul, 3, 2, true}};
    vm.out = {{5, layers[L - 1].dy}};
    vm.sum = 4;
    vm.sum_out = loss;
    VpuMapPlan mp = map_plan(vm);
    if (c == 0) *loss_chunk = mp.chunk;
    unit(ph.loss, std::move(mp.prog));
  }
  for (std::size_t l = L; l-- > 0;) {
    const Layer& y = layers[l];
    const std::size_t in = spec.in_width(l), out = spec.out_width(l);
    unit(ph.tr[l], d.plan_transpose(hbm_view(y.at, 0, in, 0, B), act(l)));
    for (std::size_t k = 0; k < y.pieces.size(); ++k) {
      const auto [r0, r1] = y.pieces[k];
      unit(ph.gw[l][k],
           without_halt(d.plan_matmul(hbm_view(y.g, r0, r1 - r0, 0, out),
                                      hbm_view(y.at, r0, r1 - r0, 0, B), y.dy).program),
           grad_ar);
    }
    if (l == 0) break;
    // dA = dY W^T: W's tiles loaded transposed.
    unit(ph.da[l],
         without_halt(d.plan_matmul(y.da, y.dy, hbm_view(y.wb, 0, in, 0, out), {}, true).program));
    VpuMap vm;  // dY(l-1) = bf16(dA x min(H x 2^127 x 2^127, 1)): the ReLU's derivative
    vm.rows = B;
    vm.cols = in;
    vm.in = {y.da, layers[l - 1].out};
    vm.consts = consts;
    vm.const_rows = {kBigRow, kOneRow};
    vm.ops = {{VpuOp::kMul, 1, 2, false}, {VpuOp::kMul, 4, 2, false},
              {VpuOp::kMin, 5, 3, false}, {VpuOp::kMul, 0, 6, true}};
    vm.out = {{7, layers[l - 1].dy}};
    unit(ph.mask[l], map_plan(vm).prog);
  }
  return units;
}

// Layer l's update: w = w + g x (-lr); wb = bf16(w).
Part DataParallelTrainer::Impl::sgd(const MlpSpec& spec, std::size_t l, const ChipShape& s) {
  const Layer& y = layers[l];
  VpuMap vm;
  vm.rows = spec.in_width(l) + 1;
  vm.cols = spec.out_width(l);
  vm.in = {y.gs, y.w};
  vm.consts = consts;
  vm.const_rows = {kNegLrRow};
  vm.ops = {{VpuOp::kMul, 0, 2, false}, {VpuOp::kAdd, 1, 3, false},
            {VpuOp::kCvtF32Bf16, 4, -1, true}};
  vm.out = {{4, y.w}, {5, y.wb}};
  return Part{ph.sgd[l], plan_vpu_map(vm, s, 0, vmem_compute).prog};
}

// Chip c's stream: the compute units cut after each gradient piece; the all-reduce of a piece
// merged (by command count) with the units up to the next piece; the last one with the SGD of
// the layers whose gradients are complete, then the rest of the SGD. Tensor parallel: the
// forward, then the prediction's all-reduce alone (the loss needs it).
void DataParallelTrainer::Impl::emit_chip(int c, const MlpSpec& spec, const ChipShape& s,
                                          std::vector<Part> units, const std::vector<bool>& grad,
                                          const std::vector<PodProgram>& cp) {
  const std::size_t L = spec.layers();
  // The collectives run under their phase alone (the timeline names no plan step here).
  auto emit = [&](int coll, const std::vector<Part>& comp) {
    ChipProgram a, b;
    if (coll >= 0) {
      const std::size_t i = static_cast<std::size_t>(coll);
      a.append(cp[i].program.cmds(c), CmdLabel{i == 0 && ph.model >= 0 ? ph.model
                                               : ph.coll[i - (ph.model >= 0 ? 1 : 0)]});
    }
    for (const Part& p : comp) b.append(p.cmds, CmdLabel{p.phase});
    program.append(c, merge(a, b));
  };
  std::size_t u0 = 0;
  const int first_grad = ph.model >= 0 ? 1 : 0;  // the first gradient collective in cp
  if (ph.model >= 0) {
    emit(-1, std::vector<Part>(units.begin(), units.begin() + static_cast<std::ptrdiff_t>(L)));
    emit(0, {});
    u0 = L;
  }
  std::size_t next_coll = 0;  // gradient collectives emitted + 1
  std::vector<Part> seg;
  for (std::size_t u = u0; u < units.size(); ++u) {
    seg.push_back(std::move(units[u]));
    if (!grad[u] && u + 1 < units.size()) continue;
    emit(next_coll == 0 ? -1 : first_grad + static_cast<int>(next_coll) - 1, seg);
    seg.clear();
    if (grad[u]) ++next_coll;
  }
  std::vector<Part> tail;
  if (next_coll > 0) {
    for (std::size_t l = L; l-- > 1;) tail.push_back(sgd(spec, l, s));
    emit(first_grad + static_cast<int>(next_coll) - 1, tail);
    emit(-1, {sgd(spec, 0, s)});
  } else {
    for (std::size_t l = L; l-- > 0;) tail.push_back(sgd(spec, l, s));
    emit(-1, tail);
  }
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
  if (!opt_.mesh.empty()) m.apply_mesh(mi, opt_.mesh, &spec_);  // data and model axes
  spec_.validate();
  if (spec_.batch > 0xFFFF) throw std::invalid_argument("train: batch per chip above 65535");
  m.vmem_compute = P > 1 ? s.vmem_rows / 2 : s.vmem_rows;
  hbm_used_ = m.layout(host_, spec_, opt_);
  m.program = SpmdProgram(P);
  const std::vector<PodProgram> cp = m.plan_collectives(host_, spec_);
  m.add_compute_phases(spec_);
  std::size_t loss_chunk = 0;
  for (int c = 0; c < P; ++c) {
    m.drv[static_cast<std::size_t>(c)]->vmem_rows_limit = m.vmem_compute;
    std::vector<bool> grad;
    std::vector<Part> units = m.compute_units(c, spec_, s, &grad, &loss_chunk);
    m.emit_chip(c, spec_, s, std::move(units), grad, cp);
  }
  spec_.loss_chunk = loss_chunk;
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

namespace {

struct Image {
  int chip;
  uint64_t addr;
  std::vector<uint8_t> bytes;
};

uint64_t put(HostPort& host, std::vector<Image>& img, bool backdoor) {
  if (backdoor) {
    for (const Image& i : img) host.backdoor_write(i.chip, i.addr, i.bytes.data(), i.bytes.size());
    return 0;
  }
  std::vector<HostCopy> ops;
  for (Image& i : img) ops.push_back(HostCopy{i.chip, true, i.addr, i.bytes.data(), i.bytes.size()});
  return host.copy(ops);
}

}  // namespace

uint64_t DataParallelTrainer::load_data(const MlpData& data) {
  const Impl& m = *impl_;
  const std::size_t B = spec_.batch, din = spec_.widths.front(), dout = spec_.widths.back();
  if (data.x.size() != spec_.global_batch() * din || data.t.size() != spec_.global_batch() * dout)
    throw std::invalid_argument("train: the batch must be " + std::to_string(spec_.global_batch()) +
                                " examples of " + std::to_string(din) + " inputs and " +
                                std::to_string(dout) + " targets");
  std::vector<Image> img;
  for (int c = 0; c < spec_.chips; ++c) {
    const ChipDriver& d = *m.drv[static_cast<std::size_t>(c)];
    const std::size_t ci = static_cast<std::size_t>(spec_.data_rank_of(c));  // its batch shard
    const std::vector<bf16_t> x(data.x.begin() + static_cast<std::ptrdiff_t>(ci * B * din),
                                data.x.begin() + static_cast<std::ptrdiff_t>((ci + 1) * B * din));
    const std::vector<float> t(data.t.begin() + static_cast<std::ptrdiff_t>(ci * B * dout),
                               data.t.begin() + static_cast<std::ptrdiff_t>((ci + 1) * B * dout));
    img.push_back(Image{c, m.x.addr, d.matrix_image(m.x, x)});
    img.push_back(Image{c, m.t.addr, d.matrix_image(m.t, t)});
  }
  return put(host_, img, opt_.backdoor);
}

uint64_t DataParallelTrainer::load_params(const MlpParams& params) {
  const Impl& m = *impl_;
  const std::size_t L = spec_.layers(), B = spec_.batch, lanes = spec_.lanes;
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
  const MlpConsts k = mlp_consts(spec_);
  std::vector<float> consts(kConstRows * lanes);
  for (std::size_t i = 0; i < lanes; ++i) {
    consts[kScaleRow * lanes + i] = k.grad_scale;
    consts[kNegLrRow * lanes + i] = k.neg_lr;
    consts[kBigRow * lanes + i] = k.mask_big;
    consts[kOneRow * lanes + i] = k.one;
  }
  std::vector<Image> img;
  for (int c = 0; c < spec_.chips; ++c) {
    const ChipDriver& d = *m.drv[static_cast<std::size_t>(c)];
    img.push_back(Image{c, m.consts.addr, d.matrix_image(m.consts, consts)});
    const MlpParams shard = mlp_shard(spec_, params, spec_.model_rank_of(c));
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t in = spec_.in_width(l);
      const MlpLayer& p = shard[l];
      std::vector<float> w(p.w);
      w.insert(w.end(), p.b.begin(), p.b.end());
      std::vector<bf16_t> wb(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
      std::vector<bf16_t> at((in + 1) * B, 0);
      std::fill(at.begin() + static_cast<std::ptrdiff_t>(in * B), at.end(), f32_to_bf16(1.0f));
      const Impl::Layer& y = m.layers[l];
      img.push_back(Image{c, y.w.addr, d.matrix_image(y.w, w)});
      img.push_back(Image{c, y.wb.addr, d.matrix_image(y.wb, wb)});
      img.push_back(Image{c, y.at.addr, d.matrix_image(y.at, at)});
    }
  }
  return put(host_, img, opt_.backdoor);
}

TrainStepRun DataParallelTrainer::step() {
  Impl& m = *impl_;
  TrainStepRun r;
  r.program = m.program;
  r.commands = m.program.commands();
  PodDriver pd(host_);
  r.prog = pd.run_programs(m.program);
  // The loss partials: one burst from every chip, all at once.
  const std::size_t lanes = spec_.lanes;
  std::vector<std::vector<uint8_t>> raw(static_cast<std::size_t>(spec_.chips),
                                        std::vector<uint8_t>(kBurst));
  std::vector<HostCopy> ops;
  for (int c = 0; c < spec_.chips; ++c)
    ops.push_back(HostCopy{c, false, m.loss.addr, raw[static_cast<std::size_t>(c)].data(), kBurst});
  r.loss_read_cycles = host_.copy(ops);
  for (const auto& b : raw) {
    std::vector<float> v(lanes);
    std::memcpy(v.data(), b.data(), lanes * 4);
    r.loss_parts.push_back(v);
  }
  r.loss = mlp_loss(spec_, r.loss_parts);
  return r;
}

MlpParams DataParallelTrainer::read_params(int chip) {
  const Impl& m = *impl_;
  MlpParams p(spec_.layers());
  for (std::size_t l = 0; l < spec_.layers(); ++l) {
    const std::size_t in = spec_.in_width(l), out = spec_.out_width(l);
    const HbmMatrix& w = m.layers[l].w;
    std::vector<uint8_t> img(w.bytes());
    host_.backdoor_read(chip, w.addr, img.data(), img.size());
    const std::vector<uint32_t> bits = ChipDriver::matrix_from_image(w, img);
    p[l].w.resize(in * out);
    p[l].b.resize(out);
    for (std::size_t i = 0; i < in * out; ++i) p[l].w[i] = f32_from_bits(bits[i]);
    for (std::size_t j = 0; j < out; ++j) p[l].b[j] = f32_from_bits(bits[in * out + j]);
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
    if (ro.progress) host.progress = [&](uint64_t cyc) { ro.progress(s, cyc); };
    const TrainStepRun run = tr.step();
    host.progress = nullptr;
    std::vector<TraceEvent> ev = host.take_trace();
    TrainStepRecord rec;
    rec.hidden = allreduce_hidden_fraction(run, ev);
    if (s >= ro.trace_from && s < ro.trace_to) r.trace.insert(r.trace.end(), ev.begin(), ev.end());
    // The golden step on the host; every chip's parameters and loss partials compared.
    const MlpStepResult g =
        golden.step(data, tr.golden_all_reduce(), tr.golden_model_all_reduce());
    std::vector<MlpParams> got;
    for (int c = 0; c < P; ++c) got.push_back(tr.read_params(c));
    const TrainCheck chk = check_params(got, golden);
    std::size_t lm = 0;
    for (std::size_t c = 0; c < g.loss_parts.size(); ++c)
      for (std::size_t i = 0; i < g.loss_parts[c].size(); ++i)
        lm += f32_bits(g.loss_parts[c][i]) != f32_bits(run.loss_parts[c][i]);
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
    if (ro.on_step) ro.on_step(s, rec);
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
  Json steps = Json::array();
  double hidden = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const TrainStepRecord& st = r.steps[s];
    const Json b = Json::object({{"compute", st.profile.breakdown.compute},
                                 {"communication", st.profile.breakdown.communication},
                                 {"memory", st.profile.breakdown.memory},
                                 {"idle", st.profile.breakdown.idle}});
    steps.push_back(Json::object({{"step", static_cast<uint64_t>(s)},
                                  {"loss", st.loss},
                                  {"cycles", st.cycles},
                                  {"mfu", st.profile.mfu},
                                  {"breakdown", b},
                                  {"allreduce_hidden_fraction", st.hidden},
                                  {"golden", st.golden_pass ? "pass" : "fail"}}));
    hidden += st.hidden;
  }
  rep.field("steps", steps);
  rep.metric("cycles", r.cycles, "cycles", "all steps (the programs), pod cycles", true);
  rep.metric("cycles_per_step", n ? r.cycles / n : 0, "cycles", "mean over the steps", true);
  rep.metric("load_cycles", r.load_cycles, "cycles", "data and weights in (0: backdoor)");
  rep.metric("loss_read_cycles", r.loss_read_cycles, "cycles", "the host reading the loss partials");
  rep.metric("allreduce_hidden_fraction", n ? hidden / static_cast<double>(n) : 0.0, "fraction",
             "of the gradient all-reduces' time, other work in flight too (mean over steps)",
             true);
  report_profile(rep, r.total, r.cycles, r.macs_per_step * n,
                 peak_macs_per_cycle(mi.shape.rows, mi.shape.cols));
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
