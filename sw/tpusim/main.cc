// tpusim's main(): SystemC's, which calls sc_main (tpusim.cc) once the kernel is set up. Apart
// from the commands (tpusim_cmds.h) so that tests can declare and parse them without a main.
#include <cstdlib>

namespace sc_core {
extern "C" int sc_elab_and_sim(int argc, char* argv[]);
}

int main(int argc, char** argv) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);  // no SystemC banner in the tool's output
  return sc_core::sc_elab_and_sim(argc, argv);
}
