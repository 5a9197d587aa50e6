#include "pod_driver.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "tpu/vector.h"

namespace tpu {

namespace {

constexpr uint64_t kBurst = 64;
// Rounds use VMEM regions in turn, round r in region r % regions: one round at a time needs three
// (the store of round r - 1 and the load of round r + 1 run beside round r; docs/pod.md), and
// an all-reduce whose rounds overlap (round r's reduce-scatter beside round r - 1's all-gather)
// needs four. Fewer rounds use fewer regions.
constexpr uint32_t kRegions = 3;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("pod collective: " + what);
}

struct Range {
  uint32_t lo = 0, hi = 0;  // VMEM rows [lo, hi)
  bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
};

// One command of a chip's round, with what it touches (for ordering).
struct Op {
  enum Kind { kSend, kWait, kVpu, kDma } kind = kSend;
  // The step of a transfer or reduction in issue order: rounds that overlap share step numbers
  // (the scheduler's deadlock rule); -1 none.
  int step = -1;
  int plan_step = -1;  // the plan step, numbered across rounds one after another (labels)
  int slot = 0;        // the program slot the op is issued in (its round, or the round after)
  int phase = 0;       // within a step: 0 the sends, 1 the arrivals and reductions
  bool hoist = false;  // a DMA the scheduler moves up like a send (the last round's store)
  std::size_t block = 0;  // block index within its transfer
  int peer = -1;          // send: destination chip; wait: counter
  ChipCmd cmd;
  std::vector<Range> reads, writes;
};

// Whether any range of x overlaps any of y.
bool any(const std::vector<Range>& x, const std::vector<Range>& y) {
  for (const auto& r : x)
    for (const auto& s : y)
      if (r.overlaps(s)) return true;
  return false;
}

// Whether op o reads or writes rows of r.
bool touches(const Op& o, const Range& r) { return any(o.reads, {r}) || any(o.writes, {r}); }
bool writes_any(const Op& o, const std::vector<Range>& rs) { return any(o.writes, rs); }

bool conflicts(const Op& a, const Op& b) {  // a comes after b in plan order
  if (any(a.writes, b.reads) || any(a.writes, b.writes) || any(a.reads, b.writes)) return true;
  // Sends keep their program order among themselves: one that moved up past sends to other
  // chips bunched the sends by peer, so the queue stalled on one full send context while the
  // others ran dry (2x2: 0.80 -> 0.88 of the bound). Sends to one chip must stay in order anyway
  // (its waits take their rows in that order).
  if (a.kind == Op::kSend && b.kind == Op::kSend) return true;
  if (a.kind == Op::kDma && b.kind == Op::kDma) return true;  // the engine runs them in order
  if (a.kind == Op::kWait && b.kind == Op::kWait && a.peer == b.peer) return true;
  // Deadlock freedom: a wait of (step s, block k) comes after every send of an earlier step
  // and every send of step s with a block index <= k (docs/pod.md).
  if (a.kind == Op::kWait && b.kind == Op::kSend &&
      (b.step < a.step || (b.step == a.step && b.block <= a.block)))
    return true;
  return false;
}

// A round's working buffer cut into pieces at every boundary a transfer or a layout segment
// has; each piece starts on its own row, so every transfer moves whole rows.
struct Pieces {
  std::vector<std::size_t> start, len;
  std::vector<uint32_t> rows, first_row;  // rows (padded), first row in the working buffer
  uint32_t total_rows = 0;
  std::size_t index(std::size_t elem) const {  // piece that starts at elem
    const auto it = std::lower_bound(start.begin(), start.end(), elem);
    return static_cast<std::size_t>(it - start.begin());
  }
  std::size_t containing(std::size_t elem) const {
    return static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), elem) -
                                    start.begin()) -
           1;
  }
  // Pieces covering [off, off + count), which starts and ends on cuts.
  std::vector<std::size_t> cover(std::size_t off, std::size_t count) const {
    std::vector<std::size_t> v;
    for (std::size_t j = index(off); j < start.size() && start[j] < off + count; ++j)
      v.push_back(j);
    return v;
  }
};

// `pairs`: every piece takes an even number of rows, so it packs into half as many (a bf16
// all-reduce's all-gather, below).
Pieces cut_pieces(const CollectivePlan& plan, unsigned lanes, uint32_t row_align, bool pairs) {
  if (pairs) row_align = static_cast<uint32_t>(std::lcm(row_align, 2u));
  std::set<std::size_t> cuts = {0, plan.buffer_len};
  for (const Step& s : plan.steps)
    for (const Transfer& t : s.transfers)
      cuts.insert({t.src_offset, t.src_offset + t.count, t.dst_offset, t.dst_offset + t.count});
  for (const ChipLayout& cl : plan.chips) {
    for (const Segment& s : cl.input) cuts.insert({s.offset, s.offset + s.count});
    for (const Segment& s : cl.output) cuts.insert({s.offset, s.offset + s.count});
  }
  Pieces pc;
  for (auto it = cuts.begin(); it != cuts.end() && std::next(it) != cuts.end(); ++it) {
    const std::size_t len = *std::next(it) - *it;
    if (len == 0) continue;
    pc.start.push_back(*it);
    pc.len.push_back(len);
    const uint32_t r = static_cast<uint32_t>((len + lanes - 1) / lanes);
    pc.rows.push_back((r + row_align - 1) / row_align * row_align);
    pc.first_row.push_back(pc.total_rows);
    pc.total_rows += pc.rows.back();
  }
  return pc;
}

// The same pieces packed two bf16 to a lane (VpuPackBf16): half the rows each. Only the rows
// count: a packed piece lives in the first half of its own rows (ChipRound::loc).
Pieces packed_pieces(const Pieces& pc) {
  Pieces pk = pc;
  for (uint32_t& r : pk.rows) r /= 2;
  return pk;
}

// A piece list as rows: maps a row offset within the list to (piece, row in piece).
struct RowList {
  std::vector<std::size_t> pieces;
  std::vector<uint32_t> offset;  // first row of each piece within the list
  uint32_t rows = 0;
};

RowList row_list(const Pieces& p, const std::vector<std::size_t>& pieces) {
  RowList r;
  r.pieces = pieces;
  for (std::size_t j : pieces) {
    r.offset.push_back(r.rows);
    r.rows += p.rows[j];
  }
  return r;
}

// Contiguous runs of [o, o + n) of a row list whose pieces live at loc[piece]: (row, length,
// offset within the list).
struct Run {
  uint32_t row, len, at;
};
std::vector<Run> runs(const RowList& rl, const std::vector<uint32_t>& loc, uint32_t o, uint32_t n) {
  std::vector<Run> v;
  for (std::size_t i = 0; i < rl.pieces.size() && n > 0; ++i) {
    const uint32_t p0 = rl.offset[i],
                   p1 = p0 + (i + 1 < rl.offset.size() ? rl.offset[i + 1] - p0 : rl.rows - p0);
    if (o >= p1 || o + n <= p0) continue;
    const uint32_t a = std::max(o, p0), b = std::min(o + n, p1);
    const uint32_t row = loc[rl.pieces[i]] + (a - p0);
    if (!v.empty() && v.back().row + v.back().len == row && v.back().at + v.back().len == a)
      v.back().len += b - a;
    else
      v.push_back({row, b - a, a});
  }
  return v;
}

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

// The ICI counters of the chips: one per (receiving chip, sending chip, purpose).
class Counters {
 public:
  // Counters [base, base + count) of every chip.
  Counters(int chips, int base, int count)
      : m_(static_cast<std::size_t>(chips)), base_(base), count_(count) {}
  int get(int dst, int src, int purpose) {
    const int id = try_get(dst, src, purpose);
    if (id < 0)
      bad("chip " + std::to_string(dst) + " needs more than the " + std::to_string(count_) +
          " ICI counters it has for this collective (one per chip it receives from, and one per "
          "chip it lends rounds to)");
    return id;
  }
  // As get, but -1 where every counter is taken (for counters that only make things faster).
  int try_get(int dst, int src, int purpose) {
    auto& m = m_[static_cast<std::size_t>(dst)];
    const auto key = std::make_pair(src, purpose);
    const auto it = m.find(key);
    if (it != m.end()) return it->second;
    const int id = static_cast<int>(m.size());
    if (id >= count_) return -1;
    m[key] = base_ + id;
    return base_ + id;
  }

 private:
  std::vector<std::map<std::pair<int, int>, int>> m_;
  int base_, count_;
};
// Counter purposes: data on the + route, tokens, data on the - route. A 2-ring joins two chips
// by two links; sends hinted + and - take one each and may overtake each other, so each
// direction counts its own rows. Rows to be reduced, and rows the receiver forwards as they are
// in the next step, count on counters of their own (kRed, kFwd; each direction too), so each of
// those counters has one kind of consumer, which chain() may then let take the rows one by one
// as they land (a reduction's x_wait, a forwarding send's wait_rows). kChain: a chip's own
// counter (src = the peer a send goes to, + or - hint) for the rows its VPU writes and a send
// forwards as they are written (sig).
constexpr int kData = 0, kToken = 1, kDataMinus = 2, kRed = 3, kRedMinus = 4, kFwd = 5,
              kFwdMinus = 6, kChain = 7, kChainMinus = 8;
