// round_sum: one rounding of an exact hi + lo, held against MPFR's rounding of the exact sum (computed in
// MPFR, not by pasa), every deterministic mode and option, formats from fp8 to 53 bits; stochastic mode
// against its documented rule with the exact distance computed by MPFR, and for unbiasedness.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <mpfr.h>

#include "../support/mpfr_round.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

constexpr RoundMode kDeterministic[] = {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero,
                                        RoundMode::toward_pos,   RoundMode::toward_neg,   RoundMode::odd};

bool same(double a, double b) {
  if (std::isnan(a)) return std::isnan(b);
  if (a == 0 && b == 0) return true;  // the sign of an exact zero sum is not what is tested here
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// MPFR's one rounding of the exact hi + lo (2200 bits hold any sum of two doubles exactly).
double reference(double hi, double lo, const Format& f, const RoundOptions& o) {
  mpfr_t x;
  mpfr_init2(x, 2200);
  mpfr_set_d(x, hi, MPFR_RNDN);
  mpfr_add_d(x, x, lo, MPFR_RNDN);
  const double r = test::mpfr_round_to(x, f, o);
  mpfr_clear(x);
  return r;
}

void check_all_options(double hi, double lo, const Format& f) {
  if (!std::isfinite(hi)) return;
  for (RoundMode m : kDeterministic)
    for (Overflow ov : {Overflow::ieee, Overflow::saturate})
      for (int fl = 0; fl < 4; ++fl) {
        const RoundOptions o{m, ov, (fl & 1) != 0, (fl & 2) != 0};
        const double got = round_sum(hi, lo, f, o);
        const double want = reference(hi, lo, f, o);
        INFO(f.name << " mode " << round_mode_name(m) << " " << overflow_name(ov) << " daz " << (fl & 1) << " ftz "
                    << (fl >> 1) << " hi " << hi << " (" << std::hexfloat << hi << ") lo " << lo << std::defaultfloat);
        REQUIRE(same(got, want));
        // The fast path of the engines: round-to-odd to 53 bits, then round(), for p <= 51.
        if (sticky_fold_rounds_once(f, o)) REQUIRE(same(round(sticky_fold(hi, lo), f, o), want));
      }
}

// The built-in formats test::mpfr_round_to models (IEEE-like grids with IEEE or fn specials; the element
// formats of block-scaled quantisation have their round_sum checks in test_formats_mx.cpp), and customs.
std::vector<Format> formats() {
  std::vector<Format> fs;
  for (const Format& f : builtin_formats())
    if (f.ieee_like_grid() && f.has_nan()) fs.push_back(f);
  fs.push_back(format_by_name("p=52,emax=1023"));
  fs.push_back(format_by_name("p=53,emax=15"));  // 53 bits with a narrow range: subnormals of a p = 53 grid
  fs.push_back(format_by_name("p=51,emax=100"));
  return fs;
}

}  // namespace

