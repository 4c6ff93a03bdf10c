// The golden against an independent plain MPFR evaluation written differently (no max shift: weights are
// exp(s_j - lse) with lse = log Σ exp(s_j), all at 256 bits), on small random cases with every mask kind,
// GQA, cross-attention and large-bias inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <mpfr.h>

#include "pasa/numeric/double_double.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/exact_scores.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

Tensor random_tensor(Shape s, const Format& f, double x0, double am, std::uint64_t seed) {
  Tensor t(s, f);
  boost::random::mt19937_64 eng(seed);
  boost::random::uniform_real_distribution<double> u(x0 - am, x0 + am);
  for (double& x : t.data) x = pasa::round(u(eng), f);
  return t;
}

AttentionInputs make_inputs(std::size_t B, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv,
                            std::size_t D, double x0, double am, std::uint64_t seed, const char* fmt = "fp16") {
  const Format f = format_by_name(fmt);
  AttentionInputs in;
  in.q = random_tensor({B, Nq, Sq, D}, f, x0, am, seed);
  in.k = random_tensor({B, Nkv, Skv, D}, f, x0, am, seed + 1);
  in.v = random_tensor({B, Nkv, Skv, D}, f, x0, am, seed + 2);
  return in;
}

struct Reference {
  std::vector<double> o, o_lo, lse, scale_abs;  // o + o_lo: the exact O to ~106 bits; scale_abs: Σ p|v| / Σ p
};

// Plain MPFR: visibility tested element by element with the definition of the mask (not visible_end).
Reference reference(const AttentionInputs& in) {
  const Shape& qs = in.q.shape;
  const std::size_t Skv = in.k.shape.S, D = qs.D, g = qs.N / in.k.shape.N;
  Reference r;
  r.o.assign(qs.size(), 0);
  r.o_lo.assign(qs.size(), 0);
  r.scale_abs.assign(qs.size(), 0);
  r.lse.assign(qs.B * qs.N * qs.S, -std::numeric_limits<double>::infinity());
  mpfr_t sc, acc, t, lse, w, num, den, tmp;
  mpfr_inits2(256, sc, acc, t, lse, w, num, den, tmp, static_cast<mpfr_ptr>(nullptr));
  if (in.scale != 0) mpfr_set_d(sc, in.scale, MPFR_RNDN);
  else mpfr_set_ui(sc, D, MPFR_RNDN), mpfr_sqrt(sc, sc, MPFR_RNDN), mpfr_ui_div(sc, 1, sc, MPFR_RNDN);
  for (std::size_t b = 0; b < qs.B; ++b)
    for (std::size_t h = 0; h < qs.N; ++h)
      for (std::size_t i = 0; i < qs.S; ++i) {
        auto vis = [&](std::size_t j) {
          // causal aligned to the batch's own length L = kv_len[b] (Skv without kv_len): j <= i + (L − Sq)
          const std::size_t L = in.mask.kv_len.empty() ? Skv : in.mask.kv_len[b];
          if (in.mask.causal && static_cast<long>(j) > static_cast<long>(i) + static_cast<long>(L) - static_cast<long>(qs.S)) return false;
          if (!in.mask.kv_len.empty() && j >= in.mask.kv_len[b]) return false;
          if (!in.mask.keep.empty() && !in.mask.keep[(b * qs.S + i) * Skv + j]) return false;
          return true;
        };
        std::vector<double> s_hi(Skv);
        std::vector<mpfr_t> s(Skv);
        bool any = false;
        mpfr_set_zero(den, 1);
        for (std::size_t j = 0; j < Skv; ++j) {
          mpfr_init2(s[j], 256);
          if (!vis(j)) continue;
          any = true;
          mpfr_set_zero(s[j], 1);
          for (std::size_t x = 0; x < D; ++x) {
            mpfr_set_d(tmp, in.q.at(b, h, i, x), MPFR_RNDN);
            mpfr_mul_d(tmp, tmp, in.k.at(b, h / g, j, x), MPFR_RNDN);
            mpfr_add(s[j], s[j], tmp, MPFR_RNDN);
          }
          mpfr_mul(s[j], s[j], sc, MPFR_RNDN);
          mpfr_exp(tmp, s[j], MPFR_RNDN);
          mpfr_add(den, den, tmp, MPFR_RNDN);
        }
        const std::size_t row = (b * qs.N + h) * qs.S + i;
        if (any) {
          mpfr_log(lse, den, MPFR_RNDN);
          r.lse[row] = mpfr_get_d(lse, MPFR_RNDN);
          for (std::size_t x = 0; x < D; ++x) {
            mpfr_set_zero(num, 1);
            mpfr_set_zero(acc, 1);
            for (std::size_t j = 0; j < Skv; ++j) {
              if (!vis(j)) continue;
              mpfr_sub(w, s[j], lse, MPFR_RNDN);
              mpfr_exp(w, w, MPFR_RNDN);
              mpfr_mul_d(tmp, w, in.v.at(b, h / g, j, x), MPFR_RNDN);
              mpfr_add(num, num, tmp, MPFR_RNDN);
              mpfr_mul_d(tmp, w, std::abs(in.v.at(b, h / g, j, x)), MPFR_RNDN);
              mpfr_add(acc, acc, tmp, MPFR_RNDN);
            }
            r.o[row * D + x] = mpfr_get_d(num, MPFR_RNDN);
            mpfr_sub_d(tmp, num, r.o[row * D + x], MPFR_RNDN);
            r.o_lo[row * D + x] = mpfr_get_d(tmp, MPFR_RNDN);
            r.scale_abs[row * D + x] = mpfr_get_d(acc, MPFR_RNDN);
          }
        }
        for (auto& v : s) mpfr_clear(v);
      }
  mpfr_clears(sc, acc, t, lse, w, num, den, tmp, static_cast<mpfr_ptr>(nullptr));
  return r;
}

