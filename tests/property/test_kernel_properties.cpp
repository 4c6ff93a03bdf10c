// The contract on kernel recipes (attention/kernel_recipe.hpp, docs/contract.md), on random problems and random
// schedules: every registered recipe with any of its fields overridden (KV order, exp2, row-sum layout,
// normalisation, scale placement, rescale rule, split rule and counts, block sizes, MMA k, the fp32 output
// path, FMAs) on fp16 or bf16 inputs of random shapes (GQA, Sq != Skv, decode, D 8..160), causal or not:
//   1. the output is within the inputs' precision of the MPFR golden: relative RMSE <= 2^-9 (fp16) or 2^-6
//      (bf16) — the output's own rounding is 2^-12 / 2^-9 relative — and the lse of every row that sees a
//      key within 2^-6 of the golden's (what the schedule changes is the order of fp32 steps, never more);
//   2. its bits do not depend on the thread count (1 vs 3);
//   3. its JSON (io/kernel_json.hpp) reads back to the same recipe;
//   4. what the engine does not model is refused with an InputError before any work: inputs outside the
//      recipe's formats, head dimensions above its max_d, a P offset + lazy threshold past the P format
//      without saturation, pse, select, kv_len, top-left causal with Sq != Skv, exp_arg fma with split-KV.
// The FP8 recipes (e4m3 inputs, bf16 output) are held to 2^-3.
// The GPU itself checks the registered recipes bit for bit (tests/python/test_kernel_recipes.py); this file
// checks that no combination of fields breaks the engine. PASA_KERNEL_PROPERTY_CASES (default 1000) cases
// from PASA_KERNEL_PROPERTY_SEED (default 38); std::mt19937_64's raw outputs (a sequence the standard fixes).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/kernel_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;

