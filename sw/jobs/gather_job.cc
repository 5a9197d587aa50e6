#include "gather_job.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "check_port.h"
#include "lone_chip.h"
#include "npy.h"

namespace tpu {
namespace {

NpyArray read_input(const std::string& flag, const std::string& path, bool ints = false) {
  try {
    return read_npy(path, ints);
  } catch (const NpyError& e) {
    throw std::invalid_argument(flag + " " + e.what());  // what() starts with the path
  }
}

// The ids as int32, each checked against the table's rows.
std::vector<int32_t> read_ids(const std::string& path, std::size_t v) {
  const NpyArray a = read_input("--ids", path, true);
  if (a.dtype != "<i4" && a.dtype != "<i8")
    throw std::invalid_argument("--ids " + path + ": dtype " + a.dtype +
                                " (rule: int32 '<i4' or int64 '<i8')");
  if (a.shape.size() != 1 || a.elements() == 0)
    throw std::invalid_argument("--ids " + path + ": " + std::to_string(a.shape.size()) +
                                "-D with " + std::to_string(a.elements()) +
                                " ids (rule: 1-D, at least one id)");
  std::vector<int32_t> ids(a.elements());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    int64_t x = 0;
    if (a.dtype == "<i4") {
      int32_t y = 0;
      std::memcpy(&y, &a.data[i * 4], 4);
      x = y;
    } else {
      std::memcpy(&x, &a.data[i * 8], 8);
    }
    if (x < 0 || static_cast<uint64_t>(x) >= v)
      throw std::invalid_argument("--ids " + path + ": id " + std::to_string(x) + " at " +
                                  std::to_string(i) + " is outside the table's rows 0.." +
                                  std::to_string(v - 1));
    ids[i] = static_cast<int32_t>(x);
  }
  return ids;
}

}  // namespace

GatherJob::GatherJob(const std::string& config_path, const GatherJobOptions& o)
    : cfg_(load_chip_config(config_path)), o_(o) {
  if (o.variant) cfg_.variant = *o.variant;
  ChipShape cs;
  try {
    cs = cfg_.shape();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        (o.variant ? "--variant " + *o.variant : config_path + ": key 'chip.variant'") + ": " +
        e.what());
  }
  const NpyArray t = read_input("--table", o.table_file);
  if (t.dtype != "<f4" || t.shape.size() != 2 || t.elements() == 0)
    throw std::invalid_argument("--table " + o.table_file + ": dtype " + t.dtype + ", " +
                                std::to_string(t.shape.size()) +
                                "-D (rule: float32 '<f4', 2-D [rows, columns], not empty)");
  v_ = t.shape[0];
  d_ = t.shape[1];
  // A table row is whole memory rows and whole 64-byte bursts (the result's stores).
  cols_ = (d_ + std::lcm<std::size_t>(cs.cols, 16) - 1) / std::lcm<std::size_t>(cs.cols, 16) *
          std::lcm<std::size_t>(cs.cols, 16);
  if (v_ > 0xFFFF || cols_ * 4 > 0xFFFF)
    throw std::invalid_argument("--table " + o.table_file + ": " + std::to_string(v_) + " x " +
                                std::to_string(d_) +
                                " (rule: at most 65535 rows of at most 16380 columns: the "
                                "DMA_IDX command's table_rows and seg_bytes)");
  if (cols_ / cs.cols * 2 + 2 > cs.vmem_rows)
    throw std::invalid_argument("--table " + o.table_file + ": rows of " + std::to_string(d_) +
                                " columns do not fit chip " + cfg_.variant + "'s VMEM twice");
  table_ = t.as_f32();
  ids_ = read_ids(o.ids_file, v_);
  const uint64_t bytes = (v_ + ids_.size()) * cols_ * 4 + ids_.size() * 4 + 4096;
  if (bytes > std::min<uint64_t>(cs.hbm_bytes, uint64_t{1} << 32))
    throw std::invalid_argument("--table " + o.table_file + " and --ids " + o.ids_file + ": " +
                                std::to_string(bytes) + " bytes of HBM, more than chip " +
                                cfg_.variant + " has");
}

std::string GatherJob::label() const {
  return "gather " + std::to_string(ids_.size()) + " rows of " + std::to_string(d_) + " from a " +
         std::to_string(v_) + "-row table on chip " + cfg_.variant;
}

