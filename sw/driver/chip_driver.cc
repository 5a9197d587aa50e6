#include "chip_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>

#include "tpu/matmul.h"
#include "tpu/vector.h"

namespace tpu {

namespace {
constexpr uint64_t kBurst = 64;
uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
}  // namespace

ChipDriver::ChipDriver(HostPort& port, int chip) : port_(&port), chip_(chip) {
  if (chip < 0 || chip >= port.num_chips())
    throw std::invalid_argument("ChipDriver: chip " + std::to_string(chip) +
                                " is not in the machine (0.." +
                                std::to_string(port.num_chips() - 1) + ")");
}

ChipDriver::~ChipDriver() = default;

uint64_t ChipDriver::alloc(uint64_t bytes) {
  const uint64_t at = next_free_;
  const uint64_t end = at + round_up(std::max<uint64_t>(bytes, 1), kBurst);
  if (end > shape().hbm_bytes)
    throw std::runtime_error("HBM allocation of " + std::to_string(bytes) + " bytes does not fit (" +
                             std::to_string(shape().hbm_bytes - at) + " bytes free)");
  next_free_ = end;
  return at;
}

void ChipDriver::release(uint64_t mark) {
  if (mark > next_free_) throw std::invalid_argument("release: mark beyond the allocated HBM");
  next_free_ = mark;
  if (zeros_.addr >= mark) zeros_ = HbmMatrix{};
  if (ones_.addr >= mark) ones_ = HbmMatrix{};
  if (ident_.addr >= mark) ident_ = HbmMatrix{};
}

namespace {
// The smallest legal pitch of a matrix of `cols` columns: a whole number of lanes and of bursts.
std::size_t matrix_pitch(const ChipShape& s, std::size_t cols, Dtype dtype) {
  return round_up(cols, std::max<uint64_t>(s.cols, kBurst / dtype_bytes(dtype)));
}
}  // namespace

HbmMatrix ChipDriver::alloc_matrix(std::size_t rows, std::size_t cols, Dtype dtype) {
  if (rows == 0 || cols == 0) throw std::invalid_argument("alloc_matrix: rows and cols must be >= 1");
  HbmMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.dtype = dtype;
  m.pitch = matrix_pitch(shape(), cols, dtype);
  m.addr = alloc(m.bytes());
  return m;
}

uint64_t matmul_hbm_bytes(const ChipShape& s, std::size_t m, std::size_t k, std::size_t n,
                          const MatmulOptions& opt) {
  // Saturating: shapes from the command line may multiply past 64 bits.
  const uint64_t top = ~uint64_t{0};
  auto mul = [&](uint64_t a, uint64_t b) { return b != 0 && a > top / b ? top : a * b; };
  auto add = [&](uint64_t a, uint64_t b) { return a > top - b ? top : a + b; };
  auto bytes = [&](std::size_t rows, std::size_t cols, Dtype d) {
    return mul(mul(rows, matrix_pitch(s, cols, d)), dtype_bytes(d));  // whole bursts already
  };
  uint64_t total = add(add(bytes(m, k, Dtype::kBf16), bytes(k, n, Dtype::kBf16)),
                       bytes(m, n, opt.out_bf16 ? Dtype::kBf16 : Dtype::kF32));
  if (opt.bias) total = add(total, bytes(1, n, Dtype::kF32));
  return total;
}

void check_matmul_fits(const ChipShape& s, std::size_t m, std::size_t k, std::size_t n,
                       const MatmulOptions& opt) {
  const uint64_t need = matmul_hbm_bytes(s, m, k, n, opt);
  if (need > s.hbm_bytes)
    throw std::invalid_argument(
        "matmul " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
        ": A, W and C need " + std::to_string(need) + " bytes of HBM, the chip has " +
        std::to_string(s.hbm_bytes) + " (rule: the operands of a one-chip matmul fit its HBM; "
        "tpusim shard splits larger ones over a pod)");
}

namespace {
std::vector<uint8_t> padded_image(const HbmMatrix& m, const void* data, std::size_t n,
                                  std::size_t esize, const char* type) {
  if (m.esize() != esize)
    throw std::invalid_argument(std::string("write_matrix: the matrix is not ") + type);
  if (n != m.rows * m.cols)
    throw std::invalid_argument("write_matrix: " + std::to_string(n) + " values for a " +
                                std::to_string(m.rows) + " x " + std::to_string(m.cols) + " matrix");
  std::vector<uint8_t> buf(m.bytes(), 0);
  for (std::size_t i = 0; i < m.rows; ++i)
    std::memcpy(buf.data() + i * m.pitch * esize,
                static_cast<const uint8_t*>(data) + i * m.cols * esize, m.cols * esize);
  return buf;
}
}  // namespace

std::vector<uint8_t> ChipDriver::matrix_image(const HbmMatrix& m,
                                              const std::vector<bf16_t>& data) const {
  return padded_image(m, data.data(), data.size(), 2, "bf16");
}

std::vector<uint8_t> ChipDriver::matrix_image(const HbmMatrix& m,
                                              const std::vector<float>& data) const {
  return padded_image(m, data.data(), data.size(), 4, "f32");
}

std::vector<uint32_t> ChipDriver::matrix_from_image(const HbmMatrix& m,
                                                    const std::vector<uint8_t>& buf) {
  if (buf.size() < m.bytes())
    throw std::invalid_argument("matrix_from_image: " + std::to_string(buf.size()) +
                                " bytes for a matrix of " + std::to_string(m.bytes()));
  std::vector<uint32_t> out(m.rows * m.cols);
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) {
      uint32_t v = 0;
      std::memcpy(&v, buf.data() + (i * m.pitch + j) * m.esize(), m.esize());
      out[i * m.cols + j] = v;
    }
  return out;
}

void ChipDriver::write_matrix(const HbmMatrix& m, const std::vector<bf16_t>& data) {
  const auto buf = matrix_image(m, data);
  write(m.addr, buf.data(), buf.size());
}

void ChipDriver::write_matrix(const HbmMatrix& m, const std::vector<float>& data) {
  const auto buf = matrix_image(m, data);
  write(m.addr, buf.data(), buf.size());
}

std::vector<uint32_t> ChipDriver::read_matrix(const HbmMatrix& m) {
  std::vector<uint8_t> buf(m.bytes());
  read(m.addr, buf.data(), buf.size());
  return matrix_from_image(m, buf);
}

void ChipDriver::write(uint64_t addr, const void* data, std::size_t n) {
  if (n == 0) return;
  if (addr + n > shape().hbm_bytes) throw std::out_of_range("write beyond the HBM capacity");
  const uint64_t lo = addr / kBurst * kBurst, hi = round_up(addr + n, kBurst);
  std::vector<uint8_t> buf(hi - lo, 0);
  if (lo != addr || hi != addr + n) port_->read(chip_, lo, buf.data(), buf.size());  // merge
  std::memcpy(buf.data() + (addr - lo), data, n);
  port_->write(chip_, lo, buf.data(), buf.size());
}

