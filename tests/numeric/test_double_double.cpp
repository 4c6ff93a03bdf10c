// Double-double primitives (pasa/numeric/double_double.hpp) against MPFR: the error-free transformations
// two_sum, fast_two_sum and two_prod are exact (hi + lo is the exact result, checked with MPFR at a
// precision that holds it exactly) and give |lo| <= ulp(hi)/2; dd_add, dd_mul, dd_mul_d and dd_div stay
// within the relative error bounds the header states (those of [JMP17]), measured against MPFR at 256 bits
// or exactly; exp_dd within 2^-98. Inputs: random double-words over a wide exponent range with both signs,
// and adversarial ones (massive cancellation, near overflow and underflow, subnormal low words, powers of
// two, ties). The golden's error bound (exact/golden.cpp) rests on these bounds.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <mpfr.h>

#include "pasa/numeric/double_double.hpp"

using namespace pasa;

namespace {

constexpr double u = 0x1p-53;  // unit roundoff of binary64 (IEEE 754 §3.3, RNE)
constexpr double kMinSub = 0x1p-1074;

// An MPFR number; 2400 bits hold any sum or product of up to four doubles exactly.
struct Big {
  mpfr_t x;
  explicit Big(mpfr_prec_t prec = 2400) { mpfr_init2(x, prec); }
  Big(const Big&) = delete;
  Big& operator=(const Big&) = delete;
  ~Big() { mpfr_clear(x); }
};

// hi + lo exactly.
void set_dd(Big& r, DD a) {
  REQUIRE(mpfr_set_d(r.x, a.hi, MPFR_RNDN) == 0);
  REQUIRE(mpfr_add_d(r.x, r.x, a.lo, MPFR_RNDN) == 0);  // inexact would mean 2400 bits do not suffice
}

// |computed - exact| / |exact| as a double (0 if both are 0; inf if only exact is 0).
double rel_err(DD computed, const Big& exact) {
  Big c, d;
  set_dd(c, computed);
  mpfr_sub(d.x, c.x, exact.x, MPFR_RNDN);
  if (mpfr_zero_p(exact.x)) return mpfr_zero_p(d.x) ? 0.0 : std::numeric_limits<double>::infinity();
  mpfr_div(d.x, d.x, exact.x, MPFR_RNDN);
  return std::fabs(mpfr_get_d(d.x, MPFR_RNDU));
}

// |computed - exact| as a double.
double abs_err(DD computed, const Big& exact) {
  Big c, d;
  set_dd(c, computed);
  mpfr_sub(d.x, c.x, exact.x, MPFR_RNDN);
  return std::fabs(mpfr_get_d(d.x, MPFR_RNDU));
}

// ulp(x) of a finite double (IEEE 754 §2.1.58 sense: the gap at |x|, 2^-1074 in the subnormal range).
double ulp(double x) {
  x = std::fabs(x);
  if (x < DBL_MIN) return kMinSub;
  return std::ldexp(1.0, std::ilogb(x) - 52);
}

bool normalised(DD a) { return std::fabs(a.lo) <= ulp(a.hi) / 2; }

std::string show(double x) {
  std::ostringstream s;
  s << std::hexfloat << x;
  return s.str();
}
std::string show(DD a) { return "(" + show(a.hi) + ", " + show(a.lo) + ")"; }

// Random doubles and double-words: sign, significand and exponent uniform (exponent in [emin, emax]).
struct Rand {
  boost::random::mt19937_64 eng;
  explicit Rand(std::uint64_t seed) : eng(seed) {}
  double d(int emin, int emax) {
    boost::random::uniform_real_distribution<double> m(1.0, 2.0);
    boost::random::uniform_int_distribution<int> e(emin, emax), s(0, 1);
    const int ex = e(eng);  // drawn first, in its own statement: the order of a call's arguments is the compiler's
    const double v = std::ldexp(m(eng), ex);
    return s(eng) ? -v : v;
  }
  // A normalised double-word: hi random, lo = a random fraction of ulp(hi)/2 (sometimes 0 or exactly
  // ±ulp(hi)/2, sometimes far smaller than ulp(hi)), both signs.
  DD dd(int emin, int emax) {
    const double hi = d(emin, emax);
    boost::random::uniform_int_distribution<int> kind(0, 9), s(0, 1), gap(0, 200);
    const int k = kind(eng);
    double lo;
    if (k == 0) lo = 0;
    else if (k == 1) lo = ulp(hi) / 2;
    else if (k == 2) lo = std::ldexp(ulp(hi), -gap(eng));
    else lo = ulp(hi) / 2 * boost::random::uniform_real_distribution<double>(0.0, 1.0)(eng);
    if (s(eng)) lo = -lo;
    DD r = fast_two_sum(hi, lo);  // lo = ±ulp/2 may round hi to its neighbour: keep the pair normalised
    return r;
  }
};

// Adversarial double-words: powers of two, ties, the extremes of the range, subnormal low words.
std::vector<DD> special_dds() {
  std::vector<DD> v;
  for (double hi : {1.0, -1.0, 0x1p-1, 0x1p+1, 3.0, 0x1.fffffffffffffp+0, 0x1p-1000, -0x1p-1000, 0x1p+1000,
                    0x1.fffffffffffffp+1022, -0x1p+1022, 0x1p-1022, 0x1.8p-970, 0x1p-960}) {
    for (double frac : {0.0, 0.5, -0.5, 0x1p-30, -0x1p-30, 0.25}) {
      const double lo = frac * ulp(hi);  // ±ulp/2 is a tie of hi + lo; for hi ≈ 2^-1000, lo is subnormal
      v.push_back(fast_two_sum(hi, lo));  // hi = RN(hi + lo), as [JMP17] define a double-word
    }
  }
  return v;
}

}  // namespace

