#include "pasa/exact/baseline.hpp"

#include <algorithm>
#include <vector>

#include "pasa/numeric/double_double.hpp"

namespace pasa {

Tensor uniform_baseline(const AttentionInputs& in, int threads) {
  validate(in);
  const Shape& qs = in.q.shape;
  const std::size_t D = qs.D;
  Tensor out(qs, format_by_name("fp64"));
  // One work item per (batch, query head); each writes only its own rows.
  parallel_for(qs.B * qs.N, threads, [&](std::size_t w) {
    const std::size_t b = w / qs.N, h = w % qs.N;
    const double* v = in.v.head(b, h / in.group());
    double* o = out.data.data() + (b * qs.N + h) * qs.S * D;
    std::vector<DD> sum(D);
    for (std::size_t i = 0; i < qs.S; ++i) {
      std::fill(sum.begin(), sum.end(), DD{});
      std::size_t n = 0;
      const std::size_t end = visible_end(in, b, i);
      for (std::size_t j = 0; j < end; ++j) {
        if (!visible(in, b, i, j)) continue;
        ++n;
        for (std::size_t x = 0; x < D; ++x) sum[x] = dd_add(sum[x], DD{v[j * D + x], 0});
      }
      for (std::size_t x = 0; x < D; ++x)
        o[i * D + x] = n == 0 ? 0.0 : dd_to_double(dd_div(sum[x], DD{static_cast<double>(n), 0}));
    }
  });
  return out;
}

}  // namespace pasa
