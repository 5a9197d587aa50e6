// GptJob: `tpusim train --model gpt`, a small GPT trained on the pod (docs/training.md, "The GPT
// step on the chip"): the mesh, batch and model checked before the first cycle, the steps run
// with every chip's parameters, Adam moments and loss partials checked bit for bit against the
// golden after each, the per-step table, the cycles of each op kind from the timeline, the
// report and the saved run (tokens, initial and final parameters, losses: to replay in PyTorch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chip_config.h"
#include "engine.h"
#include "progress.h"
#include "report.h"
#include "tpu/gpt.h"
#include "tpu/pipeline.h"

namespace tpu {

struct GptJobOptions {
  std::string mesh;  // "data=D,model=M,stage=P" ("": data parallel over every chip)
  // The pipeline (docs/training.md, "Pipeline"): with a stage axis or micro-batches.
  std::string stages;            // --stages "0-1,2-3" ("": equal stages)
  std::size_t microbatches = 1;  // per step and data rank
  std::string schedule = "gpipe";
  std::size_t layers = 2, d_model = 32, heads = 2, seq = 32;
  std::size_t global_batch = 8;  // windows per step, split evenly over the data ranks
  std::size_t steps = 20, warmup = 0;
  float lr = 1e-2f, weight_decay = 0.0f;
  std::string lr_text = "0.01";
  uint64_t seed = 1;            // init and the windows
  std::vector<uint8_t> text;    // the bytes the windows are cut from
  std::string text_name;        // where they came from (the report)
  bool backdoor = false;        // parameters and each step's inputs through the backdoor
  std::optional<std::pair<std::size_t, std::size_t>> trace_steps;  // [A, B), default 0:1
  std::string save;             // the run's directory ("": none)
  bool table = true;            // the per-step table on stdout
};

// The text a GPT trains on: `file`, or ("") every *.md of docs_dir in name order; *name says
// which. std::invalid_argument naming --data when it cannot be read.
std::vector<uint8_t> gpt_read_text(const std::string& file, const std::string& docs_dir,
                                   std::string* name);

// What a caller gave for a GPT run, each unset one taken from the config's train: section when it
// is a GPT's (model: gpt; an MLP's says nothing of a GPT), else the GPT's default (the tiny model:
// 2 blocks of 32, 2 heads, S 32, global batch 8, 20 steps, lr 0.01, seed 1).
struct GptGiven {
  std::optional<std::string> mesh, data, stages, schedule;
  std::optional<uint64_t> microbatches;
  std::optional<std::vector<std::size_t>> layers;  // one value: the blocks
  std::optional<uint64_t> d_model, heads, seq, batch, steps, seed, warmup;
  std::optional<double> lr, weight_decay;
};
// The job's settings from them (not the run's own: backdoor, trace steps, save, table).
// name(key) is how errors name a given setting ("--d-model" on the command line, "d_model" in
// Python); a value from the config is named by config_path and its key; docs_dir is the default
// text's folder. std::invalid_argument naming the setting, the value and the rule.
GptJobOptions gpt_job_options(const GptGiven& g, const PodConfig& cfg,
                              const std::string& config_path, const std::string& docs_dir,
                              const std::function<std::string(const std::string&)>& name);

class GptJob {
 public:
  // Every rule checked (std::invalid_argument naming the flag or key, the value and the rule).
  GptJob(PodConfig cfg, GptJobOptions o);
  // "GPT 2 layers d 32 2 heads S 32 on 2x2 (4 chips 16x16, mesh data=2,model=2), global batch
  // 8, 20 steps, AdamW lr 0.01".
  std::string title() const;
  // On the engine: the steps, the table, the timeline of the traced steps, rep filled, the run
  // saved.
  void run(const EngineOptions& eng, Report& rep);
  void set_progress(RunProgressFn f) { progress_ = std::move(f); }
  bool pass() const { return pass_; }
  std::string model_text() const;  // "gpt 2x32 h2 s32"

 private:
  PodConfig cfg_;
  GptJobOptions o_;
  GptSpec spec_;
  std::string mesh_text_;
  int stages_ = 1;
  bool pipelined_ = false;
  PipeSchedule schedule_;
  bool pass_ = true;
  RunProgressFn progress_;
};

// `tpusim generate`: greedy decoding from a run `tpusim train --model gpt --save DIR` saved
// (docs/training.md, "Generating text"): the model (DIR/train.json) and its final parameters
// (DIR/final/*.npy) on chip 0 of the pod (GptDecoder: the keys and values cached in HBM), the
// prompt fed a byte at a time, then `tokens` more, each the argmax of the logits (ties: the
// lowest byte). Every token's logits are checked bit for bit against the golden's forward over
// the window so far (gpt_logits).
struct GptGenerateOptions {
  std::string load;    // the saved run's directory
  std::string prompt;  // bytes
  std::size_t tokens = 64;
  bool quiet = false;
};

class GptGenerate {
 public:
  // The saved run read and checked, the prompt and tokens against the context (std::invalid_argument
  // naming the file or flag and the rule).
  GptGenerate(PodConfig cfg, GptGenerateOptions o);
  std::string title() const;
  void run(const EngineOptions& eng, Report& rep);
  bool pass() const { return pass_; }
  const std::string& text() const { return bytes_; }  // the generated bytes, as they are

 private:
  PodConfig cfg_;
  GptGenerateOptions o_;
  std::string bytes_;
  GptSpec spec_;
  GptParams params_;
  bool pass_ = true;
};

}  // namespace tpu
