#include "generate_cmd.h"

#include <memory>
#include <string>

#include "cli_util.h"
#include "config_keys.h"
#include "gpt_job.h"
#include "pod_cli.h"

namespace tpu {
namespace {

struct GenerateArgs {
  PodOptions pod;
  std::string load, prompt;
  std::size_t tokens = 64;
};

int run_generate(const GenerateArgs& a) {
  const PodConfig cfg = load_pod_config(a.pod.config_path());
  GptGenerateOptions o;
  o.load = a.load;
  o.prompt = a.prompt;
  o.tokens = a.tokens;
  o.quiet = a.pod.quiet;
  GptGenerate job(cfg, o);
  Report rep(job.title());
  rep.field("command", "generate");
  job.run(engine_options(a.pod), rep);
  return finish_pod_report(rep, a.pod, job.pass());
}

}  // namespace

std::function<int()> generate_command(CLI::App& tool) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "generate",
      "greedy decoding on the pod from a saved GPT run (tpusim train --model gpt --save DIR),\n"
      "the keys and values cached in HBM, every token's logits checked bit for bit");
  add_pod_config(cmd, a->pod);
  cmd->add_option("--load", a->load, "the saved run's directory (train.json, final/*.npy)")
      ->type_name("DIR")
      ->required();
  cmd->add_option("--prompt", a->prompt, "the bytes to start from")->type_name("TEXT")->required();
  cmd->add_option("--tokens", a->tokens, "bytes to generate (past the context: the window restarts with its last half)")
      ->type_name("N")
      ->check(cli::uint_in(1, 4096))
      ->capture_default_str();
  add_pod_options(cmd, a->pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_generate(*a); };
}

}  // namespace tpu
