#include "pipeline_train.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>

#include "scheduler.h"
#include "train_images.h"
#include "tpu/perf.h"
#include "vpu_map.h"

namespace tpu {

namespace {

constexpr uint64_t kBurst = 64;


// " mb3", and " c1" for a chunk of interleaved (v > 1).
std::string mb_text(int mb, int chunk, int v) {
  return " mb" + std::to_string(mb) + (v > 1 ? " c" + std::to_string(chunk) : "");
}

// The phase a timeline label names ("<phase>" or "<phase> | step s").
std::string phase_of_label(const std::string& label) {
  const std::size_t bar = label.find(" | ");
  return bar == std::string::npos ? label : label.substr(0, bar);
}

bool is_slot_phase(const std::string& phase) {
  return phase.compare(0, 4, "F mb") == 0 || phase.compare(0, 4, "B mb") == 0;
}

}  // namespace

struct PipelineTrainer::Impl {
  // A place for a local layer (chunk c, layer j of the chunk: q = c x per + j), the same buffers
  // on every stage, shaped for the widest layer that sits there.
  struct Place {
    HbmMatrix w, wb, at, g, gt, gs, dy, da;
  };
  struct Coll {
    std::size_t layer = 0;
    int stage = 0;
    std::vector<CollectiveRound> rounds;
  };
  std::unique_ptr<Workload> wl;
  HbmMatrix xd, t, consts, loss, pred;
  std::vector<Place> place;
  std::vector<std::vector<HbmMatrix>> act;  // [slot][q]: the input of local layer q
  std::vector<HbmMatrix> aout, dysend;      // [slot]: the activation and gradient to send
  std::vector<HbmMatrix> dyloss;            // [slot]: the loss's gradient, from F to B
  int P = 1, D = 1, v = 1, m = 1, R = 1, K = 1;
  std::size_t per = 1, b = 0, H = 0, lrows = 1;  // layers per chunk, rows per micro-batch
  std::vector<int> stage_of, data_of;
  std::vector<std::vector<int>> chip_at;                   // [data rank][stage]
  std::vector<std::pair<std::size_t, std::size_t>> chunk;  // per virtual stage j = c P + s
  std::vector<std::vector<PipeSlot>> table;
  std::vector<std::map<std::pair<int, int>, int>> slot_of;  // per stage: (mb, chunk) -> slot
  std::vector<int> data_dims;
  std::vector<Coll> colls;
  std::vector<int> region;                              // per op
  std::map<std::tuple<int, int, bool, int>, int> sent;  // (mb, virtual, backward, d) -> op
  std::map<std::pair<int, int>, int> seq;               // (from, to) chips -> sends so far
  SpmdProgram program;
  VpuMap loss_map;

  int virt(int s, int c) const { return c * P + s; }
  int stage_of_virt(int j) const { return j % P; }
  std::size_t q_of(int j, std::size_t l) const {
    return static_cast<std::size_t>(j / P) * per + (l - chunk[static_cast<std::size_t>(j)].first);
  }
  std::vector<int> chips_of(int s) const {
    std::vector<int> c;
    for (int d = 0; d < D; ++d)
      c.push_back(chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(s)]);
    return c;
  }
  BufferRef ref(const HbmMatrix& h) const { return wl->ref_of(h); }

  void apply_mesh(const MachineInfo& mi, const Mesh& mesh);
  void plan_slots(const MlpSpec& spec, const PipelineOptions& opt);
  uint64_t layout(HostPort& host, const MlpSpec& spec);
  int add(Op op, int r = -1) {
    const int i = wl->add_op(std::move(op));
    region.resize(static_cast<std::size_t>(i) + 1, -1);
    region[static_cast<std::size_t>(i)] = r;
    return i;
  }
  void add_p2p(const std::string& what, int s_from, int s_to, int mb, int j_from, bool backward,
               const HbmMatrix& src);
  void add_recv(const std::string& what, int s, int mb, int j_from, bool backward,
                const HbmMatrix& dst);
  void add_forward(const MlpSpec& spec, int s, const PipeSlot& x);
  void add_backward(const MlpSpec& spec, int s, const PipeSlot& x);
  void add_layer_backward(const MlpSpec& spec, int s, const PipeSlot& x, std::size_t l,
                          const std::string& name);
  void add_slots(const MlpSpec& spec);
  void add_tail(const MlpSpec& spec);
};

// The mesh's stage and data axes: each chip's stage and data rank, and the chip at each pair.
void PipelineTrainer::Impl::apply_mesh(const MachineInfo& mi, const Mesh& given) {
  const int chips = mi.num_chips();
  const Mesh mesh = mesh_without_unit_axes(given);
  for (const MeshAxis& a : mesh.axes)
    if (a.name != "data" && a.name != "stage")
      throw std::invalid_argument("train: mesh axis '" + a.name +
                                  "': a pipelined MLP has the "
                                  "axes 'data' and 'stage' (model=M with stages is not built)");
  if (!mesh.axes.empty() && mesh.num_chips() != chips)
    throw std::invalid_argument("train: the mesh " + mesh.text() + " has " +
                                std::to_string(mesh.num_chips()) + " chips, the pod " +
                                std::to_string(chips));
  const bool has_stage = mesh.text().find("stage=") != std::string::npos;
  const bool has_data = mesh.text().find("data=") != std::string::npos;
  std::vector<int> stage_dims;
  if (has_stage) stage_dims = mesh_axis_dims(mi.topo, mesh, "stage");
  if (has_data) data_dims = mesh_axis_dims(mi.topo, mesh, "data");
  P = has_stage ? mesh.axis_size("stage") : 1;
  D = chips / P;
  chip_at.assign(static_cast<std::size_t>(D), std::vector<int>(static_cast<std::size_t>(P), -1));
  for (int c = 0; c < chips; ++c) {
    const int s = has_stage ? group_rank(mi.topo, stage_dims, c) : 0;
    const int d = P == 1 ? c : (D == 1 ? 0 : group_rank(mi.topo, data_dims, c));
    stage_of.push_back(s);
    data_of.push_back(d);
    chip_at.at(static_cast<std::size_t>(d)).at(static_cast<std::size_t>(s)) = c;
  }
}

