#include "pasa/attention/detail/smooth_k.hpp"

#include "pasa/attention/detail/flash.hpp"

namespace pasa::detail {

void smooth_k_attention(Run& run, AttentionOutput& out, int threads) {
  const std::size_t D = run.D, S = run.Skv;
  std::vector<double> means(run.B * run.Nkv * D);
  run.set_keys_t_format(run.stage(Stage::k_shift).format);
  parallel_for(run.B * run.Nkv, threads, [&](std::size_t bh) {
    const std::size_t b = bh / run.Nkv, h = bh % run.Nkv;
    RandomBits rng(run.spec.seed ^ (0xA24BAED4963EE407ull * (bh + 1)));
    const double* k = run.k.head(b, h);
    double* mean = &means[bh * D];
    // [SAGE] mean(K) over the sequence (the mean stage's Reduction; vectorised across d: K is S × D, so
    // column s of the D × S transpose is row s of K).
    reduce_columns(run, Stage::mean, ReduceOp::mean, k, D, S, D, mean, &rng);
    std::vector<double> shifted(S * D);
    // K − mean(K): one rounding of each exact difference.
    run.round_each(Stage::k_shift, shifted.data(), S * D, &rng, [&](std::size_t i) { return two_sum(k[i], -mean[i % D]); });
    run.set_keys_t(b, h, shifted.data());
  });
  // lse of the original scores: + scale·q·mean(K) per query row.
  std::vector<double> lse_shift(run.B * run.Nq * run.Sq);
  const double scale = run.in.effective_scale();
  for (std::size_t b = 0; b < run.B; ++b)
    for (std::size_t h = 0; h < run.Nq; ++h) {
      const double* mean = &means[(b * run.Nkv + h / run.group) * D];
      for (std::size_t i = 0; i < run.Sq; ++i) {
        double dot = 0;
        for (std::size_t d = 0; d < D; ++d) dot += run.q.at(b, h, i, d) * mean[d];
        lse_shift[(b * run.Nq + h) * run.Sq + i] = scale * dot;
      }
    }
  // The shifted keys give every score of row i the shift lse_shift[i]: a select value (a score of the
  // unshifted frame) is written in the shifted one as value − lse_shift[i].
  if (!run.in.mask.select.empty()) run.score_frame = lse_shift;
  fa2_attention(run, out, threads, &lse_shift);
}

}  // namespace pasa::detail
