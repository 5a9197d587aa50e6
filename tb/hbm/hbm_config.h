// HbmConfig: the run-time parameters of the HBM subsystem (device timing and controller policy),
// read from the `hbm:` section of a YAML file (configs/hbm2_default.yaml), with defaults, one-line
// descriptions and validation in one place. The RTL takes these as inputs held after reset.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

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

// Address maps of tpu_hbm_pkg::hbm_map_e (same values). Fields from bit 6 upwards.
enum class HbmAddrMap : uint8_t {
  kChBgCoBa = 0,    // default: channel, bank group, column, bank, row
  kChBgBaCo = 1,    // channel, bank group, bank, column, row
  kChCoBgBa = 2,    // channel, column, bank group, bank, row
  kCoBgBaRoCh = 3,  // column, bank group, bank, row, channel (one region per channel)
};

// YAML spelling of a map ("ch_bg_co_ba", ...), and back (false if unknown).
const char* hbm_map_name(HbmAddrMap m);
bool hbm_map_from_name(const std::string& name, HbmAddrMap* out);
std::vector<HbmAddrMap> hbm_all_maps();

// Device timing in tCK (tpu_hbm_pkg::hbm_timing_t). Defaults: HBM2 at tCK = 1 ns.
struct HbmTiming {
  uint32_t cl = 14;      // CL: RD to first read data
  uint32_t cwl = 4;      // CWL: WR to first write data
  uint32_t rcd = 14;     // tRCD: ACT to RD/WR, same bank
  uint32_t rp = 14;      // tRP: PRE to ACT same bank, last PRE to REF
  uint32_t ras = 34;     // tRAS: ACT to PRE, same bank
  uint32_t rc = 48;      // tRC: ACT to ACT, same bank
  uint32_t ccd_s = 2;    // tCCD_S: RD to RD / WR to WR, different bank group
  uint32_t ccd_l = 4;    // tCCD_L: RD to RD / WR to WR, same bank group
  uint32_t rrd_s = 4;    // tRRD_S: ACT to ACT, different bank group
  uint32_t rrd_l = 6;    // tRRD_L: ACT to ACT, same bank group
  uint32_t faw = 30;     // tFAW: window holding at most four ACTs
  uint32_t wr = 16;      // tWR: end of write data to PRE, same bank
  uint32_t wtr_s = 6;    // tWTR_S: end of write data to RD, different bank group
  uint32_t wtr_l = 8;    // tWTR_L: end of write data to RD, same bank group
  uint32_t rtp = 5;      // tRTP: RD to PRE, same bank
  uint32_t rfc = 260;    // tRFC: REF to ACT or REF
  uint32_t refi = 3900;  // tREFI: REF number k is due by cycle k * tREFI
};

// Controller policy (tpu_hbm_pkg::hbm_ctrl_cfg_t).
struct HbmCtrlParams {
  HbmAddrMap addr_map = HbmAddrMap::kChBgCoBa;  // address map
  uint32_t starve_cap = 512;  // cycles after which the oldest request is served first
  uint32_t wr_hi = 12;        // buffered writes that start a write drain
  uint32_t wr_lo = 4;         // buffered writes at which a drain stops
};

struct HbmConfig {
  std::string source = "<defaults>";  // file the values came from
  double tck_ns = 1.0;                // clock period, for reports in ns and GB/s
  uint32_t burst_length = 4;          // beats per access; the data path is built for BL4
  HbmTiming timing;
  HbmCtrlParams ctrl;
};

// Write buffer entries of the built controller (tpu_hbm_chan WqDepth): wr_hi may not exceed it.
constexpr uint32_t kHbmWriteBufferEntries = 16;

// One documented key of the `hbm:` section ("timing.tRCD", ...), for --help style listings.
struct HbmParamInfo {
  std::string key;
  std::string desc;
  std::string default_value;
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
