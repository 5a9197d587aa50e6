#include "pod_sc.h"

#include <cstring>
#include <string>

namespace tpu {

using sc_core::SC_NS;
using sc_core::sc_time;

// ---------------------------------------------------------------------------------------------
// ScChip: one chip, stepped at every rising edge; its host socket.
// ---------------------------------------------------------------------------------------------
ScChip::ScChip(sc_core::sc_module_name name, ScPod& pod, int id)
    : sc_module(name), clk("clk"), host("host"), pod_(pod), id_(id) {
  SC_HAS_PROCESS(ScChip);
  // With several threads the pod steps its chips together (ScPod::on_posedge); else each chip
  // is a process of its own.
  if (pod_.core_.threads() <= 1) {
    SC_METHOD(on_clock);
    sensitive << clk.pos();
    dont_initialize();
  }
  host.register_b_transport(this, &ScChip::b_transport);
  host.register_transport_dbg(this, &ScChip::transport_dbg);
}

void ScChip::on_clock() {
  if (pod_.err_) return;
  try {
    pod_.core_.step_chip(id_);
  } catch (...) {
    pod_.fail(std::current_exception());
  }
}

void ScChip::b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
  PodCore& core = pod_.core_;
  const uint64_t a = t.get_address();
  const std::size_t n = t.get_data_length();
  unsigned char* p = t.get_data_ptr();
  t.set_response_status(tlm::TLM_OK_RESPONSE);
  delay = sc_core::SC_ZERO_TIME;
  if (a == kTlmCmd && t.is_write()) {
    if (n % 16 != 0) {
      t.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
      return;
    }
    std::vector<ChipCmd> cmds(n / 16);
    for (std::size_t i = 0; i < cmds.size(); ++i) std::memcpy(cmds[i].w.data(), p + 16 * i, 16);
    core.agent(id_).push(cmds);
  } else if (a == kTlmStatus && t.is_read() && n == sizeof(TlmStatus)) {
    const ChipStatus c = core.status(id_);
    TlmStatus s;
    s.flags = (c.busy ? 1u : 0u) | (c.halted ? 2u : 0u) | (c.router_empty ? 4u : 0u) |
              (c.queue_empty ? 8u : 0u);
    s.err = c.err;
    s.err_cmd = c.err_cmd;
    s.cmds_waiting = static_cast<uint32_t>(c.cmds_waiting);
    std::memcpy(p, &s, sizeof s);
  } else if (a >= kTlmCounters && a % 8 == 0 && n % 8 == 0 && n > 0 &&
             a + n <= kTlmCounters + 8 * kNumChipStats && t.is_read()) {
    const ChipCounters c = core.counters(id_);
    std::memcpy(p, &c.v[(a - kTlmCounters) / 8], n);
  } else if (a >= kTlmLinks && a % 8 == 0 && n % 8 == 0 && n > 0 && a + n <= kTlmLinks + 48 &&
             t.is_read()) {
    for (std::size_t i = 0; i < n / 8; ++i) {
      const uint64_t f = core.link_flits(id_, static_cast<int>((a - kTlmLinks) / 8 + i));
      std::memcpy(p + 8 * i, &f, 8);
    }
  } else if (a >= kTlmLinkStats && a % 8 == 0 && n % 8 == 0 && n > 0 &&
             a + n <= kTlmLinkStats + 8 * 6 * kNumLinkStats && t.is_read()) {
    for (std::size_t i = 0; i < n / 8; ++i) {
      const uint64_t k = (a - kTlmLinkStats) / 8 + i;
      const uint64_t v = core.link_counter(id_, static_cast<int>(k / kNumLinkStats),
                                           static_cast<unsigned>(k % kNumLinkStats));
      std::memcpy(p + 8 * i, &v, 8);
    }
  } else if (a == kTlmControl && t.is_write() && n == 4) {
    uint32_t v = 0;
    std::memcpy(&v, p, 4);
    if (v & 1u) core.agent(id_).request_clear();
  } else if (a + n <= core.shape().hbm_bytes && a % 64 == 0 && n % 64 == 0) {
    // A copy through the host port: it takes simulated time, the other chips run meanwhile.
    const auto op = core.agent(id_).mem(t.is_write(), a, p, n);
    while (!op->finished()) {
      sc_core::wait(pod_.cycle_ev_);
      if (pod_.err_) {
        t.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
        return;
      }
    }
    if (t.is_read() && n) std::memcpy(p, op->data.data(), n);
  } else {
    t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
  }
}