void ChipDriver::read(uint64_t addr, void* data, std::size_t n) {
  if (n == 0) return;
  if (addr + n > shape().hbm_bytes) throw std::out_of_range("read beyond the HBM capacity");
  const uint64_t lo = addr / kBurst * kBurst, hi = round_up(addr + n, kBurst);
  std::vector<uint8_t> buf(hi - lo, 0);
  port_->read(chip_, lo, buf.data(), buf.size());
  std::memcpy(data, buf.data() + (addr - lo), n);
}

ChipCounters ChipDriver::counters() { return port_->counters(chip_); }

ProgramResult ChipDriver::run(const std::vector<ChipCmd>& prog, bool throw_on_error,
                              uint64_t max_cycles) {
  const ChipCounters before = counters();
  ProgramResult r;
  port_->push(chip_, prog);
  const auto saved = port_->progress;
  const uint64_t every = port_->progress_every;
  if (progress) {
    port_->progress = [&](uint64_t cycles) { progress(cycles, prog.size()); };
    port_->progress_every = progress_every;
  }
  RunStats st;
  try {
    st = port_->run_until_idle(max_cycles, /*stop_on_error=*/false);
  } catch (const ChipError&) {
    throw;
  } catch (const HangError&) {  // the watchdog's diagnosis, as it is
    port_->progress = saved;
    port_->progress_every = every;
    throw;
  } catch (const PodError& e) {
    port_->progress = saved;
    port_->progress_every = every;
    throw ChipError("chip " + std::to_string(chip_) + " (" + port_->info().variant +
                        "): program of " + std::to_string(prog.size()) + " commands: " + e.what(),
                    0, chip_, 0);
  }
  port_->progress = saved;
  port_->progress_every = every;
  r.cycles = st.cycles;
  r.delta = counters() - before;
  const ChipStatus s = port_->status(chip_);
  r.err = s.err;
  r.err_cmd = s.err_cmd;
  r.err_addr = s.err_addr;
  if (s.err != 0 || s.halted) port_->clear(chip_);
  if (r.err != 0 && throw_on_error) {
    std::string where;
    if (r.err == static_cast<unsigned>(ChipErr::kHbmUncorr)) {
      char b[40];
      std::snprintf(b, sizeof b, ", HBM address 0x%x", static_cast<unsigned>(r.err_addr));
      where = b;
    }
    throw ChipError("chip " + std::to_string(chip_) + " (" + port_->info().variant +
                        "): error register " + std::to_string(r.err) + " (" +
                        chip_err_name(r.err) + ") at command " + std::to_string(r.err_cmd) +
                        where,
                    r.err, chip_, r.err_cmd);
  }
  return r;
}

namespace {
// The bytes of row i that a matmul may touch: its columns rounded up to whole lanes and bursts
// (an edge tile writes its whole row of lanes; the pitch's padding beyond that is untouched, so a
// view of some columns of a wider matrix touches only its own columns).
uint64_t row_span(const HbmMatrix& m, const ChipShape& s) {
  const uint64_t unit = std::max<uint64_t>(s.cols, kBurst / m.esize());
  return (m.cols + unit - 1) / unit * unit * m.esize();
}
uint64_t footprint_end(const HbmMatrix& m, const ChipShape& s) {
  return m.addr + (m.rows - 1) * m.pitch * m.esize() + row_span(m, s);
}
// Whether the rows of x and y share a byte (both walked in address order).
bool overlap(const HbmMatrix& x, const HbmMatrix& y, const ChipShape& s) {
  if (footprint_end(x, s) <= y.addr || footprint_end(y, s) <= x.addr) return false;
  const uint64_t xs = row_span(x, s), ys = row_span(y, s);
  const uint64_t xp = x.pitch * x.esize(), yp = y.pitch * y.esize();
  std::size_t i = 0, j = 0;
  while (i < x.rows && j < y.rows) {
    const uint64_t xa = x.addr + i * xp, ya = y.addr + j * yp;
    if (xa < ya + ys && ya < xa + xs) return true;
    if (xa + xs <= ya + ys) ++i; else ++j;
  }
  return false;
}

void check_matrix(const HbmMatrix& m, const char* name, Dtype want, const ChipShape& s) {
  const std::string n = std::string("matmul: ") + name;
  if (m.dtype != want)
    throw std::invalid_argument(n + " must be " + (want == Dtype::kBf16 ? "bf16" : "f32"));
  if (m.rows == 0 || m.cols == 0) throw std::invalid_argument(n + " is empty");
  const uint64_t unit = std::max<uint64_t>(s.cols, kBurst / m.esize());
  if (m.pitch < m.cols || m.pitch % unit != 0)
    throw std::invalid_argument(n + ": pitch " + std::to_string(m.pitch) + " must be >= cols (" +
                                std::to_string(m.cols) + ") and a multiple of " +
                                std::to_string(unit) + " elements (lanes and 64-byte bursts)");
  if (m.addr % kBurst != 0)
    throw std::invalid_argument(n + ": address " + std::to_string(m.addr) +
                                " is not 64-byte aligned");
  if (footprint_end(m, s) > s.hbm_bytes)
    throw std::invalid_argument(n + " ends beyond the HBM capacity (" +
                                std::to_string(s.hbm_bytes) + " bytes)");
}
}  // namespace

MatmulRun ChipDriver::matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                             std::size_t M, std::size_t K, std::size_t N,
                             const MatmulOptions& opt) {
  if (M == 0 || K == 0 || N == 0) throw std::invalid_argument("matmul: M, K and N must be >= 1");
  if (a.size() != M * K) throw std::invalid_argument("matmul: A must hold M x K values");
  if (w.size() != K * N) throw std::invalid_argument("matmul: W must hold K x N values");
  if (opt.bias && opt.bias->size() != N)
    throw std::invalid_argument("matmul: the bias must hold N values");
  check_matmul_fits(shape(), M, K, N, opt);
  const uint64_t mark = allocated();
  try {
    const HbmMatrix am = alloc_matrix(M, K, Dtype::kBf16), wm = alloc_matrix(K, N, Dtype::kBf16);
    const HbmMatrix cm = alloc_matrix(M, N, opt.out_bf16 ? Dtype::kBf16 : Dtype::kF32);
    HbmMatrix bm;
    write_matrix(am, a);
    write_matrix(wm, w);
    MatmulEpilogue ep;
    ep.relu = opt.relu;
    if (opt.bias) {
      bm = alloc_matrix(1, N, Dtype::kF32);
      write_matrix(bm, *opt.bias);
      ep.bias = &bm;
    }
    MatmulRun res = matmul(cm, am, wm, ep);
    res.c_bits = read_matrix(cm);
    release(mark);
    return res;
  } catch (...) {
    release(mark);
    throw;
  }
}

