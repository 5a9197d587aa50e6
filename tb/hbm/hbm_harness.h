// HbmHarness: drives the verilated HBM subsystem (tpu_hbm_ctrl + the hbm_device model, top
// rtl/sim/hbm_subsys_tb_top.sv) cycle by cycle: queue host requests, collect responses under a
// chosen back-pressure, read the named statistics and the device checker's report, drive the
// device directly for checker tests, and optionally dump an FST.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hbm_config.h"

namespace tpu {

// Compile-time shape of the built model (CMake passes the same values to Verilator's -G).
#ifndef TPU_HBM_CHANNELS
#define TPU_HBM_CHANNELS 4
#endif
#ifndef TPU_HBM_ROWS_PER_BANK
#define TPU_HBM_ROWS_PER_BANK 64
#endif
constexpr unsigned kHbmChannels = TPU_HBM_CHANNELS;
constexpr unsigned kHbmRowsPerBank = TPU_HBM_ROWS_PER_BANK;
constexpr unsigned kHbmBankGroups = 4;
constexpr unsigned kHbmBanksPerGroup = 4;
constexpr unsigned kHbmColumns = 32;           // 64-byte bursts per 2 KiB row
constexpr unsigned kHbmBurstBytes = 64;        // one access
constexpr unsigned kHbmBusBytesPerCycle = 32;  // 128-bit DDR channel
constexpr uint64_t kHbmCapacity = uint64_t{kHbmChannels} * kHbmBankGroups * kHbmBanksPerGroup *
                                  kHbmRowsPerBank * kHbmColumns * kHbmBurstBytes;

using HbmBlock = std::array<uint8_t, kHbmBurstBytes>;

struct HbmRequest {
  bool write = false;
  uint32_t addr = 0;  // byte address, 64-byte aligned, below kHbmCapacity
  uint8_t tag = 0;
  HbmBlock data{};  // write data
};

struct HbmResponse {
  bool write = false;  // write acknowledge (data zero) or read data
  uint8_t tag = 0;
  HbmBlock data{};
  uint64_t cycle = 0;  // cycle of the response handshake
  uint8_t ue = 0;      // read data: words (bit i: bytes 8i..8i+7) with an uncorrectable ECC error
};

// Statistics of every channel: tpu_hbm_pkg::hbm_stat_e, same order.
enum class HbmStat : uint8_t {
  kRdReqs,
  kWrReqs,
  kRdBytes,
  kWrBytes,
  kRowHits,
  kRowMisses,
  kRowConflicts,
  kActs,
  kPres,
  kRefreshes,
  kBusBusy,
  kRdForwarded,
  kWrMerged,
  kLatSum,
  kLatCount,
  kLatHist0,
  kLatHist1,
  kLatHist2,
  kLatHist3,
  kLatHist4,
  kLatHist5,
  kLatHist6,
  kLatHist7,
  kWrDrains,
  kEccCorrected,      // words read with a single-bit error that ECC corrected
  kEccUncorrectable,  // words read with an uncorrectable ECC error
};
constexpr unsigned kHbmNumStats = 26;
constexpr unsigned kHbmLatBuckets = 8;
// Name of a statistic ("rd_bytes", ...) and the lower bound of each latency bucket in cycles.
const char* hbm_stat_name(HbmStat s);
extern const std::array<uint32_t, kHbmLatBuckets> kHbmLatBucketLo;

// Rules of the device checker: tpu_hbm_pkg::hbm_rule_e, same values (the violation mask bit).
enum class HbmRule : uint8_t {
  kNone,
  kTRCD,
  kTRP,
  kTRAS,
  kTRC,
  kTCCDS,
  kTCCDL,
  kTRRDS,
  kTRRDL,
  kTFAW,
  kTWR,
  kTWTRS,
  kTWTRL,
  kTRTP,
  kTRFC,
  kTREFI,
  kCL,
  kCWL,
  kBL,
  kTRTW,
  kRdClosed,
  kWrClosed,
  kActOpen,
  kRefOpen,
  kRowRange,
  kWrEcc,  // write data whose SECDED check bits do not match it
};
// The name the checker's messages use for a rule ("tRCD", "ACT-to-open-bank", ...).
const char* hbm_rule_name(HbmRule r);

// Device commands: tpu_hbm_pkg::hbm_cmd_e.
enum class HbmCmd : uint8_t { kNop = 0, kAct = 1, kPre = 2, kRd = 3, kWr = 4, kRef = 5, kPrea = 6 };

// Where a 64-byte block lives in the device.
struct HbmLoc {
  unsigned ch = 0, bg = 0, ba = 0, row = 0, col = 0;
  bool operator==(const HbmLoc& o) const {
    return ch == o.ch && bg == o.bg && ba == o.ba && row == o.row && col == o.col;
  }
};
// C++ mirror of tpu_hbm_pkg::hbm_decode for the built shape, and its inverse.
HbmLoc hbm_decode(uint32_t addr, HbmAddrMap map);
uint32_t hbm_encode(const HbmLoc& loc, HbmAddrMap map);

// One cycle of direct drive of a channel's device buses (checker tests).
struct HbmDirect {
  HbmCmd cmd = HbmCmd::kNop;
  unsigned bg = 0, ba = 0, row = 0, col = 0;
  bool wvalid = false;
  std::array<uint8_t, 32> wdata{};  // one bus cycle: two 128-bit beats
  uint32_t wcheck_flip = 0;  // XORed into the check bits the top computes for wdata (4 x 8)
};

// What the monitor saw on channel `monitor_channel()`'s buses in the last cycle.
struct HbmMonitor {
  HbmCmd cmd = HbmCmd::kNop;
  unsigned bg = 0, ba = 0, row = 0, col = 0;
  bool rvalid = false;
  std::array<uint8_t, 32> rdata{};
};

class HbmHarness {
 public:
  // Builds the model with `cfg` on its timing/config inputs and resets it. With a non-empty
  // `waves_path` every cycle is dumped there as FST.
  explicit HbmHarness(const HbmConfig& cfg = HbmConfig(), const std::string& waves_path = "");
  ~HbmHarness();
  HbmHarness(const HbmHarness&) = delete;
  HbmHarness& operator=(const HbmHarness&) = delete;

