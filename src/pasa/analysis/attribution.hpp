// Error attribution: which rounding in a precision allocation accounts for the error of blocked attention.
//
// For a case (AttentionInputs), an algorithm with its allocation (AlgorithmSpec) and the golden output,
// the baseline RMSE (PASA Eq. 19: ‖O − O_golden‖₂ / ‖O_golden‖₂) is measured, then each stage of the
// allocation is examined in two views:
//   lifted — that stage alone in fp64, every other stage as in the allocation:
//            reduction = rmse_base − rmse_lifted, share = reduction / rmse_base
//            (share ≈ 1: removing this rounding removes the error; ≈ 0: it does not matter; < 0: the
//            rounding happened to cancel other errors);
//   only   — every stage in fp64 except this one, which keeps its format:
//            rmse_only (the error this rounding causes on its own),
//            share_only = (rmse_only − rmse_fp64) / rmse_base (what it adds above the fp64 floor).
// Stages already in fp64 in the allocation are reported with rmse_lifted = rmse_base and rmse_only =
// rmse_fp64 without re-running. The shares of different stages need not add up to 1: roundings interact
// (an error in S changes which value wins the max comparison, ...), which the two views together expose.
// A non-finite output (NaN from an overflowed score) makes the RMSE and the shares NaN; nan_pct tells which
// runs had it (e.g. FA-FP16/FP32 at x0 = 30: NaN everywhere, none once the "s" stage is lifted).
#pragma once

#include <string>
#include <vector>


#include "pasa/attention/algorithm.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/core/parallel.hpp"

namespace pasa {

struct StageShare {
  std::string stage;   // the allocation's stage name
  std::string format;  // its format in the allocation
  double rmse_base = 0;      // the whole allocation (same in every row)
  double rmse_fp64 = 0;      // every stage in fp64 (same in every row; ~1e-16 for an exact algorithm)
  double rmse_lifted = 0;    // this stage in fp64, the others as allocated
  double reduction = 0;      // rmse_base − rmse_lifted
  double share = 0;          // reduction / rmse_base
  double rmse_only = 0;      // only this stage in its format, the others in fp64
  double share_only = 0;     // (rmse_only − rmse_fp64) / rmse_base
  double nan_pct_base = 0, nan_pct_lifted = 0, nan_pct_only = 0;  // NaN output elements, percent
};

// One row per stage of spec.alloc, in the allocation's stage order (see the header comment for the views),
// then one per block-scale scheme the spec sets (QuantOptions q_block, k_block, v_block, p_block; `stage` is
// that name, `format` the scheme's): the quantisation stages. The exact run (rmse_fp64, and the `only` view)
// has every stage in fp64 and no block scheme.
std::vector<StageShare> attribute_error(const AttentionInputs& in, const AlgorithmSpec& spec, const Golden& golden,
                                        int threads = default_threads());

// PASA's invariance (Theorem 2.1 with a rounded M, Appendix A–B): the RMSE with the given β, with M held
// exactly, and with β replaced by the optimum of the β solver (BetaOptions defaults, n = s2, the "shift"
// stage's format, 1/√D inside M when alpha_in_M), whose rounded M realises the invariance β/(1 − β) that
// the correction steps use. (The model assumes the default scale 1/√D and full KV blocks.)
struct InvarianceView {
  double beta = 0, inva = 0, inva_r = 0;  // given β: ideal and realised invariance
  double rmse = 0;                        // PASA with the given β
  double rmse_exact_M = 0;                // the same with M held in fp64 (the "shift" stage lifted)
  double beta_opt = 0;                    // β* from solve_beta(β)
  double rmse_opt = 0;                    // PASA with β*
};
// Requires an algorithm with PASA's options (the registry's pasa_options: pasa; InputError otherwise).
InvarianceView invariance_view(const AttentionInputs& in, const AlgorithmSpec& spec, const Golden& golden,
                               int threads = default_threads());


}  // namespace pasa
