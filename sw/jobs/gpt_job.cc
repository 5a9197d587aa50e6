#include "gpt_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

#include "config_keys.h"
#include "gpt_decode.h"
#include "gpt_train.h"
#include "mesh_text.h"
#include "npy.h"
#include "pod_report.h"
#include "profile.h"
#include "trace.h"
#include "train_job.h"
#include "train_step.h"
#include "pipeline_train.h"
#include "tpu/limits.h"
#include "tpu/perf.h"
#include "tpu/vector.h"

namespace tpu {

namespace {

// Per phase of the program (an op kind), the cycles a command of it was in flight on a chip
// (the union of its commands' spans on every unit), the mean over the chips.
std::vector<double> phase_busy(const SpmdProgram& prog, const std::vector<TraceEvent>& events,
                               int chips) {
  const std::size_t n = prog.phases().size();
  std::map<std::pair<int, int>, std::vector<std::pair<uint64_t, uint64_t>>> spans;
  for (const TraceEvent& e : events) {
    const int p = e.unit == TraceUnit::kHost ? -1 : prog.phase_of_label(e.label);
    if (p >= 0 && e.end > e.begin) spans[{e.chip, p}].push_back({e.begin, e.end});
  }
  std::vector<double> busy(n, 0.0);
  for (auto& [key, v] : spans)
    busy[static_cast<std::size_t>(key.second)] += static_cast<double>(covered_cycles(v)) / chips;
  return busy;
}

// The parameters, chips' images against the golden's, bit for bit: how many differ.
std::size_t mismatches(const GptParams& got, const GptParams& want) {
  std::size_t bad = 0;
  for (std::size_t k = 0; k < want.size(); ++k)
    for (std::size_t i = 0; i < want[k].v.size(); ++i)
      bad += f32_bits(got[k].v[i]) != f32_bits(want[k].v[i]);
  return bad;
}

void save_params(const std::string& dir, const GptParams& p) {
  std::filesystem::create_directories(dir);
  for (const GptTensor& t : p)
    write_npy_f32(dir + "/" + t.name + ".npy", t.v,
                  t.rows == 1 ? std::vector<size_t>{t.cols} : std::vector<size_t>{t.rows, t.cols});
}

}  // namespace

std::vector<uint8_t> gpt_read_text(const std::string& file, const std::string& docs_dir,
                                   std::string* name) {
  std::vector<std::filesystem::path> files;
  if (file.empty()) {
    *name = docs_dir + "/*.md";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(docs_dir, ec))
      if (e.path().extension() == ".md") files.push_back(e.path());
    if (ec || files.empty())
      throw std::invalid_argument("--data: the default text " + *name + " is not there; give "
                                  "--data FILE");
    std::sort(files.begin(), files.end());
  } else {
    *name = file;
    files.push_back(file);
  }
  std::vector<uint8_t> all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::invalid_argument("--data " + f.string() + ": cannot read the file");
    all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return all;
}

