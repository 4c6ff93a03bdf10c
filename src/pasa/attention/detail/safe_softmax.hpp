// Textbook attention: the 3-pass safe softmax ([FA1, §3.1]: max, sum of e^{x−m}, divide), every stage in
// its format (the golden, not this, is the reference results are measured against).
#pragma once

#include "pasa/attention/detail/blocked_attention.hpp"

namespace pasa::detail {

// Per row: m_N = max over every visible key (Eq. 7), d_N = Σ e^{x − m_N} in order (Eq. 8),
// a = e^{x − m_N}/d_N (Eq. 9), O = a·V as one GEMM over the whole row. S is computed tile by tile (s2 keys)
// through the QKᵀ GEMM, so the scores are the same as the blocked algorithms'.
void safe_softmax_attention(const Run& run, AttentionOutput& out, int threads);

}  // namespace pasa::detail
