// One check for the unit tests' error cases: f throws std::invalid_argument whose message names
// every one of `parts` (the parameter, the value, the rule).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {

inline void expect_invalid(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming " << parts[0];
  } catch (const std::invalid_argument& e) {
    for (const auto& s : parts) {
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  }
}

}  // namespace tpu
