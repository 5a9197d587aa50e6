// PodDriver: runs collectives on a machine of chips (tb/pod/host_port.h) by compiling a
// CollectivePlan (model/collective.h) into an SPMD program (spmd_program.h): ICI remote writes
// for the transfers, counters for the arrivals, VPU ops for the reductions, DMA between the
// chip's HBM buffers and VMEM. Buffers of any size run in rounds through VMEM (docs/pod.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "chip_contract.h"
#include "host_port.h"
#include "spmd_program.h"
#include "tpu/collective.h"

namespace tpu {

struct PodCollectiveOptions {
  // Rows per pipelined block of a transfer (each transfer is cut into equal blocks of at most
  // this many rows). 0: automatic, the plan's smallest transfer clamped to 16..64 rows (32..64
  // in several rounds), so every phase of the plan uses blocks of one size and the pipeline
  // runs across the phases. A block is one packet (64 rows at most); a smaller one pipelines a
  // latency-bound round sooner, but pays a head flit and a VPU op more often, which is what
  // bounds a buffer in many rounds (4x4 torus, 1 MiB: 16-row blocks 0.885 of the bound, 32
  // rows 0.915, 64 rows 0.830; the 2x2 pod job's 16 KiB: 16 rows 2190 cycles, 32 rows 2241).
  unsigned block_rows = 0;
  // Rounds the buffers are streamed in through VMEM; 0: as few as fit.
  std::size_t rounds = 0;
  // An all-reduce in several rounds issues round r's all-gather beside round r + 1's
  // reduce-scatter (four VMEM regions instead of three); false: one round after another.
  bool overlap_rounds = true;
  // The VMEM rows the collective may use: [vmem_base, vmem_base + vmem_rows); 0 rows: the rest.
  uint32_t vmem_base = 0;
  uint32_t vmem_rows = 0;
  // The ICI counters the collective may use: [counter_base, counter_base + counter_count); 0:
  // the rest. Programs that run in one command stream use disjoint counters and VMEM rows, so
  // that one chip may start the next while another still runs the previous one.
  uint32_t counter_base = 0;
  uint32_t counter_count = 0;
  // A forwarding send's head goes before its first row (ICI_SEND early_head) where every
  // transfer of the plan is to a neighbour: a chain of forwards pays no head per link (4x4, 4
  // KiB: 255 -> 247 cycles). Only for a program whose packets are the only ones on the links
  // while it runs: the heads hold their VCs until their rows come, and another program's
  // packets crossing those links could wait behind them for rows they themselves bring (a
  // deadlock). Streams of several collectives (sharded matmul, the training step) turn it off.
  bool early_heads = true;
  // Host-vector run() only: HBM bytes from here (64-byte aligned) hold the in and out buffers,
  // and whether inputs come in and outputs go out through the backdoor (no simulated time) or
  // through the host ports (all chips at once).
  uint64_t hbm_base = 0;
  bool backdoor = false;
};

// A collective's buffers in each chip's HBM (byte addresses, 64-byte aligned): the input
// (plan.input_len(chip) elements of spec.dtype, contiguous) and the output (output_len). A
// buffer's last 64-byte granule is read and written whole.
struct CollectiveBuffers {
  std::vector<uint64_t> in, out;
};

// The per-chip programs of a collective, not run yet.
struct PodProgram {
  CollectiveSpec spec;                  // as compiled (granule set)
  std::vector<CollectiveRound> rounds;  // the golden's plans: one per round
  // One phase (the collective: "all_reduce (torus)"); each command labelled with the plan step
  // it belongs to (a transfer's send or wait, a reduction), numbered across rounds; step -1 for
  // data movement (DMA, region release, tokens).
  SpmdProgram program;
  uint32_t vmem_rows_used = 0;              // the most VMEM rows a chip uses (from vmem_base)
  unsigned block_rows = 0;
};

// What one run of per-chip programs did.
struct PodProgramRun {
  RunStats run;                          // pod cycles and per-chip cycles
  std::vector<ChipCounters> chip_delta;  // per chip: its counters over the run
  std::vector<LinkStat> link_flits;      // flits per directed link over the run
};

struct PodCollectiveRun {
  CollectivePlan plan;                     // the whole (one-round) plan, for bounds and plan costs
  std::vector<CollectiveRound> rounds;     // what ran: the golden is execute_rounds_*(rounds)
  std::vector<std::vector<uint32_t>> out;  // host-vector run(): per chip, f32 or bf16 (low 16)
  uint64_t load_cycles = 0;        // host-vector run(): host -> HBM copies (0 with backdoor)
  uint64_t collective_cycles = 0;  // the programs: HBM in to HBM out, every chip
  uint64_t store_cycles = 0;       // host-vector run(): HBM -> host copies (0 with backdoor)
  std::size_t commands = 0;        // commands of the programs, all chips
  std::size_t vmem_rows_used = 0;  // the most VMEM rows a chip needed
  unsigned block_rows = 0;
  PodProgramRun prog;               // per chip cycles, counters, link flits of the programs
  uint64_t row_bytes = 0;           // bytes one flit carries (a memory row: lanes x 4)
  double link_bytes_per_cycle = 0;  // what one link carries (row bytes / cycles per flit)
};

class PodDriver {
 public:
  explicit PodDriver(HostPort& host) : host_(host) {}
  HostPort& host() { return host_; }

