// A host port for `tpusim ... --check`: everything a run does before its first simulated cycle
// happens for real (the configuration, the machine built, the inputs, the plans and programs,
// their capacity checks), host copies are done as backdoor accesses (the data goes where it
// would, no time passes), so the check gets through the loads to the plans made after them (the
// GPT step's, per step), and the first run (run_until_idle) throws CheckStop instead. The drivers
// see only the HostPort interface, so every pod command gets the same check without a line of
// its own.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "host_port.h"

namespace tpu {

// Thrown where a checked run would start simulating; what(): where it stopped.
struct CheckStop : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CheckPort : public HostPort {
 public:
  explicit CheckPort(HostPort& inner) : in_(inner) {}

  const MachineInfo& info() const override { return in_.info(); }
  uint64_t copy(const std::vector<HostCopy>& ops) override {
    for (const HostCopy& c : ops) {
      if (c.chip < 0 || c.chip >= num_chips())
        throw std::logic_error("CheckPort::copy: no chip " + std::to_string(c.chip));
      if (c.write)
        in_.backdoor_write(c.chip, c.addr, c.data, c.n);
      else
        in_.backdoor_read(c.chip, c.addr, c.data, c.n);
    }
    return 0;
  }
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override {
    in_.backdoor_write(chip, addr, data, n);
    backdoor_bytes_ += n;
  }
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override {
    in_.backdoor_read(chip, addr, data, n);
    backdoor_bytes_ += n;
  }
  void push(int chip, const std::vector<ChipCmd>& cmds) override {
    if (chip < 0 || chip >= num_chips())
      throw std::logic_error("CheckPort::push: no chip " + std::to_string(chip));
    pushed_ += cmds.size();
  }
  RunStats run_until_idle(uint64_t, bool) override {
    throw CheckStop("before running " + std::to_string(pushed_) + " command(s)");
  }
  void set_watchdog(uint64_t cycles) override { in_.set_watchdog(cycles); }
  ChipStatus status(int chip) override { return in_.status(chip); }
  ChipCounters counters(int chip) override { return in_.counters(chip); }
  std::vector<LinkStat> link_stats() override { return in_.link_stats(); }
  void clear(int chip) override { in_.clear(chip); }
  uint64_t cycle() const override { return in_.cycle(); }
  void set_trace(const TraceOptions& o) override { in_.set_trace(o); }
  std::vector<TraceEvent> take_trace() override { return in_.take_trace(); }
  void trace_label(int chip, const std::string& label) override { in_.trace_label(chip, label); }

 private:
  HostPort& in_;
  uint64_t pushed_ = 0;
};

}  // namespace tpu
