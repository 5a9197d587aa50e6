// IciNetModel: the verilated network under IciNet, seen by logical node (local ports, status,
// statistics) and clocked one cycle at a time. Private to tb/ici: it keeps Verilator's headers
// out of IciNet's users. The implementation is the node network (ici_node_tb_top, one verilated
// model per router wired in C++, ici_net_nodes.cc).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "ici_net.h"

namespace tpu {

class IciNetModel {
 public:
  virtual ~IciNetModel() = default;

  // Starts an FST dump of every signal of every node, in one file (throws std::runtime_error
  // when the file cannot be opened).
  virtual void open_waves(const std::string& path) = 0;
  // Holds reset for `cycles` cycles with the topology applied and the local ports idle, then
  // releases it. Returns the number of assertion failures meanwhile.
  virtual unsigned reset(unsigned cycles) = 0;

  // Inputs for the coming clock edge. A flit is {head | tail << 1, data}. `port`: the local port
  // (1: PORT_LOCAL1, with two local ports), `vc` the flit's local VC there (two local ports).
  virtual void set_inject(unsigned node, bool valid, const std::array<uint64_t, 2>& flit,
                          unsigned port = 0, unsigned vc = 0) = 0;
  virtual void set_eject_ready(unsigned node, bool ready, unsigned port = 0) = 0;
  // One spurious credit on output `dir` (0..5 = +X..-Z) of `node`, in the coming edge only.
  virtual void spurious_credit(unsigned node, unsigned dir, unsigned vc) = 0;

  // Settles the outputs after inputs change.
  virtual void eval() = 0;
  virtual bool inject_ready(unsigned node, unsigned port = 0) const = 0;
  virtual bool eject_valid(unsigned node, unsigned port = 0) const = 0;
  // {head | tail << 1 | ejection VC << 2, data}
  virtual std::array<uint64_t, 2> eject_flit(unsigned node, unsigned port = 0) const = 0;

  // One clock cycle. Returns the number of nodes with an assertion failure in it.
  virtual unsigned tick() = 0;

  virtual bool idle() = 0;          // no flit or credit in any buffer or link
  virtual bool credits_full() = 0;  // every output VC of every router holds all its credits
  virtual uint32_t stat(unsigned node, IciPort port, unsigned vc, IciStat s) = 0;
};

// One verilated router model per node, wired in C++; any validated topology; the build with two
// local ports when t.local_ports is 2.
std::unique_ptr<IciNetModel> make_ici_node_model(const IciTopology& t);

}  // namespace tpu
