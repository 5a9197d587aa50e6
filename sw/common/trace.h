// The timeline as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open
// (docs/profiling.md): one process per chip ("chip N (x,y,z)"), one thread (track) per unit
// (sequencer, DMA, MXU weights, MXU, VPU, ICI send 0..3, ICI wait, host port), one complete
// event ("ph":"X") per command with its opcode as the name and its fields, command index and the
// driver's label (HostPort::trace_label) as args; ts and dur in microseconds at clock_ghz.
// Events come from HostPort::take_trace (tb/pod/chip_trace.h) and never overlap on a track.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host_port.h"
#include "json.h"

namespace tpu {

// The track (Chrome "tid") of an event: its unit, ICI sends 10 + send context.
unsigned trace_track(const TraceEvent& e);
// The track's name: "DMA", "ICI send 2", ...
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
