// The performance model: ideal cycles, rooflines, collective bandwidth bounds and MFU that every
// workload report compares its measured cycles against, and what a collective plan costs on the
// links. The one place these formulas live.
// All times are in cycles of the chip clock, all sizes in bytes. Bad input throws
// std::invalid_argument naming the parameter and the rule.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tpu/collective_plan.h"
#include "tpu/topology.h"

namespace tpu {

// ---- Matmul on one chip: C[M x N] = A[M x K] * W[K x N] on an R x C systolic array ----

// Weight tiles the array loads: ceil(K / R) * ceil(N / C).
uint64_t matmul_tiles(uint64_t k, uint64_t n, uint64_t rows, uint64_t cols);
// Ideal compute cycles: one activation beat per row of A per weight tile, M * ceil(K/R) * ceil(N/C)
// (weight loads and pipeline fill hidden).
uint64_t matmul_ideal_cycles(uint64_t m, uint64_t k, uint64_t n, uint64_t rows, uint64_t cols);
// Multiply-accumulates the problem needs: M * K * N (padding in partial tiles not counted).
uint64_t matmul_useful_macs(uint64_t m, uint64_t k, uint64_t n);
// MACs one R x C array can do per cycle: R * C.
uint64_t peak_macs_per_cycle(uint64_t rows, uint64_t cols);
// Cycles to move `bytes` at the peak HBM bandwidth: bytes / hbm_bytes_per_cycle.
double hbm_cycles(double bytes, double hbm_bytes_per_cycle);

// The roofline of one matmul on one chip: compute bound, HBM bound and the larger of the two.
struct MatmulBound {
  uint64_t tiles = 0;                // ceil(K/R) * ceil(N/C)
  uint64_t compute_cycles = 0;       // matmul_ideal_cycles
  uint64_t useful_macs = 0;          // M * K * N
  uint64_t peak_macs_per_cycle = 0;  // R * C
  double hbm_bytes = 0;              // bytes the matmul moves to and from HBM (as given)
  double hbm_cycles = 0;             // hbm_bytes / hbm_bytes_per_cycle
  double roofline_cycles = 0;        // max(compute_cycles, hbm_cycles)
  bool hbm_bound = false;            // hbm_cycles > compute_cycles
};
MatmulBound matmul_bound(uint64_t m, uint64_t k, uint64_t n, uint64_t rows, uint64_t cols,
                         double hbm_bytes, double hbm_bytes_per_cycle);

// Model FLOPs utilization: useful_macs / (chips * peak_macs_per_cycle * cycles), in [0, 1] for
// a real run. cycles is the measured (wall-clock) cycle count of the whole workload.
double mfu(uint64_t useful_macs, int chips, uint64_t peak_macs_per_cycle, uint64_t cycles);

// ---- Collectives (nccl-tests doc/PERFORMANCE.md) ----
//
// S, `bytes` below, is the per-chip buffer size as nccl-tests defines it: all-reduce and
// broadcast: the buffer; reduce-scatter: the whole input (p x each chip's output); all-gather:
// the whole gathered output (p x each chip's input); all-to-all: each chip's buffer.

// Bus-bandwidth factor: all-reduce 2(p-1)/p; reduce-scatter, all-gather, all-to-all (p-1)/p;
// broadcast 1.
double busbw_factor(Collective c, int chips);
// Algorithm bandwidth, bytes per cycle: S / t.
double algbw(double bytes, double cycles);
// Bus bandwidth, bytes per cycle: algbw * busbw_factor, comparable to one chip's link bandwidth.
double busbw(Collective c, int chips, double bytes, double cycles);

// Links the topology gives its best-connected chip (the bound's L): per dimension with k > 1
// chips, a ring gives 2 (a 2-chip ring too: two links between the same two chips) and a line
// gives its interior chips 2 (a 2-chip line has no interior chip: 1). ring8: 2, torus4x4x4: 6,
// mesh3x3: 4. Compare allreduce_links_per_chip(), the links one algorithm keeps busy.
int topology_links_per_chip(const Topology& topo);
// Links chip `chip` has: as above, except that an end chip of a line has 1 in that dimension.
int chip_links(const Topology& topo, int chip);
// The links per chip an all-reduce algorithm keeps busy: ring 1, biring 2, torus and direct
// 2 * active dims (the `links` of collective_ici_cycles for that algorithm's bound).
int allreduce_links_per_chip(const Topology& topo, const std::string& algorithm);
// The same for an all-reduce within the groups of `group_dims` (its group_topology; the bound's
// chip count is then group_size).
int allreduce_links_per_chip(const Topology& topo, const std::vector<int>& group_dims,
                             const std::string& algorithm);

// Bandwidth lower bound on the ICI, cycles: factor * S / (links * link_bytes_per_cycle), every
// chip sending on `links` links at once. Broadcast (factor 1): the root must send S once, spread
// over its links. One chip: 0 (nothing moves), and links may then be 0.
double collective_ici_cycles(Collective c, int chips, double bytes, int links,
                             double link_bytes_per_cycle);
// How many times the bound's bytes (S in the dtype) the transfers carry when a bf16 reduction
// sends f32 partials (docs/collectives.md, Numerics): a bf16 all-reduce 1.5 (the reduce-scatter
// half in f32, the all-gather half in bf16), a bf16 reduce-scatter 2; 1 otherwise. The bound
// for what such a collective must send is this times collective_ici_cycles.
double partials_factor(Collective c, DType dtype);
// Bytes one chip at least reads from and writes to HBM when the collective streams its buffers
// from HBM and back: its input once plus its output once. all-reduce, all-to-all: 2S;
// reduce-scatter: S + S/p; all-gather: S/p + S; broadcast: S (root reads it, others write it).
double collective_hbm_bytes(Collective c, int chips, double bytes);

// The bounds of one collective: on the links, on HBM, and the larger of the two.
struct CollectiveBound {
  double factor = 0;        // busbw_factor
  double ici_cycles = 0;    // collective_ici_cycles
  double hbm_bytes = 0;     // bytes read + written per chip (as given)
  double hbm_cycles = 0;    // hbm_bytes / hbm_bytes_per_cycle
  double ideal_cycles = 0;  // max(ici_cycles, hbm_cycles)
  bool hbm_bound = false;   // hbm_cycles > ici_cycles
};
// hbm_bytes: what one chip reads + writes (collective_hbm_bytes() for the minimum).
CollectiveBound collective_bound(Collective c, int chips, double bytes, int links,
                                 double link_bytes_per_cycle, double hbm_bytes,
                                 double hbm_bytes_per_cycle);

// ---- What one collective plan costs on the links ----

// One direction of one physical link: leaving `chip` in dimension `dim`, direction `dir`.
struct DirectedLink {
  int chip = 0;
  int dim = 0;
  int dir = +1;
  bool operator<(const DirectedLink& o) const {
    return std::array<int, 3>{chip, dim, dir} < std::array<int, 3>{o.chip, o.dim, o.dir};
  }
  bool operator==(const DirectedLink& o) const {
    return chip == o.chip && dim == o.dim && dir == o.dir;
  }
};

// Every directed link of the topology (both directions of every ring and line link).
std::vector<DirectedLink> topology_links(const Topology& topo);

// The bytes a plan puts on each link (CollectivePlan::transfer_bytes over every hop of a route).
struct PlanCost {
  std::size_t steps = 0;
  std::map<DirectedLink, uint64_t> link_bytes;  // over the whole plan, links that carry data
  std::vector<std::map<DirectedLink, uint64_t>> step_link_bytes;  // per step
  std::vector<uint64_t> step_max_link_bytes;                      // per step, the busiest link
  uint64_t max_link_bytes = 0;
  // Lower estimate of the plan's cycles on links of `link_bytes_per_cycle` each: the steps run
  // one after the other, each as long as its busiest link (latency and the VPU ignored).
  double link_cycles(double link_bytes_per_cycle) const;
};
// Throws std::invalid_argument for a route that leaves the topology.
PlanCost plan_cost(const CollectivePlan& plan);

}  // namespace tpu
