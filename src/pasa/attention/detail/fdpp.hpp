// FlashDecoding++'s asynchronised softmax with a unified maximum value ([FD++, §3]) under a precision
// allocation (options: FdppOptions in algorithm_spec.hpp).
#pragma once

#include "pasa/attention/detail/blocked_attention.hpp"

namespace pasa::detail {

// Per part (the run's split-KV parts, or the whole row): P = e^{x − φ} (x − φ rounded to exp, then e^x to
// exp), l = Σ P (sum stage), O = Σ P·V (p, the P·V GEMM, then O + PV rounded to o) — the same φ in every part,
// so the parts add up without rescaling (the merge stage's e^{φ − φ} = 1). A row with a visible score x (a
// key masked by select does not count) with x − φ <= a or >= b is recomputed by fa2 with the same splits
// ("Approach: Recomputation"); out.recomputed_rows counts them. lse = φ + log l.
void fdpp_attention(const Run& run, AttentionOutput& out, int threads);

}  // namespace pasa::detail
