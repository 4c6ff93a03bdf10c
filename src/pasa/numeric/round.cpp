#include "pasa/numeric/round.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "pasa/core/assert.hpp"
#include "pasa/core/error.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/round_extended.hpp"

#if (defined(__F16C__) && defined(__AVX__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__F16C__) && defined(__AVX__)
#define PASA_HAVE_F16C 1
#endif

namespace pasa {

// The value an out-of-range magnitude becomes (IEEE 754 §7.4 for the ieee policy: both nearest modes carry
// every overflow to inf, max + ulp/2 included, which nearest_away and nearest_even both round up). A format
// without inf and NaN (OCP MX FP6/FP4, integers) saturates under either policy: ±max is the only finite
// choice, as OCP MX v1.0 §5.3.2 has it. A full-range integer's negative side ends at -2^(b-1).
double detail::overflow_value(bool neg, const Format& f, const RoundOptions& o) {
  const double maxf = neg ? f.max_negative() : f.max_finite();
  if (o.overflow == Overflow::saturate || f.specials == Specials::finite) return neg ? -maxf : maxf;
  const bool toward_zero = o.mode == RoundMode::toward_zero || o.mode == RoundMode::odd ||
                           (o.mode == RoundMode::toward_neg && !neg) || (o.mode == RoundMode::toward_pos && neg);
  if (toward_zero) return neg ? -maxf : maxf;
  if (!f.has_infinity()) return std::numeric_limits<double>::quiet_NaN();
  return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

namespace {

using detail::overflow_value;
constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_fp64_equivalent(const Format& f) {
  return f.p == 53 && f.emin() <= -1022 && f.subnormals;
}

// Branch-free round to nearest (ties to even, or away from zero) of one value held in a binary float type T
// (float or double, bits U): the integer carry trick on the bit pattern for the format's normal range, and
// (a + C) - C with C's ulp equal to the format's smallest subnormal below it (one RNE addition in T, exact
// otherwise). Written with selects only, so that GCC vectorises the loops that call it.
template <class T, class U>
struct RneKernel {
  static constexpr int kMant = std::numeric_limits<T>::digits - 1;  // 23 or 52 stored fraction bits
  U drop_half_minus_1, drop_mask;
  int drop;
  T c, q, half_q, min_normal, half_min_normal, maxf, over;
  bool flush_in, flush_out, subnormals, away, sub_ties;

  RneKernel(const Format& f, const RoundOptions& o) {
    drop = kMant + 1 - f.p;
    drop_half_minus_1 = drop > 0 ? (U(1) << (drop - 1)) - 1 : 0;
    drop_mask = drop > 0 ? ~((U(1) << drop) - 1) : ~U(0);
    c = static_cast<T>(std::ldexp(1.0, f.emin() - f.p + 1 + kMant));
    q = static_cast<T>(f.min_subnormal());
    half_q = q / 2;
    min_normal = static_cast<T>(f.min_normal());
    half_min_normal = min_normal / 2;
    maxf = static_cast<T>(f.max_finite());
    over = static_cast<T>(overflow_value(false, f, o));
    flush_in = o.flush_input;
    flush_out = o.flush_output;
    subnormals = f.subnormals;
    away = o.mode == RoundMode::nearest_away;
    // A subnormal tie exists in T only where half the quantum is a value of T (not for fp32 in float, fp64 in
    // double: q / 2 is then 0, and every value of T is on the grid).
    sub_ties = away && half_q > T(0);
  }

  T operator()(T x) const {
    const U bits = std::bit_cast<U>(x);
    const U sign = bits & (U(1) << (sizeof(U) * 8 - 1));
    const T a = std::bit_cast<T>(bits ^ sign);
    const U ab = bits ^ sign;
    // The carry: half a quantum minus 1, plus the kept last bit (ties to even) or plus 1 (ties away).
    const U lsb = drop > 0 ? (away ? U(1) : (ab >> drop) & 1) : 0;
    const T normal = std::bit_cast<T>((ab + drop_half_minus_1 + lsb) & drop_mask);
    // (a + c) - c rounds ties to even; away moves a tie it rounded down (a − t = q/2, exact) one quantum up.
    // Without subnormals the grid below 2^emin is {0, 2^emin}; the tie goes to 0 (even) or 2^emin (away).
    const T t = (a + c) - c;
    const T sub = subnormals ? (sub_ties && a - t == half_q ? t + q : t)
                             : ((away ? a >= half_min_normal : a > half_min_normal) ? min_normal : T(0));
    T r = a < min_normal ? sub : normal;
    r = r > maxf ? over : r;
    r = (flush_out && r < min_normal) || (flush_in && a < min_normal) ? T(0) : r;
    // A NaN comes out quiet, its payload cut to the format's fraction bits, as F16C's conversions do (so that
    // every element gets the same bits, in a SIMD block or not); the sign is kept.
    r = a != a ? std::bit_cast<T>((ab | (U(1) << (kMant - 1))) & drop_mask) : r;
    return std::bit_cast<T>(std::bit_cast<U>(r) | sign);
  }
};

// RNE from float to a format with float's exponent range (emin = -126, emax = 127, gradual underflow,
// IEEE specials: bf16, tf32, customs like them), IEEE overflow, no flushing: the integer carry trick alone is
// the whole rounding. Float's subnormals have the same exponent field as the format's and its significand
// grid is a refinement of the format's, so carrying into the exponent field rounds subnormals, the step to
// 2^-126 and the overflow past the largest finite value to +inf exactly as IEEE 754 §4.3.1 says; only NaNs
// (whose payload the carry could turn into inf or flip the sign) are selected around it, kept as they are,
// as the general kernel keeps them. A handful of integer operations per element: memory speed.
// The vectorised nearest kernels serve IEEE 754-like grids; a NaN that a format without NaN turns into a
// zero (the ml_dtypes convention) is the scalar path's.
bool nearest_kernel(const Format& f, const RoundOptions& o) {
  return (o.mode == RoundMode::nearest_even || o.mode == RoundMode::nearest_away) && f.ieee_like_grid() &&
         (o.convention == Convention::exact || f.has_nan());
}

bool float_range_fast_path(const Format& f, const RoundOptions& o) {
  return f.p <= 24 && f.emax == 127 && f.emin() == -126 && f.subnormals && f.has_infinity() &&
         o.mode == RoundMode::nearest_even && o.overflow == Overflow::ieee && !o.flush_input && !o.flush_output;
}

void round_float_range(const float* in, float* out, std::size_t n, int p) {
  const unsigned drop = static_cast<unsigned>(24 - p);
  const std::uint32_t half_minus_1 = drop > 0 ? (std::uint32_t(1) << (drop - 1)) - 1 : 0;
  const std::uint32_t mask = ~((std::uint32_t(1) << drop) - 1);
  const std::uint32_t lsb_mask = drop > 0 ? 1 : 0;  // p = 24: nothing to drop, nothing to carry
  auto one = [&](std::uint32_t bits) {
    const std::uint32_t ab = bits & 0x7fffffffu;
    const std::uint32_t r = (ab + half_minus_1 + ((ab >> drop) & lsb_mask)) & mask;
    return ab > 0x7f800000u ? (bits | 0x00400000u) & mask : r | (bits ^ ab);  // NaN: quiet, as RneKernel
  };
  std::size_t i = 0;
#if defined(__AVX512F__)
  // The same operations on 16 lanes (the zero-masked shift: GCC 12 warns about the unmasked one's undefined
  // pass-through operand). Spans larger than the caches (a bulk conversion) are written with
  // streaming stores, as memcpy writes them: no read of the destination's lines before they are overwritten.
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                quiet = _mm512_set1_epi32(0x00400000),
                vhalf = _mm512_set1_epi32(static_cast<int>(half_minus_1)), vmask = _mm512_set1_epi32(static_cast<int>(mask)),
                vlsb = _mm512_set1_epi32(static_cast<int>(lsb_mask));
  const __m128i count = _mm_cvtsi32_si128(static_cast<int>(drop));
  auto lanes = [&](__m512i bits) {
    const __m512i ab = _mm512_and_si512(bits, abs_mask);
    const __m512i lsb = _mm512_and_si512(_mm512_maskz_srl_epi32(0xFFFF, ab, count), vlsb);
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(ab, vhalf), lsb), vmask);
    const __m512i signed_r = _mm512_or_si512(r, _mm512_xor_si512(bits, ab));
    const __m512i nan = _mm512_and_si512(_mm512_or_si512(bits, quiet), vmask);
    return _mm512_mask_mov_epi32(signed_r, _mm512_cmpgt_epu32_mask(ab, inf), nan);  // NaN: quiet, as one()
  };
  constexpr std::size_t kStreamFrom = std::size_t(1) << 20;  // 4 MiB of output: past the L2 cache
  if (n >= kStreamFrom) {
    for (; i < n && (reinterpret_cast<std::uintptr_t>(out + i) & 63) != 0; ++i)
      out[i] = std::bit_cast<float>(one(std::bit_cast<std::uint32_t>(in[i])));
    for (; i + 16 <= n; i += 16) _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), lanes(_mm512_loadu_si512(in + i)));
    _mm_sfence();
  } else {
    for (; i + 16 <= n; i += 16) _mm512_storeu_si512(out + i, lanes(_mm512_loadu_si512(in + i)));
  }
