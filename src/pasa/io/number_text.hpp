// Numbers as text, for command-line tools: parsing lists of numbers (arguments, stdin) and printing a
// rounded value with its storage bits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pasa/numeric/format.hpp"

namespace pasa {

// Numbers separated by white space or commas; decimal, hexadecimal floating point (0x1.8p-3), inf, nan.
// Throws InputError naming `where` (e.g. "stdin") and the offending token and its position. A number beyond
// double's range is an error; a nonzero number below half the smallest subnormal (1e-400) reads as ±0, and
// when `notes` is given a line saying so is added to it (the caller shows it as a warning: rounding ±0 to
// a format differs from rounding the exact tiny value under the directed modes).
std::vector<double> parse_numbers(std::string_view text, std::string_view where,
                                  std::vector<std::string>* notes = nullptr);

// Shortest decimal that reads back as exactly v ("-0", "inf", "nan" for the specials).
std::string value_text(double v);
// Storage bits as hex, zero-padded to the format's width: "0x3c00" for fp16 1.0.
std::string bits_text(std::uint64_t bits, const Format& f);

}  // namespace pasa
