#include "chip_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <set>

#include "chip_dut.h"
#include "mxu_dut.h"
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
  if (v < 0 || v > (1ll << 40))
    fail(file, where + "watchdog_cycles",
         "must be an integer number of cycles from 0 (off) to 2^40 (got '" +
             (n.IsScalar() ? n.Scalar() : std::string("a ") + (n.IsMap() ? "mapping" : "list")) +
             "')");
  return static_cast<uint64_t>(v);
}

std::string get_string(const YAML::Node& node, const std::string& file, const std::string& key) {
  if (!node.IsScalar()) fail(file, key, "must be a string");
  return node.as<std::string>();
}

}  // namespace

namespace {
YAML::Node load_yaml(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
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
PodConfig pod_config_from(const std::string& path);
}  // namespace

ChipConfig load_chip_config(const std::string& path) {
  try {
    const YAML::Node root = load_yaml(path);
    if (!root.IsMap()) fail(path, "", "the top level must be a mapping with a 'chip' section");
    check_keys(root, path, "", {"chip", "hbm"});
    return chip_config_from(root, path);
  } catch (const YAML::Exception& e) {  // a conversion no rule above foresaw (a key that is a list)
    throw ConfigError(path + ": " + e.what());
  }
}

PodConfig load_pod_config(const std::string& path) {
  try {
    return pod_config_from(path);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

namespace {
PodConfig pod_config_from(const std::string& path) {
  const YAML::Node root = load_yaml(path);
  if (!root.IsMap())
    fail(path, "", "the top level must be a mapping with 'pod' and 'chip' sections");
  check_keys(root, path, "", {"pod", "chip", "hbm", "mesh", "train"});
  PodConfig pc;
  pc.chip = chip_config_from(root, path);
  pc.source = path;
  const auto built = built_chip_variants();
  if (std::find(built.begin(), built.end(), pc.chip.variant) == built.end()) {
    std::string list;
    for (const auto& b : built) list += (list.empty() ? "" : ", ") + b;
    fail(path, "chip.variant",
         "chip variant '" + pc.chip.variant + "' is not built in this binary (built: " + list +
             "); build it with -DTPU_CHIP_VARIANTS=\"4x4:0;16x16:2;8x8:1\"");
  }
  const YAML::Node pod = root["pod"];
  if (!pod) fail(path, "pod", "missing section");
  if (!pod.IsMap()) fail(path, "pod", "must be a mapping");
  check_keys(pod, path, "pod.", {"shape", "wrap", "link_latency", "link_width_bytes",
                                 "host_bytes_per_cycle", "watchdog_cycles"});
  PodParams& p = pc.params;
  p.variant = pc.chip.variant;
  p.hbm = pc.chip.hbm;
  p.watchdog_cycles = pc.chip.watchdog_cycles;
  if (const YAML::Node w = pod["watchdog_cycles"]) p.watchdog_cycles = watchdog_of(w, path, "pod.");
  const YAML::Node shape = pod["shape"];
  if (!shape) fail(path, "pod.shape", "missing: chips per dimension, x first, e.g. [4, 4]");
  if (!shape.IsSequence() || shape.size() < 1 || shape.size() > 3)
    fail(path, "pod.shape", "must be a list of 1 to 3 sizes, x first, e.g. [4, 4]");
  p.topo.size.clear();
  for (const auto& n : shape) {
    int v = 0;
    try {
      v = n.as<int>();
    } catch (const YAML::Exception&) {
      fail(path, "pod.shape", "every size must be an integer from 1 to 8");
    }
    if (v < 1 || v > 8) fail(path, "pod.shape", "every size must be from 1 to 8 (got " + std::to_string(v) + ")");
    p.topo.size.push_back(v);
  }
  p.topo.wrap.assign(p.topo.size.size(), true);
  if (const YAML::Node w = pod["wrap"]) {
    if (!w.IsSequence() || w.size() != shape.size())
      fail(path, "pod.wrap", "must be a list of " + std::to_string(shape.size()) +
                                 " booleans (one per dimension of pod.shape)");
    for (std::size_t d = 0; d < w.size(); ++d) {
      try {
        p.topo.wrap[d] = w[d].as<bool>();
      } catch (const YAML::Exception&) {
        fail(path, "pod.wrap", "every entry must be true (ring) or false (line)");
      }
    }
  }
  // An integer field of the pod section, or fail naming the file, the key and the unit.
  auto pod_int = [&](const YAML::Node& n, const std::string& key, const char* unit) {
    try {
      return n.as<int>();
    } catch (const YAML::Exception&) {
      fail(path, "pod." + key, std::string("must be an integer number of ") + unit);
    }
  };
  if (const YAML::Node l = pod["link_latency"]) {
    const int v = pod_int(l, "link_latency", "cycles");
    if (v < 1 || v > 64)
      fail(path, "pod.link_latency", "must be from 1 to 64 cycles (got " + std::to_string(v) + ")");
    p.link_latency = static_cast<unsigned>(v);
  }
  if (const YAML::Node w = pod["link_width_bytes"]) {
    const int v = pod_int(w, "link_width_bytes", "bytes");
    const int row = static_cast<int>(chip_shape(pc.chip.variant).cols) * 4;
    if (v < 1 || row % v != 0 || row / v > 15)
      fail(path, "pod.link_width_bytes",
           "must divide the " + std::to_string(row) + "-byte memory row of chip " +
               pc.chip.variant + " into 1 to 15 beats (got " + std::to_string(v) + ")");
    p.link_width = static_cast<unsigned>(v);
  }
  if (const YAML::Node h = pod["host_bytes_per_cycle"]) {
    const int v = pod_int(h, "host_bytes_per_cycle", "bytes");
    if (v < 1 || v > 64)
      fail(path, "pod.host_bytes_per_cycle",
           "must be from 1 to 64 bytes per cycle (one 64-byte burst per cycle at most; got " +
               std::to_string(v) + ")");
    p.host_bytes_per_cycle = static_cast<unsigned>(v);
  }
  try {
    p.topo.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, "pod.shape", e.what());
  }
  // The named mesh over the pod's dimensions: "data=2,model=2" (tpu::parse_mesh).
  if (const YAML::Node m = root["mesh"]) {
    std::string text;
    try {
      text = m.as<std::string>();
    } catch (const YAML::Exception&) {
      fail(path, "mesh", "must be a string of name=size items, x first, e.g. \"data=2,model=2\"");
    }
    try {
      const Mesh mesh = parse_mesh(text);
      for (const MeshAxis& a : mesh.axes) (void)mesh_axis_dims(p.topo, mesh, a.name);
      pc.mesh = mesh.text();
    } catch (const std::invalid_argument& e) {
      fail(path, "mesh", e.what());
    }
  }
  // The training run's settings (tpusim train, docs/training.md), each overridden by its flag.
  if (const YAML::Node t = root["train"]) {
    if (!t.IsMap()) fail(path, "train", "must be a mapping");
    check_keys(t, path, "train.",
               {"layers", "batch", "steps", "lr", "seed", "fresh_batches", "grad_pieces"});
    auto uint_of = [&](const YAML::Node& n, const std::string& key, long long lo, long long hi) {
      long long v = 0;
      try {
        v = n.as<long long>();
      } catch (const YAML::Exception&) {
        fail(path, "train." + key, "must be an integer");
      }
      if (v < lo || v > hi)
        fail(path, "train." + key, "must be from " + std::to_string(lo) + " to " +
                                       std::to_string(hi) + " (got " + std::to_string(v) + ")");
      return std::to_string(v);
    };
    if (const YAML::Node l = t["layers"]) {
      if (!l.IsSequence() || l.size() < 2)
        fail(path, "train.layers", "must be a list of at least two widths, inputs first");
      std::string text;
      for (const auto& n : l) text += (text.empty() ? "" : ",") + uint_of(n, "layers", 1, 65536);
      pc.train["layers"] = text;
    }
    if (const YAML::Node n = t["batch"]) pc.train["batch"] = uint_of(n, "batch", 1, 1 << 24);
    if (const YAML::Node n = t["steps"]) pc.train["steps"] = uint_of(n, "steps", 1, 100000);
    if (const YAML::Node n = t["grad_pieces"])
      pc.train["grad_pieces"] = uint_of(n, "grad_pieces", 1, 64);
    if (const YAML::Node n = t["seed"])
      pc.train["seed"] = uint_of(n, "seed", 0, std::numeric_limits<long long>::max());
    if (const YAML::Node n = t["lr"]) {
      double v = 0;
      try {
        v = n.as<double>();
      } catch (const YAML::Exception&) {
        fail(path, "train.lr", "must be a number");
      }
      if (!(v > 0) || v > 1e6) fail(path, "train.lr", "must be in (0, 1e6]");
      pc.train["lr"] = n.as<std::string>();
    }
    if (const YAML::Node n = t["fresh_batches"]) {
      try {
        if (n.as<bool>()) pc.train["fresh_batches"] = "1";
      } catch (const YAML::Exception&) {
        fail(path, "train.fresh_batches", "must be true or false");
      }
    }
  }
  return pc;
}
}  // namespace

namespace {
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
  check_keys(chip, path, "chip.", {"variant", "clock_ghz", "watchdog_cycles"});
  if (const YAML::Node w = chip["watchdog_cycles"]) cfg.watchdog_cycles = watchdog_of(w, path, "chip.");
  if (chip["variant"]) cfg.variant = get_string(chip["variant"], path, "chip.variant");
  if (const YAML::Node g = chip["clock_ghz"]) {
    double v = 0;
    try {
      v = g.as<double>();
    } catch (const YAML::Exception&) {
      fail(path, "chip.clock_ghz", "must be a number of GHz");
    }
    if (!(v > 0 && v <= 100))
      fail(path, "chip.clock_ghz",
           "must be above 0 and at most 100 GHz (got " + g.as<std::string>() + ")");
    cfg.clock_ghz = v;
  }

  const auto built = built_mxu_variants();
  bool ok = false;
  std::string list;
  for (const auto& b : built) {
    ok = ok || b == cfg.variant;
    list += (list.empty() ? "" : ", ") + b;
  }
  if (!ok) {
    std::string how = cfg.variant == "128x128"
                          ? "; build it with: cmake --preset default -DTPU_BUILD_MXU128=ON && "
                            "cmake --build --preset default"
                          : "";
    fail(path, "chip.variant",
         "variant '" + cfg.variant + "' is not built in this binary (built: " + list + ")" + how);
  }
  return cfg;
}
}  // namespace

}  // namespace tpu