// The chunks of layers per virtual stage, the table of slots, each micro-batch's activation
// slot per stage (the lowest free one at its forward, freed at its backward).
void PipelineTrainer::Impl::plan_slots(const MlpSpec& spec, const PipelineOptions& opt) {
  v = opt.schedule.kind == PipeKind::kInterleaved ? opt.schedule.v : 1;
  m = static_cast<int>(opt.microbatches);
  chunk = pipeline_chunks(spec.layers(), P, opt.schedule, opt.stages_text);
  table = pipeline_slots(opt.schedule, P, m);
  per = 0;
  for (const auto& [f, l] : chunk) per = std::max(per, l - f + 1);
  slot_of = pipeline_activation_slots(table, &R);
}

// The buffers, the same on every chip: the data, per place the layer's parameters, gradients
// and backward operands, per activation slot the inputs the backward needs and the blocks sent.
uint64_t PipelineTrainer::Impl::layout(HostPort& host, const MlpSpec& spec) {
  const ChipShape& s = host.info().shape;
  const std::size_t full = spec.batch, lanes = s.cols;
  b = full / static_cast<std::size_t>(m);
  H = spec.widths[1];
  lrows = std::max<std::size_t>(1, kBurst / (4 * lanes));
  wl = std::make_unique<Workload>(host);
  auto buf = [&](const std::string& name, std::size_t rows, std::size_t cols, Dtype dt) {
    return wl->matrix(wl->add_buffer(Buffer{name, rows, cols, dt}));
  };
  const std::size_t nq = static_cast<std::size_t>(v) * per;
  try {
    consts = buf("consts", kConstRows, lanes, Dtype::kF32);
    loss = buf("loss", lrows * static_cast<std::size_t>(m), lanes, Dtype::kF32);
    xd = buf("X", full, spec.widths.front(), Dtype::kBf16);
    t = buf("T", full, H, Dtype::kF32);
    pred = buf("P", b, H, Dtype::kF32);
    place.assign(nq, Place{});
    for (std::size_t q = 0; q < nq; ++q) {
      // The widest input at this place over the stages: the network's inputs at place 0 (the
      // first layer's, on stage 0), the hidden width everywhere else.
      const std::size_t in = q == 0 ? std::max(H, spec.widths.front()) : H;
      const std::string n = std::to_string(q);
      Place& y = place[q];
      y.w = buf("W@" + n, in + 1, H, Dtype::kF32);
      y.wb = buf("Wb@" + n, in + 1, H, Dtype::kBf16);
      y.at = buf("AT@" + n, in + 1, b, Dtype::kBf16);
      y.g = buf("dW@" + n, in + 1, H, Dtype::kF32);
      y.gt = m > 1 ? buf("dW mb@" + n, in + 1, H, Dtype::kF32) : y.g;
      y.gs = D > 1 ? buf("dW summed@" + n, in + 1, H, Dtype::kF32) : y.g;
      y.dy = buf("dY@" + n, b, H, Dtype::kBf16);
      y.da = buf("dA@" + n, b, H, Dtype::kF32);
    }
    act.assign(static_cast<std::size_t>(R), {});
    for (int r = 0; r < R; ++r) {
      const std::string n = std::to_string(r);
      for (std::size_t q = 0; q < nq; ++q)
        act[static_cast<std::size_t>(r)].push_back(
            buf("A slot " + n + "@" + std::to_string(q), b, H, Dtype::kBf16));
      aout.push_back(buf("A out slot " + n, b, H, Dtype::kBf16));
      dysend.push_back(buf("dY out slot " + n, b, H, Dtype::kBf16));
      dyloss.push_back(buf("dY loss slot " + n, b, H, Dtype::kBf16));
    }
  } catch (const BufferDoesNotFit& e) {
    throw std::invalid_argument("train: the pipeline's buffers do not fit in a chip's HBM (" +
                                std::to_string(s.hbm_bytes) + " bytes): " + e.what());
  }
  return wl->hbm_used();
}

// A send of `src` from each data rank's chip of stage s_from to its chip of stage s_to (the
// block from virtual stage j_from), in its direction's regions in turn per pair of chips.
void PipelineTrainer::Impl::add_p2p(const std::string& what, int s_from, int s_to, int mb,
                                    int j_from, bool backward, const HbmMatrix& src) {
  for (int d = 0; d < D; ++d) {
    const int from = chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(s_from)];
    const int to = chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(s_to)];
    const int k = seq[{from, to}]++;
    const int r = (backward ? K : 0) + k % K;
    sent[{mb, j_from, backward, d}] =
        add(send_op(what, from, to, whole(wl->ref_of(src).buffer)), r);
  }
}

// Each data rank's chip of stage s receives the block virtual stage j_from sent into `dst`.
void PipelineTrainer::Impl::add_recv(const std::string& what, int s, int mb, int j_from,
                                     bool backward, const HbmMatrix& dst) {
  const int s_from = stage_of_virt(j_from);
  for (int d = 0; d < D; ++d) {
    const int from = chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(s_from)];
    const int to = chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(s)];
    const int snd = sent.at({mb, j_from, backward, d});
    add(recv_op(what, snd, from, to, whole(wl->ref_of(dst).buffer)));
  }
}

