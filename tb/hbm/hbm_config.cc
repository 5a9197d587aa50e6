#include "hbm_config.h"

#include "yaml_keys.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tpu {
namespace {

// Every timing key: YAML name, member, description, and the range the RTL and model accept.
struct TimingField {
  const char* key;
  uint32_t HbmTiming::*member;
  const char* desc;
  uint32_t min;
  uint32_t max;
};

// CL and CWL stay below the device model's 128-cycle data-bus schedule; counters are 16 bits.
const TimingField kTimingFields[] = {
    {"CL", &HbmTiming::cl, "RD to first read data beat", 2, 60},
    {"CWL", &HbmTiming::cwl, "WR to first write data beat", 1, 60},
    {"tRCD", &HbmTiming::rcd, "ACT to RD/WR, same bank", 1, 255},
    {"tRP", &HbmTiming::rp, "PRE to ACT same bank; last PRE to REF", 1, 255},
    {"tRAS", &HbmTiming::ras, "ACT to PRE, same bank", 1, 255},
    {"tRC", &HbmTiming::rc, "ACT to ACT, same bank", 1, 511},
    {"tCCD_S", &HbmTiming::ccd_s, "RD to RD / WR to WR, different bank group", 1, 255},
    {"tCCD_L", &HbmTiming::ccd_l, "RD to RD / WR to WR, same bank group", 1, 255},
    {"tRRD_S", &HbmTiming::rrd_s, "ACT to ACT, different bank group", 1, 63},
    {"tRRD_L", &HbmTiming::rrd_l, "ACT to ACT, same bank group", 1, 63},
    {"tFAW", &HbmTiming::faw, "window holding at most four ACTs", 1, 255},
    {"tWR", &HbmTiming::wr, "end of write data to PRE, same bank", 1, 255},
    {"tWTR_S", &HbmTiming::wtr_s, "end of write data to RD, different bank group", 1, 255},
    {"tWTR_L", &HbmTiming::wtr_l, "end of write data to RD, same bank group", 1, 255},
    {"tRTP", &HbmTiming::rtp, "RD to PRE, same bank", 1, 63},
    {"tRFC", &HbmTiming::rfc, "REF to ACT or REF", 1, 4095},
    {"tREFI", &HbmTiming::refi, "average refresh interval: REF k due by cycle k*tREFI", 1, 65535},
};

struct MapName {
  HbmAddrMap map;
  const char* name;
};
const MapName kMapNames[] = {
    {HbmAddrMap::kChBgCoBa, "ch_bg_co_ba"},
    {HbmAddrMap::kChBgBaCo, "ch_bg_ba_co"},
    {HbmAddrMap::kChCoBgBa, "ch_co_bg_ba"},
    {HbmAddrMap::kCoBgBaRoCh, "co_bg_ba_ro_ch"},
};

[[noreturn]] void fail(const std::string& source, const YAML::Node* node, const std::string& key,
                       const std::string& rule) {
  std::ostringstream os;
  os << source;
  if (node != nullptr && node->Mark().line >= 0) os << ":" << node->Mark().line + 1;
  os << ": hbm" << (key.empty() ? std::string() : "." + key) << ": " << rule;
  throw HbmConfigError(os.str());
}

int64_t get_int(const YAML::Node& n, const std::string& source, const std::string& key) {
  if (!n.IsScalar()) fail(source, &n, key, "must be an integer");
  try {
    return n.as<int64_t>();
  } catch (const YAML::Exception&) {
    fail(source, &n, key, "must be an integer, not '" + n.Scalar() + "'");
  }
}

uint32_t get_ranged(const YAML::Node& n, const std::string& source, const std::string& key,
                    uint32_t lo, uint32_t hi) {
  const int64_t v = get_int(n, source, key);
  if (v < lo || v > hi) {
    fail(source, &n, key,
         "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], not " +
             std::to_string(v));
  }
  return static_cast<uint32_t>(v);
}

void require_map(const YAML::Node& n, const std::string& source, const std::string& key) {
  if (!n.IsMap()) fail(source, &n, key, "must be a map of keys");
}

// Cross-field rule: `ok` or an error naming `key` and `rule`.
void rule(bool ok, const HbmConfig& c, const std::string& key, const std::string& text) {
  if (!ok) fail(c.source, nullptr, key, text);
}

// The range of an integer key of the section ("controller.starvation_cap"), from the one list
// of its keys (hbm_param_info).
const HbmParamInfo& key_info(const std::string& key) {
  static const std::vector<HbmParamInfo> info = hbm_param_info();
  for (const HbmParamInfo& p : info)
    if (p.key == key) return p;
  throw std::logic_error("hbm key '" + key + "' is not in hbm_param_info()");
}
uint32_t get_key(const YAML::Node& n, const std::string& source, const std::string& key) {
  const HbmParamInfo& p = key_info(key);
  return get_ranged(n, source, key, p.min, p.max);
}

uint32_t ref_lead(const HbmTiming& t) {
  // tpu_hbm_pkg::hbm_ref_lead: tRAS + (CWL + BL/2 + tWR) + tRTP + tRP + 4.
  return t.ras + t.cwl + 2 + t.wr + t.rtp + t.rp + 4;
}

}  // namespace

