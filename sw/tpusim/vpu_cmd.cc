#include "vpu_cmd.h"

#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "vpu_job.h"

namespace tpu {

namespace {

// The options of `tpusim vpu`.
struct VpuArgs {
  const CLI::App* cmd = nullptr;
  std::string op, x, y, z, out, config, variant, json;
  bool quiet = false, check = false;
};

int run_vpu(const VpuArgs& a) {
  VpuJobOptions o;
  o.op = a.op;
  o.x_file = a.x;
  o.y_file = a.y;
  o.z_file = a.z;
  o.out = a.out;
  if (a.cmd->count("--variant") > 0) o.variant = a.variant;
  o.check = a.check;
  VpuJob job(a.config.empty() ? source_file("configs/default.yaml") : a.config, o);
  return run_chip_job(job, a.quiet, a.json) ? 0 : 1;
}

}  // namespace

std::function<int()> vpu_command(CLI::App& tool) {
  auto a = std::make_shared<VpuArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "vpu",
      "one VPU op (elementwise, or a reduction of each row) over a float32 array on one chip, "
      "golden-checked");
  a->cmd = cmd;
  cmd->add_option("--op", a->op, "the op: " + vpu_command_op_names())
      ->type_name("NAME")
      ->required();
  cmd->add_option("--x", a->x, "x, float32 .npy, 1-D or 2-D")
      ->type_name("X.npy")
      ->required()
      ->check(cli::input_path());
  cmd->add_option("--y", a->y, "y, x's shape (the ops of two operands)")
      ->type_name("Y.npy")
      ->check(cli::input_path());
  cmd->add_option("--z", a->z, "z (no op of the chip's VPU command reads one today)")
      ->type_name("Z.npy")
      ->check(cli::input_path());
  cmd->add_option("--out", a->out, "write the result (float32: x's shape; red_sum, red_max: one per row)")
      ->type_name("OUT.npy")
      ->check(cli::output_path());
  add_chip_config(cmd, a->config, a->variant);
  add_chip_job_flags(cmd, a->json, a->quiet, a->check, "the operands");
  cmd->footer(
      "exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
      "error (docs/vpu.md \"Running one op: tpusim vpu\")");
  return [a] { return run_vpu(*a); };
}

}  // namespace tpu
