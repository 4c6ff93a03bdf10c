// round() against MPFR, an independent construction of the same rounding (the tests the issue asks for):
// MPFR with precision p, emin set so that mpfr_subnormalize gives the format's gradual underflow, and an
// exponent range wide enough above that MPFR never overflows; the format's overflow convention (IEEE 754
// §7.4, E4M3FN's NaN, saturation) and the flush options are then applied by their definitions. Round-to-odd
// is checked against its definition: round toward zero, and if inexact set the last significand bit; ties
// away (which mpfr_set lacks) against its own: the nearer of RZ and RA, RA on a tie (support/mpfr_round.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <mpfr.h>

#include "pasa/numeric/round.hpp"
#include "support/bits.hpp"
#include "support/mpfr_round.hpp"

using namespace pasa;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr RoundMode kDeterministic[] = {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero,
                                        RoundMode::toward_pos,   RoundMode::toward_neg,   RoundMode::odd};

class MpfrReference {
 public:
  explicit MpfrReference(const Format& f) : f_(f) { mpfr_init2(y_, f.p); }
  ~MpfrReference() { mpfr_clear(y_); }
  MpfrReference(const MpfrReference&) = delete;
  MpfrReference& operator=(const MpfrReference&) = delete;

  double operator()(double x, const RoundOptions& o) {
    if (std::isnan(x)) return x;
    if (std::isinf(x)) {  // exact: no rounding, only the format's convention for infinities
      if (o.overflow == Overflow::saturate) return std::copysign(f_.max_finite(), x);
      return f_.has_infinity() ? x : kNaN;
    }
    if (o.flush_input && std::fabs(x) < f_.min_normal()) x = std::copysign(0.0, x);
    double r;
    if (o.mode == RoundMode::odd) {
      int inexact = 0;
      r = rounded(x, MPFR_RNDZ, &inexact);
      if (inexact != 0) {
        // The format's quantum at r (r = 0 lies in the subnormal binade); make the last bit 1.
        const double a = std::fabs(r);
        const int e = a == 0 ? f_.emin() : std::max(std::ilogb(a), f_.emin());
        const double quantum = std::ldexp(1.0, e - (f_.p - 1));
        if (std::fmod(a / quantum, 2.0) == 0.0) r = std::copysign(a + quantum, x);
      }
    } else if (o.mode == RoundMode::nearest_away) {
      mpfr_t xm;
      mpfr_init2(xm, 53);
      mpfr_set_d(xm, x, MPFR_RNDN);  // exact
      test::mpfr_round_ties_away(y_, xm, [&](mpfr_t out, mpfr_rnd_t rnd) { return on_grid(out, x, rnd); });
      r = mpfr_get_d(y_, MPFR_RNDN);  // exact: p <= 53 bits in double's range
      mpfr_clear(xm);
    } else {
      const mpfr_rnd_t rnd = o.mode == RoundMode::nearest_even ? MPFR_RNDN
                             : o.mode == RoundMode::toward_zero ? MPFR_RNDZ
                             : o.mode == RoundMode::toward_pos  ? MPFR_RNDU
                                                                : MPFR_RNDD;
      int inexact = 0;
      r = rounded(x, rnd, &inexact);
    }
    if (std::fabs(r) > f_.max_finite()) {  // overflow: the result with unbounded exponent exceeds max
      const bool neg = std::signbit(x);
      const bool to_max = o.overflow == Overflow::saturate || o.mode == RoundMode::toward_zero ||
                          o.mode == RoundMode::odd || (o.mode == RoundMode::toward_pos && neg) ||
                          (o.mode == RoundMode::toward_neg && !neg);
      if (to_max) return std::copysign(f_.max_finite(), x);
      return f_.has_infinity() ? std::copysign(kInf, x) : kNaN;
    }
    if (o.flush_output && std::fabs(r) < f_.min_normal()) r = std::copysign(0.0, r);
    return r;
  }

