#include "spmd_program.h"

#include <algorithm>
#include <stdexcept>

#include "tpu/perf.h"

namespace tpu {

void ChipProgram::append(const std::vector<ChipCmd>& c, const CmdLabel& label) {
  cmds.insert(cmds.end(), c.begin(), c.end());
  labels.insert(labels.end(), c.size(), label);
}

void ChipProgram::append(const ChipProgram& part) {
  if (part.labels.size() != part.cmds.size())
    throw std::logic_error("spmd program: a part with " + std::to_string(part.cmds.size()) +
                           " commands and " + std::to_string(part.labels.size()) + " labels");
  cmds.insert(cmds.end(), part.cmds.begin(), part.cmds.end());
  labels.insert(labels.end(), part.labels.begin(), part.labels.end());
}

ChipProgram ChipProgram::relabeled(int phase, int piece) const {
  ChipProgram p = *this;
  for (CmdLabel& l : p.labels) {
    l.phase = phase;
    l.piece = piece;
  }
  return p;
}

std::size_t SpmdProgram::commands() const {
  std::size_t n = 0;
  for (const ChipProgram& c : chips_) n += c.size();
  return n;
}

std::vector<std::vector<ChipCmd>> SpmdProgram::all_cmds() const {
  std::vector<std::vector<ChipCmd>> v;
  for (const ChipProgram& c : chips_) v.push_back(c.cmds);
  return v;
}

int SpmdProgram::add_phase(SpmdPhase phase) {
  phases_.push_back(std::move(phase));
  return static_cast<int>(phases_.size()) - 1;
}

int SpmdProgram::add_phase(const std::string& compute_name) {
  SpmdPhase p;
  p.name = compute_name;
  return add_phase(std::move(p));
}

void SpmdProgram::append(int c, const std::vector<ChipCmd>& cmds, int phase, int piece) {
  chip(c).append(cmds, CmdLabel{phase, -1, piece});
}

void SpmdProgram::append_all(const std::vector<std::vector<ChipCmd>>& per_chip, int phase,
                             int piece) {
  if (per_chip.size() != chips_.size())
    throw std::logic_error("spmd program: " + std::to_string(per_chip.size()) +
                           " chips' commands for a program of " + std::to_string(chips_.size()));
  for (std::size_t c = 0; c < per_chip.size(); ++c)
    append(static_cast<int>(c), per_chip[c], phase, piece);
}

SpmdProgram SpmdProgram::without_halt() const {
  SpmdProgram p;
  p.phases_ = phases_;
  p.chips_.resize(chips_.size());
  for (std::size_t c = 0; c < chips_.size(); ++c)
    for (std::size_t i = 0; i < chips_[c].size(); ++i)
      if (chips_[c].cmds[i].op() != ChipOp::kHalt) {
        p.chips_[c].cmds.push_back(chips_[c].cmds[i]);
        p.chips_[c].labels.push_back(chips_[c].labels[i]);
      }
  return p;
}

std::string SpmdProgram::label_text(const CmdLabel& l) const {
  std::string s = l.phase >= 0 ? phase(l.phase).name : std::string();
  if (l.step >= 0) s += " | step " + std::to_string(l.step);
  return s;
}

std::vector<std::pair<std::size_t, std::string>> SpmdProgram::trace_labels(int c) const {
  std::vector<std::pair<std::size_t, std::string>> out;
  const ChipProgram& p = chip(c);
  std::string last;
  for (std::size_t i = 0; i < p.size(); ++i) {
    std::string l = label_text(i < p.labels.size() ? p.labels[i] : CmdLabel{});
    if ((i == 0 || l != last) && !l.empty()) out.push_back({i, l});
    last = std::move(l);
  }
  return out;
}

int SpmdProgram::phase_of_label(const std::string& label) const {
  for (std::size_t p = 0; p < phases_.size(); ++p) {
    const std::string& n = phases_[p].name;
    if (label == n || label.rfind(n + " | ", 0) == 0) return static_cast<int>(p);
  }
  return -1;
}

std::vector<ChipCmd> without_halt(const std::vector<ChipCmd>& cmds) {
  std::vector<ChipCmd> out;
  for (const ChipCmd& c : cmds)
    if (c.op() != ChipOp::kHalt) out.push_back(c);
  return out;
}

double estimate_cycles(const ChipCmd& c, const MachineInfo& mi) {
  const ChipShape& s = mi.shape;
  switch (c.op()) {
    case ChipOp::kDma: {
      const CmdDma d = CmdDma::decode(c);
      const double bytes = static_cast<double>(d.rows) * d.seg_bytes;
      const double peak = static_cast<double>(std::max(1u, s.hbm_channels)) * 32.0;
      return std::max(static_cast<double>(d.rows), hbm_cycles(bytes, peak));
    }
    case ChipOp::kDmaIdx: {  // one table row per id, one row a cycle at best
      const CmdDmaIdx d = CmdDmaIdx::decode(c);
      const double bytes = static_cast<double>(d.rows) * d.seg_bytes;
      const double peak = static_cast<double>(std::max(1u, s.hbm_channels)) * 32.0;
      return 1.0 + std::max(static_cast<double>(d.rows), hbm_cycles(bytes, peak));
    }
    case ChipOp::kLoadW:
      return static_cast<double>(s.rows) / std::max(1u, s.wrows);
    case ChipOp::kMatmul:
      return CmdMatmul::decode(c).rows;
    case ChipOp::kVpu:
      return CmdVpu::decode(c).rows;
    case ChipOp::kVrow: {
      const CmdVrow v = CmdVrow::decode(c);
      return static_cast<double>(v.rows) * v.beats;
    }
    case ChipOp::kIciSend: {
      const CmdIciSend x = CmdIciSend::decode(c);
      return static_cast<double>(x.count_only ? 1u : x.rows) * std::max(1u, mi.link_gap);
    }
    default:
      return 0;
  }
}

namespace {

// The unit a command occupies (ChipOp's DMA, LOADW, MATMUL, VPU, ICI_SEND), -1: none.
int unit_of(const ChipCmd& c) {
  switch (c.op()) {
    case ChipOp::kDma:
    case ChipOp::kDmaIdx: return 0;
    case ChipOp::kLoadW: return 1;
    case ChipOp::kMatmul: return 2;
    case ChipOp::kVpu: return 3;
    case ChipOp::kVrow: return 3;
    case ChipOp::kIciSend: return 4;
    default: return -1;
  }
}

// In-order issue over units that run side by side: a command starts once the one before it
// started and its unit is free. Returns each command's start; *end: when the last unit is done.
std::vector<double> issue_times(const std::vector<ChipCmd>& p, const MachineInfo& mi,
                                double* end) {
  std::vector<double> t(p.size());
  double free[5] = {0, 0, 0, 0, 0};
  double at = 0, last = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const int u = unit_of(p[i]);
    if (u >= 0) at = std::max(at, free[u]);
    t[i] = at;
    if (u >= 0) free[u] = at + estimate_cycles(p[i], mi);
    if (u >= 0) last = std::max(last, free[u]);
  }
  *end = std::max(last, at);
  return t;
}

}  // namespace

