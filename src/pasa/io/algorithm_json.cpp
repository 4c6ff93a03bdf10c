#include "pasa/io/algorithm_json.hpp"

#include <cfloat>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/block_scheme_json.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/kernel_json.hpp"

namespace pasa {
namespace {

using nlohmann::json;

PasaOptions pasa_from_json(const json& j, const std::string& path) {
  check_keys(j, {"beta", "alpha_in_M", "m0", "bf16_to_fp16", "form"}, path);
  PasaOptions o;
  read_number(j, "beta", path, o.beta);
  if (!(o.beta >= 0 && o.beta < 1)) json_fail(path + "/beta", fmt::format("expected a number in [0, 1), got {}", j.at("beta").dump()));
  read_bool(j, "alpha_in_M", path, o.alpha_in_M);
  if (j.contains("m0")) {
    const std::string s = as_string(j.at("m0"), path + "/m0");
    if (s != "zero" && s != "-inf") json_fail(path + "/m0", fmt::format("expected \"zero\" or \"-inf\", got \"{}\"", s));
    o.m0_zero = s == "zero";
  }
  read_bool(j, "bf16_to_fp16", path, o.bf16_to_fp16);
  read_string(j, "form", path, o.form);
  if (o.form != "fa2" && o.form != "printed")
    json_fail(path + "/form", fmt::format("expected \"fa2\" or \"printed\", got \"{}\"", o.form));
  return o;
}

// [FA3, §3.3] the FP8 recipe: {"scales": "none"|"tensor"|"head"|"block", "fmax": 448, "hadamard": false,
// "hadamard_seed": 1, "p_offset": 0}.
QuantOptions quant_from_json(const json& j, const std::string& path) {
  check_keys(j, {"scales", "fmax", "hadamard", "hadamard_seed", "p_offset", "shift_first", "q", "k", "v", "p"}, path);
  QuantOptions q;
  // Block-scale schemes per operand (numeric/block_scale.hpp): a name or {"scheme": name, overrides}.
  if (j.contains("q")) q.q_block = block_scheme_from_json(j.at("q"), path + "/q");
  if (j.contains("k")) q.k_block = block_scheme_from_json(j.at("k"), path + "/k");
  if (j.contains("v")) q.v_block = block_scheme_from_json(j.at("v"), path + "/v");
  if (j.contains("p")) q.p_block = block_scheme_from_json(j.at("p"), path + "/p");
  if (j.contains("scales")) {
    const std::string s = as_string(j.at("scales"), path + "/scales");
    try {
      q.scales = quant_scale_by_name(s);
    } catch (const InputError& e) {
      json_fail(path + "/scales", e.what());
    }
  }
  read_number(j, "fmax", path, q.fmax);
  if (!quant_fmax_ok(q.fmax))
    json_fail(path + "/fmax", fmt::format("expected a number in fp32's normal range [{}, {}] (the scale is computed "
                                          "in fp32), got {}", FLT_MIN, FLT_MAX, j.at("fmax").dump()));
  read_bool(j, "hadamard", path, q.hadamard);
  read_u64(j, "hadamard_seed", path, q.hadamard_seed);
  double po = 0;
  read_number(j, "p_offset", path, po);
  if (!(po == std::floor(po) && po >= -64 && po <= 64))
    json_fail(path + "/p_offset", fmt::format("expected an integer in [-64, 64], got {}", j.at("p_offset").dump()));
  q.p_offset = static_cast<int>(po);
  read_bool(j, "shift_first", path, q.shift_first);
  if (q.scales != QuantScale::none && (q.q_block || q.k_block || q.v_block))
    json_fail(path + "/scales", "FA3's scales and a block-scale scheme on Q, K or V are two quantisations of one "
                                "operand: give one");
  return q;
}

}  // namespace

AlgorithmSpec algorithm_from_json(const json& j, const std::string& path) {
  check_keys(j, {"name", "alloc", "s1", "s2", "seed", "splits", "pasa", "fdpp", "quant", "kernel"}, path);
  AlgorithmSpec s;
  if (j.contains("kernel")) {  // a kernel recipe fixes what the other keys would set: refused beside it
    for (const char* k : {"alloc", "s1", "s2", "seed", "splits", "pasa", "fdpp", "quant"})
      if (j.contains(k))
        json_fail(path + "/" + k, "not with \"kernel\": the recipe's schedule fixes tiles, splits and numerics; "
                                  "override its fields inside \"kernel\" ({\"recipe\": ..., ...})");
    if (j.contains("name") && as_string(j.at("name"), path + "/name") != "fa2")
      json_fail(path + "/name", "a kernel recipe runs FlashAttention-2: \"name\" is \"fa2\" (or omitted)");
    s.kernel = kernel_from_json(j.at("kernel"), path + "/kernel");
    return s;
  }
  if (j.contains("name")) {
    s.name = as_string(j.at("name"), path + "/name");
    check_algorithm_name(s.name, json_where(path + "/name") + ": ");
  }
  if (j.contains("alloc")) s.alloc = allocation_from_json(j.at("alloc"), path + "/alloc");
  read_size(j, "s1", path, s.s1, 1);
  read_size(j, "s2", path, s.s2, 1);
  read_u64(j, "seed", path, s.seed);
  read_size(j, "splits", path, s.splits, 1);
  const AlgorithmInfo& info = algorithm_info(s.name);
  // Quoted names of the algorithms with a property, for the messages.
  auto quoted = [](bool AlgorithmInfo::*flag) {
    std::vector<std::string> n = algorithm_names_with(flag);
    for (std::string& x : n) x = "\"" + x + "\"";
    return fmt::format("{}", fmt::join(n, ", "));
  };
  if (s.splits > 1 && !info.split_kv)
    json_fail(path + "/splits", fmt::format("split-KV needs {}; \"{}\" has no unnormalised output to merge",
                                            fmt::join(algorithm_names_with(&AlgorithmInfo::split_kv), ", "), s.name));
  if (j.contains("fdpp")) {
    const json& f = j.at("fdpp");
    const std::string fp = path + "/fdpp";
    if (!info.fdpp_options)
      json_fail(fp, fmt::format("FlashDecoding++ options do not apply to algorithm \"{}\" (only to {})", s.name,
                                quoted(&AlgorithmInfo::fdpp_options)));
    check_keys(f, {"phi", "a", "b"}, fp);
    read_number(f, "phi", fp, s.fdpp.phi);
    read_number(f, "a", fp, s.fdpp.a);
    read_number(f, "b", fp, s.fdpp.b);
    if (!(s.fdpp.a < s.fdpp.b)) json_fail(fp, fmt::format("expected a < b, got a = {}, b = {}", s.fdpp.a, s.fdpp.b));
  }
  if (j.contains("pasa")) {
    // Options that the algorithm would ignore are a mistake (a "pasa" block on fa2 changes nothing).
    if (!info.pasa_options)
      json_fail(path + "/pasa", fmt::format("PASA options do not apply to algorithm \"{}\" (only to {})", s.name,
                                            quoted(&AlgorithmInfo::pasa_options)));
    s.pasa = pasa_from_json(j.at("pasa"), path + "/pasa");
  }
  if (j.contains("quant")) {
    s.quant = quant_from_json(j.at("quant"), path + "/quant");
    if (!info.quant && s.quant.fa3_active())
      json_fail(path + "/quant", fmt::format("the FP8 recipe (quant) runs with {}, not \"{}\"",
                                             fmt::join(algorithm_names_with(&AlgorithmInfo::quant), " or "), s.name));
    if (s.quant.shift_first && (!info.pasa_options || s.quant.scales == QuantScale::none))
      json_fail(path + "/quant/shift_first", "shift_first is PASA's pre-processing before quantisation: it needs "
                                             "\"pasa\" and scales (tensor, head or block)");
  }
  return s;
}

json to_json(const AlgorithmSpec& s) {
  if (s.kernel) return {{"name", s.name}, {"kernel", to_json(*s.kernel)}};
  json j = {{"name", s.name}, {"alloc", to_json(s.alloc)}, {"s1", s.s1}, {"s2", s.s2}, {"seed", s.seed}};
  if (s.splits != 1) j["splits"] = s.splits;
  const AlgorithmInfo* info = find_algorithm(s.name);
  if (info && info->fdpp_options) j["fdpp"] = {{"phi", s.fdpp.phi}, {"a", s.fdpp.a}, {"b", s.fdpp.b}};
  if (info && info->pasa_options)
    j["pasa"] = {{"beta", s.pasa.beta},
                 {"alpha_in_M", s.pasa.alpha_in_M},
                 {"m0", s.pasa.m0_zero ? "zero" : "-inf"},
                 {"bf16_to_fp16", s.pasa.bf16_to_fp16},
                 {"form", s.pasa.form}};
  if (s.quant.fa3_active())
    j["quant"] = {{"scales", quant_scale_name(s.quant.scales)}, {"fmax", s.quant.fmax}, {"hadamard", s.quant.hadamard},
                  {"hadamard_seed", s.quant.hadamard_seed}, {"p_offset", s.quant.p_offset},
                  {"shift_first", s.quant.shift_first}};
  const std::pair<const std::optional<BlockScheme>*, const char*> blocks[] = {
      {&s.quant.q_block, "q"}, {&s.quant.k_block, "k"}, {&s.quant.v_block, "v"}, {&s.quant.p_block, "p"}};
  for (const auto& [b, name] : blocks)
    if (*b) j["quant"][name] = to_json(**b);
  return j;
}

}  // namespace pasa
