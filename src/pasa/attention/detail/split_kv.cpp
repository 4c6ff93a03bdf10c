#include "pasa/attention/detail/split_kv.hpp"

#include <algorithm>
#include <cmath>
#include <span>

namespace pasa::detail {

std::vector<std::pair<std::size_t, std::size_t>> split_ranges(const Run& run, const Item& it) {
  std::size_t end = 0;
  for (std::size_t r = it.r0; r < it.r1; ++r) end = std::max(end, visible_end(run.in, it.b, r));
  const std::size_t s2 = run.spec.s2, blocks = (end + s2 - 1) / s2;
  const std::size_t per = std::max<std::size_t>(1, (blocks + run.spec.splits - 1) / run.spec.splits);
  std::vector<std::pair<std::size_t, std::size_t>> parts;
  for (std::size_t b0 = 0; b0 < blocks; b0 += per)
    parts.emplace_back(b0 * s2, std::min(run.Skv, std::min(blocks, b0 + per) * s2));
  return parts;
}

namespace {

// e^x rounded to the merge stage (correctly rounded above 24 bits; see exp_rounded_wide and exp_span).
void exp_merge(const Run& run, double* x, std::size_t n, RandomBits* rng) {
  const StageSpec& sp = run.stage(Stage::merge);
  if (sp.format.p > 24) {
    for (std::size_t i = 0; i < n; ++i) x[i] = exp_rounded_wide(x[i], sp, rng);
    return;
  }
  exp_span(x, n);
  run.round_to(Stage::merge, x, n, rng);
}

// MergeModel::unnormalised: the parts' Õ_t, m_t, l_t merged as they are (see split_kv.hpp).
void merge_unnormalised(const Run& run, const std::vector<Partial>& parts, bool pasa, double inva, Partial& out,
                        RandomBits* rng) {
  const std::size_t rows = out.m.size(), D = run.D;
  auto once = [&](std::vector<double>& x, auto exact) { run.round_each(Stage::merge, x.data(), rows, rng, exact); };
  std::vector<std::vector<double>> mt;  // each part's max in the merged frame
  for (const Partial& p : parts) mt.push_back(p.m);
  if (pasa) {
    // F = (Σ J_t·F_t)/J: the pseudo-average over all blocks (Eq. 15 unrolled), then each part's maximum
    // moved from its frame Inva·F_t to Inva·F.
    std::size_t J = 0;
    std::vector<double> t(rows);
    std::fill(out.F.begin(), out.F.end(), 0.0);
    bool first = true;
    for (const Partial& p : parts) {
      if (p.blocks == 0) continue;
      J += p.blocks;
      const double jt = static_cast<double>(p.blocks);
      once(t, [&](std::size_t r) { return two_prod(jt, p.F[r]); });
      if (first) out.F = t;
      else once(out.F, [&](std::size_t r) { return two_sum(out.F[r], t[r]); });
      first = false;
    }
    out.blocks = J;
    if (J == 0) return;
    const double dj = static_cast<double>(J);
    once(out.F, [&](std::size_t r) { return exact_quotient(out.F[r], dj); });
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (parts[k].blocks == 0 || inva == 0) continue;
      once(t, [&](std::size_t r) { return two_sum(parts[k].F[r], -out.F[r]); });
      once(t, [&](std::size_t r) { return two_prod(inva, t[r]); });
      once(mt[k], [&](std::size_t r) { return two_sum(mt[k][r], t[r]); });
    }
  }
  std::vector<double> M(rows, kNegInf), a(rows), x(rows), o(D);
  for (std::size_t k = 0; k < parts.size(); ++k)
    for (std::size_t r = 0; r < rows; ++r)
      if (parts[k].seen[r]) M[r] = std::max(M[r], mt[k][r]);
  std::fill(out.l.begin(), out.l.end(), 0.0);
  std::fill(out.O.begin(), out.O.end(), 0.0);
  std::fill(out.seen.begin(), out.seen.end(), 0);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const Partial& p = parts[k];
    for (std::size_t r = 0; r < rows; ++r) a[r] = p.seen[r] ? mt[k][r] : M[r];
    once(a, [&](std::size_t r) { return two_sum(a[r], -M[r]); });
    exp_merge(run, a.data(), rows, rng);
    for (std::size_t r = 0; r < rows; ++r) {
      if (!p.seen[r] || M[r] == kNegInf) continue;  // nothing from this part (or no key at all): no term
      const double ar = a[r];
      const double* po = &p.O[r * D];
      double* oo = &out.O[r * D];
      if (!out.seen[r]) {  // the first term of the row: a·l and a·O, nothing to add yet
        out.l[r] = run.round_exact(Stage::merge, two_prod(ar, p.l[r]), rng);
        run.round_each(Stage::merge, oo, D, rng, [&](std::size_t d) { return two_prod(ar, po[d]); });
        out.seen[r] = 1;
        continue;
      }
      const double al = run.round_exact(Stage::merge, two_prod(ar, p.l[r]), rng);
      out.l[r] = run.round_exact(Stage::merge, two_sum(out.l[r], al), rng);
      run.round_each(Stage::merge, o.data(), D, rng, [&](std::size_t d) { return two_prod(ar, po[d]); });
      run.round_each(Stage::merge, oo, D, rng, [&](std::size_t d) { return two_sum(oo[d], o[d]); });
    }
  }
  out.m = M;
}

