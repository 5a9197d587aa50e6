// The pod: N verilated chips (tb/chip) on a ring / 2D / 3D torus or mesh, every ICI link a
// channel with a latency, and a host port per chip (docs/pod.md). A chip alone is a pod of one.
//
//  - IciLink: one direction of one link: flits one way and their credits back, each `latency`
//    cycles. A ring buffer indexed by the cycle number, so the chips can be stepped in any order
//    within a cycle (a link has >= 1 cycle of latency): chips couple only through their links
//    and host ports, which is what a later multi-process pod needs.
//  - HostAgent: a chip's host port as the host sees it: a command queue and 64-byte HBM bursts
//    at the port's bandwidth.
//  - PodCore: the chips, links and agents, stepped one cycle at a time, and the registers. A
//    process of the multi-process pod (pod_mpi.h) builds only the chips it owns.
//  - CppPodHost: the HostPort (host_port.h) of a PodCore stepped from plain C++; the SystemC pod
//    (pod_sc.h) implements the same interface over TLM-2.0 sockets.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_dut.h"
#include "chip_contract.h"
#include "chip_trace.h"
#include "fault_config.h"
#include "hbm_config.h"
#include "host_port.h"
#include "tpu/collective.h"
#include "tpu/ocs.h"
#include "tpu/splitmix.h"

namespace tpu {

// The run-time description of a pod (configs/pod_*.yaml, read by sw/config/chip_config.h).
struct PodParams {
  Topology topo = Topology::torus({2, 2});
  std::string variant = "4x4";   // chip variant (every chip the same)
  unsigned link_latency = 1;     // cycles per link, each way (>= 1)
  bool twist = false;            // a twisted torus (docs/topology.md; pod.twist, --twist)
  // Each chip's router and links (tpu/ocs.h), one per chip of topo: a pod of cubes whose slices
  // the optical switches join (ocs_wiring). Empty: topo's torus or mesh (torus_wiring), twisted
  // when `twist`.
  std::vector<ChipWire> wiring;
  unsigned link_width = 0;       // bytes a link carries per cycle; 0: a whole row (lanes x 4)
  // Cycles a link takes per flit (one memory row), 1 to 1023, for any chip variant: the scale
  // models' narrow links (docs/scale_models.md). 0: from link_width. Not both.
  unsigned link_gap = 0;
  unsigned host_bytes_per_cycle = 64;  // bytes a chip's host port moves per cycle (1..64)
  // The VMEM and AMEM rows each chip exposes (chip.vmem_rows, chip.amem_rows; 0: the variant's):
  // MachineInfo::shape says them, and the chips' range checks hold the drivers to them.
  unsigned vmem_rows = 0, amem_rows = 0;
  HbmConfig hbm;
  FaultConfig faults;            // fault injection (none by default: tb/common/fault_config.h)
  std::vector<int> wave_chips;   // chips that dump FST waves
  std::string wave_dir = "waves";  // dumps go to wave_dir/pod_chipN.fst
  std::string wave_path;           // a pod of one chip: its dump file instead, if set
  // The clock the dumps are timed by (chip.clock_ghz): pod cycle t starts at t / clock_ghz ns,
  // as on the trace's timeline (tb/common/wave_clock.h); the dumps start after the reset.
  double wave_clock_ghz = 1.0;
  unsigned threads = 1;            // threads stepping the chips (PodCore; both engines)
  // The watchdog (docs/errors.md): a run in which nothing makes progress for this many cycles
  // stops with a HangError that says what every chip still holds. 0: off.
  uint64_t watchdog_cycles = kDefaultWatchdogCycles;
};

// Faults on one direction of a link's wire (tb/common/fault_config.h): a SplitMix64 generator of
// its own, drawn only for words that travel, in cycle order, so a run is reproducible and the
// same in the C++ and the SystemC pod (the chip that sends on it is the only one that draws).
class LinkFaultGen {
 public:
  LinkFaultGen() = default;
  LinkFaultGen(uint64_t seed, double bit_rate, double burst_rate, double drop_rate);
  bool on() const { return on_; }
  // A valid word of `bits` bits (bit k flipped by flip(k)) goes out: returns false if it is
  // dropped, else flips the bits the wire corrupts.
  template <class Flip>
  bool apply(unsigned bits, Flip&& flip);
  uint64_t corrupted = 0, dropped = 0, bits_flipped = 0;  // words, words, bits

