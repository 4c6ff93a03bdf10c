// Reductions under an allocation's Reduction (accumulator format, order, width) against an independent
// scalar reference: every addition is MPFR's exact sum rounded once to the accumulator format (IEEE 754
// gradual underflow and overflow to infinity), the orders written out here from their definitions. Also: fp64 accumulation rounded once is
// the exact sum rounded once; the _strict presets are today's strict model (every partial sum stored in the
// stage format, starting from 0); non-default orders in fp64 still equal the MPFR golden.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <mpfr.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/exact/golden.hpp"
#include "support/mpfr_round.hpp"
#include "support/bits.hpp"

using namespace pasa;

namespace {

// Exact sums and quotients in MPFR, each rounded once (RNE) to a format.
class Mpfr {
 public:
  Mpfr() {
    mpfr_init2(a_, 4200);  // holds any sum or quotient of doubles needed here exactly (or to 4200 bits)
    mpfr_init2(b_, 4200);
  }
  ~Mpfr() {
    mpfr_clear(a_);
    mpfr_clear(b_);
  }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;

  double add(double x, double y, const Format& f) {
    mpfr_set_d(a_, x, MPFR_RNDN);
    mpfr_set_d(b_, y, MPFR_RNDN);
    mpfr_add(a_, a_, b_, MPFR_RNDN);  // exact: 4200 bits cover two doubles' exponent range
    return to(f);
  }
  double div(double x, double n, const Format& f) {
    mpfr_set_d(a_, x, MPFR_RNDN);
    mpfr_div_d(a_, a_, n, MPFR_RNDN);  // within 2^-4200 relative: the tests' n make ties impossible
    return to(f);
  }
  double round(double x, const Format& f) {
    mpfr_set_d(a_, x, MPFR_RNDN);
    return to(f);
  }
  // The exact sum of a row (4200 bits hold every sum of fp16/fp32 values used here).
  double exact_sum_rounded(const std::vector<double>& x, const Format& f) {
    mpfr_set_zero(a_, 1);
    for (double v : x) {
      mpfr_set_d(b_, v, MPFR_RNDN);
      mpfr_add(a_, a_, b_, MPFR_RNDN);
    }
    return to(f);
  }

