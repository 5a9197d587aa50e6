#include "vpu_map.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace tpu {

namespace {

constexpr uint64_t kBurst = 64;

void check_operand(const HbmMatrix& m, const std::string& name, const VpuMap& map,
                   const ChipShape& s) {
  if (m.rows != map.rows || m.cols != map.cols)
    throw std::invalid_argument("vpu map: " + name + " is " + std::to_string(m.rows) + "x" +
                                std::to_string(m.cols) + ", the map is " +
                                std::to_string(map.rows) + "x" + std::to_string(map.cols));
  const uint64_t row_bytes = m.cols * m.esize();
  if (row_bytes % kBurst != 0 || m.cols % s.cols != 0)
    throw std::invalid_argument("vpu map: " + name + ": a row of " + std::to_string(m.cols) +
                                " elements must be whole 64-byte bursts and whole " +
                                std::to_string(s.cols) + "-lane memory rows");
  if (row_bytes > 0xFFFF)
    throw std::invalid_argument("vpu map: " + name + ": rows of " + std::to_string(row_bytes) +
                                " bytes are longer than one DMA segment (65535)");
  if (m.addr % kBurst != 0 || (m.pitch * m.esize()) % kBurst != 0 || m.pitch < m.cols)
    throw std::invalid_argument("vpu map: " + name + ": address and pitch must be whole bursts");
  if (m.addr + m.bytes() > s.hbm_bytes)
    throw std::invalid_argument("vpu map: " + name + " ends beyond the HBM capacity");
}

// A VPU op on VMEM rows: x (bf16 when xb), y (bf16 when yb; one row broadcast when bcast) into
// dst (bf16 when db), `rows` rows.
ChipCmd vmem_vpu(VpuOp op, uint32_t x, bool xb, uint32_t y, bool yb, bool bcast, uint32_t dst,
                 bool db, std::size_t rows) {
  VpuCmdArgs a;
  a.op = static_cast<unsigned>(op);
  a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
  a.x_row = x;
  a.y_row = y;
  a.y_bcast = bcast;
  a.src_bf16 = (xb ? 1u : 0u) | (yb ? 2u : 0u);
  a.dst_bf16 = db;
  a.dst_row = dst;
  a.rows = static_cast<uint32_t>(rows);
  return cmd_vpu(a);
}

// What each value is (inputs, constants, ops' results), checked.
struct Values {
  std::size_t I = 0, C = 0, K = 0;
  std::vector<MapIn> kind;  // per input
  std::vector<bool> bf16;   // per value
  std::vector<bool> row;    // per value: a row value (one f32 per map row, packed)
  bool is_const(int v) const {
    return v >= static_cast<int>(I) && v < static_cast<int>(I + C);
  }
};

[[noreturn]] void map_error(const std::string& what) {
  throw std::invalid_argument("vpu map: " + what);
}

// A vector of n values: a per-column input (1 x n, n = the map's columns: a matrix row's
// rules), a per-row input or output (f32; any matrix whose rows lie back to back, pitch = cols,
// read as one vector: a B x S matrix of per-token values), or a column sum (f32, 1 x n).
void check_vector(const HbmMatrix& m, const std::string& name, std::size_t min_cols, bool f32,
                  const ChipShape& s, bool flat = false) {
  if (f32 && m.dtype != Dtype::kF32) map_error(name + " must be f32");
  const std::size_t n = m.rows == 1 ? m.cols : (flat && m.pitch == m.cols ? m.rows * m.cols : 0);
  if (n < min_cols)
    map_error(name + " is " + std::to_string(m.rows) + "x" + std::to_string(m.cols) +
              ", it must be 1 x at least " + std::to_string(min_cols) +
              (flat ? " (or a matrix of as many values, rows back to back)" : ""));
  if (m.addr % kBurst != 0 || m.addr + n * m.esize() > s.hbm_bytes)
    map_error(name + ": its address must be a whole burst, inside the HBM");
}

// The rows a chunk's row values are rounded to: whole 64-byte bursts and whole memory rows.
std::size_t row_quantum(std::size_t L) { return std::max<std::size_t>(16, L); }
std::size_t round_up(std::size_t n, std::size_t q) { return (n + q - 1) / q * q; }

Values classify(const VpuMap& m, const ChipShape& s) {
  Values v;
  v.I = m.in.size();
  v.C = m.const_rows.size();
  v.K = m.ops.size();
  const std::size_t L = s.cols, Q = row_quantum(L), n = v.I + v.C + v.K;
  v.kind.assign(v.I, MapIn::kMatrix);
  for (std::size_t i = 0; i < std::min(v.I, m.in_kind.size()); ++i) v.kind[i] = m.in_kind[i];
  v.bf16.assign(n, false);
  v.row.assign(n, false);
  for (std::size_t i = 0; i < v.I; ++i) {
    const std::string name = "input " + std::to_string(i);
    if (v.kind[i] == MapIn::kMatrix) check_operand(m.in[i], name, m, s);
    if (v.kind[i] == MapIn::kColumns) {
      check_vector(m.in[i], name + " (per column)", m.cols, false, s);
      HbmMatrix one = m.in[i];
      one.rows = m.rows;  // a matrix row's rules, of a matrix that lies inside the HBM
      one.addr = 0;
      one.pitch = m.cols;
      check_operand(one, name, m, s);
    }
    if (v.kind[i] == MapIn::kRows)
      check_vector(m.in[i], name + " (per-row)", round_up(m.rows, Q), true, s, true);
    v.bf16[i] = m.in[i].dtype == Dtype::kBf16;
    v.row[i] = v.kind[i] == MapIn::kRows;
  }
  for (std::size_t k = 0; k < v.K; ++k) {
    const VpuMapOp& op = m.ops[k];
    const int id = static_cast<int>(v.I + v.C + k);
    const std::string name = "op " + std::to_string(k) + " (" + vpu_op_name(op.op) + ")";
    if (op.x < 0 || op.x >= id || v.is_const(op.x))
      map_error(name + ": x must be an input or an earlier op's result");
    if (op.y != -1 && (op.y < 0 || op.y >= id))
      map_error(name + ": y must be an input, a constant or an earlier result");
    if (op.op == VpuOp::kFma) map_error(name + " is not an op of two operands");
    const bool xr = v.row[static_cast<std::size_t>(op.x)];
    const bool yr = op.y >= 0 && v.row[static_cast<std::size_t>(op.y)];
    const bool xb = v.bf16[static_cast<std::size_t>(op.x)];
    if (vpu_op_is_reduction(op.op)) {
      if (xr || xb || op.y != -1 || op.bf16)
        map_error(name + ": a row reduction takes one f32 matrix value and gives an f32 row value");
      v.row[static_cast<std::size_t>(id)] = true;
      continue;
    }
    if (xr && op.y >= 0 && !yr && !v.is_const(op.y))
      map_error(name + ": x is a row value, so y must be a row value, a constant or none");
    if (!xr && yr) {
      const bool vrow_op = op.op == VpuOp::kAdd || op.op == VpuOp::kSub || op.op == VpuOp::kMul ||
                           op.op == VpuOp::kMax || op.op == VpuOp::kMin;
      if (!vrow_op || xb || op.bf16)
        map_error(name + ": a per-row y takes add, sub, mul, max or min on an f32 x, f32 result");
    }
    if (xr && (op.bf16 || vpu_op_result_bf16(op.op))) map_error(name + ": row values are f32");
    v.row[static_cast<std::size_t>(id)] = xr;
    v.bf16[static_cast<std::size_t>(id)] = op.bf16 || vpu_op_result_bf16(op.op);
  }
  return v;
}

void check_outputs(const VpuMap& m, const Values& v, const ChipShape& s) {
  const int n = static_cast<int>(v.bf16.size());
  const std::size_t L = s.cols, Q = row_quantum(L);
  if (v.C && (m.consts.dtype != Dtype::kF32 || m.consts.cols != L))
    map_error("the constants must be f32 rows of " + std::to_string(L) + " lanes");
  for (std::size_t r : m.const_rows)
    if (r >= m.consts.rows) map_error("constant row out of range");
  for (const auto& o : m.out) {
    if (o.first < 0 || o.first >= n || v.is_const(o.first))
      map_error("an output must be an input or an op's result");
    const std::string name = "output of value " + std::to_string(o.first);
    if (v.row[static_cast<std::size_t>(o.first)]) {
      check_vector(o.second, name + " (per-row)", round_up(m.rows, Q), true, s, true);
      continue;
    }
    check_operand(o.second, name, m, s);
    if ((o.second.dtype == Dtype::kBf16) != v.bf16[static_cast<std::size_t>(o.first)])
      map_error(name + ": the matrix's dtype is not the value's");
  }
  if (m.sum >= 0) {
    if (m.sum >= n || v.bf16[static_cast<std::size_t>(m.sum)] || v.is_const(m.sum) ||
        v.row[static_cast<std::size_t>(m.sum)])
      map_error("the summed value must be an f32 matrix input or result");
    if (m.sum_out.dtype != Dtype::kF32 || m.sum_out.addr % kBurst != 0 ||
        m.sum_out.bytes() < kBurst || m.sum_out.cols != L)
      map_error("sum_out must be f32 rows of " + std::to_string(L) +
                " lanes, one whole 64-byte burst");
  }
  for (const auto& cs : m.col_sums) {
    const std::string name = "column sum of value " + std::to_string(cs.first);
    if (cs.first < 0 || cs.first >= n || v.is_const(cs.first) ||
        v.bf16[static_cast<std::size_t>(cs.first)] || v.row[static_cast<std::size_t>(cs.first)])
      map_error(name + ": the value must be an f32 matrix input or result");
    check_vector(cs.second, name, m.cols, true, s);
    if (m.rows % 16 != 0)
      map_error(name + ": the rows (" + std::to_string(m.rows) + ") must be a multiple of 16");
    if (m.zero_const < 0 || static_cast<std::size_t>(m.zero_const) >= v.C)
      map_error(name + ": zero_const must name a constant row of +0");
  }
}

// Where everything lies in VMEM: the constants, the sum's accumulator, the column sums'
// partials, the per-column inputs, then two slots of one region per input and op (one slot
// where two do not hold even the smallest chunk).
struct Layout {
  std::size_t chunk = 0, pr = 0, span = 0, pk = 0;
  std::size_t slots = 2;  // 2: the next chunk loads behind this one's work; 1: one after another
  uint32_t v_const = 0, v_acc = 0, v_slots = 0;
  std::vector<uint32_t> v_parts, v_cols;  // per column sum; per input (kColumns only)
  std::vector<std::size_t> off;           // per value (not constants): offset in a slot
  std::size_t slot_rows = 0;
  std::size_t packed(std::size_t n, std::size_t L) const {  // memory rows of n row values
    return round_up(n, row_quantum(L)) / L;
  }
};

// Each slotted value's region (in order, by kind: matrix values, then row values) and the number
// of regions of each kind. Without sharing every value has its own; with it a value takes a free
// region of its kind when it is defined, and gives it back after its last use (outputs, sums and
// column sums live to the end of the chunk).
struct Regions {
  std::vector<int> reg;  // per slotted index (inputs, then ops); -1: a per-column input
  std::size_t full = 0, rowv = 0;
};

Regions assign_regions(const VpuMap& m, const Values& v) {
  const std::size_t I = v.I, C = v.C, K = v.K, n = I + K;
  auto slotted = [&](int val) {
    return static_cast<std::size_t>(val) < I ? static_cast<std::size_t>(val)
                                             : static_cast<std::size_t>(val) - C;
  };
  std::vector<int> last(n, -1);
  for (std::size_t k = 0; k < K; ++k)
    for (int u : {m.ops[k].x, m.ops[k].y})
      if (u >= 0 && !v.is_const(u)) last[slotted(u)] = static_cast<int>(k);
  auto keep = [&](int val) { last[slotted(val)] = static_cast<int>(K); };
  for (const auto& o : m.out) keep(o.first);
  for (const auto& o : m.col_sums) keep(o.first);
  if (m.sum >= 0) keep(m.sum);
  Regions r;
  r.reg.assign(n, -1);
  std::vector<int> free_full, free_row;
  auto take = [&](std::size_t i, bool row) {
    std::vector<int>& fr = row ? free_row : free_full;
    std::size_t& count = row ? r.rowv : r.full;
    if (m.share_regions && !fr.empty()) {
      r.reg[i] = fr.back();
      fr.pop_back();
    } else {
      r.reg[i] = static_cast<int>(count++);
    }
  };
  auto give_back = [&](std::size_t i, bool row) {
    if (m.share_regions && r.reg[i] >= 0) (row ? free_row : free_full).push_back(r.reg[i]);
  };
  for (std::size_t i = 0; i < I; ++i)
    if (v.kind[i] != MapIn::kColumns) take(i, v.row[i]);
  for (std::size_t k = 0; k < K; ++k) {
    const std::size_t i = I + k;
    take(i, v.row[i + C]);
    for (std::size_t j = 0; j < i; ++j)  // operands whose last use this op is
      if (r.reg[j] >= 0 && last[j] == static_cast<int>(k)) give_back(j, v.row[j < I ? j : j + C]);
    if (last[i] < 0) give_back(i, v.row[i + C]);  // a result nothing uses
  }
  return r;
}

Layout lay_out(const VpuMap& m, const Values& v, const ChipShape& s, uint32_t vmem_base,
               uint32_t vmem_rows) {
  const std::size_t L = s.cols, Q = row_quantum(L), I = v.I, C = v.C, K = v.K;
  const std::size_t G = std::max<std::size_t>(1, kBurst / (4 * L));  // rows of one f32 burst
  const bool sum = m.sum >= 0;
  Layout lay;
  lay.pr = m.cols / L;
  const Regions rg = assign_regions(m, v);
  std::size_t cols_in = 0;
  for (std::size_t i = 0; i < I; ++i) cols_in += v.kind[i] == MapIn::kColumns;
  const std::size_t full = rg.full, rowv = rg.rowv;
  const bool rowish = rowv > 0 || !m.col_sums.empty();
  if (rowish && lay.pr > 255)
    map_error("a row of " + std::to_string(m.cols) + " elements is " + std::to_string(lay.pr) +
              " memory rows; VROW takes at most 255");
  const std::size_t parts = m.col_sums.size() * 16 * lay.pr;
  if (vmem_rows <= C + G + parts) map_error("too few VMEM rows");
  // The largest chunk that fits with `slots` sets of the chunk's values (0: none).
  auto fit = [&](std::size_t slots) {
    const std::size_t regions = slots * full + cols_in + (sum ? 1 : 0);
    std::size_t chunk = std::min<std::size_t>(
        m.rows, (vmem_rows - C - G - parts) / (std::max<std::size_t>(regions, 1) * lay.pr));
    chunk = std::min<std::size_t>(chunk, 0xFFFF / lay.pr);
    auto total = [&](std::size_t c) {
      const std::size_t sp = c * lay.pr, pk = round_up(c, Q) / L;
      return C + (sum ? std::max(sp, G) : 0) + parts + cols_in * sp +
             slots * (full * sp + rowv * pk);
    };
    if (rowish) {  // whole blocks of Q rows (one segment of row values: at most 16383)
      chunk = std::min<std::size_t>(chunk, 16383 / Q * Q);
      if (chunk < m.rows) chunk = chunk / Q * Q;
      while (chunk > 0 && total(chunk) > vmem_rows) chunk = chunk % Q ? chunk / Q * Q : chunk - Q;
    }
    return chunk;
  };
  // Two sets (the next chunk's DMA behind this one's work) where they fit; one set, chunk after
  // chunk, where not even the smallest chunk fits twice, instead of refusing the map.
  std::size_t slots = 2, chunk = fit(2);
  if (chunk == 0) chunk = fit(slots = 1);
  if (chunk == 0)
    map_error(std::to_string(vmem_rows) + " VMEM rows hold less than one matrix row of every "
              "operand" + std::string(rowish ? " (in chunks of whole blocks of 16 rows)" : ""));
  lay.chunk = chunk;
  lay.slots = slots;
  lay.span = chunk * lay.pr;
  lay.pk = rowv ? lay.packed(chunk, L) : 0;
  lay.v_const = vmem_base;
  lay.v_acc = static_cast<uint32_t>(lay.v_const + C);
  uint32_t next = static_cast<uint32_t>(lay.v_acc + (sum ? std::max(lay.span, G) : 0));
  for (std::size_t c = 0; c < m.col_sums.size(); ++c) {
    lay.v_parts.push_back(next);
    next += static_cast<uint32_t>(16 * lay.pr);
  }
  lay.v_cols.assign(I, 0);
  for (std::size_t i = 0; i < I; ++i)
    if (v.kind[i] == MapIn::kColumns) {
      lay.v_cols[i] = next;
      next += static_cast<uint32_t>(lay.span);
    }
  lay.v_slots = next;
  lay.off.assign(I + K, 0);
  for (std::size_t i = 0; i < I + K; ++i) {
    if (rg.reg[i] < 0) continue;
    const bool row = v.row[i < I ? i : i + C];
    lay.off[i] = row ? full * lay.span + static_cast<std::size_t>(rg.reg[i]) * lay.pk
                     : static_cast<std::size_t>(rg.reg[i]) * lay.span;
  }
  lay.slot_rows = full * lay.span + rowv * lay.pk;
  return lay;
}

// The program, chunk by chunk.
class MapEmitter {
 public:
  MapEmitter(const VpuMap& m, const Values& v, const Layout& lay, std::size_t lanes)
      : m_(m), v_(v), lay_(lay), L_(lanes) {}

