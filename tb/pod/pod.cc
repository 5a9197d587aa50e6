#include "pod.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cmath>
#include <cstring>
#include <deque>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>
#include <tuple>

#include "ici_fields.h"
#include "tpu/twisted_torus.h"

namespace tpu {

namespace {
std::string hex_addr(uint64_t a) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(a));
  return b;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// IciLink
// ---------------------------------------------------------------------------------------------
LinkFaultGen::LinkFaultGen(uint64_t seed, double bit_rate, double burst_rate, double drop_rate)
    : on_(bit_rate > 0 || burst_rate > 0 || drop_rate > 0), st_(seed), bit_(bit_rate),
      burst_(burst_rate), drop_(drop_rate) {
  if (bit_ > 0) to_next_ = geometric();
}

uint64_t LinkFaultGen::geometric() {
  if (bit_ >= 1) return 0;
  // Bits before the next error of a Bernoulli(bit_) stream: floor(log(u) / log(1 - p)).
  const double u = 1.0 - uniform();  // (0, 1]
  const double g = std::floor(std::log(u) / std::log1p(-bit_));
  return g >= 1.8e19 ? ~0ull : static_cast<uint64_t>(g);
}

template <class Flip>
bool LinkFaultGen::apply(unsigned bits, Flip&& flip) {
  if (!on_) return true;
  if (drop_ > 0 && uniform() < drop_) {
    ++dropped;
    return false;
  }
  bool hit = false;
  if (burst_left_ == 0 && burst_ > 0 && uniform() < burst_) burst_left_ = kLinkBurstWords;
  if (burst_left_ > 0) {
    --burst_left_;
    const unsigned n = std::min(kLinkBurstBits, bits);
    const unsigned at = static_cast<unsigned>(next() % (bits - n + 1));
    for (unsigned k = 0; k < n; ++k) flip(at + k);
    bits_flipped += n;
    hit = true;
  }
  if (bit_ > 0) {
    while (to_next_ < bits) {
      flip(static_cast<unsigned>(to_next_));
      ++bits_flipped;
      hit = true;
      const uint64_t g = geometric();
      to_next_ = g >= ~0ull - to_next_ - 1 ? ~0ull : to_next_ + 1 + g;
    }
    to_next_ -= bits;
  }
  if (hit) ++corrupted;
  return true;
}

IciLink::IciLink(unsigned latency, unsigned flit_words)
    : latency_(latency), words_(flit_words), fl_(latency + 1), cr_(latency + 1),
      data_(static_cast<std::size_t>(latency + 1) * flit_words, 0),
      ctl_(static_cast<std::size_t>(latency + 1) * kCtlWords, 0) {
  if (latency == 0) throw std::invalid_argument("an ICI link needs a latency of >= 1 cycle");
}

void IciLink::set_faults(const LinkFaultGen& flit_fault, const LinkFaultGen& ctl_fault,
                         uint64_t down_at) {
  ff_ = flit_fault;
  cf_ = ctl_fault;
  down_at_ = down_at;
}

// The bits of a flit word on the wire, in the order faults number them: the row (words 0..R-1),
// tail and head (word R bits 0, 1), the sequence number (word R bits 8..15), the CRC (word R+1),
// the VC (2 bits).
void IciLink::send_flit(uint64_t t, bool valid, unsigned vc, const uint32_t* flit) {
  const std::size_t s = (t + latency_) % fl_.size();
  SlotMeta meta;
  if (valid) {
    std::memcpy(&data_[s * words_], flit, words_ * sizeof(uint32_t));
    ++flits_;
    flit_activity_ = t + 1;
    meta.sent = true;
    // New flits (not resent ones) against the credits: a replay carries a sequence number below
    // the next new one.
    const unsigned seq = (flit[words_ - 2] >> 8) & 0xFFu;
    if (seq == next_seq_) {
      ++vc_flits_[vc & 3u];
      next_seq_ = (next_seq_ + 1) & 0xFFu;
      meta.fresh = true;
    }
    if (t >= down_at_) {
      valid = false;
    } else if (ff_.on()) {
      uint32_t* w = &data_[s * words_];
      const unsigned rw = (words_ - 2) * 32;
      valid = ff_.apply(rw + 44, [&](unsigned k) {
        if (k < rw) w[k / 32] ^= 1u << (k % 32);
        else if (k < rw + 2) w[words_ - 2] ^= 1u << (k - rw);
        else if (k < rw + 10) w[words_ - 2] ^= 1u << (8 + k - rw - 2);
        else if (k < rw + 42) w[words_ - 1] ^= 1u << (k - rw - 10);
        else vc ^= 1u << (k - rw - 42);
      });
    }
  }
  fl_[s] = {valid, vc & 3u, meta};
}

bool IciLink::flit_at(uint64_t t, unsigned* vc, const uint32_t** flit) const {
  const std::size_t s = t % fl_.size();
  *vc = fl_[s].vc;
  *flit = &data_[s * words_];
  return fl_[s].valid;
}

// A control word on the wire: the payload's kIciCtlBits bits, then the CRC's 32.
void IciLink::send_ctl(uint64_t t, bool valid, const uint32_t* ctl, bool cr_valid, unsigned cr_vc) {
  const std::size_t s = (t + latency_) % cr_.size();
  SlotMeta meta;
  meta.sent = valid;
  meta.cr_valid = cr_valid;
  meta.cr_vc = cr_vc & 3u;
  if (cr_valid) ++vc_credits_[cr_vc & 3u];
  if (valid) {
    std::memcpy(&ctl_[s * kCtlWords], ctl, kCtlWords * sizeof(uint32_t));
    credit_activity_ = t + 1;
    if (t >= down_at_) {
      valid = false;
    } else if (cf_.on()) {
      uint32_t* w = &ctl_[s * kCtlWords];
      constexpr unsigned kP = ChipDut::kIciCtlBits;
      valid = cf_.apply(kP + 32, [&](unsigned k) {
        if (k < kP) w[0] ^= 1u << k;
        else w[1] ^= 1u << (k - kP);
      });
    }
  }
  cr_[s] = {valid, 0, meta};
}

bool IciLink::ctl_at(uint64_t t, const uint32_t** ctl) const {
  const std::size_t s = t % cr_.size();
  *ctl = &ctl_[s * kCtlWords];
  return cr_[s].valid;
}

void IciLink::import_flit(uint64_t t, bool valid, unsigned vc, const uint32_t* flit,
                          bool counted, bool is_new) {
  const std::size_t s = t % fl_.size();
  fl_[s] = {valid, vc & 3u, {counted, is_new, false, 0}};
  if (valid) std::memcpy(&data_[s * words_], flit, words_ * sizeof(uint32_t));
  if (!counted) return;  // the sender's clock: a flit counted there, dropped or not
  ++flits_;
  flit_activity_ = t - latency_ + 1;
  if (is_new) ++vc_flits_[vc & 3u];
}

void IciLink::import_ctl(uint64_t t, bool valid, const uint32_t* ctl, bool sent, bool cr_valid,
                         unsigned cr_vc) {
  const std::size_t s = t % cr_.size();
  cr_[s] = {valid, 0, {sent, false, cr_valid, cr_vc & 3u}};
  if (valid) std::memcpy(&ctl_[s * kCtlWords], ctl, kCtlWords * sizeof(uint32_t));
  if (sent) credit_activity_ = t - latency_ + 1;
  if (cr_valid) ++vc_credits_[cr_vc & 3u];
}

// ---------------------------------------------------------------------------------------------
// HostAgent
// ---------------------------------------------------------------------------------------------
std::shared_ptr<HostAgent::MemOp> HostAgent::mem(bool write, uint64_t addr, const void* data,
                                                 std::size_t n) {
  if (addr % 64 != 0 || n % 64 != 0)
    throw std::invalid_argument("host port: address " + std::to_string(addr) + " and length " +
                                std::to_string(n) + " must be multiples of 64 bytes");
  auto op = std::make_shared<MemOp>();
  op->write = write;
  op->addr = addr;
  op->data.assign(n, 0);
  if (write && n) std::memcpy(op->data.data(), data, n);
  if (n) ops_.push_back(op);
  if (n && trace.on()) traced_.push_back(op);
  return op;
}

void HostAgent::drive(ChipDut& d) {
  cmd_valid_ = !cmds_.empty();
  d.set_cmd(cmd_valid_, cmd_valid_ ? cmds_.front().w.data() : nullptr);
  clearing_ = clear_;
  clear_ = false;
  d.set_clear(clearing_);
  credit_ = std::min(credit_ + bpc_, 64u);
  req_valid_ = false;
  MemOp* op = nullptr;
  for (const auto& o : ops_) {
    if (o->issued * 64 < o->data.size()) {
      op = o.get();
      break;
    }
  }
  if (op && credit_ >= 64) {
    for (unsigned k = 0; k < tag_op_.size(); ++k) {
      const unsigned t = (req_tag_ + k) % static_cast<unsigned>(tag_op_.size());
      if (!tag_op_[t]) {
        req_tag_ = t;
        req_valid_ = true;
        break;
      }
    }
  }
  req_op_ = req_valid_ ? op : nullptr;
  if (req_valid_) {
    d.set_hm_req(true, op->write, static_cast<uint32_t>(op->addr + op->issued * 64), req_tag_,
                 op->write ? op->data.data() + op->issued * 64 : nullptr);
  } else {
    d.set_hm_req(false, false, 0, 0, nullptr);
  }
  d.set_hm_rsp_ready(true);
}

void HostAgent::observe(ChipDut& d, uint64_t t) {
  if (req_op_ && req_op_->first == ~0ull) req_op_->first = t;
  moved_ = false;
  if (cmd_valid_ && d.cmd_ready()) {
    if (clearing_) {  // the clear restarts the chip's command indices
      taken_.clear();
      taken_base_ = 0;
    }
    taken_.push_back(cmds_.front());
    cmds_.pop_front();
    ++pushed_;
    moved_ = true;
  } else if (clearing_) {
    taken_.clear();
    taken_base_ = 0;
  }
  if (d.hm_rsp_valid()) {
    moved_ = true;
    const unsigned tg = d.hm_rsp_tag() % static_cast<unsigned>(tag_op_.size());
    if (!tag_op_[tg]) throw PodError("host port: HBM response with an unknown tag");
    MemOp& op = *tag_op_[tg];
    if (!op.write) d.hm_rsp_data(op.data.data() + tag_burst_[tg] * 64);
    const unsigned ue = d.hm_rsp_ue();
    if (!op.write && ue != 0 && !ecc_error_) {
      unsigned w = 0;
      while (!((ue >> w) & 1u)) ++w;
      ecc_error_ = true;
      ecc_addr_ = op.addr + tag_burst_[tg] * 64 + w * 8;
    }
    ++op.done;
    if (op.finished()) op.end = t + 1;
    tag_op_[tg].reset();
  }
  if (req_valid_ && d.hm_req_ready()) {
    moved_ = true;
    credit_ -= 64;
    for (const auto& o : ops_) {
      if (o->issued * 64 < o->data.size()) {
        tag_op_[req_tag_] = o;
        tag_burst_[req_tag_] = o->issued++;
        break;
      }
    }
    req_tag_ = (req_tag_ + 1) % static_cast<unsigned>(tag_op_.size());
  }
  ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                            [](const std::shared_ptr<MemOp>& o) { return o->finished(); }),
             ops_.end());
  // Copies go on the timeline in the order they were queued (their first requests' order).
  while (!traced_.empty() && traced_.front()->finished()) {
    const MemOp& o = *traced_.front();
    trace.on_copy(o.write, o.addr, o.data.size(), o.first, o.end);
    traced_.pop_front();
  }
}

