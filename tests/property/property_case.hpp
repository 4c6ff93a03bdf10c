// The property harness's case and its draws (test_properties.cpp checks them; property_draws.cpp draws them):
// a problem, an algorithm, a low-precision preset with its drawn rounding, and what was broken on purpose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pasa/attention/algorithm.hpp"
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

}  // namespace pasa_property
