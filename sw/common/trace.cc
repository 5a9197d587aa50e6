#include "trace.h"

#include "output.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tpu {

namespace {

constexpr unsigned kSendTrackBase = 10;
constexpr unsigned kPhaseTrackBase = 100;  // phase tracks: 100 ("phase"), 101 ("phase 2"), ...

const char* op_name(unsigned op) {
  switch (static_cast<ChipOp>(op)) {
    case ChipOp::kNop:
      return "NOP";
    case ChipOp::kDma:
      return "DMA";
    case ChipOp::kLoadW:
      return "LOADW";
    case ChipOp::kMatmul:
      return "MATMUL";
    case ChipOp::kVpu:
      return "VPU";
    case ChipOp::kVrow:
      return "VROW";
    case ChipOp::kFence:
      return "FENCE";
    case ChipOp::kHalt:
      return "HALT";
    case ChipOp::kIciSend:
      return "ICI_SEND";
    case ChipOp::kIciWait:
      return "ICI_WAIT";
    case ChipOp::kDmaIdx:
      return "DMA_IDX";
  }
  return "illegal";
}

// The command's fields as args (docs/isa.md), decoded through the contract's per-opcode structs.
void cmd_args(const TraceEvent& e, Json& a, unsigned row_bytes) {
  static const char* const kMem[2] = {"vmem", "amem"};
  switch (static_cast<ChipOp>(e.op)) {
    case ChipOp::kDma: {
      static const char* const kDir[4] = {"hbm_to_vmem", "vmem_to_hbm", "amem_to_hbm", "?"};
      const CmdDma c = CmdDma::decode(e.cmd);
      a["dir"] = kDir[c.dir & 3u];
      a["mem_row"] = c.mem_row;
      a["segments"] = c.rows;
      a["bytes"] = static_cast<uint64_t>(c.rows) * c.seg_bytes;
      a["hbm_addr"] = c.hbm_addr;
      a["hbm_stride"] = c.stride;
      break;
    }
    case ChipOp::kDmaIdx: {
      const CmdDmaIdx c = CmdDmaIdx::decode(e.cmd);
      a["dir"] = c.scatter ? "scatter" : "gather";
      a["mem_row"] = c.mem_row;
      a["ids"] = c.rows;
      a["idx_row"] = c.idx_row;
      a["bytes"] = static_cast<uint64_t>(c.rows) * c.seg_bytes;
      a["hbm_addr"] = c.hbm_addr;
      a["table_rows"] = c.table_rows;
      break;
    }
    case ChipOp::kLoadW: {
      const CmdLoadW c = CmdLoadW::decode(e.cmd);
      a["vmem_row"] = c.vmem_row;
      a["row_stride"] = c.stride ? c.stride : 1u;
      break;
    }
    case ChipOp::kMatmul: {
      const CmdMatmul c = CmdMatmul::decode(e.cmd);
      a["a_row"] = c.a_row;
      a["rows"] = c.rows;
      a["c_row"] = c.c_row;
      a["acc"] = c.acc != 0;
      break;
    }
    case ChipOp::kVpu: {
      const CmdVpu c = CmdVpu::decode(e.cmd);
      a["vpu_op"] = c.vop;
      a["rows"] = c.rows;
      a["x_row"] = c.x_row;
      a["y_row"] = c.y_row;
      a["dst_row"] = c.dst_row;
      a["dst"] = kMem[c.dst_mem & 1u];
      if (c.x_wait) a["x_counter"] = c.x_counter;
      if (c.sig) a["sig_counter"] = c.sig_counter;
      break;
    }
    case ChipOp::kVrow: {
      const CmdVrow c = CmdVrow::decode(e.cmd);
      a["vpu_op"] = c.vop;
      a["rows"] = c.rows;
      a["beats"] = c.beats;
      a["x_row"] = c.x_row;
      a["y_row"] = c.y_row;
      a["dst_row"] = c.dst_row;
      a["dst"] = kMem[c.dst_mem & 1u];
      break;
    }
    case ChipOp::kIciSend: {
      const CmdIciSend c = CmdIciSend::decode(e.cmd);
      a["src"] = kMem[c.src_mem & 1u];
      a["src_row"] = c.src_row;
      a["rows"] = c.rows;
      a["bytes"] = static_cast<uint64_t>(c.rows) * row_bytes;
      a["dst_chip"] = "(" + std::to_string(c.dst_x) + "," + std::to_string(c.dst_y) + "," +
                      std::to_string(c.dst_z) + ")";
      a["dst"] = kMem[c.dst_mem & 1u];
      a["dst_row"] = c.dst_row;
      a["counter"] = c.counter;
      a["send_context"] = e.lane;
      if (c.wait_rows) {
        a["wait_counter"] = c.wait_counter;
        if (c.wait_local) a["wait_local"] = 1;
      }
      break;
    }
    case ChipOp::kIciWait: {
      const CmdIciWait c = CmdIciWait::decode(e.cmd);
      a["counter"] = c.counter;
      a["value"] = c.value;
      break;
    }
    default:
      break;
  }
}

Json meta(const char* what, int pid, unsigned tid, Json args) {
  return Json::object(
      {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}});
}

