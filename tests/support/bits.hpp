// Test support: results compared bit for bit, as the tests of the "same bits" claims (the fused path, the
// reference emulator, thread counts, split-KV) compare them: any NaN equals any NaN (no payload is
// promised), every other value by its exact bits (so +0 and −0 differ).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pasa/attention/algorithm_spec.hpp"

namespace pasa::test {

inline bool same_bits(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// How many values of the outputs (o, then lse) differ in their bits.
inline std::size_t count_differing(const AttentionOutput& a, const AttentionOutput& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.o.data.size(); ++i) n += !same_bits(a.o.data[i], b.o.data[i]);
  for (std::size_t i = 0; i < a.lse.size(); ++i) n += !same_bits(a.lse[i], b.lse[i]);
  return n;
}

// The first value that differs, as "o[i] x vs y" or "lse[i] x vs y"; "" when none does.
inline std::string first_difference(const AttentionOutput& a, const AttentionOutput& b) {
  for (std::size_t i = 0; i < a.o.data.size(); ++i)
    if (!same_bits(a.o.data[i], b.o.data[i]))
      return "o[" + std::to_string(i) + "] " + std::to_string(a.o.data[i]) + " vs " + std::to_string(b.o.data[i]);
  for (std::size_t i = 0; i < a.lse.size(); ++i)
    if (!same_bits(a.lse[i], b.lse[i]))
      return "lse[" + std::to_string(i) + "] " + std::to_string(a.lse[i]) + " vs " + std::to_string(b.lse[i]);
  return "";
}

}  // namespace pasa::test
