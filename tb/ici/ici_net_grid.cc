// The grid model: the whole network as one verilated model (rtl/sim/ici_net_tb_top.sv, kIciNodes
// routers wired at run time); node n is router n.
#include <sstream>
#include <stdexcept>

#include "Vici_net_tb_top.h"
#include "ici_net_model.h"
#include "verilated_model.h"

namespace tpu {
namespace {

// Bit and word access to Verilator's port types (plain integers up to 64 bits, VlWide above).
template <typename T>
void set_bit(T& v, unsigned i, bool b) {
  const T m = static_cast<T>(T{1} << i);
  v = b ? static_cast<T>(v | m) : static_cast<T>(v & static_cast<T>(~m));
}
template <std::size_t W>
void set_bit(VlWide<W>& v, unsigned i, bool b) {
  const uint32_t m = 1u << (i % 32);
  v[i / 32] = b ? (v[i / 32] | m) : (v[i / 32] & ~m);
}
template <typename T>
bool get_bit(const T& v, unsigned i) {
  return (v >> i) & 1u;
}
template <std::size_t W>
bool get_bit(const VlWide<W>& v, unsigned i) {
  return (v[i / 32] >> (i % 32)) & 1u;
}
// 64-bit element n of a packed [N][64] vector.
template <std::size_t W>
void set_u64(VlWide<W>& v, unsigned n, uint64_t x) {
  v[2 * n] = static_cast<uint32_t>(x);
  v[2 * n + 1] = static_cast<uint32_t>(x >> 32);
}
inline void set_u64(uint64_t& v, unsigned, uint64_t x) { v = x; }
template <std::size_t W>
uint64_t get_u64(const VlWide<W>& v, unsigned n) {
  return uint64_t{v[2 * n]} | (uint64_t{v[2 * n + 1]} << 32);
}
inline uint64_t get_u64(const uint64_t& v, unsigned) { return v; }

class IciGridModel final : public IciNetModel {
 public:
  explicit IciGridModel(const IciTopology& topo) {
    if (topo.nodes() > kIciNodes) {
      std::ostringstream s;
      s << "ICI topology: " << topo.name() << " has " << topo.nodes()
        << " nodes; the grid model was built with " << kIciNodes
        << " routers (use the node model, or rebuild with -DTPU_ICI_NODES=" << topo.nodes() << ")";
      throw std::invalid_argument(s.str());
    }
    auto& t = m_.top();
    t.k_i = static_cast<uint16_t>(ici_pack_k(topo.k));
    t.wrap_i = static_cast<uint8_t>((topo.wrap[0] ? 1 : 0) | (topo.wrap[1] ? 2 : 0) |
                                    (topo.wrap[2] ? 4 : 0));
    t.no_dateline_i = topo.dateline ? 0 : 1;
    t.link_lat_i = static_cast<uint8_t>(topo.link_latency);
    for (unsigned n = 0; n < kIciNodes; ++n) {
      const uint64_t c = n < topo.nodes() ? ici_pack_coord(topo.coord(n)) : 0;
      for (unsigned b = 0; b < kIciCoordBits; ++b)
        set_bit(t.coord_i, kIciCoordBits * n + b, (c >> b) & 1);
    }
    t.inj_valid_i = 0;
    t.ej_ready_i = 0;
    t.dbg_cr_valid_i = 0;
  }

  void open_waves(const std::string& path) override { m_.open_waves(path, "the ICI network"); }
  unsigned reset(unsigned cycles) override {
    m_.reset(cycles);
    return m_.take_error() ? 1 : 0;
  }

  void set_inject(unsigned n, bool valid, const std::array<uint64_t, 2>& flit) override {
    auto& t = m_.top();
    set_bit(t.inj_valid_i, n, valid);
    if (!valid) return;
    set_bit(t.inj_head_i, n, flit[0] & 1);
    set_bit(t.inj_tail_i, n, (flit[0] >> 1) & 1);
    set_u64(t.inj_data_i, n, flit[1]);
  }
  void set_eject_ready(unsigned n, bool ready) override { set_bit(m_.top().ej_ready_i, n, ready); }
  void spurious_credit(unsigned n, unsigned dir, unsigned vc) override {
    auto& t = m_.top();
    t.dbg_cr_valid_i = 1;
    t.dbg_cr_node_i = static_cast<uint8_t>(n);
    t.dbg_cr_dir_i = static_cast<uint8_t>(dir);
    t.dbg_cr_vc_i = static_cast<uint8_t>(vc);
  }

  void eval() override { m_.eval(); }
  bool inject_ready(unsigned n) const override { return get_bit(top().inj_ready_o, n); }
  bool eject_valid(unsigned n) const override { return get_bit(top().ej_valid_o, n); }
  std::array<uint64_t, 2> eject_flit(unsigned n) const override {
    const auto& t = top();
    return {(get_bit(t.ej_head_o, n) ? 1u : 0u) | (get_bit(t.ej_tail_o, n) ? 2u : 0u),
            get_u64(t.ej_data_o, n)};
  }

  unsigned tick() override {
    m_.tick();
    m_.top().dbg_cr_valid_i = 0;  // a spurious credit lasts one edge
    return m_.take_error() ? 1 : 0;
  }

  bool idle() override {
    m_.eval();
    return m_.top().idle_o;
  }
  bool credits_full() override {
    m_.eval();
    return m_.top().credits_full_o;
  }
  uint32_t stat(unsigned n, IciPort port, unsigned vc, IciStat s) override {
    auto& t = m_.top();
    t.stat_node_i = static_cast<uint8_t>(n);
    t.stat_port_i = static_cast<uint8_t>(port);
    t.stat_vc_i = static_cast<uint8_t>(vc);
    t.stat_sel_i = static_cast<uint8_t>(s);
    m_.eval();
    return t.stat_o;
  }

 private:
  const Vici_net_tb_top& top() const { return *m_.operator->(); }

  VerilatedModel<Vici_net_tb_top> m_;  // its own context; counts failed assertions
};

}  // namespace

std::unique_ptr<IciNetModel> make_ici_grid_model(const IciTopology& t) {
  return std::make_unique<IciGridModel>(t);
}

}  // namespace tpu
