// A kernel recipe in JSON (attention/kernel_recipe.hpp): "kernel": "torch_flash_sm90", or an object naming the
// recipe and overriding schedule fields, each checked: {"recipe": "torch_flash_sm90", "kv_order": "forward",
// "exp2": "exact", "block_n": 128 (every D) or [[64, 128], [128, 64]] (per rounded D), "split": "none" |
// "fixed" | "fa2_heuristic", "splits", "sm_count", "split_block_m", "split_block_n", "exp_arg", "row_sum",
// "normalise", "scale_fold", "rescale", "causal", "mma_k", "global_output_above", "lse_fma", "combine_fma",
// "mma"} (the fields of KernelSchedule, attention/kernel_recipe.hpp). to_json writes the object form with every field.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pasa/attention/kernel_recipe.hpp"

namespace pasa {

KernelRecipe kernel_from_json(const nlohmann::json&, const std::string& path);
nlohmann::json to_json(const KernelRecipe&);

}  // namespace pasa
