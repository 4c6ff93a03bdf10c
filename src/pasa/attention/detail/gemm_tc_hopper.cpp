// The tensor-core model's register strips (AVX-512): the fast path of the models measured on the H100
// (tensor_core_models.cpp: h100_fp16, h100_bf16, h100_e4m3, ...; any spec whose plan says `strips`). They
// compute exactly what the loop-per-block path of gemm_tensor_core.cpp computes (the same bits: the tests
// compare the two), with the operands packed once (TcPackedA, TcPackedB) for the fused attention path.
#include "pasa/attention/detail/gemm_tc_core.hpp"

#include "pasa/attention/detail/gemm_common.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pasa::detail {
namespace {

#if defined(__AVX512F__)
// The float-lane case in registers (for speed): an accumulator of P <= 24 bits with fp32's exponent range (fp32
// for fp16/bf16-style models, e8m13 for the FP8 ones) rounded toward zero, the accumulator one of the block's
// terms, a block's scaled products summed in int32 (block <= 2^(29 − F)). Per strip of 32 output columns,
// packed once per GEMM as (value, exponent) panels, and per pair of rows, the running accumulators, the
// block's largest exponents, their scales and int32 sums stay in registers over all of k: the same
// operations as the loop-per-block path (the same float products and scales, the same truncations, the same
// exact sum and one rounding toward zero: to float, then cut to P bits, nested truncations composing), so
// the same bits. Returns whether every operand was finite (else the caller applies ieee_where_not_finite),
// or declined (Window, below: the caller runs the loop-per-block path).
//
// Exponents (term_exp's values) travel in int8 lanes where the formats' exponents fit (Exp8: fp16, fp8; one
// vector covers the 32 columns of both rows, each B exponent stored twice, the two rows' A exponents
// interleaved), else in int16 lanes, one vector per row; added with saturation. A zero operand is −128
// (int8) or kZero16, an inf or NaN 127 or kHuge16: a sum with a zero lies at or below the clamp's low end
// F − 100 and below every finite sum (Exp8 needs emax <= 28 and emin >= −40 of both formats), so the
// clamped E of a column whose terms are finite is term_exp's; a column with an inf or NaN term is not
// finite in IEEE arithmetic either and ieee_where_not_finite overwrites it.
constexpr std::size_t kStrip = 32;  // columns per register strip: two AVX-512 vectors
constexpr std::int16_t kZero16 = -16000, kHuge16 = 16000;
// GCC 12 flags the unmasked intrinsics' undefined pass-through operands (_mm512_undefined_*) as uninitialised.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// term_exp of 16 operands as int32 lanes, zero at `zero` and inf or NaN at `huge`; returns whether one was an
// inf or NaN. load16: their float values (lanes past `count`: 0, padding that adds zero products), from floats
// or doubles (the formats' values are floats, so the conversion is exact).
inline bool exps16(__m512 d, int emin, int zero, int huge, __m512i& e) {
  const __m512i f = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(d), 23), _mm512_set1_epi32(0xff));
  e = _mm512_max_epi32(_mm512_sub_epi32(f, _mm512_set1_epi32(127)), _mm512_set1_epi32(emin));
  const __mmask16 special = _mm512_cmpeq_epi32_mask(f, _mm512_set1_epi32(0xff));
  e = _mm512_mask_mov_epi32(e, special, _mm512_set1_epi32(huge));
  e = _mm512_mask_mov_epi32(e, _mm512_cmpeq_epi32_mask(f, _mm512_setzero_si512()), _mm512_set1_epi32(zero));
  return special != 0;
}
inline __m512 load16(const float* x, std::size_t count) {
  if (count >= 16) return _mm512_loadu_ps(x);
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), x);
}
inline __m512 load16(const double* x, std::size_t count) {
  if (count >= 16)
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_maskz_cvtpd_ps(0xFF, _mm512_loadu_pd(x))),
                              _mm512_maskz_cvtpd_ps(0xFF, _mm512_loadu_pd(x + 8)), 1);
  const __mmask8 lo = count >= 8 ? 0xFF : static_cast<__mmask8>((1u << count) - 1);
  const __mmask8 hi = count >= 16 ? 0xFF : count <= 8 ? 0 : static_cast<__mmask8>((1u << (count - 8)) - 1);
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_maskz_cvtpd_ps(0xFF, _mm512_maskz_loadu_pd(lo, x))),
                            _mm512_maskz_cvtpd_ps(0xFF, _mm512_maskz_loadu_pd(hi, x + 8)), 1);
}
// The exponent fields of the nonzero finite operands seen (their least and largest), and whether one was a
// subnormal float: what the Window strips check before they run (see tc_rz_strips).
struct FieldRange {
  __m512i lo = _mm512_set1_epi32(255), hi = _mm512_setzero_si512();
  __mmask16 subnormal = 0;
  void add(__m512 d) {
    const __m512i bits = _mm512_castps_si512(d);
    const __m512i f = _mm512_srli_epi32(_mm512_slli_epi32(bits, 1), 24);
    const __mmask16 normal = _mm512_cmpneq_epi32_mask(f, _mm512_setzero_si512()) &
                             _mm512_cmpneq_epi32_mask(f, _mm512_set1_epi32(255));
    lo = _mm512_mask_min_epi32(lo, normal, lo, f);
    hi = _mm512_mask_max_epi32(hi, normal, hi, f);
    subnormal |= _mm512_cmpeq_epi32_mask(f, _mm512_setzero_si512()) &
                 _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x7fffffff));
  }
  // (not _mm512_reduce_min_epi32: GCC 12 warns inside it)
  static int reduce(__m512i v, bool least) {
    alignas(64) std::int32_t lanes[16];
    _mm512_store_si512(lanes, v);
    return least ? *std::min_element(lanes, lanes + 16) : *std::max_element(lanes, lanes + 16);
  }
  // (least 128 and largest −127 where none: every sum passes)
  TcFieldLimits limits() const { return {reduce(lo, true) - 127, reduce(hi, false) - 127, subnormal != 0}; }
};
// x with each 32-bit lane's low `bits` copied `bits` higher (an exponent stored twice)
inline __m512i twice(__m512i x, int bits) { return _mm512_or_si512(x, _mm512_sll_epi32(x, _mm_cvtsi32_si128(bits))); }

