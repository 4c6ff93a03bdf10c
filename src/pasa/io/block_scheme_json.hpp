// Block-scale schemes (numeric/block_scale.hpp) in JSON: a registry name ("mxfp8_e4m3") or an object naming
// one and overriding fields, {"scheme": "int8_per_thread", "scale_rule": "floor", "round": "rne", ...}.
// Errors name the JSON path of the field that is wrong.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pasa/numeric/block_scale.hpp"

namespace pasa {

// Keys: scheme (required in an object), element, frac_bits, scale_format, scale_rule, tensor_scale, round,
// saturate, quotient; group, rows, cols, threads (both operands' layouts), a and b (one operand's layout,
// an object of group, rows, cols, threads).
BlockScheme block_scheme_from_json(const nlohmann::json& j, const std::string& path);
// The full descriptor (every field), so that a written scheme reads back equal.
nlohmann::json to_json(const BlockScheme& s);

}  // namespace pasa
