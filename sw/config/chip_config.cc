#include "chip_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "chip_dut.h"
#include "config_keys.h"
#include "ici_fields.h"
#include "mesh_text.h"
#include "mxu_dut.h"
#include "tpu/limits.h"
#include "tpu/pipeline.h"
#include "tpu/twisted_torus.h"
#include "tpu_contract.h"
#include "yaml_keys.h"

namespace tpu {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& key, const std::string& rule) {
  throw ConfigError(file + ": " + (key.empty() ? "" : "key '" + key + "': ") + rule);
}

void check_keys(const YAML::Node& map, const std::string& file, const std::string& where,
                const std::set<std::string>& known) {
  for (const auto& kv : map) {
    const auto key = kv.first.as<std::string>();
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail(file, where + key, "unknown key (known here: " + list + ")");
    }
  }
}

// watchdog_cycles: cycles without progress before a run stops as hung; 0 turns it off.
uint64_t watchdog_of(const YAML::Node& n, const std::string& file, const std::string& where) {
  long long v = -1;
  try {
    v = n.as<long long>();
  } catch (const YAML::Exception&) {
  }
  if (v < 0 || static_cast<uint64_t>(v) > kWatchdogRange.hi)
    fail(file, where + "watchdog_cycles",
         "must be an integer number of cycles from 0 (off) to 2^40 (got '" +
             (n.IsScalar() ? n.Scalar() : std::string("a ") + (n.IsMap() ? "mapping" : "list")) +
             "')");
  return static_cast<uint64_t>(v);
}

// A non-negative integer (decimal or 0x hex) in the range `r`, or fail naming the key, `what`
// it is and the range.
uint64_t get_uint(const YAML::Node& n, const std::string& file, const std::string& key,
                  const UintRange& r, const std::string& what) {
  uint64_t v = 0;
  bool ok = n.IsScalar();
  if (ok) {
    const std::string t = n.as<std::string>();
    try {
      std::size_t used = 0;
      ok = !t.empty() && t[0] != '-' && (v = std::stoull(t, &used, 0), used == t.size());
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || !r.holds(v)) fail(file, key, "must be " + what + " (" + r.text() + ")");
  return v;
}
uint64_t get_uint(const YAML::Node& n, const std::string& file, const std::string& key, uint64_t hi,
                  const std::string& what) {
  return get_uint(n, file, key, UintRange{0, hi, ""}, what);
}

std::string get_string(const YAML::Node& node, const std::string& file, const std::string& key) {
  if (!node.IsScalar()) fail(file, key, "must be a string");
  return node.as<std::string>();
}

}  // namespace

namespace {
// The file at `path`, or with `text` the YAML text itself (`path` then only names it).
YAML::Node load_yaml(const std::string& path, const std::string* text = nullptr) {
  std::error_code ec;
  if (!text && std::filesystem::is_directory(path, ec))
    throw ConfigError(path +
                      ": is a directory, not a configuration file (a YAML file such as "
                      "configs/default.yaml for a chip, configs/pod_2x2.yaml for a pod)");
  YAML::Node root;
  try {
    root = text ? YAML::Load(*text) : YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw ConfigError(path + ": cannot open the configuration file");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": not valid YAML: " + e.what());
  }
  const std::string dup = yaml_duplicate_key(root);  // yaml-cpp keeps duplicates silently
  if (!dup.empty()) throw ConfigError(path + ": " + dup);
  return root;
}

ChipConfig chip_config_from(const YAML::Node& root, const std::string& path);
}  // namespace

namespace {
PodConfig pod_config_from(const std::string& path, const std::string* text, bool sliced);
thread_local const PodConfig* t_scoped_pod = nullptr;  // ScopedPodConfig
}  // namespace

std::string real_text(double v) {
  char b[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    if (std::strtod(b, nullptr) == v) break;
  }
  return b;
}

namespace {
ChipConfig chip_config_of(const std::string& path, const std::string* text) {
  try {
    const YAML::Node root = load_yaml(path, text);
    if (!root.IsMap()) fail(path, "", "the top level must be a mapping with a 'chip' section");
    check_keys(root, path, "", {"chip", "hbm", "faults"});  // of the table's top level
    return chip_config_from(root, path);
  } catch (const YAML::Exception& e) {  // a conversion no rule above foresaw (a key that is a list)
    throw ConfigError(path + ": " + e.what());
  }
}

PodConfig pod_config_of(const std::string& path, const std::string* text, bool sliced = false) {
  try {
    return pod_config_from(path, text, sliced);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": " + e.what());
  }
}
}  // namespace

ChipConfig load_chip_config(const std::string& path) { return chip_config_of(path, nullptr); }
ChipConfig load_chip_config_text(const std::string& text, const std::string& name) {
  return chip_config_of(name, &text);
}
PodConfig load_pod_config(const std::string& path) {
  if (t_scoped_pod) return *t_scoped_pod;
  return pod_config_of(path, nullptr);
}
PodConfig load_pod_config_text(const std::string& text, const std::string& name) {
  return pod_config_of(name, &text);
}
PodConfig load_sliced_pod_config(const std::string& path) {
  return pod_config_of(path, nullptr, true);
}
PodConfig load_sliced_pod_config_text(const std::string& text, const std::string& name) {
  return pod_config_of(name, &text, true);
}

ScopedPodConfig::ScopedPodConfig(PodConfig cfg) : cfg_(std::move(cfg)), prev_(t_scoped_pod) {
  t_scoped_pod = &cfg_;
}
ScopedPodConfig::~ScopedPodConfig() { t_scoped_pod = prev_; }

