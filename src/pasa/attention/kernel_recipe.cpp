#include "pasa/attention/kernel_recipe.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

namespace {

// torch's FlashAttention-2 on sm80/sm90 (docs/kernel-sources.md §1): kBlockN by rounded head dimension
// (flash_fwd_launch_template.h of FA2 v2.5.7, the A100/H100 branch, no dropout), and the split kernel's.
const std::vector<std::pair<std::size_t, std::size_t>> kFa2BlockN = {
    {32, 128}, {64, 128}, {96, 64}, {128, 64}, {160, 32}, {192, 64}, {224, 64}, {256, 64}};
const std::vector<std::pair<std::size_t, std::size_t>> kFa2SplitBlockN = {{64, 256}, {128, 128}, {256, 64}};
// torch's memory-efficient kernel on sm80/sm90 (docs/kernel-sources.md §2): kKeysPerBlock of the Q x K tiles
// 64x64 (d <= 64), 64x128 (d <= 128), 32x128 (any d) (kernels/cutlassF.h dispatch_cutlassF_f16_sm80).
const std::vector<std::pair<std::size_t, std::size_t>> kEfficientBlockN = {{64, 64}, {128, 128}, {256, 128}};

}  // namespace

const std::vector<KernelRecipe>& kernel_recipes() {
  static const std::vector<KernelRecipe> r = {
      {
          .name = "torch_flash_sm90",
          .summary = "torch SDPA's FLASH_ATTENTION backend (FlashAttention-2 v2.5.7 in torch) on H100/H200",
          .source = "pytorch/pytorch aten/src/ATen/native/transformers/cuda/flash_attn/ (softmax.h 00a1abb4, "
                    "flash_api.cpp ef3d5c9e); Dao-AILab/flash-attention v2.5.7 85881f54 (kernel, launch "
                    "template); measured on torch 2.11 + CUDA 13 (results/hardware/kernels)",
          .status = "pinned: every output bit of 376 captured cases (H200, torch 2.11)",
          .schedule = {.block_n = kFa2BlockN,
                       .split_block_n = kFa2SplitBlockN,
                       .split_block_m = 64,
                       .split = SplitRule::fa2_heuristic,
                       .splits = 1,
                       .sm_count = 132,
                       .kv_order = KvOrder::reverse,
                       .exp_arg = ExpArg::unfused,
                       .exp2 = Exp2Impl::cuda_exp2f,
                       .row_sum = RowSumLayout::quad_fragment,
                       .normalise = Normalise::reciprocal,
                       .sum_rescale_fma = true,
                       .lse_fma = true,
                       .combine_fma = true,
                       .combine_sum = CombineSum::butterfly,
                       .mma = "h100"},
      },
      {
          .name = "torch_efficient_sm90",
          .summary = "torch SDPA's EFFICIENT_ATTENTION backend (CUTLASS memory-efficient kernel, sm80 code) on "
                     "H100/H200",
          .source = "pytorch/pytorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/ (kernel_forward.h "
                    "01b4eaef, epilogue_rescale_output.h 1338eea8, mma_accum_lambda_iterator.h a3ac4966); measured "
                    "on torch 2.11 + CUDA 13 (results/hardware/kernels)",
          .status = "pinned: >= 99.996 % of output bits in each of 256 captured cases, every bit in 97 % (H200, torch 2.11)",
          .schedule = {.block_n = kEfficientBlockN,
                       .split_block_n = kEfficientBlockN,
                       .split = SplitRule::none,
                       .kv_order = KvOrder::forward,
                       .exp_arg = ExpArg::unfused,
                       .exp2 = Exp2Impl::cuda_exp2f,
                       .row_sum = RowSumLayout::warp_columns,
                       .normalise = Normalise::reciprocal,
                       .scale_fold = ScaleFold::scale_then_log2,
                       .rescale = Rescale::when_max_grows,
                       .causal = CausalAlign::top_left,
                       .mma_k = 8,
                       .global_output_above = 128,
                       .mma = "h100"},
      },
      {
          .name = "torch_cudnn_sm90",
          .summary = "torch SDPA's CUDNN_ATTENTION backend (cuDNN 9.19's closed engines) on H100/H200, modelled "
                     "from black-box captures",
          .source = "NVIDIA/cudnn-frontend 3929da2e generated sm90 prefill kernel (d128_fprop_kernel.h: the "
                    "exponent, the row-sum fold, the quad order) as the hypothesis; fitted to torch 2.11 + cuDNN "
                    "9.19 captures (results/hardware/kernels)",
          .status = "closest model, not pinned: median 100 % of output bits (172 cases; 99.98 %+ for every "
                    "prefill case with D 64/128/256), but down to 73 % for decode (Sq = 1) and to 49 % for D 96 "
                    "and 160 (held-back): cuDNN runs other engines there",
          .schedule = {.block_n = {{0, 128}},
                       .split_block_n = {{0, 128}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::forward,
                       .exp_arg = ExpArg::unfused,
                       .exp2 = Exp2Impl::cuda_exp2f,
                       .row_sum = RowSumLayout::block_fma,
                       .normalise = Normalise::reciprocal,
                       .scale_fold = ScaleFold::log2_folded,
                       .alpha_arg = AlphaArg::difference_of_scaled,
                       .rescale = Rescale::always,
                       .causal = CausalAlign::top_left,
                       .mma_k = 16,
                       .global_output_above = 0,
                       .mma = "h100"},
      },
  };
  return r;
}

std::vector<std::string> kernel_recipe_names() {
  std::vector<std::string> n;
  for (const KernelRecipe& k : kernel_recipes()) n.push_back(k.name);
  return n;
}

const KernelRecipe& kernel_recipe(std::string_view name, const std::string& where) {
  for (const KernelRecipe& k : kernel_recipes())
    if (k.name == name) return k;
  throw InputError(fmt::format("{}unknown kernel recipe \"{}\"; known: {}", where, name,
                               fmt::join(kernel_recipe_names(), ", ")));
}

std::string kernel_table_markdown() {
  std::string t = "| kernel | what it is | follows | against the GPU |\n|---|---|---|---|\n";
  for (const KernelRecipe& k : kernel_recipes())
    t += fmt::format("| `{}` | {} | {} | {} |\n", k.name, k.summary, k.source, k.status);
  return t;
}

std::size_t block_n_for(const std::vector<std::pair<std::size_t, std::size_t>>& table, std::size_t D) {
  if (table.empty()) throw std::logic_error("block_n_for: empty table");
  for (const auto& [d, n] : table)
    if (d == 0 || D <= d) return n;
  return table.back().second;
}

namespace {

// FlashAttention-2's num_splits_heuristic (flash_api.cpp, as torch calls it: num_sms is twice the SM count),
// in float as the source computes the efficiencies.
std::size_t num_splits_heuristic(std::size_t bhm, std::size_t num_sms, std::size_t n_blocks, std::size_t max_splits) {
  if (static_cast<float>(bhm) >= 0.8f * static_cast<float>(num_sms)) return 1;
  max_splits = std::min({max_splits, num_sms, n_blocks});
  auto ceildiv = [](std::size_t a, std::size_t b) { return (a + b - 1) / b; };
  auto eligible = [&](std::size_t s) { return s == 1 || ceildiv(n_blocks, s) != ceildiv(n_blocks, s - 1); };
  std::vector<float> eff;
  float best = 0.f;
  for (std::size_t s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) {
      eff.push_back(0.f);
      continue;
    }
    const float waves = static_cast<float>(bhm * s) / static_cast<float>(num_sms);
    const float e = waves / std::ceil(waves);
    best = std::max(best, e);
    eff.push_back(e);
  }
  for (std::size_t s = 1; s <= max_splits; ++s)
    if (eligible(s) && eff[s - 1] >= 0.85f * best) return s;
  return 1;
}

}  // namespace

std::size_t kernel_splits(const KernelSchedule& k, std::size_t batch_heads, std::size_t Sq, std::size_t Skv,
                          std::size_t D) {
  switch (k.split) {
    case SplitRule::none: return 1;
    case SplitRule::fixed: return std::max<std::size_t>(1, k.splits);
    case SplitRule::fa2_heuristic: {
      const std::size_t bn = block_n_for(k.split_block_n, D);
      const std::size_t mblocks = (Sq + k.split_block_m - 1) / k.split_block_m;
      return num_splits_heuristic(batch_heads * mblocks, 2 * static_cast<std::size_t>(k.sm_count), (Skv + bn - 1) / bn,
                                  128);
    }
  }
  return 1;
}

}  // namespace pasa
