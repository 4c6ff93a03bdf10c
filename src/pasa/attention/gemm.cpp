#include "pasa/attention/gemm.hpp"

#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/round_narrow_register.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pasa {
namespace {

const Format& fp32() {
  static const Format f = format_by_name("fp32");
  return f;
}
const Format& fp64() {
  static const Format f = format_by_name("fp64");
  return f;
}

double round_sum_dd(DD x, const Format& f, const RoundOptions& o) {
  if (!std::isfinite(x.hi)) return round(x.hi, f, o);
  return round_sum(x.hi, x.lo, f, o);
}

bool plain_rne(const RoundOptions& o) {
  return o.mode == RoundMode::nearest_even && o.overflow == Overflow::ieee && !o.flush_input && !o.flush_output;
}
// The stage rounds exactly as the native type's arithmetic does.
bool native(const StageSpec& s, const Format& type) { return s.format == type && plain_rne(s.round); }
// Every value of f is a float (including subnormals).
bool float_exact(const Format& f) { return f.p <= 24 && f.emax <= 127 && f.emin() - (f.p - 1) >= -149; }

#if defined(__AVX512F__)
// Register tile of MR rows × 32 columns (2·MR accumulators) over a packed panel of B (k × 32, zero-padded
// past `width` columns): per step t, two loads of B, MR broadcasts of A, 2·MR FMAs. Each C element receives
// its k products in order 0..k−1 from +0, one fma each: the same bits as the scalar loop. A(r, t) is
// A[r·lda + t], or A[t·lda + r] when AT (A given transposed: the fused engine's probability tiles). R16: the
// results rounded to fp16 (RNE) in the registers before the store, by the F16C conversion.
template <int MR, bool AT, bool R16>
void sgemm_fma_tile(std::size_t k, const float* A, std::size_t lda, const float* panel, float* C, std::size_t ldc,
                    std::size_t width) {
  __m512 c[MR][2];
  for (auto& row : c) row[0] = row[1] = _mm512_setzero_ps();
  for (std::size_t t = 0; t < k; ++t) {
    const __m512 b0 = _mm512_loadu_ps(panel + 32 * t), b1 = _mm512_loadu_ps(panel + 32 * t + 16);
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(AT ? A[t * lda + r] : A[r * lda + t]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
    }
  }
  const __mmask16 m0 = width >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << width) - 1);
  const __mmask16 m1 = width >= 32 ? 0xFFFF : width <= 16 ? 0 : static_cast<__mmask16>((1u << (width - 16)) - 1);
  for (int r = 0; r < MR; ++r) {
    if constexpr (R16)
      for (auto& x : c[r])  // (zero-masked forms: GCC 12 warns about the unmasked ones' pass-through operand)
        x = _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtps_ph(0xFFFF, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm512_mask_storeu_ps(C + r * ldc, m0, c[r][0]);
    _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c[r][1]);
  }
}

// The m rows of A against one packed panel (`width` columns of C from C): tiles of 8 rows (16 accumulators:
// enough independent FMAs to cover their latency), the rest of the rows one at a time.
template <bool AT, bool R16 = false>
void sgemm_fma_panel(std::size_t m, std::size_t k, const float* A, std::size_t lda, const float* panel, float* C,
                     std::size_t ldc, std::size_t width) {
  std::size_t i = 0;
  for (; i + 8 <= m; i += 8)
    sgemm_fma_tile<8, AT, R16>(k, AT ? A + i : A + i * lda, lda, panel, C + i * ldc, ldc, width);
  for (; i < m; ++i) sgemm_fma_tile<1, AT, R16>(k, AT ? A + i : A + i * lda, lda, panel, C + i * ldc, ldc, width);
}
#endif

