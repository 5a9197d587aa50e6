// The SystemC pod: every chip an sc_module clocked by one sc_clock (1 ns = 1 cycle; with
// PodParams::threads > 1 one process steps them all on PodCore's worker threads), its host
// port a TLM-2.0 target socket (b_transport; transport_dbg for the backdoor), the ICI links the
// latency channels of PodCore (docs/pod.md). The host runs as an SC_THREAD: ScPod::run(job)
// executes job(HostPort&) inside the simulation, where every HostPort call is a transaction on
// a chip's socket; copies wait in simulated time, one host lane (thread) per chip, so copies to
// every chip proceed at once. One ScPod per process (SystemC elaborates once).
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "pod.h"

namespace tpu {

// The address map of a chip's host socket.
constexpr uint64_t kTlmHbmBase = 0;                   // [0, HBM bytes): 64-byte aligned copies
constexpr uint64_t kTlmCmd = 0x1'0000'0000ull;        // write: 16-byte commands, any number
constexpr uint64_t kTlmStatus = 0x1'0001'0000ull;     // read 16 bytes: see TlmStatus
constexpr uint64_t kTlmCounters = 0x1'0002'0000ull;   // read 8 bytes per statistic from + 8 * id
constexpr uint64_t kTlmLinks = 0x1'0003'0000ull;      // read 8 bytes per direction: flits sent
constexpr uint64_t kTlmControl = 0x1'0004'0000ull;    // write 4 bytes: bit 0 clears the error
// read 8 bytes per link-layer counter: + 8 * (direction * kNumLinkStats + ChipDut LinkStatSel)
constexpr uint64_t kTlmLinkStats = 0x1'0005'0000ull;

struct TlmStatus {
  uint32_t flags = 0;         // bit 0 busy, 1 halted, 2 router empty, 3 host queue empty
  uint32_t err = 0;           // sticky error code
  uint32_t err_cmd = 0;       // failing command index
  uint32_t cmds_waiting = 0;  // commands the host queued that the chip has not taken
};

class ScPod;

class ScChip : public sc_core::sc_module {
 public:
  sc_core::sc_in<bool> clk;
  tlm_utils::simple_target_socket<ScChip> host;
  ScChip(sc_core::sc_module_name name, ScPod& pod, int id);

 private:
  void on_clock();
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& t);
  ScPod& pod_;
  int id_;
};

// One chip's host lane: a thread that carries the host's copies to that chip (b_transport, which
// waits in simulated time), so that copies to different chips run at once.
class ScHostLane : public sc_core::sc_module {
 public:
  ScHostLane(sc_core::sc_module_name name, ScPod& pod, int chip);
  void add(const HostCopy& c);
  bool busy() const { return !queue_.empty(); }
  const sc_core::sc_event& done() const { return done_; }  // after each copy

 private:
  void serve();
  ScPod& pod_;
  int chip_;
  std::deque<HostCopy> queue_;
  sc_core::sc_event work_, done_;
};

class ScPod : public sc_core::sc_module, public HostPort {
 public:
  ScPod(sc_core::sc_module_name name, const PodParams& p);
  ~ScPod() override;

  // Runs job inside the simulation (as the host thread); returns when it returns. An exception
  // of the job or of a chip is rethrown here.
  void run(const std::function<void(HostPort&)>& job);
  PodCore& core() { return core_; }  // for the harness's own tests

  const MachineInfo& info() const override { return core_.info(); }
  uint64_t copy(const std::vector<HostCopy>& ops) override;
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override;
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override;
  void push(int chip, const std::vector<ChipCmd>& cmds) override;
  RunStats run_until_idle(uint64_t max_cycles = 50'000'000, bool stop_on_error = true) override;
  void set_watchdog(uint64_t cycles) override { core_.set_watchdog(cycles); }
  ChipStatus status(int chip) override;
  ChipCounters counters(int chip) override;
  std::vector<LinkStat> link_stats() override;
  void clear(int chip) override;
  uint64_t cycle() const override { return core_.cycle(); }
  // The timeline is the harness's recording of the chips' trace ports (not a chip register):
  // PodCore records it for both pods.
  void set_trace(const TraceOptions& o) override { core_.set_trace(o); }
  std::vector<TraceEvent> take_trace() override { return core_.take_trace(); }
  void trace_label(int chip, const std::string& label) override {
    core_.trace_label(chip, label);
  }

 private:
  friend class ScChip;
  friend class ScHostLane;
  void transport(int chip, tlm::tlm_command cmd, uint64_t addr, void* data, std::size_t n,
                 bool debug = false);
  void on_posedge();  // threads > 1: every chip at once
  void on_negedge();
  void host_thread();
  void fail(std::exception_ptr e);

  PodCore core_;
  sc_core::sc_clock clk_;
  std::vector<std::unique_ptr<ScChip>> chips_;
  std::vector<std::unique_ptr<tlm_utils::simple_initiator_socket<ScPod>>> sockets_;
  std::vector<std::unique_ptr<ScHostLane>> lanes_;
  sc_core::sc_event cycle_ev_, idle_ev_;
  std::function<void(HostPort&)> job_;
  std::exception_ptr err_;
};

}  // namespace tpu
