#include "tpu/collective_exec.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "tpu/vector.h"

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

// Runs the plan on 32-bit lanes. reduce_bf16: the inputs are bf16 bits, widened on load, and the
// outputs are rounded to bf16 once at the end; otherwise the lanes move untouched.
std::vector<std::vector<uint32_t>> execute_lanes(const CollectivePlan& plan,
                                                 const std::vector<std::vector<uint32_t>>& in,
                                                 bool widen_bf16) {
  const int pi = plan.topo.num_chips();
  const std::size_t p = static_cast<std::size_t>(pi);
  if (plan.chips.size() != p) bad("plan.chips: one layout per chip");
  if (in.size() != p) {
    bad("inputs: " + std::to_string(in.size()) + " buffers; one per chip (" + std::to_string(p) +
        ")");
  }
  const bool reduces = collective_reduces(plan.spec.collective);
  const std::size_t len = plan.buffer_len;
  std::vector<std::vector<uint32_t>> buf(p, std::vector<uint32_t>(len, 0u));
  for (std::size_t c = 0; c < p; ++c) {
    const std::size_t want = plan.input_len(static_cast<int>(c));
    if (in[c].size() != want) {
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(in[c].size()) +
          " elements; this plan needs " + std::to_string(want));
    }
    std::size_t k = 0;
    for (const Segment& s : plan.chips[c].input) {
      if (s.offset + s.count > len) bad("plan: input segment outside the working buffer");
      for (std::size_t i = 0; i < s.count; ++i, ++k) {
        buf[c][s.offset + i] = widen_bf16 ? in[c][k] << 16 : in[c][k];
      }
    }
  }

  std::vector<std::size_t> stamp(p * len, 0);  // step + 1 that last received into an element
  for (std::size_t si = 0; si < plan.steps.size(); ++si) {
    const Step& step = plan.steps[si];
    std::vector<std::vector<uint32_t>> incoming;
    incoming.reserve(step.transfers.size());
    for (const Transfer& t : step.transfers) {  // every read sees the start of the step
      if (t.src < 0 || t.src >= pi || t.dst < 0 || t.dst >= pi || t.src_offset + t.count > len ||
          t.dst_offset + t.count > len) {
        bad("plan: step " + std::to_string(si) + " has a transfer outside the pod or buffer");
      }
      const auto& s = buf[static_cast<std::size_t>(t.src)];
      incoming.emplace_back(s.begin() + static_cast<std::ptrdiff_t>(t.src_offset),
                            s.begin() + static_cast<std::ptrdiff_t>(t.src_offset + t.count));
    }
    for (std::size_t ti = 0; ti < step.transfers.size(); ++ti) {
      const Transfer& t = step.transfers[ti];
      auto& d = buf[static_cast<std::size_t>(t.dst)];
      for (std::size_t i = 0; i < t.count; ++i) {
        std::size_t& st = stamp[static_cast<std::size_t>(t.dst) * len + t.dst_offset + i];
        if (st == si + 1) {
          bad("plan: step " + std::to_string(si) + " writes chip " + std::to_string(t.dst) +
              " element " + std::to_string(t.dst_offset + i) + " twice");
        }
        st = si + 1;
        const uint32_t x = incoming[ti][i];
        uint32_t& own = d[t.dst_offset + i];
        if (t.kind == TransferKind::kCopy) {
          own = x;
        } else {
          if (!reduces) bad("plan: a reduce transfer in a collective that does not reduce");
          const float a = f32_from_bits(x), b = f32_from_bits(own);
          own = f32_bits(plan.spec.op == ReduceOp::kMax ? f32_maximum(a, b) : f32_add(a, b));
        }
      }
    }
  }

  std::vector<std::vector<uint32_t>> out(p);
  for (std::size_t c = 0; c < p; ++c) {
    for (const Segment& s : plan.chips[c].output) {
      if (s.offset + s.count > len) bad("plan: output segment outside the working buffer");
      for (std::size_t i = 0; i < s.count; ++i) {
        const uint32_t x = buf[c][s.offset + i];
        out[c].push_back(widen_bf16 ? f32_to_bf16(f32_from_bits(x)) : x);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<uint32_t>> execute_plan_f32(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs) {
  if (plan.spec.dtype != DType::kF32) bad("plan.spec.dtype: bf16 plan run with f32 buffers");
  return execute_lanes(plan, inputs, false);
}

std::vector<std::vector<bf16_t>> execute_plan_bf16(const CollectivePlan& plan,
                                                   const std::vector<std::vector<bf16_t>>& inputs) {
  if (plan.spec.dtype != DType::kBf16) bad("plan.spec.dtype: f32 plan run with bf16 buffers");
  std::vector<std::vector<uint32_t>> wide(inputs.size());
  for (std::size_t c = 0; c < inputs.size(); ++c)
    wide[c].assign(inputs[c].begin(), inputs[c].end());
  const auto lanes = execute_lanes(plan, wide, collective_reduces(plan.spec.collective));
  std::vector<std::vector<bf16_t>> out(lanes.size());
  for (std::size_t c = 0; c < lanes.size(); ++c) {
    for (uint32_t x : lanes[c]) out[c].push_back(static_cast<bf16_t>(x & 0xFFFFu));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rounds

namespace {

std::size_t piece_total(const std::vector<RoundPiece>& v) {
  std::size_t n = 0;
  for (const RoundPiece& x : v) n += x.count;
  return n;
}

// Checks that the pieces of all rounds cover each chip's whole buffer exactly once; returns the
// buffers' lengths. `what` is "in" or "out".
std::vector<std::size_t> covered_lengths(const std::vector<CollectiveRound>& rounds, std::size_t p,
                                         bool input) {
  const char* what = input ? "in" : "out";
  std::vector<std::size_t> len(p, 0);
  for (const CollectiveRound& rd : rounds) {
    for (std::size_t c = 0; c < p; ++c) len[c] += piece_total((input ? rd.in : rd.out)[c]);
  }
  for (std::size_t c = 0; c < p; ++c) {
    std::vector<bool> seen(len[c], false);
    for (std::size_t r = 0; r < rounds.size(); ++r) {
      for (const RoundPiece& x : (input ? rounds[r].in : rounds[r].out)[c]) {
        for (std::size_t i = x.offset; i < x.offset + x.count; ++i) {
          if (i >= len[c] || seen[i]) {
            bad("rounds[" + std::to_string(r) + "]." + what + "[" + std::to_string(c) +
                "]: element " + std::to_string(i) +
                (i >= len[c] ? " past the buffer of " + std::to_string(len[c])
                             : std::string(" used twice")) +
                "; the rounds' pieces must cover each buffer exactly once");
          }
          seen[i] = true;
        }
      }
    }
  }
  return len;
}

template <class T, class Run>
std::vector<std::vector<T>> execute_rounds_impl(const std::vector<CollectiveRound>& rounds,
                                                const std::vector<std::vector<T>>& inputs,
                                                Run run) {
  if (rounds.empty()) bad("rounds: empty; make_rounds gives at least one round");
  const std::size_t p = static_cast<std::size_t>(rounds[0].plan.topo.num_chips());
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const CollectiveRound& rd = rounds[r];
    if (static_cast<std::size_t>(rd.plan.topo.num_chips()) != p || rd.in.size() != p ||
        rd.out.size() != p) {
      bad("rounds[" + std::to_string(r) + "]: a plan and pieces for each of the " +
          std::to_string(p) + " chips");
    }
    for (std::size_t c = 0; c < p; ++c) {
      if (piece_total(rd.in[c]) != rd.plan.input_len(static_cast<int>(c)) ||
          piece_total(rd.out[c]) != rd.plan.output_len(static_cast<int>(c))) {
        bad("rounds[" + std::to_string(r) + "]: chip " + std::to_string(c) +
            "'s pieces do not match its plan's input and output lengths");
      }
    }
  }
  if (inputs.size() != p) {
    bad("inputs: " + std::to_string(inputs.size()) + " buffers; one per chip (" +
        std::to_string(p) + ")");
  }
  const std::vector<std::size_t> in_len = covered_lengths(rounds, p, true);
  const std::vector<std::size_t> out_len = covered_lengths(rounds, p, false);
  std::vector<std::vector<T>> out(p);
  for (std::size_t c = 0; c < p; ++c) {
    if (inputs[c].size() != in_len[c]) {
      bad("inputs[" + std::to_string(c) + "]: " + std::to_string(inputs[c].size()) +
          " elements; these rounds need " + std::to_string(in_len[c]));
    }
    out[c].resize(out_len[c]);
  }
  for (const CollectiveRound& rd : rounds) {
    std::vector<std::vector<T>> in(p);
    for (std::size_t c = 0; c < p; ++c) {
      for (const RoundPiece& x : rd.in[c]) {
        in[c].insert(in[c].end(), inputs[c].begin() + static_cast<std::ptrdiff_t>(x.offset),
                     inputs[c].begin() + static_cast<std::ptrdiff_t>(x.offset + x.count));
      }
    }
    const std::vector<std::vector<T>> res = run(rd.plan, in);
    for (std::size_t c = 0; c < p; ++c) {
      std::size_t k = 0;
      for (const RoundPiece& x : rd.out[c]) {
        std::copy(res[c].begin() + static_cast<std::ptrdiff_t>(k),
                  res[c].begin() + static_cast<std::ptrdiff_t>(k + x.count),
                  out[c].begin() + static_cast<std::ptrdiff_t>(x.offset));
        k += x.count;
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<uint32_t>> execute_rounds_f32(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<uint32_t>>& inputs) {
  return execute_rounds_impl(rounds, inputs, execute_plan_f32);
}

std::vector<std::vector<bf16_t>> execute_rounds_bf16(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<bf16_t>>& inputs) {
  return execute_rounds_impl(rounds, inputs, execute_plan_bf16);
}

namespace {
std::vector<std::vector<bf16_t>> narrow_words(const std::vector<std::vector<uint32_t>>& in) {
  std::vector<std::vector<bf16_t>> b(in.size());
  for (std::size_t c = 0; c < in.size(); ++c)
    for (uint32_t x : in[c]) b[c].push_back(static_cast<bf16_t>(x & 0xFFFFu));
  return b;
}
std::vector<std::vector<uint32_t>> widen_words(const std::vector<std::vector<bf16_t>>& in) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& v : in) out.emplace_back(v.begin(), v.end());
  return out;
}
}  // namespace

std::vector<std::vector<uint32_t>> execute_plan_bits(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs) {
  if (plan.spec.dtype == DType::kF32) return execute_plan_f32(plan, inputs);
  return widen_words(execute_plan_bf16(plan, narrow_words(inputs)));
}

std::vector<std::vector<uint32_t>> execute_rounds_bits(
    const std::vector<CollectiveRound>& rounds, const std::vector<std::vector<uint32_t>>& inputs) {
  if (rounds.empty()) bad("rounds: empty; a collective runs in at least 1 round");
  if (rounds[0].plan.spec.dtype == DType::kF32) return execute_rounds_f32(rounds, inputs);
  return widen_words(execute_rounds_bf16(rounds, narrow_words(inputs)));
}

}  // namespace tpu