  std::vector<ChipCmd> emit() {
    load_fixed();
    const std::size_t chunks = (m_.rows + lay_.chunk - 1) / lay_.chunk;
    load(0);
    for (std::size_t c = 0; c < chunks; ++c) {
      const bool next = c + 1 < chunks;
      if (next && lay_.slots == 2) load(c + 1);
      compute(c);
      store(c);
      if (next && lay_.slots == 1) load(c + 1);
    }
    finish();
    return std::move(prog_);
  }

 private:
  std::size_t rows_of(std::size_t c) const { return std::min(lay_.chunk, m_.rows - c * lay_.chunk); }
  uint32_t region(int v, std::size_t chunk) const {
    const std::size_t slot = chunk % lay_.slots;
    const std::size_t idx = static_cast<std::size_t>(v) < v_.I ? static_cast<std::size_t>(v)
                                                               : static_cast<std::size_t>(v) - v_.C;
    if (idx < v_.I && v_.kind[idx] == MapIn::kColumns) return lay_.v_cols[idx];
    return static_cast<uint32_t>(lay_.v_slots + slot * lay_.slot_rows + lay_.off[idx]);
  }
  uint32_t const_row(int v) const {
    return static_cast<uint32_t>(lay_.v_const + (v - static_cast<int>(v_.I)));
  }
  bool row(int v) const { return v >= 0 && v_.row[static_cast<std::size_t>(v)]; }

