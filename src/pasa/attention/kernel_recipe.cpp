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
// FlashAttention-3 on sm90 (docs/kernel-sources.md §3): kBlockN of tile_size_fwd_sm90 (hopper/tile_size.h:10-54,
// UH 0251105a) for headdim_v = headdim, not local, not paged: 16-bit, its causal choice, and e4m3.
const std::vector<std::pair<std::size_t, std::size_t>> kFa3BlockN = {
    {64, 192}, {96, 144}, {128, 176}, {192, 112}, {256, 80}};
const std::vector<std::pair<std::size_t, std::size_t>> kFa3CausalBlockN = {
    {64, 128}, {96, 144}, {128, 128}, {192, 112}, {256, 80}};
const std::vector<std::pair<std::size_t, std::size_t>> kFa3Fp8BlockN = {
    {64, 160}, {96, 128}, {128, 224}, {192, 160}, {256, 128}};

constexpr const char* kFa3Source =
    "Dao-AILab/flash-attention 0251105a hopper/ (tile_size.h:10-54, softmax.h, mainloop_fwd_sm90_tma_gmma_ws.hpp, "
    "flash_fwd_kernel_sm90.h:409-416; built with --use_fast_math, hopper/setup.py:668)";
constexpr const char* kSageSource = "thu-ml/SageAttention d1a57a5";
constexpr const char* kFa4Source =
    "Dao-AILab/flash-attention 0251105a flash_attn/cute/ (flash_fwd_sm100.py: tuning :73-118, thresholds "
    ":2182-2192, finish :2735-2746; softmax.py: lazy rescale :315-332, exp2 pairs :361-403; utils.py: POLY_EX2 "
    ":28-46, ex2_emulation :754-786, fadd_reduce :416-453; interface.py: use_2cta_instrs :822-840)";

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
                    "exponent, the row-sum fold, the quad order) as the hypothesis; decode: the sm80 kernels the "
                    "profiler names (cudnn_decode_probe_kernels.json), the split's grids and the single-key probes "
                    "(cudnn_gap_probe_*); fitted to torch 2.11 + cuDNN 9.19 captures (results/hardware/kernels)",
          .status = "closest model, not pinned: prefill >= 99.98 % of output bits in every captured case (D 160 "
                    "through the fp32 fold constant); decode (Sq = 1) through its sm80 kernels and the strided split "
                    "every bit in 93 % of 4,368 sweep lengths 513-1100 and 44 of 48 later cases, >= 99.2 % in all; "
                    "the 4-warp kernel's row sum is not pinned (1 ulp in one element of a few hundred)",
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
                       .mma = "h100",
                       .decode = DecodeEngine::cudnn_sm80,
                       .fold_product = FoldProduct::float_product,
                       .decode_split_keys = 254,  // (the profiled grids: cudnn_decode_splits)
                       .decode_max_ctas = 256,
                       .decode_partition = DecodePartition::strided},
      },
      {
          .name = "fa3_sm90",
          .summary = "FlashAttention-3 (hopper/, flash_attn_interface, num_splits = 1 as its default) on H100/H200, "
                     "fp16/bf16",
          .source = kFa3Source,
          .status = "from source, not measured (FA3 is not installed on the lent H200); its MUFU.EX2 and MUFU.RCP are "
                    "the measured H200 tables, the wgmma accumulation the H100 model",
          .schedule = {.block_n = kFa3BlockN,
                       .split_block_n = kFa3BlockN,
                       .causal_block_n = kFa3CausalBlockN,
                       .split = SplitRule::none,
                       .kv_order = KvOrder::reverse,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::ex2_ftz,
                       .row_sum = RowSumLayout::quad_fragment,
                       .normalise = Normalise::rcp_approx,
                       .scale_fold = ScaleFold::log2_folded,
                       .alpha_arg = AlphaArg::scaled_difference,
                       .rescale = Rescale::always,
                       .causal = CausalAlign::bottom_right,
                       .mma_k = 16,
                       .sum_rescale_fma = true,  // as measured for the same source structure in torch's FA2
                       .mma = "h100",
                       .ftz = true},
      },
      {
          .name = "fa3_fp8_sm90",
          .summary = "FlashAttention-3 FP8 forward (e4m3 Q, K, V, descales 1, bf16 output) on H100/H200; set "
                     "\"pv_two_level\": true for the two-level accumulation of PR #2250",
          .source = std::string(kFa3Source) + "; PR #2250 ad64ed71 (hopper/utils.h flash::gemm two-level)",
          .status = "from source, not measured (FA3 is not installed on the lent H200); the e4m3 wgmma accumulation "
                    "(e8m13, no promotion) is the H100 model measured through cuBLAS fast-accumulate",
          .schedule = {.block_n = kFa3Fp8BlockN,
                       .split_block_n = kFa3Fp8BlockN,
                       .split = SplitRule::none,
                       .kv_order = KvOrder::reverse,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::ex2_ftz,
                       .row_sum = RowSumLayout::quad_fragment,
                       .normalise = Normalise::rcp_approx,
                       .scale_fold = ScaleFold::log2_folded,
                       .alpha_arg = AlphaArg::scaled_difference,
                       .rescale = Rescale::always,
                       .causal = CausalAlign::bottom_right,
                       .mma_k = 32,
                       .sum_rescale_fma = true,
                       .mma = "h100_e4m3_fast",
                       .inputs = {"fp8_e4m3fn"},
                       .output = "bf16",
                       .p_offset = 8,
                       .p_saturate = true,
                       .ftz = true},
      },
      {
          .name = "fa4_sm100",
          .summary = "FlashAttention-4 (flash_attn/cute, sm100: B200/GB200), fp16/bf16, head dim <= 192: lazy "
                     "rescale (threshold 8), software exp2 on the pairs its tuning picks, MUFU.RCP",
          .source = kFa4Source,
          .status = "from source, not measured (no Blackwell GPU lent); the software exp2 sequence is checked on the "
                    "H200 over every float32, MUFU.EX2/RCP are the H200's, tcgen05 accumulation is the H100 model (a "
                    "stand-in)",
          .schedule = {.block_n = {{0, 128}},
                       .split_block_n = {{0, 128}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::reverse,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::ex2_ftz,
                       .row_sum = RowSumLayout::row_interleaved8,
                       .normalise = Normalise::rcp_approx,
                       .scale_fold = ScaleFold::log2_folded,
                       .alpha_arg = AlphaArg::scaled_difference,
                       .rescale = Rescale::lazy,
                       .causal = CausalAlign::bottom_right,
                       .mma_k = 16,
                       .mma = "h100",
                       .rescale_threshold = 8.0f,
                       .soft_exp2 = SoftExp2Rule::fa4_tuning,
                       .max_d = 192},
      },
      {
          .name = "fa4_fp8_sm100",
          .summary = "FlashAttention-4 FP8 forward (e4m3 Q, K, V, descales 1, bf16 output), head dim <= 192: P offset "
                     "8, no lazy rescale (set \"rescale\": \"lazy\", \"rescale_threshold\": 4 for the saturating P "
                     "of flash-attention #2716)",
          .source = std::string(kFa4Source) + "; #2716/#2717/#2731 (2409214a, 849f660f) for the FP8 threshold",
          .status = "from source, not measured (no Blackwell GPU lent); as fa4_sm100",
          .schedule = {.block_n = {{0, 128}},
                       .split_block_n = {{0, 128}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::reverse,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::ex2_ftz,
                       .row_sum = RowSumLayout::row_interleaved8,
                       .normalise = Normalise::rcp_approx,
                       .scale_fold = ScaleFold::log2_folded,
                       .alpha_arg = AlphaArg::scaled_difference,
                       .rescale = Rescale::always,  // threshold 0: rescale_threshold > 0 is false (softmax.py :326)
                       .causal = CausalAlign::bottom_right,
                       .mma_k = 32,
                       .mma = "h100_e4m3_fast",
                       .inputs = {"fp8_e4m3fn"},
                       .output = "bf16",
                       .p_offset = 8,
                       .p_saturate = true,
                       .soft_exp2 = SoftExp2Rule::fa4_tuning,
                       .max_d = 192},
      },
      {
          .name = "ascend_ifa",
          .summary = "Ascend IncreFlashAttention (the PASA paper's NPU decode kernel), fp16/bf16, with pse, select "
                     "and kv_len: fp32 vector softmax, P and the output cast with CAST_ROUND (ties away)",
          .source = "seed 004 (IncreFlashAttention walk-through: ElewiseCompute, SoftmaxFlashV2Compute, Cast "
                    "CAST_ROUND, DealBmm2ResBaseBlock); cann-ops-adv incre_flash_attention_tiling.cc CalcInnerSize "
                    "(yueliang13/cann-ops-adv-vllm 015e205c) for the KV block",
          .status = "from source, not measured (no Ascend NPU here): the cube unit's accumulation, the vector Exp "
                    "and SoftmaxFlashV2's reduction order are pasa's textbook stand-ins; flash-decode splits and "
                    "int8 KV not modelled",
          .schedule = {.block_n = {{0, 8192}},
                       .split_block_n = {{0, 8192}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::forward,
                       .mma = "h100",
                       .p_round = RoundMode::nearest_away,
                       .out_round = RoundMode::nearest_away,
                       .engine = KernelEngine::blocked_fa2,
                       // sInnerSize = {8192, 4096, 2048}[min(G / 5, 2)] without antiquant
                       .block_n_by_group = {{4, 8192}, {9, 4096}, {10, 2048}}},
      },
      {
          .name = "sage1_triton",
          .summary = "SageAttention 1 (sageattn_qk_int8_pv_fp16_triton): INT8 Q/K per block (128/64 rows) after smooth K, "
                     "Q prescaled by scale·log2 e, fp16 P·V accumulated in fp16 per 64-key block, head dim <= 128",
          .source = std::string(kSageSource) + " triton/quant_per_block.py, attn_qk_int8_per_block[_causal].py, core.py "
                    "sageattn_qk_int8_pv_fp16_triton",
          .status = "pinned: every output bit of 128 cases captured on the H200 (results/hardware/sage/; Triton's "
                    "division, the fp16-accumulated tile and the contracted rescale measured there); LSE 99.5 % of bits",
          .schedule = {.block_n = {{0, 64}},
                       .split_block_n = {{0, 64}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::forward,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::cuda_exp2f,  // tl.math.exp2: ex2.approx.f32
                       .row_sum = RowSumLayout::block_quad,
                       .normalise = Normalise::rcp_approx,  // acc / l_i: Triton's division is RN(a·MUFU.RCP(b))
                       .causal = CausalAlign::top_left,
                       .mma_k = 16,
                       .sum_rescale_fma = true,  // l_i * alpha + l_ij, contracted
                       .mma = "h100_fp16_f16acc",
                       .max_d = 128,
                       .engine = KernelEngine::sage,
                       .qk_quant = "int8_per_block",
                       .dequant = Dequant::scores,
                       .q_prescale = true,
                       .smooth_k = true,
                       .v_format = "fp16",
                       .p_format = "fp16",
                       .pv_acc = "fp16",
                       .pv_rescale_fma = true,  // acc * alpha + dot as one FFMA (measured: 1 ulp in 0.01 % otherwise)
                       .block_m = 128,
                       .l_init = 1.0f},
      },
      {
          .name = "sage2_sm90",
          .summary = "SageAttention 2 on Hopper (sageattn_qk_int8_pv_fp8_cuda_sm90, per_thread, fp32+fp32): INT8 Q/K per "
                     "thread after smooth K, FP8 V per channel, FP8 P (offset 8.807), P·V per 128-key block in fp32",
          .source = std::string(kSageSource) + " csrc/qattn/qk_int_sv_f8_cuda_sm90.cu, attn_utils.cuh, csrc/fused/fused.cu, "
                    "triton/quant_per_thread.py, core.py sageattn_qk_int8_pv_fp8_cuda_sm90; built with --use_fast_math",
          .status = "pinned: every output bit of 128 cases captured on the H200 (results/hardware/sage/; the INT8 "
                    "Q/K and FP8 V elements and scales too; the contracted rescales measured there); LSE every bit "
                    "in 112 cases (the wrapper's cuBLAS q·km correction not pinned); the e4m3 wgmma accumulation is "
                    "the H100 model measured through cuBLAS fast-accumulate",
          .schedule = {.block_n = {{0, 128}},
                       .split_block_n = {{0, 128}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::forward,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::ex2_ftz,  // math::ptx_exp2: ex2.approx.ftz.f32
                       .row_sum = RowSumLayout::tile16,
                       .normalise = Normalise::rcp_approx,  // normalize_d: ptx_rcp
                       .causal = CausalAlign::top_left,
                       .mma_k = 32,
                       .sum_rescale_fma = true,  // d *= o_scale (update_mdo :400), d += (...) (:317, :448): one FFMA
                       .mma = "h100_e4m3_fast",
                       .p_offset = 8.807f,  // S_FP8_OFFSET (attn_utils.cuh:30): P up to 2^8.807 ~ 448
                       .p_saturate = true,
                       .pv_two_level = true,  // fp32+fp32: RO_temp from 0 per block, RO += RO_temp (:476-488)
                       .ftz = true,
                       .max_d = 128,
                       .engine = KernelEngine::sage,
                       .fold_product = FoldProduct::float_product,  // sm_scale *= math::log2e (fp32)
                       .qk_quant = "int8_per_thread_sm90",
                       .dequant = Dequant::fold_last_scores,
                       .smooth_k = true,
                       .v_quant = "fp8_per_channel",
                       .p_format = "fp8_e4m3fn",
                       // RO *= o_scale (update_mdo :414), RO += RO_temp (:353, :484): nvcc contracts them, as measured
                       // (without: 1 ulp in 13 of the 128 cases; with the plain d rescale, in 37)
                       .pv_rescale_fma = true,
                       .lse_lg2_approx = true,  // math::ptx_log2 (:563)
                       .block_m = 64,
                       .m_init = -5000000.0f,  // (:203-206)
                       .l_init = 1.0f},
      },
      {
          .name = "sage3_sm100",
          .summary = "SageAttention 3 on Blackwell (sageattn3_blackwell): NVFP4 Q/K/V (E2M1, e4m3 scale per 16), smooth K and "
                     "Q per 128 rows with δS, two-level FP4 P (row max at 2688, scale per 16 keys), block-scaled tcgen05",
          .source = std::string(kSageSource) + " sageattention3_blackwell/ (api.py preprocess_qkv, quantization/"
                    "fp4_quantization_4d.cu:185-230, blackwell/softmax_fused.h:40-170, mainloop_tma_ws.h:691-702)",
          .status = "from source, not measured (no Blackwell GPU lent); the mxf4nvf4 accumulation is MMA-Sim's model; "
                    "the rescale factor from the scaled maxima and P's e4m3 scale by RN are pasa's reading",
          .schedule = {.block_n = {{0, 128}},
                       .split_block_n = {{0, 128}},
                       .split = SplitRule::none,
                       .kv_order = KvOrder::forward,
                       .exp_arg = ExpArg::fma,
                       .exp2 = Exp2Impl::ex2_ftz,
                       .row_sum = RowSumLayout::sequential,  // (one thread per row on tcgen05's TMEM)
                       .normalise = Normalise::rcp_approx,   // 1 / sum under --use_fast_math (:150)
                       .causal = CausalAlign::bottom_right,
                       .mma_k = 64,
                       .mma = "b200_mxf4nvf4",
                       .p_offset = 11.392317f,  // -fp8_scalexfp4_scale_log2 (:33): P's row max at 448·6
                       .p_saturate = true,
                       .pv_two_level = true,     // rescale_o: O·scale + o_tmp (:159-169)
                       .ftz = true,
                       .max_d = 128,
                       .engine = KernelEngine::sage,
                       .qk_quant = "nvfp4_sa3",
                       .dequant = Dequant::fold,  // (scales 1 in the integer sense: the MMA applies them)
                       .smooth_k = true,
                       .v_quant = "nvfp4_sa3",
                       .p_format = "fp4_e2m1",
                       .pv_rescale_fma = true,
                       .lse_lg2_approx = true,
                       .smooth_q = 128,
                       .p_block = 16,
                       .block_m = 128},
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

namespace {

// FA4's tuning of the software exp2 (flash_fwd_sm100.py _TUNING_CONFIG :95-106 and _FP8_TUNING_CONFIG
// :107-114 for sm100, not sm103), keyed by (2-CTA, causal, head dim padded to 16).
struct Fa4Tuning {
  bool two_cta, causal;
  std::size_t dp, freq, start;
};
constexpr Fa4Tuning kFa4Tuning[] = {
    {.two_cta = true, .causal = false, .dp = 128, .freq = 10, .start = 1},
    {.two_cta = false, .causal = true, .dp = 128, .freq = 16, .start = 1},
    {.two_cta = true, .causal = false, .dp = 192, .freq = 16, .start = 0},
    {.two_cta = false, .causal = true, .dp = 192, .freq = 32, .start = 1},
};
constexpr Fa4Tuning kFa4Fp8Tuning[] = {
    {.two_cta = true, .causal = false, .dp = 128, .freq = 10, .start = 1},
    {.two_cta = false, .causal = true, .dp = 128, .freq = 8, .start = 1},
};

}  // namespace

SoftExp2Pattern soft_exp2_pattern(const KernelSchedule& k, std::size_t D, bool causal, std::size_t Sq, std::size_t G,
                                  bool fp8) {
  switch (k.soft_exp2) {
    case SoftExp2Rule::none: return {0, 4, 1};
    case SoftExp2Rule::fixed: return {k.soft_exp2_freq, k.soft_exp2_res, k.soft_exp2_start};
    case SoftExp2Rule::fa4_tuning: break;
  }
  const std::size_t dp = (D + 15) / 16 * 16;
  const bool pack_gqa = G > 1;  // interface.py :694-695, the default
  // interface.py :822-836 (headdim_v = headdim, not local/varlen/split/paged, sm100)
  const bool two_cta = !causal && dp == 128 && Sq * (pack_gqa ? G : 1) > 256 && (128 % G == 0 || !pack_gqa);
  const Fa4Tuning* t = nullptr;
  for (const Fa4Tuning& e : kFa4Tuning)
    if (e.two_cta == two_cta && e.causal == causal && e.dp == dp) t = &e;
  if (fp8)
    for (const Fa4Tuning& e : kFa4Fp8Tuning)  // merged over the 16-bit entry (flash_fwd_sm100.py :514-519)
      if (e.two_cta == two_cta && e.causal == causal && e.dp == dp) t = &e;
  // enable_ex2_emu (:245, :362-363): the entry's freq > 0, else head dim <= 128 (192 only with 2-CTA, non-causal)
  const bool enable = t ? t->freq > 0 : dp <= 128 || (dp == 192 && two_cta && !causal);
  if (!enable) return {0, 4, 1};
  SoftExp2Pattern p{t ? t->freq : 16, 4, t ? t->start : 1};  // :525-532
  if (pack_gqa && dp > 64 && !causal) p.freq = t ? t->freq : 10;
  return p;
}

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

// Fitted to the profiled launches of cuDNN 9.19 on an H200 (results/hardware/kernels/cudnn_decode_grid.json,
// cudnn_gap_probe_kernels.json): 4 CTAs from Skv 513, 8 from 1017, 16 from 2033, 32 at 4080 and 64 at 8192 for
// one or two KV heads (2032 = 8 · 254 is the last with 8); 8 CTAs at 2048-8192 for 32 heads (256 / 32); none
// for 4 x 32 (256 / 128 = 2 < 4). D 160 launches twice the CTAs (two 128-column halves of V, numerically the
// same parts).
std::size_t cudnn_decode_splits(const KernelSchedule& k, std::size_t batch_kv_heads, std::size_t Skv) {
  if (Skv <= 512 || k.decode_split_keys == 0) return 1;
  const std::size_t want = (Skv + k.decode_split_keys - 1) / k.decode_split_keys;
  std::size_t s = 1;
  while (s < want) s *= 2;
  const std::size_t cap = k.decode_max_ctas / std::max<std::size_t>(1, batch_kv_heads);
  while (s > cap && s > 1) s /= 2;
  return s < 4 ? 1 : s;
}

}  // namespace pasa
