// The element formats beyond IEEE 754-like grids and the OCP MX ones (fp6_e2m3, fp6_e3m2, fp4_e2m1, e8m0,
// int8/int4 and their full-range variants, hif8): their descriptors against the numbers the specifications
// print, every storage pattern decoded and encoded back, and the rounding against an enumeration of the
// format's values (tests/support/enum_round.hpp) in every deterministic mode and both overflow policies,
// on a strided float32 sample plus every value's, midpoint's and range end's float neighbourhood; fp6/fp4
// also against MPFR. All 2^32 float32 inputs: [long].
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <mpfr.h>

#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"
#include "support/enum_round.hpp"
#include "support/mpfr_round.hpp"

using namespace pasa;

namespace {

const char* const kNewFormats[] = {"fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0", "int8", "int8_full", "int4", "int4_full", "hif8"};
constexpr RoundMode kDeterministic[] = {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero,
                                        RoundMode::toward_pos,   RoundMode::toward_neg,   RoundMode::odd};

bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// The inputs the default run checks: every 65521st float32 pattern (prime: every exponent and low-bit pattern),
// and for every value v of the format, every midpoint m of two neighbours and the range ends (max + half the top
// quantum, max + the quantum): the point and its float neighbours on both sides, both signs.
std::vector<double> inputs_for(const test::EnumFormat& ef) {
  std::vector<double> xs;
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += 65521) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (std::isfinite(x)) xs.push_back(x);
  }
  std::vector<double> points = ef.values;
  for (std::size_t i = 0; i + 1 < ef.values.size(); ++i) points.push_back((ef.values[i] + ef.values[i + 1]) / 2);
  for (const double s : {0.5, 1.0, 1.5}) {
    points.push_back(ef.max() + s * ef.top_step);
    points.push_back(ef.min() - s * ef.bottom_step);
  }
  points.push_back(ef.min() / 2);
  points.push_back(ef.min() * 0.75);
  for (const double p : points) {
    const float f = static_cast<float>(p);
    if (static_cast<double>(f) != p) continue;  // (every point of these formats is a float but the far ends)
    for (const float v : {f, std::nextafter(f, INFINITY), std::nextafter(f, -INFINITY)}) {
      xs.push_back(v);
      xs.push_back(-v);
    }
  }
  return xs;
}

// The reference for an input the enumeration does not decide (zero, the unsigned format's negatives).
bool outside_enumeration(const Format& f, double x) { return x == 0.0 || (!f.is_signed && x < 0); }

}  // namespace

TEST_CASE("new formats: descriptors as the specifications print them", "[formats]") {
  struct Row {
    const char* name;
    int bits;
    double max, max_negative, min_positive;
  };
  // OCP MX v1.0 Table 2 (fp6: 7.5, 28; fp4: 6; min subnormal 0.125, 0.0625, 0.5), §5.4.1 (E8M0: 2^-127..2^127);
  // two's complement integers; HiF8 [Luo et al. 2024, Table 1]: 2^-22 .. 2^15.
  const Row rows[] = {{"fp6_e2m3", 6, 7.5, 7.5, 0.125},         {"fp6_e3m2", 6, 28, 28, 0.0625},
                      {"fp4_e2m1", 4, 6, 6, 0.5},               {"e8m0", 8, 0x1p127, 0, 0x1p-127},
                      {"int8", 8, 127, 127, 1},                 {"int8_full", 8, 127, 128, 1},
                      {"int4", 4, 7, 7, 1},                     {"int4_full", 4, 7, 8, 1},
                      {"hif8", 8, 32768, 32768, 0x1p-22}};
  for (const Row& r : rows) {
    INFO(r.name);
    const Format f = format_by_name(r.name);
    CHECK(f.storage_bits() == r.bits);
    CHECK(f.max_finite() == r.max);
    CHECK(f.max_negative() == r.max_negative);
    CHECK(f.min_subnormal() == r.min_positive);
    CHECK_FALSE(f.ieee_like_grid() == (std::string(r.name).rfind("fp", 0) != 0));  // fp6/fp4: IEEE-like grids
  }
  CHECK(format_by_name("float4_e2m1fn").name == "fp4_e2m1");
  CHECK(format_by_name("float8_e8m0fnu").name == "e8m0");
  CHECK(format_by_name("hifloat8").name == "hif8");
  CHECK_THROWS_WITH(format_by_name("int3"), Catch::Contains("fp4_e2m1") && Catch::Contains("int8_full") &&
                                                Catch::Contains("hif8"));
}

