// The pod: N verilated chips (tb/chip) on a ring / 2D / 3D torus or mesh, every ICI link a
// channel with a latency, and a host port per chip (docs/pod.md).
//
//  - IciLink: one direction of one link: flits one way and their credits back, each `latency`
//    cycles. A ring buffer indexed by the cycle number, so the chips can be stepped in any order
//    within a cycle (a link has >= 1 cycle of latency): chips couple only through their links
//    and host ports, which is what a later multi-process pod needs.
//  - HostAgent: a chip's host port as the host sees it: a command queue and 64-byte HBM bursts.
//  - PodCore: the chips, links and agents, stepped one cycle at a time.
//  - PodHost: what the pod driver (sw/driver/pod_driver.h) uses: blocking memory copies,
//    command pushes, run-until-idle, counters. CppPodHost steps the core from plain C++; the
//    SystemC pod (pod_sc.h) implements it over TLM-2.0 sockets.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_dut.h"
#include "chip_isa.h"
#include "hbm_config.h"
#include "tpu/collective.h"

namespace tpu {

// The run-time description of a pod (configs/pod_*.yaml, read by sw/driver/pod_config.h).
struct PodParams {
  Topology topo = Topology::torus({2, 2});
  std::string variant = "4x4";   // chip variant (every chip the same)
  unsigned link_latency = 1;     // cycles per link, each way (>= 1)
  unsigned link_width = 0;       // bytes a link carries per cycle; 0: a whole row (lanes x 4)
  HbmConfig hbm;
  std::vector<int> wave_chips;   // chips that dump FST waves
  std::string wave_dir = "waves";
};

// A pod-level failure: a chip's error register, an RTL assertion, a hang. Names the chip.
class PodError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One direction of one link. Sender side at cycle t: send_flit/credit_at; receiver side at
// cycle t: flit_at/send_credit. What is sent at t arrives at t + latency.
class IciLink {
 public:
  IciLink(unsigned latency, unsigned flit_words);
  void send_flit(uint64_t t, bool valid, unsigned vc, const uint32_t* flit);
  bool flit_at(uint64_t t, unsigned* vc, const uint32_t** flit) const;
  void send_credit(uint64_t t, bool valid, unsigned vc);
  bool credit_at(uint64_t t, unsigned* vc) const;
  bool quiet_after(uint64_t t) const { return t >= last_activity_ + latency_; }
  uint64_t flits() const { return flits_; }

 private:
  struct Slot {
    bool valid = false;
    unsigned vc = 0;
  };
  unsigned latency_, words_;
  std::vector<Slot> fl_, cr_;
  std::vector<uint32_t> data_;
  uint64_t flits_ = 0, last_activity_ = 0;
};

// A chip's host port: commands in order, HBM bursts (64-byte aligned), status.
class HostAgent {
 public:
  struct MemOp {
    bool write = false;
    uint64_t addr = 0;
    std::vector<uint8_t> data;  // whole bursts
    std::size_t issued = 0, done = 0;
    bool finished() const { return done * 64 == data.size(); }
  };

  void push(const std::vector<ChipCmd>& cmds) { cmds_.insert(cmds_.end(), cmds.begin(), cmds.end()); }
  // Queues a copy; returns it (owned here until finished and taken).
  std::shared_ptr<MemOp> mem(bool write, uint64_t addr, const void* data, std::size_t n);
  bool idle() const { return cmds_.empty() && ops_.empty(); }
  std::size_t commands_waiting() const { return cmds_.size(); }
  uint64_t commands_pushed() const { return pushed_; }

  void drive(ChipDut& d);    // inputs for this cycle (before eval)
  void observe(ChipDut& d);  // after eval, before the clock edge: what moves at the edge

