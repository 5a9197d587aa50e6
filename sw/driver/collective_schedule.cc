// The collective compiler's scheduler (collective_compile.h): ops in program order, each send
// moved up to just after what it depends on, waits sunk, then the chaining pass that lets
// reductions and sends take rows as they land (docs/isa.md: x_wait, sig, wait_rows).
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "collective_compile.h"

namespace tpu::pod_compile {

// Whether any range of x overlaps any of y.
bool any(const std::vector<Range>& x, const std::vector<Range>& y) {
  for (const auto& r : x)
    for (const auto& s : y)
      if (r.overlaps(s)) return true;
  return false;
}

// Whether op o reads or writes rows of r.
bool touches(const Op& o, const Range& r) { return any(o.reads, {r}) || any(o.writes, {r}); }
bool writes_any(const Op& o, const std::vector<Range>& rs) { return any(o.writes, rs); }

bool conflicts(const Op& a, const Op& b) {  // a comes after b in plan order
  if (any(a.writes, b.reads) || any(a.writes, b.writes) || any(a.reads, b.writes)) return true;
  // Sends keep their program order among themselves: one that moved up past sends to other
  // chips bunched the sends by peer, so the queue stalled on one full send context while the
  // others ran dry (2x2: 0.80 -> 0.88 of the bound). Sends to one chip must stay in order anyway
  // (its waits take their rows in that order).
  if (a.kind == Op::kSend && b.kind == Op::kSend) return true;
  if (a.kind == Op::kDma && b.kind == Op::kDma) return true;  // the engine runs them in order
  if (a.kind == Op::kWait && b.kind == Op::kWait && a.peer == b.peer) return true;
  // Deadlock freedom: a wait of (step s, block k) comes after every send of an earlier step
  // and every send of step s with a block index <= k (docs/pod.md).
  if (a.kind == Op::kWait && b.kind == Op::kSend &&
      (b.step < a.step || (b.step == a.step && b.block <= a.block)))
    return true;
  return false;
}

Op vpu_op(const VpuCmdArgs& a, uint32_t dst_span) {
  Op op;
  op.kind = Op::kVpu;
  op.cmd = cmd_vpu(a);
  op.reads = {{a.x_row, a.x_row + a.rows}, {a.y_row, a.y_row + a.rows}};
  op.writes = {{a.dst_row, a.dst_row + dst_span}};
  return op;
}

void add_all(std::vector<Op>& to, const std::vector<Op>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

namespace {

// One chip's ops in issue order: waits and reductions in plan order, each send as early as its
// dependencies allow (a software pipeline across steps), but a send of a reduction's result
// behind the next reduction, so the VPU always has its next command. Waits are not hoisted: a
// wait blocks the in-order queue, so one placed early would hold back sends that could already
// go.
constexpr int kDmaAhead = static_cast<int>(kDmaInFlight) - 1;  // less the send's own load
bool is_load(const Op& op) { return op.kind == Op::kDma && !op.writes.empty(); }

bool is_store(const Op& o) { return o.kind == Op::kDma && o.writes.empty(); }

// One pass of chaining over a chip's scheduled ops (`sched`, with their commands `cmd`).
struct Chained {
  struct Link {  // a wait chained into the op that takes its rows
    std::size_t wait, op;
    int counter;
  };
  const std::vector<const Op*>& sched;
  std::vector<ChipCmd> cmd;
  std::vector<Link> links;
  std::vector<int> link_of;        // per op: the link of a dropped (chained) wait, else -1
  std::vector<std::size_t> order;  // positions of `sched` in program order (dropped waits left out)
  std::set<int> bad;               // counters to leave unchained
  std::size_t dropped = 0;         // waits chained into the ops that take their rows

  explicit Chained(const std::vector<const Op*>& s) : sched(s), link_of(s.size(), -1) {
    for (const Op* op : sched) cmd.push_back(op->cmd);
  }
  bool is_dropped(std::size_t i) const { return link_of[i] >= 0; }
};

// Waits into the reductions or sends that take their rows next (counters in `off` excepted).
void chain_waits(Chained& ch, const std::set<int>& off) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  const auto tie_of = [](const ChipCmd& c) { return CmdIciSend::decode(c).tie; };
  std::map<int, std::vector<std::size_t>> waits;
  for (std::size_t i = 0; i < n; ++i)
    if (sched[i]->kind == Op::kWait) waits[sched[i]->peer].push_back(i);
  for (const auto& [c, ws] : waits) {
    if (off.count(c)) continue;
    std::vector<Chained::Link> mine;
    bool ok = true;
    for (std::size_t i : ws) {
      const Op& w = *sched[i];
      const CmdIciWait wc = CmdIciWait::decode(w.cmd);
      if (w.writes.size() != 1 || wc.value != w.writes[0].hi - w.writes[0].lo) {
        ok = false;
        break;
      }
      const Range r = w.writes[0];
      Chained::Link l{i, n, c};
      bool store_between = false;
      for (std::size_t j = i + 1; j < n && ok; ++j) {
        const Op& o = *sched[j];
        if (o.kind == Op::kWait && o.peer == c) ok = false;
        if (!ok || !touches(o, r)) continue;
        if (is_store(o)) {  // it moves behind the send (place_stores)
          store_between = true;
          continue;
        }
        if (o.kind == Op::kVpu && !store_between) {
          const CmdVpu v = CmdVpu::decode(ch.cmd[j]);
          if (v.x_mem == static_cast<uint32_t>(Mem::kVmem) && v.x_row == r.lo && v.rows == wc.value)
            l.op = j;
        } else if (o.kind == Op::kSend) {
          const CmdIciSend v = CmdIciSend::decode(ch.cmd[j]);
          if (!v.wait_rows && v.src_mem == static_cast<uint32_t>(Mem::kVmem) && v.src_row == r.lo &&
              v.rows == wc.value)
            l.op = j;
        }
        break;
      }
      if (!ok || l.op == n) {
        ok = false;
        break;
      }
      mine.push_back(l);
    }
    // One kind of consumer: the VPU, or sends to one chip with one hint.
    for (const Chained::Link& l : mine) {
      const std::size_t a = l.op, b = mine[0].op;
      if (sched[a]->kind != sched[b]->kind ||
          (sched[a]->kind == Op::kSend &&
           (sched[a]->peer != sched[b]->peer || tie_of(ch.cmd[a]) != tie_of(ch.cmd[b]))))
        ok = false;
    }
    if (!ok) continue;
    for (const Chained::Link& l : mine) {
      ch.link_of[l.wait] = static_cast<int>(ch.links.size());
      ch.links.push_back(l);
      if (sched[l.op]->kind == Op::kVpu) {
        CmdVpu v = CmdVpu::decode(ch.cmd[l.op]);
        v.x_wait = 1;
        v.x_counter = static_cast<uint32_t>(c);
        ch.cmd[l.op] = v.encode();
      } else {
        CmdIciSend v = CmdIciSend::decode(ch.cmd[l.op]);
        v.wait_rows = 1;
        v.wait_counter = static_cast<uint32_t>(c);
        ch.cmd[l.op] = v.encode();
      }
    }
  }
}

// Reductions whose result the next send of those rows forwards: per (peer, hint) counter of
// chip `self`, the pairs in program order.
void chain_sigs(Chained& ch, int self, Counters& ctr) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  std::map<std::pair<int, uint32_t>, std::vector<std::pair<std::size_t, std::size_t>>> sigs;
  for (std::size_t i = 0; i < n; ++i) {
    if (sched[i]->kind != Op::kVpu) continue;
    const CmdVpu v = CmdVpu::decode(ch.cmd[i]);
    if (v.dst_mem != static_cast<uint32_t>(Mem::kVmem) || v.dst_stride > 1) continue;
    const Range d{v.dst_row, v.dst_row + v.rows};
    for (std::size_t j = i + 1; j < n; ++j) {
      const Op& o = *sched[j];
      if (ch.is_dropped(j) || !touches(o, d)) continue;
      if (is_store(o)) continue;  // it waits for the VPU
      if (o.kind == Op::kSend) {
        const CmdIciSend sd = CmdIciSend::decode(ch.cmd[j]);
        if (!sd.wait_rows && sd.src_mem == static_cast<uint32_t>(Mem::kVmem) &&
            sd.src_row == d.lo && sd.rows == v.rows)
          sigs[{o.peer, sd.tie}].push_back({i, j});
      }
      break;
    }
  }
  for (const auto& [key, pairs] : sigs) {
    bool in_order = true;  // the send context takes the rows in the order the VPU writes them
    for (std::size_t k = 1; k < pairs.size(); ++k)
      if (pairs[k].second <= pairs[k - 1].second) in_order = false;
    const int c =
        in_order ? ctr.try_get(self, key.first, (key.second & 2u) ? kChainMinus : kChain) : -1;
    if (c < 0) continue;
    for (const auto& [i, j] : pairs) {
      CmdVpu v = CmdVpu::decode(ch.cmd[i]);
      v.sig = 1;
      v.sig_counter = static_cast<uint32_t>(c);
      ch.cmd[i] = v.encode();
      CmdIciSend sd = CmdIciSend::decode(ch.cmd[j]);
      sd.wait_rows = 1;
      sd.wait_local = 1;  // its rows are the VPU's, which keeps later readers off them
      sd.wait_counter = static_cast<uint32_t>(c);
      ch.cmd[j] = sd.encode();
    }
  }
}

// The program order. Stores of a chained send's rows that came before it move behind it and
// the sends that follow it (right behind it, a store would hold them in the in-order queue
// until its send is done; sends write nothing): behind the last such send among the chained
// sends whose rows the store reads, past no DMA (the engine keeps their order) and no write of
// what it reads (else the counters involved go to `bad`).
void place_stores(Chained& ch) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  std::vector<std::size_t> target(n, n);  // a moved store: the op it goes behind
  for (std::size_t k = 0; k < n; ++k) {
    if (!is_store(*sched[k])) continue;
    for (const Chained::Link& l : ch.links)
      if (sched[l.op]->kind == Op::kSend && l.wait < k && l.op > k &&
          touches(*sched[k], sched[l.wait]->writes[0]))
        target[k] = target[k] == n ? l.op : std::max(target[k], l.op);
  }
  std::size_t last = 0;  // moved stores keep their order
  for (std::size_t k = 0; k < n; ++k) {
    if (target[k] == n) continue;
    std::size_t p = std::max(target[k], last);
    while (p + 1 < n &&
           (ch.is_dropped(p + 1) || target[p + 1] != n || sched[p + 1]->kind == Op::kSend))
      ++p;
    target[k] = last = p;
    for (std::size_t j = k + 1; j <= p; ++j)
      if ((sched[j]->kind == Op::kDma && target[j] == n) || writes_any(*sched[j], sched[k]->reads))
        for (const Chained::Link& l : ch.links)
          if (l.wait < k && l.op > k && touches(*sched[k], sched[l.wait]->writes[0]))
            ch.bad.insert(l.counter);
  }
  std::vector<std::vector<std::size_t>> behind(n);
  for (std::size_t k = 0; k < n; ++k)
    if (target[k] != n) behind[target[k]].push_back(k);
  for (std::size_t i = 0; i < n; ++i) {
    if (!ch.is_dropped(i) && target[i] == n) ch.order.push_back(i);
    for (std::size_t k : behind[i]) ch.order.push_back(k);  // (i may be a dropped wait)
    ch.dropped += ch.is_dropped(i) ? 1 : 0;
  }
}

