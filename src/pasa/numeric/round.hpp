// Rounding to a Format: one rounding from double (a float input converts to double exactly, so it is
// rounded once too), all the usual modes, per-call overflow and subnormal policies, and the storage bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "pasa/numeric/format.hpp"

namespace pasa {

// nearest_away: to nearest, ties away from zero (IEEE 754 roundTiesToAway): Ascend C's CAST_ROUND casts,
// and microxcaling's "nearest" element rounding for OCP MX formats. Nothing stores the enum's numeric
// values (files and the Python module use the names below), so it sits next to nearest_even.
// hybrid: HiFloat8's HR [Luo et al. 2024, §3; Ascend C RoundMode::CAST_HYBRID]: ties away (TA) in the binades
// that hold the format's full precision p (HiF8: |E| <= 3) and stochastic rounding in the tapered binades of
// fewer bits; one draw per element, like stochastic. For an untapered format it is nearest_away.
enum class RoundMode { nearest_even, nearest_away, toward_zero, toward_pos, toward_neg, odd, stochastic, hybrid };
inline bool uses_random_bits(RoundMode m) { return m == RoundMode::stochastic || m == RoundMode::hybrid; }

enum class Overflow {
  ieee,      // beyond the format's range: inf (NaN for fp8_e4m3fn, which has no inf); directed modes that
             // point back toward zero give the largest finite value, as IEEE 754 §7.4 says.
  saturate,  // clamp to ±max_finite (what FP8 training and FA3 use); ±inf inputs saturate too.
};

// Whose conversion rules decide the cases where libraries differ (docs/formats-and-rounding.md, "Conventions";
// results/hardware/formats/ holds the measured casts). Rounding of values inside the range is the same in all.
enum class Convention {
  exact,     // pasa's: the value nearest x (by the mode) among the format's values; NaN stays NaN, even for
             // formats without one (fp6/fp4/int: encode() refuses it)
  ml_dtypes, // ml_dtypes 0.6's casts: E8M0 rounds (0, 2^-126) as if code 0 were zero; fp6/fp4 NaN -> 0
  torch,     // torch 2.11's float8_e8m0fnu cast: the sign ignored, zero -> 2^-127, (0, 2^-126) as ml_dtypes
};

struct RoundOptions {
  RoundMode mode = RoundMode::nearest_even;
  Overflow overflow = Overflow::ieee;
  bool flush_input = false;   // DAZ: inputs below the format's smallest normal are treated as ±0
  bool flush_output = false;  // FTZ: results that would be subnormal become ±0
  Convention convention = Convention::exact;
};

// Seeded, reproducible source of random bits for stochastic rounding (SplitMix64: specified output on
// every platform). Each call to round() in stochastic mode consumes exactly one 64-bit draw.
class RandomBits {
 public:
  explicit RandomBits(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

// Round x to fmt. rng is required for RoundMode::stochastic and hybrid and ignored otherwise. Formats
// beyond IEEE 754-like grids (ieee_like_grid() false: tapered, unsigned, integer) go through the same
// function: the quantum of x is that of its binade (Format::p_at), and the range ends are the format's.
double round(double x, const Format& fmt, const RoundOptions& opt = {}, RandomBits* rng = nullptr);

// Round the exact value hi + lo (an unevaluated sum, |lo| <= ulp(hi)/2, as two_sum/two_prod/fma residuals
// give it) to fmt ONCE, in every mode, with the same overflow/ftz/daz policies as round(): lo is used as
// the sticky bit and for ties and directions (a tie of hi is no tie of hi + lo). Consumes one draw in
// stochastic mode, like round(); the probability of rounding away from zero is ceil(f·2^53)/2^53 for the exact
// distance f in [0, 1) of |hi + lo| above its truncation, in quanta: within 2^-53 of f.
double round_sum(double hi, double lo, const Format& fmt, const RoundOptions& opt = {}, RandomBits* rng = nullptr);
// Round-to-odd of hi + lo at double's 53 bits (hi if lo == 0 or hi is odd, else hi's neighbour toward lo):
// for a format of p <= 51 bits and a deterministic mode, round(sticky_fold(hi, lo)) == round_sum(hi, lo).
// Why: every point where a rounding to such a grid changes (its values, its midpoints, the overflow
// threshold max + ulp/2, the FTZ/DAZ threshold 2^emin) has at most p + 1 <= 52 significant bits, so it is
// an even double; the fold is odd unless it equals hi + lo, so it lies strictly between the same two such
// points as hi + lo, or is hi + lo [Boldo & Melquiond 2008, "Emulation of FMA and correctly rounded sums:
// proved algorithms using rounding to odd", IEEE TC 57(4)]. nearest_away has nearest_even's points (the
// midpoints) and only decides them the other way: the fold is a midpoint only where hi + lo is that
// midpoint, so the argument holds for it as it stands. Cheap and branch-light, so that hot loops keep
// the vectorised RNE kernels and float conversions; stochastic rounding needs round_sum (exact distance).
// The neighbour toward lo is one step of hi's bit pattern: +1 (away from zero) when lo has hi's sign, else
// −1 (toward zero; from a power of two this is the top of the binade below). Integer arithmetic only, so
// that loops over it vectorise. hi = 0 is returned as is (two_sum, two_prod and exact_quotient give lo = 0
// with it).
inline double sticky_fold(double hi, double lo) {
  constexpr std::uint64_t kMag = 0x7FFFFFFFFFFFFFFFull, kTop = 0x7FE0000000000000ull;  // kTop: 2^1023
  const std::uint64_t u = std::bit_cast<std::uint64_t>(hi), l = std::bit_cast<std::uint64_t>(lo);
  const std::uint64_t um = u & kMag;
  const bool fold = lo != 0.0 && (u & 1) == 0 && um < kTop && um != 0;
  const std::int64_t step = static_cast<std::int64_t>(u ^ l) < 0 ? -1 : 1;  // signs differ: toward zero
  return std::bit_cast<double>(fold ? u + static_cast<std::uint64_t>(step) : u);
}
inline bool sticky_fold_rounds_once(const Format& f, const RoundOptions& o) {
  return f.p <= 51 && !uses_random_bits(o.mode);
}
void round_sum_span(std::span<const double> hi, std::span<const double> lo, std::span<double> out, const Format& fmt,
                    const RoundOptions& opt = {}, RandomBits* rng = nullptr);

// Whole spans (in place or out of place; out may alias in). Uses the CPU's conversion instructions
// where they give the same bits (F16C for fp16 round-to-nearest-even from float), else a branch-light
// portable kernel with identical results. Stochastic spans draw one number per element, in order.
void round_span(std::span<const double> in, std::span<double> out, const Format& fmt,
                const RoundOptions& opt = {}, RandomBits* rng = nullptr);
void round_span(std::span<const float> in, std::span<float> out, const Format& fmt,
                const RoundOptions& opt = {}, RandomBits* rng = nullptr);

// The portable kernel alone, without conversion instructions: the bits round_span(float) gives on every
// CPU. Exposed so that tests and the benchmark can hold the instruction paths against it.
void round_span_portable(std::span<const float> in, std::span<float> out, const Format& fmt,
                         const RoundOptions& opt = {}, RandomBits* rng = nullptr);

// Rounding keeps NaN a NaN of the same sign, quiet, its payload cut to the format's fraction bits (what
// the CPU's conversion instructions do), so that an element's result never depends on its place in a span.

// Storage bits (right-aligned, fmt.storage_bits() wide). encode() requires a value of the format
// (round first) and throws std::domain_error otherwise; NaN encodes as the canonical quiet NaN with its sign.
std::uint64_t encode(double x, const Format& fmt);
double decode(std::uint64_t bits, const Format& fmt);
// encode() of every element, at memory speed (bit operations on the double, no rounding): Out is
// std::uint8_t, uint16_t, uint32_t or uint64_t, at least fmt.storage_bits() wide; In is float or double.
// Returns in.size() when every element is a value of fmt, else the index of the first that is not (encode()
// of it says why; out is then partly written).
template <class In, class Out>
std::size_t encode_span(std::span<const In> in, std::span<Out> out, const Format& fmt);

// By name; an unknown name is an InputError listing the known ones.
RoundMode round_mode_by_name(std::string_view name);  // "rne", "rna", "rz", "ru", "rd", "ro", "sr", "hr" (+ long names)
std::string round_mode_name(RoundMode m);
std::string known_round_mode_names();
Overflow overflow_by_name(std::string_view name);     // "ieee", "saturate"
std::string overflow_name(Overflow o);
Convention convention_by_name(std::string_view name);  // "exact", "ml_dtypes", "torch"
std::string convention_name(Convention c);

}  // namespace pasa
