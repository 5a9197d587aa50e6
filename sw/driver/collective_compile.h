// The pieces PodDriver::compile (pod_driver.h) is made of, apart so that each can be read and
// tested alone: the round plan (how many rounds, how they overlap), the VMEM region layout, the
// cutting of a round's buffer into pieces of whole rows, the ICI counter assignment, the
// emitters (transfers and reductions, loads and stores, region tokens), and the scheduler with
// its chaining pass (docs/pod.md). Internal to sw/driver and its tests, not an interface.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pod_driver.h"

namespace tpu::pod_compile {

constexpr uint64_t kBurst = 64;
// Rounds use VMEM regions in turn, round r in region r % regions: one round at a time needs three
// (the store of round r - 1 and the load of round r + 1 run beside round r; docs/pod.md), and
// an all-reduce whose rounds overlap (round r's reduce-scatter beside round r - 1's all-gather)
// needs four. Fewer rounds use fewer regions.
constexpr uint32_t kRegions = 3;

// Throws std::invalid_argument("pod collective: " + what).
[[noreturn]] void bad(const std::string& what);

// ---- Ops: the commands of a chip's program with the rows they touch (collective_schedule.cc).

struct Range {
  uint32_t lo = 0, hi = 0;  // VMEM rows [lo, hi)
  bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
};

// One command of a chip's round, with what it touches (for ordering).
struct Op {
  enum Kind { kSend, kWait, kVpu, kDma } kind = kSend;
  // The step of a transfer or reduction in issue order: rounds that overlap share step numbers
  // (the scheduler's deadlock rule); -1 none.
  int step = -1;
  int plan_step = -1;     // the plan step, numbered across rounds one after another (labels)
  int slot = 0;           // the program slot the op is issued in (its round, or the round after)
  int phase = 0;          // within a step: 0 the sends, 1 the arrivals and reductions
  bool hoist = false;     // a DMA the scheduler moves up like a send (the last round's store)
  std::size_t block = 0;  // block index within its transfer
  int peer = -1;          // send: destination chip; wait: counter
  ChipCmd cmd;
  std::vector<Range> reads, writes;
};

// Whether any range of x overlaps any of y.
bool any(const std::vector<Range>& x, const std::vector<Range>& y);
// Whether op o reads or writes rows of r.
bool touches(const Op& o, const Range& r);
bool writes_any(const Op& o, const std::vector<Range>& rs);
// Whether op a, which comes after b in plan order, must stay after it: their rows, one engine's
// order, the deadlock rule (docs/pod.md).
bool conflicts(const Op& a, const Op& b);
// A VPU op of `a` whose write covers `dst_span` rows from a.dst_row.
Op vpu_op(const VpuCmdArgs& a, uint32_t dst_span);
void add_all(std::vector<Op>& to, const std::vector<Op>& from);

// ---- The ICI counter assignment (collective_layout.cc).

// The ICI counters of the chips: one per (receiving chip, sending chip, purpose), taken in the
// order they are first asked for from a window [base, base + count) of every chip.
class Counters {
 public:
  Counters() : Counters(0, 0, 0) {}
  Counters(int chips, int base, int count)
      : m_(static_cast<std::size_t>(chips)), base_(base), count_(count) {}
  // The counter of (dst, src, purpose); std::invalid_argument where dst's window is full.
  int get(int dst, int src, int purpose);
  // As get, but -1 where every counter is taken (for counters that only make things faster).
  int try_get(int dst, int src, int purpose);
  // How many counters chip `dst` uses.
  std::size_t used(int dst) const { return m_[static_cast<std::size_t>(dst)].size(); }

