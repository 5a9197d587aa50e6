// MxuDutImpl<VTop, kTraced>: MxuDut over one verilated tpu_mxu_top class (one per variant).
// kTraced says whether the model was verilated with FST tracing (the 128x128 array is not: its
// trace code alone would be hundreds of megabytes of C++).
#pragma once

#include <verilated.h>
#include <verilated_fst_c.h>

#include <memory>
#include <string>

#include "mxu_dut.h"

namespace tpu {

template <class VTop, bool kTraced = true>
class MxuDutImpl final : public MxuDut {
 public:
  MxuDutImpl(std::string variant, unsigned rows, unsigned cols)
      : variant_(std::move(variant)), rows_(rows), cols_(cols), ctx_(new VerilatedContext) {
    ctx_->fatalOnError(false);  // a failed assertion becomes an RtlError, not an abort()
    ctx_->traceEverOn(true);
    use_context();
    top_.reset(new VTop(ctx_.get(), "TOP"));
    top_->clk_i = 0;
    top_->rst_ni = 1;
    top_->eval();
    reset(2);
  }

  ~MxuDutImpl() override {
    use_context();
    if (fst_) fst_->close();
    top_->final();
    top_.reset();
  }

  const std::string& variant() const override { return variant_; }
  unsigned rows() const override { return rows_; }
  unsigned cols() const override { return cols_; }

  void set_weights(bool valid, const bf16_t* row) override {
    top_->w_valid_i = valid;
    if (row)
      for (unsigned j = 0; j < cols_; ++j) top_->w_data_i[j] = row[j];
  }

  void set_activations(bool valid, const bf16_t* a, const uint32_t* acc_bits, bool acc,
                       bool last) override {
    top_->a_valid_i = valid;
    top_->a_acc_i = acc;
    top_->a_last_i = last;
    if (a)
      for (unsigned i = 0; i < rows_; ++i) top_->a_data_i[i] = a[i];
    if (acc_bits)
      for (unsigned j = 0; j < cols_; ++j) top_->acc_data_i[j] = acc_bits[j];
  }

  void set_out_ready(bool ready) override { top_->o_ready_i = ready; }

  void eval() override {
    use_context();
    top_->eval();
  }
  bool w_ready() const override { return top_->w_ready_o; }
  bool a_ready() const override { return top_->a_ready_o; }
  bool out_valid() const override { return top_->o_valid_o; }
  bool out_last() const override { return top_->o_last_o; }
  void out_data(uint32_t* bits) const override {
    for (unsigned j = 0; j < cols_; ++j) bits[j] = top_->o_data_o[j];
  }
  bool idle() const override { return top_->idle_o; }

  void tick() override {
    use_context();
    top_->clk_i = 1;
    top_->eval();
    ctx_->timeInc(1);
    if (fst_) fst_->dump(ctx_->time());
    top_->clk_i = 0;
    top_->eval();
    ctx_->timeInc(1);
    if (fst_) fst_->dump(ctx_->time());
    ++cycle_;
    if (ctx_->gotError()) {
      if (fst_) fst_->flush();
      throw RtlError("MXU " + variant_ + ": RTL assertion failed at cycle " +
                     std::to_string(cycle_) + " (see the message above)");
    }
  }

  void reset(unsigned cycles) override {
    use_context();
    top_->w_valid_i = 0;
    top_->a_valid_i = 0;
    top_->o_ready_i = 1;
    top_->rst_ni = 0;
    top_->eval();
    for (unsigned c = 0; c < cycles; ++c) tick();
    top_->rst_ni = 1;
    top_->eval();
  }

  uint64_t cycle() const override { return cycle_; }

  void open_waves(const std::string& path) override {
    if constexpr (!kTraced) {
      throw std::runtime_error(path + ": the " + variant_ +
                               " MXU is built without wave tracing (too large); use a smaller "
                               "variant for waves");
    } else {
      open_traced(path);
    }
  }

 private:
  // Verilator 5.006 reaches a model's context through a thread-local pointer in places (scope
  // teardown, $stop counting); with several models in one thread (a test, a pod), point it at
  // this model's context whenever this model runs, or teardown deadlocks.
  void use_context() { Verilated::threadContextp(ctx_.get()); }

  void open_traced(const std::string& path) {
    fst_.reset(new VerilatedFstC);
    top_->trace(fst_.get(), 99);
    fst_->open(path.c_str());
    if (!fst_->isOpen()) throw std::runtime_error(path + ": cannot open the wave file for writing");
    fst_->dump(ctx_->time());
  }

  std::string variant_;
  unsigned rows_, cols_;
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<VTop> top_;
  std::unique_ptr<VerilatedFstC> fst_;
  uint64_t cycle_ = 0;
};

}  // namespace tpu
