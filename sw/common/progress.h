// The progress of a long run, as the jobs report it (RunProgress) and as the tools show it
// (ProgressLine): one line on stderr, rewritten in place, and only when stderr is a terminal,
// the run has taken two seconds and --quiet was not given; anything else the tool prints first
// erases it (clear_progress_line), so a table on a terminal is never glued to it, and a file or
// a pipe gets none of it. The clock, the terminal test and the writes are injectable (tests).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tpu {

// What a run reports now and then: the simulated cycles since it began (the pod's or the
// chip's; they never go back), and, when known, the work done of a total.
struct RunProgress {
  uint64_t cycles = 0;
  uint64_t done = 0;
  uint64_t total = 0;  // 0: not known (no estimate of what is left)
  std::string unit;    // what done counts ("result rows"); "" with a phase that says it
  std::string phase;   // e.g. "step 4/10": shown first; "" for none
};
using RunProgressFn = std::function<void(const RunProgress&)>;

// Where a progress line goes: whether it is a terminal, its width, the clock, the writer.
struct ProgressEnv {
  bool terminal = false;
  unsigned columns = 80;                          // the line is cut to columns - 1
  std::function<double()> now;                    // seconds, monotonic
  std::function<void(const std::string&)> write;  // raw bytes to the terminal
};
// stderr: isatty(2), its width (TIOCGWINSZ, else $COLUMNS, else 80), steady_clock.
ProgressEnv stderr_progress_env();

class ProgressLine {
 public:
  static constexpr double kDelay = 2.0;  // seconds of a run before its first line
  static constexpr double kEvery = 0.5;  // seconds between rewrites

  // "[tpusim] LABEL: ..." on stderr; nothing at all when quiet.
  ProgressLine(std::string label, bool quiet);
  ProgressLine(std::string label, bool quiet, ProgressEnv env);
  ~ProgressLine();  // the line erased
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // The total that `done` counts towards (0: not known) and what it counts ("result rows").
  void set_total(uint64_t total, std::string unit = "");
  // A phase shown before the counts ("step 4/10", "copy in"); "" for none.
  void set_phase(std::string phase);
  // The run's simulated cycles since it began, and the work done of the total.
  void update(uint64_t cycles, uint64_t done = 0);
  // All of a job's report at once (total, unit and phase as given).
  void update(const RunProgress& p);
  // Erases the line if it is on the terminal (it comes back at the next update).
  void clear();

  // Whether this line prints at all: a terminal and not quiet.
  bool active() const { return active_; }
  bool shown() const { return shown_; }
  // The line's text at time `now` (no \r, not cut to the width): label, phase, done/total unit,
  // cycles, simulated cycles per second, elapsed and what is left ("?" while not known).
  std::string text(double now) const;
  // Seconds left at `now`, or < 0: not known. The time each unit of `done` took since the
  // first update, times the units left, less the time since the last one was done (a unit in
  // progress); never below 0.
  double seconds_left(double now) const;

 private:
  std::string label_;
  ProgressEnv env_;
  bool active_;
  bool shown_ = false;
  double t0_ = 0, last_ = -1;
  bool started_ = false;  // a first update seen: (t1_, cycles1_, done1_)
  double t1_ = 0;
  double t_done_ = 0;  // when done_ last changed
  uint64_t cycles1_ = 0, done1_ = 0;
  uint64_t cycles_ = 0, done_ = 0, total_ = 0;
  std::string unit_, phase_;
};

// Erases the progress line on the terminal, if one is shown: call before printing anything to
// stdout or stderr while a run goes on.
void clear_progress_line();

}  // namespace tpu