// Ordered fp32 accumulation: c ← fma(a, b, c) is one rounding of c + a·b, the model exactly.
void sgemm_fma(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda, const float* B,
               std::size_t ldb, float* C, std::size_t ldc) {
#if defined(__AVX512F__)
  // Panels of 32 columns of B packed contiguously (k × 32 floats: 16 KiB at k = 128, held in L1 while every
  // row of A passes over it; B's own rows, a power-of-two stride apart, would fall into few cache sets).
  thread_local std::vector<float> panel_buffer;
  panel_buffer.resize(k * 32);
  float* panel = panel_buffer.data();  // (a plain pointer: every access to a thread_local goes through a TLS lookup)
  for (std::size_t j = 0; j < n; j += 32) {
    const std::size_t w = std::min<std::size_t>(32, n - j);
    sgemm_pack_panels(k, w, B + j, ldb, panel);
    sgemm_fma_panel<false>(m, k, A, lda, panel, C + j, ldc, w);
  }
#else
  for (std::size_t r = 0; r < m; ++r) {
    float* c = C + r * ldc;
    std::fill(c, c + n, 0.0f);
    for (std::size_t t = 0; t < k; ++t) {
      const float a = A[r * lda + t];
      const float* b = B + t * ldb;
      for (std::size_t j = 0; j < n; ++j) c[j] = std::fma(a, b[j], c[j]);
    }
  }
#endif
}

// Every operation rounded in fp32: a float multiply, then a float add (no contraction: ISO C++ mode).
void sgemm_every_op(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda, const float* B,
                    std::size_t ldb, float* C, std::size_t ldc) {
  for (std::size_t r = 0; r < m; ++r) {
    float* c = C + r * ldc;
    std::fill(c, c + n, 0.0f);
    for (std::size_t t = 0; t < k; ++t) {
      const float a = A[r * lda + t];
      const float* b = B + t * ldb;
      for (std::size_t j = 0; j < n; ++j) {
        const float p = a * b[j];
        c[j] = c[j] + p;
      }
    }
  }
}

