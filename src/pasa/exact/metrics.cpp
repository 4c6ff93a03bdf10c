#include "pasa/exact/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "pasa/numeric/double_double.hpp"
#include "pasa/core/error.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/exact/exact_scores.hpp"
#include "pasa/exact/score_rows.hpp"

namespace pasa {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Exact square of a double added to a double-double accumulator (error 3u² per step).
void add_square(DD& acc, double x) { acc = dd_add(acc, two_prod(x, x)); }

// sqrt(num/den) for Eq. 19's ratios of squared norms. A zero denominator (the golden, or the golden's
// deviation from the baseline, exactly zero) gives 0 when the numerator is zero too (the output is exact),
// and +inf otherwise: an exact answer is not reported like an overflow (NaN).
double ratio(DD num, DD den) {
  if (den.hi == 0) return num.hi == 0 ? 0 : kInf;
  return std::sqrt(dd_to_double(dd_div(num, den)));
}

// An output element where the golden is NaN or ±inf (inputs holding NaN/inf): exact when the output holds
// the same special value, else an undefined error.
bool same_special(double o, double g) { return std::isnan(g) ? std::isnan(o) : o == g; }

// Smallest magnitude that rounds (to nearest even) outside the finite range of f, and whether that
// magnitude itself (a tie) overflows: the midpoint between max_finite and the next binade step.
struct OverflowThreshold {
  double t;
  bool tie_overflows;
};
OverflowThreshold overflow_threshold(const Format& f) {
  const double mx = f.max_finite();
  const double half_ulp = std::ldexp(1.0, static_cast<int>(std::ilogb(mx)) - f.p);
  // max_finite has an odd last significand bit for IEEE formats (all ones), so the tie goes up; for the
  // "fn" formats (E4M3FN: max 1.110b·2^8) the last bit is even and the tie stays finite.
  const double mant = std::ldexp(mx, f.p - 1 - static_cast<int>(std::ilogb(mx)));
  return {mx + half_ulp, std::fmod(mant, 2.0) == 1.0};
}

// plain_scores out of line: inlined into score_stats's loops, GCC keeps its accumulators in memory.
[[gnu::noinline]] void score_tile(const double* const* q, const double* kt, std::size_t d, std::size_t n, double* S,
                                  std::size_t ld) {
  exact_scores::plain_scores(q, kt, d, n, S, ld);
}

bool overflows(DD s, const OverflowThreshold& th) {
  const DD a = s.hi < 0 ? dd_neg(s) : s;
  if (a.hi != th.t) return a.hi > th.t;
  return a.lo > 0 || (a.lo == 0 && th.tie_overflows);
}

void check_same_shape(const Tensor& t, const char* what, const Tensor& golden) {
  const Shape& a = t.shape;
  const Shape& g = golden.shape;
  if (!(a == g))
    throw InputError(fmt::format("{} shape ({}, {}, {}, {}) differs from the golden's ({}, {}, {}, {})", what, a.B, a.N,
                                 a.S, a.D, g.B, g.N, g.S, g.D));
  if (t.data.size() != a.size() || golden.data.size() != g.size())
    throw InputError(fmt::format("{} or golden data size does not match its shape", what));
}

// A ratio over the finite output elements, under Metrics::rmse's rule for NaN/inf output elements.
double apply_nonfinite_rule(const Metrics& m, double finite_ratio) {
  if (m.nan_count > 0) return kNaN;
  return m.inf_count > 0 ? kInf : finite_ratio;
}

}  // namespace

Metrics compare_outputs(const Tensor& out, const Tensor& golden, const Tensor& baseline) {
  Metrics m = compare_outputs(out, golden);
  check_same_shape(baseline, "baseline", golden);
  // ‖B − G‖², ‖G‖², and ‖O − G‖² over the finite output elements (the numerator of rmse_finite).
  DD base2, gold2, err2;
  bool base_nonfinite = false;
  for (std::size_t idx = 0; idx < golden.data.size(); ++idx) {
    const double gv = golden.data[idx], bv = baseline.data[idx], o = out.data[idx];
    if (!std::isfinite(gv)) continue;  // a special value of the golden: compared by compare_outputs alone
    if (!std::isfinite(bv)) {           // (inputs holding NaN/inf) the baseline's error is undefined
      base_nonfinite = true;
      continue;
    }
    const DD db = two_sum(bv, -gv);  // exact differences
    base2 = dd_add(base2, dd_mul(db, db));
    add_square(gold2, gv);
    if (std::isfinite(o)) {
      const DD d = two_sum(o, -gv);
      err2 = dd_add(err2, dd_mul(d, d));
    }
  }
  m.rmse_uniform_baseline = base_nonfinite ? kNaN : ratio(base2, gold2);
  m.rmse_centred = base_nonfinite ? kNaN : apply_nonfinite_rule(m, ratio(err2, base2));
  m.skill = 1 - m.rmse_centred;
  return m;
}

