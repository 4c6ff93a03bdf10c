#include "pasa/attention/gemm.hpp"
#include "pasa/attention/detail/packed_sgemm.hpp"

#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/attention/detail/gemm_float_kernels.hpp"
#include "pasa/attention/detail/gemm_tensor_core.hpp"
#include "pasa/numeric/double_double.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

// The dispatch of gemm() (gemm.hpp): which spec runs on the float kernels (detail/gemm_float_kernels.cpp),
// the tensor-core model (detail/gemm_tensor_core.cpp) or the generic exact-step loop below, the operands'
// conversions, and the output rounding.
namespace pasa {
namespace {

using namespace detail;

// Any accumulator format and model: each step forms its exact result as hi + lo and rounds it ONCE to
// the accumulator (round_sum). Products: two_prod, exact (p.lo = 0 for operands of at most 26 bits, as all
// formats narrower than fp64 are). ordered: c + a·b; every_op: a·b, then c + rnd(a·b); chunked: c plus the
// group's exact sum. Sums of more than two terms (c + the two halves of an fp64 product; a chunk) are
// accumulated exactly in a floating-point expansion (Shewchuk's Grow-Expansion: error-free whatever the
// exponents, unlike a double-double whose low word would itself round when a group spans more than ~106
// bits, e.g. bf16/fp32 products of very different sizes) and reduced to an equivalent hi + lo. Rounding
// through double (RN to 53 bits, then to the accumulator) is NOT one rounding for directed modes, RO, SR,
// or p > 25 (53 < 2p + 2 [Figueroa 1995]); this is why every step goes through round_sum (or its
// equivalent for p <= 51 deterministic modes: sticky_fold, then round_span).
void dgemm_generic(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
                   const double* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  const bool acc_native = native(g.acc, fp64());
  const Format& af = g.acc.format;
  const RoundOptions& ao = g.acc.round;
  // For p <= 51 and a deterministic mode a row's exact results are folded to 53 bits with round-to-odd
  // (sticky_fold) and the row rounded by round_span's vectorised kernels: one rounding (see round.hpp).
  const bool fold = sticky_fold_rounds_once(af, ao);
  auto settle = [&](DD x) { return fold ? sticky_fold(x.hi, x.lo) : round_sum(x.hi, x.lo, af, ao, rng); };
  auto finish_row = [&](double* c) {
    if (fold) round_span(std::span<const double>(c, n), std::span<double>(c, n), af, ao, rng);
  };
  // The exact c + a·b as hi + lo (in an expansion when the product has a low part). Infinities and NaN
  // (an overflowed accumulator, non-finite inputs) take IEEE arithmetic's value.
  auto exact_fma = [](double a, double b, double c) -> DD {
    const DD p = two_prod(a, b);
    if (!std::isfinite(p.hi) || !std::isfinite(c)) return {std::fma(a, b, c), 0.0};
    if (p.lo == 0.0) return two_sum(c, p.hi);
    double e[4];
    int ne = 0;
    expansion_add(e, ne, c);
    expansion_add(e, ne, p.hi);
    expansion_add(e, ne, p.lo);
    return expansion_to_dd(e, ne);
  };
  const std::size_t chunk = g.model.kind == GemmKind::chunked ? static_cast<std::size_t>(g.model.chunk) : 1;
  thread_local std::vector<double> expansion_buffer, tmp_buffer;
  expansion_buffer.resize(2 * chunk + 2);
  tmp_buffer.resize(n);
  double* ex = expansion_buffer.data();
  double* tmp = tmp_buffer.data();
  for (std::size_t r = 0; r < m; ++r) {
    double* c = C + r * ldc;
    std::fill(c, c + n, 0.0);
    for (std::size_t t0 = 0; t0 < k; t0 += chunk) {
      const double a0 = A[r * lda + t0];
      const double* b0 = B + t0 * ldb;
      switch (g.model.kind) {
        case GemmKind::ordered:
          if (acc_native) {  // double FMA: one RNE rounding of c + a·b
            for (std::size_t j = 0; j < n; ++j) c[j] = std::fma(a0, b0[j], c[j]);
          } else {
            for (std::size_t j = 0; j < n; ++j) c[j] = settle(exact_fma(a0, b0[j], c[j]));
            finish_row(c);
          }
          break;
        case GemmKind::every_op:
          if (acc_native) {
            for (std::size_t j = 0; j < n; ++j) c[j] = c[j] + a0 * b0[j];
            break;
          }
          for (std::size_t j = 0; j < n; ++j) {  // the product rounded once
            const DD p = two_prod(a0, b0[j]);
            tmp[j] = settle(std::isfinite(p.hi) ? p : DD{p.hi, 0.0});
          }
          finish_row(tmp);
          for (std::size_t j = 0; j < n; ++j) c[j] = settle(two_sum(c[j], tmp[j]));  // then the sum
          finish_row(c);
          break;
        case GemmKind::chunked: {
          // Tensor-core model: the group's exact sum (a wide adder), one rounding into acc with c.
          const std::size_t t1 = std::min(k, t0 + chunk);
          for (std::size_t j = 0; j < n; ++j) {
            int ne = 0;
            double naive = c[j];
            expansion_add(ex, ne, c[j]);
            for (std::size_t t = t0; t < t1; ++t) {
              const double a = A[r * lda + t], b = B[t * ldb + j];
              const DD p = two_prod(a, b);
              naive = std::fma(a, b, naive);
              expansion_add(ex, ne, p.hi);
              if (p.lo != 0.0) expansion_add(ex, ne, p.lo);
            }
            c[j] = settle(std::isfinite(naive) ? expansion_to_dd(ex, ne) : DD{naive, 0.0});
          }
          finish_row(c);
          break;
        }
        case GemmKind::tensor_core: throw std::logic_error("gemm: tensor_core runs in dgemm_tensor_core");
      }
    }
  }
}

void round_rows(const GemmSpec& g, std::size_t m, std::size_t n, double* C, std::size_t ldc, RandomBits* rng) {
  // The tensor-core model's results are values of its accumulator format (or IEEE's inf and NaN) unless a
  // narrower internal accumulator (acc_bits) is left unpromoted or the accumulator is an int32: an output stage of that format (with IEEE
  // specials) rounding RNE with IEEE overflow and no flushing leaves each as it is.
  const TensorCore& tc = g.model.tc;
  const bool tc_acc_values = g.model.kind == GemmKind::tensor_core && (tc.acc_bits == 0 || tc.promote > 0) &&
                             tc.integer == TcInteger::off && g.acc.format.specials == Specials::ieee;
  if (tc_acc_values && g.out.format == g.acc.format && plain_rne(g.out.round)) return;
  if (!native(g.out, fp64()))
    for (std::size_t r = 0; r < m; ++r)
      round_span(std::span<const double>(C + r * ldc, n), std::span<double>(C + r * ldc, n), g.out.format,
                 g.out.round, rng);
}

// The float kernels on float operands, output rounded and widened into C.
// The output rounding gemm_float leaves to double (a format floats do not hold, or stochastic rounding).
bool output_in_double(const GemmSpec& g) {
  const bool out_is_acc = g.out.format == g.acc.format && plain_rne(g.out.round);
  const bool out_in_float = float_exact(g.out.format) && !native(g.out, fp64());
  return !out_is_acc && !native(g.out, fp64()) && (!out_in_float || g.out.round.mode == RoundMode::stochastic);
}

// The float kernels into fc (m × n, row stride ldc), the output rounded in floats where floats hold it (F16C
// for fp16); what output_in_double says is left to the caller.
void float_kernels(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const float* fa, std::size_t lda,
                   const float* B, std::size_t ldb, float* fc, std::size_t ldc) {
  const bool acc_fp32 = native(g.acc, fp32());
  if (acc_fp32 && g.model.kind == GemmKind::ordered) sgemm_fma(m, n, k, fa, lda, B, ldb, fc, ldc);
  else if (acc_fp32) sgemm_every_op(m, n, k, fa, lda, B, ldb, fc, ldc);
  else sgemm_every_op_narrow(g, m, n, k, fa, lda, B, ldb, fc, ldc);
  const bool out_is_acc = g.out.format == g.acc.format && plain_rne(g.out.round);
  const bool out_in_float = float_exact(g.out.format) && !native(g.out, fp64());
  if (out_is_acc || !out_in_float || g.out.round.mode == RoundMode::stochastic) return;
  if (ldc == n) {
    round_span(std::span<const float>(fc, m * n), std::span<float>(fc, m * n), g.out.format, g.out.round);
  } else {
    for (std::size_t r = 0; r < m; ++r)
      round_span(std::span<const float>(fc + r * ldc, n), std::span<float>(fc + r * ldc, n), g.out.format, g.out.round);
  }
}

void gemm_float(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const float* fa, std::size_t lda,
                const float* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  thread_local std::vector<float> fc_buffer;
  fc_buffer.resize(m * n);
  float* fc = fc_buffer.data();
  float_kernels(g, m, n, k, fa, lda, B, ldb, fc, n);
  const bool in_double = output_in_double(g);
  for (std::size_t r = 0; r < m; ++r) {
    double* c = C + r * ldc;
    for (std::size_t j = 0; j < n; ++j) c[j] = fc[r * n + j];
    if (in_double) round_span(std::span<const double>(c, n), std::span<double>(c, n), g.out.format, g.out.round, rng);
  }
}

bool float_path(const GemmSpec& g) {
  const bool operands_float = float_exact(g.a_format) && float_exact(g.b_format);
  const bool acc_fp32 = native(g.acc, fp32());
  const bool narrow_every_op = g.model.kind == GemmKind::every_op && plain_rne(g.acc.round) && g.acc.format.p <= 11 &&
                               float_exact(g.acc.format) && g.a_format.p + g.b_format.p <= 24;
  const bool fma_kinds = g.model.kind == GemmKind::ordered || g.model.kind == GemmKind::every_op;
  return operands_float && ((acc_fp32 && fma_kinds) || narrow_every_op);
}

// A as floats (a thread-local copy).
const float* floats_of(const double* A, std::size_t m, std::size_t k, std::size_t lda) {
  thread_local std::vector<float> fa_buffer;
  fa_buffer.resize(m * k);
  float* fa = fa_buffer.data();
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t t = 0; t < k; ++t) fa[r * k + t] = static_cast<float>(A[r * lda + t]);
  return fa;
}

}  // namespace

