#include "tpu/pipeline.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace tpu {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

// A non-negative integer of decimal digits only ("" or anything else: -1).
long long digits(const std::string& t) {
  if (t.empty() || t.size() > 9) return -1;
  for (char c : t)
    if (c < '0' || c > '9') return -1;
  return std::stoll(t);
}

// GPipe: every forward in micro-batch order, then every backward in micro-batch order.
std::vector<PipeSlot> gpipe_slots(int m) {
  std::vector<PipeSlot> v;
  for (int k = 0; k < m; ++k) v.push_back(PipeSlot{k, false, 0});
  for (int k = 0; k < m; ++k) v.push_back(PipeSlot{k, true, 0});
  return v;
}

// 1F1B (PipeDream-flush): p - s - 1 warm-up forwards, then F and B in turn, then the rest of B.
std::vector<PipeSlot> one_f_one_b_slots(int p, int m, int s) {
  const int warm = std::min(p - s - 1, m);
  std::vector<PipeSlot> v;
  for (int k = 0; k < warm; ++k) v.push_back(PipeSlot{k, false, 0});
  for (int i = 0; i < m - warm; ++i) {
    v.push_back(PipeSlot{warm + i, false, 0});
    v.push_back(PipeSlot{i, true, 0});
  }
  for (int k = m - warm; k < m; ++k) v.push_back(PipeSlot{k, true, 0});
  return v;
}

// Megatron's interleaved 1F1B: the k-th forward (backward) of a stage is micro-batch
// (k / pv) p + k mod p of chunk (k mod pv) / p (backward: v - 1 minus that); warm-up
// (p - s - 1) 2 + (v - 1) p forwards (all of them when m = p), then F and B in turn.
std::vector<PipeSlot> interleaved_slots(int p, int m, int v, int s) {
  const int total = m * v, group = p * v;
  auto fwd = [&](int k, bool backward) {
    const int in_group = k % group;
    const int chunk = in_group / p;
    return PipeSlot{(k / group) * p + in_group % p, backward, backward ? v - 1 - chunk : chunk};
  };
  const int warm = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  std::vector<PipeSlot> out;
  for (int k = 0; k < warm; ++k) out.push_back(fwd(k, false));
  for (int i = 0; i < total - warm; ++i) {
    out.push_back(fwd(warm + i, false));
    out.push_back(fwd(i, true));
  }
  for (int k = total - warm; k < total; ++k) out.push_back(fwd(k, true));
  return out;
}

}  // namespace

PipeSchedule parse_pipe_schedule(const std::string& text) {
  if (text == "gpipe") return PipeSchedule{PipeKind::kGpipe, 1};
  if (text == "1f1b") return PipeSchedule{PipeKind::k1f1b, 1};
  const std::string pre = "interleaved:";
  if (text.compare(0, pre.size(), pre) == 0) {
    const long long v = digits(text.substr(pre.size()));
    if (v < 1 || v > 64)
      bad("--schedule " + text +
          ": interleaved:V needs V, the model chunks per stage, an "
          "integer in [1, 64]");
    return PipeSchedule{PipeKind::kInterleaved, static_cast<int>(v)};
  }
  bad("--schedule " + text + ": the schedules are gpipe, 1f1b and interleaved:V");
}

std::string pipe_schedule_text(const PipeSchedule& s) {
  switch (s.kind) {
    case PipeKind::kGpipe:
      return "gpipe";
    case PipeKind::k1f1b:
      return "1f1b";
    case PipeKind::kInterleaved:
      break;
  }
  return "interleaved:" + std::to_string(s.v);
}

std::vector<std::vector<PipeSlot>> pipeline_slots(const PipeSchedule& s, int p, int m) {
  if (p < 1) bad("pipeline: " + std::to_string(p) + " stages: at least one");
  if (m < 1) bad("--microbatches " + std::to_string(m) + ": at least one");
  if (s.v < 1) bad("--schedule: " + std::to_string(s.v) + " chunks per stage: at least one");
  if (s.kind == PipeKind::k1f1b && m < p)
    bad("--microbatches " + std::to_string(m) +
        ": 1F1B needs at least as many micro-batches as "
        "stages (" +
        std::to_string(p) + ")");
  if (s.kind == PipeKind::kInterleaved && m % p != 0)
    bad("--microbatches " + std::to_string(m) + ": interleaved needs a multiple of the " +
        std::to_string(p) + " stages");
  std::vector<std::vector<PipeSlot>> t;
  for (int st = 0; st < p; ++st) {
    switch (s.kind) {
      case PipeKind::kGpipe:
        t.push_back(gpipe_slots(m));
        break;
      case PipeKind::k1f1b:
        t.push_back(one_f_one_b_slots(p, m, st));
        break;
      case PipeKind::kInterleaved:
        t.push_back(interleaved_slots(p, m, s.v, st));
        break;
    }
  }
  return t;
}