Metrics compare_outputs(const Tensor& out, const Tensor& golden) {
  check_same_shape(out, "output", golden);
  const Shape& a = out.shape;
  Metrics m;
  m.rmse_uniform_baseline = m.rmse_centred = m.skill = kNaN;
  m.elements = a.size();
  m.rows = a.B * a.N * a.S;
  DD err2_fin, gold2_fin, dot, out2_fin;
  std::size_t finite_pairs = 0, exact_specials = 0;
  for (std::size_t r = 0; r < m.rows; ++r) {
    bool row_bad = false;
    for (std::size_t x = 0; x < a.D; ++x) {
      const std::size_t idx = r * a.D + x;
      const double o = out.data[idx], gv = golden.data[idx];
      if (!std::isfinite(gv)) {
        if (same_special(o, gv)) {
          ++exact_specials;
          continue;
        }
        ++m.nan_count;  // the error against a NaN/inf golden element is undefined
        row_bad = true;
        continue;
      }
      if (std::isnan(o)) {
        ++m.nan_count;
        row_bad = true;
        continue;
      }
      if (std::isinf(o)) {
        ++m.inf_count;
        row_bad = true;
        continue;
      }
      ++finite_pairs;
      const DD diff = two_sum(o, -gv);  // exact difference
      const DD d2 = dd_mul(diff, diff);
      err2_fin = dd_add(err2_fin, d2);
      add_square(gold2_fin, gv);
      add_square(out2_fin, o);
      dot = dd_add(dot, two_prod(o, gv));
      const double ad = std::abs(dd_to_double(diff));
      m.max_abs_err = std::max(m.max_abs_err, ad);
      if (gv != 0) m.max_rel_err = std::max(m.max_rel_err, ad / std::abs(gv));
    }
    if (row_bad) ++m.rows_with_nonfinite;
  }
  m.rmse_finite = finite_pairs == 0 ? kNaN : ratio(err2_fin, gold2_fin);
  // With every element finite the whole-output ratio is exactly the finite one.
  m.rmse = apply_nonfinite_rule(m, m.rmse_finite);
  const double n = static_cast<double>(m.elements);
  m.nan_pct = 100.0 * static_cast<double>(m.nan_count) / n;
  m.inf_pct = 100.0 * static_cast<double>(m.inf_count) / n;
  m.rows_with_nonfinite_pct = 100.0 * static_cast<double>(m.rows_with_nonfinite) / static_cast<double>(m.rows);
  if (finite_pairs == 0 && exact_specials == 0) m.max_abs_err = m.max_rel_err = kNaN;  // no finite element
  // cos(o, g); with a zero norm: 1 when both are zero (the output is exact), 0 when only one is.
  const double no = std::sqrt(dd_to_double(out2_fin)), ng = std::sqrt(dd_to_double(gold2_fin));
  if (finite_pairs == 0) m.cosine = exact_specials > 0 ? 1.0 : kNaN;
  else if (no > 0 && ng > 0) m.cosine = dd_to_double(dot) / (no * ng);
  else m.cosine = no == ng ? 1.0 : 0.0;
  return m;
}

