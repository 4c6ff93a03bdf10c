// The tensor-core model's pieces for the mma.sync generations before Hopper (TensorCore in allocation.hpp;
// their parameters in tensor_core_models.cpp):
// - TF32 operands: `mma` .tf32 reads fp32 registers and uses their top 11 significand bits, the 13 low bits
//   dropped (truncation toward zero: MMA-Sim `truncate_to_tf32`, commit c785138), operand_bits = 11.
// - Split-K (Ampere and Ada m16n8k16 f16/bf16, m16n8k8 tf32, m16n8k32 fp8: two fused dot-adds of k/2 each,
//   MMA-Sim `is_split_k`) needs no code: it is a block of k/2.
// - The integer `mma` (.s8/.u8/.s4/.u4 since Turing, an .s32 accumulator): every block's products and the
//   accumulator summed exactly, then wrapped to 32 bits, or clamped to int32 with .satfinite (PTX ISA, mma:
//   "integer"; measured on an H200: docs/tensor-cores.md).
#include "pasa/attention/detail/gemm_tc_core.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace pasa::detail {

void tc_cut_operands(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                     std::size_t lda, const double* B, std::size_t ldb, std::vector<double>& a, std::vector<double>& b) {
  const int bits = g.model.tc.operand_bits;
  // (plan_of: the operands are floats, bits in 2..24) the low 24 − bits significand bits of the float cleared,
  // as an integer mask on its encoding: toward zero, subnormals too; a NaN stays a NaN
  const std::uint32_t keep = ~((std::uint32_t{1} << (24 - bits)) - 1);
  auto cut = [keep](double x) {
    if (std::isnan(x)) return x;
    return static_cast<double>(std::bit_cast<float>(std::bit_cast<std::uint32_t>(static_cast<float>(x)) & keep));
  };
  a.resize(m * k);
  b.resize(k * n);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t t = 0; t < k; ++t) a[r * k + t] = cut(A[r * lda + t]);
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) b[t * n + j] = cut(B[t * ldb + j]);
}

namespace {

// An integer operand of at most 24 bits (products exact, a block's sum below 2^63), else the refusal naming it.
std::int64_t integer_operand(double x, const char* what, std::size_t i, std::size_t j) {
  if (!(std::fabs(x) <= 0x1p24) || x != std::trunc(x))
    throw std::invalid_argument(
        fmt::format("gemm: the integer tensor_core takes integers of at most 2^24; {}[{}][{}] = {}", what, i, j, x));
  return static_cast<std::int64_t>(x);
}

}  // namespace

void tc_integer(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
                const double* B, std::size_t ldb, double* C, std::size_t ldc, const double* C0) {
  const TensorCore& tc = g.model.tc;
  const std::size_t block = static_cast<std::size_t>(tc.block);
  constexpr std::int64_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  std::vector<std::int64_t> a(m * k), b(k * n);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t t = 0; t < k; ++t) a[r * k + t] = integer_operand(A[r * lda + t], "A", r, t);
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) b[t * n + j] = integer_operand(B[t * ldb + j], "B", t, j);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      std::int64_t c = 0;
      if (C0) {
        const double x = C0[r * ldc + j];
        if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi)) || x != std::trunc(x))
          throw std::invalid_argument(
              fmt::format("gemm: the integer tensor_core's accumulator must be an int32; C[{}][{}] = {}", r, j, x));
        c = static_cast<std::int64_t>(x);
      }
      for (std::size_t t0 = 0; t0 < k; t0 += block) {
        std::int64_t s = c;  // exact: |a·b| <= 2^48, at most 1024 products per block
        for (std::size_t t = t0; t < std::min(k, t0 + block); ++t) s += a[r * k + t] * b[t * n + j];
        c = tc.integer == TcInteger::saturate
                ? std::clamp(s, lo, hi)
                : static_cast<std::int64_t>(static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(s))));
      }
      C[r * ldc + j] = static_cast<double>(c);
    }
}

}  // namespace pasa::detail
