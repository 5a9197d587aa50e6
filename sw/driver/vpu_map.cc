#include "vpu_map.h"

#include <algorithm>
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

}  // namespace

VpuMapPlan plan_vpu_map(const VpuMap& m, const ChipShape& s, uint32_t vmem_base,
                        uint32_t vmem_rows) {
  const std::size_t L = s.cols;
  const std::size_t I = m.in.size(), C = m.const_rows.size(), K = m.ops.size();
  const int nvalues = static_cast<int>(I + C + K);
  if (m.rows == 0 || m.cols == 0) throw std::invalid_argument("vpu map: empty shape");
  for (std::size_t i = 0; i < I; ++i) check_operand(m.in[i], "input " + std::to_string(i), m, s);
  // Each value's element type.
  std::vector<bool> is_bf16(static_cast<std::size_t>(nvalues), false);
  for (std::size_t i = 0; i < I; ++i) is_bf16[i] = m.in[i].dtype == Dtype::kBf16;
  for (std::size_t k = 0; k < K; ++k) {
    const VpuMapOp& op = m.ops[k];
    const int v = static_cast<int>(I + C + k);
    if (op.x < 0 || op.x >= v || (op.x >= static_cast<int>(I) && op.x < static_cast<int>(I + C)))
      throw std::invalid_argument("vpu map: op " + std::to_string(k) +
                                  ": x must be an input or an earlier op's result");
    if (op.y != -1 && (op.y < 0 || op.y >= v))
      throw std::invalid_argument("vpu map: op " + std::to_string(k) +
                                  ": y must be an input, a constant or an earlier result");
    if (vpu_op_is_reduction(op.op) || op.op == VpuOp::kFma)
      throw std::invalid_argument(std::string("vpu map: op ") + vpu_op_name(op.op) +
                                  " is not an elementwise op of two operands");
    is_bf16[static_cast<std::size_t>(v)] = op.bf16 || vpu_op_result_bf16(op.op);
  }
  if (C && (m.consts.dtype != Dtype::kF32 || m.consts.cols != L))
    throw std::invalid_argument("vpu map: the constants must be f32 rows of " + std::to_string(L) +
                                " lanes");
  for (std::size_t r : m.const_rows)
    if (r >= m.consts.rows) throw std::invalid_argument("vpu map: constant row out of range");
  for (const auto& o : m.out) {
    if (o.first < 0 || o.first >= nvalues || (o.first >= static_cast<int>(I) &&
                                              o.first < static_cast<int>(I + C)))
      throw std::invalid_argument("vpu map: an output must be an input or an op's result");
    check_operand(o.second, "output of value " + std::to_string(o.first), m, s);
    if ((o.second.dtype == Dtype::kBf16) != is_bf16[static_cast<std::size_t>(o.first)])
      throw std::invalid_argument("vpu map: output of value " + std::to_string(o.first) +
                                  ": the matrix's dtype is not the value's");
  }
  const bool sum = m.sum >= 0;
  if (sum) {
    if (m.sum >= nvalues || is_bf16[static_cast<std::size_t>(m.sum)] ||
        (m.sum >= static_cast<int>(I) && m.sum < static_cast<int>(I + C)))
      throw std::invalid_argument("vpu map: the summed value must be an f32 input or result");
    if (m.sum_out.dtype != Dtype::kF32 || m.sum_out.addr % kBurst != 0 ||
        m.sum_out.bytes() < kBurst || m.sum_out.cols != L)
      throw std::invalid_argument("vpu map: sum_out must be f32 rows of " + std::to_string(L) +
                                  " lanes, one whole 64-byte burst");
  }

  // VMEM: the constants, the sum's accumulator, then two slots of one region per input and op.
  const std::size_t pr = m.cols / L;  // memory rows per matrix row
  const std::size_t G = std::max<std::size_t>(1, kBurst / (4 * L));  // rows of one f32 burst
  const std::size_t regions = 2 * (I + K) + (sum ? 1 : 0);
  if (vmem_rows <= C + G) throw std::invalid_argument("vpu map: too few VMEM rows");
  std::size_t chunk = std::min<std::size_t>(m.rows, (vmem_rows - C - G) / (regions * pr));
  chunk = std::min<std::size_t>(chunk, 0xFFFF / pr);
  if (chunk == 0)
    throw std::invalid_argument("vpu map: " + std::to_string(vmem_rows) + " VMEM rows hold less "
                                "than one matrix row of every operand");
  const std::size_t span = chunk * pr;
  const uint32_t v_const = vmem_base;
  const uint32_t v_acc = static_cast<uint32_t>(v_const + C);
  const uint32_t v_slots = static_cast<uint32_t>(v_acc + (sum ? std::max(span, G) : 0));
  // Region of value v (an input or an op) in slot s.
  auto region = [&](int v, std::size_t slot) {
    const std::size_t idx = static_cast<std::size_t>(v) < I ? static_cast<std::size_t>(v)
                                                            : static_cast<std::size_t>(v) - C;
    return static_cast<uint32_t>(v_slots + (slot * (I + K) + idx) * span);
  };

  VpuMapPlan plan;
  plan.chunk = chunk;
  std::vector<ChipCmd>& prog = plan.prog;
  for (std::size_t c = 0; c < C; ++c)
    prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, static_cast<uint32_t>(v_const + c), 1,
                           static_cast<uint32_t>(4 * L),
                           static_cast<uint32_t>(m.consts.addr + m.const_rows[c] * m.consts.pitch * 4),
                           0));
  const std::size_t chunks = (m.rows + chunk - 1) / chunk;
  auto dma = [&](DmaDir dir, const HbmMatrix& mat, uint32_t mem_row, std::size_t c) {
    const std::size_t r0 = c * chunk, rows = std::min(chunk, m.rows - r0);
    const uint64_t pitch = mat.pitch * mat.esize();
    prog.push_back(cmd_dma(dir, mat.dtype == Dtype::kBf16, mem_row, static_cast<uint32_t>(rows),
                           static_cast<uint32_t>(mat.cols * mat.esize()),
                           static_cast<uint32_t>(mat.addr + r0 * pitch),
                           static_cast<uint32_t>(pitch)));
  };
  auto load = [&](std::size_t c) {
    for (std::size_t i = 0; i < I; ++i)
      dma(DmaDir::kHbmToVmem, m.in[i], region(static_cast<int>(i), c % 2), c);
  };
  load(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) load(c + 1);
    const std::size_t slot = c % 2;
    const std::size_t n = std::min(chunk, m.rows - c * chunk) * pr;  // memory rows
    for (std::size_t k = 0; k < K; ++k) {
      const VpuMapOp& op = m.ops[k];
      const int v = static_cast<int>(I + C + k);
      const bool yc = op.y >= static_cast<int>(I) && op.y < static_cast<int>(I + C);
      const uint32_t y = op.y < 0 ? region(op.x, slot)
                         : yc     ? static_cast<uint32_t>(v_const + (op.y - static_cast<int>(I)))
                                  : region(op.y, slot);
      prog.push_back(vmem_vpu(op.op, region(op.x, slot), is_bf16[static_cast<std::size_t>(op.x)], y,
                              op.y >= 0 && is_bf16[static_cast<std::size_t>(op.y)], yc,
                              region(v, slot), op.bf16 && !vpu_op_result_bf16(op.op), n));
    }
    if (sum) {  // the first chunk copied (maximum(v, v) = v, NaN canonical), then added
      const uint32_t x = region(m.sum, slot);
      prog.push_back(c == 0
                         ? vmem_vpu(VpuOp::kMax, x, false, x, false, false, v_acc, false, n)
                         : vmem_vpu(VpuOp::kAdd, x, false, v_acc, false, false, v_acc, false, n));
    }
    for (const auto& o : m.out) dma(DmaDir::kVmemToHbm, o.second, region(o.first, slot), c);
  }
  if (sum) {
    for (std::size_t n = std::min(chunk, m.rows) * pr; n > 1;) {
      const std::size_t h = n / 2;
      prog.push_back(vmem_vpu(VpuOp::kAdd, v_acc, false, static_cast<uint32_t>(v_acc + (n - h)),
                              false, false, v_acc, false, h));
      n -= h;
    }
    prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, v_acc, 1, static_cast<uint32_t>(kBurst),
                           static_cast<uint32_t>(m.sum_out.addr), 0));
  }
  return plan;
}

}  // namespace tpu
