#include "vpu_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "check_port.h"
#include "lone_chip.h"
#include "npy.h"
#include "tpu/transcend.h"
#include "vpu_map.h"

namespace tpu {

namespace {

constexpr uint32_t kNegZeroBits = 0x80000000u;  // the z the VPU command feeds (docs/isa.md)

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string t;
  for (const std::size_t d : s) t += (t.empty() ? "" : ", ") + std::to_string(d);
  return "(" + t + (s.size() == 1 ? ",)" : ")");
}

// The op of that name, or std::invalid_argument naming --op and the ops there are.
VpuCommandOp resolve_op(const std::string& name) {
  for (const VpuCommandOp& c : vpu_command_ops())
    if (c.name == name) return c;
  const std::string ops = " (tpusim vpu runs: " + vpu_command_op_names() + ")";
  for (uint32_t v = 0; v < kVpuOpCount; ++v) {
    const auto op = static_cast<VpuOp>(v);
    if (name != vpu_op_name(op)) continue;
    throw std::invalid_argument("--op " + name +
                                ": needs a z operand, which the chip's VPU command feeds as -0 "
                                "(docs/isa.md)" +
                                ops);
  }
  throw std::invalid_argument("--op " + name + ": unknown op" + ops);
}

// GELU as xcend_gelu computes it (model/src/transcend.cc), one VPU command per step and chunk:
// value 0 is x, 1..3 the constants (rows of `consts`: 0.044715, 1, -2 sqrt(2/pi)), 4.. the ops.
// Every step is the golden's f32 op on the same operands (mul and add commute bit for bit).
void gelu_map(VpuMap& map) {
  const auto mul = VpuOp::kMul, add = VpuOp::kAdd;
  map.const_rows = {0, 1, 2};
  map.ops = {{mul, 0, 0, false},            // 4: x2 = x * x
             {mul, 4, 1, false},            // 5: t = x2 * 0.044715
             {add, 5, 2, false},            // 6: u = t + 1
             {mul, 0, 6, false},            // 7: inner = x * u
             {mul, 7, 3, false},            // 8: w = inner * (-2 sqrt(2/pi)) = -2z
             {VpuOp::kExp, 8, -1, false},   // 9: e^(-2z)
             {add, 9, 2, false},            // 10: d = e^(-2z) + 1
             {VpuOp::kRcp, 10, -1, false},  // 11: 1 / d
             {mul, 0, 11, false}};          // 12: gelu = x * (1 / d)
  map.out = {{12, map.out.empty() ? HbmMatrix{} : map.out[0].second}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<VpuCommandOp> vpu_command_ops() {
  std::vector<VpuCommandOp> ops;
  for (uint32_t v = 0; v < kVpuOpCount; ++v) {
    const auto op = static_cast<VpuOp>(v);
    const std::string name = vpu_op_name(op);
    // Gaps in the enum are "unknown"; fma is the one op of three operands.
    if (name == "unknown" || op == VpuOp::kFma) continue;
    const bool red = vpu_op_is_reduction(op);
    ops.push_back({op, name, !red && vpu_op_operands(op) >= 2, false, red});
  }
  ops.push_back({VpuOp::kMul, "gelu", false, true});
  return ops;
}

std::string vpu_command_op_names() {
  std::string s;
  for (const VpuCommandOp& c : vpu_command_ops()) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

VpuJob::VpuJob(const std::string& config_path, const VpuJobOptions& o)
    : cfg_(load_chip_config(config_path)), o_(o) {
  if (o.variant) cfg_.variant = *o.variant;
  op_ = resolve_op(o.op);
  if (!o.z_file.empty())
    throw std::invalid_argument("--z " + o.z_file + ": --op " + op_.name +
                                " takes no z (no op of the chip's VPU command reads one)");
  if (op_.reads_y && o.y_file.empty())
    throw std::invalid_argument("--y: --op " + op_.name + " takes x and y (give --y Y.npy)");
  if (!op_.reads_y && !o.y_file.empty())
    throw std::invalid_argument("--y " + o.y_file + ": --op " + op_.name + " takes x alone");
  ChipShape cs;
  try {
    cs = cfg_.shape();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        (o.variant ? "--variant " + *o.variant : config_path + ": key 'chip.variant'") + ": " +
        e.what());
  }
  x_ = read_operand("--x", o.x_file);
  const std::vector<std::size_t> x_shape = shape_;
  if (op_.reads_y) {
    y_ = read_operand("--y", o.y_file);
    if (shape_ != x_shape)
      throw std::invalid_argument("--y " + o.y_file + ": shape " + shape_text(shape_) +
                                  ", but --x " + o.x_file + " has shape " + shape_text(x_shape) +
                                  " (rule: y has x's shape; no broadcasting)");
  }
  n_ = x_.size();
  if (op_.reduce) {
    check_reduce(cs);
    return;
  }
  // A matrix row is whole memory rows of the chip's lanes and whole 64-byte bursts of bf16 (the
  // narrowest result) and f32 elements.
  cols_ = std::lcm<std::size_t>(cs.cols, 32);
  const uint64_t rows = (n_ + cols_ - 1) / cols_;
  const uint64_t bytes = (op_.reads_y ? 3 : 2) * rows * cols_ * 4;
  const uint64_t room = std::min<uint64_t>(cs.hbm_bytes, uint64_t{1} << 32);  // 32-bit DMA
  if (bytes > room)
    throw std::invalid_argument("--x " + o.x_file + ": " + std::to_string(n_) + " elements need " +
                                std::to_string(bytes) +
                                " bytes of HBM (operands and result), more than chip " +
                                cfg_.variant + "'s " + std::to_string(room));
}

// A row of red_cols_ elements is red_beats_ memory rows (the last padded with the identity);
// VROW takes up to 255, and a chunk of rows (a multiple of 16: whole 64-byte bursts of results)
// and its packed results must fit VMEM.
void VpuJob::check_reduce(const ChipShape& cs) {
  red_rows_ = shape_.size() == 2 ? shape_[0] : 1;
  red_cols_ = shape_.back();
  const std::size_t beats = (red_cols_ + cs.cols - 1) / cs.cols;
  if (beats > 255)
    throw std::invalid_argument("--x " + o_.x_file + ": rows of " + std::to_string(red_cols_) +
                                " elements (rule: a reduced row is at most 255 memory rows of " +
                                std::to_string(cs.cols) + " lanes, " +
                                std::to_string(255 * cs.cols) + " elements, on chip " +
                                cfg_.variant + ": VROW's beats field)");
  red_beats_ = static_cast<uint32_t>(beats);
  red_chunk_ = static_cast<uint32_t>(cs.vmem_rows / (beats + 1) / 16 * 16);
  if (red_chunk_ < 16)
    throw std::invalid_argument("--x " + o_.x_file + ": rows of " + std::to_string(red_cols_) +
                                " elements: 16 of them do not fit chip " + cfg_.variant +
                                "'s VMEM");
  const uint64_t padded = (red_rows_ + 15) / 16 * 16;
  const uint64_t bytes = padded * (beats * cs.cols + 1) * 4;
  const uint64_t room = std::min<uint64_t>(cs.hbm_bytes, uint64_t{1} << 32);  // 32-bit DMA
  if (bytes > room)
    throw std::invalid_argument("--x " + o_.x_file + ": " + std::to_string(n_) + " elements need " +
                                std::to_string(bytes) + " bytes of HBM, more than chip " +
                                cfg_.variant + "'s " + std::to_string(room));
}

// x in HBM as rows of red_beats_ L elements (pad: the identity, which changes no lane's
// accumulation), rows padded to a multiple of 16; per chunk of red_chunk_ rows: DMA in (row r's
// beats at VMEM rows r k .. r k + k - 1), a VROW (row_stride k, beat_stride 1) packing the
// results after them, a DMA of the packed rows out. The scoreboard orders the chunks.
std::vector<ChipCmd> VpuJob::plan_reduce(ChipDriver& chip, uint64_t* out_addr) {
  const uint32_t L = chip.shape().cols, k = red_beats_, row_bytes = k * L * 4;
  const std::size_t padded = (red_rows_ + 15) / 16 * 16;
  const float ident = op_.op == VpuOp::kRedSum ? f32_from_bits(0x80000000u)
                                               : -std::numeric_limits<float>::infinity();
  std::vector<float> img(padded * k * L, ident);
  for (std::size_t r = 0; r < red_rows_; ++r)
    std::copy_n(x_.begin() + static_cast<std::ptrdiff_t>(r * red_cols_), red_cols_,
                img.begin() + static_cast<std::ptrdiff_t>(r * k * L));
  const uint64_t x_addr = chip.alloc(img.size() * 4);
  *out_addr = chip.alloc(padded * 4);
  if (!o_.check) chip.write(x_addr, img.data(), img.size() * 4);
  std::vector<ChipCmd> prog;
  for (std::size_t r0 = 0; r0 < padded; r0 += red_chunk_) {
    const auto rc = static_cast<uint32_t>(std::min<std::size_t>(red_chunk_, padded - r0));
    prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, 0, rc, row_bytes,
                           static_cast<uint32_t>(x_addr + r0 * row_bytes), row_bytes));
    prog.push_back(cmd_vrow(op_.op, Mem::kVmem, 0, rc, k, 1, k, 0, rc * k));
    prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, rc * k, 1, rc * 4,
                           static_cast<uint32_t>(*out_addr + r0 * 4), 0));
  }
  prog.push_back(cmd_halt());
  return prog;
}