 private:
  std::deque<ChipCmd> cmds_;
  std::deque<std::shared_ptr<MemOp>> ops_;
  std::array<std::shared_ptr<MemOp>, 64> tag_op_{};
  std::array<std::size_t, 64> tag_burst_{};
  bool cmd_valid_ = false, req_valid_ = false;
  unsigned req_tag_ = 0;
  uint64_t pushed_ = 0;
};

// Statistics of one directed link.
struct LinkStat {
  int chip = 0;   // sender
  int dir = 0;    // 0..5: +X -X +Y -Y +Z -Z
  uint64_t flits = 0;
};

class PodCore {
 public:
  explicit PodCore(const PodParams& p);
  const PodParams& params() const { return p_; }
  int num_chips() const { return static_cast<int>(chips_.size()); }
  ChipDut& chip(int i) { return *chips_[i]; }
  HostAgent& agent(int i) { return agents_[i]; }
  const ChipShape& shape() const { return chips_[0]->shape(); }
  uint64_t cycle() const { return cycle_; }
  unsigned flit_words() const { return words_; }
  unsigned link_gap() const { return gap_; }          // cycles per flit on a link
  double link_bytes_per_cycle() const { return double(shape().cols) * 4.0 / gap_; }

  // One chip's part of cycle `cycle()`: links and host port in, eval, links out, clock edge.
  // Every chip once per cycle (any order), then end_cycle().
  void step_chip(int i);
  void end_cycle();
  void step(bool reverse = false);  // every chip (0 up, or down), then end_cycle()

  bool idle() const;  // no host work, no chip busy, no flit in a router or on a link
  // Throws PodError if a chip's error register is set (naming it and the command).
  void check_errors();
  std::string describe_chip(int i);  // coordinate, busy, commands waiting: for hang reports
  ChipCounters counters(int i);       // every statistic of chip i (between cycles)
  std::vector<LinkStat> link_stats() const;

 private:
  struct Port {
    IciLink* out = nullptr;  // this chip's tx on the direction (nullptr: tied off)
    IciLink* in = nullptr;   // the neighbour's tx that arrives here
  };
  PodParams p_;
  std::vector<std::unique_ptr<ChipDut>> chips_;
  std::vector<HostAgent> agents_;
  std::vector<std::unique_ptr<IciLink>> links_;
  std::vector<std::array<Port, 6>> ports_;
  std::vector<LinkStat> link_ids_;
  unsigned words_ = 0;
  unsigned gap_ = 1;
  uint64_t cycle_ = 0;
};

// What a pod driver sees.
class PodHost {
 public:
  virtual ~PodHost() = default;
  virtual PodCore& core() = 0;
  // Copies through chip `chip`'s host port: 64-byte aligned address and length. They take
  // simulated time (the other chips run meanwhile).
  virtual void write(int chip, uint64_t addr, const void* data, std::size_t n) = 0;
  virtual void read(int chip, uint64_t addr, void* data, std::size_t n) = 0;
  // Queues commands on chip `chip` (they issue while the pod runs).
  virtual void push(int chip, const std::vector<ChipCmd>& cmds) = 0;
  // Runs until every chip is idle and every link quiet; returns the cycles it took. Throws
  // PodError on a chip error or after max_cycles (a hang), naming the chips still busy.
  virtual uint64_t run_until_idle(uint64_t max_cycles = 50'000'000) = 0;
  // Called about every progress_every cycles by run_until_idle with (cycles so far).
  std::function<void(uint64_t)> progress;
  uint64_t progress_every = 100000;
};

// The pod stepped from plain C++ (no SystemC): tests, and the SystemC overhead benchmark.
class CppPodHost final : public PodHost {
 public:
  explicit CppPodHost(const PodParams& p) : core_(p) {}
  PodCore& core() override { return core_; }
  void write(int chip, uint64_t addr, const void* data, std::size_t n) override;
  void read(int chip, uint64_t addr, void* data, std::size_t n) override;
  void push(int chip, const std::vector<ChipCmd>& cmds) override;
  uint64_t run_until_idle(uint64_t max_cycles) override;
  // Steps the chips from the last to the first: chips couple only through their links, so the
  // order within a cycle must not change anything (a test checks it).
  bool reverse_step_order = false;

 private:
  void wait_op(int chip, const std::shared_ptr<HostAgent::MemOp>& op);
  PodCore core_;
};

// The "chip (x,y,z)" name of chip id i.
std::string chip_name(const Topology& topo, int id);

}  // namespace tpu
