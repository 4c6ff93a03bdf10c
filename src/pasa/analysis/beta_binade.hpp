// A β for inputs of known bias, from the binade mechanism of PASA's realised error (docs/beta.md,
// "Mechanism"). The paper's β (Appendix A–C, beta_solver.hpp) makes the rounded M realise the invariance
// Inva = β/(1 − β) that the corrections use; it says nothing about the rounding that dominates PASA-FP16's
// error on biased inputs: the row mean S̄' = (1 − β_r)·S̄/α (Alg. 1 step 13; β_r the β the rounded M
// realises) is stored in the `mean` stage's format, and the recovered bias Inva·S̄' (Thm. 2.1) is then off
// by up to Inva·ulp(S̄')/2. For a given |S̄|/α that error depends on where S̄' falls in its binade: it is
// β·u·|S̄|/α·(2^(e+1)/S̄'), anywhere in (1, 2]× β·u·|S̄|/α, smallest when S̄' lies just below a power of two.
//
// binade_beta searches 1 − β around an initial β0 for the β whose worst case over a relative spread of
// |S̄|/α (rows and blocks differ) is smallest:
//     cost(β) = fl_tp(β/(1 − β)) · ulp_tp((1 − β_r)·X·(1 + spread)),      1 − β_r = a − b·n (Eq. 21),
// with X = |S̄|/α given by the caller (x0²·√D for the paper's biased inputs, whose entries have mean x0).
// It needs the data's score mean: no β chosen without it does better on average over binade positions
// (the factor 2^(e+1)/S̄' averages the same for every β), which is why the paper's β stays the default.
#pragma once

#include <cstddef>

#include "pasa/analysis/beta_solver.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa {

struct BinadeOptions {
  double score_mean = 0;  // X = |S̄|/α, the magnitude of a row's block-mean score, scaled (> 0)
  double spread = 0.02;   // relative half-width of X over rows and blocks the choice must hold for, [0, 0.5)
  double window = 2.0;    // 1 − β is searched in [(1 − β0)/window, (1 − β0)·window], window > 1
  int samples = 4001;     // candidates, evenly spaced in log(1 − β) (and β0 itself), each rounded to 1e-7
  // Candidates whose rounded M realises an invariance off by more than this (|Inva_r − Inva|/Inva, Eq. 20)
  // are left out: the mismatch moves each block's recovered bias by (Inva_r − Inva)·S̄'_j, which in bf16
  // (8 bits for β/n) is larger than the rounding of S̄' the rule lowers.
  double max_mismatch = 0.02;
};

struct BinadeRow {
  double beta0 = 0, beta = 0;
  double sbar0 = 0, cost0 = 0;  // at β0: the realised S̄' = (1 − β_r)·X and cost(β0)
  double sbar = 0, cost = 0;    // the same at the chosen β
  double inva = 0, inva_r = 0;  // at the chosen β: β/(1 − β) and Eq. 20's Inva_r of the rounded M
};

// The spacing of tp at |x| (the subnormal spacing below 2^emin).
double format_ulp(double x, const Format& tp);

// cost(β) above. Throws InputError (naming β, n, the format and X) for a β the rounded M cannot shift with.
double binade_cost(double beta, std::size_t n, const Format& tp, const BinadeOptions& bo, const BetaOptions& opt = {});

// The search above; ties go to the candidate nearest β0 in log(1 − β). Throws InputError for β0 ∉ (0, 1),
// X not positive and finite, a spread outside [0, 0.5), window ≤ 1, samples < 2, max_mismatch < 0. β0 is
// kept when no candidate does better within max_mismatch.
BinadeRow binade_beta(double beta0, std::size_t n, const Format& tp, const BinadeOptions& bo,
                      const BetaOptions& opt = {});

}  // namespace pasa
