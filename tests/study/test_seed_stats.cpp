// Statistics over seeds (seed_stats.hpp): t quantiles against printed tables, percentiles against hand
// computation, the prediction interval and the paired ratio against their formulas.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "pasa/study/seed_stats.hpp"

using namespace pasa;

TEST_CASE("seed stats: Student t quantiles equal the printed tables", "[stats]") {
  // t_{df, 0.975} and t_{df, 0.95} to the 10 digits of standard tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
  CHECK(student_t_quantile(0.975, 1) == Approx(12.7062047362).epsilon(1e-9));
  CHECK(student_t_quantile(0.975, 2) == Approx(4.3026527297).epsilon(1e-9));
  CHECK(student_t_quantile(0.975, 9) == Approx(2.2621571628).epsilon(1e-9));
  CHECK(student_t_quantile(0.975, 49) == Approx(2.0095752371).epsilon(1e-9));
  CHECK(student_t_quantile(0.95, 19) == Approx(1.7291328115).epsilon(1e-9));
  // Large df: the normal quantile z plus the first term of the Cornish-Fisher expansion, (z³ + z) / (4 df).
  const double z = 1.9599639845;
  CHECK(student_t_quantile(0.975, 1e7) == Approx(z + (z * z * z + z) / 4e7).epsilon(1e-9));
  CHECK(student_t_quantile(0.025, 9) == Approx(-2.2621571628).epsilon(1e-9));
  CHECK(student_t_quantile(0.5, 4) == Approx(0).margin(1e-12));
  CHECK_THROWS(student_t_quantile(1.0, 3));
  CHECK_THROWS(student_t_quantile(0.9, 0));
}

TEST_CASE("seed stats: percentiles (type 7) and percentile ranks", "[stats]") {
  const std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6};  // sorted 1 1 2 3 4 5 6 9
  CHECK(percentile(x, 50) == 3.5);
  CHECK(percentile(x, 5) == 1.0);
  CHECK(percentile(x, 95) == Approx(7.95).epsilon(1e-14));
  CHECK(percentile(x, 37.5) == Approx(2.625).epsilon(1e-14));
  CHECK(percentile(x, 0) == 1);
  CHECK(percentile(x, 100) == 9);
  CHECK(percentile_rank(x, 0) == 0);
  CHECK(percentile_rank(x, 10) == 100);
  CHECK(percentile_rank(x, 1) == 12.5);     // two ties at the bottom: half of 2 of 8
  CHECK(percentile_rank(x, 3.5) == 50);
  CHECK_THROWS(percentile({}, 50));
}

TEST_CASE("seed stats: spread and the prediction interval for one more draw", "[stats]") {
  const std::vector<double> x = {2, 4, 4, 4, 5, 5, 7, 9, std::numeric_limits<double>::quiet_NaN()};
  const SeedSpread s = seed_spread(x);
  CHECK(s.n == 8);  // the NaN is left out
  CHECK(s.mean == 5);
  const double sd = std::sqrt(32.0 / 7);
  CHECK(s.sd == Approx(sd).epsilon(1e-14));
  const double half = 2.3646242516 * sd * std::sqrt(1 + 1.0 / 8);  // t_{7, 0.975} from the tables
  CHECK(s.predict_lo == Approx(5 - half).margin(1e-9));
  CHECK(s.predict_hi == Approx(5 + half).epsilon(1e-9));
  CHECK((s.min == 2 && s.max == 9 && s.p50 == 4.5));
  CHECK_THROWS(seed_spread({1.0}));
  // The same draws shifted by 10: their normal interval (lo ≈ 9.6) stays above 0 and is kept, flag off; the
  // unshifted ones reach below 0 (lo ≈ −0.36) and get the empirical interval.
  std::vector<double> y;
  for (double v : x) y.push_back(v + 10);
  const SeedSpread kept = seed_spread(y, /*nonnegative=*/true);
  CHECK((kept.predict_lo == Approx(15 - half).epsilon(1e-9) && !kept.predict_empirical));
  CHECK(seed_spread(x, /*nonnegative=*/true).predict_empirical);
}

TEST_CASE("seed stats: a skewed nonnegative quantity gets the empirical interval", "[stats]") {
  // Nineteen zeros and one 10 (a NaN % that is 0 on most draws): mean 0.5, sd sqrt(5), so the normal interval
  // starts near −4.2; the empirical 2.5th–97.5th percentile (type 7) is [0, 10·(0.975·19 − 18)] = [0, 5.25].
  std::vector<double> x(19, 0.0);
  x.push_back(10.0);
  const SeedSpread normal = seed_spread(x);
  CHECK(normal.predict_lo < 0);
  CHECK(!normal.predict_empirical);
  const SeedSpread s = seed_spread(x, /*nonnegative=*/true);
  CHECK(s.predict_empirical);
  CHECK(s.predict_lo == 0);
  CHECK(s.predict_hi == Approx(5.25).epsilon(1e-12));
  CHECK(s.mean == normal.mean);
}

TEST_CASE("seed stats: paired ratio is a geometric mean with a t interval on the log ratios", "[stats]") {
  // log ratios 0.1, 0.2, 0.3: mean 0.2, sd 0.1, t_{2, 0.975} = 4.30265...
  const std::vector<double> b = {1, 2, 4};
  const std::vector<double> a = {std::exp(0.1), 2 * std::exp(0.2), 4 * std::exp(0.3)};
  const auto r = paired_ratio(a, b);
  REQUIRE(r);
  CHECK(r->n == 3);
  CHECK(r->geo_mean == Approx(std::exp(0.2)).epsilon(1e-14));
  const double half = 4.3026527297 * 0.1 / std::sqrt(3.0);
  CHECK(r->lo == Approx(std::exp(0.2 - half)).epsilon(1e-9));
  CHECK(r->hi == Approx(std::exp(0.2 + half)).epsilon(1e-9));
  CHECK(!r->excludes_one());  // 0.2 − 0.248 < 0: three seeds this spread do not settle the sign
  const auto tight = paired_ratio({std::exp(0.2), std::exp(0.21), std::exp(0.22)}, {1, 1, 1});
  CHECK(tight->excludes_one());
  CHECK(tight->lo > 1);
  // Swapping the algorithms inverts the ratio and its interval.
  const auto inv = paired_ratio(b, a);
  CHECK(inv->geo_mean == Approx(1 / r->geo_mean).epsilon(1e-14));
  CHECK(inv->hi == Approx(1 / r->lo).epsilon(1e-12));
  // Non-finite or non-positive pairs are left out; fewer than two pairs: no interval.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(paired_ratio({1, nan, 0}, {1, 1, 1}) == std::nullopt);
  CHECK(paired_ratio({2, 2, nan}, {1, 1, 1})->n == 2);
  CHECK_THROWS(paired_ratio({1, 2}, {1}));
}
