#include "pasa/study/range_stats.hpp"

#include <algorithm>
#include <cmath>

#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

std::vector<HeadRanges> range_stats(const AttentionInputs& in, double beta, std::size_t s2, const Format& score_format,
                                    std::size_t heads, int threads) {
  if (s2 == 0) throw InputError("range statistics: s2 must be at least 1");
  if (in.mask.causal || !in.mask.kv_len.empty() || !in.mask.keep.empty() || !in.mask.select.empty() || !in.pse.data.empty())
    throw InputError("range statistics: masks, pse and select are not supported");
  if (in.q.shape.N != in.k.shape.N) throw InputError("range statistics: grouped-query inputs are not supported");
  const std::size_t B = in.q.shape.B, N = in.q.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S, D = in.q.shape.D;
  const std::size_t n = heads == 0 ? B * N : std::min(heads, N);
  const double scale = in.effective_scale();
  std::vector<HeadRanges> out(n);
  parallel_for(n, threads, [&](std::size_t hb) {
    const std::size_t b = hb / N, h = hb % N;
    const double *Q = in.q.head(b, h), *K = in.k.head(b, h);
    HeadRanges& r = out[hb];
    r.batch = b, r.head = h, r.scores = Sq * Skv;
    // K' = (k − β·k̄_j)·scale per key block (Eq. 11 with M of Eq. 10).
    std::vector<double> Kp(Skv * D);
    for (std::size_t k0 = 0; k0 < Skv; k0 += s2) {
      const std::size_t k1 = std::min(Skv, k0 + s2);
      for (std::size_t d = 0; d < D; ++d) {
        double m = 0;
        for (std::size_t k = k0; k < k1; ++k) m += K[k * D + d];
        m /= static_cast<double>(k1 - k0);
        for (std::size_t k = k0; k < k1; ++k) Kp[k * D + d] = (K[k * D + d] - beta * m) * scale;
      }
    }
    const auto [kmin, kmax] = std::minmax_element(K, K + Skv * D);
    const auto [pmin, pmax] = std::minmax_element(Kp.begin(), Kp.end());
    r.k_min = *kmin, r.k_max = *kmax, r.kp_min = *pmin, r.kp_max = *pmax;
    r.s_min = r.sp_min = INFINITY;
    r.s_max = r.sp_max = -INFINITY;
    for (std::size_t i = 0; i < Sq; ++i)
      for (std::size_t k = 0; k < Skv; ++k) {
        double s = 0, sp = 0;
        for (std::size_t d = 0; d < D; ++d) {
          s += Q[i * D + d] * K[k * D + d];
          sp += Q[i * D + d] * Kp[k * D + d];
        }
        r.s_min = std::min(r.s_min, s), r.s_max = std::max(r.s_max, s);
        r.sp_min = std::min(r.sp_min, sp), r.sp_max = std::max(r.sp_max, sp);
        r.s_overflow += std::isinf(round(s, score_format)) ? 1 : 0;  // stored as ±inf (|x| >= 65520 in fp16)
        r.sp_overflow += std::isinf(round(sp, score_format)) ? 1 : 0;
      }
  });
  return out;
}

}  // namespace pasa
