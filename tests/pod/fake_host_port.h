// FakeHostPort: a machine with no chips behind its host ports, for testing the drivers'
// scheduling and planning without RTL: copies land in a byte map, pushed programs are recorded,
// runs take no time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "host_port.h"

namespace tpu {

// A machine with no chips behind its ports: copies land in a byte map, programs are recorded,
// runs take no time. What the drivers' scheduling can be tested against.
class FakeHostPort final : public HostPort {
 public:
  FakeHostPort(Topology topo, const std::string& variant) {
    info_.topo = std::move(topo);
    info_.variant = variant;
    info_.shape = chip_shape(variant);
    info_.link_bytes_per_cycle = 16;
    pushed.resize(static_cast<std::size_t>(info_.num_chips()));
  }
  const MachineInfo& info() const override { return info_; }
  uint64_t copy(const std::vector<HostCopy>& ops) override {
    for (const HostCopy& o : ops) {
      auto* b = static_cast<uint8_t*>(o.data);
      for (std::size_t i = 0; i < o.n; ++i) {
        auto& m = hbm[{o.chip, o.addr + i}];
        if (o.write)
          m = b[i];
        else
          b[i] = m;
      }
    }
    return 0;
  }
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override {
    copy({HostCopy{chip, true, addr, const_cast<void*>(data), n}});
  }
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override {
    copy({HostCopy{chip, false, addr, data, n}});
  }
  void push(int chip, const std::vector<ChipCmd>& cmds) override {
    auto& v = pushed[static_cast<std::size_t>(chip)];
    v.insert(v.end(), cmds.begin(), cmds.end());
  }
  RunStats run_until_idle(uint64_t max_cycles, bool) override {
    ++runs;
    last_max_cycles = max_cycles;
    RunStats r;
    r.chip_cycles.assign(pushed.size(), 0);
    return r;
  }
  ChipStatus status(int) override { return ChipStatus{}; }
  ChipCounters counters(int) override { return ChipCounters{}; }
  std::vector<LinkStat> link_stats() override { return {}; }
  void clear(int) override {}
  uint64_t cycle() const override { return 0; }

  std::vector<std::vector<ChipCmd>> pushed;
  std::map<std::pair<int, uint64_t>, uint8_t> hbm;
  int runs = 0;
  uint64_t last_max_cycles = 0;  // the last run's outer bound

 private:
  MachineInfo info_;
};

}  // namespace tpu