 private:
  // The exact value held in a_ rounded once to f: rounded to odd at 53 bits (toward zero, then the last bit
  // set if inexact), which pasa::round (proven against MPFR in test_round_mpfr) then rounds to nearest in f
  // without a double-rounding error, since f has at most 51 bits (or is fp64: MPFR rounds directly).
  double to(const Format& f) {
    if (mpfr_nan_p(a_)) return std::numeric_limits<double>::quiet_NaN();
    if (f.p >= 53) return mpfr_get_d(a_, MPFR_RNDN);
    double d = mpfr_get_d(a_, MPFR_RNDZ);
    if (mpfr_cmp_d(a_, d) != 0) d = std::bit_cast<double>(std::bit_cast<std::uint64_t>(d) | 1u);
    return pasa::round(d, f);
  }
  mpfr_t a_, b_;
};

// The orders from their definitions (the shared reduction spec), one addition at a time. A partial sum is
// held in acc: the sequential sum and each lane of the blocked order start at −0 (the exact identity, signed
// zeros included) and every term enters by an addition rounded to acc, so a first term wider than acc is
// rounded as it enters; the pairwise order adds two terms in one rounded addition.
double ref_sequential(Mpfr& m, const std::vector<double>& x, const Format& acc) {
  double s = -0.0;
  for (std::size_t i = 0; i < x.size(); ++i) s = m.add(s, x[i], acc);
  return s;
}

double ref_pairwise(Mpfr& m, const std::vector<double>& x, const Format& acc, std::size_t a, std::size_t b) {
  if (b - a == 1) return x[a];
  const std::size_t h = (b - a) / 2;
  return m.add(ref_pairwise(m, x, acc, a, a + h), ref_pairwise(m, x, acc, a + h, b), acc);
}

double ref_blocked(Mpfr& m, const std::vector<double>& x, const Format& acc, std::size_t k) {
  std::vector<double> p(k, 0.0);
  for (std::size_t r = 0; r < k && r < x.size(); ++r) {
    p[r] = -0.0;
    for (std::size_t i = r; i < x.size(); i += k) p[r] = m.add(p[r], x[i], acc);
  }
  for (std::size_t off = k / 2; off >= 1; off /= 2)
    for (std::size_t r = 0; r < off; ++r) p[r] = m.add(p[r], p[r + off], acc);
  return p[0];
}

// The whole reduction of a stage: accumulate, (mean) divide in acc, round once to the stage format.
double ref_stage(Mpfr& m, const std::vector<double>& x, const StageSpec& s, bool mean) {
  const Reduction& red = s.reduce;
  const Format acc = red.acc.value_or(s.format);
  double v = red.order == ReduceOrder::sequential ? ref_sequential(m, x, acc)
             : red.order == ReduceOrder::pairwise ? ref_pairwise(m, x, acc, 0, x.size())
                                                  : ref_blocked(m, x, acc, static_cast<std::size_t>(red.width));
  if (mean) v = m.div(v, static_cast<double>(x.size()), acc);
  return m.round(v, s.format);
}

// A Run whose sum and mean stages are `s` (tiny inputs: only the reductions are used).
struct Harness {
  AttentionInputs in;
  AlgorithmSpec spec;
  Harness(const StageSpec& s) {
    const Format h = format_by_name("fp16");
    in.q = Tensor({1, 1, 1, 1}, h);
    in.k = Tensor({1, 1, 1, 1}, h);
    in.v = Tensor({1, 1, 1, 1}, h);
    spec.name = "fa2";
    spec.alloc = allocation_preset("fp64");
    spec.alloc.spec(Stage::sum) = s;
    spec.alloc.spec(Stage::mean) = s;
  }
  // Each row reduced by the engine (rows at once, row-major with ld = n).
  std::vector<double> run(const std::vector<std::vector<double>>& rows, detail::ReduceOp op) const {
    const detail::Run r(in, spec);
    const std::size_t n = rows[0].size();
    std::vector<double> X;
    for (const auto& row : rows) X.insert(X.end(), row.begin(), row.end());
    std::vector<double> out(rows.size());
    RandomBits rng(1);
    detail::reduce_rows(r, op == detail::ReduceOp::sum ? Stage::sum : Stage::mean, op, X.data(), rows.size(), n, n,
                        out.data(), &rng);
    return out;
  }
};

StageSpec stage_spec(const char* fmt, const char* acc, ReduceOrder order, int width) {
  StageSpec s;
  s.format = format_by_name(fmt);
  s.reduce = Reduction{format_by_name(acc), order, width};
  return s;
}

std::vector<double> random_row(boost::random::mt19937_64& eng, std::size_t n, const Format& f, double lo, double hi) {
  boost::random::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> x(n);
  for (double& v : x) v = round(u(eng), f);
  return x;
}

// Rows of n values: random (P-like in [0, 1], signed, wide range), then adversarial ones.
std::vector<std::vector<double>> test_rows(std::size_t n, std::uint64_t seed) {
  boost::random::mt19937_64 eng(seed);
  const Format h = format_by_name("fp16");
  std::vector<std::vector<double>> rows;
  for (int i = 0; i < 6; ++i) rows.push_back(random_row(eng, n, h, 0.0, 1.0));
  for (int i = 0; i < 6; ++i) rows.push_back(random_row(eng, n, h, -3.0, 3.0));
  boost::random::normal_distribution<double> g(0.0, 6.0);
  for (int i = 0; i < 4; ++i) {  // magnitudes spanning 2^-18 .. 2^15
    std::vector<double> x(n);
    for (double& v : x) v = round(std::ldexp(g(eng) > 0 ? 1.0 : -1.0, static_cast<int>(std::fabs(g(eng))) % 34 - 18) * (1 + std::fabs(g(eng)) / 8), h);
    rows.push_back(x);
  }
  std::vector<double> cancel(n);  // cancellation: big terms of both signs, then small ones
  for (std::size_t i = 0; i < n; ++i) cancel[i] = i % 3 == 0 ? 4096.0 : (i % 3 == 1 ? -4096.0 : 0.0009765625 * (1 + i % 7));
  rows.push_back(cancel);
  std::vector<double> big(n, 60000.0);  // overflows an fp16 accumulator, not an fp32 one
  for (std::size_t i = 1; i < n; i += 2) big[i] = i % 4 == 1 ? 60000.0 : -65504.0;
  rows.push_back(big);
  std::vector<double> tiny(n);  // subnormal fp16 terms: the accumulator's gradual underflow
  for (std::size_t i = 0; i < n; ++i) tiny[i] = std::ldexp(static_cast<double>(1 + i % 5), -24) * (i % 2 ? -1 : 1);
  rows.push_back(tiny);
  std::vector<double> zeros(n, -0.0);  // signed zeros
  rows.push_back(zeros);
  std::vector<double> withinf = rows[0];  // an infinite term
  withinf[n / 2] = std::numeric_limits<double>::infinity();
  rows.push_back(withinf);
  return rows;
}

}  // namespace