TEST_CASE("round_sum: the cases that defeat rounding through double or a neighbour", "[round][round_sum]") {
  const Format fp32 = format_by_name("fp32"), bf16 = format_by_name("bf16"), fp16 = format_by_name("fp16");
  // 256·256 + 2^-24·(−2^-24) to fp32 in RZ: RN to double gives 65536, RZ of the exact value is 65536 − 2^-8.
  const DD s = two_sum(65536.0, -0x1p-48);
  CHECK(round(s.hi + s.lo, fp32, {RoundMode::toward_zero}) == 65536.0);  // what one rounding avoids
  CHECK(round_sum(s.hi, s.lo, fp32, {RoundMode::toward_zero}) == 65535.99609375);
  // The neighbour of hi toward lo can be a grid point: x = 1 + 2^-23 − 2^-52 + 2^-54 lies below 1 + 2^-23.
  CHECK(round_sum(1 + 0x1p-23 - 0x1p-52, 0x1p-54, fp32, {RoundMode::toward_neg}) == 1.0);
  CHECK(round_sum(1 + 0x1p-23 - 0x1p-52, 0x1p-54, fp32, {RoundMode::toward_pos}) == 1 + 0x1p-23);
  // A tie of hi is no tie of hi + lo, both sides; RNE bf16 of 1 + 3·2^-8 ∓ 2^-60.
  CHECK(round_sum(1 + 3 * 0x1p-8, -0x1p-60, bf16) == 1 + 0x1p-7);
  CHECK(round_sum(1 + 3 * 0x1p-8, 0x1p-60, bf16) == 1 + 0x1p-6);
  // Just below a power of two (the binade below has half the quantum) and at fp16's overflow threshold.
  CHECK(round_sum(2.0, -0x1p-60, fp16, {RoundMode::toward_zero}) == 2 - 0x1p-10);
  CHECK(round_sum(65520.0, -0x1p-40, fp16) == 65504.0);
  CHECK(std::isinf(round_sum(65520.0, 0x1p-40, fp16)));
  // fp16 subnormal tie (2^-25 between 0 and 2^-24) decided by lo.
  CHECK(round_sum(0x1p-25, 0x1p-80, fp16) == 0x1p-24);
  CHECK(round_sum(0x1p-25, -0x1p-80, fp16) == 0.0);
  for (const Format& f : formats()) {
    check_all_options(s.hi, s.lo, f);
    check_all_options(1 + 0x1p-23 - 0x1p-52, 0x1p-54, f);
    check_all_options(-(1 + 3 * 0x1p-8), 0x1p-60, f);
    check_all_options(2.0, -0x1p-53, f);
    check_all_options(f.max_finite() + std::ldexp(f.max_finite(), -f.p - 1), -0x1p-70, f);
  }
}

TEST_CASE("round_sum: ties that only hi + lo holds, nearest_away against nearest_even", "[round][round_sum]") {
  // At 53 bits a midpoint has 54: hi is a grid point and lo half its quantum (or hi the midpoint's RN and lo
  // the rest). Ties away go up in magnitude, ties to even to the even neighbour; hi + lo a hair off the tie
  // goes to the nearer neighbour in both. Both signs; fp64, 53 bits with subnormals from 2^-14, and fp32
  // (where a tie is a double: lo = 0 and lo = ±tiny next to it).
  const RoundOptions rna{RoundMode::nearest_away}, rne{};
  const Format fp64 = format_by_name("fp64"), n53 = format_by_name("p=53,emax=15"), fp32 = format_by_name("fp32");
  for (const double s : {1.0, -1.0}) {
    CHECK(round_sum(s * 1.0, s * 0x1p-53, fp64, rna) == s * (1 + 0x1p-52));             // 1 + ulp/2: away
    CHECK(round_sum(s * 1.0, s * 0x1p-53, fp64, rne) == s * 1.0);                       // to even (1)
    CHECK(round_sum(s * (1 + 0x1p-52), s * 0x1p-53, fp64, rna) == s * (1 + 0x1p-51));   // both up: even is up
    CHECK(round_sum(s * (1 + 0x1p-52), -s * 0x1p-53, fp64, rna) == s * (1 + 0x1p-52));  // the tie below it
    CHECK(round_sum(s * (1 + 0x1p-52), -s * 0x1p-53, fp64, rne) == s * 1.0);
    // n53: min normal 2^-14, quantum 2^-66 from 2^-14 down (subnormals included).
    CHECK(round_sum(s * 0x1p-14, s * 0x1p-67, n53, rna) == s * (0x1p-14 + 0x1p-66));
    CHECK(round_sum(s * 0x1p-14, s * 0x1p-67, n53, rne) == s * 0x1p-14);
    CHECK(round_sum(s * 0x1p-14, s * std::nextafter(0x1p-67, 0.0), n53, rna) == s * 0x1p-14);
    CHECK(round(s * 0x1p-67, n53, rna) == s * 0x1p-66);  // half the smallest subnormal: up to it, not to 0
    CHECK(round(s * 0x1p-67, n53, rne) == 0.0);
    CHECK(round_sum(s * (5 * 0x1p-67), s * 0x1p-120, n53, rna) == s * (3 * 0x1p-66));   // above 2.5 quanta
    CHECK(round_sum(s * (5 * 0x1p-67), -s * 0x1p-120, n53, rna) == s * (2 * 0x1p-66));  // below
    // fp32's tie 1 + 2^-24 (a double): lo = 0 is the tie (away), lo = ∓2^-80 moves it off.
    CHECK(round_sum(s * (1 + 0x1p-24), 0.0, fp32, rna) == s * (1 + 0x1p-23));
    CHECK(round_sum(s * (1 + 0x1p-24), -s * 0x1p-80, fp32, rna) == s * 1.0);
    // fp64's overflow threshold max + ulp/2 = 2^1024 − 2^970 (not a double): hi = max, lo = 2^970.
    const double mx = std::numeric_limits<double>::max();
    CHECK(round_sum(s * mx, s * 0x1p970, fp64, rna) == s * std::numeric_limits<double>::infinity());
    CHECK(round_sum(s * mx, s * 0x1p970, fp64, {RoundMode::nearest_away, Overflow::saturate}) == s * mx);
    CHECK(round_sum(s * mx, s * std::nextafter(0x1p970, 0.0), fp64, rna) == s * mx);
  }
  for (const Format& f : {fp64, n53, fp32}) {
    check_all_options(1.0, 0x1p-53, f);
    check_all_options(-0x1p-14, -0x1p-67, f);
    check_all_options(5 * 0x1p-67, 0x1p-120, f);
  }
}

