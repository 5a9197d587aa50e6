// tpusim._core: the pybind11 module under the Python package `tpusim` (python/tpusim,
// docs/python.md). It runs the jobs of sw/jobs in-process, as the tpusim commands do: the config
// loaded by sw/config (from a file, or from a dict the package writes as YAML flow text), numpy
// arrays in and out, the report as its JSON text (the package json.loads it), the GIL released
// while the simulation runs and Ctrl-C checked from the jobs' progress callbacks. Errors: what the
// command line exits 2 for is ValueError with the same message; a hang or a chip error (exit 3) is
// tpusim.SimulationError (tpusim.HangError for a hang), both RuntimeErrors.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chip_config.h"
#include "chip_dut.h"
#include "collective_job.h"
#include "config_keys.h"
#include "engine.h"
#include "host_port.h"
#include "json.h"
#include "matmul_job.h"
#include "mxu_dut.h"
#include "report.h"
#include "shard_job.h"
#include "source_file.h"
#include "tpu/bf16.h"
#include "tpu/limits.h"
#include "gpt_job.h"
#include "train_job.h"

namespace py = pybind11;

namespace tpu {
namespace {

// Thrown out of a job's progress callback when Python has a signal's exception to raise
// (Ctrl-C: KeyboardInterrupt). Not a std::exception, so no handler of the jobs mistakes it for
// an error of the run; the unwinding frees the machine as any error does.
struct Interrupted {};

// The simulation errors the command line exits 3 for.
struct SimError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct SimHang : SimError {
  using SimError::SimError;
};

// Ctrl-C while the GIL is released: the jobs call their progress callbacks now and then (every
// 100 pod cycles: kPollCycles, 4096 chip cycles); at most every 50 ms of those, poll() takes the
// GIL and runs Python's signal handlers. An exception they raise (KeyboardInterrupt) is kept and
// the run unwinds with Interrupted; simulate() raises it again.
class SignalCheck {
 public:
  void poll() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(50)) return;
    last_ = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      error_ = std::make_shared<py::error_already_set>();
      throw Interrupted{};
    }
  }
  std::shared_ptr<py::error_already_set> error() const { return error_; }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::shared_ptr<py::error_already_set> error_;
};

// Runs f with the GIL released; its exceptions as the command line sorts them (exit 3: a
// SimulationError; exit 2, every other error: ValueError with the same message).
template <typename F>
void simulate(const SignalCheck& sc, F&& f) {
  try {
    py::gil_scoped_release nogil;
    f();
  } catch (const Interrupted&) {
    if (sc.error()) throw py::error_already_set(*sc.error());
    throw py::error_already_set();
  } catch (const HangError& e) {
    throw SimHang(e.what());
  } catch (const PodError& e) {
    throw SimError(e.what());
  } catch (const ChipRtlError& e) {
    throw SimError(e.what());
  } catch (const RtlError& e) {
    throw SimError(e.what());
  } catch (const py::error_already_set&) {
    throw;
  } catch (const std::exception& e) {  // ConfigError, NpyError, std::invalid_argument...
    throw py::value_error(e.what());
  }
}

// A config: the file at `path`, or YAML text (a dict, named "<config dict>" in messages), or the
// default file.
struct ConfigArg {
  std::optional<std::string> path, text;
};
constexpr const char* kDictName = "<config dict>";

PodConfig pod_config(const ConfigArg& c) {
  if (c.text) return load_pod_config_text(*c.text, kDictName);
  return load_pod_config(c.path ? *c.path : source_file("configs/pod_2x2.yaml"));
}

// An array's elements as bf16 bits: uint16 as bits, float32 rounded (f32_to_bf16: RNE, the
// CLI's rule for a float32 .npy). `name` and `rank`: what messages call it, its rank (1 or 2).
std::vector<uint16_t> bf16_of(const py::array& a, const std::string& name) {
  std::vector<uint16_t> v(static_cast<std::size_t>(a.size()));
  if (py::isinstance<py::array_t<uint16_t>>(a)) {
    auto c = py::array_t<uint16_t, py::array::c_style | py::array::forcecast>::ensure(a);
    std::memcpy(v.data(), c.data(), v.size() * 2);
  } else if (py::isinstance<py::array_t<float>>(a)) {
    auto c = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = f32_to_bf16(c.data()[i]);
  } else {
    throw py::value_error(name + ": dtype " + std::string(py::str(a.dtype())) +
                          ": give uint16 (bf16 bits) or float32 (rounded to bf16)");
  }
  return v;
}

