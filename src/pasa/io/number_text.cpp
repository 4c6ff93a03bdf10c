#include "pasa/io/number_text.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

std::vector<double> parse_numbers(std::string_view text, std::string_view where, std::vector<std::string>* notes) {
  std::vector<double> xs;
  std::size_t pos = 0, index = 0;
  auto separator = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; };
  while (pos < text.size()) {
    if (separator(text[pos])) {
      ++pos;
      continue;
    }
    std::size_t end = pos;
    while (end < text.size() && !separator(text[end])) ++end;
    const std::string token(text.substr(pos, end - pos));
    ++index;
    char* stop = nullptr;
    errno = 0;
    const double x = std::strtod(token.c_str(), &stop);
    // strtod rounds decimal text to nearest double; overflow to inf is an error (the user typed a number
    // no double holds), underflow to a subnormal or zero is the correctly rounded value and accepted.
    if (stop != token.c_str() + token.size() || (errno == ERANGE && std::isinf(x)))
      throw InputError(fmt::format("{}: number {} (\"{}\") is not a finite double, inf or nan", where, index, token));
    if (errno == ERANGE && x == 0 && notes != nullptr)
      notes->push_back(fmt::format("{}: number {} (\"{}\") is below the smallest double subnormal and reads as {}",
                                   where, index, token, std::signbit(x) ? "-0" : "0"));
    xs.push_back(x);
    pos = end;
  }
  return xs;
}

std::string value_text(double v) {
  if (std::isnan(v)) return "nan";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  return fmt::format("{}", v);
}

std::string bits_text(std::uint64_t bits, const Format& f) {
  return fmt::format("0x{:0{}x}", bits, (f.storage_bits() + 3) / 4);
}

}  // namespace pasa
