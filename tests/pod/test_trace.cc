// The timeline and the counters (docs/profiling.md) on a 2x2 pod of 4x4 chips: a matmul on every
// chip (operands in through the host ports) and then an all-reduce of the results, with the
// trace on. The JSON that write_trace writes is parsed back: every chip a process, every unit a
// track, no two events of a track overlapping, and each unit's busy time on the timeline equal
// to the chip's RTL counter of it. The four class counters add up to the cycles; the breakdown
// adds up to 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "json.h"
#include "pod.h"
#include "pod_driver.h"
#include "profile.h"
#include "tpu/bf16.h"
#include "trace.h"

namespace tpu {
namespace {

struct Span {
  uint64_t begin, end;
};

// Cycles covered by a set of spans (their union).
uint64_t union_cycles(std::vector<Span> v) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  uint64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (const Span& s : v) {
    if (open && s.begin <= cur_e) {
      cur_e = std::max(cur_e, s.end);
      continue;
    }
    if (open) total += cur_e - cur_b;
    cur_b = s.begin;
    cur_e = s.end;
    open = true;
  }
  if (open) total += cur_e - cur_b;
  return total;
}

class PodTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    PodParams p;
    p.topo = Topology::torus({2, 2});
    p.variant = "4x4";
    host_ = std::make_unique<CppPodHost>(p);
  }

  // A matmul on every chip (A and W in through the host ports), then an all-reduce (sum) of the
  // C buffers. Returns the counter deltas over it.
  std::vector<ChipCounters> run_job(HostPort& h) {
    const int P = h.num_chips();
    std::vector<ChipCounters> before;
    for (int c = 0; c < P; ++c) before.push_back(h.counters(c));
    const std::size_t M = 24, K = 20, N = 12;
    std::vector<std::unique_ptr<ChipDriver>> drv;
    std::vector<HbmMatrix> am, wm, cm;
    std::vector<std::vector<uint8_t>> img;
    std::vector<HostCopy> copies;
    img.reserve(2 * static_cast<std::size_t>(P));
    std::mt19937_64 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int c = 0; c < P; ++c) {
      std::vector<bf16_t> a(M * K), w(K * N);
      for (auto& v : a) v = f32_to_bf16(nd(rng));
      for (auto& v : w) v = f32_to_bf16(nd(rng));
      drv.push_back(std::make_unique<ChipDriver>(h, c));
      am.push_back(drv.back()->alloc_matrix(M, K, Dtype::kBf16));
      wm.push_back(drv.back()->alloc_matrix(K, N, Dtype::kBf16));
      cm.push_back(drv.back()->alloc_matrix(M, N, Dtype::kF32));
      img.push_back(drv.back()->matrix_image(am.back(), a));
      copies.push_back(HostCopy{c, true, am.back().addr, img.back().data(), img.back().size()});
      img.push_back(drv.back()->matrix_image(wm.back(), w));
      copies.push_back(HostCopy{c, true, wm.back().addr, img.back().data(), img.back().size()});
    }
    h.copy(copies);
    std::vector<std::vector<ChipCmd>> progs;
    for (int c = 0; c < P; ++c) {
      const std::size_t i = static_cast<std::size_t>(c);
      progs.push_back(drv[i]->plan_matmul(cm[i], am[i], wm[i]).program);
    }
    PodDriver pd(h);
    pd.run_programs(progs, "matmul");
    for (int c = 0; c < P; ++c)
      if (h.status(c).halted) h.clear(c);
    CollectiveSpec spec;
    spec.algorithm = "torus";
    spec.n = cm[0].rows * cm[0].pitch;
    CollectiveBuffers bufs;
    for (int c = 0; c < P; ++c) {
      const std::size_t i = static_cast<std::size_t>(c);
      bufs.in.push_back(cm[i].addr);
      bufs.out.push_back(drv[i]->alloc(cm[i].bytes()));
    }
    pd.run(spec, bufs);
    std::vector<ChipCounters> d;
    for (int c = 0; c < P; ++c) d.push_back(h.counters(c) - before[static_cast<std::size_t>(c)]);
    return d;
  }

  std::unique_ptr<CppPodHost> host_;
};

