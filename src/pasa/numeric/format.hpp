// Numeric formats as values. A format is a descriptor (precision, exponent range, subnormals, special-value
// convention); every rounding kernel takes one, so a new format needs no new code path (the CPFloat way:
// descriptor separate from kernels).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pasa {

// How the special values are encoded (and whether there are any).
enum class Specials {
  ieee,    // top exponent field reserved for inf and NaN (fp16, bf16, fp32, fp8_e5m2, ...)
  fn,      // "finite, NaN only" (OCP fp8 E4M3FN): no infinities, the top exponent field holds normal
           // numbers, and only the all-ones pattern (S.1111.111) is NaN. Max finite is one ulp lower.
  fnu,     // no infinities, the all-ones exponent field is NaN and nothing else is reserved (OCP MX E8M0:
           // 0xFF is NaN [OCP MX v1.0 §5.4.1]); with no fraction bits that field is the one pattern 0xFF.
  finite,  // no infinities and no NaN: every encoding is a number (OCP MX FP6 / FP4 [OCP MX v1.0 §5.3.2],
           // integers). The exponent field is used as fn uses it, with no pattern held back.
  top_inf, // HiFloat8 [Luo et al. 2024, §2]: ±inf is the pattern one ulp above the largest finite value
           // (in the top binade), NaN is the pattern a negative zero would have, and there is one zero.
};

// How a value's storage bits are laid out (encode / decode).
enum class Layout {
  sign_exponent_fraction,  // IEEE 754 §3.4: sign (signed formats only), biased exponent, fraction
  dot_prefix,              // HiFloat8 [Luo et al. 2024, §2]: sign, prefix-coded dot field giving the exponent
                           // width D, sign-magnitude exponent with an implicit top magnitude bit, mantissa;
                           // dot 0000 is the denormal mode (mantissa m: 2^(m - 23))
  twos_complement,         // integers: the value's two's complement, storage_bits() wide
};

// A run of binades [2^lo, 2^(hi+1)) holding p significand bits (a tapered format's precision table).
struct Binades {
  int lo = 0, hi = 0, p = 0;
  bool operator==(const Binades&) const = default;
};
inline constexpr int kDerivedEmin = -100000;  // Format::emin_: derive emin from emax and the specials
inline constexpr std::size_t kMaxTaperRuns = 8;
using Taper = std::array<Binades, kMaxTaperRuns>;

struct Format {
  std::string name;         // "fp16", or "custom(p=...,emax=...)"
  int p = 53;               // significand bits, implicit bit included (a tapered format: its largest)
  int emax = 1023;          // exponent of the largest binade
  bool subnormals = true;   // gradual underflow below 2^emin
  Specials specials = Specials::ieee;
  // Beyond (p, emax): the defaults are an IEEE 754-like format, and every rounding kernel reads these.
  int emin_ = kDerivedEmin;  // the smallest normal binade, where it is not 1 - emax (ieee; fn: 2 - emax)
  bool is_signed = true;     // false: no sign bit, negative values are out of range (E8M0)
  bool has_zero = true;      // false: the smallest value is 2^emin, no zero (E8M0)
  bool extra_negative = false;  // one more value, -2^(emax+1), below -max_finite (full-range integers)
  Layout layout = Layout::sign_exponent_fraction;
  int storage = 0;           // storage bits where the layout does not derive them (dot_prefix); else 0
  Taper taper{};             // tapered precision: p in binade e is that of the run holding e
  int taper_runs = 0;        // 0: p in every binade