MatmulRun ChipDriver::matmul(const HbmMatrix& cm, const HbmMatrix& am, const HbmMatrix& wm,
                             const MatmulEpilogue& ep, bool w_transposed) {
  MatmulRun res = plan_matmul(cm, am, wm, ep, w_transposed);
  finish_matmul(&res, run(res.program));
  return res;
}

void ChipDriver::finish_matmul(MatmulRun* r, const ProgramResult& prog) const {
  r->prog = prog;
  r->hbm_bytes = prog.delta[kStatDmaRdBytes] + prog.delta[kStatDmaWrBytes];
  r->peak_bytes_per_cycle = static_cast<double>(shape().hbm_channels) * 32.0;
  r->roofline_cycles = std::max<uint64_t>(
      r->compute_cycles,
      static_cast<uint64_t>(static_cast<double>(r->hbm_bytes) / r->peak_bytes_per_cycle + 0.5));
}

MatmulRun ChipDriver::plan_matmul(const HbmMatrix& cm, const HbmMatrix& am, const HbmMatrix& wm,
                                  const MatmulEpilogue& ep, bool w_transposed) {
  const ChipShape& s = shape();
  check_matrix(am, "A", Dtype::kBf16, s);
  check_matrix(wm, w_transposed ? "W (transposed)" : "W", Dtype::kBf16, s);
  check_matrix(cm, "C", cm.dtype, s);
  // W is K x N, or N x K when transposed.
  const std::size_t w_k = w_transposed ? wm.cols : wm.rows, w_n = w_transposed ? wm.rows : wm.cols;
  if (am.cols != w_k)
    throw std::invalid_argument("matmul: A is " + std::to_string(am.rows) + " x " +
                                std::to_string(am.cols) + " but W has " + std::to_string(w_k) +
                                (w_transposed ? " columns (transposed; K must agree)"
                                              : " rows (K must agree)"));
  if (cm.rows != am.rows || cm.cols != w_n)
    throw std::invalid_argument("matmul: C must be " + std::to_string(am.rows) + " x " +
                                std::to_string(w_n) + " (M x N), not " +
                                std::to_string(cm.rows) + " x " + std::to_string(cm.cols));
  if (ep.bias) {
    check_matrix(*ep.bias, "the bias", Dtype::kF32, s);
    if (ep.bias->rows != 1 || ep.bias->cols != w_n)
      throw std::invalid_argument("matmul: the bias must be 1 x " + std::to_string(w_n));
  }
  if (overlap(cm, am, s) || overlap(cm, wm, s) || (ep.bias && overlap(cm, *ep.bias, s)))
    throw std::invalid_argument("matmul: C overlaps an input in HBM");
  const std::size_t M = am.rows, K = am.cols, N = w_n;
  const bool out_bf16 = cm.dtype == Dtype::kBf16;
  const uint64_t L = s.cols;  // square array: rows == cols == lanes
  const uint64_t KT = ceil_div(K, L), NT = ceil_div(N, L);
  const uint64_t Kp = KT * L, Nw = NT * L;
  // W moves in panels: PT per chunk of QT tiles each. Plain: a panel is a K tile (L rows of W,
  // NT tiles). Transposed: GN N tiles (GN * L rows of w, all KT tiles of each), so that the DMA
  // reads whole rows of w; its tiles go K tile by K tile, the GN N tiles in each (a MATMUL that
  // accumulates waits for the one before it on the same C rows: GN - 1 others run meanwhile).
  uint64_t GN = w_transposed ? std::min<uint64_t>(NT, 4) : 1;
  uint64_t PT = 0, QT = 0;
  auto set_panels = [&] {
    PT = w_transposed ? ceil_div(NT, GN) : KT;
    QT = w_transposed ? GN * KT : NT;
  };
  set_panels();
  const uint64_t esz = out_bf16 ? 2 : 4;
  const uint64_t No = round_up(Nw, kBurst / esz), NTo = No / L;
  const uint32_t k_tail = static_cast<uint32_t>(K % L), n_tail = static_cast<uint32_t>(N % L);
  // A transposed W's K edge tile: its lanes beyond K come in as -0 (the DMA's tail) and are made
  // +0 on the VPU (x 1 on the real lanes, x -0 on the others, from a mask row) so that, as in the
  // plain layout, every padded product is (-0) x (+0) = -0.
  const bool t_mask = w_transposed && k_tail != 0;
  if (Nw * 4 > 0xFFFF || Kp * 2 > 0xFFFF || M > 0xFFFF)
    throw std::invalid_argument("matmul: M = " + std::to_string(M) + ", K = " + std::to_string(K) +
                                ", N = " + std::to_string(N) +
                                " exceed a DMA command's fields (M <= 65535, K <= 32767 rounded "
                                "up to the lanes, N <= 16383 rounded up to the lanes)");

  // Rows of A per chunk: everything double-buffered must fit the memories. W is either
  // streamed (two panels of R rows of W, reloaded for every chunk) or, when the whole of it
  // fits beside chunks of a useful size, resident (loaded once).
  const uint64_t vmem_rows = vmem_rows_limit ? std::min<uint64_t>(vmem_rows_limit, s.vmem_rows)
                                             : s.vmem_rows;
  auto max_rows = [&](uint64_t w_rows) {
    uint64_t r = std::min<uint64_t>(M, 65535);
    while (r > 0 && !(2 * r * NT <= s.amem_rows &&
                      2 * r * KT + w_rows + 2 * r * NTo + NT + (t_mask ? 1 : 0) <= vmem_rows))
      --r;
    return r;
  };
  uint64_t mt_stream = max_rows(2 * L * QT);
  while (w_transposed && GN > 1 && mt_stream < std::min<uint64_t>(M, 4 * L)) {  // smaller panels
    --GN;
    set_panels();
    mt_stream = max_rows(2 * L * QT);
  }
  const uint64_t mt_res = max_rows(PT * L * QT);  // every panel (plain: KT x L x NT rows)
  const bool w_resident = mt_res > 0 && mt_res >= std::min<uint64_t>(mt_stream, 4 * L);
  const uint64_t mt = w_resident ? mt_res : mt_stream;
  if (mt == 0)
    throw std::invalid_argument("matmul: K = " + std::to_string(K) + ", N = " + std::to_string(N) +
                                " do not fit the on-chip memories of " + port_->info().variant);
  const uint64_t w_bufs = w_resident ? PT : 2;

  // HBM: A, W, C and the bias where the caller put them. The DMA reads A rows as KT whole
  // pieces (the pitch covers them) with the K edge lanes filled with -0, and W rows as NT pieces
  // with the N edge lanes filled; a K edge tile's missing W rows come from a row of +0
  // (zeros_, read with stride 0), so every padded product is (-0) x (+0) = -0 and leaves the
  // running sum unchanged, whatever the padding in HBM holds.
  if (K % L != 0 && !w_transposed && zeros_.bytes() < Nw * 2) {
    zeros_ = alloc_matrix(1, Nw, Dtype::kBf16);
    write_matrix(zeros_, std::vector<bf16_t>(Nw, 0x0000));
  }
  if (t_mask && ones_.cols < L) {
    ones_ = alloc_matrix(1, L, Dtype::kBf16);
    write_matrix(ones_, std::vector<bf16_t>(L, 0x3F80));
  }
  const uint64_t a_addr = am.addr, w_addr = wm.addr, c_addr = cm.addr;
  const uint64_t a_pitch = am.pitch * 2, w_pitch = wm.pitch * 2, c_pitch = cm.pitch * esz;
  MatmulOptions opt;
  opt.relu = ep.relu;
  opt.out_bf16 = out_bf16;
  const bool has_bias = ep.bias != nullptr;

  // VMEM: A[2] (mt x KT rows, row m*KT + kt), W[w_bufs] (L x NT, row r*NT + nt; transposed:
  // GN*L x KT, row r*KT' + kt for row r of the panel's rows of w, KT' = KT, or with a K edge
  // KT - 1 and the edge tiles' GN*L rows after the others), out[2] (mt x NTo, group-major: see
  // below), bias
  // (NT), the transposed K edge mask (1). AMEM: C[2] (NT x mt, row nt*rows + m).
  const uint32_t vA[2] = {0, static_cast<uint32_t>(mt * KT)};
  const uint32_t vW0 = static_cast<uint32_t>(2 * mt * KT);
  // W panel p (of the sequence over chunks) sits in buffer p % w_bufs.
  auto vW = [&](uint64_t p) { return static_cast<uint32_t>(vW0 + (p % w_bufs) * L * QT); };
  const uint32_t vO0 = static_cast<uint32_t>(vW0 + w_bufs * L * QT);
  const uint32_t vO[2] = {vO0, static_cast<uint32_t>(vO0 + mt * NTo)};
  const uint32_t vB = static_cast<uint32_t>(vO0 + 2 * mt * NTo);
  const uint32_t vMask = static_cast<uint32_t>(vB + NT);
  const uint32_t aC[2] = {0, static_cast<uint32_t>(mt * NT)};
  // Output groups of GG N tiles: at least 256 bytes of a C row (whole 64-byte bursts; the HBM
  // takes strided writes of shorter segments at a third of the rate). The out buffer holds group
  // g (tiles g0 = g*GG .. g0+gs-1) of a chunk of `rows` rows at g0*rows + m*gs + (nt - g0), so
  // each group leaves in its own DMA (rows segments of gs*L elements) once its epilogue is done.
  const uint64_t GG = std::min<uint64_t>(NTo, std::max<uint64_t>(1, 256 / (L * esz)));
  auto group_size = [&](uint64_t g) { return std::min<uint64_t>(GG, NTo - g * GG); };

  // Cycles the MXU spends per weight tile of a MATMUL of `rows` rows (docs/mxu.md): a row per
  // cycle; a weight bank is busy for rows + R + C cycles and there are wbanks of them; the loader
  // takes R / wrows cycles per tile plus one to take the next LOADW.
  // A transposed tile takes the loader twice as long (the fill of its staging register first).
  const uint64_t WB = std::max(2u, s.wbanks), WR = std::max(1u, s.wrows);
  const uint64_t load_cycles = (w_transposed ? 2 : 1) * L / WR;
  auto tile_cycles = [&](uint64_t rows) {
    return std::max({rows, ceil_div(rows + 2 * L, WB), load_cycles + 1});
  };

  // Chunks: a short first one (2L rows, when chunks are larger) so the MXU starts after a small
  // A DMA, then balanced ones (no short last chunk: a MATMUL of fewer rows than the banks hide,
  // (R + C) / (wbanks - 1), waits for its weights): as few as fit when W is streamed (it is
  // reloaded per chunk), else of about 2L rows, so the last chunk's epilogue and DMA out are
  // short.
  const uint64_t first = (mt >= 3 * L && M >= 4 * L) ? 2 * L : 0;
  const uint64_t rest_chunks =
      ceil_div(M - first, w_resident ? std::min<uint64_t>(mt, 2 * L) : mt);
  std::vector<uint64_t> c_rows;
  if (first > 0) c_rows.push_back(first);
  for (uint64_t c = 0; c < rest_chunks; ++c)
    c_rows.push_back((M - first) / rest_chunks + (c < (M - first) % rest_chunks ? 1 : 0));
  const uint64_t nchunks = c_rows.size();
  std::vector<uint64_t> c_m0(nchunks, 0);
  for (uint64_t c = 1; c < nchunks; ++c) c_m0[c] = c_m0[c - 1] + c_rows[c - 1];

  // ---- The schedule ----
  // Issue is in order and a command that cannot issue holds every command behind it, so the
  // order decides the overlap. A cost model (a MATMUL streams a row per cycle, tile_cycles above
  // cycles per tile; a DMA or VPU op moves a memory row per cycle, plus a latency) places each
  // command where its unit is free and its inputs are done, so the MXU never waits behind it:
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
  struct Item {
    ChipCmd cmd;
    uint64_t cost;   // cycles its unit is busy (before the latency)
    uint64_t chunk;  // chunk it belongs to
    uint64_t ready;  // model time its inputs are done
    int64_t group;   // a VPU op that completes an output group: the group, else -1
    enum Kind { kOther, kA, kW } kind = kOther;  // A(chunk); W panel (chunk = the panel)
  };
  constexpr uint64_t kDmaLat = 32, kVpuLat = 16, kNever = ~uint64_t{0} / 2;
  const uint64_t kPipe = 2 * L + 8;
  std::deque<Item> vpu_q, a_q, out_q;
  std::vector<ChipCmd> prog;
  uint64_t t = 0, mxu_free = 0, dma_free = 0, vpu_free = 0;
  std::vector<uint64_t> a_done(c_rows.size(), 0), w_done;  // model times A(c), panel p land
  auto emit = [&](const Item& it, uint64_t* unit_free, uint64_t lat) {
    t = std::max({t, *unit_free, it.ready});
    *unit_free = t + it.cost + lat;
    prog.push_back(it.cmd);
    if (it.kind == Item::kW) {
      if (w_done.size() <= it.chunk) w_done.resize(it.chunk + 1, 0);
      w_done[it.chunk] = *unit_free;
    }
    if (it.kind == Item::kA) a_done[it.chunk] = std::max(a_done[it.chunk], *unit_free);
    return *unit_free;
  };
  auto out_pieces = [&](uint64_t c, uint64_t g, uint64_t ready, uint64_t target) {
    const uint64_t rows = c_rows[c], b = c % 2, g0 = g * GG, gs = group_size(g);
    const uint64_t seg = std::max<uint64_t>(1, target / gs);
    for (uint64_t r0 = 0; r0 < rows; r0 += seg) {
      const uint64_t n = std::min(seg, rows - r0);
      out_q.push_back({cmd_dma(DmaDir::kVmemToHbm, opt.out_bf16,
                               static_cast<uint32_t>(vO[b] + g0 * rows + r0 * gs),
                               static_cast<uint32_t>(n), static_cast<uint32_t>(gs * L * esz),
                               static_cast<uint32_t>(c_addr + (c_m0[c] + r0) * c_pitch +
                                                     g0 * L * esz),
                               static_cast<uint32_t>(c_pitch)),
                       n * gs, c, ready, -1});
    }
  };
  // Piece size: half the room a panel of MATMULs leaves beside its W panel DMA.
  auto piece_target = [&](uint64_t rows) {
    const uint64_t step = QT * tile_cycles(rows), wcost = L * QT + kDmaLat;
    return std::max<uint64_t>(4 * L, step > wcost + 2 * kDmaLat ? (step - wcost) / 2 - kDmaLat
                                                                : 4 * L);
  };
  auto emit_vpu = [&](const Item& it) {
    const uint64_t done = emit(it, &vpu_free, kVpuLat);
    if (it.group >= 0)
      out_pieces(it.chunk, static_cast<uint64_t>(it.group), done, piece_target(c_rows[it.chunk]));
  };
  // Emits every queued epilogue and DMA-out item of a chunk <= last_epi and every A item of a
  // chunk <= last_a (-1: none), earliest issue first.
  auto drain = [&](int64_t last_epi, int64_t last_a) {
    while (true) {
      struct Cand { std::deque<Item>* q; uint64_t* unit; };
      Cand best{nullptr, nullptr};
      uint64_t best_t = kNever;
      for (Cand c : {Cand{&vpu_q, &vpu_free}, Cand{&a_q, &dma_free}, Cand{&out_q, &dma_free}}) {
        const int64_t last = c.q == &a_q ? last_a : last_epi;
        if (c.q->empty() || static_cast<int64_t>(c.q->front().chunk) > last) continue;
        const uint64_t at = std::max({t, *c.unit, c.q->front().ready});
        if (at < best_t) best_t = at, best = c;
      }
      if (best.q == nullptr) break;
      const Item it = best.q->front();
      best.q->pop_front();
      if (best.q == &vpu_q) emit_vpu(it);
      else emit(it, &dma_free, kDmaLat);
    }
  };
  // The W panel DMA waiting for the engine (due before the next panel's first LOADW).
  bool w_pend = false;
  std::vector<Item> w_items;
  auto w_try = [&](bool force) {
    if (w_pend && (force || dma_free <= t)) {
      for (const Item& it : w_items) emit(it, &dma_free, kDmaLat);
      w_pend = false;
    }
  };
  // One gap between MATMULs: at most one VPU op and one DMA, each only if it issues at once. A
  // pending W panel goes first; another DMA only if the next W panel (due at w2_due) still
  // fits after it.
  auto fill = [&](uint64_t w2_due) {
    if (!vpu_q.empty() && vpu_q.front().ready <= t && vpu_free <= t) {
      const Item it = vpu_q.front();
      vpu_q.pop_front();
      emit_vpu(it);
    }
    if (w_pend) return w_try(false);
    for (std::deque<Item>* q : {&a_q, &out_q}) {
      if (q->empty()) continue;
      const Item& it = q->front();
      const uint64_t end = t + it.cost + kDmaLat;
      if (it.ready <= t && dma_free <= t &&
          (w2_due == kNever || end + L * QT + kDmaLat <= w2_due)) {
        emit(it, &dma_free, kDmaLat);
        q->pop_front();
        break;
      }
    }
  };
  // The epilogue of N tile nt of chunk c: VPU ops from C into the out buffer.
  auto epilogue = [&](uint64_t c, uint64_t nt, uint64_t ready) {
    const uint64_t rows = c_rows[c], b = c % 2;
    const uint32_t c0 = static_cast<uint32_t>(aC[b] + nt * rows);
    std::vector<VpuCmdArgs> st;
    if (has_bias) {
      VpuCmdArgs v;
      v.op = static_cast<unsigned>(VpuOp::kAdd);
      v.x_mem = Mem::kAmem;
      v.x_row = c0;
      v.y_mem = Mem::kVmem;
      v.y_row = static_cast<uint32_t>(vB + nt);
      v.y_bcast = true;
      st.push_back(v);
    }
    if (opt.relu) {
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
    const uint64_t g = nt / GG, g0 = g * GG, gs = group_size(g);
    const bool closes = nt + 1 == NT || (nt + 1) % GG == 0;
    for (std::size_t i = 0; i < st.size(); ++i) {
      VpuCmdArgs v = st[i];
      v.rows = static_cast<uint32_t>(rows);
      const bool last = i + 1 == st.size();
      if (last) {  // into the out buffer, group-major
        v.dst_mem = Mem::kVmem;
        v.dst_row = static_cast<uint32_t>(vO[b] + g0 * rows + nt - g0);
        v.dst_stride = static_cast<uint32_t>(gs);
        v.dst_bf16 = opt.out_bf16;
      } else {
        v.dst_mem = Mem::kAmem;
        v.dst_row = c0;
      }
      vpu_q.push_back({cmd_vpu(v), rows, c, ready,
                       last && closes ? static_cast<int64_t>(g) : int64_t{-1}});
    }
  };
  auto a_pieces = [&](uint64_t c, uint64_t ready, bool whole) {
    const uint64_t rows = c_rows[c], b = c % 2;
    const uint64_t seg = whole ? rows : std::max<uint64_t>(1, piece_target(rows) / KT);
    for (uint64_t r0 = 0; r0 < rows; r0 += seg) {
      const uint64_t n = std::min(seg, rows - r0);
      a_q.push_back({cmd_dma(DmaDir::kHbmToVmem, true, static_cast<uint32_t>(vA[b] + r0 * KT),
                             static_cast<uint32_t>(n), static_cast<uint32_t>(Kp * 2),
                             static_cast<uint32_t>(a_addr + (c_m0[c] + r0) * a_pitch),
                             static_cast<uint32_t>(a_pitch), k_tail),
                     n * KT, c, ready, -1, Item::kA});
    }
  };
  // Panel p of the global sequence (K tile p % KT): its rows of W, and for a K edge tile the
  // missing rows as +0 from zeros_ (stride 0). Transposed (N tile p % NT): its rows of w in
  // whole pieces, the K edge tile's (lanes beyond K as -0) apart; rows beyond N are not loaded
  // (they meet only C's padding columns).
  const uint64_t KTm = k_tail ? KT - 1 : KT;  // transposed: tiles of a panel row without the edge
  auto w_dma = [&](uint64_t p) {
    if (w_transposed) {
      const uint64_t n0 = (p % PT) * GN * L, real = std::min<uint64_t>(GN * L, N - n0);
      const uint64_t at = w_addr + n0 * w_pitch;
      std::vector<Item> v;
      if (KTm > 0)
        v.push_back(Item{cmd_dma(DmaDir::kHbmToVmem, true, vW(p), static_cast<uint32_t>(real),
                                 static_cast<uint32_t>(KTm * L * 2), static_cast<uint32_t>(at),
                                 static_cast<uint32_t>(w_pitch)),
                         real * KTm, p, 0, -1, Item::kW});
      if (k_tail)
        v.push_back(Item{cmd_dma(DmaDir::kHbmToVmem, true,
                                 static_cast<uint32_t>(vW(p) + GN * L * KTm),
                                 static_cast<uint32_t>(real), static_cast<uint32_t>(L * 2),
                                 static_cast<uint32_t>(at + KTm * L * 2),
                                 static_cast<uint32_t>(w_pitch), k_tail),
                         real, p, 0, -1, Item::kW});
      return v;
    }
    const uint64_t kt = p % KT, real = std::min<uint64_t>(L, K - kt * L);
    std::vector<Item> v{Item{cmd_dma(DmaDir::kHbmToVmem, true, vW(p), static_cast<uint32_t>(real),
                                     static_cast<uint32_t>(Nw * 2),
                                     static_cast<uint32_t>(w_addr + kt * L * w_pitch),
                                     static_cast<uint32_t>(w_pitch), n_tail),
                             real * NT, p, 0, -1, Item::kW}};
    if (real < L)
      v.push_back(Item{cmd_dma(DmaDir::kHbmToVmem, true, static_cast<uint32_t>(vW(p) + real * NT),
                               static_cast<uint32_t>(L - real), static_cast<uint32_t>(Nw * 2),
                               static_cast<uint32_t>(zeros_.addr), 0),
                       (L - real) * NT, p, 0, -1, Item::kW});
    return v;
  };

  if (has_bias)
    emit({cmd_dma(DmaDir::kHbmToVmem, false, vB, 1, static_cast<uint32_t>(Nw * 4),
                  static_cast<uint32_t>(ep.bias->addr), 0, n_tail),
          NT, 0, 0, -1},
         &dma_free, kDmaLat);
  if (t_mask)  // 1 on the K edge tile's real lanes, -0 on the others
    emit({cmd_dma(DmaDir::kHbmToVmem, true, vMask, 1, static_cast<uint32_t>(L * 2),
                  static_cast<uint32_t>(ones_.addr), 0, k_tail),
          1, 0, 0, -1},
         &dma_free, kDmaLat);
  for (const Item& it : w_dma(0)) emit(it, &dma_free, kDmaLat);
  a_pieces(0, 0, true);
  // The K edge tile of a transposed W panel, once landed: its pad lanes from -0 to +0 (the mask).
  std::vector<bool> masked(w_bufs, false);
  auto mask_panel = [&](uint64_t p) {
    const uint64_t buf = p % w_bufs;
    if (!t_mask || masked[buf]) return;
    if (w_resident) masked[buf] = true;  // loaded once
    VpuCmdArgs v;
    v.op = static_cast<unsigned>(VpuOp::kMul);
    v.src_bf16 = 3;  // x and y
    v.dst_bf16 = true;
    v.x_mem = v.y_mem = v.dst_mem = Mem::kVmem;
    v.x_row = v.dst_row = static_cast<uint32_t>(vW(p) + GN * L * KTm);
    v.y_row = vMask;
    v.y_bcast = true;
    v.rows = static_cast<uint32_t>(GN * L);
    emit({cmd_vpu(v), GN * L, 0, w_done.size() > p ? w_done[p] : 0, -1}, &vpu_free, kVpuLat);
  };
  const uint64_t panels = w_resident ? PT : nchunks * PT;  // W panel DMAs
  uint64_t prev_done = 0;  // model time chunk c-1's MATMULs are done
  for (uint64_t c = 0; c < nchunks; ++c) {
    const uint64_t rows = c_rows[c], b = c % 2, rows_eff = tile_cycles(rows);
    drain(static_cast<int64_t>(c) - 2, static_cast<int64_t>(c));
    if (c + 1 < nchunks) a_pieces(c + 1, prev_done, false);
    uint64_t done = 0;
    for (uint64_t pi = 0; pi < PT; ++pi) {
      const uint64_t p = c * PT + pi;
      w_try(true);  // panel p, if still pending: its LOADWs come next
      if (p + 1 < panels) {
        w_items = w_dma(p + 1);
        w_pend = true;
        w_try(false);
      }
      for (uint64_t qi = 0; qi < QT; ++qi) {
        const uint64_t kt = w_transposed ? qi / GN : pi, j = qi % GN;
        const uint64_t nt = w_transposed ? pi * GN + j : qi;
        if (nt >= NT) continue;  // the last group of a transposed W's N tiles is short
        // Each LOADW right before its MATMUL, not wbanks - 1 ahead: a LOADW waiting for a bank
        // holds the one loader and, issue being in order, every command behind it, so one further
        // ahead stalls the MATMUL that would free the bank (bench_chip skinny, 16x16: 0.727 of
        // the roofline one ahead, 0.698 two, 0.553 three). The banks drain while the loader fills.
        if (!w_transposed)
          prog.push_back(cmd_loadw(static_cast<uint32_t>(vW(p) + nt), static_cast<uint32_t>(NT)));
        else if (kt < KTm)
          prog.push_back(cmd_loadw(static_cast<uint32_t>(vW(p) + j * L * KTm + kt),
                                   static_cast<uint32_t>(KTm), true));
        else {  // the K edge tiles: masked first, as late as possible (the DMA has landed)
          if (j == 0) mask_panel(w_resident ? pi : p);
          prog.push_back(cmd_loadw(static_cast<uint32_t>(vW(p) + GN * L * KTm + j * L), 1, true));
        }
        const uint64_t wp = w_resident ? pi : p;
        const uint64_t w_at = (wp < w_done.size() ? w_done[wp] : 0) + L / WR + 2;
        t = std::max({t, mxu_free, a_done[c], w_at});
        mxu_free = t + rows_eff;
        done = t + rows + kPipe;
        prog.push_back(cmd_matmul(static_cast<uint32_t>(vA[b] + kt),
                                  static_cast<uint32_t>(rows),
                                  static_cast<uint32_t>(aC[b] + nt * rows), kt > 0,
                                  static_cast<uint32_t>(KT)));
        if (kt + 1 == KT) epilogue(c, nt, done);
        // Panel p + 2's DMA is due when its first LOADW issues, with the last MATMUL of step
        // p + 1.
        fill(p + 2 < panels ? t + (QT - 1 - qi) * rows_eff + QT * rows_eff : kNever);
      }
    }
    prev_done = done;
  }
  drain(static_cast<int64_t>(nchunks), static_cast<int64_t>(nchunks));
  prog.push_back(cmd_halt());

  MatmulRun res;
  res.commands = prog.size();
  res.m_chunk = mt;
  res.compute_cycles = M * KT * NT;
  res.program = std::move(prog);
  return res;
}

std::vector<ChipCmd> ChipDriver::plan_epilogue(const HbmMatrix& y, const HbmMatrix* bias,
                                               bool relu) const {
  const ChipShape& s = shape();
  check_matrix(y, "the epilogue's Y", Dtype::kF32, s);
  if (bias) {
    check_matrix(*bias, "the epilogue's bias", Dtype::kF32, s);
    if (bias->rows != 1 || bias->cols != y.cols)
      throw std::invalid_argument("epilogue: the bias must be 1 x " + std::to_string(y.cols));
  }
  std::vector<ChipCmd> prog;
  if (!bias && !relu) return prog;
  const uint64_t L = s.cols, row_bytes = 4 * L;
  const uint64_t G = std::max<uint64_t>(1, kBurst / row_bytes);  // memory rows per HBM burst
  const uint64_t blocks = ((y.cols + L - 1) / L + G - 1) / G * G;  // column blocks of L lanes
  const uint64_t vmem = vmem_rows_limit ? std::min<uint64_t>(vmem_rows_limit, s.vmem_rows)
                                        : s.vmem_rows;
  // VMEM: the bias's blocks, then per row chunk one column block in and G blocks out.
  const uint64_t vb = 0, vx = vb + blocks;
  if (vx + 1 + G > vmem) throw std::invalid_argument("epilogue: too few VMEM rows");
  const uint64_t chunk = std::min<uint64_t>(y.rows, (vmem - vx) / (1 + G));
  const uint64_t vo = vx + chunk;
  for (uint64_t b0 = 0; bias && b0 < blocks; b0 += 512)  // a DMA row is at most 64 KiB
    prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, static_cast<uint32_t>(vb + b0), 1,
                           static_cast<uint32_t>(std::min<uint64_t>(512, blocks - b0) * row_bytes),
                           static_cast<uint32_t>(bias->addr + b0 * row_bytes), 0));
  const uint64_t pitch_bytes = y.pitch * 4;
  for (uint64_t r0 = 0; r0 < y.rows; r0 += chunk) {
    const uint64_t rows = std::min<uint64_t>(chunk, y.rows - r0);
    const uint64_t base = y.addr + r0 * pitch_bytes;
    for (uint64_t j = 0; j < blocks; ++j) {
      // Column block j of these rows, one memory row each, into VMEM rows [vx, vx + rows).
      prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, static_cast<uint32_t>(vx),
                             static_cast<uint32_t>(rows), static_cast<uint32_t>(row_bytes),
                             static_cast<uint32_t>(base + j * row_bytes),
                             static_cast<uint32_t>(pitch_bytes)));
      std::vector<VpuCmdArgs> ops;
      if (bias) {
        VpuCmdArgs v;
        v.op = static_cast<unsigned>(VpuOp::kAdd);
        v.x_mem = v.y_mem = Mem::kVmem;
        v.x_row = static_cast<uint32_t>(vx);
        v.y_row = static_cast<uint32_t>(vb + j);
        v.y_bcast = true;
        ops.push_back(v);
      }
      if (relu) {
        VpuCmdArgs v;
        v.op = static_cast<unsigned>(VpuOp::kRelu);
        v.x_mem = v.y_mem = Mem::kVmem;
        v.x_row = v.y_row = static_cast<uint32_t>(vx);
        ops.push_back(v);
      }
      for (std::size_t i = 0; i < ops.size(); ++i) {
        VpuCmdArgs v = ops[i];
        v.rows = static_cast<uint32_t>(rows);
        v.dst_mem = Mem::kVmem;
        if (i + 1 < ops.size()) {
          v.dst_row = static_cast<uint32_t>(vx);  // in place
        } else {  // rows of G blocks side by side: whole bursts for the way out
          v.dst_row = static_cast<uint32_t>(vo + j % G);
          v.dst_stride = static_cast<uint32_t>(G);
        }
        prog.push_back(cmd_vpu(v));
      }
      if (j % G == G - 1)
        prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, static_cast<uint32_t>(vo),
                               static_cast<uint32_t>(rows), static_cast<uint32_t>(G * row_bytes),
                               static_cast<uint32_t>(base + (j + 1 - G) * row_bytes),
                               static_cast<uint32_t>(pitch_bytes)));
    }
  }
  return prog;
}

