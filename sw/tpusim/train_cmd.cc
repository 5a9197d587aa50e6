// `tpusim train`: data-parallel SGD training of a multilayer perceptron, or (--model gpt) AdamW
// training of a small GPT, on the pod, every step checked bit for bit against the golden
// (docs/training.md).
#include "train_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli_util.h"
#include "config_keys.h"
#include "pod_cli.h"
#include "tpu/limits.h"
#include "gpt_job.h"
#include "train_job.h"

namespace tpu {

namespace {

// The options of `tpusim train`. The settings a config's train: section also has are typed as
// the section is (TrainSettings): a flag that was given, else the config's key, else the
// default of the table of keys (config_keys(): train.*).
struct TrainArgs {
  PodOptions pod;
  std::string mesh;
  std::vector<std::size_t> layers;  // --layers W0,W1,.. (checked by list_of(uint_in))
  uint64_t batch = 0, steps = 0, seed = 0, grad_pieces = 0, microbatches = 0;
  std::string stages, schedule;
  double lr = 0;
  bool fresh_batches = false;
  std::string save, load = "host", trace_steps;
  // The GPT's (--model gpt).
  std::string model = "mlp", data;
  uint64_t d_model = 0, heads = 0, seq = 0, warmup = 0;
  double weight_decay = 0;
};

// The learning rate: a positive normal f32 (tpu/limits.h); `where` names the flag or key.
float checked_lr(double v, const std::string& where) {
  if (!lr_in_range(v)) throw std::invalid_argument(where + ": " + real_text(v) + ": " + lr_rule());
  return static_cast<float>(v);
}

// "64-128-32": the widths joined by `sep`.
std::string widths_text(const std::vector<std::size_t>& w, const char* sep) {
  std::string t;
  for (std::size_t x : w) t += (t.empty() ? "" : sep) + std::to_string(x);
  return t;
}

// A training job (TrainJob or GptJob) run with its progress line and its report: the exit code.
template <typename Job>
int run_job(Job& job, const PodOptions& opt, const std::string& label) {
  Report rep(job.title());
  rep.field("command", "train");
  const auto wall0 = std::chrono::steady_clock::now();
  {
    ProgressLine line(label, opt.quiet);
    job.set_progress([&line](const RunProgress& p) { line.update(p); });
    job.run(engine_options(opt), rep);
    job.set_progress(nullptr);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  return finish_pod_report(rep, opt, job.pass());
}

// `tpusim train --model gpt`: each setting its flag, else (gpt_job_options) the config's train:
// key when the config's train: section is a GPT's, else the GPT's default.
int run_gpt(const TrainArgs& a, const PodConfig& cfg) {
  const PodOptions& opt = a.pod;
  GptGiven g;
  auto flag = [&](const char* f) { return opt.given(f); };
  if (flag("--mesh")) g.mesh = a.mesh;
  if (flag("--stages")) g.stages = a.stages;
  if (flag("--microbatches")) g.microbatches = a.microbatches;
  if (flag("--schedule")) g.schedule = a.schedule;
  if (flag("--data")) g.data = a.data;
  if (flag("--layers")) g.layers = a.layers;
  if (flag("--d-model")) g.d_model = a.d_model;
  if (flag("--heads")) g.heads = a.heads;
  if (flag("--seq")) g.seq = a.seq;
  if (flag("--batch")) g.batch = a.batch;
  if (flag("--steps")) g.steps = a.steps;
  if (flag("--seed")) g.seed = a.seed;
  if (flag("--warmup")) g.warmup = a.warmup;
  if (flag("--lr")) g.lr = a.lr;
  if (flag("--weight-decay")) g.weight_decay = a.weight_decay;
  GptJobOptions o = gpt_job_options(g, cfg, opt.config_path(), TPU_SOURCE_DIR "/docs",
                                    [](const std::string& key) {
                                      std::string f = "--" + key;
                                      std::replace(f.begin(), f.end(), '_', '-');
                                      return f;
                                    });
  o.backdoor = a.load == "backdoor";
  if (!a.trace_steps.empty()) o.trace_steps = cli::split_span(a.trace_steps);
  o.save = a.save;
  o.table = !opt.quiet;
  GptJob job(cfg, o);
  return run_job(job, opt, "train " + job.model_text() + " on " + cfg.params.topo.name());
}

int run_train(const TrainArgs& a) {
  const PodOptions& opt = a.pod;
  const std::string config = opt.config_path();
  const PodConfig cfg = load_pod_config(config);
  const std::string model = opt.given("--model") ? a.model : cfg.train.model;
  if (model == "gpt") return run_gpt(a, cfg);
  for (const char* f : {"--d-model", "--heads", "--seq", "--warmup", "--weight-decay", "--data"})
    if (opt.given(f))
      throw std::invalid_argument(std::string(f) + ": a GPT setting; the model is mlp (--model "
                                  "gpt)");
  // Each setting: its flag when given, else the config's train: key, else its default.
  const TrainSettings& ts = cfg.train;
  TrainJobOptions o;
  o.mesh = opt.given("--mesh") ? a.mesh : ts.mesh;
  o.stages = opt.given("--stages") ? a.stages : ts.stages;
  o.microbatches = opt.given("--microbatches") ? a.microbatches : ts.microbatches;
  o.schedule = opt.given("--schedule") ? a.schedule : ts.schedule;
  o.widths = opt.given("--layers") ? a.layers : ts.layers;
  if (o.widths.size() < 2)
    throw std::invalid_argument("--layers " + widths_text(o.widths, ",") +
                                ": need at least two widths (inputs, outputs)");
  o.global_batch = opt.given("--batch") ? a.batch : ts.batch;
  const double lr = opt.given("--lr") ? a.lr : ts.lr;
  o.lr = checked_lr(lr, opt.given("--lr") ? "--lr" : config + ": key 'train.lr'");
  o.lr_text = real_text(lr);
  o.steps = opt.given("--steps") ? a.steps : ts.steps;
  o.seed = opt.given("--seed") ? a.seed : ts.seed;
  o.fresh_batches = a.fresh_batches || ts.fresh_batches;
  o.grad_pieces = opt.given("--grad-pieces") ? a.grad_pieces : ts.grad_pieces;
  o.backdoor = a.load == "backdoor";
  if (!a.trace_steps.empty()) o.trace_steps = cli::split_span(a.trace_steps);
  o.save = a.save;
  o.table = !opt.quiet;
  TrainJob job(cfg, o);
  return run_job(job, opt, "train " + job.widths_text() + " on " + cfg.params.topo.name());
}

// train.KEY's default and range in the table of keys, for its flag.
std::string train_default(const char* key) {
  return config_keys().at(std::string("train.") + key).def;
}
CLI::Validator train_uint_check(const char* key) {
  const ConfigKey& k = config_keys().at(std::string("train.") + key);
  return cli::uint_in(k.lo, k.hi);
}

// --model and the GPT's own flags (their ranges and defaults the table's: train.*).
void add_gpt_flags(CLI::App* cmd, TrainArgs& args) {
  TrainArgs* a = &args;
  cmd->add_option("--model", a->model,
                  "mlp, or gpt: a GPT-2-style transformer on bytes, AdamW, golden every\n"
                  "step (docs/training.md; default train.model, else mlp)")
      ->type_name("mlp|gpt")
      ->check(CLI::IsMember({"mlp", "gpt"}));
  const ConfigKey& dm = config_keys().at("train.d_model");
  cmd->add_option("--d-model", a->d_model, "gpt: width (default " + dm.def + ")")
      ->type_name("D")
      ->check(train_uint_check("d_model"));
  cmd->add_option("--heads", a->heads, "gpt: attention heads (default " + train_default("heads") + ")")
      ->type_name("H")
      ->check(train_uint_check("heads"));
  cmd->add_option("--seq", a->seq, "gpt: tokens per window (default " + train_default("seq") + ")")
      ->type_name("S")
      ->check(train_uint_check("seq"));
  cmd->add_option("--warmup", a->warmup,
                  "gpt: steps of linear lr warmup (default " + train_default("warmup") + ")")
      ->type_name("N")
      ->check(train_uint_check("warmup"));
  const ConfigKey& wd = config_keys().at("train.weight_decay");
  cmd->add_option_function<std::string>(
         "--weight-decay",
         [a](const std::string& v) { a->weight_decay = std::strtod(v.c_str(), nullptr); },
         "gpt: AdamW's decoupled weight decay on matrices (default " + wd.def + ")")
      ->type_name("WD")
      ->check(cli::real_in(wd.real_lo, wd.real_hi));
  cmd->add_option("--data", a->data,
                  "gpt: the text to train on (default: the project's docs/*.md)")
      ->type_name("FILE");
}

}  // namespace

std::function<int()> train_command(CLI::App& tool) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "train", "data-parallel (and tensor-parallel) SGD of an MLP, or AdamW of a GPT (--model\n"
               "gpt), on the pod, each step checked bit for bit against the golden");
  add_pod_config(cmd, a->pod);
  add_gpt_flags(cmd, *a);
  cmd->add_option("--mesh", a->mesh,
                  "data=D,model=M,stage=P over the torus dimensions, x first: M > 1\n"
                  "splits the hidden layer of a 2-layer MLP over M chips (tensor\n"
                  "parallel), P > 1 its layers over P pipeline stages; default\n"
                  "train.mesh, else data=<chips> (the config's mesh: is for tpusim shard)")
      ->type_name("AXES");
  // Each of these overrides the key of the config's train: section, which overrides the default.
  // Their ranges and defaults are the table's (config_keys(): train.*).
  cmd->add_option_function<std::string>(
         "--layers",
         [a](const std::string& v) {
           a->layers.clear();
           for (const std::string& item : cli::split_list(v))
             a->layers.push_back(static_cast<std::size_t>(std::stoull(item)));
         },
         "widths, inputs first (default " + train_default("layers") + "; multiples of 32);\n"
         "gpt: one value, the blocks (default 2)")
      ->type_name("W0,W1,..")
      ->check(cli::list_of(train_uint_check("layers")));
  cmd->add_option("--batch", a->batch,
                  "global batch, split evenly over the data ranks (default " +
                      train_default("batch") + "; gpt: windows, default 8)")
      ->type_name("N")
      ->check(train_uint_check("batch"));
  cmd->add_option("--steps", a->steps, "steps (default " + train_default("steps") + ")")
      ->type_name("S")
      ->check(train_uint_check("steps"));
  const ConfigKey& lr = config_keys().at("train.lr");
  cmd->add_option_function<std::string>(
         "--lr", [a](const std::string& v) { a->lr = std::strtod(v.c_str(), nullptr); },
         "learning rate (default " + lr.def + "; gpt: 0.01)")
      ->type_name("LR")
      ->check(cli::real_in(lr.real_lo, lr.real_hi));
  cmd->add_option("--seed", a->seed,
                  "data, teacher and initial weights (default " + train_default("seed") + ")")
      ->type_name("S")
      ->check(train_uint_check("seed"));
  cmd->add_flag("--fresh-batches", a->fresh_batches,
                "a new batch every step (default: the same batch)");
  cmd->add_option("--grad-pieces", a->grad_pieces,
                  "the first layer's gradient all-reduced in P pieces (default " +
                      train_default("grad_pieces") + ")")
      ->type_name("P")
      ->check(train_uint_check("grad_pieces"));
  cmd->add_option("--stages", a->stages,
                  "the layers of each pipeline stage, e.g. 0-1,2-3 (default: the stage\n"
                  "axis splits the layers into equal stages)")
      ->type_name("A-B,..");
  cmd->add_option("--microbatches", a->microbatches,
                  "micro-batches per step and data replica, gradients accumulated over\n"
                  "them in f32, micro-batch 0 first (default " +
                      train_default("microbatches") + ")")
      ->type_name("M")
      ->check(train_uint_check("microbatches"));
  cmd->add_option("--schedule", a->schedule,
                  "pipeline schedule: gpipe, 1f1b or interleaved:V (V model chunks per\n"
                  "stage; default " + train_default("schedule") + ")")
      ->type_name("S");
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
  cmd->footer(config_keys().help("train") +
              "exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_train(*a); };
}

}  // namespace tpu