namespace {

struct Rng {
  std::mt19937_64 g;
  std::size_t in(std::size_t lo, std::size_t hi) { return lo + static_cast<std::size_t>(g() % (hi - lo + 1)); }
  bool chance(double p) { return static_cast<double>(g() >> 11) * 0x1p-53 < p; }
  template <class T>
  T pick(const std::vector<T>& v) { return v[in(0, v.size() - 1)]; }
};

template <class E, std::size_t N>
E pick_enum(Rng& r, const EnumTable<E, N>& t) {
  return t[r.in(0, N - 1)].value;
}

KernelRecipe draw_recipe(Rng& r) {
  KernelRecipe k = r.pick(kernel_recipes());
  KernelSchedule& s = k.schedule;
  if (r.chance(0.5)) s.kv_order = pick_enum(r, kKvOrders);
  if (r.chance(0.3)) s.exp2 = pick_enum(r, kExp2Impls);
  if (r.chance(0.3)) s.row_sum = pick_enum(r, kRowSumLayouts);
  if (r.chance(0.3)) s.normalise = pick_enum(r, kNormalises);
  if (r.chance(0.3)) s.scale_fold = pick_enum(r, kScaleFolds);
  if (r.chance(0.3)) s.rescale = pick_enum(r, kRescales);
  if (r.chance(0.2)) s.alpha_arg = pick_enum(r, kAlphaArgs);
  if (r.chance(0.2)) s.causal = pick_enum(r, kCausalAligns);
  if (r.chance(0.4)) {
    s.split = pick_enum(r, kSplitRules);
    if (s.split == SplitRule::fixed) s.splits = r.in(1, 6);  // (the count of the fixed rule only)
    s.sm_count = static_cast<int>(r.pick<std::size_t>({1, 8, 132}));
  }
  if (r.chance(0.4)) s.block_n = {{0, r.pick<std::size_t>({8, 16, 32, 64, 128})}};
  if (r.chance(0.3)) s.split_block_n = {{0, r.pick<std::size_t>({16, 64, 256})}};
  if (r.chance(0.2)) s.mma_k = r.pick<std::size_t>({8, 16, 32});
  if (r.chance(0.2)) s.global_output_above = r.pick<std::size_t>({0, 16, 128});
  if (r.chance(0.2)) s.lse_fma = !s.lse_fma;
  if (r.chance(0.2)) s.combine_fma = !s.combine_fma;
  if (r.chance(0.2)) s.sum_rescale_fma = !s.sum_rescale_fma;
  if (r.chance(0.2)) s.combine_sum = pick_enum(r, kCombineSums);
  if (r.chance(0.1)) s.exp_arg = pick_enum(r, kExpArgs);
  if (r.chance(0.2)) s.causal_block_n = {{0, r.pick<std::size_t>({16, 48, 128})}};
  if (r.chance(0.2)) s.ftz = !s.ftz;
  if (r.chance(0.2)) s.pv_two_level = !s.pv_two_level;
  if (r.chance(0.1)) s.p_saturate = !s.p_saturate;
  if (r.chance(0.2)) s.p_offset = static_cast<float>(r.pick<double>({0, 2, 8, 8.807}));
  if (r.chance(0.2)) s.rescale_threshold = static_cast<float>(r.pick<double>({0.0, 0.5, 4.0, 8.0}));
  if (r.chance(0.2)) {
    s.soft_exp2 = pick_enum(r, kSoftExp2Rules);
    if (s.soft_exp2 == SoftExp2Rule::fixed) {  // (the pattern's fields mean nothing, and are not written, otherwise)
      s.soft_exp2_freq = r.pick<std::size_t>({0, 2, 10, 16});
      s.soft_exp2_res = r.pick<std::size_t>({1, 4, 6});
      s.soft_exp2_start = r.in(0, 2);
    }
  }
  if (r.chance(0.1)) s.max_d = r.pick<std::size_t>({0, 64, 192});
  const std::vector<RoundMode> casts = {RoundMode::nearest_even, RoundMode::toward_zero, RoundMode::toward_pos,
                                        RoundMode::toward_neg, RoundMode::odd};
  if (r.chance(0.2)) s.p_round = r.pick(casts);
  if (r.chance(0.2)) s.out_round = r.pick(casts);
  if (r.chance(0.15)) s.engine = pick_enum(r, kKernelEngines);  // (sage fields on another engine: refused)
  if (r.chance(0.2)) s.decode = pick_enum(r, kDecodeEngines);
  if (r.chance(0.2)) s.fold_product = pick_enum(r, kFoldProducts);
  if (r.chance(0.2)) s.decode_partition = pick_enum(r, kDecodePartitions);
  if (r.chance(0.2)) s.decode_split_keys = r.pick<std::size_t>({1, 128, 254, 600});
  if (r.chance(0.2)) s.decode_max_ctas = r.pick<std::size_t>({1, 16, 256});
  if (r.chance(0.15)) s.block_n_by_group = {{r.in(1, 3), r.pick<std::size_t>({16, 64})}, {8, 32}};
  // SageAttention's fields (engine sage): the schemes and rules its recipes and users name
  if (s.engine == KernelEngine::sage) {
    if (r.chance(0.3))
      s.qk_quant = r.pick<std::string>({"int8_per_block", "int8_per_warp", "int8_per_thread", "int8_per_thread_sm90",
                                        "int4_per_thread", "int8_per_token_head", "nvfp4_sa3"});
    if (r.chance(0.3)) s.dequant = pick_enum(r, kDequants);
    if (r.chance(0.2)) s.q_prescale = !s.q_prescale;
    if (r.chance(0.2)) s.smooth_k = !s.smooth_k;
    if (r.chance(0.2)) s.v_quant = r.pick<std::string>({"", "fp8_per_channel", "fp8_per_channel_2p25"});
    if (r.chance(0.2)) s.p_format = r.pick<std::string>({"", "fp16", "fp8_e4m3fn"});
    if (r.chance(0.2)) s.pv_acc = r.pick<std::string>({"", "fp16"});
    if (r.chance(0.2)) s.pv_rescale_fma = !s.pv_rescale_fma;
    if (r.chance(0.2)) s.lse_lg2_approx = !s.lse_lg2_approx;
    if (r.chance(0.2)) s.block_m = r.pick<std::size_t>({16, 64, 128});
    if (r.chance(0.1)) s.m_init = r.pick<float>({-std::numeric_limits<float>::infinity(), -5e6f});
    if (r.chance(0.15)) s.smooth_q = r.pick<std::size_t>({0, 16, 128});
    if (r.chance(0.15)) s.p_block = r.pick<std::size_t>({0, 16});
  }
  // (P's largest value 2^(offset + threshold) must fit the P format — a refusal the harness checks too)
  return k;
}

ProblemSpec draw_problem(Rng& r, const KernelRecipe& k) {
  ProblemSpec p;
  for (;;) {
    p.B = r.in(1, 2);
    p.Nkv = r.in(1, 2);
    p.Nq = p.Nkv * r.in(1, 4);
    p.Sq = r.chance(0.2) ? 1 : r.in(1, 90);
    p.Skv = r.chance(0.3) ? p.Sq : r.in(1, 200);
    if (p.Sq == 1 && r.chance(0.3)) p.Skv = r.in(500, 1300);  // cuDNN's split decode (above 512 keys)
    // Head dimensions as the kernels take them (multiples of 8: FA2's flash_api.cpp checks head_size % 8 == 0);
    // D = 1 with zero-mean V makes a row's output a cancelling sum, where a relative bound means nothing.
    p.D = r.chance(0.5) ? r.pick<std::size_t>({16, 64, 128, 160}) : 8 * r.in(1, 12);
    if (p.B * p.Nq * p.Sq * p.Skv * p.D <= 600000) break;
  }
  // The recipe's input formats, now and then another (refused).
  p.format = r.chance(0.9) ? r.pick(k.schedule.inputs) : r.pick<std::string>({"fp16", "bf16", "fp8_e4m3fn"});
  p.seed = r.in(0, 999);
  const double x0 = r.pick<double>({0.0, 0.0, 2.0, 20.0});
  p.q = p.k = TensorGen{GenKind::uniform, x0, r.pick<double>({0.5, 1.0})};
  p.v = TensorGen{GenKind::uniform, 0, 1};
  p.causal = r.chance(0.3);
  if (r.chance(0.1)) p.scale = r.pick<double>({0.05, 0.3, 1.0});
  return p;
}

double rel_rmse(const Tensor& a, const Tensor& b) {
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    const long double d = static_cast<long double>(a.data[i]) - b.data[i];
    num += d * d;
    den += static_cast<long double>(b.data[i]) * b.data[i];
  }
  return den == 0 ? (num == 0 ? 0.0 : INFINITY) : std::sqrt(static_cast<double>(num / den));
}

