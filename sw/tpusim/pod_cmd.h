// `tpusim allreduce`, `tpusim collective` and `tpusim pod`: runs on a pod of chips (tb/pod), by
// default the SystemC pod with TLM-2.0 host sockets, checked bit for bit against the golden.
#pragma once

#include <string>
#include <vector>

namespace tpu {

extern const char* kPodUsage;

// Each returns the process exit code (0 pass, 1 golden mismatch); throws std::invalid_argument
// for a bad command line, ConfigError for a bad configuration, PodError for a simulation error.
int cmd_allreduce(const std::vector<std::string>& args);
int cmd_collective(const std::vector<std::string>& args);
int cmd_pod(const std::vector<std::string>& args);

}  // namespace tpu
