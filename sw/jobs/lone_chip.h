// LoneChip: a chip standing alone, a machine of one chip stepped in plain C++ (CppPodHost), with
// its ChipDriver: what the matmul job, bench_chip and the chip tests run on. The driver itself
// builds no engine; this owns the one it drives.
#pragma once

#include <memory>
#include <string>

#include "chip_driver.h"
#include "fault_config.h"
#include "hbm_config.h"
#include "host_port.h"

namespace tpu {

// The machine of one chip a LoneChip drives (a base, so that it is built before the driver).
class LoneChipMachine {
 protected:
  LoneChipMachine(const std::string& variant, const HbmConfig& hbm, const std::string& waves,
                  const FaultConfig& faults, double clock_ghz, unsigned vmem_rows,
                  unsigned amem_rows);
  ~LoneChipMachine();
  std::unique_ptr<HostPort> machine_;
};

class LoneChip : private LoneChipMachine, public ChipDriver {
 public:
  // A chip of `variant` (std::invalid_argument if it is not built); waves: an FST file that
  // every signal of the chip is dumped to, or "", timed by a `clock_ghz` clock (cycle t at
  // t / clock_ghz ns, as on the trace). faults: fault injection (none by default). vmem_rows,
  // amem_rows: the on-chip memory rows it exposes (PodParams; 0: the variant's).
  explicit LoneChip(const std::string& variant, const HbmConfig& hbm = HbmConfig{},
                    const std::string& waves = "", const FaultConfig& faults = FaultConfig{},
                    double clock_ghz = 1.0, unsigned vmem_rows = 0, unsigned amem_rows = 0);
};

}  // namespace tpu
