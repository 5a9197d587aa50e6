// The SystemC model of the same MXU RTL (verilated with --sc, as the pod will use it) runs the
// same matmuls as the C++ model through the same runner, bit-exact against the golden.
#include <gtest/gtest.h>
#include <systemc.h>
#include <verilated.h>

#include <memory>
#include <random>

#include "Vtpu_mxu_sc_4x4.h"
#include "mxu_dut.h"
#include "mxu_runner.h"
#include "tpu/matmul.h"
#include "tpu_contract.h"

namespace tpu {
namespace {

// The shape of VariantId 0, the variant this model is verilated with (tests/system/CMakeLists.txt),
// from the contract's variant table (configs/tpu_contract.yaml).
constexpr ChipVariant variant_of(unsigned id) {
  for (const auto& v : kChipVariants)
    if (v.id == id) return v;
  return kChipVariants[0];
}
constexpr ChipVariant kVariant = variant_of(0);
constexpr unsigned kRows = kVariant.mxu_rows, kCols = kVariant.mxu_cols;
constexpr unsigned kWBanks = kVariant.mxu_wbanks, kWRows = kVariant.mxu_wrows;

// MxuDut over the SystemC model: signals in, clock edges by sc_start.
class MxuDutSc final : public MxuDut {
 public:
  MxuDutSc() : top_("mxu") {
    top_.clk_i(clk_);
    top_.rst_ni(rst_n_);
    top_.w_valid_i(w_valid_);
    top_.w_ready_o(w_ready_);
    top_.a_valid_i(a_valid_);
    top_.a_ready_o(a_ready_);
    top_.a_acc_i(a_acc_);
    top_.a_last_i(a_last_);
    top_.o_valid_o(o_valid_);
    top_.o_ready_i(o_ready_);
    top_.o_last_o(o_last_);
    top_.idle_o(idle_);
    for (unsigned i = 0; i < kRows; ++i) top_.a_data_i[i](a_data_[i]);
    for (unsigned j = 0; j < kWRows * kCols; ++j) top_.w_data_i[j](w_data_[j]);
    for (unsigned j = 0; j < kCols; ++j) {
      top_.acc_data_i[j](acc_data_[j]);
      top_.o_data_o[j](o_data_[j]);
    }
  }

  const std::string& variant() const override { return name_; }
  unsigned rows() const override { return kRows; }
  unsigned cols() const override { return kCols; }
  unsigned w_banks() const override { return kWBanks; }
  unsigned w_rows() const override { return kWRows; }

  void set_weights(bool valid, const bf16_t* rows) override {
    w_valid_.write(valid);
    if (rows)
      for (unsigned j = 0; j < kWRows * kCols; ++j) w_data_[j].write(rows[j]);
  }
  void set_activations(bool valid, const bf16_t* a, const uint32_t* acc_bits, bool acc,
                       bool last) override {
    a_valid_.write(valid);
    a_acc_.write(acc);
    a_last_.write(last);
    if (a)
      for (unsigned i = 0; i < kRows; ++i) a_data_[i].write(a[i]);
    if (acc_bits)
      for (unsigned j = 0; j < kCols; ++j) acc_data_[j].write(acc_bits[j]);
  }
  void set_out_ready(bool ready) override { o_ready_.write(ready); }

  // Runs delta cycles until signals settle (one sc_start(SC_ZERO_TIME) is one delta cycle).
  void eval() override {
    while (sc_pending_activity_at_current_time()) sc_start(SC_ZERO_TIME);
  }
  bool w_ready() const override { return w_ready_.read(); }
  bool a_ready() const override { return a_ready_.read(); }
  bool out_valid() const override { return o_valid_.read(); }
  bool out_last() const override { return o_last_.read(); }
  void out_data(uint32_t* bits) const override {
    for (unsigned j = 0; j < kCols; ++j) bits[j] = o_data_[j].read();
  }
  bool idle() const override { return idle_.read(); }

  void tick() override {
    clk_.write(true);
    sc_start(1, SC_NS);
    clk_.write(false);
    sc_start(1, SC_NS);
    ++cycle_;
    if (Verilated::threadContextp()->gotError())
      throw RtlError("SystemC MXU: RTL assertion failed at cycle " + std::to_string(cycle_));
  }
  void reset(unsigned cycles) override {
    w_valid_.write(false);
    a_valid_.write(false);
    o_ready_.write(true);
    rst_n_.write(false);
    for (unsigned c = 0; c < cycles; ++c) tick();
    rst_n_.write(true);
    eval();
  }
  uint64_t cycle() const override { return cycle_; }
  void open_waves(const std::string&, double) override {
    throw std::runtime_error("waves are not wired in the SystemC smoke test");
  }

 private:
  std::string name_ = "4x4 (SystemC)";
  Vtpu_mxu_sc_4x4 top_;
  sc_signal<bool> clk_{"clk"}, rst_n_{"rst_n"}, w_valid_{"w_valid"}, w_ready_{"w_ready"},
      a_valid_{"a_valid"}, a_ready_{"a_ready"}, a_acc_{"a_acc"}, a_last_{"a_last"},
      o_valid_{"o_valid"}, o_ready_{"o_ready"}, o_last_{"o_last"}, idle_{"idle"};
  sc_signal<uint32_t> w_data_[kWRows * kCols], a_data_[kRows], acc_data_[kCols], o_data_[kCols];
  uint64_t cycle_ = 0;
};

// One elaboration per process (SystemC cannot elaborate twice), so one test holds every case.
TEST(MxuSystemC, SameRtlAsSystemCModelIsBitExact) {
  Verilated::threadContextp()->fatalOnError(false);
  MxuDutSc dut;
  dut.reset(2);
  std::mt19937_64 rng(5);
  auto draw = [&]() {
    const auto e = static_cast<uint16_t>(rng() % 255);
    return static_cast<bf16_t>(((rng() & 1u) << 15) | (e << 7) | (rng() & 0x7Fu));
  };
  for (const MatmulShape sh : {MatmulShape{1, 4, 4}, MatmulShape{33, 9, 7}, MatmulShape{70, 13, 5}}) {
    std::vector<bf16_t> a(sh.m * sh.k), w(sh.k * sh.n);
    for (auto& x : a) x = draw();
    for (auto& x : w) x = draw();
    MxuRunOptions opt;
    opt.out_stall_prob = 0.2;
    const auto res = run_matmul(dut, sh, a, w, nullptr, opt);
    ASSERT_TRUE(res.completed);
    const auto want = golden_matmul(a, w, sh.m, sh.k, sh.n);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) bad += f32_bits(res.c[i]) != f32_bits(want[i]);
    EXPECT_EQ(bad, 0u) << "shape " << sh.m << "x" << sh.k << "x" << sh.n;
  }
}

}  // namespace
}  // namespace tpu

int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
