// The shared body of the JSON fuzz targets: parse the input as JSON text, read it with `read` (an
// InputError is a correct refusal), hand the value to `check`, and require that what to_json writes reads
// back as the same value (abort otherwise: libFuzzer reports it as a finding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa_fuzz {

template <class Read, class Check>
int json_round_trip(const std::uint8_t* data, std::size_t size, Read read, Check check) {
  decltype(read(nlohmann::json{}, std::string{})) value;
  try {
    const nlohmann::json j = pasa::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    value = read(j, "fuzz:");
  } catch (const pasa::InputError&) {
    return 0;
  }
  check(value);
  // to_json found by argument-dependent lookup: the reader's header may come after this one.
  const nlohmann::json back = to_json(value);
  try {
    if (to_json(read(back, "to_json:")) != back) std::abort();
  } catch (const pasa::InputError&) {
    std::abort();  // to_json wrote what the reader refuses
  }
  return 0;
}

template <class Read>
int json_round_trip(const std::uint8_t* data, std::size_t size, Read read) {
  return json_round_trip(data, size, read, [](const auto&) {});
}

}  // namespace pasa_fuzz