TEST_CASE("two_sum and fast_two_sum are exact with |lo| <= ulp(hi)/2", "[double_double]") {
  Rand r(1);
  auto check = [](double a, double b) {
    const DD s = two_sum(a, b);
    if (!std::isfinite(s.hi)) return;  // the sum overflows: nothing to check
    Big exact, got;
    mpfr_set_d(exact.x, a, MPFR_RNDN);
    REQUIRE(mpfr_add_d(exact.x, exact.x, b, MPFR_RNDN) == 0);
    set_dd(got, s);
    INFO("two_sum(" << show(a) << ", " << show(b) << ") = " << show(s));
    CHECK(mpfr_equal_p(exact.x, got.x));
    CHECK(s.hi == a + b);  // hi is the rounded sum
    CHECK(normalised(s));
    if (std::fabs(a) >= std::fabs(b)) {
      const DD f = fast_two_sum(a, b);
      INFO("fast_two_sum = " << show(f));
      CHECK(f.hi == s.hi);
      CHECK(f.lo == s.lo);
    }
  };
  for (int i = 0; i < 20000; ++i) {
    const double a = r.d(-1074 + 60, 1023), b = r.d(-1074 + 60, 1023);
    check(a, b);
    check(a, r.d(std::max(-1070, std::ilogb(a) - 120), std::min(1023, std::ilogb(a) + 2)));  // overlapping
  }
  // Adversarial: ties to even, cancellation, overflow edge, subnormals (additions of subnormals are exact).
  const double big = DBL_MAX;
  const double cases[][2] = {{1.0, 0x1p-53},    {1.0, 0x1.8p-53},  {1.0, -0x1p-54}, {0x1p53, 1.0},  {0x1p53, 3.0},
                             {1.0, -1.0},       {1.0, -0x1.fffffffffffffp-1},       {big, -0x1p970}, {big, 0x1p969},
                             {-big, -0x1p969},  {big, -big},       {0x1p-1074, 0x1p-1074},          {DBL_MIN, -0x1p-1074},
                             {0x1p-1000, 0x1p-1074}, {0x1p-1022, 0x1p-1060}, {0.1, 0.2}, {1e16, 1.5}, {-0.0, 0.0}};
  for (const auto& c : cases) {
    check(c[0], c[1]);
    check(c[1], c[0]);
  }
}

TEST_CASE("two_prod is exact with |lo| <= ulp(hi)/2 (no underflow)", "[double_double]") {
  Rand r(2);
  auto check = [](double a, double b) {
    const DD p = two_prod(a, b);
    Big exact(256), got;
    mpfr_set_d(exact.x, a, MPFR_RNDN);
    REQUIRE(mpfr_mul_d(exact.x, exact.x, b, MPFR_RNDN) == 0);  // 106 bits hold a·b exactly
    set_dd(got, p);
    INFO("two_prod(" << show(a) << ", " << show(b) << ") = " << show(p));
    CHECK(mpfr_equal_p(exact.x, got.x));
    CHECK(p.hi == a * b);
    CHECK(normalised(p));
  };
  for (int i = 0; i < 20000; ++i) {
    // Exponents keep a·b's error term above the underflow threshold: ilogb(a·b) >= -1022 + 53.
    const double a = r.d(-480, 510), b = r.d(-480, 510);
    check(a, b);
  }
  // Adversarial: products of all-ones significands, powers of two, ties, near overflow, near (not into)
  // the underflow threshold of the error term.
  const double ones = 0x1.fffffffffffffp+0;
  const double cases[][2] = {{ones, ones},          {ones, -ones},        {0x1p+511, 0x1.fffffffffffffp+511},
                             {0x1.0000000000001p0, 0x1.0000000000001p0}, {0x1.8p0, 0x1.5555555555555p0},
                             {1.0, 0x1p-1000},     {0x1p-500, 0x1p-400}, {0x1.fffffffffffffp-500, 0x1.0000000000001p-469},
                             {0.1, 10.0},          {3.0, 1.0 / 3.0},     {-0.0, 5.0}};
  for (const auto& c : cases) check(c[0], c[1]);
}

