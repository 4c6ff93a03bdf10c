// The rounding layer's internals shared by round.cpp (IEEE 754-like grids: the hot, vectorised paths) and
// round_extended.cpp (the formats beyond them: tapered HiFloat8, unsigned zero-less E8M0, integer grids).
// Not part of the library's interface: include round.hpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa::detail {

// Whether a grid value yi (in quanta, an integer) is rounded up to yi + 1 for the exact distance frac in
// [0, 1) of |x| above it: the mode's rule (stochastic: the 53-bit uniform draw below frac). One definition
// for round() and round_extended(), so that a format's grid is the only thing that differs between them.
inline bool rounds_up(RoundMode mode, double frac, double yi, bool neg, std::uint64_t draw) {
  switch (mode) {
    case RoundMode::nearest_even: return frac > 0.5 || (frac == 0.5 && std::fmod(yi, 2.0) != 0.0);
    case RoundMode::nearest_away: return frac >= 0.5;  // below min_sub too: min_sub/2 goes up to min_sub
    case RoundMode::toward_zero: return false;
    case RoundMode::toward_pos: return frac > 0.0 && !neg;
    case RoundMode::toward_neg: return frac > 0.0 && neg;
    case RoundMode::odd: return frac > 0.0 && std::fmod(yi, 2.0) == 0.0;
    // Round up with probability frac: u is uniform on the multiples of 2^-53 in [0, 1), so P(u < frac) is
    // frac rounded up to a multiple of 2^-53 (exact whenever x is at least the quantum 2^q).
    case RoundMode::stochastic: return std::ldexp(static_cast<double>(draw >> 11), -53) < frac;
    case RoundMode::hybrid: return frac >= 0.5;  // (an untapered format: ties away; see effective_mode)
  }
  return false;
}

// The mode that decides binade e: hybrid is ties-away where the binade holds the format's full precision and
// stochastic where it holds fewer bits [Luo et al. 2024, §3: HR; CANN's CAST_HYBRID: TA for |E| < 4, SR
// elsewhere]; every other mode is itself.
inline RoundMode effective_mode(RoundMode mode, const Format& f, int e) {
  if (mode != RoundMode::hybrid) return mode;
  return f.p_at(e) == f.p ? RoundMode::nearest_away : RoundMode::stochastic;
}

// The value an out-of-range magnitude becomes (round.cpp).
double overflow_value(bool neg, const Format& f, const RoundOptions& o);

// round() / round_sum() of a finite or infinite, non-NaN x for a format with ieee_like_grid() false;
// `draw` is the call's random draw (0 in the deterministic modes).
double round_extended(double x, const Format& f, const RoundOptions& o, std::uint64_t draw);
double round_sum_extended(double hi, double lo, const Format& f, const RoundOptions& o, std::uint64_t draw);
// encode() / decode() for those formats (the same contracts).
std::uint64_t encode_extended(double x, const Format& f);
double decode_extended(std::uint64_t bits, const Format& f);
// FTZ / DAZ are defined for IEEE-like grids only: an InputError naming the format otherwise.
void check_flush_options(const Format& f, const RoundOptions& o);

}  // namespace pasa::detail
