#include "pod_cmd.h"

#include "pod_cli.h"

#include <algorithm>
#include <filesystem>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

#include "check_port.h"
#include "chip_config.h"
#include "chip_driver.h"
#include "cli_util.h"
#include "pod.h"
#include "pod_driver.h"
#include "pod_mpi.h"
#include "pod_sc.h"
#include "profile.h"
#include "report.h"
#include "trace.h"
#include "tpu/bf16.h"
#include "tpu/perf.h"

namespace tpu {

std::string PodOptions::config_path() const {
  return config.empty() ? source_file("configs/pod_2x2.yaml") : config;
}

namespace {

// --threads' default: the machine's cores, shared by the MPI ranks on this machine.
unsigned default_threads() {
  return std::max(1u, std::thread::hardware_concurrency() /
                          static_cast<unsigned>(mpi_world().local_size));
}

}  // namespace

void add_pod_config(CLI::App* cmd, PodOptions& o) {
  o.cmd = cmd;
  cmd->add_option("--config", o.config, "pod configuration (default configs/pod_2x2.yaml)")
      ->type_name("FILE")
      ->check(cli::input_path());
}

void add_pod_options(CLI::App* cmd, PodOptions& o, bool bare) {
  o.threads = default_threads();
  cmd->add_option("--engine", o.engine,
                  "SystemC pod with TLM host sockets, or plain C++ stepping")
      ->type_name("systemc|cpp")
      ->check(CLI::IsMember({"systemc", "cpp"}))
      ->capture_default_str();
  if (!bare) {
    cmd->add_option("--threads", o.threads,
                    "threads stepping the chips, either engine (default: the cores;\n"
                    "the same bits and cycles for any N)")
        ->type_name("N")
        ->check(cli::uint_in(1, 256));
    cmd->add_option("--waves-chips", o.waves_chips,
                    "FST waves of these chips, e.g. 0,3 (waves/pod_chipN.fst)")
        ->type_name("LIST")
        ->check(cli::list_of(cli::uint_in(0, 4095)));
    cmd->add_option("--json", o.json, "write the JSON report")
        ->type_name("FILE")
        ->check(cli::output_path());
    cmd->add_option("--trace", o.trace,
                    "write the timeline (Chrome trace-event JSON: ui.perfetto.dev)")
        ->type_name("FILE")
        ->check(cli::output_path());
    cmd->add_flag("--quiet", o.quiet, "no progress line");
    cmd->add_flag("--check", o.check,
                  "check the line, the config, the inputs and the plan (capacities),\n"
                  "then stop before the first simulated cycle: exit 0, no files written");
  }
  cli::repeatable(cmd->add_option("--fault", o.faults,
                                  "fault injection, repeatable: seed=S,\n"
                                  "hbm_single_bit_rate=P, hbm_double_bit_rate=P (per 64-bit word\n"
                                  "read), hbm_flip_at=ADDR[:BITS][@CHIP] (docs/hbm.md);\n"
                                  "link_bit_error_rate=P (per bit), link_burst_rate=P,\n"
                                  "link_drop_rate=P (per word), link_down=CHIP:PORT@CYCLE (PORT:\n"
                                  "+X -X +Y -Y +Z -Z; docs/ici.md \"Link faults\")"))
      ->type_name("KEY=VALUE");
  cmd->add_option("--watchdog", o.watchdog,
                  "stop as hung (exit 3) after this many cycles without progress\n"
                  "(default: the config's watchdog_cycles, 1000000; 0: off)")
      ->type_name("CYCLES")
      ->check(in_range(kWatchdogRange));
}

void add_trace_cycles(CLI::App* cmd, PodOptions& o) {
  cmd->add_option("--trace-cycles", o.trace_cycles,
                  "only the events that overlap pod cycles [A, B)")
      ->option_text("A:B")
      ->check(cli::span())
      ->needs("--trace");
}

TraceOptions trace_options(const PodOptions& o) {
  TraceOptions t;
  t.enabled = !o.trace.empty();
  if (!o.trace_cycles.empty()) std::tie(t.from, t.to) = cli::split_span(o.trace_cycles);
  return t;
}

// Runs job on the pod the options ask for: the SystemC pod (TLM host sockets) or plain C++.

// With --trace, the timeline is recorded over the whole job and written at its end.
void with_pod(const PodOptions& opt, PodParams params, double clock_ghz,
              const std::function<void(HostPort&)>& job) {
  if (!opt.waves_chips.empty())
    for (const std::string& c : cli::split_list(opt.waves_chips))
      params.wave_chips.push_back(std::stoi(c));
  if (!opt.faults.empty()) {
    apply_fault_flags(params.faults, opt.faults);
    check_fault_flags(params.faults, chip_shape(params.variant).hbm_bytes,
                      params.topo.num_chips());
  }
  if (opt.given("--watchdog")) params.watchdog_cycles = opt.watchdog;
  const std::string& engine = opt.engine;
  // Threads stepping the chips, either engine (the SystemC pod then steps every chip from one
  // process on the worker threads).
  params.threads = opt.threads;
  const TraceOptions topt = trace_options(opt);
  if (opt.check) {  // no dumps: a check writes no files (the chips named must exist)
    for (const int c : params.wave_chips)
      if (c >= params.topo.num_chips())
        throw std::invalid_argument("--waves-chips: chip " + std::to_string(c) + " is not in the " +
                                    params.topo.name() + " pod (chips 0.." +
                                    std::to_string(params.topo.num_chips() - 1) + ")");
    params.wave_chips.clear();
  }
  auto traced = [&](HostPort& h) {
    if (opt.check) {  // the job runs up to its first simulated cycle (CheckStop)
      CheckPort port(h);
      job(port);
      return;
    }
    if (topt.enabled) h.set_trace(topt);
    job(h);
    if (topt.enabled) write_trace(opt.trace, h.take_trace(), h.info(), clock_ghz);
    const std::string late = trace_window_warning(topt.from, topt.to, h.cycle());
    if (topt.enabled && !opt.trace_cycles.empty() && !late.empty())
      std::cerr << "tpusim: warning: " << late << "\n";
  };
  if (mpi_world().size > 1) {  // the pod split across MPI ranks (docs/scale.md)
    if (engine != "cpp")
      throw std::invalid_argument(
          "--engine " + engine + " with " + std::to_string(mpi_world().size) +
          " MPI ranks: the pod split across processes runs on --engine cpp only (the SystemC "
          "kernel is not split across processes); add --engine cpp");
    (void)PodPartition::slabs(params.topo, mpi_world().size);  // every rank alike: too many?
    // Every rank got this far, or every rank stops here with the first one's error (exit 2, no
    // MPI_Abort): rank 0 may have refused an output path the others do not check.
    const std::string other = mpi_agree_start("");
    if (!other.empty()) throw std::invalid_argument(other);
#ifdef TPU_HAVE_MPI
    MpiPodHost host(params);
    traced(host);
    return;
#endif
  }
  if (engine == "cpp") {
    CppPodHost host(params);
    traced(host);
  } else {
    static std::unique_ptr<ScPod> pod;  // one elaboration per process
    pod = std::make_unique<ScPod>("pod", params);
    pod->run(traced);
  }
}

Collective parse_kind(const std::string& k) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kAllToAll, Collective::kBroadcast})
    if (k == collective_name(c)) return c;
  throw std::invalid_argument("--kind " + k + ": not a collective");
}