#if defined(__AVX512F__)
// Round 16 floats to fp16 (RNE, IEEE overflow, gradual underflow): the F16C conversion, bit-identical to
// round_span's fp16 kernel (checked over every float by the rounding layer's tests).
inline __m512 to_fp16(__m512 x) {
  // (the zero-masked forms: GCC 12 warns about the unmasked ones' undefined pass-through operand)
  return _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtps_ph(0xFFFF, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#endif

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// Every value of f is an fp16 (bf16) value (so a product of two is a product of two fp16 (bf16) values).
bool within_fp16(const Format& f) { return f.p <= 11 && f.emax <= 15 && f.emin() - (f.p - 1) >= -24; }
bool within_bf16(const Format& f) { return f.p <= 8 && f.emax <= 127 && f.emin() - (f.p - 1) >= -133; }

// The two roundings of an every-op step in float registers (numeric/round_narrow_register.hpp) and the power
// of two the product's constant scales A by.
struct Fp16Steps {
  static constexpr float scale = 8192.0f;
  static __m512 product(__m512 a, __m512 as, __m512 b) { return fp16_register::product(a, as, b); }
  static __m512 sum(__m512 x) { return fp16_register::sum(x); }
};
struct Bf16Steps {
  static constexpr float scale = 65536.0f;
  static __m512 product(__m512 a, __m512 as, __m512 b) { return bf16_register::product(a, as, b); }
  static __m512 sum(__m512 x) { return bf16_register::sum(x); }
};

// |x| per column of A (over m rows) and per row of B (over n columns), as float bit patterns: the integer
// maximum of |x|'s bits is the largest magnitude, and NaN (above every inf) wins, so a NaN or inf anywhere
// reaches the bound below. The pass over A also writes as = scale·A (row-major, stride k) for the kernel.
void column_max_bits(std::size_t m, std::size_t k, const float* A, std::size_t lda, std::uint32_t* __restrict out,
                     float* __restrict as, float scale) {
  std::fill(out, out + k, 0u);
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);  // (zero-masked max: GCC 12 warns about the unmasked form)
  for (std::size_t r = 0; r < m; ++r) {
    const float* a = A + r * lda;
    std::size_t t = 0;
    for (; t + 16 <= k; t += 16) {
      const __m512 v = _mm512_loadu_ps(a + t);
      const __m512i bits = _mm512_and_si512(_mm512_castps_si512(v), magnitude);
      _mm512_storeu_si512(out + t, _mm512_maskz_max_epu32(0xFFFF, _mm512_loadu_si512(out + t), bits));
      _mm512_storeu_ps(as + r * k + t, _mm512_mul_ps(v, _mm512_set1_ps(scale)));
    }
    for (; t < k; ++t) {
      out[t] = std::max(out[t], std::bit_cast<std::uint32_t>(a[t]) & 0x7FFFFFFFu);
      as[r * k + t] = a[t] * scale;
    }
  }
}
std::uint32_t row_max_bits(std::size_t n, const float* b) {
  __m512i mx = _mm512_setzero_si512();
  std::size_t j = 0;
  for (; j + 16 <= n; j += 16)
    mx = _mm512_maskz_max_epu32(0xFFFF, mx, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(b + j)), _mm512_set1_epi32(0x7FFFFFFF)));
  std::uint32_t lanes[16], m = 0;  // (not _mm512_reduce_max_epu32: GCC 12 warns inside it)
  _mm512_storeu_si512(lanes, mx);
  for (std::uint32_t l : lanes) m = std::max(m, l);
  for (; j < n; ++j) m = std::max(m, std::bit_cast<std::uint32_t>(b[j]) & 0x7FFFFFFFu);
  return m;
}
float rn16(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

// Whether no step of the every-op fp16 accumulation can overflow (or meet NaN/inf): with α_t = max_r |A[r][t]|
// and β_t = max_j |B[t][j]|, D_t = RN16(D_{t−1} + RN16(α_t·β_t)) from D_0 = 0 bounds every |c_t| and every
// rounded product, since RN16 (and RN32) are monotone and odd: |c_t| = RN16(|c_{t−1} + p_t|) <= RN16(|c_{t−1}|
// + |p_t|) <= D_t by induction. D_k <= 65504 thus keeps every step's exact result below the overflow
// threshold 65520 (and all inputs finite: NaN or inf makes D NaN or inf), which fp16_register needs.
bool every_op_fp16_in_range(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
                            const float* B, std::size_t ldb, std::uint32_t* colmax, float* a13) {
  column_max_bits(m, k, A, lda, colmax, a13, Fp16Steps::scale);
  float D = 0.0f;
  for (std::size_t t = 0; t < k; ++t) {
    const float p = std::bit_cast<float>(colmax[t]) * std::bit_cast<float>(row_max_bits(n, B + t * ldb));  // exact
    D = rn16(D + rn16(p));
  }
  return D <= 65504.0f;
}

// The same for bf16 accumulators, where bf16_register needs every operand, product and sum at most 2^100 (far
// below bf16's overflow, so a loose bound does): RNbf16(y) <= y(1 + 2^-8) + 2^-134 for y >= 0 (half an ulp,
// or half the subnormal grid 2^-133), so |c_t| <= D_t with D_t = (D_{t−1} + α_t·β_t·f + 2^-133)·f + 2^-133 and
// f = 1 + 2^-7 (which also covers the rounding of this recurrence in double). NaN and inf fail the tests.
bool every_op_bf16_in_range(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
                            const float* B, std::size_t ldb, std::uint32_t* colmax, float* a16) {
  column_max_bits(m, k, A, lda, colmax, a16, Bf16Steps::scale);
  constexpr double f = 1.0 + 0x1p-7, tiny = 0x1p-133, limit = 0x1p100;
  double D = 0.0;
  for (std::size_t t = 0; t < k; ++t) {
    const double alpha = std::bit_cast<float>(colmax[t]), beta = std::bit_cast<float>(row_max_bits(n, B + t * ldb));
    if (!(alpha <= limit && beta <= limit)) return false;
    D = (D + alpha * beta * f + tiny) * f + tiny;
  }
  return D <= limit;
}

// MR rows × 16·Q columns of C in registers over k in order: per step c ← RN(c + RN(a·b)) (Steps: 7 float
// ops, 4 on the FMA pipes and 3 on the ADD pipes). a: MR rows of A (stride lda); a13: the same rows times
// Steps::scale (stride k); panel: k × 64 floats of B (zero past `width` columns). Column j of C receives its
// products in order 0..k−1 from +0.
template <class Steps, int MR, int Q>
void every_op_register_tile(std::size_t k, const float* a, std::size_t lda, const float* a13, const float* panel, float* C,
                        std::size_t ldc, std::size_t width) {
  __m512 c[MR][Q];
  for (auto& row : c)
    for (auto& x : row) x = _mm512_setzero_ps();
  for (std::size_t t = 0; t < k; ++t) {
    __m512 b[Q];
    for (int q = 0; q < Q; ++q) b[q] = _mm512_loadu_ps(panel + 64 * t + 16 * q);
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + t]), a13v = _mm512_set1_ps(a13[r * k + t]);
      __m512 p[Q];  // the row's products first: Q independent chains ahead of the sums that wait on them
      for (int q = 0; q < Q; ++q) p[q] = Steps::product(av, a13v, b[q]);
      for (int q = 0; q < Q; ++q) c[r][q] = Steps::sum(_mm512_add_ps(c[r][q], p[q]));
    }
  }
  for (int q = 0; q < Q; ++q) {
    const std::size_t lo = 16 * static_cast<std::size_t>(q), w = width > lo ? std::min<std::size_t>(16, width - lo) : 0;
    const __mmask16 mask = w >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << w) - 1);
    for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(C + r * ldc + lo, mask, c[r][q]);
  }
}