GptJob::GptJob(PodConfig cfg, GptJobOptions o) : cfg_(std::move(cfg)), o_(std::move(o)) {
  const Topology& topo = cfg_.params.topo;
  const int P = topo.num_chips();
  int model = 1;
  mesh_text_ = "data=" + std::to_string(P);
  if (!o_.mesh.empty()) {
    const Mesh mesh =
        mesh_without_unit_axes(parse_train_mesh(o_.mesh, topo, {"data", "model", "stage"}));
    for (const MeshAxis& ax : mesh.axes) {
      if (ax.name == "model") model = ax.size;
      if (ax.name == "stage") stages_ = ax.size;
    }
    if (model > 1 || stages_ > 1) mesh_text_ = mesh.text();
  }
  const int data = P / model / stages_;
  if (o_.global_batch % static_cast<std::size_t>(data) != 0)
    throw std::invalid_argument("--batch " + std::to_string(o_.global_batch) +
                                ": the global batch must split evenly over the " +
                                std::to_string(data) + " data-parallel ranks");
  pipelined_ = stages_ > 1 || o_.microbatches > 1 || !o_.stages.empty();
  if (pipelined_) {  // the pipeline's flags, each error naming its flag, the value and the rule
    schedule_ = parse_pipe_schedule(o_.schedule);
    const std::size_t per_rank = o_.global_batch / static_cast<std::size_t>(data);
    if (o_.microbatches < 1 || per_rank % o_.microbatches != 0)
      throw std::invalid_argument("--microbatches " + std::to_string(o_.microbatches) +
                                  ": must divide the " + std::to_string(per_rank) +
                                  " windows of a data rank's batch");
    check_pipeline(o_.layers, stages_, static_cast<int>(o_.microbatches), schedule_, o_.stages);
  }
  spec_.layers = o_.layers;
  spec_.d_model = o_.d_model;
  spec_.heads = o_.heads;
  spec_.seq = o_.seq;
  spec_.batch = o_.global_batch / static_cast<std::size_t>(data);
  spec_.data = data;
  spec_.model = model;
  spec_.lanes = chip_shape(cfg_.params.variant).cols;
  spec_.microbatches = pipelined_ ? o_.microbatches : 1;
  spec_.lr = o_.lr;
  spec_.warmup = o_.warmup;
  spec_.weight_decay = o_.weight_decay;
  check_gpt_chip_spec(spec_);
  if (o_.text.size() < spec_.seq + 1)
    throw std::invalid_argument("--data " + o_.text_name + ": " + std::to_string(o_.text.size()) +
                                " bytes, shorter than one window of seq + 1 = " +
                                std::to_string(spec_.seq + 1));
  if (o_.trace_steps && o_.trace_steps->second > o_.steps)
    throw std::invalid_argument("--trace-steps " + std::to_string(o_.trace_steps->first) + ":" +
                                std::to_string(o_.trace_steps->second) + ": the run has " +
                                std::to_string(o_.steps) + " steps");
}

std::string GptJob::model_text() const {
  return "GPT " + std::to_string(spec_.layers) + " layers d " + std::to_string(spec_.d_model) +
         " " + std::to_string(spec_.heads) + " heads S " + std::to_string(spec_.seq);
}

std::string GptJob::title() const {
  const Topology& topo = cfg_.params.topo;
  const std::string kind =
      pipelined_ ? std::string(spec_.model > 1 ? "data x tensor x " : "") + "pipeline-parallel (" +
                       pipe_schedule_text(schedule_) + ", " + std::to_string(o_.microbatches) +
                       " micro-batches)"
                 : std::string(spec_.model > 1 ? "data x tensor parallel" : "data-parallel");
  return kind + " training of a " + model_text() + " on " + topo.name() + " (" +
         std::to_string(topo.num_chips()) + " chips " + cfg_.params.variant + ", mesh " +
         mesh_text_ + "), global batch " + std::to_string(o_.global_batch) + ", " +
         std::to_string(o_.steps) + " steps, AdamW lr " + o_.lr_text;
}

