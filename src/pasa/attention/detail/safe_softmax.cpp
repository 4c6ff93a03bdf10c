#include "pasa/attention/detail/safe_softmax.hpp"

#include <algorithm>

namespace pasa::detail {

void safe_softmax_attention(const Run& run, AttentionOutput& out, int threads) {
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    const std::size_t rows = it.rows(), S = run.Skv, s2 = run.spec.s2;
    std::vector<double> Zrow(rows * S, kNegInf), Z, m(rows, kNegInf), d(rows), E(rows * S);
    std::vector<std::uint8_t> vis, seen(rows, 0);
    for (std::size_t j0 = 0; j0 < S; j0 += s2) {
      const std::size_t n = std::min(s2, S - j0);
      if (!tile_logits(run, it, j0, n, Z, vis, rng)) continue;
      for (std::size_t r = 0; r < rows; ++r)
        std::copy(Z.begin() + r * n, Z.begin() + (r + 1) * n, Zrow.begin() + r * S + j0);
    }
    for (std::size_t r = 0; r < rows; ++r) {
      m[r] = run.round_to(Stage::max, row_max(&Zrow[r * S], S), rng);  // Eq. 7
      seen[r] = m[r] != kNegInf;
    }
    tile_exp(run, Zrow.data(), rows, S, S, m.data(), E.data(), rng);
    reduce_rows(run, Stage::sum, ReduceOp::sum, E.data(), rows, S, S, d.data(), rng);  // Eq. 8
    normalised_output(run, it, m, d, seen, out, rng, Zrow);                 // Eq. 9 and O = A·V
  });
}

}  // namespace pasa::detail
