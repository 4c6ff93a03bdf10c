#include "pasa/attention/detail/split_kv.hpp"

#include <algorithm>

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

}  // namespace

void merge_partials(const Run& run, const std::vector<Partial>& parts, bool pasa, double inva, Partial& out,
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

}  // namespace pasa::detail
