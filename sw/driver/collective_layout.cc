// The collective compiler's planners (collective_compile.h): the pieces of a round's buffer, the
// ICI counter assignment, how rounds are issued, the VMEM regions, and the search for the fewest
// rounds whose layout fits.
#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "collective_compile.h"

namespace tpu::pod_compile {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("pod collective: " + what);
}

// ---- Pieces.

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

RowList row_list(const Pieces& p, const std::vector<std::size_t>& pieces) {
  RowList r;
  r.pieces = pieces;
  for (std::size_t j : pieces) {
    r.offset.push_back(r.rows);
    r.rows += p.rows[j];
  }
  return r;
}

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

// A packed piece whose halves are whole bursts is stored straight from its packed rows: the
// lower halves by a bf16 DMA (a lane's bits [15:0]), the upper by one with `hi` ([31:16]).
// `packed`: the round's packed pieces (null when nothing packs).
bool stored_packed(const ChipRound& s, const Pieces* packed, std::size_t j, uint32_t row_align) {
  return packed != nullptr && s.fmt[j] == Fmt::kPacked && packed->rows[j] % row_align == 0;
}

// ---- Counters.

int Counters::get(int dst, int src, int purpose) {
  const int id = try_get(dst, src, purpose);
  if (id < 0)
    bad("chip " + std::to_string(dst) + " needs more than the " + std::to_string(count_) +
        " ICI counters it has for this collective (one per chip it receives from, and one per "
        "chip it lends rounds to)");
  return id;
}

int Counters::try_get(int dst, int src, int purpose) {
  auto& m = m_[static_cast<std::size_t>(dst)];
  const auto key = std::make_pair(src, purpose);
  const auto it = m.find(key);
  if (it != m.end()) return it->second;
  const int id = static_cast<int>(m.size());
  if (id >= count_) return -1;
  m[key] = base_ + id;
  return base_ + id;
}

namespace {
int data_counter(const Transfer& t) { return t.route.dir < 0 ? kDataMinus : kData; }
}  // namespace

int transfer_counter(Counters& ctr, const CollectivePlan& plan, const Step* next, const Transfer& t,
                     std::size_t round) {
  if (t.routed) return ctr.get(t.dst, -1 - static_cast<int>(round % kRoundCounters), kData);
  const int data = ctr.get(t.dst, t.src, data_counter(t));
  const bool minus = t.route.dir < 0;
  if (plan.spec.algorithm == "direct" || plan.spec.collective == Collective::kAllToAll) return data;
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

CounterWindow counter_window(const PodCollectiveOptions& opt) {
  if (opt.counter_base >= kIciCounters || opt.counter_count > kIciCounters - opt.counter_base)
    bad("ICI counters [" + std::to_string(opt.counter_base) + ", +" +
        std::to_string(opt.counter_count) + "): the chip has " + std::to_string(kIciCounters));
  CounterWindow w;
  w.base = static_cast<int>(opt.counter_base);
  w.count =
      static_cast<int>(opt.counter_count ? opt.counter_count : kIciCounters - opt.counter_base);
  return w;
}

// ---- The round plan.

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

namespace {

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
      if (t.route.hops != 1 || t.routed) return false;
  return true;
}

}  // namespace

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

RoundIssue plan_round_issue(const CollectivePlan& whole, const PodCollectiveOptions& opt,
                            double rows_in_per_cycle) {
  // Overlapped rounds: worth it where a reduce-scatter step brings a chip rows at least as fast
  // as the VPU reduces them (one row a cycle): the VPU then cannot catch up at a round's start
  // unless the all-gather gives it time (2x2 torus: 0.83 -> 0.88 of the bound); a ring (two
  // links) leaves it slack, and the fourth region only makes more rounds (ring of 8: 0.93 ->
  // 0.91).
  RoundIssue ri;
  ri.lag = opt.overlap_rounds && halves(whole) && rows_in_per_cycle >= 1.0 ? 2 : 1;
  ri.offset = ri.lag == 2 ? half_offset(whole, rows_in_per_cycle) : 0;
  ri.early = opt.early_heads && neighbours_only(whole);
  ri.max_regions = static_cast<uint32_t>(ri.lag) + 2;
  return ri;
}

// ---- The VMEM regions.

void VmemRegions::use(std::size_t rounds) {
  count = static_cast<uint32_t>(std::min<std::size_t>(max_count, std::max<std::size_t>(1, rounds)));
  rows = avail / count / row_align * row_align;
}

VmemRegions vmem_regions(const PodCollectiveOptions& opt, uint32_t chip_rows, uint32_t max_regions,
                         uint32_t row_align) {
  VmemRegions v;
  v.base = opt.vmem_base;
  v.avail = opt.vmem_rows ? opt.vmem_rows : (chip_rows > v.base ? chip_rows - v.base : 0);
  if (v.base + v.avail > chip_rows || v.avail < max_regions * 8)
    bad("VMEM rows [" + std::to_string(v.base) + ", " + std::to_string(v.base + v.avail) +
        ") do not fit the chip's " + std::to_string(chip_rows) + " rows or are too few");
  v.row_align = row_align;
  v.max_count = max_regions;
  v.use(max_regions);
  return v;
}