double half_ulp(double x) { return x == 0 ? std::numeric_limits<double>::denorm_min() : std::ldexp(1.0, std::ilogb(x) - 53); }

// The golden's own claim (golden.hpp): before its final rounding to double, every element is within
// 2^-guaranteed_bits · Σp|v|/Σp (+ 2^-900·max|v|) of the exact O, so the stored double is within that plus
// half an ulp of it; lse within 2^-guaranteed_bits·(1 + |lse|) plus the two doubles' half ulps. The exact O
// is the reference's 256-bit value carried as o + o_lo (its own error, ~2^-106·|o|, is allowed for).
void check_against_reference(const AttentionInputs& in, const GoldenOptions& opt, int min_bits = 60) {
  const Golden g = golden_attention(in, opt);
  const Reference r = reference(in);
  CHECK(g.guaranteed_bits >= min_bits);
  double vmax = 0;
  for (double x : in.v.data) vmax = std::max(vmax, std::abs(x));
  for (std::size_t e = 0; e < r.o.size(); ++e) {
    const double err = std::abs((g.o.data[e] - r.o[e]) - r.o_lo[e]);
    const double bound = std::ldexp(r.scale_abs[e], -g.guaranteed_bits) + half_ulp(g.o.data[e]) +
                          0x1p-900 * vmax + 0x1p-104 * std::abs(r.o[e]);
    INFO("element " << e << " golden " << g.o.data[e] << " reference " << r.o[e] << " + " << r.o_lo[e]
                    << " guaranteed bits " << g.guaranteed_bits << " error " << err << " bound " << bound);
    REQUIRE(err <= bound);
  }
  for (std::size_t row = 0; row < r.lse.size(); ++row) {
    INFO("row " << row << " lse " << g.lse[row] << " reference " << r.lse[row]);
    if (std::isinf(r.lse[row])) REQUIRE(g.lse[row] == r.lse[row]);
    else
      REQUIRE(std::abs(g.lse[row] - r.lse[row]) <= std::ldexp(1 + std::abs(r.lse[row]), -g.guaranteed_bits) +
                                                      half_ulp(g.lse[row]) + half_ulp(r.lse[row]));
  }
}

}  // namespace

TEST_CASE("exp_dd matches MPFR to within kExpDDRelErr relative", "[golden]") {
  boost::random::mt19937_64 eng(7);
  boost::random::uniform_real_distribution<double> u(kExpDDMin, 0.0), tiny(-1e-17, 1e-17);
  mpfr_t x, y, z;
  mpfr_inits2(300, x, y, z, static_cast<mpfr_ptr>(nullptr));
  double worst = 0;
  for (int it = 0; it < 20000; ++it) {
    double hi = u(eng);
    if (it % 4 == 0) hi /= 1000;  // many small arguments as well
    const DD t = two_sum(hi, tiny(eng) * std::abs(hi));
    const DD e = exp_dd(t);
    mpfr_set_d(x, t.hi, MPFR_RNDN);
    mpfr_add_d(x, x, t.lo, MPFR_RNDN);
    mpfr_exp(y, x, MPFR_RNDN);
    mpfr_set_d(z, e.hi, MPFR_RNDN);
    mpfr_add_d(z, z, e.lo, MPFR_RNDN);
    mpfr_sub(z, z, y, MPFR_RNDN);
    mpfr_div(z, z, y, MPFR_RNDN);
    worst = std::max(worst, std::abs(mpfr_get_d(z, MPFR_RNDN)));
  }
  mpfr_clears(x, y, z, static_cast<mpfr_ptr>(nullptr));
  CHECK(worst < kExpDDRelErr);
}