namespace {

// An integer key of the pod section, or fail naming the file, the key and the unit.
int pod_int(const YAML::Node& n, const std::string& path, const std::string& key,
            const char* unit) {
  try {
    return n.as<int>();
  } catch (const YAML::Exception&) {
    fail(path, "pod." + key, std::string("must be an integer number of ") + unit);
  }
}

// A list of 1 to 3 sizes of 1 to 16 chips, x first, at `key` (pod.shape, pod.cube, a slice's
// shape).
std::vector<int> sizes_list(const YAML::Node& shape, const std::string& path,
                            const std::string& key) {
  const ConfigKey& ks = config_keys().at("pod.shape");
  if (!shape.IsSequence() || shape.size() < 1 || shape.size() > 3)
    fail(path, key, "must be a list of 1 to 3 sizes, x first, e.g. [4, 4]");
  std::vector<int> v;
  for (const auto& n : shape) {
    int x = 0;
    try {
      x = n.as<int>();
    } catch (const YAML::Exception&) {
      fail(path, key, "every size must be an integer from 1 to " + std::to_string(ks.hi));
    }
    if (x < 0 || !ks.holds(static_cast<uint64_t>(x)))
      fail(path, key,
           "every size must be from 1 to " + std::to_string(ks.hi) + " (got " + std::to_string(x) +
               ")");
    v.push_back(x);
  }
  return v;
}

// A list of one boolean per dimension of `shape_key` at `key`: a ring, or a line (pod.wrap, a
// slice's wrap).
std::vector<bool> wraps_list(const YAML::Node& w, std::size_t dims, const std::string& path,
                             const std::string& key, const std::string& shape_key) {
  if (!w.IsSequence() || w.size() != dims)
    fail(path, key,
         "must be a list of " + std::to_string(dims) + " booleans (one per dimension of " +
             shape_key + ")");
  std::vector<bool> v;
  for (std::size_t d = 0; d < w.size(); ++d) {
    try {
      v.push_back(w[d].as<bool>());
    } catch (const YAML::Exception&) {
      fail(path, key, "every entry must be true (ring) or false (line)");
    }
  }
  return v;
}

// pod.shape and pod.wrap: the topology.
void pod_topology_from(const YAML::Node& pod, const std::string& path, Topology& topo) {
  const YAML::Node shape = pod["shape"];
  if (!shape) fail(path, "pod.shape", "missing: chips per dimension, x first, e.g. [4, 4]");
  topo.size = sizes_list(shape, path, "pod.shape");
  topo.wrap.assign(topo.size.size(), true);
  if (const YAML::Node w = pod["wrap"])
    topo.wrap = wraps_list(w, topo.size.size(), path, "pod.wrap", "pod.shape");
}

// pod.link_latency, pod.link_width_bytes, pod.link_cycles_per_flit, pod.host_bytes_per_cycle.
void pod_links_from(const YAML::Node& pod, const std::string& path, const std::string& variant,
                    PodParams& p) {
  const ConfigKeys& K = config_keys();
  if (const YAML::Node l = pod["link_latency"]) {
    const ConfigKey& k = K.at("pod.link_latency");
    const int v = pod_int(l, path, "link_latency", "cycles");
    if (v < 0 || !k.holds(static_cast<uint64_t>(v)))
      fail(path, "pod.link_latency",
           "must be from " + std::to_string(k.lo) + " to " + std::to_string(k.hi) +
               " cycles (got " + std::to_string(v) + ")");
    p.link_latency = static_cast<unsigned>(v);
  }
  if (const YAML::Node w = pod["link_width_bytes"]) {
    const int v = pod_int(w, path, "link_width_bytes", "bytes");
    const int row = static_cast<int>(chip_shape(variant).cols) * 4;
    if (v < 1 || row % v != 0 || row / v > static_cast<int>(kIciLinkGapMax))
      fail(path, "pod.link_width_bytes",
           "must divide the " + std::to_string(row) + "-byte memory row of chip " + variant +
               " into 1 to " + std::to_string(kIciLinkGapMax) + " beats (got " + std::to_string(v) +
               ")");
    p.link_width = static_cast<unsigned>(v);
  }
  if (const YAML::Node g = pod["link_cycles_per_flit"]) {
    const ConfigKey& k = K.at("pod.link_cycles_per_flit");
    const int v = pod_int(g, path, "link_cycles_per_flit", "cycles");
    if (v < 0 || !k.holds(static_cast<uint64_t>(v)))
      fail(path, "pod.link_cycles_per_flit",
           "must be from " + std::to_string(k.lo) + " to " + std::to_string(k.hi) +
               " cycles per flit (the link's 10-bit pacing counter; got " + std::to_string(v) +
               ")");
    if (p.link_width != 0)
      fail(path, "pod.link_cycles_per_flit",
           "give link_cycles_per_flit or link_width_bytes, not both (link_width_bytes: " +
               std::to_string(p.link_width) + ")");
    p.link_gap = static_cast<unsigned>(v);
  }
  if (const YAML::Node h = pod["host_bytes_per_cycle"]) {
    const ConfigKey& k = K.at("pod.host_bytes_per_cycle");
    const int v = pod_int(h, path, "host_bytes_per_cycle", "bytes");
    if (v < 0 || !k.holds(static_cast<uint64_t>(v)))
      fail(path, "pod.host_bytes_per_cycle",
           "must be from " + std::to_string(k.lo) + " to " + std::to_string(k.hi) +
               " bytes per cycle (one 64-byte burst per cycle at most; got " + std::to_string(v) +
               ")");
    p.host_bytes_per_cycle = static_cast<unsigned>(v);
  }
}

// sizes_list padded with 1 to three dimensions: pod.cube, a slice's shape.
std::array<int, 3> sizes_from(const YAML::Node& n, const std::string& path,
                              const std::string& key) {
  const std::vector<int> l = sizes_list(n, path, key);
  std::array<int, 3> v{1, 1, 1};
  std::copy(l.begin(), l.end(), v.begin());
  return v;
}

// One entry of ocs.slices.
OcsSlice slice_from(const YAML::Node& e, const std::string& path, const std::string& key,
                    std::string& job) {
  if (!e.IsMap()) fail(path, key, "must be a mapping {name, shape, cubes, wrap, twist, job}");
  check_keys(e, path, key + ".", {"name", "shape", "cubes", "wrap", "twist", "job"});
  for (const char* need : {"name", "shape", "cubes"})
    if (!e[need]) fail(path, key + "." + need, "missing (a slice names its name, shape and cubes)");
  OcsSlice s;
  s.name = get_string(e["name"], path, key + ".name");
  s.shape = sizes_from(e["shape"], path, key + ".shape");
  const YAML::Node c = e["cubes"];
  if (!c.IsSequence() || c.size() == 0)
    fail(path, key + ".cubes", "must be a list of cube numbers, x fastest, e.g. [0, 1]");
  for (const auto& x : c)
    s.cubes.push_back(static_cast<int>(
        get_uint(x, path, key + ".cubes", UintRange{0, kPodMaxPerDim - 1, ""}, "a cube number")));
  if (const YAML::Node w = e["wrap"]) {
    const std::vector<bool> l =
        wraps_list(w, e["shape"].size(), path, key + ".wrap", key + ".shape");
    std::copy(l.begin(), l.end(), s.wrap.begin());
  }
  if (const YAML::Node t = e["twist"]) {
    try {
      s.twist = t.as<bool>();
    } catch (const YAML::Exception&) {
      fail(path, key + ".twist", "must be true (a twisted torus) or false");
    }
  }
  if (const YAML::Node j = e["job"]) job = get_string(j, path, key + ".job");
  return s;
}

// pod.cube, pod.cubes and the ocs: section: a pod of cubes and its slices.
void pod_cubes_from(const YAML::Node& root, const YAML::Node& pod, const std::string& path,
                    PodConfig& pc) {
  if (pod["shape"])
    fail(path, "pod.shape",
         "give pod.shape (one torus) or pod.cube and pod.cubes (cubes and slices), not both");
  if (pod["wrap"]) fail(path, "pod.wrap", "a pod of cubes wraps per slice (ocs.slices[i].wrap)");
  if (!pod["cube"])
    fail(path, "pod.cube", "missing: chips per dimension of a cube, e.g. [2, 2, 2]");
  if (!pod["cubes"]) fail(path, "pod.cubes", "missing: how many cubes the pod has");
  OcsPod& o = pc.ocs;
  o.cube = sizes_from(pod["cube"], path, "pod.cube");
  const ConfigKey& kc = config_keys().at("pod.cubes");
  o.cubes = static_cast<int>(
      get_uint(pod["cubes"], path, "pod.cubes", UintRange{kc.lo, kc.hi, ""}, "a number of cubes"));
  const YAML::Node ocs = root["ocs"];
  if (!ocs) fail(path, "ocs", "missing: a pod of cubes needs an ocs: section with its slices");
  if (!ocs.IsMap()) fail(path, "ocs", "must be a mapping");
  check_keys(ocs, path, "ocs.", config_keys().keys_in("ocs"));
  const YAML::Node sl = ocs["slices"];
  if (!sl || !sl.IsSequence() || sl.size() == 0)
    fail(path, "ocs.slices", "must be a list of slices [{name, shape, cubes, ...}]");
  for (std::size_t i = 0; i < sl.size(); ++i) {
    std::string job;
    o.slices.push_back(slice_from(sl[i], path, "ocs.slices[" + std::to_string(i) + "]", job));
    pc.slice_jobs.push_back(job);
  }
  try {
    o.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, "ocs.slices", e.what());
  }
  pc.params.topo = o.floor();
  pc.params.wiring = ocs_wiring(o);
}

