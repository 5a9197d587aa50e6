// SpmdProgram: one multi-chip program as the pod runs it (docs/pod.md, "SPMD programs"): per
// chip, the command words with a label each (its phase, its collective plan step, its pipeline
// piece), and one phase table (name, collective kind, axis and bytes, gradient flag). Every
// workload (pod collectives, the sharded matmul, the training step) builds one by appending and
// merging, PodDriver::run_programs runs it (its labels name the commands on the timeline), and
// the per-phase reports read it. Merging two programs spreads them by command count (what the
// workloads use) or by the estimated time of each command (estimate_cycles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "chip_contract.h"
#include "host_port.h"
#include "tpu/collective.h"

namespace tpu {

// One phase of a program: a collective, or a part of the compute (the matmul, a layer's dW).
struct SpmdPhase {
  std::string name;  // "all_gather of W over 'data'", "matmul", "dW0 piece 1", ...
  bool collective = false;
  Collective kind = Collective::kAllGather;  // collectives only
  std::string axis;                          // the mesh axis it runs over ("": the pod)
  uint64_t bytes = 0;                        // collectives: nccl-tests' S per chip (tpu/perf.h)
  bool gradient = false;                     // a gradient all-reduce (training)
};

// What one command belongs to.
struct CmdLabel {
  int phase = -1;  // index in the program's phase table (-1: none)
  int step = -1;   // a collective's plan step (numbered across its rounds), -1: data movement
  int piece = -1;  // the pipeline piece (-1: none)
  bool operator==(const CmdLabel& o) const {
    return phase == o.phase && step == o.step && piece == o.piece;
  }
};

// One chip's commands and their labels (one each).
struct ChipProgram {
  std::vector<ChipCmd> cmds;
  std::vector<CmdLabel> labels;
  std::size_t size() const { return cmds.size(); }
  // Appends commands under one label, or a part with its own labels.
  void append(const std::vector<ChipCmd>& c, const CmdLabel& label);
  void append(const ChipProgram& part);
  // The same commands under `phase` (and `piece`), each keeping its plan step.
  ChipProgram relabeled(int phase, int piece = -1) const;
};

// How merge() interleaves two programs of one chip.
enum class MergeOrder {
  // Each spread evenly by command count: command i of a at i / |a| of the way, j of b at j / |b|.
  kByCount,
  // Each spread evenly by estimated time: a command at the fraction of its program's estimated
  // span at which it starts (estimate_starts, estimate_span).
  kByTime,
};

class SpmdProgram {
 public:
  SpmdProgram() = default;
  explicit SpmdProgram(int chips) : chips_(static_cast<std::size_t>(chips)) {}

  int num_chips() const { return static_cast<int>(chips_.size()); }
  std::size_t commands() const;  // all chips

  // The phase table: add_phase returns the new phase's index.
  int add_phase(SpmdPhase phase);
  int add_phase(const std::string& compute_name);  // a phase of compute (no collective)
  const std::vector<SpmdPhase>& phases() const { return phases_; }
  const SpmdPhase& phase(int i) const { return phases_.at(static_cast<std::size_t>(i)); }

  ChipProgram& chip(int c) { return chips_.at(static_cast<std::size_t>(c)); }
  const ChipProgram& chip(int c) const { return chips_.at(static_cast<std::size_t>(c)); }
  const std::vector<ChipCmd>& cmds(int c) const { return chip(c).cmds; }
  std::vector<std::vector<ChipCmd>> all_cmds() const;  // per chip

  // One chip's commands under a phase (no plan step), or all chips' (per_chip[c] to chip c).
  void append(int c, const std::vector<ChipCmd>& cmds, int phase, int piece = -1);
  void append_all(const std::vector<std::vector<ChipCmd>>& per_chip, int phase, int piece = -1);
  // One chip's part, labels as they are (their phases index this program's table).
  void append(int c, const ChipProgram& part) { chip(c).append(part); }

