// Kernel recipes: the attention kernels people run, as values. A recipe is an algorithm (fa2's
// online softmax), its numerics (fp16/bf16 inputs, fp32 scores, softmax and O, P in the input format, the
// output cast) and a *schedule*: every choice of the kernel's source that moves a bit, as a field, so that a
// user can ask "this kernel, but with forward KV order" without a new code path. The engine that runs a
// schedule is attention/detail/kernel_flash.cpp; the sources each recipe follows, line by line, are in
// docs/kernel-sources.md, and what was measured against the GPU in docs/hardware.md ("Kernel recipes").
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pasa/core/enum_table.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

enum class KvOrder { forward, reverse };  // key blocks first to last, or last to first (FA2's n_block loop)
// How the exponent's argument is formed, c = RN(scale·log2 e) folded once (FA2 softmax.h scale_apply_exp2):
enum class ExpArg {
  unfused,  // RN(RN(s·c) − RN(m·c)): torch's build (UNFUSE_FMA, __fmul_rn)
  fma,      // RN(s·c − RN(m·c)) in one FFMA: upstream FlashAttention-2 without UNFUSE_FMA
};
enum class Exp2Impl {
  cuda_exp2f,  // CUDA's exp2f without fast math: MUFU.EX2 with the x < −126 halving (numeric/gpu_math.hpp)
  ex2_ftz,     // ex2.approx.ftz.f32 alone (--use_fast_math)
  exact,       // 2^x in double, rounded once to fp32 (a textbook unit; no GPU computes it so)
};
enum class RowSumLayout {
  // (all of them add the fp32 P, before its cast)
  quad_fragment,  // FA2: thread t of a quad adds columns 8j + 2t + {0, 1} of each block in order, rescaled per
                  // block; (t0 + t2) + (t1 + t3) once at the end (softmax.h, quad_allreduce_ offsets 2 then 1)
  sequential,     // one sum per row over the block's columns in order (a textbook reduction)
  block_fma,      // cuDNN's open sm90 kernel: thread t sums its columns 8j + 2t + {0, 1} of the block from 0,
                  // l_t = fma(alpha, l_t, sum) (one FFMA), (t0 + t1) + (t2 + t3) at the end
  warp_columns,   // mem-efficient: per block, thread t adds its 8 columns 8j + 2t + {0, 1} of each 32-column warp
                  // slice from 0, the quad (t0 + t1) + (t2 + t3), then the slices' parts added in order onto
                  // RN(l·r) (kernel_forward.h iterative_softmax, mma_accum_lambda_iterator.h)
  row_interleaved8,  // FA4 (one thread per row): per block, 8 accumulators over columns c ≡ 0..7 (mod 8), the
                     // first seeded RN(RN(l·r) + p0), then ((a0+a2)+(a4+a6)) + ((a1+a3)+(a5+a7)) (cute utils.py
                     // fadd_reduce, arch >= 100: packed pairs, then lane 0 + lane 1)
  block_quad,  // Triton's tl.sum(p, 1) of an MMA-layout block: thread t adds its columns 8j + 2t + {0, 1} in order
               // from 0, the quad (t0 + t2) + (t1 + t3) (butterfly offsets 2 then 1), then l = l·alpha + block
               // (one FFMA where sum_rescale_fma: Triton contracts it) — SageAttention's Triton kernels
  tile16,      // SageAttention's CUDA kernels: per 16-column tile thread t adds ((p[c] + p[c+1]) + p[c+8]) + p[c+9],
               // c = 16i + 2t, onto its d (rescaled first, RN(d·alpha)); (t0 + t1) + (t2 + t3) at the end
               // (attn_utils.cuh update_mdo, qk_int_sv_f8_cuda_sm90.cu :317, normalize_d :736)
};
// Where the softmax scale enters:
enum class ScaleFold {
  log2_folded,      // FA2: c = RN(scale·log2 e) once, the max of the raw scores, exponent args from s·c
  scale_then_log2,  // mem-efficient: S ← RN(S·scale), S ← RN(S·RN(log2 e)), the max in log2 units, P = 2^RN(S − m)
};
// The rescale factor's exponent (log2_folded): FA2's scaled difference, or the difference of scaled maxima.
enum class AlphaArg {
  scaled_difference,     // RN(RN(m_prev − m)·c) (FA2 softmax.h)
  difference_of_scaled,  // RN(RN(m_prev·c) − RN(m·c)) (cuDNN's open sm90 kernel: the max kept in scaled units)
};
enum class Rescale {
  always,          // every block after the first (FA2 softmax_rescale_o)
  when_max_grows,  // only where the row's max grew (mem-efficient), else factor 1 and no multiply
  lazy,            // FA4: a = RN(RN(m_old − m_new)·c); if a >= −rescale_threshold the old max is kept and the factor
                   // is 1, so P reaches up to 2^(threshold + p_offset) (cute softmax.py update_row_max)
};
enum class CausalAlign {
  bottom_right,  // key j visible to query i iff j <= i + Skv − Sq: pasa's causal (FA2's kernel mask)
  top_left,      // j <= i: SDPA's is_causal on the mem-efficient and cuDNN backends; the recipe then refuses
                 // causal with Sq != Skv, where the two meanings part
};
enum class Normalise {
  reciprocal,  // inv = 1.f / l (IEEE), O·inv, inv = 1 for l = 0 or NaN (FA2 normalize_softmax_lse)
  divide,      // O / l per element
  rcp_approx,  // inv = MUFU.RCP(l) (rcp.approx.ftz; 1.f/l under --use_fast_math: FA3 softmax.h finalize, FA4's
               // cute.arch.rcp_approx), O·inv; l = 0 or NaN gives O·1 (FA4) — FA3's inv 0 moves no output bit there
};
// How the split combine sums Σ_s expf(LSE_s − lse_max) over the parts:
enum class CombineSum {
  sequential,  // part by part, in order
  butterfly,   // the warp all-reduce of FA2's combine kernel (flash_fwd_kernel.h combine_attn_seqk_parallel):
               // part s in lane s, offsets halving from the next power of two
};
// Which exponentials FA4 computes with its software exp2 (gpu::ex2_poly3) instead of MUFU.EX2: in each block's
// row, cut into 32-column fragments j, the pair (k, k+1), k even, is emulated iff freq > 0, k mod freq >=
// freq − res, j >= start and j is not the last fragment (cute softmax.py apply_exp2_convert).
enum class SoftExp2Rule {
  none,        // every exponential on MUFU.EX2
  fixed,       // soft_exp2_freq / _res / _start as given
  fa4_tuning,  // FA4's own choice per head dimension, causal, 2-CTA and dtype (flash_fwd_sm100.py _TUNING_CONFIG,
               // _FP8_TUNING_CONFIG and the defaults after them; interface.py's use_2cta_instrs): fa4_soft_exp2()
};
// How the fold constant c = scale·log2 e is rounded to fp32:
enum class FoldProduct {
  double_product,  // RN(RN(scale)·log2 e) with log2 e a double (FA2's host code, flash_api.cpp:130)
  float_product,   // RN(RN(scale)·RN(log2 e)): an fp32 multiply (cuDNN 9.19: at D 160 c is one ulp below the double
                   // product; single-key probes, results/hardware/kernels/cudnn_gap_probe_manifest.json)
};
// How cuDNN's split decode deals the 128-key blocks to its CTAs (decode: cudnn_sm80, Skv > 512):
enum class DecodePartition {
  strided,    // block b to CTA b mod splits, each CTA online over its blocks in key order, the lean reduction over
              // the CTAs in order (measured: every bit at 93 % of 4,368 sweep lengths 513-1100)
  per_block,  // one part per 128-key block (the earlier model: exact only where splits = blocks)
};
// Which kernel a decode call (Sq = 1) runs:
enum class DecodeEngine {
  same,        // the schedule's own, as for any Sq
  cudnn_sm80,  // cuDNN 9.19's sm80 decode kernels chosen by Skv (detail/kernel_cudnn_decode.hpp)
};
// What runs the schedule:
// How a quantised QKᵀ (qk_quant) becomes the exponent's argument; every score S is the exact integer product
// of Q's and K's elements, dq = RN(sq·sk) the product of their groups' fp32 scales:
enum class Dequant {
  scores,      // s = RN(RN(S)·dq), then fma(s, c, −m) (SageAttention's Triton: qk.to(fp32) * (q_scale * k_scale))
  fold,        // fma(S, RN(c·dq), −m): the dequantisation folded into the scale (sm90 kernel :263-264, update_mdo)
  fold_last_scores,  // fold, except that the last KV block of each query block dequantises first, then folds c
                     // alone (qk_int_sv_f8_cuda_sm90.cu :370, :402: the masked tail block)
};
enum class KernelEngine {
  flash,       // attention/detail/kernel_flash.cpp: a GPU kernel's fp32 steps, its MMA model, the fields below
  blocked_fa2, // pasa's fa2 engine (attention/detail/flash.cpp) under the fa_fp32 allocation of the input format
               // with P and the output rounded by p_round / out_round, KV blocks of block_n (or
               // block_n_by_group), all queries one block: an NPU kernel whose vector steps are fp32 (Ascend IFA)
  sage,        // attention/detail/kernel_sage.cpp: SageAttention's quantised kernels (qk_quant, smooth_k, v_quant,
               // dequant, the max kept in scaled units) with the fp32 steps of the fields above
};
enum class SplitRule {
  none,          // one pass over all keys
  fixed,         // `splits` parts
  fa2_heuristic, // FlashAttention-2's num_splits_heuristic with 2 x sm_count, as torch's mha_fwd calls it
};

