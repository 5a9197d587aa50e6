// `tpusim train`: data-parallel SGD training of a multilayer perceptron on the pod, every step
// checked bit for bit against the golden (docs/training.md).
#include "train_cmd.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "cli_util.h"
#include "config_keys.h"
#include "npy.h"
#include "pod_cli.h"
#include "profile.h"
#include "shard_plan.h"
#include "tpu/perf.h"
#include "trace.h"
#include "train_step.h"

namespace tpu {

namespace {

// The options of `tpusim train`. The settings a config's train: section also has are typed as
// the section is (TrainSettings): a flag that was given, else the config's key, else the
// default of the table of keys (config_keys(): train.*).
struct TrainArgs {
  PodOptions pod;
  std::string mesh;
  std::vector<std::size_t> layers;  // --layers W0,W1,.. (checked by list_of(uint_in))
  uint64_t batch = 0, steps = 0, seed = 0, grad_pieces = 0;
  double lr = 0;
  bool fresh_batches = false;
  std::string save, load = "host", trace_steps;
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

void save_run(const std::string& dir, const MlpSpec& spec, const std::vector<MlpData>& batches,
              const MlpParams& init, const MlpParams& final_p, const std::vector<float>& losses,
              const Json& hyper) {
  std::filesystem::create_directories(dir);
  const std::size_t N = spec.global_batch(), din = spec.widths.front(), dout = spec.widths.back();
  std::vector<float> x, y;
  for (const MlpData& d : batches) {
    for (bf16_t v : d.x) x.push_back(bf16_to_f32(v));
    y.insert(y.end(), d.t.begin(), d.t.end());
  }
  if (batches.size() == 1) {
    write_npy_f32(dir + "/x.npy", x, {N, din});
    write_npy_f32(dir + "/y.npy", y, {N, dout});
  } else {
    write_npy_f32(dir + "/x.npy", x, {batches.size(), N, din});
    write_npy_f32(dir + "/y.npy", y, {batches.size(), N, dout});
  }
  for (std::size_t l = 0; l < spec.layers(); ++l) {
    const std::size_t in = spec.widths[l], out = spec.widths[l + 1];
    const std::string i = std::to_string(l);
    write_npy_f32(dir + "/init_w" + i + ".npy", init[l].w, {in, out});
    write_npy_f32(dir + "/init_b" + i + ".npy", init[l].b, {out});
    write_npy_f32(dir + "/final_w" + i + ".npy", final_p[l].w, {in, out});
    write_npy_f32(dir + "/final_b" + i + ".npy", final_p[l].b, {out});
  }
  write_npy_f32(dir + "/loss.npy", losses, {losses.size()});
  write_json_report(dir + "/train.json", hyper);
}

}  // namespace

namespace {

int run_train(const TrainArgs& a) {
  const PodOptions& opt = a.pod;
  const std::string config = opt.config_path();
  const PodConfig cfg = load_pod_config(config);
  const Topology& topo = cfg.params.topo;
  const int P = topo.num_chips();
  // Data parallel over every chip, or data x model axes (tensor parallel) from --mesh.
  int model = 1;
  std::string mesh_text = "data=" + std::to_string(P);
  if (!a.mesh.empty()) {
    Mesh mesh;
    try {
      mesh = parse_mesh(a.mesh);
      for (const MeshAxis& ax : mesh.axes) {
        if (ax.name != "data" && ax.name != "model")
          throw std::invalid_argument("axis '" + ax.name + "': the axes are 'data' and 'model'");
      }
      check_mesh(topo, mesh);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--mesh " + a.mesh + ": " + e.what());
    }
    // An axis of size 1 splits nothing: data=4,model=1 is plain data parallel, data=1,model=4
    // is model=4 (the same programs, the same bits).
    mesh = mesh_without_unit_axes(mesh);
    for (const MeshAxis& ax : mesh.axes)
      if (ax.name == "model") model = ax.size;
    if (model > 1) mesh_text = mesh.text();  // else plain data parallel, as without --mesh
  }
  const int data_ways = P / model;
  // Each setting: its flag when given, else the config's train: key, else its default.
  const TrainSettings& ts = cfg.train;
  MlpSpec spec;
  spec.widths = opt.given("--layers") ? a.layers : ts.layers;
  if (spec.widths.size() < 2)
    throw std::invalid_argument("--layers " + widths_text(spec.widths, ",") +
                                ": need at least two widths (inputs, outputs)");
  const std::size_t global = opt.given("--batch") ? a.batch : ts.batch;
  if (global % static_cast<std::size_t>(data_ways) != 0)
    throw std::invalid_argument("--batch " + std::to_string(global) + ": the global batch must "
                                "split evenly over the " + std::to_string(data_ways) +
                                " data-parallel ranks");
  spec.batch = global / static_cast<std::size_t>(data_ways);
  const double lr = opt.given("--lr") ? a.lr : ts.lr;
  spec.lr = checked_lr(lr, opt.given("--lr") ? "--lr" : config + ": key 'train.lr'");
  const std::size_t steps = opt.given("--steps") ? a.steps : ts.steps;
  const uint64_t seed = opt.given("--seed") ? a.seed : ts.seed;
  const bool fresh = a.fresh_batches || ts.fresh_batches;
  TrainOptions to;
  to.mesh = model > 1 ? mesh_text : "";
  to.grad_pieces = opt.given("--grad-pieces") ? a.grad_pieces : ts.grad_pieces;
  to.backdoor = a.load == "backdoor";
  std::size_t t0 = 0, t1 = 1;
  if (!a.trace_steps.empty()) {
    std::tie(t0, t1) = cli::split_span(a.trace_steps);
    if (t1 > steps)
      throw std::invalid_argument("--trace-steps " + a.trace_steps + ": the run has " +
                                  std::to_string(steps) + " steps");
  }

  const std::string widths = widths_text(spec.widths, "-");
  Report rep(std::string(model > 1 ? "data x tensor parallel" : "data-parallel") +
             " training of an MLP " + widths + " on " + topo.name() + " (" +
             std::to_string(P) + " chips " + cfg.params.variant + ", mesh " + mesh_text +
             "), global batch " +
             std::to_string(global) + ", " + std::to_string(steps) + " steps, lr " +
             real_text(lr));
  rep.field("command", "train");
  bool pass = true;
  const auto wall0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("train " + widths + " on " + topo.name(), opt.quiet);
    PodOptions pod_opt = opt;
    pod_opt.trace.clear();
    with_pod(pod_opt, cfg.params, cfg.chip.clock_ghz, [&](HostPort& h) {
      const MachineInfo& mi = h.info();
      TrainRunOptions ro;
      ro.steps = steps;
      ro.seed = seed;
      ro.fresh_batches = fresh;
      ro.trace_from = t0;
      ro.trace_to = !opt.trace.empty() ? t1 : 0;
      ro.progress = [&](std::size_t s, uint64_t cyc) {
        line.show("step " + std::to_string(s) + "/" + std::to_string(steps) + ": " +
                  std::to_string(cyc) + " cycles");
      };
      const bool quiet = opt.quiet || opt.check;  // a check runs no step
      if (!quiet)
        std::printf("%5s %12s %10s %6s %8s %8s %8s %6s %7s %s\n", "step", "loss", "cycles", "mfu",
                    "compute", "comm", "memory", "idle", "ar_hid", "golden");
      ro.on_step = [&](std::size_t s, const TrainStepRecord& st) {
        if (quiet) return;
        const Breakdown& b = st.profile.breakdown;
        std::printf("%5zu %12.6f %10llu %6.3f %8.3f %8.3f %8.3f %6.3f %7.3f %s\n", s, st.loss,
                    static_cast<unsigned long long>(st.cycles), st.profile.mfu, b.compute,
                    b.communication, b.memory, b.idle, st.hidden, st.golden_pass ? "pass" : "FAIL");
        std::fflush(stdout);
      };
      const TrainRunResult r = run_training(h, spec, to, ro);
      pass = r.pass();
      if (!opt.trace.empty()) {
        write_trace(opt.trace, r.trace, mi, cfg.chip.clock_ghz);
        rep.field("trace", opt.trace);
      }
      add_pod(rep, cfg, mi, opt);
      fill_train_report(rep, r, mi);
      rep.group("train").field("mesh", mesh_text);
      if (!a.save.empty()) {
        std::vector<float> losses;
        for (const TrainStepRecord& st : r.steps) losses.push_back(static_cast<float>(st.loss));
        Json hyper = Json::object();
        hyper["layers"] = rep.json()["train"]["layers"];
        hyper["global_batch"] = static_cast<uint64_t>(r.spec.global_batch());
        hyper["chips"] = static_cast<uint64_t>(P);
        hyper["steps"] = static_cast<uint64_t>(steps);
        hyper["lr"] = static_cast<double>(r.spec.lr);
        hyper["seed"] = seed;
        hyper["fresh_batches"] = fresh;
        hyper["loss"] = "mean over the global batch and the outputs of (prediction - y)^2";
        hyper["activation"] = "relu on every layer but the last";
        hyper["optimizer"] = "sgd: w = w + g * (-lr), two f32 roundings";
        hyper["numerics"] = "docs/training.md";
        save_run(a.save, r.spec, r.batches, r.init, r.final_params, losses, hyper);
        rep.field("save", a.save);
      }
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  if (!opt.json.empty()) rep.write(opt.json);
  std::fputs(rep.summary().c_str(), stdout);
  return pass ? 0 : 1;
}

// train.KEY's default and range in the table of keys, for its flag.
std::string train_default(const char* key) {
  return config_keys().at(std::string("train.") + key).def;
}
CLI::Validator train_uint_check(const char* key) {
  const ConfigKey& k = config_keys().at(std::string("train.") + key);
  return cli::uint_in(k.lo, k.hi);
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
  // Their ranges and defaults are the table's (config_keys(): train.*).
  cmd->add_option_function<std::string>(
         "--layers",
         [a](const std::string& v) {
           a->layers.clear();
           for (const std::string& item : cli::split_list(v))
             a->layers.push_back(static_cast<std::size_t>(std::stoull(item)));
         },
         "widths, inputs first (default " + train_default("layers") + "; multiples of 32)")
      ->type_name("W0,W1,..")
      ->check(cli::list_of(train_uint_check("layers")));
  cmd->add_option("--batch", a->batch,
                  "global batch, split evenly over the chips (default " + train_default("batch") +
                      ")")
      ->type_name("N")
      ->check(train_uint_check("batch"));
  cmd->add_option("--steps", a->steps, "SGD steps (default " + train_default("steps") + ")")
      ->type_name("S")
      ->check(train_uint_check("steps"));
  const ConfigKey& lr = config_keys().at("train.lr");
  cmd->add_option_function<std::string>(
         "--lr", [a](const std::string& v) { a->lr = std::strtod(v.c_str(), nullptr); },
         "learning rate (default " + lr.def + ")")
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
