#include "pasa/io/algorithm_json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"

namespace pasa {
namespace {

using nlohmann::json;

std::size_t get_block(const json& j, const std::string& path) {
  if (!j.is_number_integer() || j.get<long long>() < 1)
    throw InputError(fmt::format("{}: expected an integer >= 1, got {}", path, j.dump()));
  return static_cast<std::size_t>(j.get<long long>());
}

bool get_bool(const json& j, const std::string& path) {
  if (!j.is_boolean()) throw InputError(fmt::format("{}: expected true or false, got {}", path, j.dump()));
  return j.get<bool>();
}

std::string get_string(const json& j, const std::string& path) {
  if (!j.is_string()) throw InputError(fmt::format("{}: expected a string, got {}", path, j.dump()));
  return j.get<std::string>();
}


PasaOptions pasa_from_json(const json& j, const std::string& path) {
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an object, got {}", path, j.dump()));
  PasaOptions o;
  for (const auto& [key, val] : j.items()) {
    const std::string p = path + "/" + key;
    if (key == "beta") {
      if (!val.is_number() || !(val.get<double>() >= 0 && val.get<double>() < 1))
        throw InputError(fmt::format("{}: expected a number in [0, 1), got {}", p, val.dump()));
      o.beta = val.get<double>();
    } else if (key == "alpha_in_M") {
      o.alpha_in_M = get_bool(val, p);
    } else if (key == "m0") {
      const std::string s = get_string(val, p);
      if (s != "zero" && s != "-inf") throw InputError(fmt::format("{}: expected \"zero\" or \"-inf\", got \"{}\"", p, s));
      o.m0_zero = s == "zero";
    } else if (key == "bf16_to_fp16") {
      o.bf16_to_fp16 = get_bool(val, p);
    } else if (key == "form") {
      o.form = get_string(val, p);
      if (o.form != "fa2" && o.form != "printed")
        throw InputError(fmt::format("{}: expected \"fa2\" or \"printed\", got \"{}\"", p, o.form));
    } else {
      throw InputError(fmt::format("{}: unknown key; known: beta, alpha_in_M, m0, bf16_to_fp16, form", p));
    }
  }
  return o;
}

}  // namespace

AlgorithmSpec algorithm_from_json(const json& j, const std::string& path) {
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an algorithm object, got {}", path, j.dump()));
  AlgorithmSpec s;
  for (const auto& [key, val] : j.items()) {
    const std::string p = path + "/" + key;
    if (key == "name") {
      s.name = get_string(val, p);
      check_algorithm_name(s.name, p + ": ");
    } else if (key == "alloc") {
      s.alloc = allocation_from_json(val, p);
    } else if (key == "s1") {
      s.s1 = get_block(val, p);
    } else if (key == "s2") {
      s.s2 = get_block(val, p);
    } else if (key == "seed") {
      if (!val.is_number_unsigned()) throw InputError(fmt::format("{}: expected an unsigned integer, got {}", p, val.dump()));
      s.seed = val.get<std::uint64_t>();
    } else if (key == "pasa") {
      s.pasa = pasa_from_json(val, p);
    } else {
      throw InputError(fmt::format("{}: unknown key; known: name, alloc, s1, s2, seed, pasa", p));
    }
  }
  return s;
}

json to_json(const AlgorithmSpec& s) {
  json j = {{"name", s.name}, {"alloc", to_json(s.alloc)}, {"s1", s.s1}, {"s2", s.s2}, {"seed", s.seed}};
  if (s.name == "pasa")
    j["pasa"] = {{"beta", s.pasa.beta},
                 {"alpha_in_M", s.pasa.alpha_in_M},
                 {"m0", s.pasa.m0_zero ? "zero" : "-inf"},
                 {"bf16_to_fp16", s.pasa.bf16_to_fp16},
                 {"form", s.pasa.form}};
  return j;
}

}  // namespace pasa