 private:
  std::vector<std::map<std::pair<int, int>, int>> m_;
  int base_, count_;
};
// Counter purposes: data on the + route, tokens, data on the - route. A 2-ring joins two chips
// by two links; sends hinted + and - take one each and may overtake each other, so each
// direction counts its own rows. Rows to be reduced, and rows the receiver forwards as they are
// in the next step, count on counters of their own (kRed, kFwd; each direction too), so each of
// those counters has one kind of consumer, which chain() may then let take the rows one by one
// as they land (a reduction's x_wait, a forwarding send's wait_rows). kChain: a chip's own
// counter (src = the peer a send goes to, + or - hint) for the rows its VPU writes and a send
// forwards as they are written (sig).
constexpr int kData = 0, kToken = 1, kDataMinus = 2, kRed = 3, kRedMinus = 4, kFwd = 5,
              kFwdMinus = 6, kChain = 7, kChainMinus = 8;
// The counter a transfer's rows count on at its destination. `next`: the plan's next step (null
// at the last). A routed transfer (the direct all_to_all) counts on its destination's one
// counter for round `round` modulo kRoundCounters, shared by every sender: the receiver waits
// for the sum (a counter per sender would need p - 1 of the chip's 64). Rounds that share one
// are kRoundCounters >= the regions apart, and a round's sends wait for the token its region's
// previous round lent after that round's wait (emit_transfers).
constexpr int kRoundCounters = 4;
int transfer_counter(Counters& ctr, const CollectivePlan& plan, const Step* next, const Transfer& t,
                     std::size_t round);
// The window opt gives the collective: [counter_base, counter_base + count); std::invalid_argument
// where it is not inside the chip's counters.
struct CounterWindow {
  int base = 0, count = 0;
};
CounterWindow counter_window(const PodCollectiveOptions& opt);

// ---- Pieces: a round's working buffer in whole rows (collective_layout.cc).

// A round's working buffer cut into pieces at every boundary a transfer or a layout segment
// has; each piece starts on its own row, so every transfer moves whole rows.
struct Pieces {
  std::vector<std::size_t> start, len;
  std::vector<uint32_t> rows, first_row;  // rows (padded), first row in the working buffer
  uint32_t total_rows = 0;
  std::size_t index(std::size_t elem) const {  // piece that starts at elem
    const auto it = std::lower_bound(start.begin(), start.end(), elem);
    return static_cast<std::size_t>(it - start.begin());
  }
  std::size_t containing(std::size_t elem) const {
    return static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), elem) -
                                    start.begin()) -
           1;
  }
  // Pieces covering [off, off + count), which starts and ends on cuts.
  std::vector<std::size_t> cover(std::size_t off, std::size_t count) const {
    std::vector<std::size_t> v;
    for (std::size_t j = index(off); j < start.size() && start[j] < off + count; ++j)
      v.push_back(j);
    return v;
  }
};

// `pairs`: every piece takes an even number of rows, so it packs into half as many (a bf16
// all-reduce's all-gather).
Pieces cut_pieces(const CollectivePlan& plan, unsigned lanes, uint32_t row_align, bool pairs);
// The same pieces packed two bf16 to a lane (VpuPackBf16): half the rows each. Only the rows
// count: a packed piece lives in the first half of its own rows (ChipRound::loc).
Pieces packed_pieces(const Pieces& pc);

// A piece list as rows: maps a row offset within the list to (piece, row in piece).
struct RowList {
  std::vector<std::size_t> pieces;
  std::vector<uint32_t> offset;  // first row of each piece within the list
  uint32_t rows = 0;
};
RowList row_list(const Pieces& p, const std::vector<std::size_t>& pieces);

// Contiguous runs of [o, o + n) of a row list whose pieces live at loc[piece]: (row, length,
// offset within the list).
struct Run {
  uint32_t row, len, at;
};
std::vector<Run> runs(const RowList& rl, const std::vector<uint32_t>& loc, uint32_t o, uint32_t n);

// How a piece's value is held in its rows: f32 lanes; bf16 in the lanes' bits [15:0] as a bf16
// input was loaded (an op reads it through its src_bf16 flag, widened exactly, so nothing widens
// a buffer first); or packed bf16 pairs in the first half of its rows (row i of the piece in
// bits [15:0] of row i, row h + i in [31:16]).
enum class Fmt : uint8_t { kF32, kBf16, kPacked };

// What the emitter knows about one chip within a round.
struct ChipRound {
  std::vector<uint32_t> loc;  // VMEM row of each piece's current value
  std::vector<Fmt> fmt;       // and how it is held
  uint32_t next_row = 0;      // next free row of the round's region
  uint32_t region_end = 0;
  std::map<std::size_t, uint32_t> stage;  // bf16: output pieces narrowed to rows of their own
  std::vector<Op> ops;
};

