#include "pasa/attention/detail/gemm_tensor_core.hpp"

#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/numeric/double_double.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pasa::detail {
namespace {

// The tensor-core model (TensorCore in allocation.hpp) [Fasi et al. 2021; Khattak & Mikaitis 2025]. Per row,
// per block of products: E = the largest exponent of the block's terms (products: e_a + e_b, subnormal operands
// at their format's emin; the accumulator: its own exponent when it is one of the terms), every term scaled by
// 2^(F − E) (exact: a power of two), cut to an integer (trunc: toward zero; nearbyint: nearest even), the
// integers added, the sum scaled back and rounded once to the accumulator. Fast path: the cut terms are
// integers below 2^(F+2) each (|a·b| < 2^(e_a+e_b+2), |c| < 2^(E+1)), so their sum over block + 1 terms is
// exact in double when F + 2 + log2(block + 1) <= 53; otherwise (or with unlimited bits) every cut term goes
// into a floating-point expansion and round_sum rounds the exact sum once.
constexpr std::size_t kW = 64;     // columns per register tile of the tensor-core kernel (4 AVX-512 vectors)
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

#if defined(__AVX512F__)
// v[0..n) rounded to float in direction R (one rounding of each double), widened back in place (the
// zero-masked forms: GCC 12 warns about the unmasked ones' undefined pass-through operand).
template <int R>
void cvt_rows(double* v, std::size_t n) {
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm512_storeu_pd(v + j, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_cvt_roundpd_ps(0xFF, _mm512_loadu_pd(v + j),
                                                                                   R | _MM_FROUND_NO_EXC)));
  if (j < n) {
    const __mmask8 m = static_cast<__mmask8>((1u << (n - j)) - 1);
    const __m512d x = _mm512_maskz_loadu_pd(m, v + j);
    _mm512_mask_storeu_pd(v + j, m, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_cvt_roundpd_ps(0xFF, x, R | _MM_FROUND_NO_EXC)));
  }
}