  // The elements a collective's chunks are made of: whole 64-byte HBM bursts of memory rows,
  // so that every chunk starts on a row and a burst (lcm(lanes, 64 / element bytes)).
  std::size_t granule(DType dtype) const;
  // The granule compile() gives `spec`: granule(dtype), and for a bf16 all-reduce whole bursts in
  // each packed half of a piece (lcm(lanes, 64) on chips of up to 32 lanes).
  std::size_t granule(const CollectiveSpec& spec) const;

  // The plan of `spec` on this machine, its granule set (granule(spec)): what compile() and
  // run() take, so that a caller that needs the plan first (its buffer lengths) plans it once.
  // std::invalid_argument for a spec the plans refuse.
  CollectivePlan plan(const CollectiveSpec& spec) const;

  // Compiles `spec` (its granule is set here) over the buffers into one program per chip.
  // std::invalid_argument for what cannot run (naming the rule).
  PodProgram compile(const CollectiveSpec& spec, const CollectiveBuffers& bufs,
                     const PodCollectiveOptions& opt = {});
  // The same from its plan (plan(spec)).
  PodProgram compile(const CollectivePlan& plan, const CollectiveBuffers& bufs,
                     const PodCollectiveOptions& opt = {});

  // Pushes the program (one command stream per chip) and runs every chip at once until every
  // chip is idle; its labels name the commands on the timeline (HostPort::trace_label,
  // SpmdProgram::trace_labels). A chip error stops the run (ChipError: chip, code, command
  // index); a hang is the watchdog's HangError. The run's outer bound is kProgramMaxCycles, not
  // HostPort's default 50 million: a scale model's training step runs longer than that
  // (docs/scale_models.md), and the watchdog, not the bound, is what stops a hang.
  static constexpr uint64_t kProgramMaxCycles = uint64_t{1} << 40;
  PodProgramRun run_programs(const SpmdProgram& prog);
  // The same for plain per-chip commands, all named `label` on the timeline (if not "").
  PodProgramRun run_programs(const std::vector<std::vector<ChipCmd>>& progs,
                             const std::string& label = "");

  // The collective on buffers already in HBM; the outputs stay there.
  PodCollectiveRun run(const CollectiveSpec& spec, const CollectiveBuffers& bufs,
                       const PodCollectiveOptions& opt = {});
  PodCollectiveRun run(const CollectivePlan& plan, const CollectiveBuffers& bufs,
                       const PodCollectiveOptions& opt = {});

  // The same from host vectors: inputs[chip] holds the input of that chip (f32 bits, or bf16
  // bits in the low 16): buffers from opt.hbm_base, inputs in and outputs out through the host
  // ports (every chip at once) or the backdoor.
  PodCollectiveRun run(const CollectiveSpec& spec, const std::vector<std::vector<uint32_t>>& inputs,
                       const PodCollectiveOptions& opt = {});
  PodCollectiveRun run(const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs,
                       const PodCollectiveOptions& opt = {});

 private:
  // A compiled collective run (its program made before any input is copied, so that a plan
  // that cannot be laid out fails first, and --check's stop at the first copy comes after it).
  PodCollectiveRun run_compiled(const CollectivePlan& plan, PodProgram pp);

  HostPort& host_;
};

// The phase PodDriver::compile puts a collective's commands under: "all_reduce (torus)", its
// kind and its bytes per chip.
SpmdPhase collective_phase(const CollectiveSpec& spec);

// The golden of a collective as the driver runs it: execute_rounds_* over host vectors (f32
// bits, or bf16 bits in the low 16).
std::vector<std::vector<uint32_t>> golden_collective(const std::vector<CollectiveRound>& rounds,
                                                     const std::vector<std::vector<uint32_t>>& in);

}  // namespace tpu
