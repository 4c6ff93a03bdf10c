#include "pasa/exact/metrics.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "pasa/core/memory.hpp"
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

void check_same_shape(const Tensor& t, const char* what, const Shape& g) {
  const Shape& a = t.shape;
  if (!(a == g))
    throw InputError(fmt::format("{} shape ({}, {}, {}, {}) differs from the golden's ({}, {}, {}, {})", what, a.B, a.N,
                                 a.S, a.D, g.B, g.N, g.S, g.D));
  if (t.data.size() != a.size()) throw InputError(fmt::format("{} or golden data size does not match its shape", what));
}
void check_same_shape(const Tensor& t, const char* what, const Tensor& golden) {
  check_same_shape(t, what, golden.shape);
  if (golden.data.size() != golden.shape.size())
    throw InputError(fmt::format("{} or golden data size does not match its shape", what));
}

// A ratio over the finite output elements, under Metrics::rmse's rule for NaN/inf output elements.
double apply_nonfinite_rule(const Metrics& m, double finite_ratio) {
  if (m.nan_count > 0) return kNaN;
  return m.inf_count > 0 ? kInf : finite_ratio;
}


// The ratios and percentages of Metrics from the sums over the finite pairs and the counts.
void finish_metrics(Metrics& m, DD err2_fin, DD gold2_fin, DD out2_fin, DD dot, std::size_t finite_pairs,
                    std::size_t exact_specials) {
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
}

// One row's scores s_j (j < end, where keep[j], or all without a mask) folded into a head's statistics,
// with the results of the scalar scan
//   for j: sc = dd_mul_d(s, scale); ++entries; if (dd_less(s, mnu)) mnu = s; if (dd_less(mxu, s)) mxu = s;
//          (the same for sc with mn, mxs); the four threshold counts
// bit for bit, in passes over 8 keys at a time: s in arrays (the plain GEMM's value where the pair is
// exact, Dot2 elsewhere), sc lane by lane with dd_mul_d's operations (FMA for the product's error, no
// contraction elsewhere: the same roundings as the scalar code), the counts as sums of lane masks. The
// extremes: a scan keeps the FIRST element of the least (hi, lo) class that is below the running value,
// so it ends with the running value or the row's first least element, whichever is lower (dd_less); that
// element is found as the least hi (lane minima) and an ordered scan of the keys holding it. This needs
// an order: a row holding NaN (inputs with NaN/inf) takes the scalar scan itself.
using exact_scores::v8d;
typedef long v8l __attribute__((vector_size(64)));
constexpr std::size_t kLanes = 8;

struct RowScratch {
  std::vector<double> shi, slo, chi, clo, vis;  // padded to whole vectors (vis 0 in the padding)
  void resize(std::size_t n) {
    const std::size_t m = (n + kLanes - 1) / kLanes * kLanes;
    for (auto* v : {&shi, &slo, &chi, &clo, &vis}) v->assign(m, 0.0);
  }
};