TEST_CASE("golden fast and MPFR paths match a plain MPFR evaluation", "[golden]") {
  GoldenOptions fast, plain;
  plain.fast = false;
  SECTION("uniform, GQA, cross-attention") {
    AttentionInputs in = make_inputs(2, 4, 2, 5, 9, 16, 0.0, 1.0, 11);
    check_against_reference(in, fast);
    check_against_reference(in, plain);
  }
  SECTION("large bias x0 = 30, Am = 0.5 (scores ~ 1e4)") {
    AttentionInputs in = make_inputs(1, 2, 1, 6, 40, 64, 30.0, 0.5, 12);
    check_against_reference(in, fast);
    check_against_reference(in, plain);
  }
  SECTION("causal decode alignment, kv_len, boolean keep, fully masked rows") {
    AttentionInputs in = make_inputs(2, 2, 1, 7, 5, 8, 1.0, 2.0, 13);  // Sq > Skv: first 2 rows fully masked
    in.mask.causal = true;
    in.mask.kv_len = {5, 3};
    in.mask.keep.assign(2 * 7 * 5, 1);
    in.mask.keep[(0 * 7 + 4) * 5 + 1] = 0;
    for (std::size_t j = 0; j < 5; ++j) in.mask.keep[(1 * 7 + 6) * 5 + j] = 0;  // a fully masked row by keep
    check_against_reference(in, fast);
    check_against_reference(in, plain);
    const Golden g = golden_attention(in);
    CHECK(std::isinf(g.lse[0]));
    CHECK(g.o.at(0, 0, 0, 3) == 0.0);
    CHECK(std::isinf(g.lse[(1 * 2 + 1) * 7 + 6]));
  }
  SECTION("explicit scale, bf16 and fp32 inputs, mixed-sign V") {
    AttentionInputs in = make_inputs(1, 1, 1, 4, 33, 24, -0.5, 3.0, 14, "bf16");
    in.scale = 0.3;
    check_against_reference(in, fast);
    AttentionInputs in32 = make_inputs(1, 1, 1, 3, 20, 12, 0.0, 8.0, 15, "fp32");
    check_against_reference(in32, fast);
  }
}

TEST_CASE("golden's error bound holds on cases chosen to stress it", "[golden]") {
  GoldenOptions fast;
  SECTION("negative scale gives the same bound as the positive one (the Dot2 term uses |scale|)") {
    AttentionInputs in = make_inputs(1, 1, 1, 4, 30, 64, 3.0, 2.0, 71);
    in.scale = 0.01;
    const int plus = golden_attention(in).guaranteed_bits;
    check_against_reference(in, fast);
    in.scale = -0.01;
    const int minus = golden_attention(in).guaranteed_bits;
    check_against_reference(in, fast);
    CHECK(plus == minus);
  }
  SECTION("large bias x0 = 60 with a negative scale") {
    AttentionInputs in = make_inputs(1, 1, 1, 3, 24, 64, 60.0, 0.5, 72);
    in.scale = -0.125;
    check_against_reference(in, fast, 54);
  }
  SECTION("cancellation in Σp·v: pairs of equal keys with opposite values") {
    AttentionInputs in = make_inputs(1, 1, 1, 3, 40, 16, 0.0, 2.0, 73);
    for (std::size_t j = 0; j + 1 < 40; j += 2)
      for (std::size_t x = 0; x < 16; ++x) {
        in.k.data[(j + 1) * 16 + x] = in.k.data[j * 16 + x];
        in.v.data[(j + 1) * 16 + x] = -in.v.data[j * 16 + x];
      }
    in.v.data[5] = pasa::round(in.v.data[5] * 1.001, in.v.format);  // one pair not quite cancelling
    check_against_reference(in, fast);
  }
  SECTION("tiny weights and a long row: one key far above the others") {
    AttentionInputs in = make_inputs(1, 1, 1, 2, 600, 8, 0.0, 1.0, 74, "fp32");
    for (std::size_t x = 0; x < 8; ++x) in.k.data[17 * 8 + x] = 60.0 * (in.q.data[x] > 0 ? 1 : -1);
    check_against_reference(in, fast);
  }
}