  void dma(DmaDir dir, const HbmMatrix& mat, uint32_t mem_row, std::size_t c) {
    const std::size_t r0 = c * lay_.chunk;
    const uint64_t pitch = mat.pitch * mat.esize();
    prog_.push_back(cmd_dma(dir, mat.dtype == Dtype::kBf16, mem_row,
                            static_cast<uint32_t>(rows_of(c)),
                            static_cast<uint32_t>(mat.cols * mat.esize()),
                            static_cast<uint32_t>(mat.addr + r0 * pitch),
                            static_cast<uint32_t>(pitch)));
  }
  // A chunk's row values: one segment of whole bursts.
  void dma_rows(DmaDir dir, const HbmMatrix& vec, uint32_t mem_row, std::size_t c) {
    const std::size_t n = round_up(rows_of(c), row_quantum(L_));
    prog_.push_back(cmd_dma(dir, false, mem_row, 1, static_cast<uint32_t>(n * 4),
                            static_cast<uint32_t>(vec.addr + c * lay_.chunk * 4), 0));
  }

  void load_fixed() {
    for (std::size_t c = 0; c < v_.C; ++c)
      prog_.push_back(cmd_dma(DmaDir::kHbmToVmem, false, static_cast<uint32_t>(lay_.v_const + c),
                              1, static_cast<uint32_t>(4 * L_),
                              static_cast<uint32_t>(m_.consts.addr +
                                                    m_.const_rows[c] * m_.consts.pitch * 4),
                              0));
    for (std::size_t p = 0; p < m_.col_sums.size(); ++p)  // the partials from the +0 row
      prog_.push_back(cmd_dma(
          DmaDir::kHbmToVmem, false, lay_.v_parts[p], static_cast<uint32_t>(16 * lay_.pr),
          static_cast<uint32_t>(4 * L_),
          static_cast<uint32_t>(m_.consts.addr +
                                m_.const_rows[static_cast<std::size_t>(m_.zero_const)] *
                                    m_.consts.pitch * 4),
          0));
    for (std::size_t i = 0; i < v_.I; ++i)
      if (v_.kind[i] == MapIn::kColumns) {  // the one row, chunk times (stride 0)
        const HbmMatrix& mat = m_.in[i];
        prog_.push_back(cmd_dma(DmaDir::kHbmToVmem, mat.dtype == Dtype::kBf16, lay_.v_cols[i],
                                static_cast<uint32_t>(lay_.chunk),
                                static_cast<uint32_t>(mat.cols * mat.esize()),
                                static_cast<uint32_t>(mat.addr), 0));
      }
  }