enum class Strips { finite, not_finite, declined };

// An empty statement that takes the four loop-carried vectors in registers and gives them back: without it
// GCC 12 computes each new value of an accumulator into another register and copies it back, one extra
// vector move per accumulator and step of the strips' loops.
inline void in_place(__m512i& a, __m512i& b, __m512i& c, __m512i& d) { asm("" : "+v"(a), "+v"(b), "+v"(c), "+v"(d)); }

// B packed for the strips (TcPackedB): per strip of 32 columns, k rows of 32 floats (columns past n: 0) and
// their exponents (Exp8: each twice, bytes 2c and 2c + 1, the two rows' lanes of column c; else int16).
template <bool Exp8, class TB>
void pack_b(std::size_t k, std::size_t n, const TB* B, std::size_t ldb, int eb_min, bool window, TcPackedB& pb) {
  const std::size_t strips = (n + kStrip - 1) / kStrip;
  pb.k = k;
  pb.n = n;
  pb.values.resize(strips * k * kStrip);
  pb.exps.resize(strips * k * 32);
  float* bp = pb.values.data();
  std::int16_t* ebp = pb.exps.data();
  const int zero = Exp8 ? -128 : kZero16, huge = Exp8 ? 127 : kHuge16;
  bool finite = true;
  FieldRange range;
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < strips * kStrip; j += 16) {
      const std::size_t at = ((j / kStrip) * k + t) * kStrip + j % kStrip;
      __m512i e;
      const __m512 v = load16(B + t * ldb + j, j < n ? n - j : 0);
      finite = !exps16(v, eb_min, zero, huge, e) && finite;
      if (window) range.add(v);
      _mm512_storeu_ps(bp + at, v);
      if (Exp8) e = twice(_mm512_and_si512(e, _mm512_set1_epi32(0xff)), 8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ebp + at), _mm512_cvtepi32_epi16(e));
    }
  pb.finite = finite;
  pb.limits = range.limits();
  pb.exp8 = Exp8;
}

