// The golden's fast path (fast_rows, golden_internal.hpp). golden_finite.cpp runs two paths over the same
// work items, blocks of kRowBlock query rows of one (batch, head), each writing only its own rows, so the
// result never depends on the thread count:
// - fast: double-double scores (exact fp64 ones where provably exact), exp and sums with an a posteriori
//   bound per row (derivation below; how it is computed and why it is fast: docs/golden.md);
// - plain MPFR at precision_bits: used when fast = false, and for any fast block whose bound is < 64 bits
//   or whose magnitudes could leave the double exponent range.
//
// Fast-path bound, per row (u = 2^-53, n visible keys, S = scale):
//   score error   δ_j <= S·dot2_error_bound(D, ‖q‖‖k_j‖) + 9u²|s_j|   (Dot2, then ×scale in dd: 8u² + scale's u²;
//                 kept also where q·k_j is computed exactly in fp64, so that the bits stay those of Dot2)
//                 + 4u²(|s_j| + |pse_j|) with a position bias ([IFA]: s_j = q·k_j·scale + pse_j, one dd_add);
//                 δ_j = 0 for a key masked by select (its score is the constant select_value, exact)
//   shifted t_j = s_j - m: δ_j + 3u²|t_j| (AccurateDWPlusDW); the error of m itself is a common factor
//   exp(-δm) of every weight and cancels in N/L.  Weight error ε_p <= 1.01·max_j (δ_j + 3u²|t_j|) + kExpDDRelErr
//   over the keys whose weight is kept.
//   N_d = Σ p_j v_jd: Dot2-style with TwoProd(p_hi, v) and p_lo·v rounded. The error terms (TwoSum errors
//   <= n·u·Σp|v|, TwoProd errors and p_lo·v <= 2u·Σp|v|) are summed with 3 additions per step (γ_3n), and
//   p_lo·v itself errs by <= u²|p v|: in all <= (3n(n+2) + n)·u²·Σ p|v| (to first order).
//   L = Σ p_j by dd_add: <= 3n·u²·L.  O = N / L by dd_div: 16u².
//   So |O_hat - O| <= E·Σp|v|/Σp with E = 2.2·ε_p + 1.1·(3n(n+2) + 4n + 16)·u², bits = floor(-log2 E)
//   (the factors 2.2 and 1.1 cover the second-order terms: ε_p, n·u < 2^-30 whenever bits >= 64).
//   Weights with t_j < kExpDDMin (< 2^-916) are dropped: an absolute error < 2^-900·max|v| at most.
// lse = m + log L (evaluated with MPFR at 128 bits from the dd values): its absolute error is at most
// 2·max δ + ε_p + 3n·u² (reported through the same bits, relative to 1 + |lse|).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <mpfr.h>

#include "pasa/core/assert.hpp"
#include "pasa/core/compiler.hpp"
#include "pasa/exact/golden_internal.hpp"
#include "pasa/exact/score_rows.hpp"

