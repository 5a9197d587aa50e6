// DataParallelTrainer: the data-parallel training step of a multilayer perceptron on a machine
// of chips (docs/training.md). Every chip holds a replica of the parameters in its HBM and a
// shard of the global batch; one SPMD program per chip runs the step: forward (matmul, bias,
// ReLU), the loss and its gradient (VPU), backward (dW = [A^T; 1] dY with A^T transposed
// through the MXU, dA = dY W^T with transposed weight loads, the ReLU mask on the VPU), the
// gradients' all-reduce over ICI (each piece overlapped with the backward work after it), and
// the SGD update (VPU). The host loads the data once and reads the loss partials each step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "host_port.h"
#include "pod_driver.h"
#include "tpu/train.h"

namespace tpu {

struct TrainOptions {
  // The first layer's gradient is all-reduced in this many row pieces, each overlapped with the
  // gradient matmul of the next (1: one all-reduce per layer).
  std::size_t grad_pieces = 4;
  bool backdoor = false;  // data and parameters in through the backdoor (no simulated time)
};

// One phase of the step's program: a compute part or a collective (the timeline's labels).
struct TrainPhase {
  std::string name;
  bool collective = false;
  uint64_t bytes = 0;  // collectives: bytes per chip (nccl-tests' S)
};

struct TrainStepRun {
  PodProgramRun prog;                           // pod and chip cycles, counters, links
  std::vector<TrainPhase> phases;
  std::vector<std::vector<uint16_t>> cmd_phase;  // per chip, per command: its phase
  std::size_t commands = 0;                     // all chips
  double loss = 0;                              // before this step's update
  std::vector<std::vector<float>> loss_parts;   // per chip: its partial sums
  uint64_t loss_read_cycles = 0;                // the host reading them (all chips at once)
};

class DataParallelTrainer {
 public:
  // spec.batch: examples per chip; spec.chips must be the machine's chip count, spec.lanes its
  // lane count (both set here if 0). Lays the buffers out in every chip's HBM and plans the step
  // (spec().loss_chunk is then known). std::invalid_argument when it cannot run.
  DataParallelTrainer(HostPort& host, MlpSpec spec, TrainOptions opt = {});
  ~DataParallelTrainer();

  const MlpSpec& spec() const { return spec_; }
  uint64_t hbm_bytes_per_chip() const { return hbm_used_; }
  // Useful multiply-adds of one step on one chip: forward, dW and dA of every layer (no dA for
  // the first), without the transposes and the bias rows.
  uint64_t step_macs_per_chip() const;

  // The global batch (chip c takes rows [c x batch, (c + 1) x batch)) and the parameters into
  // every chip's HBM; returns the simulated cycles (0 through the backdoor).
  uint64_t load_data(const MlpData& data);
  uint64_t load_params(const MlpParams& params);

  // One step: every chip at once until every chip is idle, then the loss partials read.
  TrainStepRun step();

  // A chip's parameters, read through the backdoor (no simulated time).
  MlpParams read_params(int chip);
  // The gradient all-reduce as the programs run it (their plans' rounds, in pieces).
  GradAllReduce golden_all_reduce() const;

 private:
  struct Impl;
  HostPort& host_;
  MlpSpec spec_;
  TrainOptions opt_;
  uint64_t hbm_used_ = 0;
  std::unique_ptr<Impl> impl_;
};

// The checks of a step: every chip's parameters against the golden's bit for bit, and every
// replica equal to chip 0's.
struct TrainCheck {
  std::size_t compared = 0, mismatches = 0, replica_mismatches = 0;
  bool pass() const { return mismatches == 0 && replica_mismatches == 0; }
};
TrainCheck check_params(const std::vector<MlpParams>& got, const MlpGolden& golden);

// The fraction of the gradient all-reduces' time hidden behind other work, from the timeline:
// per chip, the cycles in which a collective command was in flight, and of those the cycles in
// which a command of another phase was in flight too; summed over the chips. 1 when there was
// no collective.
double allreduce_hidden_fraction(const TrainStepRun& run, const std::vector<TraceEvent>& events);

}  // namespace tpu