// A by pairs of rows (2i and 2i + 1; a last odd row paired with itself): the rows' floats (row r at r·k)
// and per pair and t the exponents (Exp8: the byte pair (row 0, row 1), twice, in one int32; int16: each
// row's exponent twice in one int32, the pair's second row k after its first), so that one 32-bit broadcast
// fills a vector of exponent lanes.
template <bool Exp8, class TA>
void pack_a(std::size_t m, std::size_t k, const TA* A, std::size_t lda, int ea_min, bool window, TcPackedA& pa) {
  const std::size_t pairs = (m + 1) / 2;
  pa.m = m;
  pa.k = k;
  pa.values.resize(2 * pairs * k + 16);
  pa.exps.resize(2 * pairs * k + 16);
  float* ap = pa.values.data();
  std::int32_t* eap = pa.exps.data();
  const int zero = Exp8 ? -128 : kZero16, huge = Exp8 ? 127 : kHuge16;
  bool finite = true;
  FieldRange range;
  for (std::size_t i = 0; i < pairs; ++i) {
    const std::size_t r0 = 2 * i, r1 = std::min(2 * i + 1, m - 1);
    for (std::size_t t = 0; t < k; t += 16) {
      __m512i e0, e1;
      // (the rows' last chunk written up to the row's end only: the next row is packed already)
      const __m512 v0 = load16(A + r0 * lda + t, k - t), v1 = load16(A + r1 * lda + t, k - t);
      const __mmask16 tail = k - t >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (k - t)) - 1);
      const bool special0 = exps16(v0, ea_min, zero, huge, e0), special1 = exps16(v1, ea_min, zero, huge, e1);
      finite = finite && !special0 && !special1;
      if (window) {
        range.add(v0);
        range.add(v1);
      }
      _mm512_mask_storeu_ps(ap + r0 * k + t, tail, v0);
      _mm512_mask_storeu_ps(ap + (2 * i + 1) * k + t, tail, v1);
      if (Exp8) {
        const __m512i lo = _mm512_set1_epi32(0xff);
        const __m512i pair = _mm512_or_si512(_mm512_and_si512(e0, lo), _mm512_slli_epi32(_mm512_and_si512(e1, lo), 8));
        _mm512_storeu_si512(eap + 2 * i * k + t, twice(pair, 16));
      } else {
        const __m512i lo = _mm512_set1_epi32(0xffff);
        _mm512_mask_storeu_epi32(eap + 2 * i * k + t, tail, twice(_mm512_and_si512(e0, lo), 16));
        _mm512_mask_storeu_epi32(eap + 2 * i * k + k + t, tail, twice(_mm512_and_si512(e1, lo), 16));
      }
    }
  }
  pa.finite = finite;
  pa.limits = range.limits();
  pa.exp8 = Exp8;
}

