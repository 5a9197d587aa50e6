// The scheduler: a workload's ops on named buffers (ops.h) turned into one SPMD program
// (spmd_program.h; docs/pod.md "Ops and the scheduler"). A Workload holds the machine's chip
// drivers, the buffers (allocated in declaration order on every chip, through
// ChipDriver::alloc_matrix, at the same address everywhere) and the ops. schedule() lays out VMEM
// (the compute area, then one window per collective region), gives each collective, and each
// send and its receive, a VMEM window and a set of ICI counters apart from those that may run
// at the same time, plans every op's commands, and orders them so the units overlap: a
// collective runs beside the compute after it that does not depend on it (merged by command
// count), up to the next collective or the first op that needs its result; a receive waits after
// the compute after it that does not need it and all but the last of the leading loads of the
// first op that does (its bias and weights load while the block is on the wire). What cannot fit
// is a std::invalid_argument naming the op and the buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "host_port.h"
#include "ops.h"
#include "pod_driver.h"
#include "spmd_program.h"

namespace tpu {

// A buffer that does not fit in a chip's HBM (its name, its bytes, the HBM left).
class BufferDoesNotFit : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class Workload {
 public:
  explicit Workload(HostPort& host);
  ~Workload();
  HostPort& host() { return host_; }
  const MachineInfo& info() const { return host_.info(); }
  int num_chips() const { return static_cast<int>(drv_.size()); }
  ChipDriver& driver(int chip) { return *drv_.at(static_cast<std::size_t>(chip)); }

  // Declares a buffer and allocates it on every chip (after the ones declared before it);
  // BufferDoesNotFit when a chip's HBM has no room. Returns its index.
  int add_buffer(Buffer b);
  const std::vector<Buffer>& buffers() const { return buffers_; }
  const Buffer& buffer(int i) const { return buffers_.at(static_cast<std::size_t>(i)); }
  // The buffer as a matrix in HBM, and a block of it.
  const HbmMatrix& matrix(int i) const { return mats_.at(static_cast<std::size_t>(i)); }
  HbmMatrix view(const BufferRef& r) const;
  uint64_t hbm_used() const;  // bytes allocated on a chip (the drivers' too)
  // The block of a declared buffer that a matrix view is (its address, rows, columns and pitch
  // inside one buffer), and the whole rows of the buffer that hold [addr, addr + bytes);
  // std::logic_error when they lie in no buffer.
  BufferRef ref_of(const HbmMatrix& v) const;
  BufferRef ref_span(uint64_t addr, uint64_t bytes) const;

  // Adds an op (checked: its refs name buffers, its chips exist); returns its index.
  int add_op(Op op);
  const std::vector<Op>& ops() const { return ops_; }
  // Drops the ops from index n on (a workload whose program changes from run to run, the GPT
  // step's embedding with its tokens, keeps its buffers and declares its ops again).
  void truncate_ops(std::size_t n) {
    if (n < ops_.size()) ops_.resize(n);
  }

  // Phases named before any op uses them come first in the table, in this order (the report's
  // order); the others follow in the order their first op comes.
  void declare_phase(const std::string& name) { phase_order_.push_back(name); }
  const std::vector<std::string>& phase_order() const { return phase_order_; }

