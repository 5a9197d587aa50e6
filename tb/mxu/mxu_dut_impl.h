// MxuDutImpl<VTop, kTraced>: MxuDut over one verilated tpu_mxu_top class (one per variant).
// kTraced says whether the model was verilated with FST tracing (the 128x128 array is not: its
// trace code alone would be hundreds of megabytes of C++).
#pragma once

#include <string>

#include "mxu_dut.h"
#include "verilated_model.h"

namespace tpu {

template <class VTop, bool kTraced = true>
class MxuDutImpl final : public MxuDut {
 public:
  MxuDutImpl(std::string variant, unsigned rows, unsigned cols, unsigned w_banks, unsigned w_rows)
      : variant_(std::move(variant)), rows_(rows), cols_(cols), w_banks_(w_banks), w_rows_(w_rows) {
    m_->rst_ni = 1;
    m_.eval();
    reset(2);
  }

  const std::string& variant() const override { return variant_; }
  unsigned rows() const override { return rows_; }
  unsigned cols() const override { return cols_; }
  unsigned w_banks() const override { return w_banks_; }
  unsigned w_rows() const override { return w_rows_; }

  void set_weights(bool valid, const bf16_t* rows) override {
    m_->w_valid_i = valid;
    if (rows)
      for (unsigned j = 0; j < w_rows_ * cols_; ++j) m_->w_data_i[j] = rows[j];
  }

  void set_activations(bool valid, const bf16_t* a, const uint32_t* acc_bits, bool acc,
                       bool last) override {
    m_->a_valid_i = valid;
    m_->a_acc_i = acc;
    m_->a_last_i = last;
    if (a)
      for (unsigned i = 0; i < rows_; ++i) m_->a_data_i[i] = a[i];
    if (acc_bits)
      for (unsigned j = 0; j < cols_; ++j) m_->acc_data_i[j] = acc_bits[j];
  }

  void set_out_ready(bool ready) override { m_->o_ready_i = ready; }

  void eval() override { m_.eval(); }
  bool w_ready() const override { return m_->w_ready_o; }
  bool a_ready() const override { return m_->a_ready_o; }
  bool out_valid() const override { return m_->o_valid_o; }
  bool out_last() const override { return m_->o_last_o; }
  void out_data(uint32_t* bits) const override {
    for (unsigned j = 0; j < cols_; ++j) bits[j] = m_->o_data_o[j];
  }
  bool idle() const override { return m_->idle_o; }

  void tick() override {
    if (!m_.tick())
      throw RtlError("MXU " + variant_ + ": RTL assertion failed at cycle " +
                     std::to_string(m_.cycle()) + " (see the message above)");
  }

  void reset(unsigned cycles) override {
    m_->w_valid_i = 0;
    m_->a_valid_i = 0;
    m_->o_ready_i = 1;
    if (!m_.reset(cycles))
      throw RtlError("MXU " + variant_ + ": RTL assertion failed during reset");
  }

  uint64_t cycle() const override { return m_.cycle(); }

  void open_waves(const std::string& path, double clock_ghz) override {
    m_.open_waves(path, "the " + variant_ + " MXU", clock_ghz);
  }

 private:
  std::string variant_;
  unsigned rows_, cols_, w_banks_, w_rows_;
  VerilatedModel<VTop, kTraced> m_;
};

}  // namespace tpu