template <bool Exp8, int P>
Strips tc_rz_strips(const TcPackedA& pa, const TcPackedB& pb, double* C, std::size_t ldc, int F, std::size_t block,
                    std::size_t promote, bool window, int window_least) {
  const std::size_t m = pa.m, n = pb.n, k = pb.k;
  const std::size_t strips = (n + kStrip - 1) / kStrip, pairs = (m + 1) / 2;
  const float* bp = pb.values.data();
  const std::int16_t* ebp = pb.exps.data();
  const float* ap = pa.values.data();
  const std::int32_t* eap = pa.exps.data();
  // Window (operands whose formats reach beyond float's normal range: bf16, tf32): the strips run where the
  // operands at hand keep every product a normal float that is a multiple of 2^-100 (exponent sums at least
  // window_least = (p_a − 1) + (p_b − 1) − 100; none a subnormal float) and below 2^62 (sums at most 60), and
  // k <= 2^30.
  // Then every term of every block (a product, or an accumulator: a sum of such products cut to grids of
  // 2^(E − F) >= 2^-100, rounded toward zero) is a multiple of 2^-100 and below 2^(62 + log2 k) << 2^(F + 100),
  // so the clamp of E to [F − 100, F + 100] below changes no cut (where it binds, the grid 2^-100 is one every
  // term lies on) and a nonzero accumulator is a normal float. Else the caller runs the loop-per-block path.
  const TcFieldLimits &range_a = pa.limits, &range_b = pb.limits;
  if (window && (k > std::size_t{1} << 30 || range_a.subnormal != 0 || range_b.subnormal != 0 ||
                 range_a.least() + range_b.least() < window_least || range_a.largest() + range_b.largest() > 60))
    return Strips::declined;
  // The block's E = term_exp's largest exponent, clamped to [F − 100, F + 100] (as the loop-per-block path
  // does, so that 2^(F − E) is a normal float), held biased by 127 (an exponent field): the products' part
  // clamped below and biased in the int16 lanes, the accumulator's exponent field max'ed in per vector. For
  // the accumulator the field stands for term_exp up to the clamp: a zero or subnormal accumulator gives 0 or
  // 1 (−127, −126) where term_exp gives kZeroExp or −126, an inf or NaN 255 (128) for kHugeExp: with
  // 0 <= F <= 25 all of these lie beyond [F − 100, F + 100], so the clamped E is the same.
  const __m512i lo16 = _mm512_set1_epi16(static_cast<std::int16_t>(F - 100)), bias16 = _mm512_set1_epi16(127);
  // (the exponent fields compared and subtracted where they lie in a float, bits 23..30: the accumulator's
  // is its bits masked, one operation where shifting it down takes two)
  const __m512i hi_b = _mm512_set1_epi32((F + 100 + 127) << 23), field_bits = _mm512_set1_epi32(0x7f800000);
  auto biased = [&](__m512i P16) { return _mm512_add_epi16(_mm512_max_epi16(P16, lo16), bias16); };
  auto scale_of = [&](__m512i P16, __m512 c) {  // 2^(F − E): the exponent field 254 + F − (E + 127)
    const __m512i Pb = _mm512_slli_epi32(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(P16)), 23);
    const __m512i field = _mm512_and_si512(_mm512_castps_si512(c), field_bits);
    const __m512i Eb = _mm512_min_epi32(_mm512_max_epi32(field, Pb), hi_b);
    return _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_set1_epi32((254 + F) << 23), Eb));
  };
  // A normal float rounded toward zero to P bits: its low 24 − P significand bits cleared (truncations on
  // nested grids compose: one rounding toward zero of the exact value).
  const __m512i keep = _mm512_set1_epi32(static_cast<int>(~((1u << (24 - P)) - 1)));
  auto cut = [&](__m512 x) {
    return P == 24 ? x : _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), keep));
  };
  // where the int32 sum of the two overflows: in double (exact: both below 2^32)
  auto finish_wide = [&](__m512i isum, __m512i ci, __m512 sc) {
    const __m512i E = _mm512_sub_epi32(_mm512_set1_epi32(127 + F), _mm512_srli_epi32(_mm512_castps_si512(sc), 23));
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
    return cut(_mm512_insertf32x8(_mm512_castps256_ps512(f_lo), f_hi, 1));
  };
  // The same in int32 and float: the sum (below 2^31) cut to 24 bits toward zero, scaled by 2^(E − F) (exact:
  // E >= F − 100, so the result is a normal float, or past the largest it is fp32's largest), then cut to P
  // bits (the largest: the format's). c · 2^(F − E) is exact in float (a power of two within range), its
  // truncation the cut accumulator. with_acc adds it; finish scales back where no lane overflowed (the sign
  // bits of overflowed: one test for a block's four vectors, since an overflow is rare: it needs terms near
  // 2^(F + 2) each).
  struct Sum {
    __m512i isum, ci, sum;
  };
  auto with_acc = [&](__m512i isum, __m512 c, __m512 sc) {
    const __m512i ci = _mm512_cvttps_epi32(_mm512_mul_ps(c, sc));
    return Sum{isum, ci, _mm512_add_epi32(isum, ci)};
  };
  auto overflowed = [](const Sum& s) {
    return _mm512_and_si512(_mm512_xor_si512(s.isum, s.sum), _mm512_xor_si512(s.ci, s.sum));
  };
  auto finish = [&](const Sum& s, __m512 sc) {
    // 2^(E − F): the exponent field 254 − that of sc
    const __m512 pw = _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_set1_epi32(254 << 23), _mm512_castps_si512(sc)));
    return cut(_mm512_mul_round_ps(_mm512_cvt_roundepi32_ps(s.sum, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), pw,
                                   _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  };
  auto finish_checked = [&](const Sum& s, __m512 sc) {
    const __mmask16 overflow = _mm512_movepi32_mask(overflowed(s));
    const auto& [isum, ci, sum] = s;
    if (overflow != 0) return finish_wide(isum, ci, sc);
    return finish(s, sc);
  };
  for (std::size_t s = 0; s < strips; ++s) {
    const float* bs = bp + s * k * kStrip;
    const std::int16_t* es = ebp + s * k * 32;
    const std::size_t width = std::min(kStrip, n - s * kStrip);
    for (std::size_t i = 0; i < pairs; ++i) {
      const float* a0 = ap + 2 * i * k;
      const float* a1 = a0 + k;
      const std::int32_t* ea = eap + 2 * i * k;
      __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
      __m512 o00 = c00, o01 = c00, o10 = c00, o11 = c00;
      std::size_t since_promotion = 0;
      for (std::size_t t0 = 0; t0 < k; t0 += block) {
        const std::size_t t1 = std::min(k, t0 + block);
        // the block's largest exponent sums, per row as 32 int16 lanes (columns 0..31)
        __m512i R0, R1;
        if constexpr (Exp8) {
          // four running maxima (independent chains), merged at the end
          auto step = [&](__m512i M, std::size_t t) {
            return _mm512_max_epi8(M, _mm512_adds_epi8(_mm512_set1_epi32(ea[t]), _mm512_loadu_si512(es + t * 32)));
          };
          __m512i M0 = _mm512_set1_epi8(-128), M1 = M0, M2 = M0, M3 = M0;
          std::size_t t = t0;
          for (; t + 4 <= t1; t += 4) {
            M0 = step(M0, t);
            M1 = step(M1, t + 1);
            M2 = step(M2, t + 2);
            M3 = step(M3, t + 3);
            in_place(M0, M1, M2, M3);
          }
          for (; t < t1; ++t) M0 = step(M0, t);
          const __m512i E8 = _mm512_max_epi8(_mm512_max_epi8(M0, M1), _mm512_max_epi8(M2, M3));
          R0 = _mm512_srai_epi16(_mm512_slli_epi16(E8, 8), 8);  // the even bytes: row 0
          R1 = _mm512_srai_epi16(E8, 8);                        // the odd bytes: row 1
        } else {
          auto step = [&](__m512i M, __m512i eb, std::size_t t) {
            return _mm512_max_epi16(M, _mm512_adds_epi16(_mm512_set1_epi32(ea[t]), eb));
          };
          __m512i M0 = _mm512_set1_epi16(kZero16), M1 = M0, M2 = M0, M3 = M0;
          std::size_t t = t0;
          for (; t + 2 <= t1; t += 2) {
            const __m512i eb = _mm512_loadu_si512(es + t * 32), eb1 = _mm512_loadu_si512(es + (t + 1) * 32);
            M0 = step(M0, eb, t);
            M1 = step(M1, eb, k + t);
            M2 = step(M2, eb1, t + 1);
            M3 = step(M3, eb1, k + t + 1);
            in_place(M0, M1, M2, M3);
          }
          for (; t < t1; ++t) {
            const __m512i eb = _mm512_loadu_si512(es + t * 32);
            M0 = step(M0, eb, t);
            M1 = step(M1, eb, k + t);
          }
          R0 = _mm512_max_epi16(M0, M2);
          R1 = _mm512_max_epi16(M1, M3);
        }
        R0 = biased(R0);
        R1 = biased(R1);
        const __m512 sc00 = scale_of(R0, c00), sc01 = scale_of(_mm512_shuffle_i64x2(R0, R0, 0xEE), c01);
        const __m512 sc10 = scale_of(R1, c10), sc11 = scale_of(_mm512_shuffle_i64x2(R1, R1, 0xEE), c11);
        __m512i i00 = _mm512_setzero_si512(), i01 = i00, i10 = i00, i11 = i00;
        for (std::size_t t = t0; t < t1; ++t) {
          const __m512 b0 = _mm512_loadu_ps(bs + t * kStrip), b1 = _mm512_loadu_ps(bs + t * kStrip + 16);
          const __m512 x0 = _mm512_set1_ps(a0[t]), x1 = _mm512_set1_ps(a1[t]);
          // the exact product, scaled by a power of two, truncated toward zero
          i00 = _mm512_add_epi32(i00, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(x0, b0), sc00)));
          i01 = _mm512_add_epi32(i01, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(x0, b1), sc01)));
          i10 = _mm512_add_epi32(i10, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(x1, b0), sc10)));
          i11 = _mm512_add_epi32(i11, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(x1, b1), sc11)));
          in_place(i00, i01, i10, i11);
        }
        const Sum s00 = with_acc(i00, c00, sc00), s01 = with_acc(i01, c01, sc01), s10 = with_acc(i10, c10, sc10),
                  s11 = with_acc(i11, c11, sc11);
        const __m512i any = _mm512_or_si512(_mm512_or_si512(overflowed(s00), overflowed(s01)),
                                            _mm512_or_si512(overflowed(s10), overflowed(s11)));
        if (_mm512_movepi32_mask(any) == 0) {
          c00 = finish(s00, sc00), c01 = finish(s01, sc01), c10 = finish(s10, sc10), c11 = finish(s11, sc11);
        } else {
          c00 = finish_checked(s00, sc00), c01 = finish_checked(s01, sc01);
          c10 = finish_checked(s10, sc10), c11 = finish_checked(s11, sc11);
        }
        since_promotion += t1 - t0;
        const bool promote_now = promote > 0 && (since_promotion == promote || t1 == k);
        if (promote_now) {  // the CUDA cores' fp32 add (RNE)
          o00 = _mm512_add_ps(o00, c00);
          o01 = _mm512_add_ps(o01, c01);
          o10 = _mm512_add_ps(o10, c10);
          o11 = _mm512_add_ps(o11, c11);
          c00 = c01 = c10 = c11 = _mm512_setzero_ps();
          since_promotion = 0;
        }
      }
      if (promote > 0) {
        c00 = o00, c01 = o01, c10 = o10, c11 = o11;
      }
      alignas(64) float res[2][kStrip];
      _mm512_store_ps(res[0], c00);
      _mm512_store_ps(res[0] + 16, c01);
      _mm512_store_ps(res[1], c10);
      _mm512_store_ps(res[1] + 16, c11);
      for (std::size_t h = 0; h < 2 && 2 * i + h < m; ++h) {
        double* out = C + (2 * i + h) * ldc + s * kStrip;
        for (std::size_t w = 0; w < width; ++w) out[w] = res[h][w];
      }
    }
  }
  return pa.finite && pb.finite ? Strips::finite : Strips::not_finite;
}
#pragma GCC diagnostic pop
#endif