TEST_CASE("dot2_step keeps hi + returned == old hi + a·b up to one rounding of the error terms",
          "[double_double]") {
  // [ORO05, Alg. 5.3]: after hi ← fl(hi + a·b), the exact remainder is s.lo + p.lo; the step returns it
  // rounded once, so |hi' + ret − (hi + a·b)| <= u·|ret|.
  Rand r(3);
  for (int i = 0; i < 20000; ++i) {
    double hi = r.d(-300, 300);
    const double a = r.d(-150, 150), b = r.d(-150, 150);
    Big exact, got;
    mpfr_set_d(exact.x, a, MPFR_RNDN);
    mpfr_mul_d(exact.x, exact.x, b, MPFR_RNDN);
    mpfr_add_d(exact.x, exact.x, hi, MPFR_RNDN);
    const double ret = dot2_step(hi, a, b);
    INFO("hi' " << show(hi) << " ret " << show(ret));
    Big sum;
    mpfr_set_d(sum.x, hi, MPFR_RNDN);
    mpfr_add_d(sum.x, sum.x, ret, MPFR_RNDN);
    mpfr_sub(sum.x, sum.x, exact.x, MPFR_RNDN);
    CHECK(std::fabs(mpfr_get_d(sum.x, MPFR_RNDU)) <= u * std::fabs(ret));
  }
}

namespace {

// One binary operation against MPFR on a set of inputs: relative error <= bound·u² (plus an absolute
// allowance `abs_slack` where low words are subnormal), result normalised. Returns the largest relative
// error seen, in units of u².
template <class Op, class Exact>
double check_op(const char* name, const std::vector<std::pair<DD, DD>>& inputs, double bound, Op op, Exact exact_of,
                double abs_slack = 0) {
  double worst = 0;
  for (const auto& [a, b] : inputs) {
    Big exact;
    if (!exact_of(exact, a, b)) continue;
    const DD got = op(a, b);
    const double mag = std::fabs(mpfr_get_d(exact.x, MPFR_RNDN));
    if (!std::isfinite(mag) || !std::isfinite(got.hi)) continue;  // the result overflows: out of scope
    const double re = rel_err(got, exact);
    INFO(name << "(" << show(a) << ", " << show(b) << ") = " << show(got) << "; relative error " << re / (u * u)
              << " u^2, bound " << bound << " u^2");
    if (abs_slack == 0 || re > bound * u * u) CHECK(abs_err(got, exact) <= bound * u * u * mag + abs_slack);
    CHECK(normalised(got));
    if (mag > 0x1p-900) worst = std::max(worst, re / (u * u));
  }
  return worst;
}

std::vector<std::pair<DD, DD>> random_pairs(std::uint64_t seed, int n, int emin, int emax, bool close) {
  Rand r(seed);
  std::vector<std::pair<DD, DD>> v;
  for (int i = 0; i < n; ++i) {
    const DD a = r.dd(emin, emax);
    DD b = r.dd(emin, emax);
    if (close) b = r.dd(std::max(emin, std::ilogb(a.hi) - 60), std::min(emax, std::ilogb(a.hi) + 1));
    v.push_back({a, b});
  }
  return v;
}

// Pairs whose sum cancels massively: b = −a perturbed in its low word or last bits of hi.
std::vector<std::pair<DD, DD>> cancelling_pairs(std::uint64_t seed, int n) {
  Rand r(seed);
  std::vector<std::pair<DD, DD>> v;
  for (int i = 0; i < n; ++i) {
    const DD a = r.dd(-600, 900);  // low words stay normal: the bound is relative
    const DD p = r.dd(-600, 900);
    v.push_back({a, dd_neg(a)});                                        // exactly zero
    v.push_back({a, DD{-a.hi, std::ldexp(p.hi, std::ilogb(a.hi) - 150 - std::ilogb(p.hi))}});  // a.lo + tiny
    v.push_back({a, fast_two_sum(-a.hi, -a.lo * 0.5)});                 // half the low word left
    v.push_back({a, fast_two_sum(-std::nextafter(a.hi, 0.0), -a.lo)});  // one ulp of hi left
  }
  return v;
}

std::vector<std::pair<DD, DD>> special_pairs() {
  std::vector<std::pair<DD, DD>> v;
  const auto s = special_dds();
  for (const DD& a : s)
    for (const DD& b : s) v.push_back({a, b});
  return v;
}

bool exact_add(Big& r, DD a, DD b) {
  Big t;
  set_dd(r, a);
  set_dd(t, b);
  REQUIRE(mpfr_add(r.x, r.x, t.x, MPFR_RNDN) == 0);
  return true;
}
bool exact_mul(Big& r, DD a, DD b) {
  Big t;
  set_dd(r, a);
  set_dd(t, b);
  REQUIRE(mpfr_mul(r.x, r.x, t.x, MPFR_RNDN) == 0);
  return true;
}
bool div_256(Big& r, DD a, DD b) {
  if (b.hi == 0) return false;
  Big x, y;
  set_dd(x, a);
  set_dd(y, b);
  mpfr_set_prec(r.x, 256);
  mpfr_div(r.x, x.x, y.x, MPFR_RNDN);  // relative error 2^-256, negligible against 15u² = 2^-102
  return true;
}

}  // namespace

