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
// C0 (m × n, row stride ldc; may be C itself): the accumulator's starting values instead of 0, as an MMA's C
// operand (mma.sync D = A·B + C: FlashAttention's P·V into the running O).
// scales: the operands' block scales where the model has them (TensorCore::scale; nullptr: every scale 1).
void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc,
                       const double* C0 = nullptr, const TcScales* scales = nullptr);
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

// The operands packed for the tensor-core model's register strips (gemm_tensor_core.cpp), reusable over calls
// with the same spec: the fused path packs an item's Q rows once for all its key blocks, and a head's K and V
// blocks once for all its items (fused_tile.cpp).
struct TcPackedA {  // A (m × k)
  std::size_t m = 0, k = 0;
  bool exp8 = false;        // the exponents' lane width the spec's formats take (int8, else int16)
  bool finite = true;       // no inf or NaN among the values
  TcFieldLimits limits;     // (filled for the bf16-style formats only)
  std::vector<float> values;        // row r at r·k (the values, exact as floats)
  std::vector<std::int32_t> exps;   // per pair of rows and t (see pack_a)
};
struct TcPackedB {  // B (k × n)
  std::size_t k = 0, n = 0;
  bool exp8 = false, finite = true;
  TcFieldLimits limits;
  std::vector<float> values;        // per strip of 32 columns (see pack_b)
  std::vector<std::int16_t> exps;
};
// Whether g runs on the register strips (AVX-512 builds; else dgemm_tensor_core's loop per block): then
// tc_pack_a and tc_pack_b pack its operands.
bool tc_strips(const GemmSpec& g);
void tc_pack_a(const GemmSpec& g, std::size_t m, std::size_t k, const double* A, std::size_t lda, TcPackedA& pa);
void tc_pack_a(const GemmSpec& g, std::size_t m, std::size_t k, const float* A, std::size_t lda, TcPackedA& pa);
void tc_pack_b(const GemmSpec& g, std::size_t k, std::size_t n, const double* B, std::size_t ldb, TcPackedB& pb);
// dgemm_tensor_core on operands packed under the same g (pa: A, m × k at A, lda; pb: B, k × n at B, ldb; the
// unpacked ones for the columns that meet an inf or NaN): false where the strips decline these operands
// (bf16-style formats beyond the strips' window), nothing written; the caller then runs dgemm_tensor_core on
// its operands.
bool dgemm_tensor_core(const GemmSpec& g, const TcPackedA& pa, const double* A, std::size_t lda, const TcPackedB& pb,
                       const double* B, std::size_t ldb, double* C, std::size_t ldc);
bool dgemm_tensor_core(const GemmSpec& g, const TcPackedA& pa, const float* A, std::size_t lda, const TcPackedB& pb,
                       const double* B, std::size_t ldb, double* C, std::size_t ldc);

}  // namespace pasa::detail
