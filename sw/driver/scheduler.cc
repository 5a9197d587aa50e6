#include "scheduler.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <utility>

namespace tpu {
namespace {

[[noreturn]] void bad_op(const Op& op, const std::string& what) {
  throw std::invalid_argument(std::string(op_kind_name(op.kind)) + " '" + op.name + "': " + what);
}

bool is_comm(const Op& op) {
  return op.kind == OpKind::kCollective || op.kind == OpKind::kSend || op.kind == OpKind::kRecv ||
         op.kind == OpKind::kHostCopy;
}

bool is_gradient(const Op& op) { return op.kind == OpKind::kCollective && op.coll.gradient; }

bool share_chip(const Op& a, const Op& b, int chips) {
  for (int c = 0; c < chips; ++c)
    if (a.runs_on(c) && b.runs_on(c)) return true;
  return false;
}

std::size_t elem_bytes(DType d) { return d == DType::kBf16 ? 2 : 4; }

}  // namespace

Workload::Workload(HostPort& host) : host_(host) {
  for (int c = 0; c < host.info().num_chips(); ++c)
    drv_.push_back(std::make_unique<ChipDriver>(host, c));
}

Workload::~Workload() = default;

int Workload::add_buffer(Buffer b) {
  HbmMatrix m;
  for (std::size_t c = 0; c < drv_.size(); ++c) {
    HbmMatrix here;
    try {
      if (b.pitch) {
        here.rows = b.rows;
        here.cols = b.cols;
        here.pitch = b.pitch;
        here.dtype = b.dtype;
        here.addr = drv_[c]->alloc(std::max<uint64_t>(b.bytes, here.bytes()));
      } else {
        here = drv_[c]->alloc_matrix(b.rows, b.cols, b.dtype);
      }
    } catch (const std::runtime_error& e) {
      throw BufferDoesNotFit("buffer '" + b.name + "' (" + std::to_string(b.rows) + "x" +
                             std::to_string(b.cols) + ") does not fit in chip " +
                             std::to_string(c) + "'s HBM (" +
                             std::to_string(host_.info().shape.hbm_bytes) + " bytes): " + e.what());
    }
    if (c == 0) m = here;
    if (here.addr != m.addr)
      throw std::logic_error("workload: buffer '" + b.name + "' lies apart on chip " +
                             std::to_string(c));
  }
  buffers_.push_back(std::move(b));
  mats_.push_back(m);
  return static_cast<int>(buffers_.size()) - 1;
}

HbmMatrix Workload::view(const BufferRef& r) const {
  const HbmMatrix& m = matrix(r.buffer);
  return hbm_view(m, r.row0, r.rows ? r.rows : m.rows - r.row0, r.col0,
                  r.cols ? r.cols : m.cols - r.col0);
}

namespace {
int buffer_at(const std::vector<HbmMatrix>& mats, uint64_t addr) {
  for (std::size_t i = 0; i < mats.size(); ++i)
    if (addr >= mats[i].addr && addr < mats[i].addr + std::max<uint64_t>(mats[i].bytes(), 1))
      return static_cast<int>(i);
  throw std::logic_error("workload: HBM address " + std::to_string(addr) + " is in no buffer");
}
}  // namespace

BufferRef Workload::ref_of(const HbmMatrix& v) const {
  const int b = buffer_at(mats_, v.addr);
  const HbmMatrix& m = matrix(b);
  const uint64_t off = (v.addr - m.addr) / m.esize();
  if (v.pitch != m.pitch || v.dtype != m.dtype || (v.addr - m.addr) % m.esize() != 0)
    throw std::logic_error("workload: a view of buffer '" + buffer(b).name +
                           "' with its own pitch");
  BufferRef r{b, static_cast<std::size_t>(off / m.pitch), v.rows,
              static_cast<std::size_t>(off % m.pitch), v.cols};
  if (r.row0 + r.rows > m.rows || r.col0 + r.cols > m.cols)
    throw std::logic_error("workload: a view beyond buffer '" + buffer(b).name + "'");
  return r;
}

BufferRef Workload::ref_span(uint64_t addr, uint64_t bytes) const {
  const int b = buffer_at(mats_, addr);
  const HbmMatrix& m = matrix(b);
  const uint64_t row = m.pitch * m.esize();
  const std::size_t r0 = static_cast<std::size_t>((addr - m.addr) / row);
  const std::size_t r1 = static_cast<std::size_t>((addr - m.addr + bytes + row - 1) / row);
  if (r1 > m.rows)
    throw std::logic_error("workload: " + std::to_string(bytes) + " bytes beyond buffer '" +
                           buffer(b).name + "'");
  return BufferRef{b, r0, r1 - r0, 0, 0};
}

uint64_t Workload::hbm_used() const { return drv_.empty() ? 0 : drv_[0]->allocated(); }

int Workload::add_op(Op op) {
  const int idx = static_cast<int>(ops_.size());
  std::vector<BufferRef> refs = op.reads();
  const std::vector<BufferRef> w = op.writes();
  refs.insert(refs.end(), w.begin(), w.end());
  for (const BufferRef& r : refs)
    if (r.buffer >= static_cast<int>(buffers_.size()))
      bad_op(op, "buffer " + std::to_string(r.buffer) + " is not declared");
  for (int c : op.chips)
    if (c < 0 || c >= num_chips()) bad_op(op, "chip " + std::to_string(c) + " is not the pod's");
  for (int a : op.after)
    if (a < 0 || a >= idx) bad_op(op, "it follows op " + std::to_string(a) + ", not an earlier op");
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    if (op.from < 0 || op.from >= num_chips() || op.to < 0 || op.to >= num_chips())
      bad_op(op, "its chips " + std::to_string(op.from) + " -> " + std::to_string(op.to) +
                     " are not the pod's");
  }
  if (op.kind == OpKind::kRecv) {
    if (op.peer < 0 || op.peer >= idx ||
        ops_[static_cast<std::size_t>(op.peer)].kind != OpKind::kSend)
      bad_op(op, "op " + std::to_string(op.peer) + " is not an earlier send");
    const Op& s = ops_[static_cast<std::size_t>(op.peer)];
    if (s.from != op.from || s.to != op.to)
      bad_op(op, "its chips are not those of its send '" + s.name + "'");
  }
  ops_.push_back(std::move(op));
  return idx;
}

