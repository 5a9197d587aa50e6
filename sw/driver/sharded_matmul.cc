#include "sharded_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "profile.h"
#include "tpu/vector.h"
#include "tpu/perf.h"

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

constexpr uint64_t kBurst = 64;

std::string axis_text(const std::string& a) { return a.empty() ? "-" : "'" + a + "'"; }

}  // namespace

// A matrix lying in a padded tensor: its first row and column there.
struct ShardedMatmul::Placed {
  HbmMatrix m;
  std::size_t row_lo = 0, col_lo = 0;
};

// A block of the product's buffer: where it lies, the product's first row it holds, its piece.
struct ShardedMatmul::CBlock {
  Placed p;
  std::size_t row_lo;
  std::size_t piece;
};

ShardedMatmul::ShardedMatmul(HostPort& host, ShardPlan plan, ShardedMatmulOptions opt)
    : host_(host), plan_(std::move(plan)), opt_(std::move(opt)) {
  const MachineInfo& mi = host_.info();
  const ShardPlan& pl = plan_;
  P_ = mi.num_chips();
  if (pl.topo.name() != mi.topo.name())
    bad("the plan is for a " + pl.topo.name() + " pod; the machine is " + mi.topo.name());
  if (!opt_.bias.empty() && opt_.bias.size() != pl.n)
    bad("bias: " + std::to_string(opt_.bias.size()) + " values; Y has " + std::to_string(pl.n) +
        " columns");
  choose_pipeline();
  wl_ = std::make_unique<Workload>(host_);
  jobs_.resize(static_cast<std::size_t>(P_));
  ws_.resize(static_cast<std::size_t>(P_));
  ws_cols_.resize(static_cast<std::size_t>(P_));
  coll_.clear();
  for (int c = 0; c < P_; ++c) {
    try {
      layout_chip(c);
    } catch (const BufferDoesNotFit& e) {  // every chip's HBM alike
      bad("not enough HBM: chip " + std::to_string(c) + " has " +
          std::to_string(mi.shape.hbm_bytes) + " bytes; its shards, gathers and products need "
          "more (" + e.what() + "): use more chips, split X or W, or a smaller shape");
    }
  }
  hbm_used_ = wl_->hbm_used();
  add_ops();
}

HbmMatrix ShardedMatmul::alloc_buf(int c, Buffer b) {
  if (c == 0) {
    decl_.push_back(wl_->add_buffer(b));
    return wl_->matrix(decl_.back());
  }
  if (next_decl_ >= decl_.size()) next_decl_ = 0;  // the next chip's layout starts
  const int i = decl_.at(next_decl_++);
  const Buffer& d = wl_->buffer(i);
  if (d.name != b.name || d.rows != b.rows || d.cols != b.cols || d.dtype != b.dtype)
    throw std::logic_error("sharded matmul: chip " + std::to_string(c) + "'s buffer '" + b.name +
                           "' is not chip 0's '" + d.name + "'");
  return wl_->matrix(i);
}

// The pipeline: a fully sharded W is gathered in column pieces, a reduce-scatter onto Y's
// rows runs in row pieces; each piece overlaps the matmul of the next or previous one.
// Depths measured best on bench_shard (2x2, 512^3): gathers 4 pieces (0.897; 2: 0.889),
// reduce-scatters 2 (0.772; 4: 0.739, 8: 0.523: each piece's collective pays its pipeline
// fill, and the merged matmul waits behind its ICI_WAITs).
// A piece must keep the array busy on its own: at least 2 (R + C) rows of A per weight tile
// (each job reloads W), at least 4 C columns of W.
void ShardedMatmul::choose_pipeline() {
  const MachineInfo& mi = host_.info();
  const ShardPlan& pl = plan_;
  const std::size_t pk = static_cast<std::size_t>(pl.axis_size(pl.k_axis));
  const std::size_t unit = std::max<std::size_t>(32, mi.shape.cols);  // a bf16 HBM row's pitch
  const std::size_t pipe_rows = 2 * (mi.shape.rows + mi.shape.cols);
  auto depth = [](std::size_t extent, std::size_t align, std::size_t most, std::size_t least) {
    for (std::size_t j = most; j > 1; j /= 2)
      if (extent % (j * align) == 0 && extent / j >= least) return j;
    return std::size_t{1};
  };
  if (pl.pre.size() == 1 && pl.pre[0].dim == 0 && pl.post.empty()) {
    pieces_ = depth(pl.w_cols(0).size(), unit, 4, 4 * mi.shape.cols);
    pipe_ = pieces_ > 1 ? Pipe::kGatherW : Pipe::kNone;
  } else if (pl.pre.empty() && pl.post.size() == 1 &&
             ((pl.post[0].kind == Collective::kReduceScatter && pl.post[0].dim == 0) ||
              pl.post[0].kind == Collective::kAllReduce)) {
    const std::size_t parts = pl.post[0].kind == Collective::kAllReduce ? 1 : pk;
    pieces_ = depth(pl.mm_rows(0).size() / parts, 1, 2, pipe_rows);
    pipe_ = pieces_ > 1 ? Pipe::kReduceY : Pipe::kNone;
  }
}

