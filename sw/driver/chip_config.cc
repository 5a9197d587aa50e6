#include "chip_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "chip_dut.h"
#include "mxu_dut.h"
#include "tpu/limits.h"
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
uint64_t get_uint(const YAML::Node& n, const std::string& file, const std::string& key,
                  uint64_t hi, const std::string& what) {
  return get_uint(n, file, key, UintRange{0, hi, ""}, what);
}

std::string get_string(const YAML::Node& node, const std::string& file, const std::string& key) {
  if (!node.IsScalar()) fail(file, key, "must be a string");
  return node.as<std::string>();
}

}  // namespace

namespace {
YAML::Node load_yaml(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": is a directory, not a configuration file (a YAML file such as "
                      "configs/default.yaml for a chip, configs/pod_2x2.yaml for a pod)");
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
    check_keys(root, path, "", {"chip", "hbm", "faults"});
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
  check_keys(root, path, "", {"pod", "chip", "hbm", "mesh", "train", "faults"});
  PodConfig pc;
  pc.chip = chip_config_from(root, path);
  pc.source = path;
  const auto built = built_chip_variants();
  if (std::find(built.begin(), built.end(), pc.chip.variant) == built.end())
    fail(path, "chip.variant", chip_not_built(pc.chip.variant));
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
      fail(path, "pod.shape",
           "every size must be an integer from 1 to " + std::to_string(kPodMaxPerDim));
    }
    if (v < 1 || v > kPodMaxPerDim)
      fail(path, "pod.shape", "every size must be from 1 to " + std::to_string(kPodMaxPerDim) +
                                  " (got " + std::to_string(v) + ")");
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
  for (std::size_t i = 0; i < pc.chip.faults.hbm_flip_at.size(); ++i) {
    const int c = pc.chip.faults.hbm_flip_at[i].chip;
    if (c >= p.topo.num_chips())
      fail(path, "faults.hbm_flip_at[" + std::to_string(i) + "].chip",
           "chip " + std::to_string(c) + " is not in the pod (0.." +
               std::to_string(p.topo.num_chips() - 1) + ")");
  }
  for (std::size_t i = 0; i < pc.chip.faults.link_down.size(); ++i) {
    const int c = pc.chip.faults.link_down[i].chip;
    if (c >= p.topo.num_chips())
      fail(path, "faults.link_down[" + std::to_string(i) + "].chip",
           "chip " + std::to_string(c) + " is not in the pod (0.." +
               std::to_string(p.topo.num_chips() - 1) + ")");
  }
  p.faults = pc.chip.faults;
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
      check_mesh(p.topo, mesh);
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
      pc.train["seed"] = std::to_string(get_uint(n, path, "train.seed", kSeedRange, "a seed"));
    if (const YAML::Node n = t["lr"]) {
      double v = 0;
      try {
        v = n.as<double>();
      } catch (const YAML::Exception&) {
        fail(path, "train.lr", "must be a number");
      }
      if (!lr_in_range(v)) fail(path, "train.lr", lr_rule() + (" (got " + n.Scalar() + ")"));
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

double get_rate(const YAML::Node& n, const std::string& file, const std::string& key) {
  double v = -1;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    fail(file, key, "must be a probability per 64-bit word read (a number from 0 to 1)");
  }
  if (!(v >= 0 && v <= 1))
    fail(file, key, "must be a probability from 0 to 1 (got " + n.as<std::string>() + ")");
  return v;
}

