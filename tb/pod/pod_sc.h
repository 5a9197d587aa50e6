// The SystemC pod: every chip an sc_module clocked by one sc_clock (1 ns = 1 cycle), its host
// port a TLM-2.0 target socket (b_transport), the ICI links the latency channels of PodCore
// (docs/pod.md). The host runs as an SC_THREAD: ScPod::run(job) executes job(PodHost&) inside
// the simulation, where every PodHost call is a b_transport on the chip's socket that waits in
// simulated time. One ScPod per process (SystemC elaborates once).
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

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
constexpr uint64_t kTlmCounters = 0x1'0002'0000ull;   // read 8 bytes at + 8 * statistic id

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
  ScPod& pod_;
  int id_;
};

class ScPod : public sc_core::sc_module, public PodHost {
 public:
  ScPod(sc_core::sc_module_name name, const PodParams& p);
  ~ScPod() override;

  // Runs job inside the simulation (as the host thread); returns when it returns. An exception
  // of the job or of a chip is rethrown here.
  void run(const std::function<void(PodHost&)>& job);

  PodCore& core() override { return core_; }
  void write(int chip, uint64_t addr, const void* data, std::size_t n) override;
  void read(int chip, uint64_t addr, void* data, std::size_t n) override;
  void push(int chip, const std::vector<ChipCmd>& cmds) override;
  uint64_t run_until_idle(uint64_t max_cycles) override;
  TlmStatus status(int chip);

 private:
  friend class ScChip;
  void transport(int chip, tlm::tlm_command cmd, uint64_t addr, void* data, std::size_t n);
  void on_negedge();
  void host_thread();
  void fail(std::exception_ptr e);

  PodCore core_;
  sc_core::sc_clock clk_;
  std::vector<std::unique_ptr<ScChip>> chips_;
  std::vector<std::unique_ptr<tlm_utils::simple_initiator_socket<ScPod>>> sockets_;
  sc_core::sc_event cycle_ev_, idle_ev_;
  std::function<void(PodHost&)> job_;
  std::exception_ptr err_;
};

}  // namespace tpu
