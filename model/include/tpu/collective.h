// Golden collectives for a pod of chips on a ring / 2D / 3D torus or mesh (docs/collectives.md):
// the plan that says what moves where and in which order, and a host executor that runs a plan
// bit-exactly with the VPU's golden ops. The pod driver issues the same plan on the chips.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {

constexpr int kPodMaxDims = 3;      // x, y, z
constexpr int kPodMaxPerDim = 16;   // chips per dimension (4-bit coordinates in the ICI header)

using PodCoord = std::array<int, kPodMaxDims>;  // {x, y, z}; unused dimensions are 0

// The shape of a pod: 1 to 3 dimensions of 1..16 chips (up to 4096, a TPU v4 pod); per dimension a ring (wrap-around link,
// torus) or a line (no wrap link, mesh). Chips are numbered x fastest.
struct Topology {
  std::vector<int> size;   // chips per dimension, x first
  std::vector<bool> wrap;  // per dimension: true = ring (torus), false = line (mesh)

  static Topology torus(std::vector<int> size);  // every dimension wraps
  static Topology mesh(std::vector<int> size);   // no dimension wraps

  // Throws std::invalid_argument naming the field and the rule.
  void validate() const;
  int rank() const { return static_cast<int>(size.size()); }
  int extent(int dim) const { return dim < rank() ? size[dim] : 1; }  // 1 past the rank
  bool wraps(int dim) const { return dim < rank() && wrap[dim]; }
  int num_chips() const;
  std::vector<int> active_dims() const;  // the dimensions with more than one chip
  PodCoord coord(int id) const;
  int id(const PodCoord& c) const;
  std::string name() const;  // "ring8", "torus4x4", "mesh3x3", "mixed4x1x2:ring,ring,line"
};

// How a transfer travels: `hops` physical links in dimension `dim` (0 = x), all in direction
// `dir` (+1 / -1); the chips in between only forward. hops is 1, or 2 for the folded ring of a
// line dimension, except in "direct" all-reduce, where it is the distance along `dim` (up to
// k / 2 on a ring of k, k - 1 on a line; docs).
struct Route {
  int dim = 0;
  int dir = +1;
  int hops = 1;
};

// The chip a route from `src` reaches, or -1 when it leaves a line dimension.
int route_dst(const Topology& topo, int src, const Route& r);

enum class Collective : uint8_t { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast };
enum class ReduceOp : uint8_t { kSum, kMax };
enum class DType : uint8_t { kF32, kBf16 };  // bf16: reductions accumulate in f32 (docs)
enum class TransferKind : uint8_t {
  kReduce,  // dst[i] = op(incoming, dst's own value), incoming first
  kCopy,    // dst[i] = incoming
};

const char* collective_name(Collective c);  // "all_reduce", ...
const char* reduce_op_name(ReduceOp op);     // "sum", "max"
const char* dtype_name(DType t);             // "f32", "bf16"
bool collective_reduces(Collective c);       // all-reduce and reduce-scatter

