// Hand-checked rounding facts (the exhaustive MPFR comparisons live in test_round_mpfr.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "pasa/core/error.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

TEST_CASE("overflow thresholds and policies", "[round]") {
  const Format h = format_by_name("fp16");
  CHECK(round(65519.99, h) == 65504.0);
  CHECK(std::isinf(round(65520.0, h)));  // the paper's overflow threshold: 65520 rounds to inf
  CHECK(round(65520.0, h, {RoundMode::nearest_even, Overflow::saturate}) == 65504.0);
  CHECK(round(1e6, h, {RoundMode::toward_zero}) == 65504.0);
  CHECK(round(-1e6, h, {RoundMode::toward_pos}) == -65504.0);
  CHECK(std::isinf(round(-1e6, h, {RoundMode::toward_neg})));
  const Format e4 = format_by_name("fp8_e4m3fn");
  CHECK(round(464.0, e4) == 448.0);  // tie to even
  CHECK(std::isnan(round(465.0, e4)));
  CHECK(round(465.0, e4, {RoundMode::nearest_even, Overflow::saturate}) == 448.0);
  CHECK(std::isnan(round(std::numeric_limits<double>::infinity(), e4)));
}

TEST_CASE("encode and decode are inverse on every fp16 and fp8 pattern", "[round]") {
  for (const char* name : {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2"}) {
    const Format f = format_by_name(name);
    for (std::uint64_t b = 0; b < (std::uint64_t(1) << f.storage_bits()); ++b) {
      const double v = decode(b, f);
      if (std::isnan(v)) continue;
      REQUIRE(encode(v, f) == b);
      REQUIRE(round(v, f) == v);
    }
  }
  CHECK(encode(1.0, format_by_name("fp16")) == 0x3C00);
  CHECK(encode(448.0, format_by_name("fp8_e4m3fn")) == 0x7E);
  CHECK(std::isnan(decode(0x7F, format_by_name("fp8_e4m3fn"))));
  CHECK_THROWS(encode(1.0 + 1e-9, format_by_name("fp16")));
}

TEST_CASE("span kernels equal the scalar rounding", "[round]") {
  RandomBits rng(7);
  std::vector<double> xs;
  for (int i = 0; i < 200000; ++i) {
    const double m = std::ldexp(static_cast<double>(rng.next() >> 11), -53);
    const int e = static_cast<int>(rng.next() % 80) - 40;
    xs.push_back((rng.next() & 1 ? -1 : 1) * std::ldexp(m, e));
  }
  // Zeros and the subnormals of double and float (the fp64 and fp32 formats' own: no tie to move, in any mode).
  for (const double v : {0.0, 0x1p-1074, 3 * 0x1p-1074, 0x1p-1022 - 0x1p-1074, 0x1p-1022, 0x1p-149, 3 * 0x1p-149,
                         0x1p-126 - 0x1p-149, 0x1p-126, 0x1p-25, 0x1p-24, 1.5 * 0x1p-24})
    xs.insert(xs.end(), {v, -v});
  for (const char* name : {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "tf32", "fp32", "fp64", "p=5,emax=7,subnormals=0"}) {
    const Format f = format_by_name(name);
    for (RoundMode m : {RoundMode::nearest_even, RoundMode::nearest_away})
      for (Overflow ov : {Overflow::ieee, Overflow::saturate})
        for (bool fl : {false, true}) {
          const RoundOptions o{m, ov, fl, fl};
          std::vector<double> out(xs.size());
          round_span(xs, out, f, o);
          std::vector<float> xf(xs.begin(), xs.end()), of(xs.size());
          round_span(xf, of, f, o);
          for (size_t i = 0; i < xs.size(); ++i) {
            const double r = round(xs[i], f, o);
            INFO(name << " " << round_mode_name(m) << " x=" << xs[i]);
            REQUIRE((std::isnan(r) ? std::isnan(out[i])
                                   : std::bit_cast<std::uint64_t>(r) == std::bit_cast<std::uint64_t>(out[i])));
            const double rf = round(static_cast<double>(xf[i]), f, o);
            if (std::isnan(rf)) REQUIRE(std::isnan(of[i]));
            else if (std::fabs(rf) <= std::numeric_limits<float>::max())
              REQUIRE(std::bit_cast<std::uint64_t>(rf) == std::bit_cast<std::uint64_t>(static_cast<double>(of[i])));
          }
        }
  }
}

TEST_CASE("rounding mode and overflow names: unknown ones are InputErrors listing the known ones", "[round]") {
  CHECK(round_mode_by_name("rz") == RoundMode::toward_zero);
  CHECK(round_mode_by_name("stochastic") == RoundMode::stochastic);
  CHECK(round_mode_by_name("rna") == RoundMode::nearest_away);
  CHECK(round_mode_by_name("nearest_away") == RoundMode::nearest_away);
  CHECK(round_mode_name(RoundMode::nearest_away) == "rna");
  CHECK_THAT(known_round_mode_names(), Catch::Contains("rna (nearest_away)"));
  CHECK(overflow_by_name("saturate") == Overflow::saturate);
  CHECK_THROWS_AS(round_mode_by_name("up"), InputError);
  CHECK_THROWS_WITH(round_mode_by_name("up"), Catch::Contains("\"up\"") && Catch::Contains("rne"));
  CHECK_THROWS_AS(overflow_by_name("clamp"), InputError);
  CHECK_THROWS_WITH(overflow_by_name("clamp"), Catch::Contains("\"clamp\"") && Catch::Contains("saturate"));
}
