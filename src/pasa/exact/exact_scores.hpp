// Exact fp64 attention scores where provably exact, Dot2 elsewhere: the score kernels shared by the golden
// (golden_rows.cpp) and the score statistics (metrics.cpp), so both give the bits of dot2_scores (score_rows.hpp)
// at the cost of a plain fp64 GEMM. Internal to exact/; the argument is in docs/golden.md.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "pasa/core/assert.hpp"
#include "pasa/exact/score_rows.hpp"
#include "pasa/numeric/double_double.hpp"

namespace pasa::exact_scores {

constexpr std::size_t kScoreRows = 8;  // rows of one register-blocked plain_scores call

// Eight doubles, eight 64-bit integers (GCC vector extensions: lowered to whatever the target has). Without
// AVX-512 GCC warns that passing them by value has another ABI; these helpers are inline in one translation
// unit each, so no call crosses an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double v8d __attribute__((vector_size(64)));
typedef std::int64_t v8i __attribute__((vector_size(64)));

// x (finite, nonzero) is an odd multiple of 2^lsb_exponent(x). A non-finite x (inputs with NaN/inf, in the
// score statistics) gives a meaningless exponent, harmlessly: its vector's norm is not finite, so no pair
// of it passes the exactness test. x = 0 has no such exponent (countr_zero(0) = 64).
inline int lsb_exponent(double x) {
  PASA_ASSERT(x != 0);
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int e = static_cast<int>((bits >> 52) & 0x7ff);
  std::uint64_t m = bits & ((std::uint64_t{1} << 52) - 1);
  if (e != 0) m |= std::uint64_t{1} << 52;
  return (e == 0 ? -1074 : e - 1075) + std::countr_zero(m);
}

// What the exactness test needs of a vector x of length d: its norm as row_norm computes it (1.01·‖x‖₂,
// the same bits: it also enters the Dot2 bound), an exponent e with every x_i a multiple of 2^e, and
// grid = norm·2^-e (+inf if that overflows; 0 for a zero vector).
struct GridNorm {
  double norm = 0, grid = 0;
  int e = 0;
};
inline GridNorm grid_norm(const double* x, std::size_t d) {
  GridNorm g;
  g.norm = row_norm(x, d);
  int e = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < d; ++i)
    if (x[i] != 0) e = std::min(e, lsb_exponent(x[i]));
  if (e == std::numeric_limits<int>::max()) return g;  // zero vector: its dot products are exactly 0
  g.e = e;
  g.grid = std::ldexp(g.norm, -e);
  return g;
}

// Exact scores. For a pair (q, k) whose products are all multiples of 2^(e_q + e_k) >= 2^-1074, every
// partial sum of Σ_x q_x k_x, in ANY order and association, is an integer multiple of 2^(e_q + e_k) of
// magnitude <= Σ_x |q_x k_x| <= ‖q‖‖k‖ (Cauchy-Schwarz; the norms carry a 1.01 factor that covers their
// own rounding). If that is <= 2^52·2^(e_q + e_k), i.e. grid_q · grid_k <= 2^52 (the computed product errs
// by one rounding, covered by the factor 2 below 2^53), every such partial sum is a double, so every
// addition and FMA of any evaluation returns its exact result: the computed dot product is q·k exactly,
// whatever the order of summation (blocking, vector lanes, FMA or not). For fp16/bf16/fp8 inputs this
// holds for almost every pair (fp16 in [-1, 1], D = 128: grid_q·grid_k ~ 2^45), so one plain fp64 dot
// product, vectorised freely, replaces the Dot2 evaluation [ORO05]; and it gives the same bits as Dot2
// there: Dot2's running sum is then exact too (every TwoSum and TwoProd error is 0), so its result is
// (q·k, +0), as is ours. A pair that fails the test takes the Dot2 loop of dot2_scores, in its order.
inline bool exact_pair(const GridNorm& q, double k_grid, int k_e) {
  return (q.e + k_e >= -1074) & (q.grid * k_grid <= 0x1p52);
}