uint32_t RoundLayout::rows_used(int c) const {
  uint32_t used = 0;
  for (std::size_t r = 0; r < rounds.size(); ++r)
    used = std::max(used, at(r, c).next_row - vmem.base);
  return used;
}

// ---- The layout of the rounds.

namespace {

// Rows per pipelined block of a round: `asked`, or else the plan's smallest transfer clamped to
// 16..64 rows (32..64 in several rounds).
uint32_t round_block_rows(const CollectivePlan& plan, const Pieces& pc, uint32_t asked,
                          std::size_t rounds) {
  if (asked != 0) return asked;
  uint32_t smallest = 64;
  for (const Step& s : plan.steps)
    for (const Transfer& t : s.transfers) {
      uint32_t rows = 0;
      for (std::size_t j : pc.cover(t.src_offset, t.count)) rows += pc.rows[j];
      smallest = std::min(smallest, rows);
    }
  // One round is latency-bound (small blocks pipeline its steps sooner); several rounds are
  // bandwidth-bound (each block costs a head flit and a VPU op).
  return std::clamp<uint32_t>(smallest, rounds > 1 ? 32 : 16, 64);
}

// Every chip at the start of round r: its pieces in the region's working buffer as loaded (bf16
// or f32), the rest of the region free.
std::vector<ChipRound> start_round(const CompileSetup& s, const VmemRegions& vm, std::size_t r,
                                   const Pieces& pc) {
  std::vector<ChipRound> rs(static_cast<std::size_t>(s.chips));
  for (ChipRound& cr : rs) {
    cr.loc.resize(pc.start.size());
    cr.fmt.assign(pc.start.size(), s.widen ? Fmt::kBf16 : Fmt::kF32);
    for (std::size_t j = 0; j < pc.start.size(); ++j) cr.loc[j] = vm.region(r) + pc.first_row[j];
    cr.next_row = vm.region(r) + pc.total_rows;
    cr.region_end = vm.region(r) + vm.rows;
  }
  return rs;
}

// Staging rows, at the region's end, for the bf16 outputs not stored as they are
// (std::length_error where the region is full).
void stage_outputs(const CompileSetup& s, const CollectivePlan& plan, const Pieces& pc,
                   const Pieces* packed, std::vector<ChipRound>& rs) {
  for (int c = 0; c < s.chips; ++c) {
    ChipRound& cr = rs[static_cast<std::size_t>(c)];
    if (!s.widen) continue;
    for (const Segment& g : plan.chips[c].output)
      for (std::size_t j : pc.cover(g.offset, g.count)) {
        if (stored_packed(cr, packed, j, s.row_align)) continue;
        cr.stage[j] = cr.next_row;
        cr.next_row += pc.rows[j];
      }
    if (cr.next_row > cr.region_end) throw std::length_error("region");
  }
}

}  // namespace

bool lay_out_rounds(const CompileSetup& s, std::size_t R, RoundLayout& lay) {
  lay.rounds = make_rounds(s.topo, s.whole.spec, R);
  lay.vmem = s.vmem;
  lay.vmem.use(lay.rounds.size());
  lay.chips = s.chips;
  lay.pack = s.pack;
  lay.shared_tokens = false;
  for (const Step& st : s.whole.steps)
    for (const Transfer& t : st.transfers) lay.shared_tokens = lay.shared_tokens || t.routed;
  lay.pcs.clear();
  lay.pks.clear();
  lay.block_rows.clear();
  lay.st.clear();
  lay.ctr = Counters(s.chips, s.counters.base, s.counters.count);
  // Steps are numbered across rounds (the scheduler's deadlock rule); overlapped rounds share
  // numbers: round r's step H + offset + j is round r + 1's step j (H = half a round's steps).
  const std::size_t lag = s.issue.lag;
  StepNumbers num;
  for (std::size_t r = 0; r < lay.rounds.size(); ++r) {
    const CollectivePlan& plan = lay.rounds[r].plan;
    lay.pcs.push_back(cut_pieces(plan, s.lanes, s.row_align, s.pack));
    lay.pks.push_back(s.pack ? packed_pieces(lay.pcs.back()) : Pieces{});
    const Pieces& pc = lay.pcs.back();
    if (pc.total_rows > lay.vmem.rows) return false;
    const uint32_t block_rows = round_block_rows(plan, pc, s.opt.block_rows, lay.rounds.size());
    lay.block_rows.push_back(block_rows);
    std::vector<ChipRound> rs = start_round(s, lay.vmem, r, pc);
    try {
      if (lag == 2 && (!halves(plan) || plan.steps.size() != s.whole.steps.size()))
        bad("internal: round " + std::to_string(r) + " is not two halves like the whole plan");
      num.round = static_cast<int>(r);
      num.late_from = lag == 2 ? plan.steps.size() / 2 : plan.steps.size();
      emit_transfers(plan, pc, lay.packed(r), block_rows, num, rs, lay.ctr);
      num.step_base += static_cast<int>(plan.steps.size() / lag + s.issue.offset);
      num.plan_base += static_cast<int>(plan.steps.size());
      stage_outputs(s, plan, pc, lay.packed(r), rs);
    } catch (const std::length_error&) {
      return false;
    }
    for (auto& cr : rs) lay.st.push_back(std::move(cr));
  }
  return true;
}