TEST_CASE("dd_add is within 3u^2/(1-4u) of the exact sum [JMP17, AccurateDWPlusDW]", "[double_double]") {
  const double bound = 3.0 / (1 - 4 * u);
  auto op = [](DD a, DD b) { return dd_add(a, b); };
  double w = 0;
  w = std::max(w, check_op("dd_add", random_pairs(10, 20000, -700, 1000, false), bound, op, exact_add));
  w = std::max(w, check_op("dd_add", random_pairs(11, 20000, -700, 1000, true), bound, op, exact_add));
  w = std::max(w, check_op("dd_add", cancelling_pairs(12, 3000), bound, op, exact_add));
  // Subnormal low words: additions there are exact, but the result's own low word can only resolve
  // 2^-1074, so the bound holds up to a few units of 2^-1074 (absolute).
  w = std::max(w, check_op("dd_add", special_pairs(), bound, op, exact_add, 2 * kMinSub));
  WARN("dd_add: largest relative error " << w << " u^2 (bound " << bound << ")");
  CHECK(w > 0.1);  // the cases do reach the bound's order: a check that cannot fail would not show that
}

TEST_CASE("dd_mul is within 7u^2 of the exact product [JMP17, DWTimesDW1]", "[double_double]") {
  auto op = [](DD a, DD b) { return dd_mul(a, b); };
  double w = 0;
  w = std::max(w, check_op("dd_mul", random_pairs(20, 20000, -480, 480, false), 7, op, exact_mul));
  // Near overflow (result up to 2^1023) and near the smallest result whose low word is still normal.
  w = std::max(w, check_op("dd_mul", random_pairs(21, 5000, 500, 511, false), 7, op, exact_mul));
  w = std::max(w, check_op("dd_mul", random_pairs(22, 5000, -484, -470, false), 7, op, exact_mul));
  // Subnormal low words (products underflow): an absolute allowance of a few 2^-1074.
  w = std::max(w, check_op("dd_mul", special_pairs(), 7, op, exact_mul, 4 * kMinSub));
  WARN("dd_mul: largest relative error " << w << " u^2 (bound 7)");
  CHECK(w > 0.1);
}

TEST_CASE("dd_mul_d is within 3u^2 of the exact product [JMP17, DWTimesFP2]", "[double_double]") {
  auto op = [](DD a, DD b) { return dd_mul_d(a, b.hi); };
  auto exact = [](Big& r, DD a, DD b) { return exact_mul(r, a, DD{b.hi, 0}); };
  double w = 0;
  w = std::max(w, check_op("dd_mul_d", random_pairs(30, 20000, -480, 480, false), 3, op, exact));
  w = std::max(w, check_op("dd_mul_d", special_pairs(), 3, op, exact, 4 * kMinSub));
  WARN("dd_mul_d: largest relative error " << w << " u^2 (bound 3)");
  CHECK(w > 0.1);
}

