#include "pod_report.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "pod_mpi.h"
#include "tpu/bf16.h"

namespace tpu {

namespace {
const char* kDirNames[6] = {"+x", "-x", "+y", "-y", "+z", "-z"};
}  // namespace

// The chips of chip c's group: those that agree with it on every dimension outside the group.
std::vector<int> group_of(const Topology& t, const std::vector<int>& dims, int c) {
  std::vector<int> v;
  const PodCoord me = t.coord(c);
  for (int i = 0; i < t.num_chips(); ++i) {
    const PodCoord o = t.coord(i);
    bool same = true;
    for (int d = 0; d < kPodMaxDims; ++d) {
      const bool in = dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!in && o[static_cast<std::size_t>(d)] != me[static_cast<std::size_t>(d)]) same = false;
    }
    if (same) v.push_back(i);
  }
  return v;
}

// Per-link bytes and the busiest link, from the links' flit counters.
ReportGroup& add_links(Report& rep, const std::vector<LinkStat>& flits, uint64_t row_bytes,
                       const Topology& topo) {
  Json links = Json::array();
  uint64_t mx = 0, total = 0, crc = 0, replays = 0, replayed = 0, down = 0;
  for (const LinkStat& l : flits) {
    const uint64_t b = l.flits * row_bytes;
    mx = std::max(mx, b);
    total += b;
    crc += l.crc_errors;
    replays += l.replays;
    replayed += l.replayed_flits;
    down += l.link_down;
    const PodCoord c = topo.coord(l.chip);
    links.push_back(Json::object({{"chip", l.chip},
                                  {"coord", Json::array({c[0], c[1], c[2]})},
                                  {"dir", kDirNames[l.dir]},
                                  {"flits", l.flits},
                                  {"bytes", b},
                                  {"crc_errors", l.crc_errors},
                                  {"replays", l.replays},
                                  {"replayed_flits", l.replayed_flits},
                                  {"link_down", l.link_down}}));
  }
  ReportGroup& g = rep.group("ici");
  g.metric("total_bytes", total, "bytes", "bytes all links carried (flits x row bytes)");
  g.metric("max_link_bytes", mx, "bytes", "bytes of the busiest directed link", true);
  g.metric("crc_errors", crc, "", "link words whose CRC failed (every link, flit and control)");
  g.metric("replays", replays, "", "link-layer replays started (every link)");
  g.metric("replayed_flits", replayed, "", "flits sent again by the link layer (every link)");
  g.metric("links_down", down, "", "links declared down");
  g.field("links", links);
  return g;
}

void add_pod(Report& rep, const PodConfig& cfg, const MachineInfo& mi, const EngineOptions& eng) {
  rep.field("tool", "tpusim").field("config", cfg.source);
  rep.field("engine", eng.engine);
  rep.field("threads", static_cast<uint64_t>(eng.threads));
  if (mpi_world().size > 1) {
    const MpiStats& ms = mpi_stats();
    ReportGroup& m = rep.group("mpi");
    m.metric("ranks", mpi_world().size, "", "MPI ranks, each stepping a slab of the chips");
    m.metric("windows", ms.windows, "", "windows of at most link_latency cycles (rank 0)");
    m.metric("bytes_sent", ms.bytes_sent, "bytes", "cut links' slots rank 0 sent");
    m.metric("exchange_seconds", ms.exchange_seconds, "s",
             "rank 0 in the window exchange and agreement, waits for slower ranks included");
    m.metric("chip_models", ms.chip_models, "", "chip models rank 0 built (its own chips only)");
    m.metric("chip_models_total", ms.chip_models_total, "", "chip models built, all ranks");
    m.metric("exchange_share", ms.host_seconds > 0 ? ms.exchange_seconds / ms.host_seconds : 0.0,
             "fraction", "of rank 0's time with the pod");
  }
  ReportGroup& g = rep.group("pod");
  g.field("topology", cfg.params.topo.name());
  g.field("twist", cfg.params.twist);
  g.metric("chips", mi.num_chips(), "", "chips in the pod");
  g.field("variant", cfg.params.variant);
  g.metric("link_latency", mi.link_latency, "cycles", "cycles per ICI link, each way");
  g.metric("link_bytes_per_cycle", mi.link_bytes_per_cycle, "B/cycle", "what one link carries");
  g.metric("host_bytes_per_cycle", mi.host_bytes_per_cycle, "B/cycle",
           "what one chip's host port moves");
}

Json chip_table(const PodProgramRun& pr) {
  Json chips = Json::array();
  for (std::size_t c = 0; c < pr.chip_delta.size(); ++c) {
    const ChipCounters& d = pr.chip_delta[c];
    chips.push_back(Json::object({{"chip", c},
                                  {"cycles", pr.run.chip_cycles[c]},
                                  {"mxu_busy_cycles", d[kStatMxuBusy]},
                                  {"vpu_busy_cycles", d[kStatVpuBusy]},
                                  {"dma_busy_cycles", d[kStatDmaBusy]},
                                  {"hbm_bytes", d[kStatDmaRdBytes] + d[kStatDmaWrBytes]},
                                  {"ici_send_busy_cycles", d[kStatIciBusy]},
                                  {"ici_wait_cycles", d[kStatIciWait]},
                                  {"flits_sent", d[kStatIciTxFlits]},
                                  {"flits_received", d[kStatIciRxFlits]}}));
  }
  return chips;
}

F64Check f64_check(const CollectivePlan& plan, const std::vector<int>& dims,
                   const std::vector<std::vector<uint32_t>>& in,
                   const std::vector<std::vector<uint32_t>>& out) {
  F64Check r;
  const Collective k = plan.spec.collective;
  if (plan.spec.op != ReduceOp::kSum ||
      (k != Collective::kAllReduce && k != Collective::kReduceScatter))
    return r;
  r.applies = true;
  const bool bf16 = plan.spec.dtype == DType::kBf16;
  auto val = [&](uint32_t v) {
    return static_cast<double>(bf16 ? bf16_to_f32(static_cast<bf16_t>(v)) : f32_from_bits(v));
  };
  for (int c = 0; c < plan.topo.num_chips(); ++c) {
    const auto grp = group_of(plan.topo, dims, c);
    const double p = static_cast<double>(grp.size());
    std::size_t o = 0;
    for (const Segment& s : plan.chips[static_cast<std::size_t>(c)].output) {
      for (std::size_t i = 0; i < s.count; ++i, ++o) {
        double sum = 0, abs = 0;
        for (int g : grp) {
          const double x = val(in[static_cast<std::size_t>(g)][s.offset + i]);
          sum += x;
          abs += std::fabs(x);
        }
        const double got = val(out[static_cast<std::size_t>(c)][o]);
        double bound = (p - 1) * 0x1p-24 * abs;
        if (bf16) bound = bound * (1 + 0x1p-8) + 0x1p-8 * std::fabs(sum) + 0x1p-133;
        const double err = std::fabs(got - sum);
        if (!(err <= bound)) ++r.outside;
        if (bound > 0) r.worst = std::max(r.worst, err / bound);
      }
    }
  }
  return r;
}

}  // namespace tpu