RoundLayout fit_rounds(const CompileSetup& s) {
  RoundLayout lay;
  if (s.opt.rounds) {
    if (!lay_out_rounds(s, s.opt.rounds, lay))
      bad("a round does not fit a VMEM region of " + std::to_string(lay.vmem.rows) + " rows with " +
          std::to_string(s.opt.rounds) + " rounds; use more rounds");
    return lay;
  }
  // Rounds: as few as fit a region. A round fits when its working buffer, landing areas and
  // bf16 staging fit.
  std::size_t units = 1;
  for (int c = 0; c < s.chips; ++c)
    units = std::max(units,
                     (std::max(s.whole.input_len(c), s.whole.output_len(c)) + s.gran - 1) / s.gran);
  // Double until a round count fits, then bisect down to the fewest that fit.
  std::size_t lo = 0, hi = 0, R = 1, last = 0;
  while (hi == 0) {
    last = R;
    if (lay_out_rounds(s, R, lay)) {
      hi = R;
    } else {
      lo = R;
      if (R >= units)
        bad("a round of one " + std::to_string(s.gran * s.esz) +
            "-byte granule per chip does not fit a VMEM region of " +
            std::to_string(lay.vmem.rows) +
            " rows (working buffer plus a landing area for every incoming transfer)");
      R = std::min(units, R * 2);
    }
  }
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    last = mid;
    if (lay_out_rounds(s, mid, lay))
      hi = mid;
    else
      lo = mid;
  }
  if (last != hi) lay_out_rounds(s, hi, lay);  // the layout of the fewest rounds that fit
  return lay;
}

// ---- The checks and the setup.

void check_buffers(const CompileSetup& s, uint64_t hbm_bytes) {
  const std::size_t P = static_cast<std::size_t>(s.chips);
  if (s.bufs.in.size() != P || s.bufs.out.size() != P)
    bad("buffers: one input and one output address per chip (" + std::to_string(P) + " chips)");
  for (int c = 0; c < s.chips; ++c) {
    auto check = [&](uint64_t addr, std::size_t elems, const char* what) {
      const uint64_t bytes = (elems * s.esz + kBurst - 1) / kBurst * kBurst;
      if (addr % kBurst != 0)
        bad(std::string(what) + " buffer of chip " + std::to_string(c) + " at " +
            std::to_string(addr) + ": must be 64-byte aligned");
      if (addr + bytes > hbm_bytes)
        bad(std::string(what) + " buffer of chip " + std::to_string(c) + " (" +
            std::to_string(bytes) + " bytes at " + std::to_string(addr) +
            ") does not fit in the chip's " + std::to_string(hbm_bytes) + " bytes of HBM");
    };
    check(s.bufs.in[static_cast<std::size_t>(c)], s.whole.input_len(c), "input");
    check(s.bufs.out[static_cast<std::size_t>(c)], s.whole.output_len(c), "output");
  }
}

CompileSetup compile_setup(const MachineInfo& mi, const CollectivePlan& whole,
                           const CollectiveBuffers& bufs, const PodCollectiveOptions& opt) {
  CompileSetup s(mi.topo, whole, bufs, opt);
  const ChipShape& shape = mi.shape;
  s.chips = mi.topo.num_chips();
  s.lanes = shape.cols;
  s.bf16 = whole.spec.dtype == DType::kBf16;
  s.widen = s.bf16;
  s.pack = s.bf16 && whole.spec.collective == Collective::kAllReduce;
  s.esz = s.bf16 ? 2 : 4;
  s.gran = whole.spec.granule;
  s.row_align = std::max<uint32_t>(1, static_cast<uint32_t>(kBurst / (s.esz * s.lanes)));
  check_buffers(s, shape.hbm_bytes);
  const double rows_in_per_cycle =
      links_at_once(whole) * mi.link_bytes_per_cycle / (static_cast<double>(s.lanes) * 4.0);
  s.issue = plan_round_issue(whole, opt, rows_in_per_cycle);
  s.vmem = vmem_regions(opt, shape.vmem_rows, s.issue.max_regions, s.row_align);
  s.counters = counter_window(opt);
  return s;
}

}  // namespace tpu::pod_compile