std::vector<std::vector<int>> op_dependencies(const Workload& w) {
  const std::vector<Op>& ops = w.ops();
  std::vector<std::vector<int>> deps(ops.size());
  for (std::size_t j = 0; j < ops.size(); ++j) {
    const std::vector<BufferRef> rj = ops[j].reads(), wj = ops[j].writes();
    for (std::size_t i = 0; i < j; ++i) {
      bool dep = std::find(ops[j].after.begin(), ops[j].after.end(), static_cast<int>(i)) !=
                 ops[j].after.end();
      if (!dep && share_chip(ops[i], ops[j], w.num_chips())) {
        const std::vector<BufferRef> ri = ops[i].reads(), wi = ops[i].writes();
        for (const BufferRef& x : wi)
          for (const BufferRef& y : rj) dep = dep || refs_overlap(x, y, w.buffers());
        for (const BufferRef& x : wj) {
          for (const BufferRef& y : ri) dep = dep || refs_overlap(x, y, w.buffers());
          for (const BufferRef& y : wi) dep = dep || refs_overlap(x, y, w.buffers());
        }
      }
      if (dep) deps[j].push_back(static_cast<int>(i));
    }
  }
  return deps;
}

// A collective opens a step that takes the compute after it that does not depend on it, up to
// the next op of communication or the first that does (lag: a gradient all-reduce's takes every
// op up to the next communication but a gradient all-reduce); a send, a receive or a host copy
// is a step alone; compute between them is one step.
std::vector<std::vector<int>> schedule_steps(const Workload& w, std::size_t first_op, bool lag) {
  return schedule_steps(w, op_dependencies(w), first_op, lag);
}