namespace {

// What a GPT run gathers over its steps.
struct GptRunLog {
  std::vector<TrainStepRecord> steps;
  std::vector<ChipCounters> total;
  std::vector<TraceEvent> trace;  // the traced steps' timeline
  std::vector<int32_t> tokens;    // every step's windows
  std::vector<double> op_cycles;  // per phase (op kind), summed over the steps
  std::vector<std::string> op_names;
  uint64_t cycles = 0, mismatched = 0, compared = 0, load = 0, macs = 0;
  std::vector<GptParams> final_shards;  // data rank 0's chips, by model rank
  TrainPipelineResult pipeline;         // a pipelined run's measurements (mean over the steps)
};

// The step's chips against the golden: the values (parameters, moments, loss partials) that
// differ, and how many were compared.
std::size_t step_mismatches(GptTrainer& tr, const GptGolden& golden, const GptStepRun& run,
                            const GptStepResult& g, int chips, uint64_t* compared) {
  std::size_t bad = 0;
  for (int c = 0; c < chips; ++c) {
    bad += mismatches(tr.read_params(c), golden.params(c)) +
           mismatches(tr.read_moment1(c), golden.moment1(c)) +
           mismatches(tr.read_moment2(c), golden.moment2(c));
    const std::vector<float>& want = g.loss_parts[static_cast<std::size_t>(c)];
    for (std::size_t b = 0; b < want.size(); ++b)
      bad += f32_bits(want[b]) != f32_bits(run.loss_parts.at(static_cast<std::size_t>(c)).at(b));
    for (const GptTensor& t : golden.params(c)) *compared += 3 * t.v.size();
  }
  return bad;
}

// One step's record: the profile, the hidden fraction and the op kinds' cycles into the log.
TrainStepRecord step_record(const GptStepRun& run, const std::vector<TraceEvent>& ev,
                            uint64_t peak, int chips, GptRunLog& log) {
  TrainStepRecord rec;
  rec.loss = run.loss;
  rec.cycles = run.prog.run.cycles;
  rec.profile = make_profile(run.prog.chip_delta, run.prog.run.cycles, log.macs, peak);
  TrainStepRun tsr;
  tsr.prog = run.prog;
  tsr.program = run.program;
  rec.hidden = allreduce_hidden_fraction(tsr, ev);
  const std::vector<double> busy = phase_busy(run.program, ev, chips);
  log.op_cycles.resize(busy.size(), 0.0);
  for (std::size_t i = 0; i < busy.size(); ++i) {
    log.op_cycles[i] += busy[i];
    if (i >= log.op_names.size()) log.op_names.push_back(run.program.phases()[i].name);
  }
  for (std::size_t c = 0; c < log.total.size(); ++c)
    for (unsigned i = 0; i < kNumChipStats; ++i) log.total[c].v[i] += run.prog.chip_delta[c].v[i];
  log.cycles += rec.cycles;
  return rec;
}

void fill_gpt_report(Report& rep, const GptSpec& sp, const GptJobOptions& o,
                     const std::string& mesh, uint64_t hbm, const GptRunLog& log, bool pass,
                     uint64_t peak) {
  const std::size_t n = log.steps.size();
  ReportGroup& tg = rep.group("train");
  tg.field("model", "gpt");
  tg.metric("layers", static_cast<uint64_t>(sp.layers), "", "transformer blocks");
  tg.metric("d_model", static_cast<uint64_t>(sp.d_model), "", "width");
  tg.metric("heads", static_cast<uint64_t>(sp.heads), "", "attention heads");
  tg.metric("seq", static_cast<uint64_t>(sp.seq), "", "tokens per window");
  tg.metric("vocab", static_cast<uint64_t>(sp.vocab), "", "bytes");
  tg.metric("global_batch", static_cast<uint64_t>(sp.global_batch()), "", "windows per step");
  tg.metric("batch_per_chip", static_cast<uint64_t>(sp.batch), "", "windows per data rank");
  tg.metric("steps", static_cast<uint64_t>(n), "", "AdamW steps");
  tg.metric("lr", static_cast<double>(sp.lr), "", "learning rate");
  tg.metric("warmup", static_cast<uint64_t>(sp.warmup), "", "steps of linear warmup");
  tg.metric("weight_decay", static_cast<double>(sp.weight_decay), "", "decoupled, matrices");
  tg.metric("seed", o.seed, "", "init and windows");
  tg.field("data", o.text_name);
  tg.metric("data_bytes", static_cast<uint64_t>(o.text.size()), "bytes", "the text");
  tg.field("mesh", mesh);
  tg.metric("hbm_bytes_per_chip", hbm, "bytes", "the step's buffers");
  tg.metric("macs_per_step", log.macs, "", "the model's multiply-adds of a step, all chips");
  if (n) {
    tg.metric("loss_first", log.steps.front().loss, "", "loss of step 0", true);
    tg.metric("loss_last", log.steps.back().loss, "", "loss of the last step", true);
  }
  rep.field("steps", train_steps_json(log.steps));
  rep.metric("cycles", log.cycles, "cycles", "all steps (the programs), pod cycles", true);
  rep.metric("cycles_per_step", n ? log.cycles / n : 0, "cycles", "mean over the steps", true);
  rep.metric("load_cycles", log.load, "cycles", "parameters in (0: backdoor)");
  double hidden = 0;
  for (const TrainStepRecord& st : log.steps) hidden += st.hidden;
  rep.metric("allreduce_hidden_fraction", n ? hidden / static_cast<double>(n) : 0.0,
             "fraction", "of the gradient all-reduces' time, other work in flight too", true);
  report_profile(rep, log.total, log.cycles, log.macs * n, peak);
  Json ops = Json::array();
  for (std::size_t i = 0; i < log.op_cycles.size(); ++i) {
    const double per_step = n ? log.op_cycles[i] / static_cast<double>(n) : 0.0;
    ops.push_back(Json::object(
        {{"op", log.op_names[i]},
         {"cycles_per_step", per_step},
         {"fraction", n && log.cycles ? per_step * static_cast<double>(n) /
                                            static_cast<double>(log.cycles)
                                      : 0.0}}));
  }
  rep.field("ops", ops);
  if (log.pipeline.on) fill_pipeline_report(rep, log.pipeline);
  rep.group("golden")
      .metric("verdict", pass ? "pass" : "fail", "", "every step: parameters, moments, loss",
              true)
      .metric("outputs", log.compared, "", "parameters and moments compared (all chips, steps)")
      .metric("mismatches", log.mismatched, "", "values that differ from the golden", true);
}

void save_gpt_run(const std::string& dir, const GptSpec& sp, const GptJobOptions& o,
                  const std::string& mesh, const GptParams& init, const GptRunLog& log) {
  const std::size_t n = log.steps.size();
  std::filesystem::create_directories(dir);
  write_npy_i32(dir + "/tokens.npy", log.tokens, {n, sp.global_batch(), sp.seq + 1});
  save_params(dir + "/init", init);
  save_params(dir + "/final", gpt_unshard(sp, log.final_shards));
  std::vector<float> losses;
  for (const TrainStepRecord& st : log.steps) losses.push_back(static_cast<float>(st.loss));
  write_npy_f32(dir + "/loss.npy", losses, {losses.size()});
  const Json opt = Json::object({{"name", "adamw"},
                                 {"lr", static_cast<double>(sp.lr)},
                                 {"warmup", static_cast<uint64_t>(sp.warmup)},
                                 {"weight_decay", static_cast<double>(sp.weight_decay)},
                                 {"beta1", static_cast<double>(sp.beta1)},
                                 {"beta2", static_cast<double>(sp.beta2)},
                                 {"eps", static_cast<double>(sp.eps)}});
  write_json_file(dir + "/train.json",
                  Json::object({{"model", "gpt"},
                                {"layers", static_cast<uint64_t>(sp.layers)},
                                {"d_model", static_cast<uint64_t>(sp.d_model)},
                                {"heads", static_cast<uint64_t>(sp.heads)},
                                {"seq", static_cast<uint64_t>(sp.seq)},
                                {"vocab", static_cast<uint64_t>(sp.vocab)},
                                {"global_batch", static_cast<uint64_t>(sp.global_batch())},
                                {"steps", static_cast<uint64_t>(n)},
                                {"seed", o.seed},
                                {"mesh", mesh},
                                {"optimizer", opt},
                                {"numerics", "docs/training.md"}}));
}

}  // namespace