HbmMatrix hbm_view(const HbmMatrix& m, std::size_t r0, std::size_t rows, std::size_t c0,
                   std::size_t cols) {
  if (r0 + rows > m.rows || c0 + cols > m.cols)
    throw std::logic_error("hbm_view: rows or columns outside the matrix");
  HbmMatrix v = m;
  v.addr = m.addr + (static_cast<uint64_t>(r0) * m.pitch + c0) * m.esize();
  if (v.addr % kBurst != 0) throw std::logic_error("hbm_view: not 64-byte aligned");
  v.rows = rows;
  v.cols = cols;
  return v;
}

std::vector<ChipCmd> ChipDriver::plan_transpose(const HbmMatrix& dst, const HbmMatrix& src) {
  const ChipShape& s = shape();
  check_matrix(src, "the transpose's src", Dtype::kBf16, s);
  check_matrix(dst, "the transpose's dst", Dtype::kBf16, s);
  if (dst.rows != src.cols || dst.cols != src.rows)
    throw std::invalid_argument("transpose: dst must be " + std::to_string(src.cols) + " x " +
                                std::to_string(src.rows) + ", not " + std::to_string(dst.rows) +
                                " x " + std::to_string(dst.cols));
  if (overlap(dst, src, s)) throw std::invalid_argument("transpose: dst overlaps src in HBM");
  const uint64_t L = s.cols, R = src.rows, C = src.cols;  // square array: rows == cols == lanes
  const uint64_t RT = ceil_div(R, L), CT = ceil_div(C, L);
  const uint64_t sp = src.pitch * 2, dp = dst.pitch * 2;
  // A band: GO row tiles of src (GO * L rows), written out as segments of GO * L bf16 of a dst
  // row: whole 64-byte bursts (GOmin tiles at least), 256 bytes where there are enough rows.
  const uint64_t GOmin = std::max<uint64_t>(1, kBurst / (2 * L));
  const uint64_t GO = std::min(std::max(GOmin, 256 / (2 * L)), round_up(RT, GOmin));
  const uint64_t vmem = vmem_rows_limit ? std::min<uint64_t>(vmem_rows_limit, s.vmem_rows)
                                        : s.vmem_rows;
  // VMEM: the identity (L rows), out[2] (GO * L rows each: dst row m of a step at m * gb + g),
  // in[2] (a band's CG column tiles: src row i of row tile g, column tile c at (g*L + i)*cg + c).
  // AMEM: results[2] (GO * L rows: row tile g's L result rows at g * L).
  const uint64_t vI = 0, vO0 = L, vIn0 = vO0 + 2 * GO * L;
  const uint64_t CG = std::min<uint64_t>(
      {CT, vmem > vIn0 ? (vmem - vIn0) / (2 * GO * L) : 0, 0xFFFF / (2 * L)});
  if (CG == 0 || 2 * GO * L > s.amem_rows)
    throw std::invalid_argument("transpose: too few VMEM rows");
  if (R > 0xFFFF || C > 0xFFFF)
    throw std::invalid_argument("transpose: R and C must be <= 65535");
  const uint64_t vO[2] = {vO0, vO0 + GO * L}, vIn[2] = {vIn0, vIn0 + GO * L * CG};
  const uint64_t aC[2] = {0, GO * L};
  if (ident_.rows != L) {
    ident_ = alloc_matrix(L, L, Dtype::kBf16);
    std::vector<bf16_t> eye(L * L, 0x0000);
    for (uint64_t i = 0; i < L; ++i) eye[i * L + i] = 0x3F80;
    write_matrix(ident_, eye);
  }

  struct TrUnit { uint64_t b, cg; };  // band b, column group cg
  std::vector<TrUnit> units;
  const uint64_t bands = ceil_div(RT, GO), groups = ceil_div(CT, CG);
  for (uint64_t b = 0; b < bands; ++b)
    for (uint64_t cg = 0; cg < groups; ++cg) units.push_back({b, cg});
  auto row_tiles = [&](const TrUnit& u) { return std::min(GO, RT - u.b * GO); };
  auto col_tiles = [&](const TrUnit& u) { return std::min(CG, CT - u.cg * CG); };
  // Row tile g of unit u into in[u % 2]: its rows, the group's column tiles (the last group's
  // lanes beyond C as -0: finite, so they change no result).
  auto dma_in = [&](uint64_t ui, uint64_t g, std::vector<ChipCmd>* prog) {
    const TrUnit& u = units[ui];
    const uint64_t rt = u.b * GO + g, cgn = col_tiles(u);
    const bool last = (u.cg + 1) * CG >= CT;
    prog->push_back(cmd_dma(DmaDir::kHbmToVmem, true,
                            static_cast<uint32_t>(vIn[ui % 2] + g * L * cgn),
                            static_cast<uint32_t>(std::min(L, R - rt * L)),
                            static_cast<uint32_t>(cgn * L * 2),
                            static_cast<uint32_t>(src.addr + rt * L * sp + u.cg * CG * L * 2),
                            static_cast<uint32_t>(sp), last ? static_cast<uint32_t>(C % L) : 0));
  };

  std::vector<ChipCmd> prog;
  prog.push_back(cmd_dma(DmaDir::kHbmToVmem, true, static_cast<uint32_t>(vI),
                         static_cast<uint32_t>(L), static_cast<uint32_t>(L * 2),
                         static_cast<uint32_t>(ident_.addr),
                         static_cast<uint32_t>(ident_.pitch * 2)));
  for (uint64_t g = 0; g < row_tiles(units[0]); ++g) dma_in(0, g, &prog);

  // A step: one column tile ct of a unit, its row tiles through the MXU into results[s % 2];
  // then (after the next step's MATMULs, so that the MXU does not wait for them) the VPU rounds
  // them into out[s % 2] and the DMA writes dst rows ct*L .. at the band's columns.
  struct TrStep { uint64_t ui, ct; };
  auto finish = [&](const TrStep& st, uint64_t si) {
    const TrUnit& u = units[st.ui];
    const uint64_t rb = row_tiles(u), gb = std::min(GO, round_up(RT - u.b * GO, GOmin));
    const uint64_t cr = std::min(L, C - st.ct * L);
    for (uint64_t g = 0; g < rb; ++g) {
      VpuCmdArgs v;
      v.op = static_cast<unsigned>(VpuOp::kCvtF32Bf16);
      v.x_mem = v.y_mem = Mem::kAmem;
      v.x_row = v.y_row = static_cast<uint32_t>(aC[si % 2] + g * L);
      v.dst_mem = Mem::kVmem;
      v.dst_bf16 = true;
      v.dst_row = static_cast<uint32_t>(vO[si % 2] + g);
      v.dst_stride = static_cast<uint32_t>(gb);
      v.rows = static_cast<uint32_t>(cr);
      prog.push_back(cmd_vpu(v));
    }
    // gb - rb tiles beyond R (stale rows) land in dst's padding columns.
    prog.push_back(cmd_dma(DmaDir::kVmemToHbm, true, static_cast<uint32_t>(vO[si % 2]),
                           static_cast<uint32_t>(cr), static_cast<uint32_t>(gb * L * 2),
                           static_cast<uint32_t>(dst.addr + st.ct * L * dp + u.b * GO * L * 2),
                           static_cast<uint32_t>(dp)));
  };
  uint64_t si = 0;
  TrStep prev{0, 0};
  for (uint64_t ui = 0; ui < units.size(); ++ui) {
    const TrUnit& u = units[ui];
    const uint64_t rb = row_tiles(u), cgn = col_tiles(u);
    const uint64_t next_rb = ui + 1 < units.size() ? row_tiles(units[ui + 1]) : 0;
    for (uint64_t c = 0; c < cgn; ++c, ++si) {
      const uint64_t ct = u.cg * CG + c, cr = std::min(L, C - ct * L);
      for (uint64_t g = 0; g < rb; ++g) {
        prog.push_back(cmd_loadw(static_cast<uint32_t>(vIn[ui % 2] + g * L * cgn + c),
                                 static_cast<uint32_t>(cgn), true));
        prog.push_back(cmd_matmul(static_cast<uint32_t>(vI), static_cast<uint32_t>(cr),
                                  static_cast<uint32_t>(aC[si % 2] + g * L), false));
      }
      // The next unit's input, spread over this unit's steps (its buffer's last reader, the
      // previous unit's last LOADW, is done by now).
      for (uint64_t g = c * next_rb / cgn; g < (c + 1) * next_rb / cgn; ++g)
        dma_in(ui + 1, g, &prog);
      if (si > 0) finish(prev, si - 1);
      prev = {ui, ct};
    }
  }
  finish(prev, si - 1);
  return prog;
}

std::vector<uint32_t> golden_chip_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                         std::size_t m, std::size_t k, std::size_t n,
                                         const MatmulOptions& opt) {
  return golden_matmul_epilogue(golden_matmul(a, w, m, k, n), m, n, opt.bias, opt.relu,
                                opt.out_bf16);
}

}  // namespace tpu