// MergeModel::normalised_lse, as flash-decoding kernels store and combine the parts (FA2's combine kernel,
// vLLM's paged attention v2 reduce, FlashInfer's merge_state): each part's O_t/l_t (div) stored in the
// partial format and lse_t = m_t (+ Inva·F_t, PASA's frame) + log l_t in the lse format; then, in the merge
// stage, L = max_t lse_t, s = Σ_t e^{lse_t − L} (in part order), lse = L + log s, O = Σ_t e^{lse_t − lse}·O_t.
// A part whose row saw no key (lse_t = −∞) has no term (weight 0); a row without any term is empty (0, −∞). The result is normalised: l = 1 and
// m = lse (F = 0), so finish_rows's O/l and lse = m + log l hold it as it is.
void merge_normalised(const Run& run, const std::vector<Partial>& parts, bool pasa, double inva, Partial& out,
                      RandomBits* rng) {
  const std::size_t rows = out.m.size(), D = run.D, n = parts.size();
  const StageSpec& sp = run.stage(Stage::merge);
  const Format &pf = sp.partial(), &lf = sp.lse();
  auto once = [&](std::vector<double>& x, auto exact) { run.round_each(Stage::merge, x.data(), rows, rng, exact); };
  // What the split kernel writes: lse_t (−∞ where the row saw nothing) and O_t.
  // A part has a term for a row when the row saw a key in it and its sum is not 0 (FlashDecoding++'s fixed
  // φ can underflow every e^{x − φ}: the kernels then write lse_t = −∞, as for a part with no key).
  std::vector<std::uint8_t> term(n * rows);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t r = 0; r < rows; ++r) term[k * rows + r] = parts[k].seen[r] && parts[k].l[r] != 0;
  std::vector<double> lse(n * rows, kNegInf), Ot(n * rows * D, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    const Partial& p = parts[k];
    for (std::size_t r = 0; r < rows; ++r) {
      if (!term[k * rows + r]) continue;
      const double frame = pasa ? p.m[r] + inva * p.F[r] : p.m[r];
      lse[k * rows + r] = round(frame + std::log(p.l[r]), lf, sp.round, rng);
      double* o = &Ot[(k * rows + r) * D];
      run.round_each(Stage::div, o, D, rng, [&](std::size_t d) { return exact_quotient(p.O[r * D + d], p.l[r]); });
      round_span(std::span<const double>(o, D), std::span<double>(o, D), pf, sp.round, rng);
    }
  }
  std::vector<double> L(rows, kNegInf), s(rows, 0.0), x(rows), w(rows), t(D);
  std::fill(out.seen.begin(), out.seen.end(), 0);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t r = 0; r < rows; ++r)
      if (term[k * rows + r]) {
        L[r] = std::max(L[r], lse[k * rows + r]);
        out.seen[r] = 1;
      }
  auto arg = [&](std::size_t k, std::size_t r, const std::vector<double>& ref) {  // lse_t − ref, 0 without a term
    return term[k * rows + r] ? two_sum(lse[k * rows + r], -ref[r]) : DD{0.0, 0.0};
  };
  // s = Σ_t e^{lse_t − L} (the first term as it is, then one rounding per addition); lse = L + log s.
  std::vector<std::uint8_t> first(rows, 1);
  for (std::size_t k = 0; k < n; ++k) {
    once(x, [&](std::size_t r) { return arg(k, r, L); });
    exp_merge(run, x.data(), rows, rng);
    for (std::size_t r = 0; r < rows; ++r) {
      if (!term[k * rows + r]) continue;
      s[r] = first[r] ? x[r] : run.round_exact(Stage::merge, two_sum(s[r], x[r]), rng);
      first[r] = 0;
    }
  }
  for (std::size_t r = 0; r < rows; ++r) x[r] = out.seen[r] ? std::log(s[r]) : 0.0;
  run.round_to(Stage::merge, x.data(), rows, rng);
  std::vector<double> lse_all(rows);
  once(lse_all, [&](std::size_t r) { return out.seen[r] ? two_sum(L[r], x[r]) : DD{kNegInf, 0.0}; });
  // O = Σ_t e^{lse_t − lse}·O_t, each product and each addition one rounding.
  std::fill(out.O.begin(), out.O.end(), 0.0);
  std::fill(first.begin(), first.end(), 1);
  for (std::size_t k = 0; k < n; ++k) {
    once(w, [&](std::size_t r) { return arg(k, r, lse_all); });
    exp_merge(run, w.data(), rows, rng);
    for (std::size_t r = 0; r < rows; ++r) {
      if (!term[k * rows + r]) continue;
      const double wr = w[r];
      const double* po = &Ot[(k * rows + r) * D];
      double* oo = &out.O[r * D];
      if (first[r]) {
        run.round_each(Stage::merge, oo, D, rng, [&](std::size_t d) { return two_prod(wr, po[d]); });
        first[r] = 0;
        continue;
      }
      run.round_each(Stage::merge, t.data(), D, rng, [&](std::size_t d) { return two_prod(wr, po[d]); });
      run.round_each(Stage::merge, oo, D, rng, [&](std::size_t d) { return two_sum(oo[d], t[d]); });
    }
  }
  out.blocks = 0;
  for (const Partial& p : parts) out.blocks += p.blocks;
  std::fill(out.F.begin(), out.F.end(), 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    out.m[r] = lse_all[r];
    out.l[r] = out.seen[r] ? 1.0 : 0.0;
  }
}

}  // namespace

void merge_partials(const Run& run, const std::vector<Partial>& parts, bool pasa, double inva, Partial& out,
                    RandomBits* rng) {
  if (run.stage(Stage::merge).merge.model == MergeModel::unnormalised)
    merge_unnormalised(run, parts, pasa, inva, out, rng);
  else
    merge_normalised(run, parts, pasa, inva, out, rng);
}

}  // namespace pasa::detail