// The `faults:` section: seed, HBM flip rates, one-time flips (tb/common/fault_config.h).
FaultConfig faults_from(const YAML::Node& f, const std::string& path, uint64_t hbm_bytes) {
  FaultConfig fc;
  if (!f.IsMap()) fail(path, "faults", "must be a mapping (keys: seed, hbm_single_bit_rate, "
                                       "hbm_double_bit_rate, hbm_flip_at, link_bit_error_rate, "
                                       "link_burst_rate, link_drop_rate, link_down)");
  const auto& k = FaultConfig::keys();
  check_keys(f, path, "faults.", std::set<std::string>(k.begin(), k.end()));
  if (const YAML::Node s = f["seed"])
    fc.seed = get_uint(s, path, "faults.seed", kSeedRange, "the fault generator's seed");
  if (const YAML::Node r = f["hbm_single_bit_rate"])
    fc.hbm_single_bit_rate = get_rate(r, path, "faults.hbm_single_bit_rate");
  if (const YAML::Node r = f["hbm_double_bit_rate"])
    fc.hbm_double_bit_rate = get_rate(r, path, "faults.hbm_double_bit_rate");
  auto link_rate = [&](const char* key, const std::string& per) {
    double v = -1;
    const YAML::Node r = f[key];
    try {
      v = r.as<double>();
    } catch (const YAML::Exception&) {
      v = -1;
    }
    if (!(v >= 0 && v <= 1))
      fail(path, std::string("faults.") + key,
           "must be a probability per " + per + " on a link, from 0 to 1 (got " +
               r.as<std::string>() + ")");
    return v;
  };
  if (f["link_bit_error_rate"]) fc.link_bit_error_rate = link_rate("link_bit_error_rate", "bit");
  if (f["link_burst_rate"]) fc.link_burst_rate = link_rate("link_burst_rate", "word");
  if (f["link_drop_rate"]) fc.link_drop_rate = link_rate("link_drop_rate", "word");
  if (const YAML::Node l = f["link_down"]) {
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
      ld.chip =
          static_cast<int>(get_uint(e["chip"], path, key + ".chip", kChipIdRange, "a chip id"));
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
  if (fc.hbm_single_bit_rate + fc.hbm_double_bit_rate > 1)
    fail(path, "faults.hbm_double_bit_rate",
         "hbm_single_bit_rate + hbm_double_bit_rate must be at most 1 (one draw per word)");
  if (const YAML::Node l = f["hbm_flip_at"]) {
    if (!l.IsSequence())
      fail(path, "faults.hbm_flip_at",
           "must be a list of addresses or {addr, bits, chip} entries, e.g. [0x1000, "
           "{addr: 0x2000, bits: 2}, {addr: 0x3000, bits: [0, 65], chip: 1}]");
    for (std::size_t i = 0; i < l.size(); ++i) {
      const std::string key = "faults.hbm_flip_at[" + std::to_string(i) + "]";
      const YAML::Node e = l[i];
      HbmFlip fl;
      fl.count = 1;
      const std::string what = "a byte address inside the HBM (" + std::to_string(hbm_bytes) +
                               " bytes)";
      if (e.IsScalar()) {
        fl.addr = get_uint(e, path, key, hbm_bytes - 1, what);
      } else if (e.IsMap()) {
        check_keys(e, path, key + ".", {"addr", "bits", "chip"});
        if (!e["addr"]) fail(path, key + ".addr", "missing: the byte address of the word");
        fl.addr = get_uint(e["addr"], path, key + ".addr", hbm_bytes - 1, what);
        if (const YAML::Node c = e["chip"])
          fl.chip = static_cast<int>(get_uint(c, path, key + ".chip", kChipIdRange, "a chip id"));
        if (const YAML::Node b = e["bits"]) {
          if (b.IsSequence()) {
            if (b.size() == 0) fail(path, key + ".bits", "must name at least one bit");
            fl.count = 0;
            for (const auto& bit : b) {
              const auto v = static_cast<unsigned>(get_uint(
                  bit, path, key + ".bits", 71, "a bit of the 72-bit word (64..71: check bits)"));
              const bool dup = v < 64 ? (fl.mask >> v & 1u) : (fl.check_mask >> (v - 64) & 1u);
              if (dup) fail(path, key + ".bits", "bit " + std::to_string(v) + " is named twice");
              if (v < 64) fl.mask |= uint64_t{1} << v;
              else fl.check_mask = static_cast<uint8_t>(fl.check_mask | (1u << (v - 64)));
            }
          } else {
            fl.count = static_cast<unsigned>(get_uint(b, path, key + ".bits", kFlipBitsRange,
                                                      "a bit count, or a list of bits"));
          }
        }
      } else {
        fail(path, key, "must be an address or a mapping {addr, bits, chip}");
      }
      fc.hbm_flip_at.push_back(fl);
    }
  }
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
            : find_chip_variant(cfg.variant.c_str()) ? "; build it with: " +
                                                           chip_build_command(cfg.variant)
                                                     : "";
    fail(path, "chip.variant",
         "variant '" + cfg.variant + "' is not built in this binary (whole chips built: " +
             join(chips) + "; MXUs alone, tpusim matmul --mxu-only: " + join(mxus) + ")" + how);
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

void apply_fault_flag(FaultConfig& f, const std::string& kv) {
  const auto eq = kv.find('=');
  const std::string key = kv.substr(0, eq);
  const std::string val = eq == std::string::npos ? "" : kv.substr(eq + 1);
  auto bad = [&](const std::string& rule) {
    throw std::invalid_argument("--fault " + kv + ": " + rule);
  };
  const auto& keys = FaultConfig::keys();
  if (eq == std::string::npos || std::find(keys.begin(), keys.end(), key) == keys.end()) {
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    bad(eq == std::string::npos ? "must be KEY=VALUE (keys: " + list + ")"
                                : "unknown key '" + key + "' (keys: " + list + ")");
  }
  auto to_uint = [&](const std::string& t, const UintRange& r, const std::string& what) {
    uint64_t v = 0;
    std::size_t used = 0;
    try {
      if (t.empty() || t[0] == '-') throw std::invalid_argument(t);
      v = std::stoull(t, &used, 0);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || t.empty() || !r.holds(v)) bad(what + " must be " + r.text());
    return v;
  };
  // A probability; `per` says of what (a word read from HBM, a bit or a word on a link).
  auto to_rate = [&](const char* per) {
    double v = -1;
    std::size_t used = 0;
    try {
      v = std::stod(val, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    // Decimal only, as every real on the line (stod alone reads hex floats, inf and nan).
    const bool decimal = val.find_first_not_of("0123456789.eE+-") == std::string::npos;
    if (used == 0 || used != val.size() || !decimal || !(v >= 0 && v <= 1))
      bad(std::string("must be a probability per ") + per + ", from 0 to 1");
    return v;
  };
  if (key == "seed") {
    f.seed = to_uint(val, kSeedRange, "the seed");
  } else if (key == "link_bit_error_rate") {
    f.link_bit_error_rate = to_rate("bit on a link");
  } else if (key == "link_burst_rate") {
    f.link_burst_rate = to_rate("word on a link");
  } else if (key == "link_drop_rate") {
    f.link_drop_rate = to_rate("word on a link");
  } else if (key == "link_down") {  // link_down=CHIP:PORT@CYCLE
    const auto colon = val.find(':');
    const auto at = val.find('@');
    if (colon == std::string::npos || at == std::string::npos || at < colon)
      bad("must be CHIP:PORT@CYCLE, e.g. link_down=1:+X@500 (PORT: +X -X +Y -Y +Z -Z)");
    LinkDown ld;
    ld.chip = static_cast<int>(to_uint(val.substr(0, colon), kChipIdRange, "the chip"));
    ld.dir = link_dir_from_name(val.substr(colon + 1, at - colon - 1));
    if (ld.dir < 0)
      bad("unknown port '" + val.substr(colon + 1, at - colon - 1) +
          "' (ports: +X -X +Y -Y +Z -Z)");
    ld.cycle = to_uint(val.substr(at + 1), {0, ~0ull >> 1, ""}, "the cycle");
    f.link_down.push_back(ld);
  } else if (key == "hbm_single_bit_rate") {
    f.hbm_single_bit_rate = to_rate("64-bit word read");
  } else if (key == "hbm_double_bit_rate") {
    f.hbm_double_bit_rate = to_rate("64-bit word read");
  } else {  // hbm_flip_at=ADDR[:BITS][@CHIP]
    HbmFlip fl;
    std::string a = val;
    const auto at = a.find('@');
    if (at != std::string::npos) {
      fl.chip = static_cast<int>(to_uint(a.substr(at + 1), kChipIdRange, "the chip (after @)"));
      a = a.substr(0, at);
    }
    const auto colon = a.find(':');
    fl.count = 1;
    if (colon != std::string::npos) {
      fl.count =
          static_cast<unsigned>(to_uint(a.substr(colon + 1), kFlipBitsRange, "the bit count"));
      a = a.substr(0, colon);
    }
    fl.addr = to_uint(a, {0, ~0u, ""}, "the address (ADDR[:BITS][@CHIP])");
    f.hbm_flip_at.push_back(fl);
  }
  if (f.hbm_single_bit_rate + f.hbm_double_bit_rate > 1)
    bad("hbm_single_bit_rate + hbm_double_bit_rate must be at most 1");
}

void apply_fault_flags(FaultConfig& f, const std::vector<std::string>& key_values) {
  std::map<std::string, std::string> first;  // key -> its first KEY=VALUE
  for (const std::string& kv : key_values) {
    const std::string key = kv.substr(0, kv.find('='));
    const bool list = key == "hbm_flip_at" || key == "link_down";
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
                                  " is outside the HBM (" + std::to_string(hbm_bytes) +
                                  " bytes)");
    if (fl.chip >= chips)
      throw std::invalid_argument("--fault hbm_flip_at: chip " + std::to_string(fl.chip) +
                                  " is not in the machine (0.." + std::to_string(chips - 1) + ")");
  }
}

}  // namespace tpu