inline constexpr EnumTable<DecodeEngine, 2> kDecodeEngines = {{
    {DecodeEngine::same, "same", "the schedule's own kernel"},
    {DecodeEngine::cudnn_sm80, "cudnn_sm80", "cuDNN's sm80 decode kernels by Skv (64/128-key blocks, 4 warps, lean reduction)"}}};
static_assert(enum_table_in_order(kDecodeEngines), "kDecodeEngines: one entry per DecodeEngine, in enum order");
inline constexpr EnumTable<FoldProduct, 2> kFoldProducts = {{
    {FoldProduct::double_product, "double", "c = RN(scale·log2 e), log2 e a double (FA2 host code)"},
    {FoldProduct::float_product, "float", "c = RN(RN(scale)·RN(log2 e)), an fp32 multiply (cuDNN)"}}};
static_assert(enum_table_in_order(kFoldProducts), "kFoldProducts: one entry per FoldProduct, in enum order");
inline constexpr EnumTable<DecodePartition, 2> kDecodePartitions = {{
    {DecodePartition::strided, "strided", "128-key block b to CTA b mod splits (cuDNN 9.19)"},
    {DecodePartition::per_block, "per_block", "one part per 128-key block"}}};
static_assert(enum_table_in_order(kDecodePartitions), "kDecodePartitions: one entry per DecodePartition, in enum order");
inline constexpr EnumTable<KernelEngine, 3> kKernelEngines = {{
    {KernelEngine::flash, "flash", "a GPU kernel's fp32 steps (FlashAttention, torch SDPA)"},
    {KernelEngine::blocked_fa2, "blocked_fa2", "pasa's fa2 engine, fp32 softmax, P/out rounded by p_round/out_round"},
    {KernelEngine::sage, "sage", "SageAttention's quantised kernels (INT8 Q/K, smooth K, FP8 or FP16 P·V)"}}};
