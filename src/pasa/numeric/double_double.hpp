// Double-double ("dd") arithmetic: a value hi + lo with |lo| <= ulp(hi)/2, about 106 significant bits.
// Used by the fast golden path and the metrics accumulators. Error-free transformations (Knuth's TwoSum,
// FMA-based TwoProd, [ORO05]) and the double-word algorithms of [JMP17] (Joldes, Muller & Popescu, ACM
// TOMS 2017); the relative error bounds quoted below (u = 2^-53, no underflow or overflow) are theirs,
// except dd_div's (see there), and are what golden.cpp's bound relies on. tests/numeric/
// test_double_double.cpp checks every one against MPFR at >= 212 bits.
// Requires IEEE double arithmetic without value-changing optimisations (no -ffast-math).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace pasa {

struct DD {
  double hi = 0, lo = 0;
};

// s + e == a + b exactly.
inline DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
// Requires |a| >= |b| (or a == 0); s + e == a + b exactly.
inline DD fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}
// p + e == a * b exactly (barring underflow).
inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}
// a/b as q + lo for round_sum: q = RN(a/b), and lo the round-to-odd (53 bits) of the exact residual
// quotient (a − q·b)/b, whose numerator the FMA gives exactly (barring underflow). Round-to-odd keeps lo's
// position relative to every even double (0, ±ulp(q)/2, ±ulp(q)/4: the only places where the rounding of
// q + lo to a <= 53-bit grid can change), so one rounding of q + lo is one rounding of a/b in every
// deterministic mode; stochastic rounding sees the distance to within 2^-52 of a quantum.
// Written with selects only (no early return, no libm call), so that loops over it vectorise.
inline DD exact_quotient(double a, double b) {
  const double q = a / b;
  const double r = std::fma(-q, b, a);
  const double lo = r / b;
  const double e = std::fma(-lo, b, r);  // r − lo·b with the exact sign
  // Round lo to odd: an even lo of an inexact quotient steps one bit pattern toward the exact one (+1 away
  // from zero when the exact residual quotient lies beyond lo, else −1).
  const std::uint64_t u = std::bit_cast<std::uint64_t>(lo);
  const bool away = ((e > 0) == (b > 0)) != (static_cast<std::int64_t>(u) < 0);
  const std::int64_t step = away ? 1 : -1;
  const bool bump = (e != 0.0) & ((u & 1) == 0) & (lo != 0.0);
  const double odd = std::bit_cast<double>(bump ? u + static_cast<std::uint64_t>(step) : u);
  constexpr double kMax = 0x1.fffffffffffffp1023;
  // q infinite or NaN, q = 0, or an exact quotient: no residual.
  const bool finite = (std::fabs(q) <= kMax) & (q != 0.0) & (r != 0.0) & (std::fabs(lo) <= kMax);
  return {q, finite ? odd : 0.0};
}
// One step of Dot2 (Ogita, Rump, Oishi 2005): hi += a·b rounded; returns the exact errors of the product
// and of the sum, which the caller gathers in its low word (hi + Σ returned == Σ a·b up to O(u²)).
inline double dot2_step(double& hi, double a, double b) {
  const DD p = two_prod(a, b);
  const DD s = two_sum(hi, p.hi);
  hi = s.hi;
  return s.lo + p.lo;
}
// AccurateDWPlusDW: relative error <= 3u^2 / (1 - 4u).
inline DD dd_add(DD a, DD b) {
  DD s = two_sum(a.hi, b.hi);
  const DD t = two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return fast_two_sum(s.hi, s.lo);
}
inline DD dd_neg(DD a) { return {-a.hi, -a.lo}; }
// DWTimesDW1-style product: relative error <= 7u^2 (we use 8u^2 in bounds).
inline DD dd_mul(DD a, DD b) {
  DD p = two_prod(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return fast_two_sum(p.hi, p.lo);
}
// DWTimesFP2 of [JMP17] (a.lo·b rounded, then added to the product's low word: no FMA under -ffp-contract=off):
// relative error <= 3u^2 (the 2u^2 is DWTimesFP3's, which fuses the two; the tests measure 2.18u^2).
inline DD dd_mul_d(DD a, double b) {
  DD p = two_prod(a.hi, b);
  p.lo += a.lo * b;
  return fast_two_sum(p.hi, p.lo);
}
// Division by three quotient digits q1 + q2 + q3, each from the remainder computed in double-double (as
// the QD library's accurate division), not one of [JMP17]'s algorithms: no proof of a bound is claimed for
// it. We use the 15u^2 that [JMP17] prove for their DWDivDW (16u^2 in bounds); the tests measure at most
// 2.3u^2 on random and adversarial inputs.
inline DD dd_div(DD a, DD b) {
  const double q1 = a.hi / b.hi;
  const DD r = dd_add(a, dd_neg(dd_mul_d(b, q1)));
  const double q2 = r.hi / b.hi;
  const DD r2 = dd_add(r, dd_neg(dd_mul_d(b, q2)));
  const double q3 = r2.hi / b.hi;
  const DD q = fast_two_sum(q1, q2);
  return dd_add(q, DD{q3, 0});
}
// Floating-point expansions [Shewchuk 1997, "Adaptive precision floating-point arithmetic"]: a value held
// exactly as the sum of e[0..n), components nonoverlapping, increasing in magnitude, no zeros.
// Grow-Expansion with zero elimination (Shewchuk's Thm. 10): e += b exactly; e needs room for n + 1.
inline void expansion_add(double* e, int& n, double b) {
  int m = 0;
  double q = b;
  for (int i = 0; i < n; ++i) {
    const DD s = two_sum(q, e[i]);
    q = s.hi;
    if (s.lo != 0.0) e[m++] = s.lo;
  }
  if (q != 0.0) e[m++] = q;
  n = m;
}
// The exact value of an expansion as hi + lo with |lo| <= ulp(hi)/2 (hi = a faithful rounding of it), lo
// keeping the value's position relative to every multiple of ulp(hi)/4 (equal to one, or strictly between
// the same two): what round_sum() needs to round the expansion once to any format of at most 53 bits, in
// every deterministic mode; stochastic rounding sees the distance to within 2^-52 of a quantum. Values
// above 2^-960 (no component near the underflow range). With an inf or NaN component: (IEEE's sum, 0).
DD expansion_to_dd(const double* e, int n);

inline double dd_to_double(DD a) { return a.hi + a.lo; }
inline bool dd_less(DD a, DD b) { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo); }

}  // namespace pasa

