// Stochastic rounding: x between neighbours lo < x < hi rounds to hi with probability (x - lo)/(hi - lo), so
// it is unbiased. Tolerance: with N draws the count of "up" results is Binomial(N, p); we require it within
// 5 standard deviations sqrt(N p (1-p)) of N p, i.e. the mean within 5 standard errors of x (a correct
// implementation fails with probability ~6e-7 per check; the seeds are fixed, so the run is deterministic).
// The neighbours lo, hi come from round-toward-zero and round-away (checked against MPFR elsewhere).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <vector>

#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

struct Case {
  const char* format;
  double x;
};

// Neighbours of x in the format: the results of rounding toward -inf and toward +inf.
void neighbours(double x, const Format& f, double& lo, double& hi) {
  lo = round(x, f, {RoundMode::toward_neg});
  hi = round(x, f, {RoundMode::toward_pos});
}

}  // namespace

TEST_CASE("stochastic rounding: up-probability is the distance to the neighbours, mean is unbiased", "[round][stochastic]") {
  const std::vector<Case> cases = {
      {"fp16", 1.0 + 0.3 * std::ldexp(1.0, -10)},      // normal binade, 0.3 ulp above 1
      {"fp16", -(1000.0 + 0.9 * 0.5)},                   // negative, ulp 0.5 at 1000
      {"fp16", 2.7 * std::ldexp(1.0, -24)},              // subnormal range
      {"fp16", 0.1 * std::ldexp(1.0, -24)},              // below the smallest subnormal: 0 or 2^-24
      {"bf16", 3.14159265358979},
      {"bf16", 1e-40},                                    // bf16 subnormal
      {"fp8_e4m3fn", 0.3},
      {"fp8_e4m3fn", 440.0},                                // between 416 and 448
      {"fp8_e5m2", -0.0123},
      {"fp8_e5m2", 3.0 * std::ldexp(1.0, -17)},           // e5m2 subnormal: 2^-16 spacing
      {"tf32", 1.0 / 3.0},
  };
  constexpr int N = 200000;
  RandomBits rng(2024);
  for (const auto& c : cases) {
    const Format f = format_by_name(c.format);
    double lo, hi;
    neighbours(c.x, f, lo, hi);
    REQUIRE(lo < c.x);
    REQUIRE(c.x < hi);
    const double p = (c.x - lo) / (hi - lo);
    long up = 0;
    double sum = 0;
    for (int i = 0; i < N; ++i) {
      const double r = round(c.x, f, {RoundMode::stochastic}, &rng);
      REQUIRE((r == lo || r == hi));
      up += r == hi;
      sum += r;
    }
    const double sd = std::sqrt(N * p * (1 - p));
    INFO(c.format << " x=" << c.x << " lo=" << lo << " hi=" << hi << " p=" << p << " up=" << up << "/" << N);
    CHECK(std::fabs(up - N * p) <= 5 * sd);
    const double se = (hi - lo) * std::sqrt(p * (1 - p) / N);
    CHECK(std::fabs(sum / N - c.x) <= 5 * se);
  }
}

TEST_CASE("stochastic rounding: probability is linear in the position between neighbours", "[round][stochastic]") {
  // x = lo + k/16 of the gap, k = 1..15, in fp8_e4m3fn between 1 and 1.125: P(up) = k/16.
  const Format f = format_by_name("fp8_e4m3fn");
  constexpr int N = 50000;
  RandomBits rng(99);
  for (int k = 1; k < 16; ++k) {
    const double x = 1.0 + k * 0.125 / 16, p = k / 16.0;
    long up = 0;
    for (int i = 0; i < N; ++i) up += round(x, f, {RoundMode::stochastic}, &rng) == 1.125;
    INFO("k=" << k << " up=" << up);
    CHECK(std::fabs(up - N * p) <= 5 * std::sqrt(N * p * (1 - p)));
  }
}

TEST_CASE("stochastic rounding: exact values stay, overflow policy applies, seeds reproduce", "[round][stochastic]") {
  const Format h = format_by_name("fp16");
  RandomBits rng(5);
  for (double v : {0.0, -0.0, 1.0, 65504.0, std::ldexp(1.0, -24), -3.5})
    for (int i = 0; i < 1000; ++i) REQUIRE(std::bit_cast<std::uint64_t>(round(v, h, {RoundMode::stochastic}, &rng)) ==
                                           std::bit_cast<std::uint64_t>(v));
  // Between max_finite and the overflow: up means overflow, to inf (ieee) or max (saturate).
  bool saw_inf = false;
  for (int i = 0; i < 1000; ++i) {
    const double r = round(65504.0 + 16.0, h, {RoundMode::stochastic}, &rng);
    REQUIRE((r == 65504.0 || std::isinf(r)));
    saw_inf |= std::isinf(r);
    REQUIRE(round(65504.0 + 16.0, h, {RoundMode::stochastic, Overflow::saturate}, &rng) == 65504.0);
  }
  CHECK(saw_inf);
  CHECK_THROWS(round(1.1, h, {RoundMode::stochastic}));  // needs a random source

  // The same seed gives the same results, scalar or span, double or float; each element takes one draw.
  std::vector<double> xs;
  for (int i = 0; i < 1000; ++i) xs.push_back(1.0 + i * 1e-4);
  std::vector<float> xf(xs.begin(), xs.end());
  RandomBits a(42), b(42), c(42), e(42), d(43);
  std::vector<double> out(xs.size()), out_d(xs.size());
  std::vector<float> out_f(xs.size());
  round_span(xs, out, h, {RoundMode::stochastic}, &b);
  round_span(xf, out_f, h, {RoundMode::stochastic}, &c);
  round_span(xs, out_d, h, {RoundMode::stochastic}, &d);
  int differ = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double r = round(xs[i], h, {RoundMode::stochastic}, &a);
    REQUIRE(out[i] == r);
    REQUIRE(static_cast<double>(out_f[i]) == round(static_cast<double>(xf[i]), h, {RoundMode::stochastic}, &e));
    differ += out_d[i] != r;
  }
  CHECK(differ > 100);  // another seed gives other choices
}
