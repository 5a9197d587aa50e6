// The node model: one verilated router model per node (rtl/sim/ici_node_tb_top.sv: a router and
// its outgoing delay lines), wired here as ici_net_tb_top wires its routers. All instances share
// the generated code of one router, so a network of any size costs one router to build.
//
// A node's link outputs come out of its delay lines (registers), so each cycle first copies every
// node's outputs to its neighbours' inputs, then evaluates and clocks every node: the order of the
// nodes does not matter, and the cycles are those of the grid.
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "Vici_node_tb_top.h"
#include "ici_net_model.h"
#include "verilated_model.h"

namespace tpu {
namespace {

constexpr unsigned kDirs = 6;
constexpr unsigned kVcW = kIciNumVc > 2 ? (kIciNumVc > 4 ? 3 : 2) : 1;  // tpu_ici_pkg::vc_width
static_assert(kIciNumVc <= 8, "widen kVcW");

class IciNodeModel final : public IciNetModel {
 public:
  explicit IciNodeModel(const IciTopology& topo) : topo_(topo) {
    const unsigned n = topo.nodes();
    nb_.resize(n);
    const auto k = static_cast<uint16_t>(ici_pack_k(topo.k));
    for (unsigned i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<Model>());
      auto& t = nodes_.back()->top();
      t.k_i = k;
      t.wrap_i = static_cast<uint8_t>((topo.wrap[0] ? 1 : 0) | (topo.wrap[1] ? 2 : 0) |
                                      (topo.wrap[2] ? 4 : 0));
      t.no_dateline_i = topo.dateline ? 0 : 1;
      t.link_lat_i = static_cast<uint8_t>(topo.link_latency);
      t.coord_i = static_cast<uint16_t>(ici_pack_coord(topo.coord(i)));
      t.inj_valid_i = 0;
      t.ej_ready_i = 0;
      t.fl_valid_i = 0;
      t.cr_valid_i = 0;
      for (unsigned d = 0; d < kDirs; ++d) nb_[i][d] = neighbour(i, d);
    }
  }

  void open_waves(const std::string& path) override {
    throw std::runtime_error(path + ": the ICI node model (one verilated model per router) " +
                             "dumps no waves; use the grid model (up to " +
                             std::to_string(kIciNodes) + " nodes) for waves");
  }
  unsigned reset(unsigned cycles) override {
    unsigned fails = 0;
    for (auto& m : nodes_) {
      m->reset(cycles);
      fails += m->take_error() ? 1 : 0;
    }
    return fails;
  }

  void set_inject(unsigned n, bool valid, const std::array<uint64_t, 2>& flit) override {
    auto& t = nodes_[n]->top();
    t.inj_valid_i = valid;
    if (!valid) return;
    t.inj_head_i = flit[0] & 1;
    t.inj_tail_i = (flit[0] >> 1) & 1;
    t.inj_data_i = flit[1];
  }
  void set_eject_ready(unsigned n, bool ready) override { nodes_[n]->top().ej_ready_i = ready; }
  void spurious_credit(unsigned n, unsigned dir, unsigned vc) override {
    dbg_node_ = static_cast<int>(n);
    dbg_dir_ = dir;
    dbg_vc_ = vc;
  }

  void eval() override {
    wire();
    for (auto& m : nodes_) m->eval();
  }
  bool inject_ready(unsigned n) const override { return top(n).inj_ready_o; }
  bool eject_valid(unsigned n) const override { return top(n).ej_valid_o; }
  std::array<uint64_t, 2> eject_flit(unsigned n) const override {
    const auto& t = top(n);
    return {(t.ej_head_o ? 1u : 0u) | (t.ej_tail_o ? 2u : 0u), t.ej_data_o};
  }

  unsigned tick() override {
    wire();  // every input from the outputs of the last edge, before any node moves
    unsigned fails = 0;
    for (auto& m : nodes_) {
      m->tick();
      fails += m->take_error() ? 1 : 0;
    }
    dbg_node_ = -1;  // a spurious credit lasts one edge
    return fails;
  }

  bool idle() override {
    eval();
    for (unsigned n = 0; n < nodes_.size(); ++n)
      if (!top(n).idle_o) return false;
    return true;
  }
  bool credits_full() override {
    eval();
    for (unsigned n = 0; n < nodes_.size(); ++n)
      if (!top(n).credits_full_o) return false;
    return true;
  }
  uint32_t stat(unsigned n, IciPort port, unsigned vc, IciStat s) override {
    auto& t = nodes_[n]->top();
    t.stat_port_i = static_cast<uint8_t>(port);
    t.stat_vc_i = static_cast<uint8_t>(vc);
    t.stat_sel_i = static_cast<uint8_t>(s);
    nodes_[n]->eval();
    return t.stat_o;
  }

 private:
  using Model = VerilatedModel<Vici_node_tb_top, /*kTraced=*/false>;

  const Vici_node_tb_top& top(unsigned n) const { return *nodes_[n]->operator->(); }

  // ici_net_tb_top's rule: the node whose coordinate differs by one in the direction's dimension
  // (mod k on a ring); none at a mesh edge or in a dimension of size 1.
  int neighbour(unsigned node, unsigned dir) const {
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
      auto& t = nodes_[n]->top();
      uint32_t fl_valid = 0, fl_head = 0, fl_tail = 0, fl_vc = 0, cr_valid = 0, cr_vc = 0;
      for (unsigned d = 0; d < kDirs; ++d) {
        const int m = nb_[n][d];
        if (m < 0) continue;
        const auto& s = top(static_cast<unsigned>(m));
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
  std::vector<std::unique_ptr<Model>> nodes_;
  std::vector<std::array<int, kDirs>> nb_;  // neighbour per direction, -1: none
  int dbg_node_ = -1;
  unsigned dbg_dir_ = 0;
  unsigned dbg_vc_ = 0;
};

}  // namespace

std::unique_ptr<IciNetModel> make_ici_node_model(const IciTopology& t) {
  return std::make_unique<IciNodeModel>(t);
}

}  // namespace tpu
