#include "pasa/numeric/double_double.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <array>
#include <cmath>
#include <vector>

#include <mpfr.h>

#include "pasa/core/compiler.hpp"
#include "pasa/numeric/mpfr_thread.hpp"

namespace pasa {

namespace {

struct ExpTables {
  double inv_c;               // 1024 / ln 2 (only picks k; its rounding does not matter)
  double c1, c2, c3;          // ln2/1024 = c1 + c2 + c3 to ~140 bits; c1 has 32 bits so k·c1 is exact
  DD sixth;                   // 1/6
  std::array<double, 1024> pow2_hi, pow2_lo;  // 2^(j/1024) = hi + lo
};

DD dd_from_mpfr(mpfr_t x, mpfr_t tmp) {
  const double hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(tmp, x, hi, MPFR_RNDN);
  return {hi, mpfr_get_d(tmp, MPFR_RNDN)};
}

ExpTables make_tables() {
  ExpTables t{};
  free_mpfr_caches_at_thread_exit();
  mpfr_t x, y, tmp;
  mpfr_inits2(320, x, y, tmp, static_cast<mpfr_ptr>(nullptr));
  mpfr_const_log2(x, MPFR_RNDN);
  mpfr_div_ui(x, x, 1024, MPFR_RNDN);  // ln2/1024
  mpfr_ui_div(y, 1, x, MPFR_RNDN);
  t.inv_c = mpfr_get_d(y, MPFR_RNDN);
  mpfr_set(y, x, MPFR_RNDN);
  mpfr_prec_round(y, 32, MPFR_RNDN);
  t.c1 = mpfr_get_d(y, MPFR_RNDN);
  mpfr_set_prec(y, 320);
  mpfr_sub_d(x, x, t.c1, MPFR_RNDN);
  t.c2 = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(x, x, t.c2, MPFR_RNDN);
  t.c3 = mpfr_get_d(x, MPFR_RNDN);
  mpfr_set_ui(x, 1, MPFR_RNDN);
  mpfr_div_ui(x, x, 6, MPFR_RNDN);
  t.sixth = dd_from_mpfr(x, tmp);
  for (int j = 0; j < 1024; ++j) {
    mpfr_set_si(x, j, MPFR_RNDN);
    mpfr_div_ui(x, x, 1024, MPFR_RNDN);
    mpfr_exp2(y, x, MPFR_RNDN);
    const DD p = dd_from_mpfr(y, tmp);
    t.pow2_hi[j] = p.hi;
    t.pow2_lo[j] = p.lo;
  }
  mpfr_clears(x, y, tmp, static_cast<mpfr_ptr>(nullptr));
  return t;
}

const ExpTables& tables() {
  static const ExpTables t = make_tables();  // thread-safe initialisation
  return t;
}

}  // namespace

namespace {
// exp(t) given kd = round(t.hi·1024/ln 2) (any integer near it keeps the bound; both callers round to nearest).
template <class Tables>
inline DD exp_dd_reduced(DD t, double kd, const Tables& T) {
  // r = t - k·ln2/1024. t.hi - k·c1 is exact (k·c1 exact, Sterbenz), the rest in double-double.
  DD r = two_sum(t.hi - kd * T.c1, t.lo);
  r = dd_add(r, dd_neg(two_prod(kd, T.c2)));
  r = dd_add(r, DD{-kd * T.c3, 0});
  // exp(r) = 1 + r + r²(1/2 + r(1/6 + r·c)), |r| <= ln2/2048 + tiny; c = 1/24 + r/120 + ... + r^4/40320
  // in double (its relative error 2^-51 weighs r^4/24 < 2^-50 → < 2^-101); truncation |r|^9/9! < 2^-120.
  const double x = r.hi;
  const double c = 1.0 / 24 + x * (1.0 / 120 + x * (1.0 / 720 + x * (1.0 / 5040 + x * (1.0 / 40320))));
  const DD v1 = dd_add(T.sixth, two_prod(x, c));
  const DD v2 = dd_add(DD{0.5, 0}, dd_mul(r, v1));
  DD e = dd_add(r, dd_mul(dd_mul(r, r), v2));
  e = dd_add(DD{1, 0}, e);
  // k = 1024·q + j with q = floor(k / 1024) (the arithmetic shift) and j in [0, 1024).
  const std::int64_t k = static_cast<std::int64_t>(kd);
  const std::int64_t q = k >> 10;
  const std::size_t j = static_cast<std::size_t>(k & 1023);
  const DD res = dd_mul(DD{T.pow2_hi[j], T.pow2_lo[j]}, e);
  // ×2^q as a product with a power of two (exact: on [-635, 0.5] both words stay normal; ldexp is a libm call).
  const double scale = std::bit_cast<double>(static_cast<std::uint64_t>(q + 1023) << 52);
  return {res.hi * scale, res.lo * scale};
}
}  // namespace

DD exp_dd(DD t) {
  const ExpTables& T = tables();
  return exp_dd_reduced(t, std::nearbyint(t.hi * T.inv_c), T);
}

void exp_dd_n(const double* thi, const double* tlo, double* hi, double* lo, std::size_t n) {
  const ExpTables& T = tables();
  // ivdep: the stores never touch the tables (GCC cannot see that and would not vectorise the gathers).
PASA_IVDEP
  for (std::size_t i = 0; i < n; ++i) {
    // nearbyint in round-to-nearest-even, written so that the loop vectorises: adding and removing 1.5·2^52
    // rounds |y| < 2^51 to an integer, ties to even (here |y| < 2^20).
    const double y = thi[i] * T.inv_c;
    const double kd = (y + 0x1.8p52) - 0x1.8p52;
    const DD e = exp_dd_reduced(DD{thi[i], tlo[i]}, kd, T);
    hi[i] = e.hi;
    lo[i] = e.lo;
  }
}

DD exp_odd(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return {std::exp(x), 0.0};
  free_mpfr_caches_at_thread_exit();
  mpfr_t a, y, t, lo;
  mpfr_inits2(256, a, y, nullptr);
  mpfr_init2(t, 2400);  // y − hi exactly
  mpfr_init2(lo, 53);
  auto to_odd = [](mpfr_t v, int ternary) {
    if (ternary != 0 && mpfr_regular_p(v) && mpfr_min_prec(v) < mpfr_get_prec(v)) {
      if (mpfr_sgn(v) > 0) mpfr_nextabove(v);
      else mpfr_nextbelow(v);
    }
  };
  mpfr_set_d(a, x, MPFR_RNDN);
  to_odd(y, mpfr_exp(y, a, MPFR_RNDZ));
  const double hi = mpfr_get_d(y, MPFR_RNDN);
  double l = 0.0;
  if (std::isfinite(hi) && hi != 0.0) {
    mpfr_sub_d(t, y, hi, MPFR_RNDN);
    to_odd(lo, mpfr_set(lo, t, MPFR_RNDZ));
    l = mpfr_get_d(lo, MPFR_RNDN);
  }
  mpfr_clears(a, y, t, lo, nullptr);
  return {hi, l};
}

namespace {
// Sign of (the value of e[0..n)) − b, exactly.
int expansion_compare(const double* e, int n, double b) {
  thread_local std::vector<double> t;
  t.assign(e, e + n);
  t.push_back(0.0);
  int m = n;
  expansion_add(t.data(), m, -b);
  return m == 0 ? 0 : (t[m - 1] > 0.0 ? 1 : -1);  // nonoverlapping: the largest component has the sign
}
double expansion_approx(const double* e, int n) {
  double a = 0.0;
  for (int i = 0; i < n; ++i) a += e[i];
  return a;
}
}  // namespace

DD expansion_to_dd(const double* e, int n) {
  if (n <= 1) return {n == 0 ? 0.0 : e[0], 0.0};
  double hi = expansion_approx(e, n);
  // An inf or NaN component (a term that was not finite; the callers give such sums IEEE's value): IEEE's sum
  // of the components, as the search below would take ilogb of an inf or NaN.
  if (!std::isfinite(hi)) return {hi, 0.0};
  if (hi == 0.0) hi = e[n - 1];
  thread_local std::vector<double> r;
  r.resize(n + 1);
  int m = 0;
  for (;;) {  // move hi by one double until |x − hi| <= ulp(hi)/2: a few steps from the approximation
    std::copy(e, e + n, r.begin());
    m = n;
    expansion_add(r.data(), m, -hi);  // R = x − hi, exactly
    const double half = std::ldexp(1.0, std::ilogb(hi) - 53);
    if (expansion_compare(r.data(), m, half) > 0) hi = std::nextafter(hi, INFINITY);
    else if (expansion_compare(r.data(), m, -half) < 0) hi = std::nextafter(hi, -INFINITY);
    else break;
  }
  // lo: R itself where it is a multiple k·w of w = ulp(hi)/4, else an approximation of R strictly between
  // the same two multiples (every breakpoint of a <= 53-bit grid near hi is hi plus such a multiple).
  const double w = std::ldexp(1.0, std::ilogb(hi) - 54);
  const double ra = expansion_approx(r.data(), m);
  double k = std::clamp(std::floor(ra / w), -2.0, 2.0);
  while (expansion_compare(r.data(), m, k * w) < 0) k -= 1.0;
  while (expansion_compare(r.data(), m, (k + 1.0) * w) >= 0) k += 1.0;
  if (expansion_compare(r.data(), m, k * w) == 0) return {hi, k * w};
  return {hi, std::clamp(ra, std::nextafter(k * w, INFINITY), std::nextafter((k + 1.0) * w, -INFINITY))};
}

}  // namespace pasa