// Per (batch, KV head): every key's GridNorm, as arrays (the loops over keys vectorise).
struct KeyInfo {
  std::vector<double> norm, grid;
  std::vector<int> e;
  double max_abs = 0;  // max |k_jx| (fast_path_safe)
  KeyInfo(const double* K, std::size_t skv, std::size_t d) : norm(skv), grid(skv), e(skv) { add(K, 0, skv, d); }
  // Empty: its keys added a tile at a time by add (the golden's parts, which never hold all of K).
  explicit KeyInfo(std::size_t skv) : norm(skv), grid(skv), e(skv) {}
  // Keys [j0, j0 + n) from their rows K (n × d). The same bits as one call over all keys when every call
  // but the last starts and ends at a multiple of 8 (the keys are taken 8 at a time from j0, the rest one
  // by one).
  void add(const double* K, std::size_t j0, std::size_t n, std::size_t d) {
    constexpr std::size_t w = 8;  // keys at a time: independent dependency chains (row_norm's order per key)
    std::size_t j = 0;
    for (; j + w <= n; j += w) {
      double n2[w] = {};
      for (std::size_t x = 0; x < d; ++x)
        for (std::size_t l = 0; l < w; ++l) n2[l] += K[(j + l) * d + x] * K[(j + l) * d + x];
      for (std::size_t l = 0; l < w; ++l) set(j0 + j + l, K + (j + l) * d, d, 1.01 * std::sqrt(n2[l]));
    }
    for (; j < n; ++j) set(j0 + j, K + j * d, d, row_norm(K + j * d, d));
  }

 private:
  void set(std::size_t j, const double* k, std::size_t d, double nrm) {
    int emin = std::numeric_limits<int>::max();
    std::size_t x = 0;
    {  // 8 elements at a time: lsb_exponent lane by lane, in integer arithmetic (the same values, any order)
      constexpr std::int64_t none = std::numeric_limits<int>::max();
      v8i lo = v8i{} + none;
      v8d top = v8d{} + max_abs;
      for (; x + 8 <= d; x += 8) {
        v8d v;
        std::memcpy(&v, k + x, sizeof v);
        v8i bits;
        std::memcpy(&bits, &v, sizeof bits);
        v8d a;
        const v8i abs_bits = bits & std::numeric_limits<std::int64_t>::max();
        std::memcpy(&a, &abs_bits, sizeof a);
        top = top < a ? a : top;  // std::max's rule: a NaN never replaces the maximum
        const v8i ex = (bits >> 52) & 0x7ff;
        const v8i m = (bits & ((std::int64_t{1} << 52) - 1)) | ((ex != 0) & (std::int64_t{1} << 52));
        // The lowest set bit of m, 2^c (m != 0 for x != 0), as a double: its exponent field is 1023 + c.
        const v8d low = __builtin_convertvector(m & -m, v8d);
        v8i low_bits;
        std::memcpy(&low_bits, &low, sizeof low_bits);
        const v8i c = ((low_bits >> 52) & 0x7ff) - 1023;
        const v8i lsb = (ex == 0 ? v8i{} - 1074 : ex - 1075) + c;
        const v8i keep = v != 0;  // (NaN != 0, as the scalar test)
        lo = keep ? (lsb < lo ? lsb : lo) : lo;
      }
      for (int l = 0; l < 8; ++l) {
        emin = std::min(emin, static_cast<int>(lo[l]));
        max_abs = std::max(max_abs, top[l]);
      }
    }
    for (; x < d; ++x) {
      max_abs = std::max(max_abs, std::abs(k[x]));
      if (k[x] != 0) emin = std::min(emin, lsb_exponent(k[x]));
    }
    norm[j] = nrm;
    grid[j] = emin == std::numeric_limits<int>::max() ? 0.0 : std::ldexp(nrm, -emin);
    e[j] = emin == std::numeric_limits<int>::max() ? 0 : emin;
  }
};

// a·b − c with one rounding per lane (the exact error of a rounded product when c = RN(a·b)).
inline v8d fms(v8d a, v8d b, v8d c) {
#if defined(__AVX512F__) && (defined(__x86_64__) || defined(__i386__))
  return _mm512_fmsub_pd(a, b, c);
#elif defined(__FMA__) && (defined(__x86_64__) || defined(__i386__))
  // (The vectors' own addresses: clang refuses the address of a vector element, &a[0].)
  v8d r;
  const double *pa = reinterpret_cast<const double*>(&a), *pb = reinterpret_cast<const double*>(&b),
               *pc = reinterpret_cast<const double*>(&c);
  double* pr = reinterpret_cast<double*>(&r);
  _mm256_storeu_pd(pr, _mm256_fmsub_pd(_mm256_loadu_pd(pa), _mm256_loadu_pd(pb), _mm256_loadu_pd(pc)));
  _mm256_storeu_pd(pr + 4, _mm256_fmsub_pd(_mm256_loadu_pd(pa + 4), _mm256_loadu_pd(pb + 4), _mm256_loadu_pd(pc + 4)));
  return r;
#else
  v8d r;
  for (int l = 0; l < 8; ++l) r[l] = std::fma(a[l], b[l], -c[l]);
  return r;
#endif
}
// a·b + c with one rounding per lane.
inline v8d fma8(v8d a, v8d b, v8d c) {
#if defined(__AVX512F__) && (defined(__x86_64__) || defined(__i386__))
  return _mm512_fmadd_pd(a, b, c);
#else
  return fms(a, b, -c);
#endif
}

