// Rounding, encoding and decoding for the formats beyond IEEE 754-like grids (Format::ieee_like_grid()
// false): HiFloat8's tapered precision, E8M0 (unsigned, no zero) and the integer grids. One rule serves them
// all: x is rounded on the grid of its binade (quantum 2^(e - p_at(e) + 1), the subnormal quantum below
// 2^emin), then the format's range ends decide (overflow, no zero, no sign). The modes are round.hpp's.
#include "pasa/numeric/round_extended.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/numeric/double_double.hpp"

namespace pasa::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// What an input outside an unsigned format's values (negative, zero for a zero-less format) becomes:
// NaN under the ieee policy (ml_dtypes' casts give NaN), the smallest value when saturating.
double below_range(const Format& f, const RoundOptions& o) {
  return o.overflow == Overflow::saturate ? f.min_normal() : kNaN;
}

// The quantum exponent q of the grid that rounds a magnitude in binade e (2^e <= a < 2^(e+1)). A zero-less
// format under the ml_dtypes / torch conventions rounds (0, 2^(emin+1)) on the grid {0, 2^(emin+1)}, then
// reads 0 as its bottom code 2^emin: both libraries' E8M0 casts treat code 0 as the zero of an IEEE-style
// field (ml_dtypes float8.h ConvertImpl: the denormal shift; c10 fp8e8m0fnu_from_fp32_value: lsb = 0 for a
// subnormal float), so 2^-127 < x < 1.5·2^-127 goes to 2^-126 there, to 2^-127 in the exact convention.
int quantum_exponent(const Format& f, const RoundOptions& o, int e) {
  const int emin = f.emin();
  if (!f.has_zero && o.convention != Convention::exact && e <= emin) return emin + 1;
  if (e >= emin) return e - (f.p_at(e) - 1);
  return f.subnormals ? emin - (f.p_at(emin) - 1) : emin;
}

// The signed result of a rounded magnitude r (in range checks, zero, the sign).
double finish(double r, bool neg, const Format& f, const RoundOptions& o) {
  if (r > (neg ? f.max_negative() : f.max_finite())) return overflow_value(neg, f, o);
  if (r == 0.0) {
    if (!f.has_zero) return f.min_normal();  // the grid's 0 (below 2^emin, or the conventions' code 0)
    return neg && f.signed_zero() ? -0.0 : 0.0;
  }
  return neg ? -r : r;
}

// The cases decided before any rounding: ±inf, zero, signs an unsigned format lacks. Returns true with
// `out` set when x is one of them; `neg` is the sign the rounding then uses (torch drops E8M0's sign).
bool special_input(double x, const Format& f, const RoundOptions& o, double& out, bool& neg) {
  neg = std::signbit(x);
  if (!f.is_signed) {
    if (o.convention == Convention::torch) neg = false;  // c10: the exponent field of |x| alone
    else if (neg && x != 0.0) return out = below_range(f, o), true;
  }
  if (std::isinf(x)) {
    if (o.overflow == Overflow::saturate || f.specials == Specials::finite)
      out = neg ? -f.max_negative() : f.max_finite();
    else out = f.has_infinity() ? (neg ? -kInf : kInf) : kNaN;
    return true;
  }
  if (x == 0.0) {
    if (f.has_zero) out = neg && f.signed_zero() ? -0.0 : 0.0;
    else out = o.convention == Convention::torch ? f.min_normal() : below_range(f, o);
    return true;
  }
  return false;
}

}  // namespace

void check_flush_options(const Format& f, const RoundOptions& o) {
  if ((o.flush_input || o.flush_output) && !f.ieee_like_grid())
    throw InputError(fmt::format("flush_input / flush_output (DAZ / FTZ) are defined for IEEE-like formats; format {} "
                                 "has no subnormal range to flush", f.name));
}

double round_extended(double x, const Format& f, const RoundOptions& o, std::uint64_t draw) {
  check_flush_options(f, o);
  double out;
  bool neg;
  if (special_input(x, f, o, out, neg)) return out;
  const double a = std::fabs(x);
  const int e = std::ilogb(a);
  const int q = quantum_exponent(f, o, e);
  const double y = std::ldexp(a, -q);  // exact: a power-of-two scaling of a <= 53-bit significand
  const double yi = std::floor(y);
  const bool up = rounds_up(effective_mode(o.mode, f, e), y - yi, yi, neg, draw);
  return finish(std::ldexp(yi + (up ? 1.0 : 0.0), q), neg, f, o);
}