bool gemm_uses_floats(const GemmSpec& g) { return float_path(g); }

bool gemm_output_in_floats(const GemmSpec& g) {
  const bool out_is_acc = g.out.format == g.acc.format && plain_rne(g.out.round);
  return native(g.acc, fp32()) && g.model.kind == GemmKind::ordered && float_path(g) &&
         (out_is_acc || native(g.out, fp64()) || (float_exact(g.out.format) && g.out.round.mode != RoundMode::stochastic));
}

void gemm_round_output(const GemmSpec& g, float* C, std::size_t count) {
  if (gemm_output_fp16(g)) return;  // (sgemm_fma_packed rounds it)
  const bool out_is_acc = g.out.format == g.acc.format && plain_rne(g.out.round);
  if (!out_is_acc && !native(g.out, fp64())) round_span(std::span<const float>(C, count), std::span<float>(C, count), g.out.format, g.out.round);
}

void gemm_round_output(const GemmSpec& g, std::size_t m, std::size_t n, double* C, std::size_t ldc, RandomBits* rng) {
  round_rows(g, m, n, C, ldc, rng);
}

bool gemm_output_fp16(const GemmSpec& g) {
  static const Format fp16 = format_by_name("fp16");
  return g.out.format == fp16 && plain_rne(g.out.round);
}

