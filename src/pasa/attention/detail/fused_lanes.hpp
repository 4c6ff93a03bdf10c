// What the fused path's two files share (fused_tile.cpp: the tile's GEMMs, masks and maxima; fused_softmax.cpp:
// the exp and the row sums): how a stage rounds there (Kind), and the float and AVX-512 lane forms of the
// scalar roundings, each operation for operation the scalar helper's (so the same bits: fused_tile.hpp).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>

#include "pasa/attention/detail/blocked_attention.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 warns inside its own AVX-512 headers (the unused pass-through operand of the unmasked forms; with
// the unpacks of fused_tile.cpp's transpose16, -Wuninitialized too): off for the files that include this.
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

namespace pasa::detail::fused_lanes {

// How a stage's rounding runs on the fused path (see fused_tile.hpp).
enum class Kind { none, fp32, narrow };

inline Kind kind_of(const StageSpec& sp) {
  const Format& f = sp.format;
  const RoundOptions& o = sp.round;
  const bool plain =
      o.mode == RoundMode::nearest_even && o.overflow == Overflow::ieee && !o.flush_input && !o.flush_output;
  if (f == format_by_name("fp32")) return plain ? Kind::fp32 : Kind::none;
  // p <= 22: every rounding point (p + 1 bits) is an even float; emax <= 127 and a smallest quantum of at
  // least 2^-147: the float grid is at least 4 times finer than the format's everywhere, subnormals included.
  const bool fits = f.p <= 22 && f.emax <= 127 && f.emin() - f.p + 1 >= -147;
  return fits && o.mode != RoundMode::stochastic ? Kind::narrow : Kind::none;
}

// fp16 with plain RNE: the F16C conversion rounds a float to it (round_span uses it too).
inline bool is_fp16(const StageSpec& sp) { return sp.format == format_by_name("fp16") && kind_of(sp) == Kind::narrow &&
                                           sp.round.mode == RoundMode::nearest_even && sp.round.overflow == Overflow::ieee &&
                                           !sp.round.flush_input && !sp.round.flush_output; }

// The exp argument z − shift in float, 16 lanes: for an fp32 exp stage when the shifts (max-stage values) are
// floats (the RNE float difference is the exact one rounded once, overflow included); for an fp16 exp stage
// (RNE) when the scores and the shifts are fp16 values too: the float difference rounded again to fp16 is
// the exact one rounded once (24 >= 2·11 + 2 [Figueroa 1995]; a difference below 2^-14 is exact in float).
inline bool float_arguments(const Run& run) {
  const StageSpec& exp = run.stage(Stage::exp);
  if (kind_of(exp) == Kind::fp32) return kind_of(run.stage(Stage::max)) != Kind::none;
  const Format& f = exp.format;
  return is_fp16(exp) && run.stage(Stage::s).format == f && run.stage(Stage::scale).format == f &&
         run.stage(Stage::max).format == f;
}

// x rounded to odd at float's 24 bits (subnormal floats included): the RNE float when it is x, else of the
// two floats around x the one with an odd last bit. An RNE float beyond x in magnitude (infinity included:
// then FLT_MAX) steps one toward zero, one short of x steps away from it. NaN stays NaN.
inline float ro_float(double x) {
  const float f = static_cast<float>(x);
  const double b = f;
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const bool step = b != x && x == x && (u & 1u) == 0;
  const std::uint32_t delta = std::fabs(b) < std::fabs(x) ? 1u : 0xFFFFFFFFu;
  u += step ? delta : 0u;
  return std::bit_cast<float>(u);
}

#if defined(__AVX512F__)
// −x by its sign bit, as unary minus.
inline __m512d negated(__m512d x) {
  return _mm512_castsi512_pd(
      _mm512_xor_si512(_mm512_castpd_si512(x), _mm512_set1_epi64(static_cast<long long>(0x8000000000000000ull))));
}

// 8 lanes of the scalar helpers, operation for operation (so the same bits): two_sum + sticky_fold,
// exp_one, ro_float.
inline __m512d folded_sum(__m512d a, __m512d b) {
  const __m512d s = _mm512_add_pd(a, b);
  const __m512d bb = _mm512_sub_pd(s, a);
  const __m512d lo = _mm512_add_pd(_mm512_sub_pd(a, _mm512_sub_pd(s, bb)), _mm512_sub_pd(b, bb));
  const __m512i u = _mm512_castpd_si512(s), l = _mm512_castpd_si512(lo);
  const __m512i um = _mm512_and_si512(u, _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll));
  __mmask8 fold = _mm512_cmp_pd_mask(lo, _mm512_setzero_pd(), _CMP_NEQ_UQ);  // lo != 0.0 (true for NaN)
  fold &= _mm512_testn_epi64_mask(u, _mm512_set1_epi64(1));
  fold &= _mm512_cmplt_epi64_mask(um, _mm512_set1_epi64(0x7FE0000000000000ll));
  fold &= _mm512_test_epi64_mask(um, um);
  const __mmask8 toward_zero = _mm512_cmplt_epi64_mask(_mm512_xor_si512(u, l), _mm512_setzero_si512());
  const __m512i step = _mm512_mask_blend_epi64(toward_zero, _mm512_set1_epi64(1), _mm512_set1_epi64(-1));
  return _mm512_castsi512_pd(_mm512_mask_add_epi64(u, fold, u, step));
}
// sticky_fold(two_sum(z, −sh)), −sh the sign flipped as the scalar code's unary minus does.
inline __m512d folded_difference(__m512d z, __m512d sh) { return folded_sum(z, negated(sh)); }

