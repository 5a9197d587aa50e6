// VerilatedModel<VTop>: one verilated model with a context of its own, clocked one cycle at a
// time (rising edge in tick(); the falling edge with the next cycle's inputs), with an optional
// FST dump of every signal on the configured clock (WaveClock: cycle n's rising edge at
// n x period from the dump's start), and Verilator's assertion failures reported to the caller
// instead of aborting. The block harnesses build on it.
#pragma once

#include <verilated.h>
#include <verilated_fst_c.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "wave_clock.h"

namespace tpu {

// kTraced: whether VTop was verilated with FST tracing (TRACE_FST).
template <class VTop, bool kTraced = true>
class VerilatedModel {
 public:
  VerilatedModel() : ctx_(new VerilatedContext) {
    ctx_->fatalOnError(false);  // a failed assertion sets gotError(); tick() reports it
    ctx_->traceEverOn(kTraced);
    use_context();
    top_.reset(new VTop(ctx_.get(), "TOP"));
    top_->clk_i = 0;
  }

  ~VerilatedModel() {
    use_context();
    if (fst_) fst_->close();
    top_->final();
    top_.reset();
  }

  VerilatedModel(const VerilatedModel&) = delete;
  VerilatedModel& operator=(const VerilatedModel&) = delete;

  VTop& top() { return *top_; }
  VTop* operator->() { return top_.get(); }
  const VTop* operator->() const { return top_.get(); }

  // Settles combinational logic after inputs change. After a tick() the clock is still high:
  // the falling edge is taken here, in the same evaluation as the new inputs (no RTL acts on
  // the falling edge, so one evaluation does the work of two: ~5% of a chip's simulation).
  void eval() {
    use_context();
    if (clk_high_) {
      fall();
    } else {
      top_->eval();
    }
  }

  // eval() for a model all of whose concurrent assertions sample on the rising edge of clk_i,
  // verilated through tpu_verilate: with the clock high, the falling edge's evaluation leaves
  // out the sampling of the signals those assertions read, which Verilator 5.006 does at every
  // evaluation. No assertion runs on a falling edge, and the rising edge's evaluation samples
  // again before any does (cmake/tpu_verilate_sync.cmake). With a wave dump open it is eval().
  void eval_falling_unsampled() {
    use_context();
    if (clk_high_ && !fst_) {
      fall<true>();
    } else {
      eval();
    }
  }

  // eval() for a caller that knows the inputs are those of the last evaluation: with the clock
  // low there is nothing to settle; with it high, only the falling edge is taken, without an
  // evaluation. `mark_low(top)` must record the low clock in the model's edge detector (what
  // the evaluation would have done; ChipDut's proof that nothing else would change is in
  // tb/chip/chip_dut.cc). With a wave dump open, use eval(): the dump wants every evaluation.
  template <class MarkLow>
  void eval_unchanged(MarkLow mark_low) {
    if (!clk_high_) return;
    use_context();
    top_->clk_i = 0;
    mark_low(*top_);
    ctx_->timeInc(1);
    clk_high_ = false;
  }

  bool waves_open() const { return fst_ != nullptr; }
  // tick() left the clock high: the next eval() or eval_unchanged() takes the falling edge.
  bool clock_high() const { return clk_high_; }

  // One clock cycle. Returns false when an RTL assertion failed during it (the dump is
  // flushed first, so the failure is in the waves).
  bool tick() { return rise<false>(); }

  // tick() for a caller that knows no input changed since the model's last evaluation: the
  // rising edge's evaluation leaves out the model's input region (the logic fed by top-level
  // inputs, which Verilator 5.006 runs at every evaluation), whose values that evaluation
  // settled and nothing has moved since: the inputs are the same, and the state only moves at
  // this edge, after which Verilator re-runs what depends on it. The hook is tpu_verilate's
  // (cmake/tpu_verilate_sync.cmake); only a model verilated through it may use this. With a
  // wave dump open it is tick(): the dump wants every evaluation as Verilator wrote it.
  bool tick_inputs_unchanged() { return fst_ ? rise<false>() : rise<true>(); }

