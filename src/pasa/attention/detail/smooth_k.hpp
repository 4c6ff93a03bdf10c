// The comparator PASA argues against: SageAttention's "smooth K", K − mean(K) over the whole sequence
// (per batch and kv head), then FlashAttention 2. Softmax is invariant to it: every score of a query row
// moves by the same q·mean(K).
#pragma once

#include "pasa/attention/detail/blocked_attention.hpp"

namespace pasa::detail {

// mean(K) accumulated in order over the sequence in the mean format and divided by Skv there; the shifted
// keys K − mean rounded to k_shift. lse adds back scale·q·mean(K) (in fp64).
void smooth_k_attention(Run& run, AttentionOutput& out, int threads);

}  // namespace pasa::detail
