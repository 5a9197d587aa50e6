// `tpusim train`: data-parallel SGD training of a multilayer perceptron on the pod, every step
// checked bit for bit against the golden (docs/training.md).
#include "train_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "cli_util.h"
#include "npy.h"
#include "pod_cli.h"
#include "profile.h"
#include "shard_plan.h"
#include "tpu/perf.h"
#include "trace.h"
#include "train_step.h"

namespace tpu {

const char* kTrainUsage =
    "usage: tpusim train [options]          data-parallel SGD of an MLP on the pod, each step\n"
    "                                       checked bit for bit against the golden\n"
    "  --config FILE        pod configuration (default configs/pod_2x2.yaml)\n"
    "  --mesh AXES          data=D,model=M over the torus dimensions, x first: M > 1 splits\n"
    "                       the hidden layer of a 2-layer MLP over M chips (tensor parallel);\n"
    "                       default data=<chips> (the config's mesh: is for tpusim shard)\n"
    "  (each of --layers, --batch, --steps, --lr, --seed, --fresh-batches, --grad-pieces\n"
    "   overrides the key of the config's train: section, which overrides the default)\n"
    "  --layers W0,W1,..    widths, inputs first (default 64,128,32; multiples of 32)\n"
    "  --batch N            global batch, split evenly over the chips (default 256)\n"
    "  --steps S            SGD steps (default 20)\n"
    "  --lr LR              learning rate (default 0.5)\n"
    "  --seed S             data, teacher and initial weights (default 1)\n"
    "  --fresh-batches      a new batch every step (default: the same batch)\n"
    "  --grad-pieces P      the first layer's gradient all-reduced in P pieces (default 4)\n"
    "  --save DIR           x.npy, y.npy, init_/final_w{i}.npy, init_/final_b{i}.npy, loss.npy,\n"
    "                       train.json: the run, to replay in numpy or JAX\n"
    "  --load host|backdoor data and weights in through the host ports (default) or the backdoor\n"
    "  --trace FILE         the timeline of the steps --trace-steps picks (Chrome trace-event\n"
    "                       JSON: ui.perfetto.dev), each command labelled with its phase\n"
    "  --trace-steps A:B    steps [A, B) (default 0:1)\n"
    "  --engine systemc|cpp --threads N --waves-chips LIST --json FILE --quiet\n"
    "  --watchdog CYCLES    cycles without progress before the run stops as hung (exit 3)\n";

namespace {

Opts parse_train(const std::vector<std::string>& args) {
  Opts opt = parse_options(
      args,
      {"--config", "--mesh", "--layers", "--batch", "--steps", "--lr", "--seed", "--grad-pieces",
       "--save", "--load", "--trace", "--trace-steps", "--engine", "--threads", "--waves-chips", "--json"},
      {"--fresh-batches", "--quiet"}, kTrainUsage);
  if (opt.count("--trace-steps") && !opt.count("--trace"))
    throw std::invalid_argument("--trace-steps needs --trace FILE");
  if (opt.count("--save")) {  // checked before the run, not after it
    const std::filesystem::path d(opt.at("--save"));
    if (std::filesystem::exists(d) && !std::filesystem::is_directory(d))
      throw std::invalid_argument("--save " + d.string() + ": exists and is not a directory");
    if (!d.parent_path().empty() && !std::filesystem::is_directory(d.parent_path()))
      throw std::invalid_argument("--save " + d.string() + ": directory '" +
                                  d.parent_path().string() + "' does not exist");
  }
  return opt;
}

std::vector<std::size_t> parse_layers(const std::string& v) {
  std::vector<std::size_t> w;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    w.push_back(static_cast<std::size_t>(parse_uint("--layers", item, 1, 65536)));
  if (w.size() < 2)
    throw std::invalid_argument("--layers " + v + ": need at least two widths (inputs, outputs)");
  return w;
}

double parse_lr(const std::string& v) {
  std::size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(d > 0) || d > 1e6)
    throw std::invalid_argument("--lr " + v + ": must be a number in (0, 1e6]");
  return d;
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

int cmd_train(const std::vector<std::string>& args) {
  const Opts opt = parse_train(args);
  const std::string config = get(opt, "--config", source_file("configs/pod_2x2.yaml"));
  const PodConfig cfg = load_pod_config(config);
  const Topology& topo = cfg.params.topo;
  const int P = topo.num_chips();
  // A flag, else the config's train: key, else the default.
  auto setting = [&](const char* flag, const char* key, const char* def) {
    if (opt.count(flag)) return opt.at(flag);
    return cfg.train.count(key) ? cfg.train.at(key) : std::string(def);
  };
  // Data parallel over every chip, or data x model axes (tensor parallel) from --mesh.
  int model = 1;
  std::string mesh_text = "data=" + std::to_string(P);
  if (opt.count("--mesh")) {
    Mesh mesh;
    try {
      mesh = parse_mesh(opt.at("--mesh"));
      for (const MeshAxis& a : mesh.axes) {
        if (a.name != "data" && a.name != "model")
          throw std::invalid_argument("axis '" + a.name + "': the axes are 'data' and 'model'");
        (void)mesh_axis_dims(topo, mesh, a.name);
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--mesh " + opt.at("--mesh") + ": " + e.what());
    }
    for (const MeshAxis& a : mesh.axes)
      if (a.name == "model") model = a.size;
    mesh_text = mesh.text();
  }
  const int data_ways = P / model;
  MlpSpec spec;
  spec.widths = parse_layers(setting("--layers", "layers", "64,128,32"));
  const std::size_t global = parse_uint("--batch", setting("--batch", "batch", "256"), 1, 1u << 24);
  if (global % static_cast<std::size_t>(data_ways) != 0)
    throw std::invalid_argument("--batch " + std::to_string(global) + ": the global batch must "
                                "split evenly over the " + std::to_string(data_ways) +
                                " data-parallel ranks");
  spec.batch = global / static_cast<std::size_t>(data_ways);
  spec.lr = static_cast<float>(parse_lr(setting("--lr", "lr", "0.5")));
  const std::size_t steps = parse_uint("--steps", setting("--steps", "steps", "20"), 1, 100000);
  const uint64_t seed = parse_uint("--seed", setting("--seed", "seed", "1"), 0, ~0ull);
  const bool fresh = opt.count("--fresh-batches") > 0 || cfg.train.count("fresh_batches") > 0;
  TrainOptions to;
  to.mesh = opt.count("--mesh") ? mesh_text : "";
  to.grad_pieces = parse_uint("--grad-pieces", setting("--grad-pieces", "grad_pieces", "4"), 1, 64);
  const std::string load = get(opt, "--load", "host");
  if (load != "host" && load != "backdoor")
    throw std::invalid_argument("--load " + load + ": must be 'host' or 'backdoor'");
  to.backdoor = load == "backdoor";
  std::size_t t0 = 0, t1 = 1;
  if (opt.count("--trace-steps")) {
    const std::string v = opt.at("--trace-steps");
    const auto colon = v.find(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("--trace-steps " + v + ": must be FROM:TO (steps)");
    t0 = parse_uint("--trace-steps FROM", v.substr(0, colon), 0, steps - 1);
    t1 = parse_uint("--trace-steps TO", v.substr(colon + 1), t0 + 1, steps);
  }

  std::string widths;
  for (std::size_t w : spec.widths) widths += (widths.empty() ? "" : "-") + std::to_string(w);
  Report rep(std::string(model > 1 ? "data x tensor parallel" : "data-parallel") +
             " training of an MLP " + widths + " on " + topo.name() + " (" +
             std::to_string(P) + " chips " + cfg.params.variant + ", mesh " + mesh_text +
             "), global batch " +
             std::to_string(global) + ", " + std::to_string(steps) + " steps, lr " +
             setting("--lr", "lr", "0.5"));
  rep.field("command", "train");
  bool pass = true;
  const auto wall0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("train " + widths + " on " + topo.name(), opt.count("--quiet") > 0);
    Opts pod_opt = opt;
    pod_opt.erase("--trace");
    with_pod(pod_opt, cfg.params, cfg.chip.clock_ghz, [&](HostPort& h) {
      const MachineInfo& mi = h.info();
      TrainRunOptions ro;
      ro.steps = steps;
      ro.seed = seed;
      ro.fresh_batches = fresh;
      ro.trace_from = t0;
      ro.trace_to = opt.count("--trace") ? t1 : 0;
      ro.progress = [&](std::size_t s, uint64_t cyc) {
        line.show("step " + std::to_string(s) + "/" + std::to_string(steps) + ": " +
                  std::to_string(cyc) + " cycles");
      };
      const bool quiet = opt.count("--quiet") > 0;
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
      if (opt.count("--trace")) {
        write_trace(opt.at("--trace"), r.trace, mi, cfg.chip.clock_ghz);
        rep.field("trace", opt.at("--trace"));
      }
      add_pod(rep, cfg, mi, opt);
      fill_train_report(rep, r, mi);
      rep.group("train").field("mesh", mesh_text);
      if (opt.count("--save")) {
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
        save_run(opt.at("--save"), r.spec, r.batches, r.init, r.final_params, losses, hyper);
        rep.field("save", opt.at("--save"));
      }
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  if (opt.count("--json")) rep.write(opt.at("--json"));
  std::fputs(rep.summary().c_str(), stdout);
  return pass ? 0 : 1;
}

}  // namespace tpu