int data_counter(const Transfer& t) { return t.route.dir < 0 ? kDataMinus : kData; }
// The counter a transfer's rows count on at its destination. `next`: the plan's next step (null
// at the last).
int transfer_counter(Counters& ctr, const CollectivePlan& plan, const Step* next,
                     const Transfer& t) {
  const int data = ctr.get(t.dst, t.src, data_counter(t));
  const bool minus = t.route.dir < 0;
  if (plan.spec.algorithm == "direct" || plan.spec.collective == Collective::kAllToAll)
    return data;
  int purpose = -1;
  if (t.kind == TransferKind::kReduce) {
    purpose = minus ? kRedMinus : kRed;
  } else if (next != nullptr) {
    for (const Transfer& u : next->transfers)
      if (u.src == t.dst && u.kind == TransferKind::kCopy && u.src_offset == t.dst_offset &&
          u.count == t.count)
        purpose = minus ? kFwdMinus : kFwd;
  }
  if (purpose < 0) return data;
  const int id = ctr.try_get(t.dst, t.src, purpose);
  return id >= 0 ? id : data;
}

// How a piece's value is held in its rows: f32 lanes; bf16 in the lanes' bits [15:0] as a bf16
// input was loaded (an op reads it through its src_bf16 flag, widened exactly, so nothing widens
// a buffer first); or packed bf16 pairs in the first half of its rows (row i of the piece in
// bits [15:0] of row i, row h + i in [31:16]).
enum class Fmt : uint8_t { kF32, kBf16, kPacked };

// What the emitter knows about one chip within a round.
struct ChipRound {
  std::vector<uint32_t> loc;  // VMEM row of each piece's current value
  std::vector<Fmt> fmt;       // and how it is held
  uint32_t next_row = 0;      // next free row of the round's region
  uint32_t region_end = 0;
  std::map<std::size_t, uint32_t> stage;  // bf16: output pieces narrowed to rows of their own
  std::vector<Op> ops;
};

Op vpu_op(const VpuCmdArgs& a, uint32_t dst_span) {
  Op op;
  op.kind = Op::kVpu;
  op.cmd = cmd_vpu(a);
  op.reads = {{a.x_row, a.x_row + a.rows}, {a.y_row, a.y_row + a.rows}};
  op.writes = {{a.dst_row, a.dst_row + dst_span}};
  return op;
}

// A packed piece whose halves are whole bursts is stored straight from its packed rows: the
// lower halves by a bf16 DMA (a lane's bits [15:0]), the upper by one with `hi` ([31:16]).
// `packed`: the round's packed pieces (null when nothing packs).
bool stored_packed(const ChipRound& s, const Pieces* packed, std::size_t j, uint32_t row_align) {
  return packed != nullptr && s.fmt[j] == Fmt::kPacked && packed->rows[j] % row_align == 0;
}

// The transfers of one round's plan as ops on every chip (sends, waits, reductions), landing
// every transfer in fresh rows of its destination's region.
// Step si of the round is step `step_base + si` in issue order and `plan_base + si` in the
// plan; its ops go in slot `round` (or `round + 1` from step `late_from` on).
struct StepNumbers {
  int step_base = 0, plan_base = 0, round = 0;
  std::size_t late_from = ~std::size_t{0};
};

// A bf16 reduction reads each piece as it is held (ChipRound::fmt) and writes f32. `packed` (a
// bf16 all-reduce; else null): the copies move the pieces as packed bf16 pairs, half the rows on
// the wire and in memory. A piece's owner packs it in place (the rounding to bf16 the result gets
// anyway) before it first sends it; a copy lands packed on the receiver's rows of the piece,
// where it stays packed (docs/collectives.md, Numerics).
void emit_transfers(const CollectivePlan& plan, const Pieces& pc, const Pieces* packed,
                    uint32_t block_rows, const StepNumbers& num, std::vector<ChipRound>& st,
                    Counters& ctr) {
  const Topology& topo = plan.topo;
  const unsigned vop =
      static_cast<unsigned>(plan.spec.op == ReduceOp::kMax ? VpuOp::kMax : VpuOp::kAdd);
  auto alloc = [&](int c, uint32_t rows) {
    ChipRound& s = st[static_cast<std::size_t>(c)];
    const uint32_t r = s.next_row;
    s.next_row += rows;
    if (s.next_row > s.region_end) throw std::length_error("region");
    return r;
  };
  auto coord3 = [&](int id) {
    const PodCoord c = topo.coord(id);
    return std::array<int, 3>{c[0], c[1], c[2]};
  };
  for (std::size_t si = 0; si < plan.steps.size(); ++si) {
    const int s = num.step_base + static_cast<int>(si);
    const int ps = num.plan_base + static_cast<int>(si);
    const int slot = num.round + (si >= num.late_from ? 1 : 0);
    const Step* next = si + 1 < plan.steps.size() ? &plan.steps[si + 1] : nullptr;
    auto tag = [&](Op& op, int phase) {
      op.plan_step = ps;
      op.slot = slot;
      op.phase = phase;
    };
    struct Pending {
      const Transfer* t;
      RowList src, dst;
      uint32_t stage;
      uint32_t bs = 1;      // rows per block: the transfer cut into equal blocks of <= block_rows
      bool direct = false;  // a copy that lands on the destination's own rows of the pieces
      std::vector<Fmt> sent;  // how each source piece is held as it is sent
      int cnt = -1;           // the destination's counter for its rows
    };
    std::vector<Pending> pend;
    for (const Transfer& t : plan.steps[si].transfers) {
      const bool pk = packed != nullptr && t.kind == TransferKind::kCopy;
      const Pieces& v = pk ? *packed : pc;
      if (pk) {  // the sender's pieces not packed yet are final here: pack them in place
        ChipRound& src = st[static_cast<std::size_t>(t.src)];
        for (std::size_t j : pc.cover(t.src_offset, t.count)) {
          if (src.fmt[j] == Fmt::kPacked) continue;
          const uint32_t h = packed->rows[j];
          VpuCmdArgs a;
          a.op = static_cast<unsigned>(VpuOp::kPackBf16);
          a.src_bf16 = src.fmt[j] == Fmt::kBf16 ? (kVpuSrcBf16X | kVpuSrcBf16Y) : 0u;
          a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
          a.x_row = a.dst_row = src.loc[j];
          a.y_row = src.loc[j] + h;
          a.rows = h;
          Op op = vpu_op(a, h);
          op.step = s;
          tag(op, 0);
          src.ops.push_back(op);
          src.fmt[j] = Fmt::kPacked;
        }
      }
      Pending p{&t, row_list(v, v.cover(t.src_offset, t.count)),
                row_list(v, v.cover(t.dst_offset, t.count)), 0, 1, false, {}};
      if (p.src.pieces.size() != p.dst.pieces.size() || p.src.rows != p.dst.rows)
        bad("plan step " + std::to_string(s) + ": a transfer's source and destination differ");
      // A copy lands straight on the destination's rows of its pieces, except in all_to_all
      // (whose staging banks are reused from step to step). Safe without a landing area: in
      // these plans every element reaches a chip by copy once, and the value that arrives was
      // computed from everything this chip sent or reduced from those rows before, so no local
      // command still reads them (docs/pod.md); every other transfer lands in fresh rows.
      p.direct = t.kind == TransferKind::kCopy && plan.spec.collective != Collective::kAllToAll;
      if (!p.direct) p.stage = alloc(t.dst, p.src.rows);
      p.cnt = transfer_counter(ctr, plan, next, t);  // per kind of use: chain() may chain it
      for (std::size_t j : p.src.pieces)
        p.sent.push_back(st[static_cast<std::size_t>(t.src)].fmt[j]);
      const uint32_t nb = std::max<uint32_t>(1, (p.src.rows + block_rows - 1) / block_rows);
      p.bs = std::max<uint32_t>(1, (p.src.rows + nb - 1) / nb);
      pend.push_back(std::move(p));
    }
    std::size_t max_blocks = 0;
    for (const Pending& p : pend)
      max_blocks = std::max<std::size_t>(max_blocks, (p.src.rows + p.bs - 1) / p.bs);
    // Sends, block-major (block k of every transfer before block k + 1 of any): sends towards
    // different links alternate and run side by side on the ICI engine's contexts.
    for (std::size_t blk = 0; blk < max_blocks; ++blk) {
      for (const Pending& p : pend) {
        const Transfer& t = *p.t;
        const uint32_t o = static_cast<uint32_t>(blk) * p.bs;
        if (o >= p.src.rows) continue;
        const uint32_t n = std::min(p.bs, p.src.rows - o);
        const int cnt = p.cnt;
        const auto src_runs = runs(p.src, st[static_cast<std::size_t>(t.src)].loc, o, n);
        std::vector<Run> dst_runs;
        if (p.direct)
          dst_runs = runs(p.dst, st[static_cast<std::size_t>(t.dst)].loc, o, n);
        else
          dst_runs.push_back({p.stage + o, n, o});
        // Sends contiguous on both sides.
        std::size_t i = 0, j = 0;
        while (i < src_runs.size() && j < dst_runs.size()) {
          const Run& a = src_runs[i];
          const Run& b = dst_runs[j];
          const uint32_t lo = std::max(a.at, b.at);
          const uint32_t hi = std::min(a.at + a.len, b.at + b.len);
          if (hi > lo) {
            Op op;
            op.kind = Op::kSend;
            op.step = s;
            tag(op, 0);
            op.block = blk;
            op.peer = t.dst;
            const uint32_t row = a.row + (lo - a.at);
            // The route's direction decides a k/2 tie (both links of a 2-ring carry data).
            op.cmd = cmd_ici_send(Mem::kVmem, row, hi - lo, coord3(t.dst), Mem::kVmem,
                                  b.row + (lo - b.at), static_cast<uint32_t>(cnt), t.route.dir);
            op.reads.push_back({row, row + (hi - lo)});
            st[static_cast<std::size_t>(t.src)].ops.push_back(op);
          }
          if (a.at + a.len <= b.at + b.len)
            ++i;
          else
            ++j;
        }
      }
    }
    // Arrivals, block-major too: wait for each block, then reduce it into the own value.
    for (std::size_t blk = 0; blk < max_blocks; ++blk) {
      for (const Pending& p : pend) {
        const Transfer& t = *p.t;
        const uint32_t o = static_cast<uint32_t>(blk) * p.bs;
        if (o >= p.src.rows) continue;
        const uint32_t n = std::min(p.bs, p.src.rows - o);
        const int cnt = p.cnt;
        ChipRound& d = st[static_cast<std::size_t>(t.dst)];
        Op w;
        w.kind = Op::kWait;
        w.step = s;
        tag(w, 1);
        w.block = blk;
        w.peer = cnt;
        w.cmd = cmd_ici_wait(static_cast<uint32_t>(cnt), n);
        if (p.direct) {
          for (const Run& r : runs(p.dst, d.loc, o, n)) w.writes.push_back({r.row, r.row + r.len});
        } else {
          w.writes.push_back({p.stage + o, p.stage + o + n});
        }
        d.ops.push_back(w);
        if (t.kind != TransferKind::kReduce) continue;
        // op(incoming, own) into the own rows, piece by piece with each operand's format
        // (merged where rows and formats follow on).
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
        for (const VpuCmdArgs& a : red) {
          Op v = vpu_op(a, a.rows);
          v.step = s;
          tag(v, 1);
          v.block = blk;
          d.ops.push_back(v);
        }
      }
    }
    // What the step leaves: reduced pieces hold f32, copies land packed (or as they were sent),
    // and a copy that does not land in place moves the piece.
    for (const Pending& p : pend) {
      ChipRound& d = st[static_cast<std::size_t>(p.t->dst)];
      for (std::size_t i = 0; i < p.dst.pieces.size(); ++i)
        d.fmt[p.dst.pieces[i]] = p.t->kind == TransferKind::kReduce ? Fmt::kF32 : p.sent[i];
      if (packed != nullptr && p.t->kind == TransferKind::kCopy && !p.direct)
        bad("internal: a packed copy that does not land in place");
      if (p.t->kind == TransferKind::kReduce || p.direct) continue;
      for (std::size_t i = 0; i < p.dst.pieces.size(); ++i)
        st[static_cast<std::size_t>(p.t->dst)].loc[p.dst.pieces[i]] = p.stage + p.dst.offset[i];
    }
  }
}

