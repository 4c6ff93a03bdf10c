// The property harness's case and its draws (test_properties.cpp checks them; property_draws.cpp draws them):
// a problem, an algorithm, a low-precision preset with its drawn rounding, and what was broken on purpose.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <algorithm>
#include <cmath>

#include "pasa/attention/algorithm.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/generators.hpp"

namespace pasa_property {

using namespace pasa;

// SplitMix64 [Steele, Lea & Flood 2014]: one 64-bit state, a fixed output function.
struct Draw {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  std::size_t in(std::size_t a, std::size_t b) { return a + below(b - a + 1); }  // [a, b]
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  double range(double a, double b) { return a + (b - a) * unit(); }
  bool chance(double p) { return unit() < p; }
  template <class T>
  T pick(const std::vector<T>& v) { return v[below(v.size())]; }
};

struct Case {
  ProblemSpec ps;
  AlgorithmSpec spec;      // its alloc is fp64 for property 1
  std::string preset;      // "" or the low-precision preset of properties 2–3
  std::string refusal;     // non-empty: the spec was broken on purpose (what was broken); property 4 only
  std::string mode_stage;  // "" or a stage name, or "*" for every stage: rounded in `mode` in the low-precision run
  RoundMode mode = RoundMode::nearest_even;
  std::string tc_model;    // "" or a named tensor-core model every GEMM of the low-precision run runs under
};

// The low-precision run's allocation: the preset with the drawn rounding mode.
Allocation low_alloc(const Case& c);
// One line naming the case (what the harness prints for a failure).
std::string label(const Case& c);
// A random case: a dense problem and algorithm (draw_case), or a paged one (draw_paged_case).
Case draw_case(Draw& d);
Case draw_paged_case(Draw& d);

// The fp64 contract's bound on the relative RMSE against the golden: 1e-13, and for PASA
// 1e-13 + 4·u·Inva·max(M, 1), u = 2^-53, Inva = β/(1 − β), M = scale·max_i Σ_d |q_id|·max_j |k_jd| (no
// score exceeds M in magnitude). PASA recovers the block shift as Inva·S̄' (Thm. 2.1): S̄', the mean of the
// shifted scores, is about (1 − β)·S̄, but its rounding error is that of the unshifted scores (the shifted
// keys k − β·k̄ are rounded relative to |k|), about u·M, and comes back multiplied by Inva: an error of the
// block's frame, hence of every output in it, of order u·Inva·M. The constant 4 is measured: over 10,451 PASA
// cases of two 40,000-case runs (seeds 24 and 7771203), rel / (u·Inva·max(M, 1)) after the 1e-13 reached 1.8
// (β = 0.999, M = 46: 9.2e-12). A bound without M (2e-13·Inva/63.5) fails at β = 0.999 with scores near 50
// (docs/contract.md).
double fp64_bound(const pasa::AlgorithmSpec& spec, double M);

// M of fp64_bound: scale · the largest Σ_d |q_d|·kmax_d over the query rows (q: rows × D), kmax_d the largest
// |k| of column d over every key (k: keys × D, of any head).
template <class QV, class KV>
double score_magnitude(const QV& q, const KV& k, std::size_t D, double scale) {
  std::vector<double> kmax(D, 0.0);
  for (std::size_t j = 0; j + D <= k.size(); j += D)
    for (std::size_t d = 0; d < D; ++d) kmax[d] = std::max(kmax[d], std::abs(static_cast<double>(k[j + d])));
  double m = 0;
  for (std::size_t i = 0; i + D <= q.size(); i += D) {
    double r = 0;
    for (std::size_t d = 0; d < D; ++d) r += std::abs(q[i + d]) * kmax[d];
    m = std::max(m, r);
  }
  return m * scale;
}

// x in 3 significant digits, scientific (the failure messages).
std::string sci(double x);

// The relative RMSE of o against the golden g: relative to g's norm, but no less than 1e-3 of V's scale vmax
// (the largest |v|): an output that cancels to ~0 (V of both signs under even weights) is judged on V's
// scale, as the golden's own bound is relative to Σ p|v|.
double relative_rmse(std::span<const double> o, std::span<const double> g, double vmax);

// Property 1b: an fp64 run with block schemes against the golden of its block-quantised inputs; "" when it
// holds (or does not apply), else what failed.
std::string check_blocks_fp64(const Case& c, const pasa::AttentionInputs& in, const pasa::AlgorithmSpec& spec64);

// Property 3b's fp64 part: the inputs held at their formats' widths (narrow, from in) give the fp64 run's bits
// o, the golden's g (under go) and the wide baseline's; "" when they do, else what differed.
std::string check_narrow_fp64(const pasa::AttentionInputs& in, const pasa::AttentionInputs& narrow, const pasa::AlgorithmSpec& spec64,
                              const pasa::AttentionOutput& o, const pasa::Golden& g, const pasa::GoldenOptions& go);

}  // namespace pasa_property