#if defined(__AVX512F__)
// int8 exponent lanes (see tc_rz_strips): the formats' exponents, and their sums, fit
bool exp8_of(const Plan& p, const GemmSpec& g) {
  const Format &fa = g.a_format, &fb = g.b_format;
  return !p.window && fa.emin() >= -40 && fb.emin() >= -40 && fa.emax <= 28 && fb.emax <= 28;
}

template <class TA>
void pack_a_for(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t k, const TA* A, std::size_t lda,
                TcPackedA& pa) {
  if (exp8_of(p, g)) pack_a<true>(m, k, A, lda, g.a_format.emin(), p.window, pa);
  else pack_a<false>(m, k, A, lda, g.a_format.emin(), p.window, pa);
}
template <class TB>
void pack_b_for(const Plan& p, const GemmSpec& g, std::size_t k, std::size_t n, const TB* B, std::size_t ldb,
                TcPackedB& pb) {
  if (exp8_of(p, g)) pack_b<true>(k, n, B, ldb, g.b_format.emin(), p.window, pb);
  else pack_b<false>(k, n, B, ldb, g.b_format.emin(), p.window, pb);
}

// The strips on packed operands (p.strips; A and B themselves at A, lda and B, ldb): false where they decline
// (nothing written); else C holds the model's values, IEEE's where a term is not finite.
template <class TA, class TB>
bool strips_packed(const Plan& p, const GemmSpec& g, const TcPackedA& pa, const TA* A, std::size_t lda,
                   const TcPackedB& pb, const TB* B, std::size_t ldb, double* C, std::size_t ldc) {
  const bool exp8 = exp8_of(p, g);
  if (exp8 != pa.exp8 || exp8 != pb.exp8 || pa.k != pb.k)
    throw std::logic_error("dgemm_tensor_core: operands packed under another spec or of other sizes");
  auto go = [&](auto exp8_tag, auto p_tag) {
    return tc_rz_strips<decltype(exp8_tag)::value, decltype(p_tag)::value>(
        pa, pb, C, ldc, p.F, p.block, p.promote, p.window, g.a_format.p + g.b_format.p - 102);
  };
  using T8 = std::true_type;
  using T16 = std::false_type;
  using P24 = std::integral_constant<int, 24>;
  using P14 = std::integral_constant<int, 14>;
  Strips done;
  if (p.tcf.p == 24) done = exp8 ? go(T8{}, P24{}) : go(T16{}, P24{});
  else done = exp8 ? go(T8{}, P14{}) : go(T16{}, P14{});  // the FP8 models' e8m13 (plan_of: 24 or 14)
  if (done == Strips::declined) return false;
  if (done == Strips::not_finite) ieee_where_not_finite(pa.m, pb.n, pa.k, A, lda, B, ldb, C, ldc);
  return true;
}
#endif

}  // namespace