void gemm(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
          const double* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  if (!float_path(g)) {
    if (g.model.kind == GemmKind::tensor_core) dgemm_tensor_core(g, m, n, k, A, lda, B, ldb, C, ldc);
    else dgemm_generic(g, m, n, k, A, lda, B, ldb, C, ldc, rng);
    round_rows(g, m, n, C, ldc, rng);
    return;
  }
  thread_local std::vector<float> fb_buffer;
  fb_buffer.resize(k * n);
  float* fb = fb_buffer.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) fb[t * n + j] = static_cast<float>(B[t * ldb + j]);
  gemm_float(g, m, n, k, floats_of(A, m, k, lda), k, fb, n, C, ldc, rng);
}

void gemm_accumulate(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                     std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  if (g.model.kind != GemmKind::tensor_core)
    throw std::invalid_argument("gemm_accumulate: only the tensor_core model has an accumulator operand");
  dgemm_tensor_core(g, m, n, k, A, lda, B, ldb, C, ldc, C);
  round_rows(g, m, n, C, ldc, rng);
}

void gemm_block_scaled(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc,
                       const TcScales& scales, const double* C0, RandomBits* rng) {
  if (g.model.kind != GemmKind::tensor_core || g.model.tc.scale == BlockScale::none)
    throw std::invalid_argument("gemm_block_scaled: needs a tensor_core model with block scales (e.g. b200_mxf4)");
  dgemm_tensor_core(g, m, n, k, A, lda, B, ldb, C, ldc, C0, &scales);
  round_rows(g, m, n, C, ldc, rng);
}

void gemm(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
          const float* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  if (float_path(g)) {
    gemm_float(g, m, n, k, floats_of(A, m, k, lda), k, B, ldb, C, ldc, rng);
    return;
  }
  if (g.model.kind == GemmKind::tensor_core) {  // (B as floats: the register strips read them directly)
    dgemm_tensor_core(g, m, n, k, A, lda, B, ldb, C, ldc);
    round_rows(g, m, n, C, ldc, rng);
    return;
  }
  thread_local std::vector<double> db_buffer;
  db_buffer.resize(k * n);
  double* db = db_buffer.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) db[t * n + j] = B[t * ldb + j];
  dgemm_generic(g, m, n, k, A, lda, db, n, C, ldc, rng);
  round_rows(g, m, n, C, ldc, rng);
}

void gemm(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  if (!float_path(g)) throw std::logic_error("gemm: float operands given to a GEMM that runs on doubles");
  gemm_float(g, m, n, k, A, lda, B, ldb, C, ldc, rng);
}

bool gemm_floats_out(const GemmSpec& g) { return float_path(g) && !output_in_double(g); }

void gemm(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, float* C, std::size_t ldc) {
  if (!gemm_floats_out(g)) throw std::logic_error("gemm: a float output asked of a GEMM that rounds it in double");
  float_kernels(g, m, n, k, A, lda, B, ldb, C, ldc);
}

}  // namespace pasa
