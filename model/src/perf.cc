#include "tpu/perf.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

std::string num(double v) {
  std::string s = std::to_string(v);  // fixed, 6 decimals: trim the zeros for the message
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void need_positive(const char* fn, const char* param, uint64_t v) {
  if (v == 0) bad(std::string(fn) + ": " + param + " = 0; must be >= 1");
}

void need_positive(const char* fn, const char* param, double v) {
  if (!(v > 0) || !std::isfinite(v)) {
    bad(std::string(fn) + ": " + param + " = " + num(v) + "; must be finite and > 0");
  }
}

void need_non_negative(const char* fn, const char* param, double v) {
  if (!(v >= 0) || !std::isfinite(v)) {
    bad(std::string(fn) + ": " + param + " = " + num(v) + "; must be finite and >= 0");
  }
}

void need_chips(const char* fn, int chips) {
  if (chips < 1) bad(std::string(fn) + ": chips = " + std::to_string(chips) + "; must be >= 1");
}

uint64_t mul(const char* fn, const char* what, uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) bad(std::string(fn) + ": " + what + " overflows 64 bits");
  return r;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

}  // namespace

uint64_t matmul_tiles(uint64_t k, uint64_t n, uint64_t rows, uint64_t cols) {
  need_positive("matmul_tiles", "k", k);
  need_positive("matmul_tiles", "n", n);
  need_positive("matmul_tiles", "rows", rows);
  need_positive("matmul_tiles", "cols", cols);
  return mul("matmul_tiles", "ceil(k/rows) * ceil(n/cols)", ceil_div(k, rows), ceil_div(n, cols));
}

uint64_t matmul_ideal_cycles(uint64_t m, uint64_t k, uint64_t n, uint64_t rows, uint64_t cols) {
  need_positive("matmul_ideal_cycles", "m", m);
  return mul("matmul_ideal_cycles", "m * tiles", m, matmul_tiles(k, n, rows, cols));
}

uint64_t matmul_useful_macs(uint64_t m, uint64_t k, uint64_t n) {
  need_positive("matmul_useful_macs", "m", m);
  need_positive("matmul_useful_macs", "k", k);
  need_positive("matmul_useful_macs", "n", n);
  return mul("matmul_useful_macs", "m * k * n", mul("matmul_useful_macs", "m * k * n", m, k), n);
}

uint64_t peak_macs_per_cycle(uint64_t rows, uint64_t cols) {
  need_positive("peak_macs_per_cycle", "rows", rows);
  need_positive("peak_macs_per_cycle", "cols", cols);
  return mul("peak_macs_per_cycle", "rows * cols", rows, cols);
}

double hbm_cycles(double bytes, double hbm_bytes_per_cycle) {
  need_non_negative("hbm_cycles", "bytes", bytes);
  need_positive("hbm_cycles", "hbm_bytes_per_cycle", hbm_bytes_per_cycle);
  return bytes / hbm_bytes_per_cycle;
}

MatmulBound matmul_bound(uint64_t m, uint64_t k, uint64_t n, uint64_t rows, uint64_t cols,
                         double hbm_bytes, double hbm_bytes_per_cycle) {
  MatmulBound b;
  b.tiles = matmul_tiles(k, n, rows, cols);
  b.compute_cycles = matmul_ideal_cycles(m, k, n, rows, cols);
  b.useful_macs = matmul_useful_macs(m, k, n);
  b.peak_macs_per_cycle = peak_macs_per_cycle(rows, cols);
  b.hbm_bytes = hbm_bytes;
  b.hbm_cycles = hbm_cycles(hbm_bytes, hbm_bytes_per_cycle);
  const double compute = static_cast<double>(b.compute_cycles);
  b.hbm_bound = b.hbm_cycles > compute;
  b.roofline_cycles = std::max(compute, b.hbm_cycles);
  return b;
}

double mfu(uint64_t useful_macs, int chips, uint64_t peak_macs_per_cycle, uint64_t cycles) {
  need_chips("mfu", chips);
  need_positive("mfu", "peak_macs_per_cycle", peak_macs_per_cycle);
  need_positive("mfu", "cycles", cycles);
  // In double: chips * peak * cycles may not fit 64 bits for long runs on big pods.
  return static_cast<double>(useful_macs) /
         (static_cast<double>(chips) * static_cast<double>(peak_macs_per_cycle) *
          static_cast<double>(cycles));
}

double busbw_factor(Collective c, int chips) {
  need_chips("busbw_factor", chips);
  const double p = chips;
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (p - 1.0) / p;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return (p - 1.0) / p;
    case Collective::kBroadcast:
      return 1.0;
  }
  bad("busbw_factor: collective = " + std::to_string(static_cast<int>(c)) +
      "; must be one of tpu::Collective");
}

double partials_factor(Collective c, DType dtype) {
  if (dtype != DType::kBf16 || !collective_reduces(c)) return 1.0;
  return c == Collective::kAllReduce ? 1.5 : 2.0;
}

double algbw(double bytes, double cycles) {
  need_non_negative("algbw", "bytes", bytes);
  need_positive("algbw", "cycles", cycles);
  return bytes / cycles;
}

double busbw(Collective c, int chips, double bytes, double cycles) {
  return algbw(bytes, cycles) * busbw_factor(c, chips);
}

int topology_links_per_chip(const Topology& topo) {
  topo.validate();
  int links = 0;
  for (int d = 0; d < topo.rank(); ++d) {
    const int k = topo.extent(d);
    if (k > 1) links += topo.wraps(d) ? 2 : std::min(2, k - 1);
  }
  return links;
}

