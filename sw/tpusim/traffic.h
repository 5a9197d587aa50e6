// `tpusim traffic`: synthetic traffic on the ICI router network (tb/ici), latency and accepted
// throughput as a summary and a JSON report.
#pragma once

#include <string>
#include <vector>

namespace tpu {

extern const char* kTrafficUsage;

// Returns the process exit code; throws std::invalid_argument for a bad command line.
int cmd_traffic(const std::vector<std::string>& args);

}  // namespace tpu
