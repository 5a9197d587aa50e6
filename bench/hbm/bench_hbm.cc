// bench_hbm: throughput and latency of the HBM controller + device model, as JSON on stdout (a
// short human summary on stderr).
//
//   bench_hbm [--config FILE.yaml] [--cycles N] [--waves FILE.fst]
//
// Workloads (each on a fresh model, measured after a 2000-cycle warm-up over N cycles rounded to
// a whole number of refresh intervals, default 10 x tREFI, so refresh costs its average share):
//   sequential_read   64-byte reads of consecutive addresses: bandwidth vs the peak of every
//                     channel's data bus (32 bytes/cycle/channel), target >= 0.92; for every map
//   sequential_write  the same with writes
//   random_read       reads of uniformly random blocks: requests/cycle/channel vs the bound set by
//                     tFAW (four ACTs per tFAW) less the time refresh takes (tRFC per tREFI);
//                     the few row hits need no ACT, so ACTs/cycle/channel is also given
//   latency           one read at a time: row hit, closed row, row conflict (cycles, handshake to
//                     handshake)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hbm_config.h"
#include "hbm_harness.h"

namespace tpu {
namespace {

struct Options {
  std::string config;
  std::string waves;
  uint64_t cycles = 0;  // 0: ten refresh intervals
};

struct Result {
  uint64_t cycles = 0;
  uint64_t responses = 0;
  uint64_t violations = 0;
  uint64_t assert_failures = 0;
  std::vector<std::pair<std::string, uint64_t>> stats;
};

constexpr uint64_t kWarmup = 2000;

// Feeds requests from `next` as fast as the controller takes them; counts the responses that
// arrive during the measured window.
template <typename Next>
Result run_stream(const HbmConfig& cfg, uint64_t cycles, const std::string& waves, Next next) {
  HbmHarness h(cfg, waves);
  h.keep_responses(false);
  uint8_t tag = 0;
  auto feed = [&] {
    while (h.pending() < 4) {
      HbmRequest r = next();
      r.tag = tag++;
      h.push(r);
    }
  };
  for (uint64_t i = 0; i < kWarmup; ++i) {
    feed();
    h.tick();
  }
  // Statistics are reported for the measured window only (after minus before).
  auto snapshot = [&] {
    std::vector<std::pair<std::string, uint64_t>> v;
    for (unsigned s = 0; s < kHbmNumStats; ++s) {
      v.push_back({hbm_stat_name(static_cast<HbmStat>(s)), h.stat_total(static_cast<HbmStat>(s))});
    }
    for (unsigned c = 0; c < kHbmChannels; ++c) {
      v.push_back({"ch" + std::to_string(c) + "_bus_busy_cycles", h.stat(c, HbmStat::kBusBusy)});
    }
    return v;
  };
  const auto before = snapshot();
  const uint64_t r0 = h.response_count();
  for (uint64_t i = 0; i < cycles; ++i) {
    feed();
    h.tick();
  }
  Result res;
  res.cycles = cycles;
  res.responses = h.response_count() - r0;
  res.violations = h.violations();
  res.assert_failures = h.assertion_failures();
  res.stats = snapshot();
  for (size_t i = 0; i < res.stats.size(); ++i) res.stats[i].second -= before[i].second;
  return res;
}

Result sequential(const HbmConfig& cfg, uint64_t cycles, bool write, const std::string& waves) {
  uint32_t addr = 0;
  return run_stream(cfg, cycles, waves, [&] {
    HbmRequest r;
    r.write = write;
    r.addr = addr;
    for (unsigned i = 0; i < kHbmBurstBytes; ++i) r.data[i] = static_cast<uint8_t>(addr + i);
    addr = static_cast<uint32_t>((addr + kHbmBurstBytes) % kHbmCapacity);
    return r;
  });
}

Result random_reads(const HbmConfig& cfg, uint64_t cycles) {
  std::mt19937_64 rng(1);
  return run_stream(cfg, cycles, "", [&] {
    HbmRequest r;
    r.addr = static_cast<uint32_t>(rng() % (kHbmCapacity / kHbmBurstBytes)) * kHbmBurstBytes;
    return r;
  });
}

// One read, alone: cycles from the request handshake to the response handshake.
uint64_t lone_read(HbmHarness& h, uint32_t addr) {
  HbmRequest r;
  r.addr = addr;
  h.push(r);
  h.clear_accept_log();
  const size_t before = h.responses().size();
  for (int i = 0; i < 1000 && h.responses().size() == before; ++i) h.tick();
  const uint64_t lat = h.responses().back().cycle - h.accept_cycles().front();
  h.tick(100);
  return lat;
}

double peak_bytes_per_cycle() { return double{kHbmBusBytesPerCycle} * kHbmChannels; }

std::string json_stats(const Result& r) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < r.stats.size(); ++i)
    os << (i ? ", " : "") << "\"" << r.stats[i].first << "\": " << r.stats[i].second;
  os << "}";
  return os.str();
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--config FILE.yaml] [--cycles N] [--waves FILE.fst]\n", argv0);
  return 2;
}

