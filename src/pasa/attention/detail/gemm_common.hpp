// Small predicates shared by the GEMM dispatch (gemm.cpp) and its kernels (gemm_float_kernels.cpp,
// gemm_tensor_core.cpp): which stages native float/double arithmetic rounds exactly.
#pragma once

#include <cmath>

#include "pasa/attention/gemm_spec.hpp"
#include "pasa/numeric/double_double.hpp"

namespace pasa::detail {

inline const Format& fp32() {
  static const Format f = format_by_name("fp32");
  return f;
}
inline const Format& fp64() {
  static const Format f = format_by_name("fp64");
  return f;
}

inline double round_sum_dd(DD x, const Format& f, const RoundOptions& o) {
  if (!std::isfinite(x.hi)) return round(x.hi, f, o);
  return round_sum(x.hi, x.lo, f, o);
}

inline bool plain_rne(const RoundOptions& o) {
  return o.mode == RoundMode::nearest_even && o.overflow == Overflow::ieee && !o.flush_input && !o.flush_output;
}
// The stage rounds exactly as the native type's arithmetic does.
inline bool native(const StageSpec& s, const Format& type) { return s.format == type && plain_rne(s.round); }
// Every value of f is a float (including subnormals).
inline bool float_exact(const Format& f) { return f.p <= 24 && f.emax <= 127 && f.emin() - (f.p - 1) >= -149; }

}  // namespace pasa::detail