void GatherJob::run() {
  LoneChip chip(cfg_.variant, cfg_.hbm, "", cfg_.faults, cfg_.clock_ghz, cfg_.vmem_rows,
                cfg_.amem_rows);
  chip.port().set_watchdog(cfg_.watchdog_cycles);
  const ChipShape& s = chip.shape();
  const std::size_t L = s.cols, n = ids_.size(), P = cols_ / L, rb = cols_ * 4;
  // Chunks of m ids (a multiple of the lanes): the list's rows, then two buffers of m x P rows.
  const std::size_t nl = (n + L - 1) / L;
  const std::size_t room = s.vmem_rows > nl ? s.vmem_rows - nl : 0;
  const std::size_t m =
      std::min<std::size_t>({room / (2 * P) / L * L, 0xFFFF / L * L, (n + L - 1) / L * L});
  if (m == 0)
    throw std::invalid_argument("--ids " + o_.ids_file + ": " + std::to_string(n) +
                                " ids leave no VMEM for the rows (fewer ids per run)");
  const uint64_t tbl = chip.alloc(v_ * rb), lst = chip.alloc(nl * L * 4), out = chip.alloc(n * rb);
  std::vector<ChipCmd> prog;
  prog.push_back(cmd_dma(DmaDir::kHbmToVmem, false, 0, static_cast<uint32_t>(nl),
                         static_cast<uint32_t>(L * 4), static_cast<uint32_t>(lst),
                         static_cast<uint32_t>(L * 4)));
  chunks_ = 0;
  for (std::size_t j0 = 0; j0 < n; j0 += m, ++chunks_) {
    const std::size_t k = std::min(m, n - j0);
    const auto buf = static_cast<uint32_t>(nl + (chunks_ % 2) * m * P);
    prog.push_back(cmd_dma_idx(false, false, buf, static_cast<uint32_t>(k),
                               static_cast<uint32_t>(rb), static_cast<uint32_t>(tbl),
                               static_cast<uint32_t>(j0 / L), static_cast<uint32_t>(v_)));
    prog.push_back(cmd_dma(DmaDir::kVmemToHbm, false, buf, static_cast<uint32_t>(k),
                           static_cast<uint32_t>(rb), static_cast<uint32_t>(out + j0 * rb),
                           static_cast<uint32_t>(rb)));
  }
  prog.push_back(cmd_halt());
  commands_ = prog.size();
  if (o_.check)
    throw CheckStop("after planning " + std::to_string(prog.size()) +
                    " commands, before the first copy or cycle");
  std::vector<float> padded(v_ * cols_, 0.0f);
  for (std::size_t r = 0; r < v_; ++r) std::copy_n(&table_[r * d_], d_, &padded[r * cols_]);
  chip.write(tbl, padded.data(), padded.size() * 4);
  std::vector<int32_t> list(ids_);
  list.resize(nl * L, 0);
  chip.write(lst, list.data(), list.size() * 4);
  if (detail_) {
    const uint64_t c0 = chip.port().cycle();
    chip.progress = [&, c0](uint64_t, uint64_t cmds) {
      detail_({chip.port().cycle() - c0, 0, cmds, "", "gathering"});
    };
  }
  prog_ = chip.run(prog);
  chip.progress = nullptr;
  std::vector<uint32_t> back(n * cols_);
  chip.read(out, back.data(), back.size() * 4);
  got_.resize(n * d_);
  mismatches_ = 0;
  first_bad_ = -1;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t c = 0; c < d_; ++c) {
      got_[j * d_ + c] = back[j * cols_ + c];
      if (got_[j * d_ + c] != f32_bits(table_[static_cast<std::size_t>(ids_[j]) * d_ + c])) {
        if (first_bad_ < 0) first_bad_ = static_cast<long>(j * d_ + c);
        ++mismatches_;
      }
    }
}

Report GatherJob::take_report() {
  Report rep(label());
  rep.field("tool", "tpusim").field("command", "gather").field("config", cfg_.source);
  rep.field("variant", cfg_.variant);
  rep.metric("rows", ids_.size(), "", "ids gathered (table rows)");
  rep.metric("table_rows", v_, "", "rows of the table");
  rep.metric("columns", d_, "", "f32 columns per row");
  rep.metric("cycles", prog_.cycles, "cycles", "the on-chip program (list in, gathers, stores)",
             true);
  rep.metric(
      "rows_per_cycle",
      prog_.cycles ? static_cast<double>(ids_.size()) / static_cast<double>(prog_.cycles) : 0.0, "",
      "table rows moved per cycle, stores included", true);
  rep.metric("commands", commands_, "", "commands of the program");
  rep.metric("chunks", chunks_, "", "DMA_IDX gathers (chunks of ids that fit VMEM)");
  rep.metric("hbm_read_bytes", prog_.delta[kStatDmaRdBytes], "bytes", "read by the DMA");
  rep.metric("hbm_write_bytes", prog_.delta[kStatDmaWrBytes], "bytes", "written by the DMA");
  rep.set_golden(pass(), got_.size(), mismatches_);
  if (!o_.out.empty()) rep.field("out", o_.out);
  return rep;
}

void GatherJob::print_check() const {
  std::printf("  golden check: %s (%zu of %zu outputs differ)\n", pass() ? "PASS" : "FAIL",
              mismatches_, got_.size());
  if (!pass() && first_bad_ >= 0) {
    const auto i = static_cast<std::size_t>(first_bad_);
    std::printf("  first mismatch at row %zu column %zu\n", i / d_, i % d_);
  }
}

void GatherJob::write_outputs() const {
  if (o_.out.empty()) return;
  std::vector<float> v(got_.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = f32_from_bits(got_[i]);
  write_npy_f32(o_.out, v, {ids_.size(), d_});
}

}  // namespace tpu