  void load(std::size_t c) {
    for (std::size_t i = 0; i < v_.I; ++i) {
      const int v = static_cast<int>(i);
      if (v_.kind[i] == MapIn::kMatrix) dma(DmaDir::kHbmToVmem, m_.in[i], region(v, c), c);
      if (v_.kind[i] == MapIn::kRows) dma_rows(DmaDir::kHbmToVmem, m_.in[i], region(v, c), c);
    }
  }

  void compute(std::size_t c) {
    const std::size_t nrows = rows_of(c), n = nrows * lay_.pr;
    const uint32_t R = static_cast<uint32_t>(nrows), pr = static_cast<uint32_t>(lay_.pr);
    for (std::size_t k = 0; k < v_.K; ++k) {
      const VpuMapOp& op = m_.ops[k];
      const int v = static_cast<int>(v_.I + v_.C + k);
      const uint32_t x = region(op.x, c), dst = region(v, c);
      if (vpu_op_is_reduction(op.op)) {
        prog_.push_back(cmd_vrow(op.op, Mem::kVmem, x, R, pr, 1, pr, 0, dst));
        continue;
      }
      if (!row(op.x) && row(op.y)) {  // the per-row operand
        prog_.push_back(cmd_vrow(op.op, Mem::kVmem, x, R, pr, 1, pr, region(op.y, c), dst));
        continue;
      }
      const bool yc = op.y >= 0 && v_.is_const(op.y);
      const uint32_t y = op.y < 0 ? x : yc ? const_row(op.y) : region(op.y, c);
      const std::size_t rows = row(op.x) ? lay_.packed(nrows, L_) : n;
      prog_.push_back(vmem_vpu(op.op, x, v_.bf16[static_cast<std::size_t>(op.x)], y,
                               op.y >= 0 && v_.bf16[static_cast<std::size_t>(op.y)], yc, dst,
                               op.bf16 && !vpu_op_result_bf16(op.op), rows));
    }
    if (m_.sum >= 0) {  // the first chunk copied (maximum(v, v) = v, NaN canonical), then added
      const uint32_t x = region(m_.sum, c);
      prog_.push_back(c == 0 ? vmem_vpu(VpuOp::kMax, x, false, x, false, false, lay_.v_acc, false, n)
                             : vmem_vpu(VpuOp::kAdd, x, false, lay_.v_acc, false, false,
                                        lay_.v_acc, false, n));
    }
    for (std::size_t p = 0; p < m_.col_sums.size(); ++p)  // each block of 16 rows onto the partials
      for (std::size_t b = 0; b < nrows / 16; ++b)
        prog_.push_back(vmem_vpu(
            VpuOp::kAdd, static_cast<uint32_t>(region(m_.col_sums[p].first, c) + b * 16 * lay_.pr),
            false, lay_.v_parts[p], false, false, lay_.v_parts[p], false, 16 * lay_.pr));
  }

