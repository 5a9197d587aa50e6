#include "mxu_runner.h"

#include <deque>
#include <random>
#include <stdexcept>
#include <string>

namespace tpu {

namespace {

// K padding uses W = -0.0 and A = +0.0: the product is -0 and x + (-0) == x for every x, so a
// padded step is an exact identity (docs/numerics.md). N padding is never read back.
constexpr bf16_t kPadW = 0x8000;
constexpr bf16_t kPadA = 0x0000;

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace

MxuRunResult run_matmul(MxuDut& dut, const MatmulShape& shape, const std::vector<bf16_t>& a,
                        const std::vector<bf16_t>& w, const std::vector<float>* acc_init,
                        const MxuRunOptions& opt) {
  const std::size_t M = shape.m, K = shape.k, N = shape.n;
  const std::size_t R = dut.rows(), C = dut.cols(), WR = dut.w_rows();
  if (M == 0 || K == 0 || N == 0) throw std::invalid_argument("matmul: M, K and N must be >= 1");
  if (a.size() != M * K) throw std::invalid_argument("matmul: A must hold M x K values");
  if (w.size() != K * N) throw std::invalid_argument("matmul: W must hold K x N values");
  if (acc_init && acc_init->size() != M * N)
    throw std::invalid_argument("matmul: the accumulator must hold M x N values");

  const std::size_t KT = ceil_div(K, R), NT = ceil_div(N, C), T = KT * NT;
  // Tile t = kt * NT + nt: all N tiles of one K step, then the next K step, so that the result a
  // K tile needs was produced NT tiles earlier and small M still streams without waiting.
  auto tile_kt = [&](std::size_t t) { return t / NT; };
  auto tile_nt = [&](std::size_t t) { return t % NT; };

  MxuRunResult res;
  MxuRunStats& st = res.stats;
  st.tiles = T;
  st.ideal_cycles = static_cast<uint64_t>(M) * T;
  st.macs_useful = static_cast<uint64_t>(M) * K * N;

  std::vector<uint32_t> part(M * NT * C, 0);  // latest result row per (m, nt)
  std::vector<std::size_t> outs(T, 0);        // results taken per tile

  std::size_t w_t = 0, w_i = 0;  // next weight row to offer
  std::size_t a_t = 0, a_m = 0;  // next activation row to offer
  std::size_t o_t = 0, o_m = 0;  // next result expected
  std::vector<bf16_t> wrow(WR * C), arow(R);
  std::vector<uint32_t> accrow(C), orow(C);

  bool w_offered = false, a_offered = false;  // offered last cycle and not yet taken
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto chance = [&](double p) { return p > 0.0 && u01(rng) < p; };

  const uint64_t start = dut.cycle();
  uint64_t last_progress = start, last_report = start;
  const uint64_t rows_total = static_cast<uint64_t>(M) * T;

  while (o_t < T) {
    const uint64_t now = dut.cycle();
    if (opt.stop_after && now - start >= opt.stop_after) break;
    if (now - last_progress > opt.watchdog) {
      throw RtlError("MXU " + dut.variant() + ": no handshake for " +
                     std::to_string(opt.watchdog) + " cycles (hung at result " +
                     std::to_string(o_t * M + o_m) + " of " + std::to_string(rows_total) + ")");
    }
    if (opt.progress && now - last_report >= opt.progress_every) {
      opt.progress(o_t * M + o_m, rows_total);
      last_report = now;
    }

    // Weights: rows w_i .. w_i + WR - 1 of tile w_t. A beat once offered stays offered until
    // taken (valid/ready).
    const bool w_valid = w_t < T && (w_offered || !chance(opt.in_gap_prob));
    if (w_valid) {
      for (std::size_t r = 0; r < WR; ++r) {
        const std::size_t k = tile_kt(w_t) * R + w_i + r, n0 = tile_nt(w_t) * C;
        for (std::size_t j = 0; j < C; ++j) {
          const std::size_t n = n0 + j;
          wrow[r * C + j] = (k < K && n < N) ? w[k * N + n] : (k < K ? bf16_t{0} : kPadW);
        }
      }
    }
    dut.set_weights(w_valid, w_valid ? wrow.data() : nullptr);

    // Activations: row a_m of tile a_t, once the running sum it continues is available.
    bool a_valid = false, acc_en = false;
    if (a_t < T) {
      const std::size_t kt = tile_kt(a_t), nt = tile_nt(a_t);
      const bool dep_ready = kt == 0 || outs[a_t - NT] > a_m;
      if (dep_ready && (a_offered || !chance(opt.in_gap_prob))) {
        a_valid = true;
        for (std::size_t i = 0; i < R; ++i) {
          const std::size_t k = kt * R + i;
          arow[i] = k < K ? a[a_m * K + k] : kPadA;
        }
        if (kt > 0) {
          acc_en = true;
          for (std::size_t j = 0; j < C; ++j) accrow[j] = part[(a_m * NT + nt) * C + j];
        } else if (acc_init) {
          acc_en = true;
          for (std::size_t j = 0; j < C; ++j) {
            const std::size_t n = nt * C + j;
            accrow[j] = n < N ? f32_bits((*acc_init)[a_m * N + n]) : 0u;
          }
        }
      }
    }
    dut.set_activations(a_valid, a_valid ? arow.data() : nullptr,
                        acc_en ? accrow.data() : nullptr, acc_en, a_valid && a_m + 1 == M);

    const bool o_ready = !chance(opt.out_stall_prob);
    dut.set_out_ready(o_ready);
    dut.eval();

    const bool w_fire = w_valid && dut.w_ready();
    const bool a_fire = a_valid && dut.a_ready();
    const bool o_fire = dut.out_valid() && o_ready;
    if (dut.out_valid() && !o_ready) ++st.out_stalls;
    if (o_fire) {
      if (dut.out_last() != (o_m + 1 == M))
        throw RtlError("MXU " + dut.variant() + ": result 'last' flag out of step with the rows");
      dut.out_data(orow.data());
      const std::size_t nt = tile_nt(o_t);
      for (std::size_t j = 0; j < C; ++j) part[(o_m * NT + nt) * C + j] = orow[j];
    }

    dut.tick();
    w_offered = w_valid && !w_fire;
    a_offered = a_valid && !a_fire;

    if (w_fire) {
      ++st.w_beats;
      w_i += WR;
      if (w_i == R) w_i = 0, ++w_t;
    }
    if (a_fire) {
      ++st.a_beats;
      if (++a_m == M) a_m = 0, ++a_t;
    }
    if (o_fire) {
      ++outs[o_t];
      if (++o_m == M) o_m = 0, ++o_t;
    }
    if (w_fire || a_fire || o_fire) last_progress = dut.cycle();
  }

  st.cycles = dut.cycle() - start;
  res.completed = o_t == T;
  if (st.cycles > 0) {
    st.utilization = static_cast<double>(st.ideal_cycles) / static_cast<double>(st.cycles);
    st.mfu = static_cast<double>(st.macs_useful) /
             (static_cast<double>(st.cycles) * static_cast<double>(R * C));
  }
  if (res.completed) {
    // The last K step of each N tile holds the finished sums.
    res.c.assign(M * N, 0.0f);
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t n = 0; n < N; ++n)
        res.c[m * N + n] = f32_from_bits(part[(m * NT + n / C) * C + n % C]);
  }
  return res;
}

}  // namespace tpu
