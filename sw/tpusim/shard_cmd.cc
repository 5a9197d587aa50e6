// `tpusim shard`: one matmul sharded over a named mesh of the pod (docs/sharding.md).
#include "shard_cmd.h"

#include <chrono>
#include <memory>
#include <string>

#include "cli_util.h"
#include "pod_cli.h"
#include "shard_job.h"

namespace tpu {

namespace {

// The options of `tpusim shard`.
struct ShardArgs {
  PodOptions pod;
  std::string mesh, x_spec, w_spec, y_spec, a, w, bias, out, load = "host";
  std::size_t m = 512, k = 512, n = 512;
  uint64_t seed = 1;
  bool relu = false;
};

int run_shard(const ShardArgs& a) {
  const PodOptions& opt = a.pod;
  ShardJobOptions o;
  o.mesh = a.mesh;
  o.x_spec = a.x_spec;
  o.w_spec = a.w_spec;
  o.y_spec = a.y_spec;
  o.m = a.m;
  o.k = a.k;
  o.n = a.n;
  o.seed = a.seed;
  o.a_file = a.a;
  o.w_file = a.w;
  o.bias_file = a.bias;
  o.relu = a.relu;
  o.backdoor = a.load == "backdoor";
  const std::string config = opt.config_path();
  const PodConfig cfg = load_pod_config(config);
  ShardJob job(cfg, o, config);
  Report rep(job.title());
  rep.field("command", "shard");
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("shard " + std::to_string(job.m()) + "x" + std::to_string(job.k()) + "x" +
                          std::to_string(job.n()) + " on " + cfg.params.topo.name(),
                      opt.quiet);
    job.run(engine_options(opt), rep, show_cycles(line));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.out.empty()) job.write_y(a.out);
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  return finish_pod_report(rep, opt, job.pass());
}

}  // namespace

std::function<int()> shard_command(CLI::App& tool) {
  auto a = std::make_shared<ShardArgs>();
  CLI::App* cmd =
      tool.add_subcommand("shard", "one matmul Y = X @ W sharded over a named mesh of the pod");
  add_pod_config(cmd, a->pod);
  cmd->add_option("--mesh", a->mesh,
                  "named mesh axes over the torus dimensions, x first, e.g.\n"
                  "data=2,model=2 (default: the config's mesh: section)")
      ->type_name("AXES");
  std::vector<CLI::Option*> random =
      add_matmul_shape(cmd, a->m, a->k, a->n, a->seed, 1u << 16,
                       {"rows of X", "the contraction", "columns of W"},
                       "seed of the random operands");
  cmd->add_option("--x-spec", a->x_spec,
                  "X's partition spec (rows,columns: a mesh axis or '-'; default\n"
                  "first-axis,-)")
      ->type_name("S");
  cmd->add_option("--w-spec", a->w_spec, "W's (default -,second-axis, or -,- with one axis)")
      ->type_name("S");
  cmd->add_option("--y-spec", a->y_spec, "Y's (default: what the product gives)")
      ->type_name("S");
  add_matmul_files(cmd, a->a, a->w, "X from a file: uint16 (bf16 bits) or float32 (rounded)",
                   "X.npy", random);
  cmd->add_option("--bias", a->bias, "add a bias row (N float32 values); K split: after the\n"
                                     "reduction")
      ->type_name("B.npy")
      ->check(cli::input_path());
  cmd->add_flag("--relu", a->relu, "ReLU after the bias");
  cmd->add_option("--out", a->out, "write the gathered Y (float32)")
      ->type_name("Y.npy")
      ->check(cli::output_path());
  cmd->add_option("--load", a->load,
                  "operands in and Y out through the host ports, or the backdoor\n"
                  "(no simulated time)")
      ->type_name("host|backdoor")
      ->check(CLI::IsMember({"host", "backdoor"}))
      ->capture_default_str();
  add_pod_options(cmd, a->pod);
  add_trace_cycles(cmd, a->pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_shard(*a); };
}

}  // namespace tpu