// The words of an f32 array (float32 as bits; uint16 taken as bf16 bits and widened exactly).
std::vector<uint32_t> f32_words_of(const py::array& a, const std::string& name) {
  std::vector<uint32_t> v(static_cast<std::size_t>(a.size()));
  if (py::isinstance<py::array_t<float>>(a)) {
    auto c = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = f32_bits(c.data()[i]);
  } else if (py::isinstance<py::array_t<uint16_t>>(a)) {
    const std::vector<uint16_t> b = bf16_of(a, name);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = uint32_t{b[i]} << 16;
  } else {
    throw py::value_error(name + ": dtype " + std::string(py::str(a.dtype())) +
                          ": give float32 or uint16 (bf16 bits)");
  }
  return v;
}

// A 2-D operand's shape; `name`, `what`: "a", "A (M x K)".
std::pair<std::size_t, std::size_t> matrix_shape(const py::array& a, const std::string& name,
                                                 const std::string& what) {
  if (a.ndim() != 2)
    throw py::value_error(name + ": " + what + " must be a 2-D array, not of rank " +
                          std::to_string(a.ndim()));
  const auto r = static_cast<std::size_t>(a.shape(0)), c = static_cast<std::size_t>(a.shape(1));
  if (r == 0 || c == 0)
    throw py::value_error(name + ": " + what + " must have at least one row and column");
  return {r, c};
}

py::array_t<float> float_matrix(const std::vector<float>& v, std::size_t rows, std::size_t cols) {
  py::array_t<float> out(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(cols)});
  std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(float));
  return out;
}

// The pod's progress callback (SignalCheck::poll) every this many cycles of a run of the machine:
// a collective runs one program per round, a few hundred cycles each on small chips.
constexpr uint64_t kPollCycles = 100;

// What the pod commands' engine flags give (--engine, --threads, --waves-chips, --fault,
// --watchdog, --trace, --trace-cycles). The SystemC kernel elaborates one pod per process, so
// the module runs the pod on the C++ engine (the same bits and cycles).
EngineOptions engine_of(const std::string& engine, std::optional<unsigned> threads,
                        const std::vector<int>& waves, const std::vector<std::string>& faults,
                        std::optional<uint64_t> watchdog, const std::string& trace,
                        std::optional<std::pair<uint64_t, uint64_t>> trace_cycles) {
  if (engine != "cpp")
    throw py::value_error(
        "engine='" + engine +
        "': the Python module runs the pod on engine='cpp' only (the SystemC kernel elaborates "
        "one pod per process, and a Python session runs many; the C++ engine gives the same "
        "bits and cycles)");
  EngineOptions e;
  e.engine = engine;
  e.threads = threads ? *threads : std::max(1u, std::thread::hardware_concurrency());
  if (e.threads < 1 || e.threads > 256)
    throw py::value_error("threads=" + std::to_string(e.threads) + ": must be in 1..256");
  for (int c : waves)
    if (c < 0) throw py::value_error("waves: chip " + std::to_string(c) + " is not a chip");
  e.wave_chips = waves;
  e.faults = faults;
  if (watchdog && *watchdog > kWatchdogRange.hi)
    throw py::value_error("watchdog=" + std::to_string(*watchdog) + ": must be at most " +
                          std::to_string(kWatchdogRange.hi));
  e.watchdog = watchdog;
  if (trace_cycles && trace.empty()) throw py::value_error("trace_cycles needs trace");
  if (trace_cycles && trace_cycles->first >= trace_cycles->second)
    throw py::value_error("trace_cycles: A < B, as the command line's --trace-cycles A:B");
  e.trace = trace;
  e.trace_cycles = trace_cycles;
  e.progress_every = kPollCycles;
  return e;
}

// The engine arguments every pod function takes (the package passes them by name).
struct EngineArgs {
  std::string engine = "cpp";
  std::optional<unsigned> threads;
  std::vector<int> waves;
  std::vector<std::string> faults;
  std::optional<uint64_t> watchdog;
  std::string trace;
  std::optional<std::pair<uint64_t, uint64_t>> trace_cycles;

