#include "pod_slices.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace tpu {

// One job's wait on the machine: `over` is asked before every cycle (true: the wait is over),
// `after` runs after every cycle (its slice's clock, error checks, progress). Either may throw:
// the wait is then over with that error.
struct SlicedPod::Wait {
  const std::vector<int>* chips = nullptr;  // of the slice whose job waits
  std::function<bool()> over;
  std::function<void()> after;
  bool finished = false;
  std::exception_ptr error;
};

// Slice s as a machine of its own: its chips by slice id, its topology, its own clock (the
// cycles the pod stepped while this slice's job waited).
class SlicedPod::SliceHost final : public HostPort {
 public:
  SliceHost(SlicedPod& pod, int s)
      : pod_(pod), core_(pod.core_), s_(s), chips_(tpu::slice_chips(pod.ocs_, s)) {
    info_ = core_.info();
    info_.topo = slice_topology(pod.ocs_, s);
  }
  const std::vector<int>& chips() const { return chips_; }
  const MachineInfo& info() const override { return info_; }

  uint64_t copy(const std::vector<HostCopy>& ops) override {
    std::vector<HostCopy> mine = ops;
    for (HostCopy& o : mine) {
      o.chip = pod_chip(o.chip, "copy");
      core_.check_copy(o);
    }
    HostCopyQueues q(core_, mine);
    WaitCycles wc(core_, *this, chips_, false, 100'000'000, "\n(host port copies still running)");
    Wait w;
    w.chips = &chips_;
    w.over = [&q] { return !q.advance(); };
    w.after = [&] { tick(wc); };
    pod_.wait(w);
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (!ops[i].write && ops[i].n) std::memcpy(ops[i].data, q.read(i).data(), ops[i].n);
    return clock_ - wc.start();
  }
  void backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) override {
    core_.backdoor(pod_chip(chip, "backdoor_write"), true, addr, const_cast<void*>(data), n);
    backdoor_bytes_ += n;
  }
  void backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) override {
    core_.backdoor(pod_chip(chip, "backdoor_read"), false, addr, data, n);
    backdoor_bytes_ += n;
  }
  void push(int chip, const std::vector<ChipCmd>& cmds) override {
    core_.agent(pod_chip(chip, "push")).push(cmds);
  }
  RunStats run_until_idle(uint64_t max_cycles, bool stop_on_error) override {
    const uint64_t core_start = core_.cycle();
    WaitCycles wc(core_, *this, chips_, stop_on_error, max_cycles);
    Wait w;
    w.chips = &chips_;
    w.over = [&] { return core_.idle(chips_); };
    w.after = [&] { tick(wc); };
    pod_.wait(w);
    core_.check_errors(stop_on_error, chips_);
    RunStats r;
    r.cycles = clock_ - wc.start();
    for (int p : chips_)
      r.chip_cycles.push_back(core_.last_busy(p) > core_start ? core_.last_busy(p) - core_start
                                                              : 0);
    return r;
  }
  // After a cycle of one of this slice's waits: its clock, a chip stopped at an error ends the
  // job at once, then what every host port checks (WaitCycles).
  void tick(WaitCycles& wc) {
    const uint64_t t = ++clock_;
    check_faults();
    wc.tick(t);
    wc.bound(t);
  }
  // A chip of this slice stopped at an error while stepping: the job ends with it.
  void check_faults() const {
    for (int p : chips_)
      if (const std::exception_ptr f = core_.chip_fault(p)) std::rethrow_exception(f);
  }
  void set_watchdog(uint64_t cycles) override { core_.set_watchdog(cycles); }
  ChipStatus status(int chip) override { return core_.status(pod_chip(chip, "status")); }
  ChipCounters counters(int chip) override { return core_.counters(pod_chip(chip, "counters")); }
  // The links of this slice alone, in a pod of the slice's order (by chip, then direction),
  // counted from its own chips (no other slice's chip is read).
  std::vector<LinkStat> link_stats() override {
    std::vector<LinkStat> v;
    for (int p : chips_)
      for (int dir = 0; dir < 6; ++dir)
        if (core_.has_link(p, dir)) v.push_back({p, dir, core_.link_flits(p, dir)});
    core_.fill_link_errors(
        v, [this](int c, int d, unsigned sel) { return core_.link_counter(c, d, sel); });
    for (LinkStat& l : v)
      l.chip = static_cast<int>(std::find(chips_.begin(), chips_.end(), l.chip) - chips_.begin());
    return v;
  }
  void clear(int chip) override {
    core_.agent(pod_chip(chip, "clear")).request_clear();
    bool stepped = false;
    Wait w;
    w.chips = &chips_;
    w.over = [&stepped] { return stepped; };
    w.after = [&] {
      ++clock_;
      stepped = true;
      check_faults();
    };
    pod_.wait(w);
  }
  uint64_t cycle() const override { return clock_; }
  // The timeline of this slice's chips, by slice chip id. While its job runs, the slice's clock is
  // the pod's (the pod steps only while every running job waits), so the events' cycles are the
  // slice's own.
  void set_trace(const TraceOptions& o) override {
    check_trace_window(o);
    for (std::size_t k = 0; k < chips_.size(); ++k)
      core_.agent(chips_[k]).trace.set(static_cast<int>(k), o);
  }
  std::vector<TraceEvent> take_trace() override {
    std::vector<TraceEvent> v;
    for (int p : chips_) core_.agent(p).trace.take(v);
    sort_trace_events(v);
    return v;
  }
  void trace_label(int chip, const std::string& label) override {
    core_.agent(pod_chip(chip, "trace_label")).trace.label(label);
  }

 private:
  int pod_chip(int chip, const char* what) const {
    if (chip < 0 || chip >= static_cast<int>(chips_.size()))
      throw std::invalid_argument(std::string(what) + ": chip " + std::to_string(chip) +
                                  " is not in slice '" + pod_.ocs_.slices[s_].name +
                                  "' (chips 0.." + std::to_string(chips_.size() - 1) + ")");
    return chips_[static_cast<std::size_t>(chip)];
  }

  SlicedPod& pod_;
  PodCore& core_;
  std::size_t s_;
  std::vector<int> chips_;  // pod chip per slice chip
  MachineInfo info_;
  uint64_t clock_ = 0;
};

