#include "vpu_tb.h"

#include <cmath>
#include <deque>
#include <random>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "../common/wave_clock.h"
#include "verilated.h"
#include "verilated_fst_c.h"
#include "vpu_variants.h"  // generated: TPU_VPU_VARIANTS(X) and the Vvpu<N>.h includes

namespace tpu {

namespace {

// Verilator keeps a port of up to 64 bits in an integer and a wider one in a VlWide of 32-bit
// words; these write lane `i` (of `bits` bits) either way.
template <class T>
void put_field(T& port, std::size_t i, unsigned bits, uint32_t v) {
  if constexpr (std::is_integral_v<T>) {
    const unsigned sh = static_cast<unsigned>(i) * bits;
    const T field = static_cast<T>((bits >= 32 ? ~0ull : ((1ull << bits) - 1)) << sh);
    port = static_cast<T>((port & ~field) | ((static_cast<T>(v) << sh) & field));
  } else if (bits == 32) {
    port.at(i) = v;
  } else {
    const std::size_t bit = i * bits;
    const uint32_t m = ((1u << bits) - 1u) << (bit % 32);
    port.at(bit / 32) = (port.at(bit / 32) & ~m) | ((v << (bit % 32)) & m);
  }
}

template <class T>
uint32_t get_word(const T& port, std::size_t i) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint32_t>(static_cast<uint64_t>(port) >> (32 * i));
  } else {
    return port.at(i);
  }
}

