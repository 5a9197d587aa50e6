#include "lone_chip.h"

#include "pod.h"

namespace tpu {

namespace {

PodParams alone(const std::string& variant, const HbmConfig& hbm, const std::string& waves,
                const FaultConfig& faults, double clock_ghz, unsigned vmem_rows,
                unsigned amem_rows) {
  PodParams p;
  p.vmem_rows = vmem_rows;
  p.amem_rows = amem_rows;
  p.wave_clock_ghz = clock_ghz;
  p.topo = Topology::mesh({1});
  p.variant = variant;
  p.hbm = hbm;
  p.faults = faults;
  if (!waves.empty()) {
    p.wave_chips = {0};
    p.wave_path = waves;
  }
  return p;
}

}  // namespace

LoneChipMachine::LoneChipMachine(const std::string& variant, const HbmConfig& hbm,
                                 const std::string& waves, const FaultConfig& faults,
                                 double clock_ghz, unsigned vmem_rows, unsigned amem_rows)
    : machine_(std::make_unique<CppPodHost>(
          alone(variant, hbm, waves, faults, clock_ghz, vmem_rows, amem_rows))) {}

LoneChipMachine::~LoneChipMachine() = default;

LoneChip::LoneChip(const std::string& variant, const HbmConfig& hbm, const std::string& waves,
                   const FaultConfig& faults, double clock_ghz, unsigned vmem_rows,
                   unsigned amem_rows)
    : LoneChipMachine(variant, hbm, waves, faults, clock_ghz, vmem_rows, amem_rows),
      ChipDriver(*machine_, 0) {}

}  // namespace tpu
