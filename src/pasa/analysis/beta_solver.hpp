// PASA's optimal-accuracy condition for the shifting parameter β (paper §2.3, Appendix A–C, Eq. 20–22).
//
// PASA shifts each KV block by β × its mean through the matrix M = I − (β/n)·J (n = s2, J the all-ones
// matrix; Eq. 10). Stored in a low-precision format tp, M's entries are rounded, so the rounded matrix is
// M_r = a·I − b·J with (Eq. 21)
//     b = fl_tp(β/n),   a = fl_tp(1 − β/n) + b          (a and b then held exactly in fp64),
// and the invariance that M_r really realises is (Eq. 20, Appendix B)
//     Inva_r = f(β) = b·n / (a·(a − b·n)) + (1 − a)/a,
// whereas the correction steps of PASA use the ideal invariance Inva = β/(1 − β). The optimal β makes the
// two equal: β/(1 − β) = f(β), solved by the fixed-point iteration (Eq. 22)
//     β_{k+1} = f(β_k) / (1 + f(β_k))        in fp64,
// stopped when |β_{k+1} − β_k| / |β_k| ≤ tol (the paper's optimal_para.py stops on `err > tol` false).
//
// Table 3 of the paper (fp16, n = 128) prints Inva = β/(1−β), Inva_r = f(β) and
// Rel.Err = |Inva − Inva_r| / Inva, for the initial β and for the optimised β.
#pragma once

#include <cstddef>
#include <vector>


#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

struct BetaOptions {
  double tol = 1e-8;   // relative change of β that stops the iteration
  int max_iter = 1000;  // iterations allowed before InputError
  // 0: round the unscaled entries 1 − β/n and −β/n (Appendix A/C, the paper's Table 3).
  // d > 0: round the entries of M = (I − (β/n)·J)/α with α = √d, as Eq. 10 stores it, i.e.
  //     b = α·fl_tp(β/(n·α)),   a = α·fl_tp((1 − β/n)/α) + b,
  // so that M_r = (a·I − b·J)/α and the same f(β) gives the invariance it realises.
  std::size_t sqrt_d = 0;
  RoundOptions rounding;  // how fl_tp rounds (default: round to nearest even, as torch's .type() does)
};

// The rounded shifting matrix, in the normalised form M_r = (a·I − b·J)/α (α = 1 without sqrt_d).
struct RoundedShift {
  double a = 0, b = 0;
};

// Eq. 21 (with the sqrt_d variant above). Throws InputError on β or n out of range.
RoundedShift rounded_shift(double beta, std::size_t n, const Format& tp, const BetaOptions& opt = {});

// Inva = β/(1 − β), the invariance PASA's correction steps use.
double ideal_invariance(double beta);

// Inva_r = f(β) of Eq. 20, the invariance the rounded M realises. Throws InputError when M's off-diagonal
// entry rounds to zero (b = 0: no shift at all) or M_r is singular (a = b·n).
double practical_invariance(double beta, std::size_t n, const Format& tp, const BetaOptions& opt = {});

struct BetaRow {
  double beta0 = 0, inva0 = 0, inva_r0 = 0, rel_err0 = 0;  // initial β: Inva, Inva_r, |Inva−Inva_r|/Inva
  double beta = 0, inva = 0, inva_r = 0, rel_err = 0;      // the same at the optimised β
  int iterations = 0;                                      // fixed-point updates made (≥ 1)
};

// Eq. 22 from beta0. Throws InputError (message names β0, n, the format and what failed) for β0 ∉ (0, 1),
// n < 1, NaN, b = 0, a singular M_r, an iterate leaving (0, 1) or no convergence within max_iter.
BetaRow solve_beta(double beta0, std::size_t n, const Format& tp, const BetaOptions& opt = {});

// The initial β of the paper's Table 3: 0.9, 1−2^-4, 1−2^-5, 1−2^-6, 0.99, 0.999.
std::vector<double> table3_initial_betas();

// solve_beta for every β0 of table3_initial_betas() (the paper's Table 3 is tp = fp16, n = 128).
std::vector<BetaRow> beta_table3(const Format& tp, std::size_t n = 128, const BetaOptions& opt = {});

// Machine-readable forms: CSV with a header line (columns named as BetaRow's fields, %.17g numbers) and
// JSON (an array of objects with the same names).

}  // namespace pasa