#endif
  for (; i < n; ++i) out[i] = std::bit_cast<float>(one(std::bit_cast<std::uint32_t>(in[i])));
}

}  // namespace

double round(double x, const Format& f, const RoundOptions& o, RandomBits* rng) {
  if (uses_random_bits(o.mode) && rng == nullptr)
    throw std::invalid_argument("stochastic and hybrid rounding need a seeded random source");
  // Stochastic rounding consumes one draw per call, whatever the value, so streams stay aligned.
  const std::uint64_t draw = uses_random_bits(o.mode) ? rng->next() : 0;
  if (std::isnan(x)) {
    // ml_dtypes 0.6 casts a NaN to a format without NaN (fp6/fp4) as -0, or +0 with the NaN's sign bit set
    // (mxfloat.h: quiet_NaN() is the -0 pattern, and the sign of x is applied to it). Otherwise NaN stays
    // NaN: quiet, the payload cut to the format's fraction bits, as RneKernel.
    if (!f.has_nan() && o.convention == Convention::ml_dtypes) return std::signbit(x) ? 0.0 : -0.0;
    const int drop = std::clamp(53 - f.p, 0, 51);  // (p = 1, E8M0: no fraction bits, but the quiet bit stays)
    return std::bit_cast<double>((std::bit_cast<std::uint64_t>(x) | (std::uint64_t(1) << 51)) &
                                 ~((std::uint64_t(1) << drop) - 1));
  }
  if (!f.ieee_like_grid()) return detail::round_extended(x, f, o, draw);
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  if (std::isinf(x)) {
    if (o.overflow == Overflow::saturate || f.specials == Specials::finite) return neg ? -f.max_finite() : f.max_finite();
    if (!f.has_infinity()) return std::numeric_limits<double>::quiet_NaN();
    return x;
  }
  if (a == 0.0) return x;
  const int emin = f.emin();
  if (o.flush_input && a < f.min_normal()) return neg ? -0.0 : 0.0;
  double r;
  if (is_fp64_equivalent(f)) {
    r = a;
  } else {
    // Quantum 2^q of the format's grid around a: ulp of a's binade, the subnormal spacing below 2^emin,
    // or (no subnormals) the grid {0, 2^emin}.
    const int e = std::ilogb(a);
    const int q = e >= emin ? e - (f.p - 1) : (f.subnormals ? emin - (f.p - 1) : emin);
    const double y = std::ldexp(a, -q);  // exact: a power-of-two scaling of a <= 53-bit significand
    const double yi = std::floor(y);
    const double frac = y - yi;           // exact, in [0, 1)
    const bool up = detail::rounds_up(o.mode, frac, yi, neg, draw);
    r = std::ldexp(yi + (up ? 1.0 : 0.0), q);
  }
  if (r > f.max_finite()) return overflow_value(neg, f, o);
  if (o.flush_output && r < f.min_normal()) r = 0.0;
  return neg ? -r : r;
}

