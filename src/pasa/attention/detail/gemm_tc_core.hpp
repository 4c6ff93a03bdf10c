// Shared by the tensor-core model's files (TensorCore in allocation.hpp; the entry points in
// gemm_tensor_core.hpp): the exponents of terms, the plan of a spec, IEEE's values where a term is not
// finite, and the per-family paths:
//   gemm_tensor_core.cpp    the plan and the loop-per-block path (every model without the newer fields)
//   gemm_tc_hopper.cpp      the AVX-512 register strips: the fast path of the H100-measured models
//   gemm_tc_blackwell.cpp   the term-by-term path: block scales, exact groups, zeros at −126 (tcgen05, sm_120)
//   gemm_tc_volta_ampere.cpp  TF32 operand truncation and the integer (IMMA) accumulator
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "pasa/attention/detail/gemm_tensor_core.hpp"

namespace pasa::detail {

constexpr int kZeroExp = -100000;  // exponent of a zero term: never the largest
constexpr int kHugeExp = 100000;   // exponent of an infinite or NaN term (the result is IEEE's then)

// floor(log2 |x|) from the exponent field (every value here is a normal double: the formats' subnormals are
// normal doubles), at least the format's emin; zero: never the largest; inf or NaN: the largest.
inline int term_exp(double x, int emin) {
  const int f = static_cast<int>((std::bit_cast<std::uint64_t>(x) >> 52) & 0x7ff);
  const int e = f == 0 ? kZeroExp : f == 0x7ff ? kHugeExp : f - 1023;
  return e == kZeroExp ? e : std::max(e, emin);
}
inline double pow2(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + e) << 52); }

// A non-finite operand: IEEE arithmetic's value wherever the exact sum is not finite (the model's value is
// left where the FMA chain stays finite: a column whose terms are all finite).
template <class TA, class TB>
void ieee_where_not_finite(std::size_t m, std::size_t n, std::size_t k, const TA* A, std::size_t lda,
                           const TB* B, std::size_t ldb, double* C, std::size_t ldc) {
  bool all_finite = true;
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) all_finite = all_finite && std::isfinite(B[t * ldb + j]);
  for (std::size_t r = 0; r < m; ++r) {
    const TA* a = A + r * lda;
    bool row_finite = all_finite;
    for (std::size_t t = 0; t < k; ++t) row_finite = row_finite && std::isfinite(a[t]);
    if (row_finite) continue;
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::size_t t = 0; t < k; ++t) s = std::fma(a[t], B[t * ldb + j], s);
      if (!std::isfinite(s)) C[r * ldc + j] = s;
    }
  }
}

// What a spec asks of the kernels, checked once (the exceptions of dgemm_tensor_core).
struct Plan {
  Format tcf;              // the tensor core's own accumulator: the acc stage's exponent range, acc_bits bits
  RoundOptions block_opt;  // the stage's overflow and flush policies, the model's rounding
  bool unlimited = false, fast = false, nearest = false, float_lanes = false, strips = false, window = false;
  int F = 0;
  std::size_t group = 0, block = 0, promote = 0;
};
Plan plan_of(const GemmSpec& g);

// The register strips (gemm_tc_hopper.cpp) where p.strips (AVX-512 builds); false: the caller runs the
// loop-per-block path.
bool tc_run_strips(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                   std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc);
bool tc_run_strips(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                   std::size_t lda, const float* B, std::size_t ldb, double* C, std::size_t ldc);

// Whether g needs the term-by-term path (gemm_tc_blackwell.cpp): block scales, exact groups or zeros at −126.
bool tc_term_path(const TensorCore& tc);
// That path: C (m × n) from A, B (and the accumulator's starting values C0, or 0), under the plan's checks;
// scales: the operands' block scales (nullptr: every scale 1).
void tc_terms(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
              std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc, const double* C0,
              const TcScales* scales);
// The integer accumulator (gemm_tc_volta_ampere.cpp): the same contract, integer operands.
void tc_integer(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
                const double* B, std::size_t ldb, double* C, std::size_t ldc, const double* C0);
// The operands cut to tc.operand_bits significand bits toward zero (gemm_tc_volta_ampere.cpp): A (m × k) into
// a (row stride k), B (k × n) into b (row stride n).
void tc_cut_operands(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                     std::size_t lda, const double* B, std::size_t ldb, std::vector<double>& a, std::vector<double>& b);

}  // namespace pasa::detail
