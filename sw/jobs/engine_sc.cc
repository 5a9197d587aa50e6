#include "engine_sc.h"

#include <memory>

#include "engine.h"
#include "pod_sc.h"

namespace tpu {

namespace {

void run_sc_pod(const PodParams& params, const std::function<void(HostPort&)>& job) {
  static std::unique_ptr<ScPod> pod;  // one elaboration per process
  pod = std::make_unique<ScPod>("pod", params);
  pod->run(job);
}

}  // namespace

void use_systemc_engine() { set_systemc_runner(&run_sc_pod); }

}  // namespace tpu