// One rounding of the exact value x = hi + lo. Why not simply round(nextafter(hi, toward lo)) for targets
// narrower than double: that keeps x's side of hi, but the neighbour can itself be a grid point of the
// target (hi = 1 + 2^-23 − 2^-52, lo = 2^-54: RD to fp32 of x is 1, of the neighbour 1 + 2^-23), and at
// p = 52, 53 the midpoints are not even doubles. Instead the quantum 2^q of x's binade is taken from hi,
// x·2^-q = yi + (rh + rl) with yi = floor(hi·2^-q), rh = hi·2^-q − yi (both exact) and rl = lo·2^-q (exact
// unless it underflows, when only its sign matters: every threshold below is a multiple of 2^-54 away from
// rh), and TwoSum [ORO05] gives frac = s + t exactly with s = RN(frac). Comparisons of frac with a double c
// are then exact: frac > c iff s > c or (s == c and t > 0), since RN is monotone. Hence the mode decisions
// (tie, sticky, odd/even, stochastic threshold) are made on the exact x: one rounding, for every p <= 53,
// target subnormals included (q is the subnormal quantum there, hi·2^-q is then a scaling up, exact).
double round_sum(double hi, double lo, const Format& f, const RoundOptions& o, RandomBits* rng) {
  if (!std::isfinite(hi)) return round(hi, f, o, rng);  // ±inf, NaN: the residual of such a sum is meaningless
  if (lo == 0.0) return round(hi, f, o, rng);  // (hi itself: −0 + +0 would lose an exact −0's sign)
  if (hi == 0.0 || std::isnan(lo)) return round(hi + lo, f, o, rng);
  // The contract (round.hpp): |lo| <= ulp(hi)/2, as two_sum, two_prod, exact_quotient and renormalised
  // expansions give it; the decisions below read lo as the part below hi's last bit.
  PASA_ASSERT(std::isinf(lo) ||
              std::abs(lo) <= 0.5 * (std::nextafter(std::abs(hi), std::numeric_limits<double>::infinity()) - std::abs(hi)));
  if (uses_random_bits(o.mode) && rng == nullptr)
    throw std::invalid_argument("stochastic and hybrid rounding need a seeded random source");
  const std::uint64_t draw = uses_random_bits(o.mode) ? rng->next() : 0;
  if (!f.ieee_like_grid()) return detail::round_sum_extended(hi, lo, f, o, draw);
  const bool neg = std::signbit(hi);  // x has hi's sign: |lo| <= ulp(hi)/2 < |hi|
  const double ah = std::fabs(hi);
  const double al = neg ? -lo : lo;  // x = ah + al > 0
  const double mn = f.min_normal();
  if (o.flush_input && (ah < mn || (ah == mn && al < 0))) return neg ? -0.0 : 0.0;
  const int emin = f.emin();
  int e = std::ilogb(ah);
  if (al < 0 && ah == std::ldexp(1.0, e)) --e;  // x lies just below a power of two: the binade below
  const int q = e >= emin ? e - (f.p - 1) : (f.subnormals ? emin - (f.p - 1) : emin);
  const double yh = std::ldexp(ah, -q);
  double yi = std::floor(yh);
  double rl = std::ldexp(al, -q);
  if (rl == 0.0) rl = std::copysign(std::numeric_limits<double>::denorm_min(), al);
  DD z = two_sum(yh - yi, rl);  // frac = z.hi + z.lo in [-1, 3/2)
  if (z.hi >= 1.0) {            // move a whole quantum into yi: z.hi − 1 is exact (Sterbenz)
    yi += 1.0;
    z = two_sum(z.hi - 1.0, z.lo);
  }
  // fl = floor(frac) in {-1, 0}; the comparisons below are with fl + c, exact for c in [0, 1) on 2^-53.
  const double fl = (z.hi < 0.0 || (z.hi == 0.0 && z.lo < 0.0)) ? -1.0 : 0.0;
  const auto above = [&](double c) { return z.hi > c || (z.hi == c && z.lo > 0.0); };  // frac > c
  const bool exact = z.hi == fl && z.lo == 0.0;
  const double base = yi + fl;  // the grid point below x, in quanta (an integer below 2^54)
  const bool base_odd = std::fmod(base, 2.0) != 0.0;
  bool up = false;
  switch (o.mode) {
    case RoundMode::nearest_even: up = above(fl + 0.5) || (z.hi == fl + 0.5 && z.lo == 0.0 && base_odd); break;
    case RoundMode::nearest_away:
    case RoundMode::hybrid:  // (an untapered format: ties away)
      up = above(fl + 0.5) || (z.hi == fl + 0.5 && z.lo == 0.0); break;
    case RoundMode::toward_zero: up = false; break;
    case RoundMode::toward_pos: up = !exact && !neg; break;
    case RoundMode::toward_neg: up = !exact && neg; break;
    case RoundMode::odd: up = !exact && !base_odd; break;
    // u uniform on the multiples of 2^-53 in [0, 1): P(u < frac − fl) = ceil((frac − fl)·2^53)/2^53, the
    // exact distance rounded up to 53 bits (fl + u is exact: fl in {-1, 0}).
    case RoundMode::stochastic: up = above(fl + std::ldexp(static_cast<double>(draw >> 11), -53)); break;
  }
  double r = std::ldexp(base + (up ? 1.0 : 0.0), q);
  if (r > f.max_finite()) return overflow_value(neg, f, o);
  if (o.flush_output && r < mn) r = 0.0;
  return neg ? -r : r;
}