ShardedMatmul::Coll& ShardedMatmul::coll_at(std::size_t i) {
  if (coll_.size() <= i) coll_.resize(i + 1);
  Coll& k = coll_[i];
  k.bufs.in.resize(static_cast<std::size_t>(P_));
  k.bufs.out.resize(static_cast<std::size_t>(P_));
  return k;
}

// Chip c's buffers in HBM, in this order on every chip: X's and W's shards (W in column
// pieces when gathered in a pipeline), the bias, the gathers' outputs, the product's blocks,
// the collectives after the matmul; its jobs and its block of Y.
void ShardedMatmul::layout_chip(int c) {
  std::size_t ic = 0;  // collective index
  const std::vector<Placed> wb = layout_w(c, &ic);
  ShardBlock y;
  const std::vector<CBlock> cb = layout_product(c, &y);
  cut_jobs(c, wb, cb);
  // After the matmul (no pipeline): the K reduction, then a gather of Y's rows.
  if (pipe_ != Pipe::kReduceY) layout_post(c, cb, &y, &ic);
  if (!(y.rows == plan_.y_rows(c)) || !(y.cols == plan_.y_cols(c)))
    throw std::logic_error("sharded matmul: Y's block on chip " + std::to_string(c) +
                           " is not the block its spec gives");
  y_.push_back(y);
}

// X's and W's shards and the bias, then the gathers of W: on K, the ranks' row blocks stack into
// one matrix; on N, the ranks' column blocks lie one after another, a matrix each. Returns W's
// blocks as the matmul finds them.
std::vector<ShardedMatmul::Placed> ShardedMatmul::layout_w(int c, std::size_t* ic) {
  const ShardPlan& pl = plan_;
  const std::size_t ci = static_cast<std::size_t>(c);
  const Range xr = pl.x_rows(c), xc = pl.x_cols(c);
  const Range wr = pl.w_rows(c), wc = pl.w_cols(c);
  xs_.push_back(alloc_buf(c, Buffer{"X", xr.size(), xc.size(), Dtype::kBf16}));
  const std::size_t wpieces = pipe_ == Pipe::kGatherW ? pieces_ : 1;
  for (std::size_t j = 0; j < wpieces; ++j) {
    const std::size_t w0 = wc.lo + j * wc.size() / wpieces,
                      w1 = wc.lo + (j + 1) * wc.size() / wpieces;
    ws_[ci].push_back(
        alloc_buf(c, Buffer{"W piece " + std::to_string(j), wr.size(), w1 - w0, Dtype::kBf16}));
    ws_cols_[ci].push_back(Range{w0, w1});
  }
  if (!opt_.bias.empty()) bias_.push_back(alloc_buf(c, Buffer{"bias", 1, pl.np, Dtype::kF32}));
  std::vector<Placed> wb;
  for (std::size_t j = 0; j < wpieces; ++j)
    wb.push_back(Placed{ws_[ci][j], wr.lo, ws_cols_[ci][j].lo});
  for (std::size_t si = 0; si < pl.pre.size(); ++si) {
    const ShardCollective& sc = pl.pre[si];
    const std::size_t p = static_cast<std::size_t>(pl.axis_size(sc.axis));
    if (sc.dim == 1 && wb.size() != 1)
      throw std::logic_error("sharded matmul: a gather of W on N after another");
    std::vector<Placed> next;
    for (const Placed& cur : wb) {
      if (cur.m.pitch != cur.m.cols && sc.dim == 1)
        bad("W's column blocks of " + std::to_string(cur.m.cols) + " elements are not whole "
            "HBM rows of the chip's pitch (" + std::to_string(cur.m.pitch) + "): pad N to a "
            "multiple of " + std::to_string(cur.m.pitch * p));
      const std::size_t elems = p * cur.m.rows * cur.m.pitch;
      const uint64_t out = alloc_buf(c, Buffer{"W gathered " + std::to_string(*ic),
                                               p * cur.m.rows, cur.m.cols, Dtype::kBf16,
                                               cur.m.pitch, elems * 2})
                               .addr;
      Coll& k = coll_at(*ic);
      k.bufs.in[ci] = cur.m.addr;
      k.bufs.out[ci] = out;
      k.spec.collective = Collective::kAllGather;
      k.spec.dtype = DType::kBf16;
      k.spec.n = elems;
      k.spec.group_dims = sc.dims;
      k.src = si;
      k.piece = *ic;
      ++*ic;
      if (sc.dim == 0) {
        HbmMatrix g = cur.m;
        g.addr = out;
        g.rows = cur.m.rows * p;
        next.push_back(Placed{g, 0, cur.col_lo});
      } else {
        for (std::size_t s = 0; s < p; ++s) {
          HbmMatrix g = cur.m;
          g.addr = out + s * cur.m.rows * cur.m.pitch * 2;
          next.push_back(Placed{g, cur.row_lo, s * cur.m.cols});
        }
      }
    }
    wb = next;
  }
  return wb;
}