int chip_links(const Topology& topo, int chip) {
  topo.validate();
  if (chip < 0 || chip >= topo.num_chips()) {
    bad("chip_links: chip = " + std::to_string(chip) + "; must be in [0, " +
        std::to_string(topo.num_chips()) + ") for " + topo.name());
  }
  const PodCoord c = topo.coord(chip);
  int links = 0;
  for (int d = 0; d < topo.rank(); ++d) {
    const int k = topo.extent(d);
    if (k <= 1) continue;
    links += topo.wraps(d) ? 2 : (c[d] > 0) + (c[d] < k - 1);
  }
  return links;
}

int allreduce_links_per_chip(const Topology& topo, const std::string& algorithm) {
  if (algorithm == "ring") return 1;
  if (algorithm == "biring") return 2;
  if (algorithm == "torus" || algorithm == "direct") {
    return 2 * static_cast<int>(topo.active_dims().size());
  }
  bad("algorithm: unknown '" + algorithm + "'; expected 'ring', 'biring', 'torus' or 'direct'");
}

int allreduce_links_per_chip(const Topology& topo, const std::vector<int>& group_dims,
                             const std::string& algorithm) {
  return allreduce_links_per_chip(group_topology(topo, group_dims), algorithm);
}

double collective_ici_cycles(Collective c, int chips, double bytes, int links,
                             double link_bytes_per_cycle) {
  const double factor = busbw_factor(c, chips);
  need_non_negative("collective_ici_cycles", "bytes", bytes);
  need_positive("collective_ici_cycles", "link_bytes_per_cycle", link_bytes_per_cycle);
  if (links < 0 || (chips > 1 && links < 1)) {
    bad("collective_ici_cycles: links = " + std::to_string(links) +
        "; must be >= 1 when chips > 1 (>= 0 for one chip)");
  }
  if (chips == 1) return 0.0;  // nothing leaves the chip (broadcast's factor 1 included)
  return factor * bytes / (static_cast<double>(links) * link_bytes_per_cycle);
}

double collective_hbm_bytes(Collective c, int chips, double bytes) {
  need_chips("collective_hbm_bytes", chips);
  need_non_negative("collective_hbm_bytes", "bytes", bytes);
  const double p = chips;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kAllToAll:
      return 2.0 * bytes;
    case Collective::kReduceScatter:  // reads the whole input, writes its 1/p share
    case Collective::kAllGather:      // reads its 1/p share, writes the whole output
      return bytes + bytes / p;
    case Collective::kBroadcast:
      return bytes;
  }
  bad("collective_hbm_bytes: collective = " + std::to_string(static_cast<int>(c)) +
      "; must be one of tpu::Collective");
}

CollectiveBound collective_bound(Collective c, int chips, double bytes, int links,
                                 double link_bytes_per_cycle, double hbm_bytes,
                                 double hbm_bytes_per_cycle) {
  CollectiveBound b;
  b.factor = busbw_factor(c, chips);
  b.ici_cycles = collective_ici_cycles(c, chips, bytes, links, link_bytes_per_cycle);
  b.hbm_bytes = hbm_bytes;
  b.hbm_cycles = hbm_cycles(hbm_bytes, hbm_bytes_per_cycle);
  b.hbm_bound = b.hbm_cycles > b.ici_cycles;
  b.ideal_cycles = std::max(b.ici_cycles, b.hbm_cycles);
  return b;
}

// ---- What one collective plan costs on the links ----

std::vector<DirectedLink> topology_links(const Topology& topo) {
  std::vector<DirectedLink> links;
  for (int c = 0; c < topo.num_chips(); ++c) {
    for (int d : topo.active_dims()) {
      for (int dir : {+1, -1}) {
        if (route_dst(topo, c, Route{d, dir, 1}) >= 0) links.push_back(DirectedLink{c, d, dir});
      }
    }
  }
  return links;
}

PlanCost plan_cost(const CollectivePlan& plan) {
  PlanCost cost;
  cost.steps = plan.steps.size();
  for (const Step& step : plan.steps) {
    std::map<DirectedLink, uint64_t> here;
    for (const Transfer& t : step.transfers) {
      int at = t.src;
      const std::vector<Route> legs = t.routed ? routed_path(plan.topo, t) : std::vector{t.route};
      for (const Route& leg : legs) {
        for (int h = 0; h < leg.hops; ++h) {
          here[DirectedLink{at, leg.dim, leg.dir}] += plan.transfer_bytes(t);
          at = route_dst(plan.topo, at, Route{leg.dim, leg.dir, 1});
          if (at < 0) bad("plan: a route leaves the topology");
        }
      }
    }
    uint64_t mx = 0;
    for (const auto& [link, bytes] : here) {
      cost.link_bytes[link] += bytes;
      mx = std::max(mx, bytes);
    }
    cost.step_max_link_bytes.push_back(mx);
    cost.step_link_bytes.push_back(std::move(here));
  }
  for (const auto& [link, bytes] : cost.link_bytes) {
    cost.max_link_bytes = std::max(cost.max_link_bytes, bytes);
  }
  return cost;
}

double PlanCost::link_cycles(double link_bytes_per_cycle) const {
  need_positive("PlanCost::link_cycles", "link_bytes_per_cycle", link_bytes_per_cycle);
  double t = 0;
  for (uint64_t b : step_max_link_bytes) t += static_cast<double>(b) / link_bytes_per_cycle;
  return t;
}

}  // namespace tpu
