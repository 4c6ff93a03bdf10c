// libFuzzer target: the allocation JSON reader (presets, overrides, stages, reductions), and the property
// that to_json reads back equal.
#include "json_round_trip.hpp"
#include "pasa/io/allocation_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return pasa_fuzz::json_round_trip(data, size, [](const nlohmann::json& j, const std::string& where) {
    return pasa::allocation_from_json(j, where);
  });
}
