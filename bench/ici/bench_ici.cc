// bench_ici: latency and throughput of the ICI router network (tb/ici), as a JSON array on stdout
// holding one report (sw/common/report.h) whose "runs" are the reports of each topology and packet
// length; each run's summary, then the bench's, on stderr.
//
//   bench_ici [--topology 4x4,4x4x4,8x8] [--cycles N] [--waves FILE.fst]
//   bench_ici --twist [--topology 4x4x8,4x8x8] [--cycles N]
//
// For each topology (default: the 4x4, 4x4x4 and 8x8 tori; any XxYxZ torus of up to 16 per
// dimension) and packet length (1 and 4 flits), uniform random traffic:
//   zero_load_latency  mean packet latency (tail ejected - packet created) at 0.02 flits/node/
//                      cycle, next to the analytic zero-load value: average minimal hops H,
//                      H * (1 + L) + 2 cycles for the head, + (flits - 1) for the tail
//   saturation         accepted throughput (flits ejected/node/cycle) with every source always
//                      backlogged (offered 1.0), against the bound min(1, 8/k): on a k-ary
//                      n-cube torus with bidirectional links, uniform traffic loads the busiest
//                      channel with k/8 flits per flit/node/cycle injected (the bisection
//                      argument, Dally & Towles ch. 3), so channels allow 8/k; injection and
//                      ejection allow 1 flit/node/cycle; for k = 4 the bound is 1 (ejection),
//                      for k = 8 it is 1 as well (channels exactly at 1)
//   sweep              accepted throughput and latency at offered 0.1 .. 0.9
//   sim                simulated cycles of all those runs, their wall time, cycles per second
// Each point: a fresh network, 1000 warm-up cycles, N measured cycles (default 4000), then a
// drain; runs that do not drain are reported with their error. --waves dumps the first run (the
// zero-load point of the first topology, 1-flit packets): every router, one scope per node.
//
// --twist (docs/topology.md): each shape (k x k x 2k, k x 2k x 2k) plain and twisted, with two
// local ports per router (as the chip) so that the network, not injection, is the limit:
//   saturation         uniform 4-flit packets, every source backlogged (offered 2 flits/node/
//                      cycle), accepted flits/node/cycle
//   all_to_all         every node sends one 4-flit packet to every other node, each in its own
//                      random order, all queued at cycle 0: flits/node/cycle until the last is in
//   bound              tpu::torus_uniform_bound: uniform traffic spread evenly over every
//                      shortest path (the ideal a minimal routing can reach), with the bisection
// and the twisted/plain ratios of each (the TPU v4 paper: 1.63x on 4x4x8, 1.31x on 4x8x8).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_main.h"
#include "ici_net.h"
#include "ici_traffic.h"
#include "json.h"
#include "report.h"
#include "tpu/twisted_torus.h"

