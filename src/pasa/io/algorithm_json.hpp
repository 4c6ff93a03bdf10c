// AlgorithmSpec (attention/algorithm_spec.hpp) to and from JSON.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pasa/attention/algorithm_spec.hpp"

namespace pasa {

// {"name": "pasa", "alloc": <allocation JSON>, "s1": 128, "s2": 128, "seed": 0,
//  "pasa": {"beta": 0.984497, "alpha_in_M": true, "m0": "-inf" | "zero", "bf16_to_fp16": true, "form": "fa2"},
//  "quant": {"scales": "block", "fmax": 448, "hadamard": true, "hadamard_seed": 1, "p_offset": 8}}  (fa2, pasa)
// Absent keys keep the defaults above. Errors are InputErrors naming the JSON path.
AlgorithmSpec algorithm_from_json(const nlohmann::json& j, const std::string& json_path);
nlohmann::json to_json(const AlgorithmSpec& spec);

}  // namespace pasa
