// matmul_plan: the three parts of the chip's HBM-resident matmul program (ChipDriver::plan_matmul,
// docs/chip.md): the tiler (tile counts, W panels, rows of A per chunk and the chunks), the
// on-chip layout (where A, the W panels, the results, the output, the bias and the mask sit in
// VMEM and AMEM, double-buffered), and the emitter (the ChipCmd words, ordered by a cost model so
// that the DMA and VPU work hides behind the MXU). Plain structs pass between them; none of them
// touches a chip or its HBM, so each can be tested alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "chip_driver.h"

namespace tpu {

// The product the tiler tiles: C (M x N) = A (M x K) x W (K x N, or N x K when transposed).
struct MatmulProblem {
  std::size_t m = 0, k = 0, n = 0;
  bool out_bf16 = false;      // C is bf16 (else f32)
  bool w_transposed = false;  // W is N x K, loaded with LOADW.transpose
  uint64_t vmem_rows = 0;     // the program may use VMEM rows [0, vmem_rows)
  // The HBM's bytes per cycle as configured (0: not known). Only below the chip's built peak
  // (channels x 32 B: a scale model's slowed HBM, docs/scale_models.md) does the tiler weigh
  // HBM traffic: a plan that streaming W would make HBM-bound keeps W resident instead.
  double hbm_bytes_per_cycle = 0;
};

// The tiler's choices. W moves in panels, PT per chunk of A, QT weight tiles each. Plain: a
// panel is a K tile (L rows of W, NT tiles). Transposed: GN N tiles (GN * L rows of w, all KT
// tiles of each), so that the DMA reads whole rows of w.
struct MatmulTiling {
  MatmulProblem p;
  uint64_t lanes = 0;               // L: the array is L x L
  uint64_t kt = 0, nt = 0;          // K tiles, N tiles (ceil(K / L), ceil(N / L))
  uint64_t nto = 0;                 // N tiles of a C row rounded up to whole 64-byte bursts
  uint32_t k_tail = 0, n_tail = 0;  // K % L, N % L
  // A transposed W's K edge tile: its lanes beyond K come in as -0 (the DMA's tail) and are
  // made +0 on the VPU (x 1 on the real lanes, x -0 on the others, from a mask row).
  bool t_mask = false;
  uint64_t gn = 1;                     // N tiles per panel (transposed; plain: 1)
  uint64_t pt = 0, qt = 0;             // panels per chunk, weight tiles per panel
  uint64_t ktm = 0;                    // transposed: K tiles of a panel row without the K edge tile
  bool w_resident = false;             // W loaded once (else two panel buffers, reloaded per chunk)
  uint64_t w_bufs = 0;                 // W panel buffers: PT when resident, else 2
  uint64_t mt = 0;                     // rows of A per chunk at most (0: the memories hold none)
  uint64_t gg = 0;                     // N tiles per output group: >= 256 bytes of a C row
  std::vector<uint64_t> c_rows, c_m0;  // each chunk's rows of A and first row
  // The cost model's MXU (docs/mxu.md): weight banks, rows loaded per cycle, cycles to load a
  // tile (twice as long transposed: the staging register fills first).
  uint64_t wbanks = 0, wrows = 0, load_cycles = 0;

  // Cycles the MXU spends per weight tile of a MATMUL of `rows` rows: a row per cycle; a bank is
  // busy for rows + R + C cycles and there are wbanks of them; the loader takes load_cycles plus
  // one to take the next LOADW.
  uint64_t tile_cycles(uint64_t rows) const;
  uint64_t panels() const { return w_resident ? pt : c_rows.size() * pt; }  // W panel DMAs
  uint64_t esize() const { return p.out_bf16 ? 2 : 4; }                     // bytes of a C element
  uint64_t group_size(uint64_t g) const { return std::min<uint64_t>(gg, nto - g * gg); }
};

// Tiles p for chip shape s: std::invalid_argument when M, K or N exceed a command's fields;
// mt == 0 when no chunk of A fits beside W in the on-chip memories (the caller names the chip).
MatmulTiling tile_matmul(const MatmulProblem& p, const ChipShape& s);

// Where the program keeps its tiles. VMEM: A[2] (mt x KT rows, row m*KT + kt), the W panel
// buffers (L x NT rows, row r*NT + nt; transposed: GN*L x KT', row r*KT' + kt for row r of the
// panel's rows of w, KT' = KTm, and the K edge tiles' GN*L rows after the others), out[2] (mt x
// NTo rows, group-major: group g of a chunk of `rows` rows at g0*rows + m*gs + (nt - g0)), the
// bias (NT rows), the transposed K edge mask (1 row). AMEM: C[2] (NT x mt rows, row nt*rows + m).
struct MatmulLayout {
  uint32_t a[2] = {0, 0};
  uint32_t w0 = 0;            // the first W panel buffer
  uint64_t w_panel_rows = 0;  // rows of one W panel buffer (L * QT)
  uint64_t w_bufs = 0;
  uint32_t out[2] = {0, 0};
  uint32_t bias = 0;
  uint32_t mask = 0;
  uint32_t c[2] = {0, 0};  // AMEM
  uint64_t vmem_end = 0;   // VMEM rows used: [0, vmem_end)
  uint64_t amem_end = 0;   // AMEM rows used: [0, amem_end)
  // The buffer of W panel p of the sequence over the chunks.
  uint32_t w(uint64_t p) const { return static_cast<uint32_t>(w0 + (p % w_bufs) * w_panel_rows); }
};

MatmulLayout layout_matmul(const MatmulTiling& t);

// The operands in HBM (byte addresses and pitches) and the epilogue.
struct MatmulOperands {
  uint64_t a_addr = 0, a_pitch = 0;
  uint64_t w_addr = 0, w_pitch = 0;
  uint64_t c_addr = 0, c_pitch = 0;
  bool has_bias = false;
  uint64_t bias_addr = 0;  // 1 x N f32
  bool relu = false;
  uint64_t zeros_addr = 0;  // a row of Nw bf16 +0 (a plain W's K edge tile's missing rows)
  uint64_t ones_addr = 0;   // a row of L bf16 ones (the transposed K edge mask)
};

// The program (ends with HALT): every command of the tiles, at the layout's rows.
std::vector<ChipCmd> emit_matmul(const MatmulTiling& t, const MatmulLayout& l,
                                 const MatmulOperands& o);

}  // namespace tpu