// A packed piece whose halves are whole bursts is stored straight from its packed rows: the
// lower halves by a bf16 DMA (a lane's bits [15:0]), the upper by one with `hi` ([31:16]).
// `packed`: the round's packed pieces (null when nothing packs).
bool stored_packed(const ChipRound& s, const Pieces* packed, std::size_t j, uint32_t row_align);

// ---- The round plan and the VMEM layout (collective_layout.cc).

// How the rounds of a collective are issued (from its one-round plan).
struct RoundIssue {
  // Overlapped rounds: round r's second half (its all-gather) is issued in slot r + 1, beside
  // round r + 1's first half; `lag` slots per round (1: one round after another).
  std::size_t lag = 1;
  std::size_t offset = 0;  // lag 2: steps from round r's second half to round r + 1's first
  bool early = false;      // forwarding sends' heads go before their rows (early_head)
  uint32_t max_regions = kRegions;  // lag + 2
};
// `rows_in_per_cycle`: rows a chip receives a cycle in a step (all its links at once).
RoundIssue plan_round_issue(const CollectivePlan& whole, const PodCollectiveOptions& opt,
                            double rows_in_per_cycle);
// Whether a plan is a reduce-scatter half followed by an all-gather half of as many steps.
bool halves(const CollectivePlan& plan);
// The most links one chip receives on in one step of a plan (distinct routes into it).
int links_at_once(const CollectivePlan& plan);

// The VMEM rows a collective may use, [base, base + avail), cut into `count` regions of `rows`
// rows each (a multiple of row_align); round r uses region r % count.
struct VmemRegions {
  uint32_t base = 0, avail = 0, row_align = 1;
  uint32_t max_count = kRegions, count = kRegions, rows = 0;
  // Regions for `rounds` rounds: min(max_count, rounds).
  void use(std::size_t rounds);
  uint32_t region(std::size_t r) const { return base + static_cast<uint32_t>(r % count) * rows; }
};
// The window opt gives (vmem_rows 0: the rest of the chip's rows), checked against the chip;
// std::invalid_argument where it does not fit or holds fewer than 8 rows a region.
VmemRegions vmem_regions(const PodCollectiveOptions& opt, uint32_t chip_rows, uint32_t max_regions,
                         uint32_t row_align);

// What compile() fixes before it lays out any round.
struct CompileSetup {
  CompileSetup(const Topology& t, const CollectivePlan& w, const CollectiveBuffers& b,
               const PodCollectiveOptions& o)
      : topo(t), whole(w), bufs(b), opt(o) {}
  const Topology& topo;
  const CollectivePlan& whole;  // the one-round plan (its spec's granule set)
  const CollectiveBuffers& bufs;
  const PodCollectiveOptions& opt;
  int chips = 0;
  unsigned lanes = 0;
  bool bf16 = false;
  bool widen = false;  // a bf16 reduction reduces in f32
  bool pack = false;   // ... and a bf16 all-reduce gathers bf16: two to a lane
  std::size_t esz = 4, gran = 1;
  uint32_t row_align = 1;  // rows of one 64-byte burst
  RoundIssue issue;
  VmemRegions vmem;  // the window, in max_regions regions
  CounterWindow counters;
};

// The setup of a collective on the machine `mi`, checked: the buffers (one of each per chip,
// 64-byte aligned, inside HBM), the VMEM rows and the counters opt gives it; std::invalid_argument
// naming the rule.
CompileSetup compile_setup(const MachineInfo& mi, const CollectivePlan& whole,
                           const CollectiveBuffers& bufs, const PodCollectiveOptions& opt);
void check_buffers(const CompileSetup& s, uint64_t hbm_bytes);