std::vector<std::vector<int>> schedule_steps(const Workload& w,
                                             const std::vector<std::vector<int>>& deps,
                                             std::size_t first_op, bool lag) {
  const std::vector<Op>& ops = w.ops();
  std::vector<std::vector<int>> steps;
  const int n = static_cast<int>(ops.size());
  for (int i = static_cast<int>(first_op); i < n;) {
    std::vector<int> st = {i};
    const Op& op = ops[static_cast<std::size_t>(i)];
    int j = i + 1;
    if (lag && is_gradient(op)) {
      for (; j < n; ++j) {
        const Op& o = ops[static_cast<std::size_t>(j)];
        if (is_comm(o) && !is_gradient(o)) break;
        st.push_back(j);
      }
    } else if (op.kind == OpKind::kCollective) {
      for (; j < n && !is_comm(ops[static_cast<std::size_t>(j)]); ++j) {
        const std::vector<int>& d = deps[static_cast<std::size_t>(j)];
        if (std::find(d.begin(), d.end(), i) != d.end()) break;
        st.push_back(j);
      }
    } else if (!is_comm(op)) {
      for (; j < n && !is_comm(ops[static_cast<std::size_t>(j)]); ++j) st.push_back(j);
    }
    steps.push_back(std::move(st));
    i = j;
  }
  return steps;
}

// The collectives and sends, in op order, share the VMEM above the compute area (half of it when
// there is one) and the ICI counters in `regions` equal parts; a collective alone (o.alone), the
// whole VMEM and every counter.
std::vector<CommWindow> comm_windows(const Workload& w, const ChipShape& s,
                                     const ScheduleOptions& o, uint32_t* vmem_compute) {
  std::vector<int> comm;
  for (std::size_t i = o.first_op; i < w.ops().size(); ++i) {
    const OpKind k = w.ops()[i].kind;
    if (k == OpKind::kCollective || k == OpKind::kSend) comm.push_back(static_cast<int>(i));
  }
  *vmem_compute = comm.empty() ? s.vmem_rows : s.vmem_rows / 2;
  std::vector<CommWindow> win;
  if (comm.empty()) return win;
  if (o.alone) {
    const Op& op = w.ops()[static_cast<std::size_t>(comm[0])];
    if (op.kind != OpKind::kCollective || w.ops().size() - o.first_op != 1)
      bad_op(op, "a program that runs alone holds one collective and nothing else (" +
                     std::to_string(w.ops().size() - o.first_op) + " ops)");
    *vmem_compute = 0;
    win.push_back(CommWindow{comm[0], 0, s.vmem_rows, 0, kIciCounters});
    return win;
  }
  const std::size_t regions = o.collective_regions ? o.collective_regions : comm.size();
  const uint32_t share = (s.vmem_rows - *vmem_compute) / static_cast<uint32_t>(regions);
  for (std::size_t k = 0; k < comm.size(); ++k) {
    const std::size_t oi = static_cast<std::size_t>(comm[k]);
    const bool given = o.collective_regions && oi < o.comm_region.size() && o.comm_region[oi] >= 0;
    const std::size_t r = given ? static_cast<std::size_t>(o.comm_region[oi]) : k % regions;
    if (r >= regions)
      bad_op(w.ops()[oi], "region " + std::to_string(r) + " of " + std::to_string(regions));
    CommWindow cw;
    cw.op = comm[k];
    cw.vmem_base = *vmem_compute + static_cast<uint32_t>(r) * share;
    cw.vmem_rows = share;
    cw.counter_base = static_cast<uint32_t>(r * kIciCounters / regions);
    cw.counter_count = static_cast<uint32_t>(kIciCounters / regions);
    if (cw.counter_count == 0 || share == 0)
      bad_op(w.ops()[static_cast<std::size_t>(comm[k])],
             "no VMEM rows or ICI counters left for it (" + std::to_string(regions) + " regions)");
    win.push_back(cw);
  }
  return win;
}