// Spreads the spans over phase tracks: sorted by begin (then longer first), each goes on the
// first track whose last span ended at or before it begins, else on a new track. No two spans of
// a track overlap, and this needs as few tracks as the most spans open at one moment.
void place_phases(std::vector<PhaseSpan>& spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const PhaseSpan& a, const PhaseSpan& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<uint64_t> track_end;
  for (PhaseSpan& s : spans) {
    unsigned t = 0;
    while (t < track_end.size() && track_end[t] > s.begin) ++t;
    if (t == track_end.size()) track_end.push_back(0);
    track_end[t] = s.end;
    s.track = t;
  }
}

}  // namespace

std::string trace_slice_name(const TraceEvent& e) {
  if (e.unit == TraceUnit::kHost) return e.write ? "host write" : "host read";
  const std::string op = op_name(e.op);
  return e.label.empty() ? op : e.label + " \u00b7 " + op;
}

std::vector<PhaseSpan> trace_phases(const std::vector<TraceEvent>& events) {
  std::vector<const TraceEvent*> cmds;  // every chip's commands, in issue order per chip
  for (const TraceEvent& e : events)
    if (e.unit != TraceUnit::kHost) cmds.push_back(&e);
  std::stable_sort(cmds.begin(), cmds.end(), [](const TraceEvent* a, const TraceEvent* b) {
    if (a->chip != b->chip) return a->chip < b->chip;
    return a->issue != b->issue ? a->issue < b->issue : a->index < b->index;
  });
  std::vector<PhaseSpan> all, chip;
  auto flush = [&] {
    place_phases(chip);
    all.insert(all.end(), chip.begin(), chip.end());
    chip.clear();
  };
  const TraceEvent* prev = nullptr;
  for (const TraceEvent* e : cmds) {
    if (prev && prev->chip != e->chip) flush();
    const bool same = prev && prev->chip == e->chip && !chip.empty() &&
                      chip.back().label == e->label && prev->label == e->label;
    prev = e;
    if (e->label.empty()) continue;
    if (same) {
      PhaseSpan& s = chip.back();
      s.begin = std::min(s.begin, e->begin);
      s.end = std::max(s.end, e->end);
      s.last_index = e->index;
      ++s.commands;
      continue;
    }
    chip.push_back(PhaseSpan{e->chip, e->label, e->begin, e->end, e->index, e->index, 1, 0});
  }
  flush();
  return all;
}

unsigned trace_track(const TraceEvent& e) {
  return e.unit == TraceUnit::kIciSend ? kSendTrackBase + e.lane : static_cast<unsigned>(e.unit);
}

std::string trace_track_name(unsigned track) {
  if (track >= kPhaseTrackBase) {
    const unsigned k = track - kPhaseTrackBase;
    return k == 0 ? "phase" : "phase " + std::to_string(k + 1);
  }
  if (track >= kSendTrackBase) return "ICI send " + std::to_string(track - kSendTrackBase);
  return trace_unit_name(static_cast<TraceUnit>(track));
}

