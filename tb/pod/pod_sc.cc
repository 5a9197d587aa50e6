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
  SC_METHOD(on_clock);
  sensitive << clk.pos();
  dont_initialize();
  host.register_b_transport(this, &ScChip::b_transport);
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
    ChipDut& d = core.chip(id_);
    TlmStatus s;
    s.flags = (d.busy() ? 1u : 0u) | (d.halted() ? 2u : 0u) | (d.ici_idle() ? 4u : 0u) |
              (core.agent(id_).idle() ? 8u : 0u);
    s.err = d.err();
    s.err_cmd = d.err_cmd();
    s.cmds_waiting = static_cast<uint32_t>(core.agent(id_).commands_waiting());
    std::memcpy(p, &s, sizeof s);
  } else if (a >= kTlmCounters && a < kTlmCounters + 8 * kNumChipStats && a % 8 == 0 &&
             t.is_read() && n == 8) {
    const ChipCounters c = core.counters(id_);
    std::memcpy(p, &c.v[(a - kTlmCounters) / 8], 8);
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
  }
  SC_METHOD(on_negedge);
  sensitive << clk_.negedge_event();
  dont_initialize();
  SC_THREAD(host_thread);
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
    if ((core_.cycle() & 1023) == 0) core_.check_errors();
  } catch (...) {
    fail(std::current_exception());
    return;
  }
  cycle_ev_.notify(sc_core::SC_ZERO_TIME);
  if (core_.idle()) idle_ev_.notify(sc_core::SC_ZERO_TIME);
}

void ScPod::host_thread() {
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

void ScPod::run(const std::function<void(PodHost&)>& job) {
  job_ = job;
  err_ = nullptr;
  sc_core::sc_start();
  if (err_) {
    std::exception_ptr e = err_;
    err_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ScPod::transport(int chip, tlm::tlm_command cmd, uint64_t addr, void* data, std::size_t n) {
  if (chip < 0 || chip >= core_.num_chips())
    throw std::invalid_argument("pod: no chip " + std::to_string(chip));
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
  (*sockets_[static_cast<std::size_t>(chip)])->b_transport(t, delay);
  if (err_) std::rethrow_exception(err_);
  if (t.is_response_error())
    throw std::invalid_argument(chip_name(core_.params().topo, chip) + ": host socket: " +
                                t.get_response_string() + " for " +
                                (cmd == tlm::TLM_WRITE_COMMAND ? "a write" : "a read") + " of " +
                                std::to_string(n) + " bytes at 0x" +
                                [&] {
                                  char b[32];
                                  std::snprintf(b, sizeof b, "%llx",
                                                static_cast<unsigned long long>(addr));
                                  return std::string(b);
                                }() +
                                " (HBM copies: 64-byte aligned address and length)");
}

void ScPod::write(int chip, uint64_t addr, const void* data, std::size_t n) {
  transport(chip, tlm::TLM_WRITE_COMMAND, kTlmHbmBase + addr, const_cast<void*>(data), n);
}

void ScPod::read(int chip, uint64_t addr, void* data, std::size_t n) {
  transport(chip, tlm::TLM_READ_COMMAND, kTlmHbmBase + addr, data, n);
}

void ScPod::push(int chip, const std::vector<ChipCmd>& cmds) {
  if (cmds.empty()) return;
  std::vector<uint32_t> words;
  for (const ChipCmd& c : cmds) words.insert(words.end(), c.w.begin(), c.w.end());
  transport(chip, tlm::TLM_WRITE_COMMAND, kTlmCmd, words.data(), words.size() * 4);
}

TlmStatus ScPod::status(int chip) {
  TlmStatus s;
  transport(chip, tlm::TLM_READ_COMMAND, kTlmStatus, &s, sizeof s);
  return s;
}

uint64_t ScPod::run_until_idle(uint64_t max_cycles) {
  const uint64_t start = core_.cycle();
  uint64_t next_progress = start + progress_every;
  while (!core_.idle()) {
    const uint64_t wait_cycles = progress ? progress_every : max_cycles + 1;
    sc_core::wait(sc_time(static_cast<double>(wait_cycles), SC_NS), idle_ev_);
    if (err_) std::rethrow_exception(err_);
    if (!core_.idle()) sc_core::wait(cycle_ev_);  // woken by the time-out: back to a cycle's end
    const uint64_t t = core_.cycle();
    if (progress && t >= next_progress) {
      progress(t - start);
      next_progress = t + progress_every;
    }
    if (t - start > max_cycles && !core_.idle()) {
      std::string what = "pod did not become idle in " + std::to_string(max_cycles) + " cycles:";
      for (int i = 0; i < core_.num_chips(); ++i) what += "\n  " + core_.describe_chip(i);
      throw PodError(what);
    }
  }
  core_.check_errors();
  return core_.cycle() - start;
}

}  // namespace tpu
