// The SystemC engine of the jobs (engine.h): the pod with TLM-2.0 host sockets (tb/pod/pod_sc.h),
// in a library of its own (tpu_engine_sc) for the programs that link SystemC and define sc_main.
#pragma once

namespace tpu {

// Makes with_engine run --engine systemc on the SystemC pod (one elaboration per process).
void use_systemc_engine();

}  // namespace tpu
