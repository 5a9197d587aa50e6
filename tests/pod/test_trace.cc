// The timeline and the counters (docs/profiling.md) on a 2x2 pod of 4x4 chips: a matmul on every
// chip (operands in through the host ports) and then an all-reduce of the results, with the
// trace on. The JSON that write_trace writes is parsed back: every chip a process, every unit a
// track, no two events of a track overlapping, and each unit's busy time on the timeline equal
// to the chip's RTL counter of it. The four class counters add up to the cycles; the breakdown
// adds up to 1. The phase tracks: one slice per phase span (a run of commands with one label),
// covering its command slices, properly nested per track; command slices named "label · OP".
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
#include <tuple>
#include <vector>

#include "chip_driver.h"
#include "json.h"
#include "pod.h"
#include "pod_driver.h"
#include "profile.h"
#include "tpu/bf16.h"
#include "trace.h"
#include "wave_check.h"

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
    ASSERT_TRUE(e.contains("args"));
    const Json& args = e.at("args");
    const std::string name =
        args.contains("op") ? args.at("op").get<std::string>() : e.at("name").get<std::string>();
    const uint64_t b = static_cast<uint64_t>(std::llround(e.at("ts").get<double>() * 1000.0));
    const uint64_t d = static_cast<uint64_t>(std::llround(e.at("dur").get<double>() * 1000.0));
    spans[{pid, tid}].push_back({b, b + d});  // phase tracks too: no overlap on any track
    if (e.at("cat").get<std::string>() == "phase") continue;
    names.insert(name);
    if (name == "ICI_SEND") sends.push_back({pid, e.at("args").at("dst_chip").get<std::string>()});
  }
  // Every chip a process named "chip N (x,y,z)", every unit a track.
  const std::vector<std::string> units = {"phase",      "sequencer",  "DMA",        "MXU weights",
                                          "MXU",        "VPU",        "ICI send 0", "ICI send 1",
                                          "ICI send 2", "ICI send 3", "ICI wait",   "host port"};
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

// Checks that the slices of one track nest properly: each either starts at or after the end of
// the enclosing one or lies within it (Perfetto's rule for a track of complete events).
void expect_nested(std::vector<Span> v, const std::string& what) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<Span> open;
  for (const Span& s : v) {
    EXPECT_LE(s.begin, s.end) << what;
    while (!open.empty() && open.back().end <= s.begin) open.pop_back();
    if (!open.empty()) {
      EXPECT_LE(s.end, open.back().end)
          << what << ": a slice [" << s.begin << ", " << s.end << ") crosses the end of ["
          << open.back().begin << ", " << open.back().end << ")";
    }
    open.push_back(s);
  }
}