TEST_F(PodTrace, TimelineMatchesCountersAndNeverOverlaps) {
  HostPort& h = *host_;
  TraceOptions on;
  on.enabled = true;
  h.set_trace(on);
  const std::vector<ChipCounters> delta = run_job(h);
  const std::vector<TraceEvent> events = h.take_trace();
  ASSERT_FALSE(events.empty());

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tpu_trace_test_" + std::to_string(getpid()) + ".json"))
                               .string();
  write_trace(path, events, h.info(), 1.0);  // 1 GHz: a cycle is 0.001 us
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::filesystem::remove(path);
  ASSERT_TRUE(Json::accept(text)) << "write_trace wrote text that is not JSON";
  const Json doc = Json::parse(text);
  ASSERT_TRUE(doc.contains("traceEvents"));
  const Json& evs = doc.at("traceEvents");
  ASSERT_TRUE(evs.is_array());

  const int P = h.num_chips();
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  std::map<std::pair<int, int>, std::vector<Span>> spans;
  std::set<std::string> names;
  std::vector<std::pair<int, std::string>> sends;  // (chip, dst_chip) of every ICI_SEND
  for (const Json& e : evs) {
    const std::string ph = e.at("ph").get<std::string>();
    const int pid = e.at("pid").get<int>();
    const int tid = e.at("tid").get<int>();
    if (ph == "M") {
      const std::string what = e.at("name").get<std::string>();
      const Json& args = e.at("args");
      if (what == "process_name") process[pid] = args.at("name").get<std::string>();
      if (what == "thread_name") thread[{pid, tid}] = args.at("name").get<std::string>();
      continue;
    }
    ASSERT_EQ(ph, "X");
    const std::string name = e.at("name").get<std::string>();
    names.insert(name);
    ASSERT_TRUE(e.contains("args"));
    if (name == "ICI_SEND") sends.push_back({pid, e.at("args").at("dst_chip").get<std::string>()});
    const uint64_t b = static_cast<uint64_t>(std::llround(e.at("ts").get<double>() * 1000.0));
    const uint64_t d = static_cast<uint64_t>(std::llround(e.at("dur").get<double>() * 1000.0));
    spans[{pid, tid}].push_back({b, b + d});
  }
  // Every chip a process named "chip N (x,y,z)", every unit a track.
  const std::vector<std::string> units = {"sequencer",  "DMA",        "MXU weights", "MXU",
                                          "VPU",        "ICI send 0", "ICI send 1",  "ICI send 2",
                                          "ICI send 3", "ICI wait",   "host port"};
  for (int c = 0; c < P; ++c) {
    EXPECT_EQ(process[c], chip_name(h.info().topo, c));
    std::set<std::string> have;
    for (const auto& t : thread)
      if (t.first.first == c) have.insert(t.second);
    for (const auto& u : units) EXPECT_TRUE(have.count(u)) << "chip " << c << " lacks track " << u;
  }
  for (const char* op : {"DMA", "LOADW", "MATMUL", "VPU", "ICI_SEND", "HALT", "host write"})
    EXPECT_TRUE(names.count(op)) << "no " << op << " event";

  // Every send names a chip of the pod other than its sender, by its coordinate (decoded through
  // the contract: the fields are CoordW = 4 bits each).
  std::map<std::string, int> chip_of;  // "(x,y,z)" -> chip
  for (int c = 0; c < P; ++c) {
    const std::string n = chip_name(h.info().topo, c);
    chip_of[n.substr(n.find('('))] = c;
  }
  ASSERT_FALSE(sends.empty());
  for (const auto& [src, dst] : sends) {
    ASSERT_TRUE(chip_of.count(dst)) << "chip " << src << " sends to " << dst << ", not in the pod";
    EXPECT_NE(chip_of[dst], src) << dst;
  }

  // No two events of one track overlap.
  for (auto& [key, v] : spans) {
    std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (std::size_t i = 1; i < v.size(); ++i)
      ASSERT_LE(v[i - 1].end, v[i].begin)
          << "chip " << key.first << " track " << thread[key] << ": events overlap";
  }

  // Each unit's busy time on the timeline is its counter.
  auto busy = [&](int c, const std::vector<std::string>& tracks) {
    std::vector<Span> all;
    for (const auto& [key, v] : spans)
      if (key.first == c && std::find(tracks.begin(), tracks.end(), thread[key]) != tracks.end())
        all.insert(all.end(), v.begin(), v.end());
    return union_cycles(all);
  };
  for (int c = 0; c < P; ++c) {
    const ChipCounters& d = delta[static_cast<std::size_t>(c)];
    SCOPED_TRACE("chip " + std::to_string(c));
    EXPECT_GT(d[kStatMatmulFlight], 0u);
    EXPECT_GT(d[kStatSendFlight], 0u);
    EXPECT_EQ(busy(c, {"DMA"}), d[kStatDmaFlight]);
    EXPECT_EQ(busy(c, {"MXU weights"}), d[kStatLoadWFlight]);
    EXPECT_EQ(busy(c, {"MXU"}), d[kStatMatmulFlight]);
    EXPECT_EQ(busy(c, {"VPU"}), d[kStatVpuFlight]);
    std::vector<std::string> send_tracks;
    for (unsigned l = 0; l < kTraceSendLanes; ++l)
      send_tracks.push_back("ICI send " + std::to_string(l));
    EXPECT_EQ(busy(c, send_tracks), d[kStatSendFlight]);
    EXPECT_EQ(busy(c, {"ICI wait"}), d[kStatIciWait]);
    EXPECT_EQ(busy(c, {"host port"}), d[kStatHostBusy]);  // a full-rate port: no gaps
    // Every cycle in exactly one class.
    EXPECT_EQ(d[kStatClsCompute] + d[kStatClsComm] + d[kStatClsMemory] + d[kStatClsIdle],
              d[kStatCycles]);
    EXPECT_EQ(d[kStatMxuMacs], d[kStatMxuBeats] * 16u);  // 4x4 array
    EXPECT_LE(d[kStatMxuStarved], d[kStatMatmulFlight]);
  }
}