// The product's buffer in blocks, and Y's block as the matmul leaves it (*y). Reduce-scatter
// onto rows in pieces: piece j holds, for every rank r, rows r * mp/pk + j * sub of the product,
// and its reduce-scatter leaves rank r rows j * sub of its block of Y. All-reduce in pieces:
// piece j is rows j * sub of the product, reduced into rows j * sub of Y.
std::vector<ShardedMatmul::CBlock> ShardedMatmul::layout_product(int c, ShardBlock* y) {
  const ShardPlan& pl = plan_;
  const std::size_t ci = static_cast<std::size_t>(c);
  const std::size_t pk = static_cast<std::size_t>(pl.axis_size(pl.k_axis)), J = pieces_;
  const Range R = pl.mm_rows(c), C = pl.mm_cols(c);
  std::vector<CBlock> cb;
  y->rows = R;
  y->cols = C;
  if (pipe_ == Pipe::kReduceY) {
    const bool rs = pl.post[0].kind == Collective::kReduceScatter;
    const std::size_t parts = rs ? pk : 1, sub = R.size() / parts / J;
    for (std::size_t j = 0; j < J; ++j) {
      const HbmMatrix piece = alloc_buf(
          c, Buffer{"product piece " + std::to_string(j), R.size() / J, C.size(), Dtype::kF32});
      for (std::size_t r = 0; r < parts; ++r)
        cb.push_back(CBlock{Placed{hbm_view(piece, r * sub, sub, 0, C.size()), R.lo, C.lo},
                            R.lo + r * R.size() / parts + j * sub, j});
    }
    y->m = alloc_buf(c, Buffer{"Y", R.size() / parts, C.size(), Dtype::kF32});
    for (std::size_t j = 0; j < J; ++j) {
      Coll& k = coll_at(j);
      const HbmMatrix& first = cb[j * parts].p.m;  // the piece's first sub-block
      k.bufs.in[ci] = first.addr;
      k.bufs.out[ci] = y->m.addr + j * sub * y->m.pitch * 4;
      k.spec.collective = pl.post[0].kind;
      k.spec.dtype = DType::kF32;
      k.spec.n = R.size() / J * first.pitch;
      k.spec.group_dims = pl.post[0].dims;
      k.post = true;
      k.piece = j;
    }
    if (rs) y->rows = pl.block(pl.k_axis, pl.mp, c);
  } else if (pl.c_col_blocks) {
    const std::size_t nb = C.size() / pk;
    const HbmMatrix all = alloc_buf(c, Buffer{"product", pk * R.size(), nb, Dtype::kF32});
    const HbmMatrix shape = hbm_view(all, 0, R.size(), 0, nb);  // the first block
    for (std::size_t t = 0; t < pk; ++t) {
      HbmMatrix b = shape;
      b.addr = shape.addr + t * shape.bytes();
      cb.push_back(CBlock{Placed{b, R.lo, C.lo + t * nb}, R.lo, 0});
    }
    y->m = shape;
  } else {
    y->m = alloc_buf(c, Buffer{"product", R.size(), C.size(), Dtype::kF32});
    cb.push_back(CBlock{Placed{y->m, R.lo, C.lo}, R.lo, 0});
  }
  return cb;
}