void GptJob::run(const EngineOptions& eng, Report& rep) {
  EngineOptions quiet_eng = eng;  // the job writes the timeline of its traced steps itself
  quiet_eng.trace.clear();
  with_engine(quiet_eng, cfg_.params, cfg_.chip.clock_ghz, [&](HostPort& h) {
    const MachineInfo mi = h.info();
    const int P = mi.num_chips();
    GptTrainOptions to;
    to.backdoor = o_.backdoor;
    if (spec_.model > 1 || stages_ > 1) to.mesh = parse_mesh(mesh_text_);
    if (pipelined_) {
      to.stages_text = o_.stages;
      to.microbatches = o_.microbatches;
      to.schedule = schedule_;
    }
    GptTrainer tr(h, spec_, to);
    const GptSpec& sp = tr.spec();
    const GptParams init = gpt_init(sp, o_.seed);
    GptGolden golden(sp, init);
    GptRunLog log;
    if (pipelined_) {
      TrainPipelineResult& pr = log.pipeline;
      pr.on = true;
      pr.schedule = pipe_schedule_text(schedule_);
      pr.microbatches = o_.microbatches;
      pr.stages = stages_;
      pr.bubble_formula =
          pipeline_bubble_formula(schedule_, stages_, static_cast<int>(o_.microbatches));
      pr.bubble_formula_of_ideal =
          pipeline_bubble_formula_of_ideal(schedule_, stages_, static_cast<int>(o_.microbatches));
      pr.bubble_formula_text = pipeline_bubble_formula_text(schedule_);
    }
    log.load = tr.load_params(init);
    log.macs = tr.step_macs_per_chip() * static_cast<uint64_t>(P);
    log.total.assign(static_cast<std::size_t>(P), ChipCounters{});
    TraceOptions topt;
    topt.enabled = true;  // the hidden fraction and the op table come from the timeline
    h.set_trace(topt);
    const uint64_t peak = peak_macs_per_cycle(mi.shape.rows, mi.shape.cols);
    const std::size_t from = o_.trace_steps ? o_.trace_steps->first : 0;
    const std::size_t to_step = !eng.trace.empty() ? (o_.trace_steps ? o_.trace_steps->second : 1) : 0;
    if (o_.table && !eng.check) print_train_table_header();
    const uint64_t c0 = h.cycle();
    for (std::size_t s = 0; s < o_.steps; ++s) {
      const std::vector<int32_t> win = gpt_windows(sp, o_.text, o_.seed, s);
      log.tokens.insert(log.tokens.end(), win.begin(), win.end());
      if (progress_)
        h.progress = [&, s](uint64_t) {
          progress_({h.cycle() - c0, s, o_.steps, "",
                     "step " + std::to_string(s + 1) + "/" + std::to_string(o_.steps)});
        };
      const GptStepRun run = tr.step(win);
      h.progress = nullptr;
      const std::vector<TraceEvent> ev = h.take_trace();
      if (s >= from && s < to_step) log.trace.insert(log.trace.end(), ev.begin(), ev.end());
      const GptStepResult g = golden.step(win, tr.golden_data_reduce(), tr.golden_model_reduce());
      const std::size_t bad = step_mismatches(tr, golden, run, g, sp.chips(), &log.compared);
      if (pipelined_) add_pipeline_stats(&log.pipeline.stats, tr.measure(ev));
      log.mismatched += bad;
      TrainStepRecord rec = step_record(run, ev, peak, P, log);
      rec.golden_pass = bad == 0 && run.loss == g.loss;
      pass_ = pass_ && rec.golden_pass;
      log.steps.push_back(rec);
      if (o_.table && !eng.check) print_train_table_row(s, rec);
    }
    h.set_trace(TraceOptions{});
    divide_pipeline_stats(&log.pipeline.stats, log.steps.size());
    if (!eng.trace.empty()) {
      write_trace(eng.trace, log.trace, mi, cfg_.chip.clock_ghz);
      rep.field("trace", eng.trace);
    }
    add_pod(rep, cfg_, mi, eng);
    fill_gpt_report(rep, sp, o_, mesh_text_, tr.hbm_bytes_per_chip(), log, pass_, peak);
    if (!o_.save.empty()) {
      log.final_shards.assign(static_cast<std::size_t>(sp.model), {});
      for (int c = 0; c < sp.chips(); ++c)  // the golden's chips (each from its stages' chips)
        if (sp.data_rank_of(c) == 0)
          log.final_shards[static_cast<std::size_t>(sp.model_rank_of(c))] = tr.read_params(c);
      save_gpt_run(o_.save, sp, o_, mesh_text_, init, log);
      rep.field("save", o_.save);
    }
  });
}