namespace pasa::golden_detail {

namespace {

using namespace exact_scores;

double lse_from_dd(DD m, DD l) {
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

// ---- Fast path -------------------------------------------------------------------------------------------
// Rows are computed up to kGroup at a time (rows of the G query heads of one KV head, all sharing its keys
// and values) against tiles of kKeyTile keys, in two passes over the keys, because every weight waits for
// its row's maximum m:
//   pass 1, over K a tile at a time: scores (exact fp64 GEMM, Dot2 where not provably exact), scaled, kept
//     whole (hi, lo) for pass 2; with pse and select, the running maximum m of each row;
//   pass 2, over V a tile at a time: each kept weight e^(s − m) and its bound, Σp and Σp·v carried from
//     tile to tile.
// The tile's keys and values and the tile's scores and weights of all rows stay in L1/L2 while they are
// used (the former evaluation swept whole key rows of several arrays per row, out of cache from about
// Skv = 4096 on). Every row's arithmetic is unchanged, element for element and in the same order
// (the sums in key order, carried across tiles; the maximum the same key as one scan's, see below), so the
// results are bit-identical to the row-at-a-time evaluation (tests/exact/test_golden_tiles.cpp checks it
// against that evaluation, tests/reference/golden_rows.cpp; pasa-bench-golden against its own copy).

// N = Σ_j p_j v_j for rows r < nr (weights ph/pl[r·ld + j], 0 = skipped) into nh/nc[r·d + x], each
// element's sum taken in key order exactly as the row-at-a-time loop did (Dot2-style: TwoProd(p_hi, v),
// TwoSum into nh, the errors and p_lo·v into nc), so the bits are the same; 8 columns of every row are
// held in registers while j runs, so V is read once per 8 columns for all rows, accumulators never.
// With `more`, the sums continue from nh/nc_out (keys taken a tile at a time: the same operations in the
// same order as one call over all keys).
void pv_rows(const double* ph, const double* pl, std::size_t ld, std::size_t nr, const double* V, std::size_t d,
             std::size_t jend, double* nh_out, double* nc_out, bool more = false) {
  const std::size_t d8 = d / 8 * 8;
  const v8d one = v8d{} + 1.0;
  for (std::size_t x = 0; x < d8; x += 8) {
    v8d nh[kRows] = {}, nc[kRows] = {};
    if (more)
      for (std::size_t r = 0; r < nr; ++r) {
        std::memcpy(&nh[r], nh_out + r * d + x, sizeof(v8d));
        std::memcpy(&nc[r], nc_out + r * d + x, sizeof(v8d));
      }
    for (std::size_t j = 0; j < jend; ++j) {
      v8d v;
      std::memcpy(&v, V + j * d + x, sizeof v);
      for (std::size_t r = 0; r < kRows; ++r) {
        if (r >= nr) break;
        const double a = ph[r * ld + j];
        if (a == 0) continue;
        const double b = pl[r * ld + j];
        // dot2_step(nh, a, v) + b·v, lane by lane. Three of its nine additions are x·1 ± y on the FMA units
        // (the same rounding: RN(x·1 ± y) = RN(x ± y)), so that they share the four FP pipes of a Zen core
        // (two multiply-add, two add) evenly with the three products: 4.5 -> 3 cycles per step.
        const v8d av = {a, a, a, a, a, a, a, a};
        const v8d p = av * v;
        const v8d pe = fms(av, v, p);
        const v8d s = nh[r] + p;
        const v8d bb = s - nh[r];
        const v8d e = (nh[r] - fms(s, one, bb)) + fms(p, one, bb);
        nh[r] = s;
        nc[r] += fma8(e, one, pe) + b * v;
      }
    }
    for (std::size_t r = 0; r < nr; ++r) {
      std::memcpy(nh_out + r * d + x, &nh[r], sizeof(v8d));
      std::memcpy(nc_out + r * d + x, &nc[r], sizeof(v8d));
    }
  }
  for (std::size_t x = d8; x < d; ++x)
    for (std::size_t r = 0; r < nr; ++r) {
      double h = more ? nh_out[r * d + x] : 0, c = more ? nc_out[r * d + x] : 0;
      for (std::size_t j = 0; j < jend; ++j) {
        const double a = ph[r * ld + j];
        if (a != 0) c += dot2_step(h, a, V[j * d + x]) + pl[r * ld + j] * V[j * d + x];
      }
      nh_out[r * d + x] = h;
      nc_out[r * d + x] = c;
    }
}

// max(0, x_0, ..., x_n-1) (x finite; of |x_i| with `abs`): lane maxima of 8 columns, then their maximum; a
// maximum of finite values is the same in any order. (The scalar std::max chain does not vectorise: it was
// half of a decode part's time.)
double max_from_zero(const double* x, std::size_t n, bool abs = false) {
  double lane[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t l = 0; l < 8; ++l) {
      const double a = abs ? std::abs(x[i + l]) : x[i + l];
      lane[l] = lane[l] < a ? a : lane[l];
    }
  double m = 0;
  for (; i < n; ++i) m = std::max(m, abs ? std::abs(x[i]) : x[i]);
  for (double a : lane) m = std::max(m, a);
  return m;
}

}  // namespace

void fast_rows(Problem& P, std::size_t b, const RowRef* rows, std::size_t nr, const KeyInfo& kg, Scratch& sc,
               double* bound, KvTiles& kv, KeyInfo* build, double* max_v) {
  const AttentionInputs& in = P.in;
  const std::size_t D = in.q.shape.D, Sq = in.q.shape.S, Skv = sc.skv, T = kKeyTile;
  const double* q[kGroup];
  GridNorm qg[kGroup];
  std::size_t n[kGroup], end[kGroup], jend = 0;
  bool active[kGroup];
  const double* pse[kGroup];
  const std::uint8_t* sel[kGroup];
  for (std::size_t r = 0; r < sc.rows; ++r) {
    active[r] = false;
    q[r] = sc.zero.data();
    if (r >= nr) continue;
    bound[r] = -1;  // fully masked (no bound) unless computed below
    const std::size_t row = (b * in.q.shape.N + rows[r].h) * Sq + rows[r].i;
    n[r] = visible_keys(in, b, rows[r].i, sc.vis[r]);
    if (n[r] == 0) {
      write_masked_row(P.g, row - P.row0, D);
      continue;
    }
    active[r] = true;
    const std::size_t q0 = in.q.index(b, rows[r].h, rows[r].i);
    if (in.q.is_narrow()) {
      in.q.read(q0, D, sc.qrows.data() + r * D);
      q[r] = sc.qrows.data() + r * D;
    } else {
      q[r] = in.q.data.data() + q0;
    }
    qg[r] = grid_norm(q[r], D);
    end[r] = sc.vis[r].size();
    jend = std::max(jend, end[r]);
    pse[r] = pse_row(in, b, rows[r].h, rows[r].i);
    sel[r] = select_row(in, b, rows[r].i);
  }
  if (jend == 0 && !build) return;
  const DD sc_dd = P.scale_dd;
  const double abs_scale = std::abs(P.scale_dd.hi);
  // f(r, len, ths, tls, vr) for every active row r that sees keys of the tile [j0, j0 + nt): len of them,
  // its tile rows of scores and its visibility flags from j0.
  auto each_row = [&](std::size_t j0, std::size_t nt, auto&& f) {
    for (std::size_t r = 0; r < nr; ++r)
      if (active[r] && j0 < end[r])
        f(r, std::min(end[r], j0 + nt) - j0, sc.ths.data() + r * T, sc.tls.data() + r * T, sc.vis[r].data() + j0);
  };
  // The scaled scores q·k·scale of a tile of nt keys from j0 (keys Kt) into ths/tls, every active row's keys
  // below its end: the plain fp64 GEMM, then Dot2 for the pairs it may not have computed exactly (each score
  // on its own: the tiles change no bit), then × scale in dd. Pass 2 calls it again where the scores are not
  // held: the same operations on the same values, so the same bits.
  auto tile_scores = [&](std::size_t j0, std::size_t nt, const double* Kt) {
    strip_keys(Kt, D, nt, sc.kt.data());
    for (std::size_t c = 0; c < nr; c += kRows) plain_scores(q + c, sc.kt.data(), D, nt, sc.ths.data() + c * T, T);
    each_row(j0, nt, [&](std::size_t r, std::size_t len, double* ths, double* tls, const unsigned char* vr) {
      const double* kgrid = kg.grid.data() + j0;
      const int* ke = kg.e.data() + j0;
      int inexact = 0;
PASA_IVDEP
      for (std::size_t j = 0; j < len; ++j) {
        inexact |= !exact_pair(qg[r], kgrid[j], ke[j]);
        tls[j] = 0;
      }
      if (inexact)
        for (std::size_t j = 0; j < len; ++j)
          if (vr[j] && !exact_pair(qg[r], kgrid[j], ke[j])) {
            const DD s = dot2_pair(q[r], Kt + j * D, D);
            ths[j] = s.hi;
            tls[j] = s.lo;
          }
      for (std::size_t j = 0; j < len; ++j) {
        const DD s = dd_mul(DD{ths[j], tls[j]}, sc_dd);
        ths[j] = s.hi;
        tls[j] = s.lo;
      }
    });
  };
  // Pass 1. m: the first visible score that no later one exceeds in (hi, lo) order, what one sequential
  // scan with dd_less over the row keeps. Per tile: the largest hi (a vectorised maximum), then the scan
  // over the tile's keys holding it, giving the tile's first key of its largest (hi, lo); that replaces m
  // when dd_less(m, it): the same key as one scan over the row (a key replaces the scan's maximum exactly
  // when it exceeds every earlier key).
  DD m[kGroup];
  for (std::size_t r = 0; r < nr; ++r) m[r] = DD{-std::numeric_limits<double>::infinity(), 0};
  const std::size_t kend = build ? in.k.shape.S : jend;  // (a build takes every key's data)
  for (std::size_t j0 = 0; j0 < kend; j0 += T) {
    const double* Kt = kv.keys(j0, std::min(T, kend - j0));
    if (build) build->add(Kt, j0, std::min(T, kend - j0), D);
    if (j0 >= jend) continue;
    const std::size_t nt = std::min(T, jend - j0);
    tile_scores(j0, nt, Kt);
    each_row(j0, nt, [&](std::size_t r, std::size_t len, double* ths, double* tls, const unsigned char* vr) {
      if (sc.held) {  // (kept for pass 2)
        std::copy_n(ths, len, sc.shi.data() + r * Skv + j0);
        std::copy_n(tls, len, sc.slo.data() + r * Skv + j0);
      }
      // The scores themselves (pse, select) for the maximum.
      if (pse[r])
        for (std::size_t j = 0; j < len; ++j) {
          const DD s = dd_add(DD{ths[j], tls[j]}, DD{pse[r][j0 + j], 0});
          ths[j] = s.hi;
          tls[j] = s.lo;
        }
      if (sel[r])
        for (std::size_t j = 0; j < len; ++j)
          if (sel[r][j0 + j]) {
            ths[j] = in.mask.select_value;
            tls[j] = 0;
          }
      // (8 lane maxima: the maximum is the same in any order, and only compared with ==, so ±0 do not matter)
      double lane[8];
      std::fill_n(lane, 8, -std::numeric_limits<double>::infinity());
      std::size_t j8 = 0;
      for (; j8 + 8 <= len; j8 += 8)
        for (std::size_t l = 0; l < 8; ++l) lane[l] = vr[j8 + l] && ths[j8 + l] > lane[l] ? ths[j8 + l] : lane[l];
      double top = -std::numeric_limits<double>::infinity();
      for (; j8 < len; ++j8) top = vr[j8] && ths[j8] > top ? ths[j8] : top;
      for (double x : lane) top = std::max(top, x);
      DD tm{-std::numeric_limits<double>::infinity(), 0};
      for (std::size_t j = 0; j < len; ++j)
        if (vr[j] && ths[j] == top && dd_less(tm, DD{ths[j], tls[j]})) tm = DD{ths[j], tls[j]};
      if (dd_less(m[r], tm)) m[r] = tm;
    });
  }
  // Pass 2, a tile at a time: the scores again from the scaled ones (pse and select redone, the same
  // operations), their bounds, the kept weights, then L = Σp and N = Σp·v, each row's sums in key order
  // (the tiles continue them). Weights of keys a row does not see (or drops) are 0.
  DD l[kGroup];
  double dmax[kGroup];
  for (std::size_t r = 0; r < kGroup; ++r) l[r] = DD{0, 0}, dmax[r] = 0;
  PASA_ASSERT(build == nullptr || !kv.whole());
  double vmax = 0;
  for (std::size_t j0 = 0; j0 < kend; j0 += T) {
    const std::size_t cnt = std::min(T, kend - j0);
    const double* Vt = kv.values(j0, cnt);
    if (max_v) vmax = std::max(vmax, max_from_zero(Vt, cnt * D, true));
    if (j0 >= jend) continue;
    const std::size_t nt = std::min(T, jend - j0);
    if (!sc.held) tile_scores(j0, nt, kv.keys(j0, nt));  // (into ths/tls, read below in place of shi/slo)
    for (std::size_t r = 0; r < nr; ++r) {
      double* phi = sc.phi.data() + r * T;
      double* plo = sc.plo.data() + r * T;
      std::fill_n(phi, nt, 0.0);
      std::fill_n(plo, nt, 0.0);
      if (!active[r] || j0 >= end[r]) continue;
      const std::size_t len = std::min(end[r], j0 + nt) - j0;
      double* ths = sc.ths.data() + r * T;
      double* tls = sc.tls.data() + r * T;
      const double* shi = sc.held ? sc.shi.data() + r * Skv + j0 : ths;  // (not held: ths itself, each
      const double* slo = sc.held ? sc.slo.data() + r * Skv + j0 : tls;  // element read before it is written)
      const unsigned char* vr = sc.vis[r].data() + j0;
      const double* knorm = kg.norm.data() + j0;
      const double qn = qg[r].norm;
      double* delta = sc.delta.data();
      // Scores and their error bounds, every key below end (the invisible ones are ignored later).
      for (std::size_t j = 0; j < len; ++j) {
        delta[j] = abs_scale * dot2_error_bound(D, qn * knorm[j]) + 9 * kU2 * std::abs(shi[j]);
        ths[j] = shi[j];
        tls[j] = slo[j];
      }
      if (pse[r])
        for (std::size_t j = 0; j < len; ++j) {
          // [IFA] q·k·scale + pse: one dd_add (relative error < 3u² of the sum; 4u²(|s| + |pse|) covers it)
          delta[j] += 4 * kU2 * (std::abs(ths[j]) + std::abs(pse[r][j0 + j]));
          const DD s = dd_add(DD{ths[j], tls[j]}, DD{pse[r][j0 + j], 0});
          ths[j] = s.hi;
          tls[j] = s.lo;
        }
      if (sel[r])
        for (std::size_t j = 0; j < len; ++j)
          if (sel[r][j0 + j]) {  // masked by select: the score IS the constant (exact)
            ths[j] = in.mask.select_value;
            tls[j] = 0;
            delta[j] = 0;
          }
      // Shifted scores t = s − m of the kept keys (visible, t.hi >= kExpDDMin: a smaller weight is
      // < 2^-916 relative to the maximum one and dropped, see the bound); the others get t = 0 and weight 0.
      const DD mneg = dd_neg(m[r]);
      double* keepw = sc.keep.data();
PASA_IVDEP  // (here and below: the scratch rows are distinct vectors, they never overlap)
      for (std::size_t j = 0; j < len; ++j) {
        const DD t = dd_add(DD{ths[j], tls[j]}, mneg);
        const bool keep = (vr[j] != 0) & (t.hi >= kExpDDMin);
        const double dj = delta[j] + 3 * kU2 * std::abs(t.hi);
        delta[j] = keep ? dj : 0.0;  // from here on: the bound of the kept weight's argument
        sc.thi[j] = keep ? t.hi : 0.0;
        sc.tlo[j] = keep ? t.lo : 0.0;
        keepw[j] = keep ? 1.0 : 0.0;
      }
      dmax[r] = std::max(dmax[r], max_from_zero(delta, len));
      exp_dd_n(sc.thi.data(), sc.tlo.data(), sc.ehi.data(), sc.elo.data(), len);
      const double* ehi = sc.ehi.data();
      const double* elo = sc.elo.data();
PASA_IVDEP
      for (std::size_t j = 0; j < len; ++j) {
        phi[j] = keepw[j] != 0 ? ehi[j] : 0.0;
        plo[j] = keepw[j] != 0 ? elo[j] : 0.0;
      }
    }
    // L = Σ_j p_j in key order per row, the rows' dependency chains interleaved (kept weights are > 0).
    for (std::size_t j = 0; j < nt; ++j)
      for (std::size_t r = 0; r < nr; ++r) {
        const double ph = sc.phi[r * T + j];
        if (ph != 0) l[r] = dd_add(l[r], DD{ph, sc.plo[r * T + j]});
      }
    // N = Σ_j p_j v_j: 8 columns of kRows rows in registers while j runs over the tile's keys, the sums
    // carried from tile to tile (pv_rows with `more`).
    for (std::size_t c = 0; c < nr; c += kRows)
      pv_rows(sc.phi.data() + c * T, sc.plo.data() + c * T, T, std::min(kRows, nr - c), Vt, D, nt,
              sc.nh.data() + c * D, sc.nc.data() + c * D, j0 > 0);
  }
  if (max_v) *max_v = vmax;
  for (std::size_t r = 0; r < nr; ++r) {
    if (!active[r]) continue;
    const std::size_t row = (b * in.q.shape.N + rows[r].h) * Sq + rows[r].i;
    const double* nh = sc.nh.data() + r * D;
    const double* nc = sc.nc.data() + r * D;
    double* o = P.g.o.data.data() + (row - P.row0) * D;
    for (std::size_t x = 0; x < D; ++x) o[x] = dd_to_double(dd_div(two_sum(nh[x], nc[x]), l[r]));
    P.g.lse[row - P.row0] = lse_from_dd(m[r], l[r]);
    const double nd = static_cast<double>(n[r]);
    const double eps_p = 1.01 * dmax[r] + kExpDDRelErr;
    const double E = 2.2 * eps_p + 1.1 * (3 * nd * (nd + 2) + 4 * nd + 16) * kU2;
    bound[r] = E;
  }
}

}  // namespace pasa::golden_detail
