// The timeline as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open
// (docs/profiling.md): one process per chip ("chip N (x,y,z)"); per chip a "phase" track (more,
// "phase 2", ..., where phases overlap in time) with one slice per phase span, named by the
// driver's label (HostPort::trace_label), then one thread (track) per unit (sequencer, DMA, MXU
// weights, MXU, VPU, ICI send 0..3, ICI wait, host port) with one complete event ("ph":"X") per
// command, named "<label> · <opcode>" (the opcode alone for a command without a label), with its
// opcode, fields, command index and label as args; ts and dur in microseconds at clock_ghz.
// Events come from HostPort::take_trace (tb/pod/chip_trace.h) and never overlap on a track.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host_port.h"
#include "json.h"

namespace tpu {

// One phase span of a chip: a run of its commands, in issue order, with the same non-empty label;
// drawn from the first command's begin to the latest end among them, on phase track `track`
// (0: "phase", 1: "phase 2", ...), chosen so that no two spans of a track overlap.
struct PhaseSpan {
  int chip = 0;
  std::string label;
  uint64_t begin = 0, end = 0;  // cycles
  int64_t first_index = 0, last_index = 0;
  uint64_t commands = 0;
  unsigned track = 0;
};

// The phase spans of every chip (chip by chip, each chip's by begin), placed on tracks.
std::vector<PhaseSpan> trace_phases(const std::vector<TraceEvent>& events);
// A command slice's name: "dW0 piece 2 · MATMUL", or "MATMUL" without a label; host copies are
// "host write" / "host read".
std::string trace_slice_name(const TraceEvent& e);

// The track (Chrome "tid") of an event: its unit, ICI sends 10 + send context.
unsigned trace_track(const TraceEvent& e);
// The track's name: "DMA", "ICI send 2", "phase", "phase 2", ...
std::string trace_track_name(unsigned track);

// The trace-event JSON document: {"traceEvents": [...], "displayTimeUnit": "ns", ...}. Every
// chip of `info` and every track gets its metadata, events or not.
Json trace_json(const std::vector<TraceEvent>& events, const MachineInfo& info,
                double clock_ghz = 1.0);
// Writes trace_json to `path` (compact); throws std::runtime_error naming the path on failure.
void write_trace(const std::string& path, const std::vector<TraceEvent>& events,
                 const MachineInfo& info, double clock_ghz = 1.0);
// The warning for a window `from`:`to` of machine cycles (--trace-cycles) that starts at or after
// `end`, the cycle the run ended at, so that the trace has no events: "--trace-cycles 5000:6000
// is past the run's end (cycle 1893); the trace has no events". "" for a window within the run.
std::string trace_window_warning(uint64_t from, uint64_t to, uint64_t end);

}  // namespace tpu
