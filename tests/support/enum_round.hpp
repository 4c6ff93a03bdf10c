// Test support: rounding to a small format (at most 8 storage bits) by enumeration, written without pasa's
// rounding: every storage pattern is decoded, the finite values are sorted, and x's neighbours lo <= x <= hi
// are found by exact comparison; the mode picks one of them by its definition. Ties to even pick the even
// multiple of the local spacing hi - lo (IEEE 754's even last digit on an IEEE grid); beyond the largest
// value the next grid point (max + the top binade's spacing) stands for overflow, whose result the
// format's specials and the overflow policy decide as OCP MX v1.0 / IEEE 754 §7.4 say. Stochastic and
// hybrid modes are not modelled (their tests check the two neighbours and the frequencies).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa::test {

struct EnumFormat {
  Format f;
  std::vector<double> values;  // every finite value, ascending, -0 folded into +0
  double top_step = 0;         // the quantum of the top binade (the overflow sentinel is max + top_step)
  double bottom_step = 0;      // the same below the most negative value

  explicit EnumFormat(const Format& fmt) : f(fmt) {
    const int bits = f.storage_bits();
    if (bits > 12) throw std::invalid_argument("EnumFormat: at most 12 storage bits");
    for (std::uint64_t c = 0; c < (std::uint64_t(1) << bits); ++c) {
      double v;
      try {
        v = decode(c, f);
      } catch (const std::domain_error&) {
        continue;  // (a pattern outside the format: int8's -128 when symmetric)
      }
      if (std::isfinite(v)) values.push_back(v == 0.0 ? 0.0 : v);
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    // The next point of the grid beyond the largest value: one quantum of the top binade above it (for E8M0,
    // whose top two values are 2^126 apart, the next point is 2^128).
    top_step = std::ldexp(1.0, f.emax - f.p_at(f.emax) + 1);
    bottom_step = top_step;
  }

  double max() const { return values.back(); }
  double min() const { return values.front(); }

  double overflow(bool neg, const RoundOptions& o) const {
    const double m = neg ? -min() : max();
    const bool toward_zero = o.mode == RoundMode::toward_zero || o.mode == RoundMode::odd ||
                             (o.mode == RoundMode::toward_pos && neg) || (o.mode == RoundMode::toward_neg && !neg);
    if (o.overflow == Overflow::saturate || f.specials == Specials::finite || toward_zero) return neg ? -m : m;
    if (f.has_infinity()) return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }

  // x + eps rounded under o (the exact convention; deterministic modes), for an infinitesimal eps of the sign
  // given (0: x itself): what round_sum(x, lo) gives for a residual lo far below x's last bit. Zero, NaN, inf
  // and the signs an unsigned format lacks are the caller's (the tests state them case by case).
  double round(double x, const RoundOptions& o, int eps = 0) const {
    const bool neg = std::signbit(x);
    // The neighbours, with sentinels beyond the ends.
    double lo, hi;
    bool lo_over = false, hi_over = false;
    const auto above_max = [&] { lo = max(), hi = max() + top_step, hi_over = true; };
    const auto below_min = [&] { lo = min() - bottom_step, hi = min(), lo_over = true; };
    if (x > max() || (x == max() && eps > 0)) {
      above_max();
    } else if (f.is_signed && (x < min() || (x == min() && eps < 0))) {
      below_min();
    } else if (!f.is_signed && (x < min() || (x == min() && eps < 0))) {
      return min();  // below an unsigned zero-less format's smallest value: nothing below it
    } else {
      const auto it = std::lower_bound(values.begin(), values.end(), x);  // first >= x
      if (*it == x && eps == 0) return x == 0.0 && neg && f.signed_zero() ? -0.0 : x;
      if (*it == x && eps > 0) lo = x, hi = *(it + 1);
      else if (*it == x) lo = *(it - 1), hi = x;
      else lo = *(it - 1), hi = *it;
    }
    // x + eps lies strictly between lo and hi; the distances of x are exact (Sterbenz, or one is 0), eps
    // decides their ties.
    const double d_lo = x - lo, d_hi = hi - x;
    const bool lo_nearer = d_lo < d_hi || (d_lo == d_hi && eps < 0);
    const bool hi_nearer = d_hi < d_lo || (d_lo == d_hi && eps > 0);
    const double step = hi - lo;
    const bool lo_even = std::fmod(std::fabs(lo) / step, 2.0) == 0.0;
    const bool positive = x > 0 || (x == 0 && eps > 0);
    double r;
    switch (o.mode) {
      case RoundMode::nearest_even: r = lo_nearer ? lo : hi_nearer ? hi : (lo_even ? lo : hi); break;
      case RoundMode::nearest_away: r = lo_nearer ? lo : hi_nearer ? hi : (std::fabs(lo) > std::fabs(hi) ? lo : hi); break;
      case RoundMode::toward_zero: r = positive ? lo : hi; break;
      case RoundMode::toward_pos: r = hi; break;
      case RoundMode::toward_neg: r = lo; break;
      case RoundMode::odd: r = lo_even ? hi : lo; break;
      default: throw std::invalid_argument("EnumFormat::round: deterministic modes only");
    }
    if ((r == hi && hi_over) || (r == lo && lo_over)) return overflow(r < 0, o);
    if (r == 0.0) return neg && f.signed_zero() ? -0.0 : 0.0;
    return r;
  }
};

}  // namespace pasa::test