uint32_t lane_or_zero(const std::vector<uint32_t>& v, std::size_t l) {
  return v.empty() ? 0u : v[l];
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The verilated model, one per lane count, behind one interface.
// ------------------------------------------------------------------------------------------------
struct VpuTb::Dut {
  virtual ~Dut() = default;
  virtual std::size_t lanes() const = 0;
  virtual void drive(bool rst_n, bool in_valid, const VpuBeat* beat, bool out_ready) = 0;
  virtual void eval_clk(bool clk, uint64_t time) = 0;
  virtual bool in_ready() const = 0;
  virtual bool out_valid() const = 0;
  virtual bool idle() const = 0;
  virtual VpuResult out_beat() const = 0;
  virtual void open_waves(const std::string& path, double clock_ghz) = 0;
  virtual void dump(uint64_t time) = 0;
  virtual void close_waves() = 0;
  virtual uint64_t errors() const = 0;
};

namespace {

template <class V, std::size_t kLanes>
class DutImpl final : public VpuTb::Dut {
 public:
  DutImpl() : ctx_(std::make_unique<VerilatedContext>()) {
    ctx_->traceEverOn(true);  // tracing may be switched on for this model later
    // A failing SVA counts an error and goes on; the harness turns the count into an exception.
    ctx_->errorLimit(1 << 30);
    top_ = std::make_unique<V>(ctx_.get(), "TOP");
  }
  ~DutImpl() override {
    // Verilator reaches the model's context through a thread-local pointer in places (scope
    // teardown, $stop counting); point it at this model's context whenever this model runs,
    // since a test may hold several harnesses.
    Verilated::threadContextp(ctx_.get());
    top_->final();
    close_waves();
    top_.reset();
  }
  std::size_t lanes() const override { return kLanes; }

  void drive(bool rst_n, bool in_valid, const VpuBeat* b, bool out_ready) override {
    top_->rst_ni = rst_n;
    top_->in_valid_i = in_valid;
    top_->out_ready_i = out_ready;
    if (b == nullptr) return;  // payload keeps its last value when nothing is queued
    top_->in_op_i = static_cast<uint8_t>(b->op);
    top_->in_src_bf16_i = b->src_bf16 & 7u;
    top_->in_dst_bf16_i = b->dst_bf16;
    top_->in_first_i = b->first;
    top_->in_last_i = b->last;
    for (std::size_t l = 0; l < kLanes; ++l) {
      put_field(top_->in_mask_i, l, 1, b->mask.empty() || b->mask[l] ? 1u : 0u);
      put_field(top_->in_x_i, l, 32, b->x[l]);
      put_field(top_->in_y_i, l, 32, lane_or_zero(b->y, l));
      put_field(top_->in_z_i, l, 32, lane_or_zero(b->z, l));
    }
  }
  void eval_clk(bool clk, uint64_t time) override {
    Verilated::threadContextp(ctx_.get());  // see ~DutImpl
    ctx_->time(time);                       // SVA messages report the wave time
    top_->clk_i = clk;
    top_->eval();
  }
  bool in_ready() const override { return top_->in_ready_o != 0; }
  bool out_valid() const override { return top_->out_valid_o != 0; }
  bool idle() const override { return top_->idle_o != 0; }
  VpuResult out_beat() const override {
    VpuResult r;
    r.scalar = top_->out_scalar_o != 0;
    r.data.resize(kLanes);
    for (std::size_t l = 0; l < kLanes; ++l) r.data[l] = get_word(top_->out_data_o, l);
    return r;
  }
  void open_waves(const std::string& path, double clock_ghz) override {
    wave_ = WaveClock::at(clock_ghz);
    tfp_ = std::make_unique<VerilatedFstC>();
    top_->trace(tfp_.get(), 99);
    tfp_->open(path.c_str());
    if (!tfp_->isOpen()) throw std::runtime_error("VpuTb: cannot open wave file " + path);
  }
  // `time` counts 10 per cycle, the clock low from 0 and high from 5: dumped so that the rising
  // edge ending cycle n is at (n + 1) x the period of a clock_ghz clock (tb/common/wave_clock.h).
  void dump(uint64_t time) override {
    if (tfp_)
      tfp_->dump(static_cast<uint64_t>(
          std::llround(static_cast<double>(time + 5) / 10.0 * wave_.period_ps)));
  }
  void close_waves() override {
    if (tfp_) tfp_->close();
    tfp_.reset();
  }
  uint64_t errors() const override { return static_cast<uint64_t>(ctx_->errorCount()); }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<V> top_;
  std::unique_ptr<VerilatedFstC> tfp_;
  WaveClock wave_;  // the dump's clock
};

std::unique_ptr<VpuTb::Dut> make_dut(std::size_t lanes) {
#define TPU_VPU_MAKE(n, cls) \
  if (lanes == (n)) return std::make_unique<DutImpl<cls, (n)>>();
  TPU_VPU_VARIANTS(TPU_VPU_MAKE)
#undef TPU_VPU_MAKE
  std::ostringstream msg;
  msg << "VpuTb: no VPU variant with " << lanes << " lanes was built (built:";
  for (std::size_t l : VpuTb::built_lanes()) msg << ' ' << l;
  msg << "); add it to the CMake cache variable TPU_VPU_LANES and rebuild";
  throw std::invalid_argument(msg.str());
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Harness
// ------------------------------------------------------------------------------------------------
struct VpuTb::State {
  VpuTbOptions opt;
  std::mt19937_64 rng;
  std::uniform_real_distribution<double> coin{0.0, 1.0};
  std::deque<VpuBeat> queue;
  bool offering = false;  // the source has raised in_valid for queue.front()
  uint64_t expected_outputs = 0;
  std::vector<VpuResult> outputs;
  std::vector<uint64_t> out_cycles, in_cycles;
  VpuTbStats stats;
  uint64_t time = 0;  // wave time: 10 units per cycle, rising edge at +5
};

std::vector<std::size_t> VpuTb::built_lanes() {
  std::vector<std::size_t> v;
#define TPU_VPU_LIST(n, cls) v.push_back(n);
  TPU_VPU_VARIANTS(TPU_VPU_LIST)
#undef TPU_VPU_LIST
  return v;
}

VpuTb::VpuTb(const VpuTbOptions& opt) : dut_(make_dut(opt.lanes)), st_(std::make_unique<State>()) {
  st_->opt = opt;
  st_->rng.seed(opt.seed);
  if (!opt.wave_path.empty()) dut_->open_waves(opt.wave_path, opt.clock_ghz);
  // Asynchronous reset for two cycles, inputs idle.
  for (int i = 0; i < 2; ++i) {
    dut_->drive(false, false, nullptr, false);
    dut_->eval_clk(false, st_->time);
    dut_->dump(st_->time);
    dut_->eval_clk(true, st_->time + 5);
    dut_->dump(st_->time + 5);
    st_->time += 10;
  }
  dut_->drive(true, false, nullptr, false);
}

VpuTb::~VpuTb() = default;

std::size_t VpuTb::lanes() const { return dut_->lanes(); }

void VpuTb::push(const VpuBeat& beat) {
  const std::size_t n = lanes();
  const auto ok = [n](std::size_t s) { return s == 0 || s == n; };
  if (beat.x.size() != n || !ok(beat.y.size()) || !ok(beat.z.size()) || !ok(beat.mask.size())) {
    throw std::invalid_argument("VpuTb::push: operand vectors must have lanes() entries");
  }
  st_->queue.push_back(beat);
  if (!vpu_op_is_reduction(beat.op) || beat.last) ++st_->expected_outputs;
}

void VpuTb::tick() {
  State& s = *st_;
  // Read inputs: what the source and the sink do this cycle.
  if (!s.offering && !s.queue.empty() && s.coin(s.rng) < s.opt.in_valid_prob) s.offering = true;
  const bool out_ready = s.coin(s.rng) < s.opt.out_ready_prob;
  dut_->drive(true, s.offering, s.queue.empty() ? nullptr : &s.queue.front(), out_ready);
  // Evaluate: settle the combinational outputs, sample both handshakes, then the rising edge.
  dut_->eval_clk(false, s.time);
  dut_->dump(s.time);
  const bool in_fire = s.offering && dut_->in_ready();
  const bool out_valid = dut_->out_valid();
  const bool out_fire = out_valid && out_ready;
  if (out_fire) {
    s.outputs.push_back(dut_->out_beat());
    s.out_cycles.push_back(s.stats.cycles);
  }
  dut_->eval_clk(true, s.time + 5);
  dut_->dump(s.time + 5);
  // Write outputs: retire what was taken, count.
  if (in_fire) {
    s.queue.pop_front();
    s.offering = false;
    s.in_cycles.push_back(s.stats.cycles);
  }
  s.stats.in_beats += in_fire ? 1 : 0;
  s.stats.out_beats += out_fire ? 1 : 0;
  s.stats.in_stall_cycles += (s.offering && !in_fire) ? 1 : 0;
  s.stats.out_stall_cycles += (out_valid && !out_ready) ? 1 : 0;
  ++s.stats.cycles;
  s.time += 10;
  if (dut_->errors() != 0) {
    throw std::runtime_error("VpuTb: an SVA assertion of tpu_vpu failed by cycle " +
                             std::to_string(s.stats.cycles) + " (message above)");
  }
}

void VpuTb::drain(uint64_t max_cycles) {
  for (uint64_t i = 0; i < max_cycles; ++i) {
    if (st_->queue.empty() && st_->outputs.size() == st_->expected_outputs) return;
    tick();
  }
  if (st_->queue.empty() && st_->outputs.size() == st_->expected_outputs) return;
  throw std::runtime_error("VpuTb::drain: not drained after " + std::to_string(max_cycles) +
                           " cycles");
}

const std::vector<VpuResult>& VpuTb::outputs() const { return st_->outputs; }
const std::vector<uint64_t>& VpuTb::out_cycles() const { return st_->out_cycles; }
const std::vector<uint64_t>& VpuTb::in_cycles() const { return st_->in_cycles; }
const VpuTbStats& VpuTb::stats() const { return st_->stats; }
bool VpuTb::idle() const { return dut_->idle(); }
void VpuTb::close_waves() { dut_->close_waves(); }

}  // namespace tpu