// The last round's stores feed nothing: each goes behind the sends that follow it and take no
// rows as they come (their rows are there, so they issue at once and go out). Placed right
// after the wait that finished their rows, stores took the in-order queue a cycle or two each
// ahead of the first all-gather step of a small all-reduce, whose chains of forwarded rows then
// started later (4x4, 4 KiB: 247 -> 244 cycles). Sends that take rows as they come could hold a
// store behind them for as long as their rows take to come; those keep their place.
void stores_behind_sends(Chained& ch) {
  auto& o = ch.order;
  for (std::size_t q = o.size(); q-- > 0;) {
    if (!ch.sched[o[q]]->hoist || !is_store(*ch.sched[o[q]])) continue;
    const Op& store = *ch.sched[o[q]];
    auto free_send = [&](std::size_t p) {
      return p < o.size() && ch.sched[o[p]]->kind == Op::kSend &&
             CmdIciSend::decode(ch.cmd[o[p]]).wait_rows == 0;
    };
    std::size_t p = q;  // the store's place
    for (;;) {
      std::size_t by = 0;  // ops it passes: a free send, or a wait and the free send after it
      if (free_send(p + 1))
        by = 1;
      else if (p + 1 < o.size() && ch.sched[o[p + 1]]->kind == Op::kWait && free_send(p + 2) &&
               !conflicts(*ch.sched[o[p + 1]], store))
        by = 2;
      if (by == 0) break;
      std::rotate(o.begin() + static_cast<std::ptrdiff_t>(p),
                  o.begin() + static_cast<std::ptrdiff_t>(p + 1),
                  o.begin() + static_cast<std::ptrdiff_t>(p + 1 + by));
      p += by;
    }
  }
}