  // Whether the last evaluation left out the input region (tick_inputs_unchanged() did).
  bool input_region_skipped() const { return top_->rootp->__VicoIterCount == kIcoSkipped; }

  uint64_t cycle() const { return cycle_; }

  // Holds rst_ni low for `cycles` clock cycles, then releases it while the clock is low. Returns
  // false when an RTL assertion failed meanwhile. Drive the other inputs idle first.
  bool reset(unsigned cycles) {
    top_->rst_ni = 0;
    eval();
    bool ok = true;
    for (unsigned c = 0; c < cycles; ++c) ok = tick() && ok;
    top_->rst_ni = 1;
    eval();
    return ok;
  }

  // For harnesses that count assertion failures and go on: whether one failed since the last
  // call (the failure state is cleared).
  bool take_error() {
    if (!ctx_->gotError()) return false;
    ctx_->gotError(false);
    ctx_->gotFinish(false);
    return true;
  }

  // Starts an FST dump of every signal; closed when the model is destroyed. Its time 0 is now
  // (the cycle count so far), and the rising edge of each later cycle n is at n x the period of
  // a `clock_ghz` clock, in ps (WaveClock).
  void open_waves(const std::string& path, const std::string& what, double clock_ghz = 1.0) {
    if constexpr (!kTraced) {
      throw std::runtime_error(path + ": " + what +
                               " is built without wave tracing; use a smaller variant for waves");
    } else {
      use_context();
      wave_ = WaveClock::at(clock_ghz, cycle_);
      fst_.reset(new VerilatedFstC);
      top_->trace(fst_.get(), 99);
      fst_->open(path.c_str());
      if (!fst_->isOpen())
        throw std::runtime_error(path + ": cannot open the wave file for writing");
      fst_->dump(wave_.rise(cycle_));  // time 0: the start of this cycle
    }
  }

 private:
  // Verilator 5.006 reaches a model's context through a thread-local pointer in places (scope
  // teardown, $stop counting); with several models in one thread (a test, a pod), point it at
  // this model's context whenever this model runs, or teardown deadlocks.
  void use_context() { Verilated::threadContextp(ctx_.get()); }
  // The values tpu_verilate's patch of the generated evaluation gives the root's __VicoIterCount
  // (cmake/tpu_verilate_sync.cmake, which writes the same three numbers): set before eval() to
  // leave out the input region, or the assertions' sampling; left after a skipped input region.
  static constexpr uint32_t kSkipIco = 0xffffffffU;
  static constexpr uint32_t kIcoSkipped = 0xfffffffeU;
  static constexpr uint32_t kSkipSampling = 0xfffffffdU;
  // The rising edge (and the falling one first when tick() follows tick()). kSkipInputs: the
  // evaluation leaves out the input region (tick_inputs_unchanged()).
  template <bool kSkipInputs>
  bool rise() {
    use_context();
    if (clk_high_) fall();  // two ticks with no eval() between: the falling edge first
    top_->clk_i = 1;
    if constexpr (kSkipInputs) top_->rootp->__VicoIterCount = kSkipIco;
    top_->eval();
    ctx_->timeInc(1);
    ++cycle_;
    if (fst_) fst_->dump(wave_.rise(cycle_));
    clk_high_ = true;
    if (ctx_->gotError()) {
      if (fst_) fst_->flush();
      return false;
    }
    return true;
  }

  // The falling edge of the clock (with whatever inputs the caller has set). kUnsampled: the
  // evaluation leaves out the assertions' sampling (eval_falling_unsampled()).
  template <bool kUnsampled = false>
  void fall() {
    top_->clk_i = 0;
    if constexpr (kUnsampled) top_->rootp->__VicoIterCount = kSkipSampling;
    top_->eval();
    ctx_->timeInc(1);
    if (fst_) fst_->dump(wave_.fall(cycle_));
    clk_high_ = false;
  }

  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<VTop> top_;
  std::unique_ptr<VerilatedFstC> fst_;
  WaveClock wave_;  // where the dump puts each edge
  uint64_t cycle_ = 0;
  bool clk_high_ = false;  // tick() left the clock high; the next eval() or tick() drops it
};

}  // namespace tpu