template <class Steps, int MR>
void every_op_register_rows(std::size_t k, const float* a, std::size_t lda, const float* a13, const float* panel, float* C,
                        std::size_t ldc, std::size_t width) {
  switch ((width + 15) / 16) {
    case 1: every_op_register_tile<Steps, MR, 1>(k, a, lda, a13, panel, C, ldc, width); break;
    case 2: every_op_register_tile<Steps, MR, 2>(k, a, lda, a13, panel, C, ldc, width); break;
    case 3: every_op_register_tile<Steps, MR, 3>(k, a, lda, a13, panel, C, ldc, width); break;
    default: every_op_register_tile<Steps, MR, 4>(k, a, lda, a13, panel, C, ldc, width); break;
  }
}

// The every-op fp16 (bf16) GEMM in float registers, for operands whose values are fp16 (bf16) values and
// sums that every_op_fp16_in_range (every_op_bf16_in_range) has shown stay in range. Panels of 64 columns of B (k × 64, 32 KiB at
// k = 128: in L1 while every row tile passes over it), tiles of 4 rows (16 accumulators: enough
// independent chains to fill the 2 FMA and 2 ADD pipes), the remaining 1–3 rows as one narrower tile.
// a13: A times Steps::scale (exact: in range), row by row (a plain vectorised copy, not a transposition).
template <class Steps>
void sgemm_every_op_register(std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
                         const float* a13, const float* B, std::size_t ldb, float* C, std::size_t ldc) {
  thread_local std::vector<float> panel_buffer;
  panel_buffer.resize(64 * k);
  float* panel = panel_buffer.data();
  for (std::size_t j = 0; j < n; j += 64) {
    const std::size_t w = std::min<std::size_t>(64, n - j);
    for (std::size_t t = 0; t < k; ++t) {
      std::copy(B + t * ldb + j, B + t * ldb + j + w, panel + 64 * t);
      std::fill(panel + 64 * t + w, panel + 64 * t + 64, 0.0f);
    }
    for (std::size_t i0 = 0; i0 < m; i0 += 4) {
      const float *a = A + i0 * lda, *a1 = a13 + i0 * k;
      float* c = C + i0 * ldc + j;
      switch (std::min<std::size_t>(4, m - i0)) {
        case 1: every_op_register_rows<Steps, 1>(k, a, lda, a1, panel, c, ldc, w); break;
        case 2: every_op_register_rows<Steps, 2>(k, a, lda, a1, panel, c, ldc, w); break;
        case 3: every_op_register_rows<Steps, 3>(k, a, lda, a1, panel, c, ldc, w); break;
        default: every_op_register_rows<Steps, 4>(k, a, lda, a1, panel, c, ldc, w); break;
      }
    }
  }
}
#endif