// The chip's block of the product, cut into jobs that each lie in one W block and one block of
// the product's buffer.
void ShardedMatmul::cut_jobs(int c, const std::vector<Placed>& wb, const std::vector<CBlock>& cb) {
  const ShardPlan& pl = plan_;
  const std::size_t ci = static_cast<std::size_t>(c);
  const Range xr = pl.x_rows(c), xc = pl.x_cols(c);
  const Range R = pl.mm_rows(c), K = pl.mm_k(c), C = pl.mm_cols(c);
  if (R.lo < xr.lo || R.hi > xr.hi || K.lo < xc.lo || K.hi > xc.hi)
    throw std::logic_error("sharded matmul: the product's block is not in X's shard");
  std::vector<std::size_t> cuts = {C.lo, C.hi};
  for (const Placed& b : wb)
    for (std::size_t e : {b.col_lo, b.col_lo + b.m.cols})
      if (e > C.lo && e < C.hi) cuts.push_back(e);
  for (const CBlock& b : cb)
    for (std::size_t e : {b.p.col_lo, b.p.col_lo + b.p.m.cols})
      if (e > C.lo && e < C.hi) cuts.push_back(e);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (const CBlock& blk : cb) {
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const std::size_t a = cuts[i], b = cuts[i + 1];
      if (a < blk.p.col_lo || b > blk.p.col_lo + blk.p.m.cols) continue;
      std::size_t wi = wb.size();
      for (std::size_t q = 0; q < wb.size(); ++q)
        if (wb[q].col_lo <= a && b <= wb[q].col_lo + wb[q].m.cols) wi = q;
      if (wi == wb.size()) throw std::logic_error("sharded matmul: a column piece in no block");
      const Placed& W = wb[wi];
      if (K.lo < W.row_lo || K.hi > W.row_lo + W.m.rows)
        throw std::logic_error("sharded matmul: the product's K range is not in W");
      Job j;
      j.a = hbm_view(xs_[ci], blk.row_lo - xr.lo, blk.p.m.rows, K.lo - xc.lo, K.size());
      j.w = hbm_view(W.m, K.lo - W.row_lo, K.size(), a - W.col_lo, b - a);
      j.c = hbm_view(blk.p.m, 0, blk.p.m.rows, a - blk.p.col_lo, b - a);
      if (!opt_.bias.empty()) {
        j.bias = hbm_view(bias_[ci], 0, 1, a, b - a);
        j.has_bias = true;
      }
      j.piece = pipe_ == Pipe::kGatherW ? wi : blk.piece;
      jobs_[ci].push_back(j);
    }
  }
}

// The collectives after the matmul (no pipeline): the K reduction, then a gather of Y's rows;
// each moves Y's block (*y) to its output.
void ShardedMatmul::layout_post(int c, const std::vector<CBlock>& cb, ShardBlock* y,
                                std::size_t* ic) {
  const ShardPlan& pl = plan_;
  const std::size_t ci = static_cast<std::size_t>(c);
  const Range R = pl.mm_rows(c), C = pl.mm_cols(c);
  const uint64_t c_addr = cb[0].p.m.addr;
  const std::size_t c_elems = cb.size() * R.size() * cb[0].p.m.pitch;
  for (std::size_t si = 0; si < pl.post.size(); ++si) {
    const ShardCollective& sc = pl.post[si];
    const std::size_t p = static_cast<std::size_t>(pl.axis_size(sc.axis));
    const int rank = pl.axis_rank(sc.axis, c);
    Coll& k = coll_at((*ic)++);
    k.spec.collective = sc.kind;
    k.spec.dtype = DType::kF32;
    k.spec.group_dims = sc.dims;
    k.post = true;
    k.src = si;
    std::size_t out_elems = 0;
    if (sc.kind == Collective::kAllGather) {
      k.spec.n = p * y->m.rows * y->m.pitch;
      out_elems = k.spec.n;
      k.bufs.in[ci] = y->m.addr;
      y->m.rows *= p;
      y->rows = Range{0, pl.mp};
    } else {
      k.spec.n = c_elems;
      out_elems = sc.kind == Collective::kAllReduce ? c_elems : c_elems / p;
      k.bufs.in[ci] = c_addr;
      if (sc.dim == 0) {
        y->m.rows /= p;
        y->rows = pl.block(sc.axis, pl.mp, c);
      } else if (sc.dim == 1) {
        y->cols = Range{C.lo + static_cast<std::size_t>(rank) * y->m.cols,
                        C.lo + static_cast<std::size_t>(rank + 1) * y->m.cols};
      }
    }
    // Y's block as the collective leaves it: a matrix of the product's pitch.
    y->m.addr = alloc_buf(c, Buffer{coll_name(*ic - 1), y->m.rows, y->m.cols, Dtype::kF32,
                                    y->m.pitch, out_elems * 4})
                    .addr;
    k.bufs.out[ci] = y->m.addr;
  }
}