// Every chip a fault names is in the pod.
void check_fault_chips(const FaultConfig& f, const std::string& path, int chips) {
  auto check = [&](int c, const std::string& key) {
    if (c >= chips)
      fail(path, key,
           "chip " + std::to_string(c) + " is not in the pod (0.." + std::to_string(chips - 1) +
               ")");
  };
  for (std::size_t i = 0; i < f.hbm_flip_at.size(); ++i)
    check(f.hbm_flip_at[i].chip, "faults.hbm_flip_at[" + std::to_string(i) + "].chip");
  for (std::size_t i = 0; i < f.link_down.size(); ++i)
    check(f.link_down[i].chip, "faults.link_down[" + std::to_string(i) + "].chip");
}

// The named mesh over the pod's dimensions: "data=2,model=2" (tpu::parse_mesh).
std::string mesh_from(const YAML::Node& m, const std::string& path, const Topology& topo) {
  std::string text;
  try {
    text = m.as<std::string>();
  } catch (const YAML::Exception&) {
    fail(path, "mesh", "must be a string of name=size items, x first, e.g. \"data=2,model=2\"");
  }
  try {
    const Mesh mesh = parse_mesh(text);
    check_mesh(topo, mesh);
    return mesh.text();
  } catch (const std::invalid_argument& e) {
    fail(path, "mesh", e.what());
  }
}

