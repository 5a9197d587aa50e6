#include "chip_config.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "mxu_dut.h"

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

std::string get_string(const YAML::Node& node, const std::string& file, const std::string& key) {
  if (!node.IsScalar()) fail(file, key, "must be a string");
  return node.as<std::string>();
}

}  // namespace

ChipConfig load_chip_config(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw ConfigError(path + ": cannot open the configuration file");
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ": not valid YAML: " + e.what());
  }
  ChipConfig cfg;
  cfg.source = path;
  if (!root.IsMap()) fail(path, "", "the top level must be a mapping with a 'chip' section");
  check_keys(root, path, "", {"chip", "hbm"});
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
  check_keys(chip, path, "chip.", {"variant"});
  if (chip["variant"]) cfg.variant = get_string(chip["variant"], path, "chip.variant");

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

}  // namespace tpu
