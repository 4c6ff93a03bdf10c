#include "pasa/attention/detail/flash.hpp"

#include "pasa/attention/detail/split_kv.hpp"
#include "pasa/attention/detail/tile_ops.hpp"

#include <algorithm>
#include <cmath>


namespace pasa::detail {

namespace {

// The running-max step shared by the online softmax's first pass and FA2 ([FA2, Alg. 1]): m_new = max(m,
// rowmax(S_tile)) rounded in `max`, alpha = e^{m_old − m_new}, m = m_new; marks rows that saw a key.
// mloc: the rows' maxima of the tile (row_max).
void advance_running_max(const Run& run, const double* mloc, std::size_t rows, std::vector<double>& m,
                         std::vector<double>& mnew, std::vector<std::uint8_t>& seen, double* alpha, RandomBits* rng) {
  for (std::size_t r = 0; r < rows; ++r) {
    if (mloc[r] != kNegInf) seen[r] = 1;
    mnew[r] = std::max(m[r], mloc[r]);
  }
  run.round_to(Stage::max, mnew.data(), rows, rng);
  rescale_factors(run, m.data(), mnew.data(), rows, alpha, rng);
  m = mnew;
}
void advance_running_max(const Run& run, const double* Z, std::size_t rows, std::size_t n, std::vector<double>& m,
                         std::vector<double>& mnew, std::vector<std::uint8_t>& seen, double* alpha, RandomBits* rng) {
  thread_local std::vector<double> mloc;
  mloc.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) mloc[r] = row_max(&Z[r * n], n);
  advance_running_max(run, mloc.data(), rows, m, mnew, seen, alpha, rng);
}

// e^x rounded to the exp stage for one value (glibc's exp in double, or expf when the exp stage says via fp32).
double exp_one_to_stage(const Run& run, double x, RandomBits* rng) {
  const StageSpec& sp = run.stage(Stage::exp);
  if (sp.via == ExpVia::exact && sp.format.p > 24) return exp_rounded_wide(x, sp, rng);
  const double e = sp.via == ExpVia::fp32 ? std::exp(static_cast<float>(x)) : std::exp(x);
  return run.round_to(Stage::exp, e, rng);
}

}  // namespace

void online_softmax_attention(const Run& run, AttentionOutput& out, int threads) {
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    const std::size_t rows = it.rows(), s2 = run.spec.s2;
    std::vector<double> m(rows, kNegInf), d(rows, 0.0), Z, P(s2), rs(rows), alpha(rows), Zrow(rows * run.Skv, kNegInf);
    std::vector<double> E(rows * s2), mnew(rows);
    std::vector<std::uint8_t> vis, seen(rows, 0);
    for (std::size_t j0 = 0; j0 < run.Skv; j0 += s2) {
      const std::size_t n = std::min(s2, run.Skv - j0);
      if (!tile_logits(run, it, j0, n, Z, vis, rng)) continue;
      for (std::size_t r = 0; r < rows; ++r)
        std::copy(Z.begin() + r * n, Z.begin() + (r + 1) * n, Zrow.begin() + r * run.Skv + j0);
      advance_running_max(run, Z.data(), rows, n, m, mnew, seen, alpha.data(), rng);  // e^{m_{i−1} − m_i}
      tile_exp(run, Z.data(), rows, n, n, m.data(), E.data(), rng);
      reduce_rows(run, Stage::sum, ReduceOp::sum, E.data(), rows, n, n, rs.data(), rng);
      rescale_add(run, Stage::sum, d.data(), alpha.data(), rs.data(), rows, 1, rng);  // d'_i = d'_{i−1}·e^{..} + Σ
    }
    normalised_output(run, it, m, d, seen, out, rng, Zrow);
  });
}

