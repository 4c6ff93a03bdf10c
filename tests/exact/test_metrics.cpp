// Metrics and score statistics on hand-computed cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>


#include "pasa/core/error.hpp"
#include "pasa/exact/metrics.hpp"

using namespace pasa;

namespace {
Tensor vec(std::initializer_list<double> v, std::size_t rows = 1) {
  Tensor t(Shape{1, 1, rows, v.size() / rows}, format_by_name("fp64"));
  t.data.assign(v);
  return t;
}
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("metrics: Eq. 19 rmse, errors and cosine by hand", "[metrics]") {
  const Tensor g = vec({3, 4});
  const Metrics same = compare_outputs(g, g);
  CHECK(same.rmse == 0);
  CHECK(same.cosine == Approx(1.0).epsilon(1e-15));
  const Metrics m = compare_outputs(vec({3, 5}), g);
  CHECK(m.rmse == Approx(0.2).epsilon(1e-15));  // ‖(0, 1)‖ / ‖(3, 4)‖ = 1/5
  CHECK(m.rmse_finite == Approx(0.2).epsilon(1e-15));
  CHECK(m.max_abs_err == 1.0);
  CHECK(m.max_rel_err == 0.25);
  CHECK(m.cosine == Approx(29.0 / (5.0 * std::sqrt(34.0))).epsilon(1e-15));
  CHECK(m.nan_pct == 0);
  CHECK(m.elements == 2);
  CHECK(m.rows == 1);
}

TEST_CASE("metrics: rmse far below double resolution is accumulated exactly", "[metrics]") {
  // The difference of 1 + 2^-52 and 1 is exact, and its square 2^-104 survives in the double-double sum.
  const Metrics m = compare_outputs(vec({1 + 0x1p-52, 1}), vec({1, 1}));
  CHECK(m.rmse == Approx(0x1p-52 / std::sqrt(2.0)).epsilon(1e-14));
}

TEST_CASE("metrics: NaN and inf elements are counted, not dropped", "[metrics]") {
  const Tensor g = vec({3, 4, 1, 1}, 2);
  const Metrics n = compare_outputs(vec({kNaN, 4, 1, 1}, 2), g);
  CHECK(std::isnan(n.rmse));
  CHECK(n.rmse_finite == 0);
  CHECK(n.nan_count == 1);
  CHECK(n.nan_pct == 25.0);
  CHECK(n.rows_with_nonfinite == 1);
  CHECK(n.rows_with_nonfinite_pct == 50.0);
  const Metrics i = compare_outputs(vec({3, 4, -kInf, 2}, 2), g);
  CHECK(std::isinf(i.rmse));
  CHECK(i.inf_pct == 25.0);
  CHECK(i.rmse_finite == Approx(1.0 / std::sqrt(26.0)).epsilon(1e-15));  // ‖(0,0,·,1)‖/‖(3,4,·,1)‖
  CHECK_THROWS_AS(compare_outputs(vec({1, 2, 3, 4}, 1), g), InputError);
}

TEST_CASE("score statistics: min/max and fp16/fp8 overflow counts by hand", "[metrics]") {
  AttentionInputs in;
  const Format h = format_by_name("fp16");
  in.q = Tensor({1, 1, 1, 2}, h);
  in.q.data = {5, 0};
  in.k = Tensor({1, 1, 3, 2}, h);
  in.k.data = {13104, 0, 13096, 0, -13200, 0};  // q·k = 65520 (the fp16 overflow tie), 65480, -66000
  in.v = in.k;
  in.scale = 2;
  const ScoreStats s = score_stats(in, h);
  CHECK(s.entries == 3);
  CHECK(s.max_unscaled == 65520);
  CHECK(s.min_unscaled == -66000);
  CHECK(s.max == 131040);
  CHECK(s.min == -132000);
  CHECK(s.over_max == 2);  // 65520 and -66000 exceed 65504
  CHECK(s.overflow == 2);  // 65520 rounds to inf under RNE
  CHECK(s.over_max_scaled == 3);
  CHECK(s.overflow_scaled == 3);
  // E4M3FN: max 448, the tie 464 stays finite, 466 overflows (to NaN: the format has no inf).
  in.q.data = {1, 0};
  in.k.data = {464, 0, 466, 0, 448, 0};
  in.v = in.k;
  in.scale = 1;
  const ScoreStats e = score_stats(in, format_by_name("fp8_e4m3fn"));
  CHECK(e.over_max == 2);
  CHECK(e.overflow == 1);
  in.mask.kv_len = {1};  // only the first key visible
  CHECK(score_stats(in, format_by_name("fp8_e4m3fn")).entries == 1);
}
