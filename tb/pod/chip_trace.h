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
#include "host_port_types.h"

namespace tpu {

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

// std::invalid_argument unless the window [from, to) of o holds a cycle.
void check_trace_window(const TraceOptions& o);

// Events taken from several chips in the order a timeline lists them: by chip, then track
// (unit, lane), then time.
void sort_trace_events(std::vector<TraceEvent>& v);

}  // namespace tpu