// An integer key of the train: section in its table range.
uint64_t train_uint(const YAML::Node& n, const std::string& path, const std::string& key) {
  const ConfigKey& k = config_keys().at("train." + key);
  long long v = 0;
  try {
    v = n.as<long long>();
  } catch (const YAML::Exception&) {
    fail(path, "train." + key, "must be an integer");
  }
  if (v < 0 || !k.holds(static_cast<uint64_t>(v)))
    fail(path, "train." + key,
         "must be from " + std::to_string(k.lo) + " to " + std::to_string(k.hi) + " (got " +
             std::to_string(v) + ")");
  return static_cast<uint64_t>(v);
}

// train: mesh, stages, microbatches and schedule (pipeline parallelism); the mesh's fit to the
// pod and the stages' to the layers are checked where they meet (TrainJob).
void train_pipeline_from(const YAML::Node& t, const std::string& path, TrainSettings* ts) {
  auto text = [&](const char* key) {
    const YAML::Node n = t[key];
    if (!n.IsScalar()) fail(path, std::string("train.") + key, "must be a string");
    return n.Scalar();
  };
  if (t["mesh"]) {
    ts->mesh = text("mesh");
    try {
      parse_mesh(ts->mesh);
    } catch (const std::invalid_argument& e) {
      fail(path, "train.mesh", e.what());
    }
  }
  if (t["stages"]) ts->stages = text("stages");
  if (const YAML::Node n = t["microbatches"]) ts->microbatches = train_uint(n, path, "microbatches");
  if (t["schedule"]) {
    ts->schedule = text("schedule");
    try {
      parse_pipe_schedule(ts->schedule);
    } catch (const std::invalid_argument& e) {
      fail(path, "train.schedule", e.what());
    }
  }
}

// train: model, d_model, heads, seq, warmup, weight_decay and data (the GPT's).
void train_gpt_from(const YAML::Node& t, const std::string& path, TrainSettings* ts) {
  if (const YAML::Node n = t["model"]) {
    if (!n.IsScalar() || (n.Scalar() != "mlp" && n.Scalar() != "gpt"))
      fail(path, "train.model", "must be mlp or gpt");
    ts->model = n.Scalar();
  }
  if (const YAML::Node n = t["d_model"]) ts->d_model = train_uint(n, path, "d_model");
  if (const YAML::Node n = t["heads"]) ts->heads = train_uint(n, path, "heads");
  if (const YAML::Node n = t["seq"]) ts->seq = train_uint(n, path, "seq");
  if (const YAML::Node n = t["warmup"]) ts->warmup = train_uint(n, path, "warmup");
  if (const YAML::Node n = t["weight_decay"]) {
    double v = -1;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      fail(path, "train.weight_decay", "must be a number");
    }
    if (!config_keys().at("train.weight_decay").holds_real(v))
      fail(path, "train.weight_decay", "must be from 0 to 1 (got " + n.Scalar() + ")");
    ts->weight_decay = v;
  }
  if (const YAML::Node n = t["data"]) {
    if (!n.IsScalar()) fail(path, "train.data", "must be a file name");
    ts->data = n.Scalar();
  }
}

// The training run's settings (tpusim train, docs/training.md), each overridden by its flag.
TrainSettings train_from(const YAML::Node& t, const std::string& path) {
  TrainSettings ts;
  if (!t.IsMap()) fail(path, "train", "must be a mapping");
  check_keys(t, path, "train.", config_keys().keys_in("train"));
  for (const auto& kv : t) ts.given.push_back(kv.first.Scalar());
  train_gpt_from(t, path, &ts);
  if (const YAML::Node l = t["layers"]) {
    const bool gpt = ts.model == "gpt";
    if (gpt && l.IsScalar()) {
      ts.layers = {train_uint(l, path, "layers")};
    } else {
      if (!l.IsSequence() || l.size() < 2)
        fail(path, "train.layers", gpt ? "must be the number of blocks"
                                       : "must be a list of at least two widths, inputs first");
      ts.layers.clear();
      for (const auto& n : l) ts.layers.push_back(train_uint(n, path, "layers"));
    }
  }
  if (const YAML::Node n = t["batch"]) ts.batch = train_uint(n, path, "batch");
  if (const YAML::Node n = t["steps"]) ts.steps = train_uint(n, path, "steps");
  if (const YAML::Node n = t["grad_pieces"]) ts.grad_pieces = train_uint(n, path, "grad_pieces");
  if (const YAML::Node n = t["seed"])
    ts.seed = get_uint(n, path, "train.seed", kSeedRange, "a seed");
  if (const YAML::Node n = t["lr"]) {
    double v = 0;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      fail(path, "train.lr", "must be a number");
    }
    if (!config_keys().at("train.lr").holds_real(v))
      fail(path, "train.lr", lr_rule() + (" (got " + n.Scalar() + ")"));
    ts.lr = v;
  }
  if (const YAML::Node n = t["fresh_batches"]) {
    try {
      ts.fresh_batches = n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(path, "train.fresh_batches", "must be true or false");
    }
  }
  train_pipeline_from(t, path, &ts);
  return ts;
}

