// Collective plans (docs/collectives.md): the collectives, their specs, and make_plan, which says
// what moves where and in which order on the pod's links (steps of concurrent transfers between
// chips' working buffers). The single source of truth the host executor (tpu/collective_exec.h)
// and the pod driver both follow; also the chunking rule and the ring order the plans use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tpu/topology.h"

namespace tpu {

enum class Collective : uint8_t { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast };
enum class ReduceOp : uint8_t { kSum, kMax };
enum class DType : uint8_t { kF32, kBf16 };  // bf16: reductions accumulate in f32 (docs)
enum class TransferKind : uint8_t {
  kReduce,  // dst[i] = op(incoming, dst's own value), incoming first
  kCopy,    // dst[i] = incoming
};

const char* collective_name(Collective c);  // "all_reduce", ...
const char* reduce_op_name(ReduceOp op);    // "sum", "max"
const char* dtype_name(DType t);            // "f32", "bf16"
bool collective_reduces(Collective c);      // all-reduce and reduce-scatter

// One remote write: `count` elements from src's working buffer at src_offset into dst's at
// dst_offset (the offsets differ only in all-to-all), combined as `kind` says, over `route`.
// routed (the direct all_to_all): dst may differ from src in several dimensions and the routers
// choose the way (routed_path: dimension order, the shorter way round, every tie towards
// route.dir; on a twisted torus the twisted torus's shortest path); route.dim is then the first
// leg's dimension, route.dir the tie hint and route.hops the whole way's length.
struct Transfer {
  int src = 0;
  int dst = 0;
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t count = 0;
  TransferKind kind = TransferKind::kCopy;
  Route route;
  bool routed = false;
};

// Transfers that run concurrently: each reads the values as they were at the start of the step.
struct Step {
  std::string phase;  // "reduce_scatter", "all_gather", "all_to_all", "broadcast"
  std::vector<Transfer> transfers;
};

struct Segment {
  std::size_t offset = 0;
  std::size_t count = 0;
};

// Where a chip's input lands in its working buffer (its input is cut into these segments in
// order) and where its output is read from (the output is these segments concatenated).
struct ChipLayout {
  std::vector<Segment> input;
  std::vector<Segment> output;
};

// What to run. n: all_reduce, reduce_scatter, broadcast: the elements of each chip's input;
// all_gather: the elements of the gathered output; all_to_all: each chip's buffer (a multiple of
// the chip count). algorithm: "ring", "biring", (all_reduce only) "torus", or "direct" (all_reduce:
// the low-latency one for small buffers, per dimension k - 1 independent steps; all_to_all: one
// step, every chip sends each block straight to its chip, the routers taking the shortest way).
// root: broadcast only.
// group_dims: the torus dimensions (0 = x, 1 = y, 2 = z, strictly increasing) that make up one
// group (a replica group / mesh axis); the collective runs in every group at once, each over its
// own links, and "chip count", shards, `root` and the all_to_all blocks are per group (a chip's
// rank in its group: its coordinates in group_dims, the first fastest). Empty: the whole pod.
// granule: chunks are made of whole granules of this many elements (the last one of a buffer
// may be partial): the plan is the plan of ceil(n / granule) elements with every offset and
// count scaled by the granule and clipped at the buffer's end. A driver whose DMA moves whole
// rows and bursts sets it (PodDriver::granule); 1: element chunks. all_to_all: each block
// (n / chips) must be a whole number of granules.
struct CollectiveSpec {
  Collective collective = Collective::kAllReduce;
  ReduceOp op = ReduceOp::kSum;
  DType dtype = DType::kF32;
  std::size_t n = 0;
  std::string algorithm = "ring";
  int root = 0;
  std::vector<int> group_dims;
  std::size_t granule = 1;
  // torus only: the relative sizes of its d parts (part k takes the dimensions from the k-th
  // active one of the group on), one weight of 1..65536 per active dimension; part k holds
  // elements [floor(n W_<k / W), floor(n W_<=k / W)). Empty: equal parts (the chunking rule). A
  // driver whose chips send some directions through one queue could balance those queues with
  // it; the pod driver needs none (a send context per link direction) and leaves it empty.
  std::vector<unsigned> part_weights;
};

// The single source of truth for what moves where and in which order.
struct CollectivePlan {
  Topology topo;
  CollectiveSpec spec;
  std::size_t buffer_len = 0;  // elements of each chip's working buffer
  // Bytes per element of a reduction on the wire (4: f32, and a bf16 reduction's f32 partials;
  // 2: bf16). A copy carries the buffer's dtype: transfer_bytes.
  std::size_t element_bytes = 0;
  std::vector<ChipLayout> chips;  // indexed by chip id
  std::vector<Step> steps;

  std::size_t input_len(int chip) const;
  std::size_t output_len(int chip) const;
  // t.count x the bytes of one element of t on the wire: element_bytes for a kReduce, the
  // dtype's for a kCopy (a bf16 all-reduce's all-gather moves the rounded bf16 result).
  std::size_t transfer_bytes(const Transfer& t) const;
};

// Builds the plan; throws std::invalid_argument naming the parameter and the rule. With
// spec.group_dims set: the plan of the group's sub-topology (group_topology), replicated for every
// group, the groups' steps merged by index; plan.topo is the pod, chips[c] is the layout of c's
// rank in its group.
CollectivePlan make_plan(const Topology& topo, const CollectiveSpec& spec);

// The order of chips around the ring used by `ring` and `biring` (a Hamiltonian cycle; each hop
// is one link, or up to 2 on a line dimension), starting at chip 0.
std::vector<int> ring_order(const Topology& topo);

// The legs of a routed transfer's way on the plain torus or mesh `topo`, in dimension order (the
// ICI routers' order), each the shorter way round (a tie towards t.route.dir); the twisted
// torus's own way is the routers' business (the plan does not know the twist).
std::vector<Route> routed_path(const Topology& topo, const Transfer& t);

// The chunking rule: n elements in `parts` chunks, the first n % parts one element longer.
std::size_t chunk_len(std::size_t n, std::size_t parts, std::size_t i);
std::size_t chunk_offset(std::size_t n, std::size_t parts, std::size_t i);

}  // namespace tpu
