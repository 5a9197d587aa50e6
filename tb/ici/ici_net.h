// IciNet: drives a verilated ICI network of tpu_ici_router cycle by cycle: per-node source
// queues feeding the local inject ports, reassembly of ejected packets, run-time topology and
// link latency, the routers' statistics, assertion failures, and an optional FST dump. The
// network is one verilated router model per node, wired in C++ (tb/ici/ici_net_nodes.cc).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ici_fields.h"  // kIciMaxK, the coordinate and header packing (tb/common)

namespace tpu {

class IciNetModel;

// Compile-time shape of the built model (CMake passes the same values to Verilator's -G).
#ifndef TPU_ICI_VCS
#define TPU_ICI_VCS 2
#define TPU_ICI_DEPTH 8
#define TPU_ICI_MAX_LAT 4
#endif
constexpr unsigned kIciNumVc = TPU_ICI_VCS;
constexpr unsigned kIciDepth = TPU_ICI_DEPTH;
constexpr unsigned kIciMaxLat = TPU_ICI_MAX_LAT;
constexpr unsigned kIciPorts = 7;  // local, +X, -X, +Y, -Y, +Z, -Z

// tpu_ici_pkg::ici_port_e, ici_stat_e and ici_type_e, same values.
enum class IciPort : uint8_t { kLocal, kXp, kXm, kYp, kYm, kZp, kZm };
enum class IciStat : uint8_t { kFlitsIn, kFlitsOut, kStall, kLost };  // kLost: part of kStall
enum class IciType : uint8_t { kWrite = 0, kCntInc = 1, kReadReq = 2, kReadRsp = 3, kBarrier = 4 };
const char* ici_port_name(IciPort p);  // "local", "+x", ...

// A run-time topology: nodes per dimension, ring (torus) or line (mesh) per dimension.
struct IciTopology {
  std::array<unsigned, 3> k{4, 1, 1};          // nodes per dimension, 1..16 (up to 4096 nodes)
  std::array<bool, 3> wrap{true, true, true};  // ring per dimension (ignored where k == 1)
  unsigned link_latency = 1;                   // cycles per link and direction, 1..kIciMaxLat
  bool dateline = true;                        // false: every hop in VC class 0 (can deadlock)
  bool twist = false;  // a twisted torus (docs/topology.md): k x k x 2k, k x 2k x 2k or k x 2k
  // Local ports per router: 1, or 2 as on the chip (a second verilated build, `vici2`): a packet
  // injects on port (x + y + z of its destination) mod 2, so a node injects and ejects up to two
  // flits a cycle; packets of one source/destination pair share a port and stay in order.
  unsigned local_ports = 1;

  // The RTL's ici_topo_t.twist bits (tpu::twist_bits of the shape), 0 when not twisted.
  unsigned twist_bits() const;

  unsigned nodes() const { return k[0] * k[1] * k[2]; }
  std::array<unsigned, 3> coord(unsigned node) const;  // logical node -> (x, y, z)
  unsigned node(const std::array<unsigned, 3>& c) const;
  std::string name() const;  // "4x4 torus", "3x3 mesh", "4 ring", "4x4x8 twisted torus"
  // Throws std::invalid_argument naming the rule broken (a dimension over 16, the latency, a
  // twist on a shape that cannot be twisted ...).
  void validate() const;
};
IciTopology ici_ring(unsigned k, bool wrap = true);
IciTopology ici_2d(unsigned kx, unsigned ky, bool wrap = true);
IciTopology ici_3d(unsigned kx, unsigned ky, unsigned kz, bool wrap = true);

// One packet. Nodes are logical: x + kx * (y + ky * z) of the run-time topology.
struct IciPacket {
  unsigned src = 0;
  unsigned dst = 0;
  IciType type = IciType::kWrite;
  uint32_t addr = 0;              // 26 bits (ici_hdr_t.addr): the harness numbers packets
  std::vector<uint64_t> payload;  // the flits after the head (at most 255)
  uint64_t created = 0;           // cycle it was queued at the source
  uint64_t injected = 0;          // cycle its head entered the router
  uint64_t head_out = 0;          // cycle its head left the network
  uint64_t delivered = 0;         // cycle its tail left the network
  unsigned eject_node = 0;        // node whose local port delivered it
  unsigned flits() const { return 1 + static_cast<unsigned>(payload.size()); }
};

class IciNet {
 public:
  // Builds the network, applies the topology and resets. `waves_path` non-empty: an FST dump of
  // every router there, one scope per node ("node<n>", n = x + kx * (y + ky * z)). Throws
  // std::invalid_argument for a topology that validate() refuses, std::runtime_error when the
  // dump cannot be written.
  explicit IciNet(const IciTopology& topo, const std::string& waves_path = "");
  ~IciNet();
  IciNet(const IciNet&) = delete;
  IciNet& operator=(const IciNet&) = delete;

