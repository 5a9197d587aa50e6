#include "lone_chip.h"

#include "pod.h"

namespace tpu {

namespace {

PodParams alone(const std::string& variant, const HbmConfig& hbm, const std::string& waves,
                const FaultConfig& faults) {
  PodParams p;
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
                                 const std::string& waves, const FaultConfig& faults)
    : machine_(std::make_unique<CppPodHost>(alone(variant, hbm, waves, faults))) {}

LoneChipMachine::~LoneChipMachine() = default;

LoneChip::LoneChip(const std::string& variant, const HbmConfig& hbm, const std::string& waves,
                   const FaultConfig& faults)
    : LoneChipMachine(variant, hbm, waves, faults), ChipDriver(*machine_, 0) {}

}  // namespace tpu
