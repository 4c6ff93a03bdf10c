#include "pasa/exact/baseline.hpp"

#include <algorithm>
#include <vector>

#include "pasa/numeric/double_double.hpp"

namespace pasa {

Tensor uniform_baseline(const AttentionInputs& in, int threads) {
  validate(in, threads);
  Tensor out(in.q.shape, format_by_name("fp64"));
  uniform_baseline_heads(in, 0, in.q.shape.B * in.q.shape.N, out.data.data(), threads);
  return out;
}

void uniform_baseline_heads(const AttentionInputs& in, std::size_t head0, std::size_t heads, double* out, int threads) {
  const Shape& qs = in.q.shape;
  const std::size_t D = qs.D;
  // One work item per (batch, query head); each writes only its own rows.
  parallel_for(heads, threads, [&](std::size_t w) {
    const std::size_t b = (head0 + w) / qs.N, h = (head0 + w) % qs.N;
    const std::size_t v0 = in.v.index(b, h / in.group(), 0);  // (V's head, wide or narrow: read a key at a time)
    std::vector<double> vrow;
    double* o = out + w * qs.S * D;
    std::vector<DD> sum(D);
    // Row i's sum is the fold, in key order, of dd_add over its visible keys. When the previous row's
    // visible keys are a prefix of this row's (no mask: the same keys; causal: one more key), this row's
    // fold continues the previous one, so it is carried over instead of recomputed: the same additions in
    // the same order, hence the same bits, in O(S·D) instead of O(S²·D) per head.
    std::vector<std::size_t> prev, cur;
    bool have_prev = false, prev_same_keys = false;
    for (std::size_t i = 0; i < qs.S; ++i) {
      const std::size_t end = visible_end(in, b, i);
      // visible(in, b, i, j) for j < end: the boolean mask's row, when there is one.
      const std::uint8_t* keep = in.mask.keep.empty() ? nullptr : in.mask.keep.data() + (b * qs.S + i) * in.k.shape.S;
      std::size_t from = 0, n;
      if (keep) {
        cur.clear();
        for (std::size_t j = 0; j < end; ++j)
          if (keep[j]) cur.push_back(j);
        const bool prefix = have_prev && prev.size() <= cur.size() && std::equal(prev.begin(), prev.end(), cur.begin());
        if (prefix) from = prev.size();
        n = cur.size();
        prev_same_keys = prefix && prev.size() == n;
      } else {  // the visible keys are [0, end): a prefix of the next row's when its end is not smaller
        n = end;
        from = have_prev && prev.size() <= n ? prev.size() : 0;
        prev_same_keys = have_prev && prev.size() == n;
        prev.resize(n);  // only its size is used on this path
      }
      if (from == 0) std::fill(sum.begin(), sum.end(), DD{});
      for (std::size_t c = from; c < n; ++c) {
        const double* vj = in.v.values(v0 + (keep ? cur[c] : c) * D, D, vrow);
        for (std::size_t x = 0; x < D; ++x) sum[x] = dd_add(sum[x], DD{vj[x], 0});
      }
      if (prev_same_keys) {  // the same keys as the previous row: the same sums and count, so its row
        std::copy_n(o + (i - 1) * D, D, o + i * D);
      } else {
        for (std::size_t x = 0; x < D; ++x)
          o[i * D + x] = n == 0 ? 0.0 : dd_to_double(dd_div(sum[x], DD{static_cast<double>(n), 0}));
      }
      if (keep) std::swap(prev, cur);
      have_prev = true;
    }
  });
}

}  // namespace pasa
