// Every command of tpusim declared on one CLI::App, without running anything: what tpusim's
// main parses its line with, and what the command-line fuzz test (tests/unit/fuzz_test.cc)
// parses random lines with. Each command's options are declared next to it (tpusim.cc,
// pod_cmd.h, shard_cmd.h, sweep_cmd.h, train_cmd.h, traffic.h, vpu_cmd.h).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>

namespace tpu {

// Declares the commands (matmul, traffic, allreduce, collective, pod, shard, train, vpu,
// example-inputs, sweep, gather, generate, slices and the hidden hang) on `tool`; each function
// runs its command once the line is parsed into `tool`. The functions hold the variables the
// options write: keep them while `tool` parses.
std::map<std::string, std::function<int()>> tpusim_commands(CLI::App& tool);

}  // namespace tpu
