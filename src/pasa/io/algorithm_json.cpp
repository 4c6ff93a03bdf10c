#include "pasa/io/algorithm_json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/json_check.hpp"

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

}  // namespace

AlgorithmSpec algorithm_from_json(const json& j, const std::string& path) {
  check_keys(j, {"name", "alloc", "s1", "s2", "seed", "splits", "pasa", "fdpp"}, path);
  AlgorithmSpec s;
  if (j.contains("name")) {
    s.name = as_string(j.at("name"), path + "/name");
    check_algorithm_name(s.name, json_where(path + "/name") + ": ");
  }
  if (j.contains("alloc")) s.alloc = allocation_from_json(j.at("alloc"), path + "/alloc");
  read_size(j, "s1", path, s.s1, 1);
  read_size(j, "s2", path, s.s2, 1);
  read_u64(j, "seed", path, s.seed);
  read_size(j, "splits", path, s.splits, 1);
  if (s.splits > 1 && s.name != "fa2" && s.name != "pasa" && s.name != "smooth_k" && s.name != "fdpp")
    json_fail(path + "/splits", fmt::format("split-KV needs fa2, smooth_k, pasa or fdpp; \"{}\" has no unnormalised "
                                            "output to merge", s.name));
  if (j.contains("fdpp")) {
    const json& f = j.at("fdpp");
    const std::string fp = path + "/fdpp";
    if (s.name != "fdpp")
      json_fail(fp, fmt::format("FlashDecoding++ options do not apply to algorithm \"{}\" (only to \"fdpp\")", s.name));
    check_keys(f, {"phi", "a", "b"}, fp);
    read_number(f, "phi", fp, s.fdpp.phi);
    read_number(f, "a", fp, s.fdpp.a);
    read_number(f, "b", fp, s.fdpp.b);
    if (!(s.fdpp.a < s.fdpp.b)) json_fail(fp, fmt::format("expected a < b, got a = {}, b = {}", s.fdpp.a, s.fdpp.b));
  }
  if (j.contains("pasa")) {
    // Options that the algorithm would ignore are a mistake (a "pasa" block on fa2 changes nothing).
    if (s.name != "pasa")
      json_fail(path + "/pasa", fmt::format("PASA options do not apply to algorithm \"{}\" (only to \"pasa\")", s.name));
    s.pasa = pasa_from_json(j.at("pasa"), path + "/pasa");
  }
  return s;
}

json to_json(const AlgorithmSpec& s) {
  json j = {{"name", s.name}, {"alloc", to_json(s.alloc)}, {"s1", s.s1}, {"s2", s.s2}, {"seed", s.seed}};
  if (s.splits != 1) j["splits"] = s.splits;
  if (s.name == "fdpp") j["fdpp"] = {{"phi", s.fdpp.phi}, {"a", s.fdpp.a}, {"b", s.fdpp.b}};
  if (s.name == "pasa")
    j["pasa"] = {{"beta", s.pasa.beta},
                 {"alpha_in_M", s.pasa.alpha_in_M},
                 {"m0", s.pasa.m0_zero ? "zero" : "-inf"},
                 {"bf16_to_fp16", s.pasa.bf16_to_fp16},
                 {"form", s.pasa.form}};
  return j;
}

}  // namespace pasa
