// Test support: MPFR's rounding of an exact mpfr_t to a Format, written without pasa::round, for the
// tests that hold the engine's one-rounding claims against MPFR. Precision p, emin set so that
// mpfr_subnormalize gives the format's gradual underflow (formats with subnormals only), round-to-odd
// built from RZ and the ternary value, ties-away from RZ and RA (mpfr_round_ties_away),
// then the format's overflow and flush conventions (IEEE 754 §7.4) applied by hand.
#pragma once

#include <cmath>
#include <limits>

#include <mpfr.h>

#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa::test {

// Sign of |x| − 2^e.
inline int mpfr_cmpabs_ui_2exp_helper(const mpfr_t x, long e) {
  mpfr_t t;
  mpfr_init2(t, 8);
  mpfr_set_ui_2exp(t, 1, e, MPFR_RNDN);
  const int c = mpfr_cmpabs(x, t);
  mpfr_clear(t);
  return c;
}

// Round to nearest, ties away from zero, by its definition: of x's neighbours RZ(x) and RA(x) (MPFR_RNDA:
// away from zero) the nearer one, RA(x) on an exact tie. (mpfr_set does not support MPFR_RNDNA, and MPFR's
// mpfr_round_nearest_away macro wraps one function call in the current exponent range, where the rounding
// here is mpfr_set, then the format's range and mpfr_subnormalize.) round(out, rnd) sets out (y's precision) to x
// rounded in MPFR mode rnd on the format's grid (its exponent range, subnormalised) and returns the ternary value; the
// midpoint (p + 1 bits, exact at p + 2) and the comparison run after it, in the caller's exponent range. Returns the
// ternary value of y.
template <class Round>
int mpfr_round_ties_away(mpfr_t y, mpfr_srcptr x, Round&& round) {
  mpfr_t z, mid;
  mpfr_init2(z, mpfr_get_prec(y));
  mpfr_init2(mid, mpfr_get_prec(y) + 2);
  const int tz = round(z, MPFR_RNDZ);
  int t = round(y, MPFR_RNDA);
  if (tz != 0) {
    mpfr_add(mid, z, y, MPFR_RNDN);  // exact: two neighbours of one grid
    mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
    if (mpfr_cmpabs(x, mid) < 0) {
      mpfr_set(y, z, MPFR_RNDN);
      t = tz;
    }
  }
  mpfr_clears(z, mid, nullptr);
  return t;
}

// x rounded once to f under o (stochastic mode excluded). x is not modified.
inline double mpfr_round_to(const mpfr_t x, const Format& f, const RoundOptions& o) {
  const double kInf = std::numeric_limits<double>::infinity();
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(x) != 0;
  if (mpfr_zero_p(x)) return neg ? -0.0 : 0.0;
  mpfr_t y, mn;
  mpfr_init2(y, f.p);
  mpfr_init2(mn, 8);
  mpfr_set_ui_2exp(mn, 1, f.emin(), MPFR_RNDN);
  if (o.flush_input && mpfr_cmpabs(x, mn) < 0) {
    mpfr_clears(y, mn, nullptr);
    return neg ? -0.0 : 0.0;
  }
  const bool odd = o.mode == RoundMode::odd;
  auto overflow = [&] {
    const bool to_max = o.overflow == Overflow::saturate || o.mode == RoundMode::toward_zero || odd ||
                        (o.mode == RoundMode::toward_pos && neg) || (o.mode == RoundMode::toward_neg && !neg);
    if (to_max) return neg ? -f.max_finite() : f.max_finite();
    return f.has_infinity() ? (neg ? -kInf : kInf) : std::numeric_limits<double>::quiet_NaN();
  };
  // MPFR requires its inputs inside the current exponent range: values beyond it are decided here.
  const double min_sub = std::ldexp(1.0, f.emin() - f.p + 1);
  if (mpfr_cmpabs_ui_2exp_helper(x, f.emax + 2) >= 0) {
    mpfr_clears(y, mn, nullptr);
    return overflow();
  }
  if (mpfr_cmpabs_ui_2exp_helper(x, f.emin() - f.p + 1) < 0) {  // below the smallest subnormal
    mpfr_clears(y, mn, nullptr);
    const int half = mpfr_cmpabs_ui_2exp_helper(x, f.emin() - f.p);
    bool up = false;
    switch (o.mode) {
      case RoundMode::nearest_even: up = half > 0; break;
      case RoundMode::nearest_away: up = half >= 0; break;  // min_sub/2 itself: away, to min_sub
      case RoundMode::toward_pos: up = !neg; break;
      case RoundMode::toward_neg: up = neg; break;
      case RoundMode::odd: up = true; break;
      default: break;
    }
    const double r = up ? min_sub : 0.0;
    if (o.flush_output) return neg ? -0.0 : 0.0;
    return neg ? -r : r;
  }
  auto on_grid = [&](mpfr_t out, mpfr_rnd_t rnd) {
    const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_set_emin(f.emin() - f.p + 2);
    mpfr_set_emax(f.emax + 8);
    int tern = mpfr_set(out, x, rnd);
    tern = mpfr_subnormalize(out, tern, rnd);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    return tern;
  };
  const mpfr_rnd_t rnd = odd || o.mode == RoundMode::toward_zero ? MPFR_RNDZ
                         : o.mode == RoundMode::nearest_even     ? MPFR_RNDN
                         : o.mode == RoundMode::toward_pos       ? MPFR_RNDU
                                                                 : MPFR_RNDD;
  const int t = o.mode == RoundMode::nearest_away ? mpfr_round_ties_away(y, x, on_grid) : on_grid(y, rnd);
  double r = mpfr_get_d(y, MPFR_RNDN);  // exact: p <= 53 bits in double's range
  mpfr_clears(y, mn, nullptr);
  if (odd && t != 0) {  // make the last bit of the truncated result 1
    const double a = std::fabs(r);
    const int e = a == 0 ? f.emin() : std::max(std::ilogb(a), f.emin());
    const double quantum = std::ldexp(1.0, e - (f.p - 1));
    if (std::fmod(a / quantum, 2.0) == 0.0) r = neg ? -(a + quantum) : a + quantum;
  }
  if (std::fabs(r) > f.max_finite()) return overflow();
  if (o.flush_output && std::fabs(r) < f.min_normal()) r = neg ? -0.0 : 0.0;
  return r;
}

}  // namespace pasa::test