 private:
  HostPort& host_;
  std::vector<std::unique_ptr<ChipDriver>> drv_;
  std::vector<Buffer> buffers_;
  std::vector<HbmMatrix> mats_;
  std::vector<Op> ops_;
  std::vector<std::string> phase_order_;
};

// A vector map op whose refs are the map's own matrices, each found in w's buffers (ref_of):
// inputs, constants, outputs, the sum's and the column sums' matrices.
Op vector_map_op(const Workload& w, std::string name, VpuMap m);

struct ScheduleOptions {
  // VMEM and ICI counter regions the collectives (and sends) get: 0, one each (every one may run
  // beside any other); k, k regions in rotation (op i's region is i mod k: a workload whose
  // stream finishes a collective before the one k later starts).
  std::size_t collective_regions = 0;
  // Per op (by index), the region of a collective or send among collective_regions (k > 0),
  // instead of the rotation; -1 or beyond the vector: the rotation's. The pipeline step keeps
  // the sends of each direction in regions of their own, so a chip's windows of activations
  // coming in and of gradients coming back never share rows or counters.
  std::vector<int> comm_region;
  MergeOrder merge = MergeOrder::kByCount;
  // The ops before this one ran in an earlier program (their results are in HBM): the program
  // holds the ops from here on, and its phase table their phases only.
  std::size_t first_op = 0;
  // The program runs alone, nothing beside it in the chips' streams: its one collective (the
  // program's only op) gets the whole VMEM, every ICI counter and early heads, the
  // PodCollectiveOptions defaults PodDriver::run gives a collective.
  bool alone = false;
  // Gradient all-reduces (CollectiveOp::gradient) lag behind the compute: such a collective's
  // step runs on over the gradient all-reduces after it and the compute among and after them,
  // even what depends on them, up to the next other communication; its collectives, one after
  // the other, are spread over its compute by command count, each after the compute it needs and
  // before the compute that needs it (merge() with needs). A chain of all-reduces of a few
  // hundred bytes, each beside little compute before the next, then hides behind the compute
  // that follows instead of holding it behind their waits in the in-order stream.
  bool lag_gradients = false;
  // Each chip's program ends with a HALT (under its last command's label), as a program that
  // ChipDriver::plan_matmul plans alone does: the chips stop, to be cleared after the run.
  bool halt = false;
};

// A collective's (or a send's) place: VMEM rows [vmem_base, vmem_base + vmem_rows), ICI
// counters [counter_base, counter_base + counter_count).
struct CommWindow {
  int op = -1;
  uint32_t vmem_base = 0, vmem_rows = 0, counter_base = 0, counter_count = 0;
};

struct Schedule {
  SpmdProgram program;
  uint32_t vmem_compute = 0;            // the compute's VMEM rows: [0, vmem_compute)
  std::vector<CommWindow> windows;      // per collective or send, in op order
  std::vector<PodProgram> collectives;  // per collective op, in op order (its rounds)
  // Per op: per chip, what planning a matmul op gave (ChipDriver::plan_matmul: its ideal cycles,
  // its chunks; to be finished by ChipDriver::finish_matmul after the run); empty for the others.
  std::vector<std::vector<MatmulRun>> matmuls;
  std::vector<int> phase_of_op;  // per op: its phase in the program (-1: not in it)
  // The steps in program order: each a list of ops (a collective first, then the compute
  // merged beside it; under lag_gradients, the gradient all-reduces among it too).
  std::vector<std::vector<int>> steps;
};

// The ops' dependencies: for each op, the earlier ops it must follow (by its buffers and its
// `after` list), ascending.
std::vector<std::vector<int>> op_dependencies(const Workload& w);

// The steps of the stream (Schedule::steps) from the op list and its dependencies (the ops from
// first_op on; lag: ScheduleOptions::lag_gradients).
std::vector<std::vector<int>> schedule_steps(const Workload& w, std::size_t first_op = 0,
                                             bool lag = false);
// The same from dependencies already found (op_dependencies(w)).
std::vector<std::vector<int>> schedule_steps(const Workload& w,
                                             const std::vector<std::vector<int>>& deps,
                                             std::size_t first_op = 0, bool lag = false);

// The compute area and the collectives' windows (Schedule::vmem_compute, windows), for the ops
// from o.first_op on.
std::vector<CommWindow> comm_windows(const Workload& w, const ChipShape& s,
                                     const ScheduleOptions& o, uint32_t* vmem_compute);

Schedule schedule(Workload& w, const ScheduleOptions& o = {});

// The memory rows a send of the contiguous block `v` moves (its window holds twice as many):
// whole memory rows of 4-byte words where its rows fill them (a bf16 block's pairs as they
// are), else one element a lane (a bf16 DMA's).
uint32_t p2p_rows(const HbmMatrix& v, unsigned lanes);

// The workload's host copies of one direction (into HBM, or out of it into their `data`), every
// chip at once through the host ports, or the backdoor; returns the simulated cycles.
uint64_t run_host_copies(Workload& w, bool to_device, bool backdoor = false);

}  // namespace tpu
