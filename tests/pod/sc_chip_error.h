// A check the SystemC pod tests share: an illegal opcode on one chip, while another waits forever
// on a counter, stops the whole job with a ChipError that names the bad chip, its code
// (illegal_opcode) and, when given, the chip's name and coordinate.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "pod_sc.h"

namespace tpu {

inline void expect_chip_error_stops_the_job(ScPod& pod, int bad, int waiter,
                                            const std::string& named = "") {
  try {
    pod.run([&](HostPort& h) {
      h.push(bad, {cmd_nop(), ChipCmd::make(static_cast<ChipOp>(12), 0, 0, 0, 0, 0, 0)});
      h.push(waiter, {cmd_ici_wait(0, 1)});  // would wait forever
      h.run_until_idle(100000);
    });
    FAIL() << "no error";
  } catch (const ChipError& e) {
    EXPECT_EQ(e.chip(), bad);
    EXPECT_EQ(e.code(), 1u);
    if (!named.empty()) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
    EXPECT_NE(std::string(e.what()).find("illegal_opcode"), std::string::npos) << e.what();
  }
}

}  // namespace tpu
