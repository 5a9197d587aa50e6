#include "chip_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "matmul_plan.h"
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

namespace {
// The operands of a matmul: types, shapes, alignment, footprints and overlaps
// (std::invalid_argument naming the operand and the rule). W is K x N, or N x K when transposed.
void check_matmul_operands(const HbmMatrix& cm, const HbmMatrix& am, const HbmMatrix& wm,
                           const MatmulEpilogue& ep, bool w_transposed, const ChipShape& s) {
  check_matrix(am, "A", Dtype::kBf16, s);
  check_matrix(wm, w_transposed ? "W (transposed)" : "W", Dtype::kBf16, s);
  check_matrix(cm, "C", cm.dtype, s);
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
}
}  // namespace

// The tiler, the layout and the emitter of matmul_plan.h. The DMA reads A rows as KT whole
// pieces (the pitch covers them) with the K edge lanes filled with -0, and W rows as NT pieces
// with the N edge lanes filled; a K edge tile's missing W rows come from a row of +0 (zeros_,
// read with stride 0), so every padded product is (-0) x (+0) = -0 and leaves the running sum
// unchanged, whatever the padding in HBM holds.
MatmulRun ChipDriver::plan_matmul(const HbmMatrix& cm, const HbmMatrix& am, const HbmMatrix& wm,
                                  const MatmulEpilogue& ep, bool w_transposed) {
  const ChipShape& s = shape();
  check_matmul_operands(cm, am, wm, ep, w_transposed, s);
  MatmulProblem p;
  p.m = am.rows;
  p.k = am.cols;
  p.n = cm.cols;
  p.out_bf16 = cm.dtype == Dtype::kBf16;
  p.w_transposed = w_transposed;
  p.vmem_rows = vmem_rows_limit ? std::min<uint64_t>(vmem_rows_limit, s.vmem_rows) : s.vmem_rows;
  // A channel moves a 64-byte burst per tCCD_S at most (two cycles: its data bus).
  p.hbm_bytes_per_cycle =
      s.hbm_channels * 64.0 / std::max<uint32_t>(2, port_->info().hbm.timing.ccd_s);
  const MatmulTiling t = tile_matmul(p, s);
  if (t.mt == 0)
    throw std::invalid_argument(
        "matmul: K = " + std::to_string(p.k) + ", N = " + std::to_string(p.n) +
        " do not fit the on-chip memories of " + port_->info().variant + " (" +
        std::to_string(p.vmem_rows) + " VMEM rows, " + std::to_string(s.amem_rows) + " AMEM rows)");
  const uint64_t Nw = t.nt * t.lanes;
  if (t.k_tail != 0 && !w_transposed && zeros_.bytes() < Nw * 2) {
    zeros_ = alloc_matrix(1, Nw, Dtype::kBf16);
    write_matrix(zeros_, std::vector<bf16_t>(Nw, 0x0000));
  }
  if (t.t_mask && ones_.cols < t.lanes) {
    ones_ = alloc_matrix(1, t.lanes, Dtype::kBf16);
    write_matrix(ones_, std::vector<bf16_t>(t.lanes, 0x3F80));
  }
  MatmulOperands o;
  o.a_addr = am.addr;
  o.a_pitch = am.pitch * 2;
  o.w_addr = wm.addr;
  o.w_pitch = wm.pitch * 2;
  o.c_addr = cm.addr;
  o.c_pitch = cm.pitch * t.esize();
  o.has_bias = ep.bias != nullptr;
  o.bias_addr = ep.bias ? ep.bias->addr : 0;
  o.relu = ep.relu;
  o.zeros_addr = zeros_.addr;
  o.ones_addr = ones_.addr;

  MatmulRun res;
  res.program = emit_matmul(t, layout_matmul(t), o);
  res.commands = res.program.size();
  res.m_chunk = t.mt;
  res.compute_cycles = p.m * t.kt * t.nt;
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

  // Band b, column group cg: its row tiles rb and column tiles cgn.
  struct TrUnit {
    uint64_t b, cg, rb, cgn;
  };
  std::vector<TrUnit> units;
  const uint64_t bands = ceil_div(RT, GO), groups = ceil_div(CT, CG);
  for (uint64_t b = 0; b < bands; ++b)
    for (uint64_t cg = 0; cg < groups; ++cg)
      units.push_back({b, cg, std::min(GO, RT - b * GO), std::min(CG, CT - cg * CG)});
  // Row tile g of unit u into in[u % 2]: its rows, the group's column tiles (the last group's
  // lanes beyond C as -0: finite, so they change no result).
  auto dma_in = [&](uint64_t ui, uint64_t g, std::vector<ChipCmd>* prog) {
    const TrUnit& u = units[ui];
    const uint64_t rt = u.b * GO + g, cgn = u.cgn;
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
  for (uint64_t g = 0; g < units[0].rb; ++g) dma_in(0, g, &prog);

  // A step: one column tile ct of a unit, its row tiles through the MXU into results[s % 2];
  // then (after the next step's MATMULs, so that the MXU does not wait for them) the VPU rounds
  // them into out[s % 2] and the DMA writes dst rows ct*L .. at the band's columns.
  struct TrStep { uint64_t ui, ct; };
  auto finish = [&](const TrStep& st, uint64_t si) {
    const TrUnit& u = units[st.ui];
    const uint64_t rb = u.rb, gb = std::min(GO, round_up(RT - u.b * GO, GOmin));
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
    const uint64_t rb = u.rb, cgn = u.cgn;
    const uint64_t next_rb = ui + 1 < units.size() ? units[ui + 1].rb : 0;
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
