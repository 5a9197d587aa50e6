// `tpusim allreduce`, `tpusim collective` and `tpusim pod`: runs on a pod of chips (tb/pod), by
// default the SystemC pod with TLM-2.0 host sockets, checked bit for bit against the golden.
#pragma once

#include <functional>

#include "cli.h"

namespace tpu {

// Each declares its command and options on `tool` and returns what runs it once the line is
// parsed: the process exit code (0 pass, 1 golden mismatch); it throws std::invalid_argument
// for a bad combination of options, ConfigError for a bad configuration, PodError for a
// simulation error.
std::function<int()> allreduce_command(CLI::App& tool);
std::function<int()> collective_command(CLI::App& tool);
std::function<int()> pod_command(CLI::App& tool);
// `tpusim hang`, a deliberate deadlock to test the watchdog (docs/errors.md); hidden.
std::function<int()> hang_command(CLI::App& tool);

}  // namespace tpu
