// SlicedPod: a pod of cubes joined by optical circuit switches into slices (tpu/ocs.h,
// docs/topology.md "Cubes and slices"), with one HostPort per slice, so that a job per slice can
// run at once, each on its own thread, each seeing only its slice as its machine (chip ids,
// topology, cycles). The pod is one PodCore stepped in plain C++. It steps only while every job
// that is still running waits on the machine (a copy, a run, a clear), and stops as soon as one
// of those waits is over, so a slice's clock moves exactly while its own job waits, as it would
// on a pod of the slice alone: whatever the threads do, a job's bits and cycles are those it has
// on a torus of its slice's shape (a test compares the reports).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "host_port.h"
#include "pod.h"
#include "tpu/ocs.h"

namespace tpu {

class SlicedPod {
 public:
  // p: the pod's chip variant, links, HBM, faults (pod chip ids) and threads; its topology and
  // wiring are set here from `ocs` (validated: std::invalid_argument naming the rule).
  SlicedPod(PodParams p, const OcsPod& ocs);
  ~SlicedPod();
  SlicedPod(const SlicedPod&) = delete;
  SlicedPod& operator=(const SlicedPod&) = delete;

  const OcsPod& ocs() const { return ocs_; }
  PodCore& core() { return core_; }
  int num_slices() const { return static_cast<int>(hosts_.size()); }
  // Slice s's machine: its topology, the pod's chip, links and HBM. Outside run(), one thread at
  // a time may use one slice's port as a machine of its own.
  HostPort& slice(int s);
  // Slice s's chips: pod chip id per slice chip id.
  const std::vector<int>& slice_chips(int s) const;

  // Runs jobs[s] on slice(s), all at once, each on its own thread (an empty function: the slice
  // idles). Returns per slice what its job threw (nullptr: it returned).
  std::vector<std::exception_ptr> run(const std::vector<std::function<void(HostPort&)>>& jobs);

  // Called with the pod's cycle about every progress_every cycles while it steps (from the
  // thread that steps it: one at a time).
  std::function<void(uint64_t)> progress;
  uint64_t progress_every = 1000;

 private:
  class SliceHost;
  struct Wait;
  // Called by a job's thread: blocks until `w` is over, stepping the pod when every running job
  // waits; rethrows what ended the wait with an error.
  void wait(Wait& w);
  // Steps until at least one wait is over (called with no job running).
  void step_until_a_wait_ends();

  OcsPod ocs_;
  PodCore core_;
  std::vector<std::unique_ptr<SliceHost>> hosts_;
  std::mutex m_;
  std::condition_variable cv_;
  int running_ = 0;        // job threads neither waiting nor finished
  bool stepping_ = false;  // a thread is stepping the pod
  bool in_run_ = false;    // run() is running the jobs (else one caller uses a slice's port)
  std::vector<Wait*> waits_;
  uint64_t next_progress_ = 0;
};

// The link_down faults of f whose link `ocs` does not wire (a spare cube's face, once its slice
// moved away), taken out of f and returned: a pod re-formed around a failed link keeps the
// failure where it is without asking for a link no slice uses.
std::vector<LinkDown> take_unwired_link_downs(FaultConfig& f, const OcsPod& ocs);

}  // namespace tpu
