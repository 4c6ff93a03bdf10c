#include "pasa/study/kernel_bridge.hpp"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/core/error.hpp"
#include "pasa/study/hardware_compare.hpp"

namespace pasa {

namespace {

KernelMatch match(const AttentionInputs& in, const KernelRecipe& k, const std::string& variant, const Tensor& gpu,
                  int threads) {
  AlgorithmSpec spec;
  spec.kernel = k;
  const AttentionOutput out = run_attention(in, spec, threads);
  const UlpHistogram h = ulp_histogram(out.o, gpu);
  return {k.name, variant, h.elements, h.identical, h.max_ulp};
}

// Every single-field change of a schedule, with its label: each enumerated field to each other value, the
// block sizes of the other registered recipes, the FMA flags flipped, the split rule to none.
std::vector<std::pair<std::string, KernelSchedule>> one_field_variants(const KernelSchedule& s) {
  std::vector<std::pair<std::string, KernelSchedule>> v;
  auto each = [&](const char* field, const auto& table, auto KernelSchedule::*member) {
    for (const auto& e : table)
      if (e.value != s.*member) {
        KernelSchedule t = s;
        t.*member = e.value;
        v.emplace_back(fmt::format("{}={}", field, e.name), t);
      }
  };
  each("kv_order", kKvOrders, &KernelSchedule::kv_order);
  each("exp_arg", kExpArgs, &KernelSchedule::exp_arg);
  each("exp2", kExp2Impls, &KernelSchedule::exp2);
  each("row_sum", kRowSumLayouts, &KernelSchedule::row_sum);
  each("normalise", kNormalises, &KernelSchedule::normalise);
  each("scale_fold", kScaleFolds, &KernelSchedule::scale_fold);
  each("alpha_arg", kAlphaArgs, &KernelSchedule::alpha_arg);
  each("rescale", kRescales, &KernelSchedule::rescale);
  each("split", kSplitRules, &KernelSchedule::split);
  each("combine_sum", kCombineSums, &KernelSchedule::combine_sum);
  each("soft_exp2", kSoftExp2Rules, &KernelSchedule::soft_exp2);
  each("fold_product", kFoldProducts, &KernelSchedule::fold_product);
  if (s.decode == DecodeEngine::cudnn_sm80) {  // (the decode fields move nothing elsewhere)
    each("decode_partition", kDecodePartitions, &KernelSchedule::decode_partition);
    for (std::size_t keys : {std::size_t{128}, std::size_t{256}})  // one block, or two, per CTA
      if (keys != s.decode_split_keys) {
        KernelSchedule t = s;
        t.decode_split_keys = keys;
        v.emplace_back(fmt::format("decode_split_keys={}", keys), t);
      }
  }
  if (s.engine == KernelEngine::sage) {  // (SageAttention's fields: the sage engine alone reads them)
    each("dequant", kDequants, &KernelSchedule::dequant);
    for (const auto& entry : {std::pair<const char*, bool KernelSchedule::*>{"pv_rescale_fma", &KernelSchedule::pv_rescale_fma},
                              {"smooth_k", &KernelSchedule::smooth_k}, {"q_prescale", &KernelSchedule::q_prescale}}) {
      KernelSchedule t = s;
      t.*entry.second = !(s.*entry.second);
      v.emplace_back(fmt::format("{}={}", entry.first, t.*entry.second ? "true" : "false"), t);
    }
    for (const char* q : {"int8_per_block", "int8_per_warp", "int8_per_thread", "int8_per_thread_sm90"})
      if (s.qk_quant != q) {
        KernelSchedule t = s;
        t.qk_quant = q;
        v.emplace_back(fmt::format("qk_quant={}", q), t);
      }
  }
  for (const KernelRecipe& r : kernel_recipes())
    if (r.schedule.block_n != s.block_n) {
      KernelSchedule t = s;
      t.block_n = r.schedule.block_n;
      v.emplace_back("block_n=" + r.name + "'s", t);
    }
  for (const auto& [field, member] : {std::pair<const char*, bool KernelSchedule::*>{"lse_fma", &KernelSchedule::lse_fma},
                                      {"combine_fma", &KernelSchedule::combine_fma},
                                      {"sum_rescale_fma", &KernelSchedule::sum_rescale_fma},
                                      {"ftz", &KernelSchedule::ftz},
                                      {"pv_two_level", &KernelSchedule::pv_two_level}}) {
    KernelSchedule t = s;
    t.*member = !(s.*member);
    v.emplace_back(fmt::format("{}={}", field, t.*member ? "true" : "false"), t);
  }
  for (std::size_t k : {std::size_t{8}, std::size_t{16}})
    if (k != s.mma_k) {
      KernelSchedule t = s;
      t.mma_k = k;
      v.emplace_back(fmt::format("mma_k={}", k), t);
    }
  return v;
}

bool better(const KernelMatch& a, const KernelMatch& b) {
  return a.identical != b.identical ? a.identical > b.identical : a.max_ulp < b.max_ulp;
}

}  // namespace

KernelBridgeReport compare_kernel(const AttentionInputs& in_any, const Tensor& gpu_out, int threads) {
  AttentionInputs wide;  // (reads Q, K and V as doubles: a narrow input widened)
  const AttentionInputs& in = wide_inputs(in_any, wide, threads);
  if (!(gpu_out.shape == in.q.shape))
    throw InputError(fmt::format("the kernel's output is ({}, {}, {}, {}); Q is ({}, {}, {}, {})", gpu_out.shape.B,
                                 gpu_out.shape.N, gpu_out.shape.S, gpu_out.shape.D, in.q.shape.B, in.q.shape.N,
                                 in.q.shape.S, in.q.shape.D));
  KernelBridgeReport r;
  for (const KernelRecipe& k : kernel_recipes()) {
    try {
      r.recipes.push_back(match(in, k, "", gpu_out, threads));
    } catch (const InputError& e) {
      r.refused.push_back(k.name + ": " + e.what());
    }
  }
  if (r.recipes.empty()) throw InputError("no kernel recipe runs on these inputs: " + fmt::format("{}", fmt::join(r.refused, "; ")));
  std::stable_sort(r.recipes.begin(), r.recipes.end(), better);
  const KernelMatch& best = r.recipes.front();
  const KernelRecipe base = kernel_recipe(best.recipe);
  if (best.identical == best.elements) {
    r.verdict = fmt::format("{} reproduces every output bit", best.recipe);
    return r;
  }
  for (const auto& [label, schedule] : one_field_variants(base.schedule)) {
    KernelRecipe k = base;
    k.schedule = schedule;
    try {
      r.variants.push_back(match(in, k, label, gpu_out, threads));
    } catch (const InputError&) {  // a combination the engine refuses (e.g. fma with split-KV)
    }
  }
  std::stable_sort(r.variants.begin(), r.variants.end(), better);
  if (!r.variants.empty() && better(r.variants.front(), best))
    r.verdict = fmt::format("closest: {} ({:.4f} % identical); it parts from the kernel at {}: with it, {:.4f} %",
                            best.recipe, best.identical_pct(), r.variants.front().variant,
                            r.variants.front().identical_pct());
  else
    r.verdict = fmt::format("closest: {} ({:.4f} % identical, max {} ulp); no single schedule field brings it closer: "
                            "the kernel differs in a step the schedule does not vary, or in two at once",
                            best.recipe, best.identical_pct(), best.max_ulp);
  return r;
}

std::string kernel_bridge_text(const KernelBridgeReport& r) {
  std::string t = fmt::format("{:<28} {:<34} {:>12} {:>8}\n", "recipe", "variant", "identical %", "max ulp");
  auto row = [&](const KernelMatch& m) {
    t += fmt::format("{:<28} {:<34} {:>12.4f} {:>8}\n", m.recipe, m.variant.empty() ? "(as registered)" : m.variant,
                     m.identical_pct(), m.max_ulp);
  };
  for (const KernelMatch& m : r.recipes) row(m);
  for (std::size_t i = 0; i < std::min<std::size_t>(r.variants.size(), 8); ++i) row(r.variants[i]);
  for (const std::string& x : r.refused) t += "refused: " + x + "\n";
  return t + r.verdict + "\n";
}

}  // namespace pasa
