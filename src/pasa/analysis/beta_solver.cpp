#include "pasa/analysis/beta_solver.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {
namespace {

std::string where(double beta0, std::size_t n, const Format& tp) {
  return fmt::format("β = {}, n = {}, format {}", beta0, n, tp.name);  // {}: shortest exact form
}

void check_inputs(double beta, std::size_t n, const Format& tp) {
  if (!(beta > 0.0 && beta < 1.0))  // also rejects NaN
    throw InputError(fmt::format("β solver: β must lie in (0, 1) (β = 1 makes M singular), got {} ({})",
                                 beta, where(beta, n, tp)));
  if (n < 1) throw InputError(fmt::format("β solver: block size n must be at least 1 ({})", where(beta, n, tp)));
}

}  // namespace

RoundedShift rounded_shift(double beta, std::size_t n, const Format& tp, const BetaOptions& opt) {
  check_inputs(beta, n, tp);
  if (opt.rounding.mode == RoundMode::stochastic)  // f(β) must be a function of β for Eq. 22 to make sense
    throw InputError(fmt::format("β solver: needs a deterministic rounding mode, not stochastic ({})",
                                 where(beta, n, tp)));
  const double nd = static_cast<double>(n);
  // Eq. 21. The entries are formed in fp64 (the paper's cp) and rounded once to tp.
  const double alpha = opt.sqrt_d > 0 ? std::sqrt(static_cast<double>(opt.sqrt_d)) : 1.0;
  const double off = round(beta / nd / alpha, tp, opt.rounding);         // −(off-diagonal entry)
  const double diag = round((1.0 - beta / nd) / alpha, tp, opt.rounding);  // diagonal entry
  // Back to the normalised form M_r·α = a·I − b·J (exact in fp64 up to the final multiplication by α).
  return {alpha * (diag + off), alpha * off};
}

double ideal_invariance(double beta) { return beta / (1.0 - beta); }

double practical_invariance(double beta, std::size_t n, const Format& tp, const BetaOptions& opt) {
  const RoundedShift m = rounded_shift(beta, n, tp, opt);
  const double bn = m.b * static_cast<double>(n);
  if (m.b == 0.0)
    throw InputError(fmt::format(
        "β solver: the shift entry β/n rounds to zero in {} so the rounded M does not shift at all ({}); "
        "use a wider format or a smaller block size",
        tp.name, where(beta, n, tp)));
  if (m.a - bn == 0.0)
    throw InputError(fmt::format("β solver: the rounded M = aI − bJ is singular (a = b·n = {:.17g}) ({})", bn,
                                 where(beta, n, tp)));
  // Eq. 20 (Appendix B): M_r⁻¹ = (I + b/(a − b·n)·J)/a, so S = S'/a + b·n/(a(a − b·n))·S̄'; writing
  // S'/a = S' + ((1 − a)/a)·S' and attributing the second part to the mean gives f.
  return bn / (m.a * (m.a - bn)) + (1.0 - m.a) / m.a;
}

BetaRow solve_beta(double beta0, std::size_t n, const Format& tp, const BetaOptions& opt) {
  check_inputs(beta0, n, tp);
  if (!(opt.tol > 0.0)) throw InputError(fmt::format("β solver: tolerance must be positive, got {}", opt.tol));
  if (opt.max_iter < 1)
    throw InputError(fmt::format("β solver: iteration limit must be at least 1, got {}", opt.max_iter));

  BetaRow row;
  row.beta0 = beta0;
  row.inva0 = ideal_invariance(beta0);
  row.inva_r0 = practical_invariance(beta0, n, tp, opt);
  row.rel_err0 = std::abs(row.inva0 - row.inva_r0) / row.inva0;

  // Eq. 22, as optimal_para.py runs it: at least one update, stop once the relative change is ≤ tol.
  double beta = beta0;
  for (int k = 1;; ++k) {
    const double f = practical_invariance(beta, n, tp, opt);
    const double next = f / (1.0 + f);
    if (!(next > 0.0 && next < 1.0))
      throw InputError(fmt::format(
          "β solver: iterate {} left (0, 1): f(β) = {:.17g} gives β = {:.17g} (start {}); the rounded M "
          "realises no usable invariance in this format",
          k, f, next, where(beta0, n, tp)));
    const double change = std::abs(next - beta) / std::abs(beta);
    beta = next;
    if (change <= opt.tol) {
      row.iterations = k;
      break;
    }
    if (k >= opt.max_iter)
      throw InputError(fmt::format(
          "β solver: no convergence within {} iterations (last relative change {:.3g} > tol {:.3g}, "
          "β = {:.17g}; start {})",
          opt.max_iter, change, opt.tol, beta, where(beta0, n, tp)));
  }
  row.beta = beta;
  row.inva = ideal_invariance(beta);
  row.inva_r = practical_invariance(beta, n, tp, opt);
  row.rel_err = std::abs(row.inva - row.inva_r) / row.inva;
  return row;
}

std::vector<double> table3_initial_betas() {
  return {0.9, 1.0 - 0x1p-4, 1.0 - 0x1p-5, 1.0 - 0x1p-6, 0.99, 0.999};
}

std::vector<BetaRow> beta_table3(const Format& tp, std::size_t n, const BetaOptions& opt) {
  std::vector<BetaRow> rows;
  for (double b0 : table3_initial_betas()) rows.push_back(solve_beta(b0, n, tp, opt));
  return rows;
}

}  // namespace pasa