TEST_CASE("new formats: every pattern decodes and encodes back; known patterns", "[formats]") {
  for (const char* name : kNewFormats) {
    INFO(name);
    const Format f = format_by_name(name);
    const std::uint64_t n = std::uint64_t(1) << f.storage_bits();
    std::vector<double> seen;
    for (std::uint64_t c = 0; c < n; ++c) {
      INFO(c);
      double v;
      try {
        v = decode(c, f);
      } catch (const std::domain_error&) {
        // Only the symmetric integers leave a pattern out: -2^(b-1).
        CHECK((f.layout == Layout::twos_complement && !f.extra_negative && c == n / 2));
        continue;
      }
      if (std::isnan(v)) {
        CHECK(f.has_nan());
        CHECK(encode(v, f) == c);
        continue;
      }
      CHECK(encode(v, f) == c);
      CHECK(round(v, f) == v);
      seen.push_back(v);
    }
    CHECK_THROWS_AS(decode(n, f), std::domain_error);
    // Distinct values but for the signed zeros.
    std::sort(seen.begin(), seen.end());
    std::size_t zeros = 0;
    for (std::size_t i = 0; i + 1 < seen.size(); ++i) {
      if (seen[i] == seen[i + 1]) {
        CHECK(seen[i] == 0.0);
        ++zeros;
      }
    }
    CHECK(zeros == (f.signed_zero() ? 1u : 0u));
  }
  // HiF8 [Luo et al. 2024, §2]: sign | dot | exponent (sign-magnitude, implicit top bit) | mantissa.
  const Format h = format_by_name("hif8");
  CHECK(decode(0x00, h) == 0.0);
  CHECK(std::isnan(decode(0x80, h)));
  CHECK(decode(0x6F, h) == INFINITY);
  CHECK(decode(0xEF, h) == -INFINITY);
  CHECK(decode(0x6E, h) == 32768.0);       // 0 11 0111 0: D = 4, E = +15
  CHECK(decode(0x7E, h) == 0x1p-15);       // 0 11 1111 0: E = -15
  CHECK(decode(0x38, h) == 0.125);         // 0 01 11 000: D = 2, E = -3
  CHECK(decode(0x18, h) == 0.5);           // 0 001 1 000: D = 1, E = -1
  CHECK(decode(0x08, h) == 1.0);           // 0 0001 000: D = 0
  CHECK(decode(0x0F, h) == 1.875);         // 0 0001 111
  CHECK(decode(0x01, h) == 0x1p-22);       // 0 0000 001: the denormal mode
  CHECK(decode(0x07, h) == 0x1p-16);
  CHECK(decode(0x5F, h) == 0x1.cp-7);      // 0 10 111 11: D = 3, E = -7, mantissa 11: 1.75 * 2^-7
  CHECK(encode(-0.0, h) == 0x00);          // one zero
  CHECK(encode(INFINITY, h) == 0x6F);
  // OCP MX v1.0 §5.3.2 / §5.4.1 and two's complement.
  CHECK(decode(0x7, format_by_name("fp4_e2m1")) == 6.0);
  CHECK(decode(0xF, format_by_name("fp4_e2m1")) == -6.0);
  CHECK(decode(0x1F, format_by_name("fp6_e2m3")) == 7.5);
  CHECK(decode(0x1F, format_by_name("fp6_e3m2")) == 28.0);
  CHECK(decode(0x01, format_by_name("fp6_e3m2")) == 0.0625);
  CHECK(decode(0x7F, format_by_name("e8m0")) == 1.0);
  CHECK(decode(0x00, format_by_name("e8m0")) == 0x1p-127);
  CHECK(decode(0xFE, format_by_name("e8m0")) == 0x1p127);
  CHECK(std::isnan(decode(0xFF, format_by_name("e8m0"))));
  CHECK(decode(0x8, format_by_name("int4_full")) == -8.0);
  CHECK(decode(0x9, format_by_name("int4")) == -7.0);
  CHECK(decode(0x81, format_by_name("int8")) == -127.0);
  CHECK(encode(-1.0, format_by_name("int8")) == 0xFF);
  CHECK_THROWS_WITH(encode(std::nan(""), format_by_name("fp4_e2m1")), Catch::Contains("no NaN"));
  CHECK_THROWS_WITH(encode(0.3, format_by_name("int8")), Catch::Contains("not a value"));
  CHECK_THROWS_WITH(encode(INFINITY, format_by_name("e8m0")), Catch::Contains("e8m0"));
  // encode_span takes them too.
  const std::vector<double> vals = {-8.0, 7.0, 0.0};
  std::vector<std::uint8_t> bits(3);
  CHECK(encode_span(std::span<const double>(vals), std::span<std::uint8_t>(bits), format_by_name("int4_full")) == 3);
  CHECK(bits == std::vector<std::uint8_t>{0x8, 0x7, 0x0});
}