void round_sum_span(std::span<const double> hi, std::span<const double> lo, std::span<double> out, const Format& f,
                    const RoundOptions& o, RandomBits* rng) {
  if (hi.size() != lo.size() || hi.size() != out.size())
    throw std::invalid_argument("round_sum_span: hi, lo and output sizes differ");
  for (std::size_t i = 0; i < hi.size(); ++i) out[i] = round_sum(hi[i], lo[i], f, o, rng);
}

void round_span(std::span<const double> in, std::span<double> out, const Format& f, const RoundOptions& o,
                RandomBits* rng) {
  if (in.size() != out.size()) throw std::invalid_argument("round_span: input and output sizes differ");
  detail::check_flush_options(f, o);
  if (nearest_kernel(f, o)) {
    const RneKernel<double, std::uint64_t> k(f, o);
    for (size_t i = 0; i < in.size(); ++i) out[i] = k(in[i]);
    return;
  }
  for (size_t i = 0; i < in.size(); ++i) out[i] = round(in[i], f, o, rng);
}

void round_span_portable(std::span<const float> in, std::span<float> out, const Format& f, const RoundOptions& o,
                         RandomBits* rng) {
  if (in.size() != out.size()) throw std::invalid_argument("round_span: input and output sizes differ");
  // The float kernel needs the format's grid, subnormal spacing included, to be made of float values.
  const bool fits_float = f.emax <= 127 && f.emin() - f.p + 24 >= -126;
  detail::check_flush_options(f, o);
  if (nearest_kernel(f, o) && fits_float) {
    const RneKernel<float, std::uint32_t> k(f, o);
    for (size_t i = 0; i < in.size(); ++i) out[i] = k(in[i]);
    return;
  }
  // Other modes and wider formats: widen exactly to double, round once there.
  for (size_t i = 0; i < in.size(); ++i) {
    const double r = round(static_cast<double>(in[i]), f, o, rng);
    if (std::isfinite(r) && std::fabs(r) > std::numeric_limits<float>::max())
      throw std::domain_error(fmt::format("round_span: {} rounds to {} which a float cannot hold", in[i], r));
    out[i] = static_cast<float>(r);
  }
}