 private:
  int on_grid(mpfr_t out, double x, mpfr_rnd_t rnd) {
    const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    // MPFR's exponent e means [1/2, 1)·2^e: the smallest subnormal 2^(emin-p+1) is 2^(E-1) with E below.
    mpfr_set_emin(f_.emin() - f_.p + 2);
    mpfr_set_emax(f_.emax + 8);  // never overflows inside MPFR; the format's convention is applied after
    int t = mpfr_set_d(out, x, rnd);
    t = mpfr_subnormalize(out, t, rnd);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    return t;
  }
  double rounded(double x, mpfr_rnd_t rnd, int* inexact) {
    *inexact = on_grid(y_, x, rnd);
    return mpfr_get_d(y_, MPFR_RNDN);  // exact: p <= 53 bits in double's range
  }

  Format f_;
  mpfr_t y_;
};

// Every finite value of the format, every midpoint between neighbours (with 0 below and the first value
// beyond max_finite above: the overflow threshold), the doubles one ulp either side of each of those, values
// deep in the underflow and overflow ranges; both signs.
std::vector<double> grid(const Format& f) {
  std::vector<double> pos;
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << (f.storage_bits() - 1)); ++b) {
    const double v = decode(b, f);
    if (std::isfinite(v)) pos.push_back(v);
  }
  std::sort(pos.begin(), pos.end());
  // The next grid point beyond max_finite (it exists with unbounded exponent range).
  pos.push_back(f.max_finite() + std::ldexp(1.0, f.emax - (f.p - 1)));
  std::vector<double> xs;
  for (std::size_t i = 0; i < pos.size(); ++i) {
    const double v = pos[i];
    xs.insert(xs.end(), {v, std::nextafter(v, kInf), std::nextafter(v, 0.0)});
    if (i + 1 < pos.size()) {
      const double m = (v + pos[i + 1]) / 2;  // exact: at most p+1 significant bits
      xs.insert(xs.end(), {m, std::nextafter(m, kInf), std::nextafter(m, 0.0)});
    }
  }
  const double tiny = f.min_subnormal();
  xs.insert(xs.end(), {tiny / 4, tiny / 2 * 0.999, 1e-300, 5e-324, std::ldexp(f.max_finite(), 1),
                       std::ldexp(1.0, f.emax + 1), 1e300, std::numeric_limits<double>::max(), kInf, kNaN});
  const std::size_t n = xs.size();
  for (std::size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  return xs;
}

// round() and the span kernels (doubles; floats where x is one and the format within float's range).
void check_against_mpfr(const Format& f, const std::vector<double>& xs, const RoundOptions& o) {
  MpfrReference ref(f);
  std::vector<double> span(xs.size());
  round_span(xs, span, f, o);
  std::vector<float> xf(xs.size()), span_f(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) xf[i] = static_cast<float>(xs[i]);
  const bool floats = f.emax <= 127;
  if (floats) round_span(xf, span_f, f, o);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], want = ref(x, o), got = round(x, f, o);
    const bool as_float = floats && (static_cast<double>(xf[i]) == x || std::isnan(x));
    const bool ok = test::same_bits(got, want) && test::same_bits(span[i], want) &&
                    (!as_float || test::same_bits(static_cast<double>(span_f[i]), want));
    if (!ok && ++mismatches <= 5) {
      INFO(f.name << " mode " << round_mode_name(o.mode) << " overflow " << overflow_name(o.overflow)
                  << " flush_in " << o.flush_input << " flush_out " << o.flush_output);
      INFO("x = " << std::hexfloat << x << " round = " << got << " round_span = " << span[i]
                  << " float round_span = " << span_f[i] << " MPFR = " << want);
      CHECK(ok);
    }
  }
  CHECK(mismatches == 0);
}

void check_grid(const char* name) {
  const Format f = format_by_name(name);
  const std::vector<double> xs = grid(f);
  for (RoundMode m : kDeterministic) {
    check_against_mpfr(f, xs, {m, Overflow::ieee, false, false});
    check_against_mpfr(f, xs, {m, Overflow::saturate, false, false});
    check_against_mpfr(f, xs, {m, Overflow::ieee, true, false});
    check_against_mpfr(f, xs, {m, Overflow::ieee, false, true});
    check_against_mpfr(f, xs, {m, Overflow::saturate, true, true});
  }
}

