// The assertions are live: a credit the receiver never sent (more credits than buffer slots)
// and an inject-port payload changed while stalled each make the harness count a failure.
#include <gtest/gtest.h>

#include "ici_net.h"
#include "ici_traffic.h"

namespace tpu {
namespace {

TEST(IciSva, SpuriousCreditTripsCreditConservation) {
  IciNet net(ici_2d(4, 4));
  net.tick(5);
  EXPECT_EQ(net.assert_failures(), 0u);
  net.spurious_credit(5, /*dir +X*/ 0, 1);  // the counter is already at the buffer depth
  net.tick();
  EXPECT_GT(net.assert_failures(), 0u);
}

TEST(IciSva, CleanTrafficTripsNothing) {
  IciNet net(ici_2d(4, 4));
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.rate = 0.5;
  cfg.length = IciLength::kMixed;
  const IciRunStats st = ici_run(net, sb, cfg, 0, 500, 5000);
  ASSERT_TRUE(st.completed) << st.error;
  EXPECT_EQ(net.assert_failures(), 0u);
}

TEST(IciSva, UnstableInjectPayloadTripsHandshakeCheck) {
  IciNet net(ici_ring(4));
  // Hold the ejection port so node 0's buffers fill and its inject port stalls.
  net.set_eject_ready([](unsigned n, uint64_t) { return n != 1; });
  IciScoreboard sb(net);
  for (int i = 0; i < 40; ++i) sb.send(0, 1, 4);
  net.corrupt_inject(0);
  net.tick(200);
  EXPECT_GT(net.assert_failures(), 0u);
}

}  // namespace
}  // namespace tpu
