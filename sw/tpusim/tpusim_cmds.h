// Every command of tpusim declared on one CLI::App, without running anything: what tpusim's
// main parses its line with, and what the command-line fuzz test (tests/unit/fuzz_test.cc)
// parses random lines with. Each command's options are declared next to it (tpusim.cc,
// pod_cmd.h, shard_cmd.h, sweep_cmd.h, train_cmd.h, traffic.h, vpu_cmd.h).
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <map>
#include <string>

namespace tpu {

// Declares the commands (matmul, traffic, allreduce, collective, pod, shard, train, vpu,
// example-inputs, sweep, gather, generate, slices and the hidden hang) on `tool`; each function
// runs its command once the line is parsed into `tool`. The functions hold the variables the
// options write: keep them while `tool` parses.
std::map<std::string, std::function<int()>> tpusim_commands(CLI::App& tool);

// tpusim's exit codes.
constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;  // the run finished but the golden check failed
constexpr int kExitUsage = 2;     // bad command line, file or configuration
constexpr int kExitSim = 3;       // the RTL reported an error or hung

// What an exception a command threw means: its exit code, how tpusim names it ("hang",
// "simulation error", "error"; "" for --check's stop, exit 0), its message, and for a chip's
// error the chip (else -1). tpusim and each slice of tpusim slices report through it.
struct CommandFailure {
  int code = kExitUsage;
  std::string kind, what;
  int chip = -1;
};
CommandFailure command_failure(const std::exception_ptr& e);

}  // namespace tpu
