// Traffic for the ICI network harness: a scoreboard that checks every delivered packet (right
// node, exactly once, in order per source/destination pair, payload intact) and measures
// latency, synthetic traffic patterns, and a runner with a no-progress watchdog.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ici_net.h"

namespace tpu {

// Checks deliveries against what was sent. Packets are numbered per (src, dst) pair in `addr`
// and their payload is a hash of (src, dst, number, flit), so nothing else needs storing.
class IciScoreboard {
 public:
  explicit IciScoreboard(IciNet& net);
  ~IciScoreboard();
  IciScoreboard(const IciScoreboard&) = delete;
  IciScoreboard& operator=(const IciScoreboard&) = delete;

  // Queues a checked packet of `flits` flits (1..256) from src to dst.
  void send(unsigned src, unsigned dst, unsigned flits, IciType type = IciType::kWrite);

  uint64_t sent() const { return sent_; }
  uint64_t checked() const { return checked_; }
  uint64_t outstanding() const { return sent_ - checked_; }
  const std::vector<std::string>& errors() const { return errors_; }
  // Deliveries per (src, dst) pair.
  uint64_t delivered(unsigned src, unsigned dst) const;

  // Latency of the packets created in [from, to): tail delivery minus creation (in the source
  // queue), and tail delivery minus head injection (in the network).
  void set_window(uint64_t from, uint64_t to) {
    win_from_ = from;
    win_to_ = to;
  }
  uint64_t window_packets() const { return lat_n_; }
  double avg_latency() const { return lat_n_ ? double(lat_sum_) / double(lat_n_) : 0.0; }
  double avg_net_latency() const { return lat_n_ ? double(net_sum_) / double(lat_n_) : 0.0; }
  uint64_t max_latency() const { return lat_max_; }

  static uint64_t payload_word(unsigned src, unsigned dst, uint32_t seq, unsigned i);

 private:
  void check(const IciPacket& p);
  void error(const std::string& e);

  IciNet& net_;
  std::map<std::pair<unsigned, unsigned>, std::vector<uint8_t>> lens_;  // sent lengths - 1
  std::map<std::pair<unsigned, unsigned>, uint32_t> next_;              // next expected number
  std::vector<std::string> errors_;
  uint64_t sent_ = 0;
  uint64_t checked_ = 0;
  uint64_t win_from_ = 0;
  uint64_t win_to_ = ~uint64_t{0};
  uint64_t lat_n_ = 0;
  uint64_t lat_sum_ = 0;
  uint64_t net_sum_ = 0;
  uint64_t lat_max_ = 0;
};

enum class IciPattern {
  kUniform,    // any other node, uniformly
  kTranspose,  // (x, y, z) -> (y, x, z) on a square 2D, (y, z, x) in 3D, k-1-x on a ring
  kNeighbor,   // x + 1 (mod kx)
  kTornado,    // every dimension c -> c + ceil(k/2) - 1 (mod k)
  kHalf,       // every dimension c -> c + k/2 (mod k): on even rings all go one way (ties)
};
enum class IciLength { kOne, kFour, kMixed };  // mixed: 1 or 4 flits, half each
const char* ici_pattern_name(IciPattern p);
const char* ici_length_name(IciLength l);

// Destination of a pattern from `src` (random draws for kUniform).
unsigned ici_pattern_dst(const IciTopology& t, IciPattern p, unsigned src, std::mt19937_64& rng);

struct IciTrafficConfig {
  IciPattern pattern = IciPattern::kUniform;
  IciLength length = IciLength::kOne;
  double rate = 0.1;         // offered flits per node per cycle (Bernoulli packet arrivals)
  uint64_t seed = 1;
  unsigned queue_cap = 64;   // a source with this many packets waiting skips its arrivals
};

struct IciRunStats {
  uint64_t cycles = 0;       // of the measured window
  double offered = 0;        // flits/node/cycle created in the window
  double accepted = 0;       // flits/node/cycle ejected in the window
  double avg_latency = 0;    // cycles, packets created in the window
  double avg_net_latency = 0;
  uint64_t max_latency = 0;
  uint64_t packets = 0;
  bool completed = false;    // everything delivered and the network empty at the end
  std::string error;         // why not: the watchdog's message
};

// Offers `cfg` traffic for warmup + measure cycles (stats over the measure window), then
// drains for up to drain_max cycles. If no flit enters or leaves the network for `watchdog`
// cycles while packets are in flight, the run stops with a deadlock message.
IciRunStats ici_run(IciNet& net, IciScoreboard& sb, const IciTrafficConfig& cfg, uint64_t warmup,
                    uint64_t measure, uint64_t drain_max, uint64_t watchdog = 2000);

}  // namespace tpu
