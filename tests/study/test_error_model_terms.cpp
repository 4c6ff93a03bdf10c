// The error model's terms against docs/error-model.md computed by hand: the p term when P's exp
// and p stages have the same precision (l then comes from the rounded P: ΔO = Σ_k ρ_k·(v_k − O)/L), the
// overflow flag of a batch whose heads overflow differently, and what the model does not cover (split-KV).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/study/error_model.hpp"
#include "support/attention_cases.hpp"

using namespace pasa;

namespace {

// Q, K, V of one batch with N heads (Nq = Nkv): Q and K uniform in [x0 − am, x0 + am] per head, V in
// [v0 − 1, v0 + 1]; fp16 values.
AttentionInputs small_inputs(std::size_t N, std::size_t Sq, std::size_t Skv, std::size_t D,
                             const std::vector<double>& x0, double am, std::uint64_t seed, double v0 = 0) {
  AttentionInputs in;
  in.q = Tensor({1, N, Sq, D}, format_by_name("fp16"));
  in.k = Tensor({1, N, Skv, D}, format_by_name("fp16"));
  in.v = in.k;
  for (std::size_t h = 0; h < N; ++h) {
    const Tensor q = test::uniform_tensor({1, 1, Sq, D}, x0[h], am, seed + 3 * h);
    const Tensor k = test::uniform_tensor({1, 1, Skv, D}, x0[h], am, seed + 3 * h + 1);
    const Tensor v = test::uniform_tensor({1, 1, Skv, D}, v0, 1.0, seed + 3 * h + 2);
    std::copy(q.data.begin(), q.data.end(), in.q.head(0, h));
    std::copy(k.data.begin(), k.data.end(), in.k.head(0, h));
    std::copy(v.data.begin(), v.data.end(), in.v.head(0, h));
  }
  return in;
}

}  // namespace

TEST_CASE("error model: the p term with exp and p in the same format is the weight form, by hand",
          "[error_model]") {
  // Every stage fp64 but exp and p (fp16): one key block (s2 >= Skv, so every P is in the final frame). Per
  // query row: s_k = q·k_k/√D, w_k = e^{s_k − max s}, L = Σ w_k, O = Σ w_k v_k / L, ρ_k = fl16(w_k) − w_k;
  // l sums the rounded P, so ΔO = Σ_k ρ_k (v_k − O) / L, and the p term is Σ_rows ‖ΔO‖². V's mean of 3
  // makes v_k − O much smaller than v_k.
  const std::size_t Sq = 3, Skv = 24, D = 8;
  const AttentionInputs in = small_inputs(1, Sq, Skv, D, {0.0}, 1.5, 11, 3.0);
  const Format fp16 = format_by_name("fp16");
  Allocation a = allocation_preset("fp64");
  a.spec(Stage::exp).format = fp16;
  a.spec(Stage::p).format = fp16;
  ErrorModelOptions opt;
  opt.s2 = 32;
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  double want = 0, weight_free = 0;  // (weight_free: the form with v_k in place of v_k − O)
  const double *Q = in.q.head(0, 0), *K = in.k.head(0, 0), *V = in.v.head(0, 0);
  for (std::size_t i = 0; i < Sq; ++i) {
    std::vector<double> s(Skv), w(Skv);
    double M = -INFINITY;
    for (std::size_t k = 0; k < Skv; ++k) {
      double S = 0;
      for (std::size_t d = 0; d < D; ++d) S += Q[i * D + d] * K[k * D + d];
      s[k] = S * scale;
      M = std::max(M, s[k]);
    }
    double L = 0;
    for (std::size_t k = 0; k < Skv; ++k) L += (w[k] = std::exp(s[k] - M));
    for (std::size_t d = 0; d < D; ++d) {
      double O = 0;
      for (std::size_t k = 0; k < Skv; ++k) O += w[k] * V[k * D + d];
      O /= L;
      double dO = 0, dv = 0;
      for (std::size_t k = 0; k < Skv; ++k) {
        const double rho = round(w[k], fp16) - w[k];
        dO += rho * (V[k * D + d] - O) / L;
        dv += rho * V[k * D + d] / L;
      }
      want += dO * dO;
      weight_free += dv * dv;
    }
  }
  const ErrorPrediction p = predict_error(in, a, opt);
  REQUIRE(want > 0);
  REQUIRE(weight_free > 4 * want);  // the two forms are far apart on this case
  CHECK(p.p == Approx(want).epsilon(1e-9));
  CHECK(p.scores == 0);
  CHECK(p.rows == Sq);
}

TEST_CASE("error model: a batch overflows when any of its heads does, whichever it is", "[error_model]") {
  // FA-FP16/FP32 stores S in fp16: a head with q, k ≈ 120 (|S| ≈ 8·120² = 115200 > 65504) overflows, one
  // with small values does not. The batch's prediction is flagged (rel_rmse inf) with the overflowing head
  // first or last; the algorithm itself gives NaN in that head only.
  const AlgorithmSpec fa = test::decode_spec("fa2", "fa_fp16_fp32", 16, 1);
  const ErrorModelOptions opt = error_model_options(fa);
  for (std::size_t big : {0, 1}) {
    std::vector<double> x0 = {0.5, 0.5};
    x0[big] = 120;
    const AttentionInputs in = small_inputs(2, 4, 16, 8, x0, 2, 21);
    INFO("overflowing head " << big);
    for (std::size_t h = 0; h < 2; ++h) {  // each head alone
      const AttentionInputs one = small_inputs(1, 4, 16, 8, {x0[h]}, 2, 21 + 3 * h);
      CHECK(predict_error(one, fa.alloc, opt).overflow == (h == big));
      const AttentionOutput o = run_attention(one, fa, 1);
      CHECK(std::isnan(o.o.data[0]) == (h == big));
    }
    const ErrorPrediction p = predict_error(in, fa.alloc, opt, 2);
    CHECK(p.overflow);
    CHECK(std::isinf(p.rel_rmse()));
  }
}

TEST_CASE("error model: split-KV is a gap (no prediction is made for it)", "[error_model]") {
  AlgorithmSpec s = test::decode_spec("fa2", "fa_fp16_fp32", 64, 1);
  CHECK(error_model_gap(s).empty());
  for (std::size_t splits : {2, 4}) {
    s.splits = splits;
    CHECK(error_model_gap(s) == "split-KV");
  }
  AlgorithmSpec p = test::decode_spec("pasa", "pasa_fp16", 64, 1);
  CHECK(error_model_gap(p).empty());
  p.splits = 3;
  CHECK(error_model_gap(p) == "split-KV");
}
