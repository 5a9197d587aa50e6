// waves/router.gtkw opens on a real dump: every signal it names is in the FST the harness writes.
// The dump is one file for the whole network, each router under the scope of its node, and a
// dump that cannot be written is an error naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "ici_net.h"
#include "ici_test_util.h"
#include "ici_traffic.h"
#include "wave_check.h"

#ifndef TPU_SOURCE_DIR
#error "TPU_SOURCE_DIR must point at the project root"
#endif

namespace tpu {
namespace {

TEST(IciWaves, GtkwSignalsArePresentInADump) {
  ASSERT_TRUE(have_fst2vcd())
      << "fst2vcd (package gtkwave) is not installed: scripts/deps.sh installs gtkwave";
  const std::string fst = ::testing::TempDir() + "ici_waves.fst";
  {
    IciNet net(ici_ring(4), fst);
    IciScoreboard sb(net);
    IciTrafficConfig cfg;
    cfg.rate = 0.5;
    cfg.length = IciLength::kMixed;
    const IciRunStats st = ici_run(net, sb, cfg, 0, 200, 2000);
    ASSERT_TRUE(st.completed) << st.error;
    expect_clean(net, sb);
  }  // the dump is closed here
  const auto wanted = gtkw_signals(std::string(TPU_SOURCE_DIR) + "/waves/router.gtkw");
  ASSERT_GT(wanted.size(), 20u);
  const auto present = fst_signals(fst);
  const auto miss = missing_signals(wanted, present);
  std::string list;
  for (const auto& m : miss) list += "\n  " + m;
  EXPECT_TRUE(miss.empty()) << miss.size()
                            << " signals of waves/router.gtkw are not in the dump:" << list;
  std::remove(fst.c_str());
}

// Node n's signals sit under "node<n>": every router of a 3x2 mesh is there, under the name of
// its node, and holds that node's coordinate (x + 3 * y = n).
TEST(IciWaves, OneFileWithAScopePerNode) {
  ASSERT_TRUE(have_fst2vcd())
      << "fst2vcd (package gtkwave) is not installed: scripts/deps.sh installs gtkwave";
  const std::string fst = ::testing::TempDir() + "ici_nodes.fst";
  const IciTopology t = ici_2d(3, 2, /*wrap=*/false);
  {
    IciNet net(t, fst);
    IciScoreboard sb(net);
    sb.send(0, 5, 4);
    ASSERT_TRUE(net.drain(200));
    expect_clean(net, sb);
  }
  const auto present = fst_signals(fst);
  std::vector<std::string> me;
  for (unsigned n = 0; n < t.nodes(); ++n)
    me.push_back("node" + std::to_string(n) + ".ici_node_tb_top.i_router.me_q");
  const auto values = fst_last_values(fst, me);
  for (unsigned n = 0; n < t.nodes(); ++n) {
    const auto it = values.find(me[n]);
    ASSERT_NE(it, values.end()) << me[n] << " is not in the dump";
    EXPECT_EQ(std::stoull(it->second, nullptr, 2), ici_pack_coord(t.coord(n)))
        << me[n] << " holds the coordinate of another node";
  }
  for (const auto& s : present)
    EXPECT_TRUE(s.rfind("node", 0) == 0 && std::stoul(s.substr(4)) < t.nodes())
        << s << ": not under the scope of one of the " << t.nodes() << " nodes";
  std::remove(fst.c_str());
}

TEST(IciWaves, AnUnwritableDumpIsAnErrorNamingTheFile) {
  const std::string bad = ::testing::TempDir() + "no_such_dir/ici.fst";
  try {
    IciNet net(ici_ring(4), bad);
    FAIL() << "no error for " << bad;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu
