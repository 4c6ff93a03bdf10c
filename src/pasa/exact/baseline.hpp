// The uniform-weights baseline: the attention output that ignores the scores. Every row is the mean of V
// over the keys that row sees (the causal mask, kv_len and the boolean mask as in the golden; query head h
// reads KV head h / group()), i.e. softmax with all visible scores equal. Its Eq. 19 RMSE against the
// golden is the error of an output that carries no attention: an algorithm whose RMSE reaches it has lost
// all the information of QKᵀ, however small that RMSE looks (a V with a large mean makes every RMSE small).
#pragma once
#include <cstddef>

#include "pasa/core/parallel.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/inputs/tensor.hpp"

namespace pasa {

// (B, Nq, Sq, D), format fp64. The sums over the n visible keys are double-double (AccurateDWPlusDW, 3u²
// per addition [JMP17]) and the division by n too (16u²), so before the final rounding to double the error
// is at most (3n + 16)·u²·Σ_j|v_jd|/n (u = 2^-53): far below one double ulp of the mean. Fully masked rows
// are 0, as in the golden. Validates the inputs (InputError); deterministic, independent of the threads.
Tensor uniform_baseline(const AttentionInputs&, int threads = default_threads());
// Heads [head0, head0 + heads) of it (head b·Nq + h, Sq·D doubles each) into out, the inputs validated by
// the caller: the same bits as their rows of uniform_baseline (compare_with_golden streams it so).
void uniform_baseline_heads(const AttentionInputs&, std::size_t head0, std::size_t heads, double* out,
                            int threads = default_threads());

}  // namespace pasa
