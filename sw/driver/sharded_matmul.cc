#include "sharded_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tpu/perf.h"

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

constexpr uint64_t kBurst = 64;

// rows [r0, r0 + rows) and columns [c0, c0 + cols) of m, as a matrix of its own.
HbmMatrix view(const HbmMatrix& m, std::size_t r0, std::size_t rows, std::size_t c0,
               std::size_t cols) {
  if (r0 + rows > m.rows || c0 + cols > m.cols)
    throw std::logic_error("sharded matmul: a view outside its matrix");
  HbmMatrix v = m;
  v.addr = m.addr + (static_cast<uint64_t>(r0) * m.pitch + c0) * m.esize();
  if (v.addr % kBurst != 0) throw std::logic_error("sharded matmul: a view not 64-byte aligned");
  v.rows = rows;
  v.cols = cols;
  return v;
}

// A matrix lying in a padded tensor: its first row and column there.
struct Placed {
  HbmMatrix m;
  std::size_t row_lo = 0, col_lo = 0;
};

std::string axis_text(const std::string& a) { return a.empty() ? "-" : "'" + a + "'"; }

}  // namespace

ShardedMatmul::ShardedMatmul(HostPort& host, ShardPlan plan, ShardedMatmulOptions opt)
    : host_(host), plan_(std::move(plan)), opt_(std::move(opt)) {
  const MachineInfo& mi = host_.info();
  P_ = mi.num_chips();
  if (plan_.topo.name() != mi.topo.name())
    bad("the plan is for a " + plan_.topo.name() + " pod; the machine is " + mi.topo.name());
  if (!opt_.bias.empty() && opt_.bias.size() != plan_.n)
    bad("bias: " + std::to_string(opt_.bias.size()) + " values; Y has " +
        std::to_string(plan_.n) + " columns");
  if (!plan_.k_axis.empty() && (!opt_.bias.empty() || opt_.relu))
    bad("bias/ReLU with K split over '" + plan_.k_axis +
        "': the epilogue would have to follow the reduction, which is not supported yet; keep K "
        "unsplit (e.g. --w-spec -,...) or drop --bias/--relu");
  const bool has_bias = !opt_.bias.empty();
  const uint32_t V = mi.shape.vmem_rows;
  const std::size_t ncoll = plan_.pre.size() + plan_.post.size();
  vmem_matmul_ = ncoll ? V / 2 : V;

  for (int c = 0; c < P_; ++c) drv_.push_back(std::make_unique<ChipDriver>(host_, c));
  jobs_.resize(static_cast<std::size_t>(P_));
  coll_bufs_.resize(ncoll);
  for (auto& b : coll_bufs_) {
    b.in.resize(static_cast<std::size_t>(P_));
    b.out.resize(static_cast<std::size_t>(P_));
  }
  std::vector<Range> red_rows(static_cast<std::size_t>(P_)), red_cols(red_rows);
  for (int c = 0; c < P_; ++c) {
    const std::size_t ci = static_cast<std::size_t>(c);
    ChipDriver& d = *drv_[ci];
    try {
    const Range xr = plan_.x_rows(c), xc = plan_.x_cols(c);
    const Range wr = plan_.w_rows(c), wc = plan_.w_cols(c);
    xs_.push_back(d.alloc_matrix(xr.size(), xc.size(), Dtype::kBf16));
    ws_.push_back(d.alloc_matrix(wr.size(), wc.size(), Dtype::kBf16));
    if (has_bias) bias_.push_back(d.alloc_matrix(1, plan_.np, Dtype::kF32));
    std::size_t ic = 0;  // collective index

    // Gathers of W: a gather on K stacks the ranks' row blocks (one matrix); a gather on N
    // leaves the ranks' column blocks one after another (a matrix each).
    std::vector<Placed> wb = {Placed{ws_.back(), wr.lo, wc.lo}};
    for (const ShardCollective& sc : plan_.pre) {
      const std::size_t p = static_cast<std::size_t>(plan_.axis_size(sc.axis));
      const HbmMatrix cur = wb.at(0).m;
      if (wb.size() != 1) throw std::logic_error("sharded matmul: two gathers of W on N");
      if (cur.pitch != cur.cols && sc.dim == 1)
        bad("W's column blocks of " + std::to_string(cur.cols) + " elements are not whole HBM "
            "rows of the chip's pitch (" + std::to_string(cur.pitch) + "): pad N to a multiple of " +
            std::to_string(cur.pitch * p));
      const std::size_t elems = p * cur.rows * cur.pitch;
      const uint64_t out = d.alloc(elems * 2);
      coll_bufs_[ic].in[ci] = cur.addr;
      coll_bufs_[ic].out[ci] = out;
      if (c == 0) {
        CollectiveSpec s;
        s.collective = Collective::kAllGather;
        s.dtype = DType::kBf16;
        s.n = elems;
        s.group_dims = sc.dims;
        coll_spec_.push_back(s);
      }
      if (sc.dim == 0) {
        HbmMatrix g = cur;
        g.addr = out;
        g.rows = cur.rows * p;
        wb = {Placed{g, 0, wb[0].col_lo}};
      } else {
        std::vector<Placed> blocks;
        for (std::size_t s = 0; s < p; ++s) {
          HbmMatrix g = cur;
          g.addr = out + s * cur.rows * cur.pitch * 2;
          blocks.push_back(Placed{g, wb[0].row_lo, s * cur.cols});
        }
        wb = blocks;
      }
      ++ic;
    }

    // The chip's block of the product, in column pieces that each lie in one W block and one
    // C block.
    const Range R = plan_.mm_rows(c), K = plan_.mm_k(c), C = plan_.mm_cols(c);
    if (R.lo < xr.lo || R.hi > xr.hi || K.lo < xc.lo || K.hi > xc.hi)
      throw std::logic_error("sharded matmul: the product's block is not in X's shard");
    const std::size_t pk = static_cast<std::size_t>(plan_.axis_size(plan_.k_axis));
    std::vector<Placed> cb;
    if (plan_.c_col_blocks) {
      const std::size_t nb = C.size() / pk;
      const HbmMatrix shape = d.alloc_matrix(R.size(), nb, Dtype::kF32);  // the first block
      d.alloc(shape.bytes() * (pk - 1));
      for (std::size_t t = 0; t < pk; ++t) {
        HbmMatrix b = shape;
        b.addr = shape.addr + t * shape.bytes();
        cb.push_back(Placed{b, R.lo, C.lo + t * nb});
      }
      c_elems_ = pk * R.size() * shape.pitch;
    } else {
      cb.push_back(Placed{d.alloc_matrix(R.size(), C.size(), Dtype::kF32), R.lo, C.lo});
      c_elems_ = R.size() * cb[0].m.pitch;
    }
    c_.push_back(cb[0].m);
    std::vector<std::size_t> cuts = {C.lo, C.hi};
    for (const auto* v : {&wb, &cb})
      for (const Placed& b : *v)
        for (std::size_t e : {b.col_lo, b.col_lo + b.m.cols})
          if (e > C.lo && e < C.hi) cuts.push_back(e);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    auto holder = [](const std::vector<Placed>& v, std::size_t a, std::size_t b) -> const Placed& {
      for (const Placed& p : v)
        if (p.col_lo <= a && b <= p.col_lo + p.m.cols) return p;
      throw std::logic_error("sharded matmul: a column piece in no block");
    };
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const std::size_t a = cuts[i], b = cuts[i + 1];
      const Placed& W = holder(wb, a, b);
      const Placed& Cc = holder(cb, a, b);
      if (K.lo < W.row_lo || K.hi > W.row_lo + W.m.rows)
        throw std::logic_error("sharded matmul: the product's K range is not in W");
      Job j;
      j.a = view(xs_[ci], R.lo - xr.lo, R.size(), K.lo - xc.lo, K.size());
      j.w = view(W.m, K.lo - W.row_lo, K.size(), a - W.col_lo, b - a);
      j.c = view(Cc.m, 0, R.size(), a - Cc.col_lo, b - a);
      if (has_bias) {
        j.bias = view(bias_[ci], 0, 1, a, b - a);
        j.has_bias = true;
      }
      jobs_[ci].push_back(j);
    }

    // After the matmul: the K reduction, then a gather of Y's rows.
    HbmMatrix y = cb[0].m;
    Range yr = R, yc = C;
    if (plan_.c_col_blocks) y.cols = C.size() / pk;
    for (const ShardCollective& sc : plan_.post) {
      const std::size_t p = static_cast<std::size_t>(plan_.axis_size(sc.axis));
      const int rank = plan_.axis_rank(sc.axis, c);
      CollectiveSpec s;
      s.collective = sc.kind;
      s.dtype = DType::kF32;
      s.group_dims = sc.dims;
      std::size_t out_elems = 0;
      if (sc.kind == Collective::kAllGather) {
        s.n = p * y.rows * y.pitch;
        out_elems = s.n;
        coll_bufs_[ic].in[ci] = y.addr;
        y.rows *= p;
        yr = Range{0, plan_.mp};
      } else {
        s.n = c_elems_;
        out_elems = sc.kind == Collective::kAllReduce ? s.n : s.n / p;
        coll_bufs_[ic].in[ci] = c_.back().addr;
        if (sc.dim == 0) {
          y.rows /= p;
          yr = plan_.block(sc.axis, plan_.mp, c);
        } else if (sc.dim == 1) {
          yc = Range{C.lo + static_cast<std::size_t>(rank) * y.cols,
                     C.lo + static_cast<std::size_t>(rank + 1) * y.cols};
        }
        red_rows[ci] = yr;
        red_cols[ci] = yc;
      }
      y.addr = d.alloc(out_elems * 4);
      coll_bufs_[ic].out[ci] = y.addr;
      if (c == 0) coll_spec_.push_back(s);
      ++ic;
    }
    if (plan_.k_axis.empty()) {
      red_rows[ci] = R;
      red_cols[ci] = C;
    }
    if (!(yr == plan_.y_rows(c)) || !(yc == plan_.y_cols(c)))
      throw std::logic_error("sharded matmul: Y's block on chip " + std::to_string(c) +
                             " is not the block its spec gives");
    y_.push_back(ShardBlock{y, yr, yc});
    } catch (const std::runtime_error& e) {  // the HBM allocator
      bad("not enough HBM: chip " + std::to_string(c) + " has " +
          std::to_string(mi.shape.hbm_bytes) + " bytes; its shards, gathers and products need "
          "more (" + e.what() + "): use more chips, split X or W, or a smaller shape");
    }
    hbm_used_ = std::max(hbm_used_, d.allocated());
  }
  red_rows_ = std::move(red_rows);
  red_cols_ = std::move(red_cols);
}

