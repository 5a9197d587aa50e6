// The one table of configuration keys: every key a chip or pod configuration (configs/*.yaml)
// and its command-line overrides take, registered once with its name, type, range, default and a
// one-line description (Ramulator2's param(...).desc(...).default_val(...)). The loaders
// (chip_config.h) take the keys a section knows and the ranges they check from here, and the
// help text for the keys is written from it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tpu/limits.h"

namespace tpu {

// What a key holds. kSection: a mapping of further keys; kList: a list of kUint items (or of
// mappings, as faults.link_down); the others: one scalar.
enum class KeyType { kSection, kUint, kReal, kBool, kString, kList };
const char* key_type_name(KeyType t);  // "section", "integer", "number", ...

// One key. For kUint (and the items of kList): the integer range lo..hi; for kReal: real_lo ..
// real_hi (real_open_lo: above real_lo, not at it).
struct ConfigKey {
  std::string name;  // "pod.link_latency"; a top-level section: "pod"
  KeyType type = KeyType::kSection;
  uint64_t lo = 0, hi = 0;
  double real_lo = 0, real_hi = 0;
  bool real_open_lo = false;
  std::string unit;  // what a value counts ("cycles", "bytes"), or what it is per (a rate)
  std::string def;   // the default, as written in a file ("" when there is none)
  std::string doc;   // one line

  ConfigKey& desc(const std::string& d) {
    doc = d;
    return *this;
  }
  ConfigKey& default_val(const std::string& v) {
    def = v;
    return *this;
  }
  ConfigKey& range(uint64_t l, uint64_t h) {
    lo = l;
    hi = h;
    return *this;
  }
  ConfigKey& range(const UintRange& r) { return range(r.lo, r.hi); }
  ConfigKey& real_range(double l, double h, bool open_lo = false) {
    real_lo = l;
    real_hi = h;
    real_open_lo = open_lo;
    return *this;
  }
  ConfigKey& units(const std::string& u) {
    unit = u;
    return *this;
  }
  bool holds(uint64_t v) const { return v >= lo && v <= hi; }
  bool holds_real(double v) const {
    return (real_open_lo ? v > real_lo : v >= real_lo) && v <= real_hi;
  }
};

class ConfigKeys {
 public:
  // Registers a key (once: a second registration of a name is a logic_error).
  ConfigKey& param(const std::string& name, KeyType type);
  // The key `name`; an unregistered name is a logic_error (a loader asked for a key it never
  // registered).
  const ConfigKey& at(const std::string& name) const;
  // The names (last component) of the keys directly in `section` ("" for the top level).
  std::set<std::string> keys_in(const std::string& section) const;
  // The same in the order they were registered, "a, b, c".
  std::string listed(const std::string& section) const;
  const std::vector<ConfigKey>& all() const { return keys_; }
  // The help text: per key its name, type and range, default, and description, by section;
  // every key, or those of `section` ("train").
  std::string help(const std::string& section = "") const;

 private:
  std::vector<ConfigKey> keys_;
};

// The table of every key (chip, pod, mesh, train, faults, hbm).
const ConfigKeys& config_keys();

}  // namespace tpu