inline v8d load8(const double* p) {
  v8d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(double* p, v8d v) { std::memcpy(p, &v, sizeof v); }
inline v8d splat(double x) { return v8d{x, x, x, x, x, x, x, x}; }
inline long lane_sum(v8l v) {
  long t = 0;
  for (std::size_t l = 0; l < kLanes; ++l) t += v[l];
  return t;
}

template <class Score>
void row_stats(ScoreStats& st, DD& mnu, DD& mxu, DD& mn, DD& mxs, RowScratch& w, const double* srow, std::size_t end,
               const std::uint8_t* keep, const exact_scores::GridNorm& gq, const exact_scores::KeyInfo& keys, const Score& score,
               double scale, double mx, const OverflowThreshold& th) {
  using exact_scores::exact_pair;
  double* shi = w.shi.data();
  double* slo = w.slo.data();
  double* chi = w.chi.data();
  double* clo = w.clo.data();
  double* vis = w.vis.data();
  const std::size_t padded = (end + kLanes - 1) / kLanes * kLanes;
  std::memcpy(shi, srow, end * sizeof(double));
  std::fill(shi + end, shi + padded, 0.0);
  std::fill(slo, slo + padded, 0.0);
  for (std::size_t j = 0; j < padded; ++j) vis[j] = j < end && !(keep && !keep[j]) ? 1.0 : 0.0;
  for (std::size_t j = 0; j < end; ++j)
    if (!exact_pair(gq, keys.grid[j], keys.e[j])) {
      const DD s = score(j);
      shi[j] = s.hi;
      slo[j] = s.lo;
    }
  // sc = dd_mul_d(s, scale), the counts, the lane extremes of hi, and whether anything is NaN.
  const v8d vscale = splat(scale), vmx = splat(mx), vt = splat(th.t), zero = splat(0.0);
  const v8l tie = th.tie_overflows ? v8l{} - 1 : v8l{};
  v8l entries{}, over_max{}, over_max_scaled{}, overflow{}, overflow_scaled{}, nan{};
  v8d smin = splat(kInf), smax = splat(-kInf), cmin = splat(kInf), cmax = splat(-kInf);
  auto over = [&](v8d hi, v8d lo) {  // |s.hi| > mx || (|s.hi| == mx && s.lo * s.hi > 0)
    const v8d ah = hi < zero ? -hi : hi;
    return (ah > vmx) | ((ah == vmx) & (lo * hi > zero));
  };
  auto ovf = [&](v8d hi, v8d lo) {  // overflows(): |s| against the threshold, the tie by the low word
    const v8d ah = hi < zero ? -hi : hi, al = hi < zero ? -lo : lo;
    return (ah != vt) ? (ah > vt) : ((al > zero) | ((al == zero) & tie));
  };
  for (std::size_t j = 0; j < padded; j += kLanes) {
    const v8d sh = load8(shi + j), sl = load8(slo + j);
    const v8l v = load8(vis + j) != zero;
    const v8d p = sh * vscale;  // dd_mul_d: two_prod, the low word's product, fast_two_sum
    const v8d e = exact_scores::fms(sh, vscale, p) + sl * vscale;
    const v8d hi = p + e;
    const v8d lo = e - (hi - p);
    store8(chi + j, hi);
    store8(clo + j, lo);
    nan |= (sh != sh) | (sl != sl) | (hi != hi) | (lo != lo);
    entries -= v;
    over_max -= v & over(sh, sl);
    over_max_scaled -= v & over(hi, lo);
    overflow -= v & ovf(sh, sl);
    overflow_scaled -= v & ovf(hi, lo);
    smin = (v & (sh < smin)) ? sh : smin;
    smax = (v & (sh > smax)) ? sh : smax;
    cmin = (v & (hi < cmin)) ? hi : cmin;
    cmax = (v & (hi > cmax)) ? hi : cmax;
  }
  bool has_nan = false;
  for (std::size_t l = 0; l < kLanes; ++l) has_nan |= nan[l] != 0;
  if (has_nan) {  // the scalar scan, as it always was
    for (std::size_t j = 0; j < end; ++j) {
      if (vis[j] == 0) continue;
      const DD s{shi[j], slo[j]}, sc{chi[j], clo[j]};
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
    return;
  }
  const long n = lane_sum(entries);
  st.entries += static_cast<std::size_t>(n);
  st.over_max += static_cast<std::size_t>(lane_sum(over_max));
  st.over_max_scaled += static_cast<std::size_t>(lane_sum(over_max_scaled));
  st.overflow += static_cast<std::size_t>(lane_sum(overflow));
  st.overflow_scaled += static_cast<std::size_t>(lane_sum(overflow_scaled));
  if (n == 0) return;
  double tops[4] = {kInf, -kInf, kInf, -kInf};  // least and greatest hi of s, then of sc
  for (std::size_t l = 0; l < kLanes; ++l) {
    tops[0] = smin[l] < tops[0] ? smin[l] : tops[0];
    tops[1] = smax[l] > tops[1] ? smax[l] : tops[1];
    tops[2] = cmin[l] < tops[2] ? cmin[l] : tops[2];
    tops[3] = cmax[l] > tops[3] ? cmax[l] : tops[3];
  }
  // The row's first least (greatest) element, among the visible keys whose hi is the least (greatest);
  // vectors without such a key are skipped with one comparison.
  DD best[4];
  bool found[4] = {};
  const double* his[4] = {shi, shi, chi, chi};
  const double* los[4] = {slo, slo, clo, clo};
  for (int k = 0; k < 4; ++k) {
    const v8d top = splat(tops[k]);
    for (std::size_t j = 0; j < padded; j += kLanes) {
      const v8l hit = (load8(vis + j) != zero) & (load8(his[k] + j) == top);
      bool any = false;
      for (std::size_t l = 0; l < kLanes; ++l) any |= hit[l] != 0;
      if (!any) continue;
      for (std::size_t l = 0; l < kLanes; ++l) {
        if (!hit[l]) continue;
        const DD e{his[k][j + l], los[k][j + l]};
        if (!found[k] || (k % 2 == 0 ? dd_less(e, best[k]) : dd_less(best[k], e))) best[k] = e;
        found[k] = true;
      }
    }
  }
  if (dd_less(best[0], mnu)) mnu = best[0];
  if (dd_less(mxu, best[1])) mxu = best[1];
  if (dd_less(best[2], mn)) mn = best[2];
  if (dd_less(mxs, best[3])) mxs = best[3];
}

}  // namespace

Metrics compare_outputs(const Tensor& out, const Tensor& golden, const Tensor& baseline) {
  return compare_outputs(std::vector<const Tensor*>{&out}, golden, baseline)[0];
}

namespace {

// One pass over rows [0, rows) of a chunk (golden `gold`, baseline `base` or nullptr, the outputs' rows at
// od[a]) for K outputs (K a constant, so that the sums stay in registers), continuing the sums in `out` and,
// with `base`, the baseline's sums ‖B − G‖² and ‖G‖² over the elements where both are finite. Each sum is
// the same operations in the same element order as in separate passes or a pass over the whole output
// (same bits, however the rows are chunked); the sums of different outputs are independent chains of
// dependent double-double additions, which the processor overlaps.
template <std::size_t K>
void sums_pass(const double* const* od, const double* gold, const double* base, std::size_t rows, std::size_t D,
               detail::OutputSums* out, DD& base2, DD& gold2, bool& base_nonfinite) {
  detail::OutputSums acc[K];
  for (std::size_t a = 0; a < K; ++a) acc[a] = out[a];
  for (std::size_t r = 0; r < rows; ++r) {
    bool row_bad[K] = {};
    for (std::size_t x = 0; x < D; ++x) {
      const std::size_t idx = r * D + x;
      const double gv = gold[idx];
      const bool gfin = std::isfinite(gv);
      if (base && gfin) {
        const double bv = base[idx];
        if (std::isfinite(bv)) {
          const DD db = two_sum(bv, -gv);  // exact differences
          base2 = dd_add(base2, dd_mul(db, db));
          add_square(gold2, gv);
        } else {  // (inputs holding NaN/inf) the baseline's error is undefined
          base_nonfinite = true;
        }
      }
      auto step = [&](detail::OutputSums& c, bool& bad, double o) {
        if (!gfin) {
          if (same_special(o, gv)) {
            ++c.exact_specials;
            return;
          }
          ++c.nan_count;  // the error against a NaN/inf golden element is undefined
          bad = true;
          return;
        }
        if (std::isnan(o)) {
          ++c.nan_count;
          bad = true;
          return;
        }
        if (std::isinf(o)) {
          ++c.inf_count;
          bad = true;
          return;
        }
        ++c.finite_pairs;
        const DD diff = two_sum(o, -gv);  // exact difference
        c.err2 = dd_add(c.err2, dd_mul(diff, diff));
        add_square(c.gold2, gv);
        add_square(c.out2, o);
        c.dot = dd_add(c.dot, two_prod(o, gv));
        const double ad = std::abs(dd_to_double(diff));
        c.max_abs_err = std::max(c.max_abs_err, ad);
        if (gv != 0) c.max_rel_err = std::max(c.max_rel_err, ad / std::abs(gv));
      };
      // Unrolled over the outputs (constant indices), so that their sums stay in registers.
      [&]<std::size_t... I>(std::index_sequence<I...>) { (step(acc[I], row_bad[I], od[I][idx]), ...); }(std::make_index_sequence<K>{});
    }
    for (std::size_t a = 0; a < K; ++a) acc[a].rows_with_nonfinite += row_bad[a];
  }
  for (std::size_t a = 0; a < K; ++a) out[a] = acc[a];
}

}  // namespace

OutputComparison::OutputComparison(std::vector<const Tensor*> outs, const Shape& shape, int threads)
    : outs_(std::move(outs)), shape_(shape), threads_(threads), sums_(outs_.size()) {
  for (const Tensor* o : outs_) check_same_shape(*o, "output", shape_);
}

void OutputComparison::add(std::size_t row0, std::size_t rows, const double* golden, const double* baseline) {
  const std::size_t k = outs_.size(), D = shape_.D;
  if (row0 != next_row_ || rows > shape_.B * shape_.N * shape_.S - row0)
    throw std::logic_error("OutputComparison::add: rows out of order");
  next_row_ += rows;
  std::vector<const double*> od(k);
  for (std::size_t a = 0; a < k; ++a) od[a] = outs_[a]->data.data() + row0 * D;
  if (k > 0 && parallel_width(threads_) > 1) {
    // A pass per output and one for the baseline, side by side (the last problem of a sweep has every core).
    parallel_for(k + 1, threads_, [&](std::size_t i) {
      DD unused2, unused_gold2;
      bool unused_nonfinite = false;
      if (i == k) sums_pass<0>(nullptr, golden, baseline, rows, D, nullptr, base2_, gold2_, base_nonfinite_);
      else sums_pass<1>(od.data() + i, golden, nullptr, rows, D, sums_.data() + i, unused2, unused_gold2, unused_nonfinite);
    });
    return;
  }
  // Up to 3 outputs per pass (the paper's sweeps have 3 algorithms); the baseline's sums in the first.
  std::size_t done = 0;
  do {
    const std::size_t n = std::min<std::size_t>(3, k - done);
    const double* b = done == 0 ? baseline : nullptr;
    detail::OutputSums* s = sums_.data() + done;
    if (n == 3) sums_pass<3>(od.data() + done, golden, b, rows, D, s, base2_, gold2_, base_nonfinite_);
    else if (n == 2) sums_pass<2>(od.data() + done, golden, b, rows, D, s, base2_, gold2_, base_nonfinite_);
    else if (n == 1) sums_pass<1>(od.data() + done, golden, b, rows, D, s, base2_, gold2_, base_nonfinite_);
    else sums_pass<0>(od.data() + done, golden, b, rows, D, s, base2_, gold2_, base_nonfinite_);
    done += n;
  } while (done < k);
}

std::vector<Metrics> OutputComparison::finish() const {
  if (next_row_ != shape_.B * shape_.N * shape_.S) throw std::logic_error("OutputComparison::finish: rows missing");
  const std::size_t k = outs_.size();
  std::vector<Metrics> ms(k);
  for (std::size_t a = 0; a < k; ++a) {
    Metrics& m = ms[a];
    const detail::OutputSums& c = sums_[a];
    m.elements = shape_.size();
    m.rows = shape_.B * shape_.N * shape_.S;
    m.nan_count = c.nan_count;
    m.inf_count = c.inf_count;
    m.rows_with_nonfinite = c.rows_with_nonfinite;
    m.max_abs_err = c.max_abs_err;
    m.max_rel_err = c.max_rel_err;
    finish_metrics(m, c.err2, c.gold2, c.out2, c.dot, c.finite_pairs, c.exact_specials);
    // ‖O − G‖² over the finite output elements is err2 (where the baseline is finite wherever the golden
    // is, the elements of the old separate pass; otherwise the centred metrics are NaN and it is unused).
    m.rmse_uniform_baseline = base_nonfinite_ ? kNaN : ratio(base2_, gold2_);
    m.rmse_centred = base_nonfinite_ ? kNaN : apply_nonfinite_rule(m, ratio(c.err2, base2_));
    m.skill = 1 - m.rmse_centred;
  }
  return ms;
}

std::vector<Metrics> compare_outputs(const std::vector<const Tensor*>& outs, const Tensor& golden, const Tensor& baseline,
                                     int threads) {
  for (const Tensor* o : outs) check_same_shape(*o, "output", golden);
  check_same_shape(baseline, "baseline", golden);
  OutputComparison c(outs, golden.shape, threads);
  c.add(0, golden.shape.B * golden.shape.N * golden.shape.S, golden.data.data(), baseline.data.data());
  return c.finish();
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
  finish_metrics(m, err2_fin, gold2_fin, out2_fin, dot, finite_pairs, exact_specials);
  return m;
}

std::size_t score_stats_bytes(const Shape& q, const Shape& kv, int threads) {
  // score_stats' Buffers (kt: (Skv rounded up to 8) x D, s: kGroupRows = 32 rows x Skv, zero: D, five padded
  // RowScratch rows; kh, qh: a narrow input's heads, Skv x D and Sq x D) and its KeyInfo (3 words per key),
  // on at most one thread per (batch, head).
  const std::size_t padded = (kv.S + kLanes - 1) / kLanes * kLanes;
  const std::size_t heads = sat_mul(sat_add(kv.S, q.S), q.D);
  const std::size_t per_thread = sat_add(sat_add(sat_add(sat_mul(padded, q.D + 5), sat_mul(kv.S, 32 + 3)), q.D), heads);
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), std::max<std::size_t>(sat_product(q.B, q.N), 1));
  return sat_mul(sizeof(double), sat_mul(per_thread, t));
}

