#include "ici_net.h"

#include <sstream>
#include <stdexcept>

#include "ici_net_model.h"
#include "tpu/twisted_torus.h"

namespace tpu {

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
  s << (dims == 1 ? (any_wrap ? " ring" : " line")
                  : (any_wrap ? (twist ? " twisted torus" : " torus") : " mesh"));
  return s.str();
}
unsigned IciTopology::twist_bits() const {
  if (!twist) return 0;
  return tpu::twist_bits({static_cast<int>(k[0]), static_cast<int>(k[1]), static_cast<int>(k[2])});
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
  if (local_ports < 1 || local_ports > 2)
    throw std::invalid_argument("ICI topology: " + std::to_string(local_ports) +
                                " local ports per router, not 1 or 2");
  if (twist) {
    twist_bits();  // throws naming the shape and the rule
    for (unsigned d = 0; d < 3; ++d)
      if (k[d] > 1 && !wrap[d])
        throw std::invalid_argument(std::string("ICI topology: twist with dimension ") + "xyz"[d] +
                                    " a line (mesh): " + kTwistRule);
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

IciNet::IciNet(const IciTopology& topo, const std::string& waves_path) : topo_(topo) {
  topo_.validate();
  ports_ = topo_.local_ports;
  model_ = make_ici_node_model(topo_);
  src_.resize(topo_.nodes() * ports_);
  sink_.resize(topo_.nodes() * ports_ * kIciNumVc);
  if (!waves_path.empty()) model_->open_waves(waves_path);
  assert_failures_ += model_->reset(4);
  // Let the configuration registers (top, then routers) take the run-time shape before traffic.
  for (int i = 0; i < 4; ++i) assert_failures_ += model_->tick();
}

IciNet::~IciNet() = default;

size_t IciNet::queued(unsigned node) const {
  size_t n = 0;
  for (unsigned p = 0; p < ports_; ++p) n += source(node, p).q.size();
  return n;
}

size_t IciNet::queued_total() const {
  size_t n = 0;
  for (const auto& s : src_) n += s.q.size();
  return n;
}

unsigned IciNet::port_of(const IciPacket& p) const {
  if (ports_ == 1) return 0;
  const auto c = topo_.coord(p.dst);
  return (c[0] + c[1] + c[2]) % ports_;
}

unsigned IciNet::local_vc(const IciPacket& p) const {
  const auto c = topo_.coord(p.dst);
  return (c[0] + c[1] + c[2]) / ports_ % kIciNumVc;
}

void IciNet::send(IciPacket p) {
  if (p.src >= nodes() || p.dst >= nodes()) throw std::invalid_argument("IciNet::send: bad node");
  if (p.payload.size() > 255) throw std::invalid_argument("IciNet::send: over 255 payload flits");
  p.created = cycle_;
  const unsigned port = port_of(p);
  source(p.src, port).q.push_back(std::move(p));
  ++sent_;
}

std::array<uint64_t, 2> IciNet::flit_words(const IciPacket& p, unsigned i) const {
  // {head/tail bits, data}
  const bool head = i == 0;
  const bool tail = i + 1 == p.flits();
  uint64_t data;
  if (head) {
    IciHeader h;
    h.dst = ici_pack_coord(topo_.coord(p.dst));
    h.src = ici_pack_coord(topo_.coord(p.src));
    h.ptype = static_cast<uint8_t>(p.type);
    h.len = static_cast<unsigned>(p.payload.size());
    h.addr = p.addr;
    data = ici_pack_header(h);
  } else {
    data = p.payload[i - 1];
  }
  return {(head ? 1u : 0u) | (tail ? 2u : 0u), data};
}

void IciNet::apply_inputs() {
  for (unsigned n = 0; n < nodes(); ++n) {
    const bool ready = eject_ready_ ? eject_ready_(n, cycle_) : true;
    for (unsigned port = 0; port < ports_; ++port) {
      const Source& s = source(n, port);
      const bool v = !s.q.empty();
      model_->set_inject(phys(n), v, v ? flit_words(s.q.front(), s.flit) : std::array<uint64_t, 2>{},
                         port, v && ports_ == 2 ? local_vc(s.q.front()) : 0);
      for (unsigned vc = 0; vc < kIciNumVc; ++vc) sink(n, port, vc).ready = ready;
      model_->set_eject_ready(phys(n), ready, port);
    }
  }
}

void IciNet::spurious_credit(unsigned node, unsigned dir, unsigned vc) {
  model_->spurious_credit(phys(node), dir, vc);
}

void IciNet::inject_done(unsigned nd, unsigned port) {
  Source& s = source(nd, port);
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

void IciNet::eject_flit(unsigned nd, unsigned port, const std::array<uint64_t, 2>& flit) {
  const unsigned vc = static_cast<unsigned>(flit[0] >> 2) % kIciNumVc;
  Sink& k = sink(nd, port, vc);
  const bool head = flit[0] & 1;
  const bool tail = flit[0] & 2;
  const uint64_t data = flit[1];
  ++flits_out_;
  if (head) {
    if (k.open) ++assert_failures_;  // framing broken at the ejection port
    k.open = true;
    k.p = IciPacket();
    const IciHeader h = ici_unpack_header(data);
    k.p.dst = topo_.node(ici_unpack_coord(h.dst));
    k.p.src = topo_.node(ici_unpack_coord(h.src));
    k.p.type = static_cast<IciType>(h.ptype);
    k.p.addr = h.addr;
    k.p.head_out = cycle_;
    k.p.eject_node = nd;
  } else if (!k.open) {
    ++assert_failures_;
    return;
  } else {
    k.p.payload.push_back(data);
  }
  if (!tail) return;
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

void IciNet::tick(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    apply_inputs();
    model_->eval();
    // Fault injection: change a stalled inject port's payload (the flit is not consumed).
    if (corrupt_node_ >= 0) {
      const unsigned nd = static_cast<unsigned>(corrupt_node_);
      const Source& s = source(nd, 0);
      if (!s.q.empty() && !model_->inject_ready(phys(nd))) {
        auto w = flit_words(s.q.front(), s.flit);
        w[1] ^= uint64_t{1} << 40;
        model_->set_inject(phys(nd), true, w, 0, ports_ == 2 ? local_vc(s.q.front()) : 0);
        model_->eval();
        corrupt_node_ = -1;
      }
    }
    // Handshakes of this cycle, sampled before the rising edge: (node, port) pairs.
    std::vector<std::pair<unsigned, unsigned>> inj, ej;
    std::vector<std::array<uint64_t, 2>> ej_flits;
    for (unsigned nd = 0; nd < nodes(); ++nd) {
      const unsigned ph = phys(nd);
      for (unsigned port = 0; port < ports_; ++port) {
        if (!source(nd, port).q.empty() && model_->inject_ready(ph, port))
          inj.emplace_back(nd, port);
        if (sink(nd, port, 0).ready && model_->eject_valid(ph, port)) {
          ej.emplace_back(nd, port);
          ej_flits.push_back(model_->eject_flit(ph, port));
        }
      }
    }
    assert_failures_ += model_->tick();
    for (const auto& [nd, port] : inj) inject_done(nd, port);
    for (size_t j = 0; j < ej.size(); ++j) eject_flit(ej[j].first, ej[j].second, ej_flits[j]);
    if (!inj.empty() || !ej.empty()) last_progress_ = cycle_;
    ++cycle_;
  }
}

bool IciNet::idle() { return queued_total() == 0 && model_->idle(); }

bool IciNet::credits_home() { return model_->credits_full(); }

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
  return model_->stat(phys(node), port, vc, s);
}

}  // namespace tpu
