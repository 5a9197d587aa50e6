// `tpusim shard`: one matmul sharded over a named mesh of the pod (docs/sharding.md).
#pragma once

#include <string>
#include <vector>

namespace tpu {

extern const char* kShardUsage;

// Returns the exit code (0 pass, 1 golden mismatch); throws std::invalid_argument for a bad
// command line, ConfigError for a bad configuration, PodError for a simulation error.
int cmd_shard(const std::vector<std::string>& args);

}  // namespace tpu