inline constexpr EnumTable<Dequant, 3> kDequants = {{
    {Dequant::scores, "scores", "s = RN(RN(S)·RN(sq·sk)), then the scale (SageAttention Triton)"},
    {Dequant::fold, "fold", "fma(S, RN(c·RN(sq·sk)), −m) (SageAttention CUDA)"},
    {Dequant::fold_last_scores, "fold_last_scores", "fold, the last KV block of a query block dequantised first (sm90)"}}};
static_assert(enum_table_in_order(kDequants), "kDequants: one entry per Dequant, in enum order");
static_assert(enum_table_in_order(kKernelEngines), "kKernelEngines: one entry per KernelEngine, in enum order");
inline constexpr EnumTable<SoftExp2Rule, 3> kSoftExp2Rules = {{
    {SoftExp2Rule::none, "none", "MUFU.EX2 only"},
    {SoftExp2Rule::fixed, "fixed", "the pairs soft_exp2_freq/_res/_start select"},
    {SoftExp2Rule::fa4_tuning, "fa4_tuning", "FA4's tuning table (head dim, causal, 2-CTA, dtype)"}}};
static_assert(enum_table_in_order(kSoftExp2Rules), "kSoftExp2Rules: one entry per SoftExp2Rule, in enum order");
inline constexpr EnumTable<KvOrder, 2> kKvOrders = {{{KvOrder::forward, "forward", "first key block to last"},
                                                     {KvOrder::reverse, "reverse", "last key block to first (FA2)"}}};
