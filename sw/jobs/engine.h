// The engines a job runs on, and how a job gets one: the SystemC pod with TLM host sockets, the
// pod stepped in plain C++, or the pod split across MPI ranks (docs/scale.md). EngineOptions
// holds what every pod job asks of its engine (waves, faults, watchdog, threads, the timeline,
// --check); with_engine builds the engine and runs the job on its host port.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host_port.h"
#include "pod.h"

namespace tpu {

// What a pod job asks of its engine (tpusim's --engine, --threads, --waves-chips, --fault,
// --watchdog, --trace, --trace-cycles and --check).
struct EngineOptions {
  std::string engine = "systemc";    // "systemc" (TLM host sockets) or "cpp" (plain C++ stepping)
  unsigned threads = 1;              // threads stepping the chips, either engine
  std::vector<int> wave_chips;       // FST waves of these chips (waves/pod_chipN.fst)
  std::vector<std::string> faults;   // KEY=VALUE fault flags over the config's faults: section
  std::optional<uint64_t> watchdog;  // cycles without progress before a hang (none: the config's)
  std::string trace;                 // write the timeline of the whole job here ("": none)
  std::optional<std::pair<uint64_t, uint64_t>> trace_cycles;  // only events overlapping [A, B)
  bool check = false;  // stop before the first simulated cycle (CheckPort), write no files
  bool twist = false;  // --twist: twist the pod's torus (docs/topology.md) whatever its config
  // The host port's progress_every for the job (0: the port's own, 1000 cycles). The Python
  // module asks for less: its progress callback checks for Ctrl-C, and a job of many short runs
  // (a collective of many rounds of a few hundred cycles) would otherwise never call it.
  uint64_t progress_every = 0;

  // The timeline's window and whether it is recorded.
  TraceOptions trace_options() const;
};

// Runs job on the engine `opt` asks for, the pod of `params` with opt's waves, faults, watchdog
// and threads: with several MPI ranks the pod split across them (--engine cpp only), else the
// SystemC pod or plain C++ stepping. With a trace path the timeline of the whole job is written
// at its end (clock_ghz: the pod's clock, for the timestamps); with opt.check the job runs on a
// CheckPort, which stops it before its first simulated cycle (CheckStop).
void with_engine(const EngineOptions& opt, PodParams params, double clock_ghz,
                 const std::function<void(HostPort&)>& job);

// While one lives on a thread, with_engine on that thread runs its job on `host` (a slice of a
// pod of cubes, tb/pod/pod_slices.h) instead of building an engine: tpusim slices runs each
// slice's command line on a thread of its own. The pod's waves, faults, threads, twist and
// timeline are the sliced pod's: a job that asks for its own is refused, naming the flag.
class ScopedHostPort {
 public:
  ScopedHostPort(HostPort& host, std::string where);
  ~ScopedHostPort();
  ScopedHostPort(const ScopedHostPort&) = delete;
  ScopedHostPort& operator=(const ScopedHostPort&) = delete;
  HostPort& host() const { return host_; }
  const std::string& where() const { return where_; }

 private:
  HostPort& host_;
  std::string where_;
  const ScopedHostPort* prev_;
};

// What runs a job on the SystemC pod of `params`. It lives apart (engine_sc.h, library
// tpu_engine_sc), so that a program without SystemC (and its sc_main) can run jobs on the other
// engines: a program that links it calls use_systemc_engine() first; --engine systemc without
// it is a std::logic_error.
using PodRunner = void (*)(const PodParams& params, const std::function<void(HostPort&)>& job);
void set_systemc_runner(PodRunner run);

// A HostPort::progress that calls `progress` with h's cycles since now (the call), not since the
// start of each copy or run of the machine: one count for a job's whole run that never goes
// back (the tools' progress line). nullptr when progress is empty.
std::function<void(uint64_t)> cycles_since_now(const HostPort& h,
                                               const std::function<void(uint64_t)>& progress);

}  // namespace tpu