TEST_CASE("every reduction order equals its MPFR reference", "[reduction]") {
  Mpfr m;
  struct Case {
    const char* fmt;
    const char* acc;
  };
  const Case cases[] = {{"fp16", "fp16"}, {"fp16", "fp32"}, {"bf16", "fp32"}, {"fp16", "bf16"},
                        {"fp32", "fp16"}, {"fp16", "fp64"}, {"bf16", "bf16"}, {"fp32", "fp32"}};
  const std::size_t lengths[] = {1, 2, 3, 5, 31, 32, 33, 100, 128};
  struct OrderW {
    ReduceOrder order;
    int width;
  };
  const OrderW orders[] = {{ReduceOrder::sequential, 32}, {ReduceOrder::pairwise, 32}, {ReduceOrder::blocked, 1},
                           {ReduceOrder::blocked, 4},     {ReduceOrder::blocked, 32}, {ReduceOrder::blocked, 1024}};
  std::uint64_t seed = 1;
  for (const Case& c : cases)
    for (const OrderW& o : orders)
      for (std::size_t n : lengths)
        for (auto op : {detail::ReduceOp::sum, detail::ReduceOp::mean}) {
          const StageSpec s = stage_spec(c.fmt, c.acc, o.order, o.width);
          const Harness h(s);
          const auto rows = test_rows(n, seed++);
          const std::vector<double> got = h.run(rows, op);
          for (std::size_t i = 0; i < rows.size(); ++i) {
            const double want = ref_stage(m, rows[i], s, op == detail::ReduceOp::mean);
            INFO(c.fmt << " acc " << c.acc << " order " << reduce_order_name(o.order) << " width " << o.width
                       << " n " << n << (op == detail::ReduceOp::mean ? " mean" : " sum") << " row " << i
                       << ": engine " << got[i] << " reference " << want);
            CHECK(test::same_bits(got[i], want));
          }
        }
}

