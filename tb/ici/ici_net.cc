#include "ici_net.h"


#include <sstream>
#include <stdexcept>

#include "Vici_net_tb_top.h"
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

constexpr unsigned kCoordW = 3;

uint64_t pack_coord(const std::array<unsigned, 3>& c) {
  return uint64_t{c[0]} | (uint64_t{c[1]} << kCoordW) | (uint64_t{c[2]} << (2 * kCoordW));
}
std::array<unsigned, 3> unpack_coord(uint64_t v) {
  return {static_cast<unsigned>(v & 7), static_cast<unsigned>((v >> 3) & 7),
          static_cast<unsigned>((v >> 6) & 7)};
}

}  // namespace

const char* ici_port_name(IciPort p) {
  static const char* const names[] = {"local", "+x", "-x", "+y", "-y", "+z", "-z"};
  return names[static_cast<unsigned>(p)];
}

std::array<unsigned, 3> IciTopology::coord(unsigned n) const {
  return {n % k[0], (n / k[0]) % k[1], n / (k[0] * k[1])};
}
unsigned IciTopology::node(const std::array<unsigned, 3>& c) const {
  return c[0] + k[0] * (c[1] + k[1] * c[2]);
}
std::string IciTopology::name() const {
  std::ostringstream s;
  const unsigned dims = k[2] > 1 ? 3 : k[1] > 1 ? 2 : 1;
  for (unsigned d = 0; d < dims; ++d) s << (d ? "x" : "") << k[d];
  bool any_wrap = false;
  for (unsigned d = 0; d < dims; ++d) any_wrap |= wrap[d] && k[d] > 1;
  s << (dims == 1 ? (any_wrap ? " ring" : " line") : (any_wrap ? " torus" : " mesh"));
  return s.str();
}
void IciTopology::validate() const {
  for (unsigned d = 0; d < 3; ++d) {
    if (k[d] < 1 || k[d] > kIciMaxK) {
      std::ostringstream s;
      s << "ICI topology: dimension " << "xyz"[d] << " has " << k[d] << " nodes, not 1.."
        << kIciMaxK;
      throw std::invalid_argument(s.str());
    }
  }
  if (nodes() > kIciNodes) {
    std::ostringstream s;
    s << "ICI topology: " << name() << " has " << nodes() << " nodes; this model was built with "
      << kIciNodes << " routers (rebuild with -DTPU_ICI_NODES=" << nodes() << ")";
    throw std::invalid_argument(s.str());
  }
  if (link_latency < 1 || link_latency > kIciMaxLat) {
    std::ostringstream s;
    s << "ICI topology: link latency " << link_latency << " outside 1.." << kIciMaxLat
      << " (rebuild with -DTPU_ICI_MAX_LAT=N for longer links)";
    throw std::invalid_argument(s.str());
  }
}

IciTopology ici_ring(unsigned k, bool wrap) {
  IciTopology t;
  t.k = {k, 1, 1};
  t.wrap = {wrap, false, false};
  return t;
}
IciTopology ici_2d(unsigned kx, unsigned ky, bool wrap) {
  IciTopology t;
  t.k = {kx, ky, 1};
  t.wrap = {wrap, wrap, false};
  return t;
}
IciTopology ici_3d(unsigned kx, unsigned ky, unsigned kz, bool wrap) {
  IciTopology t;
  t.k = {kx, ky, kz};
  t.wrap = {wrap, wrap, wrap};
  return t;
}

struct IciNet::Impl {
  VerilatedModel<Vici_net_tb_top> m;  // its own context; counts failed assertions
};

