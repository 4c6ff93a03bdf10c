// The float GEMM kernels (gemm_float_kernels.cpp), for specs that run on floats (gemm_uses_floats): native
// float arithmetic where it IS the model's rounding, narrow every-op accumulators in float registers or with
// round_span. Each C element receives its k products in order 0..k−1 from +0 (see gemm.hpp).
#pragma once

#include <cstddef>

#include "pasa/attention/gemm_spec.hpp"

namespace pasa::detail {

// Ordered fp32 accumulation: c ← fma(a, b, c), one rounding of c + a·b.
void sgemm_fma(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda, const float* B,
               std::size_t ldb, float* C, std::size_t ldc);
// Every operation rounded in fp32: a float multiply, then a float add.
void sgemm_every_op(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda, const float* B,
                    std::size_t ldb, float* C, std::size_t ldc);
// Every operation rounded to g.acc, a narrow format (p <= 11) held in floats.
void sgemm_every_op_narrow(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const float* A,
                           std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc);

}  // namespace pasa::detail
