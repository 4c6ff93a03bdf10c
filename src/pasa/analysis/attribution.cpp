#include "pasa/analysis/attribution.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "pasa/analysis/beta_solver.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/metrics.hpp"

namespace pasa {
namespace {

struct RunError {
  double rmse, nan_pct;
};

RunError measure(const AttentionInputs& in, const AlgorithmSpec& spec, const Golden& golden, int threads) {
  const Metrics m = compare_outputs(run_attention(in, spec, threads).o, golden.o);
  return {m.rmse, m.nan_pct};
}

bool is_fp64(const Format& f) { return f == format_by_name("fp64"); }

// Lifted GEMMs (docs/attribution.md). A GEMM's accumulator stage (qk_acc, pv_acc) is where a tensor-core
// model does its own rounding (alignment of the terms, block sums, a narrow accumulator): lifting it to fp64
// makes the GEMM's accumulation exact, i.e. the GEMM runs under the `ordered` model in fp64 (products exact,
// an FMA chain in fp64, rounded once to its output stage). A lifted stage can also feed a tensor-core GEMM
// operands wider than the engine takes (kTensorCoreMaxOperandBits: p, shift, k_shift, or a quantised q/k/v
// stage): no engine multiplies fp64 operands with its fp16 alignment, so that GEMM too runs ordered, its
// accumulator stage as allocated. Every other GEMM keeps the allocation's model. The all-fp64 run is thus the
// exact computation (the golden to ~1e-13) on every allocation.
AlgorithmSpec with_lifted_gemms(AlgorithmSpec run, const AlgorithmSpec& given, const CaseLayout& layout) {
  for (const CaseGemm& g : case_gemms(layout, run)) {
    if (run.alloc.gemm_of(g.id).kind == GemmKind::ordered) continue;
    const bool acc_lifted = !(run.alloc.spec(g.acc) == given.alloc.spec(g.acc));
    const bool too_wide = run.alloc.gemm_of(g.id).kind == GemmKind::tensor_core &&
                          (g.a.p > kTensorCoreMaxOperandBits || g.b.p > kTensorCoreMaxOperandBits);
    if (acc_lifted || too_wide) run.alloc.gemm_override[static_cast<std::size_t>(g.id)] = GemmModel(GemmKind::ordered);
  }
  return run;
}

// One row of the table from its runs: the base, the exact floor, this stage lifted, and it alone.
StageShare share_row(std::string stage, std::string format, RunError base, RunError exact, RunError lifted,
                     RunError only) {
  StageShare r;
  r.stage = std::move(stage);
  r.format = std::move(format);
  r.rmse_base = base.rmse;
  r.rmse_fp64 = exact.rmse;
  r.nan_pct_base = base.nan_pct;
  r.rmse_lifted = lifted.rmse;
  r.nan_pct_lifted = lifted.nan_pct;
  r.rmse_only = only.rmse;
  r.nan_pct_only = only.nan_pct;
  r.reduction = base.rmse - lifted.rmse;
  // A zero baseline (e.g. the fp64 allocation on exactly representable data) leaves nothing to share;
  // a NaN baseline (overflow) gives NaN shares: the nan_pct columns then carry the attribution.
  r.share = base.rmse == 0 ? 0.0 : r.reduction / base.rmse;
  r.share_only = base.rmse == 0 ? 0.0 : (only.rmse - exact.rmse) / base.rmse;
  return r;
}

}  // namespace

std::vector<StageShare> attribute_error(const AttentionInputs& in_any, const AlgorithmSpec& spec, const Golden& golden,
                                        int threads) {
  AttentionInputs wide;  // (reads Q, K and V as doubles: a narrow input widened)
  const AttentionInputs& in = wide_inputs(in_any, wide, threads);
  const StageSpec fp64{format_by_name("fp64"), RoundOptions{}};
  const std::vector<std::string> names = stage_names();

  // A kernel recipe runs its own schedule: its numerics are not the allocation's stages, so lifting a stage
  // would change nothing and every share would read 0 % (as pasa-attribute --kernel printed before this check).
  if (spec.kernel)
    throw InputError(fmt::format("attribution: kernel recipe \"{}\" has no allocation stages to lift (its numerics are "
                                 "its schedule's); compare the recipe with one schedule field changed instead "
                                 "(docs/field-questions.md)", spec.kernel->name));
  const CaseLayout layout = case_layout(in);
  validate_case(layout, spec);  // the allocation as given must run as it is
  AlgorithmSpec all64 = spec;
  for (const std::string& s : names) all64.alloc.spec(s) = fp64;
  // Block-scale schemes (QuantOptions::q_block ...) replace their operand's stage rounding: the exact run
  // has none, and each is a row of its own below (lifted: the scheme removed, the operand rounded by its
  // stage as without it; only: that scheme alone on the exact run).
  const std::pair<std::optional<BlockScheme> QuantOptions::*, const char*> schemes[] = {
      {&QuantOptions::q_block, "q_block"}, {&QuantOptions::k_block, "k_block"},
      {&QuantOptions::v_block, "v_block"}, {&QuantOptions::p_block, "p_block"}};
  for (const auto& entry : schemes) all64.quant.*entry.first = std::nullopt;
  const RunError base = measure(in, spec, golden, threads);
  const RunError exact = measure(in, with_lifted_gemms(all64, spec, layout), golden, threads);

  std::vector<StageShare> rows;
  for (const std::string& s : names) {
    const StageSpec& f = spec.alloc.spec(s);
    RunError lifted = base, only = exact;
    const bool unused = s == "merge" && spec.splits <= 1;  // the merge stage runs only with split-KV
    if (!is_fp64(f.format) && !unused) {
      AlgorithmSpec up = spec;  // this stage exact, the others as allocated
      up.alloc.spec(s) = fp64;
      lifted = measure(in, with_lifted_gemms(up, spec, layout), golden, threads);
      AlgorithmSpec low = all64;  // only this stage rounded
      low.alloc.spec(s) = f;
      only = measure(in, with_lifted_gemms(low, spec, layout), golden, threads);
    }
    rows.push_back(share_row(s, f.format.name, base, exact, lifted, only));
  }
  for (const auto& entry : schemes) {
    const std::optional<BlockScheme>& scheme = spec.quant.*entry.first;
    if (!scheme) continue;
    AlgorithmSpec up = spec;  // this scheme removed, everything else as given
    up.quant.*entry.first = std::nullopt;
    AlgorithmSpec low = all64;  // only this scheme, on the exact run
    low.quant.*entry.first = scheme;
    rows.push_back(share_row(entry.second, scheme->name, base, exact, measure(in, up, golden, threads),
                             measure(in, with_lifted_gemms(low, spec, layout), golden, threads)));
  }
  return rows;
}

InvarianceView invariance_view(const AttentionInputs& in_any, const AlgorithmSpec& spec, const Golden& golden,
                               int threads) {
  AttentionInputs wide;  // (reads Q, K and V as doubles: a narrow input widened)
  const AttentionInputs& in = wide_inputs(in_any, wide, threads);
  if (!algorithm_info(spec.name).pasa_options)
    throw InputError(fmt::format("invariance view: needs the pasa algorithm, got \"{}\"", spec.name));
  InvarianceView v;
  v.beta = spec.pasa.beta;
  BetaOptions opt;
  // M is stored in the allocation's shifting-matrix format (Eq. 10), with or without 1/α inside it.
  const Format& tp = spec.alloc.stage("shift");
  opt.rounding = spec.alloc.spec("shift").round;
  if (spec.pasa.alpha_in_M) opt.sqrt_d = in.q.shape.D;
  const std::size_t n = spec.s2;
  v.inva = ideal_invariance(v.beta);
  v.inva_r = practical_invariance(v.beta, n, tp, opt);
  v.rmse = measure(in, spec, golden, threads).rmse;
  AlgorithmSpec exact_m = spec;
  exact_m.alloc.spec("shift") = StageSpec{format_by_name("fp64"), RoundOptions{}};
  v.rmse_exact_M = measure(in, with_lifted_gemms(exact_m, spec, case_layout(in)), golden, threads).rmse;
  v.beta_opt = solve_beta(v.beta, n, tp, opt).beta;
  AlgorithmSpec opt_spec = spec;
  opt_spec.pasa.beta = v.beta_opt;
  v.rmse_opt = measure(in, opt_spec, golden, threads).rmse;
  return v;
}

}  // namespace pasa
