// Test helpers for the ICI network: readable names for topology sweeps and the checks every run
// ends with (no scoreboard error, no failed assertion, all credits back).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ici_net.h"
#include "ici_traffic.h"

namespace tpu {

// "4x4 torus" -> "4x4_torus" (a gtest parameter name).
inline std::string ici_test_name(const IciTopology& t) {
  std::string s = t.name();
  for (char& c : s)
    if (c == ' ') c = '_';
  return s;
}

inline void expect_clean(IciNet& net, const IciScoreboard& sb) {
  for (const auto& e : sb.errors()) ADD_FAILURE() << e;
  EXPECT_EQ(net.assert_failures(), 0u) << "SVA assertions failed (see the $error lines above)";
  EXPECT_EQ(sb.outstanding(), 0u) << "packets lost";
  EXPECT_TRUE(net.idle()) << "flits left in the network";
  EXPECT_TRUE(net.credits_home()) << "credits not all returned: conservation broken";
}

}  // namespace tpu
