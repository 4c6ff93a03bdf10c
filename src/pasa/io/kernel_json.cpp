#include "pasa/io/kernel_json.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/format.hpp"

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

void read_blocks(const nlohmann::json& j, const char* key, const std::string& path, BlockTable& out,
                 const char* by = "D") {
  if (!j.contains(key)) return;
  const std::string place = path + "/" + key;
  const nlohmann::json& v = j.at(key);
  if (v.is_number()) {
    out = {{0, as_size(v, place, 1)}};
    return;
  }
  if (!v.is_array() || v.empty())
    json_fail(place, fmt::format("expected a block size (every {0}) or [[{0}, block], ...] ({0} increasing)", by));
  BlockTable t;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string ip = fmt::format("{}/{}", place, i);
    if (!v[i].is_array() || v[i].size() != 2) json_fail(ip, fmt::format("expected [{}, block]", by));
    const std::size_t d = as_size(v[i][0], ip + "/0", 1), n = as_size(v[i][1], ip + "/1", 1);
    if (!t.empty() && d <= t.back().first) json_fail(ip + "/0", fmt::format("the {} keys must increase", by));
    t.emplace_back(d, n);
  }
  out = t;
}

}  // namespace

KernelRecipe kernel_from_json(const nlohmann::json& j, const std::string& path) {
  if (j.is_string()) return kernel_recipe(as_string(j, path), json_where(path) + ": ");
  check_keys(j, {"recipe", "block_n", "split_block_n", "split_block_m", "split", "splits", "sm_count", "kv_order",
                 "exp_arg", "exp2", "row_sum", "normalise", "scale_fold", "alpha_arg", "rescale", "causal", "mma_k",
                 "global_output_above", "sum_rescale_fma", "lse_fma", "combine_fma", "combine_sum", "mma",
                 "causal_block_n", "inputs", "output", "p_offset", "rescale_threshold", "p_saturate", "pv_two_level",
                 "ftz", "soft_exp2", "soft_exp2_freq", "soft_exp2_res", "soft_exp2_start", "max_d", "p_round",
                 "out_round", "engine", "block_n_by_group", "decode", "fold_product", "decode_split_keys",
                 "decode_max_ctas", "decode_partition", "qk_quant", "dequant", "q_prescale", "smooth_k", "v_format",
                 "v_quant", "p_format", "pv_acc", "pv_rescale_fma", "lse_lg2_approx", "smooth_q", "p_block", "block_m", "m_init", "l_init"},
             path);
  if (!j.contains("recipe")) json_fail(path, "missing \"recipe\" (the kernel whose schedule the other keys override)");
  KernelRecipe k = kernel_recipe(as_string(j.at("recipe"), path + "/recipe"), json_where(path + "/recipe") + ": ");
  KernelSchedule& s = k.schedule;
  read_blocks(j, "block_n", path, s.block_n);
  read_blocks(j, "split_block_n", path, s.split_block_n);
  if (j.contains("causal_block_n") && j.at("causal_block_n").is_null()) s.causal_block_n.clear();  // = block_n
  else read_blocks(j, "causal_block_n", path, s.causal_block_n);
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
  if (j.contains("inputs")) {
    const std::string place = path + "/inputs";
    const nlohmann::json& v = j.at("inputs");
    if (!v.is_array() || v.empty()) json_fail(place, "expected a non-empty list of format names");
    s.inputs.clear();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string ip = fmt::format("{}/{}", place, i);
      const std::string f = as_string(v[i], ip);
      const Format fm = at_place(json_where(ip), [&] { return format_by_name(f); });
      // (the engine keeps scores and P in float32: wider inputs would not be what a GPU kernel takes)
      if (fm.p > 11) json_fail(ip, fmt::format("\"{}\": a kernel recipe takes 16-bit or 8-bit inputs", f));
      s.inputs.push_back(fm.name);
    }
  }
  if (j.contains("output")) {
    const std::string place = path + "/output";
    const std::string f = as_string(j.at("output"), place);
    if (!f.empty()) s.output = at_place(json_where(place), [&] { return format_by_name(f); }).name;
    else s.output.clear();
  }
  if (j.contains("p_offset")) {
    const double o = as_number(j.at("p_offset"), path + "/p_offset");
    if (!(o >= 0 && o <= 16)) json_fail(path + "/p_offset", fmt::format("{}: 0 to 16 (P = 2^offset at the max)", o));
    s.p_offset = static_cast<float>(o);
  }
  if (j.contains("rescale_threshold")) {
    const double t = as_number(j.at("rescale_threshold"), path + "/rescale_threshold");
    if (!(t >= 0 && t <= 64))
      json_fail(path + "/rescale_threshold", fmt::format("{}: expected 0 to 64 (log2 units)", t));
    s.rescale_threshold = static_cast<float>(t);
  }
  read_bool(j, "p_saturate", path, s.p_saturate);
  read_bool(j, "pv_two_level", path, s.pv_two_level);
  read_bool(j, "ftz", path, s.ftz);
  read_enum(j, "soft_exp2", path, kSoftExp2Rules, s.soft_exp2);
  read_size(j, "soft_exp2_freq", path, s.soft_exp2_freq);
  read_size(j, "soft_exp2_res", path, s.soft_exp2_res);
  read_size(j, "soft_exp2_start", path, s.soft_exp2_start);
  for (const char* key : {"soft_exp2_freq", "soft_exp2_res", "soft_exp2_start"})
    if (j.contains(key) && s.soft_exp2 != SoftExp2Rule::fixed)
      json_fail(path + "/" + key, "a fixed software-exp2 pattern needs \"soft_exp2\": \"fixed\"");
  if (s.soft_exp2_freq > 32 || s.soft_exp2_start > 64)
    json_fail(path, fmt::format("soft_exp2_freq {} / soft_exp2_start {}: at most 32 / 64", s.soft_exp2_freq,
                                s.soft_exp2_start));
  read_size(j, "max_d", path, s.max_d);
  for (const auto& entry : {std::pair<const char*, RoundMode*>{"p_round", &s.p_round}, {"out_round", &s.out_round}}) {
    // (named copies, not a structured binding: clang 14 cannot capture a binding in the lambda below)
    const char* key = entry.first;
    RoundMode* out = entry.second;
    if (!j.contains(key)) continue;
    const std::string place = path + "/" + key;
    *out = at_place(json_where(place), [&] { return round_mode_by_name(as_string(j.at(key), place)); });
    if (*out == RoundMode::stochastic)  // (a kernel's cast is one deterministic instruction)
      json_fail(place, "stochastic rounding is not a kernel cast: use a deterministic mode");
  }
  read_enum(j, "engine", path, kKernelEngines, s.engine);
  read_enum(j, "decode", path, kDecodeEngines, s.decode);
  read_enum(j, "fold_product", path, kFoldProducts, s.fold_product);
  read_size(j, "decode_split_keys", path, s.decode_split_keys, 1);
  read_size(j, "decode_max_ctas", path, s.decode_max_ctas, 1);
  if (s.decode_split_keys > 1000000 || s.decode_max_ctas > 1000000)  // (a GPU launches far fewer CTAs)
    json_fail(path, fmt::format("decode_split_keys {} / decode_max_ctas {}: at most 1000000 each",
                                s.decode_split_keys, s.decode_max_ctas));
  read_enum(j, "decode_partition", path, kDecodePartitions, s.decode_partition);
  // the sage engine's fields (check_sage_schedule says what each combination needs)
  for (const auto& entry : {std::pair<const char*, std::string*>{"qk_quant", &s.qk_quant}, {"v_quant", &s.v_quant}}) {
    const char* key = entry.first;
    std::string* out = entry.second;
    if (!j.contains(key)) continue;
    const std::string place = path + "/" + key;
    *out = as_string(j.at(key), place);
    if (!out->empty()) at_place(json_where(place), [&] { return block_scheme_by_name(*out); });
  }
  for (const auto& entry : {std::pair<const char*, std::string*>{"v_format", &s.v_format}, {"p_format", &s.p_format}}) {
    const char* key = entry.first;
    std::string* out = entry.second;
    if (!j.contains(key)) continue;
    const std::string place = path + "/" + key;
    const std::string f = as_string(j.at(key), place);
    *out = f.empty() ? f : at_place(json_where(place), [&] { return format_by_name(f); }).name;
  }
  read_string(j, "pv_acc", path, s.pv_acc);
  if (!s.pv_acc.empty() && s.pv_acc != "fp16")
    json_fail(path + "/pv_acc", fmt::format("\"{}\": expected \"\" (fp32) or \"fp16\"", s.pv_acc));
  read_enum(j, "dequant", path, kDequants, s.dequant);
  read_bool(j, "q_prescale", path, s.q_prescale);
  read_bool(j, "smooth_k", path, s.smooth_k);
  read_bool(j, "pv_rescale_fma", path, s.pv_rescale_fma);
  read_bool(j, "lse_lg2_approx", path, s.lse_lg2_approx);
  read_size(j, "block_m", path, s.block_m, 1);
  read_size(j, "smooth_q", path, s.smooth_q);
  read_size(j, "p_block", path, s.p_block);
  for (const auto& entry : {std::pair<const char*, float*>{"m_init", &s.m_init}, {"l_init", &s.l_init}}) {
    if (!j.contains(entry.first)) continue;
    const std::string place = path + "/" + entry.first;
    const nlohmann::json& v = j.at(entry.first);
    // (the max may start at −inf: the string "-inf")
    if (v.is_string() && v.get<std::string>() == "-inf") *entry.second = -std::numeric_limits<float>::infinity();
    else *entry.second = static_cast<float>(as_number(v, place));
  }
  if (j.contains("block_n_by_group") && j.at("block_n_by_group").is_null()) s.block_n_by_group.clear();
  else read_blocks(j, "block_n_by_group", path, s.block_n_by_group, "G");
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
                      {"mma", s.mma},
                      {"inputs", s.inputs},
                      {"output", s.output},
                      {"p_offset", s.p_offset},
                      {"rescale_threshold", s.rescale_threshold},
                      {"p_saturate", s.p_saturate},
                      {"pv_two_level", s.pv_two_level},
                      {"ftz", s.ftz},
                      {"soft_exp2", enum_name(kSoftExp2Rules, s.soft_exp2)},
                      {"max_d", s.max_d},
                      {"p_round", round_mode_name(s.p_round)},
                      {"out_round", round_mode_name(s.out_round)},
                      {"engine", enum_name(kKernelEngines, s.engine)},
                      {"decode", enum_name(kDecodeEngines, s.decode)},
                      {"fold_product", enum_name(kFoldProducts, s.fold_product)},
                      {"decode_split_keys", s.decode_split_keys},
                      {"decode_max_ctas", s.decode_max_ctas},
                      {"decode_partition", enum_name(kDecodePartitions, s.decode_partition)}};
  if (s.engine == KernelEngine::sage) {
    j["qk_quant"] = s.qk_quant;
    j["dequant"] = enum_name(kDequants, s.dequant);
    j["q_prescale"] = s.q_prescale;
    j["smooth_k"] = s.smooth_k;
    j["v_format"] = s.v_format;
    j["v_quant"] = s.v_quant;
    j["p_format"] = s.p_format;
    j["pv_acc"] = s.pv_acc;
    j["pv_rescale_fma"] = s.pv_rescale_fma;
    j["lse_lg2_approx"] = s.lse_lg2_approx;
    j["block_m"] = s.block_m;
    j["smooth_q"] = s.smooth_q;
    j["p_block"] = s.p_block;
    j["m_init"] = std::isinf(s.m_init) ? nlohmann::json("-inf") : nlohmann::json(s.m_init);
    j["l_init"] = s.l_init;
  }
  if (!s.block_n_by_group.empty()) j["block_n_by_group"] = blocks(s.block_n_by_group);
  if (s.split == SplitRule::fixed) j["splits"] = s.splits;
  if (!s.causal_block_n.empty()) j["causal_block_n"] = blocks(s.causal_block_n);
  if (s.soft_exp2 == SoftExp2Rule::fixed) {
    j["soft_exp2_freq"] = s.soft_exp2_freq;
    j["soft_exp2_res"] = s.soft_exp2_res;
    j["soft_exp2_start"] = s.soft_exp2_start;
  }
  return j;
}

}  // namespace pasa
