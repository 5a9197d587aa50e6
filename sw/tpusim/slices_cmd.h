// `tpusim slices`: a pod of cubes joined by optical circuit switches (docs/topology.md "Cubes and
// slices"): each slice of the config runs its own tpusim command line at once, on its own thread,
// isolated from the others (tb/pod/pod_slices.h); a slice whose job stops at a chip's error is
// re-formed from a spare cube by changing the switch map, and its job runs again.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it once the line is parsed: the exit code
// (the worst of the slices': 0 pass, 1 golden mismatch, 2 bad input, 3 a chip error or hang not
// cured by re-forming the slice).
std::function<int()> slices_command(CLI::App& tool);

// The words of a slice's job line: split at blanks, with '...' and "..." kept whole;
// std::invalid_argument naming `where` for an unterminated quote.
std::vector<std::string> job_words(const std::string& line, const std::string& where);

}  // namespace tpu
