// ChipConfig: the run-time description of one chip, read from a YAML file (configs/*.yaml).
// One typed struct with defaults and one-line descriptions, filled and validated in one place.
#pragma once

#include <stdexcept>
#include <map>
#include <string>
#include <vector>

#include "fault_config.h"
#include "hbm_config.h"
#include "pod.h"

namespace tpu {

// A configuration file that cannot be read or breaks a rule. The message names the file, the key
// and the rule.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChipConfig {
  std::string source = "<defaults>";  // file the values came from
  std::string variant = "16x16";      // chip.variant: compile-time RTL variant (MXU rows x cols)
  HbmConfig hbm;                      // hbm: HBM timing and controller policy (tb/hbm/hbm_config.h)
  double clock_ghz = 1.0;             // chip.clock_ghz: the chip (and pod) clock, for the
                                      // timeline's microseconds (docs/profiling.md)
  FaultConfig faults;                 // faults: fault injection (none by default; docs/hbm.md)
  uint64_t watchdog_cycles = kDefaultWatchdogCycles;  // chip.watchdog_cycles: cycles without
                                      // progress before a run stops as hung (0: off;
                                      // docs/errors.md)
};

// Reads `path`. Unknown keys, wrong types, impossible values and variants that were not built
// are ConfigErrors.
ChipConfig load_chip_config(const std::string& path);

// A pod (configs/pod_*.yaml): a `pod` section (shape, wrap, link_latency), and the `chip` and
// `hbm` sections of a chip configuration, which every chip of the pod shares.
struct PodConfig {
  std::string source = "<defaults>";
  ChipConfig chip;
  PodParams params;  // topology, link latency, variant and HBM (tb/pod/pod.h)
  std::string mesh;  // the `mesh:` section ("data=2,model=2"), or "" when there is none
  // The `train:` section (tpusim train): key -> value as its flag takes it ("layers" ->
  // "64,128,32", "lr" -> "0.5", "fresh_batches" -> "1"); checked when loaded.
  std::map<std::string, std::string> train;
};
PodConfig load_pod_config(const std::string& path);

// tpusim's --fault KEY=VALUE: one key of a `faults:` section (seed, hbm_single_bit_rate,
// hbm_double_bit_rate, hbm_flip_at=ADDR[:BITS][@CHIP], which adds one flip,
// link_bit_error_rate, link_burst_rate, link_drop_rate, link_down=CHIP:PORT@CYCLE, which adds
// one link). Then the whole
// set is checked against the machine (HBM bytes, chips). Both throw std::invalid_argument
// naming the flag and the rule.
void apply_fault_flag(FaultConfig& f, const std::string& key_value);
// Every --fault of a line, in order (apply_fault_flag): a key that holds one value (all but
// hbm_flip_at and link_down, which add an item per flag) given twice is an error naming it, as
// the same key twice in a faults: section is.
void apply_fault_flags(FaultConfig& f, const std::vector<std::string>& key_values);
void check_fault_flags(const FaultConfig& f, uint64_t hbm_bytes, int chips);

}  // namespace tpu