// exp_one on 8 lanes, operation for operation, but for the last step: the scaling by 2^k in one vscalefpd
// (one rounding of p·2^k) instead of (p·2^k1)·2^k2, which is that same one rounding: p·2^k1 (|k1| <= 539) is
// exact, so only the second product rounds, and it rounds the exact p·2^k (subnormal results included).
inline __m512d exp_one8(__m512d v) {
  const __m512d c = _mm512_min_pd(_mm512_max_pd(v, _mm512_set1_pd(-746.0)), _mm512_set1_pd(710.0));
  const __m512d kf =
      _mm512_roundscale_pd(_mm512_mul_pd(c, _mm512_set1_pd(1.4426950408889634)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d nk = negated(kf);
  const __m512d r = _mm512_fmadd_pd(nk, _mm512_set1_pd(1.90821492927058770002e-10),
                                    _mm512_fmadd_pd(nk, _mm512_set1_pd(6.93147180369123816490e-01), c));
  __m512d p = _mm512_set1_pd(1.0 / 6227020800.0);
  for (const double k : {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                         1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0})
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(k));
  const __m512d e = _mm512_scalef_pd(p, kf);
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q), e, v);
}

// exp_one8 on the 16 lanes of a float vector, each result through `round8` (double → 8 floats).
template <class Round8>
inline __m512 exp16(__m512 a, Round8 round8) {
  const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
  const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  return _mm512_insertf32x8(_mm512_castps256_ps512(round8(exp_one8(lo))), round8(exp_one8(hi)), 1);
}

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
inline __m512 fp16_16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, kRne)); }


inline __m256 ro_float8(__m512d x) {  // RZ, then the last bit set where inexact: the odd neighbour
  const __m256 f = _mm512_cvt_roundpd_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_cvtps_pd(f), x, _CMP_NEQ_OQ);  // (false for NaN)
  const __m256i u = _mm256_castps_si256(f);
  return _mm256_castsi256_ps(_mm256_mask_or_epi32(u, inexact, u, _mm256_set1_epi32(1)));
}

// ro_float(sticky_fold(two_sum(a, b))) = the exact a + b rounded to odd at 24 bits (round-to-odd at 53 bits
// then at 24 is round-to-odd at 24), from hi + lo directly: with hi not a float, no float lies between hi
// and hi + lo (|lo| <= ulp(hi)/2 at 53 bits), so RZ(hi) is RZ(a + b) and the sum is inexact; with hi a float
// and lo != 0, RZ(a + b) is hi, or the float below it in magnitude where lo points toward zero.
inline __m256 ro_float_sum8(__m512d a, __m512d b) {
  const __m512d hi = _mm512_add_pd(a, b);
  const __m512d bb = _mm512_sub_pd(hi, a);
  const __m512d lo = _mm512_add_pd(_mm512_sub_pd(a, _mm512_sub_pd(hi, bb)), _mm512_sub_pd(b, bb));
  const __m256 f = _mm512_cvt_roundpd_ps(hi, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask8 exact_hi = _mm512_cmp_pd_mask(_mm512_cvtps_pd(f), hi, _CMP_EQ_OQ);
  const __mmask8 lo_nonzero = _mm512_cmp_pd_mask(lo, _mm512_setzero_pd(), _CMP_NEQ_OQ);  // (false for NaN)
  const __mmask8 lo_inward = _mm512_movepi64_mask(_mm512_castpd_si512(_mm512_xor_pd(hi, lo)));  // signs differ
  __m256i u = _mm256_castps_si256(f);
  u = _mm256_mask_sub_epi32(u, exact_hi & lo_nonzero & lo_inward, u, _mm256_set1_epi32(1));
  const __mmask8 inexact = static_cast<__mmask8>(~exact_hi | lo_nonzero) & _mm512_cmp_pd_mask(hi, hi, _CMP_ORD_Q);
  return _mm256_castsi256_ps(_mm256_mask_or_epi32(u, inexact, u, _mm256_set1_epi32(1)));
}

// 8 floats rounded to fp16 (RNE, IEEE overflow, subnormals) and back: the F16C conversion.
inline __m256 fp16_8(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
#endif

// The second half of a narrow rounding: n floats (already rounded to odd at 24 bits) to the stage.
inline void round_floats(const StageSpec& sp, float* x, std::size_t n) {
  round_span(std::span<const float>(x, n), std::span<float>(x, n), sp.format, sp.round);
}

}  // namespace pasa::detail::fused_lanes