// The backdoor: HBM only, no simulated time.
unsigned ScChip::transport_dbg(tlm::tlm_generic_payload& t) {
  const uint64_t a = t.get_address();
  const std::size_t n = t.get_data_length();
  if (a % 64 != 0 || n % 64 != 0 || a + n > pod_.core_.shape().hbm_bytes) {
    t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return 0;
  }
  pod_.core_.backdoor(id_, t.is_write(), a, t.get_data_ptr(), n);
  t.set_response_status(tlm::TLM_OK_RESPONSE);
  return static_cast<unsigned>(n);
}

// ---------------------------------------------------------------------------------------------
// ScHostLane
// ---------------------------------------------------------------------------------------------
ScHostLane::ScHostLane(sc_core::sc_module_name name, ScPod& pod, int chip)
    : sc_module(name), pod_(pod), chip_(chip) {
  SC_HAS_PROCESS(ScHostLane);
  SC_THREAD(serve);
}

void ScHostLane::add(const HostCopy& c) {
  queue_.push_back(c);
  work_.notify(sc_core::SC_ZERO_TIME);
}

void ScHostLane::serve() {
  while (true) {
    while (queue_.empty()) sc_core::wait(work_);
    const HostCopy c = queue_.front();
    try {
      pod_.transport(chip_, c.write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND,
                     kTlmHbmBase + c.addr, c.data, c.n);
    } catch (...) {
      pod_.fail(std::current_exception());
    }
    queue_.pop_front();
    done_.notify();  // the host sees it in the same cycle, as the C++ pod does
  }
}

// ---------------------------------------------------------------------------------------------
// ScPod
// ---------------------------------------------------------------------------------------------
ScPod::ScPod(sc_core::sc_module_name name, const PodParams& p)
    : sc_module(name), core_(p), clk_("clk", sc_time(1, SC_NS)) {
  SC_HAS_PROCESS(ScPod);
  for (int i = 0; i < core_.num_chips(); ++i) {
    const std::string nm = "chip" + std::to_string(i);
    chips_.push_back(std::make_unique<ScChip>(nm.c_str(), *this, i));
    chips_.back()->clk(clk_);
    const std::string sn = "host" + std::to_string(i);
    sockets_.push_back(std::make_unique<tlm_utils::simple_initiator_socket<ScPod>>(sn.c_str()));
    sockets_.back()->bind(chips_.back()->host);
    const std::string ln = "lane" + std::to_string(i);
    lanes_.push_back(std::make_unique<ScHostLane>(ln.c_str(), *this, i));
  }
  if (core_.threads() > 1) {
    SC_METHOD(on_posedge);
    sensitive << clk_.posedge_event();
    dont_initialize();
  }
  SC_METHOD(on_negedge);
  sensitive << clk_.negedge_event();
  dont_initialize();
  SC_THREAD(host_thread);
}

// Several threads (PodParams::threads): one process steps every chip at the rising edge on
// PodCore's worker threads (the same chips, the same order of effects: bits and cycles equal
// to one process per chip). The kernel runs this one process while the workers step.
void ScPod::on_posedge() {
  if (err_) return;
  try {
    core_.step_chips();
  } catch (...) {
    fail(std::current_exception());
  }
}

ScPod::~ScPod() = default;