// Random doubles: exponents spread a few binades beyond the format's range on both sides, random
// significands; one in eight a uniformly random bit pattern (NaNs, infinities, huge and tiny values).
std::vector<double> random_doubles(const Format& f, std::size_t n, std::uint64_t seed) {
  boost::random::mt19937_64 g(seed);
  std::vector<double> xs(n);
  const int lo = f.emin() - f.p - 3, hi = f.emax + 3;
  for (auto& x : xs) {
    const std::uint64_t r = g();
    if (r % 8 == 0) {
      x = std::bit_cast<double>(g());
    } else {
      const int e = lo + static_cast<int>(g() % static_cast<std::uint64_t>(hi - lo + 1));
      x = std::ldexp(1.0 + std::ldexp(static_cast<double>(g() >> 12), -52), e);
      if (r & 16) x = -x;
    }
  }
  return xs;
}

// Random floats, widened exactly: half uniformly random bit patterns, half in the format's range.
std::vector<double> random_floats(const Format& f, std::size_t n, std::uint64_t seed) {
  boost::random::mt19937_64 g(seed);
  std::vector<double> xs(n);
  const int lo = std::max(f.emin() - f.p - 3, -149), hi = std::min(f.emax + 3, 127);
  for (auto& x : xs) {
    const std::uint64_t r = g();
    float v;
    if (r % 2 == 0) {
      v = std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32));
    } else {
      const int e = lo + static_cast<int>(g() % static_cast<std::uint64_t>(hi - lo + 1));
      v = static_cast<float>(std::ldexp(1.0 + std::ldexp(static_cast<double>(g() >> 41), -23), e));  // exact or 0
      if (r & 16) v = -v;
    }
    x = static_cast<double>(v);
  }
  return xs;
}

void check_random(const char* name, std::uint64_t seed) {
  const Format f = format_by_name(name);
  const std::vector<double> d = random_doubles(f, 250000, seed), s = random_floats(f, 250000, seed + 1);
  for (RoundMode m : kDeterministic)
    for (const auto* xs : {&d, &s}) {
      check_against_mpfr(f, *xs, {m, Overflow::ieee, false, false});
      check_against_mpfr(f, *xs, {m, Overflow::saturate, true, true});
    }
}

}  // namespace

TEST_CASE("MPFR: every fp16 value, midpoint and neighbour, all modes and options", "[round][mpfr]") { check_grid("fp16"); }
TEST_CASE("MPFR: every bf16 value, midpoint and neighbour, all modes and options", "[round][mpfr]") { check_grid("bf16"); }
TEST_CASE("MPFR: every fp8_e4m3fn value, midpoint and neighbour, all modes and options", "[round][mpfr]") { check_grid("fp8_e4m3fn"); }
TEST_CASE("MPFR: every fp8_e5m2 value, midpoint and neighbour, all modes and options", "[round][mpfr]") { check_grid("fp8_e5m2"); }

TEST_CASE("MPFR: random doubles and floats, fp16 and bf16", "[round][mpfr]") {
  check_random("fp16", 11);
  check_random("bf16", 12);
}
TEST_CASE("MPFR: random doubles and floats, fp8 formats", "[round][mpfr]") {
  check_random("fp8_e4m3fn", 13);
  check_random("fp8_e5m2", 14);
}
TEST_CASE("MPFR: random doubles and floats, tf32, fp32 and a custom format", "[round][mpfr]") {
  check_random("tf32", 15);
  check_random("fp32", 16);
  check_random("p=6,emax=20", 17);
}

