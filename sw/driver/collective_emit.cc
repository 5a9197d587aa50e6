// The collective compiler's emitters (collective_compile.h): a round's transfers as sends,
// waits and reductions on every chip; its loads, stores and bf16 conversions as DMA and VPU ops;
// and each chip's ops in program order, slot by slot, with the tokens that lend regions.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "collective_compile.h"
#include "tpu/vector.h"

namespace tpu::pod_compile {

namespace {

std::array<int, 3> coord3(const Topology& topo, int id) {
  const PodCoord c = topo.coord(id);
  return std::array<int, 3>{c[0], c[1], c[2]};
}

// ---- Transfers.

// Rows for a landing area in chip s's region (std::length_error where it is full).
uint32_t alloc_rows(ChipRound& s, uint32_t rows) {
  const uint32_t r = s.next_row;
  s.next_row += rows;
  if (s.next_row > s.region_end) throw std::length_error("region");
  return r;
}

// The step an op belongs to: its step in issue order, its plan step, its program slot.
struct StepTag {
  int s = 0, ps = 0, slot = 0;
  std::size_t round = 0;
  void operator()(Op& op, int phase) const {
    op.step = s;
    op.plan_step = ps;
    op.slot = slot;
    op.phase = phase;
  }
};

// A transfer of the step being emitted.
struct Pending {
  const Transfer* t;
  RowList src, dst;
  uint32_t stage = 0;
  uint32_t bs = 1;        // rows per block: the transfer cut into equal blocks of <= block_rows
  bool direct = false;    // a copy that lands on the destination's own rows of the pieces
  std::vector<Fmt> sent;  // how each source piece is held as it is sent
  int cnt = -1;           // the destination's counter for its rows
};

// The sender's pieces of a packed copy not packed yet are final here: packs them in place.
void pack_sources(const Pieces& pc, const Pieces& packed, const Transfer& t, const StepTag& tag,
                  ChipRound& src) {
  for (std::size_t j : pc.cover(t.src_offset, t.count)) {
    if (src.fmt[j] == Fmt::kPacked) continue;
    const uint32_t h = packed.rows[j];
    VpuCmdArgs a;
    a.op = static_cast<unsigned>(VpuOp::kPackBf16);
    a.src_bf16 = src.fmt[j] == Fmt::kBf16 ? (kVpuSrcBf16X | kVpuSrcBf16Y) : 0u;
    a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
    a.x_row = a.dst_row = src.loc[j];
    a.y_row = src.loc[j] + h;
    a.rows = h;
    Op op = vpu_op(a, h);
    tag(op, 0);
    src.ops.push_back(op);
    src.fmt[j] = Fmt::kPacked;
  }
}

// Transfer t of a step over pieces `v` (packed for a packed copy): its rows on both sides, its
// landing area, its counter at the destination (per kind of use: chain() may chain it) and its
// blocks.
Pending pend_transfer(const CollectivePlan& plan, const Pieces& v, const Transfer& t,
                      const Step* next, uint32_t block_rows, const StepTag& tag,
                      std::vector<ChipRound>& st, Counters& ctr) {
  Pending p{&t,
            row_list(v, v.cover(t.src_offset, t.count)),
            row_list(v, v.cover(t.dst_offset, t.count)),
            0,
            1,
            false,
            {},
            -1};
  if (p.src.pieces.size() != p.dst.pieces.size() || p.src.rows != p.dst.rows)
    bad("plan step " + std::to_string(tag.s) + ": a transfer's source and destination differ");
  // A copy lands straight on the destination's rows of its pieces, except in the ring
  // all_to_all (whose staging banks are reused from step to step). Safe without a landing area:
  // in these plans every element reaches a chip by copy once, and the value that arrives was
  // computed from everything this chip sent or reduced from those rows before, so no local
  // command still reads them (docs/pod.md); every other transfer lands in fresh rows.
  p.direct =
      t.kind == TransferKind::kCopy && (plan.spec.collective != Collective::kAllToAll || t.routed);
  if (!p.direct) p.stage = alloc_rows(st[static_cast<std::size_t>(t.dst)], p.src.rows);
  p.cnt = transfer_counter(ctr, plan, next, t, tag.round);
  for (std::size_t j : p.src.pieces) p.sent.push_back(st[static_cast<std::size_t>(t.src)].fmt[j]);
  const uint32_t nb = std::max<uint32_t>(1, (p.src.rows + block_rows - 1) / block_rows);
  p.bs = std::max<uint32_t>(1, (p.src.rows + nb - 1) / nb);
  return p;
}

// Block blk of a transfer: sends contiguous on both sides.
void emit_sends(const Topology& topo, const Pending& p, std::size_t blk, const StepTag& tag,
                std::vector<ChipRound>& st) {
  const Transfer& t = *p.t;
  const uint32_t o = static_cast<uint32_t>(blk) * p.bs;
  if (o >= p.src.rows) return;
  const uint32_t n = std::min(p.bs, p.src.rows - o);
  const auto src_runs = runs(p.src, st[static_cast<std::size_t>(t.src)].loc, o, n);
  std::vector<Run> dst_runs;
  if (p.direct)
    dst_runs = runs(p.dst, st[static_cast<std::size_t>(t.dst)].loc, o, n);
  else
    dst_runs.push_back({p.stage + o, n, o});
  std::size_t i = 0, j = 0;
  while (i < src_runs.size() && j < dst_runs.size()) {
    const Run& a = src_runs[i];
    const Run& b = dst_runs[j];
    const uint32_t lo = std::max(a.at, b.at);
    const uint32_t hi = std::min(a.at + a.len, b.at + b.len);
    if (hi > lo) {
      Op op;
      op.kind = Op::kSend;
      tag(op, 0);
      op.block = blk;
      op.peer = t.dst;
      const uint32_t row = a.row + (lo - a.at);
      // The route's direction decides a k/2 tie (both links of a 2-ring carry data).
      op.cmd = cmd_ici_send(Mem::kVmem, row, hi - lo, coord3(topo, t.dst), Mem::kVmem,
                            b.row + (lo - b.at), static_cast<uint32_t>(p.cnt), t.route.dir);
      op.reads.push_back({row, row + (hi - lo)});
      st[static_cast<std::size_t>(t.src)].ops.push_back(op);
    }
    if (a.at + a.len <= b.at + b.len)
      ++i;
    else
      ++j;
  }
}

// op(incoming, own) of rows [o, o + n) of a reduction into the own rows, piece by piece with
// each operand's format (merged where rows and formats follow on).
std::vector<VpuCmdArgs> reduction_args(const Pieces& pc, unsigned vop, const Pending& p, uint32_t o,
                                       uint32_t n, const ChipRound& d) {
  std::vector<VpuCmdArgs> red;
  for (std::size_t i = 0; i < p.dst.pieces.size(); ++i) {
    const uint32_t p0 = p.dst.offset[i], p1 = p0 + pc.rows[p.dst.pieces[i]];
    const uint32_t lo = std::max(o, p0), hi = std::min(o + n, p1);
    if (lo >= hi) continue;
    VpuCmdArgs a;
    a.op = vop;
    a.src_bf16 = (p.sent[i] == Fmt::kBf16 ? kVpuSrcBf16X : 0u) |
                 (d.fmt[p.dst.pieces[i]] == Fmt::kBf16 ? kVpuSrcBf16Y : 0u);
    a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
    a.x_row = p.stage + lo;
    a.y_row = a.dst_row = d.loc[p.dst.pieces[i]] + (lo - p0);
    a.rows = hi - lo;
    if (!red.empty() && red.back().src_bf16 == a.src_bf16 &&
        red.back().x_row + red.back().rows == a.x_row &&
        red.back().y_row + red.back().rows == a.y_row)
      red.back().rows += a.rows;
    else
      red.push_back(a);
  }
  return red;
}

// Block blk's arrival at the destination: a wait for its rows, then a reduction's VPU ops.
void emit_arrival(const Pieces& pc, unsigned vop, const Pending& p, std::size_t blk,
                  const StepTag& tag, ChipRound& d) {
  const Transfer& t = *p.t;
  const uint32_t o = static_cast<uint32_t>(blk) * p.bs;
  if (o >= p.src.rows) return;
  const uint32_t n = std::min(p.bs, p.src.rows - o);
  Op w;
  w.kind = Op::kWait;
  tag(w, 1);
  w.block = blk;
  w.peer = p.cnt;
  w.cmd = cmd_ici_wait(static_cast<uint32_t>(p.cnt), n);
  if (p.direct) {
    for (const Run& r : runs(p.dst, d.loc, o, n)) w.writes.push_back({r.row, r.row + r.len});
  } else {
    w.writes.push_back({p.stage + o, p.stage + o + n});
  }
  d.ops.push_back(w);
  if (t.kind != TransferKind::kReduce) return;
  for (const VpuCmdArgs& a : reduction_args(pc, vop, p, o, n, d)) {
    Op v = vpu_op(a, a.rows);
    tag(v, 1);
    v.block = blk;
    d.ops.push_back(v);
  }
}

// The arrivals of routed transfers (the direct all_to_all), which count on one counter per
// receiver: a single wait per receiver for the sum of its rows, writing all of them (a wait
// per transfer could be met by another sender's rows).
void emit_routed_arrivals(const std::vector<Pending>& pend, const StepTag& tag,
                          std::vector<ChipRound>& st) {
  std::map<int, std::pair<Op, uint32_t>> waits;  // by receiver: the wait and its rows
  for (const Pending& p : pend) {
    if (!p.t->routed) continue;
    if (p.t->kind != TransferKind::kCopy || !p.direct)
      bad("internal: a routed transfer that does not copy in place");
    auto& [w, rows] = waits[p.t->dst];
    if (w.peer >= 0 && w.peer != p.cnt) bad("internal: routed transfers on two counters");
    w.kind = Op::kWait;
    tag(w, 1);
    w.peer = p.cnt;
    rows += p.src.rows;
    for (const Run& r : runs(p.dst, st[static_cast<std::size_t>(p.t->dst)].loc, 0, p.src.rows))
      w.writes.push_back({r.row, r.row + r.len});
  }
  for (auto& [d, wr] : waits) {
    wr.first.cmd = cmd_ici_wait(static_cast<uint32_t>(wr.first.peer), wr.second);
    st[static_cast<std::size_t>(d)].ops.push_back(wr.first);
  }
}

// What a step leaves: reduced pieces hold f32, copies land packed (or as they were sent), and a
// copy that does not land in place moves the piece.
void finish_step(const std::vector<Pending>& pend, const Pieces* packed,
                 std::vector<ChipRound>& st) {
  for (const Pending& p : pend) {
    ChipRound& d = st[static_cast<std::size_t>(p.t->dst)];
    for (std::size_t i = 0; i < p.dst.pieces.size(); ++i)
      d.fmt[p.dst.pieces[i]] = p.t->kind == TransferKind::kReduce ? Fmt::kF32 : p.sent[i];
    if (packed != nullptr && p.t->kind == TransferKind::kCopy && !p.direct)
      bad("internal: a packed copy that does not land in place");
    if (p.t->kind == TransferKind::kReduce || p.direct) continue;
    for (std::size_t i = 0; i < p.dst.pieces.size(); ++i)
      d.loc[p.dst.pieces[i]] = p.stage + p.dst.offset[i];
  }
}

}  // namespace

// A piece's owner packs it in place (the rounding to bf16 the result gets anyway) before it
// first sends it; a copy lands packed on the receiver's rows of the piece, where it stays packed
// (docs/collectives.md, Numerics).
void emit_transfers(const CollectivePlan& plan, const Pieces& pc, const Pieces* packed,
                    uint32_t block_rows, const StepNumbers& num, std::vector<ChipRound>& st,
                    Counters& ctr) {
  const unsigned vop =
      static_cast<unsigned>(plan.spec.op == ReduceOp::kMax ? VpuOp::kMax : VpuOp::kAdd);
  for (std::size_t si = 0; si < plan.steps.size(); ++si) {
    StepTag tag;
    tag.s = num.step_base + static_cast<int>(si);
    tag.ps = num.plan_base + static_cast<int>(si);
    tag.slot = num.round + (si >= num.late_from ? 1 : 0);
    tag.round = static_cast<std::size_t>(num.round);
    const Step* next = si + 1 < plan.steps.size() ? &plan.steps[si + 1] : nullptr;
    std::vector<Pending> pend;
    for (const Transfer& t : plan.steps[si].transfers) {
      const bool pk = packed != nullptr && t.kind == TransferKind::kCopy;
      if (pk) pack_sources(pc, *packed, t, tag, st[static_cast<std::size_t>(t.src)]);
      pend.push_back(pend_transfer(plan, pk ? *packed : pc, t, next, block_rows, tag, st, ctr));
    }
    std::size_t max_blocks = 0;
    for (const Pending& p : pend)
      max_blocks = std::max<std::size_t>(max_blocks, (p.src.rows + p.bs - 1) / p.bs);
    // Sends, block-major (block k of every transfer before block k + 1 of any): sends towards
    // different links alternate and run side by side on the ICI engine's contexts.
    for (std::size_t blk = 0; blk < max_blocks; ++blk)
      for (const Pending& p : pend) emit_sends(plan.topo, p, blk, tag, st);
    // Arrivals, block-major too: wait for each block, then reduce it into the own value.
    for (std::size_t blk = 0; blk < max_blocks; ++blk)
      for (const Pending& p : pend)
        if (!p.t->routed)
          emit_arrival(pc, vop, p, blk, tag, st[static_cast<std::size_t>(p.t->dst)]);
    emit_routed_arrivals(pend, tag, st);
    finish_step(pend, packed, st);
  }
}

// ---- Loads and stores.

namespace {

// DMAs of `rows` memory rows <-> one contiguous HBM region, in pieces of at most `max_rows`;
// `cmd_rows` gets each command's rows. A command moves at most 32 KiB per segment (a 16-bit
// byte count), so a longer piece is several segments that follow on in HBM (stride = segment).
// hi: a bf16 store of each lane's bits [31:16].
void dma_rows(std::vector<ChipCmd>* prog, std::vector<uint32_t>* cmd_rows, DmaDir dir, bool bf16,
              uint32_t row, uint32_t rows, uint64_t hbm, unsigned lanes, uint32_t row_align,
              uint32_t max_rows, bool hi) {
  const uint32_t rb = lanes * (bf16 ? 2u : 4u);
  uint32_t seg = std::max<uint32_t>(1, 32768 / rb) / row_align * row_align;
  if (seg == 0) seg = row_align;
  uint32_t chunk = std::max(max_rows / row_align * row_align, row_align);
  for (uint32_t r = 0; r < rows;) {
    uint32_t n = std::min(chunk, rows - r);
    const uint32_t addr = static_cast<uint32_t>(hbm + uint64_t{r} * rb);
    if (n > seg) {
      n = n / seg * seg;
      prog->push_back(cmd_dma(dir, bf16, row + r, n / seg, seg * rb, addr, seg * rb, 0, hi));
    } else {
      prog->push_back(cmd_dma(dir, bf16, row + r, 1, n * rb, addr, 0, 0, hi));
    }
    cmd_rows->push_back(n);
    r += n;
  }
}

// Memory rows <-> HBM spans of one direction, merged where they follow on in both, then cut
// into DMA commands of at most max_rows rows.
class DmaSpans {
 public:
  DmaSpans(DmaDir dir, bool bf16, unsigned lanes, uint32_t row_align, uint32_t max_rows)
      : dir_(dir),
        bf16_(bf16),
        lanes_(lanes),
        align_(row_align),
        max_(max_rows),
        rb_(lanes * (bf16 ? 2u : 4u)) {}
  // hi: a bf16 store of the lanes' upper halves (the upper bf16 of packed pairs).
  void add(uint32_t row, uint32_t rows, uint64_t hbm, bool hi = false) {
    rows = (rows + align_ - 1) / align_ * align_;
    if (!spans_.empty()) {
      Span& b = spans_.back();
      if (b.row + b.rows == row && b.hbm + uint64_t{b.rows} * rb_ == hbm && b.hi == hi) {
        b.rows += rows;
        return;
      }
    }
    spans_.push_back({row, rows, hbm, hi});
  }
  // Reorders a store: cut into pieces of at most `piece` rows, in the order the ops of `writers`
  // last write them (pieces nothing writes first), merged again where they follow on. With its
  // ops hoisted, each piece goes out as soon as its rows are final.
  void in_ready_order(const std::vector<Op>& writers, uint32_t piece) {
    reorder(piece, [&](const Range& r) {
      std::size_t last = 0;
      for (std::size_t i = 0; i < writers.size(); ++i)
        for (const Range& u : writers[i].writes)
          if (u.overlaps(r)) last = i + 1;
      return last;
    });
  }
  // Reorders a load: cut into pieces of at most `piece` rows, in the order the ops of `readers`
  // first touch them (pieces nothing touches last), merged again where they follow on. The
  // first sends then wait for their own rows only, not for the whole load.
  void in_need_order(const std::vector<Op>& readers, uint32_t piece) {
    reorder(piece, [&](const Range& r) {
      for (std::size_t i = 0; i < readers.size(); ++i)
        if (touches(readers[i], r)) return i;
      return readers.size();
    });
  }
  // As ops: a load writes its rows, a store reads them.
  std::vector<Op> ops() const {
    std::vector<Op> v;
    for (const Span& s : spans_) {
      std::vector<ChipCmd> cmds;
      std::vector<uint32_t> rows;
      dma_rows(&cmds, &rows, dir_, bf16_, s.row, s.rows, s.hbm, lanes_, align_, max_, s.hi);
      uint32_t lo = s.row;
      for (std::size_t i = 0; i < cmds.size(); ++i) {
        Op op;
        op.kind = Op::kDma;
        op.cmd = cmds[i];
        const Range r{lo, lo + rows[i]};
        lo += rows[i];
        (dir_ == DmaDir::kHbmToVmem ? op.writes : op.reads).push_back(r);
        v.push_back(op);
      }
    }
    return v;
  }

