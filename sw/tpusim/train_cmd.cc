// `tpusim train`: data-parallel SGD training of a multilayer perceptron on the pod, every step
// checked bit for bit against the golden (docs/training.md).
#include "train_cmd.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli_util.h"
#include "pod_cli.h"
#include "tpu/limits.h"
#include "train_job.h"

namespace tpu {

namespace {

// The options of `tpusim train`. The settings a config's train: section also has are kept as the
// text given (checked when parsed): a flag, else the config's key, else the default.
struct TrainArgs {
  PodOptions pod;
  std::string mesh, layers, batch, steps, lr, seed, grad_pieces;
  bool fresh_batches = false;
  std::string save, load = "host", trace_steps;
};

// "64,128,32" (checked: every width an integer from 1 to 65536) -> the widths.
std::vector<std::size_t> parse_layers(const std::string& v) {
  std::vector<std::size_t> w;
  for (const std::string& item : cli::split_list(v))
    w.push_back(static_cast<std::size_t>(std::stoull(item)));
  if (w.size() < 2)
    throw std::invalid_argument("--layers " + v + ": need at least two widths (inputs, outputs)");
  return w;
}

// The learning rate: a positive normal f32 (tpu/limits.h); `where` names the flag or key.
float parse_lr(const std::string& text, const std::string& where) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !lr_in_range(v))
    throw std::invalid_argument(where + ": " + text + ": " + lr_rule());
  return static_cast<float>(v);
}

int run_train(const TrainArgs& a) {
  const PodOptions& opt = a.pod;
  const std::string config = opt.config_path();
  const PodConfig cfg = load_pod_config(config);
  // A flag, else the config's train: key, else the default.
  auto setting = [&](const char* flag, const std::string& given, const char* key,
                     const char* def) {
    if (opt.given(flag)) return given;
    return cfg.train.count(key) ? cfg.train.at(key) : std::string(def);
  };
  TrainJobOptions o;
  o.mesh = a.mesh;
  o.widths = parse_layers(setting("--layers", a.layers, "layers", "64,128,32"));
  o.global_batch = std::stoull(setting("--batch", a.batch, "batch", "256"));
  o.lr_text = setting("--lr", a.lr, "lr", "0.5");
  o.lr = parse_lr(o.lr_text, opt.given("--lr") ? "--lr" : config + ": key 'train.lr'");
  o.steps = std::stoull(setting("--steps", a.steps, "steps", "20"));
  o.seed = std::stoull(setting("--seed", a.seed, "seed", "1"));
  o.fresh_batches = a.fresh_batches || cfg.train.count("fresh_batches") > 0;
  o.grad_pieces = std::stoull(setting("--grad-pieces", a.grad_pieces, "grad_pieces", "4"));
  o.backdoor = a.load == "backdoor";
  if (!a.trace_steps.empty()) o.trace_steps = cli::split_span(a.trace_steps);
  o.save = a.save;
  o.table = !opt.quiet;
  TrainJob job(cfg, o);
  Report rep(job.title());
  rep.field("command", "train");
  const auto wall0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("train " + job.widths_text() + " on " + cfg.params.topo.name(), opt.quiet);
    job.run(engine_options(opt), rep, [&](std::size_t s, uint64_t cyc) {
      line.show("step " + std::to_string(s) + "/" + std::to_string(o.steps) + ": " +
                std::to_string(cyc) + " cycles");
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  return finish_pod_report(rep, opt, job.pass());
}

}  // namespace

std::function<int()> train_command(CLI::App& tool) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "train", "data-parallel (and tensor-parallel) SGD of an MLP on the pod, each step checked\n"
               "bit for bit against the golden");
  add_pod_config(cmd, a->pod);
  cmd->add_option("--mesh", a->mesh,
                  "data=D,model=M over the torus dimensions, x first: M > 1 splits\n"
                  "the hidden layer of a 2-layer MLP over M chips (tensor parallel);\n"
                  "default data=<chips> (the config's mesh: is for tpusim shard)")
      ->type_name("AXES");
  // Each of these overrides the key of the config's train: section, which overrides the default.
  cmd->add_option("--layers", a->layers,
                  "widths, inputs first (default 64,128,32; multiples of 32)")
      ->type_name("W0,W1,..")
      ->check(cli::list_of(cli::uint_in(1, 65536)));
  cmd->add_option("--batch", a->batch, "global batch, split evenly over the chips (default 256)")
      ->type_name("N")
      ->check(cli::uint_in(1, 1u << 24));
  cmd->add_option("--steps", a->steps, "SGD steps (default 20)")
      ->type_name("S")
      ->check(cli::uint_in(1, 100000));
  cmd->add_option("--lr", a->lr, "learning rate (default 0.5)")
      ->type_name("LR")
      ->check(cli::real_in(kLrMin, kLrMax));
  cmd->add_option("--seed", a->seed, "data, teacher and initial weights (default 1)")
      ->type_name("S")
      ->check(in_range(kSeedRange));
  cmd->add_flag("--fresh-batches", a->fresh_batches,
                "a new batch every step (default: the same batch)");
  cmd->add_option("--grad-pieces", a->grad_pieces,
                  "the first layer's gradient all-reduced in P pieces (default 4)")
      ->type_name("P")
      ->check(cli::uint_in(1, 64));
  cmd->add_option("--save", a->save,
                  "x.npy, y.npy, init_/final_w{i}.npy, init_/final_b{i}.npy, loss.npy,\n"
                  "train.json: the run, to replay in numpy or JAX")
      ->type_name("DIR")
      ->check(cli::output_dir());
  cmd->add_option("--load", a->load,
                  "data and weights in through the host ports, or the backdoor")
      ->type_name("host|backdoor")
      ->check(CLI::IsMember({"host", "backdoor"}))
      ->capture_default_str();
  add_pod_options(cmd, a->pod);
  cmd->add_option("--trace-steps", a->trace_steps,
                  "the steps [A, B) --trace records (default 0:1), each command\n"
                  "labelled with its phase")
      ->option_text("A:B")
      ->check(cli::span())
      ->needs("--trace");
  cmd->footer("the settings of the config's train: section: docs/training.md\n"
              "exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_train(*a); };
}

}  // namespace tpu