std::vector<ShardedMatmul::Image> ShardedMatmul::images(const std::vector<bf16_t>& x,
                                                        const std::vector<bf16_t>& w) const {
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
  std::vector<float> bias_p(p.np, 0.0f);
  std::copy(opt_.bias.begin(), opt_.bias.end(), bias_p.begin());
  std::vector<Image> out;
  for (int c = 0; c < P_; ++c) {
    const std::size_t ci = static_cast<std::size_t>(c);
    const ChipDriver& d = wl_->driver(c);
    out.push_back(Image{c, xs_[ci].addr,
                        d.matrix_image(xs_[ci], block(x, p.m, p.k, p.x_rows(c), p.x_cols(c)))});
    for (std::size_t j = 0; j < ws_[ci].size(); ++j)
      out.push_back(Image{c, ws_[ci][j].addr,
                          d.matrix_image(ws_[ci][j],
                                         block(w, p.k, p.n, p.w_rows(c), ws_cols_[ci][j]))});
    if (!bias_.empty()) out.push_back(Image{c, bias_[ci].addr, d.matrix_image(bias_[ci], bias_p)});
  }
  return out;
}

uint64_t ShardedMatmul::load(const std::vector<bf16_t>& x, const std::vector<bf16_t>& w) {
  std::vector<Image> img = images(x, w);
  if (opt_.backdoor) {
    for (const Image& i : img) host_.backdoor_write(i.chip, i.addr, i.bytes.data(), i.bytes.size());
    return 0;
  }
  std::vector<HostCopy> ops;
  for (Image& i : img) ops.push_back(HostCopy{i.chip, true, i.addr, i.bytes.data(), i.bytes.size()});
  return host_.copy(ops);
}

std::string ShardedMatmul::coll_name(std::size_t i) const {
  const Coll& k = coll_[i];
  const ShardCollective& sc = k.post ? plan_.post[k.src] : plan_.pre[k.src];
  return std::string(collective_name(sc.kind)) + " of " + sc.tensor + " over " +
         axis_text(sc.axis) + (pieces_ > 1 ? " (piece " + std::to_string(k.piece) + ")" : "");
}

// Collective i as an op: its buffers are every chip's (the same addresses on each).
int ShardedMatmul::add_coll_op(std::size_t i, bool lead) {
  const Coll& k = coll_[i];
  const ShardCollective& sc = k.post ? plan_.post[k.src] : plan_.pre[k.src];
  const uint64_t esize = k.spec.dtype == DType::kBf16 ? 2 : 4;
  const uint64_t in_bytes =
      k.spec.collective == Collective::kAllGather
          ? k.spec.n * esize / static_cast<uint64_t>(group_size(plan_.topo, k.spec.group_dims))
          : k.spec.n * esize;
  CollectiveOp co;
  co.spec = k.spec;
  co.in = wl_->ref_span(k.bufs.in[0], in_bytes);
  co.out = wl_->ref_span(k.bufs.out[0], 1);
  co.axis = sc.axis;
  co.lead = lead;
  Op op = collective_op(coll_name(i), co);
  op.piece = pipe_ == Pipe::kNone ? -1 : static_cast<int>(k.piece);
  return wl_->add_op(std::move(op));
}