 private:
  struct Span {
    uint32_t row, rows;
    uint64_t hbm;
    bool hi;
  };
  // The spans cut into pieces of at most `piece` rows, stably sorted by key(rows of the piece),
  // merged again where they follow on.
  template <class Key>
  void reorder(uint32_t piece, Key key) {
    piece = std::max(piece / align_ * align_, align_);
    std::vector<std::pair<std::size_t, Span>> cuts;
    for (const Span& sp : spans_)
      for (uint32_t o = 0; o < sp.rows; o += piece) {
        const Span c{sp.row + o, std::min(piece, sp.rows - o), sp.hbm + uint64_t{o} * rb_, sp.hi};
        cuts.push_back({key(Range{c.row, c.row + c.rows}), c});
      }
    std::stable_sort(cuts.begin(), cuts.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    spans_.clear();
    for (const auto& [k, c] : cuts) add(c.row, c.rows, c.hbm, c.hi);
  }
  DmaDir dir_;
  bool bf16_;
  unsigned lanes_;
  uint32_t align_, max_, rb_;
  std::vector<Span> spans_;
};

// Runs of a chip's round input or output: element ranges of the round's working buffer that
// are also contiguous in the chip's whole HBM buffer (elements), cut at pieces.
struct HbmRun {
  std::size_t work = 0;   // first element in the round's working buffer
  std::size_t whole = 0;  // first element in the chip's whole buffer
  std::size_t count = 0;
};

std::vector<HbmRun> hbm_runs(const std::vector<Segment>& segs, const std::vector<RoundPiece>& from,
                             const Pieces& pc) {
  std::vector<HbmRun> v;
  std::size_t fi = 0, fo = 0;  // position in `from`
  for (const Segment& s : segs) {
    std::size_t w = s.offset, left = s.count;
    while (left > 0) {
      while (fi < from.size() && fo >= from[fi].count) {
        ++fi;
        fo = 0;
      }
      if (fi >= from.size()) bad("round pieces shorter than the plan's layout");
      const std::size_t j = pc.containing(w);
      const std::size_t in_piece = pc.start[j] + pc.len[j] - w;
      const std::size_t n = std::min({left, from[fi].count - fo, in_piece});
      v.push_back({w, from[fi].offset + fo, n});
      w += n;
      fo += n;
      left -= n;
    }
  }
  return v;
}

}  // namespace

// Loads and stores go as DMA pieces of up to 1024 rows (64 KiB on a 16x16 chip): every command
// pays the HBM's latency and row opening (when the engine ran one DMA at a time, an 8 KiB load
// took 149..179 cycles for 128 of transfer); few large commands keep it near its peak (2x2,
// 1 MiB: 0.73 -> 0.82). The engine now runs up to four at once (a store only beside accesses to
// other bytes).
constexpr uint32_t kPieceRows = 1024;

std::vector<Op> load_ops(const CompileSetup& s, const RoundLayout& lay, std::size_t r, int c) {
  const unsigned L = s.lanes;
  DmaSpans v(DmaDir::kHbmToVmem, s.bf16, L, s.row_align, kPieceRows);
  const Pieces& pc = lay.pcs[r];
  const auto hr = hbm_runs(lay.rounds[r].plan.chips[c].input, lay.rounds[r].in[c], pc);
  for (const HbmRun& h : hr) {
    if (h.whole % s.gran != 0 && h.whole != 0) bad("internal: an input run off a granule");
    const uint32_t rows = static_cast<uint32_t>((h.count + L - 1) / L);
    // Inputs land where the pieces start out: the region's working buffer.
    const std::size_t j = pc.containing(h.work);
    const uint32_t row =
        lay.vmem.region(r) + pc.first_row[j] + static_cast<uint32_t>((h.work - pc.start[j]) / L);
    v.add(row, rows, s.bufs.in[c] + h.whole * s.esz);
  }
  // Round 0's load, with nothing before it, goes in pieces of a 16th of the round in the
  // order the round's ops need them, merged where they follow on: the engine runs sixteen
  // reads at once, so the first steps' sends go about one HBM latency after the start, not
  // after the whole round (4 KiB on a 4x4: 347 -> 324 cycles in eighths when the engine ran
  // four; then sixteen and sixteenths: 292 -> 283 (sixteen, eighths) -> 273).
  if (r == 0)
    v.in_need_order(lay.at(r, c).ops, std::clamp<uint32_t>(pc.total_rows / 16, 1, kPieceRows));
  return v.ops();
}

// Final values of round r's outputs: a bf16 reduction's narrowed to bf16 into the staging
// rows (at the end of the round), then stored from there; the others straight from where
// they live (a bf16 copy collective moves the bf16 bits in the lanes untouched). A packed
// piece not stored straight (the buffer's last, its halves not whole bursts; rows i and h + i
// of the piece in row i) unpacks: lower halves to the first h staging rows, upper halves to
// the next h. A piece still as loaded (a pod of one chip) is rounded like the others, which
// canonicalises a NaN.
std::vector<Op> narrow_ops(const CompileSetup& s, const RoundLayout& lay, std::size_t r, int c) {
  std::vector<Op> v;
  if (!s.widen) return v;
  const Pieces& pc = lay.pcs[r];
  const ChipRound& cr = lay.at(r, c);
  for (const Segment& g : lay.rounds[r].plan.chips[c].output)
    for (std::size_t j : pc.cover(g.offset, g.count)) {
      if (stored_packed(cr, lay.packed(r), j, s.row_align)) continue;
      VpuCmdArgs a;
      a.dst_bf16 = true;
      a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
      a.x_row = a.y_row = cr.loc[j];
      a.dst_row = cr.stage.at(j);
      if (cr.fmt[j] == Fmt::kPacked) {
        a.rows = lay.pks[r].rows[j];
        a.op = static_cast<unsigned>(VpuOp::kCvtBf16F32);
        v.push_back(vpu_op(a, a.rows));
        // The upper halves read the packed rows a second time. Where the first conversion
        // takes them as they land (chained: x_wait), nothing else orders this one after
        // their arrival: its y operand (which a conversion ignores) is the first one's
        // result, so the scoreboard holds it until that is written (a 2x2 bf16 all-reduce
        // of 34..64 bytes mod 128 read the rows before they came).
        a.op = static_cast<unsigned>(VpuOp::kCvtBf16HiF32);
        a.y_row = a.dst_row;
        a.dst_row += a.rows;
        v.push_back(vpu_op(a, a.rows));
      } else {
        a.op = static_cast<unsigned>(VpuOp::kCvtF32Bf16);
        a.src_bf16 = cr.fmt[j] == Fmt::kBf16 ? kVpuSrcBf16X : 0u;
        a.rows = pc.rows[j];
        v.push_back(vpu_op(a, a.rows));
      }
    }
  return v;
}

std::vector<Op> store_ops(const CompileSetup& s, const RoundLayout& lay, std::size_t r, int c) {
  const unsigned L = s.lanes;
  DmaSpans v(DmaDir::kVmemToHbm, s.bf16, L, s.row_align, kPieceRows);
  const Pieces& pc = lay.pcs[r];
  const ChipRound& cr = lay.at(r, c);
  const auto hr = hbm_runs(lay.rounds[r].plan.chips[c].output, lay.rounds[r].out[c], pc);
  for (const HbmRun& h : hr) {
    if (h.whole % s.gran != 0 && h.whole != 0) bad("internal: an output run off a granule");
    const std::size_t j = pc.containing(h.work);
    const uint32_t first = static_cast<uint32_t>((h.work - pc.start[j]) / L);
    const uint32_t rows = static_cast<uint32_t>((h.count + L - 1) / L);
    const uint64_t hbm = s.bufs.out[c] + h.whole * s.esz;
    if (s.widen && stored_packed(cr, lay.packed(r), j, s.row_align)) {
      // Rows [first, first + rows) of the piece: those below the half are the lower halves of
      // the packed rows from `first` on, the rest their upper halves.
      const uint32_t half = lay.pks[r].rows[j], end = first + rows;
      if (first < half) v.add(cr.loc[j] + first, std::min(end, half) - first, hbm);
      if (end > half) {
        const uint32_t b = std::max(first, half);
        v.add(cr.loc[j] + (b - half), end - b, hbm + uint64_t{b - first} * L * s.esz, true);
      }
      continue;
    }
    const uint32_t row = s.widen ? cr.stage.at(j) + first : cr.loc[j] + first;
    v.add(row, rows, hbm);
  }
  // The last round's store, nothing behind it to overlap, goes piece by piece as the pieces
  // become final (hoisted by the scheduler) rather than after the round: pieces of a 16th of
  // the round, 128 rows at most (a 4 KiB all-reduce on a 4x4 of 16x16 chips: 64 rows in one
  // DMA after the last step, 415 cycles; in pieces of 4 rows, all but the last step's stored
  // while the steps run, 391).
  if (r + 1 == lay.rounds.size()) {
    v.in_ready_order(cr.ops, std::clamp<uint32_t>(pc.total_rows / 16, 1, 128));
    std::vector<Op> ops = v.ops();
    for (Op& op : ops) op.hoist = true;
    return ops;
  }
  return v.ops();
}

SenderPairs sender_pairs(const RoundLayout& lay) {
  SenderPairs pairs(lay.rounds.size());  // (src, dst)
  for (std::size_t r = 0; r < lay.rounds.size(); ++r)
    for (const Step& s : lay.rounds[r].plan.steps)
      for (const Transfer& t : s.transfers) pairs[r].insert({t.src, t.dst});
  return pairs;
}

// ---- Chip programs.

namespace {

// Virtual rows (from kVirtual on) order a round's sends after the token waits that lend them
// their receiver's region: row kVirtual + r * chips + d stands for round r's landing areas on
// chip d.
constexpr uint32_t kVirtual = 1u << 24;
Range token_range(std::size_t r, int d, int chips) {
  const uint32_t v = kVirtual + static_cast<uint32_t>(r * static_cast<std::size_t>(chips) +
                                                      static_cast<std::size_t>(d));
  return Range{v, v + 1};
}

// The token counter of round nx's lending from receiver d to sender c. A layout with
// shared_tokens (the direct all_to_all, whose every chip sends to every other: a counter per
// pair would need p - 1 of the chip's 64) counts round nx's tokens on the sender's counter
// nx % 2, and the sender waits for all of them at once. Safe: a receiver lends round nx + 2 only
// after it got round nx from every sender, each of which sent round nx only after taking its
// round-nx tokens off that counter, so no token of round nx + 2 is counted as one of round nx.
int token_counter(RoundLayout& lay, std::size_t nx, int c, int d) {
  return lay.shared_tokens ? lay.ctr.get(c, -10 - static_cast<int>(nx % 2), kToken)
                           : lay.ctr.get(c, d, kToken);
}

// Round nx's landing areas are lent by each receiver's token, sent when the region's previous
// round (nx - regions) was stored, at the end of slot nx - 2 (the first `regions` rounds start
// on free regions). Chip c waits for them in slot nx - 1, a slot early, so round nx's sends go
// out during that slot; the receiver finished slot nx - 2 before this chip can finish nx - 1.
// Shared tokens: one wait for all of them.
void token_waits(RoundLayout& lay, const SenderPairs& pairs, std::size_t nx, int c,
                 std::vector<Op>& ops) {
  if (nx >= lay.rounds.size() || nx < lay.vmem.count) return;
  std::vector<Op> waits;
  for (const auto& [src, d] : pairs[nx])
    if (src == c) {
      const int k = token_counter(lay, nx, c, d);
      Op w;
      w.kind = Op::kWait;
      w.step = -1;
      w.peer = 1000 + k;
      w.cmd = cmd_ici_wait(static_cast<uint32_t>(k), 1);
      w.writes.push_back(token_range(nx, d, lay.chips));
      waits.push_back(w);
    }
  if (lay.shared_tokens && waits.size() > 1) {
    for (std::size_t i = 1; i < waits.size(); ++i) waits[0].writes.push_back(waits[i].writes[0]);
    waits[0].cmd = cmd_ici_wait(static_cast<uint32_t>(waits[0].peer - 1000),
                                static_cast<uint32_t>(waits.size()));
    waits.resize(1);
  }
  add_all(ops, waits);
}

// Slot t's transfers on chip c: round t's (its first half, when rounds overlap) and the second
// half of round t + 1 - lag, step by step: every send of a step (block by block, the earlier
// round first) before its arrivals, so each chip waits for the rows of a counter in the order
// its sender sent them.
std::vector<Op> slot_body(const RoundLayout& lay, std::size_t lag, std::size_t t, int c) {
  std::vector<Op> body;
  for (std::size_t r = t + 1 >= lag ? t + 1 - lag : 0; r <= t && r < lay.rounds.size(); ++r)
    for (const Op& op : lay.at(r, c).ops)
      if (op.slot == static_cast<int>(t)) {
        body.push_back(op);
        if (op.kind == Op::kSend && r >= lay.vmem.count)
          body.back().reads.push_back(token_range(r, op.peer, lay.chips));
      }
  std::stable_sort(body.begin(), body.end(), [](const Op& x, const Op& y) {
    return std::tie(x.step, x.phase, x.block) < std::tie(y.step, y.phase, y.block);
  });
  return body;
}

// The DMAs slot t spreads over its transfers: the next round's load (first, so its sends can
// start early) and the store of the round finished a slot ago. With three regions and one
// round at a time, round 0 (no store) also loads round 2, whose region is still fresh, and
// round 1 only stores: the engine does not run dry between rounds 0 and 1 (docs/pod.md, "What
// limits them").
std::vector<Op> slot_dma(const CompileSetup& s, const RoundLayout& lay, std::size_t t, int c) {
  const std::size_t lag = s.issue.lag, NR = lay.rounds.size();
  const bool ahead = lag == 1 && lay.vmem.count == kRegions;
  std::vector<Op> dma;
  if (t + 1 < NR && !(ahead && t == 1)) add_all(dma, load_ops(s, lay, t + 1, c));
  if (ahead && t == 0) add_all(dma, load_ops(s, lay, 2, c));
  if (t >= lag) add_all(dma, store_ops(s, lay, t - lag, c));
  return dma;
}

// The region of round q (stored in this slot) is free for round q + regions once everything
// that reads or writes it is done (its store, its sends, its reductions): a two-row VPU copy
// whose strided write covers the whole region waits for them in the scoreboard (WAR, WAW), and
// the tokens that lend the region to the chips sending here in round q + regions read its row
// (RAW). No fence: the rest of the pipeline keeps flowing.
void release_region(const Topology& topo, RoundLayout& lay, const SenderPairs& pairs, std::size_t q,
                    int c, std::vector<Op>& ops) {
  const VmemRegions& vm = lay.vmem;
  VpuCmdArgs a;
  a.op = static_cast<unsigned>(VpuOp::kMax);  // max(x, x) == x: a copy
  a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
  a.x_row = a.y_row = a.dst_row = vm.region(q);
  a.dst_stride = vm.rows - 1;
  a.rows = 2;
  ops.push_back(vpu_op(a, vm.rows));
  for (const auto& [src, d] : pairs[q + vm.count])
    if (d == c) {
      Op tk;
      tk.kind = Op::kSend;
      tk.step = -1;
      tk.peer = src;
      tk.cmd = cmd_ici_count(Mem::kVmem, vm.region(q), coord3(topo, src),
                             static_cast<uint32_t>(token_counter(lay, q + vm.count, src, c)));
      tk.reads.push_back({vm.region(q), vm.region(q) + 1});
      ops.push_back(tk);
    }
}

}  // namespace

// Every command of a chip as an op with the rows it reads and writes, in program order; the
// scheduler then moves each send up to just after the last op it depends on, across round
// boundaries too: the next round's first blocks are on the links while this round drains.
std::vector<Op> chip_ops(const CompileSetup& s, RoundLayout& lay, const SenderPairs& pairs, int c) {
  const std::size_t lag = s.issue.lag, NR = lay.rounds.size();
  std::vector<Op> ops;
  add_all(ops, load_ops(s, lay, 0, c));
  // Slot t issues round t (its first half, when rounds overlap) and the second half of round
  // t + 1 - lag; the DMAs of the next round's load and of the store of the round finished a
  // slot ago spread over its transfers, one after each of evenly spaced waits.
  const std::size_t slots = NR + lag - 1;
  for (std::size_t t = 0; t < slots; ++t) {
    token_waits(lay, pairs, t + 1, c, ops);
    add_all(ops, interleave_ops(slot_body(lay, lag, t, c), slot_dma(s, lay, t, c)));
    if (t + 1 >= lag) add_all(ops, narrow_ops(s, lay, t + 1 - lag, c));  // its last slot is done
    if (t >= lag && t - lag + lay.vmem.count < NR)
      release_region(s.topo, lay, pairs, t - lag, c, ops);
  }
  add_all(ops, store_ops(s, lay, NR - 1, c));
  return ops;
}

}  // namespace tpu::pod_compile