// The strips where the plan allows them (AVX-512 builds); false: the caller runs the loop-per-block path.
template <class TB>
bool run_strips_t([[maybe_unused]] const Plan& p, [[maybe_unused]] const GemmSpec& g, [[maybe_unused]] std::size_t m,
                  [[maybe_unused]] std::size_t n, [[maybe_unused]] std::size_t k, [[maybe_unused]] const double* A,
                  [[maybe_unused]] std::size_t lda, [[maybe_unused]] const TB* B, [[maybe_unused]] std::size_t ldb,
                  [[maybe_unused]] double* C, [[maybe_unused]] std::size_t ldc) {
#if defined(__AVX512F__)
  if (!p.strips) return false;
  thread_local TcPackedA pa;
  thread_local TcPackedB pb;
  pack_a_for(p, g, m, k, A, lda, pa);
  pack_b_for(p, g, k, n, B, ldb, pb);
  return strips_packed(p, g, pa, A, lda, pb, B, ldb, C, ldc);
#else
  return false;
#endif
}
bool tc_run_strips(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                   std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  return run_strips_t(p, g, m, n, k, A, lda, B, ldb, C, ldc);
}
bool tc_run_strips(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                   std::size_t lda, const float* B, std::size_t ldb, double* C, std::size_t ldc) {
  return run_strips_t(p, g, m, n, k, A, lda, B, ldb, C, ldc);
}