  EngineOptions options() const {
    return engine_of(engine, threads, waves, faults, watchdog, trace, trace_cycles);
  }
};

// matmul: (C as float32 M x N, the report's JSON text, pass). a and w None: random operands of
// m, k, n, seed, dist.
py::tuple run_matmul(const ConfigArg& config, const py::object& a, const py::object& w,
                     MatmulJobOptions o, const std::string& bias) {
  if (a.is_none() != w.is_none()) throw py::value_error("a and w: give both or neither");
  if (!a.is_none()) {
    const py::array aa = py::array::ensure(a), wa = py::array::ensure(w);
    if (!aa || !wa) throw py::value_error("a and w must be numpy arrays");
    const auto [m, k] = matrix_shape(aa, "a", "A (M x K)");
    const auto [kw, n] = matrix_shape(wa, "w", "W (K x N)");
    if (kw != k)
      throw py::value_error("w: W has " + std::to_string(kw) + " rows but a has K = " +
                            std::to_string(k) + " columns (rule: A is M x K and W is K x N)");
    o.m = m;
    o.k = k;
    o.n = n;
    o.a = bf16_of(aa, "a");
    o.w = bf16_of(wa, "w");
  }
  o.bias_file = bias;
  SignalCheck sc;
  std::string text;
  bool pass = false;
  std::vector<float> c;
  std::size_t m = 0, n = 0;
  simulate(sc, [&] {
    std::unique_ptr<MatmulJob> job;
    if (config.text)
      job =
          std::make_unique<MatmulJob>(load_chip_config_text(*config.text, kDictName), kDictName, o);
    else
      job = std::make_unique<MatmulJob>(
          config.path ? *config.path : source_file("configs/default.yaml"), o);
    job->run([&](uint64_t, uint64_t, const char*) { sc.poll(); });
    job->write_outputs();  // trace= (out= is not the module's: C is returned)
    pass = job->pass();
    c = job->c();
    m = job->m();
    n = job->n();
    text = json_text(job->take_report().json());
  });
  return py::make_tuple(float_matrix(c, m, n), text, pass);
}

// load='host' or 'backdoor' (the commands' --load): whether the backdoor moves the data.
bool backdoor_of(const std::string& load) {
  if (load != "host" && load != "backdoor")
    throw py::value_error("load='" + load + "': host or backdoor");
  return load == "backdoor";
}

// The per-chip arrays of a collective, as the words the job takes.
std::vector<std::vector<uint32_t>> collective_inputs(const py::list& x, DType dt) {
  std::vector<std::vector<uint32_t>> in;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const std::string name = "x[" + std::to_string(c) + "]";
    const py::array a = py::array::ensure(x[c]);
    if (!a) throw py::value_error(name + ": not a numpy array");
    if (a.ndim() != 1)
      throw py::value_error(name + ": one chip's buffer must be a 1-D array, not of rank " +
                            std::to_string(a.ndim()));
    if (dt == DType::kBf16) {
      std::vector<uint32_t> v;
      for (uint16_t b : bf16_of(a, name)) v.push_back(b);
      in.push_back(std::move(v));
    } else {
      in.push_back(f32_words_of(a, name));
    }
  }
  return in;
}