void ScPod::fail(std::exception_ptr e) {
  if (!err_) err_ = e;
  idle_ev_.notify(sc_core::SC_ZERO_TIME);
  cycle_ev_.notify(sc_core::SC_ZERO_TIME);
}

// After every chip stepped at the rising edge: the cycle ends; wake whoever waits.
void ScPod::on_negedge() {
  if (err_) return;
  core_.end_cycle();
  try {
    if ((core_.cycle() & 1023) == 0) core_.check_errors(false);  // chip errors: the host's
    core_.watch();  // a HangError ends the job: every wait of the host is bounded by it
  } catch (...) {
    fail(std::current_exception());
    return;
  }
  cycle_ev_.notify(sc_core::SC_ZERO_TIME);
  if (core_.idle()) idle_ev_.notify(sc_core::SC_ZERO_TIME);
}

void ScPod::host_thread() {
  // The first job, too, starts at a cycle's end: at time 0 the first rising edge may already
  // have been evaluated, and a copy queued then would start a cycle late.
  sc_core::wait(cycle_ev_);
  while (true) {
    // The host acts only between a cycle's end (after on_negedge) and the next rising edge, so
    // what it pushes is seen by every chip at the same edge.
    while (!job_) sc_core::wait(cycle_ev_);
    try {
      job_(*this);
    } catch (...) {
      if (!err_) err_ = std::current_exception();
    }
    job_ = nullptr;
    sc_core::sc_pause();
  }
}

void ScPod::run(const std::function<void(HostPort&)>& job) {
  job_ = job;
  err_ = nullptr;
  sc_core::sc_start();
  if (err_) {
    std::exception_ptr e = err_;
    err_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ScPod::transport(int chip, tlm::tlm_command cmd, uint64_t addr, void* data, std::size_t n,
                      bool debug) {
  if (chip < 0 || chip >= core_.num_chips())
    throw std::invalid_argument("pod: no chip " + std::to_string(chip) + " (0.." +
                                std::to_string(core_.num_chips() - 1) + ")");
  tlm::tlm_generic_payload t;
  t.set_command(cmd);
  t.set_address(addr);
  t.set_data_ptr(static_cast<unsigned char*>(data));
  t.set_data_length(static_cast<unsigned>(n));
  t.set_streaming_width(static_cast<unsigned>(n));
  t.set_byte_enable_ptr(nullptr);
  t.set_dmi_allowed(false);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_time delay = sc_core::SC_ZERO_TIME;
  auto& socket = *sockets_[static_cast<std::size_t>(chip)];
  if (debug) socket->transport_dbg(t);
  else socket->b_transport(t, delay);
  if (err_) std::rethrow_exception(err_);
  if (t.is_response_error()) {
    char a[32];
    std::snprintf(a, sizeof a, "%llx", static_cast<unsigned long long>(addr));
    throw std::invalid_argument(chip_name(core_.params().topo, chip) + ": host socket: " +
                                t.get_response_string() + " for " +
                                (cmd == tlm::TLM_WRITE_COMMAND ? "a write" : "a read") + " of " +
                                std::to_string(n) + " bytes at 0x" + a +
                                " (HBM copies: 64-byte aligned address and length inside the "
                                "HBM)");
  }
}

uint64_t ScPod::copy(const std::vector<HostCopy>& ops) {
  for (const HostCopy& o : ops) core_.check_copy(o);
  const uint64_t start = core_.cycle();
  for (const HostCopy& o : ops) lanes_[static_cast<std::size_t>(o.chip)]->add(o);
  auto busy = [&] {
    for (const auto& l : lanes_)
      if (l->busy()) return true;
    return false;
  };
  uint64_t next_progress = start + progress_every;
  sc_core::sc_event_or_list any;
  for (const auto& l : lanes_) any |= l->done();
  while (busy()) {
    sc_core::wait(any);
    if (err_) std::rethrow_exception(err_);
    if (progress && core_.cycle() >= next_progress) {
      progress(core_.cycle() - start);
      next_progress += progress_every;
    }
  }
  return core_.cycle() - start;
}

void ScPod::backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) {
  transport(chip, tlm::TLM_WRITE_COMMAND, kTlmHbmBase + addr, const_cast<void*>(data), n, true);
  backdoor_bytes_ += n;
}

void ScPod::backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) {
  transport(chip, tlm::TLM_READ_COMMAND, kTlmHbmBase + addr, data, n, true);
  backdoor_bytes_ += n;
}

