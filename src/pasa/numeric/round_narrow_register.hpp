// fp16 and bf16 rounding of the two steps of an every-op GEMM with a narrow accumulator, held in float
// registers with plain float arithmetic (no conversion instructions, no integer ops): RN(a·b) of two values
// of the format and RN(x) of x = RN32(c + p), c and p values of the format. They give the bits of the
// rounding layer's RNE rounding to the format (round_span) on every such argument whose rounded value is
// finite (bf16: at most 2^100): tests/numeric/test_round_narrow_register.cpp compares them with round_span
// on every pair of values ([long]; a strided sample by default). Overflow, NaN and inf are NOT handled: the
// caller proves they cannot occur (attention/detail/gemm_float_kernels.cpp bounds the accumulation first).
// Why float arithmetic: on the Zen 5 class CPU this library is tuned on, a zmm conversion costs about as
// much as two float ops and the integer ops compete with the float pipes; this costs 2 float ops per
// rounding of a sum, 4 for a product with its multiplication (the fp16 round trip: two conversions).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>

namespace pasa::fp16_register {

// RN16(a·b) for fp16 values a, b with |RN16(a·b)| finite (|a·b| < 65520); a13 = 2^13·a (exact).
// The product is exact in float (two 11-bit significands: 22 <= 24 bits). With t = 2^13·a·b (exact) and
// C = sign(t)·max(|t|, 2^-1) (vrangeps: the larger magnitude, the sign of t), s = RN32(a·b + C) (one fma,
// the exact product) and s − C (exact: s and C are within a factor 2, [Sterbenz 1974]):
// - |a·b| >= 2^-14 (fp16 normal, exponent e): |C| = 2^13·|a·b| lies in [2^(e+13), 2^(e+14)), where the float
//   grid is 2^(e−10), fp16's grid at a·b. C is a multiple of twice that grid (a·b has at most 22 significant
//   bits, so its 24-bit float significand is even), hence s = C + RN(a·b) on the grid with ties to even; if
//   C + a·b reaches 2^(e+14) (grid 2^(e−9)), |a·b| > 2^(e+1) − 2^(e−12) and both grids give 2^(e+1).
// - |a·b| < 2^-14 (fp16 subnormal range, fixed grid 2^-24): |C| = 2^-1, |s| in [2^-1, 1) on the grid 2^-24;
//   C/2^-24 = 2^23 is even, so ties go to even.
// A zero product gives +0 where RN16 gives ±0; the GEMM only adds the result to an accumulator that is
// never −0 (it starts at +0, and x + (−0) = x, an exact zero sum is +0 in RNE), so the sum is the same.
inline __m512 product(__m512 a, __m512 a13, __m512 b) {
  const __m512 C = _mm512_range_ps(_mm512_mul_ps(a13, b), _mm512_set1_ps(0.5f), 0x03);  // max |.|, sign of src1
  return _mm512_sub_ps(_mm512_fmadd_ps(a, b, C), C);
}

// RN16(x) for x = RN32(c + p), c and p fp16, |RN16(x)| finite (RN16(RN32(c + p)) = RN16(c + p) since
// 24 >= 2·11 + 2 [Figueroa 1995]). With C = 2^13·x (exact) in the binade [2^(e+13), 2^(e+14)) whose float
// grid q = 2^(e−10) is fp16's grid at x (exponent e): s = RN32(C − x) (one fma: (2^13 − 1)·x rounded), then
// C − s (one fma, exact: a multiple of q within q/2 of x) is x rounded to the grid q, i.e. RN16(x):
// - |s| = (2^13 − 1)|x| < 2^(e+14) never leaves the binade at the top (where a magic constant C + x would,
//   and would give the wrong grid when x's float significand is odd);
// - ties: a tie needs x = (k + 1/2)q, so x has at most 12 significant bits and C/q (x's 24-bit significand)
//   is even: C − s is then even where s is;
// - if (2^13 − 1)|x| < 2^(e+13) (|x| < 2^e·(1 + 2^-13)), s lies on the finer grid q/2 (C is a multiple of it)
//   and C − s is the multiple of q/2 nearest x, which is ±2^e: x is within 2^(e−13) < q/4 of it, and so is
//   RN16(x).
// No subnormal case: c + p is a multiple of 2^-24, so below 2^-14 it has at most 10 significant bits and is
// returned unchanged (s is exact), as RN16 does. The arguments stay below 2^17: nothing overflows.
// (Veltkamp's split, g = RN((2^13 + 1)x), g + (x − g) [Dekker 1971], gives the same bits with one op more.)
inline __m512 sum(__m512 x) {
  const __m512 K = _mm512_set1_ps(8192.0f);
  return _mm512_fmsub_ps(x, K, _mm512_fmsub_ps(x, K, x));
}

}  // namespace pasa::fp16_register

namespace pasa::bf16_register {

// The same two roundings for bf16 (8 bits; float's exponent range, subnormals below 2^-126 on the grid
// 2^-133), with 2^16 for 2^13: products of two bf16 values have at most 16 bits, so 2^16·a·b has an even
// float significand; the clamp 2^-110 = 2^23 · 2^-133 puts products below 2^-126 on the subnormal grid
// (a·b itself may be a float subnormal: the fma uses it exactly). Sums of bf16 values are multiples of
// 2^-133, at most 7 bits below 2^-126 (returned unchanged). Arguments and results up to 2^100 in
// magnitude (2^16 times them stays finite); a16 = 2^16·a.
inline __m512 product(__m512 a, __m512 a16, __m512 b) {
  const __m512 C = _mm512_range_ps(_mm512_mul_ps(a16, b), _mm512_set1_ps(0x1p-110f), 0x03);
  return _mm512_sub_ps(_mm512_fmadd_ps(a, b, C), C);
}
inline __m512 sum(__m512 x) {
  const __m512 K = _mm512_set1_ps(65536.0f);
  return _mm512_fmsub_ps(x, K, _mm512_fmsub_ps(x, K, x));
}

}  // namespace pasa::bf16_register
#endif