// As round_sum (round.cpp) with the binade's quantum: x = hi + lo exactly, x·2^-q = yi + frac with frac
// = (yh − yi) + rl summed by TwoSum, so every decision is made on the exact x.
double round_sum_extended(double hi, double lo, const Format& f, const RoundOptions& o, std::uint64_t draw) {
  check_flush_options(f, o);
  double out;
  bool neg;
  if (special_input(hi, f, o, out, neg)) return out;
  const bool hi_neg = std::signbit(hi);
  const double ah = std::fabs(hi);
  const double al = hi_neg ? -lo : lo;  // |x| = ah + al > 0 (|lo| <= ulp(hi)/2)
  int e = std::ilogb(ah);
  if (al < 0 && ah == std::ldexp(1.0, e)) --e;  // x lies just below a power of two: the binade below
  const int q = quantum_exponent(f, o, e);
  const double yh = std::ldexp(ah, -q);
  double yi = std::floor(yh);
  double rl = std::ldexp(al, -q);
  if (rl == 0.0) rl = std::copysign(std::numeric_limits<double>::denorm_min(), al);
  DD z = two_sum(yh - yi, rl);
  if (z.hi >= 1.0) {
    yi += 1.0;
    z = two_sum(z.hi - 1.0, z.lo);
  }
  const double fl = (z.hi < 0.0 || (z.hi == 0.0 && z.lo < 0.0)) ? -1.0 : 0.0;
  const double base = yi + fl;
  // frac − fl in [0, 1) as one double is inexact; the decisions need only its comparisons with 1/2, 0 and
  // the draw, made exactly on z as round_sum makes them: rounds_up is given a stand-in with the same answers.
  const auto above = [&](double c) { return z.hi > c || (z.hi == c && z.lo > 0.0); };
  const bool exact = z.hi == fl && z.lo == 0.0;
  const bool tie = z.hi == fl + 0.5 && z.lo == 0.0;
  const RoundMode m = effective_mode(o.mode, f, e);
  bool up;
  if (m == RoundMode::stochastic) up = above(fl + std::ldexp(static_cast<double>(draw >> 11), -53));
  else up = rounds_up(m, exact ? 0.0 : tie ? 0.5 : above(fl + 0.5) ? 0.75 : 0.25, base, neg, draw);
  return finish(std::ldexp(base + (up ? 1.0 : 0.0), q), neg, f, o);
}

namespace {

// HiFloat8's dot field [Luo et al. 2024, §2, Fig. 1]: the exponent width D (the bit length of |E|) is
// coded by the prefix 0001 (D = 0), 001 (1), 01 (2), 10 (3), 11 (4); 0000 is the denormal mode.
struct Dot {
  unsigned code;  // the prefix, right-aligned
  int length;     // its bits
};
constexpr Dot kDots[5] = {{0b0001, 4}, {0b001, 3}, {0b01, 2}, {0b10, 2}, {0b11, 2}};

int bit_length(int v) {
  int n = 0;
  while (v >> n) ++n;
  return n;
}

std::uint64_t encode_dot_prefix(double x, const Format& f) {
  const int nbits = f.storage_bits();
  const std::uint64_t sign_bit = std::uint64_t(1) << (nbits - 1);
  if (std::isnan(x)) return sign_bit;  // the negative-zero pattern
  const std::uint64_t sign = std::signbit(x) && x != 0.0 ? sign_bit : 0;
  const double a = std::fabs(x);
  if (a == 0.0) return 0;
  if (std::isinf(x)) return sign | encode_dot_prefix(f.max_finite(), f) | 1;  // one ulp above the max
  const int e = std::ilogb(a);
  const int m_bits = f.p_at(e) - 1;
  if (e < f.emin() || e > f.emax) throw std::domain_error(fmt::format("{} is not a value of format {}", x, f.name));
  if (m_bits == 0) {  // the denormal mode: dot 0000, the mantissa field holds e - emin + 1 (2^-22 -> 1)
    return sign | static_cast<std::uint64_t>(e - f.emin() + 1);
  }
  const int D = bit_length(std::abs(e));
  if (D > 4) throw std::domain_error(fmt::format("{} is outside format {}", x, f.name));
  const Dot d = kDots[D];
  if (1 + d.length + D + m_bits != nbits)
    throw std::logic_error(fmt::format("format {}: binade {} does not fill {} bits", f.name, e, nbits));
  const auto frac = static_cast<std::uint64_t>(std::ldexp(a, m_bits - e)) - (std::uint64_t(1) << m_bits);
  // The exponent in sign-magnitude, its top magnitude bit implicit: the sign, then the D - 1 low bits.
  const std::uint64_t exp_field =
      D == 0 ? 0 : (std::uint64_t(e < 0) << (D - 1)) | (static_cast<std::uint64_t>(std::abs(e)) & ((1u << (D - 1)) - 1));
  return sign | (std::uint64_t(d.code) << (D + m_bits)) | (exp_field << m_bits) | frac;
}

double decode_dot_prefix(std::uint64_t bits, const Format& f) {
  const int nbits = f.storage_bits();
  const bool neg = (bits >> (nbits - 1)) & 1;
  const std::uint64_t r = bits & ((std::uint64_t(1) << (nbits - 1)) - 1);
  if (r == 0) return neg ? kNaN : 0.0;
  if (r == (encode_dot_prefix(f.max_finite(), f) | 1)) return neg ? -kInf : kInf;
  for (int D = 4; D >= 0; --D) {
    const Dot d = kDots[D];
    const int rest = nbits - 1 - d.length;
    if ((r >> rest) != d.code) continue;
    const int m_bits = rest - D;
    const std::uint64_t exp_field = (r >> m_bits) & ((std::uint64_t(1) << D) - 1);
    const int mag = D == 0 ? 0 : (1 << (D - 1)) | static_cast<int>(exp_field & ((1u << (D - 1)) - 1));
    const int e = D > 0 && (exp_field >> (D - 1)) ? -mag : mag;
    const double frac = static_cast<double>(r & ((std::uint64_t(1) << m_bits) - 1));
    const double v = std::ldexp(1.0 + std::ldexp(frac, -m_bits), e);
    return neg ? -v : v;
  }
  const double v = std::ldexp(1.0, f.emin() - 1 + static_cast<int>(r));  // the denormal mode
  return neg ? -v : v;
}

}  // namespace

