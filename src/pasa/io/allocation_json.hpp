// Allocation (attention/allocation.hpp) to and from JSON.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pasa/attention/allocation.hpp"

namespace pasa {

// JSON: a preset name as a string, or an object
//   {"preset": "fa_fp16", "name": "...", "gemm": {"model": "ordered|chunked|every_op", "chunk": 16},
//    "stages": {"max": "fp32", "exp": {"format": "fp16", "round": "rne", "overflow": "saturate",
//                                      "ftz": false, "daz": false}}}
// Without "preset" every stage must be given. Errors are InputErrors naming the JSON path.
Allocation allocation_from_json(const nlohmann::json& j, const std::string& json_path);
nlohmann::json to_json(const Allocation& a);  // the full form (every stage); reads back equal

}  // namespace pasa
