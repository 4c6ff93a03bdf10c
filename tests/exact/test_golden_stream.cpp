// The streamed golden (golden_stream) and the streamed comparison (compare_with_golden) against the whole
// golden_attention, uniform_baseline and compare_outputs: every bit, over shapes that make several chunks
// (GQA, causal, kv_len, decode, ragged row blocks), the MPFR path, non-finite inputs and thread counts.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/golden_compare.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"

using namespace pasa;

namespace {

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

ProblemSpec spec(std::size_t B, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv, std::size_t D,
                 std::uint64_t seed) {
  ProblemSpec p;
  p.B = B, p.Nq = Nq, p.Nkv = Nkv, p.Sq = Sq, p.Skv = Skv, p.D = D, p.seed = seed;
  p.q.x0 = p.k.x0 = 2.0;  // scores of some size, so the exp spreads the weights
  return p;
}

AlgorithmSpec algo(const char* name, const char* preset) {
  AlgorithmSpec a;
  a.name = name;
  a.alloc = allocation_preset(preset);
  a.s1 = a.s2 = 16;
  return a;
}

void same_metrics(const Metrics& a, const Metrics& b) {
  for (auto [x, y] : {std::pair{a.rmse, b.rmse}, {a.rmse_finite, b.rmse_finite}, {a.max_abs_err, b.max_abs_err},
                      {a.max_rel_err, b.max_rel_err}, {a.cosine, b.cosine}, {a.rmse_uniform_baseline, b.rmse_uniform_baseline},
                      {a.rmse_centred, b.rmse_centred}, {a.skill, b.skill}, {a.nan_pct, b.nan_pct}})
    CHECK(same_bits(x, y));
  CHECK(a.nan_count == b.nan_count);
  CHECK(a.inf_count == b.inf_count);
  CHECK(a.rows_with_nonfinite == b.rows_with_nonfinite);
}

}  // namespace

TEST_CASE("golden_stream: every row, in order, in several chunks, with golden_attention's bits", "[golden]") {
  struct Case {
    ProblemSpec p;
    int threads;
    bool fast;
  };
  std::vector<Case> cases = {
      {spec(2, 6, 3, 70, 50, 16, 1), 1, true},   // GQA 2:1, ragged row blocks: 6 pairs, 2 per chunk
      {spec(3, 4, 4, 1, 90, 8, 2), 2, true},     // decode rows
      {spec(1, 2, 1, 40, 40, 8, 3), 3, false},   // the MPFR path
  };
  cases[0].p.causal = true;
  cases[1].p.kv_len = {90, 17, 1};
  for (const Case& c : cases) {
    const AttentionInputs in = generate_inputs(c.p);
    GoldenOptions opt;
    opt.threads = c.threads;
    opt.fast = c.fast;
    const Golden whole = golden_attention(in, opt);
    const std::size_t rows = c.p.B * c.p.Nq * c.p.Sq, D = c.p.D;
    std::size_t next = 0, calls = 0;
    const Golden streamed = golden_stream(in, opt, [&](std::size_t row0, std::size_t n, const double* o, const double* lse) {
      REQUIRE(row0 == next);
      REQUIRE(n <= golden_stream_rows(in.q.shape, in.k.shape, c.threads));
      for (std::size_t i = 0; i < n * D; ++i) REQUIRE(same_bits(o[i], whole.o.data[row0 * D + i]));
      for (std::size_t i = 0; i < n; ++i) REQUIRE(same_bits(lse[i], whole.lse[row0 + i]));
      next += n;
      ++calls;
    });
    CHECK(next == rows);
    CHECK(streamed.o.data.empty());
    CHECK(streamed.guaranteed_bits == whole.guaranteed_bits);
    CHECK(same_bits(streamed.error_bound, whole.error_bound));
    CHECK(streamed.used_mpfr == whole.used_mpfr);
    if (c.p.B * c.p.Nkv > 2 && c.threads == 1) CHECK(calls > 1);  // (chunks of 2 pairs at one thread here)
  }
}

TEST_CASE("compare_with_golden: compare_outputs against the whole golden and baseline, bit for bit", "[golden]") {
  ProblemSpec p = spec(2, 4, 2, 37, 45, 16, 7);
  p.causal = true;
  for (bool nonfinite : {false, true}) {
    AttentionInputs in = generate_inputs(p);
    if (nonfinite) {  // a NaN key and an infinite value: the golden's whole path, handed over in one call
      in.allow_nonfinite = true;
      in.k.data[5 * 16 + 3] = std::numeric_limits<double>::quiet_NaN();
      in.v.data[(45 + 9) * 16] = std::numeric_limits<double>::infinity();
    }
    const AttentionOutput a = run_attention(in, algo("fa2", "fa_fp16_fp32"), 2);
    const AttentionOutput b = run_attention(in, algo("pasa", "pasa_fp16"), 2);
    for (int threads : {1, 3}) {
      GoldenOptions opt;
      opt.threads = threads;
      const Golden g = golden_attention(in, opt);
      const std::vector<Metrics> want = compare_outputs({&a.o, &b.o}, g.o, uniform_baseline(in, threads), threads);
      for (bool keep : {false, true}) {
        const GoldenMetrics got = compare_with_golden(in, {&a.o, &b.o}, opt, keep);
        REQUIRE(got.metrics.size() == 2);
        same_metrics(got.metrics[0], want[0]);
        same_metrics(got.metrics[1], want[1]);
        CHECK(got.golden.guaranteed_bits == g.guaranteed_bits);
        CHECK(got.golden.o.data.empty() == !keep);
        if (keep) {
          bool same = got.golden.lse.size() == g.lse.size();
          for (std::size_t i = 0; same && i < g.o.data.size(); ++i) same = same_bits(got.golden.o.data[i], g.o.data[i]);
          for (std::size_t i = 0; same && i < g.lse.size(); ++i) same = same_bits(got.golden.lse[i], g.lse[i]);
          CHECK(same);
        }
      }
    }
  }
}

TEST_CASE("OutputComparison: rows in order, each once, all of them", "[golden]") {
  const Shape sh{1, 1, 4, 2};
  Tensor o(sh, format_by_name("fp64"));
  const std::vector<double> g(8, 1.0), b(8, 0.5);
  OutputComparison c({&o}, sh);
  CHECK_THROWS_AS(c.add(2, 2, g.data(), b.data()), std::logic_error);  // row 0 first
  c.add(0, 2, g.data(), b.data());
  CHECK_THROWS_AS(c.finish(), std::logic_error);                       // rows 2, 3 missing
  CHECK_THROWS_AS(c.add(2, 3, g.data(), b.data()), std::logic_error);  // past the last row
  c.add(2, 2, g.data() + 4, b.data() + 4);
  CHECK(c.finish()[0].rmse == 1.0);
  Tensor wrong(Shape{1, 1, 3, 2}, format_by_name("fp64"));
  CHECK_THROWS_AS(OutputComparison({&wrong}, sh), InputError);
}
