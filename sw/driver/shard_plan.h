// The sharding planner of a matmul Y[M x N] = X[M x K] @ W[K x N] over a named mesh
// (docs/sharding.md): from the partition specs of X, W and Y it picks, the way GSPMD does, what
// each chip stores, what it gathers before the matmul, which block of the product it computes,
// and which collective turns the chips' products into Y's spec. Pure: no RTL, no HBM addresses
// (ShardedMatmul in sharded_matmul.h lays the plan out on a machine).
//
// The rules, in order:
//  1. Contracting dimension K. If X and W split K over the same axis (or neither splits it), the
//     chips use their K blocks as stored. Otherwise W adapts: a W split on K over an axis X does
//     not use is met by slicing X's K locally (free); any other W split on K is all-gathered. A
//     W still replicated on K while X splits K over `a` is sliced on K over `a` (if W splits N
//     over `a` too, W is first all-gathered on N). K split over an axis: the chips compute
//     partial sums, reduced over that axis after the matmul.
//  2. Non-contracting dimensions. X's M axis and W's N axis must differ in the product; when
//     they are the same axis, W is all-gathered on N.
//  3. Y's spec (default: X's M axis on rows, W's N axis on columns, partial sums all-reduced).
//     A dimension the product splits and Y replicates is all-gathered (rows: Y after the
//     matmul; columns: W before it); a dimension the product replicates and Y splits is sliced
//     locally (X's rows, W's columns); K partial sums go to Y by a reduce-scatter over the K axis
//     on the dimension Y splits over it, or an all-reduce when Y does not split over it.
// Shapes that do not divide are padded with zeros: a split dimension to a multiple of its axis
// size, and a split column dimension (K of X, N of W and Y) so that each block is a whole number
// of 32 elements (64-byte rows of bf16, the DMA's alignment).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "tpu/collective.h"

namespace tpu {

// A partition spec of a 2-D tensor: for each dimension, the mesh axis it is split over, or ""
// (replicated; written "-").
struct PSpec {
  std::array<std::string, 2> d;
  std::string text() const;  // "data,-"
  bool operator==(const PSpec& o) const { return d == o.d; }
};
// Parses "data,-" / "-,model" / "-,-". `flag` names the option in errors. Throws
// std::invalid_argument: not two entries, an empty entry, a name not of letters, digits and '_'.
PSpec parse_pspec(const std::string& text, const std::string& flag);

// A half-open range of a padded dimension.
struct Range {
  std::size_t lo = 0, hi = 0;
  std::size_t size() const { return hi - lo; }
  bool operator==(const Range& o) const { return lo == o.lo && hi == o.hi; }
};

// One collective of the plan.
struct ShardCollective {
  Collective kind = Collective::kAllGather;
  std::string axis;       // the mesh axis it runs over (in every group of that axis at once)
  std::vector<int> dims;  // the torus dimensions of the axis (CollectiveSpec::group_dims)
  char tensor = 'W';      // 'W' (before the matmul) or 'Y' (after it)
  int dim = 0;            // the tensor dimension it gathers or scatters (0 rows, 1 columns);
                          // all_reduce: -1
  std::string why;        // the rule that chose it, for reports and errors
};

struct ShardPlan {
  Topology topo;
  Mesh mesh;
  std::size_t m = 0, k = 0, n = 0;     // the product as asked
  std::size_t mp = 0, kp = 0, np = 0;  // padded (see the header)
  PSpec x, w, y;                       // as stored (X, W) and as left (Y)
  std::string xm_used;  // the axis the chips' product splits M over ("" replicated)
  std::string k_axis;   // the axis K is split over: partial sums ("" none)
  std::string wn_used;  // the axis the chips' product splits N over
  bool w_gathered_k = false;  // W all-gathered on K before the matmul
  bool w_gathered_n = false;  // W all-gathered on N: it lies in column blocks, one per rank
  bool c_col_blocks = false;  // the product lies in column blocks (a reduce-scatter on N)
  std::vector<ShardCollective> pre, post;

  int axis_size(const std::string& axis) const;  // 1 for ""
  int axis_rank(const std::string& axis, int chip) const;  // 0 for ""
  // Chip `chip`'s block of a padded dimension of extent `padded` split over `axis`.
  Range block(const std::string& axis, std::size_t padded, int chip) const;
  // What chip `chip` stores (padded coordinates): X rows and columns, W rows and columns.
  Range x_rows(int chip) const { return block(x.d[0], mp, chip); }
  Range x_cols(int chip) const { return block(x.d[1], kp, chip); }
  Range w_rows(int chip) const { return block(w.d[0], kp, chip); }
  Range w_cols(int chip) const { return block(w.d[1], np, chip); }
  // The block of the product chip `chip` computes: rows, the K range it sums, columns.
  Range mm_rows(int chip) const { return block(xm_used, mp, chip); }
  // K not split: the K the product has ([0, k): padding rows of a gathered W are not summed,
  // so Y is the single-chip product bit for bit).
  Range mm_k(int chip) const { return k_axis.empty() ? Range{0, k} : block(k_axis, kp, chip); }
  Range mm_cols(int chip) const { return block(wn_used, np, chip); }
  // The block of Y chip `chip` holds at the end.
  Range y_rows(int chip) const { return block(y.d[0], mp, chip); }
  Range y_cols(int chip) const { return block(y.d[1], np, chip); }
  // Multiply-accumulates the chips do, padding and replicated work included.
  std::size_t chip_macs() const;
  std::string describe() const;  // one line per decision, for reports
};

// The plan of Y = X @ W on `topo` under `mesh` with the given specs; `y` empty: the default
// (rule 3). Throws std::invalid_argument naming the flag, the value and the rule: an axis not
// in the mesh, an axis used twice in one spec, a mesh that does not match the pod, a zero size,
// a layout the rules above cannot produce (e.g. Y's rows split over a different axis than the
// product's).
ShardPlan plan_sharding(const Topology& topo, const Mesh& mesh, std::size_t m, std::size_t k,
                        std::size_t n, const PSpec& x, const PSpec& w, const PSpec* y = nullptr);

}  // namespace tpu
