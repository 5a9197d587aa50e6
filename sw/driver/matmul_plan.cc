#include "matmul_plan.h"

#include <deque>
#include <stdexcept>
#include <string>

#include "tpu/vector.h"

namespace tpu {

namespace {
constexpr uint64_t kBurst = 64;
uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Rows of A per chunk that fit when W takes w_rows VMEM rows: everything double-buffered must
// fit the memories (0: none).
uint64_t max_chunk_rows(const MatmulTiling& t, const ChipShape& s, uint64_t w_rows) {
  uint64_t r = std::min<uint64_t>(t.p.m, 65535);
  while (r > 0 &&
         !(2 * r * t.nt <= s.amem_rows &&
           2 * r * t.kt + w_rows + 2 * r * t.nto + t.nt + (t.t_mask ? 1 : 0) <= t.p.vmem_rows))
    --r;
  return r;
}

// Whether streaming W, reloaded for each of the chunks of mt_stream rows, makes the plan
// HBM-bound on an HBM slowed below the chip's built peak: its bytes (A and C once, W once per
// chunk) take longer at the configured rate than the MXU's rows (one per weight tile). Then W
// resident (loaded once, beside smaller chunks) moves less. Never at the built rate, so no plan
// of the default HBM changes.
bool streaming_is_hbm_bound(const MatmulTiling& t, const ChipShape& s, uint64_t mt_stream) {
  const double rate = t.p.hbm_bytes_per_cycle;
  if (rate <= 0 || rate >= s.hbm_channels * 32.0 || mt_stream == 0 || mt_stream >= t.p.m)
    return false;
  const double L = static_cast<double>(t.lanes), m = static_cast<double>(t.p.m);
  const double a = m * static_cast<double>(t.kt) * L * 2;
  const double c = m * static_cast<double>(t.nto) * L * static_cast<double>(t.esize());
  const double w = static_cast<double>(t.kt * t.nt) * L * L * 2;
  const double chunks = static_cast<double>(ceil_div(t.p.m, mt_stream));
  const double mxu = m * static_cast<double>(t.kt * t.nt);
  return (a + c + w * chunks) / rate > mxu;
}

void set_panels(MatmulTiling* t) {
  t->pt = t->p.w_transposed ? ceil_div(t->nt, t->gn) : t->kt;
  t->qt = t->p.w_transposed ? t->gn * t->kt : t->nt;
}

// Chunks: a short first one (2L rows, when chunks are larger) so the MXU starts after a small
// A DMA, then balanced ones (no short last chunk: a MATMUL of fewer rows than the banks hide,
// (R + C) / (wbanks - 1), waits for its weights): as few as fit when W is streamed (it is
// reloaded per chunk), else of about 2L rows, so the last chunk's epilogue and DMA out are
// short.
void split_chunks(MatmulTiling* t) {
  const uint64_t L = t->lanes, M = t->p.m;
  const uint64_t first = (t->mt >= 3 * L && M >= 4 * L) ? 2 * L : 0;
  const uint64_t rest_chunks =
      ceil_div(M - first, t->w_resident ? std::min<uint64_t>(t->mt, 2 * L) : t->mt);
  if (first > 0) t->c_rows.push_back(first);
  for (uint64_t c = 0; c < rest_chunks; ++c)
    t->c_rows.push_back((M - first) / rest_chunks + (c < (M - first) % rest_chunks ? 1 : 0));
  t->c_m0.assign(t->c_rows.size(), 0);
  for (uint64_t c = 1; c < t->c_rows.size(); ++c) t->c_m0[c] = t->c_m0[c - 1] + t->c_rows[c - 1];
}
}  // namespace

uint64_t MatmulTiling::tile_cycles(uint64_t rows) const {
  return std::max({rows, ceil_div(rows + 2 * lanes, wbanks), load_cycles + 1});
}

MatmulTiling tile_matmul(const MatmulProblem& p, const ChipShape& s) {
  MatmulTiling t;
  t.p = p;
  const uint64_t L = s.cols;  // square array: rows == cols == lanes
  t.lanes = L;
  t.kt = ceil_div(p.k, L);
  t.nt = ceil_div(p.n, L);
  const uint64_t Kp = t.kt * L, Nw = t.nt * L;
  // A transposed W's tiles go K tile by K tile, the GN N tiles in each (a MATMUL that
  // accumulates waits for the one before it on the same C rows: GN - 1 others run meanwhile).
  t.gn = p.w_transposed ? std::min<uint64_t>(t.nt, 4) : 1;
  set_panels(&t);
  t.nto = round_up(Nw, kBurst / t.esize()) / L;
  t.k_tail = static_cast<uint32_t>(p.k % L);
  t.n_tail = static_cast<uint32_t>(p.n % L);
  t.t_mask = p.w_transposed && t.k_tail != 0;
  t.ktm = t.k_tail ? t.kt - 1 : t.kt;
  if (Nw * 4 > 0xFFFF || Kp * 2 > 0xFFFF || p.m > 0xFFFF)
    throw std::invalid_argument("matmul: M = " + std::to_string(p.m) +
                                ", K = " + std::to_string(p.k) + ", N = " + std::to_string(p.n) +
                                " exceed a DMA command's fields (M <= 65535, K <= 32767 rounded "
                                "up to the lanes, N <= 16383 rounded up to the lanes)");
  // W is either streamed (two panels, reloaded for every chunk) or, when the whole of it fits
  // beside chunks of a useful size, resident (loaded once).
  uint64_t mt_stream = max_chunk_rows(t, s, 2 * L * t.qt);
  while (p.w_transposed && t.gn > 1 && mt_stream < std::min<uint64_t>(p.m, 4 * L)) {
    --t.gn;  // smaller panels
    set_panels(&t);
    mt_stream = max_chunk_rows(t, s, 2 * L * t.qt);
  }
  const uint64_t mt_res = max_chunk_rows(t, s, t.pt * L * t.qt);  // every panel
  t.w_resident = mt_res > 0 && (mt_res >= std::min<uint64_t>(mt_stream, 4 * L) ||
                                streaming_is_hbm_bound(t, s, mt_stream));
  t.mt = t.w_resident ? mt_res : mt_stream;
  t.w_bufs = t.w_resident ? t.pt : 2;
  // Output groups of GG N tiles: at least 256 bytes of a C row (whole 64-byte bursts; the HBM
  // takes strided writes of shorter segments at a third of the rate).
  t.gg = std::min<uint64_t>(t.nto, std::max<uint64_t>(1, 256 / (L * t.esize())));
  t.wbanks = std::max(2u, s.wbanks);
  t.wrows = std::max(1u, s.wrows);
  t.load_cycles = (p.w_transposed ? 2 : 1) * L / t.wrows;
  if (t.mt > 0) split_chunks(&t);
  return t;
}

MatmulLayout layout_matmul(const MatmulTiling& t) {
  MatmulLayout l;
  const uint64_t L = t.lanes, mt = t.mt;
  l.a[0] = 0;
  l.a[1] = static_cast<uint32_t>(mt * t.kt);
  l.w0 = static_cast<uint32_t>(2 * mt * t.kt);
  l.w_panel_rows = L * t.qt;
  l.w_bufs = t.w_bufs;
  const uint32_t o0 = static_cast<uint32_t>(l.w0 + t.w_bufs * L * t.qt);
  l.out[0] = o0;
  l.out[1] = static_cast<uint32_t>(o0 + mt * t.nto);
  l.bias = static_cast<uint32_t>(o0 + 2 * mt * t.nto);
  l.mask = static_cast<uint32_t>(l.bias + t.nt);
  l.vmem_end = l.mask + (t.t_mask ? 1 : 0);
  l.c[0] = 0;
  l.c[1] = static_cast<uint32_t>(mt * t.nt);
  l.amem_end = 2 * mt * t.nt;
  return l;
}

namespace {

// The schedule. Issue is in order and a command that cannot issue holds every command behind
// it, so the order decides the overlap. A cost model (a MATMUL streams a row per cycle,
// tile_cycles per tile; a DMA or VPU op moves a memory row per cycle, plus a latency) places
// each command where its unit is free and its inputs are done, so the MXU never waits behind it:
// * W panels (one sequence over the chunks; resident W: only the first chunk's): the next
//   panel's DMA goes first, into the first gap where the engine is free; it is due when the
//   panel's first LOADW issues, a whole panel of MATMULs later.
// * The other work, in pieces (the next chunk's A; per N tile the epilogue's VPU ops, as soon
//   as the tile's last MATMUL is done; per output group its DMA out), goes into the gaps
//   between MATMULs where the model finds its unit idle and its inputs done; a DMA only if the
//   next W panel still fits after it before it is due.
// * Program order carries every dependency (the scoreboard enforces them; the model only
//   avoids waiting): A(c+1) after chunk c-1's MATMULs; a tile's epilogue after its MATMULs, a
//   group's DMA out after its epilogue; before chunk c's MATMULs (same C, out and A buffers)
//   chunk c-2's epilogue and DMA out and all of A(c).
class MatmulEmitter {
 public:
  MatmulEmitter(const MatmulTiling& t, const MatmulLayout& l, const MatmulOperands& o)
      : t_(t), l_(l), o_(o), L(t.lanes), a_done_(t.c_rows.size(), 0), masked_(t.w_bufs, false) {}
  std::vector<ChipCmd> run();