// A collective: (outputs per chip, the report's JSON text, pass, inputs per chip). x None: random
// inputs of `bytes` from `seed`; else one 1-D array per chip (bytes from their length).
py::tuple run_collective(const ConfigArg& config, const py::object& x, CollectiveJobOptions o,
                         bool bytes_given, const EngineArgs& ea) {
  const EngineOptions eng = ea.options();
  SignalCheck sc;
  std::string text;
  bool pass = false;
  std::vector<std::vector<uint32_t>> out, in;
  const std::size_t esz = o.dtype == DType::kBf16 ? 2 : 4;
  if (!x.is_none()) {
    if (!py::isinstance<py::list>(x) && !py::isinstance<py::tuple>(x))
      throw py::value_error("x: a list of 1-D arrays, one per chip");
    o.inputs = collective_inputs(py::list(x), o.dtype);
    if (o.inputs.empty()) throw py::value_error("x: no arrays (one per chip)");
  }
  simulate(sc, [&] {
    const PodConfig cfg = pod_config(config);
    if (!o.inputs.empty() && !bytes_given) {  // per chip: the input's bytes (all_gather: output)
      o.bytes = o.inputs[0].size() * esz;
      if (o.kind == Collective::kAllGather) {
        CollectiveJobOptions probe = o;
        probe.bytes = esz;
        o.bytes *= static_cast<uint64_t>(CollectiveJob(cfg, probe).group_chips());
      }
    }
    CollectiveJob job(cfg, o);
    job.run(eng, [&](uint64_t) { sc.poll(); });
    pass = job.pass();
    text = json_text(job.report(eng).json());
    out = job.outputs_of_chips();
    in = job.inputs();
  });
  auto arrays = [&](const std::vector<std::vector<uint32_t>>& words) {
    py::list l;
    for (const auto& v : words) {
      if (o.dtype == DType::kBf16) {
        py::array_t<uint16_t> a(static_cast<py::ssize_t>(v.size()));
        for (std::size_t i = 0; i < v.size(); ++i)
          a.mutable_data()[i] = static_cast<uint16_t>(v[i]);
        l.append(a);
      } else {
        py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
        for (std::size_t i = 0; i < v.size(); ++i) a.mutable_data()[i] = f32_from_bits(v[i]);
        l.append(a);
      }
    }
    return l;
  };
  return py::make_tuple(arrays(out), text, pass, arrays(in));
}

// Runs the job (run()) and adds its host time to the report, as the CLI's wall_seconds.
template <typename Run>
void run_timed(Report& rep, Run&& run) {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  rep.metric("wall_seconds",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "s",
             "host time of the simulation");
}

// shard: (Y as float32 M x N, the report's JSON text, pass); the report as `tpusim shard` makes it.
py::tuple run_shard(const ConfigArg& config, const py::object& x, const py::object& w,
                    ShardJobOptions o, const EngineArgs& ea) {
  const EngineOptions eng = ea.options();
  if (x.is_none() != w.is_none()) throw py::value_error("x and w: give both or neither");
  if (!x.is_none()) {
    const py::array xa = py::array::ensure(x), wa = py::array::ensure(w);
    if (!xa || !wa) throw py::value_error("x and w must be numpy arrays");
    const auto [m, k] = matrix_shape(xa, "x", "X (M x K)");
    const auto [kw, n] = matrix_shape(wa, "w", "W (K x N)");
    if (kw != k)
      throw py::value_error("x is " + std::to_string(m) + "x" + std::to_string(k) + " and w is " +
                            std::to_string(kw) + "x" + std::to_string(n) +
                            ": X's columns must equal W's rows");
    o.m = m;
    o.k = k;
    o.n = n;
    o.x = bf16_of(xa, "x");
    o.w = bf16_of(wa, "w");
  }
  SignalCheck sc;
  std::string text;
  bool pass = false;
  std::vector<float> y;
  std::size_t m = 0, n = 0;
  simulate(sc, [&] {
    const std::string where = config.text   ? std::string(kDictName)
                              : config.path ? *config.path
                                            : source_file("configs/pod_2x2.yaml");
    const PodConfig cfg = pod_config(config);
    ShardJob job(cfg, o, where);
    Report rep(job.title());
    rep.field("command", "shard");
    run_timed(rep, [&] { job.run(eng, rep, [&](uint64_t) { sc.poll(); }); });
    pass = job.pass();
    y = job.y();
    m = job.m();
    n = job.n();
    text = json_text(rep.json());
  });
  return py::make_tuple(float_matrix(y, m, n), text, pass);
}

// generate: (the generated bytes, the report's JSON text, pass), as `tpusim generate`.
py::tuple run_generate(const ConfigArg& config, GptGenerateOptions o, const EngineArgs& ea) {
  const EngineOptions eng = ea.options();
  SignalCheck sc;
  std::string text, bytes;
  bool pass = false;
  simulate(sc, [&] {
    const PodConfig cfg = pod_config(config);
    o.quiet = true;
    GptGenerate job(cfg, o);
    Report rep(job.title());
    rep.field("command", "generate");
    run_timed(rep, [&] { job.run(eng, rep); });
    pass = job.pass();
    bytes = job.text();
    text = json_text(rep.json());
  });
  return py::make_tuple(py::bytes(bytes), text, pass);
}