namespace {
// The reduction of a stage in a rounding mode, from the spec: every addition MPFR's exact sum (an exact zero
// sum is +0, as the engine's error-free sums give it) rounded once to acc by test::mpfr_round_to in the
// stage's mode; a mean's quotient rounded to odd at 4200 bits first (sticky for any later rounding).
struct ModeRef {
  mpfr_t a, b;
  RoundOptions o;
  ModeRef(RoundOptions opt) : o(opt) { mpfr_inits2(4200, a, b, nullptr); }
  ~ModeRef() { mpfr_clears(a, b, nullptr); }
  double add(double x, double y, const Format& f) {
    if (std::isinf(x) || std::isinf(y) || std::isnan(x) || std::isnan(y)) return pasa::round(x + y, f, o);
    mpfr_set_d(a, x, MPFR_RNDN);
    mpfr_set_d(b, y, MPFR_RNDN);
    mpfr_add(a, a, b, MPFR_RNDZ);
    return test::mpfr_round_to(a, f, o);
  }
  double div(double x, double n, const Format& f) {
    if (!std::isfinite(x)) return pasa::round(x / n, f, o);
    mpfr_set_d(a, x, MPFR_RNDN);
    const int t = mpfr_div_d(a, a, n, MPFR_RNDZ);
    if (t != 0 && mpfr_regular_p(a) && mpfr_min_prec(a) < mpfr_get_prec(a)) {
      if (mpfr_sgn(a) > 0) mpfr_nextabove(a);
      else mpfr_nextbelow(a);
    }
    return test::mpfr_round_to(a, f, o);
  }
  double stage(const std::vector<double>& x, const StageSpec& s, bool mean) {
    const Format acc = s.reduce.acc.value_or(s.format);
    double v = 0;
    if (s.reduce.order == ReduceOrder::sequential) {
      v = -0.0;  // a partial sum is held in acc: every term enters by a rounded addition (see ref_sequential)
      for (std::size_t i = 0; i < x.size(); ++i) v = add(v, x[i], acc);
    } else if (s.reduce.order == ReduceOrder::pairwise) {
      v = pairwise(x, acc, 0, x.size());
    } else {
      const auto k = static_cast<std::size_t>(s.reduce.width);
      std::vector<double> p(k, 0.0);
      for (std::size_t r = 0; r < k && r < x.size(); ++r) {
        p[r] = -0.0;
        for (std::size_t i = r; i < x.size(); i += k) p[r] = add(p[r], x[i], acc);
      }
      for (std::size_t off = k / 2; off >= 1; off /= 2)
        for (std::size_t r = 0; r < off; ++r) p[r] = add(p[r], p[r + off], acc);
      v = p[0];
    }
    if (mean) v = div(v, static_cast<double>(x.size()), acc);
    return pasa::round(v, s.format, o);
  }
  double pairwise(const std::vector<double>& x, const Format& acc, std::size_t lo, std::size_t hi) {
    if (hi - lo == 1) return x[lo];
    const std::size_t h = (hi - lo) / 2;
    return add(pairwise(x, acc, lo, lo + h), pairwise(x, acc, lo + h, hi), acc);
  }
};
}  // namespace

TEST_CASE("every reduction order equals MPFR in every deterministic rounding mode", "[reduction]") {
  // Each addition one rounding of its exact sum in rz, ru, rd, ro too (rounding the double sum again would
  // differ for fp32 accumulators of fp16/fp32 terms of different sizes).
  struct Case {
    const char* fmt;
    const char* acc;
  };
  const Case cases[] = {{"fp16", "fp32"}, {"bf16", "fp32"}, {"fp16", "fp16"}, {"fp32", "fp32"}, {"fp32", "fp64"}};
  const std::size_t lengths[] = {1, 3, 33, 128};
  const std::pair<ReduceOrder, int> orders[] = {
      {ReduceOrder::sequential, 32}, {ReduceOrder::pairwise, 32}, {ReduceOrder::blocked, 4}, {ReduceOrder::blocked, 32}};
  std::uint64_t seed = 500;
  for (RoundMode mode : {RoundMode::toward_zero, RoundMode::toward_pos, RoundMode::toward_neg, RoundMode::odd})
    for (const Case& c : cases)
      for (const auto& [order, width] : orders)
        for (std::size_t n : lengths)
          for (auto op : {detail::ReduceOp::sum, detail::ReduceOp::mean}) {
            StageSpec s = stage_spec(c.fmt, c.acc, order, width);
            s.round.mode = mode;
            ModeRef ref(s.round);
            auto rows = test_rows(n, seed++);
            for (auto& row : rows)  // terms of fp32 width too, so that fp32 accumulators' sums are not doubles
              for (std::size_t i = 0; i < row.size(); i += 3) row[i] = round(row[i] * (1 + 0x1p-20), format_by_name("fp32"));
            std::vector<double> spread(n);  // 1 − 2^-60 + 3·2^-70 ...: sums whose double is a tie or exact
            for (std::size_t i = 0; i < n; ++i) spread[i] = i % 3 == 0 ? 1.0 : (i % 3 == 1 ? -0x1p-60 : 3 * 0x1p-70);
            rows.push_back(spread);
            const std::vector<double> got = Harness(s).run(rows, op);
            for (std::size_t i = 0; i < rows.size(); ++i) {
              const double want = ref.stage(rows[i], s, op == detail::ReduceOp::mean);
              INFO(c.fmt << " acc " << c.acc << " " << round_mode_name(mode) << " order " << reduce_order_name(order)
                         << " width " << width << " n " << n << (op == detail::ReduceOp::mean ? " mean" : " sum")
                         << " row " << i << ": engine " << got[i] << " reference " << want);
              CHECK(test::same_bits(got[i], want));
            }
          }
}