 private:
  uint64_t next() {
    const uint64_t r = splitmix64(st_);
    st_ += 0x9E3779B97F4A7C15ull;
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t geometric();  // error-free bits before the next bit error
  bool on_ = false;
  uint64_t st_ = 0;
  double bit_ = 0, burst_ = 0, drop_ = 0;
  uint64_t to_next_ = 0;   // bits until the next bit error
  unsigned burst_left_ = 0;
};

// One direction of one link. Sender side at cycle t: send_flit/ctl_at; receiver side at cycle t:
// flit_at/send_ctl. What is sent at t arrives at t + latency. Flit words carry the link layer's
// sequence number and CRC; control words (ACK/NAK, credit counts, their CRC) go back. Faults
// (set_faults) corrupt or drop words on their way, or stop the link from a cycle on.
class IciLink {
 public:
  static constexpr unsigned kCtlWords = ChipDut::kIciCtlWords;
  IciLink(unsigned latency, unsigned flit_words);
  // flit_fault: for the flit words; ctl_fault: for the control words; down_at: the cycle from
  // which nothing travels (~0: never).
  void set_faults(const LinkFaultGen& flit_fault, const LinkFaultGen& ctl_fault, uint64_t down_at);
  void send_flit(uint64_t t, bool valid, unsigned vc, const uint32_t* flit);
  bool flit_at(uint64_t t, unsigned* vc, const uint32_t** flit) const;
  // The receiver's control word; cr_valid/cr_vc: the credit its router returned this cycle (for
  // the credit accounting below; the word itself carries the counts).
  void send_ctl(uint64_t t, bool valid, const uint32_t* ctl, bool cr_valid, unsigned cr_vc);
  bool ctl_at(uint64_t t, const uint32_t** ctl) const;
  bool quiet_after(uint64_t t) const {
    return t >= std::max(flit_activity_, credit_activity_) + latency_;
  }
  uint64_t flits() const { return flits_; }
  // The multi-process pod (pod_mpi.h) ships the slots of the links its partition cuts: the
  // slot that arrives at cycle t, read with flit_at / ctl_at on the sending side's process
  // and written whole into the other's copy of the link, counted there as the sender counted it
  // (flits, credits, activity), so both copies agree once a window is exchanged.
  // What the sender did for the slot that arrives at t, beyond the wire: whether it sent a flit
  // (counted, even if a fault dropped it), whether that flit was new (not a replay), and for a
  // control word whether one was sent and the credit its router returned.
  struct SlotMeta {
    bool sent = false, fresh = false, cr_valid = false;
    unsigned cr_vc = 0;
  };
  SlotMeta flit_meta(uint64_t t) const { return fl_[t % fl_.size()].meta; }
  SlotMeta ctl_meta(uint64_t t) const { return cr_[t % cr_.size()].meta; }
  void import_flit(uint64_t t, bool valid, unsigned vc, const uint32_t* flit, bool counted,
                   bool is_new);
  void import_ctl(uint64_t t, bool valid, const uint32_t* ctl, bool sent, bool cr_valid,
                  unsigned cr_vc);
  unsigned latency() const { return latency_; }
  unsigned flit_words() const { return words_; }
  // Flits sent on virtual channel vc whose credit has not come back (in the receiver's buffer,
  // or on the wire either way): the credits the sender is short of.
  uint64_t uncredited(unsigned vc) const { return vc < 4 ? vc_flits_[vc] - vc_credits_[vc] : 0; }
  const LinkFaultGen& flit_faults() const { return ff_; }
  const LinkFaultGen& ctl_faults() const { return cf_; }

 private:
  struct Slot {
    bool valid = false;
    unsigned vc = 0;
    SlotMeta meta;  // for the multi-process pod's exchange
  };
  unsigned latency_, words_;
  std::vector<Slot> fl_, cr_;
  std::vector<uint32_t> data_, ctl_;
  LinkFaultGen ff_, cf_;
  uint64_t down_at_ = ~0ull;
  // The sender writes flits and the receiver control words, possibly from two threads in one
  // cycle: each side keeps its own activity time (and writes slots the other side reads only
  // later), and its own fault generator.
  uint64_t flits_ = 0, flit_activity_ = 0, credit_activity_ = 0;
  unsigned next_seq_ = 0;  // the sequence number of the sender's next new flit
  std::array<uint64_t, 4> vc_flits_{}, vc_credits_{};
};

// A chip's host port: commands in order, HBM bursts (64-byte aligned), status.
class HostAgent {
 public:
  struct MemOp {
    bool write = false;
    uint64_t addr = 0;
    std::vector<uint8_t> data;  // whole bursts
    std::size_t issued = 0, done = 0;
    uint64_t first = ~0ull;  // cycle of its first request (recorded while tracing)
    uint64_t end = 0;        // the cycle after its last response
    bool finished() const { return done * 64 == data.size(); }
  };

