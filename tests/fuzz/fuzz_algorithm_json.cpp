// libFuzzer target: the algorithm JSON reader, and the property that to_json reads back equal.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/json_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pasa::AlgorithmSpec a;
  try {
    const nlohmann::json j = pasa::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    a = pasa::algorithm_from_json(j, "fuzz:");
  } catch (const pasa::InputError&) {
    return 0;
  }
  const nlohmann::json back = pasa::to_json(a);
  try {
    if (pasa::to_json(pasa::algorithm_from_json(back, "to_json:")) != back) std::abort();
  } catch (const pasa::InputError&) {
    std::abort();
  }
  return 0;
}
