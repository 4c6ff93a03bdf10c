#include "pasa/numeric/double_double.hpp"

#include <array>

#include <mpfr.h>

namespace pasa {

namespace {

struct ExpTables {
  double inv_c;               // 1024 / ln 2 (only picks k; its rounding does not matter)
  double c1, c2, c3;          // ln2/1024 = c1 + c2 + c3 to ~140 bits; c1 has 32 bits so k·c1 is exact
  DD sixth;                   // 1/6
  std::array<DD, 1024> pow2;  // 2^(j/1024)
};

DD dd_from_mpfr(mpfr_t x, mpfr_t tmp) {
  const double hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(tmp, x, hi, MPFR_RNDN);
  return {hi, mpfr_get_d(tmp, MPFR_RNDN)};
}

ExpTables make_tables() {
  ExpTables t{};
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
    t.pow2[j] = dd_from_mpfr(y, tmp);
  }
  mpfr_clears(x, y, tmp, static_cast<mpfr_ptr>(nullptr));
  return t;
}

const ExpTables& tables() {
  static const ExpTables t = make_tables();  // thread-safe initialisation
  return t;
}

}  // namespace

DD exp_dd(DD t) {
  const ExpTables& T = tables();
  const double kd = std::nearbyint(t.hi * T.inv_c);
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
  const long k = static_cast<long>(kd);
  const long q = (k >= 0) ? k / 1024 : -((-k + 1023) / 1024);  // floor(k / 1024)
  const DD res = dd_mul(T.pow2[static_cast<std::size_t>(k - q * 1024)], e);
  return {std::ldexp(res.hi, static_cast<int>(q)), std::ldexp(res.lo, static_cast<int>(q))};
}

}  // namespace pasa
