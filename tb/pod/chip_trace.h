// The timeline the harness records from each chip's trace port (tpu_chip trc_*): per command its
// issue and completion cycles as the chip saw them, ICI_WAIT's blocked intervals and the host
// port's copies (docs/profiling.md). Off by default; when off, a chip's cycle costs one test of
// a flag. sw/common/trace.h writes the events as Chrome trace-event JSON for Perfetto.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "chip_contract.h"
#include "chip_dut.h"

namespace tpu {

// A track of the timeline: one per unit of a chip (ICI sends: one per send context).
enum class TraceUnit : unsigned {
  kSeq = 0,      // NOP, FENCE, HALT: one cycle at issue
  kDma = 1,      // DMA, issue to done (queued for the engine included)
  kLoadW = 2,    // LOADW ("MXU weights")
  kMatmul = 3,   // MATMUL ("MXU")
  kVpu = 4,      // VPU
  kIciSend = 5,  // ICI_SEND, per send context (lane)
  kIciWait = 6,  // ICI_WAIT: the cycles it blocked the queue
  kHost = 7,     // host-port copies: first request to the cycle after the last response
};
constexpr unsigned kNumTraceUnits = 8;
constexpr unsigned kTraceSendLanes = kIciSendContexts;  // ICI send contexts
const char* trace_unit_name(TraceUnit u);  // "sequencer", "DMA", "MXU weights", "MXU", ...

// One command (or blocked ICI_WAIT, or host copy) of one chip, in pod cycles.
struct TraceEvent {
  int chip = 0;
  TraceUnit unit = TraceUnit::kSeq;
  unsigned lane = 0;   // kIciSend: the send context (its own track); else 0
  uint64_t issue = 0;  // issued (ICI_WAIT: first blocked cycle; copy: first request)
  uint64_t done = 0;   // completed: its done pulse (ICI_WAIT: issue; copy: last response + 1)
  uint64_t begin = 0;  // drawn as [begin, end): begin = max(issue, the track's previous end),
  uint64_t end = 0;    // end = max(done, the track's previous end); no overlap on a track
  int64_t index = -1;  // command index since reset or clear (-1: a host copy)
  unsigned op = 0;     // ChipOp (the chip's decode of the head)
  ChipCmd cmd;         // the command word the host pushed (zero if pushed before tracing)
  std::string label;   // the label the driver gave (HostPort::trace_label), or ""
  bool write = false;  // host copy: a write into HBM
  uint64_t addr = 0;   // host copy: HBM address
  uint64_t bytes = 0;  // host copy: length
};

// Whether to record, and the cycle window [from, to) of the events kept (any overlap).
struct TraceOptions {
  bool enabled = false;
  uint64_t from = 0;
  uint64_t to = std::numeric_limits<uint64_t>::max();
};

// One chip's recorder (owned by its HostAgent).
class ChipTraceRec {
 public:
  void set(int chip, const TraceOptions& o);
  bool on() const { return opt_.enabled; }
  void on_push(const std::vector<ChipCmd>& cmds);     // every push, on or off (counts indices)
  void on_clear();                                    // the chip's indices restart at 0
  void label(const std::string& l);                   // for the commands pushed from now on
  void on_cycle(uint64_t t, const ChipTracePort& p);  // after eval, before the clock edge
  void on_copy(bool write, uint64_t addr, uint64_t bytes, uint64_t first, uint64_t end);
  void take(std::vector<TraceEvent>& out);  // moves the completed events out

 private:
  void emit(TraceEvent e, unsigned track);
  int chip_ = 0;
  TraceOptions opt_;
  uint64_t pushed_ = 0;                                  // commands pushed since reset or clear
  uint64_t words_base_ = 0;                              // index of words_.front()
  std::deque<ChipCmd> words_;                            // pushed while on, not issued yet
  std::deque<std::pair<uint64_t, std::string>> labels_;  // (first index, label)
  std::array<std::deque<TraceEvent>, 4 + kTraceSendLanes> pending_;  // by done bit
  bool waiting_ = false;
  TraceEvent wait_;
  std::array<uint64_t, kNumTraceUnits + kTraceSendLanes> track_end_{};
  std::vector<TraceEvent> events_;
};

}  // namespace tpu