TEST_CASE("naive double softmax loses digits where the golden does not", "[golden]") {
  // Large bias: scores ~ 30²·128/√128 ≈ 1e4, so a double evaluation of the scaled scores errs by ~1e-12 in
  // the exponent. The golden must stay at the faithful level against the plain MPFR evaluation.
  AttentionInputs in = make_inputs(1, 1, 1, 4, 64, 128, 30.0, 0.5, 21);
  in.v = random_tensor(in.v.shape, in.v.format, 0.0, 1.0, 22);  // mixed signs: no averaging-out of errors
  const Reference r = reference(in);
  const Golden g = golden_attention(in);
  double naive_worst = 0, golden_worst = 0;
  const std::size_t D = 128, S = 64;
  const double scale = 1 / std::sqrt(128.0);
  for (std::size_t i = 0; i < 4; ++i) {
    std::vector<double> s(S);
    double m = -1e300, l = 0;
    for (std::size_t j = 0; j < S; ++j) {
      double acc = 0;
      for (std::size_t x = 0; x < D; ++x) acc += in.q.at(0, 0, i, x) * in.k.at(0, 0, j, x);
      s[j] = acc *= scale;
      m = std::max(m, acc);
    }
    for (double& x : s) l += (x = std::exp(x - m));
    for (std::size_t x = 0; x < D; ++x) {
      double o = 0;
      for (std::size_t j = 0; j < S; ++j) o += s[j] * in.v.at(0, 0, j, x);
      o /= l;
      const std::size_t e = i * D + x;
      naive_worst = std::max(naive_worst, std::abs(o - r.o[e]) / r.scale_abs[e]);
      golden_worst = std::max(golden_worst, std::abs(g.o.data[e] - r.o[e]) / r.scale_abs[e]);
    }
  }
  INFO("naive " << naive_worst << " golden " << golden_worst);
  CHECK(naive_worst > 1e-13);
  for (std::size_t e = 0; e < 4 * D; ++e)
    CHECK(std::abs((g.o.data[e] - r.o[e]) - r.o_lo[e]) <=
          std::ldexp(r.scale_abs[e], -g.guaranteed_bits) + half_ulp(g.o.data[e]) + 0x1p-104 * std::abs(r.o[e]));
}

// ---- the fast path's exact scores: a plain fp64 dot product where every partial sum is provably
// a double, Dot2 elsewhere; rows in groups across the heads of a KV head ----

// Inputs whose elements span a wide exponent range: fp16 values of [-1, 1] times 2^e, e uniform in
// [-emax, emax], so that many q·k pairs need more than 53 bits (their plain double dot product is inexact)
// and others do not.
AttentionInputs wide_inputs(std::size_t B, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv,
                            std::size_t D, int emax, std::uint64_t seed, const char* fmt = "fp16") {
  AttentionInputs in = make_inputs(B, Nq, Nkv, Sq, Skv, D, 0.0, 1.0, seed, fmt);
  boost::random::mt19937_64 eng(seed + 99);
  boost::random::uniform_int_distribution<int> ex(-emax, emax);
  for (Tensor* t : {&in.q, &in.k})
    for (double& x : t->data) x = pasa::round(std::ldexp(x, ex(eng)), t->format);
  return in;
}

// How many (row, key) pairs have a plain double dot product (in index order) that differs from the exact one.
std::size_t inexact_pairs(const AttentionInputs& in) {
  const Shape& qs = in.q.shape;
  const std::size_t g = qs.N / in.k.shape.N;
  mpfr_t acc, tmp;
  mpfr_inits2(256, acc, tmp, static_cast<mpfr_ptr>(nullptr));
  std::size_t n = 0;
  for (std::size_t b = 0; b < qs.B; ++b)
    for (std::size_t h = 0; h < qs.N; ++h)
      for (std::size_t i = 0; i < qs.S; ++i)
        for (std::size_t j = 0; j < in.k.shape.S; ++j) {
          double plain = 0;
          mpfr_set_zero(acc, 1);
          for (std::size_t x = 0; x < qs.D; ++x) {
            plain += in.q.at(b, h, i, x) * in.k.at(b, h / g, j, x);
            mpfr_set_d(tmp, in.q.at(b, h, i, x), MPFR_RNDN);
            mpfr_mul_d(tmp, tmp, in.k.at(b, h / g, j, x), MPFR_RNDN);
            mpfr_add(acc, acc, tmp, MPFR_RNDN);
          }
          n += mpfr_cmp_d(acc, plain) != 0;
        }
  mpfr_clears(acc, tmp, static_cast<mpfr_ptr>(nullptr));
  return n;
}

