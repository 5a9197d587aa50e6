// Pipeline parallelism's schedules as tables of slots (docs/training.md, "Pipeline"): the layers
// of a network split into P contiguous stages (equal, or as `--stages 0-1,2-3` says), M
// micro-batches, and for each stage the order in which it runs the forward (F) and backward (B)
// of each micro-batch: GPipe (every F, then every B), 1F1B (PipeDream-flush: P - s - 1 warm-up
// forwards, then one F and one B in turn, then the cool-down backwards) and Megatron's
// interleaved 1F1B with v model chunks per stage. Pure functions of their arguments (no
// hardware): the driver turns a table into ops, the unit tests check its rules, the report puts
// the bubble formula beside the measured bubble.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tpu {

enum class PipeKind { kGpipe, k1f1b, kInterleaved };

struct PipeSchedule {
  PipeKind kind = PipeKind::kGpipe;
  int v = 1;  // model chunks per stage (interleaved; 1 otherwise)
};

// "gpipe", "1f1b", "interleaved:V" (V >= 1); std::invalid_argument naming the text and the rule.
PipeSchedule parse_pipe_schedule(const std::string& text);
std::string pipe_schedule_text(const PipeSchedule& s);

// One slot of a stage: the forward or the backward of micro-batch `mb` through the stage's model
// chunk `chunk` (0 .. v-1; chunk c of stage s is virtual stage c x P + s).
struct PipeSlot {
  int mb = 0;
  bool backward = false;
  int chunk = 0;
  bool operator==(const PipeSlot& o) const {
    return mb == o.mb && backward == o.backward && chunk == o.chunk;
  }
};

// Per stage (0 .. p-1), its slots in order: every (micro-batch, chunk) once forward and once
// backward. Backwards of one chunk run in micro-batch order (0 first), so a gradient accumulates
// in that order under every schedule. std::invalid_argument for p < 1, m < 1, v < 1, 1F1B with
// m < p, interleaved with m not a multiple of p.
std::vector<std::vector<PipeSlot>> pipeline_slots(const PipeSchedule& s, int p, int m);

// The stages' tables merged into one order of (stage, slot) for a single op list: each stage's
// slots in its order, a slot only after the slot whose block it receives (a forward of virtual
// stage j after that micro-batch's forward on j - 1, a backward after its backward on j + 1, the
// last virtual stage's backward after its forward). std::logic_error for a table that cannot go
// on.
std::vector<std::pair<int, PipeSlot>> pipeline_merged_order(
    const std::vector<std::vector<PipeSlot>>& table, int v);

// Each (micro-batch, chunk)'s activation slot per stage: the lowest one free at its forward,
// freed at its backward. slots[s][{mb, chunk}]; *count the slots any stage needs.
std::vector<std::map<std::pair<int, int>, int>> pipeline_activation_slots(
    const std::vector<std::vector<PipeSlot>>& table, int* count);

// The tables run with time (the second formulation of a measured bubble, docs/training.md
// "Pipeline"): slot i of stage s's table takes dur[s][i] cycles and starts once the stage's slot
// before it has ended plus `gap` and the slot it needs has ended plus `hop` (the forward of the
// virtual stage before, the backward of the one after, on another stage; the last virtual
// stage's backward needs its own forward, with no hop). With `pre` (same shapes, or empty: none),
// pre[s][i] cycles of the slot need nothing received and run first, from the stage's slot before
// it plus `gap`, beside the wait; its dur[s][i] cycles follow once both they and the block are
// there. Returns per stage its idle fraction of the makespan (the first slot's start to the last
// one's end, every stage alike); empty when the shapes do not match or a table waits forever.
std::vector<double> pipeline_timed_bubbles(const std::vector<std::vector<PipeSlot>>& table, int v,
                                           const std::vector<std::vector<double>>& dur, double gap,
                                           double hop,
                                           const std::vector<std::vector<double>>& pre = {});

// The most micro-batches a stage holds at once (forward done, backward not yet) per its table:
// its activations' slots in HBM (counted per chunk for interleaved: a (micro-batch, chunk) each).
int pipeline_peak_in_flight(const std::vector<PipeSlot>& slots);

// The most bytes a stage holds at once by its slots: a forward takes bytes(slot), its backward
// gives them back (the activations a micro-batch keeps from its F to its B).
uint64_t pipeline_peak_bytes(const std::vector<PipeSlot>& slots,
                             const std::function<uint64_t(const PipeSlot&)>& bytes);

// The bubble as a fraction of the step: (p - 1) / (v m + p - 1). For GPipe and 1F1B (v = 1)
// that is (p - 1) / (m + p - 1); for interleaved it is b / (1 + b) with b = (1/v)(p - 1)/m, the
// bubble relative to the ideal time.
double pipeline_bubble_formula(const PipeSchedule& s, int p, int m);
// The same relative to the ideal time (the stage's own work): (1/v)(p - 1)/m, b above.
double pipeline_bubble_formula_of_ideal(const PipeSchedule& s, int p, int m);
std::string pipeline_bubble_formula_text(const PipeSchedule& s);

// The layers [first, last] (inclusive) of each stage. `text` "" splits `layers` into p equal
// contiguous stages (p must divide layers); else "0-1,2-3" (a range or a single layer per stage,
// contiguous from layer 0 to the last, one item per stage). std::invalid_argument naming the flag,
// the value and the rule.
std::vector<std::pair<std::size_t, std::size_t>> pipeline_stages(std::size_t layers, int p,
                                                                 const std::string& text);

// The layers [first, last] of each virtual stage j = chunk x p + stage (p x v of them; with v = 1
// the stages of pipeline_stages). Interleaved splits the layers into p x v equal contiguous
// chunks, chunk j on stage j mod p (Megatron): v must divide the layers per stage, and `text`
// must be "" (std::invalid_argument otherwise).
std::vector<std::pair<std::size_t, std::size_t>> pipeline_chunks(std::size_t layers, int p,
                                                                 const PipeSchedule& s,
                                                                 const std::string& text);

// The checks of a pipelined run before anything runs (tpusim train --check): stages from
// pipeline_stages, v dividing every stage's layer count, the schedule's rules on m (above).
// std::invalid_argument naming the flag, the value and the rule.
void check_pipeline(std::size_t layers, int p, int m, const PipeSchedule& s,
                    const std::string& stages_text);

}  // namespace tpu
