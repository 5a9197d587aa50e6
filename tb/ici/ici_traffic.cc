#include "ici_traffic.h"

#include <sstream>

#include "tpu/splitmix.h"

namespace tpu {

IciScoreboard::IciScoreboard(IciNet& net) : net_(net) {
  net_.on_deliver([this](const IciPacket& p) { check(p); });
}
IciScoreboard::~IciScoreboard() { net_.on_deliver(nullptr); }

uint64_t IciScoreboard::payload_word(unsigned src, unsigned dst, uint32_t seq, unsigned i) {
  return splitmix64((uint64_t{src} << 48) ^ (uint64_t{dst} << 36) ^ (uint64_t{seq} << 8) ^ i);
}

void IciScoreboard::send(unsigned src, unsigned dst, unsigned flits, IciType type) {
  auto& lens = lens_[{src, dst}];
  IciPacket p;
  p.src = src;
  p.dst = dst;
  p.type = type;
  p.addr = static_cast<uint32_t>(lens.size());
  for (unsigned i = 1; i < flits; ++i) p.payload.push_back(payload_word(src, dst, p.addr, i));
  lens.push_back(static_cast<uint8_t>(flits - 1));
  net_.send(std::move(p));
  ++sent_;
}

uint64_t IciScoreboard::delivered(unsigned src, unsigned dst) const {
  auto it = next_.find({src, dst});
  return it == next_.end() ? 0 : it->second;
}

void IciScoreboard::error(const std::string& e) {
  if (errors_.size() < 20) errors_.push_back(e);
}

void IciScoreboard::check(const IciPacket& p) {
  std::ostringstream where;
  where << "packet " << p.src << "->" << p.dst << " #" << p.addr << " at cycle " << p.delivered
        << ": ";
  if (p.eject_node != p.dst) {
    error(where.str() + "delivered at node " + std::to_string(p.eject_node));
    return;
  }
  auto it = lens_.find({p.src, p.dst});
  uint32_t& next = next_[{p.src, p.dst}];
  if (it == lens_.end() || p.addr >= it->second.size()) {
    error(where.str() + "was never sent (or duplicated)");
    return;
  }
  if (p.addr != next) {
    error(where.str() + "out of order, expected #" + std::to_string(next));
    return;
  }
  ++next;
  ++checked_;
  const unsigned len = it->second[p.addr];
  if (p.payload.size() != len) {
    error(where.str() + std::to_string(p.payload.size()) + " payload flits, sent " +
          std::to_string(len));
    return;
  }
  for (unsigned i = 1; i <= len; ++i) {
    if (p.payload[i - 1] != payload_word(p.src, p.dst, p.addr, i)) {
      error(where.str() + "payload flit " + std::to_string(i) + " corrupted");
      return;
    }
  }
  if (p.created >= win_from_ && p.created < win_to_) {
    const uint64_t lat = p.delivered - p.created;
    ++lat_n_;
    lat_sum_ += lat;
    net_sum_ += p.delivered - p.injected;
    if (lat > lat_max_) lat_max_ = lat;
  }
}

const char* ici_pattern_name(IciPattern p) {
  switch (p) {
    case IciPattern::kUniform: return "uniform";
    case IciPattern::kTranspose: return "transpose";
    case IciPattern::kNeighbor: return "neighbor";
    case IciPattern::kTornado: return "tornado";
    case IciPattern::kHalf: return "half";
  }
  return "?";
}
const char* ici_length_name(IciLength l) {
  switch (l) {
    case IciLength::kOne: return "1flit";
    case IciLength::kFour: return "4flit";
    case IciLength::kMixed: return "mixed";
  }
  return "?";
}

unsigned ici_pattern_dst(const IciTopology& t, IciPattern p, unsigned src, std::mt19937_64& rng) {
  const unsigned n = t.nodes();
  auto c = t.coord(src);
  switch (p) {
    case IciPattern::kUniform: {
      if (n == 1) return src;
      unsigned d = static_cast<unsigned>(rng() % (n - 1));
      return d >= src ? d + 1 : d;
    }
    case IciPattern::kTranspose:
      if (t.k[2] > 1 && t.k[0] == t.k[1] && t.k[1] == t.k[2]) return t.node({c[1], c[2], c[0]});
      if (t.k[1] > 1 && t.k[0] == t.k[1]) return t.node({c[1], c[0], c[2]});
      return t.node({t.k[0] - 1 - c[0], c[1], c[2]});
    case IciPattern::kNeighbor:
      c[0] = (c[0] + 1) % t.k[0];
      return t.node(c);
    case IciPattern::kTornado:
      for (unsigned d = 0; d < 3; ++d) c[d] = (c[d] + (t.k[d] + 1) / 2 - 1) % t.k[d];
      return t.node(c);
    case IciPattern::kHalf:
      for (unsigned d = 0; d < 3; ++d) c[d] = (c[d] + t.k[d] / 2) % t.k[d];
      return t.node(c);
  }
  return src;
}

IciRunStats ici_run(IciNet& net, IciScoreboard& sb, const IciTrafficConfig& cfg, uint64_t warmup,
                    uint64_t measure, uint64_t drain_max, uint64_t watchdog) {
  IciRunStats st;
  std::mt19937_64 rng(cfg.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double avg_len = cfg.length == IciLength::kOne    ? 1.0
                         : cfg.length == IciLength::kFour ? 4.0
                                                          : 2.5;
  const double p_pkt = cfg.rate / avg_len;
  const uint64_t start = net.cycle() + warmup;
  const uint64_t end = start + measure;
  sb.set_window(start, end);
  uint64_t ej0 = 0;
  uint64_t created = 0;
  const unsigned n = net.nodes();
  auto fail = [&](uint64_t since) {
    std::ostringstream s;
    s << "no flit entered or left the network for " << since << " cycles at cycle " << net.cycle()
      << " with " << net.in_flight() << " packets in flight (" << net.queued_total()
      << " still queued at sources): deadlock or livelock";
    st.error = s.str();
  };
  while (net.cycle() < end) {
    if (net.cycle() == start) ej0 = net.flits_ejected();
    for (unsigned s = 0; s < n; ++s) {
      if (u(rng) >= p_pkt) continue;
      const unsigned flits = cfg.length == IciLength::kOne    ? 1
                             : cfg.length == IciLength::kFour ? 4
                             : (rng() & 1)                    ? 4
                                                              : 1;
      if (net.cycle() >= start) created += flits;
      if (net.queued(s) >= cfg.queue_cap) continue;
      sb.send(s, ici_pattern_dst(net.topology(), cfg.pattern, s, rng), flits);
    }
    net.tick();
    if (net.in_flight() > 0 && net.cycle() - net.last_progress() > watchdog) {
      fail(net.cycle() - net.last_progress());
      return st;
    }
  }
  st.cycles = measure;
  st.accepted = double(net.flits_ejected() - ej0) / double(n) / double(measure);
  st.offered = double(created) / double(n) / double(measure);
  if (!net.drain(drain_max, watchdog)) {
    if (net.cycle() - net.last_progress() > watchdog) fail(net.cycle() - net.last_progress());
    else st.error = "not drained within " + std::to_string(drain_max) + " cycles";
  } else {
    st.completed = true;
  }
  st.avg_latency = sb.avg_latency();
  st.avg_net_latency = sb.avg_net_latency();
  st.max_latency = sb.max_latency();
  st.packets = sb.window_packets();
  return st;
}

}  // namespace tpu