uint64_t ShardedMatmul::load(const std::vector<bf16_t>& x, const std::vector<bf16_t>& w) {
  const ShardPlan& p = plan_;
  if (x.size() != p.m * p.k || w.size() != p.k * p.n)
    bad("operands: X has " + std::to_string(x.size()) + " elements and W " +
        std::to_string(w.size()) + "; " + std::to_string(p.m) + "x" + std::to_string(p.k) +
        " and " + std::to_string(p.k) + "x" + std::to_string(p.n) + " need " +
        std::to_string(p.m * p.k) + " and " + std::to_string(p.k * p.n));
  auto block = [](const std::vector<bf16_t>& src, std::size_t rows, std::size_t cols,
                  const Range& r, const Range& cl) {
    std::vector<bf16_t> b(r.size() * cl.size(), 0);
    for (std::size_t i = r.lo; i < std::min(r.hi, rows); ++i)
      for (std::size_t j = cl.lo; j < std::min(cl.hi, cols); ++j)
        b[(i - r.lo) * cl.size() + (j - cl.lo)] = src[i * cols + j];
    return b;
  };
  std::vector<std::vector<uint8_t>> img;
  img.reserve(static_cast<std::size_t>(3 * P_));
  std::vector<HostCopy> ops;
  std::vector<float> bias_p(p.np, 0.0f);
  std::copy(opt_.bias.begin(), opt_.bias.end(), bias_p.begin());
  for (int c = 0; c < P_; ++c) {
    const std::size_t ci = static_cast<std::size_t>(c);
    img.push_back(drv_[ci]->matrix_image(xs_[ci], block(x, p.m, p.k, p.x_rows(c), p.x_cols(c))));
    ops.push_back(HostCopy{c, true, xs_[ci].addr, img.back().data(), img.back().size()});
    img.push_back(drv_[ci]->matrix_image(ws_[ci], block(w, p.k, p.n, p.w_rows(c), p.w_cols(c))));
    ops.push_back(HostCopy{c, true, ws_[ci].addr, img.back().data(), img.back().size()});
    if (!bias_.empty()) {
      img.push_back(drv_[ci]->matrix_image(bias_[ci], bias_p));
      ops.push_back(HostCopy{c, true, bias_[ci].addr, img.back().data(), img.back().size()});
    }
  }
  if (opt_.backdoor) {
    for (const HostCopy& h : ops) host_.backdoor_write(h.chip, h.addr, h.data, h.n);
    return 0;
  }
  return host_.copy(ops);
}