TEST_CASE("dd_div is within 15u^2 of the exact quotient", "[double_double]") {
  auto op = [](DD a, DD b) { return dd_div(a, b); };
  double w = 0;
  w = std::max(w, check_op("dd_div", random_pairs(40, 20000, -480, 480, false), 15, op, div_256));
  w = std::max(w, check_op("dd_div", random_pairs(41, 20000, -480, 480, true), 15, op, div_256));
  // Quotients of nearly equal numbers (the remainders cancel), of powers of two and ties.
  std::vector<std::pair<DD, DD>> near_one;
  for (const auto& [a, b] : cancelling_pairs(43, 2000)) near_one.push_back({a, dd_neg(b)});
  w = std::max(w, check_op("dd_div", near_one, 15, op, div_256));
  std::vector<std::pair<DD, DD>> moderate;
  for (const auto& p : special_pairs())
    if (std::fabs(std::ilogb(p.first.hi) - std::ilogb(p.second.hi)) < 900 && std::fabs(p.first.hi) > 0x1p-960 &&
        std::fabs(p.second.hi) > 0x1p-960)
      moderate.push_back(p);
  w = std::max(w, check_op("dd_div", moderate, 15, op, div_256, 4 * kMinSub));
  WARN("dd_div: largest relative error " << w << " u^2 (bound 15)");
  CHECK(w > 0.1);
}

TEST_CASE("dd_neg, dd_to_double and dd_less agree with MPFR", "[double_double]") {
  Rand r(50);
  for (int i = 0; i < 20000; ++i) {
    const DD a = r.dd(-1000, 1000);
    DD b = r.dd(-1000, 1000);
    if (i % 3 == 0) b = DD{a.hi, 0};                                                     // same hi, lo = 0
    if (i % 3 == 1) b = fast_two_sum(a.hi, ulp(a.hi) / 2 * ((i % 2) ? 0.25 : -0.25));  // same hi, other lo
    Big x, y, n;
    set_dd(x, a);
    set_dd(y, b);
    set_dd(n, dd_neg(a));
    mpfr_neg(n.x, n.x, MPFR_RNDN);
    INFO(show(a) << " vs " << show(b));
    CHECK(mpfr_equal_p(n.x, x.x));
    CHECK(dd_to_double(a) == mpfr_get_d(x.x, MPFR_RNDN));  // one rounding of the exact hi + lo
    CHECK(dd_less(a, b) == (mpfr_less_p(x.x, y.x) != 0));
  }
}

TEST_CASE("exp_dd is within 2^-98 of exp over [-635, 0.5]", "[double_double]") {
  Rand r(60);
  std::vector<DD> ts;
  boost::random::uniform_real_distribution<double> t_dist(kExpDDMin, 0.5);
  for (int i = 0; i < 20000; ++i) {
    const double hi = t_dist(r.eng);
    ts.push_back(fast_two_sum(hi, ulp(hi) / 2 * boost::random::uniform_real_distribution<double>(-1, 1)(r.eng)));
  }
  // Adversarial: the ends of the range, 0, tiny arguments, points next to multiples of ln2/1024 (where the
  // reduction switches table entry) and to ln 2 multiples.
  for (double t : {0.0, -0.0, 0.5, kExpDDMin, 0x1p-60, -0x1p-60, -0x1p-1000, -1.0, -0.6931471805599453,
                   -0.6931471805599453 * 512, -0.0006769015431250, -0.0003384507715625, -744.0 + 109})
    for (double lo : {0.0, 0x1p-80, -0x1p-80}) ts.push_back(fast_two_sum(t, t == 0 ? 0 : lo * std::fabs(t)));
  for (int k = -1000; k <= 0; k += 7) {
    const double c = k * 0.00067690154312553;  // ≈ k·ln2/1024
    ts.push_back({c, 0});
    ts.push_back({std::nextafter(c, 1.0), 0});
  }
  double worst = 0;
  for (const DD& t : ts) {
    if (!(t.hi >= kExpDDMin && t.hi <= 0.5)) continue;
    Big x, e(256);
    set_dd(x, t);
    mpfr_exp(e.x, x.x, MPFR_RNDN);
    const DD got = exp_dd(t);
    const double re = rel_err(got, e);
    INFO("exp_dd(" << show(t) << ") = " << show(got) << " relative error 2^" << std::log2(re));
    CHECK(re <= kExpDDRelErr);
    worst = std::max(worst, re);
  }
  WARN("exp_dd: largest relative error 2^" << std::log2(worst) << " (bound 2^-98)");
}