 private:
  struct Item {
    ChipCmd cmd;
    uint64_t cost;   // cycles its unit is busy (before the latency)
    uint64_t chunk;  // chunk it belongs to
    uint64_t ready;  // model time its inputs are done
    int64_t group;   // a VPU op that completes an output group: the group, else -1
    enum Kind { kOther, kA, kW } kind = kOther;  // A(chunk); W panel (chunk = the panel)
  };
  static constexpr uint64_t kDmaLat = 32, kVpuLat = 16, kNever = ~uint64_t{0} / 2;

  uint64_t emit(const Item& it, uint64_t* unit_free, uint64_t lat);
  void out_pieces(uint64_t c, uint64_t g, uint64_t ready, uint64_t target);
  uint64_t piece_target(uint64_t rows) const;
  void emit_vpu(const Item& it);
  void drain(int64_t last_epi, int64_t last_a);
  void w_try(bool force);
  void fill(uint64_t w2_due);
  void epilogue(uint64_t c, uint64_t nt, uint64_t ready);
  void a_pieces(uint64_t c, uint64_t ready, bool whole);
  std::vector<Item> w_dma(uint64_t p) const;
  void mask_panel(uint64_t p);
  void prologue();
  void step(uint64_t c, uint64_t p, uint64_t qi, uint64_t* done);

