// libFuzzer target: the number-list parser behind pasa-round (arguments and stdin), and the printing of the
// parsed values. Only InputError may escape parse_numbers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pasa/core/error.hpp"
#include "pasa/io/number_text.hpp"
#include "pasa/numeric/round.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    std::vector<std::string> notes;
    const auto xs = pasa::parse_numbers(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", &notes);
    const pasa::Format f = pasa::format_by_name("fp16");
    for (double x : xs) {
      const double r = pasa::round(x, f);
      (void)pasa::value_text(x);
      (void)pasa::bits_text(pasa::encode(r, f), f);
    }
  } catch (const pasa::InputError&) {
  }
  return 0;
}
