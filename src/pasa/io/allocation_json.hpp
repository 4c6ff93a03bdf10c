// Allocation (attention/allocation.hpp) to and from JSON.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pasa/attention/allocation.hpp"

namespace pasa {

// JSON: a preset name as a string, or an object
//   {"preset": "fa_fp16", "name": "...", "gemm": {"model": "ordered|chunked|every_op|tensor_core", "chunk": 16},
//    "stages": {"max": "fp32", "exp": {"format": "fp16", "round": "rne", "overflow": "saturate",
//                                      "ftz": false, "daz": false, "via": "exact|fp32"},
//               "sum": {"format": "fp16", "acc": "fp32", "order": "sequential|pairwise|blocked", "width": 32}}}
// "acc", "order" and "width" (a power of two in [1, 1024]) are the Reduction of the sum and mean stages;
// "via" belongs to the exp stage; "model" ("normalised_lse" | "unnormalised"), "partial" and "lse" (formats)
// to the merge stage (MergeSpec). A stage given as a plain format name reduces in that format, sequentially.
// "gemm" with "model": "tensor_core" takes "tensor_core": a named model (tensor_core_preset, e.g. "h100_fp16")
// and/or the TensorCore fields one by one: "block", "acc_in_block", "align_bits" (0..60 or "unlimited"),
// "align_round" ("truncate" | "nearest"), "block_round" ("rne" | "rna" | "rz" | "ru" | "rd"), "promote" (0 or a
// multiple of block), "acc_bits" (0 or 2..53), and for the newer engines "operand_bits" (0 or 2..24),
// "zero_at_emin", "scale" ("none" | "e8m0" | "ue4m3"), "scale_block", "group", "integer" ("off" | "wrap" |
// "saturate"); fields given override the named model.
// Without "preset" every stage must be given, except "merge" (split-KV), which is the "o" stage's spec when
// not given (also when a preset's "o" is overridden; its model, partial and lse stay the base's). Errors are
// InputErrors naming the JSON path.
Allocation allocation_from_json(const nlohmann::json& j, const std::string& json_path);
nlohmann::json to_json(const Allocation& a);  // the full form (every stage; merge only where it is not o's); reads back equal
// The "gemm" object alone, applied over `base` (fields absent keep base's values).
GemmModel gemm_model_from_json(const nlohmann::json& j, const std::string& json_path, GemmModel base = {});

}  // namespace pasa
