#include "pasa/io/json_check.hpp"
#include "pasa/io/input_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <set>

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

namespace {

// nlohmann's DOM builder behind a SAX filter that sees every key and nesting level, so duplicate keys and
// excessive depth are refused while parsing (the DOM alone keeps the last duplicate and says nothing).
class CheckedSax {
 public:
  using json = nlohmann::json;
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit CheckedSax(json& out) : dom_(out, false) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) { return dom_.number_float(v, s); }
  bool string(string_t& v) { return dom_.string(v); }
  bool binary(binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (!enter()) return false;
    keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(string_t& k) {
    if (!keys_.back().insert(k).second) {
      error_ = fmt::format("{}/{}: key \"{}\" appears twice in one object", pointer(path_.size() - 1), k, k);
      return false;
    }
    path_.back() = k;
    return dom_.key(k);
  }
  bool end_object() {
    keys_.pop_back();
    path_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (!enter()) return false;
    path_.back() = "*";  // (array elements are not numbered: "/*" stands for any of them)
    keys_.emplace_back();
    return dom_.start_array(n);
  }
  bool end_array() {
    keys_.pop_back();
    path_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
    error_ = e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (path_.size() >= kMaxJsonDepth) {
      error_ = fmt::format("{}: nested more than {} levels deep", pointer(path_.size()), kMaxJsonDepth);
      return false;
    }
    path_.emplace_back();
    return true;
  }
  // The JSON pointer of the keys of the first n open levels.
  std::string pointer(std::size_t n) const {
    std::string p;
    for (std::size_t i = 0; i < n && i < 8; ++i) p += "/" + path_[i];
    return n > 8 ? p + "/..." : p;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::set<std::string>> keys_;
  std::vector<std::string> path_;  // the key being read at each open level ("" inside arrays)
  std::string error_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& where) {
  nlohmann::json out;
  CheckedSax sax(out);
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                                            /*strict=*/true, /*ignore_comments=*/false);
  if (!ok || !sax.error().empty())
    throw InputError(fmt::format("{}: invalid JSON: {}", where, sax.error().empty() ? "parse error" : sax.error()));
  return out;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream f = open_input_file(path, kMaxJsonFileBytes);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw InputError(fmt::format("{}: read error", path.string()));
  return parse_json_text(text, path.string());
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
  // nlohmann dumps a non-finite double as "null"; such values reach here from Python (pasa.generate(x0=inf)).
  if (v.is_number_float() && !std::isfinite(v.get<double>()))
    return std::string("number ") + (std::isnan(v.get<double>()) ? "nan" : v.get<double>() > 0 ? "inf" : "-inf");
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
  // (an unsigned value above 2^63 - 1 would convert to a negative one, and a range error would then show
  // that number instead of the one written)
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    bad(place, v, "an integer below 2^63");
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
