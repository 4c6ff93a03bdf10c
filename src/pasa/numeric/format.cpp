#include "pasa/numeric/format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>
#include <string>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

double Format::max_finite() const {
  // ieee: (2 - 2^(1-p)) * 2^emax. fn, top_inf: the top pattern of the top binade is NaN / inf, so one ulp
  // less. A tapered format counts ulps of its top binade. The significand is formed first and scaled last,
  // so fp64 gives DBL_MAX rather than overflowing.
  const double ulps = specials == Specials::fn || specials == Specials::top_inf ? 2.0 : 1.0;
  return std::ldexp(2.0 - ulps * std::ldexp(1.0, 1 - p_at(emax)), emax);
}
double Format::max_negative() const {
  if (!is_signed) return 0.0;
  return extra_negative ? std::ldexp(1.0, emax + 1) : max_finite();  // two's complement: -2^(b-1)
}
double Format::min_normal() const { return std::ldexp(1.0, emin()); }
double Format::min_subnormal() const {
  return subnormals ? std::ldexp(1.0, emin() - (p_at(emin()) - 1)) : min_normal();
}
double Format::unit_roundoff() const { return std::ldexp(1.0, -p); }

int Format::exponent_bits() const {
  // ieee, fnu: emax = 2^(w-1) - 1; fn, finite: emax = 2^(w-1). Custom exponent ranges that are not of this
  // form get the smallest w that holds them (their storage encoding is then a superset; see encode()).
  // The other layouts have no exponent field of this kind: 0.
  if (layout != Layout::sign_exponent_fraction) return 0;
  int w = 1;
  const int need = specials == Specials::fn || specials == Specials::finite ? emax : emax + 1;
  while ((1 << (w - 1)) < need) ++w;
  return w;
}
int Format::storage_bits() const {
  switch (layout) {
    case Layout::sign_exponent_fraction: return (is_signed ? 1 : 0) + exponent_bits() + (p - 1);
    case Layout::twos_complement: return emax + 2;
    case Layout::dot_prefix: return storage;
  }
  return storage;
}
int Format::bias() const { return specials == Specials::fn || specials == Specials::finite ? emax - 1 : emax; }

Format custom_format(int p, int emax, bool subnormals, Specials specials) {
  if (p < 2 || p > 53)
    throw InputError(fmt::format("format precision p={} is outside [2, 53]", p));
  if (emax < 1 || emax > 1023)
    throw InputError(fmt::format("format emax={} is outside [1, 1023]", emax));
  Format f{fmt::format("p={},emax={}{}", p, emax, subnormals ? "" : ",subnormals=0"), p, emax, subnormals,
           specials};
  if (f.storage_bits() > 64)
    throw InputError(fmt::format("format {} needs more than 64 storage bits", f.name));
  return f;
}

const std::vector<Format>& builtin_formats() {
  static const std::vector<Format> formats = [] {
    std::vector<Format> v;
    for (const FormatEntry& e : kBuiltinFormats)
      v.push_back({.name = std::string(e.name), .p = e.p, .emax = e.emax, .subnormals = e.subnormals,
                   .specials = e.specials, .emin_ = e.emin, .is_signed = e.is_signed, .has_zero = e.has_zero,
                   .extra_negative = e.extra_negative, .layout = e.layout, .storage = e.storage, .taper = e.taper,
                   .taper_runs = e.taper_runs});
    return v;
  }();
  return formats;
}

std::string known_format_names() {
  std::string names, aliases, dtypes;
  for (const FormatEntry& e : kBuiltinFormats) {
    names += (names.empty() ? "" : ", ") + std::string(e.name);
    if (!e.alias.empty()) aliases += (aliases.empty() ? "" : ", ") + std::string(e.alias);
    if (!e.dtype.empty()) dtypes += (dtypes.empty() ? "" : ", ") + std::string(e.dtype);
  }
  return names + " (aliases: " + aliases + ", and numpy's and ml_dtypes' " + dtypes +
         "), or a custom \"p=<bits>,emax=<e>[,subnormals=0]\"";
}

namespace {

// The integer that starts `s` (an optional '-', then digits), removed from s; false when there is none.
bool take_integer(std::string_view& s, std::string_view& digits) {
  std::size_t n = !s.empty() && s[0] == '-' ? 1 : 0;
  const std::size_t first = n;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == first) return false;
  digits = s.substr(0, n);
  s.remove_prefix(n);
  return true;
}

// `digits` as an int in [lo, hi]; otherwise an InputError that shows the number as it was written (an int
// conversion such as sscanf's %d would turn p=99999999999999999999 into p=-1 first).
int integer_in(std::string_view digits, const char* what, int lo, int hi) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc{} || end != digits.data() + digits.size() || v < lo || v > hi)
    throw InputError(fmt::format("format {}{} is outside [{}, {}]", what, digits, lo, hi));
  return static_cast<int>(v);
}

}  // namespace

Format format_by_name(std::string_view name) {
  // The registry's names, aliases and dtype names (kBuiltinFormats).
  for (std::size_t i = 0; i < kBuiltinFormats.size(); ++i)
    if (!name.empty() && (name == kBuiltinFormats[i].name || name == kBuiltinFormats[i].dtype || name == kBuiltinFormats[i].alias))
      return builtin_formats()[i];
  // "p=<bits>,emax=<e>[,subnormals=0|1]"
  std::string_view s = name, p_text, emax_text;
  if (s.starts_with("p=") && (s.remove_prefix(2), take_integer(s, p_text)) && s.starts_with(",emax=") &&
      (s.remove_prefix(6), take_integer(s, emax_text)) && (s.empty() || s == ",subnormals=1" || s == ",subnormals=0")) {
    const int p = integer_in(p_text, "precision p=", 2, 53);
    const int emax = integer_in(emax_text, "emax=", 1, 1023);
    return custom_format(p, emax, s != ",subnormals=0");
  }
  throw InputError(fmt::format("unknown format \"{}\"; known formats: {}", name, known_format_names()));
}

}  // namespace pasa