// A forward slot: the activation in (from the virtual stage before), the chunk's layers, then
// the loss (the last virtual stage) or the activation out.
void PipelineTrainer::Impl::add_forward(const MlpSpec& spec, int s, const PipeSlot& x) {
  const int j = virt(s, x.chunk);
  const auto [l0, l1] = chunk[static_cast<std::size_t>(j)];
  const std::size_t L = spec.layers();
  const std::size_t r =
      static_cast<std::size_t>(slot_of[static_cast<std::size_t>(s)].at({x.mb, x.chunk}));
  const std::string tag = mb_text(x.mb, x.chunk, v), name = "F" + tag;
  if (j > 0) add_recv("recv act" + tag, s, x.mb, j - 1, false, act[r][q_of(j, l0)]);
  const HbmMatrix xrows = hbm_view(xd, static_cast<std::size_t>(x.mb) * b, b, 0, xd.cols);
  for (std::size_t l = l0; l <= l1; ++l) {
    const std::size_t q = q_of(j, l), in = spec.widths[l];
    const Place& y = place[q];
    const HbmMatrix a = l == 0 ? xrows : act[r][q];
    const HbmMatrix out = l + 1 == L ? pred : (l < l1 ? act[r][q + 1] : aout[r]);
    Op op = matmul_op(name, ref(out), ref(a), ref(hbm_view(y.wb, 0, in, 0, H)),
                      ref(hbm_view(y.w, in, 1, 0, H)), l + 1 < L);
    op.chips = chips_of(s);
    add(std::move(op));
  }
  if (l1 + 1 == L) {
    VectorMapRefs lm;
    lm.map = loss_map;
    lm.in = {ref(pred), ref(hbm_view(t, static_cast<std::size_t>(x.mb) * b, b, 0, H))};
    lm.consts = ref(consts);
    lm.out = {ref(dyloss[r])};
    lm.sum_out = ref(hbm_view(loss, static_cast<std::size_t>(x.mb) * lrows, lrows, 0, loss.cols));
    Op op = vector_map_op(name, lm);
    op.chips = chips_of(s);
    add(std::move(op));
    return;
  }
  add_p2p("send act" + tag, s, stage_of_virt(j + 1), x.mb, j, false, aout[r]);
}

// Layer l's backward in a slot: A^T, dW (into the gradient for micro-batch 0, else apart and
// added to it), dA and the ReLU mask into the gradient of the layer below (or the block sent).
void PipelineTrainer::Impl::add_layer_backward(const MlpSpec& spec, int s, const PipeSlot& x,
                                               std::size_t l, const std::string& name) {
  const int j = virt(s, x.chunk);
  const std::size_t l0 = chunk[static_cast<std::size_t>(j)].first;
  const std::size_t r =
      static_cast<std::size_t>(slot_of[static_cast<std::size_t>(s)].at({x.mb, x.chunk}));
  const std::size_t q = q_of(j, l), in = spec.widths[l];
  const Place& y = place[q];
  // dY of the layer's output: the loss's (held since the slot's F) for the last layer.
  const HbmMatrix dy = l + 1 == spec.layers() ? dyloss[r] : y.dy;
  const std::vector<int> chips = chips_of(s);
  auto on = [&](Op op) {
    op.chips = chips;
    add(std::move(op));
  };
  const HbmMatrix a =
      l == 0 ? hbm_view(xd, static_cast<std::size_t>(x.mb) * b, b, 0, xd.cols) : act[r][q];
  on(transpose_op(name, ref(hbm_view(y.at, 0, in, 0, b)), ref(a)));
  const HbmMatrix g = hbm_view(x.mb == 0 ? y.g : y.gt, 0, in + 1, 0, H);
  on(matmul_op(name, ref(g), ref(hbm_view(y.at, 0, in + 1, 0, b)), ref(dy)));
  if (x.mb > 0) {  // g = g + g_mb: f32, one rounding, micro-batch 0 first
    VectorMapRefs vm;
    vm.map.rows = in + 1;
    vm.map.cols = H;
    vm.map.ops = {{VpuOp::kAdd, 0, 1, false}};
    vm.map.out = {{2, HbmMatrix{}}};
    const HbmMatrix acc = hbm_view(y.g, 0, in + 1, 0, H);
    vm.in = {ref(acc), ref(g)};
    vm.out = {ref(acc)};
    on(vector_map_op(name, vm));
  }
  if (l == 0) return;
  on(matmul_op(name, ref(y.da), ref(dy), ref(hbm_view(y.wb, 0, in, 0, H)), {}, false, true));
  VectorMapRefs vm;
  vm.map.rows = b;
  vm.map.cols = H;
  vm.map.const_rows = {kBigRow, kOneRow};
  vm.map.ops = {{VpuOp::kMul, 1, 2, false},
                {VpuOp::kMul, 4, 2, false},
                {VpuOp::kMin, 5, 3, false},
                {VpuOp::kMul, 0, 6, true}};
  vm.map.out = {{7, HbmMatrix{}}};
  vm.in = {ref(y.da), ref(a)};
  vm.consts = ref(consts);
  vm.out = {ref(l > l0 ? place[q - 1].dy : dysend[r])};
  on(vector_map_op(name, vm));
}

// A backward slot: the gradient in (from the virtual stage after), the chunk's layers last
// first, the input's gradient back to the virtual stage before.
void PipelineTrainer::Impl::add_backward(const MlpSpec& spec, int s, const PipeSlot& x) {
  const int j = virt(s, x.chunk);
  const auto [l0, l1] = chunk[static_cast<std::size_t>(j)];
  const std::size_t r =
      static_cast<std::size_t>(slot_of[static_cast<std::size_t>(s)].at({x.mb, x.chunk}));
  const std::string tag = mb_text(x.mb, x.chunk, v);
  if (l1 + 1 < spec.layers())
    add_recv("recv grad" + tag, s, x.mb, j + 1, true, place[q_of(j, l1)].dy);
  for (std::size_t l = l1 + 1; l-- > l0;) add_layer_backward(spec, s, x, l, "B" + tag);
  if (l0 > 0) add_p2p("send grad" + tag, s, stage_of_virt(j - 1), x.mb, j, true, dysend[r]);
}

