#include "example_cmd.h"

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check_port.h"
#include "cli_util.h"
#include "npy.h"

namespace tpu {

namespace {

// The options of `tpusim example-inputs`.
struct ExampleArgs {
  std::size_t m = 300, k = 70, n = 80;
  uint64_t seed = 1;
  std::string dir = ".";
  bool check = false;
};

int run_example_inputs(const ExampleArgs& a) {
  const std::string dir = a.dir.empty() || a.dir.back() == '/' ? a.dir : a.dir + "/";
  const std::string pa = dir + "A.npy", pw = dir + "W.npy", pb = dir + "B.npy";
  // Each path as an output of its own (its directory exists, it can be written), before any
  // is written.
  for (std::string p : {pa, pw, pb}) {
    const std::string e = cli::output_path()(p);
    if (!e.empty()) throw std::invalid_argument("--dir " + a.dir + ": " + e);
  }
  if (a.check) throw CheckStop("before writing A.npy, W.npy and B.npy");
  // Values of a few bits, so that bf16 holds them exactly: A and W in [-2, 2) by grid, the
  // bias in [-1, 1) by sixteenths.
  std::mt19937_64 rng(a.seed);
  auto grid = [&](std::size_t count, int span, float step) {
    std::vector<float> v(count);
    for (float& x : v)
      x = static_cast<float>(static_cast<int>(rng() % static_cast<uint64_t>(2 * span)) - span) *
          step;
    return v;
  };
  write_npy_f32(pa, grid(a.m * a.k, 16, 0.125f), {a.m, a.k});
  write_npy_f32(pw, grid(a.k * a.n, 16, 0.125f), {a.k, a.n});
  write_npy_f32(pb, grid(a.n, 16, 0.0625f), {a.n});
  std::printf("wrote %s (%zu x %zu), %s (%zu x %zu), %s (%zu): float32, seed %llu\n", pa.c_str(),
              a.m, a.k, pw.c_str(), a.k, a.n, pb.c_str(), a.n,
              static_cast<unsigned long long>(a.seed));
  return 0;
}

}  // namespace

std::function<int()> example_inputs_command(CLI::App& tool) {
  auto a = std::make_shared<ExampleArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "example-inputs",
      "write A.npy, W.npy and B.npy (float32) for matmul's --a, --w and --bias\n"
      "(A is M x K, W is K x N, B holds N values)");
  add_matmul_shape(cmd, a->m, a->k, a->n, a->seed, 1u << 16,
                   {"rows of A", "the contraction: A's columns, W's rows", "columns of W, bias"},
                   "seed of the values");
  cmd->add_option("--dir", a->dir, "the directory to write them in (it must exist)")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->add_flag("--check", a->check,
                "check the line and the three paths, then stop: exit 0, no files written");
  cmd->footer("exit codes: 0 written, 2 bad input or output");
  return [a] { return run_example_inputs(*a); };
}

std::string tpusim_version() {
  const std::string git = TPU_GIT_DESCRIBE;
  return std::string("tpusim ") + TPU_VERSION + (git.empty() ? "" : " (git " + git + ")");
}

}  // namespace tpu