IciNet::IciNet(const IciTopology& topo, const std::string& waves_path)
    : topo_(topo), impl_(new Impl) {
  topo_.validate();
  src_.resize(topo_.nodes());
  sink_.resize(topo_.nodes());
  if (!waves_path.empty()) impl_->m.open_waves(waves_path, "the ICI network");
  auto& t = impl_->m.top();
  uint32_t k = 0;
  for (unsigned d = 0; d < 3; ++d) k |= topo_.k[d] << (4 * d);
  t.k_i = static_cast<uint16_t>(k);
  t.wrap_i = static_cast<uint8_t>((topo_.wrap[0] ? 1 : 0) | (topo_.wrap[1] ? 2 : 0) |
                                  (topo_.wrap[2] ? 4 : 0));
  t.no_dateline_i = topo_.dateline ? 0 : 1;
  t.link_lat_i = static_cast<uint8_t>(topo_.link_latency);
  for (unsigned n = 0; n < kIciNodes; ++n) {
    const uint64_t c = n < nodes() ? pack_coord(topo_.coord(n)) : 0;
    for (unsigned b = 0; b < 9; ++b) set_bit(t.coord_i, 9 * n + b, (c >> b) & 1);
  }
  t.inj_valid_i = 0;
  t.ej_ready_i = 0;
  t.dbg_cr_valid_i = 0;
  impl_->m.reset(4);  // a failed assertion is counted by check_errors() below
  // Let the configuration registers (top, then routers) take the run-time shape before traffic.
  for (int i = 0; i < 4; ++i) impl_->m.tick();
  check_errors();
}

IciNet::~IciNet() = default;

size_t IciNet::queued_total() const {
  size_t n = 0;
  for (const auto& s : src_) n += s.q.size();
  return n;
}

void IciNet::send(IciPacket p) {
  if (p.src >= nodes() || p.dst >= nodes()) throw std::invalid_argument("IciNet::send: bad node");
  if (p.payload.size() > 255) throw std::invalid_argument("IciNet::send: over 255 payload flits");
  p.created = cycle_;
  src_[p.src].q.push_back(std::move(p));
  ++sent_;
}

std::array<uint64_t, 2> IciNet::flit_words(const IciPacket& p, unsigned i) const {
  // {head/tail bits, data}
  const bool head = i == 0;
  const bool tail = i + 1 == p.flits();
  uint64_t data;
  if (head) {
    data = pack_coord(topo_.coord(p.dst)) | (pack_coord(topo_.coord(p.src)) << 9) |
           (uint64_t{static_cast<uint8_t>(p.type)} << 20) | (uint64_t{p.payload.size()} << 24) |
           (uint64_t{p.addr} << 32);
  } else {
    data = p.payload[i - 1];
  }
  return {(head ? 1u : 0u) | (tail ? 2u : 0u), data};
}

void IciNet::apply_inputs() {
  auto& t = impl_->m.top();
  for (unsigned n = 0; n < nodes(); ++n) {
    const unsigned ph = phys(n);
    Source& s = src_[n];
    const bool v = !s.q.empty();
    set_bit(t.inj_valid_i, ph, v);
    if (v) {
      const auto w = flit_words(s.q.front(), s.flit);
      set_bit(t.inj_head_i, ph, w[0] & 1);
      set_bit(t.inj_tail_i, ph, (w[0] >> 1) & 1);
      set_u64(t.inj_data_i, ph, w[1]);
    }
    set_bit(t.ej_ready_i, ph, eject_ready_ ? eject_ready_(n, cycle_) : true);
  }
  if (dbg_cr_node_ >= 0) {
    t.dbg_cr_valid_i = 1;
    t.dbg_cr_node_i = static_cast<uint8_t>(phys(static_cast<unsigned>(dbg_cr_node_)));
    t.dbg_cr_dir_i = static_cast<uint8_t>(dbg_cr_dir_);
    t.dbg_cr_vc_i = static_cast<uint8_t>(dbg_cr_vc_);
    dbg_cr_node_ = -1;
  } else {
    t.dbg_cr_valid_i = 0;
  }
}

void IciNet::check_errors() {
  if (impl_->m.take_error()) ++assert_failures_;
}

void IciNet::spurious_credit(unsigned node, unsigned dir, unsigned vc) {
  dbg_cr_node_ = static_cast<int>(node);
  dbg_cr_dir_ = dir;
  dbg_cr_vc_ = vc;
}

