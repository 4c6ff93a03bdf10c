// The engine of the kernel recipes (attention/kernel_recipe.hpp): the FlashAttention forward pass (2, 3, 4 and
// the torch backends) as a GPU executes it, float32 operation by float32 operation, under a KernelSchedule.
#pragma once

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/inputs/attention_inputs.hpp"

namespace pasa::detail {

// What the engine cannot run, as an InputError (`where` prefixes it): Q, K, V not of one format among the
// schedule's inputs, D above its max_d, P past its format (p_offset + a lazy threshold) without saturation
// (check_kernel_layout: what the shapes and formats alone decide); then pse, select, keep or kv_len masks,
// non-finite inputs, and ExpArg::fma with split-KV (the parts' __logf of a sum below 1, where MUFU.LG2 was not
// measured).
void check_kernel_layout(const KernelRecipe& k, const Format& q, const Format& kf, const Format& v, std::size_t D,
                         const std::string& where);
void validate_kernel_case(const AttentionInputs& in, const KernelRecipe& k, const std::string& where);
// KernelEngine::blocked_fa2: the fa2 spec the recipe runs for inputs of format `in` with G query heads per KV
// head (kernel_recipe.hpp; the fa_fp32 allocation of the format, P and out rounded as the schedule says).
AlgorithmSpec blocked_kernel_spec(const KernelRecipe& k, const Format& in, std::size_t G);
AttentionOutput kernel_attention(const AttentionInputs& in, const KernelRecipe& k, int threads);

}  // namespace pasa::detail