TEST_CASE("golden's exact fp64 scores and their Dot2 fallback on wide exponent ranges", "[golden]") {
  GoldenOptions fast, plain;
  plain.fast = false;
  SECTION("fp16 over 2^±12, GQA (4 heads per KV head), D = 24 (not a multiple of the 8 lanes)") {
    AttentionInputs in = wide_inputs(1, 4, 1, 3, 40, 24, 12, 201);
    INFO("pairs whose plain double dot product is inexact: " << inexact_pairs(in));
    CHECK(inexact_pairs(in) > 10);  // the fallback is exercised (a plain GEMM everywhere would be wrong)
    check_against_reference(in, fast);
    check_against_reference(in, plain);
  }
  SECTION("fp16 over 2^±14 with causal, kv_len, keep, Sq != Skv") {
    AttentionInputs in = wide_inputs(2, 2, 1, 9, 13, 16, 14, 202);
    in.mask.causal = true;
    in.mask.kv_len = {13, 7};
    in.mask.keep.assign(2 * 9 * 13, 1);
    in.mask.keep[(1 * 9 + 8) * 13 + 2] = 0;
    CHECK(inexact_pairs(in) > 10);
    check_against_reference(in, fast);
  }
  SECTION("bf16 over 2^±16 and fp64 inputs (never exact in one double)") {
    AttentionInputs in = wide_inputs(1, 2, 2, 4, 30, 32, 16, 203, "bf16");
    in.scale = 0x1p-16;  // scaled scores up to ~2^22 (the reference exponentiates them unshifted)
    CHECK(inexact_pairs(in) > 10);
    check_against_reference(in, fast);
    AttentionInputs in64 = make_inputs(1, 1, 1, 3, 17, 12, 0.0, 2.0, 204, "fp64");
    CHECK(inexact_pairs(in64) > 10);
    check_against_reference(in64, fast);
  }
}

TEST_CASE("golden's row groups: decode rows across heads, row blocks across groups", "[golden]") {
  GoldenOptions fast;
  SECTION("decode: Sq = 1, 8 query heads per KV head, long rows, kv_len") {
    AttentionInputs in = make_inputs(2, 16, 2, 1, 700, 32, 0.0, 1.0, 211);
    in.mask.kv_len = {700, 333};
    check_against_reference(in, fast);
  }
  SECTION("70 rows, 3 query heads per KV head (groups of 32 rows straddle heads and row blocks), causal") {
    AttentionInputs in = make_inputs(1, 3, 1, 70, 75, 16, 2.0, 1.0, 212);
    in.mask.causal = true;
    check_against_reference(in, fast);
  }
}

TEST_CASE("exp_dd_n gives exp_dd's bits", "[golden]") {
  boost::random::mt19937_64 eng(9);
  boost::random::uniform_real_distribution<double> u(kExpDDMin, 0.5), tiny(-1e-17, 1e-17);
  const double c = std::log(2.0) / 1024;
  std::vector<double> hi, lo;
  for (int it = 0; it < 5000; ++it) {
    double x = u(eng);
    if (it % 3 == 0) x = (std::floor(x / c) + 0.5) * c;  // t·1024/ln2 at (or next to) a half-integer: ties
    if (it % 5 == 0) x /= 1000;
    const DD t = two_sum(x, tiny(eng) * std::abs(x));
    hi.push_back(t.hi);
    lo.push_back(t.lo);
  }
  std::vector<double> ehi(hi.size()), elo(hi.size());
  exp_dd_n(hi.data(), lo.data(), ehi.data(), elo.data(), hi.size());
  for (std::size_t i = 0; i < hi.size(); ++i) {
    const DD e = exp_dd(DD{hi[i], lo[i]});
    INFO("t = " << hi[i] << " + " << lo[i]);
    REQUIRE(std::bit_cast<std::uint64_t>(e.hi) == std::bit_cast<std::uint64_t>(ehi[i]));
    REQUIRE(std::bit_cast<std::uint64_t>(e.lo) == std::bit_cast<std::uint64_t>(elo[i]));
  }
}