namespace {

// A byte as the text shows it: printable ASCII as is, newline as \n, others as \xNN.
std::string shown(int32_t b) {
  if (b == '\n') return "\\n";
  if (b >= 32 && b < 127 && b != '\\') return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(b));
  return buf;
}

}  // namespace

GptJobOptions gpt_job_options(const GptGiven& g, const PodConfig& cfg,
                              const std::string& config_path, const std::string& docs_dir,
                              const std::function<std::string(const std::string&)>& name) {
  TrainSettings ts = cfg.train;
  if (ts.model != "gpt") ts = TrainSettings{};
  // A count: given (in the range of train.KEY), else the config's key, else the default.
  auto pick = [&](const std::optional<uint64_t>& given, const char* key, uint64_t from_config,
                  uint64_t def) -> uint64_t {
    if (!given) return ts.has(key) ? from_config : def;
    const ConfigKey& k = config_keys().at(std::string("train.") + key);
    if (*given < k.lo || *given > k.hi)
      throw std::invalid_argument(name(key) + " " + std::to_string(*given) + ": must be in " +
                                  std::to_string(k.lo) + ".." + std::to_string(k.hi));
    return *given;
  };
  GptJobOptions o;
  o.mesh = g.mesh ? *g.mesh : ts.mesh;
  o.stages = g.stages ? *g.stages : ts.stages;
  o.schedule = g.schedule ? *g.schedule : ts.has("schedule") ? ts.schedule : o.schedule;
  o.microbatches = pick(g.microbatches, "microbatches", ts.microbatches, o.microbatches);
  if (g.layers || ts.has("layers")) {
    const std::vector<std::size_t> layers = g.layers ? *g.layers : ts.layers;
    if (layers.size() != 1)
      throw std::invalid_argument(name("layers") + ": the GPT takes one value, its number of "
                                  "blocks");
    o.layers = layers[0];  // at least 1: GptSpec::validate
  }
  // The defaults: GptJobOptions' own (the tiny model).
  o.d_model = pick(g.d_model, "d_model", ts.d_model, o.d_model);
  o.heads = pick(g.heads, "heads", ts.heads, o.heads);
  o.seq = pick(g.seq, "seq", ts.seq, o.seq);
  o.global_batch = pick(g.batch, "batch", ts.batch, o.global_batch);
  o.steps = pick(g.steps, "steps", ts.steps, o.steps);
  o.seed = pick(g.seed, "seed", ts.seed, o.seed);
  o.warmup = pick(g.warmup, "warmup", ts.warmup, o.warmup);
  const double lr = g.lr ? *g.lr : ts.has("lr") ? ts.lr : std::stod(o.lr_text);
  if (!lr_in_range(lr))
    throw std::invalid_argument((g.lr ? name("lr") : config_path + ": key 'train.lr'") + ": " +
                                real_text(lr) + ": " + lr_rule());
  o.lr = static_cast<float>(lr);
  o.lr_text = real_text(lr);
  const double wd = g.weight_decay ? *g.weight_decay : ts.weight_decay;
  const ConfigKey& wk = config_keys().at("train.weight_decay");
  if (!(wd >= wk.real_lo && wd <= wk.real_hi))
    throw std::invalid_argument((g.weight_decay ? name("weight_decay") : config_path +
                                 ": key 'train.weight_decay'") + ": " + real_text(wd) +
                                ": must be in " + real_text(wk.real_lo) + ".." +
                                real_text(wk.real_hi));
  o.weight_decay = static_cast<float>(wd);
  o.text = gpt_read_text(g.data ? *g.data : ts.data, docs_dir, &o.text_name);
  return o;
}