namespace {

// The collective compiled in its window (fit_algorithm: the asked algorithm, else the slower
// ones after it that fit); alone, with PodCollectiveOptions' defaults (the whole machine).
PodProgram compile_collective(Workload& w, const Op& op, const CommWindow& cw, bool alone) {
  PodDriver pd(w.host());
  const int P = w.num_chips();
  CollectiveBuffers bufs;
  bufs.in.assign(static_cast<std::size_t>(P), w.view(op.coll.in).addr);
  bufs.out.assign(static_cast<std::size_t>(P), w.view(op.coll.out).addr);
  PodCollectiveOptions o;
  if (!alone) {
    o.vmem_base = cw.vmem_base;
    o.vmem_rows = cw.vmem_rows;
    o.counter_base = cw.counter_base;
    o.counter_count = cw.counter_count;
    o.early_heads = false;  // several programs in one stream (PodCollectiveOptions)
  }
  CollectiveSpec cs = op.coll.spec;
  if (!op.coll.fit_algorithm) return pd.compile(cs, bufs, o);
  std::string first_error;
  bool from_here = false;
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
  bad_op(op, std::string(collective_name(cs.collective)) + " over " +
                 std::to_string(group_size(w.host().info().topo, cs.group_dims)) +
                 " chips: " + first_error);
}

// A block whose rows fill whole memory rows of 4-byte words moves as those words.
bool p2p_as_words(const HbmMatrix& v, unsigned lanes) {
  return v.pitch * v.esize() % (4 * lanes) == 0;
}

}  // namespace

uint32_t p2p_rows(const HbmMatrix& v, unsigned lanes) {
  return static_cast<uint32_t>(p2p_as_words(v, lanes) ? v.rows * v.pitch * v.esize() / (4 * lanes)
                                                      : v.rows * v.pitch / lanes);
}

