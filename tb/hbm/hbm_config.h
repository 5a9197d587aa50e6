// Reading and checking HbmConfig (tb/pod/host_port_types.h: the run-time parameters of the HBM
// subsystem, device timing and controller policy): the `hbm:` section of a YAML file
// (configs/hbm2_default.yaml), its keys with ranges, defaults and one-line descriptions, and the
// rules between them. The RTL takes these as inputs held after reset. The configuration module
// (sw/config) registers these keys in its one table and calls this parser for the section.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_port_types.h"

namespace YAML {
class Node;
}

namespace tpu {

// A configuration that cannot be read or breaks a rule. The message names the file, the key and
// the rule.
class HbmConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// YAML spelling of a map ("ch_bg_co_ba", ...), and back (false if unknown).
const char* hbm_map_name(HbmAddrMap m);
bool hbm_map_from_name(const std::string& name, HbmAddrMap* out);
std::vector<HbmAddrMap> hbm_all_maps();

// One documented key of the `hbm:` section ("timing.tRCD", ...): what the configuration
// module's table of keys (sw/config/config_keys.h) registers for it. kind: 'i' an integer in
// [min, max], 'r' a number above 0, 's' a name.
struct HbmParamInfo {
  std::string key;
  std::string desc;
  std::string default_value;
  char kind = 'i';
  uint32_t min = 0;
  uint32_t max = 0;
};
std::vector<HbmParamInfo> hbm_param_info();

// Reads the `hbm:` section of `path` (a missing key keeps its default).
HbmConfig load_hbm_config(const std::string& path);
// The same from YAML text; `source` names it in errors.
HbmConfig parse_hbm_config(const std::string& yaml_text, const std::string& source);
// The same from an already-parsed `hbm:` node (for a chip configuration that embeds it).
HbmConfig hbm_config_from_node(const YAML::Node& hbm, const std::string& source);
// Checks every rule; throws HbmConfigError naming the source, the key and the rule.
void validate_hbm_config(const HbmConfig& cfg);

}  // namespace tpu