// One chip's ops in issue order: waits and reductions in plan order, each send as early as its
// dependencies allow (a software pipeline across steps), but a send of a reduction's result
// behind the next reduction, so the VPU always has its next command. Waits are not hoisted: a
// wait blocks the in-order queue, so one placed early would hold back sends that could already
// go.
constexpr int kDmaAhead = static_cast<int>(kDmaInFlight) - 1;  // less the send's own load
bool is_load(const Op& op) { return op.kind == Op::kDma && !op.writes.empty(); }

bool is_store(const Op& o) { return o.kind == Op::kDma && o.writes.empty(); }

// One pass of chaining over a chip's scheduled ops (`sched`, with their commands `cmd`).
struct Chained {
  struct Link {  // a wait chained into the op that takes its rows
    std::size_t wait, op;
    int counter;
  };
  const std::vector<const Op*>& sched;
  std::vector<ChipCmd> cmd;
  std::vector<Link> links;
  std::vector<int> link_of;        // per op: the link of a dropped (chained) wait, else -1
  std::vector<std::size_t> order;  // positions of `sched` in program order (dropped waits left out)
  std::set<int> bad;               // counters to leave unchained
  std::size_t dropped = 0;         // waits chained into the ops that take their rows

  explicit Chained(const std::vector<const Op*>& s) : sched(s), link_of(s.size(), -1) {
    for (const Op* op : sched) cmd.push_back(op->cmd);
  }
  bool is_dropped(std::size_t i) const { return link_of[i] >= 0; }
};

// Waits into the reductions or sends that take their rows next (counters in `off` excepted).
void chain_waits(Chained& ch, const std::set<int>& off) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  const auto tie_of = [](const ChipCmd& c) { return CmdIciSend::decode(c).tie; };
  std::map<int, std::vector<std::size_t>> waits;
  for (std::size_t i = 0; i < n; ++i)
    if (sched[i]->kind == Op::kWait) waits[sched[i]->peer].push_back(i);
  for (const auto& [c, ws] : waits) {
    if (off.count(c)) continue;
    std::vector<Chained::Link> mine;
    bool ok = true;
    for (std::size_t i : ws) {
      const Op& w = *sched[i];
      const CmdIciWait wc = CmdIciWait::decode(w.cmd);
      if (w.writes.size() != 1 || wc.value != w.writes[0].hi - w.writes[0].lo) {
        ok = false;
        break;
      }
      const Range r = w.writes[0];
      Chained::Link l{i, n, c};
      bool store_between = false;
      for (std::size_t j = i + 1; j < n && ok; ++j) {
        const Op& o = *sched[j];
        if (o.kind == Op::kWait && o.peer == c) ok = false;
        if (!ok || !touches(o, r)) continue;
        if (is_store(o)) {  // it moves behind the send (place_stores)
          store_between = true;
          continue;
        }
        if (o.kind == Op::kVpu && !store_between) {
          const CmdVpu v = CmdVpu::decode(ch.cmd[j]);
          if (v.x_mem == static_cast<uint32_t>(Mem::kVmem) && v.x_row == r.lo &&
              v.rows == wc.value)
            l.op = j;
        } else if (o.kind == Op::kSend) {
          const CmdIciSend v = CmdIciSend::decode(ch.cmd[j]);
          if (!v.wait_rows && v.src_mem == static_cast<uint32_t>(Mem::kVmem) &&
              v.src_row == r.lo && v.rows == wc.value)
            l.op = j;
        }
        break;
      }
      if (!ok || l.op == n) {
        ok = false;
        break;
      }
      mine.push_back(l);
    }
    // One kind of consumer: the VPU, or sends to one chip with one hint.
    for (const Chained::Link& l : mine) {
      const std::size_t a = l.op, b = mine[0].op;
      if (sched[a]->kind != sched[b]->kind ||
          (sched[a]->kind == Op::kSend &&
           (sched[a]->peer != sched[b]->peer || tie_of(ch.cmd[a]) != tie_of(ch.cmd[b]))))
        ok = false;
    }
    if (!ok) continue;
    for (const Chained::Link& l : mine) {
      ch.link_of[l.wait] = static_cast<int>(ch.links.size());
      ch.links.push_back(l);
      if (sched[l.op]->kind == Op::kVpu) {
        CmdVpu v = CmdVpu::decode(ch.cmd[l.op]);
        v.x_wait = 1;
        v.x_counter = static_cast<uint32_t>(c);
        ch.cmd[l.op] = v.encode();
      } else {
        CmdIciSend v = CmdIciSend::decode(ch.cmd[l.op]);
        v.wait_rows = 1;
        v.wait_counter = static_cast<uint32_t>(c);
        ch.cmd[l.op] = v.encode();
      }
    }
  }
}

// Reductions whose result the next send of those rows forwards: per (peer, hint) counter of
// chip `self`, the pairs in program order.
void chain_sigs(Chained& ch, int self, Counters& ctr) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  std::map<std::pair<int, uint32_t>, std::vector<std::pair<std::size_t, std::size_t>>> sigs;
  for (std::size_t i = 0; i < n; ++i) {
    if (sched[i]->kind != Op::kVpu) continue;
    const CmdVpu v = CmdVpu::decode(ch.cmd[i]);
    if (v.dst_mem != static_cast<uint32_t>(Mem::kVmem) || v.dst_stride > 1) continue;
    const Range d{v.dst_row, v.dst_row + v.rows};
    for (std::size_t j = i + 1; j < n; ++j) {
      const Op& o = *sched[j];
      if (ch.is_dropped(j) || !touches(o, d)) continue;
      if (is_store(o)) continue;  // it waits for the VPU
      if (o.kind == Op::kSend) {
        const CmdIciSend sd = CmdIciSend::decode(ch.cmd[j]);
        if (!sd.wait_rows && sd.src_mem == static_cast<uint32_t>(Mem::kVmem) &&
            sd.src_row == d.lo && sd.rows == v.rows)
          sigs[{o.peer, sd.tie}].push_back({i, j});
      }
      break;
    }
  }
  for (const auto& [key, pairs] : sigs) {
    bool in_order = true;  // the send context takes the rows in the order the VPU writes them
    for (std::size_t k = 1; k < pairs.size(); ++k)
      if (pairs[k].second <= pairs[k - 1].second) in_order = false;
    const int c =
        in_order ? ctr.try_get(self, key.first, (key.second & 2u) ? kChainMinus : kChain) : -1;
    if (c < 0) continue;
    for (const auto& [i, j] : pairs) {
      CmdVpu v = CmdVpu::decode(ch.cmd[i]);
      v.sig = 1;
      v.sig_counter = static_cast<uint32_t>(c);
      ch.cmd[i] = v.encode();
      CmdIciSend sd = CmdIciSend::decode(ch.cmd[j]);
      sd.wait_rows = 1;
      sd.wait_local = 1;  // its rows are the VPU's, which keeps later readers off them
      sd.wait_counter = static_cast<uint32_t>(c);
      ch.cmd[j] = sd.encode();
    }
  }
}

