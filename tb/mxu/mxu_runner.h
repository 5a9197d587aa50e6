// Runs a whole bf16 matmul on a bare MXU: tiles K and N for the array, pads, streams weight tiles
// and activation rows back to back, chains K tiles through the accumulator input, and collects
// the results. The one place that knows how a matmul maps onto the array.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mxu_dut.h"

namespace tpu {

struct MatmulShape {
  std::size_t m = 0;  // rows of A and C
  std::size_t k = 0;  // columns of A, rows of W
  std::size_t n = 0;  // columns of W and C
};

struct MxuRunOptions {
  double in_gap_prob = 0.0;     // chance per cycle that a ready input is held back (bubbles)
  double out_stall_prob = 0.0;  // chance per cycle that the result port is not ready
  uint64_t seed = 1;            // seed of the two random processes above
  uint64_t stop_after = 0;      // stop after this many cycles, unfinished (0: run to the end)
  uint64_t watchdog = 100000;   // cycles without any handshake before the run is declared hung
  // Called about every `progress_every` cycles with (rows done, rows total).
  std::function<void(uint64_t, uint64_t)> progress;
  uint64_t progress_every = 1u << 20;
};

struct MxuRunStats {
  uint64_t cycles = 0;        // from the first weight beat offered to the last result taken
  uint64_t ideal_cycles = 0;  // one cycle per activation beat: M x tiles
  uint64_t tiles = 0;         // weight tiles: ceil(K / rows) x ceil(N / cols)
  uint64_t a_beats = 0;       // activation rows accepted
  uint64_t w_beats = 0;       // weight beats accepted (w_rows() rows each)
  uint64_t out_stalls = 0;    // cycles a result waited on the result port
  uint64_t macs_useful = 0;   // M x K x N
  double utilization = 0.0;   // ideal_cycles / cycles: how busy the array was kept
  double mfu = 0.0;           // macs_useful / (cycles x rows x cols): padding waste included
};

struct MxuRunResult {
  bool completed = false;
  std::vector<float> c;  // M x N, row-major
  MxuRunStats stats;
};

// C = A x W (+ acc_init when given), A: M x K bf16, W: K x N bf16, row-major.
MxuRunResult run_matmul(MxuDut& dut, const MatmulShape& shape, const std::vector<bf16_t>& a,
                        const std::vector<bf16_t>& w, const std::vector<float>* acc_init,
                        const MxuRunOptions& opt = {});

}  // namespace tpu