std::vector<double> estimate_starts(const std::vector<ChipCmd>& p, const MachineInfo& mi) {
  double end = 0;
  return issue_times(p, mi, &end);
}

double estimate_span(const std::vector<ChipCmd>& p, const MachineInfo& mi) {
  double end = 0;
  issue_times(p, mi, &end);
  return end;
}

std::vector<bool> merge_order(std::size_t na, std::size_t nb) {
  std::vector<bool> from_a;
  from_a.reserve(na + nb);
  std::size_t i = 0, j = 0;
  // Take a's next command while i / |a| <= j / |b| (in integers: i |b| <= j |a|).
  while (i < na || j < nb) {
    const bool a = j >= nb || (i < na && i * nb <= j * na);
    from_a.push_back(a);
    (a ? i : j)++;
  }
  return from_a;
}

std::vector<bool> merge_order(const std::vector<ChipCmd>& a, const std::vector<ChipCmd>& b,
                              MergeOrder order, const MachineInfo* mi) {
  if (order == MergeOrder::kByCount) return merge_order(a.size(), b.size());
  if (!mi) throw std::logic_error("spmd program: a merge by time needs the machine");
  // Each command's start as a fraction of its program's estimated time; a program with no
  // estimated time falls back to its command count.
  auto starts = [&](const std::vector<ChipCmd>& p) {
    const std::vector<double> t = estimate_starts(p, *mi);
    const double end = estimate_span(p, *mi);
    std::vector<double> f(p.size());
    for (std::size_t i = 0; i < p.size(); ++i)
      f[i] = end > 0 ? t[i] / end : static_cast<double>(i) / static_cast<double>(p.size());
    return f;
  };
  const std::vector<double> ta = starts(a), tb = starts(b);
  std::vector<bool> from_a;
  from_a.reserve(a.size() + b.size());
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const bool take_a = j >= b.size() || (i < a.size() && ta[i] <= tb[j]);
    from_a.push_back(take_a);
    (take_a ? i : j)++;
  }
  return from_a;
}