// The float-lane case in registers (for speed): fp32 accumulator rounded toward zero (the H100 models),
// the accumulator one of the block's terms, a block's scaled products summed in int32 (block <= 2^(29 − F)).
// Per strip of 32 output columns, packed once per GEMM as (value, exponent) panels, and per row, the running
// accumulator, the block's largest exponent, its scale and its int32 sum stay in registers over all of k:
// the same operations as the loop-per-block path (the same float products and scales, the same truncations,
// the same exact double sum and one double → float conversion toward zero), so the same bits. Returns whether
// every operand was finite (else the caller applies ieee_where_not_finite).
constexpr std::size_t kStrip = 32;  // columns per register strip: two AVX-512 vectors
// GCC 12 flags the unmasked intrinsics' undefined pass-through operands (_mm512_undefined_*) as uninitialised.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
bool tc_fp32_rz_strips(std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
                       const double* B, std::size_t ldb, double* C, std::size_t ldc, int F, int ea_min, int eb_min,
                       std::size_t block, std::size_t promote) {
  const std::size_t strips = (n + kStrip - 1) / kStrip;
  thread_local std::vector<float> bp_buf, ap_buf;
  thread_local std::vector<std::int16_t> ebp_buf, eap_buf;
  bp_buf.resize(strips * k * kStrip);
  ebp_buf.resize(strips * k * kStrip);
  ap_buf.resize(m * k + 8);
  eap_buf.resize(m * k + 8);
  float* bp = bp_buf.data();
  std::int16_t* ebp = ebp_buf.data();
  float* ap = ap_buf.data();
  std::int16_t* eap = eap_buf.data();
  // Exponents in int16 lanes (32 columns a vector), added with saturation: term_exp's values, with zero at
  // kZero16 and inf or NaN at kHuge16 instead of ∓100000. Every finite exponent sum lies within ±2046, a sum
  // with a zero below −14000, one with an inf or NaN above 14000 (inf with zero: 0 in both): all of these
  // beyond the clamp of E to [F − 100, F + 100] below, so the clamped E is the same.
  constexpr std::int16_t kZero16 = -16000, kHuge16 = 16000;
  // term_exp and the float value of up to 8 doubles at once (lanes past `count`: 0 and kZero16, padding
  // that adds zero products)
  auto pack8 = [](const double* x, std::size_t count, int emin, float* v, std::int16_t* e) {
    const __mmask8 mk = count >= 8 ? 0xFF : static_cast<__mmask8>((1u << count) - 1);
    const __m512d d = _mm512_maskz_loadu_pd(mk, x);
    const __m512i f = _mm512_and_si512(_mm512_srli_epi64(_mm512_castpd_si512(d), 52), _mm512_set1_epi64(0x7ff));
    __m128i ex = _mm512_cvtepi64_epi16(_mm512_max_epi64(_mm512_sub_epi64(f, _mm512_set1_epi64(1023)),
                                                         _mm512_set1_epi64(emin)));
    const __mmask8 special = _mm512_cmpeq_epi64_mask(f, _mm512_set1_epi64(0x7ff));
    ex = _mm_mask_mov_epi16(ex, special, _mm_set1_epi16(kHuge16));
    ex = _mm_mask_mov_epi16(ex, _mm512_cmpeq_epi64_mask(f, _mm512_setzero_si512()), _mm_set1_epi16(kZero16));
    _mm256_storeu_ps(v, _mm512_maskz_cvtpd_ps(0xFF, d));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(e), ex);
    return special != 0;
  };
  bool finite = true;
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < strips * kStrip; j += 8) {
      const std::size_t at = ((j / kStrip) * k + t) * kStrip + j % kStrip;
      finite = !pack8(B + t * ldb + j, j < n ? n - j : 0, eb_min, bp + at, ebp + at) && finite;
    }
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t t = 0; t < k; t += 8)
      finite = !pack8(A + r * lda + t, k - t, ea_min, ap + r * k + t, eap + r * k + t) && finite;
  const __m512i lo_e = _mm512_set1_epi32(F - 100), hi_e = _mm512_set1_epi32(F + 100);
  // term_exp of an fp32 accumulator, up to the clamp of E below: the exponent field − 127 (a zero or subnormal
  // accumulator gives −127 or −126 where term_exp gives kZeroExp or −126, an inf or NaN 128 for kHugeExp:
  // with 0 <= F <= 25 all of these lie beyond [F − 100, F + 100], so the clamped E is the same)
  auto acc_exp = [&](__m512 c) {
    return _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(c), 23), _mm512_set1_epi32(0xff)),
                            _mm512_set1_epi32(127));
  };
  // the block's exact sum (int32 products + the cut accumulator ci) · 2^(E − F), to fp32 toward zero, in
  // double (exact: both below 2^32): where the int32 sum of the two overflows
  auto finish_wide = [&](__m512i isum, __m512i ci, __m512i E) {
    const __m512i pw = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(E)),
                                                          _mm512_set1_epi64(1023 - F)), 52);
    const __m512i pw_hi = _mm512_slli_epi64(
        _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(E, 1)), _mm512_set1_epi64(1023 - F)), 52);
    const __m512d s_lo = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(isum)),
                                                     _mm512_cvtepi32_pd(_mm512_castsi512_si256(ci))),
                                       _mm512_castsi512_pd(pw));
    const __m512d s_hi = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(isum, 1)),
                                                     _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(ci, 1))),
                                       _mm512_castsi512_pd(pw_hi));
    const __m256 f_lo = _mm512_maskz_cvt_roundpd_ps(0xFF, s_lo, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 f_hi = _mm512_maskz_cvt_roundpd_ps(0xFF, s_hi, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    return _mm512_insertf32x8(_mm512_castps256_ps512(f_lo), f_hi, 1);
  };
  // The same in int32 and float: the sum (below 2^31) cut to 24 bits toward zero, then scaled by 2^(E − F)
  // toward zero (exact unless it underflows; truncations on nested grids compose: one rounding toward zero).
  // c · 2^(F − E) is exact in float (a power of two within range), its truncation the cut accumulator.
  auto finish = [&](__m512i isum, __m512 c, __m512 sc, __m512i E) {
    const __m512i ci = _mm512_cvttps_epi32(_mm512_mul_ps(c, sc));
    const __m512i sum = _mm512_add_epi32(isum, ci);
    const __mmask16 overflow =
        _mm512_movepi32_mask(_mm512_and_si512(_mm512_xor_si512(isum, sum), _mm512_xor_si512(ci, sum)));
    if (overflow != 0) return finish_wide(isum, ci, E);
    const __m512 pw = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(E, _mm512_set1_epi32(127 - F)), 23));
    return _mm512_mul_round_ps(_mm512_cvt_roundepi32_ps(sum, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), pw,
                               _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  };
  for (std::size_t s = 0; s < strips; ++s) {
    const float* bs = bp + s * k * kStrip;
    const std::int16_t* es = ebp + s * k * kStrip;
    const std::size_t width = std::min(kStrip, n - s * kStrip);
    for (std::size_t r = 0; r < m; ++r) {
      const float* a = ap + r * k;
      const std::int16_t* ea = eap + r * k;
      __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
      __m512 o0 = _mm512_setzero_ps(), o1 = _mm512_setzero_ps();
      std::size_t since_promotion = 0;
      for (std::size_t t0 = 0; t0 < k; t0 += block) {
        const std::size_t t1 = std::min(k, t0 + block);
        __m512i E16 = _mm512_set1_epi16(kZero16);
        for (std::size_t t = t0; t < t1; ++t)
          E16 = _mm512_max_epi16(E16, _mm512_adds_epi16(_mm512_set1_epi16(ea[t]), _mm512_loadu_si512(es + t * kStrip)));
        __m512i E0 = _mm512_max_epi32(acc_exp(c0), _mm512_cvtepi16_epi32(_mm512_castsi512_si256(E16)));
        __m512i E1 = _mm512_max_epi32(acc_exp(c1), _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(E16, 1)));
        // E clamped as in the loop-per-block path: 2^(F − E) a normal float
        E0 = _mm512_min_epi32(_mm512_max_epi32(E0, lo_e), hi_e);
        E1 = _mm512_min_epi32(_mm512_max_epi32(E1, lo_e), hi_e);
        const __m512 sc0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127 + F), E0), 23));
        const __m512 sc1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127 + F), E1), 23));
        __m512i i0 = _mm512_setzero_si512(), i1 = _mm512_setzero_si512();
        for (std::size_t t = t0; t < t1; ++t) {
          const __m512 at = _mm512_set1_ps(a[t]);
          // the exact product, scaled by a power of two, truncated toward zero
          i0 = _mm512_add_epi32(i0, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(at, _mm512_loadu_ps(bs + t * kStrip)), sc0)));
          i1 = _mm512_add_epi32(i1, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(at, _mm512_loadu_ps(bs + t * kStrip + 16)), sc1)));
        }
        c0 = finish(i0, c0, sc0, E0);
        c1 = finish(i1, c1, sc1, E1);
        since_promotion += t1 - t0;
        const bool promote_now = promote > 0 && (since_promotion == promote || t1 == k);
        if (promote_now) {  // the CUDA cores' fp32 add (RNE)
          o0 = _mm512_add_ps(o0, c0);
          o1 = _mm512_add_ps(o1, c1);
          c0 = c1 = _mm512_setzero_ps();
          since_promotion = 0;
        }
      }
      if (promote > 0) {
        c0 = o0;
        c1 = o1;
      }
      double* out = C + r * ldc + s * kStrip;
      alignas(64) float res[kStrip];
      _mm512_store_ps(res, c0);
      _mm512_store_ps(res + 16, c1);
      for (std::size_t w = 0; w < width; ++w) out[w] = res[w];
    }
  }
  return finite;
}
#pragma GCC diagnostic pop
#endif