namespace pasa {

// exp(t) in double-double for t.hi in [-635, 0.5]: relative error below 2^-98 (reduction by k·ln2/1024
// with a three-part constant, a 1024-entry table of 2^(j/1024) computed once with MPFR, and a degree-8
// Taylor polynomial whose first terms are evaluated in double-double). Below -635 the low word would be
// subnormal; callers drop such terms (they are < 2^-916 relative to the row maximum).
DD exp_dd(DD t);
// exp_dd of n arguments (t = thi[i] + tlo[i], t.hi in [-635, 0.5]) into hi[i] + lo[i], the same bits as
// exp_dd element by element, in a loop the compiler vectorises.
void exp_dd_n(const double* thi, const double* tlo, double* hi, double* lo, std::size_t n);
// e^x as hi + lo for one rounding by round_sum to any format of at most 53 bits: MPFR's e^x rounded to odd
// at 256 bits, hi = RN(it), lo = the rest rounded to odd at 53 bits (both keep the value on the same side of
// every breakpoint of such a grid [Boldo & Melquiond 2008]). Slow (MPFR): the fallback of exact roundings.
DD exp_odd(double x);
inline constexpr double kExpDDMin = -635.0;
inline constexpr double kExpDDRelErr = 0x1p-98;

}  // namespace pasa
