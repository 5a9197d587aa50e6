#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace tpu {
namespace {

// The line on the terminal now (one at a time), for clear_progress_line.
ProgressLine*& shown_line() {
  static ProgressLine* line = nullptr;
  return line;
}

// "2.1 s", "3m05s", "2h07m".
std::string duration_text(double s) {
  char b[32];
  if (s < 60)
    std::snprintf(b, sizeof b, "%.1f s", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s / 3600),
                  static_cast<int>(s / 60) % 60);
  return b;
}

// "950", "61.7k", "3.25M".
std::string rate_text(double r) {
  char b[32];
  if (r < 1e3)
    std::snprintf(b, sizeof b, "%.0f", r);
  else if (r < 1e6)
    std::snprintf(b, sizeof b, "%.1fk", r / 1e3);
  else
    std::snprintf(b, sizeof b, "%.2fM", r / 1e6);
  return b;
}

unsigned stderr_columns() {
  struct winsize w {};
  if (::ioctl(2, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const long v = std::strtol(c, nullptr, 10);
    if (v > 0 && v < 10000) return static_cast<unsigned>(v);
  }
  return 80;
}

}  // namespace

ProgressEnv stderr_progress_env() {
  ProgressEnv e;
  e.terminal = ::isatty(2) == 1;
  e.columns = e.terminal ? stderr_columns() : 80;
  e.now = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  e.write = [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stderr);
    std::fflush(stderr);
  };
  return e;
}

ProgressLine::ProgressLine(std::string label, bool quiet)
    : ProgressLine(std::move(label), quiet, stderr_progress_env()) {}

ProgressLine::ProgressLine(std::string label, bool quiet, ProgressEnv env)
    : label_(std::move(label)), env_(std::move(env)), active_(env_.terminal && !quiet) {
  if (active_) t0_ = env_.now();
}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::set_total(uint64_t total, std::string unit) {
  total_ = total;
  unit_ = std::move(unit);
}

void ProgressLine::set_phase(std::string phase) { phase_ = std::move(phase); }

void ProgressLine::update(const RunProgress& p) {
  set_total(p.total, p.unit);
  set_phase(p.phase);
  update(p.cycles, p.done);
}

void ProgressLine::update(uint64_t cycles, uint64_t done) {
  if (!active_) return;
  const double now = env_.now();
  cycles_ = cycles;
  if (done != done_ || !started_) t_done_ = now;
  done_ = done;
  if (!started_) {
    started_ = true;
    t1_ = now;
    cycles1_ = cycles;
    done1_ = done;
  }
  if (now - t0_ < kDelay || (last_ >= 0 && now - last_ < kEvery && shown_)) return;
  last_ = now;
  std::string line = text(now);
  if (env_.columns > 1 && line.size() > env_.columns - 1) line.resize(env_.columns - 1);
  // Another line shown (two at once): it goes first.
  if (shown_line() && shown_line() != this) shown_line()->clear();
  env_.write("\r" + line + "\033[K");
  shown_ = true;
  shown_line() = this;
}

void ProgressLine::clear() {
  if (!shown_) return;
  env_.write("\r\033[K");
  shown_ = false;
  if (shown_line() == this) shown_line() = nullptr;
}

double ProgressLine::seconds_left(double now) const {
  if (total_ == 0 || !started_) return -1;
  if (done_ >= total_) return 0;
  if (done_ <= done1_ || t_done_ <= t1_) return -1;
  // The time each unit took so far, for those left, less the time since the last one was done
  // (a step that runs now), but never below zero.
  const double each = (t_done_ - t1_) / static_cast<double>(done_ - done1_);
  return std::max(0.0, each * static_cast<double>(total_ - done_) - (now - t_done_));
}

std::string ProgressLine::text(double now) const {
  std::string s = "[tpusim] " + label_ + ":";
  std::string sep = " ";
  if (!phase_.empty()) {
    s += sep + phase_;
    sep = ", ";
  }
  if (total_ > 0 && !unit_.empty()) {
    s += sep + std::to_string(done_) + "/" + std::to_string(total_) + " " + unit_;
    sep = ", ";
  }
  s += sep + std::to_string(cycles_) + " cycles, ";
  const double dt = now - t1_;
  s += started_ && dt > 0 && cycles_ >= cycles1_
           ? rate_text(static_cast<double>(cycles_ - cycles1_) / dt) + " cycles/s"
           : std::string("? cycles/s");
  s += ", elapsed " + duration_text(now - t0_);
  const double left = seconds_left(now);
  s += left < 0 ? ", left ?" : ", left " + duration_text(left);
  return s;
}

void clear_progress_line() {
  if (ProgressLine* l = shown_line()) l->clear();
}

}  // namespace tpu
