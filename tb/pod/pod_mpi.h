// The pod split across processes (MPI ranks), bit- and cycle-identical to one process
// (docs/scale.md). Kept close to SST's concepts, so the pod could later run under SST itself:
// the chips are the components, the ICI links the links, each with its latency.
//
//  - PodPartition: who owns which chip (a slab along the longest dimension: the cut that crosses
//    the fewest links) and which links the partition cuts. Plain data, no MPI.
//  - WindowExchange: moves the cut links' slots (flits one way, credits the other) between the
//    processes once per window of at most `link_latency` cycles: what a chip sends at t arrives
//    at t + latency, so within a window no process can affect another (the lookahead).
//  - MpiPodHost: the HostPort of one rank of such a pod. Every rank runs the same driver code
//    (a replicated host): pushes and copies into a chip take effect on its owner; what the host
//    reads (copies out, backdoor reads, registers, link statistics, traces, errors) is taken on
//    the owner and broadcast, so every rank's driver sees the same values.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "host_port.h"
#include "pod.h"

namespace tpu {

struct PodPartition {
  int ranks = 1;
  int dim = -1;                         // the dimension cut into slabs (-1: chip-id blocks)
  std::vector<int> owner;               // per chip: its rank
  std::vector<std::vector<int>> chips;  // per rank: its chips, increasing
  struct Cut {
    int link = 0;      // PodCore link index
    int sender = 0;    // the sending chip's rank
    int receiver = 0;  // the receiving chip's rank
  };
  std::vector<Cut> cut;  // links whose ends are on different ranks

  // Slabs along the longest dimension (ties: the outermost, whose slabs are contiguous chip
  // ids), as even as the extent allows; more ranks than that extent: blocks of chip ids.
  // std::invalid_argument for more ranks than chips. Cut links from the core's links.
  static PodPartition slabs(const Topology& topo, int ranks);
  void find_cuts(const PodCore& core);
};

// This process's place in the MPI world (size 1 when not launched by mpirun with several ranks,
// or built without MPI).
struct MpiWorld {
  int rank = 0;
  int size = 1;
  int local_size = 1;  // ranks on this machine
};
const MpiWorld& mpi_world();
// Ranks that mpirun asked for (OMPI_COMM_WORLD_SIZE; 1 if unset), before or without MPI_Init.
int mpi_launch_size();
bool mpi_built();  // this build has MPI support
// MPI_Init when launched with several ranks (built with MPI); mpi_finalize at the end.
void mpi_init(int* argc, char*** argv);
void mpi_finalize();
// The end of a command that failed (exit code `code`) with several ranks: an error every rank
// raised together (agreed, e.g. a chip error) finalizes as usual; one met by rank 0 alone (bad
// input found before the pod ran, a file that cannot be written) aborts the other ranks, which
// would otherwise wait for rank 0 in their next collective. Returns code.
int mpi_end_failed(int code);
// The ranks' meeting before the pod's first collective, so that an error one rank met before the
// pod ran (a bad input every rank finds alike, an output only rank 0 checks) ends every rank
// cleanly (MPI_Finalize, exit 2, the message printed once by rank 0) instead of MPI_Abort: a
// pod command calls it with "" before it builds the pod; a rank whose command failed before
// that calls it with its error at the end. Returns the error of the lowest rank that had one (""
// when none), which then counts as agreed. Without several ranks, returns `error`.
std::string mpi_agree_start(const std::string& error);
// Whether this rank already met the others there.
bool mpi_started();

// What the window protocol cost this process (the reports' "mpi" group), summed over runs.
struct MpiStats {
  uint64_t windows = 0;            // windows stepped
  uint64_t bytes_sent = 0;         // slot bytes this rank sent to others
  double exchange_seconds = 0;     // in the exchange and the per-window agreement (waits included)
  double host_seconds = 0;         // with an MpiPodHost alive (construction to destruction)
  uint64_t chip_models = 0;        // chip models this rank built (its own chips: PodCore)
  uint64_t chip_models_total = 0;  // summed over the ranks: the pod's chips, each built once
};
MpiStats& mpi_stats();

#ifdef TPU_HAVE_MPI
class WindowExchange {
 public:
  WindowExchange(PodCore& core, const PodPartition& part, int rank);
  // The slots that arrive in [t + latency, t + latency + w), written by senders on this rank in
  // the window [t, t + w), shipped to their receivers' ranks and written into their copies.
  void exchange(uint64_t t, unsigned w);

 private:
  struct Peer {
    int rank = 0;
    std::vector<int> flits_out, credits_out;  // links whose flits / credits this rank sends
    std::vector<int> flits_in, credits_in;    // and receives
    std::vector<uint8_t> tx, rx;
  };
  PodCore& core_;
  std::vector<Peer> peers_;
  unsigned words_;
};

class MpiPodHost final : public HostPort {
 public:
  explicit MpiPodHost(const PodParams& p);
  ~MpiPodHost() override;
  PodCore& core() { return core_; }
  const PodPartition& partition() const { return part_; }
  const MachineInfo& info() const override { return core_.info(); }
  uint64_t copy(const std::vector<HostCopy>& ops) override;
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override;
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override;
  void push(int chip, const std::vector<ChipCmd>& cmds) override;
  RunStats run_until_idle(uint64_t max_cycles = 50'000'000, bool stop_on_error = true) override;
  void set_watchdog(uint64_t cycles) override { core_.set_watchdog(cycles); }
  ChipStatus status(int chip) override;
  ChipCounters counters(int chip) override;
  std::vector<LinkStat> link_stats() override;
  void clear(int chip) override;
  uint64_t cycle() const override { return core_.cycle(); }
  void set_trace(const TraceOptions& o) override { core_.set_trace(o); }
  std::vector<TraceEvent> take_trace() override;
  void trace_label(int chip, const std::string& label) override;

 private:
  // Steps windows until `done` (this rank's part, checked before each cycle; once true it must
  // stay true) holds on every rank, stopping every rank at the first cycle it holds on all.
  // A chip error (every 1024 cycles when chip_errors), an RTL error, the watchdog or max_cycles
  // is raised on every rank alike.
  template <class Done>
  void run_windows(Done done, uint64_t start, uint64_t max_cycles, bool chip_errors,
                   const char* what);
  void step_one(bool chip_errors);  // this rank's chips, one cycle; errors every 1024 cycles
  // Every rank: throws the earliest error any rank holds (the same message and type on all).
  void agree_errors(std::exception_ptr e, uint64_t at);
  // Runs f on chip's owner; its error, if any, is raised on every rank.
  template <class F>
  void on_owner(int chip, F f);
  void watchdog(uint64_t pod_progress);  // at a window's end, with the pod's last progress
  bool owns(int chip) const { return part_.owner[static_cast<std::size_t>(chip)] == rank_; }

  int rank_;
  PodPartition part_;
  std::unique_ptr<PodCore> own_;
  PodCore& core_;  // *own_: this rank's chips only
  std::unique_ptr<WindowExchange> xch_;
  double born_ = 0;
};
#endif

}  // namespace tpu
