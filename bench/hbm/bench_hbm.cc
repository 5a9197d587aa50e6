// bench_hbm: throughput and latency of the HBM controller + device model, as a JSON array on stdout
// holding one report (sw/common/report.h), its summary on stderr.
//
//   bench_hbm [--config FILE.yaml] [--cycles N] [--waves FILE.fst]
//
// Workloads (each on a fresh model, measured after a 2000-cycle warm-up over N cycles rounded to
// a whole number of refresh intervals, default 10 x tREFI, so refresh costs its average share;
// requests on both of the controller's ports, by address bit 6 as the chip's DMA sends them):
//   sequential_read   64-byte reads of consecutive addresses: bandwidth vs the peak of every
//                     channel's data bus (32 bytes/cycle/channel), target >= 0.92; for every map;
//                     and through port 0 alone (one 64-byte request a cycle)
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
#include <string>
#include <vector>

#include "bench_main.h"
#include "hbm_config.h"
#include "hbm_harness.h"
#include "json.h"
#include "report.h"

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
// With two ports a request goes to port (address bit 6); each port keeps up to 4 queued.
template <typename Next>
Result run_stream(const HbmConfig& cfg, uint64_t cycles, const std::string& waves, unsigned ports,
                  Next next) {
  HbmHarness h(cfg, waves);
  h.keep_responses(false);
  uint8_t tag = 0;
  HbmRequest r = next();
  auto feed = [&] {
    for (;;) {
      const unsigned port = ports > 1 ? (r.addr >> 6) & 1 : 0;
      if (h.pending_on(port) >= 4) break;
      r.tag = tag++;
      h.push(r, port);
      r = next();
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

Result sequential(const HbmConfig& cfg, uint64_t cycles, bool write, const std::string& waves,
                  unsigned ports = 2) {
  uint32_t addr = 0;
  return run_stream(cfg, cycles, waves, ports, [&] {
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
  return run_stream(cfg, cycles, "", 2, [&] {
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

// The measured window's statistics (after minus before), each under its name.
void add_stats(ReportGroup& g, const Result& r) {
  for (const auto& kv : r.stats) {
    const bool cycles =
        kv.first.size() > 7 && kv.first.compare(kv.first.size() - 7, 7, "_cycles") == 0;
    g.metric(kv.first, kv.second, cycles ? "cycles" : "", "controller statistic, measured window");
  }
}

int run(Options opt) {
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
  const Result seq1 = sequential(cfg, opt.cycles, false, "", 1);
  const double seq1_frac = double(seq1.responses) * kHbmBurstBytes / (double(seq1.cycles) * peak);
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

  const uint64_t viol =
      seq.violations + seq1.violations + seqw.violations + rnd.violations + lh.violations();
  const uint64_t fails = seq.assert_failures + seq1.assert_failures + seqw.assert_failures +
                         rnd.assert_failures + lh.assertion_failures();

  Report rep("bench_hbm: " + std::to_string(kHbmChannels) + " channels, " +
             hbm_map_name(cfg.ctrl.addr_map) + " map, " + std::to_string(opt.cycles) +
             " cycles a workload");
  rep.field("bench", "hbm").field("config", cfg.source);
  rep.metric("channels", kHbmChannels, "", "HBM channels");
  rep.metric("tck_ns", cfg.tck_ns, "ns", "clock period");
  rep.field("address_map", hbm_map_name(cfg.ctrl.addr_map));
  rep.metric(report_key::kCycles, opt.cycles, "cycles",
             "measured window of each workload (whole refresh intervals)");
  rep.metric("peak_bytes_per_cycle", uint64_t{kHbmBusBytesPerCycle} * kHbmChannels, "B/cycle",
             "every channel's data bus, 32 B each");
  rep.metric("peak_gb_per_s", peak / cfg.tck_ns, "GB/s", "the same at tck_ns");
  const uint64_t seq_bytes = seq.responses * kHbmBurstBytes;
  rep.group("sequential_read")
      .metric("bytes", seq_bytes, "bytes", "read in the measured window")
      .metric("bytes_per_cycle", seq_frac * peak, "B/cycle", "bytes / cycles")
      .metric("gb_per_s", seq_frac * peak / cfg.tck_ns, "GB/s", "bytes_per_cycle at tck_ns", true)
      .metric("fraction_of_peak", seq_frac, "fraction", "bytes_per_cycle / peak", true)
      .metric("target", 0.92, "fraction", "what fraction_of_peak should reach")
      .metric("meets_target", seq_frac >= 0.92, "", "fraction_of_peak >= target", true);
  rep.group("sequential_read_one_port")
      .metric("bytes_per_cycle", seq1_frac * peak, "B/cycle", "port 0 alone: bytes / cycles", true)
      .metric("fraction_of_peak", seq1_frac, "fraction", "bytes_per_cycle / peak");
  ReportGroup& maps = rep.group("sequential_read_fraction_by_map");
  for (const auto& [map, frac] : by_map)
    maps.metric(hbm_map_name(map), frac, "fraction", "sequential read fraction_of_peak");
  rep.group("sequential_write")
      .metric("bytes", seqw.responses * kHbmBurstBytes, "bytes", "written in the measured window")
      .metric("fraction_of_peak", seqw_frac, "fraction", "bytes per cycle / peak", true);
  rep.group("random_read")
      .metric("requests", rnd.responses, "", "reads answered in the measured window")
      .metric("req_per_cycle_per_channel", rnd_rate, "req/cycle", "per channel", true)
      .metric("bound_req_per_cycle_per_channel", bound, "req/cycle",
              "4 / tFAW * (1 - tRFC / tREFI): activates less refresh", true)
      .metric(report_key::kFractionOfBound, rnd_rate / bound, "fraction",
              "req_per_cycle_per_channel / bound", true)
      .metric("acts_per_cycle_per_channel", act_rate, "act/cycle", "per channel")
      .metric("act_fraction_of_bound", act_rate / bound, "fraction",
              "acts_per_cycle_per_channel / bound");
  rep.group("latency_cycles")
      .metric("row_hit", lat_hit, "cycles", "one read, row open", true)
      .metric("row_closed", lat_closed, "cycles", "one read, bank precharged", true)
      .metric("row_conflict", lat_conflict, "cycles", "one read, another row open", true);
  add_stats(rep.group("sequential_read_stats"), seq);
  add_stats(rep.group("random_read_stats"), rnd);
  rep.metric("checker_violations", viol, "", "protocol checker violations, every run", true);
  rep.metric("assertion_failures", fails, "", "RTL assertion failures, every run", true);

  std::fputs(rep.summary().c_str(), stderr);
  std::fputs((json_text(Json::array({rep.json()})) + "\n").c_str(), stdout);
  return (viol + fails) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tpu

int main(int argc, char** argv) {
  CLI::App app("throughput and latency of the HBM controller and device model; a JSON array on\n"
               "stdout",
               "bench_hbm");
  tpu::Options opt;
  // The configuration is read when the line is parsed: a missing or bad file is a usage error
  // (exit 2, --check included), not a failed bench.
  app.add_option("--config", opt.config, "HBM configuration (default: the built-in one)")
      ->type_name("FILE.yaml")
      ->check(tpu::cli::input_path())
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              (void)tpu::load_hbm_config(v);
            } catch (const tpu::HbmConfigError& e) {
              return std::string(e.what());
            }
            return std::string();
          },
          ""));
  app.add_option("--cycles", opt.cycles,
                 "measured cycles, rounded to whole refresh intervals; 0: ten of them")
      ->type_name("N")
      ->check(tpu::cli::uint_in(0, uint64_t{1} << 32))
      ->capture_default_str();
  app.add_option("--waves", opt.waves, "dump the sequential-read run to an FST file")
      ->type_name("FILE.fst")
      ->check(tpu::cli::output_path());
  return tpu::bench_cli(app, argc, argv, [&] { return tpu::run(opt); });
}