// The jobs of one piece (all of them without a pipeline), chip by chip.
void ShardedMatmul::add_matmul_ops(std::size_t piece) {
  for (int c = 0; c < P_; ++c)
    for (const Job& j : jobs_[static_cast<std::size_t>(c)]) {
      if (j.piece != piece && pipe_ != Pipe::kNone) continue;
      // K split: the epilogue follows the reduction instead.
      const bool epi_here = plan_.k_axis.empty();
      Op op = matmul_op("matmul", wl_->ref_of(j.c), wl_->ref_of(j.a), wl_->ref_of(j.w),
                        j.has_bias && epi_here ? wl_->ref_of(j.bias) : BufferRef{},
                        opt_.relu && epi_here);
      op.chips = {c};
      op.piece = pipe_ == Pipe::kNone ? -1 : static_cast<int>(piece);
      wl_->add_op(std::move(op));
    }
}

// The stream: a gather pipeline gathers piece j + 1 beside the matmul of piece j (the matmul's
// commands lead); a reduction pipeline reduces piece j beside the matmul of piece j + 1; else
// the gathers, the matmul, the reductions one after another. Phases: each collective before the
// matmul, the matmul, each after it, the epilogue.
void ShardedMatmul::add_ops() {
  const std::size_t ncoll = coll_.size(), J = pieces_;
  for (std::size_t i = 0; i < ncoll; ++i)
    if (!coll_[i].post) wl_->declare_phase(coll_name(i));
  wl_->declare_phase("matmul");
  for (std::size_t i = 0; i < ncoll; ++i)
    if (coll_[i].post) wl_->declare_phase(coll_name(i));
  if (pipe_ == Pipe::kGatherW) {
    add_coll_op(0, true);
    for (std::size_t j = 0; j < J; ++j) {
      if (j + 1 < J) add_coll_op(j + 1, false);
      add_matmul_ops(j);
    }
  } else if (pipe_ == Pipe::kReduceY) {
    for (std::size_t j = 0; j < J; ++j) {
      add_matmul_ops(j);
      add_coll_op(j, true);
    }
  } else {
    for (std::size_t i = 0; i < ncoll; ++i)
      if (!coll_[i].post) add_coll_op(i, true);
    add_matmul_ops(0);
    for (std::size_t i = 0; i < ncoll; ++i)
      if (coll_[i].post) add_coll_op(i, true);
  }
  // K split: bias and ReLU after the reduction, on each chip's block of Y (the VPU).
  if (plan_.k_axis.empty() || (opt_.bias.empty() && !opt_.relu)) return;
  for (int c = 0; c < P_; ++c) {
    const ShardBlock& b = y_[static_cast<std::size_t>(c)];
    const BufferRef bias =
        opt_.bias.empty()
            ? BufferRef{}
            : wl_->ref_of(hbm_view(bias_[static_cast<std::size_t>(c)], 0, 1, b.cols.lo,
                                   b.cols.size()));
    Op op = epilogue_op("epilogue", wl_->ref_of(b.m), bias, opt_.relu);
    op.chips = {c};
    wl_->add_op(std::move(op));
  }
}

SpmdProgram ShardedMatmul::programs() {
  Schedule s = schedule(*wl_);
  rounds_.clear();
  for (const PodProgram& p : s.collectives) rounds_.push_back(p.rounds);
  return std::move(s.program);
}