static_assert(enum_table_in_order(kKvOrders), "kKvOrders: one entry per KvOrder, in enum order");
inline constexpr EnumTable<ExpArg, 2> kExpArgs = {{{ExpArg::unfused, "unfused", "RN(RN(s·c) − RN(m·c)) (torch)"},
                                                   {ExpArg::fma, "fma", "RN(s·c − RN(m·c)), one FFMA (upstream FA2)"}}};
static_assert(enum_table_in_order(kExpArgs), "kExpArgs: one entry per ExpArg, in enum order");
inline constexpr EnumTable<Exp2Impl, 3> kExp2Impls = {{
    {Exp2Impl::cuda_exp2f, "cuda_exp2f", "CUDA exp2f on the measured MUFU.EX2"},
    {Exp2Impl::ex2_ftz, "ex2_ftz", "ex2.approx.ftz.f32 alone (fast math)"},
    {Exp2Impl::exact, "exact", "2^x in double rounded to fp32 (textbook)"}}};
static_assert(enum_table_in_order(kExp2Impls), "kExp2Impls: one entry per Exp2Impl, in enum order");
inline constexpr EnumTable<RowSumLayout, 7> kRowSumLayouts = {{
    {RowSumLayout::quad_fragment, "quad_fragment", "per-thread columns of the MMA fragment, quad sum at the end"},
    {RowSumLayout::sequential, "sequential", "one running sum per row"},
    {RowSumLayout::block_fma, "block_fma", "per-thread block sums folded by fma(alpha, l, sum), (t0+t1)+(t2+t3)"},
    {RowSumLayout::warp_columns, "warp_columns", "per block: thread, quad (t0+t1)+(t2+t3), 32-column slices"},
    {RowSumLayout::row_interleaved8, "row_interleaved8", "per block: 8 interleaved accumulators, a pairwise tree (FA4)"},
    {RowSumLayout::block_quad, "block_quad", "per block from 0: per-thread columns, quad (t0+t2)+(t1+t3), then l·alpha + block (Triton tl.sum)"},
    {RowSumLayout::tile16, "tile16", "per 16-column tile: ((p0+p1)+p8)+p9 per thread onto d, (t0+t1)+(t2+t3) at the end (SageAttention CUDA)"}}};
static_assert(enum_table_in_order(kRowSumLayouts), "kRowSumLayouts: one entry per RowSumLayout, in enum order");
inline constexpr EnumTable<Normalise, 3> kNormalises = {{{Normalise::reciprocal, "reciprocal", "O · (1/l)"},
                                                         {Normalise::divide, "divide", "O / l"},
                                                         {Normalise::rcp_approx, "rcp_approx", "O · MUFU.RCP(l)"}}};
static_assert(enum_table_in_order(kNormalises), "kNormalises: one entry per Normalise, in enum order");
inline constexpr EnumTable<ScaleFold, 2> kScaleFolds = {{
    {ScaleFold::log2_folded, "log2_folded", "c = RN(scale·log2 e) folded into the exponent (FA2)"},
    {ScaleFold::scale_then_log2, "scale_then_log2", "RN(RN(S·scale)·log2 e), max in log2 units (mem-efficient)"}}};
