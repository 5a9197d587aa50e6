// The token embedding's chip programs (embedding_plan.h).
#include "embedding_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace tpu {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("embedding: " + what);
}

// The checks both plans share; returns the memory rows per table row (d / lanes).
uint32_t check_dims(const ChipShape& s, const EmbeddingDims& dm,
                    const std::vector<int32_t>& tokens) {
  const std::size_t L = s.cols;
  require(dm.d > 0 && dm.d % L == 0 && dm.d % 16 == 0,
          "d " + str(dm.d) + " must be a positive multiple of the lanes (" + str(L) +
              ") and of 16 (whole 64-byte f32 rows)");
  require(dm.d * 4 <= 0xFFFF, "d " + str(dm.d) + ": a row of " + str(dm.d * 4) +
                                  " bytes exceeds DMA seg_bytes (65535)");
  require(dm.vocab > 0 && dm.vocab <= 0xFFFF,
          "vocab " + str(dm.vocab) + " must be 1..65535 (DMA_IDX table_rows)");
  require(dm.seq > 0 && dm.seq <= 0xFFFF, "seq " + str(dm.seq) + " must be 1..65535");
  require(dm.tokens > 0 && dm.tokens <= 0xFFFF && tokens.size() == dm.tokens,
          "tokens: " + str(tokens.size()) + " given, " + str(dm.tokens) + " expected (1..65535)");
  for (std::size_t t = 0; t < tokens.size(); ++t)
    require(tokens[t] >= 0 && static_cast<std::size_t>(tokens[t]) < dm.vocab,
            "token " + std::to_string(tokens[t]) + " at " + str(t) + " is outside 0.." +
                str(dm.vocab - 1));
  return static_cast<uint32_t>(dm.d / L);
}

// Appends `ids` to the list words, padded with zeros to whole rows; returns its first row.
uint32_t add_list(std::vector<int32_t>& words, const std::vector<int32_t>& ids, std::size_t L) {
  const auto row = static_cast<uint32_t>(words.size() / L);
  words.insert(words.end(), ids.begin(), ids.end());
  words.resize((words.size() + L - 1) / L * L, 0);
  return row;
}

// rows f32 table rows of d between HBM (row-major, contiguous) and VMEM from mem_row.
ChipCmd rows_dma(DmaDir dir, uint32_t mem_row, std::size_t rows, std::size_t d, uint64_t addr) {
  const auto bytes = static_cast<uint32_t>(d * 4);
  return cmd_dma(dir, false, mem_row, static_cast<uint32_t>(rows), bytes,
                 static_cast<uint32_t>(addr), bytes);
}

ChipCmd vadd(uint32_t x, uint32_t y, bool y_bcast, uint32_t dst, std::size_t rows) {
  VpuCmdArgs a = vpu_rows(VpuOp::kAdd, Mem::kVmem, x, y, dst, static_cast<uint32_t>(rows));
  a.y_bcast = y_bcast;
  return cmd_vpu(a);
}

// The id lists go to VMEM from row `at` in one DMA (rows of lanes int32, bits as they are).
ChipCmd lists_dma(const std::vector<int32_t>& words, std::size_t L, uint32_t at, uint64_t addr) {
  const auto piece = static_cast<uint32_t>(L * 4);
  return cmd_dma(DmaDir::kHbmToVmem, false, at, static_cast<uint32_t>(words.size() / L), piece,
                 static_cast<uint32_t>(addr), piece);
}

void check_fits(const ChipShape& s, std::size_t rows, uint64_t lists, std::size_t words) {
  require(rows <= s.vmem_rows, "the program needs " + str(rows) + " VMEM rows, the chip has " +
                                   str(s.vmem_rows) + " (fewer tokens, or a smaller d)");
  require(lists + words * 4 <= s.hbm_bytes && lists % 64 == 0,
          "lists buffer at " + str(lists) + " must be 64-byte aligned and inside HBM");
}

}  // namespace

EmbeddingGroups embedding_groups(const std::vector<int32_t>& tokens) {
  EmbeddingGroups g;
  std::map<int32_t, std::size_t> at;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    auto it = at.find(tokens[t]);
    if (it == at.end()) {
      it = at.emplace(tokens[t], g.ids.size()).first;
      g.ids.push_back(tokens[t]);
      g.positions.emplace_back();
    }
    g.positions[it->second].push_back(static_cast<uint32_t>(t));
  }
  std::vector<std::size_t> order(g.ids.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return g.positions[a].size() > g.positions[b].size();
  });
  EmbeddingGroups out;
  for (std::size_t i : order) {
    out.ids.push_back(g.ids[i]);
    out.positions.push_back(std::move(g.positions[i]));
  }
  return out;
}

