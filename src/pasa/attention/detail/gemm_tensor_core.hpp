// The tensor-core GEMM model (TensorCore in allocation.hpp) [Fasi et al. 2021; Khattak & Mikaitis 2025]:
// per block of products, every term aligned to the block's largest exponent, cut to F bits, the integers
// added and the sum rounded once to the accumulator (gemm_tensor_core.cpp says how, and its fast paths).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pasa/attention/gemm_spec.hpp"

namespace pasa::detail {

// C (m × n, ldc) = A (m × k, lda) · B (k × n, ldb) under g.model.tc (g.model.kind == tensor_core), before the
// output rounding (the caller's). Throws std::invalid_argument / std::logic_error for a model it cannot run.
void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc);
// The same with B in floats (its values those of g.b_format): the register strips read them as they are.
void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const float* B, std::size_t ldb, double* C, std::size_t ldc);


// The exponent fields of an operand's nonzero finite values (their least and largest, unbiased; 128 and −127
// where none) and whether one was a subnormal float: what the strips of bf16-style formats check.
struct TcFieldLimits {
  int lo = 128, hi = -127;
  bool subnormal = false;
  int least() const { return lo; }
  int largest() const { return hi; }
};

// A (m × k) packed for the tensor-core model's register strips (gemm_tensor_core.cpp), reusable over calls
// with the same spec: the fused path multiplies an item's Q rows by every key block (packed once per item).
struct TcPackedA {
  std::size_t m = 0, k = 0;
  bool exp8 = false;        // the exponents' lane width the spec's formats take (int8, else int16)
  bool finite = true;       // no inf or NaN among the values
  TcFieldLimits limits;     // (filled for the bf16-style formats only)
  std::vector<float> values;        // row r at r·k (the values, exact as floats)
  std::vector<std::int32_t> exps;   // per pair of rows and t (see pack_a)
};
// Whether g runs on the register strips (AVX-512 builds; else dgemm_tensor_core's loop per block): then
// tc_pack_a packs A for it.
bool tc_strips(const GemmSpec& g);
void tc_pack_a(const GemmSpec& g, std::size_t m, std::size_t k, const double* A, std::size_t lda, TcPackedA& pa);
// dgemm_tensor_core with A (m × k at A, lda) also packed in pa (tc_pack_a under the same g, from the same
// values): false where the strips decline these operands (bf16-style formats beyond the strips' window),
// nothing written; the caller then runs dgemm_tensor_core on its operands.
bool dgemm_tensor_core(const GemmSpec& g, const TcPackedA& pa, const double* A, std::size_t lda, std::size_t n,
                       const double* B, std::size_t ldb, double* C, std::size_t ldc);

}  // namespace pasa::detail