void round_span(std::span<const float> in, std::span<float> out, const Format& f, const RoundOptions& o,
                RandomBits* rng) {
  if (in.size() != out.size()) throw std::invalid_argument("round_span: input and output sizes differ");
  if (float_range_fast_path(f, o)) {
    round_float_range(in.data(), out.data(), in.size(), f.p);
    return;
  }
  size_t i = 0;
#ifdef PASA_HAVE_F16C
  // F16C's vcvtps2ph rounds float to fp16 with RNE, gradual underflow and overflow to inf: the same
  // bits as the portable kernel for the plain IEEE options (checked over all 2^32 floats by a [long] test;
  // NaNs stay NaN, their payload may differ). AVX512-BF16's vcvtneps2bf16 is not used: it flushes
  // subnormal inputs and outputs to zero whatever the options say, so it does not give the same bits.
  if (o.mode == RoundMode::nearest_even && f == format_by_name("fp16") && o.overflow == Overflow::ieee &&
      !o.flush_input && !o.flush_output) {
    for (; i + 8 <= in.size(); i += 8) {
      const __m256 v = _mm256_loadu_ps(in.data() + i);
      const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(h));
    }
  }
#endif
  round_span_portable(in.subspan(i), out.subspan(i), f, o, rng);
}

std::uint64_t encode(double x, const Format& f) {
  if (!f.ieee_like_grid()) return detail::encode_extended(x, f);
  if (std::isnan(x) && !f.has_nan())
    throw std::domain_error(fmt::format("format {} has no NaN (every pattern is a number; OCP MX v1.0 §5.3.2)", f.name));
  const int nbits = f.storage_bits();
  const int w = f.exponent_bits();
  const std::uint64_t all_exp = (std::uint64_t(1) << w) - 1;
  const std::uint64_t frac_mask = (std::uint64_t(1) << (f.p - 1)) - 1;
  const std::uint64_t sign = std::signbit(x) ? std::uint64_t(1) << (nbits - 1) : 0;
  if (std::isnan(x)) {  // the canonical quiet NaN, with x's sign
    if (f.specials == Specials::fn) return sign | (all_exp << (f.p - 1)) | frac_mask;
    return sign | (all_exp << (f.p - 1)) | (std::uint64_t(1) << (f.p - 2));
  }
  if (std::isinf(x)) {
    if (!f.has_infinity()) throw std::domain_error(fmt::format("format {} has no infinity", f.name));
    return sign | (all_exp << (f.p - 1));
  }
  if (round(x, f) != x || (x != 0 && std::fabs(x) < f.min_subnormal()))
    throw std::domain_error(fmt::format("{} is not a value of format {} (round it first)", x, f.name));
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  const int e = std::ilogb(a);
  if (e < f.emin()) {
    const auto m = static_cast<std::uint64_t>(std::ldexp(a, -(f.emin() - f.p + 1)));
    return sign | m;
  }
  const auto m = static_cast<std::uint64_t>(std::ldexp(a, -(e - f.p + 1))) & frac_mask;
  return sign | (static_cast<std::uint64_t>(e + f.bias()) << (f.p - 1)) | m;
}