const char* kDirNames[6] = {"+x", "-x", "+y", "-y", "+z", "-z"};

// The chips of chip c's group: those that agree with it on every dimension outside the group.
std::vector<int> group_of(const Topology& t, const std::vector<int>& dims, int c) {
  std::vector<int> v;
  const PodCoord me = t.coord(c);
  for (int i = 0; i < t.num_chips(); ++i) {
    const PodCoord o = t.coord(i);
    bool same = true;
    for (int d = 0; d < kPodMaxDims; ++d) {
      const bool in = dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!in && o[static_cast<std::size_t>(d)] != me[static_cast<std::size_t>(d)]) same = false;
    }
    if (same) v.push_back(i);
  }
  return v;
}

// Per-link bytes and the busiest link, from the links' flit counters.
ReportGroup& add_links(Report& rep, const std::vector<LinkStat>& flits, uint64_t row_bytes,
                       const Topology& topo) {
  Json links = Json::array();
  uint64_t mx = 0, total = 0, crc = 0, replays = 0, replayed = 0, down = 0;
  for (const LinkStat& l : flits) {
    const uint64_t b = l.flits * row_bytes;
    mx = std::max(mx, b);
    total += b;
    crc += l.crc_errors;
    replays += l.replays;
    replayed += l.replayed_flits;
    down += l.link_down;
    const PodCoord c = topo.coord(l.chip);
    links.push_back(Json::object({{"chip", l.chip},
                                  {"coord", Json::array({c[0], c[1], c[2]})},
                                  {"dir", kDirNames[l.dir]},
                                  {"flits", l.flits},
                                  {"bytes", b},
                                  {"crc_errors", l.crc_errors},
                                  {"replays", l.replays},
                                  {"replayed_flits", l.replayed_flits},
                                  {"link_down", l.link_down}}));
  }
  ReportGroup& g = rep.group("ici");
  g.metric("total_bytes", total, "bytes", "bytes all links carried (flits x row bytes)");
  g.metric("max_link_bytes", mx, "bytes", "bytes of the busiest directed link", true);
  g.metric("crc_errors", crc, "", "link words whose CRC failed (every link, flit and control)");
  g.metric("replays", replays, "", "link-layer replays started (every link)");
  g.metric("replayed_flits", replayed, "", "flits sent again by the link layer (every link)");
  g.metric("links_down", down, "", "links declared down");
  g.field("links", links);
  return g;
}

