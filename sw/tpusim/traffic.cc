#include "traffic.h"

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "ici_net.h"
#include "ici_traffic.h"
#include "check_port.h"
#include "cli_util.h"
#include "json.h"
#include "report.h"

namespace tpu {

namespace {

// The options of `tpusim traffic`.
struct TrafficArgs {
  std::string topology = "4x4", pattern = "uniform", length = "1", json;
  bool mesh = false, twist = false, check = false;
  double rate = 0.3;
  uint64_t cycles = 4000, watchdog = 2000;
  unsigned link_latency = 1;
  unsigned local_ports = 1;
  uint64_t seed = 1;
};

// "4x4" -> {4, 4, 1}; std::invalid_argument naming the rule.
std::array<unsigned, 3> parse_topology(const std::string& t) {
  std::vector<std::string> dims;
  std::size_t start = 0;
  for (std::size_t x; (x = t.find('x', start)) != std::string::npos; start = x + 1)
    dims.push_back(t.substr(start, x - start));
  dims.push_back(t.substr(start));
  if (dims.size() > 3) throw std::invalid_argument(t + ": at most 3 dimensions");
  const CLI::Validator dim = cli::uint_in(1, kIciMaxK);
  std::array<unsigned, 3> k{1, 1, 1};
  for (std::size_t d = 0; d < dims.size(); ++d) {
    const std::string e = dim(dims[d]);
    if (!e.empty()) throw std::invalid_argument(t + ": " + e);
    k[d] = static_cast<unsigned>(std::stoul(dims[d]));
  }
  return k;
}

int run_traffic(const TrafficArgs& a) {
  IciTopology topo;
  topo.k = parse_topology(a.topology);
  const bool wrap = !a.mesh;
  topo.wrap = {wrap, wrap, wrap};
  topo.twist = a.twist;
  topo.local_ports = a.local_ports;
  topo.link_latency = a.link_latency;
  topo.validate();  // names the rule: a dimension over 8, a latency the build cannot delay ...


  IciTrafficConfig cfg;
  const std::string& pattern = a.pattern;
  if (pattern == "uniform") cfg.pattern = IciPattern::kUniform;
  else if (pattern == "transpose") cfg.pattern = IciPattern::kTranspose;
  else if (pattern == "neighbor") cfg.pattern = IciPattern::kNeighbor;
  else cfg.pattern = IciPattern::kTornado;
  const std::string& len = a.length;
  if (len == "1") cfg.length = IciLength::kOne;
  else if (len == "4") cfg.length = IciLength::kFour;
  else cfg.length = IciLength::kMixed;
  cfg.rate = a.rate * a.local_ports;
  cfg.seed = a.seed;
  const uint64_t cycles = a.cycles;
  // 0 turns the watchdog off, as on the pod commands (the drain stays bounded).
  const uint64_t watchdog = a.watchdog == 0 ? ~uint64_t{0} : a.watchdog;

  std::fprintf(stderr, "[tpusim] traffic: %s, %s, %s flits, offered %.3f, %llu cycles\n",
               topo.name().c_str(), pattern.c_str(), len.c_str(), cfg.rate,
               static_cast<unsigned long long>(cycles));
  IciNet net(topo);
  if (a.check) throw CheckStop("after the network was built, before its first cycle");
  IciScoreboard sb(net);
  const IciRunStats st = ici_run(net, sb, cfg, 1000, cycles, 100000 + 10 * cycles, watchdog);
  const bool ok = st.completed && sb.errors().empty();

  Report rep("traffic on " + topo.name() + ": " + pattern + ", " + len + "-flit packets");
  rep.field("tool", "tpusim").field("command", "traffic").field("topology", topo.name());
  rep.field("pattern", pattern).field("length", len);
  rep.metric("link_latency", topo.link_latency, "cycles", "per link, each way");
  rep.field("twist", topo.twist);
  rep.metric("local_ports", topo.local_ports, "", "local ports per router");
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
  if (!a.json.empty()) rep.write(a.json);
  if (!st.completed && !st.error.empty()) return 3;  // the watchdog: a deadlock or livelock
  return ok ? 0 : 1;
}

}  // namespace

std::function<int()> traffic_command(CLI::App& tool) {
  auto a = std::make_shared<TrafficArgs>();
  CLI::App* cmd = tool.add_subcommand("traffic", "synthetic traffic on an ICI router network");
  const CLI::Validator a_topology(
      [](std::string& v) {
        try {
          parse_topology(v);
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "");
  cmd->add_option("--topology", a->topology, "nodes per dimension")
      ->type_name("X[xY[xZ]]")
      ->check(a_topology)
      ->capture_default_str();
  cmd->add_flag("--mesh", a->mesh, "no wrap-around links (default: torus)");
  cmd->add_flag("--twist", a->twist,
                "twisted torus (docs/topology.md): k x k x 2k, k x 2k x 2k or k x 2k only");
  cmd->add_option("--pattern", a->pattern, "the destinations")
      ->type_name("uniform|transpose|neighbor|tornado")
      ->check(CLI::IsMember({"uniform", "transpose", "neighbor", "tornado"}))
      ->capture_default_str();
  cmd->add_option("--rate", a->rate,
                  "offered flits/node/cycle per local port, 0 < R <= 1 (a node offers\n"
                  "R x --local-ports)")
      ->type_name("R")
      ->check(cli::real_in(0, 1, true))
      ->capture_default_str();
  cmd->add_option("--length", a->length, "packet flits")
      ->type_name("1|4|mixed")
      ->check(CLI::IsMember({"1", "4", "mixed"}))
      ->capture_default_str();
  cmd->add_option("--cycles", a->cycles, "measured cycles after 1000 warm-up cycles")
      ->type_name("N")
      ->check(cli::uint_in(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--link-latency", a->link_latency,
                  "cycles per link (the router's delay line holds up to TPU_ICI_MAX_LAT)")
      ->type_name("C")
      ->check(CLI::Validator(
          [](std::string& v) {
            const std::string e = cli::uint_in(1, kIciMaxLat)(v);
            return e.empty() ? e
                             : e + " (the routers' delay lines hold 1 to " +
                                   std::to_string(kIciMaxLat) +
                                   " cycles: rebuild with -DTPU_ICI_MAX_LAT=N for longer links)";
          },
          ""))
      ->capture_default_str();
  cmd->add_option("--local-ports", a->local_ports,
                  "local ports per router: 1, or 2 as on the chip (a packet injects on port\n"
                  "x + y + z of its destination mod 2): the network, not injection, limits")
      ->type_name("1|2")
      ->check(CLI::IsMember({1u, 2u}))
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "traffic seed")
      ->type_name("S")
      ->check(in_range(kSeedRange))
      ->capture_default_str();
  cmd->add_option("--json", a->json, "write the JSON report")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_option("--watchdog", a->watchdog,
                  "stop as hung (exit 3) when no flit enters or leaves the network\n"
                  "for this many cycles (0: off)")
      ->type_name("CYCLES")
      ->check(in_range(kWatchdogRange))
      ->capture_default_str();
  cmd->add_flag("--check", a->check,
                "check the line and the topology, build the network, then stop before\n"
                "the first simulated cycle: exit 0, no files written");
  cmd->footer("exit codes: 0 every packet delivered once, in order, intact; 1 not; 2 bad input\n"
              "or output; 3 the watchdog stopped a deadlock");
  return [a] { return run_traffic(*a); };
}

}  // namespace tpu