GptGenerate::GptGenerate(PodConfig cfg, GptGenerateOptions o)
    : cfg_(std::move(cfg)), o_(std::move(o)) {
  const std::string tj = o_.load + "/train.json";
  std::ifstream in(tj);
  if (!in) throw std::invalid_argument("--load " + o_.load + ": no train.json there (a run "
                                       "saved by tpusim train --model gpt --save DIR)");
  Json j;
  try {
    in >> j;
    if (j.value("model", "") != "gpt")
      throw std::invalid_argument("not a GPT run (model " + j.value("model", "?") + ")");
    spec_.layers = j.at("layers").get<std::size_t>();
    spec_.d_model = j.at("d_model").get<std::size_t>();
    spec_.heads = j.at("heads").get<std::size_t>();
    spec_.seq = j.at("seq").get<std::size_t>();
    spec_.vocab = j.at("vocab").get<std::size_t>();
  } catch (const std::exception& e) {
    throw std::invalid_argument(tj + ": " + e.what());
  }
  spec_.lanes = chip_shape(cfg_.params.variant).cols;
  check_gpt_chip_spec(spec_);
  if (o_.prompt.empty()) throw std::invalid_argument("--prompt: at least one byte");
  params_ = gpt_zero_params(spec_);
  for (GptTensor& t : params_) {
    const std::string f = o_.load + "/final/" + t.name + ".npy";
    NpyArray a;
    try {
      a = read_npy(f);
    } catch (const std::exception& e) {
      throw std::invalid_argument("--load " + o_.load + ": " + e.what());
    }
    if (a.elements() != t.v.size() || a.dtype != "<f4")
      throw std::invalid_argument(f + ": " + std::to_string(a.elements()) + " values of " +
                                  a.dtype + ", the model's " + t.name + " is " +
                                  std::to_string(t.v.size()) + " float32");
    t.v = a.as_f32();
  }
}