// "" when the contract holds on the case, else what failed.
std::string check(const ProblemSpec& p, const KernelRecipe& k) {
  AlgorithmSpec spec;
  spec.kernel = k;
  const AttentionInputs in = generate_inputs(p, 1);
  const bool gpu = k.schedule.engine == KernelEngine::flash;  // (the blocked engine is pasa's fa2: no such refusals)
  const bool sage = k.schedule.engine == KernelEngine::sage;
  const KernelSchedule& ks0 = k.schedule;
  const bool sage_fields = !ks0.qk_quant.empty() || !ks0.v_quant.empty() || ks0.smooth_k || ks0.q_prescale ||
                           !ks0.pv_acc.empty() || !ks0.p_format.empty() || !ks0.v_format.empty();
  // the sage engine needs an INT8/INT4 qk scheme and no split; the other engines none of its fields
  // SA3's block-scaled path: nvfp4_sa3 Q/K through a block-scaled MMA; smooth_q and p_block only there; p_block
  // and a block-scaled V only together
  const bool fp4 = ks0.qk_quant == "nvfp4_sa3", fp4_v = ks0.v_quant == "nvfp4_sa3";
  const bool fp4_mma = ks0.mma.rfind("b200_mx", 0) == 0 || ks0.mma.rfind("sm120_mx", 0) == 0;
  const bool sage_refused =
      sage ? ks0.qk_quant.empty() || ks0.split != SplitRule::none || (fp4 && !fp4_mma) || (fp4_mma && !ks0.p_block) ||
                 (fp4_mma && ks0.mma_k % 16 != 0) ||
                 ((ks0.smooth_q || ks0.p_block) && !fp4) || (ks0.p_block && !fp4_v) || (fp4_v && !ks0.p_block)
           : sage_fields || ks0.smooth_q || ks0.p_block;
  const bool top_left_refused = (gpu || sage) && p.causal && k.schedule.causal == CausalAlign::top_left && p.Sq != p.Skv;
  const bool fma_refused = gpu && k.schedule.exp_arg == ExpArg::fma &&
                           kernel_splits(k.schedule, p.B * p.Nq, p.Sq, p.Skv, p.D) > 1;
  const KernelSchedule& ks = k.schedule;
  const Format f = format_by_name(p.format);
  const bool format_refused = std::find(ks.inputs.begin(), ks.inputs.end(), f.name) == ks.inputs.end();
  const bool d_refused = ks.max_d > 0 && p.D > ks.max_d;
  const double p_top = ks.p_offset + (ks.rescale == Rescale::lazy ? ks.rescale_threshold : 0.0f);
  const Format pf = ks.p_format.empty() ? f : format_by_name(ks.p_format);  // (P's cast format)
  const bool overflow_refused = !ks.p_saturate && ks.p_block == 0 && p_top >= std::log2(pf.max_finite());
  if (sage_refused || top_left_refused || fma_refused || format_refused || d_refused || overflow_refused) {
    try {
      run_attention(in, spec, 1);
    } catch (const InputError&) {
      return "";
    }
    return "accepted a combination it must refuse";
  }
  const AttentionOutput one = run_attention(in, spec, 1), three = run_attention(in, spec, 3);
  const auto same_bits = [](const auto& a, const auto& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
             return x == y || (std::isnan(x) && std::isnan(y));
           });
  };
  if (!same_bits(one.o.data, three.o.data)) return "the output depends on the thread count";
  GoldenOptions go;
  go.threads = 1;
  const Golden g = golden_attention(in, go);
  // P in e4m3 (3 fraction bits) and the e8m13 accumulator of FP8 recipes: 2^-3; where P saturates (a lazily
  // kept max past the FP8 range, what #2716 reports) the output shrinks: no bound then.
  const bool saturates = ks.p_saturate && p_top >= std::log2(f.max_finite());
  // A directed P rounding biases every weight the same way, by up to one ulp of P (2^-3 in e4m3), while l
  // sums the unrounded P: 2^-2 for FP8 then.
  const bool directed_p = ks.p_round != RoundMode::nearest_even && ks.p_round != RoundMode::nearest_away;
  const double fp8_bound = directed_p ? 0x1p-2 : 0x1p-3;
  double bound = saturates ? INFINITY : f.p <= 4 ? fp8_bound : p.format == "fp16" ? 0x1p-9 : 0x1p-6;
  // SageAttention: INT8 Q and K (and FP8 P, V) are quantisations, not roundings of the inputs: the FP8 bound on
  // centred inputs with INT8 elements; INT4, or biased Q/K (whose INT8 step is x0/127), no bound
  if (sage) bound = p.q.x0 == 0 && ks0.qk_quant.rfind("int8", 0) == 0 ? 0x1p-3 : INFINITY;
  // an fp16 P·V accumulator overflows on P and V of up to 448 (why SageAttention's fp32+fp16 takes V's scale to
  // 2.25): inf and NaN are then the kernel's output, not a failure
  const bool has_nonfinite = std::any_of(one.o.data.begin(), one.o.data.end(), [](double x) { return !std::isfinite(x); });
  if (sage && ks0.pv_acc == "fp16" && has_nonfinite) bound = INFINITY;
  if (const double rel = rel_rmse(one.o, g.o); std::isfinite(bound) && !(rel <= bound))
    return "relative RMSE against the golden " + std::to_string(rel) + " > " + std::to_string(bound);
  for (std::size_t i = 0; i < one.lse.size() && std::isfinite(bound); ++i)
    if (std::isfinite(g.lse[i]) && !(std::abs(one.lse[i] - g.lse[i]) <= 0x1p-6 * (1 + std::abs(g.lse[i]))))
      return "lse row " + std::to_string(i) + ": " + std::to_string(one.lse[i]) + " vs the golden's " +
             std::to_string(g.lse[i]);
  const AlgorithmSpec back = algorithm_from_json(to_json(spec), "");
  if (!(back == spec)) return "the JSON does not read back to the same recipe: " + to_json(spec).dump();
  return "";
}