  void push(const std::vector<ChipCmd>& cmds) {
    cmds_.insert(cmds_.end(), cmds.begin(), cmds.end());
    trace.on_push(cmds);
  }
  // Queues a copy; returns it (owned here until finished and taken).
  std::shared_ptr<MemOp> mem(bool write, uint64_t addr, const void* data, std::size_t n);
  bool idle() const { return cmds_.empty() && ops_.empty() && !clear_; }
  // Whether the last observe() saw the port move: a command taken, a burst requested or answered.
  bool moved() const { return moved_; }
  // The command the chip's queue holds at index `idx` (since reset or clear), if the agent still
  // has it (it keeps those not issued yet), for hang reports.
  const ChipCmd* taken(uint64_t idx) const {
    return idx >= taken_base_ && idx - taken_base_ < taken_.size() ? &taken_[idx - taken_base_]
                                                                    : nullptr;
  }
  uint64_t taken_count() const { return taken_base_ + taken_.size(); }  // since reset or clear
  void issued_below(uint64_t idx);  // the chip's queue head is at idx: forget what issued
  std::string describe_copies() const;  // the copies in flight, for hang reports
  void set_bytes_per_cycle(unsigned b) { bpc_ = b; }
  void request_clear() {  // drives clear_i for the next cycle
    clear_ = true;
    trace.on_clear();
  }
  std::size_t commands_waiting() const { return cmds_.size(); }
  uint64_t commands_pushed() const { return pushed_; }

  void drive(ChipDut& d);    // inputs for this cycle (before eval)
  // After eval, before the clock edge of cycle t: what moves at the edge.
  void observe(ChipDut& d, uint64_t t = 0);
  // A host-port read came back with an uncorrectable ECC word: the first such word's address
  // (the pod raises it as a ChipError after the cycle).
  bool take_ecc_error(uint64_t* addr) {
    const bool e = ecc_error_;
    *addr = ecc_addr_;
    ecc_error_ = false;
    return e;
  }

  ChipTraceRec trace;  // this chip's timeline (off unless PodCore::set_trace turns it on)

 private:
  MemOp* req_op_ = nullptr;                    // the copy this cycle's request is for
  std::deque<std::shared_ptr<MemOp>> traced_;  // copies queued while tracing, in order
  std::deque<ChipCmd> cmds_;
  std::deque<std::shared_ptr<MemOp>> ops_;
  std::array<std::shared_ptr<MemOp>, 64> tag_op_{};
  std::array<std::size_t, 64> tag_burst_{};
  bool cmd_valid_ = false, req_valid_ = false;
  unsigned req_tag_ = 0;
  uint64_t pushed_ = 0;
  unsigned bpc_ = 64, credit_ = 64;  // port bandwidth: a burst needs 64 bytes of credit
  bool clear_ = false, clearing_ = false;
  bool ecc_error_ = false;
  uint64_t ecc_addr_ = 0;
  bool moved_ = false;
  std::deque<ChipCmd> taken_;  // commands the chip took and has not issued
  uint64_t taken_base_ = 0;    // index of taken_.front()
};

class PodCore {
 public:
  // owned: the chips this process builds and steps (a rank's part of the multi-process pod,
  // pod_mpi.h), in any order; empty: every chip. Only their verilated models and host agents
  // and the links that leave or enter them exist here: a rank of a large pod holds its own
  // chips, not the pod's. Asking for another chip's model or agent is a std::logic_error.
  explicit PodCore(const PodParams& p, std::vector<int> owned = {});
  const PodParams& params() const { return p_; }
  const MachineInfo& info() const { return info_; }
  int num_chips() const { return p_.topo.num_chips(); }  // in the pod, built here or not
  // The chips built and stepped here (every chip in one process), increasing.
  const std::vector<int>& owned() const { return order_; }
  int built_chips() const { return static_cast<int>(order_.size()); }  // chip models built here
  bool owns(int i) const {
    return i >= 0 && i < num_chips() && chips_[static_cast<std::size_t>(i)] != nullptr;
  }
  ChipDut& chip(int i) { return model(i); }
  HostAgent& agent(int i);
  const ChipShape& shape() const { return info_.shape; }
  uint64_t cycle() const { return cycle_; }
  unsigned flit_words() const { return words_; }
  unsigned link_gap() const { return gap_; }          // cycles per flit on a link
  double link_bytes_per_cycle() const { return double(shape().cols) * 4.0 / gap_; }

