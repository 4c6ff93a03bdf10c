// Range statistics (study/range_stats.hpp) against the exact score statistics of exact/metrics (double-double
// scores, an independent computation), and the shift's range reduction on a Table 4 overflow case.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/study/range_stats.hpp"

using namespace pasa;

namespace {
AttentionInputs inputs(double x0, double am) {
  ProblemSpec p;
  p.B = 1, p.Nq = p.Nkv = 2, p.Sq = 64, p.Skv = 256, p.D = 128, p.seed = 4;
  p.q = p.k = p.v = TensorGen{GenKind::uniform, x0, am};
  return generate_inputs(p, 1);
}
}  // namespace

TEST_CASE("range statistics: scores and overflow counts equal the exact score statistics", "[ranges]") {
  const Format fp16 = format_by_name("fp16");
  // Table 4 row 3's distribution: partial overflow of the fp16 scores.
  const AttentionInputs in = inputs(20, 20);
  const ScoreStats ss = score_stats(in, fp16, 1);
  REQUIRE(ss.overflow > 0);
  REQUIRE(ss.overflow < ss.entries);
  const std::vector<HeadRanges> r = range_stats(in, 0.984497, 128, fp16, 0, 2);
  REQUIRE(r.size() == 2);
  std::size_t over = 0, n = 0;
  double smin = INFINITY, smax = -INFINITY, kmin = INFINITY, kmax = -INFINITY;
  for (const auto& h : r) {
    over += h.s_overflow, n += h.scores;
    smin = std::min(smin, h.s_min), smax = std::max(smax, h.s_max);
    kmin = std::min(kmin, h.k_min), kmax = std::max(kmax, h.k_max);
    CHECK(h.sp_overflow == 0);  // the shifted scores stay in range
    CHECK(h.sp_max - h.sp_min < (h.s_max - h.s_min) / 8);
  }
  CHECK(over == ss.overflow);
  CHECK(n == ss.entries);
  CHECK(smin == Approx(ss.min_unscaled).epsilon(1e-12));
  CHECK(smax == Approx(ss.max_unscaled).epsilon(1e-12));
  CHECK(kmin == *std::min_element(in.k.data.begin(), in.k.data.end()));
  CHECK(kmax == *std::max_element(in.k.data.begin(), in.k.data.end()));
  // One head only; same values whatever the thread count.
  const std::vector<HeadRanges> one = range_stats(in, 0.984497, 128, fp16, 1, 1);
  REQUIRE(one.size() == 1);
  CHECK((one[0].s_overflow == r[0].s_overflow && one[0].sp_max == r[0].sp_max && one[0].kp_min == r[0].kp_min));
}

TEST_CASE("range statistics: β = 0 leaves the keys and scores as they are (scaled by 1/α)", "[ranges]") {
  const AttentionInputs in = inputs(30, 0.5);
  const double a = in.effective_scale();
  const HeadRanges h = range_stats(in, 0.0, 128, format_by_name("fp16"), 1)[0];
  CHECK(h.kp_min == h.k_min * a);
  CHECK(h.kp_max == h.k_max * a);
  CHECK(h.sp_min == Approx(h.s_min * a).epsilon(1e-12));
  CHECK(h.s_overflow == h.scores);  // x0 = 30: every score is beyond 65504
  // With the paper's β the keys shrink to ±(1 − β)·x0/α + the spread, and the scores with them.
  const HeadRanges p = range_stats(in, 0.984497, 128, format_by_name("fp16"), 1)[0];
  CHECK(std::max(std::fabs(p.kp_min), std::fabs(p.kp_max)) < 0.1);
  CHECK(p.sp_overflow == 0);
  CHECK_THROWS(range_stats(in, 0.5, 0, format_by_name("fp16")));
}