// A train setting: the argument when given (checked against the table's range for train.KEY),
// else the config's.
template <typename T>
T train_setting(const std::optional<uint64_t>& given, T from_config, const char* key) {
  if (!given) return from_config;
  const ConfigKey& k = config_keys().at(std::string("train.") + key);
  if (*given < k.lo || *given > k.hi)
    throw std::invalid_argument(std::string(key) + "=" + std::to_string(*given) + ": must be in " +
                                std::to_string(k.lo) + ".." + std::to_string(k.hi) +
                                " (the range of train." + key + ")");
  return static_cast<T>(*given);
}

struct TrainArgs {
  std::string mesh;
  std::optional<std::vector<std::size_t>> layers;
  std::optional<uint64_t> batch, steps, seed, grad_pieces;
  std::optional<double> lr;
  std::optional<std::string> model, stages, schedule;  // "mlp" or "gpt"; the pipeline's
  std::optional<uint64_t> microbatches;
  GptGiven gpt;  // the GPT's own settings (d_model, heads, seq, warmup, weight_decay, data)
  bool fresh_batches = false;
  bool backdoor = false;
  std::optional<std::pair<std::size_t, std::size_t>> trace_steps;
  std::string save;
};

// A training run's outcome: the report's JSON text, pass, the loss of every step.
struct TrainOut {
  std::string text;
  bool pass = false;
  std::vector<double> loss;
};

// model="gpt": GptJob, its settings through gpt_job_options as `tpusim train --model gpt`.
TrainOut train_gpt(const PodConfig& cfg, const std::string& where, const TrainArgs& a,
                   const EngineOptions& eng, SignalCheck& sc) {
  TrainOut r;
  if (a.grad_pieces || a.fresh_batches)
    throw std::invalid_argument("grad_pieces and fresh_batches: MLP settings; the model is gpt");
  GptGiven g = a.gpt;
  if (!a.mesh.empty()) g.mesh = a.mesh;
  g.stages = a.stages;
  g.schedule = a.schedule;
  g.microbatches = a.microbatches;
  g.layers = a.layers;
  g.batch = a.batch;
  g.steps = a.steps;
  g.seed = a.seed;
  g.lr = a.lr;
  GptJobOptions o = gpt_job_options(g, cfg, where, TPU_SOURCE_DIR "/docs",
                                    [](const std::string& key) { return key; });
  o.backdoor = a.backdoor;
  o.trace_steps = a.trace_steps;
  o.save = a.save;
  o.table = false;
  GptJob job(cfg, o);
  Report rep(job.title());
  rep.field("command", "train");
  job.set_progress([&](const RunProgress&) { sc.poll(); });
  run_timed(rep, [&] { job.run(eng, rep); });
  r.pass = job.pass();
  const Json j = rep.json();
  for (const Json& st : j.at("steps")) r.loss.push_back(st.at("loss").get<double>());
  r.text = json_text(j);
  return r;
}

// model="mlp": TrainJob, each setting the argument, else the config's train: key.
TrainOut train_mlp(const PodConfig& cfg, const std::string& where, const TrainArgs& a,
                   const EngineOptions& eng, SignalCheck& sc) {
  const TrainSettings& ts = cfg.train;
  TrainOut r;
  const GptGiven& gg = a.gpt;
  if (gg.d_model || gg.heads || gg.seq || gg.warmup || gg.weight_decay || gg.data)
    throw std::invalid_argument("d_model, heads, seq, warmup, weight_decay and data: GPT "
                                "settings; the model is mlp (model='gpt')");
  TrainJobOptions o;
  o.mesh = a.mesh.empty() ? ts.mesh : a.mesh;
  o.stages = a.stages ? *a.stages : ts.stages;
  o.schedule = a.schedule ? *a.schedule : ts.schedule;
  o.microbatches = train_setting<std::size_t>(a.microbatches, ts.microbatches, "microbatches");
  o.widths = a.layers ? *a.layers : ts.layers;
  if (a.layers) {
    const ConfigKey& k = config_keys().at("train.layers");
    for (std::size_t wd : o.widths)
      if (wd < k.lo || wd > k.hi)
        throw std::invalid_argument("layers: width " + std::to_string(wd) + ": must be in " +
                                    std::to_string(k.lo) + ".." + std::to_string(k.hi));
  }
  if (o.widths.size() < 2)
    throw std::invalid_argument("layers: need at least two widths (inputs, outputs)");
  o.global_batch = train_setting<std::size_t>(a.batch, ts.batch, "batch");
  const double lr = a.lr ? *a.lr : ts.lr;
  if (!lr_in_range(lr))
    throw std::invalid_argument((a.lr ? std::string("lr") : where + ": key 'train.lr'") + ": " +
                                real_text(lr) + ": " + lr_rule());
  o.lr = static_cast<float>(lr);
  o.lr_text = real_text(lr);
  o.steps = train_setting<std::size_t>(a.steps, ts.steps, "steps");
  o.seed = train_setting<uint64_t>(a.seed, ts.seed, "seed");
  o.fresh_batches = a.fresh_batches || ts.fresh_batches;
  o.grad_pieces = train_setting<std::size_t>(a.grad_pieces, ts.grad_pieces, "grad_pieces");
  o.backdoor = a.backdoor;
  o.trace_steps = a.trace_steps;
  o.save = a.save;
  o.table = false;
  TrainJob job(cfg, o);
  Report rep(job.title());
  rep.field("command", "train");
  run_timed(rep, [&] { job.run(eng, rep, [&](std::size_t, uint64_t) { sc.poll(); }); });
  r.pass = job.pass();
  for (const TrainStepRecord& st : job.result().steps) r.loss.push_back(st.loss);
  r.text = json_text(rep.json());
  return r;
}

