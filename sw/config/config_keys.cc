#include "config_keys.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "chip_config.h"
#include "hbm_config.h"
#include "host_port.h"
#include "ici_fields.h"
#include "tpu/collective.h"

namespace tpu {

const char* key_type_name(KeyType t) {
  switch (t) {
    case KeyType::kSection:
      return "section";
    case KeyType::kUint:
      return "integer";
    case KeyType::kReal:
      return "number";
    case KeyType::kBool:
      return "boolean";
    case KeyType::kString:
      return "string";
    case KeyType::kList:
      return "list";
  }
  return "?";
}

ConfigKey& ConfigKeys::param(const std::string& name, KeyType type) {
  for (const ConfigKey& k : keys_)
    if (k.name == name) throw std::logic_error("configuration key '" + name + "' registered twice");
  keys_.push_back(ConfigKey{});
  keys_.back().name = name;
  keys_.back().type = type;
  return keys_.back();
}

const ConfigKey& ConfigKeys::at(const std::string& name) const {
  for (const ConfigKey& k : keys_)
    if (k.name == name) return k;
  throw std::logic_error("configuration key '" + name + "' is not in the table");
}

namespace {
// The section of a key ("pod" for "pod.shape", "" for "pod") and its last component.
std::string section_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}
std::string leaf_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// "integer 1..64 cycles", "number 0..1 per bit on a link", "list", ...
std::string type_and_range(const ConfigKey& k) {
  std::string t = key_type_name(k.type);
  if (k.type == KeyType::kUint || (k.type == KeyType::kList && k.hi > 0)) {
    const std::string hi = k.hi == ~uint64_t{0} ? "2^64-1" : std::to_string(k.hi);
    t += (k.type == KeyType::kList ? " of " : " ") + std::to_string(k.lo) + ".." + hi;
  } else if (k.type == KeyType::kReal && k.real_hi == std::numeric_limits<double>::infinity()) {
    t += std::string(k.real_open_lo ? " above " : " from ") + real_text(k.real_lo);
  } else if (k.type == KeyType::kReal) {
    t += std::string(" ") + (k.real_open_lo ? "above " : "") + real_text(k.real_lo) + ".." +
         real_text(k.real_hi);
  }
  if (!k.unit.empty()) t += " " + k.unit;
  return t;
}
}  // namespace

std::set<std::string> ConfigKeys::keys_in(const std::string& section) const {
  std::set<std::string> s;
  for (const ConfigKey& k : keys_)
    if (section_of(k.name) == section) s.insert(leaf_of(k.name));
  return s;
}

std::string ConfigKeys::listed(const std::string& section) const {
  std::string t;
  for (const ConfigKey& k : keys_)
    if (section_of(k.name) == section) t += (t.empty() ? "" : ", ") + leaf_of(k.name);
  return t;
}

std::string ConfigKeys::help(const std::string& section) const {
  std::string out;
  for (const ConfigKey& k : keys_) {
    if (!section.empty() && k.name != section && k.name.rfind(section + ".", 0) != 0) continue;
    if (k.type == KeyType::kSection) {
      out += (out.empty() ? "" : "\n") + k.name + ": " + k.doc + "\n";
      continue;
    }
    std::string line = "  " + k.name;
    line.resize(std::max<std::size_t>(line.size() + 1, 36), ' ');
    line += type_and_range(k);
    if (!k.def.empty()) line += ", default " + k.def;
    out += line + "\n      " + k.doc + "\n";
  }
  return out;
}

