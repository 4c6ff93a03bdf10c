// First-order rounding-error model of blocked attention (FA2 and PASA [PASA, Alg. 1] in its FA2 form) under
// a precision allocation: docs/error-model.md derives it. Every rounding to a stage's format is an error
// in an exact intermediate, and the output error to first order is a sum of their effects, evaluated on the
// exact (fp64) intermediates of the given inputs with the ACTUAL rounding error of each (so errors that are
// correlated across keys or blocks, e.g. block means that round the same way, count as such). It predicts
// ‖O − O_exact‖² term by term (different stages' errors taken as uncorrelated); the relative RMSE (PASA
// Eq. 19) is sqrt(Σ terms) / ‖O‖. The terms, as the output sees them (w_k = e^{s_k − max s}, L = Σ w_k):
//   scores      an error η_k in one exponent s_k (S stored in the `s` format and S/α in `scale`, or PASA's
//               S' = Q·K'ᵀ (1/α inside M) stored in `s`; PASA:
//               plus K' = M·K stored in `k_shift`): ΔO = Σ_k (w_k/L)·η_k·(v_k − O); PASA also recovers the
//               bias from the stored S', so block j's exponents move by Inva·mean_{k∈j} η_k as well
//   block_mean  PASA only: an error δ_j shared by every key of block j: the recovered bias Inva·S̄'_j with
//               S̄'_j stored in the `mean` format (Inva·(fl(S̄') − S̄') ≈ Inva·u·|S̄'| = β·u·|S̄|/α: independent
//               of β), the correction Δm'_j = Inva·(S̄'_j − F^j) and the exp shift m_j − Δm'_j (`max`):
//               ΔO = Σ_j (W_j/L)·δ_j·(Ō_j − O), W_j and Ō_j the block's weight and mean output. F^j's own
//               rounding cancels (its differences telescope and are exact by Sterbenz).
//   p           P rounded before the P·V GEMM (`p`, and `exp` when P itself is low precision): with l from the
//               unrounded P (exp stage wide) ΔO = Σ_k w_k ρ_k v_k / L; with l from the rounded P, v_k − O.
//   o, l        the running O and l (and the P·V product, the block's l') rounded at every block step
//               (`o`, `sum`), each relative to the running maximum: ΔO = ε_O / L and −O·ε_l / L.
//   out         the output rounded to `out`.
// Neglected: the roundings of the rescale factors e^{Δm}, of M itself (Inva vs Inva_r) and of Inva, the
// reductions' own accumulation error (fp32 or wider), products of two errors; overflow (a score beyond the
// `s` format's range makes the prediction infinite, where the algorithm gives NaN).
#pragma once

#include <cstddef>
#include <string>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/inputs/attention_inputs.hpp"

namespace pasa {

struct ErrorModelOptions {
  bool pasa = false;        // PASA (FA2 form, 1/α inside M, m_0 = −∞) or FA2
  double beta = 0.984497;   // PASA's β
  std::size_t s2 = 128;     // key block size
  std::size_t heads = 0;    // the first `heads` heads of batch 0 only (0: every head of every batch)
};

struct ErrorPrediction {
  // Predicted E‖ΔO‖² of each term, summed over the output elements modelled.
  double scores = 0, block_mean = 0, p = 0, o = 0, l = 0, out = 0;
  double norm2 = 0;              // ‖O‖² of the same elements (exact)
  std::size_t rows = 0;
  bool overflow = false;         // some score beyond the `s` format's range (the algorithm gives NaN)
  // The regime: the largest exponent perturbation of one score, |η_k|, and of one block, |δ_j| (PASA: the
  // recovered bias's error included), in e-folds. Each term is first order in them: e^δ − 1 = δ to within
  // δ²/2, so the prediction is first-order accurate where they are ≪ 1 and only an order of magnitude
  // where they reach 1 (docs/error-model.md, "Regime").
  double max_score_shift = 0, max_block_shift = 0;
  double total() const { return scores + block_mean + p + o + l + out; }
  double rel_rmse() const;       // sqrt(total / norm2) (inf with overflow)
  double rel_rmse_of(double term) const;  // one term alone, sqrt(term / norm2)
};

// Why the model does not cover an algorithm (empty: it does): only fa2 and pasa (FA2 form, 1/α inside M,
// m_0 = −∞), no split-KV or quantisation, round to nearest, reductions accumulating in fp32 or wider.
std::string error_model_gap(const AlgorithmSpec&);
ErrorModelOptions error_model_options(const AlgorithmSpec&, std::size_t heads = 0);

// Throws InputError for masks, pse/select, causal or GQA inputs (not modelled) and s2 = 0.
ErrorPrediction predict_error(const AttentionInputs&, const Allocation&, const ErrorModelOptions&, int threads = 1);

}  // namespace pasa