void add_pod(Report& rep, const PodConfig& cfg, const MachineInfo& mi, const PodOptions& opt) {
  rep.field("tool", "tpusim").field("config", cfg.source);
  rep.field("engine", opt.engine);
  rep.field("threads", static_cast<uint64_t>(opt.threads));
  if (mpi_world().size > 1) {
    const MpiStats& ms = mpi_stats();
    ReportGroup& m = rep.group("mpi");
    m.metric("ranks", mpi_world().size, "", "MPI ranks, each stepping a slab of the chips");
    m.metric("windows", ms.windows, "", "windows of at most link_latency cycles (rank 0)");
    m.metric("bytes_sent", ms.bytes_sent, "bytes", "cut links' slots rank 0 sent");
    m.metric("exchange_seconds", ms.exchange_seconds, "s",
             "rank 0 in the window exchange and agreement, waits for slower ranks included");
    m.metric("chip_models", ms.chip_models, "", "chip models rank 0 built (its own chips only)");
    m.metric("chip_models_total", ms.chip_models_total, "", "chip models built, all ranks");
    m.metric("exchange_share", ms.host_seconds > 0 ? ms.exchange_seconds / ms.host_seconds : 0.0,
             "fraction", "of rank 0's time with the pod");
  }
  ReportGroup& g = rep.group("pod");
  g.field("topology", cfg.params.topo.name());
  g.metric("chips", mi.num_chips(), "", "chips in the pod");
  g.field("variant", cfg.params.variant);
  g.metric("link_latency", mi.link_latency, "cycles", "cycles per ICI link, each way");
  g.metric("link_bytes_per_cycle", mi.link_bytes_per_cycle, "B/cycle", "what one link carries");
  g.metric("host_bytes_per_cycle", mi.host_bytes_per_cycle, "B/cycle",
           "what one chip's host port moves");
}

Json chip_table(const PodProgramRun& pr) {
  Json chips = Json::array();
  for (std::size_t c = 0; c < pr.chip_delta.size(); ++c) {
    const ChipCounters& d = pr.chip_delta[c];
    chips.push_back(Json::object({{"chip", c},
                                  {"cycles", pr.run.chip_cycles[c]},
                                  {"mxu_busy_cycles", d[kStatMxuBusy]},
                                  {"vpu_busy_cycles", d[kStatVpuBusy]},
                                  {"dma_busy_cycles", d[kStatDmaBusy]},
                                  {"hbm_bytes", d[kStatDmaRdBytes] + d[kStatDmaWrBytes]},
                                  {"ici_send_busy_cycles", d[kStatIciBusy]},
                                  {"ici_wait_cycles", d[kStatIciWait]},
                                  {"flits_sent", d[kStatIciTxFlits]},
                                  {"flits_received", d[kStatIciRxFlits]}}));
  }
  return chips;
}