// The stages' tables merged into one op list: each stage's slots in its order, a slot only after
// the slot whose block it receives (a receive after its send); a table that cannot go on is a
// std::logic_error.
void PipelineTrainer::Impl::add_slots(const MlpSpec& spec) {
  for (const auto& [s, x] : pipeline_merged_order(table, v)) {
    if (x.backward)
      add_backward(spec, s, x);
    else
      add_forward(spec, s, x);
  }
}

// After the slots: the gradients all-reduced over the data axis (per stage, its chips), SGD.
void PipelineTrainer::Impl::add_tail(const MlpSpec& spec) {
  const Topology& topo = wl->host().info().topo;
  int coll = 0;
  for (int s = 0; s < P; ++s)
    for (int c = 0; c < v; ++c) {
      const auto [l0, l1] = chunk[static_cast<std::size_t>(virt(s, c))];
      for (std::size_t l = l1 + 1; l-- > l0;) {
        const Place& y = place[q_of(virt(s, c), l)];
        const std::size_t in = spec.widths[l];
        if (D > 1) {
          CollectiveOp co;
          co.spec.collective = Collective::kAllReduce;
          co.spec.dtype = DType::kF32;
          co.spec.n = (in + 1) * H;
          co.spec.group_dims = data_dims;
          std::size_t active = 0;
          for (int dim : topo.active_dims())
            active += data_dims.empty() ||
                      std::find(data_dims.begin(), data_dims.end(), dim) != data_dims.end();
          co.spec.algorithm = active >= 2 ? "torus" : "biring";
          co.in = ref(hbm_view(y.g, 0, in + 1, 0, H));
          co.out = ref(hbm_view(y.gs, 0, in + 1, 0, H));
          co.axis = "data";
          co.gradient = true;
          co.fit_algorithm = true;
          co.label_steps = false;
          Op op = collective_op("all_reduce dW" + std::to_string(l), co);
          op.chips = chips_of(s);
          add(std::move(op), 2 * K + coll++ % 3);
          colls.push_back(Coll{l, s, {}});
        }
        VectorMapRefs vm;
        vm.map.rows = in + 1;
        vm.map.cols = H;
        vm.map.const_rows = {kNegLrRow};
        vm.map.ops = {{VpuOp::kMul, 0, 2, false},
                      {VpuOp::kAdd, 1, 3, false},
                      {VpuOp::kCvtF32Bf16, 4, -1, true}};
        vm.map.out = {{4, HbmMatrix{}}, {5, HbmMatrix{}}};
        vm.in = {ref(hbm_view(y.gs, 0, in + 1, 0, H)), ref(hbm_view(y.w, 0, in + 1, 0, H))};
        vm.consts = ref(consts);
        vm.out = {ref(hbm_view(y.w, 0, in + 1, 0, H)), ref(hbm_view(y.wb, 0, in + 1, 0, H))};
        Op op = vector_map_op("sgd " + std::to_string(l), vm);
        op.chips = chips_of(s);
        add(std::move(op));
      }
    }
}

PipelineTrainer::PipelineTrainer(HostPort& host, MlpSpec spec, PipelineOptions opt)
    : host_(host), spec_(std::move(spec)), opt_(std::move(opt)), impl_(std::make_unique<Impl>()) {
  const MachineInfo& mi = host_.info();
  const ChipShape& s = mi.shape;
  Impl& m = *impl_;
  m.apply_mesh(mi, opt_.mesh);
  spec_.chips = m.D;
  spec_.model = 1;
  spec_.data_rank.clear();
  spec_.model_rank.clear();
  spec_.lanes = s.cols;
  spec_.microbatches = opt_.microbatches;
  if (spec_.loss_chunk == 0) spec_.loss_chunk = 1;  // set from the plan below
  spec_.validate();
  for (std::size_t i = 2; i < spec_.widths.size(); ++i)
    if (spec_.widths[i] != spec_.widths[1])
      throw std::invalid_argument(
          "train: a pipelined MLP needs every width after the inputs "
          "equal (the stages share buffer shapes): width " +
          std::to_string(spec_.widths[i]) + " after " + std::to_string(spec_.widths[1]));
  if (spec_.batch / spec_.microbatches > 0xFFFF)
    throw std::invalid_argument("train: a micro-batch above 65535 examples");
  m.plan_slots(spec_, opt_);
  hbm_used_ = m.layout(host_, spec_);
  // The sends' regions: K per direction (as many as the micro-batches, as VMEM and the counters
  // allow), three more for the gradients' all-reduces.
  const uint32_t send_rows = m.aout.empty() ? 0 : p2p_rows(m.aout[0], s.cols);  // as sent
  const int extra = m.D > 1 ? 3 : 0;
  const int kmax_counters = m.D > 1 ? (16 - extra) / 2 : kIciCounters / 2;
  m.K = std::min(m.m * m.v, kmax_counters);
  while (m.K > 1 && (s.vmem_rows / 2) / static_cast<uint32_t>(2 * m.K + extra) < 2 * send_rows)
    --m.K;
  m.loss_map.rows = m.b;
  m.loss_map.cols = m.H;
  m.loss_map.const_rows = {kScaleRow};
  m.loss_map.ops = {
      {VpuOp::kSub, 0, 1, false}, {VpuOp::kMul, 3, 3, false}, {VpuOp::kMul, 3, 2, true}};
  m.loss_map.out = {{5, HbmMatrix{}}};
  m.loss_map.sum = 4;
  for (std::size_t i = 0; i < m.table.size(); ++i)
    for (const PipeSlot& x : m.table[i])
      m.wl->declare_phase((x.backward ? "B" : "F") + mb_text(x.mb, x.chunk, m.v));
  m.add_slots(spec_);
  m.add_tail(spec_);
  ScheduleOptions so;
  so.collective_regions = static_cast<std::size_t>(2 * m.K + extra);
  so.comm_region = m.region;
  Schedule sch = schedule(*m.wl, so);
  m.program = std::move(sch.program);
  for (std::size_t i = 0; i < m.colls.size(); ++i) m.colls[i].rounds = sch.collectives.at(i).rounds;
  VpuMap lm = m.loss_map;  // the loss's chunk, as the scheduler planned it
  lm.in = {hbm_view(m.pred, 0, m.b, 0, m.H), hbm_view(m.t, 0, m.b, 0, m.H)};
  lm.consts = m.consts;
  lm.out[0].second = m.dyloss[0];
  lm.sum_out = hbm_view(m.loss, 0, m.lrows, 0, m.loss.cols);
  spec_.loss_chunk = plan_vpu_map(lm, s, 0, sch.vmem_compute).chunk;
  host_.run_until_idle();  // planning's constant rows land before any backdoor use
}