int run(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      opt.config = argv[++i];
    } else if (a == "--cycles" && i + 1 < argc) {
      opt.cycles = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--waves" && i + 1 < argc) {
      opt.waves = argv[++i];
    } else {
      return usage(argv[0]);
    }
  }
  HbmConfig cfg;
  if (!opt.config.empty()) cfg = load_hbm_config(opt.config);
  const HbmTiming& t = cfg.timing;
  if (opt.cycles == 0) opt.cycles = 10ull * t.refi;
  opt.cycles = std::max<uint64_t>(1, (opt.cycles + t.refi / 2) / t.refi) * t.refi;
  const double peak = peak_bytes_per_cycle();

  // Sequential reads on the configured map (dumped with --waves), then on every map.
  const Result seq = sequential(cfg, opt.cycles, false, opt.waves);
  const double seq_frac = double(seq.responses) * kHbmBurstBytes / (double(seq.cycles) * peak);
  std::vector<std::pair<HbmAddrMap, double>> by_map;
  for (HbmAddrMap m : hbm_all_maps()) {
    HbmConfig c = cfg;
    c.ctrl.addr_map = m;
    const Result r = (m == cfg.ctrl.addr_map) ? seq : sequential(c, opt.cycles, false, "");
    by_map.push_back({m, double(r.responses) * kHbmBurstBytes / (double(r.cycles) * peak)});
  }
  const Result seqw = sequential(cfg, opt.cycles, true, "");
  const double seqw_frac = double(seqw.responses) * kHbmBurstBytes / (double(seqw.cycles) * peak);

  // Random reads vs the activate-rate bound.
  const Result rnd = random_reads(cfg, opt.cycles);
  const double rnd_rate = double(rnd.responses) / double(rnd.cycles) / kHbmChannels;
  const double bound = 4.0 / t.faw * (1.0 - double(t.rfc) / t.refi);
  uint64_t rnd_acts = 0;
  for (const auto& kv : rnd.stats)
    if (kv.first == "acts") rnd_acts = kv.second;
  const double act_rate = double(rnd_acts) / double(rnd.cycles) / kHbmChannels;

  // Unloaded latencies on channel 1, bank group 2, bank 3.
  HbmHarness lh(cfg);
  const HbmAddrMap m = cfg.ctrl.addr_map;
  const uint64_t lat_closed = lone_read(lh, hbm_encode({1, 2, 3, 5, 0}, m));
  const uint64_t lat_hit = lone_read(lh, hbm_encode({1, 2, 3, 5, 9}, m));
  const uint64_t lat_conflict = lone_read(lh, hbm_encode({1, 2, 3, 6, 0}, m));

  const uint64_t viol = seq.violations + seqw.violations + rnd.violations + lh.violations();
  const uint64_t fails =
      seq.assert_failures + seqw.assert_failures + rnd.assert_failures + lh.assertion_failures();

  std::printf("{\n");
  std::printf("  \"bench\": \"hbm\",\n");
  std::printf("  \"config\": \"%s\",\n", cfg.source.c_str());
  std::printf("  \"channels\": %u,\n  \"tck_ns\": %g,\n", kHbmChannels, cfg.tck_ns);
  std::printf("  \"address_map\": \"%s\",\n", hbm_map_name(cfg.ctrl.addr_map));
  std::printf("  \"cycles\": %llu,\n", static_cast<unsigned long long>(opt.cycles));
  std::printf("  \"peak_bytes_per_cycle\": %g,\n", peak);
  std::printf("  \"peak_gb_per_s\": %.2f,\n", peak / cfg.tck_ns);
  std::printf(
      "  \"sequential_read\": {\"bytes\": %llu, \"bytes_per_cycle\": %.3f, "
      "\"gb_per_s\": %.2f, \"fraction_of_peak\": %.4f, \"target\": 0.92, "
      "\"meets_target\": %s},\n",
      static_cast<unsigned long long>(seq.responses * kHbmBurstBytes), seq_frac * peak,
      seq_frac * peak / cfg.tck_ns, seq_frac, seq_frac >= 0.92 ? "true" : "false");
  std::printf("  \"sequential_read_fraction_by_map\": {");
  for (size_t i = 0; i < by_map.size(); ++i)
    std::printf("%s\"%s\": %.4f", i ? ", " : "", hbm_map_name(by_map[i].first), by_map[i].second);
  std::printf("},\n");
  std::printf("  \"sequential_write\": {\"bytes\": %llu, \"fraction_of_peak\": %.4f},\n",
              static_cast<unsigned long long>(seqw.responses * kHbmBurstBytes), seqw_frac);
  std::printf(
      "  \"random_read\": {\"requests\": %llu, \"req_per_cycle_per_channel\": %.4f, "
      "\"bound_req_per_cycle_per_channel\": %.4f, \"fraction_of_bound\": %.4f, "
      "\"acts_per_cycle_per_channel\": %.4f, \"act_fraction_of_bound\": %.4f},\n",
      static_cast<unsigned long long>(rnd.responses), rnd_rate, bound, rnd_rate / bound, act_rate,
      act_rate / bound);
  std::printf(
      "  \"latency_cycles\": {\"row_hit\": %llu, \"row_closed\": %llu, "
      "\"row_conflict\": %llu},\n",
      static_cast<unsigned long long>(lat_hit), static_cast<unsigned long long>(lat_closed),
      static_cast<unsigned long long>(lat_conflict));
  std::printf("  \"sequential_read_stats\": %s,\n", json_stats(seq).c_str());
  std::printf("  \"random_read_stats\": %s,\n", json_stats(rnd).c_str());
  std::printf("  \"checker_violations\": %llu,\n", static_cast<unsigned long long>(viol));
  std::printf("  \"assertion_failures\": %llu\n", static_cast<unsigned long long>(fails));
  std::printf("}\n");

  std::fprintf(stderr,
               "hbm: sequential read %.1f%% of peak (%.1f GB/s), write %.1f%%; random read "
               "%.4f req/cycle/channel = %.1f%% of the tFAW+refresh bound %.4f; latency hit %llu, "
               "closed %llu, conflict %llu cycles; %llu violations\n",
               100 * seq_frac, seq_frac * peak / cfg.tck_ns, 100 * seqw_frac, rnd_rate,
               100 * rnd_rate / bound, bound, static_cast<unsigned long long>(lat_hit),
               static_cast<unsigned long long>(lat_closed),
               static_cast<unsigned long long>(lat_conflict),
               static_cast<unsigned long long>(viol + fails));
  return (viol + fails) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tpu

int main(int argc, char** argv) {
  try {
    return tpu::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hbm: %s\n", e.what());
    return 1;
  }
}
