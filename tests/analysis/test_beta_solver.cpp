// The β solver (PASA Appendix A–C) against the digits printed in the paper's Table 3 (fp16, n = 128) and
// against values worked out by hand; plus its error cases and the fixed-point property.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <boost/multiprecision/cpp_int.hpp>
#include <mpfr.h>

#include "../support/mpfr_round.hpp"
#include "pasa/analysis/beta_solver.hpp"
#include "pasa/core/error.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;

namespace {

// |x − printed| within half a unit of the printed last digit.
bool matches_printed(double x, double printed, double last_digit) {
  return std::abs(x - printed) <= 0.5 * last_digit * (1 + 1e-9);
}

// The printed value rounded to `digits` significant digits, as the paper's table shows Inva and Inva_r.
double sig(double x, int digits) {
  const double p = std::pow(10.0, digits - 1 - std::floor(std::log10(std::abs(x))));
  return std::round(x * p) / p;
}

struct Table3Row {
  double inva0, inva_r0, rel_err0_pct, beta, beta_digit, inva, inva_r, inva_digit;
};

// Appendix C's f(β) = b·n/(a·(a − b·n)) + (1 − a)/a evaluated separately: b = fl(β/n) and
// a = fl(1 − β/n) + b with the two roundings done by MPFR on the exact quotients (round to nearest even,
// the format's range), the rest in exact rational arithmetic; rounded to double once at the end.
double appendix_c_invariance(double beta, unsigned n, const Format& tp) {
  using boost::multiprecision::cpp_rational;
  mpfr_t x;
  mpfr_init2(x, 200);
  mpfr_set_d(x, beta, MPFR_RNDN);
  mpfr_div_ui(x, x, n, MPFR_RNDN);  // β/n to 200 bits: exact enough for a correct rounding to <= 53 bits
  const double b = test::mpfr_round_to(x, tp, {});
  mpfr_ui_sub(x, 1, x, MPFR_RNDN);
  const double a_entry = test::mpfr_round_to(x, tp, {});
  mpfr_clear(x);
  const cpp_rational br(b), a = cpp_rational(a_entry) + br, bn = br * n;
  const cpp_rational f = bn / (a * (a - bn)) + (1 - a) / a;
  return static_cast<double>(f);
}

}  // namespace

TEST_CASE("beta solver reproduces the paper's Table 3 digits (fp16, n = 128)", "[beta]") {
  // Paper, Appendix C, Table 3. Inva / Inva_r are printed to 4 significant digits, Rel.Err to 0.01 %, the
  // optimised β to the digits shown (the first row's "0.9" is the paper's, only one decimal).
  const Table3Row paper[] = {
      {9.000, 8.971, 0.32, 0.9, 0.1, 8.971, 8.971, 0.001},
      {15.00, 15.00, 0.0, 0.9375, 0.0001, 15.00, 15.00, 0.01},
      {31.00, 31.25, 0.81, 0.96899, 0.00001, 31.25, 31.25, 0.01},
      {63.00, 63.50, 0.79, 0.984497, 0.000001, 63.50, 63.50, 0.01},
      {99.00, 102.2, 3.23, 0.990311, 0.000001, 102.2, 102.2, 0.1},
      {999.0, 1031, 3.20, 0.999031, 0.000001, 1031, 1031, 1},
  };
  const std::vector<BetaRow> rows = beta_table3(format_by_name("fp16"), 128);
  REQUIRE(rows.size() == 6);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("row " << i << " beta0 " << rows[i].beta0);
    const BetaRow& r = rows[i];
    const Table3Row& p = paper[i];
    const double d0 = p.inva0 >= 100 ? 0.1 : (p.inva0 >= 10 ? 0.01 : 0.001);
    CHECK(matches_printed(r.inva0, p.inva0, p.inva0 >= 1000 ? 1 : d0));
    CHECK(matches_printed(r.inva_r0, p.inva_r0, p.inva_digit));
    // The printed Rel.Err is |Inva − Inva_r| / Inva of the 4-digit values shown (e.g. (102.2 − 99)/99 =
    // 3.23 %, while the unrounded ratio is 3.239 %): check both readings.
    CHECK(matches_printed(100 * std::abs(sig(r.inva0, 4) - sig(r.inva_r0, 4)) / sig(r.inva0, 4), p.rel_err0_pct,
                          0.01));
    CHECK(std::abs(100 * r.rel_err0 - p.rel_err0_pct) < 0.011);
    CHECK(matches_printed(r.beta, p.beta, p.beta_digit));
    CHECK(matches_printed(r.inva, p.inva, p.inva_digit));
    CHECK(matches_printed(r.inva_r, p.inva_r, p.inva_digit));
    CHECK(r.rel_err < 1e-12);  // printed 0.0 %
    CHECK(r.iterations >= 1);
  }
}