PipelineTrainer::~PipelineTrainer() = default;

int PipelineTrainer::stages() const { return impl_->P; }
int PipelineTrainer::stage_of(int chip) const {
  return impl_->stage_of.at(static_cast<std::size_t>(chip));
}
int PipelineTrainer::data_rank_of(int chip) const {
  return impl_->data_of.at(static_cast<std::size_t>(chip));
}
const std::vector<std::vector<PipeSlot>>& PipelineTrainer::slots() const { return impl_->table; }

std::vector<std::size_t> PipelineTrainer::layers_of_stage(int stage) const {
  const Impl& m = *impl_;
  std::vector<std::size_t> ls;
  for (int c = 0; c < m.v; ++c) {
    const auto [l0, l1] = m.chunk[static_cast<std::size_t>(m.virt(stage, c))];
    for (std::size_t l = l0; l <= l1; ++l) ls.push_back(l);
  }
  return ls;
}

uint64_t PipelineTrainer::step_macs() const {
  uint64_t macs = 0;
  for (std::size_t l = 0; l < spec_.layers(); ++l)
    macs += (l > 0 ? 3u : 2u) * static_cast<uint64_t>(spec_.widths[l]) * spec_.widths[l + 1] *
            spec_.batch;
  return macs * static_cast<uint64_t>(spec_.chips);
}

namespace {

}  // namespace

uint64_t PipelineTrainer::load_data(const MlpData& data) {
  const Impl& m = *impl_;
  const std::size_t B = spec_.batch, din = spec_.widths.front(), dout = spec_.widths.back();
  if (data.x.size() != spec_.global_batch() * din || data.t.size() != spec_.global_batch() * dout)
    throw std::invalid_argument("train: the batch must be " + std::to_string(spec_.global_batch()) +
                                " examples of " + std::to_string(din) + " inputs and " +
                                std::to_string(dout) + " targets");
  std::vector<HbmImage> img;
  for (int c = 0; c < host_.info().num_chips(); ++c) {
    const ChipDriver& d = m.wl->driver(c);
    const std::size_t ci = static_cast<std::size_t>(data_rank_of(c));
    const int s = stage_of(c);
    if (s == 0) {  // the inputs: the first stage's
      const std::vector<bf16_t> x(data.x.begin() + static_cast<std::ptrdiff_t>(ci * B * din),
                                  data.x.begin() + static_cast<std::ptrdiff_t>((ci + 1) * B * din));
      img.push_back(HbmImage{c, m.xd.addr, d.matrix_image(m.xd, x)});
    }
    if (s == m.P - 1) {  // the targets: the last stage's
      const std::vector<float> t(data.t.begin() + static_cast<std::ptrdiff_t>(ci * B * dout),
                                 data.t.begin() + static_cast<std::ptrdiff_t>((ci + 1) * B * dout));
      img.push_back(HbmImage{c, m.t.addr, d.matrix_image(m.t, t)});
    }
  }
  return put_images(host_, img, opt_.backdoor);
}

uint64_t PipelineTrainer::load_params(const MlpParams& params) {
  const Impl& m = *impl_;
  const std::size_t L = spec_.layers();
  if (params.size() != L)
    throw std::invalid_argument("train: parameters for " + std::to_string(params.size()) +
                                " layers, the network has " + std::to_string(L));
  const std::vector<float> consts = mlp_const_rows(spec_);
  std::vector<HbmImage> img;
  for (int c = 0; c < host_.info().num_chips(); ++c) {
    const ChipDriver& d = m.wl->driver(c);
    img.push_back(HbmImage{c, m.consts.addr, d.matrix_image(m.consts, consts)});
    const int s = stage_of(c);
    for (int ch = 0; ch < m.v; ++ch) {
      const int j = m.virt(s, ch);
      const auto [l0, l1] = m.chunk[static_cast<std::size_t>(j)];
      for (std::size_t l = l0; l <= l1; ++l) {
        const Impl::Place& y = m.place[m.q_of(j, l)];
        const std::size_t in = spec_.widths[l], rows = y.w.rows;
        if (params[l].w.size() != in * m.H || params[l].b.size() != m.H)
          throw std::invalid_argument("train: layer " + std::to_string(l) + " needs W " +
                                      std::to_string(in) + "x" + std::to_string(m.H) + " and b " +
                                      std::to_string(m.H));
        std::vector<float> w(rows * m.H, 0.0f);  // W, then b in row `in`, zeros below
        std::copy(params[l].w.begin(), params[l].w.end(), w.begin());
        std::copy(params[l].b.begin(), params[l].b.end(),
                  w.begin() + static_cast<std::ptrdiff_t>(in * m.H));
        push_layer_images(d, c, y.w, y.wb, y.at, w, in, rows, m.b, img);
      }
    }
  }
  return put_images(host_, img, opt_.backdoor);
}

