// Metrics and score statistics as JSON (io/metrics_json): non-finite values are written as strings.
#include <catch2/catch.hpp>

#include <limits>

#include <nlohmann/json.hpp>

#include "pasa/exact/metrics.hpp"
#include "pasa/io/metrics_json.hpp"

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

TEST_CASE("metrics JSON: NaN and inf RMSE are written as strings", "[metrics]") {
  const Tensor g = vec({3, 4, 1, 1}, 2);
  const Metrics n = compare_outputs(vec({kNaN, 4, 1, 1}, 2), g);
  const Metrics i = compare_outputs(vec({3, 4, -kInf, 2}, 2), g);
  CHECK(to_json(n)["rmse"] == "nan");
  CHECK(to_json(i)["rmse"] == "inf");
  // Without a baseline the skill is NaN, written as a string; with one, a number.
  CHECK(to_json(n)["skill"] == "nan");
  const Metrics m = compare_outputs(vec({3, 5}), vec({3, 4}), vec({1, 1}));
  CHECK(to_json(m)["skill"] == m.skill);
}

TEST_CASE("score statistics JSON: the fp8 overflow count", "[metrics]") {
  // E4M3FN: max 448, the tie 464 stays finite, 466 overflows (to NaN: the format has no inf).
  AttentionInputs in;
  const Format h = format_by_name("fp16");
  in.q = Tensor({1, 1, 1, 2}, h);
  in.q.data = {1, 0};
  in.k = Tensor({1, 1, 3, 2}, h);
  in.k.data = {464, 0, 466, 0, 448, 0};
  in.v = in.k;
  in.scale = 1;
  const ScoreStats e = score_stats(in, format_by_name("fp8_e4m3fn"));
  CHECK(to_json(e)["overflow"] == 1);
}