std::vector<std::vector<ChipCmd>> ShardedMatmul::programs(std::vector<ShardPhase>* phases) {
  const MachineInfo& mi = host_.info();
  const std::size_t ncoll = coll_spec_.size();
  PodDriver pd(host_);
  std::vector<PodProgram> cp;
  const uint32_t V = mi.shape.vmem_rows;
  for (std::size_t i = 0; i < ncoll; ++i) {
    PodCollectiveOptions o;
    const uint32_t share = (V - vmem_matmul_) / static_cast<uint32_t>(ncoll);
    o.vmem_base = vmem_matmul_ + static_cast<uint32_t>(i) * share;
    o.vmem_rows = share;
    o.counter_base = static_cast<uint32_t>(i * kIciCounters / ncoll);
    o.counter_count = static_cast<uint32_t>(kIciCounters / ncoll);
    cp.push_back(pd.compile(coll_spec_[i], coll_bufs_[i], o));
  }
  rounds_.clear();
  for (const PodProgram& p : cp) rounds_.push_back(p.rounds);

  std::vector<ShardPhase> ph;
  auto coll_phase = [&](std::size_t i, const ShardCollective& sc) {
    ShardPhase s;
    s.collective = true;
    s.kind = sc.kind;
    s.axis = sc.axis;
    s.name = std::string(collective_name(sc.kind)) + " of " + sc.tensor + " over " +
             axis_text(sc.axis);
    const CollectiveSpec& cs = coll_spec_[i];
    s.bytes = static_cast<uint64_t>(cs.n) * (cs.dtype == DType::kBf16 ? 2 : 4);
    return s;
  };
  std::size_t ic = 0;
  for (const ShardCollective& sc : plan_.pre) ph.push_back(coll_phase(ic++, sc));
  ShardPhase mm;
  mm.name = "matmul";
  ph.push_back(mm);
  for (const ShardCollective& sc : plan_.post) ph.push_back(coll_phase(ic++, sc));

  std::vector<std::vector<ChipCmd>> progs(static_cast<std::size_t>(P_));
  for (int c = 0; c < P_; ++c) {
    const std::size_t ci = static_cast<std::size_t>(c);
    std::vector<ChipCmd>& prog = progs[ci];
    auto append = [&](ShardPhase& s, const std::vector<ChipCmd>& cmds) {
      if (s.begin.size() < static_cast<std::size_t>(P_)) {
        s.begin.assign(static_cast<std::size_t>(P_), 0);
        s.end.assign(static_cast<std::size_t>(P_), 0);
      }
      if (s.begin[ci] == s.end[ci]) s.begin[ci] = prog.size();
      for (const ChipCmd& cmd : cmds)
        if ((cmd.w[0] & 0xFu) != static_cast<uint32_t>(ChipOp::kHalt)) prog.push_back(cmd);
      s.end[ci] = prog.size();
    };
    std::size_t pi = 0;
    for (std::size_t i = 0; i < plan_.pre.size(); ++i) append(ph[pi++], cp[i].progs[ci]);
    ChipDriver& d = *drv_[ci];
    d.vmem_rows_limit = vmem_matmul_;
    for (const Job& j : jobs_[ci]) {
      MatmulEpilogue ep;
      ep.bias = j.has_bias ? &j.bias : nullptr;
      ep.relu = opt_.relu;
      append(ph[pi], d.plan_matmul(j.c, j.a, j.w, ep).program);
    }
    ++pi;
    for (std::size_t i = plan_.pre.size(); i < ncoll; ++i) append(ph[pi++], cp[i].progs[ci]);
  }
  if (phases) *phases = std::move(ph);
  return progs;
}