void VpuJob::attach_progress(LoneChip& chip,
                             const std::function<void(uint64_t, uint64_t, const char*)>& progress) {
  if (!progress && !detail_) return;
  // As the matmul job's: the commands the chip took from its host port, of the program's.
  const uint64_t c0 = chip.port().cycle();
  chip.progress = [&chip, progress, this, c0](uint64_t, uint64_t cmds) {
    const uint64_t issued = cmds - std::min(cmds, chip.port().status(chip.chip()).cmds_waiting);
    if (progress) progress(issued, cmds, "commands issued");
    if (detail_) detail_({chip.port().cycle() - c0, issued, cmds, "commands issued", ""});
  };
}

void VpuJob::check_golden() {
  mismatches_ = 0;
  first_bad_ = -1;
  for (std::size_t i = 0; i < got_.size(); ++i)
    if (got_[i] != want_[i]) {
      if (first_bad_ < 0) first_bad_ = static_cast<long>(i);
      ++mismatches_;
    }
}

std::vector<float> VpuJob::read_operand(const std::string& flag, const std::string& path) {
  NpyArray a;
  try {
    a = read_npy(path);
  } catch (const NpyError& e) {
    throw std::invalid_argument(flag + " " + e.what());  // what() starts with the path
  }
  if (a.dtype != "<f4")
    throw std::invalid_argument(flag + " " + path + ": dtype " + a.dtype +
                                " (rule: float32, '<f4')");
  if (a.shape.empty() || a.shape.size() > 2)
    throw std::invalid_argument(flag + " " + path + ": shape " + shape_text(a.shape) +
                                " (rule: 1-D or 2-D)");
  if (a.elements() == 0)
    throw std::invalid_argument(flag + " " + path + ": shape " + shape_text(a.shape) +
                                " holds no element");
  shape_ = a.shape;
  return a.as_f32();
}