  const HbmConfig& config() const { return cfg_; }
  uint64_t cycle() const { return cycle_; }

  // ---- host side ----
  // Queues a request on request port `port` (0 or 1: the controller has two, as in the chip);
  // each port offers its requests in order, one per cycle, each held until accepted. Requests of
  // the two ports are not ordered with each other. Responses come back on either response port;
  // responses() lists them as they are taken, port 0's first within a cycle.
  void push(const HbmRequest& r, unsigned port = 0) { queue(port).push_back(r); }
  size_t pending() const { return pending_.size() + pending1_.size(); }
  size_t pending_on(unsigned port) const { return (port == 0 ? pending_ : pending1_).size(); }
  // Changes the payload of port `port`'s first queued request (one data bit) while it may be
  // waiting for ready: a protocol error the controller's assertions must catch.
  void corrupt_pending(unsigned port);
  uint64_t accepted() const { return accepted_; }
  // Cycle at which each port-0 request was accepted, in push order (cleared by
  // clear_accept_log()).
  const std::vector<uint64_t>& accept_cycles() const { return accept_cycles_; }
  void clear_accept_log() { accept_cycles_.clear(); }
  // Response ready as a function of the cycle (default: always ready).
  void set_rsp_ready(std::function<bool(uint64_t)> f) { rsp_ready_ = std::move(f); }
  // Called for every response handshake, as it happens (in addition to responses()).
  void on_response(std::function<void(const HbmResponse&)> f) { on_rsp_ = std::move(f); }
  std::vector<HbmResponse>& responses() { return rsps_; }
  // Keep responses in responses() (default true); a long benchmark turns it off.
  void keep_responses(bool k) { keep_rsps_ = k; }
  uint64_t response_count() const { return rsp_count_; }

  void tick(uint64_t n = 1);
  // Ticks until every request is accepted and answered and the controller is idle; false if
  // that takes more than `max_cycles`.
  bool drain(uint64_t max_cycles);
  bool idle();

  // ---- statistics ----
  uint64_t stat(unsigned ch, HbmStat s);
  uint64_t stat_total(HbmStat s);
  bool ref_pending(unsigned ch);

  // ---- HBM fault injection (rtl/sim/hbm_device.sv): random bit flips per word read ----
  // Probabilities per 64-bit word read of one / two flipped bits (of its 72), drawn from a
  // generator seeded with `seed`; applied at the next reset (reset() after this), which also
  // empties the device.
  void set_faults(uint64_t seed, double single_bit_rate, double double_bit_rate);
  void reset();
  uint32_t injected_single() const;  // words read with one bit flipped so far
  uint32_t injected_double() const;  // words read with two or more flipped

  // ---- device checker ----
  uint32_t violations();      // rule violations counted by the device
  uint32_t violation_mask();  // bit r set when rule r (HbmRule) was broken
  HbmRule last_violation();
  // Assertion failures ($error from any SVA/immediate assertion) seen so far.
  uint64_t assertion_failures() const { return assert_failures_; }

  // ---- direct drive and monitor ----
  // Direct mode: the harness, not the controller, drives channel `ch`'s device buses.
  void set_direct(bool on, unsigned ch = 0);
  // Drives one cycle of `d` on the directly driven channel, then ticks.
  void direct_cycle(const HbmDirect& d);
  void set_monitor_channel(unsigned ch);
  unsigned monitor_channel() const { return mon_ch_; }
  // Buses of the monitored channel during the last cycle.
  const HbmMonitor& monitor() const { return mon_; }

 private:
  struct Impl;
  void apply_inputs();
  void check_errors();

  HbmConfig cfg_;
  std::unique_ptr<Impl> impl_;
  uint64_t cycle_ = 0;
  std::deque<HbmRequest>& queue(unsigned port) { return port == 0 ? pending_ : pending1_; }
  std::deque<HbmRequest> pending_, pending1_;
  uint64_t accepted_ = 0;
  std::vector<uint64_t> accept_cycles_;
  std::function<bool(uint64_t)> rsp_ready_;
  std::function<void(const HbmResponse&)> on_rsp_;
  std::vector<HbmResponse> rsps_;
  bool keep_rsps_ = true;
  uint64_t rsp_count_ = 0;
  uint64_t assert_failures_ = 0;
  unsigned mon_ch_ = 0;
  HbmMonitor mon_;
};

}  // namespace tpu