std::size_t env_count(const char* name, std::size_t dflt) {
  const char* v = std::getenv(name);
  return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : dflt;
}

}  // namespace

TEST_CASE("kernel property: every schedule stays within the inputs' precision of the golden", "[property]") {
  Rng r{std::mt19937_64(env_count("PASA_KERNEL_PROPERTY_SEED", 38))};
  const std::size_t n = env_count("PASA_KERNEL_PROPERTY_CASES", 1000);
  std::size_t failures = 0;
  for (std::size_t c = 0; c < n && failures < 3; ++c) {
    const KernelRecipe k = draw_recipe(r);
    const ProblemSpec p = draw_problem(r, k);
    std::string why;
    try {
      why = check(p, k);
    } catch (const std::exception& e) {
      why = std::string("threw: ") + e.what();
    }
    if (why.empty()) continue;
    ++failures;
    AlgorithmSpec s;
    s.kernel = k;
    FAIL_CHECK("case " << c << ": " << why << "\nproblem JSON:   " << to_json(p).dump()
                       << "\nalgorithm JSON: " << to_json(s).dump());
  }
}

TEST_CASE("kernel property: what the engine does not model is refused before any work", "[property]") {
  AlgorithmSpec spec;
  spec.kernel = kernel_recipe("torch_flash_sm90");
  ProblemSpec p;
  p.Nq = p.Nkv = 1;
  p.Sq = 4;
  p.Skv = 6;
  p.D = 8;
  auto refused = [&](const ProblemSpec& q, const std::string& what) {
    const AttentionInputs in = generate_inputs(q, 1);
    CHECK_THROWS_AS(run_attention(in, spec, 1), InputError);
    CHECK_THROWS_WITH(run_attention(in, spec, 1), Catch::Contains(what));
  };
  for (const char* f : {"fp32", "fp64", "fp8_e4m3", "tf32"}) {
    ProblemSpec q = p;
    q.format = f;
    refused(q, "runs on Q, K and V of one format among fp16, bf16");
  }
  ProblemSpec q = p;
  q.format = "fp16";
  q.kv_len = {3};
  refused(q, "kv_len");
  q = p;
  q.format = "fp16";
  q.has_pse = true;
  refused(q, "pse");
  q = p;
  q.format = "fp16";
  q.select_p = 0.5;
  refused(q, "select");
  spec.kernel = kernel_recipe("torch_efficient_sm90");
  q = p;
  q.format = "bf16";
  q.causal = true;
  refused(q, "aligned top-left");
  // The refusals come before the inputs are looked at in detail: validate_case on the problem alone too.
  ProblemSpec f32 = p;
  f32.format = "fp32";
  CHECK_THROWS_WITH(validate_case(f32, spec), Catch::Contains("/kernel: kernel torch_efficient_sm90: runs on Q, K and V of one format among fp16, bf16"));
}
