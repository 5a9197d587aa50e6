// `tpusim example-inputs`: the .npy files the README's examples read (A.npy, W.npy, B.npy), made
// from a seed, so that `tpusim matmul --a A.npy --w W.npy` and `--bias B.npy` run as written;
// and the tool's version (`tpusim --version`).
#pragma once

#include <functional>
#include <string>

#include "cli.h"

namespace tpu {

// Declares the command on `tool`; what it returns runs it once the line is parsed.
std::function<int()> example_inputs_command(CLI::App& tool);

// "tpusim 0.1.0 (git v0.1-123-gabcdef)": the CMake project version and, when the tree was a git
// checkout at configure time, its `git describe`.
std::string tpusim_version();

}  // namespace tpu