// Keys [0, n) of a tile (rows of K, d doubles each) as strips of 8 keys, x-major:
// kt[(s·d + x)·8 + l] = k_{8s + l, x}, 0 past n. Then a strip times a broadcast q_x is one vector operation.
inline void strip_keys(const double* K, std::size_t d, std::size_t n, double* kt) {
  for (std::size_t s = 0; s < (n + 7) / 8; ++s)
    for (std::size_t l = 0; l < 8; ++l) {
      const std::size_t j = 8 * s + l;
      double* t = kt + s * d * 8 + l;
      if (j < n)
        for (std::size_t x = 0; x < d; ++x) t[x * 8] = K[j * d + x];
      else
        for (std::size_t x = 0; x < d; ++x) t[x * 8] = 0.0;
    }
}

// S[r·ld + j] = q_r·k_j in plain double for r < kScoreRows (rows beyond the chunk are zero rows), j < n, from
// the strips of strip_keys: exact where exact_pair holds (the summation order is free there, see above),
// ignored elsewhere. 8 keys in the lanes, kScoreRows rows, FMA. The accumulators must stay in registers:
// 8 rows of 8 lanes fill 8 of AVX-512's 32; with AVX2 the generic vectors spilled every accumulator to the
// stack (a tenth of the FMA rate, 40 % of the golden's time), so there 4 rows of 8 lanes (8 ymm) are taken
// per pass over a strip, in __m256d.
inline void plain_scores(const double* const* q, const double* kt, std::size_t d, std::size_t n, double* S, std::size_t ld) {
  for (std::size_t s = 0; s < (n + 7) / 8; ++s) {
    const double* t = kt + s * d * 8;
    const std::size_t w = std::min<std::size_t>(8, n - 8 * s);
#if defined(__FMA__) && !defined(__AVX512F__) && (defined(__x86_64__) || defined(__i386__))
    constexpr std::size_t R = kScoreRows / 2;
    for (std::size_t r0 = 0; r0 < kScoreRows; r0 += R) {
      __m256d lo[R], hi[R];
      for (std::size_t r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_pd();
      for (std::size_t x = 0; x < d; ++x) {
        const __m256d k0 = _mm256_loadu_pd(t + x * 8), k1 = _mm256_loadu_pd(t + x * 8 + 4);
        for (std::size_t r = 0; r < R; ++r) {
          const __m256d a = _mm256_set1_pd(q[r0 + r][x]);
          lo[r] = _mm256_fmadd_pd(a, k0, lo[r]);
          hi[r] = _mm256_fmadd_pd(a, k1, hi[r]);
        }
      }
      for (std::size_t r = 0; r < R; ++r) {
        double out[8];
        _mm256_storeu_pd(out, lo[r]);
        _mm256_storeu_pd(out + 4, hi[r]);
        for (std::size_t l = 0; l < w; ++l) S[(r0 + r) * ld + 8 * s + l] = out[l];
      }
    }
#else
    v8d acc[kScoreRows] = {};
    for (std::size_t x = 0; x < d; ++x) {
      v8d kv;
      std::memcpy(&kv, t + x * 8, sizeof kv);
      for (std::size_t r = 0; r < kScoreRows; ++r) {
        const double a = q[r][x];
        acc[r] = fma8(v8d{a, a, a, a, a, a, a, a}, kv, acc[r]);
      }
    }
    for (std::size_t r = 0; r < kScoreRows; ++r)
      for (std::size_t l = 0; l < w; ++l) S[r * ld + 8 * s + l] = acc[r][l];
#endif
  }
}

// Dot2 of one pair, in dot2_scores's order (the same bits).
inline DD dot2_pair(const double* q, const double* k, std::size_t d) {
  double hi = 0, lo = 0;
  for (std::size_t x = 0; x < d; ++x) lo += dot2_step(hi, q[x], k[x]);
  return two_sum(hi, lo);
}

}  // namespace pasa::exact_scores