TEST_CASE("golden does not depend on the thread count", "[golden]") {
  AttentionInputs in = make_inputs(1, 3, 3, 70, 50, 32, 0.5, 1.0, 31);
  in.mask.causal = true;
  GoldenOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const Golden a = golden_attention(in, one), b = golden_attention(in, two);
  CHECK(a.o.data == b.o.data);
  CHECK(a.lse == b.lse);
  CHECK(a.guaranteed_bits == b.guaranteed_bits);
}

TEST_CASE("golden rejects bad inputs with clear errors", "[golden]") {
  AttentionInputs in = make_inputs(1, 2, 1, 3, 3, 4, 0.0, 1.0, 41);
  in.q.data[5] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(golden_attention(in), Catch::Contains("non-finite") && Catch::Contains("Q"));
  in.allow_nonfinite = true;  // then defined (test_golden_nonfinite.cpp): the NaN in row 1 of head 0
  const Golden g = golden_attention(in);
  for (std::size_t d = 0; d < 4; ++d) CHECK(std::isnan(g.o.data[4 + d]));
  CHECK_FALSE(std::isnan(g.o.data[0]));
  AttentionInputs ok = make_inputs(1, 2, 1, 3, 3, 4, 0.0, 1.0, 42);
  GoldenOptions low;
  low.precision_bits = 64;
  CHECK_THROWS_WITH(golden_attention(ok, low), Catch::Contains("precision_bits"));
}

TEST_CASE("golden falls back to MPFR where doubles would overflow and still matches", "[golden]") {
  // fp64 inputs near 2^460: q·k ~ 2^926 is beyond the fast path's safe range; a tiny scale brings the
  // scaled scores back to ~1e2.
  AttentionInputs in = make_inputs(1, 1, 1, 3, 6, 4, 0.75, 0.25, 51, "fp64");
  for (Tensor* t : {&in.q, &in.k})
    for (double& x : t->data) x = std::ldexp(x, 460);
  in.scale = 0x1p-915;
  const Golden g = golden_attention(in);
  CHECK(g.used_mpfr);
  check_against_reference(in, GoldenOptions{});
}

// ---- a second, MPFR-free reference: Boost.Multiprecision cpp_bin_float ----
#include <boost/multiprecision/cpp_bin_float.hpp>

TEST_CASE("golden matches a Boost cpp_bin_float evaluation on hybrid inputs with outliers", "[golden]") {
  using Big = boost::multiprecision::number<boost::multiprecision::cpp_bin_float<160, boost::multiprecision::digit_base_2>>;
  // Hybrid-like inputs: N(0,1)-ish values plus a few large outliers, so scores span a wide range.
  AttentionInputs in = make_inputs(1, 2, 2, 4, 24, 32, 0.0, 1.0, 61);
  in.k.data[5] = 96.0;
  in.k.data[40] = -120.0;
  in.q.data[7] = 80.0;
  in.mask.causal = true;
  const Golden g = golden_attention(in);
  CHECK(g.guaranteed_bits >= 60);
  const std::size_t D = 32, S = 24, Sq = 4;
  const Big scale = 1 / boost::multiprecision::sqrt(Big(32));
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < Sq; ++i) {
      const std::size_t end = i + 1 + S - Sq;
      std::vector<Big> s(end);
      Big m = -1e300;
      for (std::size_t j = 0; j < end; ++j) {
        Big acc = 0;
        for (std::size_t x = 0; x < D; ++x) acc += Big(in.q.at(0, h, i, x)) * Big(in.k.at(0, h, j, x));
        s[j] = acc * scale;
        if (s[j] > m) m = s[j];
      }
      Big l = 0;
      for (auto& v : s) l += (v = boost::multiprecision::exp(v - m));
      const double lse = static_cast<double>(m + boost::multiprecision::log(l));
      CHECK(std::abs(g.lse[h * Sq + i] - lse) <=
            std::ldexp(1 + std::abs(lse), -g.guaranteed_bits) + half_ulp(g.lse[h * Sq + i]) + half_ulp(lse));
      for (std::size_t x = 0; x < D; ++x) {
        Big num = 0, mag = 0;
        for (std::size_t j = 0; j < end; ++j) {
          num += s[j] * in.v.at(0, h, j, x);
          mag += s[j] * std::abs(in.v.at(0, h, j, x));
        }
        const double o = static_cast<double>(num / l), yard = static_cast<double>(mag / l);
        INFO("head " << h << " row " << i << " d " << x << " golden " << g.o.at(0, h, i, x) << " boost " << o);
        // The claim plus the two doubles' roundings (Boost's own error at 160 bits is far below).
        REQUIRE(std::abs(g.o.at(0, h, i, x) - o) <=
                std::ldexp(yard, -g.guaranteed_bits) + half_ulp(g.o.at(0, h, i, x)) + half_ulp(o));
      }
    }
}

