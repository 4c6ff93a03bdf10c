// The engine of the kernel recipes (attention/kernel_recipe.hpp): FlashAttention-2's forward pass as a GPU
// executes it, float32 operation by float32 operation, under a KernelSchedule.
#pragma once

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/inputs/attention_inputs.hpp"

namespace pasa::detail {

// What the engine cannot run, as an InputError (`where` prefixes it): inputs other than fp16 or bf16 (Q, K, V
// of one format), pse, select, keep or kv_len masks, non-finite inputs, and ExpArg::fma with split-KV (the
// parts' __logf of a sum below 1, where MUFU.LG2 was not measured).
void validate_kernel_case(const AttentionInputs& in, const KernelRecipe& k, const std::string& where);
AttentionOutput kernel_attention(const AttentionInputs& in, const KernelRecipe& k, int threads);

}  // namespace pasa::detail