namespace {

void chip_and_pod_keys(ConfigKeys& t) {
  t.param("chip", KeyType::kSection).desc("the chip every chip of the machine is (chip.variant)");
  const ChipConfig c;
  const PodParams p;
  t.param("chip.variant", KeyType::kString)
      .default_val(c.variant)
      .desc("compile-time RTL variant, MXU rows x cols (built: tpusim --version)");
  t.param("chip.clock_ghz", KeyType::kReal)
      .real_range(0, 100, true)
      .units("GHz")
      .default_val(real_text(c.clock_ghz))
      .desc("the chip (and pod) clock, for the timeline's microseconds");
  for (const char* mem : {"vmem", "amem"}) {
    const bool v = mem[0] == 'v';
    t.param(std::string("chip.") + mem + "_rows", KeyType::kUint)
        .range(kMinMemRows, 0xFFFF)
        .units("rows")
        .default_val("the variant's")
        .desc(std::string(v ? "vector" : "accumulator") +
              " memory rows the chip exposes, at most the variant's (fewer: a scale model's "
              "smaller on-chip memory; the chip's range checks follow)");
  }
  t.param("chip.watchdog_cycles", KeyType::kUint)
      .range(kWatchdogRange)
      .units("cycles")
      .default_val(std::to_string(c.watchdog_cycles))
      .desc("cycles without progress before a run stops as hung (0: off)");
  t.param("pod", KeyType::kSection).desc("the chips' topology and links (a pod configuration)");
  t.param("pod.shape", KeyType::kList)
      .range(1, kPodMaxPerDim)
      .desc("chips per dimension, x first, 1 to 3 sizes, e.g. [4, 4] (required)");
  t.param("pod.wrap", KeyType::kList)
      .default_val("true per dimension")
      .desc("per dimension: true (ring, torus) or false (line, mesh)");
  t.param("pod.twist", KeyType::kBool)
      .default_val("false")
      .desc("a twisted torus: k x k x 2k, k x 2k x 2k or k x 2k (docs/topology.md)");
  t.param("pod.link_latency", KeyType::kUint)
      .range(1, 64)
      .units("cycles")
      .default_val(std::to_string(p.link_latency))
      .desc("cycles per ICI link, each way");
  t.param("pod.link_width_bytes", KeyType::kUint)
      .range(1, 1u << 16)
      .units("bytes")
      .default_val("a memory row")
      .desc("bytes a link carries per cycle: divides the memory row into 1 to " +
            std::to_string(kIciLinkGapMax) + " beats");
  t.param("pod.link_cycles_per_flit", KeyType::kUint)
      .range(1, kIciLinkGapMax)
      .units("cycles")
      .default_val("from link_width_bytes")
      .desc("cycles a link takes per flit (a memory row), any chip; not with link_width_bytes");
  t.param("pod.host_bytes_per_cycle", KeyType::kUint)
      .range(1, 64)
      .units("bytes")
      .default_val(std::to_string(p.host_bytes_per_cycle))
      .desc("bytes a chip's host port moves per cycle (one 64-byte burst at most)");
  t.param("pod.watchdog_cycles", KeyType::kUint)
      .range(kWatchdogRange)
      .units("cycles")
      .default_val("chip.watchdog_cycles")
      .desc("the pod's watchdog (overrides chip.watchdog_cycles)");
  t.param("pod.cube", KeyType::kList)
      .range(1, kPodMaxPerDim)
      .desc("chips per dimension of a cube, e.g. [4, 4, 4] (TPU v4); with pod.cubes and ocs:, "
            "instead of pod.shape (docs/topology.md)");
  t.param("pod.cubes", KeyType::kUint)
      .range(1, kPodMaxPerDim)
      .desc("cubes in the pod, side by side along z (cube 0 first), at most 16 chips along z");
  t.param("ocs", KeyType::kSection)
      .desc("the optical circuit switches: slices of whole cubes (tpusim slices)");
  t.param("ocs.slices", KeyType::kList)
      .desc("[{name, shape, cubes, wrap, twist, job}]: each slice's chips per dimension (whole "
            "cubes), its cubes x first, rings or lines, twisted, and the tpusim command it runs");
  t.param("mesh", KeyType::kString)
      .desc("named axes over the pod's dimensions, x first, e.g. \"data=2,model=2\"");
}

void train_keys(ConfigKeys& t) {
  const TrainSettings d;
  std::string layers;
  for (std::size_t w : d.layers) layers += (layers.empty() ? "" : ",") + std::to_string(w);
  t.param("train", KeyType::kSection)
      .desc("tpusim train's settings (docs/training.md); each flag of the same name overrides");
  t.param("train.layers", KeyType::kList)
      .range(1, 65536)
      .default_val(layers)
      .desc("layer widths, inputs first (at least two)");
  t.param("train.batch", KeyType::kUint)
      .range(1, 1u << 24)
      .default_val(std::to_string(d.batch))
      .desc("global batch, split evenly over the data-parallel ranks");
  t.param("train.steps", KeyType::kUint)
      .range(1, 100000)
      .default_val(std::to_string(d.steps))
      .desc("SGD steps");
  t.param("train.lr", KeyType::kReal)
      .real_range(kLrMin, kLrMax)
      .default_val(real_text(d.lr))
      .desc("learning rate (a normal f32)");
  t.param("train.seed", KeyType::kUint)
      .range(kSeedRange)
      .default_val(std::to_string(d.seed))
      .desc("data, teacher and initial weights");
  t.param("train.fresh_batches", KeyType::kBool)
      .default_val(d.fresh_batches ? "true" : "false")
      .desc("a new batch every step (else the same batch)");
  t.param("train.grad_pieces", KeyType::kUint)
      .range(1, 64)
      .default_val(std::to_string(d.grad_pieces))
      .desc("the first layer's gradient all-reduced in this many pieces");
  t.param("train.mesh", KeyType::kString)
      .desc("axes data, model, stage over the pod's dimensions, x first, e.g. "
            "\"data=1,stage=4\" (default: data parallel over every chip)");
  t.param("train.stages", KeyType::kString)
      .desc("the layers of each pipeline stage, e.g. \"0-1,2-3\" (default: equal stages)");
  t.param("train.microbatches", KeyType::kUint)
      .range(1, 4096)
      .default_val(std::to_string(d.microbatches))
      .desc("micro-batches per step and data replica (pipeline)");
  t.param("train.schedule", KeyType::kString)
      .default_val(d.schedule)
      .desc("pipeline schedule: gpipe, 1f1b or interleaved:V (V model chunks per stage)");
  t.param("train.model", KeyType::kString)
      .default_val(d.model)
      .desc("mlp, or gpt: a GPT-2-style transformer on bytes (layers: one value, its blocks)");
  t.param("train.d_model", KeyType::kUint)
      .range(32, 4096)
      .default_val(std::to_string(d.d_model))
      .desc("gpt: width (a multiple of 32 and of the heads)");
  t.param("train.heads", KeyType::kUint)
      .range(1, 128)
      .default_val(std::to_string(d.heads))
      .desc("gpt: attention heads");
  t.param("train.seq", KeyType::kUint)
      .range(32, 4096)
      .default_val(std::to_string(d.seq))
      .desc("gpt: tokens per window (a multiple of 32)");
  t.param("train.warmup", KeyType::kUint)
      .range(0, 100000)
      .default_val(std::to_string(d.warmup))
      .desc("gpt: steps of linear learning-rate warmup");
  t.param("train.weight_decay", KeyType::kReal)
      .real_range(0.0, 1.0)
      .default_val(real_text(d.weight_decay))
      .desc("gpt: AdamW's decoupled weight decay, on matrices only");
  t.param("train.data", KeyType::kString)
      .desc("gpt: the text the windows are cut from (default: the project's docs/*.md)");
}

void fault_keys(ConfigKeys& t) {
  t.param("faults", KeyType::kSection)
      .desc("fault injection, seeded (docs/hbm.md, docs/ici.md); tpusim --fault KEY=VALUE");
  t.param("faults.seed", KeyType::kUint)
      .range(kSeedRange)
      .default_val(std::to_string(FaultConfig{}.seed))
      .desc("every random fault derives from it (and the chip)");
  t.param("faults.hbm_single_bit_rate", KeyType::kReal)
      .real_range(0, 1)
      .units("per 64-bit word read")
      .default_val("0")
      .desc("P(one bit flips) per word read");
  t.param("faults.hbm_double_bit_rate", KeyType::kReal)
      .real_range(0, 1)
      .units("per 64-bit word read")
      .default_val("0")
      .desc("P(two bits flip) per word read");
  t.param("faults.hbm_flip_at", KeyType::kList)
      .desc("one-time flips: ADDR, or {addr, bits, chip}; --fault hbm_flip_at=ADDR[:BITS][@CHIP]");
  t.param("faults.link_bit_error_rate", KeyType::kReal)
      .real_range(0, 1)
      .units("per bit on a link")
      .default_val("0")
      .desc("P(a bit flips) per bit on a link");
  t.param("faults.link_burst_rate", KeyType::kReal)
      .real_range(0, 1)
      .units("per word on a link")
      .default_val("0")
      .desc("P(a burst starts) per word on a link");
  t.param("faults.link_drop_rate", KeyType::kReal)
      .real_range(0, 1)
      .units("per word on a link")
      .default_val("0")
      .desc("P(a word vanishes) per word on a link");
  t.param("faults.link_down", KeyType::kList)
      .desc("links that stop: {chip, port, cycle}; --fault link_down=CHIP:PORT@CYCLE");
}

// The `hbm:` keys, as tb/hbm/hbm_config.h defines and parses them.
void hbm_keys(ConfigKeys& t) {
  t.param("hbm", KeyType::kSection).desc("HBM timing and controller policy (docs/hbm.md)");
  for (const HbmParamInfo& p : hbm_param_info()) {
    const std::string name = "hbm." + p.key;
    const auto dot = p.key.find('.');
    if (dot != std::string::npos) {
      const std::string sec = "hbm." + p.key.substr(0, dot);
      if (t.keys_in("hbm").count(p.key.substr(0, dot)) == 0)
        t.param(sec, KeyType::kSection).desc("hbm: " + p.key.substr(0, dot));
    }
    if (p.kind == 'i') {
      t.param(name, KeyType::kUint).range(p.min, p.max).default_val(p.default_value).desc(p.desc);
    } else if (p.kind == 'r') {
      t.param(name, KeyType::kReal)
          .real_range(0, std::numeric_limits<double>::infinity(), true)
          .default_val(p.default_value)
          .desc(p.desc);
    } else {
      t.param(name, KeyType::kString).default_val(p.default_value).desc(p.desc);
    }
  }
}

ConfigKeys make_table() {
  ConfigKeys t;
  chip_and_pod_keys(t);
  train_keys(t);
  fault_keys(t);
  hbm_keys(t);
  return t;
}

}  // namespace

const ConfigKeys& config_keys() {
  static const ConfigKeys t = make_table();
  return t;
}

}  // namespace tpu