TrainStepRun PipelineTrainer::step() {
  const Impl& m = *impl_;
  // The loss partials: the last stage's chip of each data rank, one burst per micro-batch.
  std::vector<std::pair<int, uint64_t>> loss_at;
  for (int d = 0; d < m.D; ++d)
    for (std::size_t k = 0; k < spec_.microbatches; ++k)  // micro-batch k: rows [k lrows, ...)
      loss_at.emplace_back(
          m.chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(m.P - 1)],
          hbm_view(m.loss, k * m.lrows, m.lrows, 0, m.loss.cols).addr);
  return run_step_program(host_, m.program, spec_, loss_at);
}

MlpParams PipelineTrainer::read_params(int chip) {
  const Impl& m = *impl_;
  MlpParams p(spec_.layers());
  const int s = stage_of(chip);
  for (int ch = 0; ch < m.v; ++ch) {
    const int j = m.virt(s, ch);
    const auto [l0, l1] = m.chunk[static_cast<std::size_t>(j)];
    for (std::size_t l = l0; l <= l1; ++l) {
      p[l] = read_layer(host_, chip, m.place[m.q_of(j, l)].w, spec_.widths[l], m.H);
    }
  }
  return p;
}

GradAllReduce PipelineTrainer::golden_all_reduce() const {
  const Impl* m = impl_.get();
  const int chips = host_.info().num_chips();
  return [m, chips](std::size_t layer, const std::vector<std::vector<uint32_t>>& in) {
    if (m->D == 1) return in;
    for (const Impl::Coll& c : m->colls) {
      if (c.layer != layer) continue;
      // The rounds ran on every chip's buffer: the stage's chips hold their replica's
      // gradient, the others zeros (their results are not used).
      std::vector<std::vector<uint32_t>> all(static_cast<std::size_t>(chips),
                                             std::vector<uint32_t>(in.at(0).size(), 0));
      for (int d = 0; d < m->D; ++d)
        all[static_cast<std::size_t>(
            m->chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(c.stage)])] =
            in.at(static_cast<std::size_t>(d));
      const auto sum = golden_collective(c.rounds, all);
      std::vector<std::vector<uint32_t>> res;
      for (int d = 0; d < m->D; ++d)
        res.push_back(sum.at(static_cast<std::size_t>(
            m->chip_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(c.stage)])));
      return res;
    }
    throw std::logic_error("pipeline: no all-reduce of layer " + std::to_string(layer));
  };
}

namespace {

uint64_t median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<uint64_t>(std::llround(v[v.size() / 2]));
}

// The hop and gap of the shown chips' slots, and the table's timed bubbles with them.
void model_bubbles(PipelineStats* st, const std::vector<std::vector<PipeSlot>>& table, int v) {
  const int P = static_cast<int>(table.size()), last = P * v - 1;
  if (st->stages.size() != table.size()) return;
  std::map<std::tuple<int, int, bool>, std::pair<double, double>> at;  // slot -> [start, end)
  std::vector<std::vector<double>> dur(table.size()), pre(table.size());
  for (int s = 0; s < P; ++s) {
    std::map<std::string, const PipelineSlotSpan*> by_name;
    for (const PipelineSlotSpan& x : st->stages[static_cast<std::size_t>(s)].slots)
      by_name[x.slot] = &x;
    for (const PipeSlot& x : table[static_cast<std::size_t>(s)]) {
      const auto it = by_name.find((x.backward ? "B" : "F") + mb_text(x.mb, x.chunk, v));
      if (it == by_name.end()) return;  // a slot not on the timeline: no model
      const PipelineSlotSpan& y = *it->second;
      at[{x.mb, x.chunk * P + s, x.backward}] = {static_cast<double>(y.start),
                                                 static_cast<double>(y.end)};
      dur[static_cast<std::size_t>(s)].push_back(static_cast<double>(y.end - y.start));
      pre[static_cast<std::size_t>(s)].push_back(static_cast<double>(y.pre));
    }
  }
  std::vector<double> hops, gaps;
  for (int s = 0; s < P; ++s) {
    const auto& tab = table[static_cast<std::size_t>(s)];
    for (std::size_t i = 0; i < tab.size(); ++i) {
      const PipeSlot& x = tab[i];
      const int j = x.chunk * P + s;
      const std::pair<double, double> me = at.at({x.mb, j, x.backward});
      const double prev = i > 0 ? at.at({tab[i - 1].mb, tab[i - 1].chunk * P + s,
                                         tab[i - 1].backward}).second
                                : -1.0;
      const int need = x.backward ? (j == last ? -1 : j + 1) : j - 1;
      if (need >= 0 && need % P != s) {
        const double dep = at.at({x.mb, need, x.backward}).second;
        if (dep >= prev) {
          hops.push_back(me.first - dep);
          continue;
        }
      }
      if (i > 0) gaps.push_back(me.first - prev);
    }
  }
  st->hop_cycles = median(hops);
  st->gap_cycles = median(gaps);
  const std::vector<double> b = pipeline_timed_bubbles(
      table, v, dur, static_cast<double>(st->gap_cycles), static_cast<double>(st->hop_cycles), pre);
  for (std::size_t s = 0; s < b.size(); ++s) st->stages[s].bubble_model = b[s];
  const std::vector<double> b0 = pipeline_timed_bubbles(table, v, dur, 0, 0, pre);
  for (std::size_t s = 0; s < b0.size(); ++s) st->stages[s].bubble_no_hop = b0[s];
}

}  // namespace

