// The golden of inputs holding NaN or ±inf (AttentionInputs::allow_nonfinite), private to golden.cpp.
#pragma once

#include "pasa/exact/golden.hpp"

namespace pasa::detail {

// Precondition: `in` validated, with at least one non-finite element. See golden.hpp for the definition.
Golden golden_with_nonfinite(const AttentionInputs& in, const GoldenOptions& opt);

}  // namespace pasa::detail