namespace {
// encode() of a double by its bit fields alone: sign, exponent and the fraction's top p - 1 bits, with the
// checks that the dropped bits are zero and the exponent in range. `bad` is set to 1 for what it does not
// decide (a value outside the format, or one it cannot place: encode_span asks encode() about those).
// Written with all-ones / all-zeros masks of 64-bit integers instead of conditions, so that GCC vectorises
// the loop over it (it does not with the conditions: their booleans of mixed widths).
struct FastEncoder {
  using U = std::uint64_t;
  static U mask(bool c) { return U(0) - U(c); }
  static U sel(U m, U a, U b) { return (a & m) | (b & ~m); }
  std::int64_t emin, emax, bias, drop, pm1, sign_shift;
  U subnormals, fn, has_inf, has_nan, frac_mask, low_mask, inf_bits, nan_bits;

  explicit FastEncoder(const Format& f)
      : emin(f.emin()), emax(f.emax), bias(f.bias()), drop(53 - f.p), pm1(f.p - 1), sign_shift(f.storage_bits() - 1),
        subnormals(f.subnormals), fn(f.specials == Specials::fn), has_inf(f.has_infinity()), has_nan(f.has_nan()) {
    frac_mask = (U(1) << (f.p - 1)) - 1;
    low_mask = (U(1) << drop) - 1;
    inf_bits = ((U(1) << f.exponent_bits()) - 1) << (f.p - 1);
    nan_bits = f.has_nan() ? encode(std::numeric_limits<double>::quiet_NaN(), f) : 0;
  }
  U operator()(double x, U& bad) const {
    const auto u = std::bit_cast<U>(x);
    const U sign = (u >> 63) << sign_shift;
    const U ea = (u >> 52) & 0x7ff;
    const U m = u & ((U(1) << 52) - 1);
    const U special = mask(ea == 0x7ff), zero_exp = mask(ea == 0);
    const auto e = static_cast<std::int64_t>(sel(zero_exp, 1, ea)) - 1023;  // a subnormal double: 2^-1022 · 0.m
    const U sig = m | (~zero_exp & (U(1) << 52));
    // A normal of the format: the exponent rebiased, the fraction's dropped bits zero (fn: S.1111.111 is NaN).
    const U normal = ~zero_exp & mask(e >= emin);
    const U frac = m >> drop;
    const U normal_bits = (static_cast<U>(e + bias) << pm1) | frac;
    const U normal_bad = mask((m & low_mask) != 0) | (mask(fn != 0) & mask(e == emax) & mask(frac == frac_mask)) |
                         mask(e > emax);
    // Below the format's normals (zero too): the significand shifted right by t, the bits shifted out zero.
    const std::int64_t t = drop + emin - e;
    const U tc = static_cast<U>(t < 0 ? 0 : t > 63 ? 63 : t);
    const U sub_bits = sig >> tc;
    const U sub_bad = (mask(subnormals == 0) & mask(sig != 0)) | mask(t < 0) | mask(((sub_bits << tc) ^ sig) != 0);
    const U bits = sel(special, sel(mask(m != 0), nan_bits, inf_bits), sel(normal, normal_bits, sub_bits));
    bad = sel(special, (mask(m == 0) & mask(has_inf == 0)) | (mask(m != 0) & mask(has_nan == 0)),
              sel(normal, normal_bad, sub_bad)) & 1;
    return sign | bits;
  }
};

// The slow path of encode_span: encode()'s answer, or nothing when x is not a value of f.
[[gnu::noinline]] std::optional<std::uint64_t> encode_or_nothing(double x, const Format& f) {
  try {
    return encode(x, f);
  } catch (const std::domain_error&) {
    return std::nullopt;
  }
}
}  // namespace

