// The two computations behind golden_attention (golden.hpp), private to exact/: golden_attention validates
// its inputs and options, then calls golden_with_nonfinite where an input holds NaN or ±inf, else
// golden_finite; golden_with_nonfinite computes its finite rows (and the finite golden of each special row's
// finite keys) with golden_finite. No call runs back up to golden_attention.
#pragma once

#include "pasa/exact/golden.hpp"

namespace pasa::detail {

// The golden of finite inputs (golden.cpp). Preconditions: `in` validated, every Q, K, V element finite,
// opt.precision_bits in [106, 100000].
Golden golden_finite(const AttentionInputs& in, const GoldenOptions& opt);

// The golden of inputs holding NaN or ±inf (golden_nonfinite.cpp). Preconditions: `in` validated, with at
// least one non-finite element; opt as golden_finite's. See golden.hpp for the definition.
Golden golden_with_nonfinite(const AttentionInputs& in, const GoldenOptions& opt);

}  // namespace pasa::detail
