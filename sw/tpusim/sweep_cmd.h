// `tpusim sweep allreduce|collective|matmul`: one collective over a range of sizes, or one
// matmul over a list of shapes, each size or shape the real job, golden-checked; a table in the
// nccl-tests form on stdout and every row in the JSON report (sw/jobs/sweep_job.h).
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Declares the command and its three sweeps on `tool`; what it returns runs the sweep the line
// named: the exit code (0 every row passes, 1 a golden mismatch); it throws
// std::invalid_argument for a bad range or shape (exit 2, naming the flag and the rule).
std::function<int()> sweep_command(CLI::App& tool);

}  // namespace tpu