ShardedRun ShardedMatmul::run() {
  ShardedRun r;
  const auto progs = programs(&r.phases);
  for (const auto& p : progs) r.commands += p.size();
  PodDriver pd(host_);
  r.prog = pd.run_programs(progs);
  return r;
}

std::vector<std::vector<uint32_t>> ShardedMatmul::read_y(ShardedRun* run) {
  std::vector<std::vector<uint8_t>> img(static_cast<std::size_t>(P_));
  std::vector<HostCopy> ops;
  for (int c = 0; c < P_; ++c) {
    const HbmMatrix& m = y_[static_cast<std::size_t>(c)].m;
    auto& b = img[static_cast<std::size_t>(c)];
    b.assign(m.bytes(), 0);
    ops.push_back(HostCopy{c, false, m.addr, b.data(), b.size()});
  }
  uint64_t cycles = 0;
  if (opt_.backdoor) {
    for (const HostCopy& h : ops) host_.backdoor_read(h.chip, h.addr, h.data, h.n);
  } else {
    cycles = host_.copy(ops);
  }
  if (run) run->store_cycles += cycles;
  std::vector<std::vector<uint32_t>> out;
  for (int c = 0; c < P_; ++c)
    out.push_back(ChipDriver::matrix_from_image(y_[static_cast<std::size_t>(c)].m,
                                                img[static_cast<std::size_t>(c)]));
  return out;
}

