// HostPort: what a driver sees of a machine of chips (one chip alone, a C++ pod, the SystemC
// pod): one transaction-level host port per chip. Copies to and from HBM, command pushes,
// status, error, counter and link-statistics registers, and "run until idle". No pins, no pod
// internals: the seam at which a pod could later be split across processes (docs/pod.md). It
// depends only on the hardware contract (chip_contract.h over the generated tpu_contract.h), the
// value types beside it (host_port_types.h) and the topology of the golden model.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_contract.h"
#include "host_port_types.h"
#include "tpu/collective.h"

namespace tpu {

// A pod-level failure that is not one chip's error register: an RTL assertion, an HBM checker
// violation, a hang. The message names the chips and what each was doing.
class PodError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The watchdog saw no progress (no command issued or retired, no flit or credit on a link, no
// host-port beat, no work counter changing) for watchdog_cycles while the machine was not idle:
// a deadlock, a credit leak, a wait nobody answers. The message names the chips and units still
// busy, their queue heads, ICI waits, host copies and links short of credits (docs/errors.md).
class HangError : public PodError {
 public:
  using PodError::PodError;
};

// The watchdog's default bound (PodParams::watchdog_cycles, the configs' watchdog_cycles).
constexpr uint64_t kDefaultWatchdogCycles = 1'000'000;

// A chip stopped with its sticky error register set (code, failing command index), or hung
// (code 0). The message names the chip, the code (chip_err_name) and the command, and for
// hbm_uncorrectable the HBM address (also raised, with command 0, when a host-port read or a
// backdoor read meets an uncorrectable word).
class ChipError : public PodError {
 public:
  ChipError(const std::string& what, unsigned code, int chip = 0, uint32_t cmd = 0)
      : PodError(what), code_(code), chip_(chip), cmd_(cmd) {}
  unsigned code() const { return code_; }
  int chip() const { return chip_; }
  uint32_t cmd() const { return cmd_; }

 private:
  unsigned code_;
  int chip_;
  uint32_t cmd_;
};

// What a machine is: fixed for its lifetime.
struct MachineInfo {
  Topology topo = Topology::mesh({1});  // chips and how they are joined
  std::string variant;                  // chip variant (every chip the same)
  ChipShape shape;                      // its compile-time sizes
  HbmConfig hbm;                        // its HBM timing and policy
  unsigned link_latency = 1;            // cycles per ICI link, each way
  unsigned link_gap = 1;                // cycles a link needs per flit (one memory row)
  double link_bytes_per_cycle = 0;      // what one link carries (row bytes / link_gap)
  unsigned host_bytes_per_cycle = 64;   // what one chip's host port moves per cycle
  int num_chips() const { return topo.num_chips(); }
};

// A chip's status register.
struct ChipStatus {
  bool busy = false;          // a command is in flight or queued on the chip
  bool halted = false;        // a HALT retired (issue stopped until clear)
  bool router_empty = true;   // no flit buffered in the chip's ICI router
  bool queue_empty = true;    // the host port holds no command the chip has not taken
  unsigned err = 0;           // sticky error code (chip_err_name), 0: none
  uint32_t err_cmd = 0;       // index of the failing command since reset
  uint32_t err_addr = 0;      // hbm_uncorrectable: the HBM byte address of the word
  uint64_t cmds_waiting = 0;  // commands the host port holds
};

// Statistics of one directed ICI link.
// flits: flit words the sender put on the wire (resent ones included). The link layer's
// counters (docs/ici.md "Link layer"): words of this link whose CRC failed (flit words at the
// receiver, control words back at the sender), replays the sender started, flits it resent, and
// whether the link was declared down (0 or 1).
struct LinkStat {
  int chip = 0;  // sender
  int dir = 0;   // 0..5: +X -X +Y -Y +Z -Z
  uint64_t flits = 0;
  uint64_t crc_errors = 0;
  uint64_t replays = 0;
  uint64_t replayed_flits = 0;
  uint64_t link_down = 0;
};

// One copy through a chip's host port: 64-byte aligned address and length. data: n bytes
// (read: filled in when the copy is done).
struct HostCopy {
  int chip = 0;
  bool write = true;
  uint64_t addr = 0;
  void* data = nullptr;
  std::size_t n = 0;
};

// The result of running the machine until it is idle.
struct RunStats {
  uint64_t cycles = 0;                // from the call until every chip is idle
  std::vector<uint64_t> chip_cycles;  // per chip: until its last busy cycle (<= cycles)
};

class HostPort {
 public:
  virtual ~HostPort() = default;
  virtual const MachineInfo& info() const = 0;
  int num_chips() const { return info().num_chips(); }

  // Copies through the chips' host ports, all in the same simulated time: each chip's port
  // works through its own copies in order at host_bytes_per_cycle, every chip at once, while
  // the chips run. Returns when every copy is done, with the cycles that took.
  virtual uint64_t copy(const std::vector<HostCopy>& ops) = 0;
  uint64_t write(int chip, uint64_t addr, const void* data, std::size_t n) {
    return copy({HostCopy{chip, true, addr, const_cast<void*>(data), n}});
  }
  uint64_t read(int chip, uint64_t addr, void* data, std::size_t n) {
    return copy({HostCopy{chip, false, addr, data, n}});
  }

  // Backdoor copies: no simulated time passes (test set-up, result checks); 64-byte aligned.
  // Counted apart (backdoor_bytes) so that reports can say how much data came in this way.
  virtual void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) = 0;
  virtual void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) = 0;
  uint64_t backdoor_bytes() const { return backdoor_bytes_; }

