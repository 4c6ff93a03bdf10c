#include "pasa/io/json_check.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"

namespace pasa {

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const nlohmann::json* member(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

[[noreturn]] void bad(const std::string& place, const nlohmann::json& v, const std::string& expected) {
  throw InputError(fmt::format("{}: expected {}, got {}", json_where(place), expected, json_type_text(v)));
}

}  // namespace

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) throw InputError(fmt::format("{}: cannot open JSON file", path.string()));
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
}

std::string closest_key(std::string_view key, const std::vector<std::string>& allowed) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, key.size() / 3) + 1;  // at most ~a third of the key edited
  for (const auto& a : allowed) {
    const std::size_t d = edit_distance(key, a);
    if (d < best_d) best_d = d, best = a;
  }
  return best;
}

std::string json_where(const std::string& path) {
  return path.empty() || path.back() == ':' ? path + "/" : path;
}

void require_object(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) bad(path, j, "an object");
}

void check_keys(const nlohmann::json& j, const std::vector<std::string>& allowed, const std::string& path) {
  require_object(j, path);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    const std::string near = closest_key(it.key(), allowed);
    throw InputError(fmt::format("{}/{}: unknown key '{}'{}; allowed: {}", path, it.key(), it.key(),
                                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join(allowed)));
  }
}

std::string json_type_text(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer " + v.dump();
  if (v.is_number()) return "number " + v.dump();
  if (v.is_object() || v.is_array() || v.is_null()) return v.type_name();
  return std::string(v.type_name()) + " " + v.dump();
}

void json_fail(const std::string& path, const std::string& what) {
  throw InputError(fmt::format("{}: {}", json_where(path), what));
}

std::string as_string(const nlohmann::json& v, const std::string& place) {
  if (!v.is_string()) bad(place, v, "a string");
  return v.get<std::string>();
}

bool as_bool(const nlohmann::json& v, const std::string& place) {
  if (!v.is_boolean()) bad(place, v, "true or false");
  return v.get<bool>();
}

double as_number(const nlohmann::json& v, const std::string& place) {
  if (!v.is_number()) bad(place, v, "a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) bad(place, v, "a finite number");
  return x;
}

std::int64_t as_integer(const nlohmann::json& v, const std::string& place) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9e15) return static_cast<std::int64_t>(x);
  }
  bad(place, v, "an integer");
}

std::size_t as_size(const nlohmann::json& v, const std::string& place, std::size_t min) {
  // Signed or unsigned in the JSON value (a written 4 is unsigned, a to_json'd int signed).
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0) || v.get<std::size_t>() < min)
    bad(place, v, min == 0 ? "a non-negative integer" : fmt::format("an integer >= {}", min));
  return v.get<std::size_t>();
}

std::uint64_t as_u64(const nlohmann::json& v, const std::string& place) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
    bad(place, v, "a non-negative integer");
  return v.get<std::uint64_t>();
}

void read_number(const nlohmann::json& j, const char* key, const std::string& path, double& out) {
  if (const auto* v = member(j, key)) out = as_number(*v, path + "/" + key);
}

void read_size(const nlohmann::json& j, const char* key, const std::string& path, std::size_t& out, std::size_t min) {
  if (const auto* v = member(j, key)) out = as_size(*v, path + "/" + key, min);
}

void read_u64(const nlohmann::json& j, const char* key, const std::string& path, std::uint64_t& out) {
  if (const auto* v = member(j, key)) out = as_u64(*v, path + "/" + key);
}

void read_bool(const nlohmann::json& j, const char* key, const std::string& path, bool& out) {
  if (const auto* v = member(j, key)) out = as_bool(*v, path + "/" + key);
}

void read_string(const nlohmann::json& j, const char* key, const std::string& path, std::string& out) {
  if (const auto* v = member(j, key)) out = as_string(*v, path + "/" + key);
}

}  // namespace pasa
