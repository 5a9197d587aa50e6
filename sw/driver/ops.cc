#include "ops.h"

#include <algorithm>
#include <utility>

namespace tpu {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kMatmul:
      return "matmul";
    case OpKind::kTranspose:
      return "transpose";
    case OpKind::kVectorMap:
      return "vector map";
    case OpKind::kEpilogue:
      return "epilogue";
    case OpKind::kCollective:
      return "collective";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "receive";
    case OpKind::kHostCopy:
      return "host copy";
    case OpKind::kCommands:
      return "commands";
  }
  return "?";
}

std::vector<BufferRef> Op::reads() const {
  std::vector<BufferRef> r;
  auto add = [&](const BufferRef& b) {
    if (b.valid()) r.push_back(b);
  };
  switch (kind) {
    case OpKind::kMatmul:
      add(a);
      add(w);
      add(bias);
      break;
    case OpKind::kTranspose:
    case OpKind::kSend:
      add(a);
      break;
    case OpKind::kVectorMap:
      for (const BufferRef& b : vmap.in) add(b);
      add(vmap.consts);
      break;
    case OpKind::kCommands:
      for (const BufferRef& b : ins) add(b);
      break;
    case OpKind::kEpilogue:
      add(out);
      add(bias);
      break;
    case OpKind::kCollective:
      add(coll.in);
      break;
    case OpKind::kHostCopy:
      if (!to_device) add(a);
      break;
    case OpKind::kRecv:
      break;
  }
  return r;
}

std::vector<BufferRef> Op::writes() const {
  std::vector<BufferRef> r;
  switch (kind) {
    case OpKind::kVectorMap:
      r = vmap.out;
      if (vmap.sum_out.valid()) r.push_back(vmap.sum_out);
      r.insert(r.end(), vmap.col_sum_out.begin(), vmap.col_sum_out.end());
      break;
    case OpKind::kCommands:
      r = outs;
      break;
    case OpKind::kCollective:
      r.push_back(coll.out);
      break;
    case OpKind::kSend:
      break;
    case OpKind::kHostCopy:
      if (to_device) r.push_back(out);
      break;
    default:
      if (out.valid()) r.push_back(out);
  }
  return r;
}

bool Op::runs_on(int chip) const {
  if (kind == OpKind::kSend) return chip == from;
  if (kind == OpKind::kRecv) return chip == to;
  return chips.empty() || std::find(chips.begin(), chips.end(), chip) != chips.end();
}

Op matmul_op(std::string name, BufferRef out, BufferRef a, BufferRef w, BufferRef bias, bool relu,
             bool w_transposed) {
  Op o;
  o.kind = OpKind::kMatmul;
  o.name = std::move(name);
  o.out = out;
  o.a = a;
  o.w = w;
  o.bias = bias;
  o.relu = relu;
  o.w_transposed = w_transposed;
  return o;
}

Op transpose_op(std::string name, BufferRef out, BufferRef a) {
  Op o;
  o.kind = OpKind::kTranspose;
  o.name = std::move(name);
  o.out = out;
  o.a = a;
  return o;
}

Op vector_map_op(std::string name, VectorMapRefs refs) {
  Op o;
  o.kind = OpKind::kVectorMap;
  o.name = std::move(name);
  o.vmap = std::move(refs);
  return o;
}

Op epilogue_op(std::string name, BufferRef y, BufferRef bias, bool relu) {
  Op o;
  o.kind = OpKind::kEpilogue;
  o.name = std::move(name);
  o.out = y;
  o.bias = bias;
  o.relu = relu;
  return o;
}

Op collective_op(std::string name, CollectiveOp coll) {
  Op o;
  o.kind = OpKind::kCollective;
  o.name = std::move(name);
  o.coll = std::move(coll);
  return o;
}

Op send_op(std::string name, int from, int to, BufferRef src) {
  Op o;
  o.kind = OpKind::kSend;
  o.name = std::move(name);
  o.from = from;
  o.to = to;
  o.a = src;
  return o;
}

Op recv_op(std::string name, int send, int from, int to, BufferRef dst) {
  Op o;
  o.kind = OpKind::kRecv;
  o.name = std::move(name);
  o.peer = send;
  o.from = from;
  o.to = to;
  o.out = dst;
  o.after.push_back(send);
  return o;
}

Op host_copy_op(std::string name, BufferRef buf, bool to_device,
                std::vector<std::vector<uint8_t>>* data) {
  Op o;
  o.kind = OpKind::kHostCopy;
  o.name = std::move(name);
  o.to_device = to_device;
  (to_device ? o.out : o.a) = buf;
  o.data = data;
  return o;
}

bool refs_overlap(const BufferRef& a, const BufferRef& b, const std::vector<Buffer>& buffers) {
  if (!a.valid() || !b.valid() || a.buffer != b.buffer) return false;
  const Buffer& buf = buffers.at(static_cast<std::size_t>(a.buffer));
  const std::size_t rows = buf.rows;
  auto hi = [](std::size_t lo, std::size_t n, std::size_t all) { return n ? lo + n : all; };
  const bool r = a.row0 < hi(b.row0, b.rows, rows) && b.row0 < hi(a.row0, a.rows, rows);
  const bool c = a.col0 < hi(b.col0, b.cols, buf.cols) && b.col0 < hi(a.col0, a.cols, buf.cols);
  return r && c;
}

Op commands_op(std::string name, std::vector<std::vector<ChipCmd>> cmds, uint32_t vmem_rows,
               std::vector<BufferRef> ins, std::vector<BufferRef> outs) {
  Op o;
  o.kind = OpKind::kCommands;
  o.name = std::move(name);
  o.cmds = std::move(cmds);
  o.vmem_rows = vmem_rows;
  o.ins = std::move(ins);
  o.outs = std::move(outs);
  return o;
}

}  // namespace tpu
