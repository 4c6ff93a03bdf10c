#include "pasa/analysis/attribution.hpp"

#include <cmath>

#include <fmt/format.h>

#include "pasa/analysis/beta_solver.hpp"
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

}  // namespace

std::vector<StageShare> attribute_error(const AttentionInputs& in, const AlgorithmSpec& spec, const Golden& golden,
                                        int threads) {
  const StageSpec fp64{format_by_name("fp64"), RoundOptions{}};
  const std::vector<std::string> names = stage_names();

  AlgorithmSpec all64 = spec;
  for (const std::string& s : names) all64.alloc.spec(s) = fp64;
  const RunError base = measure(in, spec, golden, threads);
  const RunError exact = measure(in, all64, golden, threads);

  std::vector<StageShare> rows;
  for (const std::string& s : names) {
    StageShare r;
    r.stage = s;
    const StageSpec& f = spec.alloc.spec(s);
    r.format = f.format.name;
    r.rmse_base = base.rmse;
    r.rmse_fp64 = exact.rmse;
    r.nan_pct_base = base.nan_pct;
    RunError lifted = base, only = exact;
    const bool unused = s == "merge" && spec.splits <= 1;  // the merge stage runs only with split-KV
    if (!is_fp64(f.format) && !unused) {
      AlgorithmSpec up = spec;  // this stage exact, the others as allocated
      up.alloc.spec(s) = fp64;
      lifted = measure(in, up, golden, threads);
      AlgorithmSpec low = all64;  // only this stage rounded
      low.alloc.spec(s) = f;
      only = measure(in, low, golden, threads);
    }
    r.rmse_lifted = lifted.rmse;
    r.nan_pct_lifted = lifted.nan_pct;
    r.rmse_only = only.rmse;
    r.nan_pct_only = only.nan_pct;
    r.reduction = base.rmse - lifted.rmse;
    // A zero baseline (e.g. the fp64 allocation on exactly representable data) leaves nothing to share;
    // a NaN baseline (overflow) gives NaN shares: the nan_pct columns then carry the attribution.
    r.share = base.rmse == 0 ? 0.0 : r.reduction / base.rmse;
    r.share_only = base.rmse == 0 ? 0.0 : (only.rmse - exact.rmse) / base.rmse;
    rows.push_back(r);
  }
  return rows;
}

InvarianceView invariance_view(const AttentionInputs& in, const AlgorithmSpec& spec, const Golden& golden,
                               int threads) {
  if (spec.name != "pasa")
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
  v.rmse_exact_M = measure(in, exact_m, golden, threads).rmse;
  v.beta_opt = solve_beta(v.beta, n, tp, opt).beta;
  AlgorithmSpec opt_spec = spec;
  opt_spec.pasa.beta = v.beta_opt;
  v.rmse_opt = measure(in, opt_spec, golden, threads).rmse;
  return v;
}

}  // namespace pasa