std::string GptGenerate::title() const {
  return "greedy decoding of " + std::to_string(o_.tokens) + " bytes by a GPT " +
         std::to_string(spec_.layers) + " layers d " + std::to_string(spec_.d_model) + " (" +
         o_.load + ") on chip 0 of " + cfg_.params.topo.name() + ", keys and values cached in HBM";
}

void GptGenerate::run(const EngineOptions& eng, Report& rep) {
  with_engine(eng, cfg_.params, cfg_.chip.clock_ghz, [&](HostPort& h) {
    GptDecoder dec(h, spec_, params_, 0);
    bytes_.clear();
    std::vector<int32_t> seq;
    for (char c : o_.prompt) seq.push_back(static_cast<unsigned char>(c));
    const std::size_t keep = gpt_decode_keep(spec_.seq);
    uint64_t cycles = 0, mismatches = 0, restarts = 0, fed = 0, programs = 0;
    uint64_t one_cycles = 0, one_programs = 0;  // the programs that feed one token
    std::size_t w0 = 0, end = 0;  // the cache holds seq[w0 .. end), at most the context
    GptDecoder::Step st;
    // Feeds seq[end .. e) in one program, each row's logits checked against the golden's forward
    // over the window; when the window would pass the context it restarts with the last `keep`
    // bytes (docs/training.md, "Generating text").
    auto feed_to = [&](std::size_t e) {
      if (e - w0 > spec_.seq) {
        w0 = end = e - keep;
        dec.restart();
        ++restarts;
      }
      const auto at = [&](std::size_t i) { return seq.begin() + static_cast<std::ptrdiff_t>(i); };
      st = dec.feed(std::vector<int32_t>(at(end), at(e)));
      cycles += st.cycles;
      ++programs;
      fed += e - end;
      if (e - end == 1) {
        one_cycles += st.cycles;
        ++one_programs;
      }
      const std::vector<float> want = gpt_logits(spec_, params_, std::vector<int32_t>(at(w0), at(e)));
      const std::size_t V = spec_.vocab;
      for (std::size_t k = 0; k < st.logits.size(); ++k)
        mismatches += f32_bits(st.logits[k]) != f32_bits(want[(end - w0) * V + k]);
      end = e;
    };
    std::string text;
    feed_to(seq.size());  // the prompt
    for (std::size_t n = 0; n < o_.tokens; ++n) {
      const float* last = st.logits.data() + st.logits.size() - spec_.vocab;
      int32_t best = 0;
      for (std::size_t k = 1; k < spec_.vocab; ++k)
        if (last[k] > last[best]) best = static_cast<int32_t>(k);
      seq.push_back(best);
      text += shown(best);
      bytes_ += static_cast<char>(best);
      if (n + 1 < o_.tokens) feed_to(seq.size());  // the last one's logits are not needed
    }
    pass_ = mismatches == 0;
    std::string prompt;
    for (char c : o_.prompt) prompt += shown(static_cast<unsigned char>(c));
    if (!o_.quiet && !eng.check) {
      std::printf("%s%s\n", prompt.c_str(), text.c_str());
      std::fflush(stdout);
    }
    rep.field("load", o_.load);
    rep.field("prompt", prompt);
    rep.field("text", text);
    rep.metric("tokens", static_cast<uint64_t>(o_.tokens), "", "bytes generated");
    rep.metric("cycles", cycles, "cycles", "every token's program, prompt included", true);
    rep.metric("tokens_fed", fed, "", "tokens through the model: the prompt, the generated bytes "
               "but the last, and the windows fed again after a restart");
    rep.metric("programs", programs, "", "one per feed: the prompt and each restarted window at "
               "once (a prefill), then one per generated byte");
    rep.metric("restarts", restarts, "", "times the full cache restarted with the last " +
               std::to_string(keep) + " bytes of the context");
    rep.metric("prefill_cycles", cycles - one_cycles, "cycles", "the programs that feed more than "
               "one token (the prompt, the restarted windows)", true);
    rep.metric("cycles_per_token", one_programs ? static_cast<double>(one_cycles) /
                                                      static_cast<double>(one_programs) : 0.0,
               "cycles", "mean over the programs that feed one token", true);
    rep.group("golden")
        .metric("verdict", pass_ ? "pass" : "fail", "", "every token's logits against the "
                "golden's forward over the window so far", true)
        .metric("mismatches", mismatches, "", "logits that differ", true);
  });
}

}  // namespace tpu
