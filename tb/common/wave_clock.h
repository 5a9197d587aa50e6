// WaveClock: where a harness's FST dump puts each clock edge, so that a time read in GTKWave is
// the same moment as in the Perfetto timeline (docs/profiling.md): the rising edge that starts
// cycle n (counted from the dump's origin) at n x period, the falling edge at (n + 1/2) x period,
// in picoseconds (the dumps' timescale is 1 ps; GTKWave shows ns and us). The period is the
// configured clock's (chip.clock_ghz, 1 GHz by default: a cycle is 1 ns).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tpu {

struct WaveClock {
  double period_ps = 1000.0;  // 1 / clock_ghz, in ps
  uint64_t origin = 0;        // the harness's cycle count that the dump's time 0 is

  // The clock of `clock_ghz` (> 0, finite), dumping from cycle `origin` on.
  static WaveClock at(double clock_ghz, uint64_t origin = 0) {
    if (!(clock_ghz > 0) || !std::isfinite(clock_ghz))
      throw std::invalid_argument("waves: clock_ghz " + std::to_string(clock_ghz) +
                                  " must be a finite number above 0");
    return WaveClock{1000.0 / clock_ghz, origin};
  }
  // The dump time, in ps, of the rising edge that starts cycle `cycle` (a harness count).
  uint64_t rise(uint64_t cycle) const { return ps(static_cast<double>(cycle - origin)); }
  // The dump time of the falling edge in the middle of cycle `cycle`.
  uint64_t fall(uint64_t cycle) const { return ps(static_cast<double>(cycle - origin) + 0.5); }

 private:
  uint64_t ps(double cycles) const {
    return static_cast<uint64_t>(std::llround(cycles * period_ps));
  }
};

}  // namespace tpu
