// bench_pod: collectives on the pod, as JSON on stdout.
//   bench_pod [--only allreduce|speed|speed4x4x4] [--small]
// allreduce: all-reduce (sum, f32) on a ring of 4 and of 8 chips (ring algorithm) and on a 4x4
//   torus (torus algorithm), 16x16 chips, 16-byte links of 2 cycles' latency: cycles against the
//   bandwidth bound 2 (p - 1) / p N / (links B) with every link the algorithm uses busy, for a
//   large N (the largest that fits the chips' VMEM) and a smaller one. Golden-checked.
// speed: pod cycles per second of an all-reduce on 2x2, 4x4 (16x16 chips) and 4x4x4 (4x4
//   chips), the plain C++ stepping in this process and the SystemC pod (TLM host sockets) in a
//   child process (SystemC elaborates once per process): the SystemC overhead is their ratio.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pod_driver.h"
#include "pod_sc.h"
#include "tpu/bf16.h"

using namespace tpu;

namespace {

PodParams make_params(const std::vector<int>& shape, const std::string& variant) {
  PodParams p;
  p.topo = Topology::torus(shape);
  p.variant = variant;
  p.link_latency = 2;
  p.link_width = variant == "16x16" ? 16 : 4;  // a row crosses a link in 4 cycles
  return p;
}

std::vector<std::vector<uint32_t>> inputs(const CollectivePlan& plan) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<uint32_t>> in(plan.chips.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (std::size_t i = 0; i < plan.input_len(static_cast<int>(c)); ++i)
      in[c].push_back(f32_bits(nd(rng)));
  return in;
}

struct Timed {
  PodCollectiveRun run;
  double wall = 0;  // seconds of the whole run (load, collective, store)
};

Timed run_on(PodHost& h, const CollectiveSpec& s, const std::vector<std::vector<uint32_t>>& in) {
  const auto t0 = std::chrono::steady_clock::now();
  Timed t;
  t.run = PodDriver(h).run(s, in);
  t.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

std::string shape_name(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

std::vector<int> parse_shape(const std::string& s) {
  std::vector<int> v;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t j = s.find('x', i);
    v.push_back(std::stoi(s.substr(i, j - i)));
    i = j == std::string::npos ? s.size() : j + 1;
  }
  return v;
}

// Elements of an f32 all-reduce that fill most of a chip's VMEM: the working buffer plus the
// landing rows of every incoming transfer (about 2 (p - 1) / p of it) must fit.
std::size_t big_n(const ChipShape& cs, int p) {
  const double rows = 0.9 * cs.vmem_rows / (1.0 + 2.0 * (p - 1) / p);
  return static_cast<std::size_t>(rows) / 64 * 64 * cs.cols;
}

void allreduce_case(bool* first, const std::vector<int>& shape, const std::string& algo,
                    std::size_t n_div) {
  const PodParams p = make_params(shape, "16x16");
  CppPodHost host(p);
  const int P = p.topo.num_chips();
  CollectiveSpec s;
  s.algorithm = algo;
  s.n = big_n(host.core().shape(), P) / n_div;
  const CollectivePlan plan = make_plan(p.topo, s);
  const auto in = inputs(plan);
  const Timed t = run_on(host, s, in);
  const bool pass = t.run.out == execute_plan_f32(plan, in);
  const double B = host.core().link_bytes_per_cycle();
  const int links = allreduce_links_per_chip(p.topo, algo);
  const double bound = allreduce_bound_s(P, links, static_cast<double>(s.n) * 4.0, B);
  const double cyc = static_cast<double>(t.run.collective_cycles);
  std::printf("%s  {\"bench\": \"allreduce\", \"topology\": \"%s\", \"algorithm\": \"%s\", "
              "\"chips\": %d, \"variant\": \"16x16\", \"link_bytes_per_cycle\": %.0f, "
              "\"link_latency\": %u, \"links_per_chip\": %d, \"elements\": %zu, "
              "\"bytes_per_chip\": %zu, \"cycles\": %.0f, \"bound_cycles\": %.1f, "
              "\"fraction_of_bound\": %.4f, \"busbw_bytes_per_cycle\": %.2f, "
              "\"commands\": %zu, \"golden\": \"%s\", \"wall_seconds\": %.2f}",
              *first ? "" : ",\n", p.topo.name().c_str(), algo.c_str(), P, B, p.link_latency,
              links, s.n, s.n * 4, cyc, bound, bound / cyc,
              static_cast<double>(s.n) * 4.0 / cyc * 2.0 * (P - 1) / P, t.run.commands,
              pass ? "pass" : "fail", t.wall);
  std::fflush(stdout);
  *first = false;
}

// The speed job: an all-reduce of n elements (fewer on the small chips' 64 KiB of VMEM).
std::size_t speed_n(const std::string& variant) { return variant == "16x16" ? 16384 : 2048; }

void speed_case(bool* first, const char* self, const std::vector<int>& shape,
                const std::string& variant) {
  const PodParams p = make_params(shape, variant);
  CollectiveSpec s;
  s.algorithm = variant == "16x16" ? "torus" : "ring";  // torus pieces overflow a 4x4 chip
  s.n = speed_n(variant);
  const auto in = inputs(make_plan(p.topo, s));
  CppPodHost host(p);
  const Timed t = run_on(host, s, in);
  const uint64_t cyc = t.run.load_cycles + t.run.collective_cycles + t.run.store_cycles;
  // The SystemC pod, in a child process.
  const std::string cmd = std::string(self) + " --systemc-speed " + shape_name(shape) + " " +
                          variant;
  double sc_wall = 0;
  unsigned long long sc_cyc = 0;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    if (std::fscanf(f, "%llu %lf", &sc_cyc, &sc_wall) != 2) sc_wall = 0;
    pclose(f);
  }
  std::printf("%s  {\"bench\": \"sim_speed\", \"topology\": \"%s\", \"chips\": %d, "
              "\"variant\": \"%s\", \"job\": \"all_reduce %s %zu f32\", \"pod_cycles\": %llu, "
              "\"cpp_wall_seconds\": %.3f, \"cpp_cycles_per_second\": %.1f, "
              "\"systemc_pod_cycles\": %llu, \"systemc_wall_seconds\": %.3f, "
              "\"systemc_cycles_per_second\": %.1f, \"systemc_overhead\": %.3f}",
              *first ? "" : ",\n", p.topo.name().c_str(), p.topo.num_chips(), variant.c_str(),
              s.algorithm.c_str(), s.n, static_cast<unsigned long long>(cyc), t.wall, static_cast<double>(cyc) / t.wall,
              sc_cyc, sc_wall, sc_wall > 0 ? static_cast<double>(sc_cyc) / sc_wall : 0.0,
              sc_wall / t.wall);
  std::fflush(stdout);
  *first = false;
}

int systemc_speed(const std::string& shape, const std::string& variant) {
  const PodParams p = make_params(parse_shape(shape), variant);
  CollectiveSpec s;
  s.algorithm = variant == "16x16" ? "torus" : "ring";
  s.n = speed_n(variant);
  const auto in = inputs(make_plan(p.topo, s));
  ScPod pod("pod", p);
  Timed t;
  pod.run([&](PodHost& h) { t = run_on(h, s, in); });
  std::printf("%llu %.6f\n",
              static_cast<unsigned long long>(t.run.load_cycles + t.run.collective_cycles +
                                              t.run.store_cycles),
              t.wall);
  return 0;
}

}  // namespace