TEST_CASE("MPFR reference itself agrees with hand-computed fp16 facts", "[round][mpfr]") {
  // Guards the reference construction (emin offset, overflow convention) with values from IEEE 754.
  MpfrReference ref(format_by_name("fp16"));
  const RoundOptions rne{};
  CHECK(ref(65519.0, rne) == 65504.0);
  CHECK(ref(65520.0, rne) == kInf);
  CHECK(ref(65520.0, {RoundMode::toward_zero}) == 65504.0);
  CHECK(ref(std::ldexp(1.0, -25), rne) == 0.0);                       // tie between 0 and 2^-24: even (0)
  CHECK(ref(std::ldexp(1.5, -25), rne) == std::ldexp(1.0, -24));
  CHECK(ref(std::ldexp(3.0, -25), rne) == std::ldexp(1.0, -23));      // 1.5 ulp: tie to even (2 ulps)
  CHECK(ref(std::ldexp(1.0, -30), {RoundMode::toward_pos}) == std::ldexp(1.0, -24));
  CHECK(ref(1.0 + std::ldexp(1.0, -12), {RoundMode::odd}) == 1.0 + std::ldexp(1.0, -10));
  CHECK(ref(std::ldexp(1.0, -30), {RoundMode::odd}) == std::ldexp(1.0, -24));
  CHECK(ref(std::ldexp(1.0, -15), {RoundMode::nearest_even, Overflow::ieee, false, true}) == 0.0);
  const RoundOptions rna{RoundMode::nearest_away};
  CHECK(ref(std::ldexp(1.0, -25), rna) == std::ldexp(1.0, -24));  // half of 2^-24: away, to 2^-24
  CHECK(ref(std::ldexp(5.0, -25), rna) == std::ldexp(3.0, -24));  // 2.5 ulp: away (3), not even (2)
  CHECK(ref(-(1.0 + std::ldexp(1.0, -11)), rna) == -(1.0 + std::ldexp(1.0, -10)));
  CHECK(ref(std::nextafter(1.0 + std::ldexp(1.0, -11), 0.0), rna) == 1.0);
  CHECK(ref(65520.0, rna) == kInf);
  CHECK(ref(65520.0, {RoundMode::nearest_away, Overflow::saturate}) == 65504.0);
}

TEST_CASE("flush and saturate options on hand-picked values", "[round]") {
  const Format h = format_by_name("fp16"), e5 = format_by_name("fp8_e5m2");
  const double sub = std::ldexp(1.0, -20);  // an fp16 subnormal
  CHECK(round(sub, h) == sub);
  CHECK(round(sub, h, {RoundMode::nearest_even, Overflow::ieee, true, false}) == 0.0);
  CHECK(std::signbit(round(-sub, h, {RoundMode::nearest_even, Overflow::ieee, true, false})));
  CHECK(round(sub, h, {RoundMode::nearest_even, Overflow::ieee, false, true}) == 0.0);
  // Flush-to-zero on output acts after rounding: just below 2^-14 rounds up to the smallest normal.
  const double just_below = std::ldexp(1.0, -14) - std::ldexp(1.0, -26);
  CHECK(round(just_below, h, {RoundMode::nearest_even, Overflow::ieee, false, true}) == std::ldexp(1.0, -14));
  // Flush on input acts before: the same input is zero.
  CHECK(round(just_below, h, {RoundMode::toward_pos, Overflow::ieee, true, false}) == 0.0);
  // Saturation: finite overflow and infinities clamp to ±max in every mode.
  for (RoundMode m : kDeterministic) {
    const RoundOptions sat{m, Overflow::saturate};
    CHECK(round(1e9, e5, sat) == 57344.0);
    CHECK(round(-kInf, e5, sat) == -57344.0);
    CHECK(std::isnan(round(kNaN, e5, sat)));
  }
  CHECK(round(61440.0, e5) == kInf);  // the E5M2 overflow threshold (max + ulp/2) ties away to inf
  CHECK(round(61439.0, e5) == 57344.0);
}

namespace {

// A format without subnormals by its definition: its grid below 2^emin is {0, 2^emin} (the tie goes to 0,
// the even one), and from 2^emin up it is the same format with subnormals, whose rounding MPFR gives.
double no_subnormal_reference(const Format& f, double x, const RoundOptions& o) {
  if (std::isnan(x) || std::isinf(x) || std::fabs(x) >= f.min_normal()) {
    MpfrReference ref(custom_format(f.p, f.emax, true, f.specials));
    return ref(x, o);
  }
  const double a = std::fabs(x), mn = f.min_normal();
  const bool neg = std::signbit(x);
  double r = 0;
  if (!(o.flush_input || a == 0)) {
    switch (o.mode) {
      case RoundMode::nearest_even: r = a > mn / 2 ? mn : 0.0; break;  // exactly mn/2: 0 (even)
      case RoundMode::nearest_away: r = a >= mn / 2 ? mn : 0.0; break;  // exactly mn/2: mn (away)
      case RoundMode::toward_pos: r = neg ? 0.0 : mn; break;
      case RoundMode::toward_neg: r = neg ? mn : 0.0; break;
      default: r = 0.0;
    }
  }
  if (o.flush_output && r < mn) r = 0;
  return neg ? -r : r;
}

}  // namespace