static_assert(enum_table_in_order(kScaleFolds), "kScaleFolds: one entry per ScaleFold, in enum order");
inline constexpr EnumTable<AlphaArg, 2> kAlphaArgs = {{
    {AlphaArg::scaled_difference, "scaled_difference", "RN(RN(m_prev − m)·c) (FA2)"},
    {AlphaArg::difference_of_scaled, "difference_of_scaled", "RN(RN(m_prev·c) − RN(m·c))"}}};
static_assert(enum_table_in_order(kAlphaArgs), "kAlphaArgs: one entry per AlphaArg, in enum order");
inline constexpr EnumTable<Rescale, 3> kRescales = {{{Rescale::always, "always", "every block after the first"},
                                                     {Rescale::when_max_grows, "when_max_grows", "only where the max grew"},
                                                     {Rescale::lazy, "lazy", "keep the old max unless it grew by more than rescale_threshold (FA4)"}}};
static_assert(enum_table_in_order(kRescales), "kRescales: one entry per Rescale, in enum order");
inline constexpr EnumTable<CausalAlign, 2> kCausalAligns = {{
    {CausalAlign::bottom_right, "bottom_right", "j <= i + Skv − Sq (pasa's causal)"},
    {CausalAlign::top_left, "top_left", "j <= i (SDPA is_causal on mem-efficient/cuDNN)"}}};
static_assert(enum_table_in_order(kCausalAligns), "kCausalAligns: one entry per CausalAlign, in enum order");
inline constexpr EnumTable<CombineSum, 2> kCombineSums = {{
    {CombineSum::sequential, "sequential", "part by part"},
    {CombineSum::butterfly, "butterfly", "the combine's warp all-reduce (FA2)"}}};
static_assert(enum_table_in_order(kCombineSums), "kCombineSums: one entry per CombineSum, in enum order");
inline constexpr EnumTable<SplitRule, 3> kSplitRules = {{
    {SplitRule::none, "none", "no split"},
    {SplitRule::fixed, "fixed", "`splits` parts"},
    {SplitRule::fa2_heuristic, "fa2_heuristic", "FA2's num_splits_heuristic (2 x sm_count)"}}};
static_assert(enum_table_in_order(kSplitRules), "kSplitRules: one entry per SplitRule, in enum order");