TEST_CASE("the orders differ where they should (the reference is not trivially equal)", "[reduction]") {
  // 1 + 2^-11 · 2048 terms in an fp16 accumulator: sequential stalls at 1 + ... (every 2^-11 added to 1 is a
  // tie, rounded to even), pairwise adds the small terms among themselves first.
  std::vector<double> x(64, std::ldexp(1.0, -11));
  x[0] = 1.0;
  Mpfr m;
  const double seq = ref_sequential(m, x, format_by_name("fp16"));
  const double pair = ref_pairwise(m, x, format_by_name("fp16"), 0, x.size());
  const double blk = ref_blocked(m, x, format_by_name("fp16"), 32);
  CHECK(seq == 1.0);
  CHECK(pair == 1.0 + 63 * std::ldexp(1.0, -11) - std::ldexp(1.0, -11));  // 1 + 62·2^-11 (1 + 63·2^-11 is not fp16)
  CHECK(blk != seq);
  for (auto order : {ReduceOrder::sequential, ReduceOrder::pairwise, ReduceOrder::blocked}) {
    const StageSpec s = stage_spec("fp16", "fp16", order, 32);
    CHECK(Harness(s).run({x}, detail::ReduceOp::sum)[0] == ref_stage(m, x, s, false));
  }
}

TEST_CASE("fp64 accumulation rounded once is the exact sum rounded once", "[reduction]") {
  // fp16 values are multiples of 2^-24 below 2^16, so every partial sum of at most 1280 of them is a multiple
  // of 2^-24 below 2^27: at most 51 significant bits, exact in fp64 whatever the order. The only rounding
  // left is the final one to fp16, which must then equal MPFR's exact sum rounded once.
  Mpfr m;
  boost::random::mt19937_64 eng(7);
  const Format h = format_by_name("fp16");
  for (std::size_t n : {1, 7, 128, 1000, 1280})
    for (auto order : {ReduceOrder::sequential, ReduceOrder::pairwise, ReduceOrder::blocked}) {
      std::vector<std::vector<double>> rows;
      for (int i = 0; i < 8; ++i) rows.push_back(random_row(eng, n, h, 0.0, 1.0));
      for (int i = 0; i < 8; ++i) rows.push_back(random_row(eng, n, h, -1000.0, 1000.0));
      rows.push_back(test_rows(n, 99)[16]);  // cancellation
      rows.push_back(test_rows(n, 99)[18]);  // subnormal terms
      const std::vector<double> got = Harness(stage_spec("fp16", "fp64", order, 32)).run(rows, detail::ReduceOp::sum);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO("n " << n << " order " << reduce_order_name(order) << " row " << i);
        CHECK(test::same_bits(got[i], m.exact_sum_rounded(rows[i], h)));
      }
    }
}

