// The contract on kernel recipes (attention/kernel_recipe.hpp, docs/contract.md), on random problems and random
// schedules: every registered recipe with any of its fields overridden (KV order, exp2, row-sum layout,
// normalisation, scale placement, rescale rule, split rule and counts, block sizes, MMA k, the fp32 output
// path, FMAs) on fp16 or bf16 inputs of random shapes (GQA, Sq != Skv, decode, D 1..160), causal or not:
//   1. the output is within the inputs' precision of the MPFR golden: relative RMSE <= 2^-9 (fp16) or 2^-6
//      (bf16) — the output's own rounding is 2^-12 / 2^-9 relative — and the lse of every row that sees a
//      key within 2^-6 of the golden's (what the schedule changes is the order of fp32 steps, never more);
//   2. its bits do not depend on the thread count (1 vs 3);
//   3. its JSON (io/kernel_json.hpp) reads back to the same recipe;
//   4. what the engine does not model is refused with an InputError before any work: fp32/fp64/fp8 inputs,
//      pse, select, kv_len, top-left causal with Sq != Skv, exp_arg fma with split-KV.
// The GPU itself checks the registered recipes bit for bit (tests/python/test_kernel_recipes.py); this file
// checks that no combination of fields breaks the engine. PASA_KERNEL_PROPERTY_CASES (default 1000) cases
// from PASA_KERNEL_PROPERTY_SEED (default 38); std::mt19937_64's raw outputs (a sequence the standard fixes).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
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
  return k;
}

ProblemSpec draw_problem(Rng& r) {
  ProblemSpec p;
  for (;;) {
    p.B = r.in(1, 2);
    p.Nkv = r.in(1, 2);
    p.Nq = p.Nkv * r.in(1, 4);
    p.Sq = r.chance(0.2) ? 1 : r.in(1, 90);
    p.Skv = r.chance(0.3) ? p.Sq : r.in(1, 200);
    p.D = r.chance(0.5) ? r.pick<std::size_t>({16, 64, 128, 160}) : r.in(1, 96);
    if (p.B * p.Nq * p.Sq * p.Skv * p.D <= 600000) break;
  }
  p.format = r.chance(0.5) ? "fp16" : "bf16";
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
  const bool top_left_refused = p.causal && k.schedule.causal == CausalAlign::top_left && p.Sq != p.Skv;
  const bool fma_refused = k.schedule.exp_arg == ExpArg::fma &&
                           kernel_splits(k.schedule, p.B * p.Nq, p.Sq, p.Skv, p.D) > 1;
  if (top_left_refused || fma_refused) {
    try {
      run_attention(in, spec, 1);
    } catch (const InputError&) {
      return "";
    }
    return "accepted a combination it must refuse";
  }
  const AttentionOutput one = run_attention(in, spec, 1), three = run_attention(in, spec, 3);
  if (one.o.data != three.o.data) return "the output depends on the thread count";
  GoldenOptions go;
  go.threads = 1;
  const Golden g = golden_attention(in, go);
  const double bound = p.format == "fp16" ? 0x1p-9 : 0x1p-6;
  if (const double rel = rel_rmse(one.o, g.o); !(rel <= bound))
    return "relative RMSE against the golden " + std::to_string(rel) + " > " + std::to_string(bound);
  for (std::size_t i = 0; i < one.lse.size(); ++i)
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
    const ProblemSpec p = draw_problem(r);
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
    refused(q, "runs on fp16 or bf16 Q, K and V");
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
  CHECK_THROWS_WITH(validate_case(f32, spec), Catch::Contains("/kernel: kernel torch_efficient_sm90 runs on fp16 or bf16"));
}