std::vector<std::vector<uint32_t>> ShardedMatmul::golden(const std::vector<bf16_t>& x,
                                                         const std::vector<bf16_t>& w) const {
  const ShardPlan& p = plan_;
  // Y over the padded shape: padding elements 0 (never compared).
  std::vector<uint32_t> yg(p.mp * p.np, 0);
  if (p.k_axis.empty()) {
    MatmulOptions mo;
    mo.bias = opt_.bias.empty() ? nullptr : &opt_.bias;
    mo.relu = opt_.relu;
    const auto g = golden_chip_matmul(x, w, p.m, p.k, p.n, mo);
    for (std::size_t i = 0; i < p.m; ++i)
      std::copy(g.begin() + static_cast<std::ptrdiff_t>(i * p.n),
                g.begin() + static_cast<std::ptrdiff_t>((i + 1) * p.n), yg.begin() +
                static_cast<std::ptrdiff_t>(i * p.np));
  } else {
    // Each chip's partial product as it lies in its C buffer, then the reduction's rounds.
    const std::size_t pk = static_cast<std::size_t>(p.axis_size(p.k_axis));
    std::vector<std::vector<uint32_t>> parts(static_cast<std::size_t>(P_));
    for (int c = 0; c < P_; ++c) {
      const Range R = p.mm_rows(c), K = p.mm_k(c), C = p.mm_cols(c);
      std::vector<bf16_t> xs(R.size() * K.size(), 0), wsb(K.size() * C.size(), 0);
      for (std::size_t i = R.lo; i < std::min(R.hi, p.m); ++i)
        for (std::size_t k = K.lo; k < std::min(K.hi, p.k); ++k)
          xs[(i - R.lo) * K.size() + (k - K.lo)] = x[i * p.k + k];
      for (std::size_t k = K.lo; k < std::min(K.hi, p.k); ++k)
        for (std::size_t j = C.lo; j < std::min(C.hi, p.n); ++j)
          wsb[(k - K.lo) * C.size() + (j - C.lo)] = w[k * p.n + j];
      const auto g = golden_chip_matmul(xs, wsb, R.size(), K.size(), C.size(), MatmulOptions{});
      const HbmMatrix& cm = c_[static_cast<std::size_t>(c)];
      auto& img = parts[static_cast<std::size_t>(c)];
      img.assign(c_elems_, 0);
      const std::size_t nb = p.c_col_blocks ? C.size() / pk : C.size();
      for (std::size_t i = 0; i < R.size(); ++i)
        for (std::size_t j = 0; j < C.size(); ++j) {
          const std::size_t t = j / nb, jj = j % nb;
          img[t * R.size() * cm.pitch + i * cm.pitch + jj] = g[i * C.size() + j];
        }
    }
    const auto red = golden_collective(rounds_.at(p.pre.size()), parts);
    for (int c = 0; c < P_; ++c) {
      const std::size_t ci = static_cast<std::size_t>(c);
      const Range& rr = red_rows_[ci];
      const Range& rc = red_cols_[ci];
      const std::size_t pitch = c_[ci].pitch;
      for (std::size_t i = 0; i < rr.size(); ++i)
        for (std::size_t j = 0; j < rc.size(); ++j)
          yg[(rr.lo + i) * p.np + rc.lo + j] = red[ci][i * pitch + j];
    }
  }
  std::vector<std::vector<uint32_t>> out;
  for (int c = 0; c < P_; ++c) {
    const ShardBlock& b = y_[static_cast<std::size_t>(c)];
    std::vector<uint32_t> v(b.rows.size() * b.cols.size());
    for (std::size_t i = 0; i < b.rows.size(); ++i)
      for (std::size_t j = 0; j < b.cols.size(); ++j)
        v[i * b.cols.size() + j] = yg[(b.rows.lo + i) * p.np + b.cols.lo + j];
    out.push_back(std::move(v));
  }
  return out;
}