TEST_CASE("the _strict presets are the strict model: every partial sum in the stage format from 0", "[reduction]") {
  // The model the presets had before reductions had an accumulator: s = 0; s = round(s + x) for every x;
  // the mean round(s / n). Written here directly with pasa::round (s + x of two values of one format is
  // exact in double for the formats below, so each step is one rounding). The terms are in the stage format,
  // as in the engines (P in exp, S' in s/scale: the same format as sum and mean in these presets).
  for (const char* base : {"fa_fp16", "pasa_fp16", "fa_bf16", "pasa_bf16", "pasa_fp8"}) {
    const Allocation strict = allocation_preset(std::string(base) + "_strict");
    const Allocation hw = allocation_preset(base);
    for (Stage st : {Stage::sum, Stage::mean}) {
      const StageSpec& s = strict.spec(st);
      INFO(base << " " << stage_name(st));
      CHECK(s.reduce == Reduction{});
      CHECK(hw.spec(st).format == s.format);  // only the accumulator differs
      CHECK(hw.spec(st).reduce.acc == format_by_name("fp32"));
      for (std::size_t n : {1, 64, 128}) {
        auto rows = test_rows(n, 5 + n);
        for (auto& row : rows)
          for (double& x : row) x = round(x, s.format);
        for (auto op : {detail::ReduceOp::sum, detail::ReduceOp::mean}) {
          const std::vector<double> got = Harness(s).run(rows, op);
          for (std::size_t i = 0; i < rows.size(); ++i) {
            double want = 0;
            for (double x : rows[i]) want = round(want + x, s.format);
            if (op == detail::ReduceOp::mean) want = round(want / static_cast<double>(n), s.format);
            INFO("n " << n << " row " << i << " engine " << got[i] << " strict " << want);
            // −0 terms: starting from +0 gives +0 where the spec's s = x[0] keeps −0; values equal.
            CHECK((got[i] == want || (std::isnan(got[i]) && std::isnan(want))));
            if (i == 0) CHECK(test::same_bits(got[i], want));
          }
        }
      }
    }
    // Every other stage is the preset's.
    for (std::size_t i = 0; i < kStageCount; ++i)
      if (static_cast<Stage>(i) != Stage::sum && static_cast<Stage>(i) != Stage::mean) CHECK(strict.stages[i] == hw.stages[i]);
  }
}

TEST_CASE("fp64 allocations with any reduction order still equal the MPFR golden", "[reduction]") {
  AttentionInputs in;
  const Format h = format_by_name("fp16");
  boost::random::mt19937_64 eng(3);
  auto fill = [&](Shape sh) {
    Tensor t(sh, h);
    for (double& x : t.data) x = round(boost::random::uniform_real_distribution<double>(-2.0, 2.0)(eng), h);
    return t;
  };
  in.q = fill({1, 2, 40, 16});
  in.k = fill({1, 2, 72, 16});
  in.v = fill({1, 2, 72, 16});
  const Golden gold = golden_attention(in);
  for (auto order : {ReduceOrder::pairwise, ReduceOrder::blocked})
    for (const auto& name : algorithm_names()) {
      AlgorithmSpec spec;
      spec.name = name;
      spec.alloc = allocation_preset("fp64");
      for (Stage st : {Stage::sum, Stage::mean}) spec.alloc.spec(st).reduce = Reduction{format_by_name("fp64"), order, 8};
      spec.s1 = 16;
      spec.s2 = 24;
      const AttentionOutput out = run_attention(in, spec, 1);
      long double num = 0, den = 0;  // Eq. 19
      for (std::size_t i = 0; i < out.o.data.size(); ++i) {
        const long double d = static_cast<long double>(out.o.data[i]) - gold.o.data[i];
        num += d * d;
        den += static_cast<long double>(gold.o.data[i]) * gold.o.data[i];
      }
      const double e = std::sqrt(static_cast<double>(num / den));
      INFO(name << " " << reduce_order_name(order) << " rmse " << e);
      CHECK(e <= 1e-13);
    }
}