// train: (the loss of every step, the report's JSON text, pass), the settings as `tpusim train`
// takes them: an argument given, else the config's train: key, else the table's default.
py::tuple run_train(const ConfigArg& config, const TrainArgs& a, const EngineArgs& ea) {
  const EngineOptions eng = ea.options();
  SignalCheck sc;
  TrainOut r;
  simulate(sc, [&] {
    const std::string where = config.text   ? std::string(kDictName)
                              : config.path ? *config.path
                                            : source_file("configs/pod_2x2.yaml");
    const PodConfig cfg = pod_config(config);
    const std::string model = a.model ? *a.model : cfg.train.model;
    if (model != "mlp" && model != "gpt")
      throw std::invalid_argument("model='" + model + "': mlp or gpt");
    r = model == "gpt" ? train_gpt(cfg, where, a, eng, sc) : train_mlp(cfg, where, a, eng, sc);
  });
  py::array_t<double> l(static_cast<py::ssize_t>(r.loss.size()));
  if (!r.loss.empty())
    std::memcpy(l.mutable_data(), r.loss.data(), r.loss.size() * sizeof(double));
  return py::make_tuple(l, r.text, r.pass);
}

Collective collective_of(const std::string& kind) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast})
    if (kind == collective_name(c)) return c;
  throw py::value_error("kind '" + kind +
                        "': not a collective (all_reduce, reduce_scatter, all_gather, "
                        "all_to_all, broadcast)");
}

// tpusim._core.matmul (the package's matmul() passes every argument by name).
void def_matmul(py::module_& m) {
  m.def(
      "matmul",
      [](const ConfigArg& config, const py::object& a, const py::object& w,
         std::optional<std::string> variant, std::size_t mm, std::size_t k, std::size_t n,
         uint64_t seed, const std::string& dist, const std::string& bias, bool relu,
         std::optional<std::string> out_dtype, bool mxu_only, std::vector<std::string> faults,
         std::optional<uint64_t> watchdog, const std::string& waves, const std::string& trace,
         std::optional<std::pair<uint64_t, uint64_t>> trace_cycles) {
        MatmulJobOptions o;
        o.variant = std::move(variant);
        o.m = mm;
        o.k = k;
        o.n = n;
        o.seed = seed;
        if (dist != "narrow" && dist != "wide")
          throw py::value_error("dist='" + dist + "': narrow or wide");
        o.dist = dist;
        o.relu = relu;
        if (out_dtype && *out_dtype != "bf16" && *out_dtype != "f32")
          throw py::value_error("out_dtype='" + *out_dtype + "': bf16 or f32");
        o.out_dtype = std::move(out_dtype);
        o.mxu_only = mxu_only;
        o.faults = std::move(faults);
        if (watchdog && *watchdog > kWatchdogRange.hi)
          throw py::value_error("watchdog=" + std::to_string(*watchdog) + ": must be at most " +
                                std::to_string(kWatchdogRange.hi));
        o.watchdog = watchdog;
        o.waves = waves;
        o.trace = trace;
        if (trace_cycles && trace.empty()) throw py::value_error("trace_cycles needs trace");
        o.trace_cycles = trace_cycles;
        return run_matmul(config, a, w, o, bias);
      },
      py::arg("config"), py::arg("a"), py::arg("w"), py::arg("variant"), py::arg("m"), py::arg("k"),
      py::arg("n"), py::arg("seed"), py::arg("dist"), py::arg("bias"), py::arg("relu"),
      py::arg("out_dtype"), py::arg("mxu_only"), py::arg("faults"), py::arg("watchdog"),
      py::arg("waves"), py::arg("trace"), py::arg("trace_cycles"));
}