TEST_CASE("new formats: round, round_span and round_sum against the enumeration, every deterministic mode", "[formats]") {
  for (const char* name : kNewFormats) {
    const Format f = format_by_name(name);
    const test::EnumFormat ef(f);
    const std::vector<double> xs = inputs_for(ef);
    std::vector<float> xf(xs.begin(), xs.end());
    for (const RoundMode m : kDeterministic) {
      for (const Overflow ov : {Overflow::ieee, Overflow::saturate}) {
        const RoundOptions o{m, ov};
        INFO(name << " mode " << round_mode_name(m) << " overflow " << overflow_name(ov));
        std::vector<double> span_d(xs.size());
        std::vector<float> span_f(xs.size());
        round_span(std::span<const double>(xs), std::span<double>(span_d), f, o);
        round_span(std::span<const float>(xf), std::span<float>(span_f), f, o);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const double x = xs[i];
          if (outside_enumeration(f, x)) continue;
          const double want = ef.round(x, o);
          const double got = round(x, f, o);
          // round_sum of x split as hi + lo (x's float value and a residual far below it) is one rounding too.
          const double lo = x == 0 ? 0 : std::ldexp(x, -60);
          const double want_sum = ef.round(x, o, x > 0 ? 1 : -1);
          const double got_sum = round_sum(x, lo, f, o);
          const bool ok = same(got, want) && same(span_d[i], want) && same(static_cast<double>(span_f[i]), want) &&
                          (std::isinf(want) || same(got_sum, want_sum) || lo == 0);
          if (!ok && bad++ < 5)
            FAIL_CHECK("x = " << x << ": want " << want << ", round " << got << ", span " << span_d[i] << ", float span "
                              << span_f[i] << ", round_sum " << got_sum << " (want " << want_sum << ")");
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("new formats: the ieee overflow policy of formats without inf and NaN saturates", "[formats]") {
  for (const char* name : {"fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "int8", "int4_full"}) {
    INFO(name);
    const Format f = format_by_name(name);
    for (const double x : {1e30, HUGE_VAL}) {
      CHECK(round(x, f) == f.max_finite());
      CHECK(round(-x, f) == -f.max_negative());
    }
    CHECK(std::isnan(round(std::nan(""), f)));  // the exact convention: NaN stays NaN (no pattern)
  }
  CHECK(round(6.5, format_by_name("fp4_e2m1"), {RoundMode::toward_pos}) == 6.0);
  CHECK(round(-128.6, format_by_name("int8_full")) == -128.0);
  CHECK(round(-127.6, format_by_name("int8")) == -127.0);
  CHECK(round(2.5, format_by_name("int8")) == 2.0);
  CHECK(round(2.5, format_by_name("int8"), {RoundMode::nearest_away}) == 3.0);
}

TEST_CASE("fp6 and fp4 against MPFR (saturating)", "[formats][mpfr]") {
  for (const char* name : {"fp6_e2m3", "fp6_e3m2", "fp4_e2m1"}) {
    const Format f = format_by_name(name);
    const std::vector<double> xs = inputs_for(test::EnumFormat(f));
    mpfr_t x;
    mpfr_init2(x, 53);
    for (const RoundMode m : kDeterministic) {
      const RoundOptions o{m, Overflow::saturate};
      INFO(name << " mode " << round_mode_name(m));
      std::size_t bad = 0;
      for (const double v : xs) {
        mpfr_set_d(x, v, MPFR_RNDN);
        const double want = test::mpfr_round_to(x, f, o);
        if (!same(round(v, f, o), want) && bad++ < 5) FAIL_CHECK("x = " << v << ": want " << want << ", got " << round(v, f, o));
      }
      CHECK(bad == 0);
    }
    mpfr_clear(x);
  }
}

TEST_CASE("e8m0: zero, signs, NaN, range ends in each convention", "[formats]") {
  const Format f = format_by_name("e8m0");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const RoundOptions exact{}, sat{RoundMode::nearest_even, Overflow::saturate};
  const RoundOptions ml{RoundMode::nearest_even, Overflow::ieee, false, false, Convention::ml_dtypes};
  const RoundOptions torch{RoundMode::nearest_even, Overflow::ieee, false, false, Convention::torch};
  // exact and ml_dtypes (ieee policy): out-of-range inputs are NaN; saturate clamps to [2^-127, 2^127].
  for (const double x : {0.0, -0.0, -1.0, -HUGE_VAL, HUGE_VAL, 0x1.8p127, nan}) {
    INFO(x);
    CHECK(std::isnan(round(x, f, exact)));
    CHECK(std::isnan(round(x, f, ml)));
  }
  CHECK(round(0.0, f, sat) == 0x1p-127);
  CHECK(round(-3.0, f, sat) == 0x1p-127);
  CHECK(round(INFINITY, f, sat) == 0x1p127);
  CHECK(round(1e300, f, sat) == 0x1p127);
  // torch: the sign is dropped, zero is the bottom code, overflow NaN.
  CHECK(round(-3.0, f, torch) == 4.0);
  CHECK(round(0.0, f, torch) == 0x1p-127);
  CHECK(std::isnan(round(0x1.8p127, f, torch)));
  CHECK(round(0x1.7p127, f, torch) == 0x1p127);
  // Ties 1.5·2^e go up (the even multiple of the spacing 2^e) in all three.
  for (const RoundOptions& o : {exact, ml, torch}) CHECK(round(0x1.8p3, f, o) == 16.0);
  CHECK(round(0x1.8p3, f, {RoundMode::nearest_away}) == 16.0);
  CHECK(round(0x1.7ffffp3, f) == 8.0);
  // The bottom: exact rounds to the nearest of 2^-127 and 2^-126; the libraries round (0, 2^-126) as if
  // code 0 were zero (ties at 2^-127 to it).
  CHECK(round(0x1.4p-127, f, exact) == 0x1p-127);
  CHECK(round(0x1.4p-127, f, ml) == 0x1p-126);
  CHECK(round(0x1.4p-127, f, torch) == 0x1p-126);
  CHECK(round(0x1p-127, f, ml) == 0x1p-127);
  CHECK(round(0x1p-140, f, exact) == 0x1p-127);
  CHECK(round(0x1p-140, f, ml) == 0x1p-127);
  CHECK(round(0x1p-140, f, {RoundMode::toward_zero}) == 0x1p-127);  // nothing smaller exists
}

TEST_CASE("fp6 / fp4: NaN in the ml_dtypes convention; conventions leave in-range rounding alone", "[formats]") {
  const RoundOptions ml{RoundMode::nearest_even, Overflow::ieee, false, false, Convention::ml_dtypes};
  for (const char* name : {"fp6_e2m3", "fp6_e3m2", "fp4_e2m1"}) {
    const Format f = format_by_name(name);
    CHECK(same(round(std::nan(""), f, ml), -0.0));   // ml_dtypes: quiet_NaN() is the -0 pattern
    CHECK(same(round(-std::nan(""), f, ml), 0.0));   // and the NaN's sign flips it
    std::vector<double> in = {std::nan(""), 1.3, -2.6}, out(3);
    round_span(std::span<const double>(in), std::span<double>(out), f, ml);
    CHECK(same(out[0], -0.0));
    CHECK(out[1] == round(1.3, f));
  }
}

TEST_CASE("hif8: ties away, the overflow threshold 1.25·2^15, the denormal binades; hybrid rounding", "[formats]") {
  const Format h = format_by_name("hif8");
  const RoundOptions ta{RoundMode::nearest_away};
  CHECK(round(1.0625, h, ta) == 1.125);            // 3 mantissa bits at E = 0
  CHECK(round(0x1.4p15, h, ta) == INFINITY);       // max + half the top quantum: away, to inf
  CHECK(round(0x1.3fffp15, h, ta) == 32768.0);
  CHECK(round(0x1.4p15, h, {RoundMode::nearest_away, Overflow::saturate}) == 32768.0);
  CHECK(round(0x1.4p15, h) == 32768.0);            // rne: 2^15 is the even multiple of 2^14
  CHECK(round(0x1.8p-17, h, ta) == 0x1p-16);       // the denormal mode: powers of two only
  CHECK(round(0x1p-23, h, ta) == 0x1p-22);         // half the smallest value: away
  CHECK(same(round(-0x1p-24, h, ta), 0.0));        // one zero
  RandomBits rng(7);
  // hybrid: TA where |E| <= 3 (every draw gives the same), stochastic elsewhere (both neighbours occur, in
  // proportion to the distance).
  for (int i = 0; i < 100; ++i) CHECK(round(1.0625, h, {RoundMode::hybrid}, &rng) == 1.125);
  int up = 0;
  const double x = 16.0 + 0.25 * 4.0;  // E = 4: quantum 4, a quarter above 16
  for (int i = 0; i < 20000; ++i) {
    const double r = round(x, h, {RoundMode::hybrid}, &rng);
    REQUIRE((r == 16.0 || r == 20.0));
    up += r == 20.0;
  }
  CHECK(std::abs(up / 20000.0 - 0.25) < 0.015);
  CHECK_THROWS_AS(round(1.0, h, {RoundMode::hybrid}), std::invalid_argument);  // needs the random source
  CHECK(round_mode_by_name("hr") == RoundMode::hybrid);
  // An untapered format: hybrid is ties away.
  RandomBits rng2(1);
  CHECK(round(2.5, format_by_name("int8"), {RoundMode::hybrid}, &rng2) == 3.0);
}

TEST_CASE("new formats: stochastic rounding gives a neighbour, at the distance's frequency", "[formats]") {
  for (const char* name : kNewFormats) {
    INFO(name);
    const Format f = format_by_name(name);
    const test::EnumFormat ef(f);
    const double lo = ef.values[ef.values.size() / 2 + 1], hi = ef.values[ef.values.size() / 2 + 2];
    const double x = lo + 0.75 * (hi - lo);
    RandomBits rng(3);
    int up = 0;
    for (int i = 0; i < 20000; ++i) {
      const double r = round(x, f, {RoundMode::stochastic}, &rng);
      REQUIRE((r == lo || r == hi));
      up += r == hi;
    }
    CHECK(std::abs(up / 20000.0 - 0.75) < 0.015);
  }
}

TEST_CASE("new formats: FTZ / DAZ refused by name; attention refuses them as stage and input formats", "[formats]") {
  CHECK_THROWS_WITH(round(1.0, format_by_name("hif8"), {RoundMode::nearest_even, Overflow::ieee, true}),
                    Catch::Contains("hif8") && Catch::Contains("DAZ"));
  std::vector<double> v(1, 1.0);
  CHECK_THROWS_AS(round_span(std::span<const double>(v), std::span<double>(v), format_by_name("int8"),
                             {RoundMode::nearest_even, Overflow::ieee, false, true}),
                  InputError);
  CHECK_NOTHROW(round(1.0, format_by_name("fp4_e2m1"), {RoundMode::nearest_even, Overflow::ieee, true, true}));
  CHECK(convention_by_name("torch") == Convention::torch);
  CHECK_THROWS_WITH(convention_by_name("numpy"), Catch::Contains("exact, ml_dtypes, torch"));
}

TEST_CASE("new formats: every float32 against the enumeration, rne and rna (all 2^32)", "[formats][long]") {
  for (const char* name : kNewFormats) {
    const Format f = format_by_name(name);
    const test::EnumFormat ef(f);
    for (const RoundMode m : {RoundMode::nearest_even, RoundMode::nearest_away}) {
      const RoundOptions o{m, Overflow::ieee};
      std::atomic<std::uint64_t> bad{0};
      constexpr std::uint64_t kChunk = std::uint64_t(1) << 20;
      parallel_for(std::size_t((std::uint64_t(1) << 32) / kChunk), default_threads(), [&](std::size_t c) {
        std::vector<float> in(kChunk), out(kChunk);
        for (std::uint64_t i = 0; i < kChunk; ++i) in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(c * kChunk + i));
        round_span(std::span<const float>(in), std::span<float>(out), f, o);
        for (std::uint64_t i = 0; i < kChunk; ++i) {
          const double x = in[i];
          if (!std::isfinite(x) || outside_enumeration(f, x)) continue;
          if (!same(static_cast<double>(out[i]), ef.round(x, o))) ++bad;
        }
      });
      INFO(name << " " << round_mode_name(m));
      CHECK(bad == 0);
    }
  }
}