// Every operation rounded to a narrow accumulator format held in floats (exact, see the header).
void sgemm_every_op_narrow(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const float* A,
                           std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc) {
  const StageSpec& acc = g.acc;
  thread_local std::vector<float> tmp_buffer;
  tmp_buffer.resize(n);
  float* tmp = tmp_buffer.data();  // plain pointers in loops: thread_local accesses go through TLS lookups
  std::size_t r0 = 0;
#if defined(__AVX512F__)
  static const Format fp16 = format_by_name("fp16"), bf16 = format_by_name("bf16");
#if defined(__AVX512DQ__)
  // In float registers where the operands are values of the accumulator's format and the bound holds.
  if (acc.format == fp16 || acc.format == bf16) {
    thread_local std::vector<float> as_buffer;
    thread_local std::vector<std::uint32_t> colmax_buffer;
    as_buffer.resize(m * k);
    colmax_buffer.resize(k);
    float* as = as_buffer.data();
    std::uint32_t* colmax = colmax_buffer.data();
    if (acc.format == fp16 && within_fp16(g.a_format) && within_fp16(g.b_format) &&
        every_op_fp16_in_range(m, n, k, A, lda, B, ldb, colmax, as)) {
      sgemm_every_op_register<Fp16Steps>(m, n, k, A, lda, as, B, ldb, C, ldc);
      return;
    }
    if (acc.format == bf16 && within_bf16(g.a_format) && within_bf16(g.b_format) &&
        every_op_bf16_in_range(m, n, k, A, lda, B, ldb, colmax, as)) {
      sgemm_every_op_register<Bf16Steps>(m, n, k, A, lda, as, B, ldb, C, ldc);
      return;
    }
  }
#endif
  if (acc.format == fp16) {
    // Otherwise (other operands, or a sum that may overflow or meet NaN/inf): each rounding an F16C round
    // trip, 4 rows × 64 columns in registers.
    for (; r0 + 4 <= m; r0 += 4) {
      std::size_t j = 0;
      for (; j + 64 <= n; j += 64) {
        __m512 c[4][4];
        for (auto& row : c)
          for (auto& x : row) x = _mm512_setzero_ps();
        for (std::size_t t = 0; t < k; ++t) {
          const float* b = B + t * ldb + j;
          const __m512 bv[4] = {_mm512_loadu_ps(b), _mm512_loadu_ps(b + 16), _mm512_loadu_ps(b + 32),
                                _mm512_loadu_ps(b + 48)};
          for (int r = 0; r < 4; ++r) {
            const __m512 a = _mm512_set1_ps(A[(r0 + r) * lda + t]);
            for (int q = 0; q < 4; ++q) c[r][q] = to_fp16(_mm512_add_ps(c[r][q], to_fp16(_mm512_mul_ps(a, bv[q]))));
          }
        }
        for (int r = 0; r < 4; ++r)
          for (int q = 0; q < 4; ++q) _mm512_storeu_ps(C + (r0 + r) * ldc + j + 16 * q, c[r][q]);
      }
      for (std::size_t r = r0; r < r0 + 4 && j < n; ++r) {  // remaining columns of these rows
        float* c = C + r * ldc;
        std::fill(c + j, c + n, 0.0f);
        for (std::size_t t = 0; t < k; ++t)
          for (std::size_t jj = j; jj < n; ++jj) {
            float p = A[r * lda + t] * B[t * ldb + jj];
            round_span(std::span<const float>(&p, 1), std::span<float>(&p, 1), acc.format, acc.round);
            float sum = c[jj] + p;
            round_span(std::span<const float>(&sum, 1), std::span<float>(&sum, 1), acc.format, acc.round);
            c[jj] = sum;
          }
      }
    }
  }
#endif
  for (std::size_t r = r0; r < m; ++r) {
    float* c = C + r * ldc;
    std::fill(c, c + n, 0.0f);
    for (std::size_t t = 0; t < k; ++t) {
      const float a = A[r * lda + t];
      const float* b = B + t * ldb;
      for (std::size_t j = 0; j < n; ++j) tmp[j] = a * b[j];
      round_span(std::span<const float>(tmp, n), std::span<float>(tmp, n), acc.format, acc.round);
      for (std::size_t j = 0; j < n; ++j) c[j] = c[j] + tmp[j];
      round_span(std::span<const float>(c, n), std::span<float>(c, n), acc.format, acc.round);
    }
  }
}

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