// The program order. Stores of a chained send's rows that came before it move behind it and
// the sends that follow it (right behind it, a store would hold them in the in-order queue
// until its send is done; sends write nothing): behind the last such send among the chained
// sends whose rows the store reads, past no DMA (the engine keeps their order) and no write of
// what it reads (else the counters involved go to `bad`).
void place_stores(Chained& ch) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  std::vector<std::size_t> target(n, n);  // a moved store: the op it goes behind
  for (std::size_t k = 0; k < n; ++k) {
    if (!is_store(*sched[k])) continue;
    for (const Chained::Link& l : ch.links)
      if (sched[l.op]->kind == Op::kSend && l.wait < k && l.op > k &&
          touches(*sched[k], sched[l.wait]->writes[0]))
        target[k] = target[k] == n ? l.op : std::max(target[k], l.op);
  }
  std::size_t last = 0;  // moved stores keep their order
  for (std::size_t k = 0; k < n; ++k) {
    if (target[k] == n) continue;
    std::size_t p = std::max(target[k], last);
    while (p + 1 < n &&
           (ch.is_dropped(p + 1) || target[p + 1] != n || sched[p + 1]->kind == Op::kSend))
      ++p;
    target[k] = last = p;
    for (std::size_t j = k + 1; j <= p; ++j)
      if ((sched[j]->kind == Op::kDma && target[j] == n) || writes_any(*sched[j], sched[k]->reads))
        for (const Chained::Link& l : ch.links)
          if (l.wait < k && l.op > k && touches(*sched[k], sched[l.wait]->writes[0]))
            ch.bad.insert(l.counter);
  }
  std::vector<std::vector<std::size_t>> behind(n);
  for (std::size_t k = 0; k < n; ++k)
    if (target[k] != n) behind[target[k]].push_back(k);
  for (std::size_t i = 0; i < n; ++i) {
    if (!ch.is_dropped(i) && target[i] == n) ch.order.push_back(i);
    for (std::size_t k : behind[i]) ch.order.push_back(k);  // (i may be a dropped wait)
    ch.dropped += ch.is_dropped(i) ? 1 : 0;
  }
}

// The last round's stores feed nothing: each goes behind the sends that follow it and take no
// rows as they come (their rows are there, so they issue at once and go out). Placed right
// after the wait that finished their rows, stores took the in-order queue a cycle or two each
// ahead of the first all-gather step of a small all-reduce, whose chains of forwarded rows then
// started later (4x4, 4 KiB: 247 -> 244 cycles). Sends that take rows as they come could hold a
// store behind them for as long as their rows take to come; those keep their place.
void stores_behind_sends(Chained& ch) {
  auto& o = ch.order;
  for (std::size_t q = o.size(); q-- > 0;) {
    if (!ch.sched[o[q]]->hoist || !is_store(*ch.sched[o[q]])) continue;
    const Op& store = *ch.sched[o[q]];
    auto free_send = [&](std::size_t p) {
      return p < o.size() && ch.sched[o[p]]->kind == Op::kSend &&
             CmdIciSend::decode(ch.cmd[o[p]]).wait_rows == 0;
    };
    std::size_t p = q;  // the store's place
    for (;;) {
      std::size_t by = 0;  // ops it passes: a free send, or a wait and the free send after it
      if (free_send(p + 1))
        by = 1;
      else if (p + 1 < o.size() && ch.sched[o[p + 1]]->kind == Op::kWait && free_send(p + 2) &&
               !conflicts(*ch.sched[o[p + 1]], store))
        by = 2;
      if (by == 0) break;
      std::rotate(o.begin() + static_cast<std::ptrdiff_t>(p),
                  o.begin() + static_cast<std::ptrdiff_t>(p + 1),
                  o.begin() + static_cast<std::ptrdiff_t>(p + 1 + by));
      p += by;
    }
  }
}

// Whether the scoreboard holds op `o` while op `c` is in flight (a hazard between their ranges).
bool held_by(const Op& o, const Op& c) {
  return any(o.reads, c.writes) || any(o.writes, c.reads) || any(o.writes, c.writes);
}

// Every other op that touches a chained wait's rows after it (up to the next write of them)
// comes after the chained op; a reduction's x rows have no other reader that only reads, and
// none that the scoreboard does not hold behind the reduction (the VPU keeps no range of the
// rows it waits for: a bf16 all-reduce's second unpack of a packed row read it before it
// landed). A counter that breaks this goes to `bad`.
void check_links(Chained& ch) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  std::vector<std::size_t> pos(n, n);
  for (std::size_t q = 0; q < ch.order.size(); ++q) pos[ch.order[q]] = q;
  for (const Chained::Link& l : ch.links) {
    const Range r = sched[l.wait]->writes[0];
    const bool vpu = sched[l.op]->kind == Op::kVpu;
    for (std::size_t j = l.wait + 1; j < n; ++j) {
      if (j == l.op || ch.is_dropped(j) || !touches(*sched[j], r)) continue;
      if (pos[j] < pos[l.op] ||
          (vpu && (sched[j]->writes.empty() || !held_by(*sched[j], *sched[l.op]))))
        ch.bad.insert(l.counter);
      if (writes_any(*sched[j], {r})) break;
    }
  }
}

Chained chain_once(const std::vector<const Op*>& sched, int self, Counters& ctr,
                   const std::set<int>& off) {
  Chained ch(sched);
  chain_waits(ch, off);
  chain_sigs(ch, self, ctr);
  place_stores(ch);
  stores_behind_sends(ch);
  check_links(ch);
  return ch;
}

// A chaining pass's program, checked: every op once, but the waits chained into others.
std::vector<ChipCmd> chained_program(const Chained& res, std::vector<int>* steps) {
  const auto& sched = res.sched;
  std::vector<bool> seen(sched.size(), false);
  for (std::size_t i : res.order) {
    if (seen[i]) bad("internal: chaining placed a command twice");
    seen[i] = true;
  }
  if (res.order.size() + res.dropped != sched.size()) bad("internal: chaining lost a command");
  std::vector<ChipCmd> out;
  steps->clear();
  for (std::size_t i : res.order) {
    out.push_back(res.cmd[i]);
    steps->push_back(sched[i]->plan_step);
  }
  return out;
}

// Chaining (docs/isa.md: x_wait, sig, wait_rows). In the scheduled ops of chip `self`:
//  - a wait whose rows the next op to touch them reduces (its x, exactly those rows) goes into
//    that reduction as x_wait: the VPU reads each row as it lands;
//  - a wait whose rows the next op to touch them sends on, exactly those rows, goes into that
//    send as wait_rows; a store of those rows in between moves behind the send (and the sends
//    that follow it), which it then waits for: the send's rows count as written until it is done;
//  - a reduction whose result the next send of those rows sends on, exactly, signals each row it
//    writes (sig) on a counter of this chip, on which that send waits row by row (wait_local:
//    the reduction's own scoreboard entry keeps later readers off those rows, not the send).
// A counter's waits are chained all or none, into one kind of consumer (the VPU, or sends to one
// chip with one hint, hence one send context, which takes rows in program order), so no two
// consumers ever take from one counter at once. The ops a wait passes do not touch its rows, and
// a wait placed later only lets the ops before it go earlier (the deadlock rule asks waits to
// come late enough, never early); a chained send or reduction waits for rows that an earlier
// step produces, as the wait did. Every other op that touches a chained wait's rows after it
// must come after its chained send (a reduction's x rows: no other op), up to the next write of
// those rows; a counter that breaks this, or whose stores cannot move, is left unchained and the
// program is built again. Returns the program, with the plan step of each command.
std::vector<ChipCmd> chain(const std::vector<const Op*>& sched, int self, Counters& ctr,
                           std::vector<int>* steps) {
  std::set<int> off;
  for (;;) {  // each pass that fails leaves at least one more counter unchained
    Chained res = chain_once(sched, self, ctr, off);
    if (!res.bad.empty()) {
      off.insert(res.bad.begin(), res.bad.end());
      continue;
    }
    return chained_program(res, steps);
  }
}