  // Queues commands on a chip's host port; they issue while the machine runs.
  virtual void push(int chip, const std::vector<ChipCmd>& cmds) = 0;

  // Runs until every chip is idle, every router empty and every link quiet. A chip whose error
  // register is set stops the run with a ChipError (its code and command index) when
  // stop_on_error, else it just drains its queue and the run goes on. No progress for the
  // watchdog's cycles (set_watchdog) is a HangError naming what is stuck; max_cycles is the
  // outer bound (a PodError that lists what every chip is doing). Every wait of the machine
  // (copy() too) is bounded by the watchdog.
  virtual RunStats run_until_idle(uint64_t max_cycles = 50'000'000, bool stop_on_error = true) = 0;
  // The watchdog's bound in cycles (0: off); PodParams::watchdog_cycles sets it at first.
  virtual void set_watchdog(uint64_t /*cycles*/) {}

  // Registers.
  virtual ChipStatus status(int chip) = 0;
  virtual ChipCounters counters(int chip) = 0;
  virtual std::vector<LinkStat> link_stats() = 0;
  virtual void clear(int chip) = 0;    // clears the sticky error and `halted` (one cycle)
  virtual uint64_t cycle() const = 0;  // the machine's cycle count

  // The timeline (docs/profiling.md; sw/common/trace.h writes it for Perfetto). Off by default.
  // set_trace turns recording on (or off) for every chip, keeping the events that overlap the
  // cycle window [from, to) of machine cycles (cycle()); turn it on while the machine is idle.
  // take_trace moves out the events of the commands completed so far. trace_label names the
  // commands pushed on `chip` from now on (until its next label), e.g. a collective's step.
  virtual void set_trace(const TraceOptions& o) {
    if (o.enabled) throw std::logic_error("this host port records no timeline");
  }
  virtual std::vector<TraceEvent> take_trace() { return {}; }
  virtual void trace_label(int /*chip*/, const std::string& /*label*/) {}

  // Called about every progress_every cycles while the machine runs, with the cycles so far
  // (often enough that a large pod, at a few hundred cycles a second, shows progress within
  // seconds; the tools' progress line prints at most every two seconds).
  std::function<void(uint64_t)> progress;
  uint64_t progress_every = 1000;

 protected:
  uint64_t backdoor_bytes_ = 0;
};

// The "chip i (x,y,z)" name of chip id i.
inline std::string chip_name(const Topology& topo, int id) {
  const PodCoord c = topo.coord(id);
  return "chip " + std::to_string(id) + " (" + std::to_string(c[0]) + "," + std::to_string(c[1]) +
         "," + std::to_string(c[2]) + ")";
}

}  // namespace tpu