std::uint64_t encode_extended(double x, const Format& f) {
  if (!std::isnan(x) && round_extended(x, f, RoundOptions{}, 0) != x)
    throw std::domain_error(fmt::format("{} is not a value of format {} (round it first)", x, f.name));
  if (std::isinf(x) && !f.has_infinity()) throw std::domain_error(fmt::format("format {} has no infinity", f.name));
  if (std::isnan(x) && !f.has_nan())
    throw std::domain_error(fmt::format("format {} has no NaN (every pattern is a number; OCP MX v1.0 §5.3.2)", f.name));
  const int nbits = f.storage_bits();
  const std::uint64_t all = nbits == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << nbits) - 1;
  switch (f.layout) {
    case Layout::twos_complement:
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(x)) & all;
    case Layout::dot_prefix:
      return encode_dot_prefix(x, f);
    case Layout::sign_exponent_fraction: {
      // Unsigned or zero-less (E8M0): the field 0 holds binade emin; NaN is the all-ones pattern (fnu).
      if (std::isnan(x)) return all;
      const std::uint64_t sign = f.is_signed && std::signbit(x) ? std::uint64_t(1) << (nbits - 1) : 0;
      const double a = std::fabs(x);
      if (a == 0.0) return sign;
      const int e = std::ilogb(a);
      const int field_of_emin = f.has_zero ? 1 : 0;
      if (e < f.emin()) return sign | static_cast<std::uint64_t>(std::ldexp(a, -(f.emin() - f.p + 1)));
      const auto frac = static_cast<std::uint64_t>(std::ldexp(a, f.p - 1 - e)) & ((std::uint64_t(1) << (f.p - 1)) - 1);
      return sign | (static_cast<std::uint64_t>(e - f.emin() + field_of_emin) << (f.p - 1)) | frac;
    }
  }
  throw std::logic_error("encode_extended: unknown layout");
}

double decode_extended(std::uint64_t bits, const Format& f) {
  const int nbits = f.storage_bits();
  if (nbits < 64 && (bits >> nbits) != 0)
    throw std::domain_error(fmt::format("bit pattern {:#x} is wider than format {} ({} bits)", bits, f.name, nbits));
  const std::uint64_t all = nbits == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << nbits) - 1;
  switch (f.layout) {
    case Layout::twos_complement: {
      const bool neg = (bits >> (nbits - 1)) & 1;
      const double v = neg ? -static_cast<double>((~bits + 1) & all) : static_cast<double>(bits);
      if (-v > f.max_negative())
        throw std::domain_error(fmt::format("bit pattern {:#x} is {}, outside format {} (symmetric: [-{}, {}])", bits, v,
                                            f.name, f.max_finite(), f.max_finite()));
      return v;
    }
    case Layout::dot_prefix:
      return decode_dot_prefix(bits, f);
    case Layout::sign_exponent_fraction: {
      const int sbit = f.is_signed ? 1 : 0;
      if (f.specials == Specials::fnu && (bits & (all >> sbit)) == (all >> sbit)) return kNaN;
      const bool neg = sbit && ((bits >> (nbits - 1)) & 1);
      const std::uint64_t body = bits & (all >> sbit);
      const std::uint64_t frac = body & ((std::uint64_t(1) << (f.p - 1)) - 1);
      const auto field = static_cast<int>(body >> (f.p - 1));
      const int field_of_emin = f.has_zero ? 1 : 0;
      double v;
      if (field < field_of_emin) v = std::ldexp(static_cast<double>(frac), f.emin() - f.p + 1);
      else v = std::ldexp(static_cast<double>(frac | (std::uint64_t(1) << (f.p - 1))), field - field_of_emin + f.emin() - f.p + 1);
      if (v > f.max_finite()) throw std::domain_error(fmt::format("bit pattern {:#x} is outside format {}", bits, f.name));
      return neg ? -v : v;
    }
  }
  throw std::logic_error("decode_extended: unknown layout");
}

}  // namespace pasa::detail
