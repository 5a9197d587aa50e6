// Checks that a GTKWave save file (.gtkw) only names signals that a real dump contains, and reads
// a dump's value changes back (its timescale and times, for the wave clock's tests).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tpu {

// Signal names a .gtkw file shows, each with its bit range when it has one ("TOP.x.err_o[7:0]").
std::vector<std::string> gtkw_signals(const std::string& gtkw_path);

// Every variable of an FST dump as "scope.sub.name" with its bit range when it has one
// ("TOP.x.err_o[7:0]": a .gtkw that shows err_o[3:0] or err_o is missing it; array indices
// kept), read through gtkwave's fst2vcd. Throws std::runtime_error if fst2vcd is missing or fails.
std::vector<std::string> fst_signals(const std::string& fst_path);

// The last value in an FST dump of each of `names` (full names without the bit range, as
// without_range() gives them), as the binary digits fst2vcd writes ("101", "x" ...); a name that
// is not in the dump has no entry. Throws std::runtime_error if fst2vcd is missing or fails.
std::map<std::string, std::string> fst_last_values(const std::string& fst_path,
                                                   const std::vector<std::string>& names);

// The value changes of `names` in an FST dump (read through fst2vcd, as fst_last_values): the
// dump's $timescale ("1ps"), every timestamp in order, and per name its (time, binary digits)
// changes in order (the first at the dump's start).
struct FstChanges {
  std::string timescale;
  std::vector<uint64_t> times;
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> changes;
};
FstChanges fst_changes(const std::string& fst_path, const std::vector<std::string>& names);

// True when fst2vcd can be run.
bool have_fst2vcd();

// name without a trailing bit range: "TOP.x.err_o[7:0]" -> "TOP.x.err_o" (array indices kept).
std::string without_range(const std::string& name);

// The names in `wanted` that are not in `present`.
std::vector<std::string> missing_signals(const std::vector<std::string>& wanted,
                                         const std::vector<std::string>& present);

}  // namespace tpu