void IciNet::tick(uint64_t n) {
  auto& t = impl_->m.top();
  for (uint64_t i = 0; i < n; ++i) {
    apply_inputs();
    impl_->m.eval();
    // Fault injection: change a stalled inject port's payload (the flit is not consumed).
    if (corrupt_node_ >= 0) {
      const unsigned ph = phys(static_cast<unsigned>(corrupt_node_));
      if (get_bit(t.inj_valid_i, ph) && !get_bit(t.inj_ready_o, ph)) {
        set_u64(t.inj_data_i, ph, get_u64(t.inj_data_i, ph) ^ (uint64_t{1} << 40));
        impl_->m.eval();
        corrupt_node_ = -1;
      }
    }
    // Handshakes of this cycle, sampled before the rising edge.
    std::vector<unsigned> inj, ej;
    for (unsigned nd = 0; nd < nodes(); ++nd) {
      const unsigned ph = phys(nd);
      if (get_bit(t.inj_valid_i, ph) && get_bit(t.inj_ready_o, ph)) inj.push_back(nd);
      if (get_bit(t.ej_valid_o, ph) && get_bit(t.ej_ready_i, ph)) ej.push_back(nd);
    }
    std::vector<std::array<uint64_t, 2>> ej_flits;
    for (unsigned nd : ej) {
      const unsigned ph = phys(nd);
      const unsigned ht =
          (get_bit(t.ej_head_o, ph) ? 1u : 0u) | (get_bit(t.ej_tail_o, ph) ? 2u : 0u);
      ej_flits.push_back({ht, get_u64(t.ej_data_o, ph)});
    }
    impl_->m.tick();
    check_errors();
    for (unsigned nd : inj) {
      Source& s = src_[nd];
      if (s.flit == 0) {
        IciPacket& f = s.q.front();
        f.injected = cycle_;
        times_[{f.src, f.dst, f.addr}].emplace_back(f.created, f.injected);
      }
      ++flits_in_;
      if (++s.flit == s.q.front().flits()) {
        s.q.pop_front();
        s.flit = 0;
      }
    }
    for (size_t j = 0; j < ej.size(); ++j) {
      const unsigned nd = ej[j];
      Sink& k = sink_[nd];
      const bool head = ej_flits[j][0] & 1;
      const bool tail = ej_flits[j][0] & 2;
      const uint64_t data = ej_flits[j][1];
      ++flits_out_;
      if (head) {
        if (k.open) ++assert_failures_;  // framing broken at the ejection port
        k.open = true;
        k.p = IciPacket();
        k.p.dst = topo_.node(unpack_coord(data & 0x1ff));
        k.p.src = topo_.node(unpack_coord((data >> 9) & 0x1ff));
        k.p.type = static_cast<IciType>((data >> 20) & 0xf);
        k.p.addr = static_cast<uint32_t>(data >> 32);
        k.p.head_out = cycle_;
        k.p.eject_node = nd;
      } else if (!k.open) {
        ++assert_failures_;
        continue;
      } else {
        k.p.payload.push_back(data);
      }
      if (tail) {
        k.open = false;
        k.p.delivered = cycle_;
        auto it = times_.find({k.p.src, k.p.dst, k.p.addr});
        if (it != times_.end() && !it->second.empty()) {
          k.p.created = it->second.front().first;
          k.p.injected = it->second.front().second;
          it->second.pop_front();
          if (it->second.empty()) times_.erase(it);
        }
        ++delivered_;
        if (on_deliver_) on_deliver_(k.p);
      }
    }
    if (!inj.empty() || !ej.empty()) last_progress_ = cycle_;
    ++cycle_;
  }
}

bool IciNet::idle() {
  impl_->m.eval();
  return queued_total() == 0 && impl_->m.top().idle_o;
}

bool IciNet::credits_home() {
  impl_->m.eval();
  return impl_->m.top().credits_full_o;
}

bool IciNet::drain(uint64_t max_cycles, uint64_t watchdog) {
  const uint64_t end = cycle_ + max_cycles;
  while (cycle_ < end) {
    if (in_flight() == 0 && idle()) return true;
    if (cycle_ - last_progress_ > watchdog && in_flight() > 0) return false;
    tick();
  }
  return in_flight() == 0 && idle();
}

uint32_t IciNet::stat(unsigned node, IciPort port, unsigned vc, IciStat s) {
  auto& t = impl_->m.top();
  t.stat_node_i = static_cast<uint8_t>(phys(node));
  t.stat_port_i = static_cast<uint8_t>(port);
  t.stat_vc_i = static_cast<uint8_t>(vc);
  t.stat_sel_i = static_cast<uint8_t>(s);
  impl_->m.eval();
  return t.stat_o;
}

}  // namespace tpu
