#include "trace.h"

#include "output.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tpu {

namespace {

constexpr unsigned kSendTrackBase = 10;

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
    case ChipOp::kFence:
      return "FENCE";
    case ChipOp::kHalt:
      return "HALT";
    case ChipOp::kIciSend:
      return "ICI_SEND";
    case ChipOp::kIciWait:
      return "ICI_WAIT";
  }
  return "illegal";
}

// The command's fields as args (docs/isa.md).
void cmd_args(const TraceEvent& e, Json& a, unsigned row_bytes) {
  const uint32_t* w = e.cmd.w.data();
  const uint32_t flags = (w[0] >> 4) & 0xFFFu, f1 = w[0] >> 16, f2 = w[1] & 0xFFFFu,
                 f3 = w[1] >> 16, w2 = w[2], w3 = w[3];
  static const char* const kMem[2] = {"vmem", "amem"};
  switch (static_cast<ChipOp>(e.op)) {
    case ChipOp::kDma: {
      static const char* const kDir[4] = {"hbm_to_vmem", "vmem_to_hbm", "amem_to_hbm", "?"};
      a.set("dir", kDir[flags & 3u]).set("mem_row", f1).set("segments", f2);
      a.set("bytes", static_cast<uint64_t>(f2) * f3).set("hbm_addr", w2).set("hbm_stride", w3);
      break;
    }
    case ChipOp::kLoadW:
      a.set("vmem_row", f1).set("row_stride", (w2 & 0xFFFFu) ? (w2 & 0xFFFFu) : 1u);
      break;
    case ChipOp::kMatmul:
      a.set("a_row", f1).set("rows", f2).set("c_row", f3).set("acc", (flags & 1u) != 0);
      break;
    case ChipOp::kVpu:
      a.set("vpu_op", flags & 0xFu).set("rows", f2).set("x_row", f1).set("y_row", f3);
      a.set("dst_row", w2 & 0xFFFFu).set("dst", kMem[(flags >> 11) & 1u]);
      break;
    case ChipOp::kIciSend:
      a.set("src", kMem[flags & 1u]).set("src_row", f1).set("rows", f2);
      a.set("bytes", static_cast<uint64_t>(f2) * row_bytes);
      a.set("dst_chip", "(" + std::to_string(w2 & 7u) + "," + std::to_string((w2 >> 3) & 7u) + "," +
                            std::to_string((w2 >> 6) & 7u) + ")");
      a.set("dst", kMem[(flags >> 1) & 1u]).set("dst_row", f3).set("counter", (w2 >> 16) & 0xFFu);
      a.set("send_context", e.lane);
      break;
    case ChipOp::kIciWait:
      a.set("counter", f1).set("value", w2);
      break;
    default:
      break;
  }
}

Json meta(const char* what, int pid, unsigned tid, Json args) {
  Json m = Json::object();
  m.set("ph", "M").set("name", what).set("pid", pid).set("tid", tid).set("args", std::move(args));
  return m;
}

}  // namespace

unsigned trace_track(const TraceEvent& e) {
  return e.unit == TraceUnit::kIciSend ? kSendTrackBase + e.lane : static_cast<unsigned>(e.unit);
}

std::string trace_track_name(unsigned track) {
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
  for (int c = 0; c < info.num_chips(); ++c) {
    ev.push_back(meta("process_name", c, 0, Json::object().set("name", chip_name(info.topo, c))));
    ev.push_back(meta("process_sort_index", c, 0, Json::object().set("sort_index", c)));
    unsigned order = 0;
    for (unsigned t : tracks) {
      ev.push_back(meta("thread_name", c, t, Json::object().set("name", trace_track_name(t))));
      ev.push_back(meta("thread_sort_index", c, t, Json::object().set("sort_index", order++)));
    }
  }
  for (const TraceEvent& e : events) {
    Json a = Json::object();
    std::string name;
    if (e.unit == TraceUnit::kHost) {
      name = e.write ? "host write" : "host read";
      a.set("hbm_addr", e.addr).set("bytes", e.bytes);
    } else {
      name = op_name(e.op);
      a.set("index", e.index);
      cmd_args(e, a, row_bytes);
    }
    a.set("issue_cycle", e.issue).set("done_cycle", e.done);
    if (!e.label.empty()) a.set("label", e.label);
    Json x = Json::object();
    x.set("name", name).set("cat", trace_unit_name(e.unit)).set("ph", "X");
    x.set("ts", static_cast<double>(e.begin) * us);
    x.set("dur", static_cast<double>(e.end - e.begin) * us);
    x.set("pid", e.chip).set("tid", trace_track(e)).set("args", std::move(a));
    ev.push_back(std::move(x));
  }
  Json doc = Json::object();
  doc.set("traceEvents", std::move(ev));
  doc.set("displayTimeUnit", "ns");
  doc.set("otherData", Json::object()
                           .set("topology", info.topo.name())
                           .set("variant", info.variant)
                           .set("clock_ghz", clock_ghz)
                           .set("time_unit", "ts and dur in microseconds; cycle = 1/clock_ghz ns"));
  return doc;
}

void write_trace(const std::string& path, const std::vector<TraceEvent>& events,
                 const MachineInfo& info, double clock_ghz) {
  if (files_muted()) return;
  const std::string text = trace_json(events, info, clock_ghz).dump(0);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open the trace file for writing");
  f << text << '\n';
  f.close();  // the last buffer is written here: a full disk shows up now, not never
  if (!f) throw std::runtime_error(path + ": writing the trace failed (" + std::strerror(errno) +
                                   ")");
}

}  // namespace tpu