bool tc_strips([[maybe_unused]] const GemmSpec& g) {
#if defined(__AVX512F__)
  return plan_of(g).strips;
#else
  return false;
#endif
}

namespace {
// The plan of g, which must run on the strips (the packed entry points)
[[maybe_unused]] Plan strips_plan(const GemmSpec& g) {
  const Plan p = plan_of(g);
#if defined(__AVX512F__)
  if (p.strips) return p;
#endif
  throw std::logic_error("tensor-core GEMM: packed operands for a spec that does not run on the strips (tc_strips)");
}

template <class TA>
void pack_a_checked(const GemmSpec& g, std::size_t m, std::size_t k, const TA* A, std::size_t lda, TcPackedA& pa) {
  [[maybe_unused]] const Plan p = strips_plan(g);
#if defined(__AVX512F__)
  pack_a_for(p, g, m, k, A, lda, pa);
#else
  (void)m, (void)k, (void)A, (void)lda, (void)pa;
#endif
}

template <class TA>
bool gemm_packed(const GemmSpec& g, const TcPackedA& pa, const TA* A, std::size_t lda, const TcPackedB& pb,
                 const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  [[maybe_unused]] const Plan p = strips_plan(g);
#if defined(__AVX512F__)
  return strips_packed(p, g, pa, A, lda, pb, B, ldb, C, ldc);
#else
  (void)pa, (void)A, (void)lda, (void)pb, (void)B, (void)ldb, (void)C, (void)ldc;
  return false;
#endif
}
}  // namespace

void tc_pack_a(const GemmSpec& g, std::size_t m, std::size_t k, const double* A, std::size_t lda, TcPackedA& pa) {
  pack_a_checked(g, m, k, A, lda, pa);
}
void tc_pack_a(const GemmSpec& g, std::size_t m, std::size_t k, const float* A, std::size_t lda, TcPackedA& pa) {
  pack_a_checked(g, m, k, A, lda, pa);
}
void tc_pack_b(const GemmSpec& g, std::size_t k, std::size_t n, const double* B, std::size_t ldb, TcPackedB& pb) {
  [[maybe_unused]] const Plan p = strips_plan(g);
#if defined(__AVX512F__)
  pack_b_for(p, g, k, n, B, ldb, pb);
#else
  (void)k, (void)n, (void)B, (void)ldb, (void)pb;
#endif
}
bool dgemm_tensor_core(const GemmSpec& g, const TcPackedA& pa, const double* A, std::size_t lda, const TcPackedB& pb,
                       const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  return gemm_packed(g, pa, A, lda, pb, B, ldb, C, ldc);
}
bool dgemm_tensor_core(const GemmSpec& g, const TcPackedA& pa, const float* A, std::size_t lda, const TcPackedB& pb,
                       const double* B, std::size_t ldb, double* C, std::size_t ldc) {
  return gemm_packed(g, pa, A, lda, pb, B, ldb, C, ldc);
}

}  // namespace pasa::detail