namespace {

// A send moves its buffer's block of whole matrix rows; else a clear error.
void check_whole_rows(const Workload& w, const Op& op, const BufferRef& r) {
  const HbmMatrix v = w.view(r);
  if (v.cols != v.pitch)
    bad_op(op, "buffer '" + w.buffer(r.buffer).name + "': a send moves whole rows (" +
                   std::to_string(v.cols) + " of " + std::to_string(v.pitch) + " columns)");
}

// Chip `to` at its coordinates.
std::array<int, 3> coords(const Topology& topo, int chip) {
  const PodCoord c = topo.coord(chip);
  return {c[0], c[1], c[2]};
}

// A send: the block DMAed into the window's first half, sent into the peer's second half, its
// rows counted on the window's first counter. A receive: waits for them, DMAs them out. The
// block moves as 4-byte words where its rows fill whole memory rows of them (p2p_rows): a bf16
// DMA puts one element in each lane's low half, twice the rows with the wire's flits half empty.
std::vector<ChipCmd> p2p_cmds(const Workload& w, const Op& op, const CommWindow& cw) {
  const MachineInfo& mi = w.info();
  const unsigned lanes = mi.shape.cols;
  const BufferRef& r = op.kind == OpKind::kSend ? op.a : op.out;
  const HbmMatrix v = w.view(r);
  check_whole_rows(w, op, r);
  const uint32_t seg = static_cast<uint32_t>(v.pitch * v.esize());
  const uint32_t nseg = static_cast<uint32_t>(v.rows);
  const uint32_t rows = p2p_rows(v, lanes);
  const bool bf16 = v.dtype == Dtype::kBf16 && !p2p_as_words(v, lanes);
  if (2 * rows > cw.vmem_rows)
    bad_op(op, "buffer '" + w.buffer(r.buffer).name + "': " + std::to_string(rows) +
                   " memory rows do not fit twice in its VMEM window of " +
                   std::to_string(cw.vmem_rows));
  std::vector<ChipCmd> p;
  if (op.kind == OpKind::kSend) {
    p.push_back(cmd_dma(DmaDir::kHbmToVmem, bf16, cw.vmem_base, nseg, seg,
                        static_cast<uint32_t>(v.addr), seg));
    p.push_back(cmd_ici_send(Mem::kVmem, cw.vmem_base, rows, coords(mi.topo, op.to), Mem::kVmem,
                             cw.vmem_base + rows, cw.counter_base));
  } else {
    p.push_back(cmd_ici_wait(cw.counter_base, rows));
    p.push_back(cmd_dma(DmaDir::kVmemToHbm, bf16, cw.vmem_base + rows, nseg, seg,
                        static_cast<uint32_t>(v.addr), seg));
  }
  return p;
}

// One compute op's commands on chip c, in VMEM rows [0, vmem); a matmul's plan into *mm.
std::vector<ChipCmd> compute_cmds(Workload& w, const Op& op, int c, uint32_t vmem, MatmulRun* mm) {
  ChipDriver& d = w.driver(c);
  switch (op.kind) {
    case OpKind::kMatmul: {
      HbmMatrix bias;
      MatmulEpilogue ep;
      if (op.bias.valid()) {
        bias = w.view(op.bias);
        ep.bias = &bias;
      }
      ep.relu = op.relu;
      *mm = d.plan_matmul(w.view(op.out), w.view(op.a), w.view(op.w), ep, op.w_transposed);
      return without_halt(mm->program);
    }
    case OpKind::kTranspose:
      return d.plan_transpose(w.view(op.out), w.view(op.a));
    case OpKind::kEpilogue: {
      const HbmMatrix bias = op.bias.valid() ? w.view(op.bias) : HbmMatrix{};
      return d.plan_epilogue(w.view(op.out), op.bias.valid() ? &bias : nullptr, op.relu);
    }
    case OpKind::kVectorMap: {
      VpuMap m = op.vmap.map;
      m.in.clear();
      for (const BufferRef& r : op.vmap.in) m.in.push_back(w.view(r));
      if (op.vmap.consts.valid()) m.consts = w.view(op.vmap.consts);
      if (op.vmap.out.size() != m.out.size())
        bad_op(op, "its map has " + std::to_string(m.out.size()) + " outputs and " +
                       std::to_string(op.vmap.out.size()) + " buffers");
      for (std::size_t i = 0; i < m.out.size(); ++i) m.out[i].second = w.view(op.vmap.out[i]);
      if (op.vmap.sum_out.valid()) m.sum_out = w.view(op.vmap.sum_out);
      if (op.vmap.col_sum_out.size() != m.col_sums.size())
        bad_op(op, "its map has " + std::to_string(m.col_sums.size()) + " column sums and " +
                       std::to_string(op.vmap.col_sum_out.size()) + " buffers");
      for (std::size_t i = 0; i < m.col_sums.size(); ++i)
        m.col_sums[i].second = w.view(op.vmap.col_sum_out[i]);
      return plan_vpu_map(m, d.shape(), 0, vmem).prog;
    }
    case OpKind::kCommands: {
      if (op.vmem_rows > vmem)
        bad_op(op, "its commands use " + std::to_string(op.vmem_rows) + " VMEM rows, the compute "
                   "area has " + std::to_string(vmem));
      if (op.cmds.empty()) return {};
      return op.cmds.size() == 1 ? op.cmds[0] : op.cmds.at(static_cast<std::size_t>(c));
    }
    default:
      return {};
  }
}

// The phase table of the ops from first_op on: the declared names first, then the others as
// their first ops come.
std::vector<int> make_phases(const Workload& w, std::size_t first_op, SpmdProgram* prog) {
  const std::vector<Op>& ops = w.ops();
  const auto from = ops.begin() + static_cast<std::ptrdiff_t>(std::min(first_op, ops.size()));
  std::vector<std::string> names = w.phase_order();
  for (auto it = from; it != ops.end(); ++it)
    if (std::find(names.begin(), names.end(), it->name) == names.end()) names.push_back(it->name);
  std::map<std::string, int> index;
  for (const std::string& n : names) {
    const auto first = std::find_if(from, ops.end(), [&](const Op& o) { return o.name == n; });
    if (first == ops.end()) continue;
    SpmdPhase ph;
    ph.name = n;
    if (first->kind == OpKind::kCollective) {
      ph.collective = true;
      ph.kind = first->coll.spec.collective;
      ph.axis = first->coll.axis;
      ph.bytes = static_cast<uint64_t>(first->coll.spec.n) * elem_bytes(first->coll.spec.dtype);
      ph.gradient = first->coll.gradient;
    }
    index[n] = prog->add_phase(ph);
  }
  std::vector<int> of_op;
  for (auto it = ops.begin(); it != ops.end(); ++it)
    of_op.push_back(it < from ? -1 : index.at(it->name));
  return of_op;
}

}  // namespace