  const IciTopology& topology() const { return topo_; }
  unsigned nodes() const { return topo_.nodes(); }
  uint64_t cycle() const { return cycle_; }

  // Queues a packet at its source (unbounded queue); sets `created`.
  void send(IciPacket p);
  size_t queued(unsigned node) const;
  size_t queued_total() const;
  uint64_t sent() const { return sent_; }
  uint64_t delivered() const { return delivered_; }
  uint64_t in_flight() const { return sent_ - delivered_; }
  uint64_t flits_injected() const { return flits_in_; }
  uint64_t flits_ejected() const { return flits_out_; }
  // Last cycle in which a flit entered or left the network (for watchdogs).
  uint64_t last_progress() const { return last_progress_; }

  // Called for each packet whose tail was ejected.
  void on_deliver(std::function<void(const IciPacket&)> f) { on_deliver_ = std::move(f); }
  // Back-pressure on the ejection ports (default: always ready).
  void set_eject_ready(std::function<bool(unsigned node, uint64_t cycle)> f) {
    eject_ready_ = std::move(f);
  }

  void tick(uint64_t n = 1);
  // Ticks until every packet is delivered and the network is empty, or `max_cycles` pass, or
  // nothing moves for `watchdog` cycles. True when drained.
  bool drain(uint64_t max_cycles, uint64_t watchdog = 2000);
  bool idle();          // no flit in any buffer or link and no packet queued
  bool credits_home();  // every output VC of every router holds all its credits

  // A router statistic (tpu_ici_router) of a logical node.
  uint32_t stat(unsigned node, IciPort port, unsigned vc, IciStat s);

  // Failed SVA assertions so far: one per cycle and node with a failure (the run continues).
  uint64_t assert_failures() const { return assert_failures_; }

  // Fault injection for tests of the assertions: one spurious credit on an output of a node
  // (direction 0..5 = +X..-Z) in the next tick; a changed payload on a node's inject port while
  // it is stalled (`corrupt_inject`, applied at the next tick where that port is not ready).
  void spurious_credit(unsigned node, unsigned dir, unsigned vc);
  void corrupt_inject(unsigned node) { corrupt_node_ = static_cast<int>(node); }

  // Router index of a logical node (the identity: node n is router n).
  unsigned phys(unsigned node) const { return node; }

 private:
  struct Source {
    std::deque<IciPacket> q;
    unsigned flit = 0;  // next flit of q.front()
  };
  struct Sink {
    bool ready = true;  // the ejection port's ready in this cycle
    bool open = false;
    IciPacket p;
  };
  void apply_inputs();
  std::array<uint64_t, 2> flit_words(const IciPacket& p, unsigned i) const;
  unsigned port_of(const IciPacket& p) const;  // the local port it injects on
  unsigned local_vc(const IciPacket& p) const;  // its VC there (two local ports)
  Source& source(unsigned node, unsigned port) { return src_[node * ports_ + port]; }
  const Source& source(unsigned node, unsigned port) const { return src_[node * ports_ + port]; }
  Sink& sink(unsigned node, unsigned port, unsigned vc) {
    return sink_[(node * ports_ + port) * kIciNumVc + vc];
  }
  void inject_done(unsigned node, unsigned port);           // a flit of that source went in
  void eject_flit(unsigned node, unsigned port, const std::array<uint64_t, 2>& flit);

  IciTopology topo_;
  unsigned ports_ = 1;  // local ports per router
  std::unique_ptr<IciNetModel> model_;
  std::vector<Source> src_;  // per node and local port
  std::vector<Sink> sink_;   // per node, local port and ejection VC
  // created / injected cycles of packets in flight, per (src, dst, addr), oldest first.
  std::map<std::tuple<unsigned, unsigned, uint32_t>, std::deque<std::pair<uint64_t, uint64_t>>>
      times_;
  std::function<void(const IciPacket&)> on_deliver_;
  std::function<bool(unsigned, uint64_t)> eject_ready_;
  uint64_t cycle_ = 0;
  uint64_t sent_ = 0;
  uint64_t delivered_ = 0;
  uint64_t flits_in_ = 0;
  uint64_t flits_out_ = 0;
  uint64_t last_progress_ = 0;
  uint64_t assert_failures_ = 0;
  int corrupt_node_ = -1;
};

}  // namespace tpu
