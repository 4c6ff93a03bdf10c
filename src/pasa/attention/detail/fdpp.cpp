#include "pasa/attention/detail/fdpp.hpp"

#include <algorithm>
#include <atomic>

#include "pasa/attention/detail/flash.hpp"
#include "pasa/attention/detail/split_kv.hpp"

namespace pasa::detail {
namespace {

// The asynchronised loop over keys [jb, je): st.m holds φ for the rows that saw a key; bad[r] is set when a
// visible score of row r leaves (φ + a, φ + b), with one exception: a key masked by select whose score lies
// at or below φ + a (the decode mask's very negative constant) only underflows in e^{x − φ}, which the row's
// other weights make harmless, so long as the row has at least one score inside the range (in_range). A
// selected key is otherwise a score like any other ([IFA]: it keeps its place in the softmax), so a row
// whose keys are all selected is recomputed by the synchronised scheme, which gives the mean of V.
void fdpp_blocks(const Run& run, const Item& it, std::size_t jb, std::size_t je, double phi, Partial& st,
                 std::vector<std::uint8_t>& bad, std::vector<std::uint8_t>& in_range, RandomBits* rng) {
  const std::size_t rows = it.rows(), s2 = run.spec.s2, D = run.D;
  const FdppOptions& o = run.spec.fdpp;
  std::vector<double> Z, P(rows * s2), rs(rows), PV(rows * D), ones(rows, 1.0), shift(rows, phi);
  std::vector<std::uint8_t> vis;
  for (std::size_t j0 = jb; j0 < je; j0 += s2) {
    const std::size_t n = std::min(s2, je - j0);
    if (!tile_logits(run, it, j0, n, Z, vis, rng)) continue;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::uint8_t* sel = select_row(run.in, it.b, it.row_of(r));
      for (std::size_t c = 0; c < n; ++c) {
        const double x = Z[r * n + c];
        if (x == kNegInf) continue;  // absent (or a select value the score format turned into −inf)
        st.seen[r] = 1;
        const double t = x - phi;
        if (t > o.a && t < o.b) in_range[r] = 1;
        else if (!(sel && sel[j0 + c] && t <= o.a)) bad[r] = 1;  // NaN too
      }
    }
    tile_exp(run, Z.data(), rows, n, n, shift.data(), P.data(), rng);  // e^{x − φ}
    reduce_rows(run, Stage::sum, ReduceOp::sum, P.data(), rows, n, n, rs.data(), rng);
    run.round_p(P.data(), rows, n, rng);
    tile_pv(run, it, P.data(), n, j0, n, PV.data(), rng);
    rescale_add(run, Stage::sum, st.l.data(), ones.data(), rs.data(), rows, 1, rng);  // no rescaling: factor 1
    rescale_add(run, Stage::o, st.O.data(), ones.data(), PV.data(), rows, D, rng);
  }
  for (std::size_t r = 0; r < rows; ++r)
    if (st.seen[r]) st.m[r] = phi;
}

}  // namespace

void fdpp_attention(const Run& run, AttentionOutput& out, int threads) {
  RandomBits prng(run.spec.seed ^ 0x2545F4914F6CDD1Dull);
  const double phi = run.round_to(Stage::max, run.spec.fdpp.phi, &prng);
  std::atomic<std::size_t> recomputed{0};
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    const std::size_t rows = it.rows();
    std::vector<std::uint8_t> bad(rows, 0), in_range(rows, 0);
    Partial st(rows, run.D, kNegInf);
    if (run.spec.splits <= 1) {
      fdpp_blocks(run, it, 0, run.Skv, phi, st, bad, in_range, rng);
    } else {  // the parts share φ: the merge multiplies by e^{φ − φ} = 1
      std::vector<Partial> parts;
      for (const auto& [jb, je] : split_ranges(run, it)) {
        parts.emplace_back(rows, run.D, kNegInf);
        fdpp_blocks(run, it, jb, je, phi, parts.back(), bad, in_range, rng);
      }
      merge_partials(run, parts, false, 0.0, st, rng);
    }
    for (std::size_t r = 0; r < rows; ++r)
      if (st.seen[r] && !in_range[r]) bad[r] = 1;  // only exempted (selected, underflowing) scores
    const std::size_t nbad = static_cast<std::size_t>(std::count(bad.begin(), bad.end(), 1));
    if (nbad > 0) {  // the synchronised scheme for the rows that left the range
      Partial sync(rows, run.D, kNegInf);
      fa2_item(run, it, sync, rng);
      for (std::size_t r = 0; r < rows; ++r) {
        if (!bad[r]) continue;
        st.m[r] = sync.m[r];
        st.l[r] = sync.l[r];
        st.seen[r] = sync.seen[r];
        std::copy_n(&sync.O[r * run.D], run.D, &st.O[r * run.D]);
      }
      recomputed += nbad;
    }
    finish_rows(run, it, st.O, st.l, st.m, st.seen, true, nullptr, out, rng);
  });
  out.recomputed_rows = recomputed;
}

}  // namespace pasa::detail