std::vector<bool> merge_order(std::size_t na, std::size_t nb,
                              const std::vector<std::size_t>& a_needs,
                              const std::vector<std::size_t>& b_needs) {
  std::vector<bool> from_a;
  from_a.reserve(na + nb);
  std::size_t i = 0, j = 0, i0 = 0, j0 = 0;
  while (i < na || j < nb) {
    const bool pref_a = j >= nb || (i < na && (i - i0) * (nb - j0) <= (j - j0) * (na - i0));
    const bool ok_a = i < na && (i >= a_needs.size() || a_needs[i] <= j);
    const bool ok_b = j < nb && (j >= b_needs.size() || b_needs[j] <= i);
    if (!ok_a && !ok_b)
      throw std::logic_error("spmd program: a merge whose next commands wait on each other (" +
                             std::to_string(i) + " of " + std::to_string(na) + ", " +
                             std::to_string(j) + " of " + std::to_string(nb) + ")");
    const bool take_a = pref_a ? ok_a : !ok_b;
    from_a.push_back(take_a);
    (take_a ? i : j)++;
    if (take_a != pref_a) {  // gave way: spread what is left of each from here
      i0 = i;
      j0 = j;
    }
  }
  return from_a;
}

void set_early_heads(std::vector<ChipCmd>& prog, bool on) {
  for (ChipCmd& c : prog) {
    if (c.op() != ChipOp::kIciSend) continue;
    CmdIciSend s = CmdIciSend::decode(c);
    s.early_head = on && s.wait_rows ? 1u : 0u;
    c = s.encode();
  }
}

namespace {

ChipProgram merge_in(const ChipProgram& a, const ChipProgram& b, const std::vector<bool>& order) {
  ChipProgram out;
  out.cmds.reserve(a.size() + b.size());
  out.labels.reserve(a.size() + b.size());
  std::size_t i = 0, j = 0;
  for (bool from_a : order) {
    const ChipProgram& p = from_a ? a : b;
    std::size_t& k = from_a ? i : j;
    out.cmds.push_back(p.cmds[k]);
    out.labels.push_back(k < p.labels.size() ? p.labels[k] : CmdLabel{});
    ++k;
  }
  // Two programs that both send: one's packets could cross the links where the other's early
  // heads wait for their rows.
  const auto sends = [](const std::vector<ChipCmd>& p) {
    return std::any_of(p.begin(), p.end(),
                       [](const ChipCmd& c) { return c.op() == ChipOp::kIciSend; });
  };
  if (sends(a.cmds) && sends(b.cmds)) set_early_heads(out.cmds, false);
  return out;
}

}  // namespace

ChipProgram merge(const ChipProgram& a, const ChipProgram& b, MergeOrder order,
                  const MachineInfo* mi) {
  return merge_in(a, b, merge_order(a.cmds, b.cmds, order, mi));
}

ChipProgram merge(const ChipProgram& a, const ChipProgram& b,
                  const std::vector<std::size_t>& a_needs,
                  const std::vector<std::size_t>& b_needs) {
  return merge_in(a, b, merge_order(a.size(), b.size(), a_needs, b_needs));
}

std::vector<ChipCmd> merge(const std::vector<ChipCmd>& a, const std::vector<ChipCmd>& b,
                           MergeOrder order, const MachineInfo* mi) {
  return merge(ChipProgram{a, {}}, ChipProgram{b, {}}, order, mi).cmds;
}

SpmdProgram merge(const SpmdProgram& a, const SpmdProgram& b, MergeOrder order,
                  const MachineInfo* mi) {
  if (a.num_chips() != b.num_chips())
    throw std::logic_error("spmd program: merging programs of " + std::to_string(a.num_chips()) +
                           " and " + std::to_string(b.num_chips()) + " chips");
  SpmdProgram out(a.num_chips());
  for (const SpmdPhase& p : a.phases()) out.add_phase(p);
  const int shift = static_cast<int>(a.phases().size());
  for (const SpmdPhase& p : b.phases()) out.add_phase(p);
  for (int c = 0; c < a.num_chips(); ++c) {
    ChipProgram bc = b.chip(c);
    for (CmdLabel& l : bc.labels)
      if (l.phase >= 0) l.phase += shift;
    out.append(c, merge(a.chip(c), bc, order, mi));
  }
  return out;
}

}  // namespace tpu