EmbeddingPlan plan_embedding_forward(const ChipShape& s, const EmbeddingDims& dm,
                                     const std::vector<int32_t>& tokens,
                                     const EmbeddingBuffers& buf) {
  const uint32_t P = check_dims(s, dm, tokens);
  const std::size_t L = s.cols, T = dm.tokens, S = dm.seq;
  EmbeddingPlan p;
  // Window by window (S tokens; the VMEM holds two windows, not the batch): each window's
  // tokens a list of their own rows.
  std::vector<uint32_t> list_row;
  for (std::size_t t0 = 0; t0 < T; t0 += S)
    list_row.push_back(add_list(
        p.lists,
        std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(t0),
                             tokens.begin() + static_cast<std::ptrdiff_t>(std::min(T, t0 + S))),
        L));
  const auto nl = static_cast<uint32_t>(p.lists.size() / L);
  // VMEM: [0, nl) the token lists, then wpe (S x P rows), then two windows of h (S x P each).
  const auto SP = static_cast<uint32_t>(std::min(S, T) * P);
  const uint32_t wpe_row = nl, h_row[2] = {nl + SP, nl + 2 * SP};
  p.vmem_rows = nl + 3 * SP;
  check_fits(s, p.vmem_rows, buf.lists, p.lists.size());
  p.cmds.push_back(lists_dma(p.lists, L, 0, buf.lists));
  p.cmds.push_back(rows_dma(DmaDir::kHbmToVmem, wpe_row, std::min(S, T), dm.d, buf.wpe));
  for (std::size_t w = 0, t0 = 0; t0 < T; ++w, t0 += S) {  // h = wte rows + wpe rows
    const std::size_t n = std::min(S, T - t0);
    const uint32_t x = h_row[w % 2];
    p.cmds.push_back(cmd_dma_idx(false, false, x, static_cast<uint32_t>(n),
                                 static_cast<uint32_t>(dm.d * 4), static_cast<uint32_t>(buf.wte),
                                 list_row[w], static_cast<uint32_t>(dm.vocab)));
    p.cmds.push_back(vadd(x, wpe_row, false, x, n * P));
    p.cmds.push_back(rows_dma(DmaDir::kVmemToHbm, x, n, dm.d, buf.h + t0 * dm.d * 4));
  }
  p.cmds.push_back(cmd_halt());
  return p;
}

EmbeddingPlan plan_embedding_backward(const ChipShape& s, const EmbeddingDims& dm,
                                      const std::vector<int32_t>& tokens,
                                      const EmbeddingBuffers& buf) {
  const uint32_t P = check_dims(s, dm, tokens);
  const std::size_t L = s.cols, T = dm.tokens, S = dm.seq;
  const EmbeddingGroups g = embedding_groups(tokens);
  EmbeddingPlan p;
  p.groups = g.ids.size();
  p.rounds = g.positions.empty() ? 0 : g.positions[0].size();
  // Lists: a zero row (the +0 every sum starts from), round r's positions, the group ids.
  add_list(p.lists, std::vector<int32_t>(L, 0), L);
  std::vector<uint32_t> round_row, round_n;
  for (std::size_t r = 0; r < p.rounds; ++r) {
    std::vector<int32_t> pos;
    for (std::size_t k = 0; k < p.groups && g.positions[k].size() > r; ++k)
      pos.push_back(static_cast<int32_t>(g.positions[k][r]));
    round_row.push_back(add_list(p.lists, pos, L));
    round_n.push_back(static_cast<uint32_t>(pos.size()));
  }
  const uint32_t ids_row = add_list(p.lists, g.ids, L);
  const auto nl = static_cast<uint32_t>(p.lists.size() / L);
  // VMEM: lists, the sums A (groups x P), two gather buffers; after dwte's scatter the same
  // rows hold dwpe's sums (S x P) and one window of dh (S x P).
  const auto GP = static_cast<uint32_t>(p.groups * P);
  const uint32_t a_row = nl, b_row[2] = {nl + GP, nl + 2 * GP};
  const auto SP = static_cast<uint32_t>(std::min(S, T) * P);
  const uint32_t dp_row = nl, w_row = nl + SP;
  p.vmem_rows = nl + std::max(3 * GP, 2 * SP);
  check_fits(s, p.vmem_rows, buf.lists, p.lists.size());
  p.cmds.push_back(lists_dma(p.lists, L, 0, buf.lists));
  for (std::size_t r = 0; r < p.rounds; ++r) {  // the r-th occurrence of every token that has one
    const uint32_t b = b_row[r % 2];
    p.cmds.push_back(cmd_dma_idx(false, false, b, round_n[r], static_cast<uint32_t>(dm.d * 4),
                                 static_cast<uint32_t>(buf.dh), round_row[r],
                                 static_cast<uint32_t>(T)));
    if (r == 0)
      p.cmds.push_back(vadd(b, 0, true, a_row, round_n[r] * P));  // +0 + dh
    else
      p.cmds.push_back(vadd(a_row, b, false, a_row, round_n[r] * P));
  }
  p.cmds.push_back(cmd_dma_idx(true, false, a_row, static_cast<uint32_t>(p.groups),
                               static_cast<uint32_t>(dm.d * 4), static_cast<uint32_t>(buf.dwte),
                               ids_row, static_cast<uint32_t>(dm.vocab)));
  // dwpe: window after window onto the positions' sums, from +0.
  for (std::size_t t0 = 0; t0 < T; t0 += S) {
    const std::size_t n = std::min(S, T - t0);
    p.cmds.push_back(rows_dma(DmaDir::kHbmToVmem, w_row, n, dm.d, buf.dh + t0 * dm.d * 4));
    if (t0 == 0)
      p.cmds.push_back(vadd(w_row, 0, true, dp_row, n * P));
    else
      p.cmds.push_back(vadd(dp_row, w_row, false, dp_row, n * P));
  }
  p.cmds.push_back(rows_dma(DmaDir::kVmemToHbm, dp_row, std::min(S, T), dm.d, buf.dwpe));
  p.cmds.push_back(cmd_halt());
  return p;
}

}  // namespace tpu