namespace {

// Chip c's commands of one step: its collective (or send, or receive) merged with its compute.
// deps: op_dependencies (a lagging step orders its collectives and compute by them).
ChipProgram step_program(Workload& w, Schedule& s, const std::vector<int>& st, int c,
                         const std::vector<int>& window_of, const std::vector<int>& coll_of,
                         const ScheduleOptions& o, const std::vector<std::vector<int>>& deps) {
  const std::vector<Op>& ops = w.ops();
  ChipProgram comm, comp;
  bool lead = true;
  // Per op of the step: where its commands end in its program (comm or comp).
  std::vector<std::size_t> end(st.size(), 0);
  for (std::size_t k = 0; k < st.size(); ++k) {
    const std::size_t oi = static_cast<std::size_t>(st[k]);
    const Op& op = ops[oi];
    end[k] = op.kind == OpKind::kCollective ? comm.size() : comp.size();
    if (!op.runs_on(c) || op.kind == OpKind::kHostCopy) continue;  // no commands
    const int ph = s.phase_of_op[oi];
    if (op.kind == OpKind::kCollective) {
      const PodProgram& pp = s.collectives[static_cast<std::size_t>(coll_of[oi])];
      if (op.coll.label_steps)
        comm.append(pp.program.chip(c).relabeled(ph, op.piece));
      else
        comm.append(pp.program.cmds(c), CmdLabel{ph, -1, op.piece});
      lead = op.coll.lead;
    } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
      comm.append(p2p_cmds(w, op, s.windows[static_cast<std::size_t>(window_of[oi])]),
                  CmdLabel{ph, -1, op.piece});
    } else {
      std::vector<ChipCmd> cmds;
      // A matmul's plan goes to its slot (only matmuls have one per chip).
      MatmulRun* plan =
          s.matmuls[oi].empty() ? nullptr : &s.matmuls[oi][static_cast<std::size_t>(c)];
      try {
        cmds = compute_cmds(w, op, c, s.vmem_compute, plan);
      } catch (const std::invalid_argument& e) {  // the planner's rule, and which op
        const uint32_t rows = w.info().shape.vmem_rows;
        const std::string area = " [the compute area: " + std::to_string(s.vmem_compute) +
                                 " of the chip's " + std::to_string(rows) +
                                 " VMEM rows; the rest holds the collectives]";
        bad_op(op, "chip " + std::to_string(c) + ": " + e.what() +
                       (s.vmem_compute < rows ? area : std::string()));
      }
      comp.append(cmds, CmdLabel{ph, -1, op.piece});
    }
    end[k] = op.kind == OpKind::kCollective ? comm.size() : comp.size();
  }
  const MachineInfo& mi = w.info();
  const auto is_coll = [&](std::size_t k) {
    return ops[static_cast<std::size_t>(st[k])].kind == OpKind::kCollective;
  };
  if (!o.lag_gradients || !is_gradient(ops[static_cast<std::size_t>(st[0])]))
    return lead ? merge(comm, comp, o.merge, &mi) : merge(comp, comm, o.merge, &mi);
  // A lagging step: collectives and compute that may need each other; each op's commands wait
  // on the end of the last op of the other program it depends on.
  std::vector<std::size_t> comm_needs(comm.size(), 0), comp_needs(comp.size(), 0);
  std::size_t comm_at = 0, comp_at = 0;
  for (std::size_t k = 0; k < st.size(); ++k) {
    std::size_t need = 0;
    for (int d : deps[static_cast<std::size_t>(st[k])]) {
      const auto it = std::lower_bound(st.begin(), st.end(), d);
      if (it == st.end() || *it != d) continue;  // an earlier step's: already in the stream
      const std::size_t dk = static_cast<std::size_t>(it - st.begin());
      if (is_coll(dk) != is_coll(k)) need = std::max(need, end[dk]);
    }
    std::size_t& at = is_coll(k) ? comm_at : comp_at;
    std::vector<std::size_t>& needs = is_coll(k) ? comm_needs : comp_needs;
    for (; at < end[k]; ++at) needs[at] = need;
  }
  return merge(comm, comp, comm_needs, comp_needs);
}

// The HBM bytes [first, last) a DMA between HBM and memory rows touches.
std::pair<uint64_t, uint64_t> dma_hbm_span(const CmdDma& d) {
  const uint64_t first = d.hbm_addr;
  if (d.rows == 0) return {first, first};
  return {first, first + static_cast<uint64_t>(d.rows - 1) * d.stride + d.seg_bytes};
}