// The phase track of a real run, parsed back from the file: every chip has a "phase" track; the
// phase slices are exactly the runs of commands (in issue order) that share a label, each from
// its first command's begin to the latest end among them, named by the label; the command
// slices are named "label · OP" (the opcode alone without a label), the opcode also in args.
TEST_F(PodTrace, PhaseTrackHasOneSlicePerPhaseSpan) {
  HostPort& h = *host_;
  TraceOptions on;
  on.enabled = true;
  h.set_trace(on);
  run_job(h);
  const Json doc = Json::parse(json_text(trace_json(h.take_trace(), h.info(), 2.0), -1));
  const double cycles_per_us = 2000.0;  // 2 GHz
  auto cyc = [&](double us) { return static_cast<uint64_t>(std::llround(us * cycles_per_us)); };
  struct Cmd {
    uint64_t issue;
    int64_t index;
    std::string label;
    uint64_t begin, end;
  };
  struct Phase {
    std::string label;
    uint64_t begin, end, commands;
    bool operator<(const Phase& o) const {
      return std::tie(label, begin, end, commands) < std::tie(o.label, o.begin, o.end, o.commands);
    }
  };
  std::map<std::pair<int, int>, std::string> thread;
  std::map<int, std::vector<Cmd>> cmds;
  std::map<int, std::vector<Phase>> phases;
  std::map<std::pair<int, int>, std::vector<Span>> tracks;
  std::set<std::string> labels;
  for (const Json& e : doc.at("traceEvents")) {
    const int pid = e.at("pid").get<int>(), tid = e.at("tid").get<int>();
    const Json& args = e.at("args");
    if (e.at("ph").get<std::string>() == "M") {
      if (e.at("name").get<std::string>() == "thread_name")
        thread[{pid, tid}] = args.at("name").get<std::string>();
      continue;
    }
    for (const char* key : {"name", "cat", "ts", "dur", "pid", "tid"})
      ASSERT_TRUE(e.contains(key)) << "an X event without " << key;
    const std::string name = e.at("name").get<std::string>();
    const uint64_t b = cyc(e.at("ts").get<double>());
    const uint64_t en = b + cyc(e.at("dur").get<double>());
    tracks[{pid, tid}].push_back({b, en});
    if (e.at("cat").get<std::string>() == "phase") {
      EXPECT_EQ(b, args.at("begin_cycle").get<uint64_t>());
      EXPECT_EQ(en, args.at("end_cycle").get<uint64_t>());
      phases[pid].push_back({name, b, en, args.at("commands").get<uint64_t>()});
      const std::string& tn = thread[{pid, tid}];
      EXPECT_EQ(tn.rfind("phase", 0), 0u) << "a phase slice on track " << tn;
      continue;
    }
    if (!args.contains("op")) continue;  // host copies
    const std::string op = args.at("op").get<std::string>();
    const std::string label = args.contains("label") ? args.at("label").get<std::string>() : "";
    EXPECT_EQ(name, label.empty() ? op : label + " \u00b7 " + op);
    if (!label.empty()) labels.insert(label);
    cmds[pid].push_back(
        {args.at("issue_cycle").get<uint64_t>(), args.at("index").get<int64_t>(), label, b, en});
  }
  EXPECT_TRUE(labels.count("matmul"));
  EXPECT_TRUE(labels.count("all_reduce (torus) | step 0"));
  for (const auto& [key, v] : tracks)
    expect_nested(v, "chip " + std::to_string(key.first) + " track " + thread[key]);
  for (int c = 0; c < h.num_chips(); ++c) {
    SCOPED_TRACE("chip " + std::to_string(c));
    EXPECT_EQ(thread[std::make_pair(c, 100)], "phase");
    std::vector<Cmd>& v = cmds[c];
    std::sort(v.begin(), v.end(), [](const Cmd& a, const Cmd& b) {
      return a.issue != b.issue ? a.issue < b.issue : a.index < b.index;
    });
    std::vector<Phase> want;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i].label.empty()) continue;
      if (i > 0 && v[i - 1].label == v[i].label) {
        want.back().begin = std::min(want.back().begin, v[i].begin);
        want.back().end = std::max(want.back().end, v[i].end);
        ++want.back().commands;
      } else {
        want.push_back({v[i].label, v[i].begin, v[i].end, 1});
      }
    }
    ASSERT_GT(want.size(), 2u);
    std::vector<Phase> got = phases[c];
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].label, want[i].label);
      EXPECT_EQ(got[i].begin, want[i].begin) << got[i].label;
      EXPECT_EQ(got[i].end, want[i].end) << got[i].label;
      EXPECT_EQ(got[i].commands, want[i].commands) << got[i].label;
    }
  }
}

// Phases that overlap in time go on further tracks ("phase 2", ...), never crossing on one; a
// label that comes back after another is a new span; commands without a label make none.
TEST(TracePhases, OverlappingSpansSplitIntoTracks) {
  auto cmd = [](int chip, int64_t idx, uint64_t b, uint64_t e, const std::string& label) {
    TraceEvent t;
    t.chip = chip;
    t.unit = TraceUnit::kDma;
    t.op = static_cast<unsigned>(ChipOp::kDma);
    t.index = idx;
    t.issue = t.begin = b;
    t.done = t.end = e;
    t.label = label;
    return t;
  };
  const std::vector<TraceEvent> ev = {
      cmd(0, 0, 0, 10, "A"), cmd(0, 1, 2, 30, "A"),  cmd(0, 2, 5, 8, "B"), cmd(0, 3, 12, 20, "B"),
      cmd(0, 4, 31, 40, ""), cmd(0, 5, 41, 50, "A"), cmd(1, 0, 3, 4, "C")};
  const std::vector<PhaseSpan> p = trace_phases(ev);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].label, "A");
  EXPECT_EQ(p[0].begin, 0u);
  EXPECT_EQ(p[0].end, 30u);
  EXPECT_EQ(p[0].commands, 2u);
  EXPECT_EQ(p[0].track, 0u);
  EXPECT_EQ(p[1].label, "B");
  EXPECT_EQ(p[1].begin, 5u);
  EXPECT_EQ(p[1].end, 20u);
  EXPECT_EQ(p[1].track, 1u);  // overlaps A: the next track
  EXPECT_EQ(p[2].label, "A");
  EXPECT_EQ(p[2].begin, 41u);
  EXPECT_EQ(p[2].track, 0u);  // A again after an unlabelled command: a new span
  EXPECT_EQ(p[3].chip, 1);
  EXPECT_EQ(p[3].track, 0u);
  EXPECT_EQ(trace_track_name(100), "phase");
  EXPECT_EQ(trace_track_name(101), "phase 2");
  EXPECT_EQ(trace_slice_name(ev[2]), "B \u00b7 DMA");
  EXPECT_EQ(trace_slice_name(ev[4]), "DMA");
  MachineInfo mi;
  mi.topo = Topology::mesh({2});
  mi.variant = "4x4";
  mi.shape = chip_shape("4x4");
  std::map<std::string, int> tracks;  // chip 0's track names
  const Json doc = trace_json(ev, mi);
  for (const Json& e : doc.at("traceEvents"))
    if (e.at("name").get<std::string>() == "thread_name" && e.at("pid").get<int>() == 0)
      ++tracks[e.at("args").at("name").get<std::string>()];
  EXPECT_EQ(tracks["phase"], 1);
  EXPECT_EQ(tracks["phase 2"], 1);
  EXPECT_EQ(tracks.count("phase 3"), 0u);
}