std::size_t ShardedMatmul::mismatches(const std::vector<std::vector<uint32_t>>& want,
                                      const std::vector<std::vector<uint32_t>>& got) const {
  std::size_t bad_elems = 0;
  for (int c = 0; c < P_; ++c) {
    const ShardBlock& b = y_[static_cast<std::size_t>(c)];
    const auto& wv = want.at(static_cast<std::size_t>(c));
    const auto& gv = got.at(static_cast<std::size_t>(c));
    for (std::size_t i = 0; i < b.rows.size(); ++i)
      for (std::size_t j = 0; j < b.cols.size(); ++j)
        if (b.rows.lo + i < plan_.m && b.cols.lo + j < plan_.n)
          bad_elems += wv[i * b.cols.size() + j] != gv[i * b.cols.size() + j];
  }
  return bad_elems;
}

std::size_t ShardedMatmul::real_elements() const {
  std::size_t n = 0;
  for (const ShardBlock& b : y_)
    n += (std::min(b.rows.hi, plan_.m) - std::min(b.rows.lo, plan_.m)) *
         (std::min(b.cols.hi, plan_.n) - std::min(b.cols.lo, plan_.n));
  return n;
}

std::vector<uint32_t> ShardedMatmul::assemble(const std::vector<std::vector<uint32_t>>& blocks,
                                              std::size_t* replica_mismatches) const {
  const ShardPlan& p = plan_;
  std::vector<uint32_t> y(p.m * p.n, 0);
  std::vector<char> seen(p.m * p.n, 0);
  std::size_t mism = 0;
  for (int c = 0; c < P_; ++c) {
    const ShardBlock& b = y_[static_cast<std::size_t>(c)];
    const auto& v = blocks.at(static_cast<std::size_t>(c));
    for (std::size_t i = b.rows.lo; i < std::min(b.rows.hi, p.m); ++i)
      for (std::size_t j = b.cols.lo; j < std::min(b.cols.hi, p.n); ++j) {
        const uint32_t e = v[(i - b.rows.lo) * b.cols.size() + (j - b.cols.lo)];
        if (!seen[i * p.n + j]) {
          seen[i * p.n + j] = 1;
          y[i * p.n + j] = e;
        } else {
          mism += y[i * p.n + j] != e;
        }
      }
  }
  if (replica_mismatches) *replica_mismatches = mism;
  return y;
}

