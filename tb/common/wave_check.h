// Checks that a GTKWave save file (.gtkw) only names signals that a real dump contains.
#pragma once

#include <string>
#include <vector>

namespace tpu {

// Signal names a .gtkw file shows, with any trailing bit range ("[15:0]") removed.
std::vector<std::string> gtkw_signals(const std::string& gtkw_path);

// Every variable of an FST dump as "scope.sub.name" (array indices kept), read through
// gtkwave's fst2vcd. Throws std::runtime_error if fst2vcd is missing or fails.
std::vector<std::string> fst_signals(const std::string& fst_path);

// True when fst2vcd can be run.
bool have_fst2vcd();

// The names in `wanted` that are not in `present`.
std::vector<std::string> missing_signals(const std::vector<std::string>& wanted,
                                         const std::vector<std::string>& present);

}  // namespace tpu
