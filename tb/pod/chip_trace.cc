#include "chip_trace.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tpu {

void ChipTraceRec::set(int chip, const TraceOptions& o) {
  chip_ = chip;
  opt_ = o;
  if (!o.enabled) {
    words_.clear();
    labels_.clear();
    for (auto& p : pending_) p.clear();
    waiting_ = false;
  }
  words_base_ = pushed_;
}

void ChipTraceRec::on_push(const std::vector<ChipCmd>& cmds) {
  if (opt_.enabled) {
    if (words_.empty()) words_base_ = pushed_;
    words_.insert(words_.end(), cmds.begin(), cmds.end());
  }
  pushed_ += cmds.size();
}

void ChipTraceRec::on_clear() {
  pushed_ = 0;
  words_base_ = 0;
  words_.clear();
  labels_.clear();
}

void ChipTraceRec::label(const std::string& l) {
  if (opt_.enabled) labels_.emplace_back(pushed_, l);
}

void ChipTraceRec::emit(TraceEvent e, unsigned track) {
  uint64_t& prev = track_end_[track];
  e.begin = std::max(e.issue, prev);
  e.end = std::max(e.done, prev);
  prev = e.end;
  const bool in =
      e.begin < opt_.to && (e.end > opt_.from || (e.end == e.begin && e.begin >= opt_.from));
  if (in) events_.push_back(std::move(e));
}

void ChipTraceRec::on_cycle(uint64_t t, const ChipTracePort& p) {
  // Completions first: a unit's done pulse belongs to its oldest command in flight.
  for (unsigned b = 0; b < pending_.size(); ++b) {
    if (!((p.done >> b) & 1u) || pending_[b].empty()) continue;
    TraceEvent e = std::move(pending_[b].front());
    pending_[b].pop_front();
    e.done = t;
    const unsigned track = b < 4 ? static_cast<unsigned>(e.unit) : kNumTraceUnits + (b - 4);
    emit(std::move(e), track);
  }
  if (p.issue) {
    TraceEvent e;
    e.chip = chip_;
    e.issue = t;
    e.index = p.index;
    e.op = p.op;
    const uint64_t idx = p.index;
    while (!words_.empty() && words_base_ < idx) {
      words_.pop_front();
      ++words_base_;
    }
    if (!words_.empty() && words_base_ == idx) {
      e.cmd = words_.front();
      words_.pop_front();
      ++words_base_;
    }
    while (labels_.size() > 1 && labels_[1].first <= idx) labels_.pop_front();
    if (!labels_.empty() && labels_.front().first <= idx) e.label = labels_.front().second;
    switch (static_cast<ChipOp>(p.op)) {
      case ChipOp::kDma:
      case ChipOp::kDmaIdx:  // the DMA engine's queue: done in order with the DMAs
        e.unit = TraceUnit::kDma;
        pending_[0].push_back(std::move(e));
        break;
      case ChipOp::kLoadW:
        e.unit = TraceUnit::kLoadW;
        pending_[1].push_back(std::move(e));
        break;
      case ChipOp::kMatmul:
        e.unit = TraceUnit::kMatmul;
        pending_[2].push_back(std::move(e));
        break;
      case ChipOp::kVpu:
      case ChipOp::kVrow:  // the VPU unit's row-wise command
        e.unit = TraceUnit::kVpu;
        pending_[3].push_back(std::move(e));
        break;
      case ChipOp::kIciSend:
        e.unit = TraceUnit::kIciSend;
        e.lane = p.eng % kTraceSendLanes;
        pending_[4 + e.lane].push_back(std::move(e));
        break;
      case ChipOp::kIciWait:
        if (waiting_) {  // the blocked interval ends as the wait issues
          waiting_ = false;
          wait_.done = t;
          emit(std::move(wait_), static_cast<unsigned>(TraceUnit::kIciWait));
        }
        break;
      default:  // NOP, FENCE, HALT retire as they issue: one cycle on the sequencer's track
        e.unit = TraceUnit::kSeq;
        e.done = t + 1;
        emit(std::move(e), static_cast<unsigned>(TraceUnit::kSeq));
        break;
    }
  } else if (waiting_ && !p.wait) {  // no longer blocked without issuing (error, clear)
    waiting_ = false;
    wait_.done = t;
    emit(std::move(wait_), static_cast<unsigned>(TraceUnit::kIciWait));
  }
  if (p.wait && !waiting_) {
    waiting_ = true;
    wait_ = TraceEvent{};
    wait_.chip = chip_;
    wait_.unit = TraceUnit::kIciWait;
    wait_.issue = t;
    wait_.index = p.index;
    wait_.op = p.op;
    if (!words_.empty() && words_base_ <= p.index && p.index - words_base_ < words_.size())
      wait_.cmd = words_[p.index - words_base_];
    for (const auto& l : labels_)
      if (l.first <= p.index) wait_.label = l.second;
  }
}

void ChipTraceRec::on_copy(bool write, uint64_t addr, uint64_t bytes, uint64_t first,
                           uint64_t end) {
  if (!opt_.enabled) return;
  TraceEvent e;
  e.chip = chip_;
  e.unit = TraceUnit::kHost;
  e.issue = first;
  e.done = end;
  e.write = write;
  e.addr = addr;
  e.bytes = bytes;
  emit(std::move(e), static_cast<unsigned>(TraceUnit::kHost));
}

void ChipTraceRec::take(std::vector<TraceEvent>& out) {
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
}

void check_trace_window(const TraceOptions& o) {
  if (o.from >= o.to)
    throw std::invalid_argument("trace: the cycle window " + std::to_string(o.from) + ":" +
                                std::to_string(o.to) + " is empty (FROM must be below TO)");
}

void sort_trace_events(std::vector<TraceEvent>& v) {
  std::stable_sort(v.begin(), v.end(), [](const TraceEvent& a, const TraceEvent& b) {
    if (a.chip != b.chip) return a.chip < b.chip;
    if (a.unit != b.unit) return a.unit < b.unit;
    if (a.lane != b.lane) return a.lane < b.lane;
    return a.begin < b.begin;
  });
}

}  // namespace tpu
