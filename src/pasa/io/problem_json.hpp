// ProblemSpec (inputs/generators.hpp) to and from JSON.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pasa/inputs/generators.hpp"

namespace pasa {

// JSON form (see README "Inputs, golden and metrics"):
// {"shape": {"B", "Nq", "Nkv", "Sq", "Skv", "D"}, "format", "scale", "causal", "kv_len", "seed",
//  "generator": {kind, x0, am, p, wavelength, phase_deg, seq_bias, noise}   (shared by Q, K, V)
//  "q"/"k"/"v": {the same keys}  (override the shared generator's keys for one tensor),
//  "pse": {generator keys}  (a position bias (B, Nq, Sq, Skv), [IFA]; its own generator, default keys),
//  "select": {"p": probability a key is masked by select, "value": the masked score (default −1e12)}}
// The user's own tensors instead of drawn ones (io/user_tensors.hpp; read when the JSON is read, the .npy
// header checked against the shape first): "pse": {"npy": file} (B or 1, Nq, Sq, Skv) float values,
// "select": {"npy": file, "value"} a bool mask (B, Sq, Skv) or (B, Nq, Sq, Skv), True = masked,
// "kv_len": {"npy": file} integers (B,). Relative file names are resolved against base_dir (the folder of
// the JSON file; empty: the working directory).
// A model's Q, K and V (io/capture_folder.hpp, written by python/pasa_capture.py) instead of drawn ones:
// "capture": {"dir": folder, "layer": i, "head": h (optional: query head h with its KV head) or "kv_head": g
// (optional: the query heads sharing KV head g)}; the capture gives the shape, scale and causal flag (those
// keys and the generators are refused with it); "format" (default: the model's dtype) is the storage format
// the values are rounded to. The index and .npy headers are checked before the data are read.
// A paged KV cache ([UA], inputs/paged_problem.hpp) instead of dense K and V: "kind": "paged" (default
// "dense"), "block_size", "num_blocks" (optional: spare cache blocks), "sequences": [{"q_len", "ctx_len",
// "shared_blocks", "share_from", "block_table"}], "shape": {"Nq", "Nkv", "D"}, with format, scale, seed and
// the generators; B, Sq, Skv, causal, kv_len, pse, select, capture and allow_nonfinite are refused with it.
// Unknown keys, wrong types and impossible values are InputErrors naming json_path + the JSON path.
ProblemSpec problem_from_json(const nlohmann::json&, const std::string& json_path,
                              const std::filesystem::path& base_dir = {});
nlohmann::json to_json(const ProblemSpec&);   // explicit per-tensor form (user tensors as {"npy": resolved file}); problem_from_json reads it back
nlohmann::json to_json(const TensorGen&);
// The files a problem was read from, each with the JSON place that named it (for check_output_paths: no
// output may replace one): the user tensors' .npy files and a capture folder's index.json and layer files.
std::vector<std::pair<std::string, std::filesystem::path>> problem_input_files(const ProblemSpec&,
                                                                               const std::string& json_path);

}  // namespace pasa
