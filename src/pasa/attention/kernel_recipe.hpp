// Kernel recipes: the attention kernels people run, as values. A recipe is an algorithm (fa2's
// online softmax), its numerics (fp16/bf16 inputs, fp32 scores, softmax and O, P in the input format, the
// output cast) and a *schedule*: every choice of the kernel's source that moves a bit, as a field, so that a
// user can ask "this kernel, but with forward KV order" without a new code path. The engine that runs a
// schedule is attention/detail/kernel_flash.cpp; the sources each recipe follows, line by line, are in
// docs/kernel-sources.md, and what was measured against the GPU in docs/hardware.md ("Kernel recipes").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pasa/core/enum_table.hpp"

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
  quad_fragment,  // FA2: thread t of a quad adds columns 8j + 2t + {0, 1} of each block in order, rescaled per
                  // block; (t0 + t2) + (t1 + t3) once at the end (softmax.h, quad_allreduce_ offsets 2 then 1)
  sequential,     // one sum per row over the block's columns in order (a textbook reduction)
  block_fma,      // cuDNN's open sm90 kernel: thread t sums its columns 8j + 2t + {0, 1} of the block from 0,
                  // l_t = fma(alpha, l_t, sum) (one FFMA), (t0 + t1) + (t2 + t3) at the end
  warp_columns,   // mem-efficient: per block, thread t adds its 8 columns 8j + 2t + {0, 1} of each 32-column warp
                  // slice from 0, the quad (t0 + t1) + (t2 + t3), then the slices' parts added in order onto
                  // RN(l·r) (kernel_forward.h iterative_softmax, mma_accum_lambda_iterator.h)
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
};
enum class CausalAlign {
  bottom_right,  // key j visible to query i iff j <= i + Skv − Sq: pasa's causal (FA2's kernel mask)
  top_left,      // j <= i: SDPA's is_causal on the mem-efficient and cuDNN backends; the recipe then refuses
                 // causal with Sq != Skv, where the two meanings part
};
enum class Normalise {
  reciprocal,  // inv = 1.f / l (IEEE), O·inv, inv = 1 for l = 0 or NaN (FA2 normalize_softmax_lse)
  divide,      // O / l per element
};
// How the split combine sums Σ_s expf(LSE_s − lse_max) over the parts:
enum class CombineSum {
  sequential,  // part by part, in order
  butterfly,   // the warp all-reduce of FA2's combine kernel (flash_fwd_kernel.h combine_attn_seqk_parallel):
               // part s in lane s, offsets halving from the next power of two
};
enum class SplitRule {
  none,          // one pass over all keys
  fixed,         // `splits` parts
  fa2_heuristic, // FlashAttention-2's num_splits_heuristic with 2 x sm_count, as torch's mha_fwd calls it
};

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
inline constexpr EnumTable<RowSumLayout, 4> kRowSumLayouts = {{
    {RowSumLayout::quad_fragment, "quad_fragment", "per-thread columns of the MMA fragment, quad sum at the end"},
    {RowSumLayout::sequential, "sequential", "one running sum per row"},
    {RowSumLayout::block_fma, "block_fma", "per-thread block sums folded by fma(alpha, l, sum), (t0+t1)+(t2+t3)"},
    {RowSumLayout::warp_columns, "warp_columns", "per block: thread, quad (t0+t1)+(t2+t3), 32-column slices"}}};
static_assert(enum_table_in_order(kRowSumLayouts), "kRowSumLayouts: one entry per RowSumLayout, in enum order");
inline constexpr EnumTable<Normalise, 2> kNormalises = {{{Normalise::reciprocal, "reciprocal", "O · (1/l)"},
                                                         {Normalise::divide, "divide", "O / l"}}};
static_assert(enum_table_in_order(kNormalises), "kNormalises: one entry per Normalise, in enum order");
inline constexpr EnumTable<ScaleFold, 2> kScaleFolds = {{
    {ScaleFold::log2_folded, "log2_folded", "c = RN(scale·log2 e) folded into the exponent (FA2)"},
    {ScaleFold::scale_then_log2, "scale_then_log2", "RN(RN(S·scale)·log2 e), max in log2 units (mem-efficient)"}}};
static_assert(enum_table_in_order(kScaleFolds), "kScaleFolds: one entry per ScaleFold, in enum order");
inline constexpr EnumTable<AlphaArg, 2> kAlphaArgs = {{
    {AlphaArg::scaled_difference, "scaled_difference", "RN(RN(m_prev − m)·c) (FA2)"},
    {AlphaArg::difference_of_scaled, "difference_of_scaled", "RN(RN(m_prev·c) − RN(m·c))"}}};
static_assert(enum_table_in_order(kAlphaArgs), "kAlphaArgs: one entry per AlphaArg, in enum order");
inline constexpr EnumTable<Rescale, 2> kRescales = {{{Rescale::always, "always", "every block after the first"},
                                                     {Rescale::when_max_grows, "when_max_grows", "only where the max grew"}}};
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
  // splits, and the split-KV kernel's. One entry {0, n} means n for every D.
  std::vector<std::pair<std::size_t, std::size_t>> block_n, split_block_n;
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
                                   // measured for torch's FA2, where it fixes the last cases that need it)
  bool lse_fma = true;             // a part's LSE = fma(m, scale, __logf(l)) (one FFMA), else RN(m·scale) + ...
  bool combine_fma = true;         // the split combine's O += w_s·O_s as one FFMA per part
  CombineSum combine_sum = CombineSum::sequential;
  std::string mma = "h100";        // the tensor-core model of both GEMMs, fp32 accumulate: "h100" is the H100
                                   // model of the input format (h100_fp16, h100_bf16), or a named model
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
// The number of KV parts the schedule takes for these sizes (b·h·ceil(Sq/split_block_m) work items).
std::size_t kernel_splits(const KernelSchedule&, std::size_t batch_heads, std::size_t Sq, std::size_t Skv,
                          std::size_t D);


}  // namespace pasa
