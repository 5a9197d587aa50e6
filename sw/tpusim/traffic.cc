#include "traffic.h"

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "ici_net.h"
#include "ici_traffic.h"
#include "cli_util.h"
#include "json.h"
#include "report.h"

namespace tpu {

const char* kTrafficUsage =
    "usage: tpusim traffic [options]\n"
    "  --topology X[xY[xZ]]  nodes per dimension (default 4x4)\n"
    "  --mesh                no wrap-around links (default: torus)\n"
    "  --pattern P           uniform|transpose|neighbor|tornado (default uniform)\n"
    "  --rate R              offered flits/node/cycle, 0 < R <= 1 (default 0.3)\n"
    "  --length L            packet flits: 1|4|mixed (default 1)\n"
    "  --cycles N            measured cycles after 1000 warm-up cycles (default 4000)\n"
    "  --link-latency C      cycles per link (default 1)\n"
    "  --seed S              traffic seed (default 1)\n"
    "  --json FILE           write the JSON report\n"
    "  --watchdog CYCLES     stop as hung (exit 3) when no flit enters or leaves the network\n"
    "                        for this many cycles (default 2000)\n";

int cmd_traffic(const std::vector<std::string>& args) {
  CliSpec spec;
  spec.valued = {"--topology", "--pattern", "--rate", "--length", "--cycles", "--link-latency",
                 "--seed", "--json", "--watchdog"};
  spec.flags = {"--mesh"};
  spec.out_paths = {"--json"};  // before the run
  spec.usage = kTrafficUsage;
  const Opts opt = parse_cli(args, spec);
  auto get = [&](const char* k, const char* d) { return tpu::get(opt, k, d); };

  IciTopology topo;
  {
    const std::string t = get("--topology", "4x4");
    std::array<unsigned, 3> k{1, 1, 1};
    std::size_t start = 0, dim = 0;
    while (true) {
      const std::size_t x = t.find('x', start);
      if (dim == 3) throw std::invalid_argument("--topology " + t + ": at most 3 dimensions");
      k[dim++] = static_cast<unsigned>(parse_uint("--topology", t.substr(start, x - start), 1, 8));
      if (x == std::string::npos) break;
      start = x + 1;
    }
    topo.k = k;
    const bool wrap = !opt.count("--mesh");
    topo.wrap = {wrap, wrap, wrap};
  }
  topo.link_latency =
      static_cast<unsigned>(parse_uint("--link-latency", get("--link-latency", "1"), 1, 1000));
  topo.validate();  // names the rule: a dimension over 8, a latency the build cannot delay ...

  IciTrafficConfig cfg;
  const std::string pattern = get("--pattern", "uniform");
  if (pattern == "uniform") cfg.pattern = IciPattern::kUniform;
  else if (pattern == "transpose") cfg.pattern = IciPattern::kTranspose;
  else if (pattern == "neighbor") cfg.pattern = IciPattern::kNeighbor;
  else if (pattern == "tornado") cfg.pattern = IciPattern::kTornado;
  else throw std::invalid_argument("--pattern " + pattern +
                                   ": must be uniform, transpose, neighbor or tornado");
  const std::string len = get("--length", "1");
  if (len == "1") cfg.length = IciLength::kOne;
  else if (len == "4") cfg.length = IciLength::kFour;
  else if (len == "mixed") cfg.length = IciLength::kMixed;
  else throw std::invalid_argument("--length " + len + ": must be 1, 4 or mixed");
  {
    const std::string r = get("--rate", "0.3");
    try {
      cfg.rate = parse_real("--rate", r, 0.0, 1.0);
    } catch (const std::invalid_argument&) {
      cfg.rate = 0;
    }
    if (!(cfg.rate > 0.0))
      throw std::invalid_argument("--rate " + r + ": must be a number in (0, 1]");
  }
  cfg.seed = static_cast<unsigned>(parse_uint("--seed", get("--seed", "1"), 0, 0x7fffffff));
  const uint64_t cycles = parse_uint("--cycles", get("--cycles", "4000"), 1, 100000000);
  const uint64_t watchdog = parse_uint("--watchdog", get("--watchdog", "2000"), 1, uint64_t{1} << 40);

  std::fprintf(stderr, "[tpusim] traffic: %s, %s, %s flits, offered %.3f, %llu cycles\n",
               topo.name().c_str(), pattern.c_str(), len.c_str(), cfg.rate,
               static_cast<unsigned long long>(cycles));
  IciNet net(topo);
  IciScoreboard sb(net);
  const IciRunStats st = ici_run(net, sb, cfg, 1000, cycles, 100000 + 10 * cycles, watchdog);
  const bool ok = st.completed && sb.errors().empty();

  Report rep("traffic on " + topo.name() + ": " + pattern + ", " + len + "-flit packets");
  rep.field("tool", "tpusim").field("command", "traffic").field("topology", topo.name());
  rep.field("pattern", pattern).field("length", len);
  rep.metric("link_latency", topo.link_latency, "cycles", "per link, each way");
  rep.metric("offered_rate", cfg.rate, "flits/node/cycle", "the injection rate asked");
  rep.metric("measured_cycles", st.cycles, "cycles", "the measurement window");
  rep.metric("offered", st.offered, "flits/node/cycle", "injected", true);
  rep.metric("accepted", st.accepted, "flits/node/cycle", "ejected", true);
  rep.metric("avg_latency", st.avg_latency, "cycles", "creation to ejection", true);
  rep.metric("avg_net_latency", st.avg_net_latency, "cycles", "injection to ejection", true);
  rep.metric("max_latency", st.max_latency, "cycles", "the slowest packet", true);
  rep.metric("packets", st.packets, "", "packets measured", true);
  rep.metric("delivered_checked", sb.checked(), "", "packets checked at delivery");
  rep.metric("sent", sb.sent(), "", "packets sent");
  rep.metric("verdict", ok ? "pass" : "fail", "", "every packet once, in order, intact", true);
  Json errs = Json::array();
  if (!st.error.empty()) errs.push_back(st.error);
  for (const auto& e : sb.errors()) errs.push_back(e);
  rep.field("errors", std::move(errs));
  std::fputs(rep.summary().c_str(), stdout);
  std::printf("  delivery check: %s (%llu of %llu packets delivered once, in order, intact)\n",
              ok ? "PASS" : "FAIL", static_cast<unsigned long long>(sb.checked()),
              static_cast<unsigned long long>(sb.sent()));
  if (!ok) {
    if (!st.error.empty()) std::printf("  %s\n", st.error.c_str());
    for (const auto& e : sb.errors()) std::printf("  %s\n", e.c_str());
  }
  std::fflush(stdout);  // the summary stays even if the report cannot be written
  if (opt.count("--json")) rep.write(opt.at("--json"));
  if (!st.completed && !st.error.empty()) return 3;  // the watchdog: a deadlock or livelock
  return ok ? 0 : 1;
}

}  // namespace tpu