Json trace_json(const std::vector<TraceEvent>& events, const MachineInfo& info, double clock_ghz) {
  if (!(clock_ghz > 0)) throw std::invalid_argument("trace: clock_ghz must be above 0");
  const double us = 1.0 / (clock_ghz * 1000.0);  // microseconds per cycle
  const unsigned row_bytes = info.shape.cols * 4;
  Json ev = Json::array();
  std::vector<unsigned> tracks;
  for (unsigned u = 0; u < kNumTraceUnits; ++u)
    if (static_cast<TraceUnit>(u) != TraceUnit::kIciSend) tracks.push_back(u);
  for (unsigned l = 0; l < kTraceSendLanes; ++l) tracks.push_back(kSendTrackBase + l);
  const std::vector<PhaseSpan> phases = trace_phases(events);
  std::vector<unsigned> phase_tracks(static_cast<std::size_t>(std::max(info.num_chips(), 0)), 1);
  for (const PhaseSpan& p : phases)
    if (p.chip >= 0 && p.chip < info.num_chips()) {
      unsigned& n = phase_tracks[static_cast<std::size_t>(p.chip)];
      n = std::max(n, p.track + 1);
    }
  for (int c = 0; c < info.num_chips(); ++c) {
    ev.push_back(meta("process_name", c, 0, Json::object({{"name", chip_name(info.topo, c)}})));
    ev.push_back(meta("process_sort_index", c, 0, Json::object({{"sort_index", c}})));
    unsigned order = 0;  // the phase tracks first, then the units
    std::vector<unsigned> chip_tracks;
    for (unsigned k = 0; k < phase_tracks[static_cast<std::size_t>(c)]; ++k)
      chip_tracks.push_back(kPhaseTrackBase + k);
    chip_tracks.insert(chip_tracks.end(), tracks.begin(), tracks.end());
    for (unsigned t : chip_tracks) {
      ev.push_back(meta("thread_name", c, t, Json::object({{"name", trace_track_name(t)}})));
      ev.push_back(meta("thread_sort_index", c, t, Json::object({{"sort_index", order++}})));
    }
  }
  for (const PhaseSpan& p : phases)
    ev.push_back(Json::object({{"name", p.label},
                               {"cat", "phase"},
                               {"ph", "X"},
                               {"ts", static_cast<double>(p.begin) * us},
                               {"dur", static_cast<double>(p.end - p.begin) * us},
                               {"pid", p.chip},
                               {"tid", kPhaseTrackBase + p.track},
                               {"args", Json::object({{"commands", p.commands},
                                                      {"first_index", p.first_index},
                                                      {"last_index", p.last_index},
                                                      {"begin_cycle", p.begin},
                                                      {"end_cycle", p.end}})}}));
  for (const TraceEvent& e : events) {
    Json a = Json::object();
    if (e.unit == TraceUnit::kHost) {
      a["hbm_addr"] = e.addr;
      a["bytes"] = e.bytes;
    } else {
      a["op"] = op_name(e.op);
      a["index"] = e.index;
      cmd_args(e, a, row_bytes);
    }
    a["issue_cycle"] = e.issue;
    a["done_cycle"] = e.done;
    if (!e.label.empty()) a["label"] = e.label;
    ev.push_back(Json::object({{"name", trace_slice_name(e)},
                               {"cat", trace_unit_name(e.unit)},
                               {"ph", "X"},
                               {"ts", static_cast<double>(e.begin) * us},
                               {"dur", static_cast<double>(e.end - e.begin) * us},
                               {"pid", e.chip},
                               {"tid", trace_track(e)},
                               {"args", std::move(a)}}));
  }
  return Json::object(
      {{"traceEvents", std::move(ev)},
       {"displayTimeUnit", "ns"},
       {"otherData",
        Json::object({{"topology", info.topo.name()},
                      {"variant", info.variant},
                      {"clock_ghz", clock_ghz},
                      {"time_unit", "ts and dur in microseconds; cycle = 1/clock_ghz ns"}})}});
}

void write_trace(const std::string& path, const std::vector<TraceEvent>& events,
                 const MachineInfo& info, double clock_ghz) {
  if (files_muted()) return;
  const std::string text = json_text(trace_json(events, info, clock_ghz), -1);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open the trace file for writing");
  f << text << '\n';
  f.close();  // the last buffer is written here: a full disk shows up now, not never
  if (!f) throw std::runtime_error(path + ": writing the trace failed (" + std::strerror(errno) +
                                   ")");
}

std::string trace_window_warning(uint64_t from, uint64_t to, uint64_t end) {
  if (from < end) return "";
  return "--trace-cycles " + std::to_string(from) + ":" + std::to_string(to) +
         " is past the run's end (cycle " + std::to_string(end) + "); the trace has no events";
}

}  // namespace tpu
