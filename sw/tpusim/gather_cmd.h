// `tpusim gather`: rows of a float32 table gathered by an id list on one chip with the DMA_IDX
// command, golden-checked (sw/jobs/gather_job.h; docs/isa.md "DMA_IDX").
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it once the line is parsed: the exit
// code (0 pass, 1 golden mismatch); it throws std::invalid_argument (or NpyError) for a bad
// table, id or file before the first cycle, ChipError for a chip error.
std::function<int()> gather_command(CLI::App& tool);

}  // namespace tpu
