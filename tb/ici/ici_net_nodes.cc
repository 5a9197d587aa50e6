// The node model: one verilated router model per node (rtl/sim/ici_node_tb_top.sv: a router and
// its outgoing delay lines), wired here in C++. All instances share the generated code of one
// router, so a network of any size costs one router to build.
//
// A node's link outputs come out of its delay lines (registers), so each cycle first copies every
// node's outputs to its neighbours' inputs, then evaluates and clocks every node: the order of the
// nodes does not matter.
//
// The instances share one VerilatedContext (one simulated time, one FST file): instance n is named
// "node<n>", which is its scope in the waves and in assertion messages (node n is the router at
// (x, y, z) = IciTopology::coord(n), n = x + kx * (y + ky * z)).
#include <verilated.h>
#include <verilated_fst_c.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "Vici2_node_tb_top.h"
#include "Vici_node_tb_top.h"
#include "ici_net_model.h"
#include "tpu/twisted_torus.h"
#include "wave_clock.h"

namespace tpu {
namespace {

constexpr unsigned kDirs = 6;
constexpr unsigned kVcW = kIciNumVc > 2 ? (kIciNumVc > 4 ? 3 : 2) : 1;  // tpu_ici_pkg::vc_width
static_assert(kIciNumVc <= 8, "widen kVcW");

// Top: Vici_node_tb_top (one local port) or Vici2_node_tb_top (two): the same ports.
template <class Top>
class IciNodeModel final : public IciNetModel {
 public:
  explicit IciNodeModel(const IciTopology& topo) : topo_(topo), ctx_(new VerilatedContext) {
    ctx_->fatalOnError(false);  // a failed assertion sets gotError(); tick() counts it
    ctx_->traceEverOn(true);    // before the models exist: open_waves() may come later
    use_context();
    const unsigned n = topo.nodes();
    nb_.resize(n);
    const auto k = static_cast<uint16_t>(ici_pack_k(topo.k));
    for (unsigned i = 0; i < n; ++i) {
      nodes_.push_back(
          std::make_unique<Top>(ctx_.get(), ("node" + std::to_string(i)).c_str()));
      auto& t = *nodes_.back();
      t.clk_i = 0;
      t.k_i = k;
      t.wrap_i = static_cast<uint8_t>((topo.wrap[0] ? 1 : 0) | (topo.wrap[1] ? 2 : 0) |
                                      (topo.wrap[2] ? 4 : 0));
      t.no_dateline_i = topo.dateline ? 0 : 1;
      t.twist_i = static_cast<uint8_t>(topo.twist_bits());
      t.link_lat_i = static_cast<uint8_t>(topo.link_latency);
      t.coord_i = static_cast<uint16_t>(ici_pack_coord(topo.coord(i)));
      t.inj_valid_i = 0;
      t.ej_ready_i = 0;
      t.inj1_valid_i = 0;
      t.ej1_ready_i = 0;
      t.fl_valid_i = 0;
      t.cr_valid_i = 0;
      for (unsigned d = 0; d < kDirs; ++d) nb_[i][d] = neighbour(i, d);
    }
  }

  ~IciNodeModel() override {
    use_context();
    if (fst_) fst_->close();
    for (auto& m : nodes_) m->final();
    nodes_.clear();  // before the context they belong to
  }
  IciNodeModel(const IciNodeModel&) = delete;
  IciNodeModel& operator=(const IciNodeModel&) = delete;

  // One FST file for the whole network: every instance's signals under its scope "node<n>".
  void open_waves(const std::string& path) override {
    use_context();
    fst_ = std::make_unique<VerilatedFstC>();
    for (auto& m : nodes_) m->trace(fst_.get(), 99);
    fst_->open(path.c_str());
    if (!fst_->isOpen()) throw std::runtime_error(path + ": cannot open the wave file for writing");
    wave_.origin = cycle_;  // a 1 GHz clock (the default chip.clock_ghz): cycle n at n ns
    fst_->dump(wave_.rise(cycle_));
  }

  unsigned reset(unsigned cycles) override {
    for (auto& m : nodes_) m->rst_ni = 0;
    settle();
    unsigned fails = 0;
    for (unsigned c = 0; c < cycles; ++c) fails += edge();
    for (auto& m : nodes_) m->rst_ni = 1;
    settle();
    return fails + (take_error() ? 1 : 0);
  }