// Whether the scoreboard holds op `o` while op `c` is in flight (a hazard between their ranges).
bool held_by(const Op& o, const Op& c) {
  return any(o.reads, c.writes) || any(o.writes, c.reads) || any(o.writes, c.writes);
}

// Every other op that touches a chained wait's rows after it (up to the next write of them)
// comes after the chained op; a reduction's x rows have no other reader that only reads, and
// none that the scoreboard does not hold behind the reduction (the VPU keeps no range of the
// rows it waits for: a bf16 all-reduce's second unpack of a packed row read it before it
// landed). A counter that breaks this goes to `bad`.
void check_links(Chained& ch) {
  const auto& sched = ch.sched;
  const std::size_t n = sched.size();
  std::vector<std::size_t> pos(n, n);
  for (std::size_t q = 0; q < ch.order.size(); ++q) pos[ch.order[q]] = q;
  for (const Chained::Link& l : ch.links) {
    const Range r = sched[l.wait]->writes[0];
    const bool vpu = sched[l.op]->kind == Op::kVpu;
    for (std::size_t j = l.wait + 1; j < n; ++j) {
      if (j == l.op || ch.is_dropped(j) || !touches(*sched[j], r)) continue;
      if (pos[j] < pos[l.op] ||
          (vpu && (sched[j]->writes.empty() || !held_by(*sched[j], *sched[l.op]))))
        ch.bad.insert(l.counter);
      if (writes_any(*sched[j], {r})) break;
    }
  }
}