std::vector<ChipCmd> schedule(const std::vector<Op>& ops, int self, Counters& ctr,
                              std::vector<int>* steps, bool sink_waits) {
  std::vector<const Op*> sched;
  for (const Op& op : ops) {
    std::size_t pos = sched.size();
    if (op.kind == Op::kSend || op.hoist) {  // just after the last op it must follow
      while (pos > 0 && !conflicts(op, *sched[pos - 1])) --pos;
      // A send of a reduction's rows goes behind the next reduction (and the waits before it):
      // right after its own it would hold that one in the in-order queue until its own is done,
      // and the VPU, which takes the next command while one runs, would run dry.
      auto after_vpu = [&](std::size_t back) {
        return pos >= back && sched[pos - back]->kind == Op::kVpu &&
               conflicts(op, *sched[pos - back]);
      };
      if (op.kind == Op::kSend &&
          (after_vpu(1) || (after_vpu(2) && sched[pos - 1]->kind == Op::kSend))) {
        std::size_t q = pos;
        while (q < sched.size() && sched[q]->kind == Op::kWait && !conflicts(*sched[q], op)) ++q;
        if (q < sched.size() && sched[q]->kind == Op::kVpu && !conflicts(*sched[q], op))
          pos = q + 1;
      }
      // A send of loaded rows goes behind the loads queued after its own (up to kDmaAhead): the
      // DMA engine runs that many reads beside the oldest, and a send right after its load
      // would hold the next loads in the in-order queue until that load is done.
      if (op.kind == Op::kSend && pos > 0 && is_load(*sched[pos - 1]))
        for (int k = 0; k < kDmaAhead && pos < sched.size() && is_load(*sched[pos]); ++k) ++pos;
    }
    sched.insert(sched.begin() + static_cast<std::ptrdiff_t>(pos), &op);
  }
  // With overlapped rounds each wait then goes as late as it may: just before the first op that
  // must follow it. A wait blocks the in-order queue; one for rows that only a later slot's
  // store reads held the next slot's commands behind it while its rows came (a 4x4x4: ~190
  // cycles a round). Later waits only let the ops before them go earlier (the deadlock rule
  // asks waits to come late enough, never early). Serial rounds keep each round's waits
  // before the next round's.
  for (std::size_t i = sched.size(); sink_waits && i-- > 0;) {
    if (sched[i]->kind != Op::kWait) continue;
    std::size_t j = i;
    while (j + 1 < sched.size() && !conflicts(*sched[j + 1], *sched[i])) ++j;
    std::rotate(sched.begin() + static_cast<std::ptrdiff_t>(i),
                sched.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                sched.begin() + static_cast<std::ptrdiff_t>(j) + 1);
  }
  return chain(sched, self, ctr, steps);
}

void add_all(std::vector<Op>& to, const std::vector<Op>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// Spreads `extra` (DMA pieces) over `ops`: one after each of evenly spaced waits (or ops, when
// there are fewer waits than pieces), the rest at the end, order kept.
std::vector<Op> interleave_ops(const std::vector<Op>& ops, const std::vector<Op>& extra_in) {
  if (extra_in.empty()) return ops;
  // The first piece goes before the first op: placed after the first wait it idled the DMA
  // engine while that wait held the queue at every round's start (2x2: 0.82 -> 0.85).
  std::vector<Op> out(extra_in.begin(), extra_in.begin() + 1);
  const std::vector<Op> extra(extra_in.begin() + 1, extra_in.end());
  if (extra.empty()) {
    out.insert(out.end(), ops.begin(), ops.end());
    return out;
  }
  std::vector<std::size_t> slots;  // positions after which a piece may go
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == Op::kWait) slots.push_back(i);
  if (slots.size() < extra.size()) {
    slots.clear();
    for (std::size_t i = 0; i < ops.size(); ++i) slots.push_back(i);
  }
  std::vector<std::size_t> at(ops.size(), 0);  // pieces after op i
  if (!slots.empty()) {
    const std::size_t k = std::min(extra.size(), slots.size());
    for (std::size_t j = 0; j < k; ++j) ++at[slots[j * slots.size() / k]];
  }
  std::size_t e = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    out.push_back(ops[i]);
    for (std::size_t j = 0; j < at[i]; ++j) out.push_back(extra[e++]);
  }
  while (e < extra.size()) out.push_back(extra[e++]);
  return out;
}

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

std::size_t lcm(std::size_t a, std::size_t b) { return a / std::gcd(a, b) * b; }

// Whether a plan is a reduce-scatter half (only reductions) followed by an all-gather half of as
// many steps (only copies): the all-gather of one round may then run beside the next round's
// reduce-scatter, which keeps the VPU (busy at the links' pace in a reduce-scatter, idle in an
// all-gather) from falling behind at every round's start (docs/pod.md).
bool halves(const CollectivePlan& plan) {
  const std::size_t S = plan.steps.size();
  if (plan.spec.collective != Collective::kAllReduce || S < 2 || S % 2 != 0) return false;
  for (std::size_t si = 0; si < S; ++si)
    for (const Transfer& t : plan.steps[si].transfers)
      if ((t.kind == TransferKind::kReduce) != (si < S / 2)) return false;
  return true;
}

// With overlapped rounds: how many steps after round r's second half (its all-gather) round
// r + 1's first half starts, in issue order. 0 where the VPU reduces rows as fast as a
// reduce-scatter step brings them on every link. Where it cannot (a 3D torus brings 1.5 rows a
// cycle), side by side step for step the VPU paces round r + 1's first, largest reduce-scatter
// steps while the links are half idle, and then carry round r's last, largest all-gather steps
// with the VPU idle. So round r + 1 starts one step before round r's largest all-gather steps,
// which then run beside its largest reduce-scatter steps (4x4x4, 1 MiB: 26 015 -> 24 946 cycles;
// docs/pod.md, "Overlapped rounds").
std::size_t half_offset(const CollectivePlan& plan, double rows_in_per_cycle) {
  const std::size_t H = plan.steps.size() / 2;
  if (rows_in_per_cycle <= 1.0 || H == 0) return 0;
  auto elems = [](const Step& s) {
    std::size_t n = 0;
    for (const Transfer& t : s.transfers) n += t.count;
    return n;
  };
  std::size_t most = 0;
  for (std::size_t k = H; k < 2 * H; ++k) most = std::max(most, elems(plan.steps[k]));
  std::size_t first = H;  // the first all-gather step of at least half the largest one's size
  while (2 * elems(plan.steps[first]) < most) ++first;
  return first > H ? first - H - 1 : 0;
}

// Whether every transfer of a plan goes to a neighbour: then no packet crosses a chip on its
// way, and a forwarding send's head may go before its first row (early_head) without holding a
// VC that another packet needs (on a line, a ring's wrap crosses the chips between).
bool neighbours_only(const CollectivePlan& plan) {
  for (const Step& st : plan.steps)
    for (const Transfer& t : st.transfers)
      if (t.route.hops != 1) return false;
  return true;
}

// The most links one chip receives on in one step of a plan (distinct routes into it).
int links_at_once(const CollectivePlan& plan) {
  int most = 0;
  for (const Step& st : plan.steps) {
    std::map<int, std::set<std::pair<int, int>>> in;  // chip -> (dim, dir)
    for (const Transfer& t : st.transfers) in[t.dst].insert({t.route.dim, t.route.dir});
    for (const auto& [c, routes] : in) most = std::max(most, static_cast<int>(routes.size()));
  }
  return most;
}

}  // namespace

std::size_t PodDriver::granule(DType dtype) const {
  const std::size_t esz = dtype == DType::kBf16 ? 2 : 4;
  return lcm(host_.info().shape.cols, kBurst / esz);
}

std::size_t PodDriver::granule(const CollectiveSpec& spec) const {
  const std::size_t g = granule(spec.dtype);
  if (spec.dtype != DType::kBf16 || spec.collective != Collective::kAllReduce) return g;
  // Packed halves of whole bursts: a piece of 2h rows packs into h rows, which the DMA stores as
  // two bf16 runs of h rows (lanes' lower halves, then upper), h a whole number of bf16 bursts.
  const std::size_t lanes = host_.info().shape.cols;
  const std::size_t burst_rows = std::max<std::size_t>(1, kBurst / (2 * lanes));
  return lcm(g, 2 * lanes * burst_rows);
}