TEST_CASE("the exp stage's via fp32 is expf rounded to the stage; exact is e^x rounded once", "[reduction]") {
  // Every fp16 argument in [-20, 0] (the range of x − m in softmax) through an fp32 exp stage: `exact` must
  // equal MPFR's e^x rounded once to fp32, `fp32` the C library's expf; they differ on a few arguments
  // (expf is not correctly rounded everywhere), which shows that the option reaches the engine.
  std::vector<double> args;
  for (int m = 0; m < 0x7C00; ++m) {  // fp16 magnitudes from their bits (exponent field, 10-bit fraction)
    const int e = m >> 10, f = m & 0x3FF;
    const double v = e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25);
    if (v <= 20) args.push_back(-v);
  }
  REQUIRE(args.size() > 10000);
  mpfr_t e;
  mpfr_init2(e, 200);
  int differ = 0;
  for (ExpVia via : {ExpVia::exact, ExpVia::fp32}) {
    StageSpec s(format_by_name("fp32"));
    Harness hn(s);
    hn.spec.alloc.spec(Stage::exp) = s;
    hn.spec.alloc.spec(Stage::exp).via = via;
    const detail::Run run(hn.in, hn.spec);
    std::vector<double> x = args;
    detail::exp_to_stage(run, x.data(), x.size(), nullptr);
    for (std::size_t i = 0; i < x.size(); ++i) {
      mpfr_set_d(e, args[i], MPFR_RNDN);
      mpfr_exp(e, e, MPFR_RNDN);
      const double correct = static_cast<double>(mpfr_get_flt(e, MPFR_RNDN));  // no subnormals in this range
      if (via == ExpVia::exact) {
        INFO("exact e^" << args[i]);
        CHECK(x[i] == correct);
      } else {
        INFO("expf " << args[i]);
        CHECK(x[i] == static_cast<double>(std::exp(static_cast<float>(args[i]))));
        differ += x[i] != correct;
      }
    }
  }
  mpfr_clear(e);
  CHECK(differ > 0);
}

TEST_CASE("Run's one-rounding helpers use the low part of the exact result", "[reduction]") {
  // hi alone would round differently: hi is an fp32 midpoint (RNE, the fused float path) or an fp32 value
  // (RU, the sticky-fold span path), and lo decides. Expected values by hand, and by round_sum (tested against
  // MPFR in tests/numeric/test_round_sum.cpp).
  const Format fp32 = format_by_name("fp32");
  const DD above_mid{1 + 0x1p-24, 0x1p-80}, above_one{1.0, 0x1p-80}, below_one{1.0, -0x1p-80};
  SECTION("fused (fp32 RNE): 1 + 2^-24 + 2^-80 rounds up to 1 + 2^-23") {
    Harness hn(StageSpec{fp32, {}});
    const detail::Run run(hn.in, hn.spec);
    double got = 0;
    run.fused(Stage::sum, [&](auto rnd) { got = rnd(above_mid); });
    CHECK(got == 1 + 0x1p-23);
    CHECK(got == round_sum(above_mid.hi, above_mid.lo, fp32));
  }
  SECTION("round_each (fp32 RU and RD): 1 ± 2^-80 leaves 1") {
    for (RoundMode m : {RoundMode::toward_pos, RoundMode::toward_neg, RoundMode::toward_zero}) {
      Harness hn(StageSpec{fp32, RoundOptions{m}});
      const detail::Run run(hn.in, hn.spec);
      double x[2] = {0, 0};
      run.round_each(Stage::sum, x, 2, nullptr, [&](std::size_t i) { return i == 0 ? above_one : below_one; });
      INFO(round_mode_name(m));
      CHECK(x[0] == round_sum(above_one.hi, above_one.lo, fp32, RoundOptions{m}));
      CHECK(x[1] == round_sum(below_one.hi, below_one.lo, fp32, RoundOptions{m}));
      CHECK(x[0] == (m == RoundMode::toward_pos ? 1 + 0x1p-23 : 1.0));
      CHECK(x[1] == (m == RoundMode::toward_pos ? 1.0 : 1 - 0x1p-24));
    }
  }
}
