#include "pod_driver.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace tpu {

namespace {

constexpr uint64_t kBurst = 64;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("pod collective: " + what);
}

struct Range {
  uint32_t lo = 0, hi = 0;  // VMEM rows [lo, hi)
  bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
};

// One command of a chip's program, with what it touches (for ordering).
struct Op {
  enum Kind { kSend, kWait, kVpu } kind = kSend;
  int step = 0;
  std::size_t block = 0;  // block index within its transfer
  int peer = -1;          // send: destination chip; wait: counter
  ChipCmd cmd;
  std::vector<Range> reads, writes;
};

bool conflicts(const Op& a, const Op& b) {  // a comes after b in plan order
  auto any = [](const std::vector<Range>& x, const std::vector<Range>& y) {
    for (const auto& r : x)
      for (const auto& s : y)
        if (r.overlaps(s)) return true;
    return false;
  };
  if (any(a.writes, b.reads) || any(a.writes, b.writes) || any(a.reads, b.writes)) return true;
  if (a.kind == Op::kSend && b.kind == Op::kSend && a.peer == b.peer) return true;
  if (a.kind == Op::kWait && b.kind == Op::kWait && a.peer == b.peer) return true;
  // Deadlock freedom: a wait of (step s, block k) comes after every send of an earlier step
  // and every send of step s with a block index <= k (docs/pod.md).
  if (a.kind == Op::kWait && b.kind == Op::kSend &&
      (b.step < a.step || (b.step == a.step && b.block <= a.block)))
    return true;
  return false;
}

// The working buffer cut into pieces at every boundary a transfer or a layout segment has; each
// piece starts on its own row, so every transfer moves whole rows.
struct Pieces {
  std::vector<std::size_t> start, len;
  std::vector<uint32_t> rows, first_row;  // rows (padded), first row in the working buffer
  uint32_t total_rows = 0;
  std::size_t index(std::size_t elem) const {  // piece that starts at elem
    const auto it = std::lower_bound(start.begin(), start.end(), elem);
    return static_cast<std::size_t>(it - start.begin());
  }
  // Pieces covering [off, off + count), which starts and ends on cuts.
  std::vector<std::size_t> cover(std::size_t off, std::size_t count) const {
    std::vector<std::size_t> v;
    for (std::size_t j = index(off); j < start.size() && start[j] < off + count; ++j) v.push_back(j);
    return v;
  }
};

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
    const uint32_t p0 = rl.offset[i], p1 = p0 + (i + 1 < rl.offset.size() ? rl.offset[i + 1] - p0
                                                                          : rl.rows - p0);
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

// DMAs of `rows` memory rows <-> one contiguous HBM region, in pieces of at most 32 KiB.
void dma_rows(std::vector<ChipCmd>* prog, DmaDir dir, bool bf16, uint32_t row, uint32_t rows,
              uint64_t hbm, unsigned lanes, uint32_t row_align) {
  const uint32_t rb = lanes * (bf16 ? 2u : 4u);
  uint32_t chunk = std::max<uint32_t>(1, 32768 / rb) / row_align * row_align;
  if (chunk == 0) chunk = row_align;
  for (uint32_t r = 0; r < rows; r += chunk) {
    const uint32_t n = std::min(chunk, rows - r);
    prog->push_back(cmd_dma(dir, bf16, row + r, 1, n * rb, static_cast<uint32_t>(hbm + uint64_t{r} * rb), 0));
  }
}

}  // namespace