ShardedRun ShardedMatmul::run() {
  ShardedRun r;
  r.program = programs();
  r.pieces = pieces_;
  r.commands = r.program.commands();
  // Each command carries its phase's name on the timeline, and a collective's its plan step.
  PodDriver pd(host_);
  r.prog = pd.run_programs(r.program);
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
  std::vector<std::vector<uint32_t>> out;
  if (p.k_axis.empty()) {
    MatmulOptions mo;
    mo.bias = opt_.bias.empty() ? nullptr : &opt_.bias;
    mo.relu = opt_.relu;
    const auto g = golden_chip_matmul(x, w, p.m, p.k, p.n, mo);
    for (std::size_t i = 0; i < p.m; ++i)
      std::copy(g.begin() + static_cast<std::ptrdiff_t>(i * p.n),
                g.begin() + static_cast<std::ptrdiff_t>((i + 1) * p.n),
                yg.begin() + static_cast<std::ptrdiff_t>(i * p.np));
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
  // K split: the plan run on a model of each chip's HBM: the operands as load() lays them out,
  // each collective by its rounds (golden_collective), each matmul job by golden_chip_matmul
  // (its K block in MXU order), in program order.
  std::vector<std::vector<uint8_t>> mem(static_cast<std::size_t>(P_),
                                        std::vector<uint8_t>(hbm_used_, 0));
  for (const Image& im : images(x, w))
    std::copy(im.bytes.begin(), im.bytes.end(),
              mem[static_cast<std::size_t>(im.chip)].begin() + static_cast<std::ptrdiff_t>(im.addr));
  auto elem = [](const std::vector<uint8_t>& m, uint64_t at, std::size_t esz) {
    uint32_t v = 0;
    std::memcpy(&v, &m[at], esz);
    return v;
  };
  auto run_coll = [&](const Coll& k, const std::vector<CollectiveRound>& rounds) {
    const std::size_t esz = k.spec.dtype == DType::kBf16 ? 2 : 4;
    // Every buffer here divides evenly: a gather's input is its rank's 1/p, the others' all n.
    const std::size_t in_len =
        k.spec.collective == Collective::kAllGather
            ? k.spec.n / static_cast<std::size_t>(group_size(p.topo, k.spec.group_dims))
            : k.spec.n;
    std::vector<std::vector<uint32_t>> in(static_cast<std::size_t>(P_));
    for (int c = 0; c < P_; ++c) {
      const std::size_t ci = static_cast<std::size_t>(c);
      for (std::size_t i = 0; i < in_len; ++i)
        in[ci].push_back(elem(mem[ci], k.bufs.in[ci] + i * esz, esz));
    }
    const auto res = golden_collective(rounds, in);
    for (int c = 0; c < P_; ++c) {
      const std::size_t ci = static_cast<std::size_t>(c);
      for (std::size_t i = 0; i < res[ci].size(); ++i)
        std::memcpy(&mem[ci][k.bufs.out[ci] + i * esz], &res[ci][i], esz);
    }
  };
  auto read_bf16 = [&](const std::vector<uint8_t>& m, const HbmMatrix& v) {
    std::vector<bf16_t> r(v.rows * v.cols);
    for (std::size_t i = 0; i < v.rows; ++i)
      for (std::size_t j = 0; j < v.cols; ++j)
        r[i * v.cols + j] = static_cast<bf16_t>(elem(m, v.addr + (i * v.pitch + j) * 2, 2));
    return r;
  };
  for (std::size_t q = 0; q < coll_.size(); ++q)
    if (!coll_[q].post) run_coll(coll_[q], rounds_.at(q));
  for (int c = 0; c < P_; ++c) {
    const std::size_t ci = static_cast<std::size_t>(c);
    for (const Job& j : jobs_[ci]) {
      const auto g = golden_chip_matmul(read_bf16(mem[ci], j.a), read_bf16(mem[ci], j.w),
                                        j.a.rows, j.a.cols, j.w.cols, MatmulOptions{});
      for (std::size_t i = 0; i < j.c.rows; ++i)
        std::memcpy(&mem[ci][j.c.addr + i * j.c.pitch * 4], &g[i * j.c.cols], j.c.cols * 4);
    }
  }
  for (std::size_t q = 0; q < coll_.size(); ++q)
    if (coll_[q].post) run_coll(coll_[q], rounds_.at(q));
  for (int c = 0; c < P_; ++c) {
    const ShardBlock& b = y_[static_cast<std::size_t>(c)];
    std::vector<uint32_t> v(b.rows.size() * b.cols.size());
    for (std::size_t i = 0; i < b.rows.size(); ++i)
      for (std::size_t j = 0; j < b.cols.size(); ++j) {
        uint32_t e = elem(mem[static_cast<std::size_t>(c)], b.m.addr + (i * b.m.pitch + j) * 4, 4);
        // The epilogue after the reduction, as the VPU does it (plan_epilogue).
        const std::size_t col = b.cols.lo + j;
        if (!opt_.bias.empty())
          e = vpu_lane(VpuOp::kAdd, e, f32_bits(col < p.n ? opt_.bias[col] : 0.0f), 0);
        if (opt_.relu) e = vpu_lane(VpuOp::kRelu, e, e, 0);
        v[i * b.cols.size() + j] = e;
      }
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
        // A non-finite result (or one of non-finite inputs) has no f64 bound: the golden alone
        // checks it, bit for bit.
        if (!std::isfinite(got) || !std::isfinite(want) || !std::isfinite(m)) {
          ++r.non_finite;
          continue;
        }
        const double bound = terms * u * m + 1e-300;
        const double err = std::fabs(static_cast<double>(got) - want);
        ++r.checked;
        if (!(err <= bound)) ++r.outside;
        r.worst = std::max(r.worst, err / bound);
      }
  }
  return r;
}