// The value of a signal at dump time `t`: its last change at or before t.
std::string value_at(const std::vector<std::pair<uint64_t, std::string>>& ch, uint64_t t) {
  std::string v;
  for (const auto& [when, val] : ch) {
    if (when > t) break;
    v = val;
  }
  return v;
}

// Waves and timeline on one clock (tb/common/wave_clock.h): a chip's dump, at 1.25 GHz, has a
// 1 ps timescale, its clock rising every 800 ps (falling half-way), and each command issues at
// cycle x 800 ps in the dump, the moment its slice starts in the trace of the same run.
TEST_F(PodTrace, WavesAreOnTheTracesClock) {
  ASSERT_TRUE(have_fst2vcd()) << "fst2vcd (gtkwave) is needed: scripts/deps.sh installs it";
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tpu_wave_clock_" + std::to_string(getpid())))
          .string();
  const double ghz = 1.25;
  const uint64_t period = 800;  // ps
  std::vector<TraceEvent> events;
  MachineInfo info;
  {
    PodParams p;
    p.topo = Topology::torus({2, 2});
    p.variant = "4x4";
    p.wave_chips = {1};
    p.wave_dir = dir;
    p.wave_clock_ghz = ghz;
    CppPodHost host(p);
    TraceOptions on;
    on.enabled = true;
    host.set_trace(on);
    run_job(host);
    events = host.take_trace();
    info = host.info();
  }
  const std::string top = "TOP.tpu_chip_sim_top.";
  const FstChanges d =
      fst_changes(dir + "/pod_chip1.fst", {top + "clk_i", top + "trc_issue_o", top + "trc_idx_o"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(d.timescale, "1ps");
  ASSERT_GT(d.times.size(), 4u);
  EXPECT_EQ(d.times[0], 0u);  // pod cycle 0, after the reset
  for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(d.times[i], period / 2 * (i + 1)) << i;
  const auto& clk = d.changes.at(top + "clk_i");
  ASSERT_GT(clk.size(), 100u);
  for (std::size_t i = 1; i < clk.size(); ++i)
    ASSERT_EQ(clk[i].first % period, clk[i].second == "1" ? 0u : period / 2)
        << "clk_i -> " << clk[i].second << " at " << clk[i].first << " ps";
  const auto& issue = d.changes.at(top + "trc_issue_o");
  const auto& idx = d.changes.at(top + "trc_idx_o");

  const Json doc = Json::parse(json_text(trace_json(events, info, ghz), -1));
  std::map<std::pair<int64_t, uint64_t>, double> ts_of;  // chip 1's (index, issue) -> ts (us)
  for (const Json& e : doc.at("traceEvents"))
    if (e.at("ph").get<std::string>() == "X" && e.at("pid").get<int>() == 1 &&
        e.at("args").contains("op") && e.at("args").at("op").get<std::string>() != "ICI_WAIT")
      ts_of[{e.at("args").at("index").get<int64_t>(),
             e.at("args").at("issue_cycle").get<uint64_t>()}] = e.at("ts").get<double>();
  int checked = 0;
  for (const TraceEvent& e : events) {
    if (e.chip != 1 || e.unit == TraceUnit::kHost || e.unit == TraceUnit::kIciWait) continue;
    // The command issues in pod cycle e.issue: from its rising edge at e.issue x period, the
    // trace port shows the issue pulse with the command's index.
    const uint64_t t = e.issue * period;
    ASSERT_EQ(value_at(issue, t), "1") << "index " << e.index << " at " << t << " ps";
    ASSERT_EQ(std::stoull(value_at(idx, t), nullptr, 2), static_cast<uint64_t>(e.index));
    const bool before =
        value_at(issue, t - 1) == "1" &&
        std::stoull(value_at(idx, t - 1), nullptr, 2) == static_cast<uint64_t>(e.index);
    ASSERT_FALSE(before) << "index " << e.index << " issues before " << t << " ps";
    if (e.begin == e.issue) {  // the slice starts at its issue: the same moment in both
      const std::pair<int64_t, uint64_t> key{e.index, e.issue};
      ASSERT_TRUE(ts_of.count(key));
      EXPECT_NEAR(ts_of[key] * 1e6, static_cast<double>(t), 1e-3) << "index " << e.index;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
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