void ScPod::push(int chip, const std::vector<ChipCmd>& cmds) {
  if (cmds.empty()) return;
  std::vector<uint32_t> words;
  for (const ChipCmd& c : cmds) words.insert(words.end(), c.w.begin(), c.w.end());
  transport(chip, tlm::TLM_WRITE_COMMAND, kTlmCmd, words.data(), words.size() * 4);
}

ChipStatus ScPod::status(int chip) {
  TlmStatus s;
  transport(chip, tlm::TLM_READ_COMMAND, kTlmStatus, &s, sizeof s);
  ChipStatus c;
  c.busy = s.flags & 1u;
  c.halted = s.flags & 2u;
  c.router_empty = s.flags & 4u;
  c.queue_empty = s.flags & 8u;
  c.err = s.err;
  c.err_cmd = s.err_cmd;
  c.cmds_waiting = s.cmds_waiting;
  return c;
}

ChipCounters ScPod::counters(int chip) {
  ChipCounters c;
  transport(chip, tlm::TLM_READ_COMMAND, kTlmCounters, c.v, sizeof c.v);
  return c;
}

std::vector<LinkStat> ScPod::link_stats() {
  std::vector<LinkStat> v;
  std::vector<std::array<uint64_t, 6 * kNumLinkStats>> ctr(
      static_cast<std::size_t>(core_.num_chips()));
  for (int i = 0; i < core_.num_chips(); ++i) {
    uint64_t f[6];
    transport(i, tlm::TLM_READ_COMMAND, kTlmLinks, f, sizeof f);
    auto& c = ctr[static_cast<std::size_t>(i)];
    transport(i, tlm::TLM_READ_COMMAND, kTlmLinkStats, c.data(), sizeof(uint64_t) * c.size());
    for (int d = 0; d < 6; ++d)
      if (core_.has_link(i, d)) v.push_back(LinkStat{i, d, f[d]});
  }
  core_.fill_link_errors(v, [&](int c, int d, unsigned sel) {
    return ctr[static_cast<std::size_t>(c)][static_cast<std::size_t>(d) * kNumLinkStats + sel];
  });
  return v;
}

void ScPod::clear(int chip) {
  uint32_t v = 1;
  transport(chip, tlm::TLM_WRITE_COMMAND, kTlmControl, &v, 4);
  sc_core::wait(cycle_ev_);
}

RunStats ScPod::run_until_idle(uint64_t max_cycles, bool stop_on_error) {
  const uint64_t start = core_.cycle();
  uint64_t next_progress = start + progress_every;
  while (!core_.idle()) {
    const uint64_t wait_cycles = progress ? progress_every : std::min<uint64_t>(max_cycles + 1, 1024);
    sc_core::wait(sc_time(static_cast<double>(wait_cycles), SC_NS), idle_ev_);
    if (err_) std::rethrow_exception(err_);
    if (!core_.idle()) sc_core::wait(cycle_ev_);  // woken by the time-out: back to a cycle's end
    core_.check_errors(stop_on_error);
    const uint64_t t = core_.cycle();
    if (progress && t >= next_progress) {
      progress(t - start);
      next_progress = t + progress_every;
    }
    if (t - start > max_cycles && !core_.idle()) throw PodError(core_.describe_hang(max_cycles));
  }
  return core_.finish_run(start, stop_on_error);
}

}  // namespace tpu