template <class In, class Out>
std::size_t encode_span(std::span<const In> in, std::span<Out> out, const Format& f) {
  if (in.size() != out.size()) throw std::invalid_argument("encode_span: input and output sizes differ");
  if (static_cast<int>(sizeof(Out)) * 8 < f.storage_bits())
    throw std::invalid_argument(fmt::format("encode_span: {} bits cannot hold format {}", sizeof(Out) * 8, f.name));
  if (!f.ieee_like_grid()) {  // (the formats beyond IEEE-like grids: no bit-field shortcut, encode() itself)
    for (std::size_t i = 0; i < in.size(); ++i) {
      const auto b = encode_or_nothing(static_cast<double>(in[i]), f);
      if (!b) return i;
      out[i] = static_cast<Out>(*b);
    }
    return in.size();
  }
  const FastEncoder enc(f);
  constexpr std::size_t kChunk = 1024;  // ok is checked per chunk, so that the inner loop has no exit
  for (std::size_t i0 = 0; i0 < in.size(); i0 += kChunk) {
    const std::size_t i1 = std::min(in.size(), i0 + kChunk);
    // Two maps without a reduction (which GCC does not vectorise here): the patterns, and a flag per element.
    const FastEncoder k = enc;
    const In* src = in.data();
    Out* dst = out.data();
    std::uint64_t flag[kChunk];
    for (std::size_t i = i0; i < i1; ++i) {
      std::uint64_t b = 0;
      dst[i] = static_cast<Out>(k(static_cast<double>(src[i]), b));
      flag[i - i0] = b;
    }
    static constexpr std::uint64_t kZeros[kChunk] = {};
    const bool bad = std::memcmp(flag, kZeros, (i1 - i0) * sizeof(std::uint64_t)) != 0;
    if (!bad) continue;
    for (std::size_t i = i0; i < i1; ++i) {
      std::uint64_t one_bad = 0;
      out[i] = static_cast<Out>(enc(static_cast<double>(in[i]), one_bad));
      if (one_bad == 0) continue;
      const auto b = encode_or_nothing(static_cast<double>(in[i]), f);
      if (!b) return i;
      out[i] = static_cast<Out>(*b);
    }
  }
  return in.size();
}
#define PASA_ENCODE_SPAN(In, Out) \
  template std::size_t encode_span<In, Out>(std::span<const In>, std::span<Out>, const Format&);
