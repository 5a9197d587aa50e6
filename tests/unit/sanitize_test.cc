// Built only with TPU_SANITIZE (the `debug` preset, label `sanitize`): proves the sanitizers are
// live in that build, so a clean `ctest -L sanitize` means something. Each case does what the
// sanitizer must stop, in a death test's child process.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <memory>

namespace {

int read_past_end(std::size_t n) {
  std::unique_ptr<int[]> v(new int[n]());
  volatile std::size_t i = n;  // one past the end, unknown to the optimiser
  return v[i];
}

int overflow(int x) {
  volatile int y = x;
  return y + 1;  // signed overflow for INT_MAX: undefined behaviour
}

TEST(Sanitizers, AddressSanitizerStopsAHeapOverflow) {
  EXPECT_DEATH(read_past_end(8), "heap-buffer-overflow");
}

TEST(Sanitizers, UndefinedBehaviourSanitizerStopsASignedOverflow) {
  EXPECT_DEATH(overflow(INT_MAX), "signed integer overflow");
}

}  // namespace