void set_phase_cycles(ShardedRun* run, const std::vector<TraceEvent>& events) {
  const SpmdProgram& prog = run->program;
  run->phase_cycles.assign(prog.phases().size(), 0);
  std::vector<uint64_t> lo(prog.phases().size(), ~0ull), hi(prog.phases().size(), 0);
  for (const TraceEvent& e : events) {
    const int p = e.unit == TraceUnit::kHost ? -1 : prog.phase_of_label(e.label);
    if (p < 0) continue;
    lo[static_cast<std::size_t>(p)] = std::min(lo[static_cast<std::size_t>(p)], e.issue);
    hi[static_cast<std::size_t>(p)] = std::max(hi[static_cast<std::size_t>(p)], e.done);
  }
  for (std::size_t p = 0; p < lo.size(); ++p)
    run->phase_cycles[p] = hi[p] > lo[p] ? hi[p] - lo[p] : 0;
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
  Json colls_all = Json::array(), matmul_phase = Json::object();
  ReportGroup& sg = rep.group("sharding");
  sg.field("mesh", plan.mesh.text());
  sg.field("x_spec", plan.x.text()).field("w_spec", plan.w.text()).field("y_spec", plan.y.text());
  sg.metric("m", plan.m, "", "").metric("k", plan.k, "", "").metric("n", plan.n, "", "");
  sg.field("padded", Json::array({plan.mp, plan.kp, plan.np}));
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
  report_profile(rep, run.prog.chip_delta, cycles, macs, peak);  // mfu, breakdown
  rep.metric("pieces", run.pieces, "", "pipeline depth: gathers or reductions under the matmul");
  for (std::size_t i = 0; i < run.program.phases().size(); ++i) {
    const SpmdPhase& ph = run.program.phases()[i];
    Json o = Json::object({{"name", ph.name}});
    if (ph.collective) {
      o["kind"] = collective_name(ph.kind);
      o["axis"] = ph.axis;
      o["bytes"] = ph.bytes;
    }
    if (i < run.phase_cycles.size()) o["cycles"] = run.phase_cycles[i];
    if (ph.collective)
      colls_all.push_back(o);
    else
      matmul_phase = o;
  }
  rep.field("collectives", colls_all);
  rep.field("matmul", matmul_phase);
  rep.metric("commands", run.commands, "", "commands of the SPMD program, all chips");
  rep.metric("host_load_cycles", run.load_cycles, "cycles",
             "X, W (and bias) shards into every chip's HBM at once (0: backdoor)");
  rep.metric("host_store_cycles", run.store_cycles, "cycles",
             "Y's blocks out of every chip at once (0: backdoor)");
  Json yb = Json::array();
  for (int c = 0; c < P; ++c) {
    const ShardBlock& b = sm.y_block(c);
    yb.push_back(Json::object({{"chip", c},
                               {"rows", Json::array({b.rows.lo, b.rows.hi})},
                               {"cols", Json::array({b.cols.lo, b.cols.hi})}}));
  }
  rep.field("y_blocks", yb);
  ReportGroup& fg = rep.group("f64_check");
  fg.metric("checked", chk.f64.checked, "", "elements checked against the f64 product");
  fg.metric("outside_bound", chk.f64.outside, "", "elements outside (K + p + 2) u sum|x w|",
            true);
  fg.metric("worst_error_over_bound", chk.f64.worst, "", "largest |error| / bound");
  fg.metric("non_finite", chk.f64.non_finite, "",
            "elements not finite (NaN/Inf inputs, overflow): checked by the golden alone");
  rep.metric("replica_mismatches", chk.replica_mismatches, "", "elements whose replicas differ",
             true);
  rep.set_golden(chk.pass(), chk.compared, chk.mismatches);
}

}  // namespace tpu
