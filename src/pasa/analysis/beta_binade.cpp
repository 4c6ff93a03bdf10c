#include "pasa/analysis/beta_binade.hpp"

#include <cmath>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

double format_ulp(double x, const Format& tp) {
  const double ax = std::abs(x);
  const int e = ax > 0 ? std::max(std::ilogb(ax), tp.emin()) : tp.emin();
  return std::ldexp(1.0, e - tp.p + 1);
}

double binade_cost(double beta, std::size_t n, const Format& tp, const BinadeOptions& bo, const BetaOptions& opt) {
  const RoundedShift m = rounded_shift(beta, n, tp, opt);  // checks β and n
  // M_r·α = a·I − b·J scales a block's mean key by a − b·n = 1 − β_r: S̄' = (1 − β_r)·S̄/α.
  const double one_minus_beta_r = m.a - m.b * static_cast<double>(n);
  if (!(one_minus_beta_r > 0))
    throw InputError(fmt::format("β binade rule: the rounded M does not keep a positive part of the mean "
                                 "(1 − β_r = {:.17g}) at β = {}, n = {}, format {}",
                                 one_minus_beta_r, beta, n, tp.name));
  // PASA rounds Inva to the `mean` stage (Thm. 2.1; pasa_attention.cpp's pasa_item).
  const double inva = round(beta / (1.0 - beta), tp, opt.rounding);
  return inva * format_ulp(one_minus_beta_r * bo.score_mean * (1.0 + bo.spread), tp);
}

BinadeRow binade_beta(double beta0, std::size_t n, const Format& tp, const BinadeOptions& bo, const BetaOptions& opt) {
  const std::string where = fmt::format("β0 = {}, n = {}, format {}, score mean {}", beta0, n, tp.name, bo.score_mean);
  if (!(beta0 > 0 && beta0 < 1)) throw InputError("β binade rule: β0 must lie in (0, 1) (" + where + ")");
  if (!(bo.score_mean > 0 && std::isfinite(bo.score_mean)))
    throw InputError("β binade rule: the score mean |S̄|/α must be positive and finite (" + where + ")");
  if (!(bo.spread >= 0 && bo.spread < 0.5))
    throw InputError(fmt::format("β binade rule: spread {} must lie in [0, 0.5) ({})", bo.spread, where));
  if (!(bo.window > 1 && std::isfinite(bo.window)))
    throw InputError(fmt::format("β binade rule: window {} must be > 1 ({})", bo.window, where));
  if (!(bo.max_mismatch >= 0))
    throw InputError(fmt::format("β binade rule: max mismatch {} must be >= 0 ({})", bo.max_mismatch, where));
  if (bo.samples < 2) throw InputError(fmt::format("β binade rule: samples {} must be at least 2 ({})", bo.samples, where));

  BinadeRow row;
  row.beta0 = beta0;
  auto sbar = [&](double beta) {
    const RoundedShift m = rounded_shift(beta, n, tp, opt);
    return (m.a - m.b * static_cast<double>(n)) * bo.score_mean;
  };
  row.sbar0 = sbar(beta0);
  row.cost0 = binade_cost(beta0, n, tp, bo, opt);
  double best = row.cost0, best_dist = 0;
  row.beta = beta0;
  const double l0 = std::log(1 - beta0), lw = std::log(bo.window);
  for (int k = 0; k < bo.samples; ++k) {
    const double l = l0 + lw * (2.0 * k / (bo.samples - 1) - 1.0);
    const double beta = std::round((1 - std::exp(l)) * 1e7) / 1e7;
    if (!(beta > 0 && beta < 1)) continue;
    double c;
    try {
      c = binade_cost(beta, n, tp, bo, opt);
      const double inva = ideal_invariance(beta);
      if (std::abs(practical_invariance(beta, n, tp, opt) - inva) > bo.max_mismatch * inva) continue;
    } catch (const InputError&) {
      continue;  // a candidate whose rounded M does not shift (b = 0) or keeps no mean: not usable
    }
    const double dist = std::abs(std::log(1 - beta) - l0);
    if (c < best || (c == best && dist < best_dist)) {
      best = c;
      best_dist = dist;
      row.beta = beta;
    }
  }
  row.cost = best;
  row.sbar = sbar(row.beta);
  row.inva = ideal_invariance(row.beta);
  row.inva_r = practical_invariance(row.beta, n, tp, opt);
  return row;
}

}  // namespace pasa