extern "C" int sc_main(int argc, char** argv) {
  std::string only;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--systemc-speed" && i + 2 < argc) return systemc_speed(argv[i + 1], argv[i + 2]);
    if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--small") small = true;
    else {
      std::fprintf(stderr, "usage: bench_pod [--only allreduce|speed|speed4x4x4] [--small]\n");
      return 2;
    }
  }
  bool first = true;
  std::printf("[\n");
  if (only.empty() || only == "allreduce") {
    const std::size_t d = small ? 8 : 1;
    allreduce_case(&first, {4}, "ring", d);
    allreduce_case(&first, {8}, "ring", d);
    allreduce_case(&first, {4}, "biring", d);
    allreduce_case(&first, {4, 4}, "torus", d);
    if (!small) allreduce_case(&first, {4, 4}, "torus", 8);
  }
  if (only == "speed4x4x4") speed_case(&first, argv[0], {4, 4, 4}, "4x4");
  if (only.empty() || only == "speed") {
    speed_case(&first, argv[0], {2, 2}, "16x16");
    if (!small) {
      speed_case(&first, argv[0], {4, 4}, "16x16");
      speed_case(&first, argv[0], {4, 4, 4}, "4x4");
    }
  }
  std::printf("\n]\n");
  return 0;
}

int main(int argc, char** argv) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