PodProgram PodDriver::compile(const CollectiveSpec& spec_in, const CollectiveBuffers& bufs,
                              const PodCollectiveOptions& opt) {
  const MachineInfo& mi = host_.info();
  const Topology& topo = mi.topo;
  const ChipShape& shape = mi.shape;
  const unsigned L = shape.cols;
  const int P = topo.num_chips();
  const bool bf16 = spec_in.dtype == DType::kBf16;
  // A bf16 collective that only moves data (all_gather, all_to_all, broadcast) moves 32-bit
  // words of two bf16 each: the f32 program of half as many elements, whose chunks fall on the
  // same granule boundaries (32 bf16 = 16 words), so the wire and VMEM carry 2 bytes an
  // element. Its golden is the bf16 spec's rounds, with the same count.
  if (bf16 && !collective_reduces(spec_in.collective) &&
      2 * granule(DType::kF32) == granule(DType::kBf16)) {
    CollectiveSpec w = spec_in;
    w.dtype = DType::kF32;
    w.n = (spec_in.n + 1) / 2;
    make_plan(topo, [&] {  // the bf16 spec's own rules first (all_to_all blocks, root, ...)
      CollectiveSpec b = spec_in;
      b.granule = granule(DType::kBf16);
      return b;
    }());
    PodProgram pw = compile(w, bufs, opt);
    pw.spec = spec_in;
    pw.spec.granule = granule(DType::kBf16);
    pw.rounds = make_rounds(topo, pw.spec, pw.rounds.size());
    return pw;
  }
  const bool widen = bf16;  // a bf16 reduction reduces in f32
  // ... and a bf16 all-reduce gathers bf16: two to a lane, the all-gather's rows halved.
  const bool pack = bf16 && spec_in.collective == Collective::kAllReduce;
  const std::size_t esz = bf16 ? 2 : 4;
  const uint32_t row_align = std::max<uint32_t>(1, static_cast<uint32_t>(kBurst / (esz * L)));

  PodProgram pp;
  pp.spec = spec_in;
  pp.spec.granule = granule(spec_in);
  const CollectivePlan whole = make_plan(topo, pp.spec);
  if (bufs.in.size() != static_cast<std::size_t>(P) ||
      bufs.out.size() != static_cast<std::size_t>(P))
    bad("buffers: one input and one output address per chip (" + std::to_string(P) + " chips)");
  for (int c = 0; c < P; ++c) {
    auto check = [&](uint64_t addr, std::size_t elems, const char* what) {
      const uint64_t bytes = (elems * esz + kBurst - 1) / kBurst * kBurst;
      if (addr % kBurst != 0)
        bad(std::string(what) + " buffer of chip " + std::to_string(c) + " at " +
            std::to_string(addr) + ": must be 64-byte aligned");
      if (addr + bytes > shape.hbm_bytes)
        bad(std::string(what) + " buffer of chip " + std::to_string(c) + " (" +
            std::to_string(bytes) + " bytes at " + std::to_string(addr) +
            ") does not fit in the chip's " + std::to_string(shape.hbm_bytes) + " bytes of HBM");
    };
    check(bufs.in[c], whole.input_len(c), "input");
    check(bufs.out[c], whole.output_len(c), "output");
  }

  // Overlapped rounds: round r's second half (its all-gather) is issued in slot r + 1, beside
  // round r + 1's first half; `lag` slots per round. Worth it where a reduce-scatter step
  // brings a chip rows at least as fast as the VPU reduces them (one row a cycle): the VPU then
  // cannot catch up at a round's start unless the all-gather gives it time (2x2 torus: 0.83 ->
  // 0.88 of the bound); a ring (two links) leaves it slack, and the fourth region only makes
  // more rounds (ring of 8: 0.93 -> 0.91).
  const double rows_in_per_cycle =
      links_at_once(whole) * mi.link_bytes_per_cycle / (static_cast<double>(L) * 4.0);
  const std::size_t lag = opt.overlap_rounds && halves(whole) && rows_in_per_cycle >= 1.0 ? 2 : 1;
  const std::size_t offset = lag == 2 ? half_offset(whole, rows_in_per_cycle) : 0;
  const bool early = opt.early_heads && neighbours_only(whole);
  const uint32_t max_regions = static_cast<uint32_t>(lag) + 2;

  // VMEM: the regions; round r uses region r % regions.
  const uint32_t base = opt.vmem_base;
  const uint32_t avail =
      opt.vmem_rows ? opt.vmem_rows : (shape.vmem_rows > base ? shape.vmem_rows - base : 0);
  if (base + avail > shape.vmem_rows || avail < max_regions * 8)
    bad("VMEM rows [" + std::to_string(base) + ", " + std::to_string(base + avail) +
        ") do not fit the chip's " + std::to_string(shape.vmem_rows) + " rows or are too few");
  uint32_t nreg = max_regions, region_rows = 0;  // set per attempt: min(regions, rounds)
  auto set_regions = [&](std::size_t rounds) {
    nreg = static_cast<uint32_t>(
        std::min<std::size_t>(max_regions, std::max<std::size_t>(1, rounds)));
    region_rows = avail / nreg / row_align * row_align;
  };
  set_regions(max_regions);
  auto region = [&](std::size_t r) {
    return base + static_cast<uint32_t>(r % nreg) * region_rows;
  };

  // Rounds: as few as fit a region (or as asked). One attempt lays out every round and emits
  // its transfers; a round fits when its working buffer, landing areas and bf16 staging fit.
  const std::size_t gran = pp.spec.granule;
  std::size_t units = 1;
  for (int c = 0; c < P; ++c)
    units = std::max(units, (std::max(whole.input_len(c), whole.output_len(c)) + gran - 1) / gran);
  std::vector<ChipRound> st;  // [round * P + chip]
  std::vector<Pieces> pcs, pks;  // per round: the pieces, and packed (pack only)
  auto packed_of = [&](std::size_t r) { return pack ? &pks[r] : nullptr; };
  std::vector<uint32_t> bsz;
  if (opt.counter_base >= kIciCounters || opt.counter_count > kIciCounters - opt.counter_base)
    bad("ICI counters [" + std::to_string(opt.counter_base) + ", +" +
        std::to_string(opt.counter_count) + "): the chip has " + std::to_string(kIciCounters));
  const int ctr_count = static_cast<int>(opt.counter_count ? opt.counter_count
                                                           : kIciCounters - opt.counter_base);
  Counters ctr(P, static_cast<int>(opt.counter_base), ctr_count);
  auto attempt = [&](std::size_t R) {
    pp.rounds = make_rounds(topo, pp.spec, R);
    set_regions(pp.rounds.size());
    pcs.clear();
    pks.clear();
    bsz.clear();
    st.clear();
    ctr = Counters(P, static_cast<int>(opt.counter_base), ctr_count);
    // Steps are numbered across rounds (the scheduler's deadlock rule); overlapped rounds
    // share numbers: round r's step H + offset + j is round r + 1's step j (H = half a round's
    // steps).
    StepNumbers num;
    for (std::size_t r = 0; r < pp.rounds.size(); ++r) {
      const CollectivePlan& plan = pp.rounds[r].plan;
      pcs.push_back(cut_pieces(plan, L, row_align, pack));
      pks.push_back(pack ? packed_pieces(pcs.back()) : Pieces{});
      const Pieces& pc = pcs.back();
      if (pc.total_rows > region_rows) return false;
      uint32_t block_rows = opt.block_rows;
      if (block_rows == 0) {
        uint32_t smallest = 64;
        for (const Step& s : plan.steps)
          for (const Transfer& t : s.transfers) {
            uint32_t rows = 0;
            for (std::size_t j : pc.cover(t.src_offset, t.count)) rows += pc.rows[j];
            smallest = std::min(smallest, rows);
          }
        // One round is latency-bound (small blocks pipeline its steps sooner); several rounds
        // are bandwidth-bound (each block costs a head flit and a VPU op).
        block_rows = std::clamp<uint32_t>(smallest, pp.rounds.size() > 1 ? 32 : 16, 64);
      }
      bsz.push_back(block_rows);
      std::vector<ChipRound> rs(static_cast<std::size_t>(P));
      for (ChipRound& s : rs) {
        s.loc.resize(pc.start.size());
        s.fmt.assign(pc.start.size(), widen ? Fmt::kBf16 : Fmt::kF32);
        for (std::size_t j = 0; j < pc.start.size(); ++j) s.loc[j] = region(r) + pc.first_row[j];
        s.next_row = region(r) + pc.total_rows;
        s.region_end = region(r) + region_rows;
      }
      try {
        if (lag == 2 && (!halves(plan) || plan.steps.size() != whole.steps.size()))
          bad("internal: round " + std::to_string(r) + " is not two halves like the whole plan");
        num.round = static_cast<int>(r);
        num.late_from = lag == 2 ? plan.steps.size() / 2 : plan.steps.size();
        emit_transfers(plan, pc, packed_of(r), block_rows, num, rs, ctr);
        num.step_base += static_cast<int>(plan.steps.size() / lag + offset);
        num.plan_base += static_cast<int>(plan.steps.size());
        // Staging rows, at the region's end, for the bf16 outputs not stored as they are.
        for (int c = 0; c < P; ++c) {
          ChipRound& s = rs[static_cast<std::size_t>(c)];
          if (!widen) continue;
          for (const Segment& g : plan.chips[c].output)
            for (std::size_t j : pc.cover(g.offset, g.count)) {
              if (stored_packed(s, packed_of(r), j, row_align)) continue;
              s.stage[j] = s.next_row;
              s.next_row += pc.rows[j];
            }
          if (s.next_row > s.region_end) throw std::length_error("region");
        }
      } catch (const std::length_error&) {
        return false;
      }
      for (auto& s : rs) st.push_back(std::move(s));
    }
    return true;
  };
  if (opt.rounds) {
    if (!attempt(opt.rounds))
      bad("a round does not fit a VMEM region of " + std::to_string(region_rows) + " rows with " +
          std::to_string(opt.rounds) + " rounds; use more rounds");
  } else {
    // Double until a round count fits, then bisect down to the fewest that fit.
    std::size_t lo = 0, hi = 0, R = 1, last = 0;
    while (hi == 0) {
      last = R;
      if (attempt(R)) {
        hi = R;
      } else {
        lo = R;
        if (R >= units)
          bad("a round of one " + std::to_string(gran * esz) +
              "-byte granule per chip does not "
              "fit a VMEM region of " +
              std::to_string(region_rows) +
              " rows (working buffer "
              "plus a landing area for every incoming transfer)");
        R = std::min(units, R * 2);
      }
    }
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      last = mid;
      if (attempt(mid))
        hi = mid;
      else
        lo = mid;
    }
    if (last != hi) attempt(hi);  // the layout of the fewest rounds that fit
  }
  const std::size_t NR = pp.rounds.size();
  pp.block_rows = bsz.empty() ? 0 : bsz[0];
  auto at = [&](std::size_t r, int c) -> ChipRound& {
    return st[r * static_cast<std::size_t>(P) + static_cast<std::size_t>(c)];
  };

  // Who sends to whom in each round (for the tokens that lend a region to a sender).
  std::vector<std::set<std::pair<int, int>>> pairs(NR);  // (src, dst)
  for (std::size_t r = 0; r < NR; ++r)
    for (const Step& s : pp.rounds[r].plan.steps)
      for (const Transfer& t : s.transfers) pairs[r].insert({t.src, t.dst});
  const auto coord3 = [&](int id) {
    const PodCoord c = topo.coord(id);
    return std::array<int, 3>{c[0], c[1], c[2]};
  };

  // Loads and stores of round r on chip c, as DMA pieces of up to 1024 rows (64 KiB on a 16x16
  // chip): every command pays the HBM's latency and row opening (when the engine ran one DMA at
  // a time, an 8 KiB load took 149..179 cycles for 128 of transfer); few large commands keep it
  // near its peak (2x2, 1 MiB: 0.73 -> 0.82). The engine now runs up to four at once (a store
  // only beside accesses to other bytes).
  const uint32_t piece_rows = 1024;
  auto load = [&](std::size_t r, int c) {
    DmaSpans v(DmaDir::kHbmToVmem, bf16, L, row_align, piece_rows);
    const Pieces& pc = pcs[r];
    const auto hr = hbm_runs(pp.rounds[r].plan.chips[c].input, pp.rounds[r].in[c], pc);
    for (const HbmRun& h : hr) {
      if (h.whole % gran != 0 && h.whole != 0) bad("internal: an input run off a granule");
      const uint32_t rows = static_cast<uint32_t>((h.count + L - 1) / L);
      // Inputs land where the pieces start out: the region's working buffer.
      const std::size_t j = pc.containing(h.work);
      const uint32_t row =
          region(r) + pc.first_row[j] + static_cast<uint32_t>((h.work - pc.start[j]) / L);
      v.add(row, rows, bufs.in[c] + h.whole * esz);
    }
    // Round 0's load, with nothing before it, goes in pieces of a 16th of the round in the
    // order the round's ops need them, merged where they follow on: the engine runs sixteen
    // reads at once, so the first steps' sends go about one HBM latency after the start, not
    // after the whole round (4 KiB on a 4x4: 347 -> 324 cycles in eighths when the engine ran
    // four; then sixteen and sixteenths: 292 -> 283 (sixteen, eighths) -> 273).
    if (r == 0)
      v.in_need_order(at(r, c).ops, std::clamp<uint32_t>(pc.total_rows / 16, 1, piece_rows));
    return v.ops();
  };
  auto stored_packed_at = [&](std::size_t r, int c, std::size_t j) {
    return stored_packed(at(r, c), packed_of(r), j, row_align);
  };
  // Final values of round r's outputs: a bf16 reduction's narrowed to bf16 into the staging
  // rows (at the end of the round), then stored from there; the others straight from where
  // they live (a bf16 copy collective moves the bf16 bits in the lanes untouched). A packed
  // piece not stored straight (the buffer's last, its halves not whole bursts; rows i and h + i
  // of the piece in row i) unpacks: lower halves to the first h staging rows, upper halves to
  // the next h. A piece still as loaded (a pod of one chip) is rounded like the others, which
  // canonicalises a NaN.
  auto narrow_cmds = [&](std::size_t r, int c) {
    std::vector<Op> v;
    if (!widen) return v;
    const Pieces& pc = pcs[r];
    for (const Segment& g : pp.rounds[r].plan.chips[c].output)
      for (std::size_t j : pc.cover(g.offset, g.count)) {
        if (stored_packed_at(r, c, j)) continue;
        VpuCmdArgs a;
        a.dst_bf16 = true;
        a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
        a.x_row = a.y_row = at(r, c).loc[j];
        a.dst_row = at(r, c).stage.at(j);
        if (at(r, c).fmt[j] == Fmt::kPacked) {
          a.rows = pks[r].rows[j];
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
          a.src_bf16 = at(r, c).fmt[j] == Fmt::kBf16 ? kVpuSrcBf16X : 0u;
          a.rows = pc.rows[j];
          v.push_back(vpu_op(a, a.rows));
        }
      }
    return v;
  };
  auto store = [&](std::size_t r, int c) {
    DmaSpans v(DmaDir::kVmemToHbm, bf16, L, row_align, piece_rows);
    const Pieces& pc = pcs[r];
    const auto hr = hbm_runs(pp.rounds[r].plan.chips[c].output, pp.rounds[r].out[c], pc);
    for (const HbmRun& h : hr) {
      if (h.whole % gran != 0 && h.whole != 0) bad("internal: an output run off a granule");
      const std::size_t j = pc.containing(h.work);
      const uint32_t first = static_cast<uint32_t>((h.work - pc.start[j]) / L);
      const uint32_t rows = static_cast<uint32_t>((h.count + L - 1) / L);
      const uint64_t hbm = bufs.out[c] + h.whole * esz;
      if (widen && stored_packed_at(r, c, j)) {
        // Rows [first, first + rows) of the piece: those below the half are the lower halves of
        // the packed rows from `first` on, the rest their upper halves.
        const uint32_t half = pks[r].rows[j], end = first + rows;
        if (first < half) v.add(at(r, c).loc[j] + first, std::min(end, half) - first, hbm);
        if (end > half) {
          const uint32_t b = std::max(first, half);
          v.add(at(r, c).loc[j] + (b - half), end - b, hbm + uint64_t{b - first} * L * esz, true);
        }
        continue;
      }
      const uint32_t row = widen ? at(r, c).stage.at(j) + first : at(r, c).loc[j] + first;
      v.add(row, rows, hbm);
    }
    // The last round's store, nothing behind it to overlap, goes piece by piece as the pieces
    // become final (hoisted by the scheduler) rather than after the round: pieces of a 16th of
    // the round, 128 rows at most (a 4 KiB all-reduce on a 4x4 of 16x16 chips: 64 rows in one
    // DMA after the last step, 415 cycles; in pieces of 4 rows, all but the last step's stored
    // while the steps run, 391).
    if (r + 1 == NR) {
      v.in_ready_order(at(r, c).ops, std::clamp<uint32_t>(pcs[r].total_rows / 16, 1, 128));
      std::vector<Op> ops = v.ops();
      for (Op& op : ops) op.hoist = true;
      return ops;
    }
    return v.ops();
  };

  // The programs: every command of a chip as an op with the rows it reads and writes, in
  // program order, then one scheduling pass that moves each send up to just after the last op
  // it depends on, across round boundaries too: the next round's first blocks are on the links
  // while this round drains. Virtual rows (from kVirtual on) order a round's sends after the
  // token waits that lend them their receiver's region.
  constexpr uint32_t kVirtual = 1u << 24;
  auto token_range = [&](std::size_t r, int d) {
    const uint32_t v = kVirtual + static_cast<uint32_t>(r * static_cast<std::size_t>(P) +
                                                        static_cast<std::size_t>(d));
    return Range{v, v + 1};
  };
  pp.program = SpmdProgram(P);
  const int phase = pp.program.add_phase(collective_phase(pp.spec));
  for (int c = 0; c < P; ++c) {
    std::vector<Op> ops;
    auto add = [&](const std::vector<Op>& v) { ops.insert(ops.end(), v.begin(), v.end()); };
    add(load(0, c));
    // Slot t issues round t (its first half, when rounds overlap) and the second half of round
    // t + 1 - lag; slot t's body is their ops, step by step: every send of a step (block by
    // block, the earlier round first) before its arrivals, so each chip waits for the rows of
    // a counter in the order its sender sent them.
    const std::size_t slots = NR + lag - 1;
    for (std::size_t t = 0; t < slots; ++t) {
      // Round t + 1's landing areas are lent by each receiver's token, sent when the region's
      // previous round (t + 1 - regions) was stored, at the end of slot t - 1 (the first
      // `regions` rounds start on free regions). Waiting for it here, a slot early, lets round
      // t + 1's sends go out during slot t; the receiver finished slot t - 1 before this chip
      // can finish slot t.
      const std::size_t nx = t + 1;
      if (nx < NR && nx >= nreg)
        for (const auto& [src, d] : pairs[nx])
          if (src == c) {
            Op w;
            w.kind = Op::kWait;
            w.step = -1;
            w.peer = 1000 + ctr.get(c, d, kToken);
            w.cmd = cmd_ici_wait(static_cast<uint32_t>(ctr.get(c, d, kToken)), 1);
            w.writes.push_back(token_range(nx, d));
            ops.push_back(w);
          }
      // This slot's transfers; the DMAs of the next round's load (first, so its sends can
      // start early) and of the store of the round finished a slot ago spread over them, one
      // after each of evenly spaced waits.
      std::vector<Op> body;
      for (std::size_t r = t + 1 >= lag ? t + 1 - lag : 0; r <= t && r < NR; ++r)
        for (const Op& op : at(r, c).ops)
          if (op.slot == static_cast<int>(t)) {
            body.push_back(op);
            if (op.kind == Op::kSend && r >= nreg)
              body.back().reads.push_back(token_range(r, op.peer));
          }
      std::stable_sort(body.begin(), body.end(), [](const Op& x, const Op& y) {
        return std::tie(x.step, x.phase, x.block) < std::tie(y.step, y.phase, y.block);
      });
      // With three regions and one round at a time, round 0 (no store) also loads round 2,
      // whose region is still fresh, and round 1 only stores: the engine does not run dry
      // between rounds 0 and 1 (docs/pod.md, "What limits them").
      const bool ahead = lag == 1 && nreg == kRegions;
      std::vector<Op> dma;
      if (t + 1 < NR && !(ahead && t == 1)) add_all(dma, load(t + 1, c));
      if (ahead && t == 0) add_all(dma, load(2, c));
      if (t >= lag) add_all(dma, store(t - lag, c));
      add(interleave_ops(body, dma));
      if (t + 1 >= lag) add(narrow_cmds(t + 1 - lag, c));  // its last slot is done
      // The region of round q = t - lag (stored in this slot) is free for round q + regions
      // once everything that reads or writes it is done (its store, its sends, its
      // reductions): a two-row VPU copy whose strided write covers the whole region waits for
      // them in the scoreboard (WAR, WAW), and the tokens that lend the region to the chips
      // sending here in round q + regions read its row (RAW). No fence: the rest of the
      // pipeline keeps flowing.
      if (t >= lag && t - lag + nreg < NR) {
        const std::size_t q = t - lag;
        VpuCmdArgs a;
        a.op = static_cast<unsigned>(VpuOp::kMax);  // max(x, x) == x: a copy
        a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
        a.x_row = a.y_row = a.dst_row = region(q);
        a.dst_stride = region_rows - 1;
        a.rows = 2;
        ops.push_back(vpu_op(a, region_rows));
        for (const auto& [src, d] : pairs[q + nreg])
          if (d == c) {
            Op tk;
            tk.kind = Op::kSend;
            tk.step = -1;
            tk.peer = src;
            tk.cmd = cmd_ici_count(Mem::kVmem, region(q), coord3(src),
                                   static_cast<uint32_t>(ctr.get(src, c, kToken)));
            tk.reads.push_back({region(q), region(q) + 1});
            ops.push_back(tk);
          }
      }
    }
    add(store(NR - 1, c));
    std::vector<int> steps;
    std::vector<ChipCmd> prog = schedule(ops, c, ctr, &steps, opt.overlap_rounds);
    if (early) set_early_heads(prog, true);
    for (std::size_t i = 0; i < prog.size(); ++i)
      pp.program.chip(c).append({prog[i]}, CmdLabel{phase, steps.at(i), -1});
    uint32_t used = 0;
    for (std::size_t r = 0; r < NR; ++r) used = std::max(used, at(r, c).next_row - base);
    pp.vmem_rows_used = std::max(pp.vmem_rows_used, used);
  }
  return pp;
}