  const MatmulTiling& t_;
  const MatmulLayout& l_;
  const MatmulOperands& o_;
  const uint64_t L;  // lanes
  std::deque<Item> vpu_q_, a_q_, out_q_;
  std::vector<ChipCmd> prog_;
  uint64_t now_ = 0;                                     // model time
  uint64_t mxu_free_ = 0, dma_free_ = 0, vpu_free_ = 0;  // when each unit is free
  std::vector<uint64_t> a_done_, w_done_;                // model times A(c), panel p land
  bool w_pend_ = false;                                  // the W panel DMA waiting for the engine
  std::vector<Item> w_items_;
  std::vector<bool> masked_;  // transposed K edge tile of a resident W buffer masked
};

uint64_t MatmulEmitter::emit(const Item& it, uint64_t* unit_free, uint64_t lat) {
  now_ = std::max({now_, *unit_free, it.ready});
  *unit_free = now_ + it.cost + lat;
  prog_.push_back(it.cmd);
  if (it.kind == Item::kW) {
    if (w_done_.size() <= it.chunk) w_done_.resize(it.chunk + 1, 0);
    w_done_[it.chunk] = *unit_free;
  }
  if (it.kind == Item::kA) a_done_[it.chunk] = std::max(a_done_[it.chunk], *unit_free);
  return *unit_free;
}

// Output group g of chunk c, in DMAs of about `target` memory rows.
void MatmulEmitter::out_pieces(uint64_t c, uint64_t g, uint64_t ready, uint64_t target) {
  const uint64_t rows = t_.c_rows[c], b = c % 2, g0 = g * t_.gg, gs = t_.group_size(g);
  const uint64_t seg = std::max<uint64_t>(1, target / gs), esz = t_.esize();
  for (uint64_t r0 = 0; r0 < rows; r0 += seg) {
    const uint64_t n = std::min(seg, rows - r0);
    out_q_.push_back(
        {cmd_dma(DmaDir::kVmemToHbm, t_.p.out_bf16,
                 static_cast<uint32_t>(l_.out[b] + g0 * rows + r0 * gs), static_cast<uint32_t>(n),
                 static_cast<uint32_t>(gs * L * esz),
                 static_cast<uint32_t>(o_.c_addr + (t_.c_m0[c] + r0) * o_.c_pitch + g0 * L * esz),
                 static_cast<uint32_t>(o_.c_pitch)),
         n * gs, c, ready, -1});
  }
}

// Piece size: half the room a panel of MATMULs leaves beside its W panel DMA.
uint64_t MatmulEmitter::piece_target(uint64_t rows) const {
  const uint64_t step = t_.qt * t_.tile_cycles(rows), wcost = L * t_.qt + kDmaLat;
  return std::max<uint64_t>(4 * L,
                            step > wcost + 2 * kDmaLat ? (step - wcost) / 2 - kDmaLat : 4 * L);
}

void MatmulEmitter::emit_vpu(const Item& it) {
  const uint64_t done = emit(it, &vpu_free_, kVpuLat);
  if (it.group >= 0)
    out_pieces(it.chunk, static_cast<uint64_t>(it.group), done, piece_target(t_.c_rows[it.chunk]));
}

// Emits every queued epilogue and DMA-out item of a chunk <= last_epi and every A item of a
// chunk <= last_a (-1: none), earliest issue first.
void MatmulEmitter::drain(int64_t last_epi, int64_t last_a) {
  while (true) {
    struct Cand {
      std::deque<Item>* q;
      uint64_t* unit;
    };
    Cand best{nullptr, nullptr};
    uint64_t best_t = kNever;
    for (Cand c : {Cand{&vpu_q_, &vpu_free_}, Cand{&a_q_, &dma_free_}, Cand{&out_q_, &dma_free_}}) {
      const int64_t last = c.q == &a_q_ ? last_a : last_epi;
      if (c.q->empty() || static_cast<int64_t>(c.q->front().chunk) > last) continue;
      const uint64_t at = std::max({now_, *c.unit, c.q->front().ready});
      if (at < best_t) best_t = at, best = c;
    }
    if (best.q == nullptr) break;
    const Item it = best.q->front();
    best.q->pop_front();
    if (best.q == &vpu_q_)
      emit_vpu(it);
    else
      emit(it, &dma_free_, kDmaLat);
  }
}

// The pending W panel DMA (due before the next panel's first LOADW), when the engine is free
// or when forced.
void MatmulEmitter::w_try(bool force) {
  if (w_pend_ && (force || dma_free_ <= now_)) {
    for (const Item& it : w_items_) emit(it, &dma_free_, kDmaLat);
    w_pend_ = false;
  }
}

// One gap between MATMULs: at most one VPU op and one DMA, each only if it issues at once. A
// pending W panel goes first; another DMA only if the next W panel (due at w2_due) still fits
// after it.
void MatmulEmitter::fill(uint64_t w2_due) {
  if (!vpu_q_.empty() && vpu_q_.front().ready <= now_ && vpu_free_ <= now_) {
    const Item it = vpu_q_.front();
    vpu_q_.pop_front();
    emit_vpu(it);
  }
  if (w_pend_) return w_try(false);
  for (std::deque<Item>* q : {&a_q_, &out_q_}) {
    if (q->empty()) continue;
    const Item& it = q->front();
    const uint64_t end = now_ + it.cost + kDmaLat;
    if (it.ready <= now_ && dma_free_ <= now_ &&
        (w2_due == kNever || end + L * t_.qt + kDmaLat <= w2_due)) {
      emit(it, &dma_free_, kDmaLat);
      q->pop_front();
      break;
    }
  }
}

// The epilogue of N tile nt of chunk c: VPU ops from C into the out buffer.
void MatmulEmitter::epilogue(uint64_t c, uint64_t nt, uint64_t ready) {
  const uint64_t rows = t_.c_rows[c], b = c % 2;
  const uint32_t c0 = static_cast<uint32_t>(l_.c[b] + nt * rows);
  std::vector<VpuCmdArgs> st;
  if (o_.has_bias) {
    VpuCmdArgs v;
    v.op = static_cast<unsigned>(VpuOp::kAdd);
    v.x_mem = Mem::kAmem;
    v.x_row = c0;
    v.y_mem = Mem::kVmem;
    v.y_row = static_cast<uint32_t>(l_.bias + nt);
    v.y_bcast = true;
    st.push_back(v);
  }
  if (o_.relu) {
    VpuCmdArgs v;
    v.op = static_cast<unsigned>(VpuOp::kRelu);
    v.x_mem = v.y_mem = Mem::kAmem;
    v.x_row = v.y_row = c0;
    st.push_back(v);
  }
  if (st.empty()) {
    // maximum(x, x) == x for every canonical value: a copy (with the layout change below).
    VpuCmdArgs v;
    v.op = static_cast<unsigned>(VpuOp::kMax);
    v.x_mem = v.y_mem = Mem::kAmem;
    v.x_row = v.y_row = c0;
    st.push_back(v);
  }
  const uint64_t g = nt / t_.gg, g0 = g * t_.gg, gs = t_.group_size(g);
  const bool closes = nt + 1 == t_.nt || (nt + 1) % t_.gg == 0;
  for (std::size_t i = 0; i < st.size(); ++i) {
    VpuCmdArgs v = st[i];
    v.rows = static_cast<uint32_t>(rows);
    const bool last = i + 1 == st.size();
    if (last) {  // into the out buffer, group-major
      v.dst_mem = Mem::kVmem;
      v.dst_row = static_cast<uint32_t>(l_.out[b] + g0 * rows + nt - g0);
      v.dst_stride = static_cast<uint32_t>(gs);
      v.dst_bf16 = t_.p.out_bf16;
    } else {
      v.dst_mem = Mem::kAmem;
      v.dst_row = c0;
    }
    vpu_q_.push_back(
        {cmd_vpu(v), rows, c, ready, last && closes ? static_cast<int64_t>(g) : int64_t{-1}});
  }
}

// The A DMAs of chunk c: whole, or in pieces that fit the gaps.
void MatmulEmitter::a_pieces(uint64_t c, uint64_t ready, bool whole) {
  const uint64_t rows = t_.c_rows[c], b = c % 2, KT = t_.kt;
  const uint64_t seg = whole ? rows : std::max<uint64_t>(1, piece_target(rows) / KT);
  for (uint64_t r0 = 0; r0 < rows; r0 += seg) {
    const uint64_t n = std::min(seg, rows - r0);
    a_q_.push_back({cmd_dma(DmaDir::kHbmToVmem, true, static_cast<uint32_t>(l_.a[b] + r0 * KT),
                            static_cast<uint32_t>(n), static_cast<uint32_t>(KT * L * 2),
                            static_cast<uint32_t>(o_.a_addr + (t_.c_m0[c] + r0) * o_.a_pitch),
                            static_cast<uint32_t>(o_.a_pitch), t_.k_tail),
                    n * KT, c, ready, -1, Item::kA});
  }
}

// Panel p of the global sequence (K tile p % KT): its rows of W, and for a K edge tile the
// missing rows as +0 from the zeros row (stride 0). Transposed (N tile p % NT): its rows of w
// in whole pieces, the K edge tile's (lanes beyond K as -0) apart; rows beyond N are not loaded
// (they meet only C's padding columns).
std::vector<MatmulEmitter::Item> MatmulEmitter::w_dma(uint64_t p) const {
  const uint64_t KTm = t_.ktm, GN = t_.gn, NT = t_.nt, Nw = NT * L;
  if (t_.p.w_transposed) {
    const uint64_t n0 = (p % t_.pt) * GN * L, real = std::min<uint64_t>(GN * L, t_.p.n - n0);
    const uint64_t at = o_.w_addr + n0 * o_.w_pitch;
    std::vector<Item> v;
    if (KTm > 0)
      v.push_back(Item{cmd_dma(DmaDir::kHbmToVmem, true, l_.w(p), static_cast<uint32_t>(real),
                               static_cast<uint32_t>(KTm * L * 2), static_cast<uint32_t>(at),
                               static_cast<uint32_t>(o_.w_pitch)),
                       real * KTm, p, 0, -1, Item::kW});
    if (t_.k_tail)
      v.push_back(
          Item{cmd_dma(DmaDir::kHbmToVmem, true, static_cast<uint32_t>(l_.w(p) + GN * L * KTm),
                       static_cast<uint32_t>(real), static_cast<uint32_t>(L * 2),
                       static_cast<uint32_t>(at + KTm * L * 2), static_cast<uint32_t>(o_.w_pitch),
                       t_.k_tail),
               real, p, 0, -1, Item::kW});
    return v;
  }
  const uint64_t kt = p % t_.kt, real = std::min<uint64_t>(L, t_.p.k - kt * L);
  std::vector<Item> v{Item{
      cmd_dma(DmaDir::kHbmToVmem, true, l_.w(p), static_cast<uint32_t>(real),
              static_cast<uint32_t>(Nw * 2), static_cast<uint32_t>(o_.w_addr + kt * L * o_.w_pitch),
              static_cast<uint32_t>(o_.w_pitch), t_.n_tail),
      real * NT, p, 0, -1, Item::kW}};
  if (real < L)
    v.push_back(Item{cmd_dma(DmaDir::kHbmToVmem, true, static_cast<uint32_t>(l_.w(p) + real * NT),
                             static_cast<uint32_t>(L - real), static_cast<uint32_t>(Nw * 2),
                             static_cast<uint32_t>(o_.zeros_addr), 0),
                     (L - real) * NT, p, 0, -1, Item::kW});
  return v;
}

// The K edge tile of a transposed W panel, once landed: its pad lanes from -0 to +0 (the mask).
void MatmulEmitter::mask_panel(uint64_t p) {
  const uint64_t buf = p % t_.w_bufs;
  if (!t_.t_mask || masked_[buf]) return;
  if (t_.w_resident) masked_[buf] = true;  // loaded once
  VpuCmdArgs v;
  v.op = static_cast<unsigned>(VpuOp::kMul);
  v.src_bf16 = 3;  // x and y
  v.dst_bf16 = true;
  v.x_mem = v.y_mem = v.dst_mem = Mem::kVmem;
  v.x_row = v.dst_row = static_cast<uint32_t>(l_.w(p) + t_.gn * L * t_.ktm);
  v.y_row = l_.mask;
  v.y_bcast = true;
  v.rows = static_cast<uint32_t>(t_.gn * L);
  emit({cmd_vpu(v), t_.gn * L, 0, w_done_.size() > p ? w_done_[p] : 0, -1}, &vpu_free_, kVpuLat);
}

// Before the first MATMUL: the bias, the mask row, the first W panel and the first chunk of A.
void MatmulEmitter::prologue() {
  if (o_.has_bias)
    emit({cmd_dma(DmaDir::kHbmToVmem, false, l_.bias, 1, static_cast<uint32_t>(t_.nt * L * 4),
                  static_cast<uint32_t>(o_.bias_addr), 0, t_.n_tail),
          t_.nt, 0, 0, -1},
         &dma_free_, kDmaLat);
  if (t_.t_mask)  // 1 on the K edge tile's real lanes, -0 on the others
    emit({cmd_dma(DmaDir::kHbmToVmem, true, l_.mask, 1, static_cast<uint32_t>(L * 2),
                  static_cast<uint32_t>(o_.ones_addr), 0, t_.k_tail),
          1, 0, 0, -1},
         &dma_free_, kDmaLat);
  for (const Item& it : w_dma(0)) emit(it, &dma_free_, kDmaLat);
  a_pieces(0, 0, true);
}

// Weight tile qi of panel p (panel pi = p - c * PT of chunk c): its LOADW, its MATMUL, the
// epilogue of its N tile when that is complete, and a gap filled; *done: when the MATMUL is done
// (model time).
void MatmulEmitter::step(uint64_t c, uint64_t p, uint64_t qi, uint64_t* done) {
  const uint64_t pi = p - c * t_.pt, GN = t_.gn, KTm = t_.ktm, QT = t_.qt;
  const bool wt = t_.p.w_transposed;
  const uint64_t kt = wt ? qi / GN : pi, j = qi % GN;
  const uint64_t nt = wt ? pi * GN + j : qi;
  if (nt >= t_.nt) return;  // the last group of a transposed W's N tiles is short
  // Each LOADW right before its MATMUL, not wbanks - 1 ahead: a LOADW waiting for a bank holds
  // the one loader and, issue being in order, every command behind it, so one further ahead
  // stalls the MATMUL that would free the bank (bench_chip skinny, 16x16: 0.727 of the roofline
  // one ahead, 0.698 two, 0.553 three). The banks drain while the loader fills.
  if (!wt)
    prog_.push_back(cmd_loadw(static_cast<uint32_t>(l_.w(p) + nt), static_cast<uint32_t>(t_.nt)));
  else if (kt < KTm)
    prog_.push_back(cmd_loadw(static_cast<uint32_t>(l_.w(p) + j * L * KTm + kt),
                              static_cast<uint32_t>(KTm), true));
  else {  // the K edge tiles: masked first, as late as possible (the DMA has landed)
    if (j == 0) mask_panel(t_.w_resident ? pi : p);
    prog_.push_back(cmd_loadw(static_cast<uint32_t>(l_.w(p) + GN * L * KTm + j * L), 1, true));
  }
  const uint64_t rows = t_.c_rows[c], b = c % 2, rows_eff = t_.tile_cycles(rows);
  const uint64_t wp = t_.w_resident ? pi : p;
  const uint64_t w_at = (wp < w_done_.size() ? w_done_[wp] : 0) + L / t_.wrows + 2;
  now_ = std::max({now_, mxu_free_, a_done_[c], w_at});
  mxu_free_ = now_ + rows_eff;
  *done = now_ + rows + 2 * L + 8;  // the MXU's pipeline
  prog_.push_back(cmd_matmul(static_cast<uint32_t>(l_.a[b] + kt), static_cast<uint32_t>(rows),
                             static_cast<uint32_t>(l_.c[b] + nt * rows), kt > 0,
                             static_cast<uint32_t>(t_.kt)));
  if (kt + 1 == t_.kt) epilogue(c, nt, *done);
  // Panel p + 2's DMA is due when its first LOADW issues, with the last MATMUL of step p + 1.
  fill(p + 2 < t_.panels() ? now_ + (QT - 1 - qi) * rows_eff + QT * rows_eff : kNever);
}

std::vector<ChipCmd> MatmulEmitter::run() {
  prologue();
  const uint64_t nchunks = t_.c_rows.size(), panels = t_.panels();
  uint64_t prev_done = 0;  // model time chunk c-1's MATMULs are done
  for (uint64_t c = 0; c < nchunks; ++c) {
    drain(static_cast<int64_t>(c) - 2, static_cast<int64_t>(c));
    if (c + 1 < nchunks) a_pieces(c + 1, prev_done, false);
    uint64_t done = 0;
    for (uint64_t p = c * t_.pt; p < (c + 1) * t_.pt; ++p) {
      w_try(true);  // panel p, if still pending: its LOADWs come next
      if (p + 1 < panels) {
        w_items_ = w_dma(p + 1);
        w_pend_ = true;
        w_try(false);
      }
      for (uint64_t qi = 0; qi < t_.qt; ++qi) step(c, p, qi, &done);
    }
    prev_done = done;
  }
  drain(static_cast<int64_t>(nchunks), static_cast<int64_t>(nchunks));
  prog_.push_back(cmd_halt());
  return std::move(prog_);
}

}  // namespace

std::vector<ChipCmd> emit_matmul(const MatmulTiling& t, const MatmulLayout& l,
                                 const MatmulOperands& o) {
  return MatmulEmitter(t, l, o).run();
}

}  // namespace tpu
