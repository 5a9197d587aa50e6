#include "pod_driver.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "collective_compile.h"
#include "tpu/vector.h"

namespace tpu {

namespace {

using pod_compile::bad;
using pod_compile::kBurst;

std::size_t lcm(std::size_t a, std::size_t b) { return a / std::gcd(a, b) * b; }

}  // namespace

std::size_t PodDriver::granule(DType dtype) const {
  const std::size_t esz = dtype == DType::kBf16 ? 2 : 4;
  return lcm(host_.info().shape.cols, kBurst / esz);
}

std::size_t PodDriver::granule(const CollectiveSpec& spec) const {
  const std::size_t g = granule(spec.dtype);
  if (spec.dtype != DType::kBf16 || spec.collective != Collective::kAllReduce) return g;
  // Packed halves of whole bursts: a piece of 2h rows packs into h rows, which the DMA stores as
  // two bf16 runs of h rows (lanes' lower halves, then upper), h a whole number of bf16 bursts.
  const std::size_t lanes = host_.info().shape.cols;
  const std::size_t burst_rows = std::max<std::size_t>(1, kBurst / (2 * lanes));
  return lcm(g, 2 * lanes * burst_rows);
}

CollectivePlan PodDriver::plan(const CollectiveSpec& spec) const {
  CollectiveSpec s = spec;
  s.granule = granule(spec);
  return make_plan(host_.info().topo, s);
}

PodProgram PodDriver::compile(const CollectiveSpec& spec, const CollectiveBuffers& bufs,
                              const PodCollectiveOptions& opt) {
  return compile(plan(spec), bufs, opt);
}

PodProgram PodDriver::compile(const CollectivePlan& whole, const CollectiveBuffers& bufs,
                              const PodCollectiveOptions& opt) {
  using namespace pod_compile;
  const MachineInfo& mi = host_.info();
  const CollectiveSpec& spec = whole.spec;
  // A bf16 collective that only moves data (all_gather, all_to_all, broadcast) moves 32-bit
  // words of two bf16 each: the f32 program of half as many elements, whose chunks fall on the
  // same granule boundaries (32 bf16 = 16 words), so the wire and VMEM carry 2 bytes an
  // element. Its golden is the bf16 spec's rounds, with the same count.
  if (spec.dtype == DType::kBf16 && !collective_reduces(spec.collective) &&
      2 * granule(DType::kF32) == granule(DType::kBf16)) {
    CollectiveSpec w = spec;
    w.dtype = DType::kF32;
    w.n = (spec.n + 1) / 2;
    PodProgram pw = compile(plan(w), bufs, opt);
    pw.spec = spec;
    pw.rounds = make_rounds(mi.topo, pw.spec, pw.rounds.size());
    return pw;
  }
  // The checks and how rounds are issued; the rounds laid out (as few as fit a VMEM region, or
  // as asked), their transfers emitted; then each chip's ops scheduled into its program.
  const CompileSetup s = compile_setup(mi, whole, bufs, opt);
  RoundLayout lay = fit_rounds(s);
  const SenderPairs pairs = sender_pairs(lay);
  const int P = s.chips;
  PodProgram pp;
  pp.spec = spec;
  pp.block_rows = lay.block_rows.empty() ? 0 : lay.block_rows[0];
  pp.program = SpmdProgram(P);
  const int phase = pp.program.add_phase(collective_phase(pp.spec));
  for (int c = 0; c < P; ++c) {
    const std::vector<Op> ops = chip_ops(s, lay, pairs, c);
    std::vector<int> steps;
    std::vector<ChipCmd> prog = schedule(ops, c, lay.ctr, &steps, opt.overlap_rounds);
    if (s.issue.early) set_early_heads(prog, true);
    for (std::size_t i = 0; i < prog.size(); ++i)
      pp.program.chip(c).append({prog[i]}, CmdLabel{phase, steps.at(i), -1});
    pp.vmem_rows_used = std::max(pp.vmem_rows_used, lay.rows_used(c));
  }
  pp.rounds = std::move(lay.rounds);
  return pp;
}

SpmdPhase collective_phase(const CollectiveSpec& spec) {
  SpmdPhase ph;
  ph.name = std::string(collective_name(spec.collective)) + " (" + spec.algorithm + ")";
  ph.collective = true;
  ph.kind = spec.collective;
  ph.bytes = static_cast<uint64_t>(spec.n) * (spec.dtype == DType::kBf16 ? 2 : 4);
  return ph;
}

PodProgramRun PodDriver::run_programs(const std::vector<std::vector<ChipCmd>>& progs,
                                      const std::string& label) {
  SpmdProgram sp(static_cast<int>(progs.size()));
  const int phase = label.empty() ? -1 : sp.add_phase(label);
  sp.append_all(progs, phase);
  return run_programs(sp);
}

PodProgramRun PodDriver::run_programs(const SpmdProgram& program) {
  const int P = host_.num_chips();
  if (program.num_chips() != P)
    bad("programs: one per chip (" + std::to_string(P) + "), not " +
        std::to_string(program.num_chips()));
  PodProgramRun res;
  const std::vector<LinkStat> before = host_.link_stats();
  std::vector<ChipCounters> cbefore;
  for (int c = 0; c < P; ++c) cbefore.push_back(host_.counters(c));
  for (int c = 0; c < P; ++c) {
    const auto& prog = program.cmds(c);
    const auto lab = program.trace_labels(c);
    std::size_t at = 0;
    for (std::size_t i = 0; i <= lab.size(); ++i) {
      const std::size_t end = i < lab.size() ? std::min(lab[i].first, prog.size()) : prog.size();
      if (end > at)
        host_.push(c, std::vector<ChipCmd>(prog.begin() + static_cast<std::ptrdiff_t>(at),
                                           prog.begin() + static_cast<std::ptrdiff_t>(end)));
      at = std::max(at, end);
      if (i < lab.size()) host_.trace_label(c, lab[i].second);
    }
  }
  res.run = host_.run_until_idle(kProgramMaxCycles);
  for (int c = 0; c < P; ++c) res.chip_delta.push_back(host_.counters(c) - cbefore[c]);
  res.link_flits = host_.link_stats();
  for (std::size_t i = 0; i < res.link_flits.size() && i < before.size(); ++i) {
    res.link_flits[i].flits -= before[i].flits;
    res.link_flits[i].crc_errors -= before[i].crc_errors;
    res.link_flits[i].replays -= before[i].replays;
    res.link_flits[i].replayed_flits -= before[i].replayed_flits;
  }
  return res;
}

PodCollectiveRun PodDriver::run(const CollectiveSpec& spec, const CollectiveBuffers& bufs,
                                const PodCollectiveOptions& opt) {
  return run(plan(spec), bufs, opt);
}

PodCollectiveRun PodDriver::run(const CollectivePlan& plan, const CollectiveBuffers& bufs,
                                const PodCollectiveOptions& opt) {
  return run_compiled(plan, compile(plan, bufs, opt));
}

PodCollectiveRun PodDriver::run_compiled(const CollectivePlan& plan, PodProgram pp) {
  PodCollectiveRun res;
  res.plan = plan;
  res.commands = pp.program.commands();
  res.vmem_rows_used = pp.vmem_rows_used;
  res.block_rows = pp.block_rows;
  res.row_bytes = uint64_t{host_.info().shape.cols} * 4;
  res.link_bytes_per_cycle = host_.info().link_bytes_per_cycle;
  res.prog = run_programs(pp.program);
  res.collective_cycles = res.prog.run.cycles;
  res.rounds = std::move(pp.rounds);
  return res;
}

PodCollectiveRun PodDriver::run(const CollectiveSpec& spec,
                                const std::vector<std::vector<uint32_t>>& inputs,
                                const PodCollectiveOptions& opt) {
  return run(plan(spec), inputs, opt);
}

PodCollectiveRun PodDriver::run(const CollectivePlan& plan,
                                const std::vector<std::vector<uint32_t>>& inputs,
                                const PodCollectiveOptions& opt) {
  const MachineInfo& mi = host_.info();
  const int P = mi.num_chips();
  const bool bf16 = plan.spec.dtype == DType::kBf16;
  const std::size_t esz = bf16 ? 2 : 4;
  if (inputs.size() != static_cast<std::size_t>(P))
    bad("inputs: " + std::to_string(inputs.size()) + " chips' inputs for a pod of " +
        std::to_string(P) + " chips");
  std::size_t in_max = 0, out_max = 0;
  for (int c = 0; c < P; ++c) {
    if (inputs[c].size() != plan.input_len(c))
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(inputs[c].size()) +
          " elements; the plan needs " + std::to_string(plan.input_len(c)));
    in_max = std::max(in_max, plan.input_len(c));
    out_max = std::max(out_max, plan.output_len(c));
  }
  if (opt.hbm_base % kBurst != 0) bad("hbm_base must be 64-byte aligned");
  auto bytes = [&](std::size_t n) { return (n * esz + kBurst - 1) / kBurst * kBurst; };
  CollectiveBuffers bufs;
  for (int c = 0; c < P; ++c) {
    bufs.in.push_back(opt.hbm_base);
    bufs.out.push_back(opt.hbm_base + bytes(in_max));
  }
  if (opt.hbm_base + bytes(in_max) + bytes(out_max) > mi.shape.hbm_bytes)
    bad("the buffers (" + std::to_string(bytes(in_max) + bytes(out_max)) + " bytes per chip from " +
        std::to_string(opt.hbm_base) + ") do not fit in the chip's " +
        std::to_string(mi.shape.hbm_bytes) + " bytes of HBM");
  PodProgram pp = compile(plan, bufs, opt);  // before the inputs: a plan that cannot be laid
                                              // out fails before any cycle
  // Inputs in: every chip at once (or the backdoor).
  std::vector<std::vector<uint8_t>> img(static_cast<std::size_t>(P));
  std::vector<HostCopy> ins;
  for (int c = 0; c < P; ++c) {
    auto& b = img[static_cast<std::size_t>(c)];
    b.assign(bytes(inputs[c].size()), 0);
    for (std::size_t i = 0; i < inputs[c].size(); ++i) std::memcpy(&b[i * esz], &inputs[c][i], esz);
    if (!b.empty()) ins.push_back(HostCopy{c, true, bufs.in[c], b.data(), b.size()});
  }
  uint64_t load_cycles = 0;
  if (opt.backdoor) {
    for (const HostCopy& h : ins) host_.backdoor_write(h.chip, h.addr, h.data, h.n);
  } else {
    load_cycles = host_.copy(ins);
  }
  PodCollectiveRun res = run_compiled(plan, std::move(pp));
  res.load_cycles = load_cycles;
  // Outputs out.
  std::vector<HostCopy> outs;
  for (int c = 0; c < P; ++c) {
    auto& b = img[static_cast<std::size_t>(c)];
    b.assign(bytes(plan.output_len(c)), 0);
    if (!b.empty()) outs.push_back(HostCopy{c, false, bufs.out[c], b.data(), b.size()});
  }
  if (opt.backdoor) {
    for (const HostCopy& h : outs) host_.backdoor_read(h.chip, h.addr, h.data, h.n);
  } else {
    res.store_cycles = host_.copy(outs);
  }
  res.out.resize(static_cast<std::size_t>(P));
  for (int c = 0; c < P; ++c) {
    const auto& b = img[static_cast<std::size_t>(c)];
    for (std::size_t i = 0; i < plan.output_len(c); ++i) {
      uint32_t v = 0;
      std::memcpy(&v, &b[i * esz], esz);
      res.out[static_cast<std::size_t>(c)].push_back(v);
    }
  }
  return res;
}

std::vector<std::vector<uint32_t>> golden_collective(const std::vector<CollectiveRound>& rounds,
                                                     const std::vector<std::vector<uint32_t>>& in) {
  return execute_rounds_bits(rounds, in);
}

}  // namespace tpu