Chained chain_once(const std::vector<const Op*>& sched, int self, Counters& ctr,
                   const std::set<int>& off) {
  Chained ch(sched);
  chain_waits(ch, off);
  chain_sigs(ch, self, ctr);
  place_stores(ch);
  stores_behind_sends(ch);
  check_links(ch);
  return ch;
}

// A chaining pass's program, checked: every op once, but the waits chained into others.
std::vector<ChipCmd> chained_program(const Chained& res, std::vector<int>* steps) {
  const auto& sched = res.sched;
  std::vector<bool> seen(sched.size(), false);
  for (std::size_t i : res.order) {
    if (seen[i]) bad("internal: chaining placed a command twice");
    seen[i] = true;
  }
  if (res.order.size() + res.dropped != sched.size()) bad("internal: chaining lost a command");
  std::vector<ChipCmd> out;
  steps->clear();
  for (std::size_t i : res.order) {
    out.push_back(res.cmd[i]);
    steps->push_back(sched[i]->plan_step);
  }
  return out;
}

// Chaining (docs/isa.md: x_wait, sig, wait_rows). In the scheduled ops of chip `self`:
//  - a wait whose rows the next op to touch them reduces (its x, exactly those rows) goes into
//    that reduction as x_wait: the VPU reads each row as it lands;
//  - a wait whose rows the next op to touch them sends on, exactly those rows, goes into that
//    send as wait_rows; a store of those rows in between moves behind the send (and the sends
//    that follow it), which it then waits for: the send's rows count as written until it is done;
//  - a reduction whose result the next send of those rows sends on, exactly, signals each row it
//    writes (sig) on a counter of this chip, on which that send waits row by row (wait_local:
//    the reduction's own scoreboard entry keeps later readers off those rows, not the send).
// A counter's waits are chained all or none, into one kind of consumer (the VPU, or sends to one
// chip with one hint, hence one send context, which takes rows in program order), so no two
// consumers ever take from one counter at once. The ops a wait passes do not touch its rows, and
// a wait placed later only lets the ops before it go earlier (the deadlock rule asks waits to
// come late enough, never early); a chained send or reduction waits for rows that an earlier
// step produces, as the wait did. Every other op that touches a chained wait's rows after it
// must come after its chained send (a reduction's x rows: no other op), up to the next write of
// those rows; a counter that breaks this, or whose stores cannot move, is left unchained and the
// program is built again. Returns the program, with the plan step of each command.
std::vector<ChipCmd> chain(const std::vector<const Op*>& sched, int self, Counters& ctr,
                           std::vector<int>* steps) {
  std::set<int> off;
  for (;;) {  // each pass that fails leaves at least one more counter unchained
    Chained res = chain_once(sched, self, ctr, off);
    if (!res.bad.empty()) {
      off.insert(res.bad.begin(), res.bad.end());
      continue;
    }
    return chained_program(res, steps);
  }
}

}  // namespace

