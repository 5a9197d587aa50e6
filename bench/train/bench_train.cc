// bench_train: one data-parallel SGD step of a 256-256-256 MLP with 256 examples per chip, on a
// 2x2 and a 4x4 torus of 16x16 chips (16-byte ICI links of 2 cycles' latency), against the
// ideal of the same work (MFU = useful MACs / (chips x R x C x cycles)); every step checked bit
// for bit against the golden (docs/training.md). One report per case, a JSON array on stdout.
//   bench_train [--only CASE[,CASE...]] [--list]
// weak4x4 runs the 2x2 step too (unless dp2x2 ran in the same process) and reports the ratio.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_main.h"
#include "engine.h"
#include "report.h"
#include "train_job.h"

using namespace tpu;

namespace {

constexpr double kTargetMfu = 0.60;     // issue 12: per step, 2x2
constexpr double kTargetHidden = 0.80;  // of the gradient all-reduce behind compute
constexpr double kWeakScaling = 0.90;   // 4x4 MFU within 10% of the 2x2's

struct Measured {
  double mfu = 0;
  bool done = false;
};
std::map<std::string, Measured>& measured() {
  static std::map<std::string, Measured> m;
  return m;
}

// The training job of bench_train: one step on plain C++ stepping of a torus of `shape`,
// 256 examples per chip, data and weights in through the backdoor; rep gets the step's report.
TrainJob run_pod(const std::vector<int>& shape, Report& rep) {
  PodConfig cfg;
  cfg.params.topo = Topology::torus(shape);
  cfg.params.variant = "16x16";
  cfg.params.link_latency = 2;
  cfg.params.link_width = 16;
  TrainJobOptions o;
  o.widths = {256, 256, 256};
  o.global_batch = 256 * static_cast<std::size_t>(cfg.params.topo.num_chips());
  o.lr = 0.5f;
  o.steps = 1;
  o.seed = 1;
  o.backdoor = true;
  o.pod_sections = false;
  o.table = false;
  TrainJob job(cfg, o);
  EngineOptions eng;
  eng.engine = "cpp";
  job.run(eng, rep);
  return job;
}

Report report(const char* name, const char* what, const std::vector<int>& shape) {
  Report rep(std::string("bench_train ") + name + ": " + what);
  rep.field("case", name);
  const TrainJob job = run_pod(shape, rep);
  const TrainRunResult& r = job.result();
  const double wall = job.run_seconds();
  const TrainStepRecord& st = r.steps.at(0);
  rep.metric("step_mfu", st.profile.mfu, "fraction", "MFU of the step", true);
  rep.metric("target_mfu", kTargetMfu, "fraction", "what issue 12 asks for (2x2)", true);
  rep.metric("target_hidden", kTargetHidden, "fraction", "all-reduce hidden, issue 12", true);
  rep.metric("pod_cycles_per_second", wall > 0 ? static_cast<double>(r.cycles) / wall : 0.0,
             "cycles/s", "simulation speed, the golden checks included");
  measured()[name] = Measured{st.profile.mfu, true};
  return rep;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<BenchCase> bc;
  bc.push_back({"dp2x2", "2x2 torus, 256-256-256, 256 examples per chip (MFU >= 0.60, >= 0.80 "
                         "of the all-reduce hidden)",
                [] {
                  Report rep = report("dp2x2", "2x2 torus, data parallel", {2, 2});
                  const Measured m = measured()["dp2x2"];
                  const double hidden = rep.find("allreduce_hidden_fraction")->value.as_double();
                  rep.metric("meets_target", m.mfu >= kTargetMfu && hidden >= kTargetHidden, "",
                             "step MFU and hidden fraction at their targets", true);
                  return rep;
                }});
  bc.push_back({"weak4x4", "4x4 torus, the same per chip (MFU within 10% of the 2x2's: weak "
                           "scaling; runs the 2x2 too unless dp2x2 ran)",
                [] {
                  if (!measured()["dp2x2"].done) (void)report("dp2x2", "2x2 torus", {2, 2});
                  Report rep = report("weak4x4", "4x4 torus, data parallel", {4, 4});
                  const double m2 = measured()["dp2x2"].mfu, m4 = measured()["weak4x4"].mfu;
                  rep.metric("mfu_2x2", m2, "fraction", "the 2x2 step's MFU, same process", true);
                  rep.metric("weak_scaling", m2 > 0 ? m4 / m2 : 0.0, "fraction",
                             "4x4 MFU / 2x2 MFU (target >= 0.90)", true);
                  const double hidden = rep.find("allreduce_hidden_fraction")->value.as_double();
                  rep.metric("meets_target", m4 >= kWeakScaling * m2 && hidden >= kTargetHidden,
                             "", "weak scaling and hidden fraction at their targets", true);
                  return rep;
                }});
  return bench_main("bench_train",
                    "one data-parallel SGD step of an MLP on 2x2 and 4x4 pods against the "
                    "ideal (MFU); a JSON array on stdout",
                    argc, argv, bc);
}
