// compare_with_golden (golden_compare.hpp): golden_stream's chunks, each with the baseline of its rows, into
// one OutputComparison.
#include "pasa/exact/golden_compare.hpp"

#include <algorithm>
#include <chrono>

#include "pasa/core/memory.hpp"
#include "pasa/exact/baseline.hpp"

namespace pasa {

GoldenMetrics compare_with_golden(const AttentionInputs& in, const std::vector<const Tensor*>& outs,
                                  const GoldenOptions& opt, bool keep_golden) {
  const Shape& qs = in.q.shape;
  OutputComparison cmp(outs, qs, opt.threads);
  GoldenMetrics r;
  if (keep_golden) {
    r.golden.o = Tensor::uninitialised(qs, format_by_name("fp64"));  // every row is handed over once
    r.golden.lse.resize(qs.B * qs.N * qs.S);
  }
  std::vector<double> base;
  double in_sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // The rows of a chunk are whole (batch, KV head) pairs, hence whole query heads (Sq rows each).
  const Golden g = golden_stream(in, opt, [&](std::size_t row0, std::size_t rows, const double* o, const double* lse) {
    const auto t1 = std::chrono::steady_clock::now();
    base.resize(rows * qs.D);
    uniform_baseline_heads(in, row0 / qs.S, rows / qs.S, base.data(), opt.threads);
    cmp.add(row0, rows, o, base.data());
    if (keep_golden) {
      std::copy_n(o, rows * qs.D, r.golden.o.data.data() + row0 * qs.D);
      std::copy_n(lse, rows, r.golden.lse.data() + row0);
    }
    in_sink += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  });
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.golden.guaranteed_bits = g.guaranteed_bits;
  r.golden.error_bound = g.error_bound;
  r.golden.used_mpfr = g.used_mpfr;
  r.metrics = cmp.finish();
  r.golden_seconds = total - in_sink;
  r.compare_seconds = in_sink;
  return r;
}

std::size_t compare_with_golden_bytes(const Shape& q, const Shape& kv, const GoldenOptions& opt, bool keep_golden) {
  const std::size_t chunk = sat_mul(sizeof(double), sat_mul(golden_stream_rows(q, kv, opt.threads), q.D));
  const std::size_t kept =
      keep_golden ? sat_mul(sizeof(double), sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S))) : 0;
  return sat_add(sat_add(golden_stream_bytes(q, kv, opt), chunk), kept);
}

}  // namespace pasa
