// Harness around the verilated vector unit (rtl/tpu_vpu.sv): queue input beats, clock the unit
// with optional random stalls on either handshake, collect the output beats, dump FST waves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tpu/vector.h"

namespace tpu {

// How a VpuTb is built and driven.
struct VpuTbOptions {
  std::size_t lanes = 4;        // lane count: one of the variants built (TPU_VPU_LANES)
  std::string wave_path;        // FST file to dump every cycle into; empty: no dump
  double clock_ghz = 1.0;       // the dump's clock: the rising edge ending cycle n at (n+1)/GHz ns
  double in_valid_prob = 1.0;   // chance per cycle that the source offers its next queued beat
  double out_ready_prob = 1.0;  // chance per cycle that the sink is ready (back-pressure)
  uint64_t seed = 1;            // seed of the stall pattern
};

// Handshake counters of one run.
struct VpuTbStats {
  uint64_t cycles = 0;            // clock cycles since reset
  uint64_t in_beats = 0;          // input beats taken
  uint64_t out_beats = 0;         // output beats taken
  uint64_t in_stall_cycles = 0;   // in_valid && !in_ready
  uint64_t out_stall_cycles = 0;  // out_valid && !out_ready
};

// One verilated VPU, reset on construction. The source holds a beat it has offered until the
// unit takes it, and the sink samples outputs only on out_valid && out_ready, as the protocol
// requires; the SVA in the RTL checks both sides every cycle.
class VpuTb {
 public:
  // Throws std::invalid_argument when no variant of `opt.lanes` lanes was built; the message
  // lists the built ones and the CMake cache variable that adds more.
  explicit VpuTb(const VpuTbOptions& opt);
  ~VpuTb();
  VpuTb(const VpuTb&) = delete;
  VpuTb& operator=(const VpuTb&) = delete;

  static std::vector<std::size_t> built_lanes();
  std::size_t lanes() const;

  void push(const VpuBeat& beat);  // queue one input beat (x, y, z, mask sized to lanes())
  void tick();                     // one clock cycle
  // Ticks until every queued beat is taken and every output it produces is collected; throws
  // std::runtime_error if that takes more than max_cycles.
  void drain(uint64_t max_cycles = 1000000);
  // Output beats collected so far (in order), and the cycle each was taken in / each input was.
  const std::vector<VpuResult>& outputs() const;
  const std::vector<uint64_t>& out_cycles() const;
  const std::vector<uint64_t>& in_cycles() const;
  const VpuTbStats& stats() const;
  bool idle() const;   // the unit's idle_o after the last clock edge
  void close_waves();  // flush and close the FST file (the destructor does it too)

  struct Dut;  // the verilated model behind a lane-count-independent interface

 private:
  std::unique_ptr<Dut> dut_;
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace tpu
