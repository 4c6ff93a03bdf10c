#include "pasa/io/kernel_json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa {

namespace {

template <class E, std::size_t N>
void read_enum(const nlohmann::json& j, const char* key, const std::string& path, const EnumTable<E, N>& t, E& out) {
  if (!j.contains(key)) return;
  const std::string place = path + "/" + key;
  const std::string name = as_string(j.at(key), place);
  const auto e = enum_by_name(t, name);
  if (!e) json_fail(place, fmt::format("unknown value \"{}\"; known: {}", name, enum_names_joined(t)));
  out = *e;
}

using BlockTable = std::vector<std::pair<std::size_t, std::size_t>>;

void read_blocks(const nlohmann::json& j, const char* key, const std::string& path, BlockTable& out) {
  if (!j.contains(key)) return;
  const std::string place = path + "/" + key;
  const nlohmann::json& v = j.at(key);
  if (v.is_number()) {
    out = {{0, as_size(v, place, 1)}};
    return;
  }
  if (!v.is_array() || v.empty())
    json_fail(place, "expected a block size (every head dimension) or [[D, block], ...] (D increasing)");
  BlockTable t;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string ip = fmt::format("{}/{}", place, i);
    if (!v[i].is_array() || v[i].size() != 2) json_fail(ip, "expected [D, block]");
    const std::size_t d = as_size(v[i][0], ip + "/0", 1), n = as_size(v[i][1], ip + "/1", 1);
    if (!t.empty() && d <= t.back().first) json_fail(ip + "/0", "head dimensions must increase");
    t.emplace_back(d, n);
  }
  out = t;
}

}  // namespace

KernelRecipe kernel_from_json(const nlohmann::json& j, const std::string& path) {
  if (j.is_string()) return kernel_recipe(as_string(j, path), json_where(path) + ": ");
  check_keys(j, {"recipe", "block_n", "split_block_n", "split_block_m", "split", "splits", "sm_count", "kv_order",
                 "exp_arg", "exp2", "row_sum", "normalise", "scale_fold", "alpha_arg", "rescale", "causal", "mma_k",
                 "global_output_above", "sum_rescale_fma", "lse_fma", "combine_fma", "combine_sum", "mma"},
             path);
  if (!j.contains("recipe")) json_fail(path, "missing \"recipe\" (the kernel whose schedule the other keys override)");
  KernelRecipe k = kernel_recipe(as_string(j.at("recipe"), path + "/recipe"), json_where(path + "/recipe") + ": ");
  KernelSchedule& s = k.schedule;
  read_blocks(j, "block_n", path, s.block_n);
  read_blocks(j, "split_block_n", path, s.split_block_n);
  read_size(j, "split_block_m", path, s.split_block_m, 1);
  read_enum(j, "split", path, kSplitRules, s.split);
  read_size(j, "splits", path, s.splits, 1);
  if (j.contains("splits") && s.split != SplitRule::fixed)
    json_fail(path + "/splits", "a fixed number of parts needs \"split\": \"fixed\"");
  if (j.contains("sm_count")) {
    const std::size_t n = as_size(j.at("sm_count"), path + "/sm_count", 1);
    if (n > 100000) json_fail(path + "/sm_count", fmt::format("{} SMs: at most 100000", n));
    s.sm_count = static_cast<int>(n);
  }
  read_enum(j, "kv_order", path, kKvOrders, s.kv_order);
  read_enum(j, "exp_arg", path, kExpArgs, s.exp_arg);
  read_enum(j, "exp2", path, kExp2Impls, s.exp2);
  read_enum(j, "row_sum", path, kRowSumLayouts, s.row_sum);
  read_enum(j, "normalise", path, kNormalises, s.normalise);
  read_enum(j, "scale_fold", path, kScaleFolds, s.scale_fold);
  read_enum(j, "alpha_arg", path, kAlphaArgs, s.alpha_arg);
  read_enum(j, "rescale", path, kRescales, s.rescale);
  read_enum(j, "causal", path, kCausalAligns, s.causal);
  read_size(j, "mma_k", path, s.mma_k, 1);
  if (s.mma_k > 64) json_fail(path + "/mma_k", fmt::format("{} products per MMA instruction: at most 64", s.mma_k));
  read_size(j, "global_output_above", path, s.global_output_above);
  read_bool(j, "sum_rescale_fma", path, s.sum_rescale_fma);
  read_bool(j, "lse_fma", path, s.lse_fma);
  read_bool(j, "combine_fma", path, s.combine_fma);
  read_enum(j, "combine_sum", path, kCombineSums, s.combine_sum);
  if (j.contains("mma")) {
    s.mma = as_string(j.at("mma"), path + "/mma");
    if (s.mma != "h100") at_place(json_where(path + "/mma"), [&] { return tensor_core_preset(s.mma); });
  }
  return k;
}

nlohmann::json to_json(const KernelRecipe& k) {
  const KernelSchedule& s = k.schedule;
  auto blocks = [](const BlockTable& t) {
    if (t.size() == 1 && t[0].first == 0) return nlohmann::json(t[0].second);  // one size for every D
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [d, n] : t) a.push_back({d, n});
    return a;
  };
  nlohmann::json j = {{"recipe", k.name},
                      {"block_n", blocks(s.block_n)},
                      {"split_block_n", blocks(s.split_block_n)},
                      {"split_block_m", s.split_block_m},
                      {"split", enum_name(kSplitRules, s.split)},
                      {"sm_count", s.sm_count},
                      {"kv_order", enum_name(kKvOrders, s.kv_order)},
                      {"exp_arg", enum_name(kExpArgs, s.exp_arg)},
                      {"exp2", enum_name(kExp2Impls, s.exp2)},
                      {"row_sum", enum_name(kRowSumLayouts, s.row_sum)},
                      {"normalise", enum_name(kNormalises, s.normalise)},
                      {"scale_fold", enum_name(kScaleFolds, s.scale_fold)},
                      {"alpha_arg", enum_name(kAlphaArgs, s.alpha_arg)},
                      {"rescale", enum_name(kRescales, s.rescale)},
                      {"causal", enum_name(kCausalAligns, s.causal)},
                      {"mma_k", s.mma_k},
                      {"global_output_above", s.global_output_above},
                      {"sum_rescale_fma", s.sum_rescale_fma},
                      {"lse_fma", s.lse_fma},
                      {"combine_fma", s.combine_fma},
                      {"combine_sum", enum_name(kCombineSums, s.combine_sum)},
                      {"mma", s.mma}};
  if (s.split == SplitRule::fixed) j["splits"] = s.splits;
  return j;
}

}  // namespace pasa