TEST_CASE("round_sum: random exact sums and products against MPFR, all formats and options", "[round][round_sum]") {
  boost::random::mt19937_64 eng(14);
  boost::random::uniform_int_distribution<int> expo(-40, 40), coin(0, 5);
  boost::random::uniform_real_distribution<double> uni(1.0, 2.0);
  for (const Format& f : formats()) {
    // Operands on the format's grid and on coarser or finer grids; sums and products made exact as hi + lo.
    const int span = std::min(f.emax + 4, 60);
    boost::random::uniform_int_distribution<int> fexp(f.emin() - f.p - 2, span);
    for (int i = 0; i < 800; ++i) {
      const int kind = coin(eng);
      double a = std::ldexp(uni(eng), fexp(eng)) * (coin(eng) < 3 ? 1 : -1);
      double b = std::ldexp(uni(eng), kind < 2 ? fexp(eng) : std::ilogb(a) - 30 - expo(eng)) * (coin(eng) < 3 ? 1 : -1);
      if (kind == 5) {  // a value near a midpoint of the format plus a tiny tail
        a = round(a, f) + std::ldexp(1.0, std::ilogb(a) - f.p) * (coin(eng) < 3 ? 1 : -1);
        // (a may be 0, the tail cancelling the rounded value, or NaN, a format without inf rounding an overflow:
        // ilogb gives INT_MIN for both, so b is then taken near 2^-60; a NaN case is skipped below)
        const int ea = std::isfinite(a) && a != 0 ? std::ilogb(a) : 0;
        b = std::ldexp(1.0, ea - 60 - expo(eng) / 4) * (coin(eng) < 3 ? 1 : -1);
      }
      const DD x = kind == 3 ? two_prod(round(a, format_by_name("fp32")), round(b / a, format_by_name("fp32")))
                             : two_sum(a, b);
      if (!std::isfinite(x.hi) || (x.hi != 0 && std::fabs(x.hi) < 0x1p-1000)) continue;
      check_all_options(x.hi, x.lo, f);
    }
  }
}