TEST_CASE("golden vs plain MPFR on larger random cases", "[golden][long]") {
  for (std::uint64_t seed = 100; seed < 104; ++seed) {
    AttentionInputs in = make_inputs(1, 2, 1, 40, 300, 64, seed % 2 ? 20.0 : 0.0, seed % 2 ? 0.5 : 15.0, seed);
    in.mask.causal = seed >= 102;
    check_against_reference(in, GoldenOptions{});
  }
}

namespace {

// The largest e with x a multiple of 2^e (x finite, nonzero), by bisection on exact remainders.
int lowest_bit_exponent(double x) {
  int lo = -1074, hi = 1024;  // x is a multiple of 2^lo, not of 2^hi
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (std::fmod(x, std::ldexp(1.0, mid)) == 0 ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

TEST_CASE("KeyInfo: each key's grid exponent, grid, norm and max |k|, 8 elements at a time and by tiles",
          "[golden]") {
  // Keys of mixed magnitudes (zeros of both signs, subnormals, powers of two, exponents from -300 to 300,
  // all-zero keys), rows of 13 and 16 elements (a vector part and a rest), built at once and in tiles of 256
  // keys, against the definitions: e the least lowest-bit exponent of the nonzero elements, grid = norm·2^-e,
  // norm as row_norm; max |k| over all.
  boost::random::mt19937_64 eng(7);
  const std::size_t skv = 600;
  for (std::size_t d : {13, 16}) {
    std::vector<double> K(skv * d);
    for (double& x : K) {
      const double sign = eng() % 2 ? -1.0 : 1.0;
      switch (eng() % 5) {
        case 0: x = sign * 0.0; break;
        case 1: x = sign * std::ldexp(static_cast<double>(eng() % 5000 + 1), -1074); break;
        case 2: x = sign * std::ldexp(1.0, static_cast<int>(eng() % 200) - 100); break;
        case 3: x = sign * std::ldexp(static_cast<double>(eng() >> 11), static_cast<int>(eng() % 600) - 353); break;
        default: x = sign * static_cast<double>(eng() % 2048) / 1024; break;
      }
    }
    for (std::size_t j : {5, 300}) std::fill_n(K.begin() + j * d, d, 0.0);
    const exact_scores::KeyInfo whole(K.data(), skv, d);
    exact_scores::KeyInfo tiles(skv);
    for (std::size_t j0 = 0; j0 < skv; j0 += 256) tiles.add(K.data() + j0 * d, j0, std::min<std::size_t>(256, skv - j0), d);
    double mx = 0;
    std::size_t right = 0, same = 0;
    for (std::size_t j = 0; j < skv; ++j) {
      const double* k = K.data() + j * d;
      int e = std::numeric_limits<int>::max();
      for (std::size_t x = 0; x < d; ++x) {
        mx = std::max(mx, std::abs(k[x]));
        if (k[x] != 0) e = std::min(e, lowest_bit_exponent(k[x]));
      }
      const double norm = row_norm(k, d);
      const bool zero = e == std::numeric_limits<int>::max();
      right += whole.e[j] == (zero ? 0 : e) && whole.norm[j] == norm && whole.grid[j] == (zero ? 0.0 : std::ldexp(norm, -e));
      same += tiles.e[j] == whole.e[j] && std::bit_cast<std::uint64_t>(tiles.norm[j]) == std::bit_cast<std::uint64_t>(whole.norm[j]) &&
              std::bit_cast<std::uint64_t>(tiles.grid[j]) == std::bit_cast<std::uint64_t>(whole.grid[j]);
    }
    INFO("d = " << d);
    CHECK(right == skv);
    CHECK(same == skv);
    CHECK(whole.max_abs == mx);
    CHECK(tiles.max_abs == mx);
  }
  // Non-finite elements (score statistics of inputs with NaN/inf): the element-by-element rule, and max |k|
  // is inf (a NaN never replaces it).
  std::vector<double> k = {1.5, std::numeric_limits<double>::quiet_NaN(), 0.25, -std::numeric_limits<double>::infinity(),
                           3.0, 0.0, 0.5, 2.0, 0.75};
  int e = std::numeric_limits<int>::max();
  for (double x : k)
    if (x != 0) e = std::min(e, exact_scores::lsb_exponent(x));
  const exact_scores::KeyInfo nonfinite(k.data(), 1, k.size());
  CHECK(nonfinite.e[0] == e);
  CHECK(nonfinite.max_abs == std::numeric_limits<double>::infinity());
}

TEST_CASE("golden_parts: each part its rows of golden_attention of its group's union, one fast-path decision per "
          "group", "[golden]") {
  // A union of two KV heads whose position bias (2^900 on KV head 0's rows) fails the fast path's range test:
  // golden_attention computes all of it with MPFR. Its parts are the two KV heads (group 0); KV head 1's part
  // passes the test alone and is computed fast first, then redone with MPFR. A copy of that part in group 1
  // keeps the fast path. At 1000 bits, so that MPFR rows guarantee hundreds of bits (the fast path ~75).
  const std::size_t G = 2, Sq = 3, Skv = 40, D = 8;
  AttentionInputs u;
  u.q = random_tensor({1, 2 * G, Sq, D}, format_by_name("fp16"), 0, 1, 1);
  u.k = random_tensor({1, 2, Skv, D}, format_by_name("fp16"), 0, 1, 2);
  u.v = random_tensor({1, 2, Skv, D}, format_by_name("fp16"), 0, 1, 3);
  u.pse = Tensor({1, 2 * G, Sq, Skv}, format_by_name("fp64"));
  for (std::size_t h = 0; h < G; ++h) std::fill_n(u.pse.head(0, h), Sq * Skv, 0x1p900);
  GoldenOptions opt;
  opt.precision_bits = 1000;
  const Golden ref = golden_attention(u, opt);
  REQUIRE(ref.used_mpfr);
  const std::size_t head_of[] = {0, 1, 1};  // parts: KV head 0 and 1 (group 0), KV head 1 again (group 1)
  auto fill = [&](std::size_t p, AttentionInputs& in) {
    const std::size_t hk = head_of[p];
    in.q = Tensor({1, G, Sq, D}, u.q.format);
    in.pse = Tensor({1, G, Sq, Skv}, u.pse.format);
    for (std::size_t h = 0; h < G; ++h) {
      std::copy_n(u.q.head(0, hk * G + h), Sq * D, in.q.head(0, h));
      std::copy_n(u.pse.head(0, hk * G + h), Sq * Skv, in.pse.head(0, h));
    }
    in.k.shape = in.v.shape = Shape{1, 1, Skv, D};
  };
  const GoldenRows rows = [&](std::size_t p, bool values, std::size_t j0, std::size_t n, double* out) {
    std::copy_n((values ? u.v : u.k).head(0, head_of[p]) + j0 * D, n * D, out);
  };
  for (int threads : {1, 2, 3}) {
    opt.threads = threads;
    const std::vector<Golden> parts = golden_parts(3, {0, 0, 1}, fill, rows, 1.0, opt);
    INFO(threads << " threads");
    for (std::size_t p = 0; p < 2; ++p)
      for (std::size_t h = 0; h < G; ++h) {
        CHECK(std::memcmp(parts[p].o.head(0, h), ref.o.head(0, head_of[p] * G + h), Sq * D * sizeof(double)) == 0);
        CHECK(std::equal(parts[p].lse.begin() + h * Sq, parts[p].lse.begin() + (h + 1) * Sq,
                         ref.lse.begin() + (head_of[p] * G + h) * Sq));
      }
    CHECK(std::min(parts[0].guaranteed_bits, parts[1].guaranteed_bits) == ref.guaranteed_bits);
    CHECK(std::max(parts[0].error_bound, parts[1].error_bound) == ref.error_bound);
    CHECK(parts[1].used_mpfr);
    CHECK(parts[1].guaranteed_bits > 200);
    CHECK(!parts[2].used_mpfr);
    CHECK(parts[2].guaranteed_bits < 200);
  }
}
