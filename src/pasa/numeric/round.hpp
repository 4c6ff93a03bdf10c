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

enum class RoundMode { nearest_even, toward_zero, toward_pos, toward_neg, odd, stochastic };

enum class Overflow {
  ieee,      // beyond the format's range: inf (NaN for fp8_e4m3fn, which has no inf); directed modes that
             // point back toward zero give the largest finite value, as IEEE 754 §7.4 says.
  saturate,  // clamp to ±max_finite (what FP8 training and FA3 use); ±inf inputs saturate too.
};

struct RoundOptions {
  RoundMode mode = RoundMode::nearest_even;
  Overflow overflow = Overflow::ieee;
  bool flush_input = false;   // DAZ: inputs below the format's smallest normal are treated as ±0
  bool flush_output = false;  // FTZ: results that would be subnormal become ±0
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

// Round x to fmt. rng is required for RoundMode::stochastic and ignored otherwise.
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
// proved algorithms using rounding to odd", IEEE TC 57(4)]. Cheap and branch-light, so that hot loops keep
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
  return f.p <= 51 && o.mode != RoundMode::stochastic;
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
RoundMode round_mode_by_name(std::string_view name);  // "rne", "rz", "ru", "rd", "ro", "sr" (+ long names)
std::string round_mode_name(RoundMode m);
std::string known_round_mode_names();
Overflow overflow_by_name(std::string_view name);     // "ieee", "saturate"
std::string overflow_name(Overflow o);

}  // namespace pasa
