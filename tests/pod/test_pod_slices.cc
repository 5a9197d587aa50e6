// A pod of cubes joined by optical circuit switches into slices (tb/pod/pod_slices.h,
// docs/topology.md "Cubes and slices"): no packet of one slice reaches another, two jobs at once
// on two slices give each the bits and cycles it has on a torus of its slice alone, and a slice
// re-formed from a spare cube after a link failure runs its job again.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "pod.h"
#include "pod_driver.h"
#include "pod_slices.h"
#include "tpu/bf16.h"
#include "tpu/ocs.h"

namespace tpu {
namespace {

PodParams params() {
  PodParams p;
  p.variant = "4x4";
  return p;
}

// Three cubes of 2x2x2 chips: slice "a" of cubes 0 and 2 (a 2x2x4 torus), slice "b" of cube 1
// (a 2x2x2 torus); `spare` adds a fourth cube in no slice.
OcsPod three_cubes(bool spare = false) {
  OcsPod o;
  o.cube = {2, 2, 2};
  o.cubes = spare ? 4 : 3;
  o.slices.push_back({"a", {2, 2, 4}, {0, 2}});
  o.slices.push_back({"b", {2, 2, 2}, {1}});
  return o;
}

std::vector<std::vector<uint32_t>> random_inputs(const CollectivePlan& plan, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i)
      in[c].push_back(f32_bits(nd(rng)));
  return in;
}

// What a collective did on a machine: its outputs, cycles, per-chip counters and link flits.
struct Outcome {
  std::vector<std::vector<uint32_t>> out, golden;
  uint64_t load = 0, collective = 0, store = 0;
  std::vector<uint64_t> chip_cycles;
  std::vector<ChipCounters> counters;
  std::vector<LinkStat> links;
};

Outcome run_collective(HostPort& h, Collective kind, std::size_t n, uint64_t seed) {
  PodDriver drv(h);
  CollectiveSpec s;
  s.collective = kind;
  s.n = n;
  const CollectivePlan plan = drv.plan(s);
  const auto in = random_inputs(plan, seed);
  const PodCollectiveRun r = drv.run(plan, in);
  Outcome o;
  o.out = r.out;
  o.golden = golden_collective(r.rounds, in);
  o.load = r.load_cycles;
  o.collective = r.collective_cycles;
  o.store = r.store_cycles;
  o.chip_cycles = r.prog.run.chip_cycles;
  o.counters = r.prog.chip_delta;
  o.links = h.link_stats();
  return o;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.out, a.golden) << what;
  EXPECT_EQ(a.out, b.out) << what;
  EXPECT_EQ(a.load, b.load) << what;
  EXPECT_EQ(a.collective, b.collective) << what;
  EXPECT_EQ(a.store, b.store) << what;
  EXPECT_EQ(a.chip_cycles, b.chip_cycles) << what;
  ASSERT_EQ(a.counters.size(), b.counters.size()) << what;
  for (std::size_t c = 0; c < a.counters.size(); ++c)
    for (unsigned k = 0; k < kNumChipStats; ++k)
      EXPECT_EQ(a.counters[c].v[k], b.counters[c].v[k])
          << what << " chip " << c << " " << chip_stat_name(k);
  ASSERT_EQ(a.links.size(), b.links.size()) << what;
  for (std::size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_EQ(a.links[l].chip, b.links[l].chip) << what << " link " << l;
    EXPECT_EQ(a.links[l].dir, b.links[l].dir) << what << " link " << l;
    EXPECT_EQ(a.links[l].flits, b.links[l].flits) << what << " link " << l;
  }
}

// An all-to-all on each slice at once fills every link of both: every link that carried flits
// joins two chips of one slice, and the flits each slice's chips ejected are the flits its chips
// injected (a packet that crossed would be ejected in the other slice). The structure behind it
// (no link between slices at all) is Ocs.SlicesAreTheirToriAndNothingLeavesThem.
TEST(PodSlices, NoPacketCrossesIntoAnotherSlice) {
  SlicedPod pod(params(), three_cubes());
  std::vector<int> slice_of(static_cast<std::size_t>(pod.core().num_chips()), -1);
  for (int s = 0; s < 2; ++s)
    for (int c : pod.slice_chips(s)) slice_of[static_cast<std::size_t>(c)] = s;
  Outcome got[2];
  const auto errors =
      pod.run({[&](HostPort& h) { got[0] = run_collective(h, Collective::kAllToAll, 16 * 64, 3); },
               [&](HostPort& h) { got[1] = run_collective(h, Collective::kAllToAll, 8 * 64, 4); }});
  for (int s = 0; s < 2; ++s) {
    EXPECT_FALSE(errors[static_cast<std::size_t>(s)]);
    EXPECT_EQ(got[s].out, got[s].golden) << "slice " << s;
  }
  uint64_t flits[2] = {0, 0};
  const std::vector<LinkStat> links = pod.core().link_stats();
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (links[i].flits == 0) continue;
    const int tx = slice_of[static_cast<std::size_t>(links[i].chip)];
    const int rx =
        slice_of[static_cast<std::size_t>(pod.core().link_receiver(static_cast<int>(i)))];
    EXPECT_EQ(tx, rx) << "the link from chip " << links[i].chip << " carried " << links[i].flits
                      << " flits";
    if (tx >= 0) flits[tx] += links[i].flits;
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_GT(flits[s], 0u) << "slice " << s;
    uint64_t injected = 0, ejected = 0;
    for (int c : pod.slice_chips(s)) {
      const ChipCounters k = pod.core().counters(c);
      injected += k.v[kStatIciTxFlits];
      ejected += k.v[kStatIciRxFlits];
    }
    EXPECT_GT(injected, 0u);
    EXPECT_EQ(injected, ejected) << "slice " << s;
  }
}