  int emin() const {
    return emin_ != kDerivedEmin ? emin_
                                 : 1 - emax + (specials == Specials::fn || specials == Specials::finite ? 1 : 0);
  }
  // Significand bits in binade e (2^e <= |x| < 2^(e+1)): p, or a tapered format's entry for e (binades
  // beyond its table take the nearest end's precision).
  int p_at(int e) const {
    if (taper_runs == 0) return p;
    if (e < taper[0].lo) return taper[0].p;
    for (int i = 0; i < taper_runs; ++i)
      if (e <= taper[i].hi) return taper[i].p;
    return taper[taper_runs - 1].p;
  }
  bool tapered() const { return taper_runs > 0; }
  // A plain IEEE 754-like grid (signed, a zero, one precision, the derived emin, the IEEE layout): what the
  // vectorised kernels and the float fast paths are written for. The formats that are not go through the
  // general per-element rounding.
  bool ieee_like_grid() const {
    return is_signed && has_zero && !extra_negative && taper_runs == 0 && emin_ == kDerivedEmin &&
           layout == Layout::sign_exponent_fraction;
  }
  double max_finite() const;      // largest finite value
  double max_negative() const;    // largest finite magnitude of a negative value (max_finite() but for
                                  // extra_negative formats); 0 for an unsigned format
  double min_normal() const;      // 2^emin
  double min_subnormal() const;   // 2^(emin-p+1), or min_normal() without subnormals
  double unit_roundoff() const;   // u = 2^-p (round to nearest)
  bool has_infinity() const { return specials == Specials::ieee || specials == Specials::top_inf; }
  bool has_nan() const { return specials != Specials::finite; }
  bool signed_zero() const {
    return is_signed && has_zero && specials != Specials::top_inf && layout != Layout::twos_complement;
  }

  // Storage: sign_exponent_fraction: 1 sign bit (signed formats), exponent_bits(), p-1 fraction bits;
  // twos_complement: emax + 2 bits; dot_prefix: `storage`. At most 64 bits in all.
  int exponent_bits() const;
  int storage_bits() const;
  int bias() const;

  bool operator==(const Format& o) const {
    return p == o.p && emax == o.emax && subnormals == o.subnormals && specials == o.specials && emin_ == o.emin_ &&
           is_signed == o.is_signed && has_zero == o.has_zero && extra_negative == o.extra_negative &&
           layout == o.layout && storage == o.storage && taper_runs == o.taper_runs && taper == o.taper;
  }
};