  // One chip's part of cycle `cycle()`: links and host port in, eval, links out, clock edge.
  // Every chip once per cycle (any order), then end_cycle().
  void step_chip(int i);
  void end_cycle();
  // Every chip's part of the cycle: on the threads (set_threads), else one by one (0 up, or down).
  void step_chips(bool reverse = false);
  void step(bool reverse = false);  // step_chips, then end_cycle()
  // From now on an error a chip raises while it steps (a link declared down, an uncorrectable
  // host read) stops that chip alone, kept for chip_fault(i), instead of ending the cycle with
  // the exception: a pod of isolated slices (pod_slices.h) whose other slices run on.
  void contain_chip_faults();
  std::exception_ptr chip_fault(int i) const {
    return contain_faults_.empty() ? nullptr : contain_faults_[static_cast<std::size_t>(i)];
  }
  // From now on step() steps `chips` alone; the others stand still, as they are, until the next
  // call: for a pod whose parts share no link (pod_slices.h: the slices whose jobs wait on the
  // machine), where standing still is what an idle part would do, only cheaper.
  void step_only(const std::vector<int>& chips);
  // Threads that step the chips of a cycle (each a fixed slab of chips; the caller steps the
  // first). Bit- and cycle-identical for any count: within a cycle a chip reads only what its
  // links carried from earlier cycles and writes only its own state and its links' later slots
  // (a test compares 1 and several threads). 1: the calling thread alone (the default).
  void set_threads(unsigned n);
  unsigned threads() const;

  // No host work, no chip busy, no flit in a router or on a link: of the chips built here and
  // the links that leave or enter them (the whole pod in one process; a rank's part in several).
  bool idle() const;
  // The same of `chips` alone (built here) and the links that leave or enter them: a slice of
  // the pod (pod_slices.h).
  bool idle(const std::vector<int>& chips) const;

  int num_links() const { return static_cast<int>(link_ids_.size()); }  // in the pod
  IciLink& link(int l);  // a link built here (one of whose ends is owned), else logic_error
  int link_sender(int l) const { return link_ids_[static_cast<std::size_t>(l)].chip; }
  int link_receiver(int l) const { return link_rx_[static_cast<std::size_t>(l)]; }
  // Throws ChipError if a chip's error register is set (naming it, the code and the command)
  // and chip_errors, PodError if an HBM device checker saw a violation.
  void check_errors(bool chip_errors = true);
  void check_errors(bool chip_errors, const std::vector<int>& chips);  // of `chips` alone
  std::string describe_chip(int i);  // coordinate, busy, commands waiting: for hang reports
  std::string describe_hang(uint64_t cycles);  // every chip built here, for a PodError
  static std::string hang_header(uint64_t cycles);  // describe_hang's first line
  // The watchdog (docs/errors.md), called by whoever runs the pod after each end_cycle(): a
  // HangError when nothing made progress for watchdog_cycles (see set_watchdog).
  void watch();
  void set_watchdog(uint64_t cycles) { p_.watchdog_cycles = cycles; }
  uint64_t watchdog() const { return p_.watchdog_cycles; }
  uint64_t last_progress() const {  // the cycle after the last progress
    uint64_t v = last_progress_;
    for (uint64_t c : chip_progress_) v = std::max(v, c);
    return v;
  }
  // What is stuck, after `stalled` cycles without progress: every chip (built here) that is not
  // idle (its queue head, the units still in flight, its host copies), links short of credits.
  std::string describe_stall(uint64_t stalled);
  // describe_stall in parts, for a pod split across processes: the header, each process's part
  // (its chips and the links they send on, keyed by chip and link), composed in chip order.
  struct StallPart {
    std::vector<std::pair<int, std::string>> chips, links;
    std::vector<int> idle;
  };
  std::string stall_header(uint64_t stalled) const;
  StallPart stall_part(const std::vector<int>& chips);
  static std::string compose_stall(const std::string& header, std::vector<StallPart> parts);
  ChipCounters counters(int i);       // every statistic of chip i (between cycles)
  // Every link of the pod, each field as this process counts it: from the chip that counts it
  // (flits and the sender's counters: the sender; CRC errors of flits: the receiver), 0 where
  // that chip is not built here. The whole pod in one process; summed over the ranks in several.
  std::vector<LinkStat> link_stats() const;
  // The link layer's counters of the links in v (chip, dir set), from `counter(chip, dir, sel)`
  // (ChipDut::ici_link_stat of a chip's port): the SystemC pod reads them through its sockets.
  void fill_link_errors(std::vector<LinkStat>& v,
                        const std::function<uint64_t(int, int, unsigned)>& counter) const;
  uint64_t link_counter(int chip, int dir, unsigned sel) const {
    return model(chip).ici_link_stat(static_cast<unsigned>(dir), sel);
  }
  // Chip `chip`'s link out on direction dir, if built here (nullptr: none, or not built).
  const IciLink* link(int chip, int dir) const { return ports_[chip][dir].out; }
  ChipStatus status(int i) const;
  // The end of a run that began at cycle `start`, the pod idle: the errors checked, the cycles.
  RunStats finish_run(uint64_t start, bool chip_errors);
  bool has_link(int i, int dir) const { return ports_[i][dir].peer >= 0; }  // in the topology
  uint64_t link_flits(int i, int dir) const {  // flits chip i (built here) sent on direction dir
    return ports_[i][dir].out && owns(i) ? ports_[i][dir].out->flits() : 0;
  }
  uint64_t last_busy(int i) const { return last_busy_[i]; }  // cycle after its last busy one
  // Flits sent on every link (built here) whose credits have not come back: 0 in an idle pod
  // (credits are conserved), the flits held in routers' buffers during a run.
  uint64_t uncredited_flits() const {
    uint64_t n = 0;
    for (const auto& l : links_)
      if (l)
        for (unsigned vc = 0; vc < 4; ++vc) n += l->uncredited(vc);
    return n;
  }
  void check_copy(const HostCopy& c) const;  // std::invalid_argument naming the rule
  // The backdoor: HBM bytes in or out in zero simulated time (the chip must be idle).
  void backdoor(int chip, bool write, uint64_t addr, void* data, std::size_t n);
  // The timeline (chip_trace.h): every (built) chip's recorder on or off, the recorded events
  // taken out (by chip, then track, then time), a label for a chip's next commands.
  void set_trace(const TraceOptions& o);
  std::vector<TraceEvent> take_trace();
  void trace_label(int chip, const std::string& label);