// Two jobs at once, an all-reduce on slice a and an all-to-all on slice b, each on its own
// thread: each gives the bits, cycles, per-chip counters and link flits it gives on a pod of its
// slice's torus alone (isolation costs nothing), and the pod's clock is the longer job's; on one
// thread or two, with a spare cube or none.
TEST(PodSlices, TwoJobsAtOnceEachAsOnItsOwnTorus) {
  Outcome alone_a, alone_b;
  {
    PodParams p = params();
    p.topo = Topology::torus({2, 2, 4});
    CppPodHost h(p);
    alone_a = run_collective(h, Collective::kAllReduce, 3000, 7);
  }
  {
    PodParams p = params();
    p.topo = Topology::torus({2, 2, 2});
    CppPodHost h(p);
    alone_b = run_collective(h, Collective::kAllToAll, 8 * 96, 8);
  }
  for (const bool spare : {false, true}) {
    PodParams p = params();
    p.threads = spare ? 2 : 1;  // the same bits and cycles on two threads
    SlicedPod pod(p, three_cubes(spare));
    Outcome got_a, got_b;
    const auto errors = pod.run(
        {[&](HostPort& h) { got_a = run_collective(h, Collective::kAllReduce, 3000, 7); },
         [&](HostPort& h) { got_b = run_collective(h, Collective::kAllToAll, 8 * 96, 8); }});
    for (const auto& e : errors) EXPECT_FALSE(e);
    expect_same(got_a, alone_a, "slice a");
    expect_same(got_b, alone_b, "slice b");
    EXPECT_EQ(pod.slice(0).cycle(), alone_a.load + alone_a.collective + alone_a.store);
    EXPECT_EQ(pod.core().cycle(), std::max(pod.slice(0).cycle(), pod.slice(1).cycle()));
  }
}

// The links of a chip of slice a's cube 0 go down: the job stops with a ChipError naming a chip of
// that cube while slice b's job runs on to its golden result; the slice re-formed from the spare
// cube 3 runs the same job to the same result as a torus of its shape alone.
TEST(PodSlices, SliceReformedFromASpareCubeRunsAgain) {
  OcsPod ocs = three_cubes(true);
  PodParams p = params();
  for (int dir = 0; dir < 6; ++dir)  // chip 1 (of cube 0) cut off from the first cycle
    p.faults.link_down.push_back({1, dir, 0});
  p.watchdog_cycles = 20000;
  int failed_chip = -1;
  {
    SlicedPod pod(p, ocs);
    Outcome b;
    const auto errors =
        pod.run({[&](HostPort& h) { run_collective(h, Collective::kAllReduce, 3000, 7); },
                 [&](HostPort& h) { b = run_collective(h, Collective::kAllToAll, 8 * 96, 8); }});
    EXPECT_FALSE(errors[1]) << "slice b runs on beside the failed slice";
    EXPECT_EQ(b.out, b.golden);
    ASSERT_TRUE(errors[0]);
    try {
      std::rethrow_exception(errors[0]);
    } catch (const ChipError& e) {
      failed_chip = e.chip();
      EXPECT_NE(std::string(e.what()).find("is down"), std::string::npos) << e.what();
    }
  }
  ASSERT_GE(failed_chip, 0);
  const int cube = ocs.cube_of_chip(failed_chip);
  EXPECT_EQ(cube, 0);
  const std::vector<OcsRemap> moves = ocs_replace(ocs, {cube});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].slice, 0);
  EXPECT_EQ(moves[0].from, 0);
  EXPECT_EQ(moves[0].to, 3);
  EXPECT_EQ(ocs.slices[0].cubes, (std::vector<int>{3, 2}));
  // The failed chip is now on a spare cube, wired as its own mesh: its +X, +Y and +Z links go
  // nowhere, the other three stay down.
  EXPECT_EQ(take_unwired_link_downs(p.faults, ocs).size(), 3u);
  EXPECT_EQ(p.faults.link_down.size(), 3u);
  SlicedPod again(p, ocs);
  Outcome got;
  const auto errors = again.run(
      {[&](HostPort& h) { got = run_collective(h, Collective::kAllReduce, 3000, 7); }, nullptr});
  EXPECT_FALSE(errors[0]);
  PodParams alone = params();
  alone.topo = Topology::torus({2, 2, 4});
  CppPodHost h(alone);
  expect_same(got, run_collective(h, Collective::kAllReduce, 3000, 7), "re-formed slice a");
}

}  // namespace
}  // namespace tpu