const char* hbm_map_name(HbmAddrMap m) {
  for (const auto& e : kMapNames)
    if (e.map == m) return e.name;
  return "?";
}

bool hbm_map_from_name(const std::string& name, HbmAddrMap* out) {
  for (const auto& e : kMapNames) {
    if (name == e.name) {
      *out = e.map;
      return true;
    }
  }
  return false;
}

std::vector<HbmAddrMap> hbm_all_maps() {
  std::vector<HbmAddrMap> v;
  for (const auto& e : kMapNames) v.push_back(e.map);
  return v;
}

std::vector<HbmParamInfo> hbm_param_info() {
  const HbmConfig d;
  std::vector<HbmParamInfo> v;
  v.push_back({"tck_ns", "clock period in ns (reports only)", std::to_string(d.tck_ns), 'r'});
  v.push_back({"burst_length", "beats per access (the data path is BL4)",
               std::to_string(d.burst_length), 'i', 1, 64});
  for (const auto& f : kTimingFields)
    v.push_back({std::string("timing.") + f.key, f.desc, std::to_string(d.timing.*f.member), 'i',
                 f.min, f.max});
  v.push_back({"controller.address_map",
               "address map: ch_bg_co_ba, ch_bg_ba_co, ch_co_bg_ba, "
               "co_bg_ba_ro_ch",
               hbm_map_name(d.ctrl.addr_map), 's'});
  v.push_back({"controller.starvation_cap", "cycles after which the oldest request goes first",
               std::to_string(d.ctrl.starve_cap), 'i', 1, 65535});
  v.push_back({"controller.write_high_watermark", "buffered writes that start a write drain",
               std::to_string(d.ctrl.wr_hi), 'i', 1, kHbmWriteBufferEntries});
  v.push_back({"controller.write_low_watermark", "buffered writes at which a drain stops",
               std::to_string(d.ctrl.wr_lo), 'i', 0, kHbmWriteBufferEntries});
  return v;
}

void validate_hbm_config(const HbmConfig& c) {
  const HbmTiming& t = c.timing;
  for (const auto& f : kTimingFields) {
    const uint32_t v = t.*f.member;
    rule(v >= f.min && v <= f.max, c, std::string("timing.") + f.key,
         "must be in [" + std::to_string(f.min) + ", " + std::to_string(f.max) + "], not " +
             std::to_string(v));
  }
  rule(c.tck_ns > 0.0, c, "tck_ns", "must be > 0");
  rule(c.burst_length == 4, c, "burst_length",
       "must be 4 (the data path moves one BL4 burst of 64 bytes), not " +
           std::to_string(c.burst_length));
  rule(t.rc >= t.ras + t.rp, c, "timing.tRC",
       "tRC must be >= tRAS + tRP (" + std::to_string(t.rc) + " < " + std::to_string(t.ras) +
           " + " + std::to_string(t.rp) + ")");
  rule(t.ras >= t.rcd, c, "timing.tRAS",
       "tRAS must be >= tRCD (" + std::to_string(t.ras) + " < " + std::to_string(t.rcd) + ")");
  rule(t.ccd_s >= 2, c, "timing.tCCD_S",
       "tCCD_S must be >= BL/2 = 2: a burst holds the data bus for BL/2 cycles");
  rule(t.ccd_l >= t.ccd_s, c, "timing.tCCD_L",
       "tCCD_L must be >= tCCD_S (" + std::to_string(t.ccd_l) + " < " + std::to_string(t.ccd_s) +
           ")");
  rule(t.rrd_l >= t.rrd_s, c, "timing.tRRD_L",
       "tRRD_L must be >= tRRD_S (" + std::to_string(t.rrd_l) + " < " + std::to_string(t.rrd_s) +
           ")");
  rule(t.wtr_l >= t.wtr_s, c, "timing.tWTR_L",
       "tWTR_L must be >= tWTR_S (" + std::to_string(t.wtr_l) + " < " + std::to_string(t.wtr_s) +
           ")");
  rule(t.cwl <= t.cl + 3, c, "timing.CWL",
       "CWL must be <= CL + BL/2 + 1 so that RD to WR (CL + BL/2 + 2 - CWL) stays positive");
  rule(t.refi > t.rfc + t.ras + ref_lead(t), c, "timing.tREFI",
       "tREFI must exceed tRFC + tRAS + the refresh lead (tRAS + CWL + 2 + tWR + tRTP + tRP + 4 "
       "= " +
           std::to_string(ref_lead(t)) + "): " + std::to_string(t.refi) +
           " <= " + std::to_string(t.rfc + t.ras + ref_lead(t)));
  rule(c.ctrl.starve_cap >= 1 && c.ctrl.starve_cap <= 65535, c, "controller.starvation_cap",
       "must be in [1, 65535], not " + std::to_string(c.ctrl.starve_cap));
  rule(c.ctrl.wr_hi >= 1 && c.ctrl.wr_hi <= kHbmWriteBufferEntries, c,
       "controller.write_high_watermark",
       "must be in [1, " + std::to_string(kHbmWriteBufferEntries) +
           "] (the write buffer's entries), not " + std::to_string(c.ctrl.wr_hi));
  rule(c.ctrl.wr_lo < c.ctrl.wr_hi, c, "controller.write_low_watermark",
       "must be < write_high_watermark (" + std::to_string(c.ctrl.wr_lo) +
           " >= " + std::to_string(c.ctrl.wr_hi) + ")");
}