void fa1_attention(const Run& run, AttentionOutput& out, int threads) {
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    const std::size_t rows = it.rows(), s2 = run.spec.s2, D = run.D;
    std::vector<double> m(rows, kNegInf), l(rows, 0.0), O(rows * D, 0.0), Z, P(rows * s2), lt(rows), PV(rows * D);
    std::vector<double> mt(rows), t(D);
    std::vector<std::uint8_t> vis, seen(rows, 0);
    for (std::size_t j0 = 0; j0 < run.Skv; j0 += s2) {
      const std::size_t n = std::min(s2, run.Skv - j0);
      if (!tile_logits(run, it, j0, n, Z, vis, rng)) continue;
      for (std::size_t r = 0; r < rows; ++r) mt[r] = run.round_to(Stage::max, row_max(&Z[r * n], n), rng);  // m̃_ij
      tile_exp(run, Z.data(), rows, n, n, mt.data(), P.data(), rng);  // P̃_ij = exp(S − m̃)
      reduce_rows(run, Stage::sum, ReduceOp::sum, P.data(), rows, n, n, lt.data(), rng);  // l̃_ij
      run.round_p(P.data(), rows, n, rng);
      tile_pv(run, it, P.data(), n, j0, n, PV.data(), rng);
      for (std::size_t r = 0; r < rows; ++r) {
        if (mt[r] == kNegInf) continue;  // nothing visible in this row of the tile: O, l, m unchanged
        seen[r] = 1;
        const double mnew = std::max(m[r], mt[r]);
        const double eo = m[r] == kNegInf ? 0.0 : exp_one_to_stage(run, run.round_exact(Stage::max, two_sum(m[r], -mnew), rng), rng);
        const double en = exp_one_to_stage(run, run.round_exact(Stage::max, two_sum(mt[r], -mnew), rng), rng);
        // Each operation one rounding of its exact result.
        const double l_old = run.round_exact(Stage::sum, two_prod(eo, l[r]), rng);
        const double l_add = run.round_exact(Stage::sum, two_prod(en, lt[r]), rng);
        const double lnew = run.round_exact(Stage::sum, two_sum(l_old, l_add), rng);
        const double c_old = run.round_exact(Stage::o, two_prod(l[r], eo), rng);  // diag(l)·e^{m − m_new}
        double* o = &O[r * D];
        const double* pv = &PV[r * D];
        run.round_each(Stage::o, o, D, rng, [&](std::size_t d) { return two_prod(c_old, o[d]); });
        run.round_each(Stage::o, t.data(), D, rng, [&](std::size_t d) { return two_prod(en, pv[d]); });
        run.round_each(Stage::o, o, D, rng, [&](std::size_t d) { return two_sum(o[d], t[d]); });
        run.round_each(Stage::div, o, D, rng, [&](std::size_t d) { return exact_quotient(o[d], lnew); });  // diag(l_new)⁻¹
        m[r] = mnew;
        l[r] = lnew;
      }
    }
    finish_rows(run, it, O, l, m, seen, false, nullptr, out, rng);
  });
}

namespace {

// [FA2, Alg. 1] over the key blocks of [jb, je) (jb a multiple of s2), continuing the state st; the tile
// operations from `tiles` (tile_ops.hpp: the general or the fused path, the same bits).
template <TileOps Tiles>
void fa2_blocks(const Run& run, Tiles& tiles, std::size_t jb, std::size_t je, Partial& st, RandomBits* rng) {
  const std::size_t rows = tiles.rows(), s2 = run.spec.s2;
  thread_local std::vector<double> rs, alpha, mnew;  // (per thread: see GeneralBuffers)
  rs.resize(rows);
  alpha.resize(rows);
  mnew.resize(rows);
  for (std::size_t j0 = jb; j0 < je; j0 += s2) {
    const std::size_t n = std::min(s2, je - j0);
    if (!tiles.open(j0, n)) continue;
    tiles.scores(true);  // Z = round_scale(S·scale)
    if (run.biased) tiles.bias_select(nullptr);
    if (run.masked) tiles.mask();
    tiles.row_max(rs.data());
    advance_running_max(run, rs.data(), rows, st.m, mnew, st.seen, alpha.data(), rng);  // e^{m_{j−1} − m_j}
    tiles.probabilities(st.m.data(), rs.data());  // P̃ = exp(S − m_j), rowsum P̃
    tiles.pv();
    rescale_add(run, Stage::sum, st.l.data(), alpha.data(), rs.data(), rows, 1, rng);
    tiles.accumulate(st.O.data(), alpha.data());
  }
}

}  // namespace

void fa2_item(const Run& run, const Item& it, Partial& st, RandomBits* rng) {
  with_tile_ops(run, it, rng, [&](auto& tiles) {
    if (run.spec.splits <= 1) {
      fa2_blocks(run, tiles, 0, run.Skv, st, rng);
      return;
    }
    std::vector<Partial> parts;  // split-KV: every part from a fresh state, then the merge
    for (const auto& [jb, je] : split_ranges(run, it)) {
      parts.emplace_back(it.rows(), run.D, kNegInf);
      fa2_blocks(run, tiles, jb, je, parts.back(), rng);
    }
    merge_partials(run, parts, false, 0.0, st, rng);
  });
}

void fa2_attention(const Run& run, AttentionOutput& out, int threads, const std::vector<double>* lse_shift) {
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    Partial st(it.rows(), run.D, kNegInf);
    fa2_item(run, it, st, rng);
    finish_rows(run, it, st.O, st.l, st.m, st.seen, true, lse_shift, out, rng);
  });
}

}  // namespace pasa::detail