std::vector<ChipCmd> schedule(const std::vector<Op>& ops, int self, Counters& ctr,
                              std::vector<int>* steps, bool sink_waits) {
  std::vector<const Op*> sched;
  for (const Op& op : ops) {
    std::size_t pos = sched.size();
    if (op.kind == Op::kSend || op.hoist) {  // just after the last op it must follow
      while (pos > 0 && !conflicts(op, *sched[pos - 1])) --pos;
      // A send of a reduction's rows goes behind the next reduction (and the waits before it):
      // right after its own it would hold that one in the in-order queue until its own is done,
      // and the VPU, which takes the next command while one runs, would run dry.
      auto after_vpu = [&](std::size_t back) {
        return pos >= back && sched[pos - back]->kind == Op::kVpu &&
               conflicts(op, *sched[pos - back]);
      };
      if (op.kind == Op::kSend &&
          (after_vpu(1) || (after_vpu(2) && sched[pos - 1]->kind == Op::kSend))) {
        std::size_t q = pos;
        while (q < sched.size() && sched[q]->kind == Op::kWait && !conflicts(*sched[q], op)) ++q;
        if (q < sched.size() && sched[q]->kind == Op::kVpu && !conflicts(*sched[q], op))
          pos = q + 1;
      }
      // A send of loaded rows goes behind the loads queued after its own (up to kDmaAhead): the
      // DMA engine runs that many reads beside the oldest, and a send right after its load
      // would hold the next loads in the in-order queue until that load is done.
      if (op.kind == Op::kSend && pos > 0 && is_load(*sched[pos - 1]))
        for (int k = 0; k < kDmaAhead && pos < sched.size() && is_load(*sched[pos]); ++k) ++pos;
    }
    sched.insert(sched.begin() + static_cast<std::ptrdiff_t>(pos), &op);
  }
  // With overlapped rounds each wait then goes as late as it may: just before the first op that
  // must follow it. A wait blocks the in-order queue; one for rows that only a later slot's
  // store reads held the next slot's commands behind it while its rows came (a 4x4x4: ~190
  // cycles a round). Later waits only let the ops before them go earlier (the deadlock rule
  // asks waits to come late enough, never early). Serial rounds keep each round's waits
  // before the next round's.
  for (std::size_t i = sched.size(); sink_waits && i-- > 0;) {
    if (sched[i]->kind != Op::kWait) continue;
    std::size_t j = i;
    while (j + 1 < sched.size() && !conflicts(*sched[j + 1], *sched[i])) ++j;
    std::rotate(sched.begin() + static_cast<std::ptrdiff_t>(i),
                sched.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                sched.begin() + static_cast<std::ptrdiff_t>(j) + 1);
  }
  return chain(sched, self, ctr, steps);
}

// Spreads `extra` (DMA pieces) over `ops`: one after each of evenly spaced waits (or ops, when
// there are fewer waits than pieces), the rest at the end, order kept.
std::vector<Op> interleave_ops(const std::vector<Op>& ops, const std::vector<Op>& extra_in) {
  if (extra_in.empty()) return ops;
  // The first piece goes before the first op: placed after the first wait it idled the DMA
  // engine while that wait held the queue at every round's start (2x2: 0.82 -> 0.85).
  std::vector<Op> out(extra_in.begin(), extra_in.begin() + 1);
  const std::vector<Op> extra(extra_in.begin() + 1, extra_in.end());
  if (extra.empty()) {
    out.insert(out.end(), ops.begin(), ops.end());
    return out;
  }
  std::vector<std::size_t> slots;  // positions after which a piece may go
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == Op::kWait) slots.push_back(i);
  if (slots.size() < extra.size()) {
    slots.clear();
    for (std::size_t i = 0; i < ops.size(); ++i) slots.push_back(i);
  }
  std::vector<std::size_t> at(ops.size(), 0);  // pieces after op i
  if (!slots.empty()) {
    const std::size_t k = std::min(extra.size(), slots.size());
    for (std::size_t j = 0; j < k; ++j) ++at[slots[j * slots.size() / k]];
  }
  std::size_t e = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    out.push_back(ops[i]);
    for (std::size_t j = 0; j < at[i]; ++j) out.push_back(extra[e++]);
  }
  while (e < extra.size()) out.push_back(extra[e++]);
  return out;
}

}  // namespace tpu::pod_compile
