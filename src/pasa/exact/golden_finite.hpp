// The golden of finite inputs, private to exact/: golden_attention (golden.cpp) validates its inputs and
// options, then calls golden_with_nonfinite (golden_nonfinite.hpp) where an input holds NaN or ±inf, else
// golden_finite; golden_with_nonfinite computes its finite rows (and the finite golden of each special
// row's finite keys) with golden_finite. Nothing here calls back up to golden_attention.
#pragma once

#include "pasa/exact/golden.hpp"

namespace pasa::detail {

// Whether every element of Q, K and V is finite.
bool all_finite(const AttentionInputs& in);

// The golden of finite inputs (golden_finite.cpp). Preconditions: `in` validated, every Q, K, V element
// finite, opt.precision_bits in [106, 100000].
Golden golden_finite(const AttentionInputs& in, const GoldenOptions& opt);

}  // namespace pasa::detail