TEST_CASE("round_sum: stochastic rounding uses the exact distance", "[round][round_sum][stochastic]") {
  // The documented rule: away from zero iff u < f, u = (draw >> 11)·2^-53, f the exact distance of |hi + lo|
  // above its truncation in quanta (computed here by MPFR).
  boost::random::mt19937_64 eng(7);
  boost::random::uniform_real_distribution<double> uni(-4.0, 4.0);
  boost::random::uniform_int_distribution<int> tail(-62, -45);
  const RoundOptions sr{RoundMode::stochastic};
  for (const char* name : {"fp16", "bf16", "fp32", "fp64", "p=53,emax=15"}) {
    const Format f = format_by_name(name);
    RandomBits rng(3), mirror(3);
    mpfr_t x, lower, d;
    mpfr_inits2(2200, x, lower, d, nullptr);
    for (int i = 0; i < 3000; ++i) {
      const double a = uni(eng);
      const DD s = two_sum(a, std::ldexp(uni(eng), tail(eng)));
      const double got = round_sum(s.hi, s.lo, f, sr, &rng);
      mpfr_set_d(x, s.hi, MPFR_RNDN);
      mpfr_add_d(x, x, s.lo, MPFR_RNDN);
      // Magnitudes: away from zero with probability |x − RZ(x)| / quantum.
      const double tz = test::mpfr_round_to(x, f, {RoundMode::toward_zero});
      const double away = test::mpfr_round_to(x, f, {s.hi > 0 ? RoundMode::toward_pos : RoundMode::toward_neg});
      const double u = std::ldexp(static_cast<double>(mirror.next() >> 11), -53);
      double want = tz;
      if (tz != away) {
        mpfr_sub_d(d, x, tz, MPFR_RNDN);
        mpfr_div_d(d, d, away - tz, MPFR_RNDN);  // exact: a power-of-two quantum
        want = mpfr_cmp_d(d, u) > 0 ? away : tz;
      }
      INFO(name << " " << std::hexfloat << s.hi << " + " << s.lo);
      REQUIRE(same(got, want));
    }
    mpfr_clears(x, lower, d, nullptr);
  }
  // Unbiased where only lo carries the distance: fp64 target, x = 1 + 2^-54 is 1/4 of a quantum above 1.
  RandomBits rng(11);
  const int n = 40000;
  double sum_quanta = 0;
  for (int i = 0; i < n; ++i) sum_quanta += (round_sum(1.0, 0x1p-54, format_by_name("fp64"), sr, &rng) - 1.0) / 0x1p-52;
  const double mean = sum_quanta / n;  // binomial(n, 1/4): sd of the mean 0.0022
  CHECK(std::fabs(mean - 0.25) < 0.012);
}

TEST_CASE("exact_quotient: one rounding of a/b in every mode, against MPFR", "[round][round_sum]") {
  // MPFR's quotient at 4000 bits rounded to odd (sticky for any later rounding to <= 53 bits), rounded once
  // by test::mpfr_round_to; the engine's q + lo by round_sum, and by round(sticky_fold) where that applies.
  boost::random::mt19937_64 eng(15);
  boost::random::uniform_real_distribution<double> uni(1.0, 2.0);
  boost::random::uniform_int_distribution<int> expo(-20, 20), coin(0, 3);
  mpfr_t x, y;
  mpfr_inits2(4000, x, y, nullptr);
  const Format ops[] = {format_by_name("fp16"), format_by_name("fp32"), format_by_name("fp64")};
  for (const Format& f : formats()) {
    if (f.p < 8 && f.emax < 20) continue;  // fp8: the quotients below are mostly out of range
    for (int i = 0; i < 300; ++i) {
      const Format& of = ops[static_cast<std::size_t>(i) % 3];
      double a = round(std::ldexp(uni(eng), expo(eng)) * (coin(eng) ? 1 : -1), of);
      double b = round(std::ldexp(uni(eng), expo(eng) / 2) * (coin(eng) ? 1 : -1), of);
      if (i % 7 == 0) b = static_cast<double>(3 + i % 5);  // small integers: Eq. 15's j, a mean's n
      if (i % 11 == 0) a = round(b * round(std::ldexp(uni(eng), 3), f), of);  // exact or near-exact quotients
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const DD qd = exact_quotient(a, b);
      mpfr_set_d(x, a, MPFR_RNDN);
      const int t = mpfr_div_d(x, x, b, MPFR_RNDZ);
      if (t != 0 && mpfr_min_prec(x) < mpfr_get_prec(x)) {
        if (mpfr_sgn(x) > 0) mpfr_nextabove(x);
        else mpfr_nextbelow(x);
      }
      for (RoundMode m : kDeterministic) {
        const RoundOptions o{m};
        const double want = test::mpfr_round_to(x, f, o);
        INFO(f.name << " " << round_mode_name(m) << " a " << std::hexfloat << a << " b " << b << std::defaultfloat);
        REQUIRE(same(round_sum(qd.hi, qd.lo, f, o), want));
        if (sticky_fold_rounds_once(f, o)) REQUIRE(same(round(sticky_fold(qd.hi, qd.lo), f, o), want));
      }
    }
  }
  mpfr_clears(x, y, nullptr);
}
