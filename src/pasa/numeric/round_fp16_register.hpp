// fp16 rounding of the two steps of an every-op fp16 GEMM, held in float registers with plain float
// arithmetic (no conversion instructions, no integer ops): RN16(a·b) of two fp16 values and RN16(x) of
// x = RN32(c + p), c and p fp16. Both give the bits of the rounding layer's fp16 RNE rounding (F16C's
// cvtps2ph/cvtph2ps round trip, which round_span uses) on every such argument whose rounded value is finite:
// tests/numeric/test_round_fp16_register.cpp compares them with round_span on every pair of fp16 values
// ([long]; a strided sample by default). Overflow (a result that would be ±inf) and NaN/inf arguments are
// NOT handled: the caller proves they cannot occur (attention/gemm.cpp bounds the accumulation first).
// Why float arithmetic: on the Zen 5 class CPU this library is tuned on, a zmm conversion costs about as
// much as two float ops and the integer ops compete with the float pipes; this costs 3 float ops per
// rounding (4 with the product), the round trip two conversions.
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
// 24 >= 2·11 + 2 [Figueroa 1995]). Veltkamp's splitting with σ = 2^13 + 1 [Dekker 1971]: g = RN(σx),
// x − g, g + (x − g) is x rounded to 24 − 13 = 11 bits, to nearest, ties to even on this domain (the
// exhaustive test). No subnormal case: c + p is a multiple of 2^-24, so below 2^-14 it has at most 10
// significant bits and is returned unchanged, as RN16 does. The subtraction runs as an fnmadd (x − 1·g)
// to balance the FMA and ADD pipes. The arguments stay below 2^17: σx does not overflow.
inline __m512 sum(__m512 x) {
  const __m512 g = _mm512_mul_ps(x, _mm512_set1_ps(8193.0f));
  return _mm512_add_ps(g, _mm512_fnmadd_ps(g, _mm512_set1_ps(1.0f), x));
}

}  // namespace pasa::fp16_register
#endif