  void set_inject(unsigned n, bool valid, const std::array<uint64_t, 2>& flit, unsigned port,
                  unsigned vc) override {
    auto& t = *nodes_[n];
    if (port == 1) {
      t.inj1_valid_i = valid;
      if (!valid) return;
      t.inj1_head_i = flit[0] & 1;
      t.inj1_tail_i = (flit[0] >> 1) & 1;
      t.inj1_data_i = flit[1];
      t.inj1_vc_i = static_cast<uint8_t>(vc);
      return;
    }
    t.inj_valid_i = valid;
    if (!valid) return;
    t.inj_head_i = flit[0] & 1;
    t.inj_tail_i = (flit[0] >> 1) & 1;
    t.inj_data_i = flit[1];
    t.inj_vc_i = static_cast<uint8_t>(vc);
  }
  void set_eject_ready(unsigned n, bool ready, unsigned port) override {
    if (port == 1)
      nodes_[n]->ej1_ready_i = ready;
    else
      nodes_[n]->ej_ready_i = ready;
  }
  void spurious_credit(unsigned n, unsigned dir, unsigned vc) override {
    dbg_node_ = static_cast<int>(n);
    dbg_dir_ = dir;
    dbg_vc_ = vc;
  }

  void eval() override {
    wire();
    settle();
  }
  bool inject_ready(unsigned n, unsigned port) const override {
    return port == 1 ? nodes_[n]->inj1_ready_o : nodes_[n]->inj_ready_o;
  }
  bool eject_valid(unsigned n, unsigned port) const override {
    return port == 1 ? nodes_[n]->ej1_valid_o : nodes_[n]->ej_valid_o;
  }
  std::array<uint64_t, 2> eject_flit(unsigned n, unsigned port) const override {
    const auto& t = *nodes_[n];
    if (port == 1)
      return {(t.ej1_head_o ? 1u : 0u) | (t.ej1_tail_o ? 2u : 0u) | (uint64_t{t.ej1_vc_o} << 2),
              t.ej1_data_o};
    return {(t.ej_head_o ? 1u : 0u) | (t.ej_tail_o ? 2u : 0u) | (uint64_t{t.ej_vc_o} << 2),
            t.ej_data_o};
  }

  unsigned tick() override {
    wire();  // every input from the outputs of the last edge, before any node moves
    const unsigned fails = edge();
    dbg_node_ = -1;  // a spurious credit lasts one edge
    return fails;
  }

  bool idle() override {
    eval();
    for (const auto& m : nodes_)
      if (!m->idle_o) return false;
    return true;
  }
  bool credits_full() override {
    eval();
    for (const auto& m : nodes_)
      if (!m->credits_full_o) return false;
    return true;
  }
  uint32_t stat(unsigned n, IciPort port, unsigned vc, IciStat s) override {
    if (clk_high_) settle();  // the falling edge for all, once; then one node at a time
    use_context();
    auto& t = *nodes_[n];
    t.stat_port_i = static_cast<uint8_t>(port);
    t.stat_vc_i = static_cast<uint8_t>(vc);
    t.stat_sel_i = static_cast<uint8_t>(s);
    t.eval();
    return t.stat_o;
  }

 private:
  // Verilator 5.006 reaches the context through a thread-local pointer in places (scope
  // teardown, $stop counting); several networks may live in one thread (a test).
  void use_context() { Verilated::threadContextp(ctx_.get()); }

  // Whether an assertion failed since the last call (the failure state is cleared).
  bool take_error() {
    if (!ctx_->gotError()) return false;
    ctx_->gotError(false);
    ctx_->gotFinish(false);
    return true;
  }

  // Settles every node with its current inputs. After an edge the clock is still high: the
  // falling edge is taken here, with the new inputs (no RTL acts on it), as VerilatedModel does.
  void settle() {
    use_context();
    for (auto& m : nodes_) {
      m->clk_i = 0;
      m->eval();
    }
    if (clk_high_) {
      ctx_->timeInc(1);
      if (fst_) fst_->dump(wave_.fall(cycle_));
      clk_high_ = false;
    }
  }

  // The rising edge for every node. Returns the number of nodes with a failed assertion in it.
  unsigned edge() {
    if (clk_high_) settle();  // two edges with no settle() between: the falling edge first
    unsigned fails = take_error() ? 1 : 0;  // from an evaluation between edges, if any
    for (auto& m : nodes_) {
      m->clk_i = 1;
      m->eval();
      fails += take_error() ? 1 : 0;
    }
    ctx_->timeInc(1);
    ++cycle_;
    if (fst_) {
      fst_->dump(wave_.rise(cycle_));
      if (fails) fst_->flush();  // the failure is in the file even if the run stops here
    }
    clk_high_ = true;
    return fails;
  }