PodConfig pod_config_from(const std::string& path, const std::string* text, bool sliced) {
  const YAML::Node root = load_yaml(path, text);
  if (!root.IsMap())
    fail(path, "", "the top level must be a mapping with 'pod' and 'chip' sections");
  check_keys(root, path, "", config_keys().keys_in(""));
  PodConfig pc;
  pc.chip = chip_config_from(root, path);
  pc.source = path;
  const auto built = built_chip_variants();
  if (std::find(built.begin(), built.end(), pc.chip.variant) == built.end())
    fail(path, "chip.variant", chip_not_built(pc.chip.variant));
  const YAML::Node pod = root["pod"];
  if (!pod) fail(path, "pod", "missing section");
  if (!pod.IsMap()) fail(path, "pod", "must be a mapping");
  check_keys(pod, path, "pod.", config_keys().keys_in("pod"));
  PodParams& p = pc.params;
  p.variant = pc.chip.variant;
  p.vmem_rows = pc.chip.vmem_rows;
  p.amem_rows = pc.chip.amem_rows;
  p.hbm = pc.chip.hbm;
  p.watchdog_cycles = pc.chip.watchdog_cycles;
  if (const YAML::Node w = pod["watchdog_cycles"]) p.watchdog_cycles = watchdog_of(w, path, "pod.");
  const bool cubes = pod["cube"] || pod["cubes"];
  if (cubes) {
    pod_cubes_from(root, pod, path, pc);
  } else {
    if (root["ocs"])
      fail(path, "ocs", "slices need a pod of cubes: pod.cube and pod.cubes instead of pod.shape");
    pod_topology_from(pod, path, p.topo);
  }
  if (sliced && !cubes)
    fail(path, "pod.cube",
         "missing: tpusim slices runs a pod of cubes (pod.cube, pod.cubes) with an ocs: section "
         "of slices (e.g. configs/pod_ocs_2x2x2_cubes.yaml)");
  if (!sliced && cubes)
    fail(path, "ocs",
         "a pod of cubes runs a job per slice: tpusim slices --config " + path +
             " (the slices' job lines, or --job NAME=LINE)");
  pod_links_from(pod, path, pc.chip.variant, p);
  try {
    p.topo.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, "pod.shape", e.what());
  }
  if (const YAML::Node t = pod["twist"]) {
    if (cubes) fail(path, "pod.twist", "a pod of cubes twists per slice (ocs.slices[i].twist)");
    try {
      p.twist = t.as<bool>();
    } catch (const YAML::Exception&) {
      fail(path, "pod.twist", "must be true (a twisted torus) or false");
    }
    try {
      if (p.twist) twist_bits(p.topo);
    } catch (const std::invalid_argument& e) {
      fail(path, "pod.twist", e.what());
    }
  }
  check_fault_chips(pc.chip.faults, path, p.topo.num_chips());
  p.faults = pc.chip.faults;
  if (const YAML::Node m = root["mesh"]) {
    if (cubes)
      fail(path, "mesh", "a pod of cubes has no mesh of its own: give a slice's job --mesh");
    pc.mesh = mesh_from(m, path, p.topo);
  }
  if (const YAML::Node t = root["train"]) pc.train = train_from(t, path);
  return pc;
}
}  // namespace

namespace {

// How each key of a faults: section is read: its name in the table (config_keys(), faults.*),
// what it holds, and for a rate the member it sets. The YAML section and tpusim's --fault both
// go through this one list.
enum class FaultKind { kSeed, kHbmRate, kLinkRate, kFlipAt, kLinkDown };
struct FaultKeyUse {
  const char* name;
  FaultKind kind;
  double FaultConfig::*rate;
};
const FaultKeyUse kFaultKeys[] = {
    {"seed", FaultKind::kSeed, nullptr},
    {"hbm_single_bit_rate", FaultKind::kHbmRate, &FaultConfig::hbm_single_bit_rate},
    {"hbm_double_bit_rate", FaultKind::kHbmRate, &FaultConfig::hbm_double_bit_rate},
    {"hbm_flip_at", FaultKind::kFlipAt, nullptr},
    {"link_bit_error_rate", FaultKind::kLinkRate, &FaultConfig::link_bit_error_rate},
    {"link_burst_rate", FaultKind::kLinkRate, &FaultConfig::link_burst_rate},
    {"link_drop_rate", FaultKind::kLinkRate, &FaultConfig::link_drop_rate},
    {"link_down", FaultKind::kLinkDown, nullptr},
};

// The key `name` of kFaultKeys and of the table, or nullptr.
const FaultKeyUse* fault_key(const std::string& name) {
  for (const FaultKeyUse& u : kFaultKeys)
    if (name == u.name) return &u;
  return nullptr;
}

const ConfigKey& table_key(const FaultKeyUse& u) {
  return config_keys().at(std::string("faults.") + u.name);
}

// "from 0 to 1": a rate's range as the messages write it.
std::string rate_range_text(const ConfigKey& k) {
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  return "from " + num(k.real_lo) + " to " + num(k.real_hi);
}

// A rate of the faults: section (HBM: per word read; link: per bit or word on a link).
double yaml_rate(const YAML::Node& n, const std::string& file, const FaultKeyUse& u) {
  const ConfigKey& k = table_key(u);
  const std::string key = std::string("faults.") + u.name;
  double v = -1;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    if (u.kind == FaultKind::kHbmRate)
      fail(file, key, "must be a probability " + k.unit + " (a number " + rate_range_text(k) + ")");
    v = -1;
  }
  if (!k.holds_real(v)) {
    if (u.kind == FaultKind::kHbmRate)
      fail(file, key,
           "must be a probability " + rate_range_text(k) + " (got " + n.as<std::string>() + ")");
    fail(file, key,
         "must be a probability " + k.unit + ", " + rate_range_text(k) + " (got " +
             n.as<std::string>() + ")");
  }
  return v;
}