 private:
  struct Port {
    IciLink* out = nullptr;  // this chip's tx on the direction (nullptr: tied off, not built)
    IciLink* in = nullptr;   // the neighbour's tx that arrives here
    int peer = -1;           // the neighbour (-1: no link in the topology)
  };
  [[noreturn]] void link_down_error(int chip);
  bool chip_idle(int i) const;  // host port, chip, router and HBM
  void step_one(int i);          // step_chip, its error kept when faults are contained
  std::vector<std::exception_ptr> contain_faults_;  // per chip once contained, else empty
  std::vector<int> stepped_;  // the chips step() steps: order_, or step_only's
  void cut_slabs();
  // The --waves-chips dumps of the chips this process owns, opened after the reset.
  void wire_links();
  void check_link_downs() const;
  void arm_hbm_flips();
  void open_waves();
  // Chip i's model: std::invalid_argument if i is not in the pod, std::logic_error if it is
  // another process's (not built here).
  ChipDut& model(int i) const;
  PodParams p_;
  MachineInfo info_;
  std::vector<uint64_t> last_busy_;
  std::vector<std::unique_ptr<ChipDut>> chips_;     // per chip; nullptr: not built here
  std::vector<std::unique_ptr<HostAgent>> agents_;  // per chip; nullptr: not built here
  std::vector<std::unique_ptr<IciLink>> links_;     // per link; nullptr: neither end built here
  std::vector<std::array<Port, 6>> ports_;
  std::vector<LinkStat> link_ids_;
  std::vector<int> link_rx_;  // per link: the receiving chip
  std::vector<int> order_;    // the chips built here, which step() steps, increasing
  unsigned words_ = 0;
  unsigned gap_ = 1;
  uint64_t cycle_ = 0;
  struct Pool;
  std::unique_ptr<Pool> pool_;

