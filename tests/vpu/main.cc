// Test main of the VPU RTL suite: GoogleTest's flags, plus --waves[=DIR] to dump one FST per
// harness into DIR (default: the repository's waves/ folder).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "vpu_test_util.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--waves") == 0) {
      tpu::vputest::g_wave_dir = TPU_WAVES_DIR;
    } else if (std::strncmp(argv[i], "--waves=", 8) == 0) {
      tpu::vputest::g_wave_dir = argv[i] + 8;
    }
  }
  return RUN_ALL_TESTS();
}