// faults.link_down: [{chip, port, cycle}, ...].
void link_downs_from(const YAML::Node& l, const std::string& path, FaultConfig& fc) {
  if (!l.IsSequence())
    fail(path, "faults.link_down",
         "must be a list of {chip, port, cycle} entries, e.g. [{chip: 1, port: +X, cycle: 500}]");
  for (std::size_t i = 0; i < l.size(); ++i) {
    const std::string key = "faults.link_down[" + std::to_string(i) + "]";
    const YAML::Node e = l[i];
    if (!e.IsMap()) fail(path, key, "must be a mapping {chip, port, cycle}");
    check_keys(e, path, key + ".", {"chip", "port", "cycle"});
    for (const char* need : {"chip", "port", "cycle"})
      if (!e[need]) fail(path, key + "." + need, "missing (an entry names chip, port and cycle)");
    LinkDown ld;
    ld.chip = static_cast<int>(get_uint(e["chip"], path, key + ".chip", kChipIdRange, "a chip id"));
    std::string port;
    try {
      port = e["port"].as<std::string>();
    } catch (const YAML::Exception&) {
      port.clear();
    }
    ld.dir = link_dir_from_name(port);
    if (ld.dir < 0)
      fail(path, key + ".port", "must be one of +X -X +Y -Y +Z -Z (got '" + port + "')");
    ld.cycle = get_uint(e["cycle"], path, key + ".cycle", ~0ull >> 1,
                        "the cycle from which the link carries nothing");
    fc.link_down.push_back(ld);
  }
}

// bits: of an hbm_flip_at entry: a count, or a list of bit positions.
void flip_bits_from(const YAML::Node& b, const std::string& path, const std::string& key,
                    HbmFlip& fl) {
  if (!b.IsSequence()) {
    fl.count = static_cast<unsigned>(
        get_uint(b, path, key + ".bits", kFlipBitsRange, "a bit count, or a list of bits"));
    return;
  }
  if (b.size() == 0) fail(path, key + ".bits", "must name at least one bit");
  fl.count = 0;
  for (const auto& bit : b) {
    const auto v = static_cast<unsigned>(
        get_uint(bit, path, key + ".bits", 71, "a bit of the 72-bit word (64..71: check bits)"));
    const bool dup = v < 64 ? (fl.mask >> v & 1u) : (fl.check_mask >> (v - 64) & 1u);
    if (dup) fail(path, key + ".bits", "bit " + std::to_string(v) + " is named twice");
    if (v < 64)
      fl.mask |= uint64_t{1} << v;
    else
      fl.check_mask = static_cast<uint8_t>(fl.check_mask | (1u << (v - 64)));
  }
}

// faults.hbm_flip_at: [ADDR, {addr, bits, chip}, ...].
void flips_from(const YAML::Node& l, const std::string& path, uint64_t hbm_bytes, FaultConfig& fc) {
  if (!l.IsSequence())
    fail(path, "faults.hbm_flip_at",
         "must be a list of addresses or {addr, bits, chip} entries, e.g. [0x1000, "
         "{addr: 0x2000, bits: 2}, {addr: 0x3000, bits: [0, 65], chip: 1}]");
  for (std::size_t i = 0; i < l.size(); ++i) {
    const std::string key = "faults.hbm_flip_at[" + std::to_string(i) + "]";
    const YAML::Node e = l[i];
    HbmFlip fl;
    fl.count = 1;
    const std::string what =
        "a byte address inside the HBM (" + std::to_string(hbm_bytes) + " bytes)";
    if (e.IsScalar()) {
      fl.addr = get_uint(e, path, key, hbm_bytes - 1, what);
    } else if (e.IsMap()) {
      check_keys(e, path, key + ".", {"addr", "bits", "chip"});
      if (!e["addr"]) fail(path, key + ".addr", "missing: the byte address of the word");
      fl.addr = get_uint(e["addr"], path, key + ".addr", hbm_bytes - 1, what);
      if (const YAML::Node c = e["chip"])
        fl.chip = static_cast<int>(get_uint(c, path, key + ".chip", kChipIdRange, "a chip id"));
      if (const YAML::Node b = e["bits"]) flip_bits_from(b, path, key, fl);
    } else {
      fail(path, key, "must be an address or a mapping {addr, bits, chip}");
    }
    fc.hbm_flip_at.push_back(fl);
  }
}

// The `faults:` section (tb/common/fault_config.h): the seed and the rates in the table's order,
// then the links that go down, the rule between the HBM rates, and the one-time flips.
FaultConfig faults_from(const YAML::Node& f, const std::string& path, uint64_t hbm_bytes) {
  FaultConfig fc;
  const ConfigKeys& K = config_keys();
  if (!f.IsMap()) fail(path, "faults", "must be a mapping (keys: " + K.listed("faults") + ")");
  check_keys(f, path, "faults.", K.keys_in("faults"));
  for (const FaultKeyUse& u : kFaultKeys) {
    const YAML::Node n = f[u.name];
    if (!n) continue;
    if (u.kind == FaultKind::kSeed) {
      const ConfigKey& k = table_key(u);
      fc.seed =
          get_uint(n, path, "faults.seed", UintRange{k.lo, k.hi, ""}, "the fault generator's seed");
    } else if (u.kind == FaultKind::kHbmRate || u.kind == FaultKind::kLinkRate) {
      fc.*u.rate = yaml_rate(n, path, u);
    }
  }
  if (const YAML::Node l = f["link_down"]) link_downs_from(l, path, fc);
  if (fc.hbm_single_bit_rate + fc.hbm_double_bit_rate > 1)
    fail(path, "faults.hbm_double_bit_rate",
         "hbm_single_bit_rate + hbm_double_bit_rate must be at most 1 (one draw per word)");
  if (const YAML::Node l = f["hbm_flip_at"]) flips_from(l, path, hbm_bytes, fc);
  return fc;
}