std::vector<std::pair<int, PipeSlot>> pipeline_merged_order(
    const std::vector<std::vector<PipeSlot>>& table, int v) {
  const int P = static_cast<int>(table.size()), last = P * v - 1;
  std::vector<std::size_t> next(table.size(), 0);
  std::map<std::tuple<int, int, bool>, bool> done;  // (mb, virtual stage, backward)
  std::vector<std::pair<int, PipeSlot>> order;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < P; ++s) {
      const std::vector<PipeSlot>& tab = table[static_cast<std::size_t>(s)];
      std::size_t& i = next[static_cast<std::size_t>(s)];
      for (; i < tab.size(); ++i) {
        const PipeSlot& x = tab[i];
        const int j = x.chunk * P + s;
        const bool ready = x.backward ? (j == last ? done.count({x.mb, j, false}) > 0
                                                   : done.count({x.mb, j + 1, true}) > 0)
                                      : (j == 0 || done.count({x.mb, j - 1, false}) > 0);
        if (!ready) break;
        order.emplace_back(s, x);
        done[{x.mb, j, x.backward}] = true;
        progress = true;
      }
    }
  }
  for (int s = 0; s < P; ++s)
    if (next[static_cast<std::size_t>(s)] != table[static_cast<std::size_t>(s)].size())
      throw std::logic_error("pipeline: stage " + std::to_string(s) + "'s table waits forever");
  return order;
}

std::vector<std::map<std::pair<int, int>, int>> pipeline_activation_slots(
    const std::vector<std::vector<PipeSlot>>& table, int* count) {
  std::vector<std::map<std::pair<int, int>, int>> slot_of(table.size());
  int R = 1;
  for (std::size_t s = 0; s < table.size(); ++s) {
    std::vector<bool> used;
    for (const PipeSlot& x : table[s]) {
      auto& so = slot_of[s];
      if (x.backward) {
        used[static_cast<std::size_t>(so.at({x.mb, x.chunk}))] = false;
        continue;
      }
      std::size_t r = 0;
      while (r < used.size() && used[r]) ++r;
      if (r == used.size()) used.push_back(false);
      used[r] = true;
      so[{x.mb, x.chunk}] = static_cast<int>(r);
      R = std::max(R, static_cast<int>(r) + 1);
    }
  }
  if (count) *count = R;
  return slot_of;
}

std::vector<double> pipeline_timed_bubbles(const std::vector<std::vector<PipeSlot>>& table, int v,
                                           const std::vector<std::vector<double>>& dur, double gap,
                                           double hop,
                                           const std::vector<std::vector<double>>& pre) {
  const int P = static_cast<int>(table.size()), last = P * v - 1;
  if (dur.size() != table.size() || (!pre.empty() && pre.size() != table.size())) return {};
  for (std::size_t s = 0; s < table.size(); ++s)
    if (dur[s].size() != table[s].size() || (!pre.empty() && pre[s].size() != table[s].size()))
      return {};
  std::map<std::tuple<int, int, bool>, double> end;  // (mb, virtual stage, backward) -> end
  std::vector<std::size_t> next(table.size(), 0);
  std::vector<double> free(table.size(), -gap), busy(table.size(), 0.0);
  double span = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < P; ++s) {
      const std::size_t si = static_cast<std::size_t>(s);
      for (std::size_t& i = next[si]; i < table[si].size(); ++i) {
        const PipeSlot& x = table[si][i];
        const int j = x.chunk * P + s;
        double ready = 0;
        if (x.backward || j > 0) {
          const int need = x.backward ? (j == last ? j : j + 1) : j - 1;
          const auto it = end.find({x.mb, need, x.backward && j != last});
          if (it == end.end()) break;
          ready = it->second + (need % P != s ? hop : 0.0);
        }
        const double before = pre.empty() ? 0.0 : pre[si][i];
        const double start = std::max(ready, free[si] + gap + before);
        free[si] = start + dur[si][i];
        busy[si] += before + dur[si][i];
        span = std::max(span, free[si]);
        end[{x.mb, j, x.backward}] = free[si];
        progress = true;
      }
    }
  }
  std::vector<double> bubble;
  for (std::size_t s = 0; s < table.size(); ++s) {
    if (next[s] != table[s].size() || span <= 0) return {};
    bubble.push_back(1.0 - busy[s] / span);
  }
  return bubble;
}