PipelineStats pipeline_timeline_stats(const std::vector<TraceEvent>& events,
                                      const std::vector<int>& stage_of_chip,
                                      const std::vector<int>& shown,
                                      const std::vector<std::vector<PipeSlot>>& table, int v) {
  const std::size_t chips = stage_of_chip.size(), P = shown.size();
  PipelineStats st;
  uint64_t t0 = UINT64_MAX, t1 = 0;
  // Per chip, the [issue, done) of its F and B commands on the compute units (not the ICI's);
  // per stage, its shown chip's slots: phase -> its commands' [issue, done), and when its
  // receive's wait ended (the scheduler starts a slot's loads that need nothing received before).
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> busy(chips);
  std::vector<std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>>> slots(P);
  std::vector<std::map<std::string, uint64_t>> arrived(P);
  for (const TraceEvent& e : events) {
    if (e.unit == TraceUnit::kHost) continue;
    t0 = std::min(t0, e.issue);
    const std::string phase = phase_of_label(e.label);
    const std::size_t s = static_cast<std::size_t>(stage_of_chip[static_cast<std::size_t>(e.chip)]);
    if (e.unit == TraceUnit::kIciWait && shown[s] == e.chip)
      arrived[s][phase] = std::max(arrived[s][phase], e.done);
    if (e.unit == TraceUnit::kIciSend || e.unit == TraceUnit::kIciWait ||
        e.unit == TraceUnit::kSeq || !is_slot_phase(phase) || e.done <= e.issue)
      continue;
    busy[static_cast<std::size_t>(e.chip)].push_back({e.issue, e.done});
    t1 = std::max(t1, e.done);
    if (shown[s] == e.chip) slots[s][phase].push_back({e.issue, e.done});
  }
  if (t1 <= t0) return st;
  st.span = t1 - t0;
  st.stages.assign(P, PipelineStageStats{});
  for (std::size_t s = 0; s < P; ++s) {
    std::vector<PipelineSlotSpan>& out = st.stages[s].slots;
    for (const auto& [name, cmds] : slots[s]) {
      uint64_t first = UINT64_MAX, last = 0;
      for (const auto& [issue, done] : cmds) {
        first = std::min(first, issue);
        last = std::max(last, done);
      }
      // A slot starts when its block is there; what it ran before (what needs nothing received)
      // ran beside the wait.
      const auto in = arrived[s].find((name[0] == 'F' ? "recv act" : "recv grad") + name.substr(1));
      const uint64_t start = in == arrived[s].end() ? first : std::max(first, in->second);
      uint64_t pre_end = first;
      for (const auto& [issue, done] : cmds)
        if (issue < start) pre_end = std::max(pre_end, std::min(done, start));
      out.push_back(PipelineSlotSpan{name, start - t0, last - t0, pre_end - first});
    }
    std::sort(out.begin(), out.end(), [](const PipelineSlotSpan& a, const PipelineSlotSpan& b) {
      return a.start < b.start;
    });
  }
  std::vector<int> per_stage(P, 0);
  for (int s : stage_of_chip) ++per_stage[static_cast<std::size_t>(s)];
  for (std::size_t c = 0; c < chips; ++c) {
    const uint64_t covered = covered_cycles(busy[c]);
    const std::size_t s = static_cast<std::size_t>(stage_of_chip[c]);
    PipelineStageStats& x = st.stages[s];
    x.busy += covered / static_cast<uint64_t>(per_stage[s]);
    x.bubble += (1.0 - static_cast<double>(covered) / static_cast<double>(st.span)) / per_stage[s];
    if (covered > 0)
      x.bubble_of_ideal +=
          (static_cast<double>(st.span) / static_cast<double>(covered) - 1.0) / per_stage[s];
  }
  model_bubbles(&st, table, v);
  return st;
}

PipelineStats PipelineTrainer::measure(const std::vector<TraceEvent>& events) const {
  const Impl& m = *impl_;
  PipelineStats st = pipeline_timeline_stats(events, m.stage_of, m.chip_at[0], m.table, m.v);
  if (st.stages.empty()) return st;
  for (int s = 0; s < m.P; ++s) {
    PipelineStageStats& x = st.stages[static_cast<std::size_t>(s)];
    const std::vector<std::size_t> ls = layers_of_stage(s);
    x.first_layer = ls.front();
    x.last_layer = ls.back();
    // The activations the backward needs, held from a slot's F to its B: each layer's input
    // (the first layer's is the data, held anyway), bf16.
    const auto& tab = m.table[static_cast<std::size_t>(s)];
    x.peak_in_flight = pipeline_peak_in_flight(tab);
    x.peak_activation_bytes = pipeline_peak_bytes(tab, [&](const PipeSlot& p) {
      const auto [l0, l1] = m.chunk[static_cast<std::size_t>(m.virt(s, p.chunk))];
      uint64_t one = 0;
      for (std::size_t l = std::max<std::size_t>(l0, 1); l <= l1; ++l)
        one += static_cast<uint64_t>(m.b) * spec_.widths[l] * 2;
      if (l1 + 1 == spec_.layers()) one += static_cast<uint64_t>(m.b) * m.H * 2;  // the loss's dY
      return one;
    });
  }
  return st;
}

TrainCheck check_pipeline_params(const PipelineTrainer& tr, const std::vector<MlpParams>& got,
                                 const MlpGolden& golden) {
  TrainCheck k;
  for (std::size_t c = 0; c < got.size(); ++c) {
    const int s = tr.stage_of(static_cast<int>(c));
    const int d = tr.data_rank_of(static_cast<int>(c));
    const MlpParams& want = golden.params(d);
    std::size_t first = 0;  // data rank 0's chip of the same stage
    while (tr.stage_of(static_cast<int>(first)) != s ||
           tr.data_rank_of(static_cast<int>(first)) != 0)
      ++first;
    for (std::size_t l : tr.layers_of_stage(s)) {
      auto cmp = [&](const std::vector<float>& a, const std::vector<float>& b,
                     const std::vector<float>& f) {
        for (std::size_t i = 0; i < b.size(); ++i) {
          ++k.compared;
          if (i >= a.size() || f32_bits(a[i]) != f32_bits(b[i])) ++k.mismatches;
          if (i < a.size() && i < f.size() && f32_bits(a[i]) != f32_bits(f[i]))
            ++k.replica_mismatches;
        }
      };
      cmp(got[c][l].w, want[l].w, got[first][l].w);
      cmp(got[c][l].b, want[l].b, got[first][l].b);
    }
  }
  return k;
}