// Receives (their waits, their DMAs out of the windows) placed among the leading loads of the
// compute that follows them: the DMAs from HBM into the compute area that read none of the
// received blocks' bytes, all but the last before the receives. Those loads (a layer's bias, the
// first of its weights) then run on the DMA engine while a wait holds the stream, instead of
// behind it; the first command that may read a block, and everything after it, stays behind the
// receives. Exact: the loads touch neither the windows' VMEM rows nor the blocks' HBM bytes, the
// one DMA engine keeps their order, and the sequencer's scoreboard orders them against the
// commands before them as it did.
ChipProgram receive_before_readers(const ChipProgram& recv, const ChipProgram& next,
                                   const std::vector<HbmMatrix>& blocks) {
  const auto reads_block = [&](uint64_t a, uint64_t b) {
    for (const HbmMatrix& v : blocks)
      if (a < v.addr + v.bytes() && v.addr < b) return true;
    return false;
  };
  std::size_t k = 0;
  for (; k < next.size(); ++k) {
    const ChipCmd& cmd = next.cmds[k];
    if (cmd.op() != ChipOp::kDma) break;
    const CmdDma d = CmdDma::decode(cmd);
    if (d.dir != static_cast<uint32_t>(DmaDir::kHbmToVmem)) break;
    const auto [a, b] = dma_hbm_span(d);
    if (reads_block(a, b)) break;
  }
  // The last of them stays after the receive: the block's write drains into HBM while it loads,
  // instead of the first reader stalling on it (a read right behind a write of the same bytes
  // waits for the write: ~350 cycles for 16 KiB).
  if (k > 0) --k;
  const auto at = [&](std::size_t i) { return static_cast<std::ptrdiff_t>(i); };
  ChipProgram out;
  out.cmds.assign(next.cmds.begin(), next.cmds.begin() + at(k));
  out.labels.assign(next.labels.begin(), next.labels.begin() + at(k));
  out.append(recv);
  out.cmds.insert(out.cmds.end(), next.cmds.begin() + at(k), next.cmds.end());
  out.labels.insert(out.labels.end(), next.labels.begin() + at(k), next.labels.end());
  return out;
}

// Receives in a row from step k on and the compute step after them, appended to *out as one
// program: the compute's ops that need none of the receives first, then the receives after the
// leading loads of the first op that does (receive_before_readers). Returns the step after them,
// or k where step k is no receive or no compute step follows the receives.
std::size_t receives_then_compute(const Workload& w, const std::vector<std::vector<int>>& steps,
                                  std::size_t k, const std::vector<std::vector<int>>& deps,
                                  const std::function<ChipProgram(const std::vector<int>&)>& prog,
                                  ChipProgram* out) {
  const std::vector<Op>& ops = w.ops();
  const auto first = [&](std::size_t i) -> const Op& {
    return ops[static_cast<std::size_t>(steps[i][0])];
  };
  std::size_t k2 = k;
  while (k2 < steps.size() && first(k2).kind == OpKind::kRecv) ++k2;
  if (k2 == k || k2 == steps.size() || is_comm(first(k2))) return k;
  std::vector<int> recvs;
  std::vector<HbmMatrix> blocks;
  ChipProgram r;
  for (std::size_t i = k; i < k2; ++i) {
    recvs.push_back(steps[i][0]);
    blocks.push_back(w.view(first(i).out));
    r.append(prog(steps[i]));
  }
  const std::vector<int>& nx = steps[k2];
  const auto needs = std::find_if(nx.begin(), nx.end(), [&](int j) {
    const std::vector<int>& d = deps[static_cast<std::size_t>(j)];
    return std::any_of(recvs.begin(), recvs.end(),
                       [&](int x) { return std::binary_search(d.begin(), d.end(), x); });
  });
  out->append(prog(std::vector<int>(nx.begin(), needs)));
  out->append(receive_before_readers(r, prog(std::vector<int>(needs, nx.end())), blocks));
  return k2 + 1;
}

}  // namespace

