// `tpusim generate`: greedy decoding on the pod from a GPT run `tpusim train --model gpt --save`
// saved (docs/training.md, "Generating text").
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it: the exit code (0 pass, 1 golden
// mismatch); std::invalid_argument for a bad saved run or flag.
std::function<int()> generate_command(CLI::App& tool);

}  // namespace tpu
