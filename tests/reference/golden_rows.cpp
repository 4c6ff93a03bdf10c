// See golden_rows.hpp. The bound of each row is the one golden_rows.cpp derives (its header comment).
#include "golden_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <mpfr.h>

#include "pasa/exact/score_rows.hpp"
#include "pasa/numeric/double_double.hpp"

namespace pasa::testref {

namespace {

DD scale_of(const AttentionInputs& in) {
  mpfr_t x, tmp;
  mpfr_inits2(256, x, tmp, static_cast<mpfr_ptr>(nullptr));
  if (in.scale != 0) mpfr_set_d(x, in.scale, MPFR_RNDN);
  else mpfr_set_ui(x, static_cast<unsigned long>(in.q.shape.D), MPFR_RNDN), mpfr_rec_sqrt(x, x, MPFR_RNDN);
  DD r;
  r.hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(tmp, x, r.hi, MPFR_RNDN);
  r.lo = mpfr_get_d(tmp, MPFR_RNDN);
  mpfr_clears(x, tmp, static_cast<mpfr_ptr>(nullptr));
  return r;
}

double lse_of(DD m, DD l) {  // log(l) + m at 128 bits, rounded once
  mpfr_t a, b;
  mpfr_inits2(128, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_d(a, l.hi, MPFR_RNDN);
  mpfr_add_d(a, a, l.lo, MPFR_RNDN);
  mpfr_log(a, a, MPFR_RNDN);
  mpfr_set_d(b, m.hi, MPFR_RNDN);
  mpfr_add_d(b, b, m.lo, MPFR_RNDN);
  mpfr_add(a, a, b, MPFR_RNDN);
  const double r = mpfr_get_d(a, MPFR_RNDN);
  mpfr_clears(a, b, static_cast<mpfr_ptr>(nullptr));
  return r;
}

int bits_of(double e) { return e <= 0 ? 999 : static_cast<int>(std::min(999.0, std::floor(-std::log2(e)))); }

}  // namespace

RowGolden golden_row_at_a_time(const AttentionInputs& in) {
  constexpr double u2 = 0x1p-106;
  const Shape& qs = in.q.shape;
  const std::size_t D = qs.D, Sq = qs.S, Skv = in.k.shape.S, G = in.group();
  const DD scale = scale_of(in);
  RowGolden g;
  g.o.assign(qs.size(), 0.0);
  g.lse.assign(qs.B * qs.N * Sq, -std::numeric_limits<double>::infinity());
  g.bound.assign(qs.B * qs.N * Sq, -1.0);
  std::vector<double> shi(Skv), slo(Skv), delta(Skv), nh(D), nc(D);
  std::vector<DD> p(Skv);
  for (std::size_t b = 0; b < qs.B; ++b)
    for (std::size_t h = 0; h < qs.N; ++h) {
      const KeysT keys(in.k, b, h / G);
      const double* V = in.v.head(b, h / G);
      for (std::size_t i = 0; i < Sq; ++i) {
        const std::size_t row = (b * qs.N + h) * Sq + i;
        const std::size_t end = visible_end(in, b, i);
        std::size_t n = 0;
        for (std::size_t j = 0; j < end; ++j) n += visible(in, b, i, j);
        if (n == 0) continue;  // O = 0, lse = -inf
        const double* q = in.q.head(b, h) + i * D;
        const double* pse = pse_row(in, b, h, i);
        const std::uint8_t* sel = select_row(in, b, i);
        dot2_scores(q, keys, end, shi.data(), slo.data());
        const double qn = row_norm(q, D);
        DD m{-std::numeric_limits<double>::infinity(), 0};
        for (std::size_t j = 0; j < end; ++j) {
          DD s = dd_mul(DD{shi[j], slo[j]}, scale);
          delta[j] = std::abs(scale.hi) * dot2_error_bound(D, qn * keys.norm[j]) + 9 * u2 * std::abs(s.hi);
          if (pse) {
            delta[j] += 4 * u2 * (std::abs(s.hi) + std::abs(pse[j]));
            s = dd_add(s, DD{pse[j], 0});
          }
          if (sel && sel[j]) s = DD{in.mask.select_value, 0}, delta[j] = 0;
          shi[j] = s.hi;
          slo[j] = s.lo;
          if (visible(in, b, i, j) && dd_less(m, s)) m = s;
        }
        DD l{0, 0};
        double dmax = 0;
        for (std::size_t j = 0; j < end; ++j) {
          p[j] = DD{0, 0};
          if (!visible(in, b, i, j)) continue;
          const DD t = dd_add(DD{shi[j], slo[j]}, dd_neg(m));
          if (t.hi < kExpDDMin) continue;  // dropped: < 2^-916 of the largest weight
          dmax = std::max(dmax, delta[j] + 3 * u2 * std::abs(t.hi));
          p[j] = exp_dd(t);
          l = dd_add(l, p[j]);
        }
        std::fill(nh.begin(), nh.end(), 0.0);
        std::fill(nc.begin(), nc.end(), 0.0);
        for (std::size_t j = 0; j < end; ++j) {
          if (p[j].hi == 0) continue;
          for (std::size_t x = 0; x < D; ++x) nc[x] += dot2_step(nh[x], p[j].hi, V[j * D + x]) + p[j].lo * V[j * D + x];
        }
        for (std::size_t x = 0; x < D; ++x) g.o[row * D + x] = dd_to_double(dd_div(two_sum(nh[x], nc[x]), l));
        g.lse[row] = lse_of(m, l);
        const double nd = static_cast<double>(n);
        g.bound[row] = 2.2 * (1.01 * dmax + kExpDDRelErr) + 1.1 * (3 * nd * (nd + 2) + 4 * nd + 16) * u2;
      }
    }
  // golden_attention's aggregation: per (batch, head, block of rows) the least bits; a block under 64 bits
  // would be redone with MPFR.
  for (std::size_t bh = 0; bh < qs.B * qs.N; ++bh)
    for (std::size_t i0 = 0; i0 < Sq; i0 += kGoldenRowBlock) {
      int bits = 1000;
      for (std::size_t i = i0; i < std::min(Sq, i0 + kGoldenRowBlock); ++i) {
        const double E = g.bound[bh * Sq + i];
        if (E < 0) continue;
        bits = std::min(bits, bits_of(E));
        g.error_bound = std::max(g.error_bound, E);
      }
      g.fallback = g.fallback || bits < 64;
      g.guaranteed_bits = std::min(g.guaranteed_bits, bits);
    }
  return g;
}

}  // namespace pasa::testref
