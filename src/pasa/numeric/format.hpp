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

// How the top of the exponent range is used.
enum class Specials {
  ieee,  // top exponent field reserved for inf and NaN (fp16, bf16, fp32, fp8_e5m2, ...)
  fn,    // "finite, NaN only" (OCP fp8 E4M3FN): no infinities, the top exponent field holds normal
         // numbers, and only the all-ones pattern (S.1111.111) is NaN. Max finite is one ulp lower.
};

struct Format {
  std::string name;         // "fp16", or "custom(p=...,emax=...)"
  int p = 53;               // significand bits, implicit bit included
  int emax = 1023;          // exponent of the largest binade
  bool subnormals = true;   // gradual underflow below 2^emin
  Specials specials = Specials::ieee;

  int emin() const { return 1 - emax + (specials == Specials::fn ? 1 : 0); }
  double max_finite() const;      // largest finite value
  double min_normal() const;      // 2^emin
  double min_subnormal() const;   // 2^(emin-p+1), or min_normal() without subnormals
  double unit_roundoff() const;   // u = 2^-p (round to nearest)
  bool has_infinity() const { return specials == Specials::ieee; }

  // Storage: 1 sign bit, exponent_bits(), p-1 fraction bits; at most 64 bits in all.
  int exponent_bits() const;
  int storage_bits() const { return 1 + exponent_bits() + (p - 1); }
  int bias() const;

  bool operator==(const Format& o) const {
    return p == o.p && emax == o.emax && subnormals == o.subnormals && specials == o.specials;
  }
};

// The registry of built-in formats: ONE table, read by format_by_name, builtin_formats, known_format_names
// (error messages, --help) and docs/formats-and-rounding.md. A new format is one entry here (and, where
// numpy or ml_dtypes has a dtype for it, that name): every rounding kernel takes it as a descriptor. Names
// are LLVM's / ml_dtypes'; `alias` is another spelling users type (the OCP name of E4M3 without LLVM's "fn"
// suffix [OCP8]); `dtype` is numpy.dtype(...).name of the same format (numpy's own or ml_dtypes').
struct FormatEntry {
  std::string_view name;
  int p, emax;
  bool subnormals;
  Specials specials;
  std::string_view dtype;  // empty: no numpy / ml_dtypes dtype
  std::string_view alias;  // empty: none
};
inline constexpr std::array<FormatEntry, 7> kBuiltinFormats = {{
    {"fp64", 53, 1023, true, Specials::ieee, "float64", ""},
    {"fp32", 24, 127, true, Specials::ieee, "float32", ""},
    {"tf32", 11, 127, true, Specials::ieee, "", ""},
    {"bf16", 8, 127, true, Specials::ieee, "bfloat16", ""},
    {"fp16", 11, 15, true, Specials::ieee, "float16", ""},
    {"fp8_e4m3fn", 4, 8, true, Specials::fn, "float8_e4m3fn", "fp8_e4m3"},
    {"fp8_e5m2", 3, 15, true, Specials::ieee, "float8_e5m2", ""},
}};

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