// Every round of the collective laid out: its pieces, block size, each chip's rows and ops (the
// transfers emitted), and the counters they took.
struct RoundLayout {
  std::vector<CollectiveRound> rounds;
  VmemRegions vmem;                  // the regions in use
  std::vector<Pieces> pcs, pks;      // per round: the pieces, and packed (pack only)
  std::vector<uint32_t> block_rows;  // per round
  std::vector<ChipRound> st;         // [round * chips + chip]
  Counters ctr;
  int chips = 0;
  bool pack = false;
  // The direct all_to_all (routed transfers): receivers lend their regions on one token counter
  // per sender and round parity (token_waits, collective_emit.cc), not one per pair.
  bool shared_tokens = false;
  ChipRound& at(std::size_t r, int c) {
    return st[r * static_cast<std::size_t>(chips) + static_cast<std::size_t>(c)];
  }
  const ChipRound& at(std::size_t r, int c) const {
    return st[r * static_cast<std::size_t>(chips) + static_cast<std::size_t>(c)];
  }
  const Pieces* packed(std::size_t r) const { return pack ? &pks[r] : nullptr; }
  // The most VMEM rows chip c uses, from the window's base.
  uint32_t rows_used(int c) const;
};

// Lays out the collective in R rounds (make_rounds may give fewer) into `lay`; false where a
// round does not fit its region. Emits every round's transfers (emit_transfers).
bool lay_out_rounds(const CompileSetup& s, std::size_t R, RoundLayout& lay);
// The layout of opt.rounds rounds, or else of the fewest that fit; std::invalid_argument where
// none does.
RoundLayout fit_rounds(const CompileSetup& s);

// ---- Emitters (collective_emit.cc).

// Step si of a round is step `step_base + si` in issue order and `plan_base + si` in the
// plan; its ops go in slot `round` (or `round + 1` from step `late_from` on).
struct StepNumbers {
  int step_base = 0, plan_base = 0, round = 0;
  std::size_t late_from = ~std::size_t{0};
};

// The transfers of one round's plan as ops on every chip (sends, waits, reductions), landing
// every transfer in fresh rows of its destination's region (std::length_error where the region
// is full). A bf16 reduction reads each piece as it is held (ChipRound::fmt) and writes f32.
// `packed` (a bf16 all-reduce; else null): the copies move the pieces as packed bf16 pairs.
void emit_transfers(const CollectivePlan& plan, const Pieces& pc, const Pieces* packed,
                    uint32_t block_rows, const StepNumbers& num, std::vector<ChipRound>& st,
                    Counters& ctr);

// Who sends to whom in each round: (src, dst) pairs, for the tokens that lend a region.
using SenderPairs = std::vector<std::set<std::pair<int, int>>>;
SenderPairs sender_pairs(const RoundLayout& lay);

// Round r's load on chip c (HBM input -> the region's working buffer), its store (final rows ->
// HBM output; the last round's hoisted, in the order its pieces become final) and a bf16
// collective's conversions of its outputs to bf16 staging rows.
std::vector<Op> load_ops(const CompileSetup& s, const RoundLayout& lay, std::size_t r, int c);
std::vector<Op> store_ops(const CompileSetup& s, const RoundLayout& lay, std::size_t r, int c);
std::vector<Op> narrow_ops(const CompileSetup& s, const RoundLayout& lay, std::size_t r, int c);

// Chip c's ops in program order, before scheduling: the loads, every slot's transfers with the
// DMAs spread over them, the region releases and tokens, the last store. Takes token counters.
std::vector<Op> chip_ops(const CompileSetup& s, RoundLayout& lay, const SenderPairs& pairs, int c);

// ---- The scheduler (collective_schedule.cc).

// Spreads `extra` (DMA pieces) over `ops`: one after each of evenly spaced waits (or ops, when
// there are fewer waits than pieces), the rest at the end, order kept.
std::vector<Op> interleave_ops(const std::vector<Op>& ops, const std::vector<Op>& extra);
// Chip `self`'s program from its ops: each send moved up as its dependencies allow, waits sunk
// (sink_waits: overlapped rounds), then chained (x_wait, wait_rows, sig; docs/isa.md); `steps`
// gets each command's plan step. Takes chaining counters from `ctr`.
std::vector<ChipCmd> schedule(const std::vector<Op>& ops, int self, Counters& ctr,
                              std::vector<int>* steps, bool sink_waits);

}  // namespace tpu::pod_compile