std::string VpuJob::label() const {
  if (op_.reduce)
    return "vpu " + op_.name + " of " + std::to_string(red_rows_) + " rows of " +
           std::to_string(red_cols_) + " on chip " + cfg_.variant;
  return "vpu " + op_.name + " over " + std::to_string(n_) + " elements on chip " + cfg_.variant;
}

void VpuJob::run(const std::function<void(uint64_t, uint64_t, const char*)>& progress) {
  LoneChip chip(cfg_.variant, cfg_.hbm, "", cfg_.faults, cfg_.clock_ghz, cfg_.vmem_rows,
                cfg_.amem_rows);
  chip.port().set_watchdog(cfg_.watchdog_cycles);
  const ChipShape& s = chip.shape();
  const std::size_t rows = (n_ + cols_ - 1) / cols_;
  if (op_.reduce) {
    uint64_t out = 0;
    const std::vector<ChipCmd> prog = plan_reduce(chip, &out);
    if (o_.check)
      throw CheckStop("after planning " + std::to_string(prog.size()) +
                      " commands, before the first copy or cycle");
    commands_ = prog.size();
    attach_progress(chip, progress);
    const auto t0 = std::chrono::steady_clock::now();
    prog_ = chip.run(prog);
    chip.progress = nullptr;
    wall_ = seconds_since(t0);
    got_.resize(red_rows_);
    chip.read(out, got_.data(), got_.size() * 4);
    want_.resize(red_rows_);
    for (std::size_t r = 0; r < red_rows_; ++r)
      want_[r] = f32_bits(vector_reduce(
          op_.op,
          std::vector<float>(x_.begin() + static_cast<std::ptrdiff_t>(r * red_cols_),
                             x_.begin() + static_cast<std::ptrdiff_t>((r + 1) * red_cols_)),
          s.cols));
    check_golden();
    return;
  }
  const bool bf16_out = vpu_op_result_bf16(op_.op);  // plan_vpu_map types its result alike
  auto padded = [&](std::vector<float> v) {
    v.resize(rows * cols_, 0.0f);
    return v;
  };
  VpuMap map;
  map.rows = rows;
  map.cols = cols_;
  map.in.push_back(chip.alloc_matrix(rows, cols_, Dtype::kF32));
  if (op_.reads_y) map.in.push_back(chip.alloc_matrix(rows, cols_, Dtype::kF32));
  map.ops.push_back({op_.op, 0, op_.reads_y ? 1 : -1, false});
  const HbmMatrix out = chip.alloc_matrix(rows, cols_, bf16_out ? Dtype::kBf16 : Dtype::kF32);
  map.out.push_back({static_cast<int>(map.in.size()), out});
  if (op_.gelu) {
    map.consts = chip.alloc_matrix(3, s.cols, Dtype::kF32);
    gelu_map(map);
  }
  VpuMapPlan plan = plan_vpu_map(map, s, 0, s.vmem_rows);
  plan.prog.push_back(cmd_halt());
  if (o_.check)
    throw CheckStop("after planning " + std::to_string(plan.prog.size()) +
                    " commands, before the first copy or cycle");
  chip.write_matrix(map.in[0], padded(x_));
  if (op_.reads_y) chip.write_matrix(map.in[1], padded(y_));
  if (op_.gelu) {
    std::vector<float> k;
    for (const float c : {kGeluCubic, 1.0f, kGeluMinus2Sqrt2OverPi}) k.resize(k.size() + s.cols, c);
    chip.write_matrix(map.consts, k);
  }
  commands_ = plan.prog.size();
  attach_progress(chip, progress);
  const auto t0 = std::chrono::steady_clock::now();
  prog_ = chip.run(plan.prog);
  chip.progress = nullptr;
  wall_ = seconds_since(t0);
  got_ = chip.read_matrix(out);
  got_.resize(n_);  // the padding is not read back
  // The golden of the command: y is x where the op reads none (plan_vpu_map feeds x), z is -0.
  want_.resize(n_);
  for (std::size_t i = 0; i < n_; ++i) {
    const uint32_t x = f32_bits(x_[i]);
    want_[i] = op_.gelu ? f32_bits(xcend_gelu(x_[i]))
                        : vpu_lane(op_.op, x, op_.reads_y ? f32_bits(y_[i]) : x, kNegZeroBits);
  }
  check_golden();
}

