#include "pasa/io/json_check.hpp"

#include <algorithm>
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

[[noreturn]] void bad(const std::string& path, const char* key, const nlohmann::json& v, const char* expected) {
  throw InputError(fmt::format("{}/{}: expected {}, got {}", path, key, expected, v.dump()));
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
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object, got {}", json_where(path), j.dump()));
}

void check_keys(const nlohmann::json& j, const std::vector<std::string>& allowed, const std::string& path) {
  require_object(j, path);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    const std::string near = closest_key(it.key(), allowed);
    throw InputError(fmt::format("{}: unknown key '{}'{}; allowed: {}", json_where(path), it.key(),
                                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join(allowed)));
  }
}

void read_number(const nlohmann::json& j, const char* key, const std::string& path, double& out) {
  if (const auto* v = member(j, key)) {
    if (!v->is_number()) bad(path, key, *v, "a number");
    out = v->get<double>();
  }
}

void read_size(const nlohmann::json& j, const char* key, const std::string& path, std::size_t& out) {
  if (const auto* v = member(j, key)) {
    if (!v->is_number_unsigned()) bad(path, key, *v, "a non-negative integer");
    out = v->get<std::size_t>();
  }
}

void read_u64(const nlohmann::json& j, const char* key, const std::string& path, std::uint64_t& out) {
  if (const auto* v = member(j, key)) {
    if (!v->is_number_unsigned()) bad(path, key, *v, "a non-negative integer");
    out = v->get<std::uint64_t>();
  }
}

void read_bool(const nlohmann::json& j, const char* key, const std::string& path, bool& out) {
  if (const auto* v = member(j, key)) {
    if (!v->is_boolean()) bad(path, key, *v, "true or false");
    out = v->get<bool>();
  }
}

void read_string(const nlohmann::json& j, const char* key, const std::string& path, std::string& out) {
  if (const auto* v = member(j, key)) {
    if (!v->is_string()) bad(path, key, *v, "a string");
    out = v->get<std::string>();
  }
}

}  // namespace pasa
