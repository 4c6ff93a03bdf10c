// The float GEMM kernels (gemm_float_kernels.hpp) and the packed-panel kernel of the fused tile path
// (sgemm_pack_panels, sgemm_fma_packed: gemm.hpp).
#include "pasa/attention/detail/gemm_float_kernels.hpp"

#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/attention/detail/packed_sgemm.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/numeric/round_narrow_register.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pasa {
namespace detail {
namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

// Every operation rounded to a narrow accumulator format held in floats (exact, see gemm.hpp).
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

}  // namespace detail

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
    if (a_transposed && round_fp16) detail::sgemm_fma_panel<true, true>(m, k, A, lda, panels, C + j, ldc, w);
    else if (a_transposed) detail::sgemm_fma_panel<true>(m, k, A, lda, panels, C + j, ldc, w);
    else if (round_fp16) detail::sgemm_fma_panel<false, true>(m, k, A, lda, panels, C + j, ldc, w);
    else detail::sgemm_fma_panel<false>(m, k, A, lda, panels, C + j, ldc, w);
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

}  // namespace pasa
