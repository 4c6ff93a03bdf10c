// The reference emulator's arithmetic (reference_arith.hpp): every step's exact result formed with MPFR (or
// rounded to odd at 256 bits) and rounded once to its stage; the GEMM dot product and the reductions.
#include "reference_arith.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpfr.h>

#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/round.hpp"
#include "support/mpfr_round.hpp"

namespace pasa::reference {

namespace detail {

void require_exact(int ternary, const char* what) {
  if (ternary != 0) throw std::logic_error(std::string("reference: inexact ") + what + " at 4400 bits");
}

// Round-to-odd at the variable's precision from a round-toward-zero result and its ternary value.
void make_odd(mpfr_t y, int ternary) {
  if (ternary == 0 || !mpfr_regular_p(y)) return;
  if (mpfr_min_prec(y) < mpfr_get_prec(y)) {  // last significand bit is 0: move it to 1, away from zero
    if (mpfr_sgn(y) > 0) mpfr_nextabove(y);
    else mpfr_nextbelow(y);
  }
}

namespace {

// The value an out-of-range magnitude becomes: IEEE 754 §7.4 for the ieee policy (E4M3FN has no infinity:
// NaN), or ±max_finite when saturating.
double overflow_value(bool neg, const Format& f, const RoundOptions& o) {
  const bool to_max = o.overflow == Overflow::saturate || o.mode == RoundMode::toward_zero ||
                      o.mode == RoundMode::odd || (o.mode == RoundMode::toward_pos && neg) ||
                      (o.mode == RoundMode::toward_neg && !neg);
  if (to_max) return neg ? -f.max_finite() : f.max_finite();
  return f.has_infinity() ? (neg ? -kInf : kInf) : kNaN;
}

// One rounding of an MPFR value that is not a double: MPFR at precision p with the exponent range of the
// format (mpfr_check_range brings a p-bit result of unbounded exponent into it, mpfr_subnormalize gives
// gradual underflow without double rounding); then the format's overflow and flush conventions. Ties away
// (no mode of mpfr_set) by its definition: the nearer of RZ and RA, RA on a tie (test::mpfr_round_ties_away).
double mpfr_round_to(mpfr_srcptr x, const Format& f, const RoundOptions& o) {
  if (!f.subnormals) throw std::invalid_argument("reference: formats without subnormals are not supported");
  const bool neg = mpfr_signbit(x) != 0;
  // |x| < 2^emin  <=>  MPFR exponent (x = m·2^E, m in [1/2, 1)) E <= emin.
  if (o.flush_input && mpfr_get_exp(x) <= f.emin()) return neg ? -0.0 : 0.0;
  const mpfr_rnd_t rnd = o.mode == RoundMode::nearest_even ? MPFR_RNDN
                         : o.mode == RoundMode::toward_pos ? MPFR_RNDU
                         : o.mode == RoundMode::toward_neg ? MPFR_RNDD
                                                           : MPFR_RNDZ;  // rz, and ro's first step
  auto on_grid = [&](mpfr_t out, mpfr_rnd_t mode) {
    int tern = mpfr_set(out, x, mode);
    const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_set_emin(f.emin() - f.p + 2);  // smallest subnormal 2^(emin−p+1) = 0.5·2^(emin−p+2)
    mpfr_set_emax(f.emax + 8);          // never overflows inside MPFR; the format's convention is applied below
    tern = mpfr_check_range(out, tern, mode);
    tern = mpfr_subnormalize(out, tern, mode);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    return tern;
  };
  mpfr_t y;
  mpfr_init2(y, f.p);
  const int t = o.mode == RoundMode::nearest_away ? test::mpfr_round_ties_away(y, x, on_grid) : on_grid(y, rnd);
  double r = mpfr_get_d(y, MPFR_RNDN);  // exact: p <= 53 bits, inf only beyond double's range
  mpfr_clear(y);
  if (o.mode == RoundMode::odd && t != 0) {  // round to odd: toward zero, then the last bit set if inexact
    const double a = std::fabs(r);
    const int e = a == 0 ? f.emin() : std::max(std::ilogb(a), f.emin());
    const double quantum = std::ldexp(1.0, e - (f.p - 1));
    if (std::fmod(a / quantum, 2.0) == 0.0) r = neg ? -(a + quantum) : a + quantum;
  }
  if (std::fabs(r) > f.max_finite()) return overflow_value(neg, f, o);
  if (o.flush_output && std::fabs(r) < f.min_normal()) r = neg ? -0.0 : 0.0;
  return r;
}

}  // namespace

void no_stochastic(const StageSpec& s) {
  if (s.round.mode == RoundMode::stochastic)
    throw std::invalid_argument("reference: stochastic rounding is not reproduced (it follows the engine's stream)");
}

// One rounding of an exact double.
double rnd(const StageSpec& s, double x) {
  no_stochastic(s);
  return pasa::round(x, s.format, s.round);
}

// One rounding of an exact (or round-to-odd) MPFR value: by pasa::round when it is a double, else by MPFR.
double rnd(const StageSpec& s, mpfr_srcptr x) {
  no_stochastic(s);
  if (mpfr_nan_p(x)) return kNaN;
  if (mpfr_inf_p(x)) return pasa::round(mpfr_sgn(x) > 0 ? kInf : -kInf, s.format, s.round);
  if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;
  const double d = mpfr_get_d(x, MPFR_RNDN);
  if (std::isfinite(d) && mpfr_cmp_d(x, d) == 0) return pasa::round(d, s.format, s.round);
  return mpfr_round_to(x, s.format, s.round);
}


double ref_sub(const StageSpec& s, double x, double y) { return ref_add(s, x, -y); }

// The reduction of the shared spec over x in accumulator acc (the stage's rounding options), unrounded to
// the stage. Every lane with terms, and the sequential sum, starts at −0 (the exact identity: −0 + x = x,
// signed zeros included) and rounds each addition, so a first element wider than acc is rounded when it
// enters; a lane without terms holds +0, as does an empty sum.
double accumulate(const std::vector<double>& x, std::size_t lo, std::size_t hi, const Reduction& red,
                  const StageSpec& acc) {
  switch (red.order) {
    case Order::sequential: {
      double s = hi > lo ? -0.0 : 0.0;
      for (std::size_t i = lo; i < hi; ++i) s = ref_add(acc, s, x[i]);
      return s;
    }
    case Order::pairwise: {
      if (hi - lo == 1) return x[lo];
      const std::size_t h = lo + (hi - lo) / 2;
      return ref_add(acc, accumulate(x, lo, h, red, acc), accumulate(x, h, hi, red, acc));
    }
    case Order::blocked: {
      const auto k = static_cast<std::size_t>(red.width);
      std::vector<double> lane(k, 0.0);
      for (std::size_t r = 0; r < k; ++r) {
        if (lo + r < hi) lane[r] = -0.0;
        for (std::size_t i = lo + r; i < hi; i += k) lane[r] = ref_add(acc, lane[r], x[i]);
      }
      for (std::size_t off = k / 2; off >= 1; off /= 2)  // shuffle-down tree
        for (std::size_t r = 0; r < off; ++r) lane[r] = ref_add(acc, lane[r], lane[r + off]);
      return lane[0];
    }
  }
  return kNaN;
}

// A row sum in stage s: accumulated in acc, then rounded once to s.
double reduce_sum(const std::vector<double>& x, const StageSpec& s) {
  const Reduction red = reduction_of(s);
  const StageSpec acc{red.acc, s.round};
  return rnd(s, accumulate(x, 0, x.size(), red, acc));
}

// A mean in stage s: the sum in acc, divided by n in acc (one rounding), then rounded once to s.
double reduce_mean(const std::vector<double>& x, const StageSpec& s) {
  const Reduction red = reduction_of(s);
  const StageSpec acc{red.acc, s.round};
  const double sum = accumulate(x, 0, x.size(), red, acc);
  return rnd(s, ref_div(acc, sum, static_cast<double>(x.size())));
}

double max_of(const std::vector<double>& x) {  // NaN ignored; −inf for an empty or fully hidden row
  double m = -kInf;
  for (double v : x)
    if (v > m) m = v;
  return m;
}

// PASA's bf16 → fp16 mapping (§2.2), the only change an algorithm makes to its allocation.
Allocation effective_allocation(const AttentionInputs& in, const AlgorithmSpec& spec) {
  Allocation a = spec.alloc;
  const Format bf16 = format_by_name("bf16");
  if (spec.name == "pasa" && spec.pasa.bf16_to_fp16 &&
      (in.q.format == bf16 || in.k.format == bf16 || in.v.format == bf16))
    for (auto& s : a.stages)
      if (s.format == bf16) s.format = format_by_name("fp16");
  return a;
}

}  // namespace detail

using namespace detail;

Reduction reduction_of(const StageSpec& s) {
  const Order order = s.reduce.order == ReduceOrder::sequential ? Order::sequential
                      : s.reduce.order == ReduceOrder::pairwise ? Order::pairwise
                                                                : Order::blocked;
  return Reduction{s.reduce.acc.value_or(s.format), order, s.reduce.width};
}

double ref_add(const StageSpec& s, double x, double y) {
  thread_local Big a, b, r;
  a.set(x);
  b.set(y);
  require_exact(mpfr_add(r.v, a.v, b.v, MPFR_RNDZ), "sum");  // RNDZ: an exact zero sum is +0, as in IEEE RNE
  return rnd(s, r.v);
}

double ref_mul(const StageSpec& s, double x, double y) {
  thread_local Big a, b, r;
  a.set(x);
  b.set(y);
  require_exact(mpfr_mul(r.v, a.v, b.v, MPFR_RNDZ), "product");
  return rnd(s, r.v);
}

double ref_div(const StageSpec& s, double x, double y) {
  thread_local Big a, b, r(kOddPrec);
  a.set(x);
  b.set(y);
  make_odd(r.v, mpfr_div(r.v, a.v, b.v, MPFR_RNDZ));
  return rnd(s, r.v);
}

double ref_exp(const StageSpec& s, double x) {
  // "via": "fp32": the float argument's expf (libm's, what CUDA and PyTorch call), then one cast.
  if (s.via == ExpVia::fp32) return pasa::round(static_cast<double>(std::exp(static_cast<float>(x))), s.format, s.round);
  thread_local Big a, r(kOddPrec);
  a.set(x);
  make_odd(r.v, mpfr_exp(r.v, a.v, MPFR_RNDZ));
  return rnd(s, r.v);
}

double reference_dot(const GemmModel& model, const StageSpec& acc, const StageSpec& out, const double* a,
                     std::size_t sa, const double* b, std::size_t sb, std::size_t k) {
  thread_local Big prod, group, sum, cc;
  double c = 0.0;  // the accumulator, a value of acc's format
  switch (model.kind) {
    case GemmKind::ordered:  // acc ← round_acc(acc + a·b), one rounding per step (an FMA chain)
      for (std::size_t t = 0; t < k; ++t) {
        prod.set(a[t * sa]);
        cc.set(b[t * sb]);
        require_exact(mpfr_mul(prod.v, prod.v, cc.v, MPFR_RNDZ), "product");
        cc.set(c);
        require_exact(mpfr_add(sum.v, cc.v, prod.v, MPFR_RNDZ), "sum");
        c = rnd(acc, sum.v);
      }
      break;
    case GemmKind::every_op:  // product rounded to acc, then the sum rounded to acc
      for (std::size_t t = 0; t < k; ++t) c = ref_add(acc, c, ref_mul(acc, a[t * sa], b[t * sb]));
      break;
    case GemmKind::chunked:  // a group's exact products summed exactly (the wide adder), added with one rounding
      for (std::size_t t0 = 0; t0 < k; t0 += static_cast<std::size_t>(model.chunk)) {
        mpfr_set_zero(group.v, 1);
        for (std::size_t t = t0; t < std::min(k, t0 + static_cast<std::size_t>(model.chunk)); ++t) {
          prod.set(a[t * sa]);
          cc.set(b[t * sb]);
          require_exact(mpfr_mul(prod.v, prod.v, cc.v, MPFR_RNDZ), "product");
          require_exact(mpfr_add(group.v, group.v, prod.v, MPFR_RNDZ), "group sum");
        }
        cc.set(c);
        require_exact(mpfr_add(sum.v, cc.v, group.v, MPFR_RNDZ), "sum");
        c = rnd(acc, sum.v);
      }
      break;
    case GemmKind::tensor_core:  // checked against its own scalar reference in tests/attention/test_tensor_core.cpp
      throw std::invalid_argument("reference_dot: the tensor_core model is not restated here");
  }
  return rnd(out, c);  // the GEMM's output, rounded once
}

}  // namespace pasa::reference
