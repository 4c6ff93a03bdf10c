// ProblemSpec (inputs/generators.hpp) to and from JSON.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pasa/inputs/generators.hpp"

namespace pasa {

// JSON form (see README "Inputs, golden and metrics"):
// {"shape": {"B", "Nq", "Nkv", "Sq", "Skv", "D"}, "format", "scale", "causal", "kv_len", "seed",
//  "generator": {kind, x0, am, p, wavelength, phase_deg, seq_bias, noise}   (shared by Q, K, V)
//  "q"/"k"/"v": {the same keys}  (override the shared generator's keys for one tensor),
//  "pse": {generator keys}  (a position bias (B, Nq, Sq, Skv), [IFA]; its own generator, default keys),
//  "select": {"p": probability a key is masked by select, "value": the masked score (default −1e12)}}
// Unknown keys, wrong types and impossible values are InputErrors naming json_path + the JSON path.
ProblemSpec problem_from_json(const nlohmann::json&, const std::string& json_path);
nlohmann::json to_json(const ProblemSpec&);   // explicit per-tensor form; problem_from_json reads it back
nlohmann::json to_json(const TensorGen&);

}  // namespace pasa
