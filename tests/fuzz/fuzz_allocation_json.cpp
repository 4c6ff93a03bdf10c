// libFuzzer target: the allocation JSON reader (presets, overrides, stages, reductions), and the property
// that to_json reads back equal.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/json_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pasa::Allocation a;
  try {
    const nlohmann::json j = pasa::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    a = pasa::allocation_from_json(j, "fuzz:");
  } catch (const pasa::InputError&) {
    return 0;
  }
  const nlohmann::json back = pasa::to_json(a);
  try {
    if (pasa::to_json(pasa::allocation_from_json(back, "to_json:")) != back) std::abort();
  } catch (const pasa::InputError&) {
    std::abort();
  }
  return 0;
}
