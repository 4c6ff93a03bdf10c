// Test support: the inputs and algorithm descriptions that several attention tests build the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/inputs/tensor.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa::test {

// A tensor of values uniform in [x0 − am, x0 + am] (PASA Eq. 17) rounded to `format`, drawn in order from
// mt19937_64(seed).
inline Tensor uniform_tensor(Shape sh, double x0, double am, std::uint64_t seed, const char* format = "fp16") {
  const Format f = format_by_name(format);
  Tensor t(sh, f);
  boost::random::mt19937_64 eng(seed);
  boost::random::uniform_real_distribution<double> uni(x0 - am, x0 + am);
  for (double& x : t.data) x = round(uni(eng), f);
  return t;
}

// An algorithm for decode-sized query blocks (s1 = 4) over key blocks of s2 in `splits` split-KV parts.
inline AlgorithmSpec decode_spec(const std::string& name, const Allocation& alloc, std::size_t s2 = 32,
                                 std::size_t splits = 1) {
  AlgorithmSpec s;
  s.name = name;
  s.alloc = alloc;
  s.s1 = 4;
  s.s2 = s2;
  s.splits = splits;
  return s;
}
inline AlgorithmSpec decode_spec(const std::string& name, const std::string& preset, std::size_t s2 = 32,
                                 std::size_t splits = 1) {
  return decode_spec(name, allocation_preset(preset), s2, splits);
}

}  // namespace pasa::test