ShardF64Check shard_f64_check(const ShardedMatmul& sm, const std::vector<bf16_t>& x,
                              const std::vector<bf16_t>& w, const std::vector<float>& bias,
                              bool relu, const std::vector<std::vector<uint32_t>>& blocks) {
  const ShardPlan& p = sm.plan();
  const double u = std::ldexp(1.0, -24);
  const double terms = static_cast<double>(p.k + static_cast<std::size_t>(p.axis_size(p.k_axis)) + 2);
  std::vector<double> xd(x.size()), wd(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) xd[i] = bf16_to_f32(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) wd[i] = bf16_to_f32(w[i]);
  // The exact product and the sum of |x w| of every element, once.
  std::vector<double> y64(p.m * p.n, 0.0), mag(p.m * p.n, 0.0);
  for (std::size_t i = 0; i < p.m; ++i)
    for (std::size_t k = 0; k < p.k; ++k) {
      const double a = xd[i * p.k + k];
      if (a == 0.0) continue;
      double* yr = &y64[i * p.n];
      double* mr = &mag[i * p.n];
      const double* wr = &wd[k * p.n];
      for (std::size_t j = 0; j < p.n; ++j) {
        yr[j] += a * wr[j];
        mr[j] += std::fabs(a * wr[j]);
      }
    }
  ShardF64Check r;
  for (int c = 0; c < p.topo.num_chips(); ++c) {
    const ShardBlock& b = sm.y_block(c);
    const auto& v = blocks.at(static_cast<std::size_t>(c));
    for (std::size_t i = b.rows.lo; i < std::min(b.rows.hi, p.m); ++i)
      for (std::size_t j = b.cols.lo; j < std::min(b.cols.hi, p.n); ++j) {
        double want = y64[i * p.n + j];
        double m = mag[i * p.n + j];
        if (!bias.empty()) {
          want += bias[j];
          m += std::fabs(bias[j]);
        }
        if (relu) want = std::max(want, 0.0);
        uint32_t bits = v[(i - b.rows.lo) * b.cols.size() + (j - b.cols.lo)];
        float got;
        std::memcpy(&got, &bits, 4);
        const double bound = terms * u * m + 1e-300;
        const double err = std::fabs(static_cast<double>(got) - want);
        ++r.checked;
        if (!(err <= bound)) ++r.outside;
        r.worst = std::max(r.worst, err / bound);
      }
  }
  return r;
}

