#include "chip_driver.h"

#include <algorithm>
#include <cstring>

#include "tpu/matmul.h"
#include "tpu/vector.h"

namespace tpu {

const char* chip_err_name(unsigned code) {
  switch (code) {
    case 0: return "none";
    case 1: return "illegal_opcode";
    case 2: return "unimplemented_opcode";
    case 3: return "bad_field";
    case 4: return "vmem_out_of_range";
    case 5: return "amem_out_of_range";
    case 6: return "hbm_out_of_range";
    case 7: return "misaligned";
    case 8: return "matmul_without_weights";
    case 9: return "weights_overflow";
    default: return "unknown";
  }
}

namespace {
constexpr uint64_t kBurst = 64;
constexpr unsigned kHostTags = 64;
uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
}  // namespace

ChipDriver::ChipDriver(const std::string& variant, const HbmConfig& hbm)
    : hbm_(hbm), dut_(make_chip(variant)) {
  dut_->configure(hbm_);
}

uint64_t ChipDriver::alloc(uint64_t bytes) {
  const uint64_t at = next_free_;
  const uint64_t end = at + round_up(std::max<uint64_t>(bytes, 1), kBurst);
  if (end > shape().hbm_bytes)
    throw std::runtime_error("HBM allocation of " + std::to_string(bytes) + " bytes does not fit (" +
                             std::to_string(shape().hbm_bytes - at) + " bytes free)");
  next_free_ = end;
  return at;
}

void ChipDriver::host_bursts(const std::vector<uint64_t>& addrs, std::vector<uint8_t>* data,
                             bool write) {
  ChipDut& d = *dut_;
  std::vector<long> tag_of(kHostTags, -1);
  std::size_t next = 0, done = 0;
  uint8_t buf[64];
  uint64_t idle = 0;
  while (done < addrs.size()) {
    const unsigned tag = static_cast<unsigned>(next % kHostTags);
    const bool valid = next < addrs.size() && tag_of[tag] < 0;
    d.set_hm_req(valid, write, static_cast<uint32_t>(valid ? addrs[next] : 0), tag,
                 valid && write ? data->data() + next * kBurst : nullptr);
    d.set_hm_rsp_ready(true);
    d.set_cmd(false, nullptr);
    d.eval();
    const bool fire = valid && d.hm_req_ready();
    if (d.hm_rsp_valid()) {
      const unsigned t = d.hm_rsp_tag() % kHostTags;
      if (tag_of[t] < 0) throw ChipRtlError("host port: response with an unknown tag");
      if (!write) {
        d.hm_rsp_data(buf);
        std::memcpy(data->data() + static_cast<std::size_t>(tag_of[t]) * kBurst, buf, kBurst);
      }
      tag_of[t] = -1;
      ++done;
      idle = 0;
    }
    if (fire) {
      tag_of[tag] = static_cast<long>(next);
      ++next;
      idle = 0;
    }
    d.tick();
    if (++idle > 100000) throw ChipError("host port: HBM access hung", 0);
  }
  d.set_hm_req(false, false, 0, 0, nullptr);
}

void ChipDriver::write(uint64_t addr, const void* data, std::size_t n) {
  if (n == 0) return;
  if (addr + n > shape().hbm_bytes) throw std::out_of_range("write beyond the HBM capacity");
  const uint64_t lo = addr / kBurst * kBurst, hi = round_up(addr + n, kBurst);
  std::vector<uint64_t> addrs;
  for (uint64_t a = lo; a < hi; a += kBurst) addrs.push_back(a);
  std::vector<uint8_t> buf(hi - lo, 0);
  if (lo != addr || hi != addr + n) host_bursts(addrs, &buf, false);  // merge partial bursts
  std::memcpy(buf.data() + (addr - lo), data, n);
  host_bursts(addrs, &buf, true);
}

void ChipDriver::read(uint64_t addr, void* data, std::size_t n) {
  if (n == 0) return;
  if (addr + n > shape().hbm_bytes) throw std::out_of_range("read beyond the HBM capacity");
  const uint64_t lo = addr / kBurst * kBurst, hi = round_up(addr + n, kBurst);
  std::vector<uint64_t> addrs;
  for (uint64_t a = lo; a < hi; a += kBurst) addrs.push_back(a);
  std::vector<uint8_t> buf(hi - lo, 0);
  host_bursts(addrs, &buf, false);
  std::memcpy(data, buf.data() + (addr - lo), n);
}

ChipCounters ChipDriver::counters() {
  ChipCounters c;
  for (unsigned i = 0; i < kNumChipStats; ++i) {
    dut_->set_stat_id(i);
    dut_->eval();
    c.v[i] = dut_->stat();
  }
  return c;
}

void ChipDriver::tick_idle(uint64_t cycles) {
  dut_->set_cmd(false, nullptr);
  dut_->set_hm_req(false, false, 0, 0, nullptr);
  for (uint64_t i = 0; i < cycles; ++i) {
    dut_->eval();
    dut_->tick();
  }
}

ProgramResult ChipDriver::run(const std::vector<ChipCmd>& prog, bool throw_on_error,
                              uint64_t max_cycles) {
  ChipDut& d = *dut_;
  const ChipCounters before = counters();
  ProgramResult r;
  std::size_t i = 0;
  const uint64_t start = d.cycle();
  d.set_hm_req(false, false, 0, 0, nullptr);
  while (true) {
    const bool valid = i < prog.size();
    d.set_cmd(valid, valid ? prog[i].w.data() : nullptr);
    d.eval();
    const bool fire = valid && d.cmd_ready();
    if (!valid && !d.busy()) break;
    d.tick();
    if (fire) ++i;
    if (d.cycle() - start > max_cycles)
      throw ChipError("chip " + d.variant() + ": program of " + std::to_string(prog.size()) +
                          " commands did not finish in " + std::to_string(max_cycles) +
                          " cycles (hung at command " + std::to_string(i) + ")",
                      0);
  }
  d.set_cmd(false, nullptr);
  r.cycles = d.cycle() - start;
  r.delta = counters() - before;
  r.err = d.err();
  r.err_cmd = d.err_cmd();
  if (d.hbm_violations() != 0)
    throw ChipRtlError("chip " + d.variant() + ": the HBM device checker saw " +
                       std::to_string(d.hbm_violations()) + " violations");
  if (r.err != 0 || d.halted()) {
    d.set_clear(true);
    d.eval();
    d.tick();
    d.set_clear(false);
    d.eval();
  }
  if (r.err != 0 && throw_on_error)
    throw ChipError("chip " + d.variant() + ": error register " + std::to_string(r.err) + " (" +
                        chip_err_name(r.err) + ") at command " + std::to_string(r.err_cmd),
                    r.err);
  return r;
}

MatmulRun ChipDriver::matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                             std::size_t M, std::size_t K, std::size_t N,
                             const MatmulOptions& opt) {
  if (M == 0 || K == 0 || N == 0) throw std::invalid_argument("matmul: M, K and N must be >= 1");
  if (a.size() != M * K) throw std::invalid_argument("matmul: A must hold M x K values");
  if (w.size() != K * N) throw std::invalid_argument("matmul: W must hold K x N values");
  if (opt.bias && opt.bias->size() != N)
    throw std::invalid_argument("matmul: the bias must hold N values");
  const ChipShape& s = shape();
  const uint64_t L = s.cols;  // square array: rows == cols == lanes
  const uint64_t KT = ceil_div(K, L), NT = ceil_div(N, L);
  const uint64_t Kp = KT * L, Nw = NT * L;
  const uint64_t esz = opt.out_bf16 ? 2 : 4;
  const uint64_t No = round_up(Nw, kBurst / esz), NTo = No / L;

  // Rows of A per chunk: everything double-buffered must fit the memories.
  uint64_t mt = std::min<uint64_t>(M, 65535);
  auto fits = [&](uint64_t r) {
    return 2 * r * NT <= s.amem_rows &&
           2 * r * KT + 2 * L * NT + 2 * r * NTo + NT <= s.vmem_rows;
  };
  while (mt > 0 && !fits(mt)) --mt;
  if (mt == 0)
    throw std::invalid_argument("matmul: K = " + std::to_string(K) + ", N = " + std::to_string(N) +
                                " do not fit the on-chip memories of " + dut_->variant());

  // HBM layout (row-major, padded): A M x Kp, W Kp x Nw (pad: K rows -0, N columns +0),
  // bias Nw f32, C M x No.
  free_all();
  const uint64_t a_addr = alloc(M * Kp * 2), w_addr = alloc(Kp * Nw * 2);
  const uint64_t b_addr = alloc(Nw * 4), c_addr = alloc(M * No * esz);
  {
    std::vector<bf16_t> ap(M * Kp, 0x0000), wp(Kp * Nw, 0x0000);
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t k = 0; k < K; ++k) ap[i * Kp + k] = a[i * K + k];
    for (std::size_t k = 0; k < Kp; ++k)
      for (std::size_t j = 0; j < Nw; ++j)
        wp[k * Nw + j] = k < K ? (j < N ? w[k * N + j] : bf16_t{0}) : bf16_t{0x8000};
    write(a_addr, ap.data(), ap.size() * 2);
    write(w_addr, wp.data(), wp.size() * 2);
    if (opt.bias) {
      std::vector<float> bp(Nw, 0.0f);
      for (std::size_t j = 0; j < N; ++j) bp[j] = (*opt.bias)[j];
      write(b_addr, bp.data(), bp.size() * 4);
    }
  }

  // VMEM: A[2] (mt x KT rows, row m*KT + kt), W[2] (L x NT, row r*NT + nt), out[2]
  // (mt x NTo, row m*NTo + nt), bias (NT). AMEM: C[2] (NT x mt, row nt*mt + m).
  const uint32_t vA[2] = {0, static_cast<uint32_t>(mt * KT)};
  const uint32_t vW0 = static_cast<uint32_t>(2 * mt * KT);
  const uint32_t vW[2] = {vW0, static_cast<uint32_t>(vW0 + L * NT)};
  const uint32_t vO0 = static_cast<uint32_t>(vW0 + 2 * L * NT);
  const uint32_t vO[2] = {vO0, static_cast<uint32_t>(vO0 + mt * NTo)};
  const uint32_t vB = static_cast<uint32_t>(vO0 + 2 * mt * NTo);
  const uint32_t aC[2] = {0, static_cast<uint32_t>(mt * NT)};

  std::vector<ChipCmd> prog;
  if (opt.bias)
    prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, vB, 1, static_cast<uint32_t>(Nw * 4),
                           static_cast<uint32_t>(b_addr), 0));

  // The epilogue of one chunk, one list of commands per N tile.
  auto epilogue = [&](uint64_t m0, uint64_t rows, int b) {
    (void)m0;
    std::vector<ChipCmd> e;
    for (uint64_t nt = 0; nt < NT; ++nt) {
      const uint32_t c0 = static_cast<uint32_t>(aC[b] + nt * rows);
      std::vector<VpuCmdArgs> st;
      if (opt.bias) {
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
      for (std::size_t i = 0; i < st.size(); ++i) {
        VpuCmdArgs v = st[i];
        v.rows = static_cast<uint32_t>(rows);
        const bool last = i + 1 == st.size();
        if (last) {  // into the out buffer, row-major: row m*NTo + nt
          v.dst_mem = Mem::kVmem;
          v.dst_row = static_cast<uint32_t>(vO[b] + nt);
          v.dst_stride = static_cast<uint32_t>(NTo);
          v.dst_bf16 = opt.out_bf16;
        } else {
          v.dst_mem = Mem::kAmem;
          v.dst_row = c0;
        }
        e.push_back(cmd_vpu(v));
      }
    }
    return e;
  };
  auto out_dma = [&](uint64_t m0, uint64_t rows, int b) {
    return cmd_dma(DmaDir::kVmemToHbm, opt.out_bf16, vO[b], static_cast<uint32_t>(rows),
                   static_cast<uint32_t>(No * esz), static_cast<uint32_t>(c_addr + m0 * No * esz),
                   static_cast<uint32_t>(No * esz));
  };

  std::vector<ChipCmd> pending_epi;
  bool have_prev = false;
  ChipCmd prev_out{};
  uint64_t wpanel = 0;
  int chunk = 0;
  for (uint64_t m0 = 0; m0 < M; m0 += mt, ++chunk) {
    const uint64_t rows = std::min<uint64_t>(mt, M - m0);
    const int b = chunk % 2;
    prog.push_back(cmd_dma(DmaDir::kHbmToVmem, true, vA[b], static_cast<uint32_t>(rows),
                           static_cast<uint32_t>(Kp * 2),
                           static_cast<uint32_t>(a_addr + m0 * Kp * 2),
                           static_cast<uint32_t>(Kp * 2)));
    auto w_dma = [&](uint64_t kt, uint64_t p) {
      return cmd_dma(DmaDir::kHbmToVmem, true, vW[p % 2], static_cast<uint32_t>(L),
                     static_cast<uint32_t>(Nw * 2),
                     static_cast<uint32_t>(w_addr + kt * L * Nw * 2),
                     static_cast<uint32_t>(Nw * 2));
    };
    prog.push_back(w_dma(0, wpanel));
    const uint64_t total_mm = KT * NT;
    uint64_t mm_i = 0;
    std::size_t epi_i = 0;
    for (uint64_t kt = 0; kt < KT; ++kt) {
      const uint64_t p = wpanel + kt;
      if (kt + 1 < KT) prog.push_back(w_dma(kt + 1, p + 1));
      for (uint64_t nt = 0; nt < NT; ++nt, ++mm_i) {
        prog.push_back(cmd_loadw(static_cast<uint32_t>(vW[p % 2] + nt),
                                 static_cast<uint32_t>(NT)));
        prog.push_back(cmd_matmul(static_cast<uint32_t>(vA[b] + kt),
                                  static_cast<uint32_t>(rows),
                                  static_cast<uint32_t>(aC[b] + nt * rows), kt > 0,
                                  static_cast<uint32_t>(KT)));
        // Spread the previous chunk's epilogue over this chunk's matmuls (in-order issue).
        const std::size_t due = pending_epi.size() * (mm_i + 1) / total_mm;
        while (epi_i < due) prog.push_back(pending_epi[epi_i++]);
      }
    }
    while (epi_i < pending_epi.size()) prog.push_back(pending_epi[epi_i++]);
    if (have_prev) prog.push_back(prev_out);
    wpanel += KT;
    pending_epi = epilogue(m0, rows, b);
    prev_out = out_dma(m0, rows, b);
    have_prev = true;
  }
  for (const auto& c : pending_epi) prog.push_back(c);
  prog.push_back(prev_out);
  prog.push_back(cmd_halt());

  MatmulRun res;
  res.commands = prog.size();
  res.m_chunk = mt;
  res.prog = run(prog);
  res.hbm_bytes = res.prog.delta[kStatDmaRdBytes] + res.prog.delta[kStatDmaWrBytes];
  res.compute_cycles = M * KT * NT;
  res.peak_bytes_per_cycle = static_cast<double>(s.hbm_channels) * 32.0;
  res.roofline_cycles = std::max<uint64_t>(
      res.compute_cycles,
      static_cast<uint64_t>(static_cast<double>(res.hbm_bytes) / res.peak_bytes_per_cycle + 0.5));

  std::vector<uint8_t> cbuf(M * No * esz);
  read(c_addr, cbuf.data(), cbuf.size());
  res.c_bits.resize(M * N);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      const uint8_t* p = cbuf.data() + (i * No + j) * esz;
      uint32_t v = 0;
      std::memcpy(&v, p, esz);
      res.c_bits[i * N + j] = v;
    }
  return res;
}

std::vector<uint32_t> golden_chip_matmul(const std::vector<bf16_t>& a, const std::vector<bf16_t>& w,
                                         std::size_t m, std::size_t k, std::size_t n,
                                         const MatmulOptions& opt) {
  const std::vector<float> c = golden_matmul(a, w, m, k, n);
  std::vector<uint32_t> out(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float v = c[i * n + j];
      if (opt.bias) v = f32_add(v, (*opt.bias)[j]);
      if (opt.relu) v = f32_relu(v);
      out[i * n + j] = opt.out_bf16 ? f32_to_bf16(v) : f32_bits(canonicalize(v));
    }
  return out;
}

}  // namespace tpu