  // The same program with every HALT left out (parts that go on in a longer stream).
  SpmdProgram without_halt() const;

  // A command's label on the timeline: its phase's name, and " | step s" for a plan step.
  std::string label_text(const CmdLabel& l) const;
  // Chip c's labels for HostPort::trace_label: (first command, text) where the text changes;
  // commands with no phase and no step start none (they keep the label before them).
  std::vector<std::pair<std::size_t, std::string>> trace_labels(int c) const;
  // The phase a timeline label names (label_text's form), -1 for none.
  int phase_of_label(const std::string& label) const;

 private:
  std::vector<SpmdPhase> phases_;
  std::vector<ChipProgram> chips_;
};

// The commands of a program without its HALTs.
std::vector<ChipCmd> without_halt(const std::vector<ChipCmd>& cmds);

// A command's cycles on one chip, estimated from its rows and unit: a DMA its HBM bytes at the
// chip's peak bandwidth (at least a row a cycle), a LOADW its tile's rows at the weight port's
// rate, a MATMUL or VPU command a row a cycle, an ICI_SEND its rows at the link's flit rate (a
// token one flit); ICI_WAIT, FENCE, NOP and HALT 0.
double estimate_cycles(const ChipCmd& c, const MachineInfo& mi);

// A program's commands issued in order on units that run side by side (DMA, LOADW, MATMUL, VPU,
// ICI_SEND): each starts once the one before it started and its unit is free (estimate_cycles
// each). estimate_starts: each command's start; estimate_span: when the last unit is done.
std::vector<double> estimate_starts(const std::vector<ChipCmd>& p, const MachineInfo& mi);
double estimate_span(const std::vector<ChipCmd>& p, const MachineInfo& mi);

// The order merge() takes commands in: true for the next of a, false for the next of b. By
// count it needs no machine; by time it estimates each command on `mi`.
std::vector<bool> merge_order(std::size_t na, std::size_t nb);
std::vector<bool> merge_order(const std::vector<ChipCmd>& a, const std::vector<ChipCmd>& b,
                              MergeOrder order, const MachineInfo* mi);

// Two independent programs of one chip (disjoint memory rows and buffers) as one command stream,
// each spread over the whole (MergeOrder), so the shorter runs stretched over the longer one's
// time and neither waits long behind the other in the chip's in-order queue. Where both send
// over ICI, no send of the result has early_head (one's packets could cross links where the
// other's heads wait). `mi`: needed by kByTime only.
ChipProgram merge(const ChipProgram& a, const ChipProgram& b,
                  MergeOrder order = MergeOrder::kByCount, const MachineInfo* mi = nullptr);
std::vector<ChipCmd> merge(const std::vector<ChipCmd>& a, const std::vector<ChipCmd>& b,
                           MergeOrder order = MergeOrder::kByCount,
                           const MachineInfo* mi = nullptr);
// Two programs of the same machine, chip by chip: b's phases follow a's in the table.
SpmdProgram merge(const SpmdProgram& a, const SpmdProgram& b,
                  MergeOrder order = MergeOrder::kByCount, const MachineInfo* mi = nullptr);

// A merge where commands wait on the other program: a_needs[i] is how many of b's commands must
// come before a's command i, b_needs[j] how many of a's before b's command j (missing entries:
// none). Each is spread by count over what is left of the other from the last place where a
// command had to give way (with no needs: merge_order(na, nb)). std::logic_error when both next
// commands wait (needs that no one order meets).
std::vector<bool> merge_order(std::size_t na, std::size_t nb,
                              const std::vector<std::size_t>& a_needs,
                              const std::vector<std::size_t>& b_needs);
ChipProgram merge(const ChipProgram& a, const ChipProgram& b,
                  const std::vector<std::size_t>& a_needs, const std::vector<std::size_t>& b_needs);

// Sets early_head on the program's wait_rows sends (on), or clears it on every send.
void set_early_heads(std::vector<ChipCmd>& prog, bool on);

}  // namespace tpu