SpmdPhase collective_phase(const CollectiveSpec& spec) {
  SpmdPhase ph;
  ph.name = std::string(collective_name(spec.collective)) + " (" + spec.algorithm + ")";
  ph.collective = true;
  ph.kind = spec.collective;
  ph.bytes = static_cast<uint64_t>(spec.n) * (spec.dtype == DType::kBf16 ? 2 : 4);
  return ph;
}

PodProgramRun PodDriver::run_programs(const std::vector<std::vector<ChipCmd>>& progs,
                                      const std::string& label) {
  SpmdProgram sp(static_cast<int>(progs.size()));
  const int phase = label.empty() ? -1 : sp.add_phase(label);
  sp.append_all(progs, phase);
  return run_programs(sp);
}

PodProgramRun PodDriver::run_programs(const SpmdProgram& program) {
  const int P = host_.num_chips();
  if (program.num_chips() != P)
    bad("programs: one per chip (" + std::to_string(P) + "), not " +
        std::to_string(program.num_chips()));
  PodProgramRun res;
  const std::vector<LinkStat> before = host_.link_stats();
  std::vector<ChipCounters> cbefore;
  for (int c = 0; c < P; ++c) cbefore.push_back(host_.counters(c));
  for (int c = 0; c < P; ++c) {
    const auto& prog = program.cmds(c);
    const auto lab = program.trace_labels(c);
    std::size_t at = 0;
    for (std::size_t i = 0; i <= lab.size(); ++i) {
      const std::size_t end = i < lab.size() ? std::min(lab[i].first, prog.size()) : prog.size();
      if (end > at)
        host_.push(c, std::vector<ChipCmd>(prog.begin() + static_cast<std::ptrdiff_t>(at),
                                           prog.begin() + static_cast<std::ptrdiff_t>(end)));
      at = std::max(at, end);
      if (i < lab.size()) host_.trace_label(c, lab[i].second);
    }
  }
  res.run = host_.run_until_idle();
  for (int c = 0; c < P; ++c) res.chip_delta.push_back(host_.counters(c) - cbefore[c]);
  res.link_flits = host_.link_stats();
  for (std::size_t i = 0; i < res.link_flits.size() && i < before.size(); ++i) {
    res.link_flits[i].flits -= before[i].flits;
    res.link_flits[i].crc_errors -= before[i].crc_errors;
    res.link_flits[i].replays -= before[i].replays;
    res.link_flits[i].replayed_flits -= before[i].replayed_flits;
  }
  return res;
}