Schedule schedule(Workload& w, const ScheduleOptions& o) {
  const MachineInfo& mi = w.host().info();
  const int P = w.num_chips();
  const std::vector<Op>& ops = w.ops();
  Schedule s;
  s.program = SpmdProgram(P);
  s.windows = comm_windows(w, mi.shape, o, &s.vmem_compute);
  s.phase_of_op = make_phases(w, o.first_op, &s.program);
  const std::vector<std::vector<int>> deps = op_dependencies(w);
  s.steps = schedule_steps(w, deps, o.first_op, o.lag_gradients);
  s.matmuls.assign(ops.size(), {});
  std::vector<int> window_of(ops.size(), -1), coll_of(ops.size(), -1);
  for (std::size_t k = 0; k < s.windows.size(); ++k)
    window_of[static_cast<std::size_t>(s.windows[k].op)] = static_cast<int>(k);
  for (std::size_t i = o.first_op; i < ops.size(); ++i) {
    if (ops[i].kind == OpKind::kMatmul) s.matmuls[i].assign(static_cast<std::size_t>(P), {});
    if (ops[i].kind == OpKind::kRecv)
      window_of[i] = window_of[static_cast<std::size_t>(ops[i].peer)];
    if (ops[i].kind != OpKind::kCollective) continue;
    coll_of[i] = static_cast<int>(s.collectives.size());
    s.collectives.push_back(
        compile_collective(w, ops[i], s.windows[static_cast<std::size_t>(window_of[i])], o.alone));
  }
  for (int c = 0; c < P; ++c) {
    w.driver(c).vmem_rows_limit = s.vmem_compute;
    const auto prog = [&](const std::vector<int>& ids) {
      return ids.empty() ? ChipProgram{} : step_program(w, s, ids, c, window_of, coll_of, o, deps);
    };
    for (std::size_t k = 0; k < s.steps.size();) {
      const std::size_t after =
          receives_then_compute(w, s.steps, k, deps, prog, &s.program.chip(c));
      if (after > k) {
        k = after;
        continue;
      }
      s.program.append(c, prog(s.steps[k++]));
    }
    if (o.halt) {
      const ChipProgram& cp = s.program.chip(c);
      const CmdLabel last = cp.labels.empty() ? CmdLabel{} : cp.labels.back();
      s.program.chip(c).append({cmd_halt()}, last);
    }
  }
  return s;
}

uint64_t run_host_copies(Workload& w, bool to_device, bool backdoor) {
  std::vector<HostCopy> copies;
  for (const Op& op : w.ops()) {
    if (op.kind != OpKind::kHostCopy || op.to_device != to_device) continue;
    const HbmMatrix v = w.view(to_device ? op.out : op.a);
    if (!op.data || op.data->size() != static_cast<std::size_t>(w.num_chips()))
      bad_op(op, "it needs the bytes of every chip");
    for (int c = 0; c < w.num_chips(); ++c) {
      if (!op.runs_on(c)) continue;
      auto& b = (*op.data)[static_cast<std::size_t>(c)];
      if (!to_device) b.assign(v.bytes(), 0);
      if (b.size() > v.bytes())
        bad_op(op, "buffer '" + w.buffer((to_device ? op.out : op.a).buffer).name +
                       "': " + std::to_string(b.size()) + " bytes, the block holds " +
                       std::to_string(v.bytes()));
      copies.push_back(HostCopy{c, to_device, v.addr, b.data(), b.size()});
    }
  }
  if (!backdoor) return w.host().copy(copies);
  for (const HostCopy& h : copies) {
    if (to_device)
      w.host().backdoor_write(h.chip, h.addr, h.data, h.n);
    else
      w.host().backdoor_read(h.chip, h.addr, h.data, h.n);
  }
  return 0;
}

Op vector_map_op(const Workload& w, std::string name, VpuMap m) {
  VectorMapRefs r;
  for (const HbmMatrix& x : m.in) r.in.push_back(w.ref_of(x));
  if (!m.const_rows.empty()) r.consts = w.ref_of(m.consts);
  for (const auto& o : m.out) r.out.push_back(w.ref_of(o.second));
  if (m.sum >= 0) r.sum_out = w.ref_of(m.sum_out);
  for (const auto& o : m.col_sums) r.col_sum_out.push_back(w.ref_of(o.second));
  r.map = std::move(m);
  return vector_map_op(std::move(name), std::move(r));
}

}  // namespace tpu
