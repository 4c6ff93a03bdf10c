// The golden of inputs holding NaN or ±inf, private to exact/ (golden_nonfinite.cpp): called by
// golden_attention (golden.cpp); it computes its finite rows with golden_finite (golden_finite.hpp).
#pragma once

#include "pasa/exact/golden.hpp"

namespace pasa::detail {

// Preconditions: `in` validated, with at least one non-finite element; opt.precision_bits in [106, 100000].
// See golden.hpp for the definition.
Golden golden_with_nonfinite(const AttentionInputs& in, const GoldenOptions& opt);

}  // namespace pasa::detail
