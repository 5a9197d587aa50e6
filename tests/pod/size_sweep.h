// The collectives the size sweeps run (test_pod_programs' PodProgramsSweep without RTL, test_pod's
// PodSizes on it): a collective of `bytes` a chip, an all-reduce's algorithms (torus, ring,
// biring) and the two reductions (sum, max) taking turns over the sizes, so each meets every
// size class.
#pragma once

#include <cstddef>
#include <string>

#include "tpu/collective.h"

namespace tpu {

// The spec of collective k in dtype d of `bytes` a chip on a pod of `chips`; false where the
// element size does not divide `bytes`.
inline bool sweep_spec(Collective k, DType d, std::size_t bytes, int chips, CollectiveSpec* s) {
  const std::size_t esz = d == DType::kBf16 ? 2 : 4;
  if (bytes % esz != 0) return false;
  *s = CollectiveSpec{};
  s->collective = k;
  s->dtype = d;
  s->n = bytes / esz;
  static const char* const kAlgos[] = {"torus", "ring", "biring"};
  s->algorithm = k == Collective::kAllReduce ? kAlgos[s->n % 3] : "ring";
  s->op = s->n % 2 ? ReduceOp::kMax : ReduceOp::kSum;
  s->root = chips - 1;
  return true;
}

// "all_reduce ring max bf16 34 bytes".
inline std::string sweep_name(const CollectiveSpec& s, std::size_t bytes) {
  return std::string(collective_name(s.collective)) + " " + s.algorithm + " " +
         (s.op == ReduceOp::kMax ? "max " : "sum ") + dtype_name(s.dtype) + " " +
         std::to_string(bytes) + " bytes";
}

}  // namespace tpu