namespace tpu {
namespace {

struct Options {
  uint64_t cycles = 4000;
  std::string waves;
  std::vector<IciTopology> topos;
  bool twist = false;
};

// "4x4x4" -> a torus; std::invalid_argument naming the item and the rule.
IciTopology parse_torus(const std::string& item) {
  std::array<unsigned, 3> k{1, 1, 1};
  unsigned dims = 0;
  std::stringstream is(item);
  std::string num;
  while (std::getline(is, num, 'x')) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(num.c_str(), &end, 10);
    if (dims == 3 || num.empty() || *end != '\0' || v < 1 || v > kIciMaxK)
      throw std::invalid_argument(item + ": want X[xY[xZ]], each 1.." + std::to_string(kIciMaxK) +
                                  ", at most 3 dimensions");
    k[dims++] = static_cast<unsigned>(v);
  }
  if (dims == 0 || item.back() == 'x')
    throw std::invalid_argument(item + ": want X[xY[xZ]], each 1.." + std::to_string(kIciMaxK));
  return ici_3d(k[0], k[1], k[2]);
}

double avg_hops(const IciTopology& t) {
  double sum = 0;
  unsigned pairs = 0;
  for (unsigned s = 0; s < t.nodes(); ++s) {
    for (unsigned d = 0; d < t.nodes(); ++d) {
      if (s == d) continue;
      const auto a = t.coord(s), b = t.coord(d);
      for (unsigned k = 0; k < 3; ++k) {
        const unsigned f = (b[k] + t.k[k] - a[k]) % t.k[k];
        sum += t.wrap[k] ? std::min(f, t.k[k] - f) : (a[k] > b[k] ? a[k] - b[k] : b[k] - a[k]);
      }
      ++pairs;
    }
  }
  return sum / pairs;
}

// One run's figures into `g` (zero_load, saturation, a point of the sweep).
void add_run(ReportGroup& g, const IciRunStats& st) {
  g.metric("offered", st.offered, "flits/node/cycle", "created in the measured window");
  g.metric("accepted", st.accepted, "flits/node/cycle", "ejected in the measured window");
  g.metric("avg_latency", st.avg_latency, "cycles",
           "mean packet latency, tail ejected - packet created");
  g.metric("avg_net_latency", st.avg_net_latency, "cycles", "mean latency in the network");
  g.metric("max_latency", st.max_latency, "cycles", "worst packet latency");
  g.metric("packets", st.packets, "", "packets created in the measured window");
  g.metric("completed", st.completed, "", "everything delivered and the network empty at the end");
  if (!st.error.empty()) g.field("error", st.error);
}

Json run_json(const IciRunStats& st) {
  ReportGroup g("run");
  add_run(g, st);
  return g.json();
}

// Simulated cycles and their wall time, over all runs of one topology.
struct SimSpeed {
  uint64_t cycles = 0;
  double seconds = 0;
};

IciRunStats point(const IciTopology& t, IciLength len, double rate, const Options& opt,
                  uint64_t* asserts, SimSpeed* speed, const std::string& waves = "") {
  const auto t0 = std::chrono::steady_clock::now();
  IciNet net(t, waves);
  IciScoreboard sb(net);
  IciTrafficConfig cfg;
  cfg.pattern = IciPattern::kUniform;
  cfg.length = len;
  cfg.rate = rate;
  cfg.seed = 42;
  IciRunStats st = ici_run(net, sb, cfg, 1000, opt.cycles, 50000);
  if (!sb.errors().empty()) st.error = "scoreboard: " + sb.errors().front();
  *asserts += net.assert_failures();
  speed->cycles += net.cycle();
  speed->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

// Every node sends one `flits`-flit packet to every other node, in a random order of its own,
// all queued at once; flits/node/cycle from the start until the last is delivered (0: it did not
// drain; *error says why). *busiest: the most flits any link carried (the routers' statistics),
// so (n - 1) * flits / *busiest is the route's own bound for uniform traffic.
double all_to_all(const IciTopology& t, unsigned flits, uint64_t* asserts, std::string* error,
                  uint64_t* busiest) {
  IciNet net(t);
  IciScoreboard sb(net);
  const unsigned n = t.nodes();
  std::mt19937_64 rng(7);
  for (unsigned s = 0; s < n; ++s) {
    std::vector<unsigned> dst;
    for (unsigned d = 0; d < n; ++d)
      if (d != s) dst.push_back(d);
    std::shuffle(dst.begin(), dst.end(), rng);
    for (unsigned d : dst) sb.send(s, d, flits);
  }
  const uint64_t start = net.cycle();
  const bool ok = net.drain(100000000, 5000);
  *asserts += net.assert_failures();
  *busiest = 0;
  for (unsigned nd = 0; nd < n; ++nd)
    for (unsigned p = 1; p < kIciPorts; ++p) {
      uint64_t f = 0;
      for (unsigned vc = 0; vc < kIciNumVc; ++vc)
        f += net.stat(nd, static_cast<IciPort>(p), vc, IciStat::kFlitsOut);
      *busiest = std::max(*busiest, f);
    }
  if (!ok || !sb.errors().empty() || sb.outstanding() != 0) {
    *error = !sb.errors().empty() ? sb.errors().front() : "all-to-all did not drain";
    return 0;
  }
  return double(n - 1) * flits / double(net.cycle() - start);
}

// One shape plain and twisted, side by side.
Json twist_run(const IciTopology& shape, const Options& opt, uint64_t* asserts) {
  Report rep(shape.name() + ": twisted against plain");
  rep.field("topology", shape.name());
  double sat[2] = {0, 0}, a2a[2] = {0, 0}, bound[2] = {0, 0}, rbound[2] = {0, 0};
  for (int tw = 0; tw < 2; ++tw) {
    IciTopology t = shape;
    t.twist = tw == 1;
    t.local_ports = 2;
    const TorusShape ts{{static_cast<int>(t.k[0]), static_cast<int>(t.k[1]),
                         static_cast<int>(t.k[2])},
                        t.twist_bits()};
    const TorusBound b = torus_uniform_bound(ts);
    SimSpeed speed;
    IciRunStats st;
    {
      const auto t0 = std::chrono::steady_clock::now();
      IciNet net(t);
      IciScoreboard sb(net);
      IciTrafficConfig cfg;
      cfg.length = IciLength::kFour;
      cfg.rate = 2.0;  // two local ports: every source always backlogged
      cfg.seed = 42;
      st = ici_run(net, sb, cfg, 1000, opt.cycles, 200000);
      if (!sb.errors().empty()) st.error = "scoreboard: " + sb.errors().front();
      *asserts += net.assert_failures();
      speed.cycles = net.cycle();
      speed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::string a2a_error;
    uint64_t busiest = 0;
    const double a = all_to_all(t, 4, asserts, &a2a_error, &busiest);
    const double route_bound = busiest ? double(t.nodes() - 1) * 4 / double(busiest) : 0.0;
    ReportGroup& g = rep.group(tw ? "twisted" : "plain");
    g.metric("avg_hops", b.avg_hops, "hops", "mean shortest distance");
    g.metric("diameter", b.diameter, "hops", "the largest shortest distance");
    g.metric("bisection_links", b.bisection_links, "links",
             "links each way across the fewest-link halving plane");
    g.metric("bound", b.bound, "flits/node/cycle",
             "uniform traffic spread evenly over every shortest path", true);
    g.metric("balanced_bound", b.balanced, "flits/node/cycle",
             "links per node / avg_hops: every link equally loaded");
    g.metric("saturation_throughput", st.accepted, "flits/node/cycle",
             "uniform 4-flit packets, every source backlogged", true);
    g.metric("saturation_fraction_of_bound", st.accepted / b.bound, "fraction", "", true);
    g.metric("all_to_all_throughput", a, "flits/node/cycle",
             "one 4-flit packet to every other node, all at once", true);
    g.metric("all_to_all_fraction_of_bound", a / b.bound, "fraction", "", true);
    g.metric("busiest_link_flits", busiest, "flits", "the most any link carried in the all-to-all");
    g.metric("route_bound", route_bound, "flits/node/cycle",
             "(n - 1) x 4 / busiest_link_flits: the deterministic route's own bound", true);
    g.metric("all_to_all_fraction_of_route_bound", route_bound > 0 ? a / route_bound : 0.0,
             "fraction", "", true);
    g.metric("completed", st.completed, "", "the saturation run drained");
    g.metric("sim_cycles_per_s", speed.seconds > 0 ? double(speed.cycles) / speed.seconds : 0.0,
             "cycles/s", "simulation speed of the saturation run");
    if (!st.error.empty()) g.field("error", st.error);
    if (!a2a_error.empty()) g.field("all_to_all_error", a2a_error);
    sat[tw] = st.accepted;
    a2a[tw] = a;
    bound[tw] = b.bound;
    rbound[tw] = route_bound;
  }
  const bool k2k = shape.k[1] == shape.k[0];
  ReportGroup& r = rep.group("ratio");
  r.metric("saturation", sat[0] > 0 ? sat[1] / sat[0] : 0.0, "x", "twisted / plain", true);
  r.metric("all_to_all", a2a[0] > 0 ? a2a[1] / a2a[0] : 0.0, "x", "twisted / plain", true);
  r.metric("bound", bound[1] / bound[0], "x", "twisted / plain", true);
  r.metric("route_bound", rbound[0] > 0 ? rbound[1] / rbound[0] : 0.0, "x", "twisted / plain",
           true);
  r.metric("paper_all_to_all", k2k ? 1.63 : 1.31, "x",
           "TPU v4 paper (ISCA 2023), 4x4x8 and 4x8x8");
  std::fputs(rep.summary().c_str(), stderr);
  return rep.json();
}

int run_twist(const Options& opt) {
  uint64_t asserts = 0;
  Report out("bench_ici --twist: twisted against plain tori");
  out.field("bench", "ici_twist");
  out.metric("measure_cycles", opt.cycles, "cycles", "measured window of every saturation run");
  Json runs = Json::array();
  for (const auto& t : opt.topos) runs.push_back(twist_run(t, opt, &asserts));
  out.field("runs", std::move(runs));
  out.metric("assert_failures", asserts, "", "RTL assertion failures over every run", true);
  std::fputs(out.summary().c_str(), stderr);
  std::fputs((json_text(Json::array({out.json()})) + "\n").c_str(), stdout);
  return asserts ? 1 : 0;
}

int run(const Options& opt) {
  uint64_t asserts = 0;
  Report out("bench_ici: uniform random traffic");
  out.field("bench", "ici");
  out.group("model")
      .metric("vcs", kIciNumVc, "", "virtual channels per port")
      .metric("depth", kIciDepth, "flits", "buffer depth per virtual channel")
      .metric("link_latency", 1, "cycles", "one hop on a link");
  out.metric("measure_cycles", opt.cycles, "cycles", "measured window of every point");
  Json runs = Json::array();
  bool first = true;
  for (const auto& t : opt.topos) {
    const unsigned k = std::max({t.k[0], t.k[1], t.k[2]});  // the busiest dimension
    const double bound = std::min(1.0, 8.0 / k);
    const double hops = avg_hops(t);
    for (IciLength len : {IciLength::kOne, IciLength::kFour}) {
      const unsigned flits = len == IciLength::kOne ? 1 : 4;
      const std::string waves = (first && !opt.waves.empty()) ? opt.waves : "";
      SimSpeed speed;
      const IciRunStats zl = point(t, len, 0.02, opt, &asserts, &speed, waves);
      const IciRunStats sat = point(t, len, 1.0, opt, &asserts, &speed);
      std::vector<std::pair<double, IciRunStats>> sweep;
      for (double r : {0.1, 0.3, 0.5, 0.7, 0.8, 0.9})
        sweep.emplace_back(r, point(t, len, r, opt, &asserts, &speed));
      const double zl_model = hops * 2 + 2 + (flits - 1);
      const double cps = speed.seconds > 0 ? double(speed.cycles) / speed.seconds : 0;
      Report rep(t.name() + " " + std::to_string(flits) + "-flit, uniform");
      rep.field("topology", t.name());
      rep.field("pattern", "uniform");
      rep.metric("packet_flits", flits, "flits", "packet length");
      rep.metric("avg_hops", hops, "hops", "average minimal hops over all pairs");
      rep.metric("zero_load_latency", zl.avg_latency, "cycles",
                 "mean packet latency at 0.02 flits/node/cycle", true);
      rep.metric("zero_load_latency_model", zl_model, "cycles",
                 "analytic: avg_hops * 2 + 2 + (flits - 1)", true);
      rep.metric("saturation_throughput", sat.accepted, "flits/node/cycle",
                 "accepted with every source backlogged (offered 1.0)", true);
      rep.metric("channel_load_bound", 8.0 / k, "flits/node/cycle",
                 "8/k: uniform traffic on the busiest channel of a k-ary torus");
      rep.metric("bound", bound, "flits/node/cycle", "min(1, 8/k): ejection or channel load", true);
      rep.metric(report_key::kFractionOfBound, sat.accepted / bound, "fraction",
                 "saturation_throughput / bound", true);
      add_run(rep.group("zero_load"), zl);
      add_run(rep.group("saturation"), sat);
      Json sw = Json::array();
      for (const auto& p : sweep) sw.push_back(run_json(p.second));
      rep.field("sweep", std::move(sw));
      rep.group("sim")
          .metric("cycles", speed.cycles, "cycles", "simulated cycles of all the runs above")
          .metric("seconds", speed.seconds, "s", "their wall time")
          .metric("cycles_per_s", cps, "cycles/s", "simulation speed", true);
      std::fputs(rep.summary().c_str(), stderr);
      runs.push_back(rep.json());
      first = false;
    }
  }
  out.field("runs", std::move(runs));
  out.metric("assert_failures", asserts, "", "RTL assertion failures over every run", true);
  std::fputs(out.summary().c_str(), stderr);
  std::fputs((json_text(Json::array({out.json()})) + "\n").c_str(), stdout);
  return asserts ? 1 : 0;
}

}  // namespace
}  // namespace tpu

int main(int argc, char** argv) {
  CLI::App app("latency and throughput of the ICI router network under uniform random traffic;\n"
               "a JSON array on stdout",
               "bench_ici");
  tpu::Options opt;
  std::string topos = "4x4,4x4x4,8x8";
  const CLI::Validator a_torus(
      [](std::string& v) {
        try {
          tpu::parse_torus(v);
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "");
  app.add_option("--topology", topos, "tori, comma-separated, each X[xY[xZ]] of up to " +
                                          std::to_string(tpu::kIciMaxK) + " per dimension")
      ->type_name("LIST")
      ->check(tpu::cli::list_of(a_torus))
      ->capture_default_str();
  app.add_option("--cycles", opt.cycles, "measured cycles of every point")
      ->type_name("N")
      ->check(tpu::cli::uint_in(1, 100000000))
      ->capture_default_str();
  app.add_flag("--twist", opt.twist,
               "twisted against plain tori (default shapes 4x4x8,4x8x8; docs/topology.md)");
  app.add_option("--waves", opt.waves,
                 "dump the first run to an FST file: every router, one scope per node")
      ->type_name("FILE.fst")
      ->check(tpu::cli::output_path());
  return tpu::bench_cli(app, argc, argv, [&] {
    if (opt.twist && app.count("--topology") == 0) topos = "4x4x8,4x8x8";
    for (const std::string& t : tpu::cli::split_list(topos)) {
      opt.topos.push_back(tpu::parse_torus(t));
      if (opt.twist) {
        tpu::IciTopology tw = opt.topos.back();
        tw.twist = true;
        tw.validate();  // a shape that cannot be twisted: the rule
      }
    }
    return opt.twist ? tpu::run_twist(opt) : tpu::run(opt);
  });
}