TEST_CASE("MPFR: formats without subnormals, the scalar rounding and the span kernels", "[round][mpfr]") {
  // round(), round_span on doubles (the branch-free RNE kernel) and on floats (the float kernel where the
  // grid fits a float), against the definition: values around 0, 2^emin/2 (the tie), 2^emin and its
  // neighbours, the normal binades above, both signs.
  for (const Format& f : {custom_format(11, 15, false), custom_format(4, 7, false), custom_format(8, 127, false)}) {
    const double mn = f.min_normal();
    std::vector<double> xs = {0.0, mn / 2, mn / 4, mn * 0.75, mn, mn * 3 / 4 * 1.25};
    for (double v : {mn / 2, mn, mn * 1.5, mn * 2})
      xs.insert(xs.end(), {std::nextafter(v, 0.0), std::nextafter(v, kInf)});
    for (int k = 0; k < 64; ++k) xs.push_back(std::ldexp(1.0 + k / 64.0, f.emin() + k % 6) * (1 + 0x1p-40 * (k % 3)));
    const std::size_t n = xs.size();
    for (std::size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
    for (RoundMode m : {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero, RoundMode::toward_pos,
                        RoundMode::toward_neg})
      for (const RoundOptions& o : {RoundOptions{m}, RoundOptions{m, Overflow::saturate, false, true}}) {
        std::vector<double> span_d(xs.size());
        round_span(xs, span_d, f, o);
        std::vector<float> xf(xs.size()), span_f(xs.size());
        for (std::size_t i = 0; i < xs.size(); ++i) xf[i] = static_cast<float>(xs[i]);
        round_span(xf, span_f, f, o);
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const double want = no_subnormal_reference(f, xs[i], o);
          INFO(f.name << " mode " << round_mode_name(m) << " flush_out " << o.flush_output << " x = " << std::hexfloat
                      << xs[i] << " want " << want);
          CHECK(test::same_bits(round(xs[i], f, o), want));
          CHECK(test::same_bits(span_d[i], want));
          if (static_cast<double>(xf[i]) == xs[i]) CHECK(test::same_bits(static_cast<double>(span_f[i]), want));
        }
      }
  }
  // The tie itself, by hand: 2^emin/2 goes to 0 in RNE (p=11, emax=15: 2^-15 → 0, just above → 2^-14).
  const Format h = custom_format(11, 15, false);
  CHECK(round(0x1p-15, h) == 0.0);
  CHECK(round(std::nextafter(0x1p-15, 1.0), h) == 0x1p-14);
  CHECK(round(0x1p-15, h, {RoundMode::nearest_away}) == 0x1p-14);  // and away from zero: 2^-14
  CHECK(round(-0x1p-15, h, {RoundMode::nearest_away}) == -0x1p-14);
  CHECK(round(std::nextafter(0x1p-15, 0.0), h, {RoundMode::nearest_away}) == 0.0);
}

