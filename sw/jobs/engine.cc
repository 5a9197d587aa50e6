#include "engine.h"

#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>

#include "check_port.h"
#include "chip_config.h"
#include "pod_mpi.h"
#include "progress.h"
#include "trace.h"
#include "tpu/twisted_torus.h"

namespace tpu {

TraceOptions EngineOptions::trace_options() const {
  TraceOptions t;
  t.enabled = !trace.empty();
  if (trace_cycles) std::tie(t.from, t.to) = *trace_cycles;
  return t;
}

namespace {

PodRunner g_systemc = nullptr;
thread_local const ScopedHostPort* t_host = nullptr;  // ScopedHostPort

// The pod split across MPI ranks (docs/scale.md): every rank agrees to start, or stops with the
// first one's error.
void agree_on_mpi(const EngineOptions& opt, const PodParams& params) {
  if (opt.engine != "cpp")
    throw std::invalid_argument(
        "--engine " + opt.engine + " with " + std::to_string(mpi_world().size) +
        " MPI ranks: the pod split across processes runs on --engine cpp only (the SystemC "
        "kernel is not split across processes); add --engine cpp");
  (void)PodPartition::slabs(params.topo, mpi_world().size);  // every rank alike: too many?
  // Every rank got this far, or every rank stops here with the first one's error (exit 2, no
  // MPI_Abort): rank 0 may have refused an output path the others do not check.
  const std::string other = mpi_agree_start("");
  if (!other.empty()) throw std::invalid_argument(other);
}

}  // namespace

void set_systemc_runner(PodRunner run) { g_systemc = run; }

ScopedHostPort::ScopedHostPort(HostPort& host, std::string where)
    : host_(host), where_(std::move(where)), prev_(t_host) {
  t_host = this;
}
ScopedHostPort::~ScopedHostPort() { t_host = prev_; }

namespace {
// The job on a machine, whichever engine (or slice) it is: the port's progress, --check's stop
// before the first cycle, the timeline recorded and written.
void run_traced(HostPort& h, const EngineOptions& opt, double clock_ghz,
                const std::function<void(HostPort&)>& job) {
  if (opt.progress_every) h.progress_every = opt.progress_every;
  if (opt.check) {  // the job runs up to its first simulated cycle (CheckStop)
    CheckPort port(h);
    job(port);
    return;
  }
  const TraceOptions topt = opt.trace_options();
  if (topt.enabled) h.set_trace(topt);
  job(h);
  if (topt.enabled) write_trace(opt.trace, h.take_trace(), h.info(), clock_ghz);
  const std::string late = trace_window_warning(topt.from, topt.to, h.cycle());
  if (topt.enabled && opt.trace_cycles && !late.empty()) {
    clear_progress_line();
    std::cerr << "tpusim: warning: " << late << "\n";
  }
}

// A job on a slice of a pod of cubes (ScopedHostPort): the options that belong to the pod are
// refused; the slice's timeline is the job's (while it runs, the slice's clock is the pod's).
void run_on_slice(const ScopedHostPort& s, const EngineOptions& opt, double clock_ghz,
                  const std::function<void(HostPort&)>& job) {
  auto refuse = [&](const char* flag) {
    throw std::invalid_argument(std::string(flag) + ": " + s.where() +
                                " runs on the sliced pod, whose waves, faults, threads, twist and "
                                "watchdog are the pod's (tpusim slices' options and config)");
  };
  if (!opt.wave_chips.empty()) refuse("--waves-chips");
  if (!opt.faults.empty()) refuse("--fault");
  if (opt.twist) refuse("--twist");
  if (opt.watchdog) refuse("--watchdog");
  run_traced(s.host(), opt, clock_ghz, job);
}
}  // namespace

std::function<void(uint64_t)> cycles_since_now(const HostPort& h,
                                               const std::function<void(uint64_t)>& progress) {
  if (!progress) return nullptr;
  const uint64_t c0 = h.cycle();
  return [&h, progress, c0](uint64_t) { progress(h.cycle() - c0); };
}

void with_engine(const EngineOptions& opt, PodParams params, double clock_ghz,
                 const std::function<void(HostPort&)>& job) {
  if (t_host) {
    run_on_slice(*t_host, opt, clock_ghz, job);
    return;
  }
  for (const int c : opt.wave_chips) params.wave_chips.push_back(c);
  params.wave_clock_ghz = clock_ghz;  // the dumps' time is the trace's
  if (!opt.faults.empty()) {
    apply_fault_flags(params.faults, opt.faults);
    check_fault_flags(params.faults, chip_shape(params.variant).hbm_bytes, params.topo.num_chips());
  }
  if (opt.watchdog) params.watchdog_cycles = *opt.watchdog;
  if (opt.twist) {
    try {
      twist_bits(params.topo);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--twist: ") + e.what());
    }
    params.twist = true;
  }
  // Threads stepping the chips, either engine (the SystemC pod then steps every chip from one
  // process on the worker threads).
  params.threads = opt.threads;
  if (opt.check) {  // no dumps: a check writes no files (the chips named must exist)
    for (const int c : params.wave_chips)
      if (c >= params.topo.num_chips())
        throw std::invalid_argument("--waves-chips: chip " + std::to_string(c) + " is not in the " +
                                    params.topo.name() + " pod (chips 0.." +
                                    std::to_string(params.topo.num_chips() - 1) + ")");
    params.wave_chips.clear();
  }
  auto traced = [&](HostPort& h) { run_traced(h, opt, clock_ghz, job); };
  if (mpi_world().size > 1) {
    agree_on_mpi(opt, params);
#ifdef TPU_HAVE_MPI
    MpiPodHost host(params);
    traced(host);
    return;
#endif
  }
  if (opt.engine == "cpp") {
    CppPodHost host(params);
    traced(host);
  } else {
    if (g_systemc == nullptr)
      throw std::logic_error("--engine " + opt.engine +
                             ": this program is built without the SystemC pod (tpu_engine_sc)");
    g_systemc(params, traced);
  }
}

}  // namespace tpu