  void store(std::size_t c) {
    for (const auto& o : m_.out) {
      if (row(o.first))
        dma_rows(DmaDir::kVmemToHbm, o.second, region(o.first, c), c);
      else
        dma(DmaDir::kVmemToHbm, o.second, region(o.first, c), c);
    }
  }

  void finish() {
    if (m_.sum >= 0) {
      for (std::size_t n = std::min(lay_.chunk, m_.rows) * lay_.pr; n > 1;) {
        const std::size_t h = n / 2;
        prog_.push_back(vmem_vpu(VpuOp::kAdd, lay_.v_acc, false,
                                 static_cast<uint32_t>(lay_.v_acc + (n - h)), false, false,
                                 lay_.v_acc, false, h));
        n -= h;
      }
      prog_.push_back(cmd_dma(DmaDir::kVmemToHbm, false, lay_.v_acc, 1,
                              static_cast<uint32_t>(kBurst),
                              static_cast<uint32_t>(m_.sum_out.addr), 0));
    }
    for (std::size_t p = 0; p < m_.col_sums.size(); ++p) {
      const uint32_t a = lay_.v_parts[p];
      for (std::size_t h = 8; h >= 1; h /= 2)
        prog_.push_back(vmem_vpu(VpuOp::kAdd, a, false,
                                 static_cast<uint32_t>(a + h * lay_.pr), false, false, a, false,
                                 h * lay_.pr));
      prog_.push_back(vmem_vpu(VpuOp::kAdd, a, false, const_row(static_cast<int>(v_.I) +
                                                                 m_.zero_const),
                               false, true, a, false, lay_.pr));
      prog_.push_back(cmd_dma(DmaDir::kVmemToHbm, false, a, 1,
                              static_cast<uint32_t>(m_.cols * 4),
                              static_cast<uint32_t>(m_.col_sums[p].second.addr), 0));
    }
  }

  const VpuMap& m_;
  const Values& v_;
  const Layout& lay_;
  std::size_t L_;
  std::vector<ChipCmd> prog_;
};

}  // namespace

VpuMapPlan plan_vpu_map(const VpuMap& m, const ChipShape& s, uint32_t vmem_base,
                        uint32_t vmem_rows) {
  if (m.rows == 0 || m.cols == 0) map_error("empty shape");
  const Values v = classify(m, s);
  check_outputs(m, v, s);
  const Layout lay = lay_out(m, v, s, vmem_base, vmem_rows);
  VpuMapPlan plan;
  plan.chunk = lay.chunk;
  plan.slots = lay.slots;
  plan.prog = MapEmitter(m, v, lay, s.cols).emit();
  return plan;
}

}  // namespace tpu
