// bench_ici: latency and throughput of the ICI router network (tb/ici), as JSON on stdout (a
// short human summary on stderr).
//
//   bench_ici [--cycles N] [--waves FILE.fst]
//
// For each topology (4x4 torus; 4x4x4 torus and 8x8 torus when the model was built with
// TPU_ICI_NODES >= 64) and packet length (1 and 4 flits), uniform random traffic:
//   zero_load_latency  mean packet latency (tail ejected - packet created) at 0.02 flits/node/
//                      cycle, next to the analytic zero-load value: average minimal hops H,
//                      H * (1 + L) + 2 cycles for the head, + (flits - 1) for the tail
//   saturation         accepted throughput (flits ejected/node/cycle) with every source always
//                      backlogged (offered 1.0), against the bound min(1, 8/k): on a k-ary
//                      n-cube torus with bidirectional links, uniform traffic loads the busiest
//                      channel with k/8 flits per flit/node/cycle injected (the bisection
//                      argument, Dally & Towles ch. 3), so channels allow 8/k; injection and
//                      ejection allow 1 flit/node/cycle; for k = 4 the bound is 1 (ejection)
//   sweep              accepted throughput and latency at offered 0.1 .. 0.9
// Each point: a fresh network, 1000 warm-up cycles, N measured cycles (default 4000), then a
// drain; runs that do not drain are reported with their error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "ici_net.h"
#include "ici_traffic.h"

namespace tpu {
namespace {

struct Options {
  uint64_t cycles = 4000;
  std::string waves;
};

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

std::string run_json(const IciRunStats& st) {
  std::ostringstream o;
  o << "{\"offered\": " << st.offered << ", \"accepted\": " << st.accepted
    << ", \"avg_latency\": " << st.avg_latency << ", \"avg_net_latency\": " << st.avg_net_latency
    << ", \"max_latency\": " << st.max_latency << ", \"packets\": " << st.packets
    << ", \"completed\": " << (st.completed ? "true" : "false")
    << (st.error.empty() ? "" : ", \"error\": \"" + st.error + "\"") << "}";
  return o.str();
}

IciRunStats point(const IciTopology& t, IciLength len, double rate, const Options& opt,
                  uint64_t* asserts, const std::string& waves = "") {
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
  return st;
}

int main_impl(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cycles") && i + 1 < argc) {
      opt.cycles = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--waves") && i + 1 < argc) {
      opt.waves = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_ici [--cycles N] [--waves FILE.fst]\n");
      return 2;
    }
  }
  std::vector<IciTopology> topos = {ici_2d(4, 4)};
  if (kIciNodes >= 64) {
    topos.push_back(ici_3d(4, 4, 4));
    topos.push_back(ici_2d(8, 8));
  }
  uint64_t asserts = 0;
  std::ostringstream js;
  js << "{\n  \"bench\": \"ici\",\n  \"model\": {\"routers\": " << kIciNodes
     << ", \"vcs\": " << kIciNumVc << ", \"depth\": " << kIciDepth
     << ", \"link_latency\": 1},\n  \"measure_cycles\": " << opt.cycles << ",\n  \"runs\": [";
  bool first = true;
  for (const auto& t : topos) {
    const unsigned k = t.k[0];
    const double bound = std::min(1.0, 8.0 / k);
    const double hops = avg_hops(t);
    for (IciLength len : {IciLength::kOne, IciLength::kFour}) {
      const unsigned flits = len == IciLength::kOne ? 1 : 4;
      const std::string waves = (first && !opt.waves.empty()) ? opt.waves : "";
      const IciRunStats zl = point(t, len, 0.02, opt, &asserts, waves);
      const IciRunStats sat = point(t, len, 1.0, opt, &asserts);
      std::vector<std::pair<double, IciRunStats>> sweep;
      for (double r : {0.1, 0.3, 0.5, 0.7, 0.8, 0.9})
        sweep.emplace_back(r, point(t, len, r, opt, &asserts));
      const double zl_model = hops * 2 + 2 + (flits - 1);
      js << (first ? "" : ",") << "\n    {\"topology\": \"" << t.name() << "\", \"pattern\": "
         << "\"uniform\", \"packet_flits\": " << flits << ",\n     \"avg_hops\": " << hops
         << ", \"zero_load_latency\": " << zl.avg_latency
         << ", \"zero_load_latency_model\": " << zl_model
         << ",\n     \"saturation_throughput\": " << sat.accepted
         << ", \"channel_load_bound\": " << 8.0 / k << ", \"bound\": " << bound
         << ", \"fraction_of_bound\": " << sat.accepted / bound
         << ",\n     \"zero_load\": " << run_json(zl) << ",\n     \"saturation\": " << run_json(sat)
         << ",\n     \"sweep\": [";
      for (size_t i = 0; i < sweep.size(); ++i)
        js << (i ? ", " : "") << "\n       " << run_json(sweep[i].second);
      js << "]}";
      std::fprintf(stderr,
                   "%-12s %u-flit: zero-load %.1f cycles (model %.1f), saturation %.3f "
                   "flits/node/cycle (bound %.2f, %.0f%%)\n",
                   t.name().c_str(), flits, zl.avg_latency, zl_model, sat.accepted, bound,
                   100.0 * sat.accepted / bound);
      first = false;
    }
  }
  js << "\n  ],\n  \"assert_failures\": " << asserts << "\n}\n";
  std::fputs(js.str().c_str(), stdout);
  return asserts ? 1 : 0;
}

}  // namespace
}  // namespace tpu

int main(int argc, char** argv) { return tpu::main_impl(argc, argv); }
