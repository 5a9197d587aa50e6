// `tpusim traffic`: synthetic traffic on the ICI router network (tb/ici), latency and accepted
// throughput as a summary and a JSON report.
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it once the line is parsed: the process
// exit code; it throws std::invalid_argument for a topology the build cannot make.
std::function<int()> traffic_command(CLI::App& tool);

}  // namespace tpu