std::vector<LinkDown> take_unwired_link_downs(FaultConfig& f, const OcsPod& ocs) {
  const std::vector<ChipWire> w = ocs_wiring(ocs);
  std::vector<LinkDown> keep, gone;
  for (const LinkDown& ld : f.link_down) {
    const bool wired =
        ld.chip >= 0 && ld.chip < static_cast<int>(w.size()) && ld.dir >= 0 && ld.dir < 6 &&
        w[static_cast<std::size_t>(ld.chip)].peer[static_cast<std::size_t>(ld.dir)] >= 0;
    (wired ? keep : gone).push_back(ld);
  }
  f.link_down = keep;
  return gone;
}

namespace {
PodParams sliced_params(PodParams p, const OcsPod& ocs) {
  ocs.validate();
  p.topo = ocs.floor();
  p.wiring = ocs_wiring(ocs);
  p.twist = false;
  return p;
}
}  // namespace

SlicedPod::SlicedPod(PodParams p, const OcsPod& ocs)
    : ocs_(ocs), core_(sliced_params(std::move(p), ocs)) {
  core_.contain_chip_faults();
  for (int s = 0; s < static_cast<int>(ocs_.slices.size()); ++s)
    hosts_.push_back(std::make_unique<SliceHost>(*this, s));
}

SlicedPod::~SlicedPod() = default;

HostPort& SlicedPod::slice(int s) { return *hosts_.at(static_cast<std::size_t>(s)); }

const std::vector<int>& SlicedPod::slice_chips(int s) const {
  return hosts_.at(static_cast<std::size_t>(s))->chips();
}

std::vector<std::exception_ptr> SlicedPod::run(
    const std::vector<std::function<void(HostPort&)>>& jobs) {
  if (jobs.size() != hosts_.size())
    throw std::invalid_argument("SlicedPod::run: " + std::to_string(jobs.size()) + " jobs for " +
                                std::to_string(hosts_.size()) + " slices");
  std::vector<std::exception_ptr> err(jobs.size());
  {
    std::lock_guard<std::mutex> lk(m_);
    running_ = static_cast<int>(std::count_if(jobs.begin(), jobs.end(),
                                              [](const auto& j) { return static_cast<bool>(j); }));
    in_run_ = true;
  }
  std::vector<std::thread> threads;
  for (std::size_t s = 0; s < jobs.size(); ++s) {
    if (!jobs[s]) continue;
    threads.emplace_back([this, &jobs, &err, s] {
      try {
        jobs[s](*hosts_[s]);
      } catch (...) {
        err[s] = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(m_);
      --running_;
      cv_.notify_all();
    });
  }
  for (std::thread& t : threads) t.join();
  in_run_ = false;
  return err;
}

void SlicedPod::wait(Wait& w) {
  std::unique_lock<std::mutex> lk(m_);
  if (!in_run_) running_ = 1;  // a slice's port used outside run(): its caller is the one job
  waits_.push_back(&w);
  --running_;
  while (!w.finished) {
    if (running_ == 0 && !stepping_) {
      stepping_ = true;
      lk.unlock();
      step_until_a_wait_ends();
      lk.lock();
      stepping_ = false;
      for (auto it = waits_.begin(); it != waits_.end();) {
        if ((*it)->finished) {
          ++running_;
          it = waits_.erase(it);
        } else {
          ++it;
        }
      }
      cv_.notify_all();
    } else {
      cv_.wait(lk);
    }
  }
  lk.unlock();
  if (w.error) std::rethrow_exception(w.error);
}

void SlicedPod::step_until_a_wait_ends() {
  // No job runs while this does: waits_ stays as it is.
  auto end_with = [](Wait* w, std::exception_ptr e) {
    w->error = std::move(e);
    w->finished = true;
  };
  // Only the slices whose jobs wait move: every other slice is idle (its job finished, or it
  // has none) or a spare cube, and shares no link with them.
  std::vector<int> moving;
  for (const Wait* w : waits_) moving.insert(moving.end(), w->chips->begin(), w->chips->end());
  core_.step_only(moving);
  for (;;) {
    bool any = false;
    for (Wait* w : waits_) {
      try {
        if (w->over()) {
          w->finished = true;
          any = true;
        }
      } catch (...) {
        end_with(w, std::current_exception());
        any = true;
      }
    }
    if (any) return;
    core_.step();
    if (progress && core_.cycle() >= next_progress_) {
      progress(core_.cycle());
      next_progress_ = core_.cycle() + progress_every;
    }
    for (Wait* w : waits_) {
      try {
        w->after();
      } catch (...) {
        end_with(w, std::current_exception());
        any = true;
      }
    }
    try {
      core_.watch();
    } catch (...) {  // the whole pod made no progress: every waiting job is stuck
      const std::exception_ptr e = std::current_exception();
      for (Wait* w : waits_) end_with(w, e);
      return;
    }
    if (any) return;
  }
}

}  // namespace tpu
