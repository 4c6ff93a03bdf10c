// Generators: moments within stated statistical tolerances (5 standard errors), the resonance mechanism,
// bit-identical regeneration whatever the thread count, and the JSON problem form.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/exact/metrics.hpp"

using namespace pasa;

namespace {
struct Moments {
  double mean = 0, var = 0;
};
Moments moments(std::span<const double> x) {
  Moments m;
  for (double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  for (double v : x) m.var += (v - m.mean) * (v - m.mean);
  m.var /= static_cast<double>(x.size() - 1);
  return m;
}
}  // namespace

TEST_CASE("uniform generator (Eq. 17): range, mean and variance", "[generators]") {
  const TensorGen g{GenKind::uniform, 3.0, 2.0};
  const Tensor t = generate_tensor(g, {1, 4, 256, 64}, format_by_name("fp16"), 5, "q");  // N = 65536
  const double n = static_cast<double>(t.data.size());
  for (double v : t.data) REQUIRE((v >= 1.0 && v <= 5.0));
  const Moments m = moments(t.data);
  // σ² = am²/3; standard error of the mean σ/√N; of the variance √((μ4 − σ⁴)/N) with μ4 = am⁴/5.
  const double var = 4.0 / 3.0;
  CHECK(std::abs(m.mean - 3.0) < 5 * std::sqrt(var / n));
  CHECK(std::abs(m.var - var) < 5 * std::sqrt((16.0 / 5 - var * var) / n));
  for (double v : t.data) REQUIRE(v == static_cast<double>(static_cast<float>(v)));  // fp16 values are floats
}

TEST_CASE("hybrid generator (Eq. 18): mean, variance and outlier rate", "[generators]") {
  const double x0 = 1, am = 10, p = 0.01;
  TensorGen g{GenKind::hybrid, x0, am, p};
  const Tensor t = generate_tensor(g, {2, 8, 256, 64}, format_by_name("fp32"), 9, "k");  // N = 262144
  const double n = static_cast<double>(t.data.size());
  const Moments m = moments(t.data);
  const double var = 1 + am * am * p;  // N(x0,1) + N(0,am²)·Bernoulli(p)
  CHECK(std::abs(m.mean - x0) < 5 * std::sqrt(var / n));
  // μ4 of the mixture: (1−p)·3 + p·3(1+am²)²; standard error of the variance √((μ4 − σ⁴)/N).
  const double mu4 = (1 - p) * 3 + p * 3 * (1 + am * am) * (1 + am * am);
  CHECK(std::abs(m.var - var) < 5 * std::sqrt((mu4 - var * var) / n));
  // Outliers: |x − x0| > 6 happens with probability p·P(|N(0, 1+am²)| > 6) + (1−p)·P(|N(0,1)| > 6).
  const double r = p * std::erfc(6 / std::sqrt(2 * (1 + am * am))) + (1 - p) * std::erfc(6 / std::sqrt(2.0));
  double count = 0;
  for (double v : t.data) count += std::abs(v - x0) > 6;
  CHECK(std::abs(count - r * n) < 5 * std::sqrt(r * n));
}

TEST_CASE("resonance generator: phase lag 180 gives large negative scores, 0 large positive", "[generators]") {
  ProblemSpec spec;
  spec.Sq = spec.Skv = 16;
  spec.D = 64;
  spec.q = TensorGen{GenKind::resonance, 0.0, 40.0};
  spec.q.wavelength = 8;
  spec.k = spec.q;
  spec.k.phase_deg = 180;
  spec.v = TensorGen{};
  // q·k = −A²·Σ_d cos²(2πd/8) = −A²·D/2 = −51200 for every pair (up to fp16 rounding of the cosines).
  const AttentionInputs in = generate_inputs(spec);
  const ScoreStats s = score_stats(in, format_by_name("fp16"));
  CHECK(s.min_unscaled == Approx(-51200).epsilon(1e-3));
  CHECK(s.max_unscaled == Approx(-51200).epsilon(1e-3));
  spec.k.phase_deg = 0;
  spec.k.seq_bias = 10;  // plus a bias growing along the sequence: the last key adds 10·Σ_d q_d = 0
  spec.q.x0 = spec.k.x0 = 1;  // and an offset: + D·1·1 + Σ cos terms (which vanish) = +64 (+10·64 for the last)
  const ScoreStats p = score_stats(generate_inputs(spec), format_by_name("fp16"));
  CHECK(p.min_unscaled == Approx(51200 + 64).epsilon(1e-3));
  CHECK(p.max_unscaled == Approx(51200 + 64 + 640).epsilon(1e-3));
  CHECK(p.overflow == 0);
  spec.q.am = spec.k.am = 48;  // 48²·32 = 73728 > 65504: the fp16 overflow of FA-FP16/FP32
  CHECK(score_stats(generate_inputs(spec), format_by_name("fp16")).overflow == 16 * 16);
}

TEST_CASE("generation is bit-identical whatever the thread count, and streams are independent", "[generators]") {
  ProblemSpec spec;
  spec.B = 2;
  spec.Nq = 4;
  spec.Nkv = 2;
  spec.Sq = 33;
  spec.Skv = 47;
  spec.D = 16;
  spec.seed = 77;
  spec.q = spec.k = spec.v = TensorGen{GenKind::hybrid, 0.5, 5.0, 0.05};
  const AttentionInputs a = generate_inputs(spec, 1), b = generate_inputs(spec, 2), c = generate_inputs(spec, 7);
  CHECK(a.q.data == b.q.data);
  CHECK(a.k.data == c.k.data);
  CHECK(a.v.data == c.v.data);
  CHECK(a.k.data != a.v.data);  // same generator, different streams
  ProblemSpec other = spec;
  other.seed = 78;
  CHECK(generate_inputs(other).q.data != a.q.data);
  // Head 0 does not depend on how many heads are generated.
  ProblemSpec one = spec;
  one.Nq = 2;
  one.Nkv = 1;
  const AttentionInputs d = generate_inputs(one);
  CHECK(std::equal(d.q.head(1, 1), d.q.head(1, 1) + 33 * 16, a.q.head(1, 1)));
}