HbmConfig hbm_config_from_node(const YAML::Node& hbm, const std::string& source) {
  HbmConfig c;
  c.source = source;
  if (!hbm.IsDefined() || hbm.IsNull()) fail(source, nullptr, "", "no 'hbm' section");
  if (!hbm.IsMap()) fail(source, &hbm, "", "the 'hbm' section must be a map of keys");
  for (const auto& kv : hbm) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "tck_ns") {
      if (!v.IsScalar()) fail(source, &v, key, "must be a number");
      try {
        c.tck_ns = v.as<double>();
      } catch (const YAML::Exception&) {
        fail(source, &v, key, "must be a number, not '" + v.Scalar() + "'");
      }
      if (!(c.tck_ns > 0.0)) fail(source, &v, key, "must be > 0");
    } else if (key == "burst_length") {
      c.burst_length = get_key(v, source, key);
    } else if (key == "timing") {
      require_map(v, source, key);
      for (const auto& tkv : v) {
        const std::string tkey = tkv.first.as<std::string>();
        const TimingField* f = nullptr;
        for (const auto& cand : kTimingFields)
          if (tkey == cand.key) f = &cand;
        if (f == nullptr) {
          const YAML::Node k = tkv.first;
          fail(source, &k, "timing." + tkey, "unknown key");
        }
        c.timing.*(f->member) = get_key(tkv.second, source, "timing." + tkey);
      }
    } else if (key == "controller") {
      require_map(v, source, key);
      for (const auto& ckv : v) {
        const std::string ckey = ckv.first.as<std::string>();
        const std::string full = "controller." + ckey;
        const YAML::Node& cv = ckv.second;
        if (ckey == "address_map") {
          if (!cv.IsScalar()) fail(source, &cv, full, "must be a map name");
          if (!hbm_map_from_name(cv.Scalar(), &c.ctrl.addr_map)) {
            fail(source, &cv, full,
                 "unknown map '" + cv.Scalar() +
                     "' (known: ch_bg_co_ba, ch_bg_ba_co, ch_co_bg_ba, co_bg_ba_ro_ch)");
          }
        } else if (ckey == "starvation_cap") {
          c.ctrl.starve_cap = get_key(cv, source, full);
        } else if (ckey == "write_high_watermark") {
          c.ctrl.wr_hi = get_key(cv, source, full);
        } else if (ckey == "write_low_watermark") {
          c.ctrl.wr_lo = get_key(cv, source, full);
        } else {
          const YAML::Node k = ckv.first;
          fail(source, &k, full, "unknown key");
        }
      }
    } else {
      const YAML::Node k = kv.first;
      fail(source, &k, key, "unknown key");
    }
  }
  validate_hbm_config(c);
  return c;
}

HbmConfig parse_hbm_config(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw HbmConfigError(source + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) throw HbmConfigError(source + ": hbm: the file must be a map with 'hbm:'");
  const std::string dup = yaml_duplicate_key(root);  // yaml-cpp keeps duplicates silently
  if (!dup.empty()) throw HbmConfigError(source + ": " + dup);
  try {
    return hbm_config_from_node(root["hbm"], source);
  } catch (const YAML::Exception& e) {  // a conversion no rule foresaw (a key that is a list)
    throw HbmConfigError(source + ": " + e.what());
  }
}

HbmConfig load_hbm_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw HbmConfigError(path + ": is a directory, not an HBM configuration file (a YAML file "
                         "such as configs/hbm2_default.yaml)");
  std::ifstream in(path);
  if (!in) throw HbmConfigError(path + ": cannot open the HBM configuration file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hbm_config(ss.str(), path);
}

}  // namespace tpu
