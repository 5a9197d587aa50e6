// Ops on named buffers: how a workload describes its work to the scheduler (scheduler.h,
// docs/pod.md "Ops and the scheduler"). A Buffer is a matrix in HBM with a name, one per chip and
// at the same address on every chip; a BufferRef is a block of one (rows and columns). An Op is one
// piece of work with a name (its phase on the timeline and in the report): a matmul with its
// epilogue (bias, ReLU; transposed weights), a transpose, a vector map on the VPU, the epilogue
// alone, a collective over a mesh axis, a point-to-point send and its receive, a host copy. Its
// inputs and outputs are buffer blocks; the scheduler orders ops by them (an op after every
// earlier op whose outputs it reads or whose inputs or outputs it writes) and by the explicit
// `after` list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "tpu/collective.h"
#include "vpu_map.h"

namespace tpu {

// A matrix in every chip's HBM: pitch 0, allocated through ChipDriver::alloc_matrix (the
// smallest legal pitch); else rows x pitch elements, or `bytes` when more (ChipDriver::alloc: a
// collective's flat array is 1 x n of pitch n, a collective's output a matrix of the pitch of
// the product it reduces).
struct Buffer {
  std::string name;
  std::size_t rows = 0, cols = 0;
  Dtype dtype = Dtype::kF32;
  std::size_t pitch = 0;
  uint64_t bytes = 0;
};

// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of buffer `buffer` (rows or cols 0:
// to the end). buffer -1: none.
struct BufferRef {
  int buffer = -1;
  std::size_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  bool valid() const { return buffer >= 0; }
};
inline BufferRef whole(int buffer) { return BufferRef{buffer, 0, 0, 0, 0}; }
inline BufferRef rows_of(int buffer, std::size_t row0, std::size_t rows) {
  return BufferRef{buffer, row0, rows, 0, 0};
}

enum class OpKind {
  kMatmul,      // out = epilogue(a x w) (ChipDriver::plan_matmul); w_transposed: a x w^T
  kTranspose,   // out = a^T (bf16; ChipDriver::plan_transpose)
  kVectorMap,   // the VPU map `map` over its refs (plan_vpu_map)
  kEpilogue,    // out = relu(out + bias) in place (ChipDriver::plan_epilogue)
  kCollective,  // `coll` over the chips of `coll.spec.group_dims` (PodDriver::compile)
  kSend,        // a's rows from chip `from` into chip `to`'s VMEM, a counter there
  kRecv,        // the send `peer` lands: chip `to` waits on its counter and writes `out`
  kHostCopy,    // the host writes `data` into `out` (to_device) or reads `a` into `data`:
                // no command; run_host_copies runs them before and after the program
  kCommands,    // commands planned elsewhere (per chip `cmds`, no HALT: the embedding's DMA_IDX
                // programs) in VMEM rows [0, vmem_rows), reading `in` and writing `outs`
};
const char* op_kind_name(OpKind k);

// A vector map: `map` with its matrices taken from these refs (in, consts, out, sum_out in the
// order of VpuMap's fields; map.out's values pair with out[i]).
struct VectorMapRefs {
  VpuMap map;
  std::vector<BufferRef> in;
  BufferRef consts;
  std::vector<BufferRef> out;
  BufferRef sum_out;
  std::vector<BufferRef> col_sum_out;  // map.col_sums' matrices, in order
};

struct CollectiveOp {
  CollectiveSpec spec;    // kind, dtype, elements, the group's dimensions, the algorithm
  BufferRef in, out;      // the first element of each (spec.n elements from there)
  std::string axis;       // the mesh axis (the phase's; "" the pod)
  bool gradient = false;  // a gradient all-reduce (the phase's flag)
  // The asked algorithm, else the slower ones after it (torus, biring, ring) that fit its ICI
  // counters; the phase's name keeps what the op says.
  bool fit_algorithm = false;
  // Each command keeps its plan step on the timeline (false: the phase alone).
  bool label_steps = true;
  // The collective's first command leads the merge with the compute beside it (false: the
  // compute's does; a gather pipelined behind the matmul of the piece before).
  bool lead = true;
};

struct Op {
  OpKind kind = OpKind::kMatmul;
  std::string name;        // its phase
  int piece = -1;          // the pipeline piece its commands are labelled with (-1: none)
  std::vector<int> chips;  // the chips it runs on (empty: every chip)
  std::vector<int> after;  // ops (indices) it must follow, beside those its buffers give
  BufferRef out, a, w, bias;
  bool relu = false, w_transposed = false;
  VectorMapRefs vmap;
  CollectiveOp coll;
  int from = -1, to = -1;                             // send and receive: the chips
  int peer = -1;                                      // a receive: its send
  bool to_device = true;                              // host copy: into HBM (else out of it)
  std::vector<std::vector<uint8_t>>* data = nullptr;  // host copy: per chip, the bytes
  std::vector<std::vector<ChipCmd>> cmds;             // commands: per chip (one: every chip's)
  std::vector<BufferRef> ins, outs;                   // commands: what they read and write
  uint32_t vmem_rows = 0;                             // commands: the VMEM rows they use

  // What it reads and writes (the scheduler's dependencies).
  std::vector<BufferRef> reads() const;
  std::vector<BufferRef> writes() const;
  bool runs_on(int chip) const;
};

// Constructors of the common ops.
Op matmul_op(std::string name, BufferRef out, BufferRef a, BufferRef w, BufferRef bias = {},
             bool relu = false, bool w_transposed = false);
Op transpose_op(std::string name, BufferRef out, BufferRef a);
Op vector_map_op(std::string name, VectorMapRefs refs);
Op epilogue_op(std::string name, BufferRef y, BufferRef bias, bool relu);
Op collective_op(std::string name, CollectiveOp coll);
Op send_op(std::string name, int from, int to, BufferRef src);
Op recv_op(std::string name, int send, int from, int to, BufferRef dst);
Op host_copy_op(std::string name, BufferRef buf, bool to_device,
                std::vector<std::vector<uint8_t>>* data);
Op commands_op(std::string name, std::vector<std::vector<ChipCmd>> cmds, uint32_t vmem_rows,
               std::vector<BufferRef> ins, std::vector<BufferRef> outs);

// Whether two refs share an element (same buffer, rows and columns overlapping); `rows` and
// `cols` of 0 are taken from the buffer's shape.
bool refs_overlap(const BufferRef& a, const BufferRef& b, const std::vector<Buffer>& buffers);

}  // namespace tpu