// A non-finite operand: IEEE arithmetic's value wherever the exact sum is not finite (the model's value is
// left where the FMA chain stays finite: a column whose terms are all finite).
void ieee_where_not_finite(std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
                           const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  bool all_finite = true;
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) all_finite = all_finite && std::isfinite(B[t * ldb + j]);
  for (std::size_t r = 0; r < m; ++r) {
    const double* a = A + r * lda;
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

}  // namespace

void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  const TensorCore& tc = g.model.tc;
  if (tc.block < 1) throw std::logic_error("gemm: tensor_core block must be >= 1");
  if (tc.promote < 0 || (tc.promote > 0 && tc.promote % tc.block != 0))
    throw std::logic_error("gemm: tensor_core promote must be 0 or a multiple of block");
  if (g.a_format.p > kTensorCoreMaxOperandBits || g.b_format.p > kTensorCoreMaxOperandBits)
    throw std::invalid_argument("gemm: the tensor_core model needs operands of at most 26 bits (products exact in "
                                "double); got " + g.a_format.name + " x " + g.b_format.name);
  if (g.acc.round.mode == RoundMode::stochastic || tc.block_round == RoundMode::stochastic ||
      tc.block_round == RoundMode::odd)
    throw std::invalid_argument("gemm: the tensor_core model takes rne, rz, ru or rd (no stochastic or odd rounding)");
  if (tc.acc_bits != 0 && (tc.acc_bits < 2 || tc.acc_bits > 53))
    throw std::logic_error("gemm: tensor_core acc_bits must be 0 or 2..53");
  const Format& af = g.acc.format;
  // the tensor core's own accumulator: the acc stage's exponent range, acc_bits significand bits
  const Format tcf = tc.acc_bits == 0 ? af : custom_format(tc.acc_bits, af.emax, af.subnormals, af.specials);
  RoundOptions block_opt = g.acc.round;  // the stage's overflow and flush policies, the model's rounding
  block_opt.mode = tc.block_round;
  const bool unlimited = tc.align_bits == kUnlimitedAlign;
  const int F = unlimited ? 0 : tc.align_bits;
  int log2_terms = 0;
  while ((1 << log2_terms) < tc.block + 1) ++log2_terms;
  const bool fast = !unlimited && F + 2 + log2_terms <= 53;
  const bool nearest = tc.align_round == AlignRound::nearest;
  // Float lanes (twice as many) where every product of the operands is an exact normal float (fp16, fp8:
  // p_a + p_b <= 24, products within [2^-126, 2^127)) and the scaled products, integers below 2^(F+2), add
  // up in int32 over groups of 2^(29 − F) products without overflow.
  const double min_product = g.a_format.min_subnormal() * g.b_format.min_subnormal();
  const double max_product = g.a_format.max_finite() * g.b_format.max_finite();
  const bool float_lanes = fast && !nearest && F <= 25 && float_exact(g.a_format) && float_exact(g.b_format) &&
                           g.a_format.p + g.b_format.p <= 24 && min_product >= 0x1p-126 && max_product < 0x1p127;
  const std::size_t group = float_lanes ? std::size_t{1} << (29 - F) : 0;
  const int ea_min = g.a_format.emin(), eb_min = g.b_format.emin(), ec_min = tcf.emin();
  const std::size_t block = static_cast<std::size_t>(tc.block);
  const std::size_t promote = static_cast<std::size_t>(tc.promote);
  // An fp32 accumulator with IEEE overflow and no flushing: the hardware conversion double → float in the
  // block's rounding direction is that one rounding (IEEE 754 §5.4.2; overflow as §7.4, as pasa::round's ieee)
  [[maybe_unused]] const bool native_fp32 = tcf == fp32() && block_opt.overflow == Overflow::ieee &&
                                           !block_opt.flush_input && !block_opt.flush_output;