PASA_ENCODE_SPAN(double, std::uint8_t)
PASA_ENCODE_SPAN(double, std::uint16_t)
PASA_ENCODE_SPAN(double, std::uint32_t)
PASA_ENCODE_SPAN(double, std::uint64_t)
PASA_ENCODE_SPAN(float, std::uint8_t)
PASA_ENCODE_SPAN(float, std::uint16_t)
PASA_ENCODE_SPAN(float, std::uint32_t)
PASA_ENCODE_SPAN(float, std::uint64_t)
#undef PASA_ENCODE_SPAN

double decode(std::uint64_t bits, const Format& f) {
  if (!f.ieee_like_grid()) return detail::decode_extended(bits, f);
  const int nbits = f.storage_bits();
  if (nbits < 64 && (bits >> nbits) != 0)
    throw std::domain_error(fmt::format("bit pattern {:#x} is wider than format {} ({} bits)", bits, f.name, nbits));
  const int w = f.exponent_bits();
  const std::uint64_t all_exp = (std::uint64_t(1) << w) - 1;
  const std::uint64_t frac_mask = (std::uint64_t(1) << (f.p - 1)) - 1;
  const bool neg = (bits >> (nbits - 1)) & 1;
  const std::uint64_t ef = (bits >> (f.p - 1)) & all_exp;
  const std::uint64_t frac = bits & frac_mask;
  double v;
  if (f.specials == Specials::ieee && ef == all_exp) {
    v = frac == 0 ? kInf : std::numeric_limits<double>::quiet_NaN();
  } else if (f.specials == Specials::fn && ef == all_exp && frac == frac_mask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (ef == 0) {
    if (frac != 0 && !f.subnormals)
      throw std::domain_error(fmt::format("bit pattern {:#x} is a subnormal; format {} has none", bits, f.name));
    v = std::ldexp(static_cast<double>(frac), f.emin() - f.p + 1);
  } else {
    const int e = static_cast<int>(ef) - f.bias();
    if (e > f.emax) throw std::domain_error(fmt::format("bit pattern {:#x} is outside format {}", bits, f.name));
    v = std::ldexp(static_cast<double>(frac | (std::uint64_t(1) << (f.p - 1))), e - f.p + 1);
  }
  return neg ? -v : v;
}

namespace {
struct ModeName {
  RoundMode mode;
  const char* short_name;
  const char* long_name;
};
constexpr ModeName kModes[] = {
    {RoundMode::nearest_even, "rne", "nearest_even"}, {RoundMode::nearest_away, "rna", "nearest_away"},
    {RoundMode::toward_zero, "rz", "toward_zero"},    {RoundMode::toward_pos, "ru", "toward_pos"},
    {RoundMode::toward_neg, "rd", "toward_neg"},      {RoundMode::odd, "ro", "odd"},
    {RoundMode::stochastic, "sr", "stochastic"},     {RoundMode::hybrid, "hr", "hybrid"},
};
}  // namespace

RoundMode round_mode_by_name(std::string_view name) {
  for (const auto& m : kModes)
    if (name == m.short_name || name == m.long_name) return m.mode;
  throw InputError(
      fmt::format("unknown rounding mode \"{}\"; known modes: {}", name, known_round_mode_names()));
}
std::string round_mode_name(RoundMode mode) {
  for (const auto& m : kModes)
    if (m.mode == mode) return m.short_name;
  return "?";
}
std::string known_round_mode_names() {
  std::string s;
  for (const auto& m : kModes) s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", m.short_name, m.long_name);
  return s;
}
Overflow overflow_by_name(std::string_view name) {
  if (name == "ieee") return Overflow::ieee;
  if (name == "saturate") return Overflow::saturate;
  throw InputError(fmt::format("unknown overflow policy \"{}\"; known: ieee, saturate", name));
}
std::string overflow_name(Overflow o) { return o == Overflow::ieee ? "ieee" : "saturate"; }
Convention convention_by_name(std::string_view name) {
  if (name == "exact") return Convention::exact;
  if (name == "ml_dtypes") return Convention::ml_dtypes;
  if (name == "torch") return Convention::torch;
  throw InputError(fmt::format("unknown conversion convention \"{}\"; known: exact, ml_dtypes, torch", name));
}
std::string convention_name(Convention c) {
  return c == Convention::exact ? "exact" : c == Convention::ml_dtypes ? "ml_dtypes" : "torch";
}

}  // namespace pasa