int pipeline_peak_in_flight(const std::vector<PipeSlot>& slots) {
  int live = 0, peak = 0;
  for (const PipeSlot& x : slots) {
    live += x.backward ? -1 : 1;
    peak = std::max(peak, live);
  }
  return peak;
}

uint64_t pipeline_peak_bytes(const std::vector<PipeSlot>& slots,
                             const std::function<uint64_t(const PipeSlot&)>& bytes) {
  uint64_t now = 0, peak = 0;
  for (const PipeSlot& x : slots) {
    const uint64_t b = bytes(x);
    now = x.backward ? now - b : now + b;
    peak = std::max(peak, now);
  }
  return peak;
}

double pipeline_bubble_formula(const PipeSchedule& s, int p, int m) {
  const double b = static_cast<double>(p - 1);
  return b / (static_cast<double>(s.v) * m + b);
}

double pipeline_bubble_formula_of_ideal(const PipeSchedule& s, int p, int m) {
  return static_cast<double>(p - 1) / (static_cast<double>(s.v) * m);
}

std::string pipeline_bubble_formula_text(const PipeSchedule& s) {
  if (s.kind == PipeKind::kInterleaved)
    return "(p-1)/(v m+p-1): b/(1+b) of the step with b = (1/v)(p-1)/m relative to the ideal";
  return "(p-1)/(m+p-1)";
}

std::vector<std::pair<std::size_t, std::size_t>> pipeline_stages(std::size_t layers, int p,
                                                                 const std::string& text) {
  std::vector<std::pair<std::size_t, std::size_t>> st;
  const std::size_t P = static_cast<std::size_t>(p);
  if (p < 1) bad("--mesh stage=" + std::to_string(p) + ": at least one stage");
  if (text.empty()) {
    if (layers % P != 0)
      bad("--mesh stage=" + std::to_string(p) + ": " + std::to_string(p) +
          " stages do not divide the " + std::to_string(layers) +
          " layers (give --stages to split them unevenly)");
    for (std::size_t i = 0; i < P; ++i) st.push_back({i * layers / P, (i + 1) * layers / P - 1});
    return st;
  }
  std::size_t next = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    const long long a = digits(item.substr(0, dash));
    const long long b = dash == std::string::npos ? a : digits(item.substr(dash + 1));
    if (a < 0 || b < 0 || b < a)
      bad("--stages " + text + ": item '" + item + "' is not a layer or a range A-B with A <= B");
    if (static_cast<std::size_t>(a) != next)
      bad("--stages " + text + ": stage " + std::to_string(st.size()) + " starts at layer " +
          std::to_string(a) + ", the stages must cover the layers in order from 0 (next: " +
          std::to_string(next) + ")");
    st.push_back({static_cast<std::size_t>(a), static_cast<std::size_t>(b)});
    next = static_cast<std::size_t>(b) + 1;
    pos = comma + 1;
  }
  if (next != layers)
    bad("--stages " + text + ": the stages end at layer " + std::to_string(next - 1) +
        ", the network has layers 0-" + std::to_string(layers - 1));
  if (st.size() != P)
    bad("--stages " + text + ": " + std::to_string(st.size()) +
        " stages, the mesh's stage axis "
        "has " +
        std::to_string(p));
  return st;
}

std::vector<std::pair<std::size_t, std::size_t>> pipeline_chunks(std::size_t layers, int p,
                                                                 const PipeSchedule& s,
                                                                 const std::string& text) {
  if (s.kind != PipeKind::kInterleaved || s.v == 1) return pipeline_stages(layers, p, text);
  if (!text.empty())
    bad("--stages " + text +
        ": interleaved splits the layers into stages x v equal chunks; "
        "give no --stages");
  const auto st = pipeline_stages(layers, p, "");
  const std::size_t per = layers / static_cast<std::size_t>(p);
  const std::size_t v = static_cast<std::size_t>(s.v);
  if (per % v != 0)
    bad("--schedule " + pipe_schedule_text(s) + ": v=" + std::to_string(s.v) +
        " does not divide the " + std::to_string(per) + " layers per stage");
  const std::size_t n = per / v;  // layers per chunk
  std::vector<std::pair<std::size_t, std::size_t>> ch;
  for (std::size_t j = 0; j < static_cast<std::size_t>(p) * v; ++j)
    ch.push_back({j * n, (j + 1) * n - 1});
  return ch;
}

void check_pipeline(std::size_t layers, int p, int m, const PipeSchedule& s,
                    const std::string& stages_text) {
  pipeline_chunks(layers, p, s, stages_text);
  pipeline_slots(s, p, m);
}

}  // namespace tpu