PodCollectiveRun PodDriver::run(const CollectiveSpec& spec,
                                const std::vector<std::vector<uint32_t>>& inputs,
                                const PodCollectiveOptions& opt) {
  PodCore& core = host_.core();
  const Topology& topo = core.params().topo;
  const ChipShape& shape = core.shape();
  const unsigned L = shape.cols;
  const int P = topo.num_chips();
  const bool bf16 = spec.dtype == DType::kBf16;

  PodCollectiveRun res;
  res.plan = make_plan(topo, spec);
  const CollectivePlan& plan = res.plan;
  res.row_bytes = uint64_t{L} * 4;
  res.link_bytes_per_cycle = core.link_bytes_per_cycle();
  if (inputs.size() != static_cast<std::size_t>(P))
    bad("inputs: " + std::to_string(inputs.size()) + " chips' inputs for a pod of " +
        std::to_string(P) + " chips");
  for (int c = 0; c < P; ++c) {
    if (inputs[c].size() != plan.input_len(c))
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(inputs[c].size()) +
          " elements; the plan needs " + std::to_string(plan.input_len(c)));
  }

  // ---- Pieces ----
  const uint32_t row_align = std::max<uint32_t>(1, static_cast<uint32_t>(kBurst / (2 * L)));
  std::set<std::size_t> cuts = {0, plan.buffer_len};
  for (const Step& s : plan.steps) {
    for (const Transfer& t : s.transfers) {
      cuts.insert({t.src_offset, t.src_offset + t.count, t.dst_offset, t.dst_offset + t.count});
    }
  }
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
    const uint32_t r = static_cast<uint32_t>((len + L - 1) / L);
    pc.rows.push_back((r + row_align - 1) / row_align * row_align);
    pc.first_row.push_back(pc.total_rows);
    pc.total_rows += pc.rows.back();
  }

  // Block size: the smallest transfer of the plan, clamped to 16..64 rows, unless asked.
  uint32_t block_rows = opt.block_rows;
  if (block_rows == 0) {
    uint32_t smallest = 64;
    for (const Step& st : plan.steps) {
      for (const Transfer& t : st.transfers) {
        uint32_t rows = 0;
        for (std::size_t j : pc.cover(t.src_offset, t.count)) rows += pc.rows[j];
        smallest = std::min(smallest, rows);
      }
    }
    block_rows = std::clamp<uint32_t>(smallest, 16, 64);
  }

  // ---- Per-chip state: where each piece's current value lives, VMEM in use, counters ----
  std::vector<std::vector<uint32_t>> loc(static_cast<std::size_t>(P), pc.first_row);
  std::vector<uint32_t> next_row(static_cast<std::size_t>(P), pc.total_rows);
  std::vector<std::map<int, int>> counter(static_cast<std::size_t>(P));  // [dst][src] -> id
  std::vector<std::vector<Op>> ops(static_cast<std::size_t>(P));
  auto alloc = [&](int c, uint32_t rows) {
    const uint32_t r = next_row[c];
    next_row[c] += rows;
    if (next_row[c] > shape.vmem_rows)
      bad("chip " + std::to_string(c) + " needs more than its " + std::to_string(shape.vmem_rows) +
          " VMEM rows (working buffer " + std::to_string(pc.total_rows) +
          " rows plus a landing area for every incoming transfer); use fewer elements (n = " +
          std::to_string(spec.n) + ")");
    return r;
  };
  auto counter_of = [&](int dst, int src) {
    auto& m = counter[dst];
    const auto it = m.find(src);
    if (it != m.end()) return it->second;
    const int id = static_cast<int>(m.size());
    if (id >= static_cast<int>(kIciCounters))
      bad("chip " + std::to_string(dst) + " receives from more than " +
          std::to_string(kIciCounters) + " chips (one ICI counter each)");
    m[src] = id;
    return id;
  };
  auto coord3 = [&](int id) {
    const PodCoord c = topo.coord(id);
    return std::array<int, 3>{c[0], c[1], c[2]};
  };
  const unsigned vop = spec.op == ReduceOp::kMax ? 4u : 0u;  // VpuMax / VpuAdd: x = incoming

  for (std::size_t si = 0; si < plan.steps.size(); ++si) {
    const int s = static_cast<int>(si);
    const Step& step = plan.steps[si];
    struct Pending {
      const Transfer* t;
      RowList src, dst;
      uint32_t stage;
      uint32_t bs = 1;  // rows per block: the transfer cut into equal blocks of <= block_rows
    };
    std::vector<Pending> pend;
    for (const Transfer& t : step.transfers) {
      Pending p{&t, row_list(pc, pc.cover(t.src_offset, t.count)),
                row_list(pc, pc.cover(t.dst_offset, t.count)), 0};
      if (p.src.pieces.size() != p.dst.pieces.size() || p.src.rows != p.dst.rows)
        bad("plan step " + std::to_string(s) + ": a transfer's source and destination pieces differ");
      p.stage = alloc(t.dst, p.src.rows);
      const uint32_t nb = std::max<uint32_t>(1, (p.src.rows + block_rows - 1) / block_rows);
      p.bs = std::max<uint32_t>(1, (p.src.rows + nb - 1) / nb);
      pend.push_back(std::move(p));
    }
    // Sends (they read the values as they were at the start of the step), block-major: block k
    // of every transfer before block k + 1 of any, so sends towards different links alternate
    // and run side by side on the ICI engine's contexts.
    std::size_t max_blocks = 0;
    for (const Pending& p : pend)
      max_blocks = std::max<std::size_t>(max_blocks, (p.src.rows + p.bs - 1) / p.bs);
    for (std::size_t blk = 0; blk < max_blocks; ++blk) {
      for (const Pending& p : pend) {
        const Transfer& t = *p.t;
        const uint32_t o = static_cast<uint32_t>(blk) * p.bs;
        if (o >= p.src.rows) continue;
        const uint32_t n = std::min(p.bs, p.src.rows - o);
        const int cnt = counter_of(t.dst, t.src);
        for (const Run& r : runs(p.src, loc[t.src], o, n)) {
          Op op;
          op.kind = Op::kSend;
          op.step = s;
          op.block = blk;
          op.peer = t.dst;
          op.cmd = cmd_ici_send(Mem::kVmem, r.row, r.len, coord3(t.dst), Mem::kVmem,
                                p.stage + r.at, static_cast<uint32_t>(cnt));
          op.reads.push_back({r.row, r.row + r.len});
          ops[t.src].push_back(op);
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
        const int cnt = counter_of(t.dst, t.src);
        Op w;
        w.kind = Op::kWait;
        w.step = s;
        w.block = blk;
        w.peer = cnt;
        w.cmd = cmd_ici_wait(static_cast<uint32_t>(cnt), n);
        w.writes.push_back({p.stage + o, p.stage + o + n});
        ops[t.dst].push_back(w);
        if (t.kind != TransferKind::kReduce) continue;
        for (const Run& r : runs(p.dst, loc[t.dst], o, n)) {
          VpuCmdArgs a;
          a.op = vop;
          a.x_mem = Mem::kVmem;
          a.x_row = p.stage + r.at;
          a.y_mem = Mem::kVmem;
          a.y_row = r.row;
          a.dst_mem = Mem::kVmem;
          a.dst_row = r.row;
          a.rows = r.len;
          Op v;
          v.kind = Op::kVpu;
          v.step = s;
          v.block = blk;
          v.cmd = cmd_vpu(a);
          v.reads = {{a.x_row, a.x_row + r.len}, {r.row, r.row + r.len}};
          v.writes = {{r.row, r.row + r.len}};
          ops[t.dst].push_back(v);
        }
      }
    }
    // Copies: the landed rows are the piece's value from now on.
    for (const Pending& p : pend) {
      if (p.t->kind == TransferKind::kReduce) continue;
      for (std::size_t i = 0; i < p.dst.pieces.size(); ++i)
        loc[p.t->dst][p.dst.pieces[i]] = p.stage + p.dst.offset[i];
    }
  }

  // ---- Schedule each chip's ops: waits and reductions in plan order, each send as early as
  // its dependencies allow (a software pipeline across steps: a block is forwarded as soon as
  // it is reduced, ahead of the waits for later blocks). Waits are not hoisted: a wait blocks
  // the in-order queue, so one placed early would hold back sends that could already go. ----
  std::vector<std::vector<ChipCmd>> progs(static_cast<std::size_t>(P));
  for (int c = 0; c < P; ++c) {
    std::vector<const Op*> sched;
    for (const Op& op : ops[c]) {
      std::size_t pos = sched.size();
      if (op.kind == Op::kSend) {
        pos = 0;
        for (std::size_t i = 0; i < sched.size(); ++i)
          if (conflicts(op, *sched[i])) pos = i + 1;
      }
      sched.insert(sched.begin() + static_cast<std::ptrdiff_t>(pos), &op);
    }
    for (const Op* op : sched) progs[c].push_back(op->cmd);
    res.commands += progs[c].size();
  }

  // ---- Output rows (bf16: rounded into a contiguous area first) ----
  std::vector<std::vector<std::size_t>> out_pieces(static_cast<std::size_t>(P));
  std::vector<uint32_t> out_rows(static_cast<std::size_t>(P), 0), out_stage(static_cast<std::size_t>(P), 0);
  for (int c = 0; c < P; ++c) {
    for (const Segment& s : plan.chips[c].output) {
      for (std::size_t j : pc.cover(s.offset, s.count)) out_pieces[c].push_back(j);
    }
    for (std::size_t j : out_pieces[c]) out_rows[c] += pc.rows[j];
    if (bf16) out_stage[c] = alloc(c, out_rows[c]);
    res.vmem_rows_used = std::max<std::size_t>(res.vmem_rows_used, next_row[c]);
  }

  // ---- Load: host -> HBM -> VMEM ----
  const uint64_t in_bytes_per_row = uint64_t{L} * (bf16 ? 2 : 4);
  if (opt.hbm_base % kBurst != 0) bad("hbm_base must be 64-byte aligned");
  const uint64_t hbm_in = opt.hbm_base;
  const uint64_t hbm_out =
      hbm_in + (uint64_t{pc.total_rows} * in_bytes_per_row + kBurst - 1) / kBurst * kBurst;
  for (int c = 0; c < P; ++c) {
    if (hbm_out + uint64_t{out_rows[c]} * in_bytes_per_row > shape.hbm_bytes)
      bad("the working buffer does not fit in HBM");
    const std::size_t esz = bf16 ? 2 : 4;
    std::vector<uint8_t> img(pc.total_rows * in_bytes_per_row, 0);
    std::size_t k = 0;
    for (const Segment& s : plan.chips[c].input) {
      for (std::size_t e = s.offset; e < s.offset + s.count; ++e, ++k) {
        const std::size_t j = std::upper_bound(pc.start.begin(), pc.start.end(), e) - pc.start.begin() - 1;
        const std::size_t idx = pc.first_row[j] * std::size_t{L} + (e - pc.start[j]);
        std::memcpy(&img[idx * esz], &inputs[c][k], esz);  // little-endian: low bytes
      }
    }
    host_.write(c, hbm_in, img.data(), img.size());
    std::vector<ChipCmd> prog;
    dma_rows(&prog, DmaDir::kHbmToVmem, bf16, 0, pc.total_rows, hbm_in, L, row_align);
    if (bf16) {
      VpuCmdArgs a;
      a.op = 8;  // VpuCvtBf16F32
      a.x_mem = Mem::kVmem;
      a.y_mem = Mem::kVmem;
      a.dst_mem = Mem::kVmem;
      for (uint32_t r = 0; r < pc.total_rows; r += 0x8000) {
        a.x_row = a.y_row = a.dst_row = r;
        a.rows = std::min<uint32_t>(0x8000, pc.total_rows - r);
        prog.push_back(cmd_vpu(a));
      }
    }
    host_.push(c, prog);
  }
  res.load_cycles = host_.run_until_idle();

  // ---- The collective ----
  const std::vector<LinkStat> before = core.link_stats();
  std::vector<ChipCounters> cbefore;
  for (int c = 0; c < P; ++c) cbefore.push_back(core.counters(c));
  for (int c = 0; c < P; ++c) host_.push(c, progs[c]);
  res.collective_cycles = host_.run_until_idle();
  for (int c = 0; c < P; ++c) res.chip_delta.push_back(core.counters(c) - cbefore[c]);
  res.link_flits = core.link_stats();
  for (std::size_t i = 0; i < res.link_flits.size(); ++i) res.link_flits[i].flits -= before[i].flits;

  // ---- Store: VMEM -> HBM -> host ----
  for (int c = 0; c < P; ++c) {
    std::vector<ChipCmd> prog;
    uint32_t at = 0;
    for (std::size_t j : out_pieces[c]) {
      if (bf16) {
        VpuCmdArgs a;
        a.op = 7;  // VpuCvtF32Bf16
        a.dst_bf16 = true;
        a.x_mem = a.y_mem = a.dst_mem = Mem::kVmem;
        a.x_row = a.y_row = loc[c][j];
        a.dst_row = out_stage[c] + at;
        a.rows = pc.rows[j];
        prog.push_back(cmd_vpu(a));
      } else {
        dma_rows(&prog, DmaDir::kVmemToHbm, false, loc[c][j], pc.rows[j],
                 hbm_out + uint64_t{at} * in_bytes_per_row, L, row_align);
      }
      at += pc.rows[j];
    }
    if (bf16 && out_rows[c] > 0)
      dma_rows(&prog, DmaDir::kVmemToHbm, true, out_stage[c], out_rows[c], hbm_out, L, row_align);
    host_.push(c, prog);
  }
  res.store_cycles = host_.run_until_idle();
  res.out.resize(static_cast<std::size_t>(P));
  for (int c = 0; c < P; ++c) {
    std::vector<uint8_t> img(uint64_t{out_rows[c]} * in_bytes_per_row);
    host_.read(c, hbm_out, img.data(), img.size());
    uint32_t at = 0;
    for (std::size_t j : out_pieces[c]) {
      for (std::size_t e = 0; e < pc.len[j]; ++e) {
        const std::size_t idx = (std::size_t{at} * L + e) * (bf16 ? 2 : 4);
        uint32_t v = 0;
        std::memcpy(&v, &img[idx], bf16 ? 2 : 4);
        res.out[c].push_back(v);
      }
      at += pc.rows[j];
    }
  }
  return res;
}

}  // namespace tpu
