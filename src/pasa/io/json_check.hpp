// The one JSON reader: strict reading of JSON configuration objects, used by every *_json.cpp and by the
// sweep config. Unknown keys and wrongly typed values are InputErrors that name the place as a JSON
// pointer, prefixed with the file when known ("cfg.json:/q/x0"), and, for a misspelt key, suggest the
// closest allowed one. A `path` argument is the pointer of the object being read ("" or "cfg.json:" for a
// document's root); a `place` argument is the pointer of the value itself.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pasa/core/error.hpp"

namespace pasa {

// Parses a JSON file; InputError naming the file (and the parser's position) when unreadable or invalid.
nlohmann::json read_json_file(const std::filesystem::path&);
// Parses JSON text (`where` names it in errors: a file name, "stdin"). Besides syntax, refuses what a
// lenient parser would silently accept or what could exhaust the stack of the recursive readers: a key
// given twice in one object (the later value would win unseen), nesting deeper than kMaxJsonDepth, and
// numbers beyond double's range (1e999). Every reader of user JSON goes through it (read_json_file does).
nlohmann::json parse_json_text(std::string_view text, const std::string& where);
inline constexpr std::size_t kMaxJsonDepth = 256;  // pasa's own schemas nest at most ~6 levels

// Throws unless j is an object whose keys are all in `allowed`:
//   "<path>/x00: unknown key 'x00' (did you mean 'x0'?); allowed: x0, am, ..."
void check_keys(const nlohmann::json& j, const std::vector<std::string>& allowed, const std::string& path);
// The printable place of `path`: "/" for a document's root ("cfg.json:" prints as "cfg.json:/").
std::string json_where(const std::string& path);
// "<json_where(path)>: <what>" as an InputError.
[[noreturn]] void json_fail(const std::string& path, const std::string& what);
void require_object(const nlohmann::json& j, const std::string& path);

// The allowed key closest in edit distance to `key`, or "" when none is reasonably close.
std::string closest_key(std::string_view key, const std::vector<std::string>& allowed);
// A value as an error message shows it: "string \"7\"", "integer 3", "number 1.5", "boolean true", "object".
std::string json_type_text(const nlohmann::json& v);

// Typed views of one value v at `place`; errors read "<place>: expected <what>, got <json_type_text(v)>".
std::string as_string(const nlohmann::json& v, const std::string& place);
bool as_bool(const nlohmann::json& v, const std::string& place);
double as_number(const nlohmann::json& v, const std::string& place);  // finite
std::int64_t as_integer(const nlohmann::json& v, const std::string& place);  // an integral number (3 or 3.0)
std::size_t as_size(const nlohmann::json& v, const std::string& place, std::size_t min = 0);  // integer >= min
std::uint64_t as_u64(const nlohmann::json& v, const std::string& place);

// Typed reads of j[key] (j an object) through the views above, at place "<path>/<key>"; absent keys leave
// `out` unchanged.
void read_number(const nlohmann::json& j, const char* key, const std::string& path, double& out);
void read_size(const nlohmann::json& j, const char* key, const std::string& path, std::size_t& out,
               std::size_t min = 0);
void read_u64(const nlohmann::json& j, const char* key, const std::string& path, std::uint64_t& out);
void read_bool(const nlohmann::json& j, const char* key, const std::string& path, bool& out);
void read_string(const nlohmann::json& j, const char* key, const std::string& path, std::string& out);

// Runs a by-name lookup (format_by_name, stage_by_name, ...), whose InputError cannot know where the name
// was written, and puts "<place>: " in front of its message.
template <class Lookup>
auto at_place(const std::string& place, Lookup&& lookup) -> decltype(lookup()) {
  try {
    return lookup();
  } catch (const InputError& e) {
    throw InputError(json_where(place) + ": " + e.what());
  }
}

// v, a name written at `place`, looked up by `by_name` (format_by_name, ...): a non-string or an unknown
// name is an InputError naming the place.
template <class ByName>
auto as_named(const nlohmann::json& v, const std::string& place, ByName&& by_name) {
  const std::string name = as_string(v, place);
  return at_place(place, [&] { return by_name(name); });
}

}  // namespace pasa