TEST_CASE("nearest_away: exact ties by hand, every kind of format, scalar, spans, round_sum and MPFR",
          "[round][mpfr]") {
  // Ties away from zero where ties to even goes the other way (the last bit of the lower neighbour even), and
  // where both agree; at 1, between subnormals, at half the smallest subnormal (0 or min_sub), at the top of
  // the subnormals and just above 2^emin, below max and at the overflow threshold max + ulp/2; both signs.
  // The expected values are written from the format's parameters alone. (p = 53: the ties are not doubles;
  // test_round_sum.cpp has them as hi + lo.)
  struct Tie {
    double x, away, even;  // x > 0; the results for -x are their negatives
    const char* what;
  };
  for (const char* name : {"fp8_e4m3fn", "fp8_e5m2", "fp16", "bf16", "tf32", "fp32", "p=5,emax=7", "p=3,emax=4",
                           "p=20,emax=300", "p=51,emax=1000"}) {
    const Format f = format_by_name(name);
    const double u1 = std::ldexp(1.0, 1 - f.p), q = f.min_subnormal(), mn = f.min_normal(), mx = f.max_finite();
    const double ulp_max = std::ldexp(1.0, f.emax - f.p + 1);
    const double over = f.has_infinity() ? kInf : kNaN;
    // fp8_e4m3fn: max = 1.110·2^8 is even and 1.111·2^8 is NaN, so the tie at max + ulp/2 goes back to max in
    // RNE; in the IEEE formats max is odd and RNE overflows too.
    const double over_even = f.specials == Specials::fn ? mx : over;
    const double below_max_even = f.specials == Specials::fn ? mx : mx - ulp_max;
    const std::vector<Tie> ties = {
        {1 + u1 / 2, 1 + u1, 1.0, "1 + ulp/2"},
        {1 + 3 * u1 / 2, 1 + 2 * u1, 1 + 2 * u1, "1 + 3 ulp/2 (even is up)"},
        {q / 2, q, 0.0, "min_sub/2"},
        {5 * q / 2, 3 * q, 2 * q, "5 min_sub/2"},
        {mn - q / 2, mn, mn, "2^emin - min_sub/2"},
        {mn + q / 2, mn + q, mn, "2^emin + min_sub/2"},
        {mx - ulp_max / 2, mx, below_max_even, "max - ulp/2"},
        {mx + ulp_max / 2, over, over_even, "max + ulp/2"},
    };
    MpfrReference ref(f);
    for (const Tie& t : ties)
      for (const double sign : {1.0, -1.0}) {
        const double x = sign * t.x;
        INFO(name << " " << t.what << " x = " << std::hexfloat << x);
        for (const bool sat : {false, true}) {
          const double clamp = sat && !std::isfinite(t.away) ? mx : t.away;
          const double clamp_even = sat && !std::isfinite(t.even) ? mx : t.even;
          const RoundOptions rna{RoundMode::nearest_away, sat ? Overflow::saturate : Overflow::ieee};
          const RoundOptions rne{RoundMode::nearest_even, rna.overflow};
          const double want = sign * clamp;
          CHECK(test::same_bits(ref(x, rna), want));  // the reference itself
          CHECK(test::same_bits(round(x, f, rna), want));
          CHECK(test::same_bits(round_sum(x, 0.0, f, rna), want));
          CHECK(test::same_bits(round(x, f, rne), sign * clamp_even));
          std::vector<double> in{x}, out(1);
          round_span(in, out, f, rna);
          CHECK(test::same_bits(out[0], want));
          if (f.emax <= 127 && static_cast<double>(static_cast<float>(x)) == x) {
            std::vector<float> fin{static_cast<float>(x)}, fout(1);
            round_span(fin, fout, f, rna);
            CHECK(test::same_bits(static_cast<double>(fout[0]), want));
          }
          // A tie of hi is no tie of hi + lo: the sum below the tie goes toward zero, above it away (where x,
          // a double, has room below its last bit for lo: not deep in double's subnormals).
          const double tiny = std::ldexp(t.x, -60);
          if (tiny > 0 && tiny <= (std::nextafter(t.x, kInf) - t.x) / 2) {
            const double toward_zero = round(x, f, {RoundMode::toward_zero, rna.overflow});
            CHECK(test::same_bits(round_sum(x, -sign * tiny, f, rna), toward_zero));
            CHECK(test::same_bits(round_sum(x, sign * tiny, f, rna), want));
          }
        }
        // Flushing: the subnormal results to ±0 (FTZ), the subnormal inputs to ±0 (DAZ).
        const RoundOptions ftz{RoundMode::nearest_away, Overflow::ieee, false, true};
        const RoundOptions daz{RoundMode::nearest_away, Overflow::ieee, true, false};
        const double want_ftz = std::fabs(t.away) < mn ? sign * 0.0 : sign * t.away;
        const double want_daz = t.x < mn ? sign * 0.0 : sign * t.away;
        CHECK(test::same_bits(round(x, f, ftz), want_ftz));
        CHECK(test::same_bits(round(x, f, daz), want_daz));
        CHECK(test::same_bits(ref(x, ftz), want_ftz));
        CHECK(test::same_bits(ref(x, daz), want_daz));
      }
  }
}
