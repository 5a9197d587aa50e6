// `tpusim train`: data-parallel SGD of an MLP on the pod (docs/training.md).
#pragma once

#include <string>
#include <vector>

namespace tpu {

extern const char* kTrainUsage;

// Returns the exit code (0 pass, 1 golden mismatch); throws std::invalid_argument for a bad
// command line, ConfigError for a bad configuration, PodError for a simulation error.
int cmd_train(const std::vector<std::string>& args);

}  // namespace tpu