double PipelineStats::heaviest_stage_bubble() const {
  uint64_t most = 0;
  for (const PipelineStageStats& s : stages) most = std::max(most, s.busy);
  return span > 0 ? 1.0 - static_cast<double>(most) / static_cast<double>(span) : 0.0;
}

// The mean of the steps' measurements (sums divided at the end).
void add_pipeline_stats(PipelineStats* sum, const PipelineStats& s) {
  sum->span += s.span;
  sum->hop_cycles += s.hop_cycles;
  sum->gap_cycles += s.gap_cycles;
  if (sum->stages.empty()) sum->stages.assign(s.stages.size(), PipelineStageStats{});
  for (std::size_t i = 0; i < s.stages.size(); ++i) {
    PipelineStageStats& a = sum->stages[i];
    a.first_layer = s.stages[i].first_layer;
    a.last_layer = s.stages[i].last_layer;
    a.bubble += s.stages[i].bubble;
    a.bubble_of_ideal += s.stages[i].bubble_of_ideal;
    a.bubble_model += s.stages[i].bubble_model;
    a.bubble_no_hop += s.stages[i].bubble_no_hop;
    a.busy += s.stages[i].busy;
    a.peak_in_flight = s.stages[i].peak_in_flight;
    a.peak_activation_bytes = s.stages[i].peak_activation_bytes;
    if (a.slots.empty()) a.slots = s.stages[i].slots;
  }
}

void divide_pipeline_stats(PipelineStats* s, std::size_t n) {
  if (n == 0) return;
  s->span /= n;
  s->hop_cycles /= n;
  s->gap_cycles /= n;
  for (PipelineStageStats& a : s->stages) {
    a.bubble /= static_cast<double>(n);
    a.bubble_of_ideal /= static_cast<double>(n);
    a.bubble_model /= static_cast<double>(n);
    a.bubble_no_hop /= static_cast<double>(n);
    a.busy /= n;
  }
}

TrainRunResult run_pipeline_training(HostPort& host, const MlpSpec& spec,
                                     const PipelineOptions& opt, const TrainRunOptions& ro) {
  TrainRunResult r;
  r.run = ro;
  r.options.mesh = opt.mesh;
  PipelineTrainer tr(host, spec, opt);
  const MlpSpec& sp = tr.spec();
  r.spec = sp;
  const MachineInfo& mi = host.info();
  const int P = mi.num_chips();
  r.pipeline.on = true;
  r.pipeline.schedule = pipe_schedule_text(opt.schedule);
  r.pipeline.microbatches = opt.microbatches;
  r.pipeline.stages = tr.stages();
  r.pipeline.bubble_formula =
      pipeline_bubble_formula(opt.schedule, tr.stages(), static_cast<int>(opt.microbatches));
  r.pipeline.bubble_formula_of_ideal = pipeline_bubble_formula_of_ideal(
      opt.schedule, tr.stages(), static_cast<int>(opt.microbatches));
  r.pipeline.bubble_formula_text = pipeline_bubble_formula_text(opt.schedule);
  r.init = init_mlp_params(sp, ro.seed);
  r.batches.push_back(make_mlp_data(sp, ro.seed, 0));
  r.hbm_bytes_per_chip = tr.hbm_bytes_per_chip();
  MlpGolden golden(sp, r.init);
  r.load_cycles = tr.load_params(r.init) + tr.load_data(r.batches[0]);
  TraceOptions topt;
  topt.enabled = true;  // the bubbles come from the timeline
  host.set_trace(topt);
  r.macs_per_step = tr.step_macs();
  const uint64_t peak = peak_macs_per_cycle(mi.shape.rows, mi.shape.cols);
  r.total.assign(static_cast<std::size_t>(P), ChipCounters{});
  for (std::size_t s = 0; s < ro.steps; ++s) {
    if (ro.fresh_batches && s > 0) {
      r.batches.push_back(make_mlp_data(sp, ro.seed, s));
      r.load_cycles += tr.load_data(r.batches.back());
    }
    const MlpData& data = r.batches.back();
    if (ro.progress) {
      const uint64_t c0 = host.cycle();
      host.progress = [&, c0](uint64_t) { ro.progress(s, host.cycle() - c0); };
    }
    const TrainStepRun run = tr.step();
    host.progress = nullptr;
    std::vector<TraceEvent> ev = host.take_trace();
    add_pipeline_stats(&r.pipeline.stats, tr.measure(ev));
    const double hidden = allreduce_hidden_fraction(run, ev);
    if (s >= ro.trace_from && s < ro.trace_to) r.trace.insert(r.trace.end(), ev.begin(), ev.end());
    const MlpStepResult g = golden.step(data, tr.golden_all_reduce());
    std::vector<MlpParams> got;
    for (int c = 0; c < P; ++c) got.push_back(tr.read_params(c));
    record_step(r, ro, s, run, g, check_pipeline_params(tr, got, golden), hidden, peak);
    if (s + 1 == ro.steps) {  // the whole network from data rank 0's stages
      r.final_params.assign(sp.layers(), MlpLayer{});
      for (int c = 0; c < P; ++c)
        if (tr.data_rank_of(c) == 0)
          for (std::size_t l : tr.layers_of_stage(tr.stage_of(c)))
            r.final_params[l] = got[static_cast<std::size_t>(c)][l];
    }
  }
  divide_pipeline_stats(&r.pipeline.stats, ro.steps);
  host.set_trace(TraceOptions{});
  return r;
}

}  // namespace tpu