ChipConfig chip_config_from(const YAML::Node& root, const std::string& path) {
  ChipConfig cfg;
  cfg.source = path;
  if (root["hbm"]) {
    try {
      if (!root["hbm"].IsMap()) fail(path, "hbm", "must be a mapping");
      cfg.hbm = hbm_config_from_node(root["hbm"], path);
      validate_hbm_config(cfg.hbm);
    } catch (const HbmConfigError& e) {
      throw ConfigError(e.what());
    }
  }
  const YAML::Node chip = root["chip"];
  if (!chip) fail(path, "chip", "missing section");
  if (!chip.IsMap()) fail(path, "chip", "must be a mapping");
  check_keys(chip, path, "chip.", config_keys().keys_in("chip"));
  if (const YAML::Node w = chip["watchdog_cycles"])
    cfg.watchdog_cycles = watchdog_of(w, path, "chip.");
  if (chip["variant"]) cfg.variant = get_string(chip["variant"], path, "chip.variant");
  if (const YAML::Node g = chip["clock_ghz"]) {
    double v = 0;
    try {
      v = g.as<double>();
    } catch (const YAML::Exception&) {
      fail(path, "chip.clock_ghz", "must be a number of GHz");
    }
    if (!config_keys().at("chip.clock_ghz").holds_real(v))
      fail(path, "chip.clock_ghz",
           "must be above 0 and at most 100 GHz (got " + g.as<std::string>() + ")");
    cfg.clock_ghz = v;
  }

  for (const char* mem : {"vmem_rows", "amem_rows"}) {
    const YAML::Node n = chip[mem];
    if (!n) continue;
    const std::string key = std::string("chip.") + mem;
    const ConfigKey& k = config_keys().at(key);
    const unsigned v = static_cast<unsigned>(
        get_uint(n, path, key, UintRange{k.lo, k.hi, ""}, "a number of memory rows"));
    (mem[0] == 'v' ? cfg.vmem_rows : cfg.amem_rows) = v;
  }

  // A chip configuration serves the whole chip (tpusim matmul) and the MXU alone (--mxu-only):
  // its variant must be built as one or the other (the command then checks its own).
  const auto mxus = built_mxu_variants();
  const auto chips = built_chip_variants();
  const bool ok = std::find(mxus.begin(), mxus.end(), cfg.variant) != mxus.end() ||
                  std::find(chips.begin(), chips.end(), cfg.variant) != chips.end();
  if (!ok) {
    auto join = [](const std::vector<std::string>& v) {
      std::string t;
      for (const auto& b : v) t += (t.empty() ? "" : ", ") + b;
      return t;
    };
    const std::string how =
        cfg.variant == "128x128"
            ? "; build its MXU with: cmake --preset default -DTPU_BUILD_MXU128=ON && "
              "cmake --build --preset default"
        : find_chip_variant(cfg.variant.c_str())
            ? "; build it with: " + chip_build_command(cfg.variant)
            : "";
    fail(path, "chip.variant",
         "variant '" + cfg.variant + "' is not built in this binary (whole chips built: " +
             join(chips) + "; MXUs alone, tpusim matmul --mxu-only: " + join(mxus) + ")" + how);
  }
  try {
    (void)cfg.shape();  // the exposed memory rows against the variant's (chip_shape's rule)
  } catch (const std::invalid_argument& e) {
    throw ConfigError(path + ": " + e.what());
  }
  if (const YAML::Node f = root["faults"]) {
    cfg.faults = faults_from(f, path, chip_shape(cfg.variant).hbm_bytes);
    if (!root["pod"]) {  // a chip alone is chip 0
      for (std::size_t i = 0; i < cfg.faults.hbm_flip_at.size(); ++i)
        if (cfg.faults.hbm_flip_at[i].chip != 0)
          fail(path, "faults.hbm_flip_at[" + std::to_string(i) + "].chip",
               "a chip configuration has one chip, 0");
    }
  }
  return cfg;
}
}  // namespace