struct KernelSchedule {
  // kBlockN by head dimension (the head dimension rounded up to the first entry >= D): the kernel without
  // splits, and the split-KV kernel's. One entry {0, n} means n for every D. causal_block_n, where not empty,
  // replaces block_n for causal calls (FA3 takes 128 there).
  std::vector<std::pair<std::size_t, std::size_t>> block_n{}, split_block_n{}, causal_block_n{};
  std::size_t split_block_m = 64;  // the m-blocks the heuristic counts
  SplitRule split = SplitRule::fa2_heuristic;
  std::size_t splits = 1;          // SplitRule::fixed
  int sm_count = 132;              // H100 / H200 SXM
  KvOrder kv_order = KvOrder::reverse;
  ExpArg exp_arg = ExpArg::unfused;
  Exp2Impl exp2 = Exp2Impl::cuda_exp2f;
  RowSumLayout row_sum = RowSumLayout::quad_fragment;
  Normalise normalise = Normalise::reciprocal;
  ScaleFold scale_fold = ScaleFold::log2_folded;
  AlphaArg alpha_arg = AlphaArg::scaled_difference;
  Rescale rescale = Rescale::always;
  CausalAlign causal = CausalAlign::bottom_right;
  std::size_t mma_k = 16;          // products per MMA instruction, the tensor-core model's block (m16n8k16: 16,
                                   // the mem-efficient kernel's m16n8k8: 8)
  std::size_t global_output_above = 0;  // D above which O goes through an fp32 global buffer, merged per block
                                        // (mem-efficient d > 128: epilogue_rescale_output.h); 0: registers
  bool sum_rescale_fma = false;    // RN(l·alpha) and the block's first add as one FFMA (nvcc contracts them:
                                   // measured for torch's FA2, where it fixes the last cases that need it, and
                                   // SageAttention 2's tile16 d, where it fuses with the first tile's add)
  bool lse_fma = true;             // a part's LSE = fma(m, scale, __logf(l)) (one FFMA), else RN(m·scale) + ...
  bool combine_fma = true;         // the split combine's O += w_s·O_s as one FFMA per part
  CombineSum combine_sum = CombineSum::sequential;
  std::string mma = "h100";        // the tensor-core model of both GEMMs, fp32 accumulate: "h100" is the H100
                                   // model of the input format (h100_fp16, h100_bf16, h100_e4m3), or a named model
  // The formats Q, K and V may take (one for all three) and the output's ("": the input format).
  std::vector<std::string> inputs = {"fp16", "bf16"};
  std::string output{};
  float p_offset = 0;              // P = 2^(s·c − u) with u = RN(RN(m·c) − p_offset): P in [0, 2^p_offset] (FA3/FA4
                                   // FP8's Max_offset 8; SageAttention's S_FP8_OFFSET 8.807, attn_utils.cuh:30; the
                                   // LSE takes it out again)
  float rescale_threshold = 0;     // Rescale::lazy, in log2 units (FA4: 8 for 16-bit inputs, 0 for FP8)
  bool p_saturate = false;         // P's cast clamps to ±max (cvt.rn.satfinite: FP8), else IEEE overflow
  bool pv_two_level = false;       // P·V of each KV block from 0, then O ← RN(O + block) in fp32 (FA3 FP8's two-level
                                   // accumulation, flash-attention PR #2250); else into the running O
  bool ftz = false;                // the softmax's fp32 operations flush subnormal inputs and results (--use_fast_math)
  SoftExp2Rule soft_exp2 = SoftExp2Rule::none;
  std::size_t soft_exp2_freq = 0, soft_exp2_res = 4, soft_exp2_start = 1;  // SoftExp2Rule::fixed
  std::size_t max_d = 0;           // the largest head dimension the kernel serves (0: any); FA4's d = 256 is
                                   // another kernel (sm100_hd256_2cta_fmha_forward.py), not modelled
  // The rounding of P's cast and of the output's (GPU kernels: cvt.rn, nearest even; Ascend C's CAST_ROUND:
  // nearest, ties away from zero).
  RoundMode p_round = RoundMode::nearest_even, out_round = RoundMode::nearest_even;
  KernelEngine engine = KernelEngine::flash;
  // Where not empty, kBlockN by query heads per KV head G (the first entry whose key >= G; key 0: any G),
  // replacing block_n (Ascend IFA's sInnerSize: 8192, 4096, 2048 by G / 5).
  std::vector<std::pair<std::size_t, std::size_t>> block_n_by_group{};
  DecodeEngine decode = DecodeEngine::same;
  FoldProduct fold_product = FoldProduct::double_product;
  // decode: cudnn_sm80 above 512 keys: splits = the power of 2 >= ceil(Skv / decode_split_keys), at most
  // decode_max_ctas / (batch · KV heads), one CTA where that leaves fewer than 4 (profiled grids,
  // cudnn_decode_splits); the blocks dealt by decode_partition.
  std::size_t decode_split_keys = 254, decode_max_ctas = 256;
  DecodePartition decode_partition = DecodePartition::strided;
  // ---- engine sage (SageAttention; docs/kernel-sources.md §5) ----
  std::string qk_quant{};      // Q's and K's block scheme (numeric/block_scale.hpp; integer elements): Q by its `a`
                               // layout, K by `b`; S their exact integer product, dequantised as `dequant` says
  Dequant dequant = Dequant::scores;
  bool q_prescale = false;     // Q·fp32(scale·log2 e) in fp32 before quantising: the scores are log2 units and c = 1
                               // (triton/quant_per_block.py:39, sm_scale * 1.44269504 passed as an fp32 argument)
  bool smooth_k = false;       // K − km, km = mean of K over the keys, both in the input format (core.py :280)
  std::string v_format{};      // V rounded to this first ("": the input format; SA1 casts bf16 V to fp16, core.py :298)
  std::string v_quant{};       // V's block scheme (per channel: its scale multiplies O after the normalisation)
  std::string p_format{};      // P's cast ("": V's format)
  std::string pv_acc{};        // "fp16": each block's P·V accumulates in fp16 on the tensor core (tl.dot out_dtype
                               // float16), then O ← RN(O + block) in fp32; "": the mma model's fp32 accumulation
  bool pv_rescale_fma = false; // (pv_acc or pv_two_level) O ← fma(O, alpha, block): the rescale and the add of the
                               // block's P·V as one FFMA (Triton contracts acc * alpha ... acc += dot; nvcc SA2's
                               // RO *= o_scale ... RO += RO_temp)
  bool lse_lg2_approx = false; // the LSE's log2 by MUFU.LG2 (ptx_log2, SageAttention CUDA), else log2f (Triton tl.log2)
  std::size_t smooth_q = 0;    // Q minus its mean per this many rows (SA3: 128, the sum / 128 over the zero-padded
                               // group), δS = q̄·K'ᵀ in the input format, then fp32: the QKᵀ accumulator's start
  std::size_t p_block = 0;     // P quantised per this many keys (SA3: 16) to p_format, scale ex2(bmax·c − m − log2 6)
                               // from the block's max score (the row max at 2^p_offset), e4m3 for the MMA
  std::size_t block_m = 128;   // query rows per CTA: the causal loop's bound and fold_last_scores' last block
  float m_init = -std::numeric_limits<float>::infinity();  // the running max before the first block (sm90: −5e6)
  float l_init = 0;            // the running sum before the first block (SageAttention: 1, made 0 by alpha = 0)
  bool operator==(const KernelSchedule&) const = default;
};