namespace {

// The independent check of a sum reduction: every output within (p - 1) u sum |x| of the f64
// sum of the group's inputs (u = 2^-24; bf16 outputs: plus half a bf16 ulp of the result).
struct F64Check {
  bool applies = false;
  std::size_t outside = 0;
  double worst = 0;  // largest |error| / bound
};

F64Check f64_check(const CollectivePlan& plan, const std::vector<int>& dims,
                   const std::vector<std::vector<uint32_t>>& in,
                   const std::vector<std::vector<uint32_t>>& out) {
  F64Check r;
  const Collective k = plan.spec.collective;
  if (plan.spec.op != ReduceOp::kSum ||
      (k != Collective::kAllReduce && k != Collective::kReduceScatter))
    return r;
  r.applies = true;
  const bool bf16 = plan.spec.dtype == DType::kBf16;
  auto val = [&](uint32_t v) {
    return static_cast<double>(bf16 ? bf16_to_f32(static_cast<bf16_t>(v)) : f32_from_bits(v));
  };
  for (int c = 0; c < plan.topo.num_chips(); ++c) {
    const auto grp = group_of(plan.topo, dims, c);
    const double p = static_cast<double>(grp.size());
    std::size_t o = 0;
    for (const Segment& s : plan.chips[static_cast<std::size_t>(c)].output) {
      for (std::size_t i = 0; i < s.count; ++i, ++o) {
        double sum = 0, abs = 0;
        for (int g : grp) {
          const double x = val(in[static_cast<std::size_t>(g)][s.offset + i]);
          sum += x;
          abs += std::fabs(x);
        }
        const double got = val(out[static_cast<std::size_t>(c)][o]);
        double bound = (p - 1) * 0x1p-24 * abs;
        if (bf16) bound = bound * (1 + 0x1p-8) + 0x1p-8 * std::fabs(sum) + 0x1p-133;
        const double err = std::fabs(got - sum);
        if (!(err <= bound)) ++r.outside;
        if (bound > 0) r.worst = std::max(r.worst, err / bound);
      }
    }
  }
  return r;
}

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

// The options of `tpusim allreduce` and `tpusim collective`.
struct CollectiveArgs {
  PodOptions pod;
  std::string kind = "all_reduce";
  uint64_t bytes = 65536;
  std::string dtype = "f32", algo, op = "sum", mesh, axis, load = "host";
  unsigned root = 0, block_rows = 0;
  uint64_t rounds = 0, seed = 1;
};

// The command `name` with the options of a collective (`kind`: collective's --kind).
CLI::App* collective_options(CLI::App& tool, const char* name, const char* what,
                             CollectiveArgs& a, bool kind) {
  CLI::App* cmd = tool.add_subcommand(name, what);
  if (kind)
    cmd->add_option("--kind", a.kind, "the collective")
        ->type_name("K")
        ->check(CLI::IsMember(
            {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast"}))
        ->required();
  add_pod_config(cmd, a.pod);
  cmd->add_option("--bytes", a.bytes,
                  "bytes per chip (all_gather: of the output); any size that fits HBM:\n"
                  "buffers stream through VMEM in rounds")
      ->type_name("N")
      ->check(cli::uint_in(1, uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "element type (bf16 accumulates in f32)")
      ->type_name("f32|bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--algo", a.algo,
                  "ring|biring|torus|direct (default torus, or biring on one dimension,\n"
                  "for all_reduce; ring for the others; torus and direct: all_reduce only)")
      ->type_name("A")
      ->check(CLI::IsMember({"ring", "biring", "torus", "direct"}));
  cmd->add_option("--op", a.op, "reduction")
      ->type_name("sum|max")
      ->check(CLI::IsMember({"sum", "max"}))
      ->capture_default_str();
  if (kind)
    cmd->add_option("--root", a.root, "broadcast root: rank within its group")
        ->type_name("R")
        ->check(cli::uint_in(0, 4095))
        ->capture_default_str();
  CLI::Option* mesh =
      cmd->add_option("--mesh", a.mesh,
                      "named mesh axes over the torus dimensions, x first, e.g. x=4,y=4 or\n"
                      "data=16,model=4 (default: one axis 'all' of every chip)")
          ->type_name("AXES");
  CLI::Option* axis =
      cmd->add_option("--axis", a.axis,
                      "the collective runs over this axis, in every group at once")
          ->type_name("NAME");
  mesh->needs(axis);  // the axis names one of the mesh's axes
  axis->needs(mesh);
  cmd->add_option("--rounds", a.rounds, "rounds through VMEM; 0: as few as fit")
      ->type_name("R")
      ->check(cli::uint_in(0, 1u << 20))
      ->capture_default_str();
  cmd->add_option("--block-rows", a.block_rows,
                  "rows per pipelined block of a transfer; 0: automatic")
      ->type_name("B")
      ->check(cli::uint_in(0, 4096))
      ->capture_default_str();
  cmd->add_option("--load", a.load,
                  "inputs in / outputs out through the host ports, all chips at once,\n"
                  "or the backdoor (no simulated time)")
      ->type_name("host|backdoor")
      ->check(CLI::IsMember({"host", "backdoor"}))
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "seed of the random inputs")
      ->type_name("S")
      ->check(in_range(kSeedRange))
      ->capture_default_str();
  add_pod_options(cmd, a.pod);
  add_trace_cycles(cmd, a.pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return cmd;
}

int run_collective(const CollectiveArgs& a) {
  const PodOptions& opt = a.pod;
  const Collective kind = parse_kind(a.kind);
  const PodConfig cfg = load_pod_config(opt.config_path());
  const Topology& topo = cfg.params.topo;
  CollectiveSpec spec;
  spec.collective = kind;
  const std::string& dtype = a.dtype;
  spec.dtype = dtype == "bf16" ? DType::kBf16 : DType::kF32;
  const std::string& op = a.op;
  spec.op = op == "max" ? ReduceOp::kMax : ReduceOp::kSum;
  const std::size_t esz = spec.dtype == DType::kBf16 ? 2 : 4;
  const uint64_t bytes = a.bytes;
  if (bytes % esz != 0)
    throw std::invalid_argument("--bytes " + std::to_string(bytes) + ": must be a multiple of " +
                                std::to_string(esz) + " (the " + dtype + " element size)");
  spec.n = bytes / esz;
  // Mesh axes: the group of the collective.
  std::string axis = "all";
  if (!a.mesh.empty()) {
    axis = a.axis;
    spec.group_dims = axis_group(topo, a.mesh, axis);
  }
  const Topology gtopo = group_topology(topo, spec.group_dims);
  const std::string def_algo = gtopo.active_dims().size() >= 2 ? "torus" : "biring";
  // An --algo that does not apply to the collective (torus for a reduce-scatter, say) is refused
  // by the plan's checks, not ignored.
  spec.algorithm = !a.algo.empty() ? a.algo : kind == Collective::kAllReduce ? def_algo : "ring";
  spec.root = static_cast<int>(a.root);
  PodCollectiveOptions po;
  po.block_rows = a.block_rows;
  po.rounds = a.rounds;
  po.backdoor = a.load == "backdoor";

  PodCollectiveRun r;
  std::vector<std::vector<uint32_t>> in;
  MachineInfo mi;
  uint64_t backdoor_bytes = 0;
  double run_wall = 0;  // the collective with its copies alone (no pod set-up, no inputs)
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line(std::string(collective_name(kind)) + " on " + topo.name(),
                      opt.quiet);
    with_pod(opt, cfg.params, cfg.chip.clock_ghz, [&](HostPort& h) {
      mi = h.info();
      PodDriver drv(h);
      const CollectivePlan plan = drv.plan(spec);  // checks the spec: before any input
      std::size_t in_max = 0, out_max = 0;
      for (int c = 0; c < topo.num_chips(); ++c) {
        in_max = std::max(in_max, plan.input_len(c));
        out_max = std::max(out_max, plan.output_len(c));
      }
      const uint64_t need = ((in_max * esz + 63) / 64 + (out_max * esz + 63) / 64) * 64;
      if (need > mi.shape.hbm_bytes)
        throw std::invalid_argument("--bytes " + std::to_string(bytes) +
                                    ": the input and output "
                                    "buffers need " +
                                    std::to_string(need) +
                                    " bytes of each "
                                    "chip's HBM, which holds " +
                                    std::to_string(mi.shape.hbm_bytes));
      std::mt19937_64 rng(a.seed);
      std::normal_distribution<float> nd(0.0f, 4.0f);
      in.assign(static_cast<std::size_t>(topo.num_chips()), {});
      for (int c = 0; c < topo.num_chips(); ++c)
        for (std::size_t i = 0; i < plan.input_len(c); ++i) {
          const float v = nd(rng);
          in[static_cast<std::size_t>(c)].push_back(spec.dtype == DType::kBf16 ? f32_to_bf16(v)
                                                                               : f32_bits(v));
        }
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      const auto r0 = std::chrono::steady_clock::now();
      r = drv.run(plan, in, po);
      run_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      h.progress = nullptr;
      backdoor_bytes = h.backdoor_bytes();
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Golden: the driver's rounds, each its plan, on the host; and the f64 check.
  const auto want = golden_collective(r.rounds, in);
  std::size_t mismatches = 0, outputs = 0;
  for (std::size_t c = 0; c < want.size(); ++c) {
    outputs += want[c].size();
    for (std::size_t i = 0; i < want[c].size(); ++i)
      mismatches += (i >= r.out[c].size() || r.out[c][i] != want[c][i]) ? 1 : 0;
  }
  const F64Check f64 = f64_check(r.plan, spec.group_dims, in, r.out);
  const bool pass = mismatches == 0 && f64.outside == 0;

  // Bounds: every link the topology gives a chip of the group (model/perf.h).
  const int p = gtopo.num_chips();
  const int links = topology_links_per_chip(gtopo);
  const double S = static_cast<double>(bytes);
  const CollectiveBound bound =
      collective_bound(kind, p, S, links, mi.link_bytes_per_cycle, collective_hbm_bytes(kind, p, S),
                       mi.shape.hbm_channels * 32.0);
  const uint64_t cyc = r.collective_cycles;
  const double hbm_cyc = bound.hbm_cycles;

  Report rep(
      std::string(collective_name(kind)) + " (" + spec.algorithm + ") of " + std::to_string(bytes) +
      " bytes " + dtype + " per chip on " + topo.name() +
      (spec.group_dims.empty() ? "" : ", axis " + axis + " (groups of " + std::to_string(p) + ")"));
  rep.field("command", collective_name(kind));
  add_pod(rep, cfg, mi, opt);
  rep.field("axis", axis).field("group_chips", p);
  rep.field("algorithm", spec.algorithm).field("dtype", dtype).field("op", op);
  if (spec.algorithm == "torus")  // the parts' weights the driver chose (empty: equal parts)
    rep.field("part_weights", Json(r.plan.spec.part_weights));
  rep.metric("elements", spec.n, "", "elements per chip (all_gather: of the output)");
  rep.metric("bytes_per_chip", bytes, "bytes", "the buffer size S (nccl-tests' definition)");
  rep.metric("rounds", r.rounds.size(), "", "rounds through VMEM", true);
  rep.metric("block_rows", r.block_rows, "rows", "rows per pipelined block");
  rep.set_cycles(cyc, bound.ici_cycles);
  ReportGroup& b = rep.group("bound");
  b.metric("links_per_chip", links, "", "links the topology gives a chip of the group");
  b.metric("ici_cycles", bound.ici_cycles, "cycles",
           "factor x S / (links x link bytes per cycle): every link busy");
  const double partials = partials_factor(kind, spec.dtype);
  if (partials != 1.0)
    b.metric("fraction_of_partials_bound",
             cyc ? partials * bound.ici_cycles / static_cast<double>(cyc) : 0.0, "fraction",
             "the bound for the bytes sent with f32 partials (model/perf.h) / cycles");
  b.metric("hbm_cycles", hbm_cyc, "cycles",
           "the chip's HBM traffic of the collective (input read, output written) at peak");
  b.metric("fraction_of_hardware_bound",
           cyc ? std::max(bound.ici_cycles, hbm_cyc) / double(cyc) : 0.0, "fraction",
           "max(ici, hbm) / cycles", true);
  rep.set_bandwidth(algbw(S, static_cast<double>(cyc)),
                    busbw(kind, p, S, static_cast<double>(cyc)));
  ReportGroup& host = rep.group("host");
  host.metric("load_cycles", r.load_cycles, "cycles", "inputs into HBM through the host ports");
  host.metric("store_cycles", r.store_cycles, "cycles",
              "outputs out of HBM through the host ports");
  host.metric("backdoor_bytes", backdoor_bytes, "bytes", "bytes moved by the backdoor (no time)");
  rep.metric("commands", r.commands, "", "commands of the programs, all chips");
  rep.metric("vmem_rows_used", r.vmem_rows_used, "rows", "the most VMEM rows a chip used");
  add_links(rep, r.prog.link_flits, r.row_bytes, topo);
  rep.field("chips", chip_table(r.prog));
  // Where the cycles went (RTL counters): a collective does no MACs, so MFU is 0.
  report_profile(rep, r.prog.chip_delta, r.prog.run.cycles, 0,
                 peak_macs_per_cycle(mi.shape.rows, mi.shape.cols));
  if (!opt.trace.empty()) rep.field("trace", opt.trace);
  rep.set_mismatches(mismatches);
  rep.set_golden(pass, outputs, mismatches);
  if (f64.applies) {
    ReportGroup& f = rep.group("f64_check");
    f.metric("outside_bound", f64.outside, "", "outputs beyond (p-1) u sum|x| of the f64 sum",
             true);
    f.metric("worst_fraction_of_bound", f64.worst, "fraction", "largest |error| / bound");
  }
  const uint64_t sim = r.load_cycles + cyc + r.store_cycles;
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  rep.metric("sim_cycles_per_second", wall > 0 ? static_cast<double>(sim) / wall : 0.0, "cycles/s",
             "simulated pod cycles (copies included) per host second");
  rep.metric("run_seconds", run_wall, "s",
             "host time of the collective and its copies alone (the pod built, inputs made)");
  if (!opt.json.empty()) rep.write(opt.json);
  std::fputs(rep.summary().c_str(), stdout);
  return pass ? 0 : 1;
}

// The options of `tpusim pod`.
struct PodJobArgs {
  PodOptions pod;
  std::size_t m = 64, k = 64, n = 64;
  uint64_t seed = 1;
  std::string algo;
};

int run_pod_job(const PodJobArgs& a) {
  const PodOptions& opt = a.pod;
  const PodConfig cfg = load_pod_config(opt.config_path());
  const Topology& topo = cfg.params.topo;
  const std::size_t M = a.m, K = a.k, N = a.n;
  const uint64_t seed = a.seed;
  const int P = topo.num_chips();
  CollectiveSpec spec;
  spec.algorithm = !a.algo.empty() ? a.algo : topo.active_dims().size() >= 2 ? "torus" : "biring";

  std::vector<MatmulRun> mm(static_cast<std::size_t>(P));
  std::vector<std::vector<uint32_t>> want_c(static_cast<std::size_t>(P)), c_bits(want_c.size());
  std::vector<std::vector<uint32_t>> c_whole(want_c.size()), ar_out(want_c.size());
  PodProgramRun mm_run;
  PodCollectiveRun ar;
  MachineInfo mi;
  uint64_t in_cycles = 0, backdoor_bytes = 0;
  HbmMatrix cm_shape;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProgressLine line("pod job on " + topo.name(), opt.quiet);
    with_pod(opt, cfg.params, cfg.chip.clock_ghz, [&](HostPort& h) {
      mi = h.info();
      h.progress = [&](uint64_t cyc) { line.show(std::to_string(cyc) + " cycles"); };
      // Every chip's operands, copied in through every host port at once.
      std::vector<std::unique_ptr<ChipDriver>> drv;
      std::vector<HbmMatrix> am(want_c.size()), wm(want_c.size()), cm(want_c.size());
      std::vector<std::vector<uint8_t>> img;
      std::vector<HostCopy> copies;
      img.reserve(2 * want_c.size());
      for (int c = 0; c < P; ++c) {
        const std::size_t i = static_cast<std::size_t>(c);
        std::mt19937_64 rng(seed * 1000 + static_cast<uint64_t>(c));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<bf16_t> a(M * K), w(K * N);
        for (auto& v : a) v = f32_to_bf16(nd(rng));
        for (auto& v : w) v = f32_to_bf16(nd(rng));
        drv.push_back(std::make_unique<ChipDriver>(h, c));
        am[i] = drv[i]->alloc_matrix(M, K, Dtype::kBf16);
        wm[i] = drv[i]->alloc_matrix(K, N, Dtype::kBf16);
        cm[i] = drv[i]->alloc_matrix(M, N, Dtype::kF32);
        img.push_back(drv[i]->matrix_image(am[i], a));
        copies.push_back(HostCopy{c, true, am[i].addr, img.back().data(), img.back().size()});
        img.push_back(drv[i]->matrix_image(wm[i], w));
        copies.push_back(HostCopy{c, true, wm[i].addr, img.back().data(), img.back().size()});
        want_c[i] = golden_chip_matmul(a, w, M, K, N, MatmulOptions{});
      }
      in_cycles = h.copy(copies);
      // One SPMD program: every chip's matmul at once.
      std::vector<std::vector<ChipCmd>> progs;
      for (int c = 0; c < P; ++c) {
        const std::size_t i = static_cast<std::size_t>(c);
        mm[i] = drv[i]->plan_matmul(cm[i], am[i], wm[i]);
        progs.push_back(mm[i].program);
      }
      PodDriver pd(h);
      mm_run = pd.run_programs(progs, "matmul");
      for (int c = 0; c < P; ++c) {
        const std::size_t i = static_cast<std::size_t>(c);
        ProgramResult pr;
        pr.cycles = mm_run.run.chip_cycles[i];
        pr.delta = mm_run.chip_delta[i];
        drv[i]->finish_matmul(&mm[i], pr);
        if (h.status(c).halted) h.clear(c);  // the program's final HALT
      }
      // The all-reduce reads every C where the matmul left it (rows x pitch f32, padding
      // included) and writes the sum into a buffer of the same size.
      cm_shape = cm[0];
      spec.n = cm[0].rows * cm[0].pitch;
      CollectiveBuffers bufs;
      for (int c = 0; c < P; ++c) {
        const std::size_t i = static_cast<std::size_t>(c);
        bufs.in.push_back(cm[i].addr);
        bufs.out.push_back(drv[i]->alloc(cm[i].bytes()));
      }
      ar = pd.run(spec, bufs);
      // Results checked through the backdoor (no simulated time).
      for (int c = 0; c < P; ++c) {
        const std::size_t i = static_cast<std::size_t>(c);
        std::vector<uint8_t> b(cm[i].bytes());
        h.backdoor_read(c, cm[i].addr, b.data(), b.size());
        c_bits[i] = ChipDriver::matrix_from_image(cm[i], b);
        c_whole[i].resize(spec.n);
        std::memcpy(c_whole[i].data(), b.data(), spec.n * 4);
        h.backdoor_read(c, bufs.out[i], b.data(), b.size());
        ar_out[i].resize(spec.n);
        std::memcpy(ar_out[i].data(), b.data(), spec.n * 4);
      }
      backdoor_bytes = h.backdoor_bytes();
      h.progress = nullptr;
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t mm_bad = 0;
  for (int c = 0; c < P; ++c)
    mm_bad += c_bits[static_cast<std::size_t>(c)] != want_c[static_cast<std::size_t>(c)];
  // The all-reduce's golden: the rounds the driver ran, on the C buffers as they are in HBM;
  // and the sum of the golden matmuls for the M x N elements that are results.
  const auto want = golden_collective(ar.rounds, c_whole);
  std::size_t ar_bad = 0;
  for (int c = 0; c < P; ++c)
    for (std::size_t i = 0; i < spec.n; ++i)
      ar_bad += ar_out[static_cast<std::size_t>(c)][i] != want[static_cast<std::size_t>(c)][i];
  const F64Check f64 = f64_check(ar.plan, {}, c_whole, ar_out);
  const bool pass = mm_bad == 0 && ar_bad == 0 && f64.outside == 0;

  uint64_t pod_cycles = mm_run.run.cycles, sum_cycles = 0, ideal = 0;
  Json chips = Json::array();
  for (int c = 0; c < P; ++c) {
    const MatmulRun& m = mm[static_cast<std::size_t>(c)];
    sum_cycles += m.prog.cycles;
    ideal = std::max(ideal, m.compute_cycles);
    chips.push_back(Json::object({{"chip", c},
                                  {"cycles", m.prog.cycles},
                                  {"ideal_cycles", m.compute_cycles},
                                  {"hbm_bytes", m.hbm_bytes},
                                  {"mxu_busy_cycles", m.prog.delta[kStatMxuBusy]}}));
  }
  const int links = topology_links_per_chip(topo);
  const CollectiveBound bound = collective_bound(
      Collective::kAllReduce, P, static_cast<double>(spec.n) * 4.0, links, mi.link_bytes_per_cycle,
      collective_hbm_bytes(Collective::kAllReduce, P, static_cast<double>(spec.n) * 4.0),
      mi.shape.hbm_channels * 32.0);
  const uint64_t macs = matmul_useful_macs(M, K, N) * static_cast<uint64_t>(P);
  const uint64_t peak = peak_macs_per_cycle(mi.shape.rows, mi.shape.cols);

  Report rep("pod job on " + topo.name() + " (" + std::to_string(P) + " chips " +
             cfg.params.variant + "): matmul " + std::to_string(M) + "x" + std::to_string(K) + "x" +
             std::to_string(N) + " on every chip at once, then an all-reduce (" + spec.algorithm +
             ") of the results in HBM");
  rep.field("command", "pod");
  add_pod(rep, cfg, mi, opt);
  rep.metric("cycles", pod_cycles + ar.collective_cycles, "cycles",
             "the job's programs: matmuls, then the all-reduce", true);
  ReportGroup& mg = rep.group("matmul");
  mg.metric("m", M, "", "").metric("k", K, "", "").metric("n", N, "", "");
  mg.metric("pod_cycles", pod_cycles, "cycles", "the slowest chip: the chips run at once", true);
  mg.metric("ideal_cycles", ideal, "cycles", "M x ceil(K/R) x ceil(N/C) activation beats", true);
  mg.metric("sum_of_chip_cycles", sum_cycles, "cycles", "what one chip after another would take");
  mg.set_mfu(pod_cycles ? mfu(macs, P, peak, pod_cycles) : 0.0);
  mg.metric("host_copy_cycles", in_cycles, "cycles", "A and W into every chip's HBM at once");
  mg.field("chips", chips);
  mg.metric("mismatching_chips", mm_bad, "", "chips whose C differs from the golden", true);
  ReportGroup& ag = rep.group("all_reduce");
  ag.field("algorithm", spec.algorithm);
  ag.metric("elements", spec.n, "", "f32 elements per chip (C with its row padding)");
  ag.set_cycles(ar.collective_cycles, bound.ici_cycles);
  ag.metric("hbm_bound_cycles", bound.hbm_cycles, "cycles",
            "the C buffers read and the sums written at the chip's peak HBM bandwidth");
  ag.metric(
      "fraction_of_hardware_bound",
      ar.collective_cycles ? bound.ideal_cycles / static_cast<double>(ar.collective_cycles) : 0.0,
      "fraction", "max(ici, hbm) / cycles", true);
  ag.metric("rounds", ar.rounds.size(), "", "rounds through VMEM");
  ag.set_mismatches(ar_bad);
  add_links(rep, ar.prog.link_flits, ar.row_bytes, topo);
  // Where the job's cycles went (RTL counters over the matmuls and the all-reduce).
  std::vector<ChipCounters> job_delta;
  for (int c = 0; c < P; ++c) {
    ChipCounters d = mm_run.chip_delta[static_cast<std::size_t>(c)];
    const ChipCounters& a = ar.prog.chip_delta[static_cast<std::size_t>(c)];
    for (unsigned k = 0; k < kNumChipStats; ++k) d.v[k] += a.v[k];
    job_delta.push_back(d);
  }
  report_profile(rep, job_delta, pod_cycles + ar.collective_cycles, macs, peak);
  if (!opt.trace.empty()) rep.field("trace", opt.trace);
  rep.metric("backdoor_bytes", backdoor_bytes, "bytes",
             "results read by the backdoor for the check");
  rep.set_golden(pass, static_cast<uint64_t>(P) * (M * N + spec.n), mm_bad + ar_bad);
  rep.metric("wall_seconds", wall, "s", "host time of the simulation");
  if (!opt.json.empty()) rep.write(opt.json);
  std::fputs(rep.summary().c_str(), stdout);
  return pass ? 0 : 1;
}

}  // namespace

std::function<int()> allreduce_command(CLI::App& tool) {
  auto a = std::make_shared<CollectiveArgs>();
  collective_options(tool, "allreduce",
                     "an all-reduce on a pod, golden-checked (HBM in and out, any size, mesh "
                     "axes)",
                     *a, false);
  return [a] { return run_collective(*a); };
}

std::function<int()> collective_command(CLI::App& tool) {
  auto a = std::make_shared<CollectiveArgs>();
  collective_options(tool, "collective", "any collective on a pod (--kind), golden-checked", *a,
                     true);
  return [a] { return run_collective(*a); };
}

std::function<int()> pod_command(CLI::App& tool) {
  auto a = std::make_shared<PodJobArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "pod", "the pod job: a matmul on every chip at once, then an all-reduce of the results\n"
             "(a sum, in HBM), golden-checked");
  add_pod_config(cmd, a->pod);
  add_matmul_shape(cmd, a->m, a->k, a->n, a->seed, 4096,
                   {"rows of A on every chip", "the contraction", "columns of W"},
                   "seed of the random inputs");
  cmd->add_option("--algo", a->algo,
                  "the all-reduce's algorithm: ring|biring|torus|direct (default torus,\n"
                  "or biring on one dimension)")
      ->type_name("A")
      ->check(CLI::IsMember({"ring", "biring", "torus", "direct"}));
  add_pod_options(cmd, a->pod);
  add_trace_cycles(cmd, a->pod);
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_pod_job(*a); };
}

// tpusim hang: a deliberate deadlock, to test the watchdog and exit code 3 (docs/errors.md):
// chip 1 of the pod waits on ICI counter 5 for a row that no chip sends. Not in the help.
std::function<int()> hang_command(CLI::App& tool) {
  auto o = std::make_shared<PodOptions>();
  CLI::App* cmd = tool.add_subcommand("hang", "a deliberate deadlock, to test the watchdog");
  cmd->group("");  // hidden
  add_pod_config(cmd, *o);
  add_pod_options(cmd, *o, true);
  return [o] {
    const PodConfig cfg = load_pod_config(o->config_path());
    if (cfg.params.topo.num_chips() < 2)
      throw std::invalid_argument("hang: the pod needs two chips or more");
    with_pod(*o, cfg.params, cfg.chip.clock_ghz, [](HostPort& h) {
      h.push(1, {cmd_ici_wait(5, 1)});
      h.run_until_idle();
    });
    std::puts("tpusim hang: the run ended (the watchdog is off?)");
    return 0;
  };
}

}  // namespace tpu