  // The node whose coordinate differs by one in the direction's dimension (mod k on a ring); none
  // at a mesh edge or in a dimension of size 1. A twisted torus: tpu::torus_neighbour.
  int neighbour(unsigned node, unsigned dir) const {
    if (topo_.twist) {
      const TorusShape s{{static_cast<int>(topo_.k[0]), static_cast<int>(topo_.k[1]),
                          static_cast<int>(topo_.k[2])},
                         topo_.twist_bits()};
      const auto c = torus_neighbour(s, s.coord(static_cast<int>(node)), static_cast<int>(dir));
      return c[0] < 0 ? -1 : s.node(c);
    }
    const unsigned dim = dir / 2;
    const unsigned k = topo_.k[dim];
    auto c = topo_.coord(node);
    if (k <= 1) return -1;
    if (dir % 2 == 0) {
      if (c[dim] + 1 < k)
        ++c[dim];
      else if (topo_.wrap[dim])
        c[dim] = 0;
      else
        return -1;
    } else {
      if (c[dim] > 0)
        --c[dim];
      else if (topo_.wrap[dim])
        c[dim] = k - 1;
      else
        return -1;
    }
    return static_cast<int>(topo_.node(c));
  }

  // Each node's link inputs: its neighbour in direction d sends on d ^ 1.
  void wire() {
    constexpr uint32_t kVcMask = (1u << kVcW) - 1;
    for (unsigned n = 0; n < nodes_.size(); ++n) {
      auto& t = *nodes_[n];
      uint32_t fl_valid = 0, fl_head = 0, fl_tail = 0, fl_vc = 0, cr_valid = 0, cr_vc = 0;
      for (unsigned d = 0; d < kDirs; ++d) {
        const int m = nb_[n][d];
        if (m < 0) continue;
        const auto& s = *nodes_[static_cast<unsigned>(m)];
        const unsigned o = d ^ 1;
        fl_valid |= ((s.fl_valid_o >> o) & 1u) << d;
        fl_head |= ((s.fl_head_o >> o) & 1u) << d;
        fl_tail |= ((s.fl_tail_o >> o) & 1u) << d;
        fl_vc |= ((uint32_t{s.fl_vc_o} >> (kVcW * o)) & kVcMask) << (kVcW * d);
        t.fl_data_i[2 * d] = s.fl_data_o[2 * o];
        t.fl_data_i[2 * d + 1] = s.fl_data_o[2 * o + 1];
        cr_valid |= ((s.cr_valid_o >> o) & 1u) << d;
        cr_vc |= ((uint32_t{s.cr_vc_o} >> (kVcW * o)) & kVcMask) << (kVcW * d);
      }
      if (dbg_node_ == static_cast<int>(n)) {
        cr_valid |= 1u << dbg_dir_;
        cr_vc = (cr_vc & ~(kVcMask << (kVcW * dbg_dir_))) | (dbg_vc_ << (kVcW * dbg_dir_));
      }
      t.fl_valid_i = static_cast<uint8_t>(fl_valid);
      t.fl_head_i = static_cast<uint8_t>(fl_head);
      t.fl_tail_i = static_cast<uint8_t>(fl_tail);
      t.fl_vc_i = static_cast<std::remove_reference_t<decltype(t.fl_vc_i)>>(fl_vc);
      t.cr_valid_i = static_cast<uint8_t>(cr_valid);
      t.cr_vc_i = static_cast<std::remove_reference_t<decltype(t.cr_vc_i)>>(cr_vc);
    }
  }

  IciTopology topo_;
  std::unique_ptr<VerilatedContext> ctx_;  // shared by every node: one time, one FST file
  std::vector<std::unique_ptr<Top>> nodes_;
  std::unique_ptr<VerilatedFstC> fst_;
  WaveClock wave_;         // where the dump puts each edge (tb/common/wave_clock.h)
  uint64_t cycle_ = 0;     // rising edges so far
  bool clk_high_ = false;  // an edge left the clock high; the next settle() drops it
  std::vector<std::array<int, kDirs>> nb_;  // neighbour per direction, -1: none
  int dbg_node_ = -1;
  unsigned dbg_dir_ = 0;
  unsigned dbg_vc_ = 0;
};

}  // namespace

std::unique_ptr<IciNetModel> make_ici_node_model(const IciTopology& t) {
  if (t.local_ports == 2) return std::make_unique<IciNodeModel<Vici2_node_tb_top>>(t);
  return std::make_unique<IciNodeModel<Vici_node_tb_top>>(t);
}

}  // namespace tpu