Report VpuJob::take_report() {
  Report rep("vpu " + op_.name + " over " + std::to_string(n_) + " elements " + shape_text(shape_) +
             " on chip " + cfg_.variant);
  rep.field("tool", "tpusim").field("command", "vpu").field("config", cfg_.source);
  rep.field("variant", cfg_.variant).field("op", op_.name);
  rep.field("operands", op_.reads_y ? "x, y" : "x");
  rep.metric("elements", n_, "", "elements of the array");
  if (op_.reduce) {
    rep.metric("rows", red_rows_, "", "rows reduced, one value each");
    rep.metric("row_beats", red_beats_, "", "memory rows per row (VROW beats)");
  }
  rep.metric("cycles", prog_.cycles, "cycles", "the on-chip program (DMA in, VPU, DMA out)", true);
  rep.metric("commands", commands_, "", "commands of the program");
  rep.metric("vpu_busy_cycles", prog_.delta[kStatVpuBusy], "cycles", "the VPU busy", true);
  rep.metric("hbm_read_bytes", prog_.delta[kStatDmaRdBytes], "bytes", "read by the DMA");
  rep.metric("hbm_write_bytes", prog_.delta[kStatDmaWrBytes], "bytes", "written by the DMA");
  rep.set_golden(pass(), got_.size(), mismatches_);
  rep.metric("wall_seconds", wall_, "s", "host time of the run");
  if (!o_.out.empty()) rep.field("out", o_.out);
  return rep;
}

void VpuJob::print_check() const {
  std::printf("  golden check: %s (%zu of %zu outputs differ)\n", pass() ? "PASS" : "FAIL",
              mismatches_, got_.size());
  if (!pass() && first_bad_ >= 0) {
    const auto i = static_cast<std::size_t>(first_bad_);
    std::printf("  first mismatch at element %zu: got %08x, golden %08x\n", i, got_[i], want_[i]);
  }
}

void VpuJob::write_outputs() const {
  if (o_.out.empty()) return;
  if (op_.reduce) {  // one value per row: x's rows (1 for a 1-D x)
    std::vector<float> v(got_.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = f32_from_bits(got_[i]);
    write_npy_f32(o_.out, v, {red_rows_});
    return;
  }
  // Lanes as they come out; a bf16 result (bits [15:0]) widened exactly to the f32 it is.
  const bool bf16_out = vpu_op_result_bf16(op_.op);
  std::vector<float> v(n_);
  for (std::size_t i = 0; i < n_; ++i) v[i] = f32_from_bits(bf16_out ? got_[i] << 16 : got_[i]);
  write_npy_f32(o_.out, v, shape_);
}

}  // namespace tpu