void HostAgent::issued_below(uint64_t idx) {
  while (!taken_.empty() && taken_base_ < idx) {
    taken_.pop_front();
    ++taken_base_;
  }
}

std::string HostAgent::describe_copies() const {
  std::string s;
  for (const auto& o : ops_) {
    s += std::string(s.empty() ? "" : "; ") + (o->write ? "write" : "read") + " of " +
         std::to_string(o->data.size()) + " bytes at HBM " + std::to_string(o->addr) + ": " +
         std::to_string(o->issued) + " of " + std::to_string(o->data.size() / 64) +
         " bursts requested, " + std::to_string(o->done) + " answered";
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// PodCore
// ---------------------------------------------------------------------------------------------
namespace {
// Cycles a link takes per flit (a row of `row` bytes): from link_gap, or from link_width (which
// must divide the row into 1 to kIciLinkGapMax beats), else 1: the link's pacing counter.
unsigned link_gap_of(const PodParams& p, unsigned row) {
  if (p.link_gap != 0) {
    if (p.link_width != 0 || p.link_gap > kIciLinkGapMax)
      throw std::invalid_argument("pod: link gap " + std::to_string(p.link_gap) +
                                  " cycles per flit must be from 1 to " +
                                  std::to_string(kIciLinkGapMax) + ", link width unset");
    return p.link_gap;
  }
  if (p.link_width == 0) return 1;
  if (row % p.link_width != 0 || row / p.link_width > kIciLinkGapMax)
    throw std::invalid_argument("pod: link width " + std::to_string(p.link_width) +
                                " bytes must divide the " + std::to_string(row) +
                                "-byte row of chip " + p.variant + " into 1 to " +
                                std::to_string(kIciLinkGapMax) + " beats");
  return row / p.link_width;
}
}  // namespace

PodCore::PodCore(const PodParams& p, std::vector<int> owned) : p_(p) {
  p_.topo.validate();
  if (p_.link_latency == 0) throw std::invalid_argument("pod: link_latency must be >= 1 cycle");
  const int n = p_.topo.num_chips();
  if (owned.empty()) {
    for (int i = 0; i < n; ++i) owned.push_back(i);
  }
  std::sort(owned.begin(), owned.end());
  for (std::size_t k = 0; k < owned.size(); ++k)
    if (owned[k] < 0 || owned[k] >= n || (k > 0 && owned[k] == owned[k - 1]))
      throw std::invalid_argument("pod: owned chip " + std::to_string(owned[k]) +
                                  (owned[k] < 0 || owned[k] >= n
                                       ? " is not in the pod (0.." + std::to_string(n - 1) + ")"
                                       : " is named twice"));
  order_ = owned;
  stepped_ = order_;
  // The models of the chips this process steps, and nothing of the others'.
  chips_.resize(static_cast<std::size_t>(n));
  agents_.resize(static_cast<std::size_t>(n));
  for (int i : order_) {
    chips_[static_cast<std::size_t>(i)] = make_chip(p_.variant);
    chips_[static_cast<std::size_t>(i)]->set_mem_rows(p_.vmem_rows, p_.amem_rows);
    chips_[static_cast<std::size_t>(i)]->configure(p_.hbm);
  }
  if (p_.host_bytes_per_cycle < 1 || p_.host_bytes_per_cycle > 64)
    throw std::invalid_argument("pod: host_bytes_per_cycle " +
                                std::to_string(p_.host_bytes_per_cycle) +
                                " must be from 1 to 64 (one 64-byte burst per cycle at most)");
  for (int i : order_) {
    agents_[static_cast<std::size_t>(i)] = std::make_unique<HostAgent>();
    agents_[static_cast<std::size_t>(i)]->set_bytes_per_cycle(p_.host_bytes_per_cycle);
  }
  last_busy_.assign(static_cast<std::size_t>(n), 0);
  chip_progress_.assign(static_cast<std::size_t>(n), 0);
  head_.assign(static_cast<std::size_t>(n), Head{});
  ports_.resize(static_cast<std::size_t>(n));
  const ChipDut& first = *chips_[static_cast<std::size_t>(order_[0])];
  words_ = first.flit_words();
  const unsigned row = first.shape().cols * 4;
  gap_ = link_gap_of(p_, row);
  wire_links();
  info_.topo = p_.topo;
  info_.variant = p_.variant;
  info_.shape = first.shape();
  info_.hbm = p_.hbm;
  info_.link_latency = p_.link_latency;
  info_.link_gap = gap_;
  info_.link_bytes_per_cycle = link_bytes_per_cycle();
  info_.host_bytes_per_cycle = p_.host_bytes_per_cycle;
  for (int c : p_.wave_chips)
    if (c < 0 || c >= n)
      throw std::invalid_argument("pod: --waves-chips: chip " + std::to_string(c) +
                                  " is not in the pod (0.." + std::to_string(n - 1) + ")");
  // Faults (none unless asked): the random ones are seeded by the reset below, one-time flips
  // are armed after it.
  if (p_.faults.any()) {
    for (int i : order_)
      chips_[i]->set_hbm_faults(hbm_fault_seed(p_.faults, i),
                                fault_rate_threshold(p_.faults.hbm_single_bit_rate),
                                fault_rate_threshold(p_.faults.hbm_double_bit_rate));
  }
  check_link_downs();
  for (int i : order_) chips_[i]->reset(4);
  open_waves();
  arm_hbm_flips();
  set_threads(p_.threads);
}

// Every link of the topology (the same numbers in every process), each chip's ICI coordinate,
// shape, link gap and replay time-out, and the links' fault generators.
void PodCore::wire_links() {
  const int n = p_.topo.num_chips();
  // A twisted torus (docs/topology.md): its wrap links land half a ring further along the
  // dimensions they twist into; the routers route by the same bits (ici_topo_t.twist).
  const std::vector<ChipWire> wires =
      p_.wiring.empty() ? torus_wiring(p_.topo, p_.twist) : p_.wiring;  // throws naming the rule
  if (static_cast<int>(wires.size()) != n)
    throw std::invalid_argument("pod: the wiring has " + std::to_string(wires.size()) +
                                " chips, the pod " + std::to_string(n));
  // Every link of the topology is numbered (the same numbers in every process); a link is built
  // where one of its ends is.
  for (int i = 0; i < n; ++i) {
    const ChipWire& cw = wires[static_cast<std::size_t>(i)];
    if (owns(i)) {
      chips_[i]->set_ici_config(cw.me, cw.k, cw.wrap, gap_, cw.twist);
      // The link layer's replay time-out: an ACK comes back 2L + 1 cycles after its flit left;
      // after a replay starts, its first flit may wait for the wire up to gap - 1 cycles.
      chips_[i]->set_ici_replay_timeout(2 * p_.link_latency + gap_ + 8);
    }
    for (int dir = 0; dir < 6; ++dir) {
      const int j = cw.peer[static_cast<std::size_t>(dir)];
      if (j < 0) continue;
      link_rx_.push_back(j);
      link_ids_.push_back({i, dir, 0});
      ports_[i][dir].peer = j;
      if (!owns(i) && !owns(j)) {
        links_.emplace_back();
        continue;
      }
      links_.push_back(std::make_unique<IciLink>(p_.link_latency, words_));
      ports_[i][dir].out = links_.back().get();
      ports_[j][dir ^ 1].in = links_.back().get();
      const FaultConfig& f = p_.faults;
      if (f.any_link()) {
        uint64_t down_at = ~0ull;
        for (const LinkDown& ld : f.link_down)
          if (ld.chip == i && ld.dir == dir) down_at = std::min(down_at, ld.cycle);
        links_.back()->set_faults(
            LinkFaultGen(link_fault_seed(f, i, dir, 0), f.link_bit_error_rate, f.link_burst_rate,
                         f.link_drop_rate),
            LinkFaultGen(link_fault_seed(f, i, dir, 1), f.link_bit_error_rate, f.link_burst_rate,
                         f.link_drop_rate),
            down_at);
      }
    }
  }
}

// faults.link_down names a chip of the pod and a link it has.
void PodCore::check_link_downs() const {
  const int n = p_.topo.num_chips();
  for (std::size_t li = 0; li < p_.faults.link_down.size(); ++li) {
    const LinkDown& ld = p_.faults.link_down[li];
    const std::string key = "faults.link_down[" + std::to_string(li) + "]";
    if (ld.chip < 0 || ld.chip >= n)
      throw std::invalid_argument("pod: " + key + ": chip " + std::to_string(ld.chip) +
                                  " is not in the pod (0.." + std::to_string(n - 1) + ")");
    if (ld.dir < 0 || ld.dir >= 6 || ports_[ld.chip][ld.dir].peer < 0)
      throw std::invalid_argument("pod: " + key + ": " + chip_name(p_.topo, ld.chip) +
                                  " has no link " + link_dir_name(ld.dir) + " in topology " +
                                  p_.topo.name());
  }
}

// faults.hbm_flip_at: the one-time flips, armed on the chips this process owns (after the reset).
void PodCore::arm_hbm_flips() {
  const int n = p_.topo.num_chips();
  for (std::size_t fi = 0; fi < p_.faults.hbm_flip_at.size(); ++fi) {
    const HbmFlip& f = p_.faults.hbm_flip_at[fi];
    if (f.chip < 0 || f.chip >= n)
      throw std::invalid_argument("pod: faults.hbm_flip_at: chip " + std::to_string(f.chip) +
                                  " is not in the pod (0.." + std::to_string(n - 1) + ")");
    uint64_t mask = 0;
    uint8_t check = 0;
    hbm_flip_bits(p_.faults, fi, &mask, &check);
    if (owns(f.chip)) chips_[f.chip]->arm_hbm_flip(f.addr, mask, check);
  }
}

// The dumps start after the reset, at pod cycle 0, so that their time is the trace's: pod cycle t
// at t / wave_clock_ghz ns (each dumped by the process that owns the chip).
void PodCore::open_waves() {
  for (int c : p_.wave_chips) {
    if (!owns(c)) continue;
    if (num_chips() == 1 && !p_.wave_path.empty()) {
      chips_[c]->open_waves(p_.wave_path, p_.wave_clock_ghz);
      continue;
    }
    std::filesystem::create_directories(p_.wave_dir);
    chips_[c]->open_waves(p_.wave_dir + "/pod_chip" + std::to_string(c) + ".fst",
                          p_.wave_clock_ghz);
  }
}

ChipDut& PodCore::model(int i) const {
  if (i < 0 || i >= num_chips())
    throw std::invalid_argument("pod: chip " + std::to_string(i) + " is not in the pod (0.." +
                                std::to_string(num_chips() - 1) + ")");
  if (!chips_[static_cast<std::size_t>(i)])
    throw std::logic_error("pod: " + chip_name(p_.topo, i) +
                           " is not built in this process: it belongs to another MPI rank, "
                           "which alone holds its state (docs/scale.md)");
  return *chips_[static_cast<std::size_t>(i)];
}

HostAgent& PodCore::agent(int i) {
  (void)model(i);
  return *agents_[static_cast<std::size_t>(i)];
}

IciLink& PodCore::link(int l) {
  if (l < 0 || l >= num_links() || !links_[static_cast<std::size_t>(l)])
    throw std::logic_error("pod: link " + std::to_string(l) +
                           " is not built in this process (neither of its chips is owned here)");
  return *links_[static_cast<std::size_t>(l)];
}

void PodCore::step_chip(int i) {
  ChipDut& d = *chips_[i];
  const uint64_t t = cycle_;
  agents_[i]->drive(d);
  for (unsigned dir = 0; dir < 6; ++dir) {
    const Port& p = ports_[i][dir];
    unsigned vc = 0;
    const uint32_t* f = nullptr;
    const bool fv = p.in && p.in->flit_at(t, &vc, &f);
    d.set_ici_rx(dir, fv, vc, fv ? f : nullptr);
    const uint32_t* c = nullptr;
    const bool cv = p.out && p.out->ctl_at(t, &c);
    d.set_ici_tx_ctl(dir, cv, cv ? c : nullptr);
  }
  d.eval();
  // Progress at the chip's ports this cycle (the watchdog, docs/errors.md): a command issued or
  // completed, a flit or a credit sent on a link, the host port moving.
  const ChipTracePort tp = d.trace_port();
  bool moved = tp.issue || tp.done != 0;
  agents_[i]->issued_below(tp.index);
  head_[i] = {tp.index, tp.wait};
  for (unsigned dir = 0; dir < 6; ++dir) {
    const Port& p = ports_[i][dir];
    const bool tv = d.ici_tx_valid(dir);
    moved = moved || tv || (p.in && d.ici_rx_cr_valid(dir));
    if (p.out) {
      p.out->send_flit(t, tv, d.ici_tx_vc(dir), tv ? d.ici_tx_flit(dir) : nullptr);
    } else if (tv) {
      throw PodError(chip_name(p_.topo, i) + ": a flit left on direction " + std::to_string(dir) +
                     ", which has no link (routing bug)");
    }
    if (p.in) {
      uint32_t c[IciLink::kCtlWords];
      const bool cv = d.ici_rx_ctl(dir, c);
      p.in->send_ctl(t, cv, c, d.ici_rx_cr_valid(dir), d.ici_rx_cr_vc(dir));
    }
  }
  // A link declared down ends the run with its error at once, whatever the host waits for.
  if (d.err() == static_cast<unsigned>(ChipErr::kIciLinkDown)) link_down_error(i);
  agents_[i]->observe(d, t);
  uint64_t ecc_addr = 0;
  if (agents_[i]->take_ecc_error(&ecc_addr)) {
    const auto code = static_cast<unsigned>(ChipErr::kHbmUncorr);
    throw ChipError(chip_name(p_.topo, i) + ": host port read of HBM address " +
                        hex_addr(ecc_addr) + ": uncorrectable ECC error (" +
                        chip_err_name(code) + ")",
                    code, i, 0);
  }
  if (moved || agents_[i]->moved()) chip_progress_[i] = t + 1;  // per chip: threads
  if (agents_[i]->trace.on()) agents_[i]->trace.on_cycle(t, tp);
  if (!agents_[i]->idle() || d.busy() || !d.hbm_idle()) last_busy_[i] = t + 1;
  try {
    d.tick();
  } catch (const ChipRtlError& e) {
    throw PodError(chip_name(p_.topo, i) + ": " + e.what());
  }
}

void PodCore::end_cycle() { ++cycle_; }

// Worker threads, each stepping a fixed slab of chips when the caller starts a cycle: the
// caller bumps `gen` and steps slab 0, each worker steps its slab and counts itself done. The
// workers spin briefly for the next cycle, then sleep on the condition variable (a pod that
// waits for its host, e.g. a golden check, costs no CPU). A worker's exception is kept and
// rethrown by the caller (the lowest slab's first).
namespace {
// Waits until done() holds, or gives up after `tries` checks (< 0: never): the first 4096 with
// the CPU's pause hint between them (a sibling hyperthread keeps the core), the rest yielding
// the CPU. Returns whether done() held.
template <typename Done>
bool spin_until(Done done, int tries = -1) {
  for (int i = 0; tries < 0 || i < tries; ++i) {
    if (done()) return true;
    if (i < 4096) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
  return false;
}
}  // namespace

struct PodCore::Pool {
  std::vector<std::thread> workers;
  std::vector<std::pair<int, int>> slabs;  // [first, last) chip per slab; slab 0: the caller
  std::vector<std::exception_ptr> errors;  // per slab
  std::mutex m;
  std::condition_variable cv;
  std::atomic<uint64_t> gen{0};
  std::atomic<unsigned> done{0};
  std::atomic<bool> stop{false};
};

PodCore::~PodCore() { set_threads(1); }

unsigned PodCore::threads() const {
  return pool_ ? static_cast<unsigned>(pool_->slabs.size()) : 1u;
}

void PodCore::set_threads(unsigned n) {
  if (pool_) {
    {
      std::lock_guard<std::mutex> lk(pool_->m);
      pool_->stop = true;
      ++pool_->gen;
    }
    pool_->cv.notify_all();
    for (auto& w : pool_->workers) w.join();
    pool_.reset();
  }
  const unsigned chips = static_cast<unsigned>(order_.size());
  n = std::max(1u, std::min(n, chips));
  if (n == 1) return;
  pool_ = std::make_unique<Pool>();
  Pool& pl = *pool_;
  pl.slabs.resize(n);
  cut_slabs();
  pl.errors.assign(n, nullptr);
  for (unsigned k = 1; k < n; ++k) {
    pl.workers.emplace_back([this, k] {
      Pool& p = *pool_;
      uint64_t seen = 0;
      for (;;) {
        // Wait for the next cycle: spin a little, then sleep.
        uint64_t g = 0;
        const auto next = [&] { return (g = p.gen.load(std::memory_order_acquire)) != seen; };
        if (!spin_until(next, 20000)) {
          std::unique_lock<std::mutex> lk(p.m);
          p.cv.wait(lk, next);
        }
        seen = g;
        if (p.stop.load()) return;
        try {
          for (int i = p.slabs[k].first; i < p.slabs[k].second; ++i) step_one(stepped_[i]);
        } catch (...) {
          p.errors[k] = std::current_exception();
        }
        p.done.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  }
}

void PodCore::step(bool reverse) {
  step_chips(reverse);
  end_cycle();
}

void PodCore::step_chips(bool reverse) {
  if (pool_) {
    Pool& p = *pool_;
    p.done.store(0, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(p.m);
      p.gen.fetch_add(1, std::memory_order_acq_rel);
    }
    p.cv.notify_all();
    try {
      for (int i = p.slabs[0].first; i < p.slabs[0].second; ++i) step_one(stepped_[i]);
    } catch (...) {
      p.errors[0] = std::current_exception();
    }
    const unsigned others = static_cast<unsigned>(p.workers.size());
    spin_until([&] { return p.done.load(std::memory_order_acquire) == others; });
    for (auto& e : p.errors)
      if (e) {
        std::exception_ptr x = e;
        for (auto& f : p.errors) f = nullptr;
        std::rethrow_exception(x);
      }
    return;
  }
  if (reverse) {
    for (auto it = stepped_.rbegin(); it != stepped_.rend(); ++it) step_one(*it);
  } else {
    for (int i : stepped_) step_one(i);
  }
}

void PodCore::step_one(int i) {
  if (contain_faults_.empty()) {
    step_chip(i);
    return;
  }
  std::exception_ptr& f = contain_faults_[static_cast<std::size_t>(i)];
  if (f) return;  // stopped at its error
  try {
    step_chip(i);
  } catch (...) {
    f = std::current_exception();
  }
}

void PodCore::step_only(const std::vector<int>& chips) {
  stepped_.clear();
  for (int i : chips)
    if (owns(i)) stepped_.push_back(i);
  std::sort(stepped_.begin(), stepped_.end());
  cut_slabs();
}

// The pool's slabs: equal shares of the chips step() steps (between cycles: the workers read
// them after the next cycle's start).
void PodCore::cut_slabs() {
  if (!pool_) return;
  const std::size_t n = pool_->slabs.size(), chips = stepped_.size();
  for (std::size_t k = 0; k < n; ++k)
    pool_->slabs[k] = {static_cast<int>(chips * k / n), static_cast<int>(chips * (k + 1) / n)};
}

void PodCore::contain_chip_faults() {
  contain_faults_.assign(static_cast<std::size_t>(num_chips()), nullptr);
}

bool PodCore::idle() const {
  for (int i : order_)
    if (!chip_idle(i)) return false;
  for (const auto& l : links_) {  // those built: every one that leaves or enters a chip here
    if (l && !l->quiet_after(cycle_)) return false;
  }
  return true;
}

bool PodCore::chip_idle(int i) const {
  const auto u = static_cast<std::size_t>(i);
  return agents_[u]->idle() && !chips_[u]->busy() && chips_[u]->ici_idle() &&
         chips_[u]->hbm_idle();
}

bool PodCore::idle(const std::vector<int>& chips) const {
  for (int i : chips) {
    if (!chip_idle(i)) return false;
    for (const Port& pt : ports_[static_cast<std::size_t>(i)])
      if ((pt.out && !pt.out->quiet_after(cycle_)) || (pt.in && !pt.in->quiet_after(cycle_)))
        return false;
  }
  return true;
}

void PodCore::check_errors(bool chip_errors) { check_errors(chip_errors, order_); }

void PodCore::check_errors(bool chip_errors, const std::vector<int>& chips) {
  for (int i : chips) {
    const unsigned e = chips_[i]->err();
    if (e == static_cast<unsigned>(ChipErr::kIciLinkDown)) link_down_error(i);
    if (e != 0 && chip_errors)
      throw ChipError(chip_name(p_.topo, i) + ": error register " + std::to_string(e) + " (" +
                          chip_err_name(e) + ") at command " +
                          std::to_string(chips_[i]->err_cmd()) +
                          (e == static_cast<unsigned>(ChipErr::kHbmUncorr)
                               ? ", HBM address " + hex_addr(chips_[i]->err_addr())
                               : std::string()),
                      e, i, chips_[i]->err_cmd());
    if (chips_[i]->hbm_violations() != 0)
      throw PodError(chip_name(p_.topo, i) + ": the HBM device checker saw " +
                     std::to_string(chips_[i]->hbm_violations()) + " violations");
  }
}

void PodCore::link_down_error(int i) {
  const auto code = static_cast<unsigned>(ChipErr::kIciLinkDown);
  const int dir = static_cast<int>(chips_[i]->err_addr());
  const int peer = dir >= 0 && dir < 6 ? ports_[i][dir].peer : -1;
  throw ChipError(chip_name(p_.topo, i) + ": ICI link " + link_dir_name(dir) +
                      (peer >= 0 ? " to " + chip_name(p_.topo, peer) : std::string()) +
                      " is down (error register " + std::to_string(code) + ", " +
                      chip_err_name(code) + ", at command " +
                      std::to_string(chips_[i]->err_cmd()) +
                      "): 8 replays in a row brought no acknowledgement",
                  code, i, chips_[i]->err_cmd());
}

std::string PodCore::describe_chip(int i) {
  const ChipCounters c = counters(i);  // a logic_error for a chip not built here
  return chip_name(p_.topo, i) + ": " + (chips_[i]->busy() ? "busy" : "idle") + ", " +
         std::to_string(agents_[i]->commands_pushed()) + " commands taken, " +
         std::to_string(agents_[i]->commands_waiting()) + " waiting on the host, " +
         std::to_string(c[kStatIciWait]) + " cycles blocked in ICI_WAIT, router " +
         (chips_[i]->ici_idle() ? "empty" : "holding flits");
}

std::string PodCore::hang_header(uint64_t cycles) {
  return "pod did not become idle in " + std::to_string(cycles) + " cycles:";
}

std::string PodCore::describe_hang(uint64_t cycles) {
  std::string what = hang_header(cycles);
  for (int i : order_) what += "\n  " + describe_chip(i);
  return what;
}

namespace {
// A command word as "name field=value ...", from the contract's field table.
template <std::size_t I = 0>
std::string describe_cmd(const ChipCmd& c) {
  if constexpr (I < std::tuple_size_v<ChipCmdTypes>) {
    using T = std::tuple_element_t<I, ChipCmdTypes>;
    if (c.op() != T::kOp) return describe_cmd<I + 1>(c);
    std::string s = T::kName;
    for (const CmdField& f : T::kFields)
      s += std::string(" ") + f.name + "=" + std::to_string(c.get(f.lsb, f.width));
    return s;
  } else {
    return "opcode " + std::to_string(static_cast<unsigned>(c.op()));
  }
}

// Counters that count work done (not cycles): one of them changing is progress.
constexpr unsigned kWorkStats[] = {kStatMxuBeats,    kStatDmaRdBytes,  kStatDmaWrBytes,
                                   kStatCmdsDone,    kStatHostRdBytes, kStatHostWrBytes,
                                   kStatWeightBeats, kStatIciTxFlits,  kStatIciRxFlits};
// Counters of cycles a unit was in flight: one rising between two checks names the unit busy.
struct UnitStat {
  unsigned stat;
  const char* what;
};
constexpr UnitStat kUnitStats[] = {{kStatDmaFlight, "DMA in flight"},
                                   {kStatLoadWFlight, "LOADW in flight"},
                                   {kStatMatmulFlight, "MATMUL in flight"},
                                   {kStatMxuStarved, "MATMUL starved of activations"},
                                   {kStatVpuFlight, "VPU in flight"},
                                   {kStatSendFlight, "ICI_SEND in flight"},
                                   {kStatIciWait, "ICI_WAIT blocking the queue"},
                                   {kStatIciRxBusy, "router ejection port holding a flit"},
                                   {kStatHostBusy, "host port waiting on HBM"}};
const char* const kDirName[6] = {"+x", "-x", "+y", "-y", "+z", "-z"};
}  // namespace

bool PodCore::work_changed() {
  const auto n = static_cast<std::size_t>(num_chips());
  prev_ctr_.swap(check_ctr_);
  prev_check_ = last_check_;
  check_ctr_.resize(n);
  bool changed = prev_ctr_.size() != n;
  for (int c : order_) {  // the chips built here (another process checks its own)
    const auto i = static_cast<std::size_t>(c);
    check_ctr_[i] = counters(c);
    if (changed) continue;
    for (unsigned s : kWorkStats) changed = changed || check_ctr_[i][s] != prev_ctr_[i][s];
  }
  last_check_ = cycle_;
  return changed;
}

void PodCore::watch() {
  const uint64_t w = p_.watchdog_cycles;
  if (w == 0) return;
  const uint64_t t = cycle_;
  for (uint64_t v : chip_progress_) last_progress_ = std::max(last_progress_, v);
  // Counters are read at most every k cycles, and only while the ports show no progress.
  const uint64_t k = std::clamp<uint64_t>(w / 16, 1, 1024);
  if (t - last_progress_ < k) return;
  if (idle()) {  // nothing to do is not a hang
    last_progress_ = t;
    return;
  }
  if (t - last_check_ < k) return;
  if (work_changed()) {
    last_progress_ = t;
    return;
  }
  if (t - last_progress_ >= w) throw HangError(describe_stall(t - last_progress_));
}

std::string PodCore::stall_header(uint64_t stalled) const {
  return "watchdog: no progress for " + std::to_string(stalled) + " cycles (watchdog_cycles " +
         std::to_string(p_.watchdog_cycles) + ") at cycle " + std::to_string(cycle_) +
         ": no command issued or completed, no flit or credit on a link, no host-port "
         "beat, no work counter changed (a deadlock, a credit leak or a wait nobody "
         "answers). Still busy:";
}

std::string PodCore::describe_stall(uint64_t stalled) {
  return compose_stall(stall_header(stalled), {stall_part(order_)});
}

PodCore::StallPart PodCore::stall_part(const std::vector<int>& chips) {
  StallPart part;
  const auto chips_n = static_cast<std::size_t>(num_chips());
  const bool deltas =
      prev_ctr_.size() == chips_n && check_ctr_.size() == chips_n && last_check_ > prev_check_;
  std::vector<bool> mine(chips_n, false);
  for (int i : chips) {
    ChipDut& d = model(i);
    mine[static_cast<std::size_t>(i)] = true;
    const auto u = static_cast<std::size_t>(i);
    if (agents_[u]->idle() && !d.busy() && d.ici_idle() && d.hbm_idle()) {
      part.idle.push_back(i);
      continue;
    }
    std::string s =
        "\n  " + describe_chip(i) + (d.hbm_idle() ? "" : ", HBM controller holding requests");
    // The queue head: the command the sequencer cannot issue.
    const uint64_t idx = head_[u].index;
    if (const ChipCmd* c = agents_[u]->taken(idx)) {
      s += "\n    queue head: command " + std::to_string(idx) + ": " + describe_cmd(*c);
      if (head_[u].wait && c->op() == ChipOp::kIciWait) {
        const CmdIciWait w = CmdIciWait::decode(*c);
        s += " (blocked: ICI counter " + std::to_string(w.counter) + " is short of " +
             std::to_string(w.value) + " rows; " + std::to_string(check_ctr_.size() > u
                                                                     ? check_ctr_[u][kStatIciRxFlits]
                                                                     : 0) +
             " flits received so far)";
      }
      s += "; " + std::to_string(agents_[u]->taken_count() - idx) + " commands in the chip's queue";
    } else if (d.busy()) {
      s += "\n    queue: empty, commands in flight";
    }
    if (deltas) {
      std::string units;
      for (const UnitStat& us : kUnitStats)
        if (check_ctr_[u][us.stat] != prev_ctr_[u][us.stat])
          units += std::string(units.empty() ? "" : ", ") + us.what;
      if (!units.empty()) s += "\n    units: " + units;
    }
    const std::string copies = agents_[u]->describe_copies();
    if (!copies.empty()) s += "\n    host copies: " + copies;
    part.chips.emplace_back(i, s);
  }
  // Links whose sender is short of credits: flits sitting in the receiver's buffers (a router
  // that cannot forward them) or credits that never came back (a leak).
  for (std::size_t l = 0; l < links_.size(); ++l) {
    const LinkStat& id = link_ids_[l];
    if (!mine[static_cast<std::size_t>(id.chip)]) continue;
    std::string vcs;
    uint64_t total = 0;
    for (unsigned vc = 0; vc < 4; ++vc) {
      const uint64_t n = links_[l]->uncredited(vc);
      total += n;
      if (n) vcs += (vcs.empty() ? "vc" : ", vc") + std::to_string(vc) + " " + std::to_string(n);
    }
    if (total == 0) continue;
    part.links.emplace_back(static_cast<int>(l), "\n  link " + chip_name(p_.topo, id.chip) + " " +
                                                     kDirName[id.dir] + ": " +
                                                     std::to_string(total) +
                                                     " flits not credited back (" + vcs + ")");
  }
  return part;
}

std::string PodCore::compose_stall(const std::string& header, std::vector<StallPart> parts) {
  StallPart all;
  for (StallPart& p : parts) {
    all.chips.insert(all.chips.end(), p.chips.begin(), p.chips.end());
    all.links.insert(all.links.end(), p.links.begin(), p.links.end());
    all.idle.insert(all.idle.end(), p.idle.begin(), p.idle.end());
  }
  std::sort(all.chips.begin(), all.chips.end());
  std::sort(all.links.begin(), all.links.end());
  std::sort(all.idle.begin(), all.idle.end());
  std::string s = header;
  for (const auto& c : all.chips) s += c.second;
  for (const auto& l : all.links) s += l.second;
  std::string idle_chips;
  for (int i : all.idle) idle_chips += (idle_chips.empty() ? "" : ", ") + std::to_string(i);
  if (!idle_chips.empty()) s += "\n  idle: chips " + idle_chips;
  return s;
}

RunStats PodCore::finish_run(uint64_t start, bool chip_errors) {
  check_errors(chip_errors);
  RunStats r;
  r.cycles = cycle_ - start;
  for (int i = 0; i < num_chips(); ++i)
    r.chip_cycles.push_back(last_busy_[i] > start ? last_busy_[i] - start : 0);
  return r;
}

ChipStatus PodCore::status(int i) const {
  const ChipDut& d = model(i);
  ChipStatus s;
  s.busy = d.busy() || !agents_[i]->idle();
  s.halted = d.halted();
  s.router_empty = d.ici_idle();
  s.queue_empty = agents_[i]->commands_waiting() == 0;
  s.err = d.err();
  s.err_cmd = d.err_cmd();
  s.err_addr = d.err_addr();
  s.cmds_waiting = agents_[i]->commands_waiting();
  return s;
}

void PodCore::check_copy(const HostCopy& o) const {
  const uint64_t cap = shape().hbm_bytes;
  if (o.chip < 0 || o.chip >= num_chips())
    throw std::invalid_argument("host port: chip " + std::to_string(o.chip) +
                                " is not in the pod (0.." + std::to_string(num_chips() - 1) + ")");
  if (o.addr % 64 != 0 || o.n % 64 != 0 || o.addr + o.n > cap)
    throw std::invalid_argument(chip_name(p_.topo, o.chip) + ": host port copy of " +
                                std::to_string(o.n) + " bytes at " + std::to_string(o.addr) +
                                ": address and length must be multiples of 64 bytes inside the "
                                "HBM (" + std::to_string(cap) + " bytes)");
  if (o.n && !o.data) throw std::invalid_argument("host port: a copy without a host buffer");
}

void PodCore::backdoor(int chip, bool write, uint64_t addr, void* data, std::size_t n) {
  check_copy(HostCopy{chip, write, addr, data, n});
  (void)model(chip);  // a chip built here
  // The controller may hold posted writes that the device has not seen yet: a backdoor access
  // then would read stale data or be overwritten. Run the machine until it is idle first.
  if (!agents_[chip]->idle() || !chips_[chip]->hbm_idle())
    throw PodError(chip_name(p_.topo, chip) + ": backdoor access while the host port or the HBM "
                   "controller has requests in flight; run the machine until it is idle first");
  auto* b = static_cast<uint8_t*>(data);
  for (std::size_t o = 0; o < n; o += 64) {
    if (write) {
      chips_[chip]->backdoor_write(addr + o, b + o);
      continue;
    }
    chips_[chip]->backdoor_read(addr + o, b + o);
    if (const unsigned ue = chips_[chip]->backdoor_ue()) {
      unsigned w = 0;
      while (!((ue >> w) & 1u)) ++w;
      const auto code = static_cast<unsigned>(ChipErr::kHbmUncorr);
      throw ChipError(chip_name(p_.topo, chip) + ": backdoor read of HBM address " +
                          hex_addr(addr + o + w * 8) + ": uncorrectable ECC error (" +
                          chip_err_name(code) + ")",
                      code, chip, 0);
    }
  }
}

ChipCounters PodCore::counters(int i) {
  ChipCounters c;
  ChipDut& d = model(i);
  for (unsigned s = 0; s < kNumChipStats; ++s) {
    d.set_stat_id(s);
    d.eval();
    c.v[s] = d.stat();
  }
  return c;
}

void PodCore::set_trace(const TraceOptions& o) {
  check_trace_window(o);
  for (int i : order_) agents_[i]->trace.set(i, o);
}

std::vector<TraceEvent> PodCore::take_trace() {
  std::vector<TraceEvent> v;
  for (int i : order_) agents_[i]->trace.take(v);
  sort_trace_events(v);
  return v;
}

void PodCore::trace_label(int chip, const std::string& label) {
  if (chip < 0 || chip >= num_chips())
    throw std::invalid_argument("trace_label: chip " + std::to_string(chip) +
                                " is not in the pod");
  agent(chip).trace.label(label);
}

std::vector<LinkStat> PodCore::link_stats() const {
  std::vector<LinkStat> v = link_ids_;
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i].flits = owns(v[i].chip) ? links_[i]->flits() : 0;
  fill_link_errors(v, [this](int c, int d, unsigned sel) {
    return owns(c) ? link_counter(c, d, sel) : 0;
  });
  return v;
}

void PodCore::fill_link_errors(std::vector<LinkStat>& v,
                               const std::function<uint64_t(int, int, unsigned)>& counter) const {
  for (LinkStat& l : v) {
    const int peer = ports_[l.chip][l.dir].peer;
    l.crc_errors = counter(l.chip, l.dir, kLinkStCtlErr) +
                   (peer >= 0 ? counter(peer, l.dir ^ 1, kLinkStCrcErr) : 0);
    l.replays = counter(l.chip, l.dir, kLinkStReplays);
    l.replayed_flits = counter(l.chip, l.dir, kLinkStReplayed);
    l.link_down = counter(l.chip, l.dir, kLinkStDown);
  }
}

// ---------------------------------------------------------------------------------------------
// CppPodHost
// ---------------------------------------------------------------------------------------------
HostCopyQueues::HostCopyQueues(PodCore& core, const std::vector<HostCopy>& ops,
                               const std::function<bool(int)>& mine)
    : core_(core),
      ops_(ops),
      pending_(static_cast<std::size_t>(core.num_chips())),
      active_(pending_.size(), ops.size()),
      mops_(ops.size()) {
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (!mine || mine(ops[i].chip)) pending_[static_cast<std::size_t>(ops[i].chip)].push_back(i);
}

bool HostCopyQueues::advance() {
  const std::size_t none = ops_.size();
  bool busy = false;
  for (std::size_t c = 0; c < pending_.size(); ++c) {
    if (active_[c] < none && mops_[active_[c]]->finished()) active_[c] = none;
    if (active_[c] == none && !pending_[c].empty()) {
      active_[c] = pending_[c].front();
      pending_[c].pop_front();
      const HostCopy& o = ops_[active_[c]];
      mops_[active_[c]] = core_.agent(o.chip).mem(o.write, o.addr, o.data, o.n);
    }
    busy = busy || active_[c] < none;
  }
  return busy;
}

uint64_t CppPodHost::copy(const std::vector<HostCopy>& ops) {
  for (const HostCopy& o : ops) core_.check_copy(o);
  HostCopyQueues q(core_, ops);
  WaitCycles w(core_, *this, core_.owned(), false, 100'000'000,
               "\n(host port copies still running)");
  while (q.advance()) {
    core_.step(reverse_step_order);
    w.tick(core_.cycle());
    core_.watch();
    w.bound(core_.cycle());
  }
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (!ops[i].write && ops[i].n) std::memcpy(ops[i].data, q.read(i).data(), ops[i].n);
  return core_.cycle() - w.start();
}

void CppPodHost::backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) {
  core_.backdoor(chip, true, addr, const_cast<void*>(data), n);
  backdoor_bytes_ += n;
}

void CppPodHost::backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) {
  core_.backdoor(chip, false, addr, data, n);
  backdoor_bytes_ += n;
}

void CppPodHost::push(int chip, const std::vector<ChipCmd>& cmds) {
  if (chip < 0 || chip >= core_.num_chips())
    throw std::invalid_argument("push: chip " + std::to_string(chip) + " is not in the pod");
  core_.agent(chip).push(cmds);
}

void CppPodHost::clear(int chip) {
  core_.agent(chip).request_clear();
  core_.step(reverse_step_order);
  core_.watch();
}

RunStats CppPodHost::run_until_idle(uint64_t max_cycles, bool stop_on_error) {
  WaitCycles w(core_, *this, core_.owned(), stop_on_error, max_cycles);
  while (!core_.idle()) {
    core_.step(reverse_step_order);
    w.tick(core_.cycle());
    core_.watch();
    w.bound(core_.cycle());
  }
  return core_.finish_run(w.start(), stop_on_error);
}

}  // namespace tpu
