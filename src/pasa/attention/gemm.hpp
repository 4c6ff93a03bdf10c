// Emulated matrix-engine GEMMs: C = A·B under a GemmModel, with the accumulator and the output rounded to
// their stage formats. Values are doubles (exact values of their formats); where native arithmetic IS the
// model's rounding (an fp32 accumulator fed by operands that floats hold exactly: float FMA = one rounding
// of acc + exact product; an fp64 accumulator: double FMA) the kernels are plain float/double loops, and
// narrow accumulators with every_op rounding use float arithmetic plus round_span (exact: a float holds the
// product of two ≤12-bit values, and 24 ≥ 2p + 2 makes float-then-p rounding of a p-bit sum correct); an
// fp16 (bf16) accumulator over fp16 (bf16) values, where a bound shows that no step leaves the range,
// rounds in float registers (numeric/round_narrow_register.hpp, the same bits).
// Every other case forms each step's exact result (two_prod, two_sum, a floating-point expansion for a
// chunk) and rounds it ONCE to the accumulator in the accumulator's mode (round_sum, or round-to-odd to 53
// bits then round_span for p <= 51 deterministic modes): never the double result rounded again.
#pragma once

#include <cstddef>

#include "pasa/attention/gemm_spec.hpp"

namespace pasa {

// C (m×n, row stride ldc) = out( A (m×k, lda) · B (k×n, ldb) ), each C[i][j] accumulated over k in order
// 0..k−1 as the model says. rng: the stream for stochastic rounding (required only then).
void gemm(const GemmSpec& spec, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
          const double* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng = nullptr);
// The same with B held as floats (its values must be exact values of spec.b_format).
void gemm(const GemmSpec& spec, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
          const float* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng = nullptr);
// C = out(C + A·B) with C's values the accumulator's starting values, as an MMA instruction's C operand
// (mma.sync / wgmma D = A·B + C): FlashAttention-2's P·V issued into the rescaled O accumulator. The
// tensor_core model only (std::invalid_argument otherwise: the other models have no accumulator operand).
void gemm_accumulate(const GemmSpec& spec, std::size_t m, std::size_t n, std::size_t k, const double* A,
                     std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc,
                     RandomBits* rng = nullptr);
// C = out(C0 + A·B) under a block-scaled tensor_core model (TensorCore::scale) with the operands' block scales
// (TcScales: A's per row and k-block, B's per k-block and column; C0 = nullptr: 0); the MX/NVFP4 engines
// (tcgen05.mma.block_scale). std::invalid_argument for another model or a scale its format does not hold.
void gemm_block_scaled(const GemmSpec& spec, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc,
                       const TcScales& scales, const double* C0 = nullptr, RandomBits* rng = nullptr);
// Both operands as floats; only for specs that run on the float kernels (gemm_uses_floats).
void gemm(const GemmSpec& spec, std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng = nullptr);
// Whether the spec runs on the float kernels (then B may be kept as floats to save conversions).
bool gemm_uses_floats(const GemmSpec& spec);
// Both operands and the output as floats, the output rounded in floats: the bits of gemm() above, for specs
// that run on the float kernels with an output that floats hold in a deterministic mode (gemm_floats_out).
bool gemm_floats_out(const GemmSpec& spec);
void gemm(const GemmSpec& spec, std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, float* C, std::size_t ldc);

// Whether gemm() runs the spec as sgemm_fma with its output rounded in floats (ordered model, plain fp32
// accumulator, float operands, a deterministic output format that floats hold), and that output rounding
// (gemm_round_output, in place on count floats): the same bits as gemm() for such a spec.
// With gemm_output_fp16 (an fp16 output in RNE) the rounding is the kernel's store (sgemm_fma_packed's
// round_fp16, attention/detail/packed_sgemm.hpp), and gemm_round_output leaves C as it is.
bool gemm_output_in_floats(const GemmSpec& spec);
bool gemm_output_fp16(const GemmSpec& spec);
void gemm_round_output(const GemmSpec& spec, float* C, std::size_t count);
// gemm()'s output rounding of a result held in doubles (m × n, row stride ldc), for a caller that ran the
// spec's kernel itself (the fused path's tensor-core GEMM on Q rows packed once per item).
void gemm_round_output(const GemmSpec& spec, std::size_t m, std::size_t n, double* C, std::size_t ldc,
                       RandomBits* rng = nullptr);

}  // namespace pasa
