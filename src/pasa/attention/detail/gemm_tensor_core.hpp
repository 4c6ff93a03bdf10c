// The tensor-core GEMM model (TensorCore in allocation.hpp) [Fasi et al. 2021; Khattak & Mikaitis 2025]:
// per block of products, every term aligned to the block's largest exponent, cut to F bits, the integers
// added and the sum rounded once to the accumulator (gemm_tensor_core.cpp says how, and its fast paths).
#pragma once

#include <cstddef>

#include "pasa/attention/gemm_spec.hpp"

namespace pasa::detail {

// C (m × n, ldc) = A (m × k, lda) · B (k × n, ldb) under g.model.tc (g.model.kind == tensor_core), before the
// output rounding (the caller's). Throws std::invalid_argument / std::logic_error for a model it cannot run.
void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc);
// The same with B in floats (its values those of g.b_format): the register strips read them as they are.
void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const float* B, std::size_t ldb, double* C, std::size_t ldc);

}  // namespace pasa::detail