TEST_CASE("beta solver hand-computed fp16 values", "[beta]") {
  const Format h = format_by_name("fp16");
  // β = 1 − 2^-4, n = 128: β/n = 15·2^-11 and 1 − β/n = 2033·2^-11 are fp16 numbers, a = 1, b·n = 15/16,
  // f = (15/16) / (1/16) = 15 = Inva exactly: converged after the first update.
  const RoundedShift m = rounded_shift(0.9375, 128, h);
  CHECK(m.b == 15 * 0x1p-11);
  CHECK(m.a == 1.0);
  CHECK(practical_invariance(0.9375, 128, h) == 15.0);
  const BetaRow r = solve_beta(0.9375, 128, h);
  CHECK(r.beta == 0.9375);
  CHECK(r.iterations == 1);
  CHECK(r.rel_err0 == 0.0);
  // β = 1 − 2^-5: β/n = 31·2^-12 is exact; 1 − β/n = 4065·2^-12 lies halfway between 2032·2^-11 and
  // 2033·2^-11 and rounds to the even 2032·2^-11. So b = 31·2^-12, a = 4095·2^-12, b·n = 31/32,
  // f = (31/32) / (a·(a − 31/32)) + (1 − a)/a with a − 31/32 = 127·2^-12.
  const RoundedShift m5 = rounded_shift(0.96875, 128, h);
  CHECK(m5.b == 31 * 0x1p-12);
  CHECK(m5.a == 4095 * 0x1p-12);
  const double a = 4095 * 0x1p-12;
  CHECK(practical_invariance(0.96875, 128, h) == Approx(31.0 / 32 / (a * 127 * 0x1p-12) + 0x1p-12 / a).epsilon(1e-15));
}

TEST_CASE("beta solver result is a fixed point of Eq. 22, with f evaluated independently", "[beta]") {
  for (const char* name : {"fp16", "bf16", "fp32", "fp8_e5m2"}) {
    const Format tp = format_by_name(name);
    for (std::size_t n : {std::size_t{16}, std::size_t{64}, std::size_t{128}}) {
      for (double b0 : {0.5, 0.9, 0.95, 0.984375}) {
        INFO(name << " n=" << n << " beta0=" << b0);
        const BetaRow r = solve_beta(b0, n, tp);
        const double f = practical_invariance(r.beta, n, tp);
        const double exact = appendix_c_invariance(r.beta, static_cast<unsigned>(n), tp);
        CHECK(f == Approx(exact).epsilon(1e-13));
        CHECK(r.inva_r == Approx(exact).epsilon(1e-13));
        CHECK(exact / (1 + exact) == Approx(r.beta).epsilon(1e-8));  // the fixed point of Eq. 22
        CHECK(r.inva == Approx(r.beta / (1 - r.beta)).epsilon(1e-15));
      }
    }
  }
}

TEST_CASE("beta solver with the 1/sqrt(d) factor inside M", "[beta]") {
  const Format h = format_by_name("fp16");
  BetaOptions opt;
  opt.sqrt_d = 64;  // α = 8, a power of two: scaling by 1/8 is exact, so the rounding is the same as without
  const RoundedShift scaled = rounded_shift(0.99, 128, h, opt);
  const RoundedShift plain = rounded_shift(0.99, 128, h);
  CHECK(scaled.a == plain.a);
  CHECK(scaled.b == plain.b);
  // α = √128: entries (1 − β/n)/α and β/(n·α) rounded in fp16, mapped back by α (hand-derived check).
  opt.sqrt_d = 128;
  const double alpha = std::sqrt(128.0);
  const RoundedShift s = rounded_shift(0.99, 128, h, opt);
  CHECK(s.b == alpha * round(0.99 / 128 / alpha, h));
  CHECK(s.a == alpha * (round((1 - 0.99 / 128) / alpha, h) + round(0.99 / 128 / alpha, h)));
  const BetaRow r = solve_beta(0.99, 128, h, opt);
  const double f = practical_invariance(r.beta, 128, h, opt);
  CHECK(f / (1 + f) == Approx(r.beta).epsilon(1e-8));
}

TEST_CASE("beta solver rejects bad input with clear messages", "[beta]") {
  const Format h = format_by_name("fp16");
  using Catch::Contains;
  CHECK_THROWS_AS(solve_beta(0.0, 128, h), InputError);
  CHECK_THROWS_WITH(solve_beta(1.0, 128, h), Contains("(0, 1)"));
  CHECK_THROWS_WITH(solve_beta(-0.5, 128, h), Contains("(0, 1)"));
  CHECK_THROWS_WITH(solve_beta(std::numeric_limits<double>::quiet_NaN(), 128, h), Contains("(0, 1)"));
  CHECK_THROWS_WITH(solve_beta(0.9, 0, h), Contains("n must be at least 1"));
  // fp8 E4M3 without subnormals: β/n = 0.9/4096 ≈ 2.2e-4 is below its smallest number 2^-7: b = 0.
  CHECK_THROWS_WITH(solve_beta(0.9, 4096, custom_format(4, 8, false)), Contains("rounds to zero"));
  // A 2-bit significand rounds 1 − β/n = 0.5 to 0.5 and β/n = 0.5 to 0.5 with n = 2: a = 1, b·n = 1: singular.
  CHECK_THROWS_WITH(solve_beta(0.99, 2, custom_format(2, 15)), Contains("singular"));
  BetaOptions opt;
  opt.max_iter = 1;
  opt.tol = 1e-300;
  CHECK_THROWS_WITH(solve_beta(0.9, 128, h, opt), Contains("no convergence within 1"));
  opt = {};
  opt.rounding.mode = RoundMode::stochastic;
  CHECK_THROWS_WITH(solve_beta(0.9, 128, h, opt), Contains("deterministic"));
  opt = {};
  opt.tol = 0;
  CHECK_THROWS_WITH(solve_beta(0.9, 128, h, opt), Contains("tolerance"));
}
