// Test support: the paper's relative RMSE (PASA Eq. 19), ‖o − ref‖₂ / ‖ref‖₂ in long double, written here
// apart from the library's metrics so that tests of the engines do not check them with the code under test.
// NaN when the output holds a NaN.
#pragma once

#include <cmath>
#include <cstddef>

#include "pasa/inputs/tensor.hpp"

namespace pasa::test {

inline double rel_rmse(const Tensor& o, const Tensor& ref) {
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < o.data.size(); ++i) {
    const long double d = static_cast<long double>(o.data[i]) - ref.data[i];
    num += d * d;
    den += static_cast<long double>(ref.data[i]) * ref.data[i];
  }
  return std::sqrt(static_cast<double>(num / den));
}

}  // namespace pasa::test
