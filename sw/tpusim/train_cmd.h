// `tpusim train`: data-parallel SGD of an MLP on the pod (docs/training.md).
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it once the line is parsed: the exit
// code (0 pass, 1 golden mismatch); it throws std::invalid_argument for a bad combination of
// options, ConfigError for a bad configuration, PodError for a simulation error.
std::function<int()> train_command(CLI::App& tool);

}  // namespace tpu
