#include "collective_job.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <utility>

#include "mesh_text.h"
#include "profile.h"
#include "shard_plan.h"
#include "tpu/bf16.h"

namespace tpu {

namespace {

// The group dims of --axis in --mesh; an axis of size 1 (groups of one chip: nothing to move)
// is refused naming --axis, while other axes of size 1 change nothing.
std::vector<int> axis_group(const Topology& topo, const std::string& mesh_text,
                            const std::string& axis) {
  const Mesh mesh = parse_mesh(mesh_text);
  check_mesh(topo, mesh);
  if (mesh_unit_axis(topo, mesh, axis))
    throw std::invalid_argument(
        "--axis " + axis + ": the axis has size 1 in --mesh " + mesh_text +
        ", so every group is one chip and the collective would move nothing; give an axis of "
        "size > 1 (another axis of size 1 in the mesh changes nothing)");
  return mesh_axis_dims(topo, mesh, axis);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CollectiveBound collective_bound_on(const MachineInfo& mi, Collective k,
                                    const std::vector<int>& dims, double S) {
  const Topology g = group_topology(mi.topo, dims);
  const int p = g.num_chips();
  return collective_bound(k, p, S, topology_links_per_chip(g), mi.link_bytes_per_cycle,
                          collective_hbm_bytes(k, p, S), mi.shape.hbm_channels * 32.0);
}

CollectiveJob::CollectiveJob(PodConfig cfg, const CollectiveJobOptions& o)
    : cfg_(std::move(cfg)), o_(o) {
  const Topology& topo = cfg_.params.topo;
  spec_.collective = o.kind;
  spec_.dtype = o.dtype;
  spec_.op = o.op;
  const std::size_t esz = o.dtype == DType::kBf16 ? 2 : 4;
  if (o.bytes % esz != 0)
    throw std::invalid_argument("--bytes " + std::to_string(o.bytes) + ": must be a multiple of " +
                                std::to_string(esz) + " (the " +
                                (o.dtype == DType::kBf16 ? "bf16" : "f32") + " element size)");
  spec_.n = o.bytes / esz;
  // Mesh axes: the group of the collective.
  spec_.group_dims = o.group_dims;
  if (!o.mesh.empty()) {
    axis_ = o.axis;
    spec_.group_dims = axis_group(topo, o.mesh, o.axis);
  }
  gtopo_ = group_topology(topo, spec_.group_dims);
  const std::string def_algo = gtopo_.active_dims().size() >= 2 ? "torus" : "biring";
  // An --algo that does not apply to the collective (torus for a reduce-scatter, say) is refused
  // by the plan's checks, not ignored.
  // all_to_all: direct (one step, each block straight to its chip; 2 to 10 times the ring's
  // speed on every pod measured, docs/collectives.md).
  spec_.algorithm = !o.algorithm.empty()               ? o.algorithm
                    : o.kind == Collective::kAllReduce ? def_algo
                    : o.kind == Collective::kAllToAll  ? "direct"
                                                       : "ring";
  spec_.root = o.root;
}

void CollectiveJob::run(const EngineOptions& eng, const std::function<void(uint64_t)>& progress) {
  const Topology& topo = cfg_.params.topo;
  const std::size_t esz = spec_.dtype == DType::kBf16 ? 2 : 4;
  PodCollectiveOptions po;
  po.block_rows = o_.block_rows;
  po.rounds = o_.rounds;
  po.backdoor = o_.backdoor;
  const auto t0 = std::chrono::steady_clock::now();
  with_engine(eng, cfg_.params, cfg_.chip.clock_ghz, [&](HostPort& h) {
    mi_ = h.info();
    PodDriver drv(h);
    const CollectivePlan plan = drv.plan(spec_);  // checks the spec: before any input
    std::size_t in_max = 0, out_max = 0;
    for (int c = 0; c < topo.num_chips(); ++c) {
      in_max = std::max(in_max, plan.input_len(c));
      out_max = std::max(out_max, plan.output_len(c));
    }
    const uint64_t need = ((in_max * esz + 63) / 64 + (out_max * esz + 63) / 64) * 64;
    if (need > mi_.shape.hbm_bytes)
      throw std::invalid_argument("--bytes " + std::to_string(o_.bytes) +
                                  ": the input and output buffers need " + std::to_string(need) +
                                  " bytes of each chip's HBM, which holds " +
                                  std::to_string(mi_.shape.hbm_bytes));
    std::mt19937_64 rng(o_.seed);
    std::normal_distribution<float> nd(0.0f, o_.input_stddev);
    in_.assign(static_cast<std::size_t>(topo.num_chips()), {});
    if (!o_.inputs.empty()) {
      check_given_inputs(plan);
      in_ = o_.inputs;
    }
    for (int c = 0; c < topo.num_chips() && o_.inputs.empty(); ++c)
      for (std::size_t i = 0; i < plan.input_len(c); ++i) {
        const float v = nd(rng);
        in_[static_cast<std::size_t>(c)].push_back(spec_.dtype == DType::kBf16 ? f32_to_bf16(v)
                                                                               : f32_bits(v));
      }
    h.progress = cycles_since_now(h, progress);
    const auto r0 = std::chrono::steady_clock::now();
    r_ = drv.run(plan, in_, po);  // the plan made once
    run_wall_ = seconds_since(r0);
    h.progress = nullptr;
    backdoor_bytes_ = h.backdoor_bytes();
    if (o_.keep_link_stats) links_ = h.link_stats();
  });
  wall_ = seconds_since(t0);
  if (eng.check) return;  // a check runs nothing: CheckStop ends it before this
  // Golden: the driver's rounds, each its plan, on the host; and the f64 check.
  const auto want = golden_collective(r_.rounds, in_);
  outputs_ = mismatches_ = 0;
  for (std::size_t c = 0; c < want.size(); ++c) {
    outputs_ += want[c].size();
    for (std::size_t i = 0; i < want[c].size(); ++i)
      mismatches_ += (i >= r_.out[c].size() || r_.out[c][i] != want[c][i]) ? 1 : 0;
  }
  f64_ = f64_check(r_.plan, spec_.group_dims, in_, r_.out);
}

void CollectiveJob::check_given_inputs(const CollectivePlan& plan) const {
  const int chips = cfg_.params.topo.num_chips();
  const std::string what = std::string(collective_name(spec_.collective)) + " of " +
                           std::to_string(o_.bytes) + " bytes per chip on " +
                           cfg_.params.topo.name();
  if (o_.inputs.size() != static_cast<std::size_t>(chips))
    throw std::invalid_argument("inputs: " + std::to_string(o_.inputs.size()) +
                                " arrays given; the " + what + " takes one per chip (" +
                                std::to_string(chips) + ")");
  for (int c = 0; c < chips; ++c) {
    const std::size_t n = o_.inputs[static_cast<std::size_t>(c)].size();
    if (n != plan.input_len(c))
      throw std::invalid_argument("inputs: chip " + std::to_string(c) + "'s array has " +
                                  std::to_string(n) + " elements; the " + what + " takes " +
                                  std::to_string(plan.input_len(c)));
  }
}

CollectiveBound CollectiveJob::bound() const {
  return collective_bound_on(mi_, spec_.collective, spec_.group_dims,
                             static_cast<double>(o_.bytes));
}

Report CollectiveJob::report(const EngineOptions& eng) const {
  const Collective kind = spec_.collective;
  const Topology& topo = cfg_.params.topo;
  const std::string dtype = spec_.dtype == DType::kBf16 ? "bf16" : "f32";
  const int p = gtopo_.num_chips();
  const double S = static_cast<double>(o_.bytes);
  const CollectiveBound b = bound();
  const uint64_t cyc = r_.collective_cycles;
  Report rep(std::string(collective_name(kind)) + " (" + spec_.algorithm + ") of " +
             std::to_string(o_.bytes) + " bytes " + dtype + " per chip on " + topo.name() +
             (spec_.group_dims.empty()
                  ? ""
                  : ", axis " + axis_ + " (groups of " + std::to_string(p) + ")"));
  rep.field("command", collective_name(kind));
  add_pod(rep, cfg_, mi_, eng);
  rep.field("axis", axis_).field("group_chips", p);
  rep.field("algorithm", spec_.algorithm).field("dtype", dtype);
  rep.field("op", spec_.op == ReduceOp::kMax ? "max" : "sum");
  if (spec_.algorithm == "torus")  // the parts' weights the driver chose (empty: equal parts)
    rep.field("part_weights", Json(r_.plan.spec.part_weights));
  rep.metric("elements", spec_.n, "", "elements per chip (all_gather: of the output)");
  rep.metric("bytes_per_chip", o_.bytes, "bytes", "the buffer size S (nccl-tests' definition)");
  rep.metric("rounds", r_.rounds.size(), "", "rounds through VMEM", true);
  rep.metric("block_rows", r_.block_rows, "rows", "rows per pipelined block");
  rep.set_cycles(cyc, b.ici_cycles);
  ReportGroup& g = rep.group("bound");
  g.metric("links_per_chip", topology_links_per_chip(gtopo_), "",
           "links the topology gives a chip of the group");
  g.metric("ici_cycles", b.ici_cycles, "cycles",
           "factor x S / (links x link bytes per cycle): every link busy");
  const double partials = partials_factor(kind, spec_.dtype);
  if (partials != 1.0)
    g.metric("fraction_of_partials_bound",
             cyc ? partials * b.ici_cycles / static_cast<double>(cyc) : 0.0, "fraction",
             "the bound for the bytes sent with f32 partials (model/perf.h) / cycles");
  g.metric("hbm_cycles", b.hbm_cycles, "cycles",
           "the chip's HBM traffic of the collective (input read, output written) at peak");
  g.metric("fraction_of_hardware_bound",
           cyc ? std::max(b.ici_cycles, b.hbm_cycles) / double(cyc) : 0.0, "fraction",
           "max(ici, hbm) / cycles", true);
  rep.set_bandwidth(algbw(S, static_cast<double>(cyc)),
                    busbw(kind, p, S, static_cast<double>(cyc)));
  ReportGroup& host = rep.group("host");
  host.metric("load_cycles", r_.load_cycles, "cycles", "inputs into HBM through the host ports");
  host.metric("store_cycles", r_.store_cycles, "cycles",
              "outputs out of HBM through the host ports");
  host.metric("backdoor_bytes", backdoor_bytes_, "bytes", "bytes moved by the backdoor (no time)");
  rep.metric("commands", r_.commands, "", "commands of the programs, all chips");
  rep.metric("vmem_rows_used", r_.vmem_rows_used, "rows", "the most VMEM rows a chip used");
  add_links(rep, r_.prog.link_flits, r_.row_bytes, topo);
  rep.field("chips", chip_table(r_.prog));
  // Where the cycles went (RTL counters): a collective does no MACs, so MFU is 0.
  report_profile(rep, r_.prog.chip_delta, r_.prog.run.cycles, 0,
                 peak_macs_per_cycle(mi_.shape.rows, mi_.shape.cols));
  if (!eng.trace.empty()) rep.field("trace", eng.trace);
  rep.set_mismatches(mismatches_);
  rep.set_golden(pass(), outputs_, mismatches_);
  if (f64_.applies) {
    ReportGroup& f = rep.group("f64_check");
    f.metric("outside_bound", f64_.outside, "", "outputs beyond (p-1) u sum|x| of the f64 sum",
             true);
    f.metric("worst_fraction_of_bound", f64_.worst, "fraction", "largest |error| / bound");
  }
  const uint64_t sim = r_.load_cycles + cyc + r_.store_cycles;
  rep.metric("wall_seconds", wall_, "s", "host time of the simulation");
  rep.metric("sim_cycles_per_second", wall_ > 0 ? static_cast<double>(sim) / wall_ : 0.0,
             "cycles/s", "simulated pod cycles (copies included) per host second");
  rep.metric("run_seconds", run_wall_, "s",
             "host time of the collective and its copies alone (the pod built, inputs made)");
  return rep;
}

}  // namespace tpu