namespace {

// --fault KEY=VALUE broke a rule: std::invalid_argument naming the flag and the rule.
[[noreturn]] void bad_flag(const std::string& kv, const std::string& rule) {
  throw std::invalid_argument("--fault " + kv + ": " + rule);
}

// A decimal or 0x integer of a --fault value in `r`; `what` names the part of the value.
uint64_t flag_uint(const std::string& kv, const std::string& t, const UintRange& r,
                   const std::string& what) {
  uint64_t v = 0;
  std::size_t used = 0;
  try {
    if (t.empty() || t[0] == '-') throw std::invalid_argument(t);
    v = std::stoull(t, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != t.size() || t.empty() || !r.holds(v)) bad_flag(kv, what + " must be " + r.text());
  return v;
}

// A rate of a --fault: decimal only, as every real on the line (stod alone reads hex floats, inf
// and nan), in the table's range.
double flag_rate(const std::string& kv, const std::string& val, const ConfigKey& k) {
  double v = -1;
  std::size_t used = 0;
  try {
    v = std::stod(val, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const bool decimal = val.find_first_not_of("0123456789.eE+-") == std::string::npos;
  if (used == 0 || used != val.size() || !decimal || !k.holds_real(v))
    bad_flag(kv, "must be a probability " + k.unit + ", " + rate_range_text(k));
  return v;
}

// link_down=CHIP:PORT@CYCLE
LinkDown flag_link_down(const std::string& kv, const std::string& val) {
  const auto colon = val.find(':');
  const auto at = val.find('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon)
    bad_flag(kv, "must be CHIP:PORT@CYCLE, e.g. link_down=1:+X@500 (PORT: +X -X +Y -Y +Z -Z)");
  LinkDown ld;
  ld.chip = static_cast<int>(flag_uint(kv, val.substr(0, colon), kChipIdRange, "the chip"));
  ld.dir = link_dir_from_name(val.substr(colon + 1, at - colon - 1));
  if (ld.dir < 0)
    bad_flag(kv, "unknown port '" + val.substr(colon + 1, at - colon - 1) +
                     "' (ports: +X -X +Y -Y +Z -Z)");
  ld.cycle = flag_uint(kv, val.substr(at + 1), {0, ~0ull >> 1, ""}, "the cycle");
  return ld;
}

// hbm_flip_at=ADDR[:BITS][@CHIP]
HbmFlip flag_flip(const std::string& kv, const std::string& val) {
  HbmFlip fl;
  std::string a = val;
  const auto at = a.find('@');
  if (at != std::string::npos) {
    fl.chip = static_cast<int>(flag_uint(kv, a.substr(at + 1), kChipIdRange, "the chip (after @)"));
    a = a.substr(0, at);
  }
  const auto colon = a.find(':');
  fl.count = 1;
  if (colon != std::string::npos) {
    fl.count =
        static_cast<unsigned>(flag_uint(kv, a.substr(colon + 1), kFlipBitsRange, "the bit count"));
    a = a.substr(0, colon);
  }
  fl.addr = flag_uint(kv, a, {0, ~0u, ""}, "the address (ADDR[:BITS][@CHIP])");
  return fl;
}

}  // namespace

void apply_fault_flag(FaultConfig& f, const std::string& kv) {
  const auto eq = kv.find('=');
  const std::string key = kv.substr(0, eq);
  const std::string val = eq == std::string::npos ? "" : kv.substr(eq + 1);
  const FaultKeyUse* u = eq == std::string::npos ? nullptr : fault_key(key);
  if (u == nullptr) {
    const std::string list = config_keys().listed("faults");
    bad_flag(kv, eq == std::string::npos ? "must be KEY=VALUE (keys: " + list + ")"
                                         : "unknown key '" + key + "' (keys: " + list + ")");
  }
  const ConfigKey& k = table_key(*u);
  switch (u->kind) {
    case FaultKind::kSeed:
      f.seed = flag_uint(kv, val, UintRange{k.lo, k.hi, ""}, "the seed");
      break;
    case FaultKind::kHbmRate:
    case FaultKind::kLinkRate:
      f.*u->rate = flag_rate(kv, val, k);
      break;
    case FaultKind::kLinkDown:
      f.link_down.push_back(flag_link_down(kv, val));
      break;
    case FaultKind::kFlipAt:
      f.hbm_flip_at.push_back(flag_flip(kv, val));
      break;
  }
  if (f.hbm_single_bit_rate + f.hbm_double_bit_rate > 1)
    bad_flag(kv, "hbm_single_bit_rate + hbm_double_bit_rate must be at most 1");
}

void apply_fault_flags(FaultConfig& f, const std::vector<std::string>& key_values) {
  std::map<std::string, std::string> first;  // key -> its first KEY=VALUE
  for (const std::string& kv : key_values) {
    const std::string key = kv.substr(0, kv.find('='));
    const FaultKeyUse* u = fault_key(key);
    const bool list =
        u != nullptr && (u->kind == FaultKind::kFlipAt || u->kind == FaultKind::kLinkDown);
    if (!list && kv.find('=') != std::string::npos && !first.emplace(key, kv).second)
      throw std::invalid_argument("--fault " + kv + ": key '" + key + "' is given twice (" +
                                  first[key] + " before it; only hbm_flip_at and link_down " +
                                  "take one item per flag)");
    apply_fault_flag(f, kv);
  }
}

void check_fault_flags(const FaultConfig& f, uint64_t hbm_bytes, int chips) {
  for (const LinkDown& ld : f.link_down)
    if (ld.chip >= chips)
      throw std::invalid_argument("--fault link_down: chip " + std::to_string(ld.chip) +
                                  " is not in the machine (0.." + std::to_string(chips - 1) + ")");
  for (const HbmFlip& fl : f.hbm_flip_at) {
    if (fl.addr >= hbm_bytes)
      throw std::invalid_argument("--fault hbm_flip_at: address " + std::to_string(fl.addr) +
                                  " is outside the HBM (" + std::to_string(hbm_bytes) + " bytes)");
    if (fl.chip >= chips)
      throw std::invalid_argument("--fault hbm_flip_at: chip " + std::to_string(fl.chip) +
                                  " is not in the machine (0.." + std::to_string(chips - 1) + ")");
  }
}

}  // namespace tpu