struct KernelRecipe {
  std::string name;
  std::string summary;
  std::string source;  // repository, file and commit it follows
  // How far the GPU confirms it: "pinned" (>= 99.99 % of output bits on every captured case) or what holds
  // and where it stops, shown wherever the recipe is listed.
  std::string status;
  KernelSchedule schedule;
  bool operator==(const KernelRecipe&) const = default;
};

// The registry (kernel_recipe.cpp, one entry a block).
const std::vector<KernelRecipe>& kernel_recipes();
std::vector<std::string> kernel_recipe_names();
// InputError naming the known recipes for an unknown name; `where` prefixes the message.
const KernelRecipe& kernel_recipe(std::string_view name, const std::string& where = "");
// The markdown table of pasa-attn --list-kernels.
std::string kernel_table_markdown();

// kBlockN of `table` for head dimension D (the first entry whose key >= D, else the last).
std::size_t block_n_for(const std::vector<std::pair<std::size_t, std::size_t>>& table, std::size_t D);
// FA4's software-exp2 pairs for one call (SoftExp2Rule::fa4_tuning, or the fixed fields): {freq, res, start};
// freq 0: none. G = query heads per KV head, fp8: the inputs are FP8.
struct SoftExp2Pattern {
  std::size_t freq = 0, res = 4, start = 1;
};
SoftExp2Pattern soft_exp2_pattern(const KernelSchedule&, std::size_t D, bool causal, std::size_t Sq, std::size_t G,
                                  bool fp8);
// The number of KV parts the schedule takes for these sizes (b·h·ceil(Sq/split_block_m) work items).
std::size_t kernel_splits(const KernelSchedule&, std::size_t batch_heads, std::size_t Sq, std::size_t Skv,
                          std::size_t D);
// The CTAs cuDNN's sm80 decode kernel splits one (batch, KV head) over (decode: cudnn_sm80): 1 up to 512 keys,
// else as KernelSchedule::decode_split_keys / decode_max_ctas say.
std::size_t cudnn_decode_splits(const KernelSchedule&, std::size_t batch_kv_heads, std::size_t Skv);


}  // namespace pasa
