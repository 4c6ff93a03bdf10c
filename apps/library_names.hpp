// Command-line checks shared by the apps: an option whose value is a library name (a format, a rounding
// mode, a preset) is checked while CLI11 parses, so a wrong name is reported with the option that holds
// it ("--format: unknown format "fp17"; known formats: ...") through the library's own InputError message.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "pasa/core/error.hpp"

namespace pasa_apps {

// ->check(library_name(pasa::format_by_name)): the value must be a name `by_name` accepts.
template <class ByName>
CLI::Validator library_name(ByName by_name) {
  return CLI::Validator(
      [by_name](std::string& s) -> std::string {
        try {
          (void)by_name(s);
          return {};
        } catch (const pasa::InputError& e) {
          return e.what();
        }
      },
      "");
}

// ->check(unsigned_integer(min)): a decimal integer in [min, 2^64 - 1], written as digits only. CLI11 itself
// converts "-1" to 2^64 - 1 for an unsigned option and accepts "1e23" (rounded, saturated); a seed, a count
// or a size given like that is a mistake to report, not to reinterpret.
inline CLI::Validator unsigned_integer(std::uint64_t min = 0) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE || v < min)
          return "\"" + s + "\" is not an integer in [" + std::to_string(min) + ", 18446744073709551615]";
        return {};
      },
      "UINT");
}

// ->check(finite_number()): a finite decimal or hex-float number (not nan, inf or out of double's range).
inline CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double x = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || (errno == ERANGE && x != 0))
          return "\"" + s + "\" is not a finite number";
        return {};
      },
      "NUMBER");
}

}  // namespace pasa_apps
