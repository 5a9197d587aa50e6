// The token embedding on one chip (docs/training.md, "The embedding on the chip"): chip programs
// for the forward h[t] = wte[tok t] + wpe[t mod S] (a DMA_IDX gather of wte's rows by the token
// list, a DMA of wpe, one VPU add per window) and for its gradient dwte[tok t] += dh[t],
// dwpe[t mod S] += dh[t] in token order from +0, as the golden (model/, GptGolden) adds them:
// the host knows the tokens, so it groups the positions of each token; round r gathers the r-th
// occurrence of every token that has one (DMA_IDX gather of dh's rows by position) and adds it
// onto that token's running sum with one VPU add, and a DMA_IDX scatter writes each token's sum
// into dwte once. Every add is an f32 VPU add, so the bits are the golden's (a one-hot product on
// the MXU would round dh to bf16). The plans only generate commands and the id lists the program
// loads; ChipDriver (or any host port) writes the lists and runs them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "chip_contract.h"
#include "host_port_types.h"

namespace tpu {

// The embedding's sizes: V table rows, S positions (wpe's rows), d columns, T tokens (the
// token list: batch windows of S, position t mod S).
struct EmbeddingDims {
  std::size_t vocab = 0, seq = 0, d = 0, tokens = 0;
};

// Where the tensors lie in the chip's HBM, each f32 row-major with rows of d (64-byte aligned).
struct EmbeddingBuffers {
  uint64_t wte = 0, wpe = 0;    // [V, d], [S, d]: the forward's inputs
  uint64_t h = 0;               // [T, d]: the forward's output
  uint64_t dh = 0;              // [T, d]: the backward's input
  uint64_t dwte = 0, dwpe = 0;  // [V, d], [S, d]: the backward's outputs; dwte's rows of ids not
                                // in the list are not written (they hold +0 as the golden's)
  uint64_t lists = 0;           // scratch for the plan's id lists (EmbeddingPlan::lists)
};

// A program and the int32 words it expects at EmbeddingBuffers::lists before it runs.
struct EmbeddingPlan {
  std::vector<ChipCmd> cmds;   // ends with HALT
  std::vector<int32_t> lists;  // to write at buffers.lists (a multiple of the lanes)
  std::size_t rounds = 0;      // backward: gather + add rounds (the most frequent token's count)
  std::size_t groups = 0;      // backward: distinct tokens (rows scattered into dwte)
  std::size_t vmem_rows = 0;   // VMEM rows the program uses (from row 0)
  // `lists` as the bytes to write at buffers.lists (int32, little-endian as the host's).
  std::vector<uint8_t> list_bytes() const {
    std::vector<uint8_t> b(lists.size() * 4);
    if (!b.empty()) std::memcpy(b.data(), lists.data(), b.size());
    return b;
  }
};

// The forward: h = wte[tokens] + wpe[positions]. std::invalid_argument (naming the value and
// the rule) when d is not a multiple of the lanes and of 16 (whole 64-byte rows), a token is
// outside 0..V-1, a size exceeds a command field, or the program does not fit the VMEM.
EmbeddingPlan plan_embedding_forward(const ChipShape& shape, const EmbeddingDims& dims,
                                     const std::vector<int32_t>& tokens,
                                     const EmbeddingBuffers& buf);
// The backward: dwte and dwpe from dh (same checks).
EmbeddingPlan plan_embedding_backward(const ChipShape& shape, const EmbeddingDims& dims,
                                      const std::vector<int32_t>& tokens,
                                      const EmbeddingBuffers& buf);
// The int32 words the forward's lists take for T tokens in windows of S (L lanes): each window's
// tokens in whole rows of L, so on a chip of more lanes than S every window takes a row.
inline std::size_t embedding_forward_list_words(std::size_t T, std::size_t S, std::size_t L) {
  const std::size_t full = S > 0 ? T / S : 0, last = S > 0 ? T % S : T;
  return full * ((S + L - 1) / L * L) + (last + L - 1) / L * L;
}
// The most int32 words the backward's lists take for any T tokens of V (L lanes): a zero row,
// each round's positions in whole rows (T rounds of one position when every token is the same),
// the group ids.
inline std::size_t embedding_backward_list_words(std::size_t T, std::size_t V, std::size_t L) {
  return L * (1 + T) + (std::min(T, V) + L - 1) / L * L;
}

// The backward's grouping: the distinct tokens, most frequent first (ties: first seen first),
// and per token its positions in increasing order (the golden's order of adds).
struct EmbeddingGroups {
  std::vector<int32_t> ids;
  std::vector<std::vector<uint32_t>> positions;
};
EmbeddingGroups embedding_groups(const std::vector<int32_t>& tokens);

}  // namespace tpu