// One remote write: `count` elements from src's working buffer at src_offset into dst's at
// dst_offset (the offsets differ only in all-to-all), combined as `kind` says, over `route`.
struct Transfer {
  int src = 0;
  int dst = 0;
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t count = 0;
  TransferKind kind = TransferKind::kCopy;
  Route route;
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
// the chip count). algorithm: "ring", "biring", or (all_reduce only) "torus" or "direct" (the
// low-latency one for small buffers: per dimension, k - 1 independent steps). root: broadcast
// only.
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
  std::size_t buffer_len = 0;     // elements of each chip's working buffer
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

// ---------------------------------------------------------------------------------------------
// Groups and mesh axes (docs/collectives.md, "Mesh axes and rounds").

// Throws std::invalid_argument unless every entry is a dimension of `topo` (0 .. rank-1) and the
// entries are strictly increasing (no duplicates). `field` names the caller's parameter.
void validate_group_dims(const Topology& topo, const std::vector<int>& dims,
                         const std::string& field = "group_dims");
// The topology of one group: the sizes and wrap flags of `dims`, in increasing dim order; empty
// dims: the pod itself.
Topology group_topology(const Topology& topo, const std::vector<int>& dims);
// The chips in one group (the product of the dims' extents; empty dims: the whole pod).
int group_size(const Topology& topo, const std::vector<int>& dims);
// Chip `chip`'s rank in its group (its id in group_topology), and which group it is in (the
// rank of its coordinates in the other dimensions, the first fastest; 0 .. groups-1).
int group_rank(const Topology& topo, const std::vector<int>& dims, int chip);
int group_index(const Topology& topo, const std::vector<int>& dims, int chip);

// A logical mesh over the pod: named axes with sizes, in torus-dimension order (x first).
struct MeshAxis {
  std::string name;
  int size = 1;
};
struct Mesh {
  std::vector<MeshAxis> axes;
  int num_chips() const;                         // the product of the sizes
  int axis_size(const std::string& name) const;  // throws when the axis is not in the mesh
  std::string text() const;                      // "data=16,model=4"
};
// Parses "x=4,y=4" / "data=16,model=4" (spaces around names and sizes allowed). Throws
// std::invalid_argument naming the text and the rule: empty text, an item that is not
// name=size, an empty name, a name not of letters, digits and '_', a duplicate name, a size that
// is not an integer, a size < 1.
Mesh parse_mesh(const std::string& text);
// The torus dimensions an axis spans, strictly increasing, to use as CollectiveSpec::group_dims.
// Axes take consecutive dimensions in order, each the dims whose extents multiply to its size.
// Dimensions of one chip: an axis of size > 1 takes those before and between its dims, a size-1
// axis takes the ones at its place (at most one, unless it is the last axis), and the last axis
// that takes any takes all that are left. A size-1 axis with no dimension of one chip at its place
// takes none (a "unit" axis: each of its groups is one chip) and changes nothing for the other
// axes, so "data=4,model=1" gives data what "data=4" does. Throws std::invalid_argument for: an
// axis not in the mesh (the message lists the mesh's axes); a mesh whose product is not the pod's
// chip count; an axis whose size does not line up with whole torus dimensions (names the axis and
// the dims); asking for a unit axis (group_dims cannot express groups of one chip; ask
// mesh_unit_axis first: a collective over it moves nothing).
std::vector<int> mesh_axis_dims(const Topology& topo, const Mesh& mesh, const std::string& axis);
// Whether `axis` is a unit axis of the mesh on topo (size 1, no dimension: groups of one chip).
bool mesh_unit_axis(const Topology& topo, const Mesh& mesh, const std::string& axis);
// Checks the mesh against the pod (mesh_axis_dims's rules for every axis, unit axes allowed).
void check_mesh(const Topology& topo, const Mesh& mesh);
// The mesh without its axes of size 1 (a split over one chip is no split): the same mesh.
Mesh mesh_without_unit_axes(const Mesh& mesh);

// The order of chips around the ring used by `ring` and `biring` (a Hamiltonian cycle; each hop
// is one link, or up to 2 on a line dimension), starting at chip 0.
std::vector<int> ring_order(const Topology& topo);

// The chunking rule: n elements in `parts` chunks, the first n % parts one element longer.
std::size_t chunk_len(std::size_t n, std::size_t parts, std::size_t i);
std::size_t chunk_offset(std::size_t n, std::size_t parts, std::size_t i);

// Runs a plan on the host, bit-exactly (reductions with f32_add / f32_maximum in the plan's
// order). inputs[chip] has plan.input_len(chip) elements; returns each chip's output.
// Throws std::invalid_argument on a dtype mismatch, wrong buffer sizes or a malformed plan.
std::vector<std::vector<uint32_t>> execute_plan_f32(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs);
std::vector<std::vector<bf16_t>> execute_plan_bf16(const CollectivePlan& plan,
                                                   const std::vector<std::vector<bf16_t>>& inputs);

// ---------------------------------------------------------------------------------------------
// Rounds: a collective over a buffer larger than on-chip memory, streamed in rounds.

// `count` elements at `offset` of a chip's whole (un-rounded) input or output buffer.
struct RoundPiece {
  std::size_t offset = 0, count = 0;
};
// One round: plan = make_plan(topo, spec with n = this round's n). in[chip]: where the round
// plan's input for chip (its plan.chips[chip].input segments concatenated) comes from in the
// chip's whole input, piece after piece; out[chip]: where the round's output goes in the chip's
// whole output. Pieces of zero elements are left out; pieces that follow on in the whole buffer
// are merged into one.
struct CollectiveRound {
  CollectivePlan plan;
  std::vector<std::vector<RoundPiece>> in, out;
};
// Splits `spec` into `rounds` rounds (P = the group size):
//   all_reduce, broadcast: round r is the slice chunk_offset(n, R, r) / chunk_len(n, R, r).
//   reduce_scatter, all_gather: each shard j (chunk_len(n, P, j) elements) is cut into R
//     sub-slices (chunk_len(shard, R, r)); round r has the r-th sub-slice of every shard.
//   all_to_all: round r has the sub-slice chunk_offset(b, R, r) / chunk_len(b, R, r) of every
//     block of b = n / P elements.
// Rounds of no elements are dropped, so rounds > n acts as fewer rounds (never an error); n = 0
// gives one round of n = 0. Throws std::invalid_argument for rounds < 1 and for whatever
// make_plan(topo, spec) refuses.
std::vector<CollectiveRound> make_rounds(const Topology& topo, const CollectiveSpec& spec,
                                         std::size_t rounds);
// The golden of a rounded collective: runs every round's plan with execute_plan_* and scatters
// its output by the pieces. inputs[chip] is the chip's whole input; returns the whole outputs.
// Per element the reduction order is that of its round's plan. Throws std::invalid_argument
// for empty or inconsistent rounds (pieces that do not cover the buffers exactly once) and
// wrong input sizes.
std::vector<std::vector<uint32_t>> execute_rounds_f32(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<uint32_t>>& inputs);
std::vector<std::vector<bf16_t>> execute_rounds_bf16(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<bf16_t>>& inputs);
// Either dtype on 32-bit words (f32 bits, or bf16 bits in the low 16), as drivers and reports
// hold buffers: execute_plan_* / execute_rounds_* by the plan's dtype.
std::vector<std::vector<uint32_t>> execute_plan_bits(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs);
std::vector<std::vector<uint32_t>> execute_rounds_bits(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<uint32_t>>& inputs);

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

// What a plan costs on the links, for benchmarks.
struct PlanCost {
  std::size_t steps = 0;
  std::map<DirectedLink, uint64_t> link_bytes;  // over the whole plan, links that carry data
  std::vector<std::map<DirectedLink, uint64_t>> step_link_bytes;  // per step
  std::vector<uint64_t> step_max_link_bytes;                      // per step, the busiest link
  uint64_t max_link_bytes = 0;
  // Lower estimate of the plan's time on links of `link_bytes_per_s` each: the steps run one
  // after the other, each as long as its busiest link (latency and the VPU ignored).
  double time_s(double link_bytes_per_s) const;
};
PlanCost plan_cost(const CollectivePlan& plan);

// Bandwidth lower bound of an all-reduce of `bytes` per chip over `chips` chips that each
// send on `links_per_chip` links of `link_bytes_per_s`: 2 (p - 1) / p * bytes / (links * bw).
double allreduce_bound_s(int chips, int links_per_chip, double bytes, double link_bytes_per_s);
// The links per chip an algorithm can keep busy: ring 1, biring 2, torus and direct 2 * active
// dims.
int allreduce_links_per_chip(const Topology& topo, const std::string& algorithm);
// The same for an all-reduce within the groups of `group_dims` (its group_topology; a group's
// chip count for allreduce_bound_s is group_size).
int allreduce_links_per_chip(const Topology& topo, const std::vector<int>& group_dims,
                             const std::string& algorithm);

}  // namespace tpu