 public:
  ~PodCore();
  PodCore(const PodCore&) = delete;
  PodCore& operator=(const PodCore&) = delete;
  // The watchdog's state: the cycle after the last one with progress seen at the ports; the
  // work counters of every chip at the last check (progress the ports do not show: a long DMA
  // or MATMUL), the cycle of that check and the one before.
  uint64_t last_progress_ = 0, last_check_ = 0, prev_check_ = 0;
  std::vector<uint64_t> chip_progress_;  // per chip (written by the thread stepping it)
  struct Head {
    uint32_t index = 0;  // the chip's queue head (trace port), since reset or clear
    bool wait = false;   // an ICI_WAIT whose counter is short
  };
  std::vector<Head> head_;
  std::vector<ChipCounters> check_ctr_, prev_ctr_;
  bool work_changed();  // reads the counters; true if a work counter moved since the last check
};

// The pod stepped from plain C++ (no SystemC): a chip alone, tests, the SystemC overhead bench.
// The copies of one HostPort::copy call: each chip takes its copies one after another, the next
// queued in the cycle the previous finishes (what the SystemC pod's host lane does with one TLM
// transaction per copy). Only the chips `mine` accepts (all: one process; a rank's own: MPI).
class HostCopyQueues {
 public:
  HostCopyQueues(PodCore& core, const std::vector<HostCopy>& ops,
                 const std::function<bool(int)>& mine = nullptr);
  // Between cycles: starts each chip's next copy when the previous one finished; false once
  // every copy has finished.
  bool advance();
  // Copy i's bytes as read (a read that finished on a chip of this process).
  const std::vector<uint8_t>& read(std::size_t i) const { return mops_[i]->data; }

 private:
  PodCore& core_;
  const std::vector<HostCopy>& ops_;
  std::vector<std::deque<std::size_t>> pending_;          // per chip
  std::vector<std::size_t> active_;                       // per chip; ops_.size(): none
  std::vector<std::shared_ptr<HostAgent::MemOp>> mops_;   // per copy
};

// What a host port does after each cycle of one wait (a copy, a run) that began at its cycle
// when this is made: every 1024 cycles the error registers of `chips` (their chip errors only if
// `chip_errors`), the port's progress callback, and the bound on the wait's length, a PodError
// naming `what` was still running. CppPodHost and the sliced pod's slices (pod_slices.h).
class WaitCycles {
 public:
  WaitCycles(PodCore& core, HostPort& port, const std::vector<int>& chips, bool chip_errors,
             uint64_t max_cycles, std::string what = "")
      : core_(core),
        port_(port),
        chips_(chips),
        chip_errors_(chip_errors),
        max_(max_cycles),
        what_(std::move(what)),
        start_(port.cycle()),
        next_progress_(start_ + port.progress_every) {}
  // After the cycle that brought the port's clock to t: errors and progress.
  void tick(uint64_t t) {
    if ((t & 1023) == 0) core_.check_errors(chip_errors_, chips_);
    if (port_.progress && t >= next_progress_) {
      port_.progress(t - start_);
      next_progress_ += port_.progress_every;
    }
  }
  // Then the bound.
  void bound(uint64_t t) const {
    if (t - start_ > max_) throw PodError(core_.describe_hang(max_) + what_);
  }
  uint64_t start() const { return start_; }

 private:
  PodCore& core_;
  HostPort& port_;
  const std::vector<int>& chips_;
  bool chip_errors_;
  uint64_t max_;
  std::string what_;
  uint64_t start_, next_progress_;
};

class CppPodHost final : public HostPort {
 public:
  explicit CppPodHost(const PodParams& p) : core_(p) {}
  PodCore& core() { return core_; }  // for the harness's own tests (stepping order, waves)
  const MachineInfo& info() const override { return core_.info(); }
  uint64_t copy(const std::vector<HostCopy>& ops) override;
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override;
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override;
  void push(int chip, const std::vector<ChipCmd>& cmds) override;
  RunStats run_until_idle(uint64_t max_cycles = 50'000'000, bool stop_on_error = true) override;
  void set_watchdog(uint64_t cycles) override { core_.set_watchdog(cycles); }
  ChipStatus status(int chip) override { return core_.status(chip); }
  ChipCounters counters(int chip) override { return core_.counters(chip); }
  std::vector<LinkStat> link_stats() override { return core_.link_stats(); }
  void clear(int chip) override;
  uint64_t cycle() const override { return core_.cycle(); }
  void set_trace(const TraceOptions& o) override { core_.set_trace(o); }
  std::vector<TraceEvent> take_trace() override { return core_.take_trace(); }
  void trace_label(int chip, const std::string& label) override {
    core_.trace_label(chip, label);
  }
  // Steps the chips from the last to the first: chips couple only through their links, so the
  // order within a cycle must not change anything (a test checks it).
  bool reverse_step_order = false;

 private:
  PodCore core_;
};

}  // namespace tpu
