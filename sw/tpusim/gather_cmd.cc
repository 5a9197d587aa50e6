#include "gather_cmd.h"

#include <memory>
#include <string>

#include "cli_util.h"
#include "gather_job.h"

namespace tpu {
namespace {

// The options of `tpusim gather`.
struct GatherArgs {
  const CLI::App* cmd = nullptr;
  std::string table, ids, out, config, variant, json;
  bool quiet = false, check = false;
};

int run_gather(const GatherArgs& a) {
  GatherJobOptions o;
  o.table_file = a.table;
  o.ids_file = a.ids;
  o.out = a.out;
  if (a.cmd->count("--variant") > 0) o.variant = a.variant;
  o.check = a.check;
  GatherJob job(a.config.empty() ? source_file("configs/default.yaml") : a.config, o);
  return run_chip_job(job, a.quiet, a.json) ? 0 : 1;
}

}  // namespace

std::function<int()> gather_command(CLI::App& tool) {
  auto a = std::make_shared<GatherArgs>();
  CLI::App* cmd =
      tool.add_subcommand("gather",
                          "rows of a float32 table gathered by an id list on one chip (DMA_IDX), "
                          "golden-checked");
  a->cmd = cmd;
  cmd->add_option("--table", a->table, "the table, float32 .npy [rows, columns]")
      ->type_name("T.npy")
      ->required()
      ->check(cli::input_path());
  cmd->add_option("--ids", a->ids, "the ids, int32 or int64 .npy, 1-D, each 0..rows-1")
      ->type_name("I.npy")
      ->required()
      ->check(cli::input_path());
  cmd->add_option("--out", a->out, "write the gathered rows (float32 [ids, columns])")
      ->type_name("OUT.npy")
      ->check(cli::output_path());
  add_chip_config(cmd, a->config, a->variant);
  add_chip_job_flags(cmd, a->json, a->quiet, a->check, "the inputs");
  cmd->footer(
      "exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
      "error (docs/isa.md \"DMA_IDX\")");
  return [a] { return run_gather(*a); };
}

}  // namespace tpu
