#include "hbm_harness.h"
#include "hbm_ports.h"


#include <stdexcept>

#include "Vhbm_subsys_tb_top.h"
#include "fault_config.h"
#include "verilated_model.h"

namespace tpu {

namespace {

const char* const kStatNames[kHbmNumStats] = {
    "rd_reqs",       "wr_reqs",    "rd_bytes",   "wr_bytes",   "row_hits",        "row_misses",
    "row_conflicts", "acts",       "pres",       "refreshes",  "bus_busy_cycles", "rd_forwarded",
    "wr_merged",     "lat_sum",    "lat_count",  "lat_hist_0", "lat_hist_1",      "lat_hist_2",
    "lat_hist_3",    "lat_hist_4", "lat_hist_5", "lat_hist_6", "lat_hist_7",      "wr_drains",
    "ecc_corrected", "ecc_uncorrectable",
};

const char* const kRuleNames[] = {
    "none",
    "tRCD",
    "tRP",
    "tRAS",
    "tRC",
    "tCCD_S",
    "tCCD_L",
    "tRRD_S",
    "tRRD_L",
    "tFAW",
    "tWR",
    "tWTR_S",
    "tWTR_L",
    "tRTP",
    "tRFC",
    "tREFI",
    "CL",
    "CWL",
    "BL",
    "tRTW",
    "RD-to-closed-bank",
    "WR-to-closed-bank",
    "ACT-to-open-bank",
    "REF-with-open-bank",
    "row-range",
    "write-ECC",
};

unsigned log2u(unsigned v) {
  unsigned w = 0;
  while ((1u << w) < v) ++w;
  return w;
}

// Bit positions of the fields of a map (tpu_hbm_pkg::hbm_decode), counted from bit 6.
struct MapLayout {
  unsigned ch, bg, ba, col, row;
};

MapLayout layout(HbmAddrMap map) {
  const unsigned chw = log2u(kHbmChannels), roww = log2u(kHbmRowsPerBank);
  switch (map) {
    case HbmAddrMap::kChBgBaCo:
      return {0, chw, chw + 2, chw + 4, chw + 9};
    case HbmAddrMap::kChCoBgBa:
      return {0, chw + 5, chw + 7, chw, chw + 9};
    case HbmAddrMap::kCoBgBaRoCh:
      return {9 + roww, 5, 7, 0, 9};
    case HbmAddrMap::kChBgCoBa:
    default:
      return {0, chw, chw + 7, chw + 2, chw + 9};
  }
}

uint32_t field(uint32_t a, unsigned lsb, unsigned w) { return (a >> lsb) & ((1u << w) - 1u); }

}  // namespace

const std::array<uint32_t, kHbmLatBuckets> kHbmLatBucketLo = {0, 32, 48, 64, 96, 128, 256, 512};

const char* hbm_stat_name(HbmStat s) {
  const auto i = static_cast<unsigned>(s);
  return i < kHbmNumStats ? kStatNames[i] : "?";
}

const char* hbm_rule_name(HbmRule r) {
  const auto i = static_cast<unsigned>(r);
  return i < sizeof(kRuleNames) / sizeof(kRuleNames[0]) ? kRuleNames[i] : "?";
}

HbmLoc hbm_decode(uint32_t addr, HbmAddrMap map) {
  const MapLayout l = layout(map);
  const uint32_t a = addr >> 6;
  HbmLoc loc;
  loc.ch = field(a, l.ch, log2u(kHbmChannels));
  loc.bg = field(a, l.bg, 2);
  loc.ba = field(a, l.ba, 2);
  loc.col = field(a, l.col, 5);
  loc.row = field(a, l.row, log2u(kHbmRowsPerBank));
  return loc;
}

uint32_t hbm_encode(const HbmLoc& loc, HbmAddrMap map) {
  const MapLayout l = layout(map);
  const uint32_t a = (loc.ch << l.ch) | (loc.bg << l.bg) | (loc.ba << l.ba) | (loc.col << l.col) |
                     (loc.row << l.row);
  return a << 6;
}

struct HbmHarness::Impl {
  VerilatedModel<Vhbm_subsys_tb_top> m;  // its own context; counts failed assertions
};

HbmHarness::HbmHarness(const HbmConfig& cfg, const std::string& waves_path)
    : cfg_(cfg), impl_(new Impl) {
  validate_hbm_config(cfg_);
  // The dump on the configured clock: cycle n at n x tck_ns (tb/common/wave_clock.h).
  if (!waves_path.empty()) impl_->m.open_waves(waves_path, "the HBM subsystem", 1.0 / cfg_.tck_ns);
  auto& t = impl_->m.top();
  drive_hbm_config_ports(t, cfg_);
  t.req_valid_i = 0;
  t.rsp_ready_i = 1;
  t.req1_valid_i = 0;
  t.rsp1_ready_i = 1;
  t.dev_direct_i = 0;
  t.dbg_ch_i = 0;
  t.dbg_cmd_i = 0;
  t.dbg_wvalid_i = 0;
  impl_->m.reset(4);  // a failed assertion is counted by check_errors() below
  check_errors();
}

HbmHarness::~HbmHarness() = default;

namespace {

// Drives one request port's flat signals from the head of its queue.
template <class Valid, class Write, class Addr, class Tag, class Data>
void drive_port(const std::deque<HbmRequest>& q, Valid& valid, Write& write, Addr& addr, Tag& tag,
                Data& data) {
  if (q.empty()) {
    valid = 0;
    return;
  }
  const HbmRequest& r = q.front();
  valid = 1;
  write = r.write;
  addr = r.addr;
  tag = r.tag;
  for (unsigned w = 0; w < 16; ++w) {
    uint32_t v = 0;
    for (unsigned b = 0; b < 4; ++b) v |= uint32_t{r.data[w * 4 + b]} << (8 * b);
    data[w] = v;
  }
}

// Reads one response port's flat signals.
template <class Write, class Tag, class Ue, class Data>
HbmResponse read_port(Write write, Tag tag, Ue ue, const Data& data, uint64_t cycle) {
  HbmResponse rsp;
  rsp.write = write;
  rsp.tag = tag;
  rsp.cycle = cycle;
  rsp.ue = ue;
  for (unsigned w = 0; w < 16; ++w)
    for (unsigned b = 0; b < 4; ++b) rsp.data[w * 4 + b] = static_cast<uint8_t>(data[w] >> (8 * b));
  return rsp;
}

}  // namespace

void HbmHarness::apply_inputs() {
  auto& t = impl_->m.top();
  drive_port(pending_, t.req_valid_i, t.req_write_i, t.req_addr_i, t.req_tag_i, t.req_data_i);
  drive_port(pending1_, t.req1_valid_i, t.req1_write_i, t.req1_addr_i, t.req1_tag_i,
             t.req1_data_i);
  t.rsp_ready_i = rsp_ready_ ? rsp_ready_(cycle_) : 1;
  t.rsp1_ready_i = t.rsp_ready_i;
}

void HbmHarness::corrupt_pending(unsigned port) {
  std::deque<HbmRequest>& q = queue(port);
  if (!q.empty()) q.front().data[0] ^= 1;
}

void HbmHarness::check_errors() {
  if (impl_->m.take_error()) ++assert_failures_;
}

void HbmHarness::tick(uint64_t n) {
  auto& t = impl_->m.top();
  for (uint64_t i = 0; i < n; ++i) {
    apply_inputs();
    impl_->m.eval();
    // Handshakes of this cycle, sampled before the rising edge.
    const bool req_fire = t.req_valid_i && t.req_ready_o;
    const bool req1_fire = t.req1_valid_i && t.req1_ready_o;
    const bool rsp_fire = t.rsp_valid_o && t.rsp_ready_i;
    const bool rsp1_fire = t.rsp1_valid_o && t.rsp1_ready_i;
    HbmResponse rsp, rsp1;
    if (rsp_fire) rsp = read_port(t.rsp_write_o, t.rsp_tag_o, t.rsp_ue_o, t.rsp_data_o, cycle_);
    if (rsp1_fire)
      rsp1 = read_port(t.rsp1_write_o, t.rsp1_tag_o, t.rsp1_ue_o, t.rsp1_data_o, cycle_);
    mon_.cmd = static_cast<HbmCmd>(t.mon_cmd_o);
    mon_.bg = t.mon_bg_o;
    mon_.ba = t.mon_ba_o;
    mon_.row = t.mon_row_o;
    mon_.col = t.mon_col_o;
    mon_.rvalid = t.mon_rvalid_o;
    for (unsigned w = 0; w < 8; ++w)
      for (unsigned b = 0; b < 4; ++b)
        mon_.rdata[w * 4 + b] = static_cast<uint8_t>(t.mon_rdata_o[w] >> (8 * b));
    impl_->m.tick();
    check_errors();
    if (req_fire) {
      pending_.pop_front();
      ++accepted_;
      accept_cycles_.push_back(cycle_);
    }
    if (req1_fire) {
      pending1_.pop_front();
      ++accepted_;
    }
    for (const HbmResponse* r : {rsp_fire ? &rsp : nullptr, rsp1_fire ? &rsp1 : nullptr}) {
      if (r == nullptr) continue;
      ++rsp_count_;
      if (on_rsp_) on_rsp_(*r);
      if (keep_rsps_) rsps_.push_back(*r);
    }
    ++cycle_;
  }
}

bool HbmHarness::idle() {
  auto& t = impl_->m.top();
  impl_->m.eval();
  return pending_.empty() && pending1_.empty() && t.idle_o;
}

bool HbmHarness::drain(uint64_t max_cycles) {
  for (uint64_t i = 0; i < max_cycles; ++i) {
    if (idle()) return true;
    tick();
  }
  return idle();
}

uint64_t HbmHarness::stat(unsigned ch, HbmStat s) {
  auto& t = impl_->m.top();
  t.stat_ch_i = static_cast<uint8_t>(ch);
  t.stat_id_i = static_cast<uint8_t>(s);
  impl_->m.eval();
  return t.stat_o;
}

uint64_t HbmHarness::stat_total(HbmStat s) {
  uint64_t sum = 0;
  for (unsigned c = 0; c < kHbmChannels; ++c) sum += stat(c, s);
  return sum;
}

bool HbmHarness::ref_pending(unsigned ch) {
  impl_->m.eval();
  return (impl_->m.top().ref_pending_o >> ch) & 1u;
}

uint32_t HbmHarness::violations() { return impl_->m.top().viol_count_o; }
uint32_t HbmHarness::violation_mask() { return impl_->m.top().viol_mask_o; }
HbmRule HbmHarness::last_violation() { return static_cast<HbmRule>(impl_->m.top().viol_last_o); }

void HbmHarness::set_direct(bool on, unsigned ch) {
  auto& t = impl_->m.top();
  t.dev_direct_i = on;
  t.dbg_ch_i = static_cast<uint8_t>(ch);
  mon_ch_ = ch;
  t.dbg_cmd_i = 0;
  t.dbg_wvalid_i = 0;
}

void HbmHarness::direct_cycle(const HbmDirect& d) {
  auto& t = impl_->m.top();
  t.dbg_cmd_i = static_cast<uint8_t>(d.cmd);
  t.dbg_bg_i = static_cast<uint8_t>(d.bg);
  t.dbg_ba_i = static_cast<uint8_t>(d.ba);
  t.dbg_row_i = static_cast<uint16_t>(d.row);
  t.dbg_col_i = static_cast<uint8_t>(d.col);
  t.dbg_wvalid_i = d.wvalid;
  for (unsigned w = 0; w < 8; ++w) {
    uint32_t v = 0;
    for (unsigned b = 0; b < 4; ++b) v |= uint32_t{d.wdata[w * 4 + b]} << (8 * b);
    t.dbg_wdata_i[w] = v;
  }
  t.dbg_wcheck_flip_i = d.wcheck_flip;
  tick();
  t.dbg_wcheck_flip_i = 0;
  t.dbg_cmd_i = 0;
  t.dbg_wvalid_i = 0;
}

void HbmHarness::set_faults(uint64_t seed, double single_bit_rate, double double_bit_rate) {
  auto& t = impl_->m.top();
  t.fi_seed_i = seed;
  t.fi_sbe_thr_i = fault_rate_threshold(single_bit_rate);
  t.fi_dbe_thr_i = fault_rate_threshold(double_bit_rate);
}

void HbmHarness::reset() {
  impl_->m.reset(4);
  check_errors();
}

uint32_t HbmHarness::injected_single() const { return impl_->m.top().fi_sbe_o; }
uint32_t HbmHarness::injected_double() const { return impl_->m.top().fi_dbe_o; }

void HbmHarness::set_monitor_channel(unsigned ch) {
  mon_ch_ = ch;
  impl_->m.top().dbg_ch_i = static_cast<uint8_t>(ch);
}

}  // namespace tpu