// tpusim._core.collective (the package's collective() passes every argument by name).
void def_collective(py::module_& m) {
  m.def(
      "collective",
      [](const ConfigArg& config, const std::string& kind, const py::object& x,
         std::optional<uint64_t> bytes, const std::string& dtype, const std::string& op,
         const std::string& algo, const std::string& mesh, const std::string& axis, unsigned root,
         unsigned block_rows, uint64_t rounds, const std::string& load, uint64_t seed,
         const EngineArgs& eng) {
        CollectiveJobOptions o;
        o.kind = collective_of(kind);
        if (dtype != "f32" && dtype != "bf16")
          throw py::value_error("dtype='" + dtype + "': f32 or bf16");
        o.dtype = dtype == "bf16" ? DType::kBf16 : DType::kF32;
        if (op != "sum" && op != "max") throw py::value_error("op='" + op + "': sum or max");
        o.op = op == "max" ? ReduceOp::kMax : ReduceOp::kSum;
        if (bytes && (*bytes < 1 || *bytes > (uint64_t{1} << 30)))
          throw py::value_error("bytes=" + std::to_string(*bytes) + ": must be in 1..1073741824");
        if (bytes) o.bytes = *bytes;
        if (!algo.empty() && algo != "ring" && algo != "biring" && algo != "torus" &&
            algo != "direct")
          throw py::value_error("algo='" + algo + "': ring, biring, torus or direct");
        o.algorithm = algo;
        if (mesh.empty() != axis.empty())
          throw py::value_error("mesh and axis: give both or neither");
        o.mesh = mesh;
        o.axis = axis;
        o.root = static_cast<int>(root);
        o.block_rows = block_rows;
        o.rounds = rounds;
        o.backdoor = backdoor_of(load);
        o.seed = seed;
        return run_collective(config, x, o, bytes.has_value(), eng);
      },
      py::arg("config"), py::arg("kind"), py::arg("x"), py::arg("bytes"), py::arg("dtype"),
      py::arg("op"), py::arg("algo"), py::arg("mesh"), py::arg("axis"), py::arg("root"),
      py::arg("block_rows"), py::arg("rounds"), py::arg("load"), py::arg("seed"),
      py::arg("engine"));
}

// tpusim._core.shard (the package's shard() passes every argument by name).
void def_shard(py::module_& m) {
  m.def(
      "shard",
      [](const ConfigArg& config, const py::object& x, const py::object& w, const std::string& mesh,
         const std::string& x_spec, const std::string& w_spec, const std::string& y_spec,
         std::size_t mm, std::size_t k, std::size_t n, uint64_t seed, const std::string& bias,
         bool relu, const std::string& load, const EngineArgs& eng) {
        ShardJobOptions o;
        o.mesh = mesh;
        o.x_spec = x_spec;
        o.w_spec = w_spec;
        o.y_spec = y_spec;
        o.m = mm;
        o.k = k;
        o.n = n;
        o.seed = seed;
        o.bias_file = bias;
        o.relu = relu;
        o.backdoor = backdoor_of(load);
        return run_shard(config, x, w, o, eng);
      },
      py::arg("config"), py::arg("x"), py::arg("w"), py::arg("mesh"), py::arg("x_spec"),
      py::arg("w_spec"), py::arg("y_spec"), py::arg("m"), py::arg("k"), py::arg("n"),
      py::arg("seed"), py::arg("bias"), py::arg("relu"), py::arg("load"), py::arg("engine"));
}