void round_rows(const GemmSpec& g, std::size_t m, std::size_t n, double* C, std::size_t ldc, RandomBits* rng) {
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

}  // namespace

// A as floats (a thread-local copy).
const float* floats_of(const double* A, std::size_t m, std::size_t k, std::size_t lda) {
  thread_local std::vector<float> fa_buffer;
  fa_buffer.resize(m * k);
  float* fa = fa_buffer.data();
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t t = 0; t < k; ++t) fa[r * k + t] = static_cast<float>(A[r * lda + t]);
  return fa;
}

bool gemm_uses_floats(const GemmSpec& g) { return float_path(g); }

void sgemm_pack_panels(std::size_t k, std::size_t n, const float* B, std::size_t ldb, float* dst) {
  for (std::size_t j = 0; j < n; j += 32, dst += 32 * k) {
    const std::size_t w = std::min<std::size_t>(32, n - j);
    for (std::size_t t = 0; t < k; ++t) {
      std::copy(B + t * ldb + j, B + t * ldb + j + w, dst + 32 * t);
      std::fill(dst + 32 * t + w, dst + 32 * t + 32, 0.0f);
    }
  }
}

void sgemm_fma_packed(bool a_transposed, std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
                      const float* panels, std::size_t panel_stride, float* C, std::size_t ldc, bool round_fp16) {
#if defined(__AVX512F__)
  for (std::size_t j = 0; j < n; j += 32, panels += panel_stride) {
    const std::size_t w = std::min<std::size_t>(32, n - j);
    if (a_transposed && round_fp16) sgemm_fma_panel<true, true>(m, k, A, lda, panels, C + j, ldc, w);
    else if (a_transposed) sgemm_fma_panel<true>(m, k, A, lda, panels, C + j, ldc, w);
    else if (round_fp16) sgemm_fma_panel<false, true>(m, k, A, lda, panels, C + j, ldc, w);
    else sgemm_fma_panel<false>(m, k, A, lda, panels, C + j, ldc, w);
  }
#else
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      const float* panel = panels + (j / 32) * panel_stride;
      float c = 0.0f;
      for (std::size_t t = 0; t < k; ++t)
        c = std::fma(a_transposed ? A[t * lda + r] : A[r * lda + t], panel[32 * t + j % 32], c);
      C[r * ldc + j] = round_fp16 ? static_cast<float>(round(c, format_by_name("fp16"))) : c;
    }
#endif
}

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

void gemm(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A, std::size_t lda,
          const float* B, std::size_t ldb, double* C, std::size_t ldc, RandomBits* rng) {
  if (float_path(g)) {
    gemm_float(g, m, n, k, floats_of(A, m, k, lda), k, B, ldb, C, ldc, rng);
    return;
  }
  thread_local std::vector<double> db_buffer;
  db_buffer.resize(k * n);
  double* db = db_buffer.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) db[t * n + j] = B[t * ldb + j];
  if (g.model.kind == GemmKind::tensor_core) dgemm_tensor_core(g, m, n, k, A, lda, db, n, C, ldc);
  else dgemm_generic(g, m, n, k, A, lda, db, n, C, ldc, rng);
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
