// The host executor of collectives: runs a plan (tpu/collective_plan.h) or the rounds of one
// (tpu/rounds.h) bit-exactly with the VPU's golden ops, the golden every pod run of a collective
// is checked against. It follows the plan's steps in order; each step reads what its transfers
// send as it was at the start of the step.
#pragma once

#include <cstdint>
#include <vector>

#include "tpu/bf16.h"
#include "tpu/collective_plan.h"
#include "tpu/rounds.h"

namespace tpu {

// Runs a plan on the host, bit-exactly (reductions with f32_add / f32_maximum in the plan's
// order). inputs[chip] has plan.input_len(chip) elements; returns each chip's output.
// Throws std::invalid_argument on a dtype mismatch, wrong buffer sizes or a malformed plan.
std::vector<std::vector<uint32_t>> execute_plan_f32(
    const CollectivePlan& plan, const std::vector<std::vector<uint32_t>>& inputs);
std::vector<std::vector<bf16_t>> execute_plan_bf16(const CollectivePlan& plan,
                                                   const std::vector<std::vector<bf16_t>>& inputs);
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

}  // namespace tpu