// tpusim._core.train (the package's train() passes every argument by name).
void def_train(py::module_& m) {
  m.def(
      "train",
      [](const ConfigArg& config, const std::string& mesh,
         std::optional<std::vector<std::size_t>> layers, std::optional<uint64_t> batch,
         std::optional<uint64_t> steps, std::optional<double> lr, std::optional<uint64_t> seed,
         bool fresh_batches, std::optional<uint64_t> grad_pieces, const std::string& load,
         std::optional<std::pair<std::size_t, std::size_t>> trace_steps, const std::string& save,
         std::optional<std::string> model, std::optional<std::string> stages,
         std::optional<uint64_t> microbatches, std::optional<std::string> schedule,
         std::optional<uint64_t> d_model, std::optional<uint64_t> heads,
         std::optional<uint64_t> seq, std::optional<uint64_t> warmup,
         std::optional<double> weight_decay, std::optional<std::string> data,
         const EngineArgs& eng) {
        TrainArgs a;
        a.model = std::move(model);
        a.stages = std::move(stages);
        a.microbatches = microbatches;
        a.schedule = std::move(schedule);
        a.gpt.d_model = d_model;
        a.gpt.heads = heads;
        a.gpt.seq = seq;
        a.gpt.warmup = warmup;
        a.gpt.weight_decay = weight_decay;
        a.gpt.data = std::move(data);
        a.mesh = mesh;
        a.layers = std::move(layers);
        a.batch = batch;
        a.steps = steps;
        a.lr = lr;
        a.seed = seed;
        a.fresh_batches = fresh_batches;
        a.grad_pieces = grad_pieces;
        a.backdoor = backdoor_of(load);
        if (trace_steps && eng.trace.empty()) throw py::value_error("trace_steps needs trace");
        a.trace_steps = trace_steps;
        a.save = save;
        return run_train(config, a, eng);
      },
      py::arg("config"), py::arg("mesh"), py::arg("layers"), py::arg("batch"), py::arg("steps"),
      py::arg("lr"), py::arg("seed"), py::arg("fresh_batches"), py::arg("grad_pieces"),
      py::arg("load"), py::arg("trace_steps"), py::arg("save"), py::arg("model"),
      py::arg("stages"), py::arg("microbatches"), py::arg("schedule"), py::arg("d_model"),
      py::arg("heads"), py::arg("seq"), py::arg("warmup"), py::arg("weight_decay"),
      py::arg("data"), py::arg("engine"));
}

// tpusim._core.generate.
void def_generate(py::module_& m) {
  m.def(
      "generate",
      [](const ConfigArg& config, const std::string& load, const std::string& prompt,
         uint64_t tokens, const EngineArgs& eng) {
        if (tokens < 1 || tokens > 4096)
          throw std::invalid_argument("tokens=" + std::to_string(tokens) + ": must be in 1..4096");
        GptGenerateOptions o;
        o.load = load;
        o.prompt = prompt;
        o.tokens = tokens;
        return run_generate(config, o, eng);
      },
      py::arg("config"), py::arg("load"), py::arg("prompt"), py::arg("tokens"),
      py::arg("engine"));
}

}  // namespace
}  // namespace tpu

PYBIND11_MODULE(_core, m) {
  using namespace tpu;
  m.doc() = "tpusim's jobs in-process (the package tpusim wraps these; docs/python.md)";
  auto sim = py::register_exception<SimError>(m, "SimulationError", PyExc_RuntimeError);
  py::register_exception<SimHang>(m, "HangError", sim.ptr());

  py::class_<ConfigArg>(m, "_Config")
      .def(py::init<std::optional<std::string>, std::optional<std::string>>(), py::arg("path"),
           py::arg("text"));
  py::class_<EngineArgs>(m, "_Engine")
      .def(py::init([](std::string engine, std::optional<unsigned> threads, std::vector<int> waves,
                       std::vector<std::string> faults, std::optional<uint64_t> watchdog,
                       std::string trace,
                       std::optional<std::pair<uint64_t, uint64_t>> trace_cycles) {
             return EngineArgs{std::move(engine), threads,  std::move(waves),
                               std::move(faults), watchdog, std::move(trace),
                               trace_cycles};
           }),
           py::arg("engine"), py::arg("threads"), py::arg("waves"), py::arg("faults"),
           py::arg("watchdog"), py::arg("trace"), py::arg("trace_cycles"));
  def_matmul(m);
  def_collective(m);
  def_shard(m);
  def_train(m);
  def_generate(m);
}
