// `tpusim vpu`: one VPU op (elementwise, or a reduction of each row) over an f32 array on one
// chip, golden-checked (sw/jobs/vpu_job.h; docs/vpu.md "Running one op: tpusim vpu").
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it once the line is parsed: the exit
// code (0 pass, 1 golden mismatch); it throws std::invalid_argument (or NpyError) for a bad op,
// operand or file before the first cycle, ChipError for a chip error.
std::function<int()> vpu_command(CLI::App& tool);

}  // namespace tpu
