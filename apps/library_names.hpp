// Command-line checks shared by the apps: an option whose value is a library name (a format, a rounding
// mode, a preset) is checked while CLI11 parses, so a wrong name is reported with the option that holds
// it ("--format: unknown format "fp17"; known formats: ...") through the library's own InputError message.
#pragma once

#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pasa/core/error.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa_apps {

// ->check(library_name(pasa::format_by_name, format_names())): the value must be a name `by_name` accepts;
// `words`, the names a registry lists, are what --completion offers for it (completion.hpp reads them from
// the validator's name, "complete:<words>"; without them the value completes as a file name).
template <class ByName>
CLI::Validator library_name(ByName by_name, const std::vector<std::string>& words = {}) {
  std::string name;
  for (const std::string& w : words) name += (name.empty() ? "complete:" : " ") + w;
  return CLI::Validator(
      [by_name](std::string& s) -> std::string {
        try {
          (void)by_name(s);
          return {};
        } catch (const pasa::InputError& e) {
          return e.what();
        }
      },
      "", name);
}

// ->check(completes_to(words)): no check of its own (the option's reader checks the value later, with its
// own message), only the words --completion offers.
inline CLI::Validator completes_to(const std::vector<std::string>& words) {
  return library_name([](const std::string&) { return 0; }, words);
}

// ->check(unsigned_integer(min, max)): a decimal integer in [min, max], written as digits only. CLI11 itself
// converts "-1" to 2^64 - 1 for an unsigned option and accepts "1e23" (rounded, saturated); a seed, a count
// or a size given like that is a mistake to report, not to reinterpret. `max` is what the option's variable
// holds (an int option passes INT_MAX), so the range the message states is the range that is accepted.
inline CLI::Validator unsigned_integer(std::uint64_t min = 0, std::uint64_t max = UINT64_MAX) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE || v < min || v > max)
          return "\"" + s + "\" is not an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
        return {};
      },
      "UINT");
}

// The most worker threads an option accepts: far above any machine's cores, far below what would exhaust
// the process's thread limit (each thread reserves its stack).
inline constexpr int kMaxThreads = 4096;

// ->check(thread_count()): --threads, an integer in [1, kMaxThreads] ("0" and "-1" are refused, not read as
// "all cores").
inline CLI::Validator thread_count() {
  CLI::Validator v = unsigned_integer(1, kMaxThreads);
  v.description("THREADS in [1, " + std::to_string(kMaxThreads) + "]");
  return v;
}

// CLI11 exits with its own codes (100 and up, one per kind of parse error); the programs' convention
// (core/error.hpp) is 2 for every mistake the user can fix. --help still exits 0.
inline int parse_failure(const CLI::App& app, const CLI::ParseError& e) {
  const int rc = app.exit(e);
  return rc == 0 ? 0 : pasa::kExitInputError;
}

}  // namespace pasa_apps

// In place of CLI11_PARSE: the same parse, with parse errors exiting 2 (pasa_apps::parse_failure).
#define PASA_CLI_PARSE(app, argc, argv)                     \
  do {                                                      \
    try {                                                   \
      (app).parse((argc), (argv));                          \
    } catch (const CLI::ParseError& pasa_parse_error) {     \
      return pasa_apps::parse_failure((app), pasa_parse_error); \
    }                                                       \
  } while (0)

namespace pasa_apps {

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

// The names a value of a library-name option completes to (completion.hpp's complete_values), from the
// registries themselves: the names of a "known: a (long a), b, c" list, or of the built-in formats.
inline std::vector<std::string> listed_names(const std::string& known) {
  std::vector<std::string> names;
  std::size_t at = 0;
  while (at < known.size()) {
    const std::size_t end = std::min(known.find(", ", at), known.size());
    const std::string item = known.substr(at, end - at);
    names.push_back(item.substr(0, item.find(' ')));  // "rne (nearest_even)" -> "rne"
    at = end + 2;
  }
  return names;
}
inline std::vector<std::string> format_names() {
  std::vector<std::string> names;
  for (const pasa::Format& f : pasa::builtin_formats()) names.push_back(f.name);
  return names;
}

}  // namespace pasa_apps