#if defined(__AVX512F__)
  if (float_lanes && native_fp32 && block_opt.mode == RoundMode::toward_zero && tc.acc_in_block && block <= group &&
      (promote == 0 || native(g.acc, fp32()))) {
    if (!tc_fp32_rz_strips(m, n, k, A, lda, B, ldb, C, ldc, F, ea_min, eb_min, block, promote))
      ieee_where_not_finite(m, n, k, A, lda, B, ldb, C, ldc);
    return;
  }
#endif
  thread_local std::vector<float> bf_buf, sf_buf;
  thread_local std::vector<std::int32_t> i32_buf;
  bf_buf.resize(float_lanes ? k * n : 0);
  sf_buf.resize(n);
  i32_buf.resize(n);
  float* bf = bf_buf.data();
  float* sf = sf_buf.data();
  std::int32_t* i32 = i32_buf.data();
  if (float_lanes)
    for (std::size_t t = 0; t < k; ++t)
      for (std::size_t j = 0; j < n; ++j) bf[t * n + j] = static_cast<float>(B[t * ldb + j]);

  thread_local std::vector<int> eb_buf, e_buf;
  thread_local std::vector<double> c_buf, outer_buf, sum_buf, scale_buf, ex_buf;
  thread_local std::vector<std::int64_t> isum_buf;
  thread_local std::vector<double> unscale_buf;
  isum_buf.resize(n);
  unscale_buf.resize(n);
  double* unscale = unscale_buf.data();
  std::int64_t* isum = isum_buf.data();
  eb_buf.resize(k * n);
  e_buf.resize(n);
  c_buf.resize(n);
  outer_buf.resize(n);
  sum_buf.resize(n);
  scale_buf.resize(n);
  ex_buf.resize(2 * block + 4);
  int* eb = eb_buf.data();
  thread_local std::vector<int> ea_buf;
  ea_buf.resize(block);
  int* ea_blk = ea_buf.data();  // the exponents of the row's operands in the current block
  int* E = e_buf.data();
  double* c = c_buf.data();
  double* outer = outer_buf.data();
  double* sum = sum_buf.data();
  double* scale = scale_buf.data();
  double* ex = ex_buf.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) eb[t * n + j] = term_exp(B[t * ldb + j], eb_min);
  // Rows of B with an inf or NaN: a block that meets one takes the expansion path (below).
  thread_local std::vector<std::uint8_t> b_row_finite_buf;
  b_row_finite_buf.assign(k, 1);
  std::uint8_t* b_row_finite = b_row_finite_buf.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) b_row_finite[t] &= eb[t * n + j] != kHugeExp;
  auto cut = [nearest](double x) { return nearest ? std::nearbyint(x) : std::trunc(x); };
  auto round_into_acc = [&](double* v) {  // the block values, rounded once to the accumulator
#if defined(__AVX512F__)
    if (native_fp32) {
      switch (block_opt.mode) {
        case RoundMode::toward_zero: cvt_rows<_MM_FROUND_TO_ZERO>(v, n); return;
        case RoundMode::nearest_even: cvt_rows<_MM_FROUND_TO_NEAREST_INT>(v, n); return;
        case RoundMode::toward_pos: cvt_rows<_MM_FROUND_TO_POS_INF>(v, n); return;
        case RoundMode::toward_neg: cvt_rows<_MM_FROUND_TO_NEG_INF>(v, n); return;
        default: break;
      }
    }
#endif
    round_span(std::span<const double>(v, n), std::span<double>(v, n), tcf, block_opt);
  };
  for (std::size_t r = 0; r < m; ++r) {
    const double* a = A + r * lda;
    double* out = C + r * ldc;
    std::fill(c, c + n, 0.0);
    std::fill(outer, outer + n, 0.0);
    std::size_t since_promotion = 0;
    for (std::size_t t0 = 0; t0 < k; t0 += block) {
      const std::size_t t1 = std::min(k, t0 + block);
      for (std::size_t j = 0; j < n; ++j) E[j] = tc.acc_in_block ? term_exp(c[j], ec_min) : kZeroExp;
      for (std::size_t t = t0; t < t1; ++t) ea_blk[t - t0] = term_exp(a[t], ea_min);
      // kW columns at a time, their running maxima held in registers over the block's products
      std::size_t jw = 0;
      for (; jw + kW <= n; jw += kW) {
        int e[kW];
        for (std::size_t w = 0; w < kW; ++w) e[w] = E[jw + w];
        for (std::size_t t = t0; t < t1; ++t) {
          const int ea = ea_blk[t - t0];
          const int* ebt = eb + t * n + jw;
          for (std::size_t w = 0; w < kW; ++w) e[w] = std::max(e[w], ea + ebt[w]);
        }
        for (std::size_t w = 0; w < kW; ++w) E[jw + w] = e[w];
      }
      for (std::size_t t = t0; t < t1; ++t) {
        const int ea = ea_blk[t - t0];
        const int* ebt = eb + t * n;
        for (std::size_t j = jw; j < n; ++j) E[j] = std::max(E[j], ea + ebt[j]);
      }
      // 2^(F − E), E clamped so that the power of two is a normal double (an all-zero block has E = kZeroExp;
      // a huge E only where a term is not finite and IEEE's value is taken below)
      for (std::size_t j = 0; j < n; ++j) {
        const int e = std::clamp(E[j], F - (float_lanes ? 100 : 1000), F + (float_lanes ? 100 : 1000));
        scale[j] = pow2(F - e);
        unscale[j] = pow2(e - F);
      }
      // The fast path converts every scaled term to an integer, which C++ leaves undefined for an inf or NaN
      // (a non-finite operand, inf·0, or a product of finite operands past 2^1000): a block with one takes the
      // expansion path, which gives the same value for every finite column (the same cut terms, summed
      // exactly) and whose non-finite columns ieee_where_not_finite overwrites with IEEE's value.
      bool tame = true;
      for (std::size_t j = 0; j < n; ++j) tame = tame && E[j] < 1000;
      for (std::size_t t = t0; t < t1; ++t) tame = tame && ea_blk[t - t0] != kHugeExp && b_row_finite[t];
      if (fast && tame) {
        // integers below 2^(F+2) each: int64 conversion truncates toward zero (vectorised), the sum is exact
        auto to_int = [nearest](double x) {
          return static_cast<std::int64_t>(nearest ? std::nearbyint(x) : x);
        };
        if (nearest) {
          for (std::size_t j = 0; j < n; ++j) isum[j] = tc.acc_in_block ? to_int(c[j] * scale[j]) : 0;
          for (std::size_t t = t0; t < t1; ++t) {
            const double at = a[t];
            const double* bt = B + t * ldb;
            for (std::size_t j = 0; j < n; ++j) isum[j] += to_int(at * bt[j] * scale[j]);
          }
        } else if (float_lanes) {
          for (std::size_t j = 0; j < n; ++j) {
            isum[j] = tc.acc_in_block ? static_cast<std::int64_t>(c[j] * scale[j]) : 0;
            sf[j] = static_cast<float>(scale[j]);  // a power of two within float's range (E clamped above)
          }
          for (std::size_t g0 = t0; g0 < t1; g0 += group) {
            const std::size_t g1 = std::min(t1, g0 + group);
            // kW columns at a time, their int32 sums and scales held in registers over the group's products
            std::size_t jc = 0;
            for (; jc + kW <= n; jc += kW) {
              std::int32_t acc[kW] = {};
              float sc[kW];
              for (std::size_t w = 0; w < kW; ++w) sc[w] = sf[jc + w];
              for (std::size_t t = g0; t < g1; ++t) {
                const float at = static_cast<float>(a[t]);
                const float* bt = bf + t * n + jc;
                for (std::size_t w = 0; w < kW; ++w) acc[w] += static_cast<std::int32_t>(at * bt[w] * sc[w]);
              }
              for (std::size_t w = 0; w < kW; ++w) isum[jc + w] += acc[w];
            }
            if (jc < n) {
              std::fill(i32 + jc, i32 + n, 0);
              for (std::size_t t = g0; t < g1; ++t) {
                const float at = static_cast<float>(a[t]);
                const float* bt = bf + t * n;
                for (std::size_t j = jc; j < n; ++j) i32[j] += static_cast<std::int32_t>(at * bt[j] * sf[j]);
              }
              for (std::size_t j = jc; j < n; ++j) isum[j] += i32[j];
            }
          }
        } else {
          for (std::size_t j = 0; j < n; ++j)
            isum[j] = tc.acc_in_block ? static_cast<std::int64_t>(c[j] * scale[j]) : 0;
          for (std::size_t t = t0; t < t1; ++t) {
            const double at = a[t];
            const double* bt = B + t * ldb;
            for (std::size_t j = 0; j < n; ++j) isum[j] += static_cast<std::int64_t>(at * bt[j] * scale[j]);
          }
        }
        for (std::size_t j = 0; j < n; ++j) sum[j] = static_cast<double>(isum[j]) * unscale[j];  // exact
        round_into_acc(sum);
      } else {
        for (std::size_t j = 0; j < n; ++j) {
          int ne = 0;
          auto add = [&](double x) {
            if (unlimited) expansion_add(ex, ne, x);
            else if (const double q = cut(x * scale[j]); q != 0.0) expansion_add(ex, ne, q / scale[j]);
          };
          if (tc.acc_in_block) add(c[j]);
          for (std::size_t t = t0; t < t1; ++t) add(a[t] * B[t * ldb + j]);
          sum[j] = ne == 0 ? 0.0 : round_sum_dd(expansion_to_dd(ex, ne), tcf, block_opt);
        }
      }
      if (tc.acc_in_block) std::copy(sum, sum + n, c);
      else
        for (std::size_t j = 0; j < n; ++j) c[j] = round_sum_dd(two_sum(c[j], sum[j]), tcf, block_opt);
      since_promotion += t1 - t0;
      if (promote > 0 && (since_promotion == promote || t1 == k)) {  // the CUDA cores' add, in the acc stage
        for (std::size_t j = 0; j < n; ++j) {
          outer[j] = round_sum_dd(two_sum(outer[j], c[j]), af, g.acc.round);
          c[j] = 0.0;
        }
        since_promotion = 0;
      }
    }
    const double* result = promote > 0 ? outer : c;
    for (std::size_t j = 0; j < n; ++j) out[j] = result[j];
  }
  ieee_where_not_finite(m, n, k, A, lda, B, ldb, C, ldc);
}

}  // namespace pasa::detail