ShardCheck check_sharded(const ShardedMatmul& sm, const std::vector<bf16_t>& x,
                         const std::vector<bf16_t>& w,
                         const std::vector<std::vector<uint32_t>>& blocks) {
  ShardCheck k;
  k.mismatches = sm.mismatches(sm.golden(x, w), blocks);
  k.compared = sm.real_elements();
  k.f64 = shard_f64_check(sm, x, w, sm.options().bias, sm.options().relu, blocks);
  k.y = sm.assemble(blocks, &k.replica_mismatches);
  return k;
}

void fill_shard_report(ReportGroup& rep, const ShardedMatmul& sm, const ShardedRun& run,
                       const ShardCheck& chk, const MachineInfo& mi) {
  const ShardPlan& plan = sm.plan();
  const int P = mi.num_chips();
  const uint64_t macs = matmul_useful_macs(plan.m, plan.k, plan.n);
  const uint64_t peak = peak_macs_per_cycle(mi.shape.rows, mi.shape.cols);
  const uint64_t cycles = run.prog.run.cycles;
  const uint64_t chips_peak = static_cast<uint64_t>(P) * peak;
  ReportGroup& sg = rep.group("sharding");
  sg.field("mesh", plan.mesh.text());
  sg.field("x_spec", plan.x.text()).field("w_spec", plan.w.text()).field("y_spec", plan.y.text());
  sg.metric("m", plan.m, "", "").metric("k", plan.k, "", "").metric("n", plan.n, "", "");
  sg.field("padded", Json::array().push_back(plan.mp).push_back(plan.kp).push_back(plan.np));
  sg.metric("padding_waste",
            1.0 - static_cast<double>(macs) /
                      (static_cast<double>(plan.mp) * static_cast<double>(plan.kp) *
                       static_cast<double>(plan.np)),
            "fraction", "MACs of the padded shape that are padding");
  sg.metric("chip_macs", plan.chip_macs(), "", "MACs the chips do, padding and replicas included");
  sg.field("plan", plan.describe());
  sg.metric("hbm_bytes_per_chip", sm.hbm_bytes_per_chip(), "bytes",
            "shards, gathers and products");
  rep.set_cycles(cycles, (macs + chips_peak - 1) / chips_peak);
  rep.set_mfu(cycles ? mfu(macs, P, peak, cycles) : 0.0);
  rep.metric("useful_macs", macs, "", "M x K x N");
  Json colls = Json::array();
  for (const ShardPhase& ph : run.phases) {
    if (!ph.collective) continue;
    colls.push_back(Json::object()
                        .set("name", ph.name)
                        .set("kind", collective_name(ph.kind))
                        .set("axis", ph.axis)
                        .set("bytes", ph.bytes));
  }
  rep.field("collectives", colls);
  rep.metric("commands", run.commands, "", "commands of the SPMD program, all chips");
  rep.metric("host_load_cycles", run.load_cycles, "cycles",
             "X, W (and bias) shards into every chip's HBM at once (0: backdoor)");
  rep.metric("host_store_cycles", run.store_cycles, "cycles",
             "Y's blocks out of every chip at once (0: backdoor)");
  Json yb = Json::array();
  for (int c = 0; c < P; ++c) {
    const ShardBlock& b = sm.y_block(c);
    yb.push_back(Json::object()
                     .set("chip", c)
                     .set("rows", Json::array().push_back(b.rows.lo).push_back(b.rows.hi))
                     .set("cols", Json::array().push_back(b.cols.lo).push_back(b.cols.hi)));
  }
  rep.field("y_blocks", yb);
  ReportGroup& fg = rep.group("f64_check");
  fg.metric("checked", chk.f64.checked, "", "elements checked against the f64 product");
  fg.metric("outside_bound", chk.f64.outside, "", "elements outside (K + p + 2) u sum|x w|",
            true);
  fg.metric("worst_error_over_bound", chk.f64.worst, "", "largest |error| / bound");
  rep.metric("replica_mismatches", chk.replica_mismatches, "", "elements whose replicas differ",
             true);
  rep.set_golden(chk.pass(), chk.compared, chk.mismatches);
}

}  // namespace tpu