ScoreStats score_stats(const AttentionInputs& in, const Format& score_format, int threads) {
  validate(in, threads);
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
    std::vector<double> kt, s, zero, kh, qh;  // (kh, qh: a narrow input's heads as doubles)
    RowScratch row;
  };
  Spares<Buffers> pool;  // handed from item to item: no fresh pages per item
  parallel_for(part.size(), threads, [&](std::size_t w) {
    const std::size_t b = w / qs.N, h = w % qs.N;
    std::unique_ptr<Buffers> buf = pool.take();
    const double* K = in.k.values(in.k.index(b, h / in.group(), 0), Skv * D, buf->kh);
    const double* Q = in.q.values(in.q.index(b, h, 0), qs.S * D, buf->qh);
    const std::size_t strips = (Skv + 7) / 8;
    buf->kt.resize(strips * 8 * D);
    buf->s.resize(kGroupRows * Skv);
    buf->zero.assign(D, 0.0);
    buf->row.resize(Skv);
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
        row_stats(st, mnu, mxu, mn, mxs, buf->row, srow, end, keep, gq, keys,
                  [&](std::size_t j) { return dot2_pair(q[r], K + j * D, D); }, scale, mx, th);
      }
    }
    st.min = dd_to_double(mn);
    st.max = dd_to_double(mxs);
    st.min_unscaled = dd_to_double(mnu);
    st.max_unscaled = dd_to_double(mxu);
    pool.give(std::move(buf));
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
