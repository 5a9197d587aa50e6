// ChipConfig and PodConfig: the run-time description of one chip or a pod, read from a YAML file
// (configs/*.yaml), with tpusim's --fault overrides. Typed structs with defaults, filled and
// checked in one place against the one table of keys (config_keys.h: names, types, ranges,
// defaults, descriptions); errors name the file, the key and the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
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
  HbmConfig hbm;                      // hbm: HBM timing and controller policy (docs/hbm.md)
  double clock_ghz = 1.0;             // chip.clock_ghz: the chip (and pod) clock, for the
                                      // timeline's microseconds (docs/profiling.md)
  // chip.vmem_rows, chip.amem_rows: the on-chip memory rows the chip exposes (0: the variant's;
  // a scale model's smaller on-chip memory, docs/scale_models.md).
  unsigned vmem_rows = 0, amem_rows = 0;
  ChipShape shape() const { return chip_shape(variant, vmem_rows, amem_rows); }
  FaultConfig faults;                 // faults: fault injection (none by default; docs/hbm.md)
  uint64_t watchdog_cycles = kDefaultWatchdogCycles;  // chip.watchdog_cycles: cycles without
                                                      // progress before a run stops as hung (0:
                                                      // off; docs/errors.md)
};

// Reads `path`. Unknown keys, wrong types, impossible values and variants that were not built
// are ConfigErrors.
ChipConfig load_chip_config(const std::string& path);
// The same from YAML text (the Python module's config dicts, written as YAML flow text): every
// rule and message is load_chip_config's, with `name` where those name the file.
ChipConfig load_chip_config_text(const std::string& text, const std::string& name);

// The `train:` section of a pod configuration (tpusim train, docs/training.md), each key checked
// against its range in the table (config_keys(): train.*); a key the file does not give keeps
// the default here, and tpusim train's flag of the same name overrides either.
struct TrainSettings {
  std::vector<std::size_t> layers = {64, 128, 32};  // widths, inputs first (two or more)
  uint64_t batch = 256;                             // global batch
  uint64_t steps = 20;                              // SGD steps
  double lr = 0.5;                                  // learning rate
  uint64_t seed = 1;                                // data, teacher and initial weights
  uint64_t grad_pieces = 4;    // the first layer's gradient all-reduced in this many pieces
  bool fresh_batches = false;  // a new batch every step
  // Pipeline parallelism (docs/training.md, "Pipeline"): the mesh with a stage axis
  // ("data=1,stage=4"; "" data parallel over every chip), the stages' layers ("0-1,2-3"; ""
  // equal), micro-batches per step and data replica, the schedule (gpipe, 1f1b, interleaved:V).
  std::string mesh, stages;
  uint64_t microbatches = 1;
  std::string schedule = "gpipe";
  // The model (docs/training.md): "mlp", or "gpt" (layers: one value, the number of blocks).
  std::string model = "mlp";
  uint64_t d_model = 32, heads = 2, seq = 32, warmup = 0;
  double weight_decay = 0;
  std::string data;  // the GPT's text file ("": the project's docs/*.md)
  std::vector<std::string> given;  // the keys the config set (each without "train.")
  bool has(const std::string& key) const {
    for (const std::string& k : given)
      if (k == key) return true;
    return false;
  }
};

// A real as the shortest decimal text that reads back as the same double ("0.5", "1e-05").
std::string real_text(double v);

// A pod (configs/pod_*.yaml): a `pod` section (shape, wrap, link_latency), and the `chip` and
// `hbm` sections of a chip configuration, which every chip of the pod shares.
struct PodConfig {
  std::string source = "<defaults>";
  ChipConfig chip;
  PodParams params;     // topology, link latency, variant and HBM (tb/pod/pod.h)
  std::string mesh;     // the `mesh:` section ("data=2,model=2"), or "" when there is none
  TrainSettings train;  // the `train:` section (tpusim train)
  // A pod of cubes joined by optical circuit switches (pod.cube, pod.cubes, ocs.slices): the
  // cubes and slices (params.topo is then ocs.floor(), params.wiring ocs_wiring), and per slice
  // the tpusim command line it runs (its `job`, "" for none). ocs.any() is false otherwise.
  OcsPod ocs;
  std::vector<std::string> slice_jobs;
};
// A pod configuration. A pod of cubes and slices (an ocs: section) is refused here, naming
// `tpusim slices`, which loads it with load_sliced_pod_config (and no other file).
PodConfig load_pod_config(const std::string& path);
PodConfig load_pod_config_text(const std::string& text, const std::string& name);
PodConfig load_sliced_pod_config(const std::string& path);
PodConfig load_sliced_pod_config_text(const std::string& text, const std::string& name);

// While one lives on a thread, load_pod_config on that thread gives `cfg`, whatever the path:
// tpusim slices runs each slice's command line on a thread of its own, on its slice's pod.
class ScopedPodConfig {
 public:
  explicit ScopedPodConfig(PodConfig cfg);
  ~ScopedPodConfig();
  ScopedPodConfig(const ScopedPodConfig&) = delete;
  ScopedPodConfig& operator=(const ScopedPodConfig&) = delete;

 private:
  PodConfig cfg_;
  const PodConfig* prev_;
};

// tpusim's --fault KEY=VALUE: one key of a `faults:` section, the same keys of the same table
// (config_keys(): faults.*): seed, hbm_single_bit_rate, hbm_double_bit_rate,
// hbm_flip_at=ADDR[:BITS][@CHIP], which adds one flip, link_bit_error_rate, link_burst_rate,
// link_drop_rate, link_down=CHIP:PORT@CYCLE, which adds one link. Then the whole set is checked
// against the machine (HBM bytes, chips). Both throw std::invalid_argument naming the flag and
// the rule.
void apply_fault_flag(FaultConfig& f, const std::string& key_value);
// Every --fault of a line, in order (apply_fault_flag): a key that holds one value (all but
// hbm_flip_at and link_down, which add an item per flag) given twice is an error naming it, as
// the same key twice in a faults: section is.
void apply_fault_flags(FaultConfig& f, const std::vector<std::string>& key_values);
void check_fault_flags(const FaultConfig& f, uint64_t hbm_bytes, int chips);

}  // namespace tpu