// The registry of built-in formats: ONE table, read by format_by_name, builtin_formats, known_format_names
// (error messages, --help) and docs/formats-and-rounding.md. A new format is one entry here (and, where
// numpy or ml_dtypes has a dtype for it, that name): every rounding kernel takes it as a descriptor. Names
// are LLVM's / ml_dtypes'; `alias` is another spelling users type (the OCP name of E4M3 without LLVM's "fn"
// suffix [OCP8]); `dtype` is numpy.dtype(...).name of the same format (numpy's own or ml_dtypes').
// The fields after `alias` are Format's descriptor beyond (p, emax), with its defaults.
struct FormatEntry {
  std::string_view name;
  int p = 53, emax = 1023;
  bool subnormals = true;
  Specials specials = Specials::ieee;
  std::string_view dtype;  // empty: no numpy / ml_dtypes dtype
  std::string_view alias;  // empty: none
  int emin = kDerivedEmin;
  bool is_signed = true, has_zero = true, extra_negative = false;
  Layout layout = Layout::sign_exponent_fraction;
  int storage = 0;
  Taper taper{};
  int taper_runs = 0;
};
// HiFloat8's precision per binade [Luo et al. 2024, "Ascend HiFloat8 Format for Deep Learning", §2, Table 1]:
// dot field D = 0..4 holds |E| = 0, 1, 2-3, 4-7, 8-15 with 3, 3, 3, 2, 1 mantissa bits; the denormal mode
// adds the binades 2^-22..2^-16 (one value each: p = 1). 38 binades, 2^-22 .. 2^15.
inline constexpr Taper kHif8Taper = {{{-22, -16, 1}, {-15, -8, 2}, {-7, -4, 3}, {-3, 3, 4}, {4, 7, 3}, {8, 15, 2}}};
// (GCC 12's -Wextra warns of the members a designated initializer leaves at their defaults, the point here.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
inline constexpr std::array<FormatEntry, 16> kBuiltinFormats = {{
    {.name = "fp64", .p = 53, .emax = 1023, .dtype = "float64"},
    {.name = "fp32", .p = 24, .emax = 127, .dtype = "float32"},
    {.name = "tf32", .p = 11, .emax = 127},
    {.name = "bf16", .p = 8, .emax = 127, .dtype = "bfloat16"},
    {.name = "fp16", .p = 11, .emax = 15, .dtype = "float16"},
    {.name = "fp8_e4m3fn", .p = 4, .emax = 8, .specials = Specials::fn, .dtype = "float8_e4m3fn", .alias = "fp8_e4m3"},
    {.name = "fp8_e5m2", .p = 3, .emax = 15, .dtype = "float8_e5m2"},
    // OCP MX v1.0 §5.3.2 element formats: no inf, no NaN; max 7.5 (E2M3), 28 (E3M2), 6 (E2M1).
    {.name = "fp6_e2m3", .p = 4, .emax = 2, .specials = Specials::finite, .dtype = "float6_e2m3fn"},
    {.name = "fp6_e3m2", .p = 3, .emax = 4, .specials = Specials::finite, .dtype = "float6_e3m2fn"},
    {.name = "fp4_e2m1", .p = 2, .emax = 2, .specials = Specials::finite, .dtype = "float4_e2m1fn"},
    // OCP MX v1.0 §5.4.1 scale format: 8 exponent bits, bias 127, 2^-127 .. 2^127, 0xFF NaN, no sign, no zero.
    {.name = "e8m0", .p = 1, .emax = 127, .subnormals = false, .specials = Specials::fnu, .dtype = "float8_e8m0fnu",
     .emin = -127, .is_signed = false, .has_zero = false},
    // Integers as float grids: one binade [2^(b-2), 2^(b-1)) plus subnormals of spacing 1 below it, so that
    // the grid is every integer up to 2^(b-1) - 1 (symmetric); the full-range variant adds -2^(b-1).
    {.name = "int8", .p = 7, .emax = 6, .specials = Specials::finite, .emin = 6, .layout = Layout::twos_complement},
    {.name = "int8_full", .p = 7, .emax = 6, .specials = Specials::finite, .emin = 6, .extra_negative = true,
     .layout = Layout::twos_complement},
    {.name = "int4", .p = 3, .emax = 2, .specials = Specials::finite, .emin = 2, .layout = Layout::twos_complement},
    {.name = "int4_full", .p = 3, .emax = 2, .specials = Specials::finite, .emin = 2, .extra_negative = true,
     .layout = Layout::twos_complement},
    {.name = "hif8", .p = 4, .emax = 15, .subnormals = false, .specials = Specials::top_inf, .alias = "hifloat8",
     .emin = -22, .layout = Layout::dot_prefix, .storage = 8, .taper = kHif8Taper, .taper_runs = 6},
}};
#pragma GCC diagnostic pop

// Built-in formats by name: fp64, fp32, tf32, bf16, fp16, fp8_e4m3fn, fp8_e5m2 (LLVM / ml_dtypes names; OCP
// E4M3 has no infinities, hence "fn", [OCP8]); "fp8_e4m3" is accepted as an alias of fp8_e4m3fn, and numpy's
// and ml_dtypes' dtype names (float64, float32, bfloat16, float16, float8_e4m3fn, float8_e5m2) too. Custom
// formats are spelled "p=<bits>,emax=<e>" (optionally ",subnormals=0"), e.g. "p=8,emax=15". Throws
// InputError with the list of known names when the name is unknown or the parameters impossible.
Format format_by_name(std::string_view name);
Format custom_format(int p, int emax, bool subnormals = true, Specials specials = Specials::ieee);  // InputError
const std::vector<Format>& builtin_formats();
std::string known_format_names();  // "fp64, fp32, ..." for error messages

}  // namespace pasa
