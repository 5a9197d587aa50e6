// Test helpers for the HBM controller: a traffic driver that keeps a reference memory and checks
// every response against it (data of reads, tags of write acks), one outstanding request per tag.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "hbm_harness.h"

namespace tpu {

class HbmRefDriver {
 public:
  explicit HbmRefDriver(HbmHarness& h) : h_(h) {
    for (int t = 255; t >= 0; --t) free_tags_.push_back(static_cast<uint8_t>(t));
    h_.keep_responses(false);
    h_.on_response([this](const HbmResponse& r) { check(r); });
  }
  ~HbmRefDriver() { h_.on_response(nullptr); }

  // Queues a request on `port` if a tag is free; a read's expected data is the reference memory
  // now, i.e. the last write queued before it (so a test keeps each address on one port: the two
  // ports are not ordered with each other). Returns false when every tag is in use.
  bool issue(bool write, uint32_t addr, std::mt19937_64& rng, unsigned port = 0) {
    if (free_tags_.empty()) return false;
    HbmRequest r;
    r.write = write;
    r.addr = addr;
    r.tag = free_tags_.back();
    free_tags_.pop_back();
    Out o;
    o.write = write;
    o.addr = addr;
    o.issue_cycle = h_.cycle();
    if (write) {
      for (auto& b : r.data) b = static_cast<uint8_t>(rng());
      ref_[addr] = r.data;
    } else {
      auto it = ref_.find(addr);
      if (it != ref_.end()) o.expect = it->second;
    }
    out_[r.tag] = o;
    busy_[r.tag] = true;
    h_.push(r, port);
    ++issued_;
    return true;
  }

  uint64_t issued() const { return issued_; }
  uint64_t completed() const { return completed_; }
  uint64_t reads_checked() const { return reads_checked_; }
  uint64_t errors() const { return errors_; }
  size_t outstanding() const { return 256 - free_tags_.size(); }
  // Cycles from queueing to the response of every completed read (includes host-side waits).
  const std::vector<uint64_t>& read_latencies() const { return read_lat_; }

 private:
  struct Out {
    bool write = false;
    uint32_t addr = 0;
    HbmBlock expect{};
    uint64_t issue_cycle = 0;
  };

  void check(const HbmResponse& r) {
    if (!busy_[r.tag]) {
      ++errors_;
      ADD_FAILURE() << "response with tag " << int{r.tag} << " that has no request in flight";
      return;
    }
    const Out& o = out_[r.tag];
    if (r.write != o.write) {
      ++errors_;
      ADD_FAILURE() << "tag " << int{r.tag} << ": response kind " << r.write << " for a "
                    << (o.write ? "write" : "read");
    } else if (!o.write) {
      ++reads_checked_;
      read_lat_.push_back(r.cycle - o.issue_cycle);
      if (r.data != o.expect) {
        ++errors_;
        if (errors_ < 5) {
          ADD_FAILURE() << "read of 0x" << std::hex << o.addr << " (tag " << std::dec << int{r.tag}
                        << ") returned data other than the last write, cycle " << r.cycle;
        }
      }
    }
    busy_[r.tag] = false;
    free_tags_.push_back(r.tag);
    ++completed_;
  }

  HbmHarness& h_;
  std::vector<uint8_t> free_tags_;
  std::array<Out, 256> out_{};
  std::array<bool, 256> busy_{};
  std::map<uint32_t, HbmBlock> ref_;
  std::vector<uint64_t> read_lat_;
  uint64_t issued_ = 0, completed_ = 0, reads_checked_ = 0, errors_ = 0;
};

// Expects a clean run: no rule broken on the device, no assertion failed anywhere.
inline void expect_clean(HbmHarness& h) {
  EXPECT_EQ(h.violations(), 0u) << "device checker: rule mask 0x" << std::hex << h.violation_mask()
                                << ", last " << hbm_rule_name(h.last_violation());
  EXPECT_EQ(h.assertion_failures(), 0u) << "assertion failures (see the log above)";
}

}  // namespace tpu
