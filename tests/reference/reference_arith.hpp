// The reference emulator's arithmetic (reference_arith.cpp), private to tests/reference/: exact MPFR values,
// one rounding of them to a stage, and the reductions of the shared spec, for reference_attention.cpp.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include <mpfr.h>

#include "reference_attention.hpp"

namespace pasa::reference::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Any sum of a few products of doubles is exact in 4400 bits (doubles span 2^-1074 .. 2^1024).
inline constexpr mpfr_prec_t kExactPrec = 4400;
// Quotients and exponentials: round-to-odd at 256 bits keeps the sticky information, so one later rounding
// to p <= 53 bits (any mode, subnormals included) equals the rounding of the exact value.
inline constexpr mpfr_prec_t kOddPrec = 256;

struct Big {
  mpfr_t v;
  explicit Big(mpfr_prec_t p = kExactPrec) {
    mpfr_init2(v, p);
    mpfr_set_zero(v, 1);
  }
  ~Big() { mpfr_clear(v); }
  Big(const Big&) = delete;
  Big& operator=(const Big&) = delete;
  void set(double x) { mpfr_set_d(v, x, MPFR_RNDN); }  // exact: 53 bits into kExactPrec or kOddPrec
};

// Throws std::logic_error naming `what` when an MPFR operation that must be exact was not (ternary != 0).
void require_exact(int ternary, const char* what);
// Round-to-odd at the variable's precision from a round-toward-zero result and its ternary value.
void make_odd(mpfr_t y, int ternary);
// Throws std::invalid_argument for a stochastic stage (the reference does not follow the engine's stream).
void no_stochastic(const StageSpec& s);
// One rounding of an exact double, and of an exact (or round-to-odd) MPFR value, to a stage.
double rnd(const StageSpec& s, double x);
double rnd(const StageSpec& s, mpfr_srcptr x);
double ref_sub(const StageSpec& s, double x, double y);
// The shared spec's reduction of x[lo, hi) in accumulator acc, unrounded to the stage.
double accumulate(const std::vector<double>& x, std::size_t lo, std::size_t hi, const Reduction& red,
                  const StageSpec& acc);
// A row sum and a mean in stage s (accumulated in its acc, rounded once to s).
double reduce_sum(const std::vector<double>& x, const StageSpec& s);
double reduce_mean(const std::vector<double>& x, const StageSpec& s);
// The largest of x, NaN ignored; −inf for an empty or fully hidden row.
double max_of(const std::vector<double>& x);
// PASA's bf16 → fp16 mapping (§2.2), the only change an algorithm makes to its allocation.
Allocation effective_allocation(const AttentionInputs& in, const AlgorithmSpec& spec);

}  // namespace pasa::reference::detail