TEST_F(PodTrace, WindowKeepsOnlyOverlappingEventsAndOffRecordsNothing) {
  HostPort& h = *host_;
  run_job(h);  // off: nothing recorded
  EXPECT_TRUE(h.take_trace().empty());
  TraceOptions w;
  w.enabled = true;
  w.from = h.cycle() + 500;
  w.to = h.cycle() + 900;
  h.set_trace(w);
  run_job(h);
  const auto ev = h.take_trace();
  ASSERT_FALSE(ev.empty());
  for (const TraceEvent& e : ev) {
    EXPECT_LT(e.begin, w.to);
    EXPECT_TRUE(e.end > w.from || (e.end == e.begin && e.begin >= w.from));
  }
  TraceOptions bad = w;
  bad.to = bad.from;
  EXPECT_THROW(h.set_trace(bad), std::invalid_argument);
}

TEST(Profile, BreakdownAddsUpAndCountsEarlyChipsIdle) {
  ChipCounters a, b;
  a.v[kStatCycles] = 100;
  a.v[kStatClsCompute] = 50;
  a.v[kStatClsComm] = 20;
  a.v[kStatClsMemory] = 10;
  a.v[kStatClsIdle] = 20;
  a.v[kStatMxuMacs] = 800;
  b.v[kStatCycles] = 50;  // counted over half the run only: idle for the rest
  b.v[kStatClsCompute] = 50;
  const PodProfile p = make_profile({a, b}, 100, 1000, 16);
  EXPECT_DOUBLE_EQ(p.breakdown.compute, 100.0 / 200.0);
  EXPECT_DOUBLE_EQ(p.breakdown.communication, 20.0 / 200.0);
  EXPECT_DOUBLE_EQ(p.breakdown.memory, 10.0 / 200.0);
  EXPECT_DOUBLE_EQ(p.breakdown.idle, 70.0 / 200.0);
  EXPECT_DOUBLE_EQ(p.per_chip[1].breakdown.compute, 1.0);
  EXPECT_DOUBLE_EQ(p.mfu, 1000.0 / (2 * 16 * 100));
  EXPECT_DOUBLE_EQ(p.hardware_mac_utilization, 800.0 / (2 * 16 * 100));
  Report rep("t");
  add_profile(rep, p);
  ASSERT_NE(rep.find("mfu"), nullptr);
  ASSERT_NE(rep.find("breakdown.idle"), nullptr);
  const std::string j = rep.json().dump();
  EXPECT_NE(j.find("\"chips\""), std::string::npos);
  EXPECT_NE(j.find("\"mxu_macs\":800"), std::string::npos);
}

}  // namespace
}  // namespace tpu