ScoreStats score_stats(const AttentionInputs& in, const Format& score_format, int threads) {
  validate(in);
  const Shape& qs = in.q.shape;
  const std::size_t Skv = in.k.shape.S, D = qs.D;
  const double scale = in.effective_scale();
  const OverflowThreshold th = overflow_threshold(score_format);
  const double mx = score_format.max_finite();
  std::vector<ScoreStats> part(qs.B * qs.N);
  // The scores are those of dot2_scores (score_rows.hpp), computed as the golden computes them: one plain
  // fp64 GEMM where the pair's dot product is provably exact (then Dot2 returns (q·k, +0) too, see
  // exact_scores.hpp), Dot2 of the pair elsewhere. Rows in groups, keys in L2-sized tiles; every row's
  // scores are then visited in key order, rows in order, as before, so the statistics are the same bits.
  using namespace exact_scores;
  constexpr std::size_t kGroupRows = 32, kKeyTile = 256;
  struct Buffers {
    std::vector<double> kt, s, zero;
  };
  std::mutex pool_m;
  std::vector<std::unique_ptr<Buffers>> pool;  // handed from item to item: no fresh pages per item
  parallel_for(part.size(), threads, [&](std::size_t w) {
    const std::size_t b = w / qs.N, h = w % qs.N;
    const double* K = in.k.head(b, h / in.group());
    const double* Q = in.q.head(b, h);
    std::unique_ptr<Buffers> buf;
    {
      std::lock_guard<std::mutex> lock(pool_m);
      if (!pool.empty()) {
        buf = std::move(pool.back());
        pool.pop_back();
      }
    }
    if (!buf) buf = std::make_unique<Buffers>();
    const std::size_t strips = (Skv + 7) / 8;
    buf->kt.resize(strips * 8 * D);
    buf->s.resize(kGroupRows * Skv);
    buf->zero.assign(D, 0.0);
    strip_keys(K, D, Skv, buf->kt.data());
    const KeyInfo keys(K, Skv, D);
    ScoreStats& st = part[w];
    DD mn{kInf, 0}, mxs{-kInf, 0}, mnu{kInf, 0}, mxu{-kInf, 0};
    for (std::size_t i0 = 0; i0 < qs.S; i0 += kGroupRows) {
      const std::size_t nr = std::min(kGroupRows, qs.S - i0);
      std::size_t jmax = 0;
      for (std::size_t r = 0; r < nr; ++r) jmax = std::max(jmax, visible_end(in, b, i0 + r));
      const double* q[kGroupRows];
      for (std::size_t r = 0; r < kGroupRows; ++r) q[r] = r < nr ? Q + (i0 + r) * D : buf->zero.data();
      for (std::size_t j0 = 0; j0 < jmax; j0 += kKeyTile) {
        const std::size_t nt = std::min(kKeyTile, jmax - j0);
        for (std::size_t c = 0; c < nr; c += kScoreRows)
          score_tile(q + c, buf->kt.data() + j0 * D, D, nt, buf->s.data() + c * Skv + j0, Skv);
      }
      for (std::size_t r = 0; r < nr; ++r) {
        const std::size_t i = i0 + r;
        const std::size_t end = visible_end(in, b, i);
        const GridNorm gq = grid_norm(q[r], D);
        const double* srow = buf->s.data() + r * Skv;
        // visible(in, b, i, j) for j < end: the boolean mask's row, when there is one.
        const std::uint8_t* keep = in.mask.keep.empty() ? nullptr : in.mask.keep.data() + (b * qs.S + i) * Skv;
        for (std::size_t j = 0; j < end; ++j) {
          if (keep && !keep[j]) continue;
          const DD s = exact_pair(gq, keys.grid[j], keys.e[j]) ? DD{srow[j], 0} : dot2_pair(q[r], K + j * D, D);
          const DD sc = dd_mul_d(s, scale);
          ++st.entries;
          if (dd_less(s, mnu)) mnu = s;
          if (dd_less(mxu, s)) mxu = s;
          if (dd_less(sc, mn)) mn = sc;
          if (dd_less(mxs, sc)) mxs = sc;
          st.over_max += std::abs(s.hi) > mx || (std::abs(s.hi) == mx && s.lo * s.hi > 0);
          st.over_max_scaled += std::abs(sc.hi) > mx || (std::abs(sc.hi) == mx && sc.lo * sc.hi > 0);
          st.overflow += overflows(s, th);
          st.overflow_scaled += overflows(sc, th);
        }
      }
    }
    st.min = dd_to_double(mn);
    st.max = dd_to_double(mxs);
    st.min_unscaled = dd_to_double(mnu);
    st.max_unscaled = dd_to_double(mxu);
    std::lock_guard<std::mutex> lock(pool_m);
    pool.push_back(std::move(buf));
  });
  ScoreStats all;
  all.format = score_format.name;
  all.min = all.min_unscaled = kInf;
  all.max = all.max_unscaled = -kInf;
  for (const ScoreStats& p : part) {
    all.entries += p.entries;
    all.over_max += p.over_max;
    all.overflow += p.overflow;
    all.over_max_scaled += p.over_max_scaled;
    all.overflow_scaled += p.overflow_scaled;
    if (p.entries == 0) continue;
    all.min = std::min(all.min, p.min);
    all.max = std::max(all.max, p.max);
    all.min_unscaled = std::min(all.min_unscaled, p.min_unscaled);
    all.max_unscaled = std::max(all.max_unscaled, p.max_unscaled);
  }
  if (all.entries == 0) all.min = all.max = all.min_unscaled = all.max_unscaled = kNaN;
  return all;
}

}  // namespace pasa
