// The golden of inputs holding NaN/inf (allow_nonfinite), against its definition (golden.hpp,
// golden_nonfinite.cpp): each case's expected value comes from an independent route (the ordinary golden
// of an equivalent finite problem, or the IEEE rule by hand), and the metrics of such outputs; and a
// golden exactly zero (kv_len 0) reported as exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// (1, 1, S, D) inputs with distinct finite values.
AttentionInputs small(std::size_t S = 5, std::size_t D = 3) {
  const Format f = format_by_name("fp64");
  AttentionInputs in;
  in.q = Tensor({1, 1, S, D}, f);
  in.k = Tensor({1, 1, S, D}, f);
  in.v = Tensor({1, 1, S, D}, f);
  for (std::size_t e = 0; e < S * D; ++e) {
    in.q.data[e] = 0.25 + 0.125 * static_cast<double>(e % 7);
    in.k.data[e] = 0.5 - 0.0625 * static_cast<double>(e % 5);
    in.v.data[e] = 1.0 + static_cast<double>(e);
  }
  in.allow_nonfinite = true;
  return in;
}

bool same(double a, double b) { return std::isnan(a) ? std::isnan(b) : a == b; }

}  // namespace

TEST_CASE("golden, non-finite inputs: refused unless allowed", "[golden]") {
  AttentionInputs in = small();
  in.allow_nonfinite = false;
  in.v.data[4] = kNaN;
  CHECK_THROWS_WITH(golden_attention(in), Catch::Contains("V has a non-finite element nan") &&
                                              Catch::Contains("--allow-nonfinite"));
}

TEST_CASE("golden, non-finite inputs: V's inf and NaN reach their own column only", "[golden]") {
  AttentionInputs in = small();
  AttentionInputs finite = in;
  finite.allow_nonfinite = false;
  const Golden ref = golden_attention(finite);
  in.v.data[2 * 3 + 0] = kInf;  // key 2, column 0: every row gives it weight > 0
  in.v.data[4 * 3 + 1] = kNaN;  // key 4, column 1
  const Golden g = golden_attention(in);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(g.o.data[i * 3 + 0] == kInf);
    CHECK(std::isnan(g.o.data[i * 3 + 1]));
    CHECK(g.o.data[i * 3 + 2] == ref.o.data[i * 3 + 2]);  // the finite column is the ordinary golden's
    CHECK(g.lse[i] == ref.lse[i]);                          // V does not enter the lse
  }
  in.v.data[3 * 3 + 0] = -kInf;  // +inf and -inf in one column: inf - inf
  CHECK(std::isnan(golden_attention(in).o.data[0]));
}

TEST_CASE("golden, non-finite inputs: a -inf score is a key of weight exp(-inf) = 0", "[golden]") {
  AttentionInputs in = small();
  in.k.data[3 * 3 + 1] = -kInf;  // key 3: q·k = -inf (q > 0 everywhere)
  // Independent route: the ordinary golden with key 3 hidden by the boolean mask.
  AttentionInputs masked = small();
  masked.allow_nonfinite = false;
  masked.mask.keep.assign(5 * 5, 1);
  for (std::size_t i = 0; i < 5; ++i) masked.mask.keep[i * 5 + 3] = 0;
  const Golden ref = golden_attention(masked), g = golden_attention(in);
  for (std::size_t e = 0; e < 15; ++e) CHECK(g.o.data[e] == ref.o.data[e]);
  for (std::size_t i = 0; i < 5; ++i) CHECK(g.lse[i] == ref.lse[i]);
  // That key's V then meets 0·v: finite v adds 0, inf v gives NaN.
  in.v.data[3 * 3 + 2] = kInf;
  const Golden g2 = golden_attention(in);
  CHECK(std::isnan(g2.o.data[2]));
  CHECK(g2.o.data[0] == ref.o.data[0]);
}

TEST_CASE("golden, non-finite inputs: NaN and +inf scores make the row NaN; masked keys take no part", "[golden]") {
  AttentionInputs in = small();
  in.q.data[2 * 3 + 0] = kInf;   // row 2: q·k_j = +inf for every key (k > 0 in column 0): inf - inf in the max shift
  in.k.data[1 * 3 + 2] = kNaN;   // key 1: every score NaN...
  in.mask.kv_len = {1};          // ...but only key 0 is visible
  const Golden g = golden_attention(in);
  for (std::size_t i = 0; i < 5; ++i) {
    const bool nan_row = i == 2;
    for (std::size_t d = 0; d < 3; ++d) CHECK(std::isnan(g.o.data[i * 3 + d]) == nan_row);
    CHECK(std::isnan(g.lse[i]) == nan_row);
    if (!nan_row) CHECK(g.o.data[i * 3 + 1] == in.v.data[1]);  // one visible key: O = its V row exactly
  }
  in.mask.kv_len.clear();  // now key 1 is visible: every row NaN
  const Golden all = golden_attention(in);
  for (double x : all.o.data) CHECK(std::isnan(x));
  // 0·inf in a score: NaN.
  AttentionInputs z = small();
  z.q.data[0] = 0;
  z.k.data[0] = kInf;
  const Golden gz = golden_attention(z);
  CHECK(std::isnan(gz.o.data[0]));
  CHECK(std::isnan(gz.o.data[3]));  // row 1 has q[0] != 0: a +inf score, so NaN too
}

TEST_CASE("metrics: golden NaN/inf elements matched exactly are exact; mismatches count as NaN", "[metrics]") {
  const Format f = format_by_name("fp64");
  Tensor g({1, 1, 2, 2}, f), o({1, 1, 2, 2}, f);
  g.data = {1.0, kInf, kNaN, 2.0};
  o.data = {1.0, kInf, kNaN, 2.0};
  Metrics m = compare_outputs(o, g);
  CHECK(m.rmse == 0);
  CHECK(m.nan_count == 0);
  CHECK(m.inf_count == 0);
  CHECK(m.cosine == Approx(1.0));
  o.data = {1.0, -kInf, 3.0, 2.0};
  m = compare_outputs(o, g);
  CHECK(m.nan_count == 2);
  CHECK(std::isnan(m.rmse));
  CHECK(m.rmse_finite == 0);  // the finite pairs are exact
}

TEST_CASE("metrics: a golden exactly zero is an exact answer, not an overflow", "[metrics]") {
  const Format f = format_by_name("fp64");
  Tensor g({1, 1, 2, 2}, f), o({1, 1, 2, 2}, f);
  Metrics m = compare_outputs(o, g, g);
  CHECK(m.rmse == 0);
  CHECK(m.rmse_finite == 0);
  CHECK(m.cosine == 1);
  CHECK(m.nan_pct == 0);
  CHECK(m.rmse_uniform_baseline == 0);
  CHECK(m.skill == 1);
  o.data[3] = 1e-100;  // anything nonzero against zero: an unbounded relative error, and orthogonal
  m = compare_outputs(o, g);
  CHECK(m.rmse == kInf);
  CHECK(m.cosine == 0);
  // The kv_len = 0 problem: every row fully masked, golden and outputs 0.
  AttentionInputs in = small();
  in.allow_nonfinite = false;
  in.mask.kv_len = {0};
  const Golden zero = golden_attention(in);
  for (double x : zero.o.data) CHECK(x == 0);
  CHECK(compare_outputs(zero.o, zero.o).rmse == 0);
  CHECK(same(compare_outputs(zero.o, zero.o).cosine, 1.0));
}