PodCollectiveRun PodDriver::run(const CollectiveSpec& spec, const CollectiveBuffers& bufs,
                                const PodCollectiveOptions& opt) {
  PodProgram pp = compile(spec, bufs, opt);
  PodCollectiveRun res;
  res.plan = make_plan(host_.info().topo, pp.spec);
  res.commands = pp.program.commands();
  res.vmem_rows_used = pp.vmem_rows_used;
  res.block_rows = pp.block_rows;
  res.row_bytes = uint64_t{host_.info().shape.cols} * 4;
  res.link_bytes_per_cycle = host_.info().link_bytes_per_cycle;
  res.prog = run_programs(pp.program);
  res.collective_cycles = res.prog.run.cycles;
  res.rounds = std::move(pp.rounds);
  return res;
}

PodCollectiveRun PodDriver::run(const CollectiveSpec& spec,
                                const std::vector<std::vector<uint32_t>>& inputs,
                                const PodCollectiveOptions& opt) {
  const MachineInfo& mi = host_.info();
  const int P = mi.num_chips();
  const bool bf16 = spec.dtype == DType::kBf16;
  const std::size_t esz = bf16 ? 2 : 4;
  CollectiveSpec s = spec;
  s.granule = granule(spec);
  const CollectivePlan plan = make_plan(mi.topo, s);
  if (inputs.size() != static_cast<std::size_t>(P))
    bad("inputs: " + std::to_string(inputs.size()) + " chips' inputs for a pod of " +
        std::to_string(P) + " chips");
  std::size_t in_max = 0, out_max = 0;
  for (int c = 0; c < P; ++c) {
    if (inputs[c].size() != plan.input_len(c))
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(inputs[c].size()) +
          " elements; the plan needs " + std::to_string(plan.input_len(c)));
    in_max = std::max(in_max, plan.input_len(c));
    out_max = std::max(out_max, plan.output_len(c));
  }
  if (opt.hbm_base % kBurst != 0) bad("hbm_base must be 64-byte aligned");
  auto bytes = [&](std::size_t n) { return (n * esz + kBurst - 1) / kBurst * kBurst; };
  CollectiveBuffers bufs;
  for (int c = 0; c < P; ++c) {
    bufs.in.push_back(opt.hbm_base);
    bufs.out.push_back(opt.hbm_base + bytes(in_max));
  }
  if (opt.hbm_base + bytes(in_max) + bytes(out_max) > mi.shape.hbm_bytes)
    bad("the buffers (" + std::to_string(bytes(in_max) + bytes(out_max)) + " bytes per chip from " +
        std::to_string(opt.hbm_base) + ") do not fit in the chip's " +
        std::to_string(mi.shape.hbm_bytes) + " bytes of HBM");
  // Inputs in: every chip at once (or the backdoor).
  std::vector<std::vector<uint8_t>> img(static_cast<std::size_t>(P));
  std::vector<HostCopy> ins;
  for (int c = 0; c < P; ++c) {
    auto& b = img[static_cast<std::size_t>(c)];
    b.assign(bytes(inputs[c].size()), 0);
    for (std::size_t i = 0; i < inputs[c].size(); ++i) std::memcpy(&b[i * esz], &inputs[c][i], esz);
    if (!b.empty()) ins.push_back(HostCopy{c, true, bufs.in[c], b.data(), b.size()});
  }
  uint64_t load_cycles = 0;
  if (opt.backdoor) {
    for (const HostCopy& h : ins) host_.backdoor_write(h.chip, h.addr, h.data, h.n);
  } else {
    load_cycles = host_.copy(ins);
  }
  PodCollectiveRun res = run(spec, bufs, opt);
  res.load_cycles = load_cycles;
  // Outputs out.
  std::vector<HostCopy> outs;
  for (int c = 0; c < P; ++c) {
    auto& b = img[static_cast<std::size_t>(c)];
    b.assign(bytes(plan.output_len(c)), 0);
    if (!b.empty()) outs.push_back(HostCopy{c, false, bufs.out[c], b.data(), b.size()});
  }
  if (opt.backdoor) {
    for (const HostCopy& h : outs) host_.backdoor_read(h.chip, h.addr, h.data, h.n);
  } else {
    res.store_cycles = host_.copy(outs);
  }
  res.out.resize(static_cast<std::size_t>(P));
  for (int c = 0; c < P; ++c) {
    const auto& b = img[static_cast<std::size_t>(c)];
    for (std::size_t i = 0; i < plan.output_len(c); ++i) {
      uint32_t v = 0;
      std::memcpy(&v, &b[i * esz], esz);
      res.out[static_cast<std::size_t>(c)].push_back(v);
    }
  }
  return res;
}

std::vector<std::vector<uint32_t>> golden_collective(const std::vector<CollectiveRound>& rounds,
                                                     const std::vector<std::vector<uint32_t>>& in) {
  return execute_rounds_bits(rounds, in);
}

}  // namespace tpu
